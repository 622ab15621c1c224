#!/bin/bash
# slurm.sh - a one-node Slurm cluster for tests/e2e_slurm.c: Debian's munged, slurmctld
# and slurmd, configured and run entirely under DIR (config, state, spool, logs, pid
# files, munge key and socket), in a network namespace of their own (loopback and a
# veth pair of its own, one end 10.231.18.1, so the daemons' ports meet nothing else on the
# machine) with a host name of their own.
# Needs root, `ip`, `unshare`, munged, slurmctld, slurmd.
#   slurm.sh start DIR NAME   configure and start; NAME names the namespace and the node
#                             (and the UTS namespace's host name); waits until the node
#                             is idle (60 s at most); fails with the daemons' logs
#   slurm.sh run DIR NAME CMD...  run a command (sbatch, squeue, scontrol ...) in the
#                             namespace with SLURM_CONF set
#   slurm.sh stop DIR NAME    stop the daemons by the PIDs in their pid files, then
#                             everything left in the namespace, and delete it; quiet and
#                             successful when nothing is running
set -euo pipefail
cmd=$1 dir=$2 name=$3
shift 3

in_ns() { # run a command in the namespace, with its host name and SLURM_CONF
    ip netns exec "$name" unshare --uts bash -c 'hostname "$0" && exec "$@"' "$name" \
        env SLURM_CONF="$dir/slurm.conf" "$@"
}

case $cmd in
start)
    mkdir -p "$dir"/{state,spool,munge}
    chmod 700 "$dir/munge"
    ip netns add "$name"
    ip -n "$name" link set lo up
    # an address besides loopback: getaddrinfo (AI_ADDRCONFIG) resolves no IPv4 name
    # where the only IPv4 address is loopback's
    ip -n "$name" link add "$name-x" type veth peer name "$name-y"
    ip -n "$name" addr add 10.231.18.1/24 dev "$name-x"
    ip -n "$name" link set "$name-x" up
    ip -n "$name" link set "$name-y" up
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
    cat >"$dir/slurm.conf" <<CONF
ClusterName=vtc
SlurmctldHost=$name(10.231.18.1)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock,cred_expire=10
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobRequeue=1
MinJobAge=600
SchedulerParameters=sched_interval=1
NodeName=$name NodeAddr=10.231.18.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$name Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
    # cred_expire: a killed job's credentials stay revoked, and a requeued job waits,
    # this many seconds (Slurm's default, 120, would make the requeue test wait 2 minutes).
    # `ip netns exec` mounts a sysfs of the namespace's own, without cgroup file systems:
    # slurmd loads the v1 plugin by name (the plugins above use no cgroup)
    echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"
    in_ns munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
        --seed-file="$dir/munge/munged.seed"
    in_ns slurmctld -i
    in_ns slurmd -N "$name"
    for _ in $(seq 120); do
        state=$(in_ns sinfo -h -n "$name" -o %t 2>/dev/null || true)
        [[ $state == idle ]] && exit 0
        sleep 0.5
    done
    echo "slurm.sh: the node did not become idle (state '${state:-none}')" >&2
    tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log "$dir"/munge/munged.log >&2 || true
    exit 1
    ;;
run)
    in_ns "$@"
    ;;
stop)
    for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        [[ -s $f ]] && kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 1
    for pid in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$name" 2>/dev/null || true
    ;;
*)
    echo "slurm.sh: unknown command '$cmd' (start, run, stop)" >&2
    exit 2
    ;;
esac
