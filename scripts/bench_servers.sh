# bench_servers.sh - what the benchmarks against servers (bench_remote.sh,
# bench_netfs.sh) share beyond bench_lib.sh; sourced after it.  The caller
# sets $scratch, $srv (a tmpfs), $servers, $tmpfs_mounted, $MLFS, $PRETOUCH,
# $NFILES, $pids and the associative array med[].

# way_started MNT LOG: records the daemon just started in the background ($!)
# and waits until MNT is mounted.
way_started() {
	daemon=$!
	pids="$pids $daemon"
	wait_mounted "$1" "$daemon" "$2"
}

# cleanup: the EXIT trap: every mount and process, the servers in $servers
# ("name:dir" for scripts/server-name.sh), the tmpfs $srv, the scratch folder.
cleanup() {
	local s

	set +e
	bench_stop_all
	for s in $servers; do
		"scripts/server-${s%%:*}.sh" stop "${s#*:}" >/dev/null
	done
	if [ "$tmpfs_mounted" = 1 ]; then
		umount "$srv" || umount -l "$srv"
	fi
	rm -rf "$scratch"
}

# umount_way WAY: unmounts $scratch/mnt-WAY and waits for its daemon to exit.
umount_way() {
	local way=$1 mnt=$scratch/mnt-$1

	case $way in
	mlfs-*) "$MLFS" umount "$mnt" >/dev/null ;;
	*) fusermount3 -u "$mnt" ;;
	esac
	stop_pid "$daemon" 100	# it exits on its own once unmounted
	daemon=""
}

# pretouch_mem: $PRETOUCH bytes written to the tmpfs and freed (bench_lib.sh).
pretouch_mem() { pretouch "$srv/pretouch" "$PRETOUCH"; }

# read_file FILE / list_ls FOLDER: the timed commands.
read_file() { cat "$1" >/dev/null; }

list_ls() { ls -l "$1" >"$srv/ls.out"; }

# check_ls: the last list_ls showed all $NFILES files.
check_ls() {
	local n

	n=$(grep -c '^-' "$srv/ls.out" || true)
	[ "$n" = "$NFILES" ] || { echo "$bench: ls -l showed $n files, not $NFILES" >&2; return 1; }
}

# cell WAY STEP: a median of med[] for the table, with MiB/s for reads.
cell() {
	local v=${med[$1.$2]:-}

	if [ -z "$v" ]; then
		echo "-"
	elif [ "$2" = ls ]; then
		printf '%.3f' "$v"
	else
		printf '%.3f (%s)' "$v" "$(mibps "$v")"
	fi
}

# check_bytes FILE: in the first repetition ($run), FILE is the original big.bin.
check_bytes() {
	[ "$run" = 1 ] || return 0
	cmp -s "$1" "$scratch/disk/big.bin"
}

# measure_disk WAY: the disk reads both benchmarks compare the cache with:
# "direct" (the disk file after drop_caches) and "mlfs-local" (first read,
# then unmount, drop_caches, mount, read).  Returns 1 when WAY was left out.
measure_disk() {
	local way=$1
	if [ "$way" = direct ]; then
		drop_caches
		step "$way" disk read_file "$scratch/disk/big.bin"
		return
	fi
	rm -rf "$scratch/mlfs-cache" "$scratch/mlfs-state"
	mount_way "$way" || { drop_way "$way" "mount failed" mount; return 1; }
	step "$way" first read_file "$root/big.bin" || return 1
	umount_way "$way"
	drop_caches
	mount_way "$way" || { drop_way "$way" "second mount failed" mount; return 1; }
	step "$way" disk read_file "$root/big.bin" || return 1
	check_bytes "$root/big.bin" || { drop_way "$way" "read wrong bytes"; return 1; }
	umount_way "$way"
}
