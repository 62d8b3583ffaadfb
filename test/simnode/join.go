package simnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ign "github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/strata-dev/strata/test/bootcsim"
)

// FetchIgnition does what Ignition does with a pointer config: it
// fetches the config its ignition.config.merge names, with the resource's
// httpHeaders, trusting only the CAs in ignition.security.tls. It returns
// the fetched config, or the HTTP status of a refusal as an error.
func FetchIgnition(ctx context.Context, pointer []byte) ([]byte, error) {
	var p ign.Config
	if err := json.Unmarshal(pointer, &p); err != nil {
		return nil, fmt.Errorf("pointer config: %w", err)
	}
	if len(p.Ignition.Config.Merge) != 1 || p.Ignition.Config.Merge[0].Source == nil {
		return nil, errors.New("pointer config: want one merge source")
	}
	pool := x509.NewCertPool()
	for _, ca := range p.Ignition.Security.TLS.CertificateAuthorities {
		u, err := dataurl.DecodeString(*ca.Source)
		if err != nil {
			return nil, fmt.Errorf("pointer config CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(u.Data) {
			return nil, errors.New("pointer config CA: no certificate")
		}
	}
	res := p.Ignition.Config.Merge[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *res.Source, nil)
	if err != nil {
		return nil, err
	}
	for _, h := range res.HTTPHeaders {
		if h.Value != nil {
			req.Header.Set(h.Name, *h.Value)
		}
	}
	// Ignition's own Accept header, which OpenShift's server reads.
	req.Header.Set("Accept", "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &HTTPError{Code: resp.StatusCode}
	}
	return body, nil
}

// HTTPError is a config server's refusal.
type HTTPError struct{ Code int }

func (e *HTTPError) Error() string { return fmt.Sprintf("config server answered %d", e.Code) }

// JoinResult is how a new node joined.
type JoinResult struct {
	// Name is the Node's name.
	Name string
	// Reboots is how many reboots its first boot took.
	Reboots int
	// Registered is when the Node was registered (its kubelet started).
	Registered time.Time
}

// JoinNode is a new node joining the cluster from scratch, as a machine
// booting an install image with a (fetched) Ignition config would: the
// harness installs image into a new node root, applies config as
// Ignition does before anything runs (bootcsim ApplyIgnition), then
// boots it: every enabled unit ordered before kubelet.service runs as
// systemd would run it (its ExecStart's `strata-daemon firstboot ...`,
// run with the harness's daemon binary and bootc-sim, in place of the
// podman run of the daemon image), and a reboot it asks for is performed
// and the units run again, until they let the kubelet start. Only then
// is the Node registered (Ready, with labels) and its daemon started,
// as on any node. A first boot that fails leaves the node unregistered.
func (c *Cluster) JoinNode(ctx context.Context, image string, config []byte, labels map[string]string) (JoinResult, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return JoinResult{}, errors.New("simnode: JoinNode after Stop")
	}
	name := fmt.Sprintf("%s-%d", c.prefix, len(c.order))
	nd := &node{name: name, root: filepath.Join(c.cfg.Dir, name)}
	nd.logs = &lineWriter{prefix: name + ": ", out: c.log}
	c.nodes[name] = nd
	c.order = append(c.order, name)
	c.mu.Unlock()

	res := JoinResult{Name: name}
	if err := os.MkdirAll(nd.root, 0o755); err != nil {
		return res, fmt.Errorf("simnode: %w", err)
	}
	if err := c.installImage(ctx, nd, image); err != nil {
		return res, err
	}
	sim, err := bootcsim.New(nd.root)
	if err != nil {
		return res, err
	}
	if err := sim.ApplyIgnition(config); err != nil {
		return res, fmt.Errorf("simnode: %s: %w", name, err)
	}
	c.logf(nd, "applied Ignition; first boot")
	for {
		rebooted, err := c.bootUnits(ctx, nd)
		if err != nil {
			return res, err
		}
		if !rebooted {
			break
		}
		res.Reboots++
		nd.reboots.Add(1)
		if _, err := c.Sim(ctx, name, "sim", "reboot"); err != nil {
			return res, err
		}
		c.logf(nd, "rebooted during the first boot")
		if res.Reboots > 3 {
			return res, fmt.Errorf("simnode: %s: the first boot rebooted %d times", name, res.Reboots)
		}
	}
	if err := c.register(ctx, nd, labels); err != nil {
		return res, err
	}
	res.Registered = time.Now()
	return res, c.run(nd)
}

// bootUnits runs the node's units that the kubelet requires, in name
// order, as one boot's systemd would. It returns true when one asked for
// a reboot (the harness then ends it, as the reboot would).
func (c *Cluster) bootUnits(ctx context.Context, nd *node) (bool, error) {
	dir := filepath.Join(nd.root, "etc/systemd/system/kubelet.service.requires")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		unit, err := os.ReadFile(filepath.Join(nd.root, "etc/systemd/system", e.Name()))
		if err != nil {
			return false, err
		}
		if !conditionsHold(nd.root, string(unit)) {
			c.logf(nd, "%s: condition not met, skipped", e.Name())
			continue
		}
		rebooted, err := c.runUnit(ctx, nd, e.Name(), string(unit))
		if err != nil || rebooted {
			return rebooted, err
		}
	}
	return false, nil
}

// conditionsHold evaluates ConditionPathExists= (with ! for absence).
func conditionsHold(root, unit string) bool {
	for _, s := range bootcsim.UnitSettings(unit, "Unit", "ConditionPathExists") {
		p, negate := strings.CutPrefix(s.Value, "!")
		_, err := os.Stat(filepath.Join(root, p))
		if (err == nil) == negate {
			return false
		}
	}
	return true
}

// runUnit runs the unit's `strata-daemon firstboot` with the node's
// simulated host (bootc-sim as bootc, its reboot request as the reboot)
// until it exits, or asks for a reboot (then it is killed, as a reboot
// kills it).
func (c *Cluster) runUnit(ctx context.Context, nd *node, name, unit string) (bool, error) {
	exec1 := bootcsim.UnitSettings(unit, "Service", "ExecStart")
	if len(exec1) != 1 {
		return false, fmt.Errorf("simnode: %s: %s has %d ExecStart lines", nd.name, name, len(exec1))
	}
	argv := strings.Fields(exec1[0].Value)
	i := 0
	for i < len(argv) && argv[i] != "firstboot" {
		i++
	}
	if i == len(argv) {
		return false, fmt.Errorf("simnode: %s: %s runs %q, not strata-daemon firstboot", nd.name, name, exec1[0].Value)
	}
	sim := c.cfg.BootcSim
	// The unit's own flags, then the simulated host's, which win.
	args := append(append([]string{}, argv[i:]...),
		"--host-root", nd.root,
		"--bootc-command", sim,
		"--reboot-command", sim+" sim request-reboot",
		"--health-check-command", sim+" sim health",
		"--boot-id-file", filepath.Join(nd.root, bootIDFile),
	)
	cmd := exec.Command(c.cfg.Daemon, args...)
	cmd.Env = c.env(nd)
	cmd.Dir = nd.root
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(nd.logs, &out)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// As a reboot does: the unit's whole process group dies.
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err := <-done; err != nil {
			c.logf(nd, "%s ended: %v", name, err)
		}
	}
	request := filepath.Join(nd.root, rebootRequestFile)
	deadline := time.After(c.cfg.Timeout)
	tick := time.NewTicker(c.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return false, fmt.Errorf("simnode: %s: %s failed: %w", nd.name, name, err)
			}
			c.logf(nd, "%s done", name)
			return false, nil
		case <-tick.C:
			if _, err := os.Stat(request); err == nil {
				kill()
				return true, nil
			}
		case <-deadline:
			kill()
			return false, fmt.Errorf("simnode: %s: %s did not finish within %v", nd.name, name, c.cfg.Timeout)
		case <-ctx.Done():
			kill()
			return false, ctx.Err()
		}
	}
}
