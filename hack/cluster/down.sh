#!/usr/bin/env bash
# down.sh stops the one-node test cluster and undoes every host change that
# up.sh (or images.sh) recorded in the undo journal: processes, pods and
# their containerd shims, mounts, the CNI bridge, the kubelet's and CNI's
# iptables chains, cgroups, sysctls and paths outside .infra. It works from
# the journal alone, so it also cleans up after a crashed or killed run, and
# running it twice is harmless. The registry's storage (.infra/registry)
# and the logs (.infra/cluster-logs) are kept.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# The demo's simulated nodes (hack/demo, make demo) first, while the API
# server still answers: its process deletes their Nodes, stops their
# daemons and removes their roots when asked to stop.
# The pid file holds the pid and its start time: a pid reused by another
# process since is left alone.
if [[ -f $state/demo/demo.pid ]]; then
	read -r demo_pid demo_start <"$state/demo/demo.pid"
	if [[ $demo_pid =~ ^[0-9]+$ && -n ${demo_start:-} ]] && alive "$demo_pid" "$demo_start" && kill -TERM "$demo_pid" 2>/dev/null; then
		log "stopping the demo's simulated nodes (pid $demo_pid)"
		for _ in $(seq 600); do
			alive "$demo_pid" "$demo_start" || break
			sleep 0.2
		done
		alive "$demo_pid" "$demo_start" && kill -KILL "$demo_pid" 2>/dev/null
	fi
fi

if [[ ! -f $journal ]]; then
	if [[ -d $state ]]; then
		umount_under "$state" 2>/dev/null || true
		unimmutable_deployments "$state"
	fi
	rm -rf "$state"
	log "nothing to undo"
	exit 0
fi

procs=() sysctls=() absent=() links=() cgroups=() iptables_files=()
while read -r kind a b c; do
	case $kind in
	proc) procs+=("$a $b $c") ;;
	sysctl) sysctls+=("$a $b") ;;
	absent) absent+=("$a") ;;
	nolink) links+=("$a") ;;
	nocgroup) cgroups+=("$a") ;;
	iptables) iptables_files+=("$a") ;;
	esac
done <"$journal"

stop_named() { # NAME...
	local p name
	for name in "$@"; do
		for p in "${procs[@]}"; do
			# shellcheck disable=SC2086
			set -- $p
			[[ $1 == "$name" ]] && stop_pid "$2" "$3" "$1"
		done
	done
}

# cgroup_dirs NAME: the directory of cgroup NAME in every mounted hierarchy.
cgroup_dirs() {
	local mp
	awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts | while read -r mp; do
		[[ -d $mp/$1 ]] && printf '%s\n' "$mp/$1"
	done
}

# kill_cgroup_procs NAME: SIGKILL every process in cgroup NAME and below.
# These are the pods' processes: the kubelet put them there.
kill_cgroup_procs() {
	local d pids
	for d in $(cgroup_dirs "$1"); do
		pids=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		[[ -n $pids ]] && kill -KILL $pids 2>/dev/null
	done
	return 0
}

# shims: containerd-shim processes serving our containerd (matched on the
# exact socket path in their command line, so nobody else's are touched).
shims() {
	local p cmd
	for p in /proc/[0-9]*; do
		# 2>/dev/null first: a process gone since the glob fails the input
		# redirection itself, which would print before a later 2>/dev/null.
		cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
		[[ $cmd == *containerd-shim* && $cmd == *" -address $CONTAINERD_SOCK "* ]] && printf '%s\n' "${p#/proc/}"
	done
	return 0
}

# 1. Processes: the kubelet first so it restarts nothing, then the pods,
# their shims, and the rest in reverse start order.
stop_named kubelet
for cg in "${cgroups[@]}"; do kill_cgroup_procs "$cg"; done
for _ in 1 2 3; do
	pids=$(shims)
	[[ -z $pids ]] && break
	log "killing containerd shims: $(echo $pids)"
	kill -KILL $pids 2>/dev/null
	sleep 0.2
done
for ((i = ${#procs[@]} - 1; i >= 0; i--)); do
	# shellcheck disable=SC2086
	set -- ${procs[i]}
	stop_pid "$2" "$3" "$1"
done
# Pods killed above may have been mid-start; one more sweep.
for cg in "${cgroups[@]}"; do kill_cgroup_procs "$cg"; done

# 2. Mounts: the kubelet's bind mount of its root dir, pod volumes, container
# rootfs and sandbox shm mounts, network namespaces - all under $state.
umount_under "$state"

# 3. Network: the CNI bridge and any veth left on it.
for l in "${links[@]}"; do
	if ip link show "$l" >/dev/null 2>&1; then
		for v in $(ip -o link show master "$l" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
			ip link del "$v" 2>/dev/null
		done
		log "deleting link $l"
		ip link del "$l" || log "warning: could not delete link $l"
	fi
done

# 4. iptables: KUBE-* and CNI-* chains that were not there before, and every
# rule that jumps to them.
for f in "${iptables_files[@]}"; do
	for tool in "${IPTABLES_TOOLS[@]}"; do
		command -v "$tool" >/dev/null || continue
		for t in "${IPTABLES_TABLES[@]}"; do
			new=()
			while read -r ch; do
				grep -qxF "$tool $t $ch" "$f" 2>/dev/null || new+=("$ch")
			done < <("$tool" -w -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-)/ {print $2}')
			((${#new[@]})) || continue
			log "removing $tool $t chains: ${new[*]}"
			pattern=$(printf '%s|' "${new[@]}")
			pattern=" -[jg] (${pattern%|})( |\$)"
			"$tool" -w -t "$t" -S 2>/dev/null | grep '^-A ' | grep -E -- "$pattern" | while read -r rule; do
				eval "\"$tool\" -w -t \"$t\" -D ${rule#-A }" || log "warning: could not delete: $tool -t $t $rule"
			done
			for ch in "${new[@]}"; do "$tool" -w -t "$t" -F "$ch"; done
			for ch in "${new[@]}"; do "$tool" -w -t "$t" -X "$ch" || log "warning: could not delete chain $tool $t $ch"; done
		done
	done
done

# 5. cgroups, deepest first; retried while the last processes exit.
for cg in "${cgroups[@]}"; do
	for d in $(cgroup_dirs "$cg"); do
		for _ in $(seq 50); do
			find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
			[[ -d $d ]] || break
			kill_cgroup_procs "$cg"
			sleep 0.1
		done
		[[ -d $d ]] && log "warning: could not remove cgroup $d"
	done
done

# 6. sysctls back to their recorded values.
for s in "${sysctls[@]}"; do
	# shellcheck disable=SC2086
	set -- $s
	cur=$(sysctl -n "$1" 2>/dev/null) || continue
	if [[ $cur != "$2" ]]; then
		log "restoring sysctl $1 = $2 (was $cur)"
		sysctl -qw "$1=$2" || log "warning: could not restore $1"
	fi
done

# 7. Paths outside .infra that did not exist before (in journal order, which
# lists children before parents).
for p in "${absent[@]}"; do
	if [[ -e $p || -L $p ]]; then
		umount_under "$p"
		log "removing $p"
		rm -rf "$p"
	fi
done

# 8. The run's own state; the journal goes last. Simulated nodes' roots
# (test/simnode) that a killed test left behind hold immutable ostree
# deployments.
umount_under "$state"
unimmutable_deployments "$state"
find "$state" -mindepth 1 -maxdepth 1 ! -name journal -exec rm -rf {} + 2>/dev/null
if [[ -f $logs/host.before ]]; then
	"$(dirname "$0")/hostcheck.sh" compare "$logs/host.before" || true
fi
rm -rf "$state"
log "cluster is down"
