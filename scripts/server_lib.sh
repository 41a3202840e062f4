# server_lib.sh - what the test-server scripts (server-*.sh) share; sourced.

# server_stop_pidfile FILE: stops the process whose PID FILE holds (TERM,
# then KILL after 5 s) and removes FILE.  A zombie counts as stopped: PID 1
# does not reap on these machines.
server_stop_pidfile() {
	local pid
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	rm -f "$1"
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		[ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# server_port_up PORT PID: waits (10 s at most) until 127.0.0.1:PORT accepts
# a connection while PID lives; 0 when it does, 1 otherwise.
server_port_up() {
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# server_wait_port NAME PID PORT LOG PIDFILE: prints PID once PORT answers.
# When it does not: the end of LOG on stderr, PID killed, PIDFILE removed,
# exit 1.
server_wait_port() {
	local name=$1 pid=$2 port=$3 log=$4 pidfile=$5
	if server_port_up "$port" "$pid"; then
		echo "$pid"
		return 0
	fi
	echo "$name did not come up on 127.0.0.1:$port:" >&2
	tail -20 "$log" | sed 's/^/  /' >&2
	kill "$pid" 2>/dev/null || true
	rm -f "$pidfile"
	exit 1
}
