#!/bin/bash
# install-deps.sh - installs every Debian package mlfs's build and tests need,
# and the npm test servers under build/tools/: for S3 @20minutes/s3rver
# (which checks SigV4 signatures), for Azure Blob Azurite and Microsoft's own
# client (@azure/storage-blob, scripts/azure-blob.js).  libgit2 builds the
# git backend; git, fcgiwrap and nginx serve its tests (scripts/server-git.sh),
# git-lfs pushes the Git LFS objects they read.
# Idempotent: does
# nothing when all are there.  The container tests' (servers.md §8): podman and runc (crun, which
# comes too, refuses these hosts' cgroup layout), uidmap for rootless podman,
# docker-registry and apache2-utils (htpasswd) for scripts/server-registry.sh,
# busybox-static and debootstrap for scripts/make-images.sh, dpkg-dev,
# apt-utils (apt-ftparchive) and Debian's pip, setuptools and wheel for
# scripts/make-pkgrepo.sh.  Run as root on Debian 12.  With --bench it also
# installs what the benchmarks compare against (rclone, s3fs, smbnetfs,
# hyperfine, and s3rver 3.7.1, which the S3 peers can talk to:
# docs/benchmarks.md says why).
set -eu
cd "$(dirname "$0")/.."

packages="build-essential cmake pkg-config libfuse3-dev fuse3 libcmocka-dev
	rsync sqlite3 util-linux util-linux-extra mount procps man-db
	libcurl4-openssl-dev libssl-dev libxml2-dev libjansson-dev libyaml-dev
	nginx awscli curl vsftpd openssl libgit2-dev fcgiwrap git git-lfs
	libnfs-dev libsmbclient-dev nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils
	samba smbclient iproute2 bc python3 libarchive-dev
	slurmctld slurmd slurm-client munge unzip clang libclang-rt-14-dev
	podman runc uidmap docker-registry apache2-utils busybox-static file
	debootstrap dpkg-dev apt-utils python3-pip python3-setuptools python3-wheel"
if [ "${1:-}" = "--bench" ]; then
	packages="$packages rclone hyperfine s3fs smbnetfs"
fi
# Node.js may come from elsewhere than Debian (it does on these machines).
if ! command -v npm >/dev/null; then
	packages="$packages nodejs npm"
fi

# npm_tool DIR PACKAGE: installs an npm package into build/tools/DIR once.
npm_tool() {
	[ -e "build/tools/$1/node_modules/${2%@*}/package.json" ] && return 0	# name without @version
	mkdir -p "build/tools/$1"
	echo "install-deps: npm install $2 into build/tools/$1" >&2
	(cd "build/tools/$1" && npm install --no-audit --no-fund --loglevel=error "$2" >/dev/null)
}
npm_tools() {
	npm_tool s3rver5 @20minutes/s3rver@5.0.0
	# Azure Blob: Microsoft's emulator and client (3.34 and 12.33 on want Node 22)
	npm_tool azurite azurite@3.33.0
	npm_tool azclient @azure/storage-blob@12.32.0
	if [ "${1:-}" = "--bench" ]; then
		npm_tool s3rver3 s3rver@3.7.1
	fi
}

missing=
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	npm_tools "${1:-}"
	exit 0
fi

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
npm_tools "${1:-}"
