#!/bin/bash
# test.sh - installs what is needed, builds mlfs twice (plain, and with
# AddressSanitizer + UndefinedBehaviorSanitizer) and runs every test in both
# (the container tests in the second only): the cmocka unit tests and the
# integration tests through real mounts; then
# fuzzes every parser of outside input for a minute (scripts/fuzz.sh), and
# builds every build type with gcc and clang (scripts/build_matrix.sh).
# Needs root and /dev/fuse.  Ends with one "N passed, N failed" line.
set -u
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1

passed=0
failed=0
for variant in plain asan; do
	echo "=== build: $variant"
	if ! scripts/build.sh "$variant"; then
		echo "build $variant failed"
		failed=$((failed + 1))
		continue
	fi
	echo "=== tests: $variant"
	# The tests whose time is their servers' run once, in the sanitizer build, where
	# the daemon's code is checked most: the container tests (two minutes of podman
	# pulls, runs and package installs on two cores), Slurm's (its scheduler's passes
	# and real sleeps: 85 s) and Azure's (Azurite, one Node.js process: 75 s).  Every
	# other test runs in both.  So the whole suite stays well under 20 minutes.
	skip=()
	[ "$variant" = plain ] && skip=(-E 'integration_(containers|envs|slurm|azure)_test')
	# -V prints every runner's own lines (cmocka's [  PASSED  ] included).
	ctest --test-dir "build/$variant" -V "${skip[@]}" 2>&1 | tee "build/$variant/ctest.log" |
		grep -vE '^[0-9]+: (Test command|Working Directory|Environment variables|Test timeout)' |
		sed -E 's/^[0-9]+: //'
	summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "build/$variant/ctest.log")
	total=$(echo "$summary" | sed -E 's/.* out of ([0-9]+).*/\1/')
	nfail=$(echo "$summary" | sed -E 's/.*, ([0-9]+) tests failed.*/\1/')
	if [ -z "$total" ]; then
		echo "ctest for $variant printed no summary"
		failed=$((failed + 1))
		continue
	fi
	passed=$((passed + total - nfail))
	failed=$((failed + nfail))
done
# step NAME LOG COMMAND...: runs a step that ends with "N passed, N failed",
# shows its output and adds its counts.  (Into a file, then shown: a tee to
# /dev/stderr would reopen, and truncate, a log file.)
step() {
	local name=$1 log=$2 last
	shift 2
	echo "=== $name"
	"$@" >"$log" 2>&1
	cat "$log"
	last=$(tail -1 "$log")
	if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
	else
		echo "$name printed no summary"
		failed=$((failed + 1))
	fi
}
# A minute of fuzzing (tests/fuzz, libFuzzer under ASan and UBSan): every
# parser of outside input for 6 s each, replaying the kept corpus first, a
# target per CPU at a time.
step fuzz build/fuzz.log scripts/fuzz.sh 6 --seed 1
# The builds a packager or a user would make (gcc in every build type, clang,
# Debian's hardening flags), warnings as errors.
# (gcc-RelWithDebInfo is the plain build above and gcc-Debug the sanitizer one's
# flags: not made again.)
step "build matrix" build/matrix.log env MATRIX_BUILT="gcc-RelWithDebInfo gcc-Debug" \
	scripts/build_matrix.sh
echo "the suite took $SECONDS s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
