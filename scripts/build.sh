#!/bin/bash
# build.sh [plain|asan] - configures and builds into build/<variant>.
set -eu
cd "$(dirname "$0")/.."
variant=${1:-plain}
case $variant in
plain) flags="-DMLFS_SANITIZE=OFF" ;;
asan) flags="-DMLFS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" ;;
*) echo "usage: build.sh [plain|asan]" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
cmake -S . -B "build/$variant" $flags >/dev/null
cmake --build "build/$variant" -j "$(nproc)" >/dev/null
