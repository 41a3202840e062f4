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
# "N passed, N failed", and exits non-zero when a target failed.
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
for src in tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
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
	if [ "$status" -eq 0 ]; then
		echo "$t: ${runs:-?} inputs in $secs s, 0 crashes"
		passed=$((passed + 1))
	else
		echo "$t: FAILED (exit $status) after ${runs:-?} inputs; input kept in build/fuzz/crashes/:"
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 | sed 's/^/  /'
		failed=$((failed + 1))
	fi
	if $keep; then
		build/fuzz/"$t" -merge=1 "$seeds" "$found" >/dev/null 2>&1 &&
			echo "$t: corpus in $seeds now $(find "$seeds" -type f | wc -l) inputs"
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
