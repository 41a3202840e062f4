#!/bin/bash
# server-nfs.sh - starts and stops an NFS test server for the tests and benchmarks.
#
#   server-nfs.sh start DIR NFSPORT MNTPORT   prints ganesha's PID
#   server-nfs.sh stop DIR
#
# nfs-ganesha with FSAL VFS exports DIR/export as the pseudo path /export,
# NFSv3 and v4 over TCP on 127.0.0.1:NFSPORT (MOUNT on MNTPORT), no root
# squashing.  Ganesha will not serve v3 without an rpcbind to register with,
# and Debian 12's rpcbind cannot be told to listen on 127.0.0.1 alone (it
# crashes with -h), so rpcbind runs in a private network namespace of its
# own, named after the ports (notes/servers.md §2); ganesha reaches it
# through /run/rpcbind.sock and clients never ask it (they pass nfsport= and
# mountport=).  Seed DIR/export before starting: changing it behind
# ganesha's back can give NFS3ERR_STALE.  Both daemons run in their own
# sessions; their PIDs are in DIR/ganesha.pid and DIR/rpcbind.pid, ganesha's
# log is DIR/ganesha.log.  Needs root, ganesha.nfsd, rpcbind and ip.
set -eu
. "$(dirname "$0")/server_lib.sh"

nfs_conf() {
	local dir=$1 nfsport=$2 mntport=$3
	cat <<CONF
NFS_CORE_PARAM {
	Bind_addr = 127.0.0.1;
	NFS_Port = $nfsport;
	MNT_Port = $mntport;
	Protocols = 3, 4;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
	Mount_Path_Pseudo = true;
}
NFSV4 {
	Graceless = true;
	Only_Numeric_Owners = true;
	RecoveryBackend = fs;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1;
	Path = $dir/export;
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	Protocols = 3, 4;
	Transports = TCP;
	SecType = sys;
	FSAL { Name = VFS; }
}
CONF
}

nfs_start_rpcbind() {
	local dir=$1 ns=$2
	ip netns del "$ns" 2>/dev/null || true
	rm -f /run/rpcbind.sock /run/rpcbind.lock
	ip netns add "$ns"
	ip netns exec "$ns" ip link set lo up
	# nsenter, not `ip netns exec`: that one also makes a mount namespace,
	# a copy that would pin every FUSE mount of the moment (an unmount
	# would then never reach the daemon).
	setsid nsenter --net="/run/netns/$ns" rpcbind -f </dev/null >"$dir/rpcbind.log" 2>&1 &
	echo "$!" >"$dir/rpcbind.pid"
	for _ in $(seq 1 100); do
		[ -S /run/rpcbind.sock ] && return 0
		sleep 0.05
	done
	echo "rpcbind did not come up:" >&2
	sed 's/^/  /' "$dir/rpcbind.log" >&2
	return 1
}

# One try at rpcbind and ganesha on DIR (absolute); ganesha's PID on stdout, 1 when it failed.
nfs_try() {
	local dir=$1 nfsport=$2 mntport=$3 ns pid
	ns=mlfsnfs$nfsport-$mntport
	echo "$ns" >"$dir/netns"
	nfs_start_rpcbind "$dir" "$ns" || return 1
	setsid ganesha.nfsd -F -L "$dir/ganesha.log" -f "$dir/ganesha.conf" \
		-p "$dir/ganesha.run.pid" -N NIV_EVENT </dev/null >"$dir/ganesha.out" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/ganesha.pid"
	server_port_up "$nfsport" "$pid" && server_port_up "$mntport" "$pid" || return 1
	echo "$pid"
}

# Twice at most: ganesha once died at start with nothing in its logs (a CI run, 2026-11-28).
nfs_start() {
	local dir=$1 nfsport=$2 mntport=$3
	mkdir -p "$dir/export" /var/run/ganesha /var/lib/nfs/ganesha
	dir=$(cd "$dir" && pwd)
	nfs_conf "$dir" "$nfsport" "$mntport" >"$dir/ganesha.conf"
	for try in 1 2; do
		nfs_try "$dir" "$nfsport" "$mntport" && return 0
		echo "ganesha did not come up on 127.0.0.1:$nfsport (try $try of 2):" >&2
		tail -20 "$dir/rpcbind.log" "$dir/ganesha.log" "$dir/ganesha.out" 2>/dev/null |
			sed 's/^/  /' >&2
		nfs_stop "$dir"
		sleep 0.5
	done
	exit 1
}

# 0 while PID runs (a zombie nobody reaps counts as gone).
nfs_alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

# Sends SIGTERM to the PID in FILE and waits up to 10 s for it to go (then SIGKILL).
nfs_kill() {
	local file=$1 pid
	[ -f "$file" ] || return 0
	pid=$(cat "$file")
	rm -f "$file"
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 200); do
		nfs_alive "$pid" || return 0
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	sleep 0.1
}

nfs_stop() {
	local dir=$1
	nfs_kill "$dir/ganesha.pid"
	nfs_kill "$dir/rpcbind.pid"
	if [ -f "$dir/netns" ]; then
		ip netns del "$(cat "$dir/netns")" 2>/dev/null || true
		rm -f "$dir/netns"
	fi
	rm -f /run/rpcbind.sock /run/rpcbind.lock /run/rpcbind.xdr /run/portmap.xdr "$dir/ganesha.run.pid"
}

case ${1:-} in
start)
	[ $# -eq 4 ] || { echo "usage: $0 start DIR NFSPORT MNTPORT" >&2; exit 2; }
	nfs_start "$2" "$3" "$4"
	;;
stop)
	[ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	nfs_stop "$2"
	;;
*)
	echo "usage: $0 start DIR NFSPORT MNTPORT | stop DIR" >&2
	exit 2
	;;
esac
