#!/bin/bash
# archive_test.sh - archive sources (zip, tar, tar.gz, tar.bz2) shown
# extracted under datasets/ through a real mount: listing, reads equal to the
# originals, a member that would land outside its folder ("zip slip") never
# shown, writes refused, extractions no mount reads removed past
# archive_cache_size, and a corrupt archive refused at mount with a message
# naming it.  Usage: archive_test.sh MLFS
set -u
MLFS=$1
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
mkdir -p lab/src/voc/img mnt
printf 'person 12 40\n' >lab/src/voc/ann.txt
head -c 3000000 /dev/urandom >lab/src/voc/img/big.bin
python3 - <<'PY'
import zipfile
with zipfile.ZipFile("lab/data.zip", "w") as z:
    z.write("lab/src/voc/ann.txt", "voc/ann.txt", zipfile.ZIP_STORED)
    z.write("lab/src/voc/img/big.bin", "voc/img/big.bin", zipfile.ZIP_DEFLATED)
    z.writestr("../evil.txt", "outside")
    z.writestr("/abs.txt", "absolute")
PY
# a second name of big.bin: tar keeps it as a hard link member (no bytes of its own)
ln lab/src/voc/img/big.bin lab/src/voc/img/same.bin
tar cf lab/data.tar -C lab/src voc
tar czf lab/data.tar.gz -C lab/src voc
tar cjf lab/data.tar.bz2 -C lab/src voc
cat >a.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[datastore lab]
type = local
root = $T_DIR/lab
[dataset zipped]
source = lab:/data.zip
[dataset tarred]
source = lab:/data.tar
[dataset gzipped]
source = lab:/data.tar.gz
[checkpoint bzipped]
source = lab:/data.tar.bz2
CONF
M=$T_DIR/mnt
mount_fg a.conf "$M" || { t_finish; exit 1; }
for d in datasets/zipped datasets/tarred datasets/gzipped checkpoints/bzipped; do
	same "$d lists the archive's folders" "voc" "$(ls "$M/$d" | xargs)"
	same "$d: a small member reads" "person 12 40" "$(cat "$M/$d/voc/ann.txt")"
	same "$d: a 3 MB member equals the original" "$(sha lab/src/voc/img/big.bin)" "$(sha "$M/$d/voc/img/big.bin")"
	same "$d: sizes" 3000000 "$(stat -c %s "$M/$d/voc/img/big.bin")"
done
for d in datasets/tarred datasets/gzipped checkpoints/bzipped; do
	same "$d: a hard link member reads as the file it names" "$(sha lab/src/voc/img/big.bin)" \
		"$(sha "$M/$d/voc/img/same.bin")"
done
same "... its bytes extracted once: the tars' extractions hold a file each for big.bin and ann.txt" \
	"2 2" "$(for x in cache/archives/*/; do n=$(ls "$x" | wc -l); [ "$n" -lt 2 ] || printf '%s ' "$n"; done | xargs)"
same_at_offsets "reads at offsets of a deflated zip member" lab/src/voc/img/big.bin "$M/datasets/zipped/voc/img/big.bin"
same "zip slip: ../evil.txt and /abs.txt are not shown" "voc" "$(ls -A "$M/datasets/zipped" | xargs)"
check "... and nothing was written outside" test ! -e "$T_DIR/evil.txt"
check "... the log says why" grep -q 'evil.txt' "$T_DIR/mount.mnt.log"
fails "an archive is read-only" "Read-only file system" touch "$M/datasets/zipped/voc/new"
check "find walks it without loops" sh -c "find '$M/datasets' >/dev/null"
unmount_fg "$M"
# archive_cache_size: the extractions no mount reads go at the next extraction
same "three extractions are kept" 3 "$(ls -d cache/archives/*/ | wc -l)"
cp lab/data.tar.gz lab/next.tar.gz
printf '[mlfs]\nstate_dir = %s/state\ncache_dir = %s/cache\narchive_cache_size = 1K\n' "$T_DIR" "$T_DIR" >e.conf
printf '[datastore lab]\ntype = local\nroot = %s/lab\n[dataset next]\nsource = lab:/next.tar.gz\n' "$T_DIR" >>e.conf
mount_fg e.conf "$M" || { t_finish; exit 1; }
same "over archive_cache_size, the archive read is extracted" "$(sha lab/src/voc/img/big.bin)" \
	"$(sha "$M/datasets/next/voc/img/big.bin")"
same "... and the three no mount reads went, named in the log" "1 3" \
	"$(ls -d cache/archives/*/ | wc -l) $(grep -c 'archive cache: removed .*/cache/archives/[0-9a-f]*, last read ' "$T_DIR/mount.mnt.log")"
unmount_fg "$M"
head -c 5000 /dev/urandom >lab/broken.zip
printf '[datastore lab]\ntype = local\nroot = %s/lab\n[dataset broken]\nsource = lab:/broken.zip\n' "$T_DIR" >b.conf
fails "a corrupt archive is refused at mount, by name" "broken.zip" "$MLFS" mount -f b.conf "$M"
check "nothing is mounted after it" sh -c "! grep -q ' $M ' /proc/self/mounts"
t_finish
