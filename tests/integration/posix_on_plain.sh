#!/bin/bash
# Runs the POSIX checks on a plain local folder: proves the checks, not mlfs.
set -u
POSIX_CHECK=$1
dir=$(mktemp -d /tmp/mlfs-posix-plain.XXXXXX)
"$POSIX_CHECK" "$dir" 2>&1
status=$?
rm -rf "$dir"
exit $status
