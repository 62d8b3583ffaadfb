package bootcsim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	ign "github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/vincent-petithory/dataurl"
)

// ApplyIgnition writes an Ignition config into the installed node as
// Ignition does at first boot, before anything of the node runs: files,
// directories and links into the booted deployment's /etc and the shared
// /var (what Ignition writes in /etc is a local change, which the /etc
// merge carries into every later deployment), systemd units into
// /etc/systemd/system, enabled through their [Install] section, and
// users' SSH keys. The config must be complete (remote sources already
// fetched and merged, see test/simnode FetchIgnition); what the simulator
// cannot do (disks, filesystems, users to create) is refused.
func (s *Sim) ApplyIgnition(raw []byte) error {
	cfg, rpt, err := v34.Parse(raw)
	if err != nil {
		return fmt.Errorf("ignition: %w: %s", err, rpt.String())
	}
	if len(cfg.Storage.Disks)+len(cfg.Storage.Filesystems)+len(cfg.Storage.Raid)+len(cfg.Storage.Luks)+len(cfg.Passwd.Groups) > 0 {
		return fmt.Errorf("ignition: the simulator writes files, directories, links, units and SSH keys only")
	}
	for _, d := range cfg.Storage.Directories {
		if err := os.MkdirAll(s.path(d.Path), mode(d.Mode, 0o755)); err != nil {
			return err
		}
	}
	for _, f := range cfg.Storage.Files {
		if err := s.ignitionFile(f); err != nil {
			return fmt.Errorf("ignition: file %s: %w", f.Path, err)
		}
	}
	for _, l := range cfg.Storage.Links {
		p := s.path(l.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if l.Overwrite != nil && *l.Overwrite {
			_ = os.Remove(p)
		}
		if l.Hard != nil && *l.Hard {
			err = os.Link(s.path(*l.Target), p)
		} else {
			err = os.Symlink(*l.Target, p)
		}
		if err != nil {
			return fmt.Errorf("ignition: link %s: %w", l.Path, err)
		}
	}
	for _, u := range cfg.Systemd.Units {
		if err := s.ignitionUnit(u); err != nil {
			return fmt.Errorf("ignition: unit %s: %w", u.Name, err)
		}
	}
	for _, u := range cfg.Passwd.Users {
		if len(u.SSHAuthorizedKeys) == 0 {
			continue
		}
		home := "/var/home/" + u.Name
		if u.Name == "root" {
			home = "/var/roothome"
		}
		var keys []string
		for _, k := range u.SSHAuthorizedKeys {
			keys = append(keys, string(k))
		}
		p := s.path(home + "/.ssh/authorized_keys.d/ignition")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// path is the node path p in the simulated root.
func (s *Sim) path(p string) string { return filepath.Join(s.Root, filepath.Clean("/"+p)) }

func (s *Sim) ignitionFile(f ign.File) error {
	p := s.path(f.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	var content []byte
	if f.Contents.Source != nil {
		b, err := fetchData(*f.Contents.Source)
		if err != nil {
			return err
		}
		content = b
	} else if old, err := os.ReadFile(p); err == nil {
		content = old
	}
	for _, a := range f.Append {
		b, err := fetchData(*a.Source)
		if err != nil {
			return err
		}
		content = append(content, b...)
	}
	if _, err := os.Lstat(p); err == nil && f.Contents.Source != nil && (f.Overwrite == nil || !*f.Overwrite) {
		return fmt.Errorf("exists and overwrite is false")
	}
	if err := os.WriteFile(p, content, mode(f.Mode, 0o644)); err != nil {
		return err
	}
	return os.Chmod(p, mode(f.Mode, 0o644))
}

// fetchData decodes a data URL; the simulator has no network sources.
func fetchData(src string) ([]byte, error) {
	if !strings.HasPrefix(src, "data:") {
		return nil, fmt.Errorf("source %.40q: only data URLs reach the simulator", src)
	}
	u, err := dataurl.DecodeString(src)
	if err != nil {
		return nil, err
	}
	return u.Data, nil
}

// ignitionUnit writes the unit and enables it as `systemctl enable`
// does: a link in each target's .wants or .requires directory.
func (s *Sim) ignitionUnit(u ign.Unit) error {
	dir := s.path("/etc/systemd/system")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, u.Name)
	if u.Contents != nil {
		if err := os.WriteFile(p, []byte(*u.Contents), 0o644); err != nil {
			return err
		}
	}
	if u.Mask != nil && *u.Mask {
		_ = os.Remove(p)
		return os.Symlink("/dev/null", p)
	}
	if u.Enabled == nil || !*u.Enabled {
		return nil
	}
	content, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("enable: %w", err)
	}
	for _, l := range UnitSettings(string(content), "Install", "WantedBy", "RequiredBy") {
		suffix := ".wants"
		if l.Key == "RequiredBy" {
			suffix = ".requires"
		}
		for target := range strings.FieldsSeq(l.Value) {
			d := filepath.Join(dir, target+suffix)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.Symlink("/etc/systemd/system/"+u.Name, filepath.Join(d, u.Name)); err != nil && !os.IsExist(err) {
				return err
			}
		}
	}
	return nil
}

// UnitSetting is one Key=Value line of a unit file's section.
type UnitSetting struct{ Key, Value string }

// UnitSettings are the section's settings with one of keys, in order.
func UnitSettings(unit, section string, keys ...string) []UnitSetting {
	var out []UnitSetting
	in := false
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = line == "["+section+"]"
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !in || !ok {
			continue
		}
		for _, want := range keys {
			if strings.TrimSpace(k) == want {
				out = append(out, UnitSetting{Key: want, Value: strings.TrimSpace(v)})
			}
		}
	}
	return out
}

func mode(m *int, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}
