#!/bin/bash
# tsan.sh - builds mlfs with ThreadSanitizer (build/tsan) and runs the tests
# against it: the unit tests and the integration tests, whose daemons then
# run sanitized.  Not part of scripts/test.sh (it takes about 14 minutes on two
# cores); run it when the daemon's threads change.  TSAN_TESTS=REGEX runs only
# the ctest tests it matches (e.g. 'unit_|integration_(cache|http)_test').
# Reports go to build/tsan/reports/ and are shown at the end; a report fails
# its test (the process exits 66: a daemon's "exited cleanly" check fails).
# Needs root and /dev/fuse, and what scripts/install-deps.sh installs.
# Ends with one "N passed, N failed" line.
set -u
cd "$(dirname "$0")/.." || exit 1
scripts/build.sh tsan || { echo "0 passed, 1 failed"; exit 1; }
reports=$PWD/build/tsan/reports
rm -rf "$reports"
mkdir -p "$reports"
export TSAN_OPTIONS="halt_on_error=0 log_path=$reports/report suppressions=$PWD/scripts/tsan.supp"
filter=()
[ -n "${TSAN_TESTS:-}" ] && filter=(-R "$TSAN_TESTS")
ctest --test-dir build/tsan --timeout 1200 "${filter[@]}" 2>&1 | tee build/tsan/ctest.log
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' build/tsan/ctest.log)
total=$(echo "$summary" | sed -E 's/.* out of ([0-9]+).*/\1/')
nfail=$(echo "$summary" | sed -E 's/.*, ([0-9]+) tests failed.*/\1/')
for r in "$reports"/report*; do
	[ -e "$r" ] || continue
	echo "=== $r"
	cat "$r"
done
nreports=$(find "$reports" -type f -name 'report*' | wc -l)
echo "tsan: $nreports report(s) in $reports"
if [ -z "$total" ]; then
	echo "0 passed, 1 failed"
	exit 1
fi
# a report from a process whose exit no test checks still fails the run
[ "$nfail" -eq 0 ] && [ "$nreports" -gt 0 ] && nfail=$nreports
echo "$((total - nfail)) passed, $nfail failed"
[ "$nfail" -eq 0 ]
