# lib.sh - helpers for the integration tests: a TAP-like tally, and a
# gateway mounted in the foreground so its exit status (and, in the
# sanitizer build, its ASan/UBSan report) is checked when it stops.
# Sourced by the test scripts; $MLFS is the binary under test.

T_PASS=0
T_FAIL=0
T_NAME=${0##*/}

ok() {
	T_PASS=$((T_PASS + 1))
	echo "ok - $*"
}

not_ok() {
	T_FAIL=$((T_FAIL + 1))
	echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: passes when COMMAND exits 0.
check() {
	local desc=$1
	shift
	if "$@" >"$T_DIR/check.out" 2>&1; then
		ok "$desc"
	else
		not_ok "$desc"
		sed 's/^/#   /' "$T_DIR/check.out" | head -20
	fi
}

# fails DESCRIPTION ERRTEXT COMMAND...: passes when COMMAND fails and prints ERRTEXT.
fails() {
	local desc=$1 want=$2
	shift 2
	if "$@" >"$T_DIR/check.out" 2>&1; then
		not_ok "$desc (it succeeded)"
		sed 's/^/#   /' "$T_DIR/check.out" | head -5
	elif grep -qF -- "$want" "$T_DIR/check.out"; then
		ok "$desc"
	else
		not_ok "$desc (no '$want' in its output)"
		sed 's/^/#   /' "$T_DIR/check.out" | head -5
	fi
}

# same DESCRIPTION WANT GOT
same() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1: want '$2', got '$3'"
	fi
}

# stat_of MOUNT NAME: a counter of MOUNT/.mlfs/stats, 0 when absent.
stat_of() {
	awk -v k="$2" '$1 == k {v = $2} END {print v + 0}' "$1/.mlfs/stats"
}

# quiet_of MOUNT: waits (10 s at most) until the read-ahead across files is done:
# mount.prefetch_pending 0 in MOUNT/.mlfs/stats.
quiet_of() {
	for _ in $(seq 1 100); do
		[ "$(stat_of "$1" mount.prefetch_pending)" = 0 ] && return 0
		sleep 0.1
	done
}

# read_epoch DIR GLOB: DIR's files named GLOB read as a DataLoader's 4 workers read them
# (find, then cat by 4 processes at once): the sha256 of their sorted lines.
read_epoch() {
	find "$1" -type f -name "$2" | sort | xargs -P 4 -n 20 cat | sort | sha256sum
}

# next_job_epoch CONF MOUNT DATASTORE DIR GLOB WANT: the next job over the same cache.
# Unmounts MOUNT (mounted with CONF by mount_fg), drops the page cache, mounts it again,
# lists DIR and asks its statfs, then reads DIR's GLOB files as an epoch (read_epoch):
# checks they read WANT with no request of DATASTORE once listed, and nothing fetched.
next_job_epoch() {
	local conf=$1 mnt=$2 ds=$3 dir=$4 glob=$5 want=$6 listed
	unmount_fg "$mnt"
	echo 3 >/proc/sys/vm/drop_caches
	mount_fg "$conf" "$mnt" || { not_ok "$mnt came up again"; return 1; }
	ls "$dir" >/dev/null
	stat -f "$dir" >/dev/null
	listed=$(stat_of "$mnt" "datastore.$ds.requests")
	echo "# the new mount listed ${dir#"$mnt"/} with $listed requests"
	same "the next job's epoch (a new mount, the page cache dropped) reads the same bytes" \
		"$want" "$(read_epoch "$dir" "$glob")"
	same "... with no request once the folder is listed" "$listed" \
		"$(stat_of "$mnt" "datastore.$ds.requests")"
	same "... and fetched nothing" 0 "$(stat_of "$mnt" "datastore.$ds.cache_bytes_fetched")"
}

# has TEXT PART: whether TEXT holds PART.
has() { [[ $1 == *"$2"* ]]; }

# job_reason JOBDIR: the job's reason once the scheduler has looked at it (5 s
# at most): a spec is accepted before the scheduler's thread places it.
job_reason() {
	for _ in $(seq 1 50); do
		[ "$(cat "$1/reason" 2>/dev/null)" != "waiting for the scheduler" ] && break
		sleep 0.1
	done
	cat "$1/reason" 2>/dev/null
}

# python3 -c "$SOCKET_PING" PATH: binds a unix socket at PATH, connects to it and
# sends a word through; exits 0 when it arrived.
SOCKET_PING='import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect(sys.argv[1])
a, _ = s.accept()
c.sendall(b"ping")
sys.exit(a.recv(4) != b"ping")'

# sha FILE: the SHA-256 of FILE, hex only.
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# port_free PORT: whether nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a random port in 20000-31999 that nothing listens on: below the kernel's
# ephemeral ports (32768 and up), which any outgoing connection may take meanwhile
# (a ganesha failed to start on 35797 so, in a CI run).
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		port_free "$p" && { echo "$p"; return 0; }
	done
	return 1
}

# same_at_offsets DESCRIPTION ORIGINAL COPY: 70,000-byte reads of COPY at
# seven offsets (block edges and odd ones, up to 3 MiB) equal ORIGINAL's.
same_at_offsets() {
	local ok=1 off want got
	for off in 0 1 4095 65537 1048576 3000001 3145700; do
		want=$(dd if="$2" bs=64K iflag=skip_bytes,count_bytes skip=$off count=70000 2>/dev/null | sha256sum)
		got=$(dd if="$3" bs=64K iflag=skip_bytes,count_bytes skip=$off count=70000 2>/dev/null | sha256sum)
		[ "$want" = "$got" ] || { ok=0; echo "# offset $off differs"; }
	done
	same "$1" 1 "$ok"
}

t_setup() {
	T_DIR=$(mktemp -d /tmp/mlfs-it.XXXXXX)
	chmod 755 "$T_DIR"
	MOUNT_PID=
}

is_mounted() {
	grep -q " $1 fuse.mlfs " /proc/self/mounts
}

# fg_mount MOUNTPOINT LOG COMMAND...: runs COMMAND (an mlfs in the foreground) in the
# background, its stderr in LOG, until MOUNTPOINT is mounted; MOUNT_PID is its pid.
fg_mount() {
	local mnt=$1 log=$2
	shift 2
	"$@" 2>"$log" &
	MOUNT_PID=$!
	for _ in $(seq 1 100); do
		is_mounted "$mnt" && return 0
		kill -0 "$MOUNT_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# mount of $mnt did not come up:"
	sed 's/^/#   /' "$log"
	return 1
}

# mount_fg CONFIG MOUNTPOINT [OPTS...]: mounts in the foreground, in the background.
mount_fg() {
	local conf=$1 mnt=$2
	shift 2
	fg_mount "$mnt" "$T_DIR/mount.${mnt##*/}.log" "$MLFS" mount -f "$@" "$conf" "$mnt"
}

# Another user, for what a job's owner may and may not do.
OTHER=65534	# nobody
as_other() { setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$@"; }

# job_state_in JOBS JOB STATE...: waits (at most 40 s, or $JOB_WAIT_TENTHS tenths of a
# second) until JOBS/JOB/state is one of STATE.
job_state_in() {
	local dir=$1 job=$2 st
	shift 2
	for _ in $(seq 1 "${JOB_WAIT_TENTHS:-400}"); do
		st=$(timeout 5 cat "$dir/$job/state" 2>/dev/null)
		for want in "$@"; do [ "$st" = "$want" ] && return 0; done
		sleep 0.1
	done
	echo "# $job is $st"
	return 1
}

# unmount_fg MOUNTPOINT: unmounts and checks that the daemon exited cleanly.
unmount_fg() {
	local status=0
	"$MLFS" umount "$1" || fusermount3 -u "$1" || true
	if [ -n "$MOUNT_PID" ]; then
		wait "$MOUNT_PID" || status=$?
		MOUNT_PID=
	fi
	local log="$T_DIR/mount.${1##*/}.log"
	if [ "$status" -eq 0 ] && ! grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$log"; then
		ok "daemon of $1 exited cleanly"
	else
		not_ok "daemon of $1 exited with $status"
		# its start and its end (where an exit's reason is), each at most 20 lines
		if [ "$(wc -l <"$log")" -le 40 ]; then
			sed 's/^/#   /' "$log"
		else
			{ head -20 "$log"; echo "..."; tail -20 "$log"; } | sed 's/^/#   /'
		fi
	fi
}

# server_cleanup SCRIPT DIR: unmounts the test's mount and stops the server
# that scripts/SCRIPT started in DIR.  Server tests call it from t_cleanup
# and from their EXIT trap.
server_cleanup() {
	if [ -n "${MOUNT_PID:-}" ]; then
		fusermount3 -u "$T_DIR/mnt" 2>/dev/null || true
		wait "$MOUNT_PID" 2>/dev/null || true
		MOUNT_PID=
	fi
	"$1" stop "$2" 2>/dev/null || true
}

# t_finish: prints the tally and removes the scratch folder.  A test that
# started servers defines t_cleanup, run first, while their pid files exist.
t_finish() {
	if declare -F t_cleanup >/dev/null; then
		t_cleanup
	fi
	if [ -n "${MOUNT_PID:-}" ]; then
		fusermount3 -u "$T_DIR/mnt" 2>/dev/null || true
		wait "$MOUNT_PID" 2>/dev/null || true
	fi
	rm -rf "$T_DIR"
	echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
}

# kill_once_saved PID FILE: waits (30 s at most) until FILE is not empty or
# the child PID ended, then kills PID with SIGKILL and reaps it; returns its
# exit status (137 when the kill ended it).
kill_once_saved() {
	for _ in $(seq 1 1500); do
		[ -s "$2" ] && break
		kill -0 "$1" 2>/dev/null || break
		sleep 0.02
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
