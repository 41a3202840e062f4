#!/bin/bash
# build.sh [plain|asan|tsan|fuzz] - configures and builds into build/<variant>.
set -eu
cd "$(dirname "$0")/.."
variant=${1:-plain}
case $variant in
plain) flags="-DMLFS_SANITIZE=OFF" ;;
asan) flags="-DMLFS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" ;;
tsan) flags="-DMLFS_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" ;;	# scripts/tsan.sh
fuzz) flags="-DMLFS_FUZZ=ON -DMLFS_TESTS=OFF -DCMAKE_C_COMPILER=clang" ;;	# tests/fuzz, libFuzzer
*) echo "usage: build.sh [plain|asan|tsan|fuzz]" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
# Warnings are errors in every build of the project's own (MLFS_WERROR, off for others).
cmake -S . -B "build/$variant" $flags -DMLFS_WERROR=ON >/dev/null
cmake --build "build/$variant" -j "$(nproc)" >/dev/null
