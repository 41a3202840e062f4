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
