package containerfile

import (
	"archive/tar"
	"maps"

	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/rollout/bootcheck"
)

// AutoUpdateTimer is the unit of Fedora and CentOS bootc bases that
// upgrades the node by tag and reboots it without a drain (BOOTC.md): a
// managed node must never run it, so every image masks it.
const AutoUpdateTimer = "/etc/systemd/system/bootc-fetch-apply-updates.timer"

// fixedEntries are what every image Strata builds carries besides the
// configuration: the auto-update timer masked (a link to /dev/null, as
// `systemctl mask` makes) and the boot check (package bootcheck), enabled
// by its wants link under /usr as a preset would, so that no RUN step is
// needed. They replace what a configuration puts at the same paths: a
// node whose image could unmask the timer or drop the check would lose
// its drain or its rollback. Like the configuration's, their parent
// directories are the base's (or made as a build makes them).
func fixedEntries(entries map[string]*nodeconfig.Entry) map[string]*nodeconfig.Entry {
	out := maps.Clone(entries)
	if out == nil {
		out = map[string]*nodeconfig.Entry{}
	}
	for _, e := range []*nodeconfig.Entry{
		{Path: AutoUpdateTimer, Type: tar.TypeSymlink, Mode: 0o777, Target: "/dev/null"},
		{Path: bootcheck.ScriptPath, Type: tar.TypeReg, Mode: 0o755, Data: bootcheck.Script},
		{Path: bootcheck.UnitPath, Type: tar.TypeReg, Mode: 0o644, Data: bootcheck.Unit},
		{Path: bootcheck.WantsPath, Type: tar.TypeSymlink, Mode: 0o777, Target: bootcheck.WantsTarget},
	} {
		out[e.Path] = e
	}
	return out
}
