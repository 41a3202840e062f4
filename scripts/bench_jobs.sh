#!/bin/bash
# bench_jobs.sh - how fast jobs/ accepts specs, and how soon an accepted job
# runs on an idle node.
#
# A gateway is mounted with its state_dir on the machine's disk (so every
# acceptance pays a real fdatasync of the journal) and a [node] of 64 CPUs
# and one GPU.  One Python process then, in each of BENCH_RUNS repetitions
# (default 3):
#   accept   writes 1,000 trivial specs into jobs/, one after the other:
#            open, write, close, timing each close(2), which returns only
#            once the spec is checked and durable.  The specs ask for the
#            GPU, which a job submitted first holds, so they queue: this is
#            a controller accepting work, as Slurm's figure is (its jobs run
#            on other machines).  Reported: accepted specs per second over
#            the batch (wall clock), the p50 and p99 of close(2).  Then the
#            GPU is freed and all 1,000 run.
#   +run     the same with 1,000 CPU-only specs that start as they arrive,
#            so this node's 2 cores also fork, run and reap 1,000 workers
#            while they accept: the rate of a node that runs its own queue.
#   start    on the idle node, submits 50 specs one at a time, each after
#            the previous one ended, and reads from status.json the time from
#            acceptance to the worker's start (both stamped by the daemon).
#            Reported: p50 and p99.
# The finished jobs are removed (rm -r) between repetitions.  Bars from the
# issue, each PASS or FAIL on the median of the repetitions:
#   accepted specs per second      >= 500 (Slurm's published sustained rate)
#   p50 acceptance -> RUNNING      <  20 ms
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
#
# Usage (as root, from anywhere): [BENCH_RUNS=N] scripts/bench_jobs.sh
# It builds mlfs (scripts/build.sh plain) and removes every mount, process
# and file it made.
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
bench=bench_jobs

RUNS=${BENCH_RUNS:-3}
case $RUNS in
'' | *[!0-9]* | 0) echo "$bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (it mounts)" >&2; exit 2; }
scripts/build.sh plain
MLFS=$PWD/build/plain/mlfs

scratch=$(mktemp -d /var/tmp/mlfs-bench-jobs.XXXXXX)
pids=""
cleanup() {
	bench_stop_all
	rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/mnt-mlfs" "$scratch/data"
cat >"$scratch/bench.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache
[node]
gpus = 1
gpu_type = bench
cpus = 64
[datastore d]
type = local
root = $scratch/data
CONF
"$MLFS" mount -f "$scratch/bench.conf" "$scratch/mnt-mlfs" 2>"$scratch/mount.log" &
pids="$pids $!"
wait_mounted "$scratch/mnt-mlfs" "$!" "$scratch/mount.log"
J=$scratch/mnt-mlfs/jobs

# One repetition; prints "accept/s p50-close p99-close +run-accept/s +run-p50 +run-p99 p50-start p99-start".
run_once() {
	python3 - "$J" "$1" <<'PY'
import json, os, sys, time
jobs, rep = sys.argv[1], sys.argv[2]
cpu_spec = b'{"workers": [{"command": "true"}]}\n'
gpu_spec = b'{"resources": {"gpu_count": 1}, "workers": [{"command": "true"}]}\n'

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

def submit(name, spec=cpu_spec):
    fd = os.open(f"{jobs}/{name}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, spec)
    t = time.perf_counter()
    os.close(fd)
    return time.perf_counter() - t

def final(name):
    with open(f"{jobs}/{name}/state") as f:
        return f.read().strip() in ("SUCCEEDED", "FAILED", "CANCELLED")

def batch(prefix, spec):
    closes = []
    t0 = time.perf_counter()
    for i in range(1000):
        closes.append(submit(f"{prefix}{rep}_{i}", spec))
    return 1000 / (time.perf_counter() - t0), closes

def all_final(prefix):
    deadline = time.time() + 300
    while not all(final(f"{prefix}{rep}_{i}") for i in range(1000)) and time.time() < deadline:
        time.sleep(0.2)

blocker = f"blocker{rep}"
fd = os.open(f"{jobs}/{blocker}.json", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b'{"resources": {"gpu_count": 1}, "workers": [{"command": "sleep 600"}]}')
os.close(fd)
while open(f"{jobs}/{blocker}/state").read().strip() != "RUNNING":
    time.sleep(0.01)
rate, closes = batch("a", gpu_spec)
with open(f"{jobs}/{blocker}/ctl", "w") as f:
    f.write("cancel\n")
all_final("a")
rate_run, closes_run = batch("r", cpu_spec)
all_final("r")

starts = []
for i in range(50):
    name = f"s{rep}_{i}"
    submit(name)
    while not final(name):
        time.sleep(0.005)
    with open(f"{jobs}/{name}/status.json") as f:
        st = json.load(f)
    starts.append((st["workers"][0]["attempts"][0]["started_ns"] - st["accepted_ns"]) / 1e6)
print("%.0f %.3f %.3f %.0f %.3f %.3f %.3f %.3f" % (
    rate, pct(closes, 50) * 1e3, pct(closes, 99) * 1e3,
    rate_run, pct(closes_run, 50) * 1e3, pct(closes_run, 99) * 1e3,
    pct(starts, 50), pct(starts, 99)))
PY
}

results=()
for r in $(seq 1 "$RUNS"); do
	line=$(run_once "$r")
	results+=("$line")
	echo "run $r: accept/s p50 p99 (ms) | +run accept/s p50 p99 | start p50 p99 = $line"
	rm -r "$J"/a"$r"_* "$J"/r"$r"_* "$J"/s"$r"_* "$J/blocker$r"
done

median_col() {	# median_col N: the median of column N of the runs
	printf '%s\n' "${results[@]}" | awk -v c="$1" '{ print $c }' | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
rate=$(median_col 1)
start50=$(median_col 7)
echo
echo "$bench: medians of $RUNS run(s), 1,000 specs each, state_dir on $(df --output=fstype "$scratch" | tail -1):"
printf '  %-40s %8s\n' "accepted specs per second (queued)" "$rate"
printf '  %-40s %8s ms\n' "close(2) of a spec, p50" "$(median_col 2)"
printf '  %-40s %8s ms\n' "close(2) of a spec, p99" "$(median_col 3)"
printf '  %-40s %8s\n' "accepted specs per second (+run)" "$(median_col 4)"
printf '  %-40s %8s ms\n' "close(2) of a spec, +run, p50" "$(median_col 5)"
printf '  %-40s %8s ms\n' "close(2) of a spec, +run, p99" "$(median_col 6)"
printf '  %-40s %8s ms\n' "acceptance -> RUNNING, p50" "$start50"
printf '  %-40s %8s ms\n' "acceptance -> RUNNING, p99" "$(median_col 8)"
echo "bars:"
printf '  %-40s %8s  (bar >= 500)  %s\n' "accepted specs per second" "$rate" "$(verdict "$rate" 500)"
printf '  %-40s %8s  (bar <  20)   %s\n' "p50 acceptance -> RUNNING, ms" "$start50" \
	"$(awk -v v="$start50" 'BEGIN { print v < 20 ? "PASS" : "FAIL" }')"
