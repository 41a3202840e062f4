#!/bin/bash
# server-smb.sh - starts and stops a Samba smbd for the tests and benchmarks.
#
#   server-smb.sh start DIR PORT    prints the server's PID
#   server-smb.sh stop DIR
#
# The server listens on 127.0.0.1:PORT only and keeps everything in DIR:
# its smb.conf, every state folder, its private passdb, its logs, and the
# share [share] at DIR/share.  The Unix user mlfssmb (no home, no shell) is
# made once if missing; its Samba password, SMB_TEST_PASSWORD (default
# 'Passw0rd!'), is (re)set in DIR's passdb on every start.  smbd runs in its
# own session (setsid); its PID is in DIR/smbd.pid, its output in
# DIR/smbd.log.  Needs root (useradd, smbd).  See docs: servers.md §1.
set -eu
. "$(dirname "$0")/server_lib.sh"

SMB_USER=mlfssmb

smb_user() {
	id "$SMB_USER" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$SMB_USER"
}

smb_conf() {
	local dir=$1 port=$2
	cat >"$dir/smb.conf" <<CONF
[global]
   workgroup = WORKGROUP
   server role = standalone server
   interfaces = 127.0.0.1
   bind interfaces only = yes
   smb ports = $port
   disable netbios = yes
   passdb backend = tdbsam
   private dir = $dir/private
   lock directory = $dir/lock
   state directory = $dir/state
   cache directory = $dir/cache
   pid directory = $dir/pid
   ncalrpc dir = $dir/ncalrpc
   log file = $dir/log/log.%m
   load printers = no
   printing = bsd
   printcap name = /dev/null
   disable spoolss = yes
   map to guest = never
   server min protocol = SMB2_02
[share]
   path = $dir/share
   read only = no
   valid users = $SMB_USER
   create mask = 0644
CONF
}

smb_start() {
	local dir=$1 port=$2 pass=${SMB_TEST_PASSWORD:-Passw0rd!}
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	smb_user
	mkdir -p "$dir"/{private,lock,state,cache,pid,log,ncalrpc,share}
	chown "$SMB_USER" "$dir/share"
	# smbd's user must traverse every folder above the share (mktemp makes 0700).
	chmod o+x "$dir"
	smb_conf "$dir" "$port"
	printf '%s\n%s\n' "$pass" "$pass" |
		smbpasswd -c "$dir/smb.conf" -s -a "$SMB_USER" >/dev/null
	setsid smbd -F --no-process-group --debug-stdout -s "$dir/smb.conf" \
		</dev/null >>"$dir/smbd.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/smbd.pid"
	server_wait_port smbd "$pid" "$port" "$dir/smbd.log" "$dir/smbd.pid"
}

# Stops the main smbd by its PID; it takes its children (one per client) with it.
smb_stop() { server_stop_pidfile "$1/smbd.pid"; }

case ${1:-} in
start) [ $# -ge 3 ] || { echo "usage: $0 start DIR PORT" >&2; exit 2; }
	smb_start "$2" "$3" ;;
stop) [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	smb_stop "$2" ;;
*) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
