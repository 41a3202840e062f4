#!/bin/bash
# bench_random.sh - random reads inside a big remote file (issue 21), as
# HDF5, LMDB and Parquet readers make them: reads of 4 KiB to 1 MiB at
# random offsets of one big object, through mlfs from an S3 and an HTTP
# server, first pass and cached, next to the same reads of a local file.
#
# The object: BENCH_SIZE_MIB MiB (default 1,024) of random bytes, big.bin,
# seeded on disk (/var/tmp, the disk that holds mlfs's cache_dir), dated an
# hour back, and copied to a fresh tmpfs (so a drop of the page cache leaves
# the servers as they were) for two servers on 127.0.0.1, on free ports:
#   S3     s3rver 3.7.1 (scripts/server-s3rver.sh ... 3), testbucket/big.bin,
#          one SigV4-signed `curl -T` (s3rver streams a PUT to its file: a
#          single PUT of 1 GiB took 2.9 s and 103 MiB of node's memory); the
#          script waits until a HEAD gives the size and checks that its ETag
#          is the file's md5sum;
#   HTTP   nginx (scripts/server-nginx.sh), www/big.bin.
#
# The reads: a Python 3 reader (written to the scratch folder) makes
# BENCH_READS `preadv`s (default 2,000) of sizes log-uniform from 4 KiB to
# 1 MiB at uniformly random byte offsets, from a fixed seed, so every way
# makes exactly the same reads in the same order.  It reads into one buffer
# that holds every byte read (about 188 KiB a read on average: 376 MiB for
# 2,000), allocated and touched before the clock starts, and prints the wall
# time from its open of the file to its last read, the md5 of the bytes
# read in order (every way's must be the local file's), the bytes read, and
# the distinct 1 MiB blocks the reads touched: mlfs's cache block is 1 MiB
# (docs/architecture.md), so those blocks are what a perfect cache fetches.
# The ways, in each repetition:
#   local      the file on disk: local-cold (`sync; echo 3 >
#              /proc/sys/vm/drop_caches`, then the reads), then local-warm
#              (the same reads again, from the page cache);
#   mlfs-s3,   MOUNT/datasets/big/big.bin of a config with one datastore
#   mlfs-http  (`type = s3` or `type = http`) and `[dataset big] source =
#              NAME:/`; cache_dir and state_dir on disk, emptied first,
#              cache_size 4G (or 4 x the object, so that it is cached):
#                first    a fresh mount, the reads (the server's);
#                cached   the reads again in the same mount;
#                next     unmount, drop_caches, mount again with the same
#                         cache_dir, the reads: the next job's, from mlfs's
#                         disk cache (compared with local-cold);
#              around each, the change in datastore.NAME.cache_bytes_fetched
#              and datastore.NAME.requests of MOUNT/.mlfs/stats, and the
#              bytes the server sent (s3rver's wchar in /proc, the body
#              bytes of nginx's access log).
# The ways take turns in each of BENCH_RUNS repetitions (default 3), in
# reverse in even ones (run_order in bench_lib.sh), and every timed pass
# starts with a pre-touch of twice the object plus the bytes read
# (bench_lib.sh; docs/benchmarks.md, "Memory on this VM").
# Printed: the medians of each pass (seconds, MiB/s of the bytes read), the
# MiB the first pass fetched next to the distinct blocks' MiB (fetched /
# needed), what the server sent, mlfs's requests per pass, and the bars,
# each PASS or FAIL (time ratios: local's time / mlfs's):
#   cached     local-warm / mlfs-B cached >= 0.8, for S3 and HTTP;
#   next job   local-cold / mlfs-B next >= 0.8, for S3 and HTTP (a bar: the
#              next job's reads are the cached reads a second job makes);
#   first      the most any first pass fetched <= the object's size: no
#              block fetched twice (the fetched / needed ratio is printed
#              for information).
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
# It exits non-zero only when it cannot measure: a server or the seeding
# fails, or a way cannot mount, cannot read, or reads other bytes than the
# local file's (that way is reported, with its log, and left out).
#
# Usage (as root, from anywhere):
#   [BENCH_SIZE_MIB=N] [BENCH_READS=N] [BENCH_RUNS=N] scripts/bench_random.sh
# BENCH_SIZE_MIB=64 BENCH_READS=200 BENCH_RUNS=1 takes about 10 s on 2 CPUs
# once build/bench is built (the build: about 2 minutes); a default run (1
# GiB, 2,000 reads, 3 repetitions) a few minutes (docs/benchmarks.md gives
# the time measured).  The reader holds every byte it reads in memory, the
# tmpfs the object twice, and each pass's pre-touch writes twice the object
# plus the bytes read to it: about 4.5 GiB of memory at the default.
# It installs its packages (scripts/install-deps.sh --bench), builds mlfs
# into build/bench (RelWithDebInfo), and removes every mount, server,
# process and file it made.
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
. scripts/bench_servers.sh
bench=bench_random

SIZE_MIB=${BENCH_SIZE_MIB:-1024}
NREADS=${BENCH_READS:-2000}
case $SIZE_MIB in
'' | *[!0-9]* | 0) echo "$bench: BENCH_SIZE_MIB must be a positive integer" >&2; exit 2 ;;
esac
case $NREADS in
'' | *[!0-9]* | 0) echo "$bench: BENCH_READS must be a positive integer" >&2; exit 2 ;;
esac
BENCH_RUNS=${BENCH_RUNS:-3}

bench_start "it mounts a tmpfs and drops the page cache"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLFS_WERROR=ON >/dev/null
cmake --build build/bench -j"$(nproc)" >/dev/null
MLFS=$PWD/build/bench/mlfs

SIZE=$((SIZE_MIB * 1048576))
# Objects over a quarter of cache_size are read uncached (docs/config.md).
CACHE_MIB=$((4 * SIZE_MIB > 4096 ? 4 * SIZE_MIB : 4096))

# On disk, not tmpfs: the caches, mlfs's state, the local file.
scratch=$(mktemp -d /var/tmp/mlfs-bench-random.XXXXXX)
chmod 755 "$scratch"		# nginx's workers walk down to srv/http/www
srv=$scratch/srv		# a tmpfs: the servers' data
pids=""				# processes started here that may still run
servers=""			# "script:dir" of each server started here
tmpfs_mounted=0
failed=""			# ways left out
daemon=""

trap cleanup EXIT
trap 'exit 130' INT TERM

WAYS="local mlfs-s3 mlfs-http"

# The reader ---------------------------------------------------------------
# reader.py FILE SIZE N: the N reads of a file of SIZE bytes; prints
# "MICROSECONDS MD5 BYTES BLOCKS NEEDED_BYTES".
cat >"$scratch/reader.py" <<'PY'
import hashlib, math, os, random, sys, time

path, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(21)			# the same reads in every way and run
lo, hi = math.log(4096), math.log(1 << 20)
reads = []
for _ in range(n):
    length = min(size, round(math.exp(rng.uniform(lo, hi))))
    reads.append((rng.randrange(size - length + 1), length))
total = sum(length for _, length in reads)
blocks = {b for off, length in reads for b in range(off >> 20, ((off + length - 1) >> 20) + 1)}
needed = sum(min(size, (b + 1) << 20) - (b << 20) for b in blocks)

buf = bytearray(total)
buf[::4096] = b"\1" * len(range(0, total, 4096))	# touched before the clock starts
view = memoryview(buf)
t0 = time.monotonic()
fd = os.open(path, os.O_RDONLY)
pos = 0
for off, length in reads:
    start, end = pos, pos + length
    while pos < end:			# a short read only at the end of the file
        got = os.preadv(fd, [view[pos:end]], off + pos - start)
        if got <= 0:
            sys.exit(f"{path}: {got} bytes at {off + pos - start}")
        pos += got
t = time.monotonic() - t0
os.close(fd)
print(round(t * 1e6), hashlib.md5(buf).hexdigest(), total, len(blocks), needed)
PY
reader() { python3 "$scratch/reader.py" "$1" "$SIZE" "$NREADS"; }

# The object -----------------------------------------------------------------
mkdir -p "$srv" "$scratch/disk" "$scratch/logs"
echo "$bench: seeding a $SIZE_MIB MiB object" >&2
t0=${EPOCHREALTIME/./}
head -c "$SIZE" /dev/urandom >"$scratch/disk/big.bin"
touch -d '1 hour ago' "$scratch/disk/big.bin"
# The reads over the local file, untimed: the reference md5 and the counts.
reader "$scratch/disk/big.bin" >"$scratch/reader.out"
read -r _ REF_MD5 TOTAL NBLOCKS NEEDED <"$scratch/reader.out"
FILE_SIZE=$TOTAL		# for mibps in bench_lib.sh: a pass's bytes
PRETOUCH=$((2 * SIZE + TOTAL))
# Two copies (www, the bucket), the pre-touch, room for the rest.
mount -t tmpfs -o "size=$(((2 * SIZE + PRETOUCH) / 1048576 + 256))M,mode=755" tmpfs "$srv"
tmpfs_mounted=1
mkdir -p "$srv/http/www" "$srv/s3"
cp -a "$scratch/disk/big.bin" "$srv/http/www/big.bin"

# Servers --------------------------------------------------------------------
s3port=$(free_port)
S3=http://127.0.0.1:$s3port
servers="$servers s3rver:$srv/s3"
s3pid=$(scripts/server-s3rver.sh start "$srv/s3" "$s3port" 3)
httpport=$(free_port)		# s3rver listens by now: not the same port
WEB=http://127.0.0.1:$httpport
servers="$servers nginx:$srv/http"
httppid=$(scripts/server-nginx.sh start "$srv/http" "$httpport")
wait_http "$S3/testbucket"
wait_http "$WEB/"
s3curl -T "$scratch/disk/big.bin" "$S3/testbucket/big.bin" >/dev/null
# s3rver answers a PUT once it has hashed the body, maybe before its file
# is all written: wait until a HEAD gives the whole size (the file's).
for i in $(seq 100); do
	head=$(s3curl -I "$S3/testbucket/big.bin" | tr -d '\r')
	[ "$(echo "$head" | awk -F': ' 'tolower($1) == "content-length" { print $2 }')" != "$SIZE" ] ||
		break
	[ "$i" -lt 100 ] || { echo "$bench: s3rver does not hold all of big.bin" >&2; exit 1; }
	sleep 0.1
done
etag=$(echo "$head" | awk -F': ' 'tolower($1) == "etag" { gsub(/"/, "", $2); print $2 }')
if [ "$etag" != "$(md5sum <"$scratch/disk/big.bin" | cut -d' ' -f1)" ]; then
	echo "$bench: s3rver's ETag of big.bin, $etag, is not the file's md5sum" >&2
	exit 1
fi
echo "$bench: s3rver 3.7.1 (PID $s3pid) on $S3, nginx (PID $httppid) on $WEB;" \
	"seeded in $(us_to_s $((${EPOCHREALTIME/./} - t0))) s" >&2

# Configs --------------------------------------------------------------------
# One mlfs config per backend: its datastore, the dataset "big" over its
# root; cache_dir and state_dir per backend.
backend_of() { echo "${1#mlfs-}"; }
store_of() { case $1 in s3) echo s3 ;; http) echo web ;; esac; }
for b in s3 http; do
	{
		printf '[mlfs]\nstate_dir = %s\ncache_dir = %s\ncache_size = %sM\n\n' \
			"$scratch/state-$b" "$scratch/cache-$b" "$CACHE_MIB"
		case $b in
		s3) printf '[datastore s3]\ntype = s3\nendpoint = %s\nbucket = testbucket\n%s\n%s\n' \
			"$S3" "access_key_id = S3RVER" "secret_access_key = S3RVER" ;;
		http) printf '[datastore web]\ntype = http\nurl = %s/\n' "$WEB" ;;
		esac
		printf '\n[dataset big]\nsource = %s:/\n' "$(store_of "$b")"
	} >"$scratch/mlfs-$b.conf"
	chmod 600 "$scratch/mlfs-$b.conf"
done

# Mounts way $1 in the foreground of a background process; sets $root (the
# dataset's folder there), $stats and $daemon.
mount_way() {
	local way=$1 mnt=$scratch/mnt-$1 log=$scratch/logs/$1.log

	mkdir -p "$mnt"
	"$MLFS" mount -f "$scratch/mlfs-$(backend_of "$way").conf" "$mnt" >>"$log" 2>&1 &
	root=$mnt/datasets/big
	stats=$mnt/.mlfs/stats
	way_started "$mnt" "$log"
}

# Counter $2 of way $1's datastore in .mlfs/stats.
counter() {
	awk -v k="datastore.$(store_of "$(backend_of "$1")").$2" \
		'$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$stats"
}
# Bytes the server of way $1 has sent so far: s3rver's write count (its log
# cannot tell a HEAD from a GET), the body bytes in nginx's access log.
server_sent() {
	case $1 in
	mlfs-s3) awk '$1 == "wchar:" { print $2 }' "/proc/$s3pid/io" ;;
	*) awk '{ s += $10 } END { printf "%.0f\n", s }' "$srv/http/access.log" ;;
	esac
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# read_step WAY STEP FILE: a pre-touch, then the reads of FILE, timed by the
# reader; its time goes to $scratch/res-WAY-STEP (median_s reads it), and
# for mlfs what the datastore fetched and asked meanwhile to fetch-, req-
# and sent-WAY-STEP.  Leaves WAY out when the reader fails or reads other
# bytes than the local file's.
read_step() {
	local way=$1 name=$2 file=$3 us md5 f0="" r0="" s0="" f r s

	pretouch_mem
	if [ "$way" != local ]; then
		f0=$(counter "$way" cache_bytes_fetched)
		r0=$(counter "$way" requests)
		s0=$(server_sent "$way")
	fi
	if ! reader "$file" >"$srv/reader.out" 2>"$srv/reader.err"; then
		cat "$srv/reader.err" >&2
		drop_way "$way" "the $name reads failed"
		return 1
	fi
	read -r us md5 _ <"$srv/reader.out"
	if [ "$md5" != "$REF_MD5" ]; then
		drop_way "$way" "the $name reads got other bytes (md5 $md5, the file's $REF_MD5)"
		return 1
	fi
	echo "$us" >>"$scratch/res-$way-$name"
	line="$line$(printf '%s %.3f s ' "$name" "$(us_to_s "$us")")"
	[ -n "$f0" ] || return 0
	f=$(($(counter "$way" cache_bytes_fetched) - f0))
	r=$(($(counter "$way" requests) - r0))
	s=$(($(server_sent "$way") - s0))
	echo "$f" >>"$scratch/fetch-$way-$name"
	echo "$r" >>"$scratch/req-$way-$name"
	echo "$s" >>"$scratch/sent-$way-$name"
	line="${line}[fetched $(mib "$f") MiB, $r req, server sent $(mib "$s") MiB] "
}

# One repetition of way $1.
measure() {
	local way=$1

	line=""
	case $way in
	local)
		drop_caches
		read_step local cold "$scratch/disk/big.bin" || return 0
		read_step local warm "$scratch/disk/big.bin" || return 0 ;;
	*)
		rm -rf "$scratch/cache-$(backend_of "$way")" "$scratch/state-$(backend_of "$way")"
		mount_way "$way" || { drop_way "$way" "mount failed" mount; return 0; }
		read_step "$way" first "$root/big.bin" || return 0
		read_step "$way" cached "$root/big.bin" || return 0
		umount_way "$way"
		drop_caches
		mount_way "$way" || { drop_way "$way" "second mount failed" mount; return 0; }
		read_step "$way" next "$root/big.bin" || return 0
		umount_way "$way" ;;
	esac
	printf '  %-10s %s\n' "$way" "$line" >&2
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
declare -A med fetch fetchmax req sent
for way in $WAYS; do
	way_failed "$way" && continue
	for m in cold warm first cached next; do
		[ -s "$scratch/res-$way-$m" ] && med[$way.$m]=$(median_s "$scratch/res-$way-$m")
		[ -s "$scratch/req-$way-$m" ] && req[$way.$m]=$(median_col "$scratch/req-$way-$m" 1)
		[ -s "$scratch/sent-$way-$m" ] && sent[$way.$m]=$(median_col "$scratch/sent-$way-$m" 1)
		if [ -s "$scratch/fetch-$way-$m" ]; then
			fetch[$way.$m]=$(median_col "$scratch/fetch-$way-$m" 1)
			fetchmax[$way.$m]=$(sort -n "$scratch/fetch-$way-$m" | tail -n 1)
		fi
	done
done

# A pass's cell: seconds and MiB/s, or "-".
pcell() {
	local v=${med[$1.$2]:-}
	if [ -z "$v" ]; then echo "-"; else printf '%.3f (%s)' "$v" "$(mibps "$v")"; fi
}

echo
echo "mlfs random-read benchmark: $NREADS reads of 4 KiB-1 MiB (log-uniform, fixed seed) at" \
	"random offsets of a $SIZE_MIB MiB object; medians of $RUNS repetitions"
echo "the reads: $(mib "$TOTAL") MiB in all; they touch $NBLOCKS distinct 1 MiB blocks," \
	"$(mib "$NEEDED") MiB: what a perfect cache fetches"
echo "servers on 127.0.0.1, data on tmpfs: s3rver 3.7.1, nginx" \
	"$(nginx -v 2>&1 | sed 's,.*/,,'); mlfs's caches and the local file on disk"
echo "kernel $(uname -r), $(nproc) CPUs; measuring took $t_total s"
echo
printf '%-10s %18s %18s %18s %15s %11s %22s\n' way "first s (MiB/s)" "cached s" \
	"next job s" "fetched MiB" "server MiB" "req first/cached/next"
for way in $WAYS; do
	if [ "$way" = local ]; then
		printf '%-10s %18s %18s %18s\n' "$way" - "$(pcell local warm)" "$(pcell local cold)"
		continue
	fi
	f=${fetch[$way.first]:-}
	[ -z "$f" ] || f="$(mib "$f") ($(ratio "$f" "$NEEDED")x)"
	s=${sent[$way.first]:-}
	[ -z "$s" ] || s=$(mib "$s")
	printf '%-10s %18s %18s %18s %15s %11s %22s\n' "$way" "$(pcell "$way" first)" \
		"$(pcell "$way" cached)" "$(pcell "$way" next)" "${f:--}" "${s:--}" \
		"${req[$way.first]:--}/${req[$way.cached]:--}/${req[$way.next]:--}"
done
echo "(local: the file on disk; its cached column is local-warm, the page cache, its next-job"
echo " column local-cold, after drop_caches; fetched: datastore.NAME.cache_bytes_fetched over"
echo " the first pass, and in brackets over the distinct blocks' MiB; server MiB: what the"
echo " server sent meanwhile (s3rver: all it wrote); req: datastore.NAME.requests)"
if [ -n "$failed" ]; then
	echo "left out (see above):$failed"
fi
# A first pass must fetch at least the blocks its reads touch; less means
# that it read around the cache (an object over a quarter of cache_size).
for way in mlfs-s3 mlfs-http; do
	f=${fetch[$way.first]:-}
	if [ -n "$f" ] && [ "$f" -lt "$NEEDED" ]; then
		echo "$way's first pass fetched less than its reads touch: it did not go through the cache"
	fi
done

nbars=0
nfail=0
nna=0
# fetch_bar WAY: the most any first pass of WAY fetched, at most the object.
fetch_bar() {
	local v=${fetchmax[$1.first]:-} ok
	nbars=$((nbars + 1))
	if [ -z "$v" ]; then
		printf '  %-46s %6s  (bar <= %-4s) n/a\n' "first: fetched MiB, $1 (no block twice)" - \
			"$SIZE_MIB"
		nna=$((nna + 1))
		return
	fi
	ok=$([ "$v" -le "$SIZE" ] && echo PASS || echo FAIL)
	[ "$ok" = PASS ] || nfail=$((nfail + 1))
	printf '  %-46s %6s  (bar <= %-4s) %s\n' "first: fetched MiB, $1 (no block twice)" \
		"$(mib "$v")" "$SIZE_MIB" "$ok"
}

echo
echo "bars (time ratios: local's time / mlfs's; fetched: the most of any repetition):"
for b in s3 http; do
	bar "cached: local-warm / mlfs-$b cached" "mlfs-$b.cached" local.warm 0.8
	bar "next job: local-cold / mlfs-$b next" "mlfs-$b.next" local.cold 0.8
	fetch_bar "mlfs-$b"
done
echo "for information:"
for b in s3 http; do
	info "first: local-cold / mlfs-$b first" "mlfs-$b.first" local.cold
	[ -z "${fetch[mlfs-$b.first]:-}" ] ||
		printf '  %-46s %6s\n' "first: fetched / needed, mlfs-$b" "$(ratio "${fetch[mlfs-$b.first]}" "$NEEDED")"
	[ -z "${fetch[mlfs-$b.first]:-}" ] || [ -z "${sent[mlfs-$b.first]:-}" ] ||
		printf '  %-46s %6s\n' "first: server sent / fetched, mlfs-$b" \
			"$(ratio "${sent[mlfs-$b.first]}" "${fetch[mlfs-$b.first]}")"
done
info "local: local-cold / local-warm" local.warm local.cold

echo
if [ "$nna" -gt 0 ]; then
	echo "RESULT: $nfail of $nbars bars FAIL, $nna could not be measured"
elif [ "$nfail" -eq 0 ]; then
	echo "RESULT: all $nbars bars pass"
else
	echo "RESULT: $nfail of $nbars bars FAIL (a benchmark: exiting 0 all the same)"
fi
if [ -n "$failed" ]; then
	echo "$bench: could not measure$failed, so some bars are missing" >&2
	exit 1
fi
exit 0
