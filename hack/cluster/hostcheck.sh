#!/usr/bin/env bash
# hostcheck.sh records what the test cluster may change on the host (paths
# outside .infra, mounts, links, iptables chains, sysctls, top-level
# cgroups) and compares it later, so a run can prove it left the host as it
# found it. up.sh takes the snapshot, down.sh compares against it.
#
# Usage: hostcheck.sh snapshot FILE | compare FILE
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

snapshot() {
	echo "# paths"
	find /run /var/lib /var/log /etc /opt -maxdepth 1 2>/dev/null | sort
	find /var/lib/containers /var/lib/kubelet /var/lib/cni -maxdepth 1 2>/dev/null | sort
	echo "# mounts"
	awk '{print $5}' /proc/self/mountinfo | sort
	echo "# links"
	ip -o link show | awk -F': ' '{print $2}' | sort
	echo "# iptables"
	for tool in "${IPTABLES_TOOLS[@]}"; do
		command -v "$tool" >/dev/null || continue
		for t in "${IPTABLES_TABLES[@]}"; do
			"$tool" -w -t "$t" -S 2>/dev/null | sed "s/^/$tool $t /"
		done
	done
	echo "# sysctls"
	for s in "${HOST_SYSCTLS[@]}"; do printf '%s = %s\n' "$s" "$(sysctl -n "$s" 2>/dev/null)"; done
	echo "# cgroups"
	find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d 2>/dev/null | sort
}

case ${1:-} in
snapshot) snapshot >"$2" ;;
compare)
	if diff -u "$2" <(snapshot) >"$2.diff"; then
		log "host check: same as before the cluster started"
	else
		log "host check: the host differs from before the cluster started (other users of this machine may explain some of it):"
		cat "$2.diff" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 snapshot FILE | compare FILE" >&2
	exit 2
	;;
esac
