#!/bin/bash
# build_matrix.sh - builds mlfs and its tests the ways a packager or a user
# would, each with warnings as errors (-DMLFS_WERROR=ON), so a warning any
# of them shows fails here first: with gcc every CMake build type (Debug,
# Release, RelWithDebInfo, MinSizeRel), with clang Debug and Release, and with
# both Debian's own flags
# (dpkg-buildflags with hardening=+all: -O2, -fstack-protector-strong,
# -D_FORTIFY_SOURCE=2, -Werror=format-security, PIE, relro and bindnow;
# CMAKE_BUILD_TYPE=None, as debhelper configures a CMake package); and one
# without the optional backends (nfs, smb, and s3, gcs, azure, http, ftp), whose unit tests it runs.
#
# MATRIX_BUILT names builds the caller made already with the same compiler,
# type and -Werror (scripts/test.sh: its plain build is gcc-RelWithDebInfo,
# its sanitizer build gcc-Debug): each is said and not made again.
#
# Each build goes to build/matrix/<compiler>-<type>, its output to a .log
# beside it.  Prints one line per build and a summary "N passed, N failed";
# exits non-zero when one failed.  scripts/test.sh runs it.
set -u
cd "$(dirname "$0")/.."
out=build/matrix
mkdir -p "$out"
passed=0
failed=0

# build_one NAME CC TYPE [CFLAGS [LDFLAGS]]
build_one() {
	local name=$1 cc=$2 type=$3 cflags=${4:-} ldflags=${5:-} dir=$out/$1
	local start=$SECONDS
	case " ${MATRIX_BUILT:-} " in *" $name "*)
		echo "# $name: built by the caller already"
		return ;;
	esac
	rm -rf "$dir"
	if CFLAGS=$cflags LDFLAGS=$ldflags cmake -S . -B "$dir" -DCMAKE_C_COMPILER="$cc" \
		-DCMAKE_BUILD_TYPE="$type" -DMLFS_WERROR=ON >"$dir.log" 2>&1 &&
		cmake --build "$dir" -j "$(nproc)" >>"$dir.log" 2>&1; then
		passed=$((passed + 1))
		echo "ok - $name builds ($((SECONDS - start)) s)"
		rm -rf "$dir"		# only the log is kept
	else
		failed=$((failed + 1))
		echo "not ok - $name: $(grep -m1 -E 'error|Error' "$dir.log")"
		grep -E 'error:|warning:' "$dir.log" | head -10 | sed 's/^/#   /'
	fi
}

deb_flags() {
	DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1"
}

# Every build type with gcc, Debian's compiler; with clang the two ends (its
# -O2 -g is Debian's flags' build, its -Os was never found to warn apart).
for cc in gcc clang; do
	types="Debug Release RelWithDebInfo MinSizeRel"
	[ "$cc" = clang ] && types="Debug Release"
	for type in $types; do
		build_one "$cc-$type" "$cc" "$type"
	done
	build_one "$cc-debian" "$cc" None "$(deb_flags CFLAGS) $(deb_flags CPPFLAGS)" \
		"$(deb_flags LDFLAGS)"
done
# A build that leaves the optional backends out (their libraries absent on a
# packager's machine): it must build, say so in --version, and pass its unit
# tests, where test_registry checks a datastore of each is "not compiled in".
without_optional() {
	local dir=$out/gcc-without-optional start=$SECONDS
	rm -rf "$dir"
	if cmake -S . -B "$dir" -DMLFS_WERROR=ON -DMLFS_WITH_NFS=OFF -DMLFS_WITH_SMB=OFF \
		-DMLFS_WITH_CURL=OFF -DMLFS_WITH_GIT=OFF >"$dir.log" 2>&1 &&
		cmake --build "$dir" -j "$(nproc)" >>"$dir.log" 2>&1 &&
		"$dir/mlfs" --version | tee -a "$dir.log" | grep -qx 'not built: nfs smb s3 gcs azure http ftp git' &&
		ctest --test-dir "$dir" -E '^(integration_|posix_)' >>"$dir.log" 2>&1; then
		passed=$((passed + 1))
		echo "ok - gcc without nfs, smb, git and the libcurl backends builds, says so and passes its unit tests" \
			"($((SECONDS - start)) s)"
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		echo "not ok - gcc without nfs, smb, git and the libcurl backends: see $dir.log"
		grep -E 'error:|warning:|Failed|FAILED' "$dir.log" | head -10 | sed 's/^/#   /'
	fi
}
without_optional
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
