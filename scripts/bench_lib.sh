# bench_lib.sh - helpers shared by the scripts/bench_*.sh benchmarks;
# sourced, never run.
#
# The caller sets $bench (its name, for messages) and $pids (the processes it
# started that may still run; stop_pid keeps it up to date).

# bench_start WHY_ROOT: what every benchmark checks first: RUNS from
# BENCH_RUNS (default 5, a positive integer) and root (for WHY_ROOT); then it
# installs the benchmark packages.  Exits 2 on a usage error.
bench_start() {
	RUNS=${BENCH_RUNS:-5}
	case $RUNS in
	'' | *[!0-9]* | 0) echo "$bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;;
	esac
	if [ "$(id -u)" -ne 0 ]; then
		echo "$bench: run as root ($1)" >&2
		exit 2
	fi
	scripts/install-deps.sh --bench
}

# bench_stop_all: unmounts every $scratch/mnt-* still mounted and stops every
# process in $pids (for the caller's cleanup).
bench_stop_all() {
	local m pid

	for m in "$scratch"/mnt-*; do
		[ -d "$m" ] || continue
		if is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	for pid in $pids; do
		stop_pid "$pid" 0
	done
}

# Whether process $1 runs (a zombie, exited but not yet waited for, does not).
alive() {
	[ -r "/proc/$1/stat" ] && awk '{ exit $3 == "Z" }' "/proc/$1/stat" 2>/dev/null
}

# Ends process $1, started here: waits $2 tenths of a second for it to exit
# on its own, then TERM, then KILL; reaps it and drops it from $pids.
stop_pid() {
	local pid=$1 grace=$2 i p keep=""

	for i in $(seq "$grace"); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		kill "$pid" 2>/dev/null || true
		for i in $(seq 50); do
			alive "$pid" || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	for p in $pids; do
		[ "$p" = "$pid" ] || keep="$keep $p"
	done
	pids=$keep
}

is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts
}

# Waits until $1 is a mount and answers, or until process $2 dies (30 s at
# most); on failure prints how long it waited and log $3.
wait_mounted() {
	local mnt=$1 pid=$2 log=$3 i t0=${EPOCHREALTIME/./}

	for i in $(seq 300); do
		if is_mounted "$mnt"; then
			stat "$mnt" >/dev/null	# waits for the FUSE handshake
			return 0
		fi
		if ! alive "$pid"; then
			echo "$bench: the daemon for $mnt exited after" \
				"$(us_to_s $((${EPOCHREALTIME/./} - t0))) s; its log:" >&2
			tail -n 30 "$log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "$bench: $mnt did not mount in 30 s; the end of its log:" >&2
	tail -n 30 "$log" >&2
	return 1
}

# Writes and deletes $2 bytes as file $1 on a tmpfs, so that the next
# page-cache fill reuses memory the hypervisor has backed: on a VM whose
# free memory goes back to the host (virtio-balloon free page reporting), a
# read that fills the page cache otherwise pays, at random, the host's first
# touch of that memory (docs/benchmarks.md, "Memory on this VM").
pretouch() {
	head -c "$2" /dev/zero >"$1"
	rm "$1"
}

# Prints the microseconds "$@" takes; returns its exit status.
time_us() {
	local t0 rc=0

	t0=${EPOCHREALTIME/./}
	"$@" || rc=$?
	echo $((${EPOCHREALTIME/./} - t0))
	return $rc
}

us_to_s() { awk -v u="$1" 'BEGIN { printf "%.6f", u / 1e6 }'; }

# Median, in seconds, of the microsecond values in file $1.
median_s() { awk -v m="$(median_col "$1" 1)" 'BEGIN { printf "%.6f", m / 1e6 }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# PASS when ratio $1 >= bar $2 (or > $2 when $3 is "strict"), else FAIL.
verdict() {
	awk -v r="$1" -v bar="$2" -v strict="${3:-}" \
		'BEGIN { print ((strict ? r > bar : r >= bar) ? "PASS" : "FAIL") }'
}

# ---------------------------------------------------------------------------
# The helpers below are shared by the benchmarks of remote backends
# (bench_remote.sh keeps its own copies of some; bench_netfs.sh uses these).
# They expect of the caller: $scratch (the benchmark's folder, with logs/
# and mnt-WAY), $failed (ways left out), $daemon (the PID of the mount of
# the moment), $line (the progress line of the current way), a function
# pretouch_mem, and, for bar/info/mibps, $FILE_SIZE and an associative
# array med (med[WAY.STEP] = median seconds).

# A TCP port nothing listens on yet, on 127.0.0.1.
free_port() {
	local p

	while :; do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# run_order RUN WAY...: the ways in the order repetition RUN takes them:
# as given in odd repetitions, reversed in even ones.  On this VM a read from
# the disk right after drop_caches is fast or slow by its place among the
# disk reads of a repetition (docs/benchmarks.md, "Cache reads and their
# place"), so each way takes both kinds of place.
run_order() {
	local run=$1 out="" w
	shift
	if [ $((run % 2)) -eq 1 ]; then
		echo "$*"
		return
	fi
	for w in "$@"; do out="$w $out"; done
	echo "$out"
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# host_warm FILE...: reads the files once, untimed, for the VM's host rather
# than for this kernel (whose page cache a timed read drops first).  This
# VM's disk reads blocks a write left a few seconds ago at a third of its
# speed the first time (a 256 MiB file: 0.28-0.40 s), then at full speed
# (0.11-0.13 s), drop_caches or not: its host keeps what it read.  A next
# job's cache files were written in the same run and the disk reference's
# were read in every run; each side of such a bar is read once before it is
# timed, so the bar compares mlfs with the disk, not the host's cache with
# its disk (docs/benchmarks.md, "The host's cache").  The read must reach
# the disk: a file written a moment ago is still in this kernel's page cache
# (a read of it there never reaches the host), so it is synced and the page
# cache dropped first.
host_warm() {
	drop_caches
	cat -- "$@" >/dev/null 2>&1 || true
}

# host_warm_tree DIR: host_warm of every file under DIR.
host_warm_tree() {
	drop_caches
	[ -d "$1" ] && find "$1" -type f -exec cat -- {} + >/dev/null 2>&1
	return 0
}

# Whether way $1 has been left out.
way_failed() {
	case " $failed " in *" $1 "*) return 0 ;; esac
	return 1
}

# Leaves way $1 out from now on; prints why ($2) and the end of its log
# (which wait_mounted has printed already when $3 is "mount"); unmounts it
# and stops its daemon.
drop_way() {
	local way=$1 mnt=$scratch/mnt-$1

	echo "$bench: $way: $2; left out from now on" >&2
	if [ "${3:-}" != mount ] && [ -f "$scratch/logs/$way.log" ]; then
		echo "$bench: the end of $way's log:" >&2
		tail -n 20 "$scratch/logs/$way.log" >&2
	fi
	failed="$failed $way"
	if [ -d "$mnt" ] && is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	case " $pids " in *" ${daemon:-none} "*) stop_pid "$daemon" 0 ;; esac
	daemon=""
}

# Times step $2 ("first", "cache", ...) of way $1 with command $3... after a
# pre-touch; appends the microseconds to $scratch/res-WAY-STEP and the time
# to $line, or leaves the way out if the command fails.  For the step the
# caller names in $cpu_step it also appends, to $scratch/cpu-WAY, the CPU
# milliseconds the step cost: the caller's cpu_now WAY prints three tick
# counts (server, daemon, and this shell's reaped children: the reader).
step() {
	local way=$1 name=$2 t c0=""
	shift 2

	pretouch_mem
	[ "$name" != "${cpu_step:-}" ] || c0=$(cpu_now "$way")
	if ! t=$(time_us "$@"); then
		drop_way "$way" "$name failed after $(us_to_s "$t") s"
		return 1
	fi
	echo "$t" >>"$scratch/res-$way-$name"
	line="$line $(printf '%s %.3f s ' "$name" "$(us_to_s "$t")")"
	[ -z "$c0" ] || echo "$c0 $(cpu_now "$way")" | awk -v hz="$(getconf CLK_TCK)" \
		'{ for (i = 1; i <= 3; i++) printf "%d ", ($(i + 3) - $i) * 1000 / hz; print "" }' \
		>>"$scratch/cpu-$way"
}

# Clock ticks of user and system time process $1 has used (its threads
# included; with $2 = children, those of its children it has waited for);
# 0 once it is gone.
ticks() {
	local v
	# Field 2, the command name in brackets, may hold spaces: cut it off.
	v=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null |
		awk -v c="${2:-}" '{ print c == "children" ? $14 + $15 : $12 + $13 }')
	echo "${v:-0}"
}

# The $2th percentile, in seconds, of the microsecond values in file $1
# (nearest rank).
quantile_s() {
	sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 }
		END { i = int((NR - 1) * q / 100) + 1; printf "%.6f", v[i] / 1e6 }'
}

# Median of column $2 of the numbers in file $1.
median_col() {
	awk -v c="$2" '{ print $c }' "$1" | sort -n | awk '{ v[NR] = $1 }
		END { printf "%.10g\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# MiB/s of reading $FILE_SIZE bytes in $1 seconds.
mibps() { awk -v s="$1" -v b="$FILE_SIZE" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }

# bar NAME A.STEP B.STEP BAR [strict]: the throughput ratio A/B (med[] holds
# times, so B's time over A's), checked against BAR and printed with PASS or
# FAIL, or n/a when a median is missing; counts in $nbars, $nfail, $nna.
bar() {
	local name=$1 a=${med[$2]:-} b=${med[$3]:-} barv=$4 strict=${5:-} r v op=">="

	[ -z "$strict" ] || op=">"
	nbars=$((nbars + 1))
	if [ -z "$a" ] || [ -z "$b" ]; then
		printf '  %-46s %6s  (bar %-2s %-4s) n/a\n' "$name" - "$op" "$barv"
		nna=$((nna + 1))
		return
	fi
	r=$(ratio "$b" "$a")
	v=$(verdict "$r" "$barv" "$strict")
	[ "$v" = PASS ] || nfail=$((nfail + 1))
	printf '  %-46s %6s  (bar %-2s %-4s) %s\n' "$name" "$r" "$op" "$barv" "$v"
}

# bar_value NAME RATIO BAR: a ratio worked out by the caller, checked and
# counted like bar's (n/a when RATIO is empty).
bar_value() {
	local name=$1 r=$2 barv=$3 v
	nbars=$((nbars + 1))
	if [ -z "$r" ]; then
		printf '  %-46s %6s  (bar >= %-4s) n/a\n' "$name" - "$barv"
		nna=$((nna + 1))
		return
	fi
	v=$(verdict "$r" "$barv")
	[ "$v" = PASS ] || nfail=$((nfail + 1))
	printf '  %-46s %6s  (bar >= %-4s) %s\n' "$name" "$r" "$barv" "$v"
}

# info NAME A.STEP B.STEP: the same ratio, printed without a bar (nothing
# when a median is missing).
info() {
	local a=${med[$2]:-} b=${med[$3]:-}

	[ -n "$a" ] && [ -n "$b" ] || return 0
	printf '  %-46s %6s\n' "$1" "$(ratio "$b" "$a")"
}

# Waits up to 10 s for URL $1 to answer.
wait_http() {
	local i

	for i in $(seq 100); do
		curl -s -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.1
	done
	echo "$bench: $1 does not answer" >&2
	return 1
}

# SigV4-signed curl for s3rver's test credentials (3.7.1 takes unsigned requests too).
s3curl() {
	curl -sSf --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

# ---------------------------------------------------------------------------
# A first read against one stream of the same server (bench_ftp.sh,
# bench_azure.sh).  The caller sets $MLFS, $scratch (holding mlfs.conf,
# logs/ and mnt-mlfs), $FILE_SIZE and $pids, defines curl_read (one `curl`
# of the file to its standard output) and curl_wake (one small request of
# curl's to the same server: first_read_time), and calls first_read_bench REMOTE
# LOCAL BAR FILE: REMOTE and LOCAL the file's paths under the mount
# (datastores/...), BAR the bar of the next job's read from the cache over
# the local one ("" for information only), FILE the file on disk that LOCAL
# shows.  Before either side of that bar is timed, its file on disk (FILE,
# the cache's data file) is read once, untimed (host_warm).  curl is timed two ways:
#   curl      `curl_read >/dev/null`: curl's bytes written nowhere (a write
#             to /dev/null copies nothing), the server's own ceiling;
#   curl-cat  `curl_read | cat >/dev/null`: the bytes handed to another
#             process that reads them, as `cat` of the file through mlfs
#             gets them: the first-read bar is against this one.

first_read_mount() {
	"$MLFS" mount -f "$scratch/mlfs.conf" "$scratch/mnt-mlfs" >>"$scratch/logs/mlfs.log" 2>&1 &
	daemon=$!
	pids="$pids $daemon"
	wait_mounted "$scratch/mnt-mlfs" "$daemon" "$scratch/logs/mlfs.log"
}

first_read_umount() {
	fusermount3 -u "$scratch/mnt-mlfs"
	stop_pid "$daemon" 50
}

first_read_cat() { cat "$1" >/dev/null; }
first_read_null() { curl_read >/dev/null; }
first_read_pipe() {
	curl_read | cat >/dev/null
	return "${PIPESTATUS[0]}"
}

# first_read_time WAY COMMAND...: drop_caches, a request of curl's to the
# server (curl_wake), then COMMAND's time into $scratch/res-WAY.  The drop is
# the client node's cold page cache; on this one machine it also drops the
# server's own code and data (Azurite is a Node.js program on this disk),
# which a real server far from the node keeps: the next job's one request
# to revalidate its file took 12-15 ms after a drop, 4 ms otherwise.  So
# every way, curl's included, starts with the server awake.
first_read_time() {
	local way=$1
	shift
	drop_caches
	curl_wake >/dev/null 2>&1 || true
	time_us "$@" >>"$scratch/res-$way"
}

# first_read_way WAY REMOTE LOCAL FILE: one way of one repetition.
first_read_way() {
	case $1 in
	curl)
		first_read_time curl first_read_null ;;
	curl-cat)
		first_read_time curl-cat first_read_pipe ;;
	mlfs-first)	# an empty cache, then the next job's mount over it
		rm -rf "$scratch/cache" "$scratch/state"
		first_read_mount
		first_read_time mlfs-first first_read_cat "$scratch/mnt-mlfs/$2"
		first_read_umount
		host_warm "$scratch"/cache/objects/*/*.data
		first_read_mount
		first_read_time mlfs-cache first_read_cat "$scratch/mnt-mlfs/$2"
		first_read_umount ;;
	mlfs-local)
		host_warm "$4"
		first_read_mount
		first_read_time mlfs-local first_read_cat "$scratch/mnt-mlfs/$3"
		first_read_umount ;;
	esac
}

first_read_bench() {
	local remote=$1 local_path=$2 bar2=$3 file=$4 run way w r
	declare -A med

	for run in $(seq "$RUNS"); do
		for way in $(run_order "$run" curl curl-cat mlfs-first mlfs-local); do
			first_read_way "$way" "$remote" "$local_path" "$file"
		done
		echo "# run $run: curl $(us_to_s "$(tail -1 "$scratch/res-curl")") s," \
			"curl | cat $(us_to_s "$(tail -1 "$scratch/res-curl-cat")") s," \
			"mlfs first $(us_to_s "$(tail -1 "$scratch/res-mlfs-first")") s," \
			"from the cache $(us_to_s "$(tail -1 "$scratch/res-mlfs-cache")") s," \
			"local $(us_to_s "$(tail -1 "$scratch/res-mlfs-local")") s"
	done
	for w in curl curl-cat mlfs-first mlfs-cache mlfs-local; do
		med[$w]=$(median_s "$scratch/res-$w")
		printf '%-12s median %.3f s  %4d MiB/s\n' "$w" "${med[$w]}" "$(mibps "${med[$w]}")"
	done
	r=$(ratio "${med[curl-cat]}" "${med[mlfs-first]}")
	echo "first read, mlfs over curl | cat:   $r (bar >= 0.8) $(verdict "$r" 0.8)"
	r=$(ratio "${med[curl]}" "${med[mlfs-first]}")
	echo "first read, mlfs over curl alone:   $r (the server's ceiling, for information)"
	r=$(ratio "${med[mlfs-local]}" "${med[mlfs-cache]}")
	if [ -n "$bar2" ]; then
		echo "next job from the cache over local: $r (bar >= $bar2) $(verdict "$r" "$bar2")"
	else
		echo "next job from the cache over local: $r (for information)"
	fi
}
