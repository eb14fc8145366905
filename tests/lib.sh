# lib.sh - helpers sourced by tests/integration/*.sh.
# Each check prints "ok N - name" or "not ok N - name"; finish prints the
# summary and exits non-zero when anything failed.
FGPACK=${FGPACK:-$(pwd)/fgpack}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
_n=0
_failed=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fgtest.XXXXXX")
_cleanups=""
# hermetic: no token from the machine's `hf auth login` file or environment,
# no file from the machine's huggingface_hub cache
HF_TOKEN_PATH=$WORK/no-hf-token
HF_HUB_CACHE=$WORK/no-hf-cache
# nor the machine's fgpack store (a test that wants one makes it here, or
# names its own)
FGPACK_HOME=$WORK/fgpack-home
export HF_TOKEN_PATH HF_HUB_CACHE FGPACK_HOME
unset HUGGING_FACE_HUB_TOKEN HF_HUB_DISABLE_IMPLICIT_TOKEN

at_exit() { _cleanups="$* ; $_cleanups"; }
# strace with LeakSanitizer off in the traced process, which it cannot
# watch under ptrace (make asan-test); otherwise just strace
traced() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace "$@"; }
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
# special_outputs LABEL CMD [REF]: CMD, a shell command line, writes its
# output to "$OUT". A FIFO there (read by a cat in the background) gets the
# bytes, kept in $WORK/special.got and compared with file REF when given, and
# stays a FIFO; a character device of our own (mknod c 1 3, as /dev/null: the
# real one is never named) and a symlink to it stay what they were, with no
# temporary file beside them (skipped with a message where mknod fails: not
# root); a socket and a folder are refused in one line naming them, with
# nothing made. CMD's exit status must be 0, or 1 for the refusals. One of
# the process's own streams named by path (/dev/fd/3, opened on a regular
# file by the shell) gets the bytes through that descriptor: a regression
# that writes a file beside it fails there (nothing can be made in /dev/fd)
# instead of replacing anything.
special_outputs() {
	_sl=$1 _sc=$2 _sr=${3:-}
	_sd=$WORK/special
	rm -rf "$_sd" "$WORK/special.got"
	mkdir -p "$_sd"
	mkfifo "$_sd/fifo"
	timeout 30 cat "$_sd/fifo" >"$WORK/special.got" &
	_scat=$!
	OUT=$_sd/fifo
	export OUT
	check "$_sl: -o a FIFO" timeout 20 sh -c "$_sc"
	wait $_scat
	check "$_sl:   it stays a FIFO, nothing beside it" sh -c "test -p '$_sd/fifo' && test \"\$(ls -A '$_sd')\" = fifo"
	check "$_sl:   its reader got the output" test -s "$WORK/special.got"
	[ -z "$_sr" ] || check "$_sl:   the same bytes as to a regular file" cmp "$_sr" "$WORK/special.got"
	rm -f "$WORK/special.fd3"
	OUT=/dev/fd/3
	check "$_sl: -o /dev/fd/3 (a regular file the shell opened)" sh -c "exec 3>'$WORK/special.fd3'; $_sc"
	check "$_sl:   the file behind it got the output" test -s "$WORK/special.fd3"
	[ -z "$_sr" ] || check "$_sl:   the same bytes as to a regular file" cmp "$_sr" "$WORK/special.fd3"
	if mknod "$_sd/null" c 1 3 2>/dev/null; then
		ln -s null "$_sd/link"
		OUT=$_sd/null
		check "$_sl: -o a character device (c 1 3) exits 0" sh -c "$_sc"
		OUT=$_sd/link
		check "$_sl: -o a symlink to it exits 0" sh -c "$_sc"
		check "$_sl:   the device stays a character device" sh -c "test -c '$_sd/null' && ! test -L '$_sd/null'"
		check "$_sl:   the symlink stays a symlink to it" sh -c "test -L '$_sd/link' && test \"\$(readlink '$_sd/link')\" = null"
		check "$_sl:   no null.tmp.* or other file beside them" test "$(ls -A "$_sd" | tr '\n' ' ')" = "fifo link null "
	else
		echo "# skipped: mknod failed (not root): no character device checks for $_sl"
	fi
	python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$_sd/sock"
	mkdir "$_sd/dir"
	_sls=$(ls -A "$_sd" | tr '\n' ' ')
	OUT=$_sd/sock
	check_exit "$_sl: -o a socket is refused" 1 sh -c "$_sc"
	cp "$WORK/.out" "$WORK/special.err"
	check "$_sl:   in one line naming it" sh -c "test \"\$(wc -l <'$WORK/special.err')\" -eq 1 && grep -q '$_sd/sock is a socket' '$WORK/special.err'"
	OUT=$_sd/dir
	check_exit "$_sl: -o a folder is refused" 1 sh -c "$_sc"
	cp "$WORK/.out" "$WORK/special.err"
	check "$_sl:   in one line naming it" sh -c "test \"\$(wc -l <'$WORK/special.err')\" -eq 1 && grep -q '$_sd/dir is a folder' '$WORK/special.err'"
	check "$_sl:   nothing made, the socket still a socket" sh -c "test -S '$_sd/sock' && test \"\$(ls -A '$_sd' | tr '\\n' ' ')\" = '$_sls' && test -z \"\$(ls -A '$_sd/dir')\""
	unset OUT
}
# signal_when PID PATH SIG: PID, a background job of this shell, is
# stopped once PATH exists (its temporary file or folder), sent SIG and let
# go; prints its exit status, or "missed" (after waiting for it) when it
# ended before PATH showed. Call it in the shell that started PID (a
# $(...) around both, not around this alone: wait needs its own child).
signal_when() {
	while kill -0 "$1" 2>/dev/null && [ ! -e "$2" ]; do :; done
	kill -STOP "$1" 2>/dev/null
	if [ ! -e "$2" ]; then
		kill -CONT "$1" 2>/dev/null
		wait "$1"
		echo missed
		return
	fi
	kill -"$3" "$1"
	kill -CONT "$1"
	wait "$1"
	echo $?
}
# env_manifest FILE NAME KEY=VALUE...: a manifest named NAME whose env holds
# these entries, in order (values without quotes or backslashes)
env_manifest() {
	_em_f=$1 _em_name=$2; shift 2
	printf '{"name": "%s", "env": {' "$_em_name" >"$_em_f"; _em_sep=""
	for _em_kv in "$@"; do
		printf '%s"%s": "%s"' "$_em_sep" "${_em_kv%%=*}" "${_em_kv#*=}" >>"$_em_f"; _em_sep=", "
	done
	printf '}}\n' >>"$_em_f"
}
# kill_when_journaled PID STORE MIN: PID, a background pull of this shell into
# store STORE, is killed with SIGKILL once its journals (STORE/partial/*.journal)
# hold MIN lines (a header, then a line a range) or it ended, at most 60 s on;
# then waited for. Sets journaled to the journals' lines then. Call it in the
# shell that started PID (wait needs its own child).
kill_when_journaled() {
	_kj_i=0
	while [ $_kj_i -lt 600 ]; do
		journaled=$(cat "$2"/partial/*.journal 2>/dev/null | wc -l)
		[ "$journaled" -ge "$3" ] && break
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1; _kj_i=$((_kj_i + 1))
	done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	journaled=$(cat "$2"/partial/*.journal 2>/dev/null | wc -l)
}
# free_port: prints a TCP port free on 127.0.0.1 right now, never one it
# already gave this script (the kernel may hand a just-closed port out
# again, and two servers told to share a port meant one of them answered
# the other's requests: a 404 now and then). The ports given are kept in
# $WORK/.ports.
free_port() {
	python3 - "$WORK/.ports" <<'PY'
import os, socket, sys
f = sys.argv[1]
used = set(open(f).read().split()) if os.path.exists(f) else set()
for _ in range(100):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    if str(p) not in used:
        break
with open(f, "a") as o:
    o.write("%d\n" % p)
print(p)
PY
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
# test_ca DIR: openssl makes a CA (DIR/ca.pem, DIR/ca.key) and a server
# certificate for 127.0.0.1 signed by it (DIR/srv.pem, DIR/srv.key).
test_ca() {
	( cd "$1" &&
	  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=fgpack-test-ca \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1 &&
	  openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 >/dev/null 2>&1 &&
	  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >srv.ext &&
	  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
		-extfile srv.ext >/dev/null 2>&1 )
}
# nginx_conf LOG_FORMAT <SERVERS: writes $WORK/ngx/nginx.conf, which keeps
# nginx's pid, logs and temporary files under $WORK/ngx and writes its access
# log ($WORK/ngx/access.log) in LOG_FORMAT; stdin gives the rest of the
# "http {" block: the server blocks and the closing brace.
nginx_conf() {
	mkdir -p "$WORK/ngx/tmp"
	{ cat <<EOF
worker_processes 1;
daemon on;
pid $WORK/ngx/nginx.pid;
error_log $WORK/ngx/error.log warn;
events { worker_connections 64; }
http {
    default_type application/octet-stream;
    log_format fg '$1';
    access_log $WORK/ngx/access.log fg;
    client_body_temp_path $WORK/ngx/tmp/body;
    proxy_temp_path $WORK/ngx/tmp/proxy;
    fastcgi_temp_path $WORK/ngx/tmp/fastcgi;
    uwsgi_temp_path $WORK/ngx/tmp/uwsgi;
    scgi_temp_path $WORK/ngx/tmp/scgi;
EOF
	  cat; } >"$WORK/ngx/nginx.conf"
}
# nginx_start: starts nginx on $WORK/ngx/nginx.conf (as root it runs its
# workers as root, since $WORK may not be readable by nobody) and stops it
# when the test exits.
nginx_start() {
	if [ "$(id -u)" -eq 0 ]; then
		nginx -p "$WORK/ngx" -c "$WORK/ngx/nginx.conf" -e "$WORK/ngx/error.log" -g 'user root;'
	else
		nginx -p "$WORK/ngx" -c "$WORK/ngx/nginx.conf" -e "$WORK/ngx/error.log"
	fi
	at_exit "kill \$(cat $WORK/ngx/nginx.pid) 2>/dev/null"
}
# faultd_start: tests/servers/faultd.py serving $WORK/site on a free port,
# faults from $WORK/faults.json (written empty: none until a test writes
# some), log in $WORK/f.log; sets port and fpid, and ends the script when
# it does not start.
faultd_start() {
	port=$(free_port)
	echo '[]' >"$WORK/faults.json"
	python3 "$TOP/tests/servers/faultd.py" --port "$port" --root "$WORK/site" --log "$WORK/f.log" \
		--faults "$WORK/faults.json" &
	fpid=$!
	at_exit "kill $fpid"
	wait_port "$port" || { not_ok "faultd starts"; finish; exit 1; }
}
# check_ids_per_line PREFIX REF OURS NAME...: line i of OURS must equal line
# i of REF (one JSON array of ids per input file, NAME i naming file i); one
# check per file, named with PREFIX and the reference's token count. Line i
# of OURS is left in $WORK/.ours.i.
check_ids_per_line() {
	_p=$1 _ref=$2 _ours=$3; shift 3
	_i=0
	for _f in "$@"; do
		_i=$((_i + 1))
		sed -n "${_i}p" "$_ref" >"$WORK/.ref.$_i"
		sed -n "${_i}p" "$_ours" >"$WORK/.ours.$_i"
		_k=$(tr ',' '\n' <"$WORK/.ref.$_i" | wc -l)
		check "${_p}ids equal the reference: $_f ($_k tokens)" cmp -s "$WORK/.ref.$_i" "$WORK/.ours.$_i"
	done
}
finish() {
	echo "$((_n - _failed)) passed, $_failed failed"
	[ "$_failed" -eq 0 ]
}
