# bench_lib.sh - helpers shared by scripts/bench_local.sh and
# scripts/bench_remote.sh; sourced, never run.
#
# The caller sets $bench (its name, for messages) and $pids (the processes it
# started that may still run; stop_pid keeps it up to date).

# bench_start WHY_ROOT: what every benchmark checks first: RUNS from
# BENCH_RUNS (default 5, a positive integer) and root (for WHY_ROOT); then it
# installs the benchmark packages.  Exits 2 on a usage error.
bench_start() {
	RUNS=${BENCH_RUNS:-5}
	case $RUNS in
	'' | *[!0-9]* | 0) echo "$bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;;
	esac
	if [ "$(id -u)" -ne 0 ]; then
		echo "$bench: run as root ($1)" >&2
		exit 2
	fi
	scripts/install-deps.sh --bench
}

# bench_stop_all: unmounts every $scratch/mnt-* still mounted and stops every
# process in $pids (for the caller's cleanup).
bench_stop_all() {
	local m pid

	for m in "$scratch"/mnt-*; do
		[ -d "$m" ] || continue
		if is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	for pid in $pids; do
		stop_pid "$pid" 0
	done
}

# Whether process $1 runs (a zombie, exited but not yet waited for, does not).
alive() {
	[ -r "/proc/$1/stat" ] && awk '{ exit $3 == "Z" }' "/proc/$1/stat" 2>/dev/null
}

# Ends process $1, started here: waits $2 tenths of a second for it to exit
# on its own, then TERM, then KILL; reaps it and drops it from $pids.
stop_pid() {
	local pid=$1 grace=$2 i p keep=""

	for i in $(seq "$grace"); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		kill "$pid" 2>/dev/null || true
		for i in $(seq 50); do
			alive "$pid" || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	for p in $pids; do
		[ "$p" = "$pid" ] || keep="$keep $p"
	done
	pids=$keep
}

is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts
}

# Waits until $1 is a mount and answers, or until process $2 dies (30 s at
# most); on failure prints how long it waited and log $3.
wait_mounted() {
	local mnt=$1 pid=$2 log=$3 i t0=${EPOCHREALTIME/./}

	for i in $(seq 300); do
		if is_mounted "$mnt"; then
			stat "$mnt" >/dev/null	# waits for the FUSE handshake
			return 0
		fi
		if ! alive "$pid"; then
			echo "$bench: the daemon for $mnt exited after" \
				"$(us_to_s $((${EPOCHREALTIME/./} - t0))) s; its log:" >&2
			tail -n 30 "$log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "$bench: $mnt did not mount in 30 s; the end of its log:" >&2
	tail -n 30 "$log" >&2
	return 1
}

# Writes and deletes $2 bytes as file $1 on a tmpfs, so that the next
# page-cache fill reuses memory the hypervisor has backed: on a VM whose
# free memory goes back to the host (virtio-balloon free page reporting), a
# read that fills the page cache otherwise pays, at random, the host's first
# touch of that memory (docs/benchmarks.md, "Memory on this VM").
pretouch() {
	head -c "$2" /dev/zero >"$1"
	rm "$1"
}

# Prints the microseconds "$@" takes; returns its exit status.
time_us() {
	local t0 rc=0

	t0=${EPOCHREALTIME/./}
	"$@" || rc=$?
	echo $((${EPOCHREALTIME/./} - t0))
	return $rc
}

us_to_s() { awk -v u="$1" 'BEGIN { printf "%.6f", u / 1e6 }'; }

# Median, in seconds, of the microsecond values in file $1.
median_s() {
	sort -n "$1" | awk '{ v[NR] = $1 }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%.6f", m / 1e6 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# PASS when ratio $1 >= bar $2 (or > $2 when $3 is "strict"), else FAIL.
verdict() {
	awk -v r="$1" -v bar="$2" -v strict="${3:-}" \
		'BEGIN { print ((strict ? r > bar : r >= bar) ? "PASS" : "FAIL") }'
}
