#!/bin/bash
# make-pkgrepo.sh - a local apt repository and a local pip index for the
# package steps of a container job (environment.packages), made offline from
# what Debian ships and served by scripts/server-nginx.sh:
#
#   make-pkgrepo.sh DIR             then: scripts/server-nginx.sh start DIR PORT
#
#   DIR/www/apt/     a flat apt repository (Packages, Packages.gz, Release,
#                    made with apt-ftparchive) holding mlfs-test-pkg 1.0 (all),
#                    a .deb made with dpkg-deb that installs
#                    /usr/share/mlfs-test-pkg/marker ("mlfs-test-apt").
#                    sources.list line: deb [trusted=yes] http://127.0.0.1:PORT/apt ./
#   DIR/www/pip/simple/
#                    a PEP 503 index holding mlfs-test-pkg 1.0, the wheel
#                    mlfs_test_pkg-1.0-py3-none-any.whl (built here with
#                    Debian's pip, setuptools and wheel, no network): its
#                    module mlfs_test_pkg has MARKER = "mlfs-test-pip".
#                    pip install --index-url http://127.0.0.1:PORT/pip/simple mlfs-test-pkg
#
# Inside the debian:12 test image (scripts/make-images.sh --debian), with
# the server on 127.0.0.1:PORT and the container on the host's network:
#
#   echo 'deb [trusted=yes] http://127.0.0.1:PORT/apt ./' >/etc/apt/sources.list.d/mlfs-test.list
#   apt-get update && apt-get install -y mlfs-test-pkg
#   pip install --break-system-packages --index-url http://127.0.0.1:PORT/pip/simple mlfs-test-pkg
#
# (that image has no other apt source; in one that has, `apt-get -o
# Dir::Etc::sourcelist=/etc/apt/sources.list.d/mlfs-test.list -o
# Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update` reads only this one.)
# (Debian 12's pip refuses to install into the system's python without
# --break-system-packages, or PIP_BREAK_SYSTEM_PACKAGES=1: PEP 668.)
# Idempotent: what exists already is kept.
set -eu

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
src=$dir/src
www=$dir/www

say() { echo "make-pkgrepo: $*" >&2; }
die() { say "$*"; exit 1; }

for t in dpkg-deb apt-ftparchive /usr/bin/python3; do
	command -v "$t" >/dev/null || die "no $t: run scripts/install-deps.sh"
done

make_apt() {
	local deb=$www/apt/mlfs-test-pkg_1.0_all.deb p=$src/deb/mlfs-test-pkg
	[ -s "$www/apt/Release" ] && [ -s "$deb" ] && return 0
	rm -rf "$p"
	mkdir -p "$p/DEBIAN" "$p/usr/share/mlfs-test-pkg" "$www/apt"
	cat >"$p/DEBIAN/control" <<CONTROL
Package: mlfs-test-pkg
Version: 1.0
Architecture: all
Maintainer: mlfs tests <mlfs-tests@localhost>
Section: misc
Priority: optional
Description: mlfs test package
 Installs /usr/share/mlfs-test-pkg/marker, which the container tests look for.
CONTROL
	echo mlfs-test-apt >"$p/usr/share/mlfs-test-pkg/marker"
	chmod -R u=rwX,go=rX "$p"
	dpkg-deb --root-owner-group --build "$p" "$deb" >/dev/null || die "dpkg-deb failed"
	(
		cd "$www/apt"
		apt-ftparchive packages . >Packages
		gzip -9nc Packages >Packages.gz
		# Written beside, or Release would list itself.
		apt-ftparchive release . >../Release.tmp && mv ../Release.tmp Release
	) || die "apt-ftparchive failed"
	say "apt repository in $www/apt"
}

make_pip() {
	local whl=mlfs_test_pkg-1.0-py3-none-any.whl p=$src/pip/mlfs-test-pkg
	local idx=$www/pip/simple
	[ -s "$idx/mlfs-test-pkg/$whl" ] && [ -s "$idx/index.html" ] && return 0
	rm -rf "$p" "$src/pip/dist"
	mkdir -p "$p/mlfs_test_pkg" "$idx/mlfs-test-pkg"
	echo 'MARKER = "mlfs-test-pip"' >"$p/mlfs_test_pkg/__init__.py"
	cat >"$p/setup.py" <<'SETUP'
from setuptools import setup
setup(name="mlfs-test-pkg", version="1.0", packages=["mlfs_test_pkg"],
      description="mlfs test package")
SETUP
	# Debian's own python3 (another one may come first in PATH), its
	# setuptools and wheel, and nothing from an index.
	(cd "$p" && PIP_NO_INDEX=1 /usr/bin/python3 -m pip wheel --quiet --no-deps --no-build-isolation \
		--no-cache-dir -w "$src/pip/dist" .) >"$src/pip/build.log" 2>&1 ||
		{ cat "$src/pip/build.log" >&2; die "the wheel did not build (python3-pip, python3-setuptools, python3-wheel?)"; }
	[ -s "$src/pip/dist/$whl" ] || die "no $whl in $src/pip/dist"
	cp "$src/pip/dist/$whl" "$idx/mlfs-test-pkg/$whl"
	local sum
	sum=$(sha256sum <"$idx/mlfs-test-pkg/$whl" | cut -d' ' -f1)
	cat >"$idx/mlfs-test-pkg/index.html" <<HTML
<!DOCTYPE html>
<html><body>
<a href="$whl#sha256=$sum">$whl</a>
</body></html>
HTML
	cat >"$idx/index.html" <<'HTML'
<!DOCTYPE html>
<html><body>
<a href="mlfs-test-pkg/">mlfs-test-pkg</a>
</body></html>
HTML
	say "pip index in $idx"
}

make_apt
make_pip
chmod -R o+rX "$www"
