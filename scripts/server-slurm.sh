#!/bin/bash
# server-slurm.sh - starts and stops a one-node Slurm cluster for the tests
# and benchmarks: munged, slurmctld and slurmd, on 127.0.0.1 only.
#
#   server-slurm.sh start DIR [PORT]   prints "CTLD_PID SLURMD_PID MUNGED_PID"
#   server-slurm.sh stop DIR
#   server-slurm.sh env DIR            prints "export SLURM_CONF=DIR/slurm.conf"
#
# Everything lives in DIR: slurm.conf and gres.conf, the controller's state
# and slurmd's spool (both wiped at start: every start is a fresh cluster),
# the logs, and munged's own socket, key copy and PID file (AuthInfo points
# Slurm at that socket, so a munged the system may run is left alone).
# slurmctld listens on 127.0.0.1:PORT (default 6817), slurmd on PORT+1.
# The node, "localhost", declares SLURM_TEST_CPUS CPUs (default 8, more
# than the machine has: config_overrides lets slurmd accept that, so tests
# get job slots on 2 cores), SLURM_TEST_MEMORY MB (default 8000) and two
# GPUs as gres "gpu:SLURM_TEST_GPU_TYPE:2" (default type "tesla") backed by
# fake character devices (DIR/dev/gpu0, gpu1 = /dev/null's numbers): a GPU
# gres without File= is dropped by slurmd.  MinJobAge is SLURM_TEST_MIN_JOB_AGE
# (default 300).  SLURM_TEST_STATE_DIR puts the controller's state and
# slurmd's spool there instead of DIR (the benchmark uses a tmpfs: on one
# machine the controller's disk writes would otherwise compete with the
# gateway's, which a real controller on its own machine does not do).
# Client commands need SLURM_CONF=DIR/slurm.conf.  Needs
# root.  See ../shared/notes/servers.md §5.
set -eu
. "$(dirname "$0")/server_lib.sh"

slurm_conf() {
	local dir=$1 port=$2 state=${SLURM_TEST_STATE_DIR:-$1}
	cat >"$dir/slurm.conf" <<CONF
ClusterName=mlfstest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$state/state
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$dir/slurmctld.pid.slurm
SlurmdPidFile=$dir/slurmd.pid.slurm
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=0,bf_interval=1
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
DefMemPerCPU=256
MinJobAge=${SLURM_TEST_MIN_JOB_AGE:-300}
KillWait=5
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${SLURM_TEST_CPUS:-8} RealMemory=${SLURM_TEST_MEMORY:-8000} TmpDisk=100000 Gres=gpu:${SLURM_TEST_GPU_TYPE:-tesla}:2 Feature=${SLURM_TEST_GPU_TYPE:-tesla} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
	cat >"$dir/gres.conf" <<CONF
AutoDetect=off
Name=gpu Type=${SLURM_TEST_GPU_TYPE:-tesla} File=$dir/dev/gpu[0-1]
CONF
}

# slurm_node_up DIR PID...: waits (20 s at most) until the node is idle.
slurm_node_up() {
	local dir=$1
	shift
	for _ in $(seq 1 200); do
		case $(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o %t 2>/dev/null) in
		idle*|mix*|alloc*) return 0 ;;
		esac
		for p in "$@"; do kill -0 "$p" 2>/dev/null || return 1; done
		sleep 0.1
	done
	return 1
}

slurm_start() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	slurm_stop "$dir"
	local state=${SLURM_TEST_STATE_DIR:-$dir}
	rm -rf "$state/state" "$state/spool" "$dir/munge"
	mkdir -p "$state"/{state,spool} "$dir"/{dev,munge}
	# Job output files are written by the job's user: every folder above must be passable.
	chmod o+x "$dir"
	for i in 0 1; do
		[ -c "$dir/dev/gpu$i" ] || mknod "$dir/dev/gpu$i" c 1 3
	done
	install -m 0400 /etc/munge/munge.key "$dir/munge/munge.key"
	slurm_conf "$dir" "$port"
	setsid munged -F --force --socket="$dir/munge/munge.socket" \
		--key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid.own" \
		--log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" \
		</dev/null >>"$dir/munged.out" 2>&1 &
	echo $! >"$dir/munged.pid"
	for _ in $(seq 1 100); do
		[ -S "$dir/munge/munge.socket" ] && break
		sleep 0.05
	done
	export SLURM_CONF=$dir/slurm.conf
	setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$dir/slurmctld.out" 2>&1 &
	echo $! >"$dir/slurmctld.pid"
	setsid slurmd -D -N localhost -f "$SLURM_CONF" </dev/null >>"$dir/slurmd.out" 2>&1 &
	echo $! >"$dir/slurmd.pid"
	if ! slurm_node_up "$dir" "$(cat "$dir/slurmctld.pid")" "$(cat "$dir/slurmd.pid")" \
		"$(cat "$dir/munged.pid")"; then
		echo "slurm did not come up in $dir:" >&2
		tail -n 5 "$dir/munged.out" "$dir/slurmctld.out" "$dir/slurmctld.log" "$dir/slurmd.out" "$dir/slurmd.log" 2>&1 | sed 's/^/  /' >&2
		slurm_stop "$dir"
		exit 1
	fi
	echo "$(cat "$dir/slurmctld.pid") $(cat "$dir/slurmd.pid") $(cat "$dir/munged.pid")"
}

# Jobs still running are killed with slurmd's own stepd processes? No:
# slurmstepd outlives slurmd, so the jobs are cancelled first.
slurm_stop() {
	local dir=$1
	if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
		SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full -u root >/dev/null 2>&1 || true
		SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --state=running >/dev/null 2>&1 || true
	fi
	server_stop_pidfile "$dir/slurmd.pid"
	server_stop_pidfile "$dir/slurmctld.pid"
	server_stop_pidfile "$dir/munged.pid"
}

case ${1:-} in
start) [ $# -ge 2 ] || { echo "usage: $0 start DIR [PORT]" >&2; exit 2; }
	slurm_start "$2" "${3:-6817}" ;;
stop) [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	slurm_stop "$2" ;;
env) [ $# -ge 2 ] || { echo "usage: $0 env DIR" >&2; exit 2; }
	echo "export SLURM_CONF=$(cd "$2" && pwd)/slurm.conf" ;;
*) echo "usage: $0 start DIR [PORT] | stop DIR | env DIR" >&2; exit 2 ;;
esac
