#!/bin/sh
# pull_url.sh - components given as plain URLs and local files: nginx over
# real TLS on loopback, HTTP/2 (a CA and a server certificate made here by openssl,
# trusted through CURL_CA_BUNDLE / SSL_CERT_FILE), plain http, a small server
# that gives neither ETag, Last-Modified nor ranges, and file:// files and
# folders. Checks ranges in parallel, the token sent to the Hub endpoint's origin
# only, the lock entry, --locked
# noticing a change, pin mismatches leaving nothing behind, and one-line errors.
. "$(dirname "$0")/../lib.sh"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
www=$WORK/www
mkdir -p "$www/w" "$WORK/ngx/tmp" "$WORK/local/tree/sub"
python3 - "$www" "$WORK/local" <<'PY'
import os, random, sys
r = random.Random(3)
www, loc = sys.argv[1:3]
blk = r.randbytes(1 << 20)
with open(os.path.join(www, 'w/model+v1.safetensors'), 'wb') as f:  # 24 MiB: 6 ranges of 4 MiB
    for i in range(24):
        f.write(blk[i:] + blk[:i])
with open(os.path.join(www, 'w/tok.json'), 'w') as f:
    f.write('{"vocab": 3}\n')
with open(os.path.join(loc, 'single.bin'), 'wb') as f:
    f.write(r.randbytes(300000))
for i in range(5):
    with open(os.path.join(loc, 'tree/sub' if i % 2 else 'tree', 'f%d.txt' % i), 'w') as f:
        f.write('file %d\n' % i * (i + 1))
os.makedirs(os.path.join(www, 'buckets/gemma-challenge'))
with open(os.path.join(www, 'buckets/gemma-challenge/gemma-x'), 'w') as f:  # a bucket's web page
    f.write('<!doctype html><title>gemma-x</title>\n')
with open(os.path.join(www, 'w/card.html'), 'w') as f:  # an HTML file named as one
    f.write('<!doctype html><title>model card</title>\n')
PY
big=$www/w/model+v1.safetensors
big_sha=$(sha256sum "$big" | cut -d' ' -f1)

# a CA and a certificate for 127.0.0.1 signed by it
test_ca "$WORK" || { not_ok "openssl makes a CA and a certificate"; finish; exit 1; }

tls=$(free_port); plain=$(free_port); bare=$(free_port); proxy=$(free_port)
nginx_conf '$server_port $request_method $request_uri $status $body_bytes_sent "$http_range" auth=$http_authorization c=$connection tls=$ssl_session_reused $server_protocol' <<EOF
    server {
        listen 127.0.0.1:$tls ssl http2;
        ssl_certificate $WORK/srv.pem;
        ssl_certificate_key $WORK/srv.key;
        ssl_session_cache shared:fgtest:1m;
        root $www;
        location /moved/ { rewrite ^/moved/(.*)$ /w/\$1 redirect; }
    }
    server {
        listen 127.0.0.1:$plain;
        root $www;
        etag off;
        location /buckets/ { default_type "text/html; charset=utf-8"; }
    }
    # a forward proxy for plain http (absolute-form requests, as http_proxy makes them)
    server {
        listen 127.0.0.1:$proxy;
        location / { proxy_pass http://\$http_host; }
    }
}
EOF
nginx_start
# a server with neither ETag, Last-Modified nor ranges
python3 - "$www" "$bare" >"$WORK/bare.log" 2>&1 <<'PY' &
import os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
root, port = sys.argv[1], int(sys.argv[2])
class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def answer(self, body):
        p = os.path.join(root, self.path.lstrip('/'))
        if not os.path.isfile(p):
            self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return
        data = open(p, 'rb').read()
        self.send_response(200)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)
        sys.stdout.write('%s %s %d auth=%s\n' % (self.command, self.path, len(data) if body else 0,
                                                 self.headers.get('Authorization', '')))
        sys.stdout.flush()
    def do_HEAD(self): self.answer(False)
    def do_GET(self): self.answer(True)
    def log_message(self, *a): pass
ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
PY
at_exit "kill $! 2>/dev/null"
wait_port "$tls" && wait_port "$plain" && wait_port "$bare" || { not_ok "servers start"; cat "$WORK/ngx/error.log"; finish; exit 1; }
log=$WORK/ngx/access.log
# the TLS server is the Hub endpoint: its URLs get the token, as
# huggingface_hub sends it to its endpoint; no other server may see it
export HF_TOKEN=hf_secret_token HF_ENDPOINT="https://127.0.0.1:$tls" FGPACK_HOME="$WORK/store" FGPACK_CHUNK=4194304
unset HF_HUB_OFFLINE CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR
man() { _mf=$1; shift; env_manifest "$_mf" u "$@"; } # man FILE KEY=VALUE...: a manifest with these env entries
U="https://127.0.0.1:$tls/w/model%2Bv1.safetensors"
man "$WORK/tls.json" "WEIGHTS_BUCKET=$U" LOCAL_MODEL_DIR=/tmp/u/model "WEIGHTS_SHA256=$big_sha"

check_fails "https without trusting the test CA fails" "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/tls.lock"
check_grep "the failure says why" 'certificate|SSL' "$WORK/.out"
n=$(wc -l <"$WORK/.out")
[ "$n" -eq 1 ] && ok "the failure is one line" || not_ok "the failure is one line (got $n)"
if [ -z "$(find "$WORK/store/blobs" -type f 2>/dev/null)" ] && [ ! -e "$WORK/tls.lock" ]; then ok "nothing kept after the TLS failure"; else not_ok "nothing kept after the TLS failure"; fi

check "https pull with CURL_CA_BUNDLE" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/tls.lock" --into "$WORK/out" -j 4
check "https file materialized intact (name percent-decoded)" cmp "$big" "$WORK/out/tmp/u/model/model+v1.safetensors"
r=$(grep -c "^$tls GET /w/model%2Bv1.safetensors 206 " "$log")
[ "$r" -ge 6 ] && ok "fetched as $r parallel ranges" || not_ok "fetched as parallel ranges (got $r range answers)"
# the TLS server speaks HTTP/2, where libcurl would run every range as a
# stream of one connection: -j 4 must mean connections
check_grep "  over HTTP/2" "^$tls GET /w/model%2Bv1.safetensors 206 .* HTTP/2.0$" "$log"
nc=$(grep "^$tls GET /w/model%2Bv1.safetensors 206 " "$log" | grep -o ' c=[0-9]*' | sort -u | wc -l)
[ "$nc" -ge 2 ] && ok "  the ranges over $nc connections, not streams of one" ||
	not_ok "  the ranges over several connections (got $nc)"
# the later connections resume the first one's TLS session (one session
# cache for all of a run's transfers): no full handshake each
check_grep "  a later connection resumed the TLS session" "^$tls GET /w/model%2Bv1.safetensors 206 .* tls=r HTTP/2.0$" "$log"
check_grep "the token sent to a plain URL on the Hub endpoint's origin" "^$tls GET /w/model%2Bv1.safetensors 206 .*auth=Bearer hf_secret_token " "$log"
check_grep "lock: kind https" '"kind": "https"' "$WORK/tls.lock"
check_grep "lock: sha256 computed" "\"sha256\": \"$big_sha\"" "$WORK/tls.lock"
check_grep "lock: url" "\"url\": \"$U\"" "$WORK/tls.lock"
check_grep "lock: etag" '"etag": "\\"[0-9a-f]+-[0-9a-f]+\\""' "$WORK/tls.lock"
check_grep "lock: last_modified" '"last_modified": "[A-Z][a-z][a-z], ' "$WORK/tls.lock"
check_grep "lock: size" '"size": 25165824' "$WORK/tls.lock"
check_grep "lock: owner is the host" "\"owner\": \"127.0.0.1:$tls\"" "$WORK/tls.lock"
check "SSL_CERT_FILE is honoured too; --locked passes while unchanged" env SSL_CERT_FILE="$WORK/ca.pem" "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/tls.lock" --locked
check "lock written again is the same bytes" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" lock "$WORK/tls.json" -o "$WORK/tls2.lock"
check "same bytes" cmp "$WORK/tls.lock" "$WORK/tls2.lock"
lines=$(wc -l <"$log")
check "no-op re-pull offline" env HF_HUB_OFFLINE=1 "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/tls.lock" --into "$WORK/out"
[ "$(wc -l <"$log")" -eq "$lines" ] && ok "offline re-pull made no request" || not_ok "offline re-pull made no request"
# the pull through a redirect (same host) works and the lock keeps the URL as written
man "$WORK/moved.json" "WEIGHTS_BUCKET=https://127.0.0.1:$tls/moved/tok.json"
check "https redirect followed" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/moved.json" --lock "$WORK/moved.lock" --into "$WORK/mv"
check "redirected file intact" cmp "$www/w/tok.json" "$WORK/mv/_components/WEIGHTS_BUCKET/tok.json"

# content changes with the same size: the ETag moves, --locked must notice
cp "$big" "$WORK/big.orig"
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(100); f.write(b'CHANGED'); f.close()" "$big"
touch -d '2030-01-01' "$big"
cp "$WORK/tls.lock" "$WORK/tls.before"
check_exit "--locked after the URL's content changed fails" 3 env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/tls.lock" --locked
check_grep "--locked names what changed" 'WEIGHTS_BUCKET: model\+v1.safetensors changed on the remote.*ETag' "$WORK/.out"
check "--locked left the lock alone" cmp "$WORK/tls.lock" "$WORK/tls.before"
# the pin no longer matches: nothing behind
new_sha=$(sha256sum "$big" | cut -d' ' -f1)
check_exit "pull against a failing pin fails" 3 env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/tls.json" --lock "$WORK/pin.lock" --into "$WORK/pin"
check_grep "pin mismatch names file, expected and actual" "model\+v1.safetensors: expected sha256 $big_sha \(WEIGHTS_SHA256\), got $new_sha" "$WORK/.out"
if [ -z "$(find "$WORK/store/blobs" -name "$new_sha")" ] && [ ! -e "$WORK/pin.lock" ] && [ ! -e "$WORK/pin" ] &&
   [ -z "$(ls "$WORK/store/partial" 2>/dev/null)" ]; then ok "pin mismatch left nothing behind"; else not_ok "pin mismatch left nothing behind"; fi
cp "$WORK/big.orig" "$big"

# the journal claims only bytes on disk: every journal append comes after an
# fdatasync of the part file and is followed by an fdatasync of the journal
if command -v strace >/dev/null 2>&1 && strace -f -qq -e trace=none true 2>/dev/null; then
	traced -f -qq -y -e trace=fdatasync,write -o "$WORK/sync.trace" env CURL_CA_BUNDLE="$WORK/ca.pem" FGPACK_HOME="$WORK/store6" \
		"$FGPACK" pull "$WORK/tls.json" --lock "$WORK/sync.lock" -j 4 >/dev/null 2>&1
	check "journal appends follow an fdatasync of the part and precede one of the journal" python3 - "$WORK/sync.trace" <<'PY'
import re, sys
ev = []
for line in open(sys.argv[1]):
    m = re.search(r'(fdatasync|write)\(\d+<([^>]*)>', line)
    if m and '/partial/' in m.group(2):
        ev.append((m.group(1), m.group(2).rsplit('.', 1)[1]))
appends = [i for i, e in enumerate(ev) if e == ('write', 'journal')]
assert len(appends) >= 2, ev  # the header, then at least one batch of ranges
for i in appends[1:]:
    before = [e for e in ev[:i] if e[0] == 'fdatasync']
    assert before and before[-1] == ('fdatasync', 'part'), (i, ev[:i + 1])
    after = [e for e in ev[i + 1:] if e[0] == 'fdatasync']
    assert after and after[0] == ('fdatasync', 'journal'), (i, ev[i:])
print(len(appends) - 1, 'appends checked')
PY
else
	ok "journal sync order # SKIP strace unavailable"
fi

# plain http: Last-Modified but no ETag
man "$WORK/plain.json" "KEEPSET_BUCKET=http://127.0.0.1:$plain/w/tok.json"
check "http pull" "$FGPACK" pull "$WORK/plain.json" --lock "$WORK/plain.lock" --into "$WORK/pl"
check "http file intact" cmp "$www/w/tok.json" "$WORK/pl/_components/KEEPSET_BUCKET/tok.json"
check_grep "http lock has last_modified" '"last_modified"' "$WORK/plain.lock"
if grep -q '"etag"' "$WORK/plain.lock"; then not_ok "http lock has no etag (server sent none)"; else ok "http lock has no etag (server sent none)"; fi
if grep -v "^$tls " "$log" | grep -q hf_secret_token; then not_ok "no token sent to another origin (same address, other port)"; else ok "no token sent to another origin (same address, other port)"; fi

# neither validator nor ranges: one request, and --locked compares the bytes
man "$WORK/bare.json" "WEIGHTS_BUCKET=http://127.0.0.1:$bare/w/model+v1.safetensors"
check "pull from a server without ranges or validators" "$FGPACK" pull "$WORK/bare.json" --lock "$WORK/bare.lock" --into "$WORK/bare"
check "its file is intact" cmp "$big" "$WORK/bare/_components/WEIGHTS_BUCKET/model+v1.safetensors"
n=$(grep -c '^GET ' "$WORK/bare.log")
[ "$n" -eq 1 ] && ok "one GET for the whole file" || not_ok "one GET for the whole file (got $n)"
if grep -q "hf_secret" "$WORK/bare.log"; then not_ok "no token to the bare server"; else ok "no token to the bare server"; fi
check "--locked passes while the bytes are the same" "$FGPACK" pull "$WORK/bare.json" --lock "$WORK/bare.lock" --locked
# lock --check cannot tell without the bytes, and fetches nothing: said, exit 0
: >"$WORK/bare.log"
check "lock --check of a file without validators: exit 0" "$FGPACK" lock "$WORK/bare.json" -o "$WORK/bare.lock" --check
check_grep "  named as unknown" "unknown  model\+v1.safetensors \(no ETag or Last-Modified: only its bytes could tell\)" "$WORK/.out"
if grep -q '^GET ' "$WORK/bare.log"; then not_ok "  no GET"; else ok "  no GET"; fi
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(7); f.write(b'Z'); f.close()" "$big"
new_sha=$(sha256sum "$big" | cut -d' ' -f1)
check_exit "--locked notices changed bytes without validators" 3 "$FGPACK" pull "$WORK/bare.json" --lock "$WORK/bare.lock" --locked
check_grep "and says so" 'changed on the remote since the lock \(sha256' "$WORK/.out"
if [ -z "$(find "$WORK/store/blobs" -name "$new_sha")" ]; then ok "the changed bytes are not kept"; else not_ok "the changed bytes are not kept"; fi
cp "$WORK/big.orig" "$big"
# --locked into an empty store from a server without validators: the file
# fetched and hashed against the lock in this run is not fetched a second
# time to check it (one GET); the server is named by the first env key while
# the lock sorts it last
man "$WORK/bare2.json" "Z_BUCKET=http://127.0.0.1:$bare/w/model+v1.safetensors" "A_BUCKET=http://127.0.0.1:$plain/w/tok.json"
check "a lock of a no-ranges server's file (first in env, last in the lock)" env FGPACK_HOME="$WORK/store_b2" "$FGPACK" lock "$WORK/bare2.json" -o "$WORK/bare2.lock"
: >"$WORK/bare.log"
check "  --locked into an empty store" env FGPACK_HOME="$WORK/store_b3" "$FGPACK" pull "$WORK/bare2.json" --lock "$WORK/bare2.lock" --locked
n=$(grep -c '^GET ' "$WORK/bare.log")
[ "$n" -eq 1 ] && ok "  one GET for the whole file" || not_ok "  one GET for the whole file (got $n)"

# file://: one file and a folder, read locally
man "$WORK/file.json" "WEIGHTS_BUCKET=file://$WORK/local/tree" LOCAL_MODEL_DIR=/tmp/f/model "DRAFTER_BUCKET=file://$WORK/local/single.bin"
check "file:// pull" "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file.lock" --into "$WORK/fo"
check "file:// folder materialized" diff -r "$WORK/local/tree" "$WORK/fo/tmp/f/model"
check "file:// single file materialized" cmp "$WORK/local/single.bin" "$WORK/fo/_components/DRAFTER_BUCKET/single.bin"
check_grep "lock: kind file" '"kind": "file"' "$WORK/file.lock"
n=$(grep -c '"path"' "$WORK/file.lock")
[ "$n" -eq 6 ] && ok "lock lists 6 local files" || not_ok "lock lists 6 local files (got $n)"
# the local files are imported several at once: every one counted, once
fstat() { python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["fetch"]; print(f["files_fetched"], f["files_present"])' "$1"; }
env FGPACK_HOME="$WORK/store6" "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file6.lock" --json >"$WORK/f6.json" 2>/dev/null
check "file:// into a fresh store: 6 files imported" [ "$(fstat "$WORK/f6.json")" = "6 0" ]
env FGPACK_HOME="$WORK/store6" "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file6.lock" --json >"$WORK/f7.json" 2>/dev/null
check "  again: 6 present, none imported" [ "$(fstat "$WORK/f7.json")" = "0 6" ]
check "  the same lock as the first pull's" cmp "$WORK/file.lock" "$WORK/file6.lock"
check "file:// --locked passes while unchanged" "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file.lock" --locked
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.write(b'F'); f.close()" "$WORK/local/tree/sub/f1.txt"  # same size
check_exit "file:// --locked notices a changed file" 3 "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file.lock" --locked
check_grep "and names it" 'sub/f1.txt changed on disk since the lock' "$WORK/.out"
ln -s /etc/passwd "$WORK/local/tree/link"
check_fails "file:// folder with a symlink is refused" "$FGPACK" pull "$WORK/file.json" --lock "$WORK/file2.lock"
check_grep "naming it, in one line" '^fgpack pull: .*tree/link: a symlink; file:// takes regular files only$' "$WORK/.out"
rm "$WORK/local/tree/link"
mkfifo "$WORK/local/fifo"
man "$WORK/fifo.json" "WEIGHTS_BUCKET=file://$WORK/local/fifo"
check_fails "file:// FIFO is refused (and does not hang)" timeout 20 "$FGPACK" pull "$WORK/fifo.json" --lock "$WORK/fifo.lock"
check_grep "not a regular file" 'not a regular file' "$WORK/.out"
man "$WORK/fpin.json" "DRAFTER_BUCKET=file://$WORK/local/single.bin" "DRAFTER_SHA256=$big_sha"
check_exit "file:// pin mismatch fails" 3 env FGPACK_HOME="$WORK/store3" "$FGPACK" pull "$WORK/fpin.json" --lock "$WORK/fpin.lock" --into "$WORK/fpin"
if [ -z "$(find "$WORK/store3/blobs" -type f)" ] && [ ! -e "$WORK/fpin.lock" ] && [ ! -e "$WORK/fpin" ] &&
   [ -z "$(ls "$WORK/store3/tmp" 2>/dev/null)" ]; then ok "file:// pin mismatch left nothing behind"; else not_ok "file:// pin mismatch left nothing behind"; fi
# dependencies: recorded and classified; --deps fetches URL ones (a local "wheel" server)
tok_sha=$(sha256sum "$www/w/tok.json" | cut -d' ' -f1)
W="https://127.0.0.1:$tls/w/tok.json"
printf '{"name": "d", "dependencies": ["%s#sha256=%s", "transformers==5.9.0", "torch", "x>=1"], "env": {}}\n' "$W" "$tok_sha" >"$WORK/deps.json"
FGPACK_HOME=$WORK/store5  # its only gc root will be deps.lock
check "lock without --deps" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" lock "$WORK/deps.json" -o "$WORK/deps.lock"
n=$(grep -c 'warning: dependency' "$WORK/.out")
[ "$n" -eq 2 ] && ok "one warning line per unpinned dependency" || not_ok "one warning line per unpinned dependency (got $n)"
check_grep "warning names torch" '^fgpack lock: warning: dependency "torch" is not pinned' "$WORK/.out"
check "dependencies classified in the lock" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))['manifests']['deps.json']['dependencies']
assert [x['kind'] for x in d] == ['url', 'pin', 'unpinned', 'unpinned'], d
assert d[1]['name'] == 'transformers' and d[1]['version'] == '5.9.0'
assert 'sha256' not in d[0] and d[0]['url'] == sys.argv[2]" "$WORK/deps.lock" "$W"
audit_deps() { # FILE SHA SIZE: audit --json lists the four dependencies with kind, sha256, size
	python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))['dependencies']
assert [(x['spec'].split('#')[0], x['kind']) for x in d] == [(sys.argv[4], 'url'), ('transformers==5.9.0', 'pin'), ('torch', 'unpinned'), ('x>=1', 'unpinned')], d
assert d[0]['url'] == sys.argv[4] and d[0]['expected_sha256'] == sys.argv[5], d[0]
assert d[0]['sha256'] == (sys.argv[2] or None) and d[0]['size'] == (int(sys.argv[3]) if sys.argv[3] else None), d[0]
assert d[1]['version'] == '5.9.0' and d[1]['sha256'] is None and d[1]['size'] is None
w = [x['key'] for x in json.load(open(sys.argv[1]))['warnings'] if x['code'] == 'unpinned-dependency']
assert w == ['torch', 'x>=1'], w" "$@" "$W" "$tok_sha"
}
"$FGPACK" audit "$WORK/deps.json" --lock "$WORK/deps.lock" --json >"$WORK/aud0.json" 2>&1
check "audit before --deps: kinds listed, no digest yet" audit_deps "$WORK/aud0.json" "" ""
dl=$(wc -l <"$log")
check "pull --deps fetches the URL dependency" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/deps.json" --lock "$WORK/deps.lock" --deps
check_grep "its sha256 is recorded" "\"sha256\": \"$tok_sha\"" "$WORK/deps.lock"
"$FGPACK" audit "$WORK/deps.json" --lock "$WORK/deps.lock" --json >"$WORK/aud1.json" 2>&1
check "audit after --deps: the URL dependency's sha256 and size from the lock" audit_deps "$WORK/aud1.json" "$tok_sha" "$(stat -c %s "$www/w/tok.json")"
"$FGPACK" audit "$WORK/deps.lock" --json >"$WORK/aud2.json" 2>&1
check "audit of the lock alone lists them too" audit_deps "$WORK/aud2.json" "$tok_sha" "$(stat -c %s "$www/w/tok.json")"
"$FGPACK" audit "$WORK/deps.lock" >"$WORK/aud.txt" 2>&1
check_grep "audit table: the url dependency's digest" "^    sha256:   $tok_sha" "$WORK/aud.txt"
check_grep "audit table: exact pin" "^  transformers==5.9.0$" "$WORK/aud.txt"
check_grep "audit table: kinds" "kind: +exact pin" "$WORK/aud.txt"
check_grep "audit table: unpinned" "kind: +UNPINNED" "$WORK/aud.txt"
if [ -d "$TOP/tests/node/node_modules" ]; then
	"$FGPACK" audit "$WORK/deps.lock" --cyclonedx >"$WORK/aud.cdx.json" 2>&1
	check "audit --cyclonedx with dependencies is valid CycloneDX 1.6" node "$TOP/tests/integration/cdx_validate.js" "$WORK/aud.cdx.json"
	check "the URL dependency is a library with its sha256, the pin a purl" python3 -c "
import json, sys
c = [x for x in json.load(open(sys.argv[1]))['components'] if x['type'] == 'library']
assert c[0]['hashes'][0]['content'] == sys.argv[2], c[0]
assert c[1]['purl'] == 'pkg:pypi/transformers@5.9.0', c[1]" "$WORK/aud.cdx.json" "$tok_sha"
fi
# on the Hub endpoint's origin too: a wheel is no Hub file (pip never sends the token)
if tail -n +$((dl + 1)) "$log" | grep "/w/tok.json" | grep -q hf_secret || ! tail -n +$((dl + 1)) "$log" | grep -Eq "^$tls GET /w/tok.json 20[06] "; then
	not_ok "no token sent for a dependency"
else
	ok "no token sent for a dependency"
fi
check "fgpack lock again (no --deps) keeps the digest" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" lock "$WORK/deps.json" -o "$WORK/deps.lock"
check_grep "digest kept" "\"sha256\": \"$tok_sha\"" "$WORK/deps.lock"
check "--locked --deps passes" env CURL_CA_BUNDLE="$WORK/ca.pem" "$FGPACK" pull "$WORK/deps.json" --lock "$WORK/deps.lock" --locked --deps
check "store gc keeps the dependency's blob" "$FGPACK" store gc --lock "$WORK/deps.lock"
check "still there: --deps offline from the store" env HF_HUB_OFFLINE=1 "$FGPACK" pull "$WORK/deps.json" --lock "$WORK/deps.lock" --deps
printf '{"name": "d", "dependencies": ["%s#sha256=%s"], "env": {}}\n' "$W" "$big_sha" >"$WORK/deps2.json"
check_exit "a URL dependency whose #sha256= does not match fails" 1 env CURL_CA_BUNDLE="$WORK/ca.pem" FGPACK_HOME="$WORK/store4" "$FGPACK" pull "$WORK/deps2.json" --lock "$WORK/deps2.lock" --deps
check_grep "naming both digests" "sha256 $tok_sha, the URL's #sha256= says $big_sha" "$WORK/.out"
if [ -z "$(find "$WORK/store4/blobs" -type f)" ] && [ ! -e "$WORK/deps2.lock" ]; then ok "nothing kept after the dependency mismatch"; else not_ok "nothing kept after the dependency mismatch"; fi
FGPACK_HOME=$WORK/store

man "$WORK/bad.json" "WEIGHTS_BUCKET=https://127.0.0.1:$tls/"
check_fails "a URL naming no file is refused" "$FGPACK" pull "$WORK/bad.json" --lock "$WORK/bad.lock"
check_grep "in one line" '^fgpack pull: WEIGHTS_BUCKET: https://.*names no (usable )?file( name)?$' "$WORK/.out"
# a bucket's web page pasted from the browser (text/html): refused, not
# locked as a file holding the page
man "$WORK/page.json" "WEIGHTS_BUCKET=http://127.0.0.1:$plain/buckets/gemma-challenge/gemma-x" LOCAL_MODEL_DIR=/tmp/x
check_exit "a URL answering with a web page (text/html) is refused" 1 env FGPACK_HOME="$WORK/store_page" "$FGPACK" pull "$WORK/page.json" --lock "$WORK/page.lock" --into "$WORK/page"
check_grep "in one line, saying what to write instead" '^fgpack pull: WEIGHTS_BUCKET/gemma-x: http://.* is a web page \(Content-Type text/html\), not a file: .*hf://buckets/' "$WORK/.out"
if [ ! -e "$WORK/page.lock" ] && [ ! -e "$WORK/page" ] && [ -z "$(find "$WORK/store_page/blobs" -type f 2>/dev/null)" ]; then ok "  no lock, nothing placed, nothing stored"; else not_ok "  no lock, nothing placed, nothing stored"; fi
# an HTML file whose URL names it as one (card.html, text/html) is a file
man "$WORK/card.json" "WEIGHTS_BUCKET=http://127.0.0.1:$plain/w/card.html?v=1" LOCAL_MODEL_DIR=/tmp/x
check "a URL naming an .html file is pulled as that file" env FGPACK_HOME="$WORK/store_card" "$FGPACK" pull "$WORK/card.json" --lock "$WORK/card.lock" --into "$WORK/card"
check "  its bytes placed" cmp "$www/w/card.html" "$WORK/card/tmp/x/card.html"
# the proxy the environment names (libcurl's http_proxy / no_proxy, as curl
# and huggingface_hub's requests read them): the request goes through it
man "$WORK/px.json" "WEIGHTS_BUCKET=http://127.0.0.1:$plain/w/tok.json" LOCAL_MODEL_DIR=/tmp/px
check "http_proxy honoured: lock through the proxy" env http_proxy="http://127.0.0.1:$proxy" no_proxy= NO_PROXY= FGPACK_HOME="$WORK/store_px" "$FGPACK" lock "$WORK/px.json" -o "$WORK/px.lock"
check_grep "  the proxy served it" "^$proxy GET /w/tok.json 20[06]" "$WORK/ngx/access.log"
check_fails "a proxy that is down: the lock fails" env http_proxy="http://127.0.0.1:9" no_proxy= NO_PROXY= FGPACK_HOME="$WORK/store_px2" "$FGPACK" lock "$WORK/px.json" -o "$WORK/px2.lock"
check "  and no_proxy=127.0.0.1 goes around it" env http_proxy="http://127.0.0.1:9" no_proxy=127.0.0.1 FGPACK_HOME="$WORK/store_px2" "$FGPACK" lock "$WORK/px.json" -o "$WORK/px2.lock"
finish
