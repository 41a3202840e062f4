#!/bin/bash
# cli_test.sh - the commands and their bad input: a missing or malformed
# config, a local root that does not exist, a mountpoint that does not exist
# or is already mounted, an unknown executor, daemonizing, fstab's mount -t
# fuse.mlfs, umount of a busy mount, check, --help, --version.
# Usage: cli_test.sh MLFS
set -u
MLFS=$1
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
mkdir -p data mnt
echo hi >data/hi
cat >good.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
[datastore d]
type = local
root = data
CONF
M=$T_DIR/mnt
nothing_mounted() { ! grep -q " $M " /proc/self/mounts; }

same "--version" "mlfs 0.1.0" "$("$MLFS" --version | head -1)"
same "--version lists the backends built" "backends: local nfs smb s3 gcs azure http ftp git archive" \
	"$("$MLFS" --version | sed -n 2p)"
check "--help names every command" sh -c "'$MLFS' --help | grep -q 'mlfs umount' && '$MLFS' --help | grep -q 'mlfs check'"
fails "no arguments is a usage error" "usage:" "$MLFS"
fails "a mistyped command is named as such" "'chek' is neither a command" "$MLFS" chek good.conf

# --- bad input to mount: one line, non-zero, nothing mounted
fails "a missing config" "nope.conf: No such file or directory" "$MLFS" mount nope.conf "$M"
check "nothing mounted after a missing config" nothing_mounted
printf '[mlfs]\nstate_dir = s\n[datastore d\ntype = local\n' >malformed.conf
fails "a malformed config names file and line" "malformed.conf:3:" "$MLFS" mount malformed.conf "$M"
check "nothing mounted after a malformed config" nothing_mounted
printf '[datastore d]\ntype = local\nroot = %s/missing\n' "$T_DIR" >noroot.conf
fails "a local root that does not exist" "noroot.conf:3: [datastore d] root: $T_DIR/missing: No such file or directory" "$MLFS" mount noroot.conf "$M"
check "nothing mounted after a missing root" nothing_mounted
printf '[datastore d]\ntype = local\nroot = /\n[dataset a]\nsource = d:/x.zip\n' >zip.conf
fails "an archive source that is not there" "zip.conf:5: [dataset a] source: d:/x.zip: No such file or directory" "$MLFS" mount zip.conf "$M"
printf '[datastore d]\ntype = local\nroot = %s/data\n[dataset typo]\nsource = d:/hj\n' "$T_DIR" >typo.conf
fails "a dataset whose folder is not there" "typo.conf:5: [dataset typo] source: d:/hj: No such file or directory" "$MLFS" mount typo.conf "$M"
check "nothing mounted after a missing dataset" nothing_mounted
printf '[mlfs]\nstate_dir = s\ncache_dir = c\nexecutor = k8s\n' >executor.conf
fails "an executor nobody knows, with file, line and the choices" \
	"executor.conf:4: [mlfs] executor: unknown executor 'k8s' (use local or slurm)" \
	"$MLFS" mount executor.conf "$M"
check "nothing mounted after an unknown executor" nothing_mounted
fails "a mountpoint that does not exist" "mountpoint $T_DIR/nowhere: No such file or directory" "$MLFS" mount good.conf "$T_DIR/nowhere"
fails "a mountpoint that is a file" "not a folder" "$MLFS" mount good.conf "$T_DIR/good.conf"
fails "an unknown FUSE option" "unknown option" "$MLFS" mount -o no_such_option good.conf "$M"
check "nothing mounted after an unknown option" nothing_mounted
fails "a missing mountpoint argument" "usage:" "$MLFS" mount good.conf

# --- daemonized mount, already mounted, busy, umount
check "mount daemonizes and returns" "$MLFS" mount good.conf "$M"
same "the daemon serves the tree" hi "$(cat "$M/datastores/d/hi")"
same "the mount is of type fuse.mlfs" 1 "$(grep -c " $M fuse.mlfs " /proc/self/mounts)"
fails "mounting again on it fails" "already a mount point" "$MLFS" mount good.conf "$M"
same "still one mount" 1 "$(grep -c " $M fuse.mlfs " /proc/self/mounts)"
(cd "$M/datastores/d" && sleep 3) &
busy=$!
sleep 0.3
fails "umount of a busy mount is refused" "busy" "$MLFS" umount "$M"
same "a busy mount stays mounted" 1 "$(grep -c " $M fuse.mlfs " /proc/self/mounts)"
wait $busy
check "umount" "$MLFS" umount "$M"
check "nothing left mounted after umount" nothing_mounted
fails "umount of something not mounted" "not an mlfs mount" "$MLFS" umount "$M"
fails "umount refuses a mount that is not FUSE" "not an mlfs mount" "$MLFS" umount /proc

# --- signals and a dead daemon
# term_fg WHAT: SIGTERM to the foreground mount; it must unmount and exit 0.
term_fg() {
	local status=0
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || status=$?
	MOUNT_PID=
	same "SIGTERM unmounts $1 and exits 0" 0 "$status"
	check "nothing left mounted after SIGTERM ($1)" nothing_mounted
}
mount_fg good.conf "$M" || not_ok "foreground mount came up"
term_fg "the mount"
# the same at a relative mountpoint: libfuse unmounted the path it was given after
# fuse_daemonize's chdir "/", so the mount was left behind, dead
fg_mount "$M" "$T_DIR/rel.log" sh -c "cd '$(dirname "$M")' && exec '$MLFS' mount -f '$PWD/good.conf' '$(basename "$M")'" ||
	not_ok "foreground mount at a relative path came up"
term_fg "a relative mountpoint"
"$MLFS" mount good.conf "$M"
daemon=$(pgrep -f "mlfs mount good.conf $M" | head -1)
kill -KILL "$daemon"
sleep 0.3
fails "a killed daemon leaves a dead mount" "Transport endpoint is not connected" ls "$M"
fails "mount over a dead mount says what to do" "mlfs umount" "$MLFS" mount good.conf "$M"
check "umount clears a dead mount" "$MLFS" umount "$M"
check "and the mountpoint is usable again" "$MLFS" mount good.conf "$M"
fails "another user cannot unmount root's mount" "" setpriv --reuid=65534 --regid=65534 --clear-groups "$MLFS" umount "$M"
same "root's mount is still there" 1 "$(grep -c " $M fuse.mlfs " /proc/self/mounts)"
# one gateway per state_dir: a second would run the first's queued jobs again
mkdir -p "$T_DIR/mnt2"
fails "a second gateway on the same state_dir is refused, naming the first's mountpoint" \
	"state_dir $T_DIR/state is another running mlfs's (mounted at $M)" \
	"$MLFS" mount good.conf "$T_DIR/mnt2"
same "... and nothing is mounted there" 0 "$(grep -c " $T_DIR/mnt2 fuse.mlfs " /proc/self/mounts)"
# the daemon goes on a moment after the unmount, holding the state_dir: umount waits
# for it, so `mlfs umount M && mlfs mount CONF M` is never refused as a second gateway
daemon=$(pgrep -f "mlfs mount good.conf $M" | head -1)
check "umount" "$MLFS" umount "$M"
same "umount returns once the daemon has ended" ended \
	"$(s=$(awk '{ print $3 }' "/proc/$daemon/stat" 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ] && echo running || echo ended)"
check "once the first is unmounted, the state_dir can be mounted elsewhere" "$MLFS" mount good.conf "$T_DIR/mnt2"
check "umount" "$MLFS" umount "$T_DIR/mnt2"

# --- the fstab form: for a line of type fuse.mlfs, mount(8) runs mount.fuse3,
# which runs "mlfs CONFIG MOUNTPOINT -o OPTS" from the PATH (here: the build)
mkdir -p bin
ln -sf "$(readlink -f "$MLFS")" bin/mlfs
check "mount.fuse3 (an fstab line) mounts" env PATH="$T_DIR/bin:$PATH" mount.fuse3 "$T_DIR/good.conf" "$M" -t mlfs -o ro
same "the fstab mount serves the tree" hi "$(cat "$M/datastores/d/hi")"
fails "-o ro passed through to the kernel" "Read-only file system" touch "$M/datastores/d/new"
check "umount of the fstab mount" umount "$M"

# --- install: the binary and its manual page
check "cmake --install installs mlfs and mlfs(1)" \
	cmake --install "$(dirname "$(readlink -f "$MLFS")")" --prefix "$T_DIR/inst"
check "the installed binary runs" "$T_DIR/inst/bin/mlfs" --version
check "the installed manual page reads" sh -c "man -l '$T_DIR/inst/share/man/man1/mlfs.1' | grep -q 'mlfs mount'"

# --- check
check "check accepts a good config" sh -c "'$MLFS' check good.conf | grep -qx 'good.conf: ok'"
fails "check names the line of a bad config" "malformed.conf:3:" "$MLFS" check malformed.conf
fails "check reports every bad file" "noroot.conf:3:" "$MLFS" check good.conf malformed.conf noroot.conf
fails "check names an unknown executor's line" "executor.conf:4: [mlfs] executor: unknown executor 'k8s'" \
	"$MLFS" check executor.conf
echo '{"name": "job"}' >job.json
fails "check names the field a spec lacks" "job.json:1:1: workers: " "$MLFS" check job.json
printf '{"workers": [{"command": "true"}]}\n' >good.json
check "check accepts a good spec, naming the job after the file" \
	sh -c "'$MLFS' check good.json | grep -qx 'good.json: ok (native spec, job good, 1 worker(s))'"
fails "check reports a spec and a config in one run" "job.json:1:1: workers: " "$MLFS" check good.conf job.json
fails "check -c with a bad config" "malformed.conf:3:" "$MLFS" check -c malformed.conf
printf '{"workers": [{"command": "true"}],\n "data": {"datasets": ["nosuch"]}}\n' >data.json
check "without -c a spec's dataset names are not checked" "$MLFS" check data.json
fails "check -c checks a spec's datasets against the config" \
	'data.json:2:24: data.datasets[0]: no dataset named "nosuch" in good.conf' \
	"$MLFS" check -c good.conf data.json
check "check -c accepts a spec that names nothing unknown" "$MLFS" check -c good.conf good.json

# --- logpipe (what Slurm batch scripts pipe a worker's output through)
fails "logpipe without its arguments prints its usage" "usage: mlfs logpipe" "$MLFS" logpipe
fails "logpipe --max wants a number" "--max 'ten' is not a number of bytes" "$MLFS" logpipe --max ten l j 1
fails "logpipe wants a worker number" "WORKER 'x' is not a worker number" "$MLFS" logpipe l j x
check "logpipe copies its input" sh -c "printf 'a\nb' | '$MLFS' logpipe --max 0 wlog jlog 2"
same "... unchanged into the worker's log" "a b" "$(xargs <wlog)"
same "... prefixed, whole lines, into the job's" "[2] a|[2] b|" "$(tr '\n' '|' <jlog)"
ln -s /etc/passwd linked
passwd_sum=$(sha /etc/passwd)
check "a log that is a link: logpipe still reads its input to the end" \
	sh -c "seq 1 100000 | '$MLFS' logpipe linked jlog 2 2>lp.err"
check "... says why it drops that log" grep -q "linked: Too many levels of symbolic links: its output is dropped" lp.err
same "... never wrote through the link" "$passwd_sum" "$(sha /etc/passwd)"
same "... and the job's log got it all" "[2] 100000" "$(tail -1 jlog)"

t_finish
