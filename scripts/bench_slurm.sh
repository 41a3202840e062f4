#!/bin/bash
# bench_slurm.sh - the slurm executor against direct sbatch, on the one-node
# test cluster (scripts/server-slurm.sh, 64 CPUs declared on 2 cores).
#
# In each of BENCH_RUNS repetitions (default 3):
#   sbatch   200 direct `sbatch --parsable --wrap 'sleep 300'` calls, one
#            after the other: jobs per second until the last has its id.
#   mlfs     200 native specs (sleep 300, 4 CPUs each) copied into jobs/ of
#            a gateway with executor = slurm by one `cp`: jobs per second
#            from the start of the cp until every status.json (read from
#            state_dir, not through the mount) names a Slurm job id.
#   calls    Slurm client commands mlfs runs per poll interval (1 s) over
#            10 s, with 20 and with 200 jobs in flight, counted by a bin_dir
#            of wrappers that log each call before running the real tool.
# Every job is cancelled between steps, and each repetition starts a fresh
# cluster (slurmctld keeps finished jobs for MinJobAge, which slows it)
# whose controller state is on a tmpfs: on this one machine its disk writes
# would otherwise compete with the gateway's journal, which they do not
# where the controller has a machine of its own.  The gateway's state_dir is
# on the disk, each acceptance fdatasync'd.  Bars from the issue, each PASS or
# FAIL on the median of the repetitions:
#   mlfs jobs/s >= 0.8 of sbatch's
#   Slurm calls per interval: the same with 20 and with 200 jobs
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
#
# Usage (as root, from anywhere): [BENCH_RUNS=N] scripts/bench_slurm.sh
# It builds mlfs (scripts/build.sh plain), installs its packages
# (scripts/install-deps.sh) and removes every mount, process and file it
# made.
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
bench=bench_slurm

RUNS=${BENCH_RUNS:-3}
case $RUNS in
'' | *[!0-9]* | 0) echo "$bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (it mounts and starts Slurm)" >&2; exit 2; }
scripts/install-deps.sh
scripts/build.sh plain >/dev/null
MLFS=$PWD/build/plain/mlfs
TOP=$PWD

scratch=$(mktemp -d /var/tmp/mlfs-bench-slurm.XXXXXX)
shm=$(mktemp -d /dev/shm/mlfs-bench-slurm.XXXXXX)	# the controller's state (see server-slurm.sh)
chmod 755 "$scratch"
pids=""
cleanup() {
	bench_stop_all
	"$TOP/scripts/server-slurm.sh" stop "$scratch/slurm" 2>/dev/null || true
	rm -rf "$scratch" "$shm"
}
trap cleanup EXIT
is_mounted() { grep -q " $1 fuse.mlfs " /proc/self/mounts; }

port=$((20000 + RANDOM % 12000))
export SLURM_CONF=$scratch/slurm/slurm.conf
mkdir -p "$scratch/bin" "$scratch/specs" "$scratch/mnt-mlfs"
for tool in sbatch squeue scontrol scancel; do
	printf '#!/bin/sh\necho "$(date +%%s.%%N) %s" >>%s/calls.log\nexec %s "$@"\n' \
		"$tool" "$scratch" "$(command -v "$tool")" >"$scratch/bin/$tool"
	chmod 755 "$scratch/bin/$tool"
done
for i in $(seq 1 200); do
	printf '{"name": "b%03d", "workers": [{"command": "sleep 300"}]}\n' "$i" >"$scratch/specs/b$(printf %03d "$i").json"
done
cat >"$scratch/bench.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache
executor = slurm
[slurm]
poll_interval = 1
bin_dir = $scratch/bin
CONF
M=$scratch/mnt-mlfs

cancel_all() {
	scancel --full -u root 2>/dev/null || true
	for _ in $(seq 1 100); do
		[ -z "$(squeue -h -o %i 2>/dev/null)" ] && return 0
		sleep 0.2
	done
}
mount_mlfs() {
	rm -rf "$scratch/state" "$scratch/cache"
	"$MLFS" mount -f "$scratch/bench.conf" "$M" 2>>"$scratch/mount.log" &
	pids="$pids $!"
	for _ in $(seq 1 100); do is_mounted "$M" && return 0; sleep 0.05; done
	echo "$bench: the gateway did not mount" >&2
	exit 1
}
umount_mlfs() {
	fusermount3 -u "$M"
	for p in $pids; do stop_pid "$p" 50; done
}
# submitted N: how many status.json under state_dir name a Slurm job id.
submitted() {
	grep -l '"slurm_job_id"' "$scratch"/state/jobs/*/status.json 2>/dev/null | wc -l
}
now() { date +%s.%N; }

sb_rates="" ml_rates="" c20="" c200=""
for run in $(seq 1 "$RUNS"); do
	# a fresh cluster each time: slurmctld keeps every job of the run before for MinJobAge
	SLURM_TEST_CPUS=64 SLURM_TEST_MEMORY=64000 SLURM_TEST_STATE_DIR=$shm \
		scripts/server-slurm.sh start "$scratch/slurm" "$port" >/dev/null
	t0=$(now)
	for _ in $(seq 1 200); do sbatch --parsable -o /dev/null --wrap 'sleep 300' >/dev/null; done
	t1=$(now)
	sb=$(echo "200 / ($t1 - $t0)" | bc -l)
	cancel_all

	mount_mlfs
	t0=$(now)
	cp "$scratch"/specs/*.json "$M/jobs/"
	# the last one first (cheap to look at), then all of them
	until grep -qs '"slurm_job_id"' "$scratch/state/jobs/b200/status.json"; do sleep 0.01; done
	while [ "$(submitted)" -lt 200 ]; do sleep 0.01; done
	t1=$(now)
	ml=$(echo "200 / ($t1 - $t0)" | bc -l)
	# calls per interval with 200 in flight (running or pending)
	sleep 2
	: >"$scratch/calls.log"
	sleep 10
	n200=$(wc -l <"$scratch/calls.log")
	umount_mlfs
	cancel_all

	mount_mlfs
	cp "$scratch"/specs/b00[1-9].json "$scratch"/specs/b01[0-9].json "$scratch"/specs/b020.json "$M/jobs/"
	while [ "$(submitted)" -lt 20 ]; do sleep 0.05; done
	sleep 2
	: >"$scratch/calls.log"
	sleep 10
	n20=$(wc -l <"$scratch/calls.log")
	umount_mlfs
	cancel_all

	printf '%s: run %d: sbatch %.1f jobs/s, mlfs %.1f jobs/s (ratio %.2f); Slurm calls in 10 s: %d with 20 jobs, %d with 200\n' \
		"$bench" "$run" "$sb" "$ml" "$(echo "$ml / $sb" | bc -l)" "$n20" "$n200"
	sb_rates="$sb_rates $sb" ml_rates="$ml_rates $ml" c20="$c20 $n20" c200="$c200 $n200"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# shellcheck disable=SC2086
{
	msb=$(median $sb_rates) mml=$(median $ml_rates) m20=$(median $c20) m200=$(median $c200)
}
ratio=$(echo "$mml / $msb" | bc -l)
printf '%s: median of %d: sbatch %.1f jobs/s, mlfs %.1f jobs/s: ratio %.2f (bar >= 0.8: %s)\n' "$bench" \
	"$RUNS" "$msb" "$mml" "$ratio" "$(echo "$ratio >= 0.8" | bc -l | sed 's/1/PASS/;s/0/FAIL/')"
printf '%s: Slurm calls per 1 s interval: %.1f with 20 jobs, %.1f with 200 (bar: the same: %s)\n' "$bench" \
	"$(echo "$m20 / 10" | bc -l)" "$(echo "$m200 / 10" | bc -l)" \
	"$([ "$(echo "$m200 <= $m20 + 1" | bc -l)" = 1 ] && echo PASS || echo FAIL)"
