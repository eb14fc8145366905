# lib.sh - helpers sourced by tests/integration/*.sh.
# Each check prints "ok N - name" or "not ok N - name"; finish prints the
# summary and exits non-zero when anything failed.
FGPACK=${FGPACK:-$(pwd)/fgpack}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
_n=0
_failed=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fgtest.XXXXXX")
_cleanups=""

at_exit() { _cleanups="$* ; $_cleanups"; }
_run_cleanups() { eval "$_cleanups" ; rm -rf "$WORK"; }
trap _run_cleanups EXIT
trap 'exit 130' INT TERM

ok() { _n=$((_n + 1)); echo "ok $_n - $*"; }
not_ok() { _n=$((_n + 1)); _failed=$((_failed + 1)); echo "not ok $_n - $*"; }

# check NAME CMD...: passes when CMD exits 0.
check() {
	name=$1; shift
	if "$@" >"$WORK/.out" 2>&1; then ok "$name"; else not_ok "$name"; sed 's/^/#   /' "$WORK/.out" | tail -20; fi
}
# check_fails NAME CMD...: passes when CMD exits non-zero.
check_fails() {
	name=$1; shift
	if "$@" >"$WORK/.out" 2>&1; then not_ok "$name (exited 0)"; sed 's/^/#   /' "$WORK/.out" | tail -20; else ok "$name"; fi
}
# check_exit NAME CODE CMD...: passes when CMD exits with CODE.
check_exit() {
	name=$1; code=$2; shift 2
	"$@" >"$WORK/.out" 2>&1; rc=$?
	if [ "$rc" -eq "$code" ]; then ok "$name"; else not_ok "$name (exit $rc, wanted $code)"; sed 's/^/#   /' "$WORK/.out" | tail -20; fi
}
# check_grep NAME PATTERN FILE: passes when FILE contains PATTERN (grep -E).
check_grep() {
	if grep -Eq -- "$2" "$3"; then ok "$1"; else not_ok "$1 (no /$2/ in $3)"; sed 's/^/#   /' "$3" | tail -20; fi
}
# free_port: prints a TCP port free on 127.0.0.1 right now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
# wait_port PORT: waits up to 10 s for something to listen on 127.0.0.1:PORT.
wait_port() {
	i=0
	while [ $i -lt 100 ]; do
		python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$1)))" 2>/dev/null && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
finish() {
	echo "$((_n - _failed)) passed, $_failed failed"
	[ "$_failed" -eq 0 ]
}
