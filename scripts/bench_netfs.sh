#!/bin/bash
# bench_netfs.sh - how fast mlfs reads from an NFS and an SMB server, next to
# each protocol's own client (nfs-cp, smbclient), `rclone mount` of an smb
# remote and smbnetfs, against the same servers in the same run.
#
# Two local servers on 127.0.0.1, started with scripts/server-nfs.sh
# (nfs-ganesha, NFSv3, rpcbind in a private network namespace) and
# scripts/server-smb.sh (smbd), on free ports, keep their data on a fresh
# tmpfs (so a drop of the page cache leaves them as they were).  Each serves
# data/big.bin (256 MiB of random bytes, the same bytes) and data/many/
# (5,000 small files), seeded before the servers start (changing ganesha's
# export behind its back can give NFS3ERR_STALE).  The ways compared:
#   nfs-cp       `nfs-cp nfs://...big.bin?version=3&nfsport=..&mountport=.. FILE`
#                (libnfs's own copy tool): it refuses /dev/null ("Failed to
#                open /dev/null"), so FILE is on the tmpfs, deleted untimed
#                after each copy (the time includes filling 256 MiB of tmpfs);
#   nfs-cat      `nfs-cat URL >/dev/null`, libnfs's other tool, for information;
#   smbclient    `smbclient //127.0.0.1/share -p PORT -A AUTHFILE
#                -c 'get data/big.bin /dev/null'`;
#   mlfs-nfs     one mlfs config with a `type = nfs` datastore "lab"
#                (options = version=3&nfsport=..&mountport=..) and the
#                dataset nfsdata (source = lab:/data): reads under
#                MOUNT/datasets/nfsdata go through mlfs's disk cache with
#                read-ahead (the path of the bars); the same file under
#                MOUNT/datastores/lab/data (straight to the server, 1 MiB FUSE
#                reads) is timed too, for information ("store read");
#   mlfs-smb     the same with a `type = smb` datastore "share" (user and
#                password_file, chmod 600) and the dataset smbdata;
#   mlfs-local   MOUNT/datastores/disk, a `type = local` datastore over a disk
#                folder holding the same 256 MiB file;
#   direct       that disk file itself after drop_caches, no FUSE (for
#                information: how fast the disk is at that moment);
#   rclone-smb   `rclone mount smb:share MNT`, an smb remote (host, port, user,
#                pass made with `rclone obscure`), default options;
#   smbnetfs     `smbnetfs MNT -f` with HOME set to a folder of its own whose
#                .smb/smbnetfs.conf (chmod 600) holds a default `auth` for the
#                test user and `host 127.0.0.1:PORT`; smbnetfs then shows
#                MNT/127.0.0.1:PORT/share/ (libsmbclient takes the port from
#                the host name it is given; `smb ports` in its smb.conf does
#                not move the port it connects to).
# cache_dir and state_dir are on disk (/var/tmp), not tmpfs.
# Each repetition times, with $EPOCHREALTIME:
#   ls -l        `ls -l data/many` (into a file on the tmpfs), right after
#                the mount, its first listing;
#   first read   `cat big.bin >/dev/null` right after that (for mlfs with an
#                empty cache_dir and state_dir), through datasets/ for mlfs;
#   store read   mlfs-nfs and mlfs-smb: the same file through datastores/;
#   cache read   mlfs-nfs and mlfs-smb: unmount, `sync; echo 3 >
#                /proc/sys/vm/drop_caches`, mount again with the same
#                cache_dir, cat through datasets/: the next job's read,
#                served from mlfs's disk cache;
#   disk read    mlfs-local, measured the same way: mount, read, unmount,
#                drop_caches, mount, cat; direct: drop_caches, cat.
# The ways take turns within each repetition (in reverse in even ones: see
# run_order in bench_lib.sh), and every timed step starts with the 640 MiB
# pre-touch of bench_lib.sh (docs/benchmarks.md, "Memory on
# this VM").  In the first repetition each read is compared with the
# original bytes (cmp, not timed; nfs-cp and smbclient copy once more into a
# tmpfs file for that), every listing must show 5,000 files, and each cache
# read prints how many MiB the server sent meanwhile (it should be about 0).
# The medians of BENCH_RUNS repetitions (default 5) are printed, with MiB/s,
# and the bars from issue 4, each PASS or FAIL:
#   first read   mlfs-nfs >= 0.8 x nfs-cp's, mlfs-smb >= 0.8 x smbclient's
#   first read   mlfs-smb >= 1.5 x rclone-smb's and >= 1.5 x smbnetfs's
#   cache read   mlfs-nfs and mlfs-smb >= 0.9 x mlfs-local's disk read
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
# A peer that fails to mount or to read is reported (with its log) and left
# out; a bar that needs it reads "n/a".  It exits non-zero only when it
# cannot measure: a server or the seeding fails, or mlfs, nfs-cp or
# smbclient cannot read.
#
# Usage (as root, from anywhere): [BENCH_RUNS=N] [BENCH_WAYS="..."] scripts/bench_netfs.sh
# It installs its packages (scripts/install-deps.sh --bench), builds mlfs
# into build/bench (RelWithDebInfo), and removes every mount, server,
# process and file it made (the Unix user mlfssmb of server-smb.sh stays).
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
. scripts/bench_servers.sh
bench=bench_netfs

bench_start "it mounts a tmpfs, starts ganesha and smbd, and drops the page cache"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLFS_WERROR=ON >/dev/null
cmake --build build/bench -j"$(nproc)" >/dev/null
MLFS=$PWD/build/bench/mlfs

FILE_SIZE=$((256 * 1024 * 1024))
NFILES=5000
PRETOUCH=$((640 * 1024 * 1024))
SMB_USER=mlfssmb		# made by server-smb.sh
SMB_PASS=${SMB_TEST_PASSWORD:-Passw0rd!}

# On disk, not tmpfs: mlfs's cache_dir and state_dir, the local datastore.
scratch=$(mktemp -d /var/tmp/mlfs-bench-netfs.XXXXXX)
chmod 755 "$scratch"
srv=$scratch/srv		# a tmpfs: the servers' data
pids=""				# processes started here that may still run
servers=""			# "script:dir" of each server started here
tmpfs_mounted=0
failed=""			# ways left out
daemon=""

trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$srv" "$scratch/disk" "$scratch/logs"
mount -t tmpfs -o size=2G,mode=755 tmpfs "$srv"
tmpfs_mounted=1

# Data, seeded before the servers start -------------------------------------
echo "$bench: seeding a 256 MiB file and $NFILES small ones for each server" >&2
t0=${EPOCHREALTIME/./}
head -c "$FILE_SIZE" /dev/urandom >"$scratch/disk/big.bin"
for d in "$srv/nfs/export/data" "$srv/smb/share/data"; do
	mkdir -p "$d/many"
	cp "$scratch/disk/big.bin" "$d/big.bin"
	(cd "$d/many" && for i in $(seq -w 1 "$NFILES"); do
		printf 'small file %s\n' "$i" >"f$i.txt"
	done)
done
echo "$bench: seeded in $(us_to_s $((${EPOCHREALTIME/./} - t0))) s" >&2

# Servers -------------------------------------------------------------------
nfsport=$(free_port)
mntport=$(free_port)
while [ "$mntport" = "$nfsport" ]; do mntport=$(free_port); done
servers="$servers nfs:$srv/nfs"
nfspid=$(scripts/server-nfs.sh start "$srv/nfs" "$nfsport" "$mntport")
smbport=$(free_port)		# ganesha listens by now: not its ports
servers="$servers smb:$srv/smb"
smbpid=$(scripts/server-smb.sh start "$srv/smb" "$smbport")
NFSOPT="version=3&nfsport=$nfsport&mountport=$mntport"
echo "$bench: ganesha (PID $nfspid) on 127.0.0.1:$nfsport (mount $mntport)," \
	"smbd (PID $smbpid) on 127.0.0.1:$smbport" >&2

# Configs -------------------------------------------------------------------
printf '%s\n' "$SMB_PASS" >"$scratch/smb.pass"
chmod 600 "$scratch/smb.pass"
cat >"$scratch/mlfs.conf" <<CONF
[mlfs]
state_dir = $scratch/mlfs-state
cache_dir = $scratch/mlfs-cache
cache_size = 2G

[datastore lab]
type = nfs
address = 127.0.0.1
export = /export
options = $NFSOPT

[datastore share]
type = smb
address = 127.0.0.1:$smbport
share = share
username = $SMB_USER
password_file = $scratch/smb.pass

[datastore disk]
type = local
root = $scratch/disk

[dataset nfsdata]
source = lab:/data

[dataset smbdata]
source = share:/data
CONF
chmod 600 "$scratch/mlfs.conf"
# smbclient's authentication file.
printf 'username = %s\npassword = %s\n' "$SMB_USER" "$SMB_PASS" >"$scratch/smbclient.auth"
chmod 600 "$scratch/smbclient.auth"
cat >"$scratch/rclone.conf" <<CONF
[smb]
type = smb
host = 127.0.0.1
port = $smbport
user = $SMB_USER
pass = $(rclone obscure "$SMB_PASS")
CONF
chmod 600 "$scratch/rclone.conf"
# smbnetfs reads HOME/.smb/{smb.conf,smbnetfs.conf}; it refuses `auth` and
# `host` lines from a config file others can read.
mkdir -p "$scratch/smbnetfs-home/.smb"
printf '[global]\n   client min protocol = SMB2_02\n' >"$scratch/smbnetfs-home/.smb/smb.conf"
cat >"$scratch/smbnetfs-home/.smb/smbnetfs.conf" <<CONF
smb_query_browsers "false"
auth "$SMB_USER" "$SMB_PASS"
host 127.0.0.1:$smbport visible=true
CONF
chmod 600 "$scratch/smbnetfs-home/.smb/smbnetfs.conf"

# Mounts --------------------------------------------------------------------
# Mounts way $1 in the foreground of a background process; sets $root to the
# folder that holds big.bin and many/ there (for mlfs: the dataset's), $store
# (mlfs-nfs, mlfs-smb: the same through datastores/) and $daemon.
mount_way() {
	local way=$1 mnt=$scratch/mnt-$1 log=$scratch/logs/$1.log

	mkdir -p "$mnt"
	store=""
	case $way in
	mlfs-*)
		"$MLFS" mount -f "$scratch/mlfs.conf" "$mnt" >>"$log" 2>&1 &
		case $way in
		mlfs-nfs) root=$mnt/datasets/nfsdata store=$mnt/datastores/lab/data ;;
		mlfs-smb) root=$mnt/datasets/smbdata store=$mnt/datastores/share/data ;;
		mlfs-local) root=$mnt/datastores/disk ;;
		esac ;;
	rclone-smb)
		rclone mount --config "$scratch/rclone.conf" smb:share "$mnt" >>"$log" 2>&1 &
		root=$mnt/data ;;
	smbnetfs)
		(cd "$scratch/smbnetfs-home" && HOME=$scratch/smbnetfs-home exec smbnetfs "$mnt" -f \
			-o config="$scratch/smbnetfs-home/.smb/smbnetfs.conf") >>"$log" 2>&1 &
		root=$mnt/127.0.0.1:$smbport/share/data ;;
	esac
	way_started "$mnt" "$log"
}

nfs_url() { echo "nfs://127.0.0.1/export/data/big.bin?$NFSOPT"; }
nfs_cp() { nfs-cp "$(nfs_url)" "$1" >"$srv/client.out" 2>&1; }
nfs_cat() { nfs-cat "$(nfs_url)" >"$1" 2>"$srv/client.out"; }
smb_get() {
	smbclient //127.0.0.1/share -p "$smbport" -A "$scratch/smbclient.auth" \
		-c "get data/big.bin $1" >"$srv/client.out" 2>&1
}

# The same for a direct client: copies once more (untimed) into the tmpfs.
check_client() {
	local ok=0

	[ "$run" = 1 ] || return 0
	"$1" "$srv/check.bin" && cmp -s "$srv/check.bin" "$scratch/disk/big.bin" || ok=1
	rm -f "$srv/check.bin"
	return $ok
}

# Bytes the server of way $1 has written so far, per process: "PID WCHAR"
# lines, for ganesha, or for smbd and its children (one per client).
server_io() {
	local p

	case $1 in
	mlfs-nfs) echo "$nfspid $(awk '$1 == "wchar:" { print $2 }' "/proc/$nfspid/io")" ;;
	mlfs-smb)
		for p in $smbpid $(ps -o pid= --ppid "$smbpid"); do
			awk -v p="$p" '$1 == "wchar:" { print p, $2 }' "/proc/$p/io" 2>/dev/null || true
		done ;;
	esac
}
# MiB written between snapshot files $1 and $2 (a process new in $2 counts
# from 0; one gone since $1 counts for nothing).
sent_mib() {
	awk 'NR == FNR { before[$1] = $2; next } { s += $2 - before[$1] }
		END { printf "%.1f", s / 1048576 }' "$1" "$2"
}

# One repetition of way $1.
measure() {
	local way=$1

	line=""
	case $way in
	nfs-cp)
		step "$way" first nfs_cp "$srv/nfscp.bin" || return 0
		rm -f "$srv/nfscp.bin"
		check_client nfs_cp || { drop_way "$way" "read wrong bytes"; return 0; } ;;
	nfs-cat)
		step "$way" first nfs_cat /dev/null || return 0
		check_client nfs_cat || { drop_way "$way" "read wrong bytes"; return 0; } ;;
	smbclient)
		step "$way" first smb_get /dev/null || return 0
		check_client smb_get || { drop_way "$way" "read wrong bytes"; return 0; } ;;
	direct | mlfs-local)
		measure_disk "$way" || return 0 ;;
	*)
		case $way in
		mlfs-*) rm -rf "$scratch/mlfs-cache" "$scratch/mlfs-state" ;;
		esac
		mount_way "$way" || { drop_way "$way" "mount failed" mount; return 0; }
		step "$way" ls list_ls "$root/many" || return 0
		check_ls || { drop_way "$way" "wrong listing"; return 0; }
		step "$way" first read_file "$root/big.bin" || return 0
		check_bytes "$root/big.bin" || { drop_way "$way" "read wrong bytes"; return 0; }
		case $way in
		mlfs-nfs | mlfs-smb)
			step "$way" store read_file "$store/big.bin" || return 0
			check_bytes "$store/big.bin" || { drop_way "$way" "store read wrong bytes"; return 0; }
			umount_way "$way"
			line="$line cache_dir $(du -sm "$scratch/mlfs-cache" | cut -f1) MiB "
			drop_caches
			mount_way "$way" || { drop_way "$way" "second mount failed" mount; return 0; }
			server_io "$way" >"$srv/io.before"
			step "$way" cache read_file "$root/big.bin" || return 0
			server_io "$way" >"$srv/io.after"
			line="$line(the server sent $(sent_mib "$srv/io.before" "$srv/io.after") MiB) "
			check_bytes "$root/big.bin" || { drop_way "$way" "cache read wrong bytes"; return 0; } ;;
		esac
		umount_way "$way" ;;
	esac
	printf '  %-12s %s\n' "$way" "$line" >&2
}

WAYS=${BENCH_WAYS:-nfs-cp nfs-cat smbclient mlfs-nfs mlfs-smb mlfs-local direct rclone-smb smbnetfs}
t_start=${EPOCHREALTIME/./}
for run in $(seq "$RUNS"); do
	echo "$bench: repetition $run of $RUNS" >&2
	# shellcheck disable=SC2086
	for way in $(run_order "$run" $WAYS); do
		way_failed "$way" || measure "$way"
	done
done
t_total=$(us_to_s $((${EPOCHREALTIME/./} - t_start)))

# Results -------------------------------------------------------------------
declare -A med
for way in $WAYS; do
	for m in first store cache disk ls; do
		if ! way_failed "$way" && [ -s "$scratch/res-$way-$m" ]; then
			med[$way.$m]=$(median_s "$scratch/res-$way-$m")
		fi
	done
done

echo
echo "mlfs NFS/SMB benchmark: $RUNS repetitions, medians; 256 MiB file, $NFILES-file folder"
echo "nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null) (NFSv3) and" \
	"smbd $(smbd -V 2>/dev/null | awk '{ print $2 }') on 127.0.0.1, data on tmpfs;" \
	"mlfs cache_dir on disk"
echo "kernel $(uname -r), $(nproc) CPUs; measuring took $t_total s"
echo
printf '%-11s %18s %18s %18s %8s\n' way "first read s(MiB/s)" "store read" "cache/disk read" "ls -l s"
for way in $WAYS; do
	again=$(cell "$way" cache)
	case $way in mlfs-local | direct) again=$(cell "$way" disk) ;; esac
	printf '%-11s %18s %18s %18s %8s\n' "$way" "$(cell "$way" first)" \
		"$(cell "$way" store)" "$again" "$(cell "$way" ls)"
done
echo "(mlfs-nfs/-smb: first and cache read through datasets/, store read through datastores/)"
if [ -n "$failed" ]; then
	echo "left out (see above):$failed"
fi

nbars=0
nfail=0
nna=0
echo
echo "bars (throughput ratios):"
bar "first read: mlfs-nfs / nfs-cp" mlfs-nfs.first nfs-cp.first 0.8
bar "first read: mlfs-smb / smbclient" mlfs-smb.first smbclient.first 0.8
bar "first read: mlfs-smb / rclone-smb" mlfs-smb.first rclone-smb.first 1.5
bar "first read: mlfs-smb / smbnetfs" mlfs-smb.first smbnetfs.first 1.5
bar "cache read: mlfs-nfs / mlfs-local disk read" mlfs-nfs.cache mlfs-local.disk 0.9
bar "cache read: mlfs-smb / mlfs-local disk read" mlfs-smb.cache mlfs-local.disk 0.9
echo "for information (throughput ratios; for ls -l, the peer's time / mlfs's):"
info "store read: mlfs-nfs datastores/ / nfs-cp" mlfs-nfs.store nfs-cp.first
info "first read: mlfs-nfs / nfs-cat" mlfs-nfs.first nfs-cat.first
info "first read: nfs-cat / nfs-cp" nfs-cat.first nfs-cp.first
info "store read: mlfs-smb datastores/ / smbclient" mlfs-smb.store smbclient.first
info "first read: rclone-smb / smbclient" rclone-smb.first smbclient.first
info "first read: smbnetfs / smbclient" smbnetfs.first smbclient.first
info "cache read: mlfs-nfs / direct disk read" mlfs-nfs.cache direct.disk
info "cache read: mlfs-smb / direct disk read" mlfs-smb.cache direct.disk
info "disk read: mlfs-local / direct" mlfs-local.disk direct.disk
info "ls -l: rclone-smb time / mlfs-smb time" mlfs-smb.ls rclone-smb.ls
info "ls -l: smbnetfs time / mlfs-smb time" mlfs-smb.ls smbnetfs.ls
info "ls -l: mlfs-smb time / mlfs-nfs time" mlfs-nfs.ls mlfs-smb.ls

echo
if [ "$nna" -gt 0 ]; then
	echo "RESULT: $nfail of $nbars bars FAIL, $nna could not be measured"
elif [ "$nfail" -eq 0 ]; then
	echo "RESULT: all $nbars bars pass"
else
	echo "RESULT: $nfail of $nbars bars FAIL (a benchmark: exiting 0 all the same)"
fi
case " $failed " in
*" mlfs-"* | *" nfs-cp "* | *" smbclient "*)
	echo "$bench: could not measure mlfs, nfs-cp or smbclient, so some bars are missing" >&2
	exit 1 ;;
esac
exit 0
