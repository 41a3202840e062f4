#!/bin/bash
# install-deps.sh - installs every Debian package mlfs's build and tests need.
# Idempotent: does nothing when all are there.  Run as root on Debian 12.
# With --bench it also installs what scripts/bench_local.sh compares against.
set -eu

packages="build-essential cmake pkg-config libfuse3-dev fuse3 libcmocka-dev
	rsync sqlite3 util-linux util-linux-extra mount procps man-db"
if [ "${1:-}" = "--bench" ]; then
	packages="$packages rclone hyperfine"
fi

missing=
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing; run this script as root" >&2
	exit 1
fi
# No service may start on install (no systemd here; nginx or samba would bind 0.0.0.0).
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
