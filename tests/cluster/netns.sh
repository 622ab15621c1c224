#!/bin/sh
# netns.sh - two "hosts" on one machine for the two-host tests (tests/e2e_netns.c):
# network namespaces PREFIX-a and PREFIX-b joined by a veth pair, each with its own
# address on a /24 of its own and loopback up; nothing outside the two namespaces is
# touched (no route, address, setting or host name of the machine's own). Needs root,
# `ip` and `unshare`. Inside the namespaces TCP gives up on an unanswered connection
# after about 13 s (net.ipv4.tcp_retries2 = 5, a per-namespace setting; the kernel's
# default, 15, is about 15 minutes): what bounds mpirun's end once a host is cut off.
#   netns.sh up PREFIX NET      create them; NET is the /24's first three octets,
#                               e.g. 10.231.17: PREFIX-a is NET.1, PREFIX-b is NET.2
#   netns.sh down PREFIX        delete both namespaces (the veth pair goes with them);
#                               quiet and successful when they are already gone
#   netns.sh link PREFIX up|down  set PREFIX-b's end of the link up or down
#   netns.sh rsh HOST CMD...    Open MPI's rsh agent: run CMD in namespace HOST with a
#                               host name of its own (a new UTS namespace), as ssh would
#                               on another machine
#   netns.sh on HOST CMD...     the same for a command given as separate words
set -eu
cmd=$1
shift
case $cmd in
up)
    p=$1 net=$2
    ip netns add "$p-a"
    ip netns add "$p-b"
    ip link add "$p-va" netns "$p-a" type veth peer name "$p-vb" netns "$p-b"
    for h in a b; do
        n=1
        [ $h = b ] && n=2
        ip -n "$p-$h" link set lo up
        ip -n "$p-$h" addr add "$net.$n/24" dev "$p-v$h"
        ip -n "$p-$h" link set "$p-v$h" up
        ip netns exec "$p-$h" sh -c 'echo 5 >/proc/sys/net/ipv4/tcp_retries2'
    done
    ;;
down)
    p=$1
    for h in a b; do
        # processes left in a namespace keep it alive as a mount only; kill them first
        for pid in $(ip netns pids "$p-$h" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$p-$h" 2>/dev/null || true
    done
    ;;
link)
    p=$1 state=$2
    ip -n "$p-b" link set "$p-vb" "$state"
    ;;
rsh)
    host=$1
    shift
    exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
    ;;
on)
    host=$1
    shift
    exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
    ;;
*)
    echo "netns.sh: unknown command '$cmd' (up, down, link, rsh, on)" >&2
    exit 2
    ;;
esac
