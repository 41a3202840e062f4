#!/bin/bash
# posix_ext4_test.sh - datastores/ against ext4, call for call.  posix_calls
# makes the same system calls (as root, and as users 1000 and 65534) in a
# folder of an ext4 filesystem and in a datastore whose root is on that same
# ext4, through a mount with FUSE passthrough (where the kernel offers it)
# and through one without.  The transcripts must agree line for line, but
# for the calls docs/posix.md lists as differing (KNOWN below): those must
# answer exactly as written there.  The mounts are made with -o dev, so a
# device node made through them can be opened, as on ext4.
# Usage: posix_ext4_test.sh MLFS POSIX_CALLS
set -u
MLFS=$(cd "$(dirname "$1")" && pwd)/${1##*/}
POSIX_CALLS=$(cd "$(dirname "$2")" && pwd)/${2##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1

# The mount's answers where it differs from ext4, without the line's number:
# docs/posix.md says why for each.
KNOWN='root open("w", O_TMPFILE | O_RDWR, 0600) = -1 EOPNOTSUPP
root setxattr("w/x", "user.k", "v", 1, 0) = -1 EOPNOTSUPP
root getxattr("w/x", "user.k", buf, sizeof(buf)) = -1 EOPNOTSUPP
root fallocate(fd, 0, 0, 8192) = -1 EOPNOTSUPP
root fstat w/x = reg 0644 0:0 n1 s1 m:new c:new
root lseek(fd, 0, SEEK_HOLE) = 1048576
root lseek(fd, 16384, SEEK_DATA) = 16384'

EXT4=$T_DIR/ext4
LOOP_MOUNTED=
ext4_cleanup() {
	[ -n "$LOOP_MOUNTED" ] && umount "$EXT4" && LOOP_MOUNTED=
}
t_cleanup() { ext4_cleanup; }
trap 'fusermount3 -u "$T_DIR/mnt" 2>/dev/null; ext4_cleanup; rm -rf "$T_DIR"' EXIT

# An ext4 of its own (a loop device); else this machine's disk, when it is ext4.
mkdir -p "$EXT4" mnt
truncate -s 64M ext4.img
if mkfs.ext4 -q ext4.img && mount -o loop ext4.img "$EXT4" 2>/dev/null; then
	LOOP_MOUNTED=1
	ok "an ext4 filesystem on a loop device"
elif [ "$(stat -f -c %T "$EXT4")" = "ext2/ext3" ]; then
	ok "# no loop device: the ext4 of $T_DIR is compared"
else
	ok "# skip: neither a loop device nor an ext4 disk here"
	t_finish
	exit $?
fi
cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache

[datastore ext4]
type = local
root = $EXT4/store
CONF

# compare NAME OPTS: posix_calls on ext4 and through a mount made with OPTS.
compare() {
	local name=$1 opts=$2 got unknown gone
	rm -rf "$EXT4/direct" "$EXT4/store"
	mkdir "$EXT4/direct" "$EXT4/store"
	if ! mount_fg mlfs.conf "$T_DIR/mnt" -o "$opts"; then
		not_ok "$name: the mount came up"
		return
	fi
	"$POSIX_CALLS" "$EXT4/direct" >"ext4.$name.txt" || not_ok "$name: posix_calls ran on ext4"
	"$POSIX_CALLS" "$T_DIR/mnt/datastores/ext4" >"mlfs.$name.txt" ||
		not_ok "$name: posix_calls ran on the mount"
	same "$name: as many calls on both" "$(wc -l <"ext4.$name.txt")" "$(wc -l <"mlfs.$name.txt")"
	# every line that differs: "ext4's line<TAB>the mount's line"
	paste "ext4.$name.txt" "mlfs.$name.txt" | awk -F '\t' '$1 != $2' >"diff.$name.txt"
	got=$(cut -f2 "diff.$name.txt" | cut -d' ' -f2-)
	unknown=$(grep -vxF -f <(echo "$KNOWN") <<<"$got")
	gone=$(grep -vxF -f <(echo "$got") <<<"$KNOWN")
	if [ -z "$unknown" ]; then
		ok "$name: the mount answers as ext4 but for the known differences"
	else
		not_ok "$name: $(grep -c . <<<"$unknown") answers differ from ext4's:"
		grep -F -f <(echo "$unknown") "diff.$name.txt" | head -40 |
			awk -F '\t' '{ print "#   ext4: " $1; print "#   mlfs: " $2 }'
	fi
	same "$name: every known difference is still there (else update docs/posix.md)" "" "$gone"
	echo "# $name: $(wc -l <"mlfs.$name.txt") calls compared, $(wc -l <"diff.$name.txt") differ"
	unmount_fg "$T_DIR/mnt"
}

compare passthrough dev
compare daemon dev,nopassthrough
t_finish
