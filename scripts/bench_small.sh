#!/bin/bash
# bench_small.sh - epochs of a dataset of many small files (issue 21): how
# fast 8 parallel readers walk it through mlfs, first from the server, then
# from the page cache, then from mlfs's disk cache in the next job, on S3,
# HTTP, NFS, SMB and FTP, next to each protocol's own client, rclone, s3fs,
# tmpfs and a plain disk folder, in the same run.
#
# The dataset: BENCH_FILES files (default 2,000) of random bytes, each of a
# random size from 64 to 256 KiB (the same sizes every run: RANDOM is
# seeded), in folders of 250 (small/d000/f000001.bin ...), as a
# classification set keeps one folder per class, dated an hour back.  It is
# seeded on disk (/var/tmp, the disk that holds mlfs's cache_dir), copied to a fresh tmpfs
# for the servers (so a drop of the page cache leaves them as they were),
# and PUT into the bucket by SigV4-signed curl:
#   S3     s3rver 3.7.1 (scripts/server-s3rver.sh ... 3): not the
#          signature-checking 5 fork, because s3fs and rclone ask for
#          `GET /bucket/`, which the fork refuses (bench_remote.sh says more);
#          testbucket/small/...
#   HTTP   nginx autoindex (scripts/server-nginx.sh), www/small/...
#   NFS    nfs-ganesha, NFSv3 (scripts/server-nfs.sh), /export/small/...
#   SMB    smbd (scripts/server-smb.sh), //127.0.0.1/share/small/...
#   FTP    vsftpd, anonymous (scripts/server-vsftpd.sh), /small/...
# all on 127.0.0.1, on free ports, the NFS and SMB data seeded before those
# servers start.
#
# An epoch is `find DIR -type f | xargs -P 8 -n 16 cat >/dev/null`: 8
# parallel readers, as a DataLoader with 8 workers (BENCH_READERS=N for N:
# 1 is the single sequential reader the read-ahead across files is for),
# timed with $EPOCHREALTIME.  The ways:
#   mlfs-B-sets    mlfs's MOUNT/datasets/small, a dataset whose source is the
#                  folder small/ of a datastore of backend B (s3, http, nfs,
#                  smb, ftp): one config per backend, cache_dir and state_dir on
#                  disk; the path the bars are about;
#   mlfs-B-stores  the same files under MOUNT/datastores/NAME/small, for
#                  information (NFS and SMB reads there go straight to the
#                  server; S3 and HTTP revalidate each open);
#   rclone-s3      `rclone mount s3:testbucket MNT --vfs-cache-mode full
#                  --cache-dir DIR` (provider Other, under env -u
#                  AWS_CA_BUNDLE), rclone-http the same for `web:` (type http),
#                  rclone-ftp for `ftpd:` (type ftp, anonymous);
#   s3fs           `s3fs testbucket MNT -o url=.. -o use_path_request_style
#                  -o passwd_file=..`, defaults otherwise (no local cache);
#   for each of those three steps:
#     first        fresh mount, empty cache folder, epoch;
#     second       another epoch in the same mount;
#     next job     unmount, every file of the cache folder read once
#                  (host_warm_tree in bench_lib.sh: for the VM's host, whose
#                  cache drop_caches does not reach), `sync; echo 3
#                  >/proc/sys/vm/drop_caches`, mount again with the same
#                  cache folder, epoch;
#   and for mlfs, beside each time, the delta of datastore.NAME.requests in
#   MOUNT/.mlfs/stats over the epoch: what reached the server.
# The references, one epoch each ("first"), the same 8 x 16 split of the
# same list of files (no listing: the list is known beforehand):
#   curl-s3        8 parallel SigV4-signed `curl` processes, 16 objects each
#                  (one connection per process);
#   curl-http      the same, unsigned, from nginx;
#   curl-ftp       the same from vsftpd (one login per process; -R: MDTM first);
#   nfs-cat        8 parallel loops of `nfs-cat URL >/dev/null` (libnfs-utils:
#                  one connection per file);
#   smbclient      8 parallel `smbclient -c 'get F /dev/null; ...'`, 16 files
#                  each (one connection per process);
#   tmpfs          the epoch over the servers' own tmpfs copy (www/small):
#                  the floor;
#   disk           the plain copy on the cache's disk read once (as the
#                  cache folder is), drop_caches, then the epoch over it:
#                  what the next job's epoch is compared with (shown in the
#                  "next job" column).
# The ways take turns in each of BENCH_RUNS repetitions (default 3), in
# reverse in even ones (run_order in bench_lib.sh), and every timed epoch
# starts with a pre-touch of twice the dataset's bytes on the tmpfs
# (bench_lib.sh; docs/benchmarks.md, "Memory on this VM").  Each epoch's
# CPU (server, daemon, readers; /proc, 10 ms ticks) is kept for the first
# epochs: on 2 CPUs their sum over 2 is the least the epoch can take.
# Honesty checks: the references count the bytes they got (curl's
# size_download, smbclient's "of size" lines; nfs-cat's output through
# `wc -c` in an untimed pass of the first repetition); in the first
# repetition every mount's tree is read again after the second and the
# next-job epoch (untimed) and its bytes, in path order, must have the
# original's md5sum.  S3 and HTTP ways also print what the server logged
# (s3rver's request lines, nginx's access log) beside mlfs's own count.
# Printed: one row per way with the medians of its first, second and
# next-job epochs (MiB/s in brackets) and of mlfs's requests per epoch, and
# the bars of issue 21, each PASS or FAIL (requests: the most of any run):
#   first      mlfs-s3-sets, mlfs-http-sets at most 2x curl-s3's, curl-http's
#              time, and at least 2x faster than rclone-s3 and s3fs,
#              rclone-http; mlfs-nfs-sets, mlfs-smb-sets no slower than the
#              same backend's -stores;
#   second     each mlfs-B-sets at most 2x tmpfs, zero requests;
#   next job   each mlfs-B-sets at most 2x the disk's cold epoch, fewer
#              than one request per 10 files (the folders' listings, no
#              request per file).
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
# A peer that fails to mount or to read is reported and left out; its bars
# read n/a.  It exits non-zero only when it cannot measure: a server or the
# seeding fails, or mlfs, curl, nfs-cat or smbclient cannot read.
#
# BENCH_BIG=N (e.g. 100000) is another mode, for the scale figures: N tiny
# files (1 KiB) in folders of 1,000, mlfs's datasets/ on each backend only,
# each mount's first step an `ls -lR` of the dataset (timed, with its
# requests) next to the server's own listing (`aws s3 ls --recursive`, one
# curl of every folder's index, `nfs-ls -R`, `smbclient -c 'recurse; ls'`),
# and per cached object: the files in cache_dir and the daemon's resident
# memory grown since the mount (after the second epoch, and at rest in the
# next job).  Bars: ls -lR at most 2x the server's listing, cached (second)
# epoch at most 3x tmpfs, at most 2 files and 1 KiB of daemon memory per
# cached object.  It takes long (100,000 objects, BENCH_RUNS=1: 18 minutes
# on 2 CPUs, 95 s of them seeding); use BENCH_RUNS=1.  A default run takes
# about 8 minutes there.
#
# Usage (as root, from anywhere):
#   [BENCH_FILES=N] [BENCH_RUNS=N] [BENCH_READERS=N] [BENCH_WAYS="way ..."] [MLFS=BINARY] \
#	scripts/bench_small.sh
#   BENCH_BIG=100000 BENCH_RUNS=1 scripts/bench_small.sh
# It installs its packages (scripts/install-deps.sh --bench), builds mlfs
# into build/bench (RelWithDebInfo) unless MLFS names a binary, and removes every mount, server,
# process and file it made (the Unix user mlfssmb of server-smb.sh stays).
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
. scripts/bench_servers.sh
bench=bench_small

BIG=${BENCH_BIG:-0}
case $BIG in '' | *[!0-9]*) echo "$bench: BENCH_BIG must be a number" >&2; exit 2 ;; esac
if [ "$BIG" -gt 0 ]; then
	NFILES=$BIG
	PER_DIR=1000
else
	NFILES=${BENCH_FILES:-2000}
	PER_DIR=250
fi
case $NFILES in
'' | *[!0-9]* | 0) echo "$bench: BENCH_FILES must be a positive integer" >&2; exit 2 ;;
esac
[ "$NFILES" -le 999999 ] || { echo "$bench: at most 999,999 files" >&2; exit 2; }
BENCH_RUNS=${BENCH_RUNS:-3}
READERS=${BENCH_READERS:-8}
case $READERS in
'' | *[!0-9]* | 0) echo "$bench: BENCH_READERS must be a positive integer" >&2; exit 2 ;;
esac

bench_start "it mounts a tmpfs, starts ganesha and smbd, and drops the page cache"
if [ -n "${MLFS:-}" ]; then
	MLFS=$(readlink -f "$MLFS")
	[ -x "$MLFS" ] || { echo "$bench: MLFS=$MLFS is not an executable" >&2; exit 2; }
else
	cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLFS_WERROR=ON >/dev/null
	cmake --build build/bench -j"$(nproc)" >/dev/null
	MLFS=$PWD/build/bench/mlfs
fi

SMB_USER=mlfssmb		# made by server-smb.sh
SMB_PASS=${SMB_TEST_PASSWORD:-Passw0rd!}
NDIRS=$(((NFILES + PER_DIR - 1) / PER_DIR))

# On disk, not tmpfs: the caches, mlfs's state, the plain copy.
scratch=$(mktemp -d /var/tmp/mlfs-bench-small.XXXXXX)
chmod 755 "$scratch"		# nginx's workers walk down to srv/http/www
srv=$scratch/srv		# a tmpfs: the servers' data
pids=""				# processes started here that may still run
servers=""			# "script:dir" of each server started here
tmpfs_mounted=0
failed=""			# ways left out
daemon=""

trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$BIG" -gt 0 ]; then
	WAYS=${BENCH_WAYS:-tmpfs disk list-s3 mlfs-s3-sets list-http mlfs-http-sets list-nfs mlfs-nfs-sets list-smb mlfs-smb-sets}
else
	WAYS=${BENCH_WAYS:-tmpfs disk curl-s3 mlfs-s3-sets mlfs-s3-stores rclone-s3 s3fs curl-http mlfs-http-sets mlfs-http-stores rclone-http nfs-cat mlfs-nfs-sets mlfs-nfs-stores smbclient mlfs-smb-sets mlfs-smb-stores curl-ftp mlfs-ftp-sets mlfs-ftp-stores rclone-ftp}
fi
# The backend a way reads from (none for tmpfs and disk).
backend_of() {
	case $1 in
	*s3*) echo s3 ;;
	*http*) echo http ;;
	*nfs*) echo nfs ;;
	*smb*) echo smb ;;
	*ftp*) echo ftp ;;
	esac
}
needs() {
	local w
	for w in $WAYS; do [ "$(backend_of "$w")" != "$1" ] || return 0; done
	return 1
}

# The dataset ----------------------------------------------------------------
echo "$bench: seeding $NFILES files in $NDIRS folders" >&2
t0=${EPOCHREALTIME/./}
RANDOM=21			# the same sizes in every run
: >"$scratch/keys"
pad=$(printf '%1000s' '')
for d in $(seq 0 $((NDIRS - 1))); do
	printf -v dir 'small/d%03d' "$d"
	mkdir -p "$scratch/disk/$dir"
	for i in $(seq $((d * PER_DIR + 1)) $(((d + 1) * PER_DIR))); do
		[ "$i" -le "$NFILES" ] || break
		printf -v f '%s/f%06d.bin' "$dir" "$i"
		echo "$f" >>"$scratch/keys"
		if [ "$BIG" -gt 0 ]; then
			printf 'tiny file %06d\n%s\n' "$i" "$pad" >"$scratch/disk/$f"
		else
			head -c $((65536 + ((RANDOM << 15) | RANDOM) % 196609)) /dev/urandom \
				>"$scratch/disk/$f"
		fi
	done
done
TOTAL=$(find "$scratch/disk/small" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
FILE_SIZE=$TOTAL		# for mibps and cell in bench_lib.sh: an epoch's bytes
PRETOUCH=$((2 * TOTAL > 268435456 ? 2 * TOTAL : 268435456))
# The md5sum of every file's bytes in path order, from inside the folder.
tree_sum() { (cd "$1" && find . -type f | sort | xargs cat | md5sum | cut -d' ' -f1); }
REF_SUM=$(tree_sum "$scratch/disk/small")
# Dated an hour back, as a dataset is that was not written a minute ago: an
# index page's date to the minute names a version once it is two minutes old.
find "$scratch/disk/small" -exec touch -d '1 hour ago' {} +

mkdir -p "$srv" "$scratch/logs" "$scratch/bin"
# Five copies (www, export, share, pub, the bucket), the pre-touch, and for
# tiny files a page or more each per copy.
mount -t tmpfs -o "size=$(((7 * TOTAL + 40960 * NFILES) / 1048576 + 1024))M,mode=755" tmpfs "$srv"
tmpfs_mounted=1
for d in "$srv/http/www" "$srv/nfs/export" "$srv/smb/share" "$srv/ftp/pub"; do
	mkdir -p "$d"
	cp -a "$scratch/disk/small" "$d/small"
done
echo "$bench: $NFILES files, $(awk -v b="$TOTAL" 'BEGIN { printf "%.1f", b / 1048576 }') MiB," \
	"seeded in $(us_to_s $((${EPOCHREALTIME/./} - t0))) s" >&2

# Servers --------------------------------------------------------------------
s3pid="" httppid="" nfspid="" smbpid="" ftppid=""
if needs s3; then
	s3port=$(free_port)
	S3=http://127.0.0.1:$s3port
	mkdir -p "$srv/s3"
	servers="$servers s3rver:$srv/s3"
	s3pid=$(scripts/server-s3rver.sh start "$srv/s3" "$s3port" 3)
	wait_http "$S3/testbucket"
	t0=${EPOCHREALTIME/./}
	# One curl a folder ("f[000001-000250].bin" is curl's glob), 4 at once.
	for d in $(seq 0 $((NDIRS - 1))); do
		first=$((d * PER_DIR + 1)) last=$(((d + 1) * PER_DIR))
		[ "$last" -le "$NFILES" ] || last=$NFILES
		(cd "$scratch/disk/small/$(printf 'd%03d' "$d")" &&
			s3curl -T "$(printf 'f[%06d-%06d].bin' "$first" "$last")" \
				"$S3/testbucket/small/$(printf 'd%03d' "$d")/" >/dev/null) &
		[ $((d % 4)) -ne 3 ] || wait
	done
	wait
	echo "$bench: s3rver 3.7.1 (PID $s3pid) on $S3, objects PUT in" \
		"$(us_to_s $((${EPOCHREALTIME/./} - t0))) s" >&2
fi
if needs http; then
	httpport=$(free_port)
	WEB=http://127.0.0.1:$httpport
	servers="$servers nginx:$srv/http"
	httppid=$(scripts/server-nginx.sh start "$srv/http" "$httpport")
	wait_http "$WEB/"
	echo "$bench: nginx (PID $httppid) on $WEB" >&2
fi
if needs nfs; then
	nfsport=$(free_port)
	mntport=$(free_port)
	while [ "$mntport" = "$nfsport" ]; do mntport=$(free_port); done
	servers="$servers nfs:$srv/nfs"
	nfspid=$(scripts/server-nfs.sh start "$srv/nfs" "$nfsport" "$mntport")
	NFSOPT="version=3&nfsport=$nfsport&mountport=$mntport"
	echo "$bench: ganesha (PID $nfspid) on 127.0.0.1:$nfsport (mount $mntport)" >&2
fi
if needs smb; then
	smbport=$(free_port)
	servers="$servers smb:$srv/smb"
	smbpid=$(scripts/server-smb.sh start "$srv/smb" "$smbport")
	echo "$bench: smbd (PID $smbpid) on 127.0.0.1:$smbport" >&2
fi
if needs ftp; then	# last: its passive ports are the 100 after its own
	ftpport=$(free_port)
	servers="$servers vsftpd:$srv/ftp"
	ftppid=$(scripts/server-vsftpd.sh start "$srv/ftp" "$ftpport")
	echo "$bench: vsftpd (PID $ftppid) on 127.0.0.1:$ftpport" >&2
fi

# Configs --------------------------------------------------------------------
# One mlfs config per backend, each with its datastore and the dataset
# "small" over its folder small/; cache_dir and state_dir per backend.
mlfs_conf() {
	local b=$1
	printf '[mlfs]\nstate_dir = %s\ncache_dir = %s\ncache_size = 4G\n\n' \
		"$scratch/state-$b" "$scratch/cache-$b"
	case $b in
	s3) printf '[datastore s3]\ntype = s3\nendpoint = %s\nbucket = testbucket\n%s\n%s\n' \
		"$S3" "access_key_id = S3RVER" "secret_access_key = S3RVER" ;;
	http) printf '[datastore web]\ntype = http\nurl = %s/\n' "$WEB" ;;
	nfs) printf '[datastore lab]\ntype = nfs\naddress = 127.0.0.1\nexport = /export\noptions = %s\n' \
		"$NFSOPT" ;;
	smb) printf '[datastore share]\ntype = smb\naddress = 127.0.0.1:%s\nshare = share\n%s\n%s\n' \
		"$smbport" "username = $SMB_USER" "password_file = $scratch/smb.pass" ;;
	ftp) printf '[datastore ftpd]\ntype = ftp\nurl = ftp://127.0.0.1:%s/\n' "$ftpport" ;;
	esac
	printf '\n[dataset small]\nsource = %s:/small\n' "$(store_of "$b")"
}
# The datastore's NAME in each config.
store_of() {
	case $1 in s3) echo s3 ;; http) echo web ;; nfs) echo lab ;; smb) echo share ;; ftp) echo ftpd ;; esac
}
printf '%s\n' "$SMB_PASS" >"$scratch/smb.pass"
chmod 600 "$scratch/smb.pass"
for b in s3 http nfs smb ftp; do
	if needs "$b"; then
		mlfs_conf "$b" >"$scratch/mlfs-$b.conf"
		chmod 600 "$scratch/mlfs-$b.conf"
	fi
done
cat >"$scratch/rclone.conf" <<CONF
[s3]
type = s3
provider = Other
access_key_id = S3RVER
secret_access_key = S3RVER
endpoint = ${S3:-}
region = us-east-1

[web]
type = http
url = ${WEB:-}/

[ftpd]
type = ftp
host = 127.0.0.1
port = ${ftpport:-21}
user = anonymous
pass = $(rclone obscure anonymous 2>/dev/null || true)
CONF
chmod 600 "$scratch/rclone.conf"
echo "S3RVER:S3RVER" >"$scratch/s3fs.passwd"
chmod 600 "$scratch/s3fs.passwd"
printf 'username = %s\npassword = %s\n' "$SMB_USER" "$SMB_PASS" >"$scratch/smbclient.auth"
chmod 600 "$scratch/smbclient.auth"

# The references' readers: each takes up to 16 keys (small/d000/f000001.bin)
# as xargs hands them.  The byte counts go to $srv/out/ (one file per
# process), summed by got_bytes.
export S3="${S3:-}" WEB="${WEB:-}" NFSOPT="${NFSOPT:-}" smbport="${smbport:-}" \
	ftpport="${ftpport:-}" srv scratch
cat >"$scratch/bin/get-s3" <<'SH'
#!/bin/bash
a=()
for k; do a+=(-o /dev/null "$S3/testbucket/$k"); done
exec curl -sSf --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER \
	-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -w '%{size_download}\n' "${a[@]}" \
	>"$srv/out/$$"
SH
cat >"$scratch/bin/get-http" <<'SH'
#!/bin/bash
a=()
for k; do a+=(-o /dev/null "$WEB/$k"); done
exec curl -sSf -w '%{size_download}\n' "${a[@]}" >"$srv/out/$$"
SH
# -R (MDTM before each RETR, as mlfs sends): without it libcurl 7.88 may
# wait a second after an EPSV answered at once before it connects the data
# channel (docs/benchmarks.md, FTP).
cat >"$scratch/bin/get-ftp" <<'SH'
#!/bin/bash
a=()
for k; do a+=(-o /dev/null "ftp://127.0.0.1:$ftpport/$k"); done
exec curl -sSf -R -w '%{size_download}\n' "${a[@]}" >"$srv/out/$$"
SH
# nfs-cat: with CHECK=1 (an untimed pass), counts each file's bytes.
cat >"$scratch/bin/get-nfs" <<'SH'
#!/bin/bash
for k; do
	if [ -n "${CHECK:-}" ]; then
		nfs-cat "nfs://127.0.0.1/export/$k?$NFSOPT" | wc -c >>"$srv/out/$$" || exit 1
	else
		nfs-cat "nfs://127.0.0.1/export/$k?$NFSOPT" >/dev/null || exit 1
	fi
done
SH
# smbclient prints "getting file \small\d000\f000001.bin of size N as ...".
cat >"$scratch/bin/get-smb" <<'SH'
#!/bin/bash
c=""
for k; do c="$c get $k /dev/null;"; done
smbclient //127.0.0.1/share -p "$smbport" -A "$scratch/smbclient.auth" -c "$c" 2>&1 |
	awk '/ of size / { for (i = 1; i < NF; i++) if ($i == "size") print $(i + 1) }
		/NT_STATUS/ { print "error: " $0 >"/dev/stderr"; bad = 1 } END { exit bad }' \
	>"$srv/out/$$"
SH
chmod 755 "$scratch/bin"/get-*

# What the epochs run -------------------------------------------------------
# shellcheck disable=SC2038  # the names are f000001.bin and the like
epoch() { (set -o pipefail; find "$1" -type f | xargs -P "$READERS" -n 16 cat >/dev/null); }
ref_epoch() { xargs -P "$READERS" -n 16 "$scratch/bin/$1" <"$scratch/keys"; }
# Bytes the references' readers counted since the last reset_out.
reset_out() { rm -rf "$srv/out"; mkdir -p "$srv/out"; }
got_bytes() { cat "$srv/out"/* 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# Mounts ---------------------------------------------------------------------
# Mounts way $1 in the foreground of a background process; sets $root (the
# dataset's folder there), $stats (mlfs's stats file, else empty), $daemon.
mount_way() {
	local way=$1 mnt=$scratch/mnt-$1 log=$scratch/logs/$1.log b

	b=$(backend_of "$way")
	mkdir -p "$mnt"
	stats=""
	case $way in
	mlfs-*)
		"$MLFS" mount -f "$scratch/mlfs-$b.conf" "$mnt" >>"$log" 2>&1 &
		stats=$mnt/.mlfs/stats
		case $way in
		*-sets) root=$mnt/datasets/small ;;
		*-stores) root=$mnt/datastores/$(store_of "$b")/small ;;
		esac ;;
	rclone-s3)
		# At the prefix, not the bucket: s3rver 3.7.1 leaves "small/" out
		# of the bucket's root listing (a common prefix of keys two
		# levels down), so MNT/small would not be found.
		env -u AWS_CA_BUNDLE rclone mount --config "$scratch/rclone.conf" \
			--vfs-cache-mode full --cache-dir "$scratch/cache-$way" \
			s3:testbucket/small "$mnt" >>"$log" 2>&1 &
		root=$mnt ;;
	rclone-http)
		rclone mount --config "$scratch/rclone.conf" --vfs-cache-mode full \
			--cache-dir "$scratch/cache-$way" web: "$mnt" >>"$log" 2>&1 &
		root=$mnt/small ;;
	rclone-ftp)
		rclone mount --config "$scratch/rclone.conf" --vfs-cache-mode full \
			--cache-dir "$scratch/cache-$way" ftpd: "$mnt" >>"$log" 2>&1 &
		root=$mnt/small ;;
	s3fs)
		s3fs testbucket "$mnt" -f -o url="$S3" -o use_path_request_style \
			-o passwd_file="$scratch/s3fs.passwd" >>"$log" 2>&1 &
		root=$mnt/small ;;
	esac
	way_started "$mnt" "$log"
}

# The cache folder way $1 fills (emptied before each first epoch: retire).
cache_of() {
	case $1 in
	mlfs-*) echo "$scratch/cache-$(backend_of "$1")" ;;
	*) echo "$scratch/cache-$1" ;;
	esac
}

# mlfs's count of requests to the server so far (0 for the other ways).
mlfs_requests() {
	if [ -z "$stats" ] || [ ! -r "$stats" ]; then
		echo 0
		return
	fi
	awk -v k="datastore.$(store_of "$(backend_of "$1")").requests" \
		'$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$stats"
}
# The requests the server logged so far: s3rver's request lines ("PATH
# STATUS 3ms 2b", the size blank for a 304, "-" for a 404), nginx's access
# log, vsftpd's commands that ask for something (RETR, SIZE, MDTM, LIST);
# nothing for NFS and SMB.
s3_log_re=' [1-5][0-9][0-9] [0-9]+ms( [^ ]*)?$'
server_requests() {
	case $(backend_of "$1") in
	s3) grep -cE "$s3_log_re" "$srv/s3/s3rver.log" || true ;;
	http) wc -l <"$srv/http/access.log" ;;
	ftp) ftp_asks | wc -l ;;
	*) echo "" ;;
	esac
}
# What the requests after the first $2 of way $1's server were: nginx's
# log names the method (HEAD or GET), s3rver's only the status (200, 206
# for a range, 304 for a revalidation that sent no body).
server_mix() {
	case $(backend_of "$1") in
	s3) grep -E "$s3_log_re" "$srv/s3/s3rver.log" | tail -n "+$(($2 + 1))" |
		awk '{ for (i = NF; i > 1; i--) if ($i ~ /^[0-9]+ms$/) { n[$(i - 1)]++; break } }
			END { for (m in n) printf " %s %d", m, n[m] }' ;;
	http) tail -n "+$(($2 + 1))" "$srv/http/access.log" |
		awk '{ n[substr($6, 2)]++ } END { for (m in n) printf " %s %d", m, n[m] }' ;;
	ftp) ftp_asks | tail -n "+$(($2 + 1))" |
		awk '{ n[$1]++ } END { for (m in n) printf " %s %d", m, n[m] }' ;;
	esac
}
# vsftpd's log of commands, one per line (RETR, SIZE, MDTM, LIST), and its logins (LOGIN).
ftp_asks() {
	sed -n -e 's/.*FTP command: Client "[^"]*", "\(RETR\|SIZE\|MDTM\|LIST\).*/\1/p' \
		-e 's/.*OK LOGIN: .*/LOGIN/p' "$srv/ftp/vsftpd.log"
}

# CPU of the first epochs (step in bench_lib.sh): server, daemon, readers.
cpu_step=first
# Ticks of process $1 and of the children it has reaped.
all_ticks() {
	local v
	v=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }')
	echo "${v:-0}"
}
cpu_now() {
	local p s=0 d=0
	case $(backend_of "$1") in
	s3) s=$(all_ticks "$s3pid") ;;
	http) for p in $(pgrep -P "$httppid" || true); do s=$((s + $(ticks "$p"))); done ;;
	nfs) s=$(all_ticks "$nfspid") ;;
	smb)	# the main smbd with the children it reaped, and the live ones
		s=$(all_ticks "$smbpid")
		for p in $(pgrep -P "$smbpid" || true); do s=$((s + $(ticks "$p"))); done ;;
	ftp)	# vsftpd forks a process per login, and another per login after it
		s=$(all_ticks "$ftppid")
		for p in $(pgrep -P "$ftppid" || true); do s=$((s + $(all_ticks "$p"))); done ;;
	esac
	[ -z "${daemon:-}" ] || d=$(ticks "$daemon")
	echo "$s $d $(ticks $$ children)"
}

# Times step $2 of way $1 (step in bench_lib.sh): command $3... or, by
# default, an epoch over $root; keeps the requests mlfs counted
# ($scratch/req-WAY-STEP) and the server logged ($scratch/srq-WAY-STEP)
# meanwhile.
epoch_step() {
	local way=$1 name=$2 r0 s0 r s
	shift 2
	[ $# -gt 0 ] || set -- epoch "$root"

	r0=$(mlfs_requests "$way")
	s0=$(server_requests "$way")
	step "$way" "$name" "$@" || return 1
	r=$(($(mlfs_requests "$way") - r0))
	[ -z "$stats" ] || echo "$r" >>"$scratch/req-$way-$name"
	line="${line}[$([ -z "$stats" ] || echo "$r req")"
	if [ -n "$s0" ]; then
		s=$(($(server_requests "$way") - s0))
		echo "$s" >>"$scratch/srq-$way-$name"
		line="$line, server $s"
		[ "$s" -eq 0 ] || line="$line:$(server_mix "$way" "$s0")"
	fi
	line="$line] "
}

# In the first repetition, the tree under $root must hold the original bytes.
check_tree() {
	[ "$run" = 1 ] || return 0
	[ "$(tree_sum "$root")" = "$REF_SUM" ]
}

# Per object: files in cache folder $1 (to $line).
cache_line() {
	local n
	[ -d "$1" ] || return 0
	n=$(find "$1" -type f | wc -l)
	echo "$n" >>"$scratch/cfiles-$way"
	line="$line cache $n files, $(du -sm "$1" | cut -f1) MiB "
}
# Resident memory of the daemon, in KiB.
rss_kib() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$daemon/status" 2>/dev/null || echo 0; }

# ls -lR of the dataset (BENCH_BIG): into a file on the tmpfs, counted after
# by check_list (files: lines of ls -l that start with "-"; the servers'
# listings: lines that name a file).
list_tree() { ls -lR "$1" >"$srv/ls.out"; }
check_list() {
	local n
	n=$(grep -c "${1:-^-}" "$srv/ls.out" || true)
	[ "$n" = "$NFILES" ] || { echo "$bench: the listing showed $n files, not $NFILES" >&2; return 1; }
}
# The servers' own listings of the dataset (BENCH_BIG).
list_s3() {
	env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 \
		aws --endpoint-url "$S3" s3 ls --recursive s3://testbucket/small/ >"$srv/ls.out"
}
list_http() {	# one curl, one connection, every index page
	curl -sSf "$WEB/small/" "$WEB/small/d[000-$(printf '%03d' $((NDIRS - 1)))]/" >"$srv/ls.out"
}
list_nfs() { nfs-ls -R "nfs://127.0.0.1/export/small?$NFSOPT" >"$srv/ls.out"; }
list_smb() {
	smbclient //127.0.0.1/share -p "$smbport" -A "$scratch/smbclient.auth" \
		-c 'recurse; ls small\*' >"$srv/ls.out" 2>&1
}

# Empties a way's cache and state folders ($@) before its first epoch by moving them
# aside, into $scratch/old (removed with $scratch at the end): ext4 without a journal (this
# VM's disk) does not reuse an inode freed in the last 60 s (360 s while its table block is
# dirty), and each file made then scans past every such inode, so a first epoch right after
# an rm -rf of the last one's 4,000 cache files spent half of mlfs's CPU in the allocator,
# which a first epoch on a node does not.  The scale mode's caches are too big to keep: it
# removes them (its first epochs carry that cost).
retire() {
	local d
	for d in "$@"; do
		[ -e "$d" ] || continue
		if [ "$BIG" -gt 0 ]; then
			rm -rf "$d"
		else
			mkdir -p "$scratch/old"
			mv "$d" "$(mktemp -d "$scratch/old/XXXXXX")/"
		fi
	done
}

# The three epochs of a mount way $1.
measure_mount() {
	local way=$1 cache rss0

	cache=$(cache_of "$way")
	retire "$cache" "$scratch/state-$(backend_of "$way")"
	mount_way "$way" || { drop_way "$way" "mount failed" mount; return 1; }
	rss0=$(rss_kib)
	if [ "$BIG" -gt 0 ]; then
		line="${line}[$(mlfs_requests "$way") req at mount] "
		epoch_step "$way" ls list_tree "$root" || return 1
		check_list || { drop_way "$way" "wrong listing"; return 1; }
	fi
	epoch_step "$way" first || return 1
	epoch_step "$way" second || return 1
	check_tree || { drop_way "$way" "read wrong bytes"; return 1; }
	cache_line "$cache"
	if [ "$BIG" -gt 0 ]; then
		echo $(($(rss_kib) - rss0)) >>"$scratch/rss-$way"
		line="$line rss +$(($(rss_kib) - rss0)) KiB "
	fi
	umount_way "$way"
	host_warm_tree "$cache"		# as the disk reference's files are (bench_lib.sh)
	drop_caches
	mount_way "$way" || { drop_way "$way" "second mount failed" mount; return 1; }
	rss0=$(rss_kib)
	epoch_step "$way" next || return 1
	check_tree || { drop_way "$way" "next job read wrong bytes"; return 1; }
	if [ "$BIG" -gt 0 ]; then
		echo $(($(rss_kib) - rss0)) >>"$scratch/rss-next-$way"
		line="$line next rss +$(($(rss_kib) - rss0)) KiB "
	fi
	umount_way "$way"
}

# A reference's epoch with reader $2, whose bytes must add up to $TOTAL.
measure_ref() {
	local way=$1 got

	reset_out
	step "$way" first ref_epoch "$2" || return 1
	if [ "$2" = get-nfs ]; then
		[ "$run" = 1 ] || return 0
		reset_out
		CHECK=1 ref_epoch get-nfs || { drop_way "$way" "check pass failed"; return 1; }
	fi
	got=$(got_bytes)
	[ "$got" = "$TOTAL" ] || { drop_way "$way" "got $got bytes, not $TOTAL"; return 1; }
}

# One repetition of way $1.
measure() {
	local way=$1

	line=""
	stats=""
	daemon=""
	case $way in
	tmpfs) step "$way" first epoch "$srv/http/www/small" || return 0 ;;
	disk)
		host_warm_tree "$scratch/disk/small"
		drop_caches
		step "$way" next epoch "$scratch/disk/small" || return 0 ;;
	curl-s3) measure_ref "$way" get-s3 || return 0 ;;
	curl-http) measure_ref "$way" get-http || return 0 ;;
	curl-ftp) measure_ref "$way" get-ftp || return 0 ;;
	nfs-cat) measure_ref "$way" get-nfs || return 0 ;;
	smbclient) measure_ref "$way" get-smb || return 0 ;;
	list-*)
		step "$way" ls "list_${way#list-}" || return 0
		check_list 'f[0-9]\{6\}\.bin' || { drop_way "$way" "wrong listing"; return 0; } ;;
	*) measure_mount "$way" || return 0 ;;
	esac
	printf '  %-16s %s\n' "$way" "$line" >&2
}

t_start=${EPOCHREALTIME/./}
for run in $(seq "$RUNS"); do
	echo "$bench: repetition $run of $RUNS" >&2
	# shellcheck disable=SC2086
	for way in $(run_order "$run" $WAYS); do
		way_failed "$way" || measure "$way"
	done
done
t_total=$(us_to_s $((${EPOCHREALTIME/./} - t_start)))

# Results --------------------------------------------------------------------
declare -A med req reqmax srq
for way in $WAYS; do
	way_failed "$way" && continue
	for m in ls first second next; do
		[ -s "$scratch/res-$way-$m" ] && med[$way.$m]=$(median_s "$scratch/res-$way-$m")
		if [ -s "$scratch/req-$way-$m" ]; then
			req[$way.$m]=$(median_col "$scratch/req-$way-$m" 1)
			reqmax[$way.$m]=$(sort -n "$scratch/req-$way-$m" | tail -n 1)
		fi
		[ -s "$scratch/srq-$way-$m" ] && srq[$way.$m]=$(median_col "$scratch/srq-$way-$m" 1)
	done
done

# An epoch's cell: seconds and MiB/s, or "-".
ecell() {
	local v=${med[$1.$2]:-}
	if [ -z "$v" ]; then echo "-"; else printf '%.3f (%s)' "$v" "$(mibps "$v")"; fi
}

echo
if [ "$BIG" -gt 0 ]; then
	echo "mlfs small-files benchmark, scale mode: $NFILES files of about 1 KiB in $NDIRS folders"
else
	echo "mlfs small-files benchmark: $NFILES files of 64-256 KiB in $NDIRS folders," \
		"$(awk -v b="$TOTAL" 'BEGIN { printf "%.1f", b / 1048576 }') MiB"
fi
echo "epoch: find DIR -type f | xargs -P $READERS -n 16 cat; medians of $RUNS repetitions"
echo "servers on 127.0.0.1, data on tmpfs: s3rver 3.7.1, nginx" \
	"$(nginx -v 2>&1 | sed 's,.*/,,'), nfs-ganesha" \
	"$(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null) (NFSv3)," \
	"smbd $(smbd -V 2>/dev/null | awk '{ print $2 }'); caches on disk"
echo "kernel $(uname -r), $(nproc) CPUs; measuring took $t_total s"
echo
if [ "$BIG" -gt 0 ]; then
	printf '%-16s %9s %5s %16s %6s %16s %5s %16s %5s\n' way "ls -lR s" req \
		"first s (MiB/s)" req "second s" req "next job s" req
else
	printf '%-16s %16s %6s %16s %5s %16s %5s\n' way "first s (MiB/s)" req \
		"second s" req "next job s" req
fi
for way in $WAYS; do
	r1=${req[$way.first]:--} r2=${req[$way.second]:--} r3=${req[$way.next]:--}
	if [ "$BIG" -gt 0 ]; then
		l=${med[$way.ls]:-}
		[ -z "$l" ] || l=$(printf '%.3f' "$l")
		printf '%-16s %9s %5s %16s %6s %16s %5s %16s %5s\n' "$way" "${l:--}" \
			"${req[$way.ls]:--}" "$(ecell "$way" first)" "$r1" \
			"$(ecell "$way" second)" "$r2" "$(ecell "$way" next)" "$r3"
	else
		printf '%-16s %16s %6s %16s %5s %16s %5s\n' "$way" "$(ecell "$way" first)" "$r1" \
			"$(ecell "$way" second)" "$r2" "$(ecell "$way" next)" "$r3"
	fi
done
echo "(req: mlfs's datastore.NAME.requests over the epoch; tmpfs: the servers' tmpfs copy;"
echo " disk: drop_caches, then the plain copy on the cache's disk)"
if [ -n "$failed" ]; then
	echo "left out (see above):$failed"
fi
if [ "${#srq[@]}" -gt 0 ]; then
	echo
	echo "requests the server logged per epoch, medians (s3rver's log, nginx's access log):"
	for way in $WAYS; do
		[ -n "${srq[$way.first]:-}${srq[$way.next]:-}" ] || continue
		printf '  %-16s first %6s  second %6s  next job %6s\n' "$way" \
			"${srq[$way.first]:--}" "${srq[$way.second]:--}" "${srq[$way.next]:--}"
	done
fi
echo
echo "CPU of a first epoch, medians in ms (1/$(getconf CLK_TCK) s resolution), against its wall time:"
printf '  %-16s %8s %8s %8s %8s %10s %8s\n' way server daemon readers sum "sum/$(nproc)" wall
for way in $WAYS; do
	if [ ! -s "$scratch/cpu-$way" ] || [ -z "${med[$way.first]:-}" ]; then
		continue
	fi
	c=$(for k in 1 2 3; do median_col "$scratch/cpu-$way" "$k"; done | tr '\n' ' ')
	echo "$c ${med[$way.first]} $(nproc)" | awk -v w="$way" '{ s = $1 + $2 + $3
		printf "  %-16s %8d %8d %8d %8d %10d %8d\n", w, $1, $2, $3, s, s / $5, $4 * 1000 }'
done
if [ "$BIG" -gt 0 ]; then
	echo
	echo "per cached object (medians): files in cache_dir; daemon memory grown since the mount"
	for way in $WAYS; do
		[ -s "$scratch/cfiles-$way" ] || continue
		printf '  %-16s %6.2f files  %8.0f bytes after 2 epochs  %8.0f bytes in the next job\n' \
			"$way" "$(awk -v n="$(median_col "$scratch/cfiles-$way" 1)" -v f="$NFILES" \
				'BEGIN { print n / f }')" \
			"$(awk -v k="$(median_col "$scratch/rss-$way" 1)" -v f="$NFILES" \
				'BEGIN { print k * 1024 / f }')" \
			"$(awk -v k="$(median_col "$scratch/rss-next-$way" 1)" -v f="$NFILES" \
				'BEGIN { print k * 1024 / f }')"
	done
fi

nbars=0
nfail=0
nna=0
# req_bar NAME WAY.STEP PER_FILE: the most requests of any repetition of
# that epoch; with PER_FILE 0 it must be 0, else below PER_FILE x $NFILES.
req_bar() {
	local name=$1 v=${reqmax[$2]:-} per=$3 ok
	nbars=$((nbars + 1))
	if [ -z "$v" ]; then
		printf '  %-46s %6s  (bar %s) n/a\n' "$name" - "$([ "$per" = 0 ] && echo "= 0" ||
			echo "< $per/file")"
		nna=$((nna + 1))
		return
	fi
	if [ "$per" = 0 ]; then
		ok=$([ "$v" -eq 0 ] && echo PASS || echo FAIL)
		printf '  %-46s %6s  (bar = 0)    %s\n' "$name" "$v" "$ok"
	else
		ok=$(awk -v v="$v" -v p="$per" -v n="$NFILES" 'BEGIN { print (v < p * n) ? "PASS" : "FAIL" }')
		printf '  %-46s %6s  (bar < %s/file) %s\n' "$name" "$v" "$per" "$ok"
	fi
	[ "$ok" = PASS ] || nfail=$((nfail + 1))
}

echo
echo "bars (time ratios: the other way's time / mlfs's; requests: the most of any repetition):"
if [ "$BIG" -gt 0 ]; then
	for b in s3 http nfs smb; do
		bar "ls -lR: list-$b / mlfs-$b-sets" "mlfs-$b-sets.ls" "list-$b.ls" 0.5
		bar "second: tmpfs / mlfs-$b-sets" "mlfs-$b-sets.second" tmpfs.first 0.33
		for k in cfiles:2:files rss:1024:bytes; do
			f=$scratch/${k%%:*}-mlfs-$b-sets
			nbars=$((nbars + 1))
			if [ ! -s "$f" ]; then
				printf '  %-46s %6s  n/a\n' "per object: ${k##*:}, mlfs-$b-sets" -
				nna=$((nna + 1))
				continue
			fi
			lim=${k#*:} lim=${lim%%:*}
			v=$(awk -v n="$(sort -n "$f" | tail -n 1)" -v f="$NFILES" -v s="${k%%:*}" \
				'BEGIN { printf (s == "rss" ? "%.0f" : "%.2f"), (s == "rss" ? n * 1024 : n) / f }')
			ok=$(awk -v v="$v" -v l="$lim" 'BEGIN { print v <= l ? "PASS" : "FAIL" }')
			[ "$ok" = PASS ] || nfail=$((nfail + 1))
			printf '  %-46s %6s  (bar <= %-4s) %s\n' "per object: ${k##*:}, mlfs-$b-sets" "$v" "$lim" "$ok"
		done
	done
else
	bar "first: curl-s3 / mlfs-s3-sets" mlfs-s3-sets.first curl-s3.first 0.5
	bar "first: curl-http / mlfs-http-sets" mlfs-http-sets.first curl-http.first 0.5
	bar "first: rclone-s3 / mlfs-s3-sets" mlfs-s3-sets.first rclone-s3.first 2
	bar "first: s3fs / mlfs-s3-sets" mlfs-s3-sets.first s3fs.first 2
	bar "first: rclone-http / mlfs-http-sets" mlfs-http-sets.first rclone-http.first 2
	bar "first: mlfs-nfs-stores / mlfs-nfs-sets" mlfs-nfs-sets.first mlfs-nfs-stores.first 1
	bar "first: mlfs-smb-stores / mlfs-smb-sets" mlfs-smb-sets.first mlfs-smb-stores.first 1
	for b in s3 http nfs smb ftp; do
		bar "second: tmpfs / mlfs-$b-sets" "mlfs-$b-sets.second" tmpfs.first 0.5
		req_bar "second: requests, mlfs-$b-sets" "mlfs-$b-sets.second" 0
		bar "next job: disk / mlfs-$b-sets" "mlfs-$b-sets.next" disk.next 0.5
		req_bar "next job: requests, mlfs-$b-sets" "mlfs-$b-sets.next" 0.1
	done
	echo "for information (time ratios):"
	info "first: curl-s3 / mlfs-s3-stores" mlfs-s3-stores.first curl-s3.first
	info "first: curl-http / mlfs-http-stores" mlfs-http-stores.first curl-http.first
	info "first: nfs-cat / mlfs-nfs-sets" mlfs-nfs-sets.first nfs-cat.first
	info "first: smbclient / mlfs-smb-sets" mlfs-smb-sets.first smbclient.first
	info "first: curl-ftp / mlfs-ftp-sets" mlfs-ftp-sets.first curl-ftp.first
	info "first: curl-ftp / mlfs-ftp-stores" mlfs-ftp-stores.first curl-ftp.first
	info "first: rclone-ftp / mlfs-ftp-sets" mlfs-ftp-sets.first rclone-ftp.first
	info "first: rclone-s3 / mlfs-s3-stores" mlfs-s3-stores.first rclone-s3.first
	info "first: tmpfs / curl-s3" curl-s3.first tmpfs.first
	info "first: tmpfs / curl-http" curl-http.first tmpfs.first
	for b in s3 http nfs smb ftp; do
		info "second: tmpfs / mlfs-$b-stores" "mlfs-$b-stores.second" tmpfs.first
		info "next job: disk / mlfs-$b-stores" "mlfs-$b-stores.next" disk.next
	done
	info "second: tmpfs / rclone-s3" rclone-s3.second tmpfs.first
	info "next job: disk / rclone-s3" rclone-s3.next disk.next
	info "second: tmpfs / rclone-http" rclone-http.second tmpfs.first
	info "next job: disk / rclone-http" rclone-http.next disk.next
	info "second: tmpfs / rclone-ftp" rclone-ftp.second tmpfs.first
	info "next job: disk / rclone-ftp" rclone-ftp.next disk.next
fi

echo
if [ "$nna" -gt 0 ]; then
	echo "RESULT: $nfail of $nbars bars FAIL, $nna could not be measured"
elif [ "$nfail" -eq 0 ]; then
	echo "RESULT: all $nbars bars pass"
else
	echo "RESULT: $nfail of $nbars bars FAIL (a benchmark: exiting 0 all the same)"
fi
case " $failed " in
*" mlfs-"* | *" curl-"* | *" nfs-cat "* | *" smbclient "* | *" list-"*)
	echo "$bench: could not measure mlfs or a reference client, so some bars are missing" >&2
	exit 1 ;;
esac
exit 0
