#!/bin/bash
# fuzz.sh [SECONDS] [--keep] [--seed N] - runs every libFuzzer target of
# tests/fuzz for SECONDS each (default 60), under AddressSanitizer and UBSan.
# With --seed N (as the test suite runs it) the inputs tried are the same
# sequence every time, cut off by the time: a short run tries a prefix of
# what a longer run with the same seed and corpus tried.
#
# Each target starts from its seeds and every input found before, kept in
# tests/fuzz/corpus/<target>/ (so a crash once found is replayed by every
# later run: the corpus is the regression test), and writes what it finds
# this time to build/fuzz/corpus/<target>/; --keep merges those new inputs
# into tests/fuzz/corpus (libFuzzer -merge=1: only inputs that add
# coverage).  A crash, leak, timeout (10 s) or out-of-memory (2 GB) leaves
# its input in build/fuzz/crashes/ and fails the run.  Prints one line per
# target ("fuzz_spec: 123456 inputs in 60 s, 0 crashes") and a summary
# "N passed, N failed", and exits non-zero when a target failed.  Runs as
# many targets at once as there are CPUs.
#
# Builds build/fuzz with clang first (scripts/build.sh fuzz).
set -u
cd "$(dirname "$0")/.."
secs=60 keep=false seed=
while [ $# -gt 0 ]; do
	case $1 in
	--keep) keep=true ;;
	--seed) seed=${2:-}; shift
		case $seed in '' | *[!0-9]*) echo "fuzz.sh: --seed takes a number" >&2; exit 2 ;; esac ;;
	'' | *[!0-9]*) echo "usage: fuzz.sh [SECONDS] [--keep] [--seed N]" >&2; exit 2 ;;
	*) secs=$1 ;;
	esac
	shift
done
[ "$secs" -gt 0 ] || { echo "fuzz.sh: SECONDS must be positive" >&2; exit 2; }
if ! scripts/build.sh fuzz; then
	echo "fuzz: the clang build failed"
	echo "0 passed, 1 failed"
	exit 1
fi
passed=0 failed=0
mkdir -p build/fuzz/crashes

# fuzz_one TARGET: runs one target; its line and "ok"/"failed" into build/fuzz/TARGET.result.
fuzz_one() {
	local t=$1 seeds found log status runs
	seeds=tests/fuzz/corpus/${t#fuzz_}
	found=build/fuzz/corpus/${t#fuzz_}
	mkdir -p "$seeds" "$found"
	log=build/fuzz/$t.log
	# the first corpus folder receives new inputs; the seeds are only read
	# shellcheck disable=SC2086
	build/fuzz/"$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		${seed:+-seed=$seed} \
		-artifact_prefix=build/fuzz/crashes/"$t"- "$found" "$seeds" >"$log" 2>&1
	status=$?
	runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
	{
		if [ "$status" -eq 0 ]; then
			echo ok
			echo "$t: ${runs:-?} inputs in $secs s, 0 crashes"
		else
			echo failed
			echo "$t: FAILED (exit $status) after ${runs:-?} inputs; input kept in build/fuzz/crashes/:"
			grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 | sed 's/^/  /'
		fi
	} >"build/fuzz/$t.result"
}

# One target per CPU at a time (libFuzzer runs one thread): the suite's
# minute of fuzzing takes half the time on two CPUs, each target its SECONDS.
targets=()
for src in tests/fuzz/fuzz_*.c; do
	targets+=("$(basename "$src" .c)")
done
running=0
for t in "${targets[@]}"; do
	rm -f "build/fuzz/$t.result"
	if [ "$running" -ge "$(nproc)" ]; then
		wait -n
		running=$((running - 1))
	fi
	fuzz_one "$t" &
	running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
	if [ "$(head -1 "build/fuzz/$t.result" 2>/dev/null)" = ok ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
	tail -n +2 "build/fuzz/$t.result" 2>/dev/null || echo "$t: FAILED (no result)"
	if $keep; then
		build/fuzz/"$t" -merge=1 "tests/fuzz/corpus/${t#fuzz_}" "build/fuzz/corpus/${t#fuzz_}" \
			>/dev/null 2>&1 &&
			echo "$t: corpus in tests/fuzz/corpus/${t#fuzz_} now $(find "tests/fuzz/corpus/${t#fuzz_}" -type f | wc -l) inputs"
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
