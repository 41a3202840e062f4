#!/bin/bash
# make-images.sh - builds the container images the tests and benchmarks pull,
# from what Debian ships, and pushes them to a registry on 127.0.0.1
# (scripts/server-registry.sh).
#
#   make-images.sh [--big] [--debian] [--creds USER:PASSWORD] DIR REGISTRY
#   e.g.  make-images.sh build/images 127.0.0.1:15000
#
# --creds: for a registry with htpasswd auth (server-registry.sh's HTPASSWD).
#
#   REGISTRY/mlfs-test/busybox:1   a static busybox (/bin/busybox and its applet
#                                  links: /bin/sh, /usr/bin/env, ...), /etc/passwd
#                                  and /etc/group with root, /tmp 1777, and
#                                  /marker holding "mlfs-test-image busybox 1";
#                                  no CMD, no ENTRYPOINT
#   REGISTRY/mlfs-test/busybox:2   the same with "mlfs-test-image busybox 2" and
#                                  CMD ["/bin/sh","-c","echo image-default-cmd; cat /marker"]
#   REGISTRY/mlfs-test/big:1       (--big) busybox:1's layer plus one of 300 MiB
#                                  of random bytes (/big.bin): the pull benchmark's
#   REGISTRY/mlfs-test/debian:12   (--debian) a Debian 12 minbase with python3 and
#                                  python3-pip, /marker "mlfs-test-image debian 12",
#                                  and no apt source (/etc/apt/sources.list is a
#                                  comment): the package steps' (apt, pip).  Its
#                                  root is made once with debootstrap into
#                                  DIR/debian-root (about a minute, from the apt
#                                  mirror this machine uses) and kept.
#
# An image the registry already has (GET /v2/NAME/tags/list) is skipped, so a
# second run takes a tenth of a second.  The images are made with `podman import`
# (and `podman build` for big:1, which runs nothing) in podman's default root
# storage, pushed over plain HTTP (--tls-verify=false), then removed from that
# storage, so that a test's pull really pulls.  Run as root.
set -eu

usage="usage: $0 [--big] [--debian] [--creds USER:PASSWORD] DIR REGISTRY"
big=0
debian=0
creds=
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--big) big=1 ;;
	--debian) debian=1 ;;
	--creds) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
		creds=$2
		shift ;;
	-*) echo "$usage" >&2; exit 2 ;;
	*) args+=("$1") ;;
	esac
	shift
done
[ ${#args[@]} -eq 2 ] || { echo "$usage" >&2; exit 2; }
dir=${args[0]}
reg=${args[1]}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

say() { echo "make-images: $*" >&2; }
die() { say "$*"; exit 1; }

command -v podman >/dev/null || die "no podman: run scripts/install-deps.sh"
curl_auth=()
push_auth=()
if [ -n "$creds" ]; then
	curl_auth=(-u "$creds")
	push_auth=(--creds "$creds")
fi
code=$(curl -s "${curl_auth[@]}" -o /dev/null -w '%{http_code}' "http://$reg/v2/") || true
case $code in
200) ;;
401) die "the registry at $reg wants credentials (--creds USER:PASSWORD), or refused these" ;;
000) die "no registry answers at http://$reg/v2/ (scripts/server-registry.sh start DIR PORT)" ;;
*) die "http://$reg/v2/ answered $code" ;;
esac

# has NAME TAG: whether the registry lists TAG under NAME.
has() {
	curl -s "${curl_auth[@]}" "http://$reg/v2/$1/tags/list" | grep -qE "\"tags\":\[[^]]*\"$2\""
}

# push REF: pushes the local image REF and removes it from local storage.
push() {
	podman push --quiet --tls-verify=false "${push_auth[@]}" "$1" >/dev/null || die "podman push $1 failed"
	podman rmi "$1" >/dev/null 2>&1 || true	# never --force: it would stop a container using it
	say "pushed $1"
}

# import ROOT REF [CHANGE...]: a one-layer image of the folder ROOT, owned by
# root, with a fixed mtime, so the same ROOT gives the same layer digest.
import() {
	local root=$1 ref=$2 ch=()
	shift 2
	for c in "$@"; do ch+=(--change "$c"); done
	tar -C "$root" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . |
		podman import --quiet "${ch[@]}" - "$ref" >/dev/null || die "podman import $ref failed"
}

# busybox_root N: DIR/busybox-root with marker N.
busybox_root() {
	local r=$dir/busybox-root
	command -v busybox >/dev/null || die "no busybox: run scripts/install-deps.sh (busybox-static)"
	file -L "$(command -v busybox)" 2>/dev/null | grep -q 'statically linked' ||
		die "$(command -v busybox) is not static (install busybox-static)"
	rm -rf "$r"
	mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root" "$r/dev" "$r/proc" "$r/sys"
	cp "$(command -v busybox)" "$r/bin/busybox"
	local l
	while read -r l; do
		[ "$l" = bin/busybox ] && continue
		mkdir -p "$r/$(dirname "$l")"
		ln -sf /bin/busybox "$r/$l"
	done < <(busybox --list-full)
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
	chmod 1777 "$r/tmp"
	chmod 700 "$r/root"
	echo "mlfs-test-image busybox $1" >"$r/marker"
	chmod 644 "$r/marker" "$r/etc/passwd" "$r/etc/group"
}

make_busybox() {
	local n=$1 ref=$reg/mlfs-test/busybox:$1
	if has mlfs-test/busybox "$n"; then
		say "$ref: in the registry already"
		return 0
	fi
	busybox_root "$n"
	if [ "$n" = 2 ]; then
		import "$dir/busybox-root" "$ref" 'CMD ["/bin/sh","-c","echo image-default-cmd; cat /marker"]'
	else
		import "$dir/busybox-root" "$ref"
	fi
	push "$ref"
}

make_big() {
	local ref=$reg/mlfs-test/big:1 base=localhost/mlfs-test-build/busybox:1 ctx=$dir/big-context
	if has mlfs-test/big 1; then
		say "$ref: in the registry already"
		return 0
	fi
	busybox_root 1
	import "$dir/busybox-root" "$base"
	mkdir -p "$ctx"
	if [ "$(stat -c %s "$ctx/big.bin" 2>/dev/null)" != 314572800 ]; then
		head -c 300M /dev/urandom >"$ctx/big.bin.tmp"
		mv "$ctx/big.bin.tmp" "$ctx/big.bin"
	fi
	printf 'FROM %s\nCOPY big.bin /big.bin\n' "$base" >"$ctx/Containerfile"
	podman build --quiet --pull=never --runtime /usr/sbin/runc -t "$ref" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
		die "podman build $ref failed"
	podman rmi "$base" >/dev/null 2>&1 || true
	push "$ref"
}

# The mirror of Debian this machine's apt uses: $MLFS_DEBIAN_MIRROR, else the
# first URIs of a deb822 .sources file (or deb line of sources.list) whose
# suites include bookworm.
debian_mirror() {
	local f m
	if [ -n "${MLFS_DEBIAN_MIRROR:-}" ]; then
		echo "$MLFS_DEBIAN_MIRROR"
		return 0
	fi
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		m=$(awk 'BEGIN { RS = ""; FS = "\n" }
			/(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|$|\n)/ && /(^|\n)Types:[^\n]*deb([ \t]|$|\n)/ {
				for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); print u[2]; exit }
			}' "$f")
		[ -n "$m" ] && { echo "$m"; return 0; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		m=$(awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++;
			if ($(i + 1) == "bookworm") { print $i; exit } }' "$f")
		[ -n "$m" ] && { echo "$m"; return 0; }
	done
	echo http://deb.debian.org/debian
}

make_debian() {
	local ref=$reg/mlfs-test/debian:12 root=$dir/debian-root mirror
	if has mlfs-test/debian 12; then
		say "$ref: in the registry already"
		return 0
	fi
	if [ ! -x "$root/usr/bin/python3" ]; then
		command -v debootstrap >/dev/null || die "no debootstrap: run scripts/install-deps.sh"
		mirror=$(debian_mirror)
		say "debootstrap --variant=minbase --include=python3-pip bookworm from $mirror (about a minute; log in $dir/debootstrap.log)"
		rm -rf "$root.tmp"
		debootstrap --variant=minbase --include=python3-pip bookworm "$root.tmp" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
			die "debootstrap failed: see $dir/debootstrap.log"
		# What only the build needed: the .debs and the package lists.
		rm -rf "$root.tmp"/var/cache/apt/archives/*.deb "$root.tmp"/var/lib/apt/lists/*
		mv "$root.tmp" "$root"
	fi
	echo "mlfs-test-image debian 12" >"$root/marker"
	# No Debian mirror inside: a test's apt step must use the local
	# repository it names (make-pkgrepo.sh), never reach out by accident.
	echo "# mlfs-test image: no sources; add one in sources.list.d" >"$root/etc/apt/sources.list"
	chmod 644 "$root/marker" "$root/etc/apt/sources.list"
	import "$root" "$ref"
	push "$ref"
}

make_busybox 1
make_busybox 2
[ "$big" = 1 ] && make_big
[ "$debian" = 1 ] && make_debian
exit 0
