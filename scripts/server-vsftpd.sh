#!/bin/bash
# server-vsftpd.sh - a vsftpd on 127.0.0.1 for the ftp backend's tests and benchmark.
#
#   server-vsftpd.sh start DIR PORT   serves DIR/pub (read-only, anonymous, and the
#                                     local user mlfsftp with password mlfsftp) over FTP
#                                     with explicit TLS offered (AUTH TLS) under a
#                                     self-signed certificate, DIR/cert.pem; passive
#                                     ports PORT+1 to PORT+100; prints the PID once
#                                     the port answers
#   server-vsftpd.sh stop DIR         stops it and every login it serves
#
# vsftpd runs in the foreground (background=NO) in its own session; its conf,
# log and pid file live in DIR.  The served root must not be writable by the
# FTP user (vsftpd refuses a writable chroot): DIR/pub is made 555.  A
# refused login is answered at once (delay_failed_login=0), not after the
# default second that a short test timeout would read as a stall.  See
# ../shared/notes/servers.md §9.
set -eu
. "$(dirname "$0")/server_lib.sh"

USER_NAME=mlfsftp

vsftpd_user() {
	# vsftpd enters the user's home before local_root: it must exist
	mkdir -p /var/lib/$USER_NAME
	id "$USER_NAME" >/dev/null 2>&1 ||
		useradd -M -d /var/lib/$USER_NAME -s /usr/sbin/nologin "$USER_NAME" >/dev/null
	echo "$USER_NAME:$USER_NAME" | chpasswd
	# a local login needs a shell listed in /etc/shells (pam_shells)
	grep -qx /usr/sbin/nologin /etc/shells || echo /usr/sbin/nologin >>/etc/shells
}

vsftpd_cert() {
	local dir=$1
	[ -s "$dir/cert.pem" ] && return 0
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1
}

vsftpd_conf() {
	local dir=$1 port=$2
	cat >"$dir/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$port
background=NO
anonymous_enable=YES
anon_root=$dir/pub
no_anon_password=YES
local_enable=YES
local_root=$dir/pub
chroot_local_user=YES
write_enable=NO
pasv_enable=YES
pasv_address=127.0.0.1
pasv_min_port=$((port + 1))
pasv_max_port=$((port + 100))
secure_chroot_dir=/var/run/vsftpd/empty
seccomp_sandbox=NO
pam_service_name=vsftpd
xferlog_enable=YES
vsftpd_log_file=$dir/vsftpd.log
log_ftp_protocol=YES
max_clients=200
delay_failed_login=0
max_per_ip=200
ssl_enable=YES
allow_anon_ssl=YES
force_local_logins_ssl=NO
force_local_data_ssl=NO
ssl_tlsv1=YES
require_ssl_reuse=NO
rsa_cert_file=$dir/cert.pem
rsa_private_key_file=$dir/key.pem
CONF
}

vsftpd_start() {
	local dir port pid
	mkdir -p "$1/pub" /var/run/vsftpd/empty
	dir=$(cd "$1" && pwd)
	port=$2
	vsftpd_user
	vsftpd_cert "$dir" || { echo "cannot make a certificate in $dir" >&2; exit 1; }
	vsftpd_conf "$dir" "$port"
	chmod 555 "$dir/pub"
	setsid vsftpd "$dir/vsftpd.conf" </dev/null >"$dir/vsftpd.out" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/vsftpd.pid"
	server_wait_port vsftpd "$pid" "$port" "$dir/vsftpd.out" "$dir/vsftpd.pid"
}

# Each login is a process of its own session (vsftpd calls setsid), which
# outlives the listener: stop ends them too, so a client's kept connection
# sees the server gone, as after a crash.  They are found by their command
# line, which names this DIR's vsftpd.conf: a snapshot of the listener's
# descendants taken before it went could miss a login forked meanwhile (which
# then served its connection on, as if the server were still up).
vsftpd_logins() {
	local conf=$1 f
	for f in /proc/[0-9]*/cmdline; do
		# (a process may be gone by now: its cmdline with it)
		[ "$({ tr '\0' ' ' <"$f"; } 2>/dev/null)" = "vsftpd $conf " ] || continue
		f=${f#/proc/}
		echo "${f%/cmdline}"
	done
}

vsftpd_stop() {
	local dir=$1 pids i
	[ -f "$dir/vsftpd.pid" ] || return 0
	dir=$(cd "$dir" && pwd)
	server_stop_pidfile "$dir/vsftpd.pid"	# the listener first: no login after it
	for i in 1 2 3 4 5; do
		pids=$(vsftpd_logins "$dir/vsftpd.conf")
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
}

case ${1:-} in
start) [ $# -eq 3 ] || { echo "usage: $0 start DIR PORT" >&2; exit 2; }
	vsftpd_start "$2" "$3" ;;
stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	vsftpd_stop "$2" ;;
*) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
