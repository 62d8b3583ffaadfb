#!/bin/sh
# strata-boot-check: rolls the node back on its own when the image Strata
# staged boots but its daemon never reports the node healthy (an image
# that breaks the kubelet, the network or the daemon itself). It needs
# only bootc, systemctl and what every bootc base has (sh, coreutils, sed,
# grep): nothing else of the new image may be trusted to work.
#
# Files in $STRATA_BOOT_CHECK_DIR (default /var/lib/strata/boot-check, on
# /var: shared by every deployment, never rolled back):
#   expect     written by strata-daemon before the reboot:
#              "digest=sha256:..." and "timeout=<seconds>"
#   verifying  strata-daemon verifies the digest it holds itself
#   healthy    strata-daemon found the digest it holds healthy
#   boots      "<digest> <n>": the boot counter, so that a rollback that
#              does not take is tried once, never in a loop
#   verdict    why this check rolled the node back, for the daemon's reason
set -u
dir=${STRATA_BOOT_CHECK_DIR:-/var/lib/strata/boot-check}
poll=${STRATA_BOOT_CHECK_POLL:-5}

log() { echo "strata-boot-check: $*" >&2; }
value() { sed -n "s/^$1=//p" "$dir/expect" | head -n 1; }
holds() { [ -f "$dir/$1" ] && [ "$(cat "$dir/$1")" = "$digest" ]; }

[ -f "$dir/expect" ] || exit 0
digest=$(value digest)
timeout=$(value timeout)
case $digest in sha256:*) ;; *) log "no digest in $dir/expect"; exit 0 ;; esac
case $timeout in '' | *[!0-9]*) timeout=600 ;; esac
holds healthy && exit 0

# Only a boot of the deployment Strata staged is checked: after a
# rollback, or on any other image, there is nothing to roll back from.
status=$(bootc status --format=json | tr -d ' \t\r\n') || { log "bootc status failed"; exit 1; }
booted=${status#*\"booted\":}
case $booted in
'{"image":{'*) booted=$(printf '%s' "$booted" | grep -o '"imageDigest":"sha256:[0-9a-f]*"' | head -n 1 | cut -d '"' -f 4) ;;
*) booted= ;;
esac
[ "$booted" = "$digest" ] || exit 0

n=0
if [ -f "$dir/boots" ] && [ "$(cut -d ' ' -f 1 "$dir/boots")" = "$digest" ]; then
	n=$(cut -d ' ' -f 2 "$dir/boots")
fi
n=$((n + 1))
echo "$digest $n" >"$dir/boots.tmp" && mv "$dir/boots.tmp" "$dir/boots" && sync
if [ "$n" -gt 1 ]; then
	log "$digest booted again after a rollback: not rolling back twice"
	exit 0
fi

# The daemon has the pool's health check timeout from its first sync; a
# daemon that verifies this boot owns the verdict and its rollback, and
# gets one more timeout before this check takes over.
waited=0
limit=$timeout
while [ "$waited" -lt "$limit" ]; do
	holds healthy && exit 0
	if holds verifying && [ "$limit" -eq "$timeout" ]; then
		limit=$((timeout * 2))
	fi
	sleep "$poll"
	waited=$((waited + poll))
done
holds healthy && exit 0
case $(bootc status --format=json | tr -d ' \t\r\n') in
*'"rollbackQueued":true'*) log "a rollback is queued already"; exit 0 ;;
esac

why="boot check: image $digest was not reported healthy by strata-daemon within ${timeout}s of its boot"
holds verifying || why="$why (the daemon never started verifying it)"
echo "$digest $why; rolled back by the node's boot check" >"$dir/verdict.tmp" && mv "$dir/verdict.tmp" "$dir/verdict" && sync
log "$why: bootc rollback and reboot"
bootc rollback || { log "bootc rollback failed"; exit 1; }
systemctl reboot
