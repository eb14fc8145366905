#!/bin/sh
# pull_interop.sh - fgpack lock against servers that speak the same protocols
# as the Hub but not the way our other fixtures do (tests/servers/faultd.py
# modes): header names in lowercase, chunked listings, connections closed
# after every answer, Range ignored or answered with another range, Link
# headers in the forms RFC 8288 allows (a quoted param holding a comma, two
# Link lines, relative URLs, several relation types), Retry-After as an HTTP
# date, a 429 with only the Hub's RateLimit field, relative redirects of every code, a redirect chain to another host
# (no token there), HF_ENDPOINT with a trailing slash and a path prefix,
# paths needing percent-encoding, a file that changed since it was listed,
# a server ignoring Range on a file of many ranges (one request after the first),
# listings that ignore recursive=true (folders listed one by one),
# a renamed model repo (relative 307), a branch that moved after its
# listing, and a plain URL whose server refuses HEAD or answers it without
# Content-Length (chunked), an empty one too (416 to byte 0), and a private
# file given as a plain resolve URL on the Hub's origin (HF_TOKEN sent there,
# never to the CDN it redirects to). Every lock is made in a fresh store (nothing known beforehand), so a
# wrong byte would show as a wrong sha256 against the fault-free lock.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
B=$WORK/b/w
mkdir -p "$B/ünï" "$WORK/md"
python3 - "$B" "$WORK/md" <<'PY'
import os, sys
b, md = sys.argv[1:3]
with open(os.path.join(b, 'model.safetensors'), 'wb') as f:   # 4 chunks of 1 MiB (FGPACK_CHUNK)
    f.write(os.urandom(3 * 1024 * 1024 + 12345))
for i in range(3):
    with open(os.path.join(b, 'f%d.json' % i), 'w') as f:
        f.write('{"i": %d}\n' % i)
with open(os.path.join(b, 'sp ace #?%+;=.json'), 'w') as f:     # every byte here needs encoding
    f.write('{"odd": 1}\n')
with open(os.path.join(b, 'ünï', 'cödé.txt'), 'w') as f:
    f.write('unicode\n')
os.makedirs(os.path.join(b, 'poids modèle'))
for n in ('a b.txt', 'cödé.txt', 'zé.txt'):                        # listed in two pages
    with open(os.path.join(b, 'poids modèle', n), 'w') as f:
        f.write(n + '\n')
with open(os.path.join(md, 'model.safetensors'), 'wb') as f:
    f.write(os.urandom(200000))
with open(os.path.join(md, 'config.json'), 'w') as f:
    f.write('{"model_type": "gemma4_assistant"}\n')
PY
commit=89abcdef0123456789abcdef0123456789abcdef
commit2=fedcba9876543210fedcba9876543210fedcba98
mkdir -p "$WORK/e" && : >"$WORK/e/empty.bin"
python3 $S/hubtree.py "$WORK/site" --bucket acme/b="$WORK/b" --bucket acme/e="$WORK/e" --model ns/drafter@$commit="$WORK/md" \
	--model ns/moving@$commit2="$WORK/md" --page-size 2 --mtime 2026-01-01T00:00:00.000Z
# ns/moving's main moved on after its listing: the listing at "main" still
# shows a file the commit behind main (what a HEAD reports) no longer has
python3 - "$WORK/site/api/models/ns/moving/tree/main/_tree.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d.append({'type': 'file', 'path': 'gone.bin', 'size': 5, 'oid': '0' * 40})
json.dump(d, open(p, 'w'))
PY
echo '[]' >"$WORK/faults.json"
echo '[]' >"$WORK/faults2.json"
port=$(free_port); port2=$(free_port); port3=$(free_port)
python3 $S/faultd.py --port "$port" --root "$WORK/site" --log "$WORK/f.log" --faults "$WORK/faults.json" 2>>"$WORK/faultd.err" &
at_exit "kill $!"
# "another host": a CDN serving the same tree below /cdn
python3 $S/faultd.py --port "$port2" --root "$WORK/site" --log "$WORK/f2.log" --faults "$WORK/faults2.json" --prefix /cdn 2>>"$WORK/faultd.err" &
at_exit "kill $!"
# a mirror serving the hub below a path (HF_ENDPOINT=http://host/mirror/)
python3 $S/faultd.py --port "$port3" --root "$WORK/site" --log "$WORK/f3.log" --faults "$WORK/faults2.json" --prefix /mirror 2>>"$WORK/faultd.err" &
at_exit "kill $!"
wait_port "$port" && wait_port "$port2" && wait_port "$port3" || { not_ok "faultd starts"; finish; exit 1; }
printf '{"name": "i", "model_id": "ns/drafter", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/b/w", "LOCAL_MODEL_DIR": "/m"}}\n' >"$WORK/m.json"
HUB="http://127.0.0.1:$port"
export HF_ENDPOINT="$HUB" HF_TOKEN=hf_interop_secret FGPACK_STALL_SECS=2 FGPACK_RETRY_BASE_MS=20 FGPACK_CHUNK=1048576
unset HF_HUB_OFFLINE
check "lock through faultd (no faults)" env FGPACK_HOME="$WORK/s0" "$FGPACK" lock "$WORK/m.json" -o "$WORK/good.lock"
big_sha=$(sha256sum "$B/model.safetensors" | cut -d' ' -f1)
odd_sha=$(sha256sum "$B/sp ace #?%+;=.json" | cut -d' ' -f1)
check_grep "good lock: the big file's sha256" "$big_sha" "$WORK/good.lock"
check_grep "good lock: a path with space # ? % + ; = and its sha256" "\"path\": \"sp ace #\?%\+;=.json\"" "$WORK/good.lock"
check_grep "good lock: the odd path's sha256" "$odd_sha" "$WORK/good.lock"
check_grep "good lock: a unicode path" '"path": "ünï/cödé.txt"' "$WORK/good.lock"
check_grep "odd path percent-encoded in its resolve URL" 'resolve/w/sp%20ace%20%23%3F%25%2B%3B%3D.json' "$WORK/f.log"
check_grep "unicode path percent-encoded as UTF-8" 'resolve/w/%C3%BCn%C3%AF/c%C3%B6d%C3%A9.txt' "$WORK/f.log"
check_grep "model repo pinned to its commit" "\"revision\": \"$commit\"" "$WORK/good.lock"
grep -o '"sha256": "[0-9a-f]*"' "$WORK/good.lock" >"$WORK/good.sums"

n=0
# lock_case NAME RULES [ok | fail EXIT REGEX]: fgpack lock into a fresh store under RULES
lock_case() {
	name=$1; rules=$2; want=$3
	n=$((n + 1))
	echo "$rules" >"$WORK/faults.json"
	: >"$WORK/f.log"
	FGPACK_HOME="$WORK/s$n" "$FGPACK" lock "$WORK/m.json" -o "$WORK/c$n.lock" >"$WORK/c$n.out" 2>&1
	rc=$?
	echo '[]' >"$WORK/faults.json"
	if [ "$want" = ok ]; then
		grep -o '"sha256": "[0-9a-f]*"' "$WORK/c$n.lock" 2>/dev/null >"$WORK/c$n.sums"
		if [ $rc -eq 0 ] && cmp -s "$WORK/good.sums" "$WORK/c$n.sums"; then
			ok "$name: lock has every right sha256"
		else
			not_ok "$name: lock has every right sha256 (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" | tail -5
		fi
	else
		if [ $rc -eq "$4" ] && [ "$(wc -l <"$WORK/c$n.out")" -le 1 ] && grep -Eq -- "$5" "$WORK/c$n.out" && [ ! -e "$WORK/c$n.lock" ]; then
			ok "$name: exit $4, no lock, one clear line: $(cat "$WORK/c$n.out")"
		else
			not_ok "$name: exit $4, no lock, one line matching /$5/ (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" | tail -5
		fi
	fi
}
R='"match": "/buckets/acme/b/resolve/w/model.safetensors"'
lock_case "header names in lowercase (as HTTP/2 sends them)" '[{"match": "*", "fault": "lower"}]' ok
lock_case "listings chunked, no Content-Length" '[{"match": "/api/*", "fault": "chunked"}]' ok
# a server that gzips whatever it may (RFC 9110 12.5.3: no Accept-Encoding
# accepts any coding; then listings are gzip and a file's length counts
# gzipped bytes): fgpack asks for identity, so it gets the stored bytes
lock_case "listings and files gzipped unless the request asks for identity" '[{"match": "*", "fault": "gzip"}]' ok
# a folder's own entries only: ünï/ comes back as a directory, cödé.txt
# below it only when ünï/ is listed in turn
lock_case "listings not recursive (recursive=true ignored)" '[{"match": "/api/*", "fault": "flat"}]' ok
lock_case "server closes the connection after every answer" '[{"match": "*", "fault": "close"}]' ok
lock_case "Range ignored: 200 with the whole file for every range" "[{$R, \"fault\": \"norange\"}]" ok
# 13 ranges of 256 KiB, 4 at a time: once a range comes back as the whole
# file, the rest is one request (not one whole-file answer per range: n^2/2)
echo "[{$R, \"fault\": \"norange\"}]" >"$WORK/faults.json"
: >"$WORK/f.log"
check "Range ignored, 13 ranges of 256 KiB, -j 4: lock" env FGPACK_HOME="$WORK/sn" FGPACK_CHUNK=262144 \
	"$FGPACK" lock "$WORK/m.json" -o "$WORK/norange.lock" -j 4
echo '[]' >"$WORK/faults.json"
check_grep "  the right sha256" "$big_sha" "$WORK/norange.lock"
n_get=$(grep -c '"GET", "path": "/buckets/acme/b/resolve/w/model.safetensors"' "$WORK/f.log")
# about the 4 ranges of the first wave, then the whole file: far from 13
# (a little slack: a range may be sent before the first 200 is seen)
[ "$n_get" -le 8 ] && ok "  a few ranged GETs, then one for the whole file (got $n_get of 13)" || not_ok "  a few ranged GETs, then one for the whole file (got $n_get of 13)"
check_grep "  the whole-file request" '"range": "bytes=0-3158072", "status": 200' "$WORK/f.log"
lock_case "206 shorter than the range asked (capped at 100000 bytes)" "[{$R, \"fault\": \"rangecap\", \"cap\": 100000}]" ok
lock_case "206 starting 1000 bytes before the range asked" "[{$R, \"fault\": \"rangeback\", \"back\": 1000}]" ok
lock_case "Link: a quoted param holding a comma before rel" '[{"match": "/api/*", "fault": "link", "style": "quoted"}]' ok
lock_case "Link: rel=prev and rel=next in two header lines" '[{"match": "/api/*", "fault": "link", "style": "two"}]' ok
lock_case "Link: a relative next URL" '[{"match": "/api/*", "fault": "link", "style": "relative"}]' ok
lock_case "Link: rel with two types, in mixed case" '[{"match": "/api/*", "fault": "link", "style": "multi"}]' ok
# a component folder whose name needs encoding (w/poids modèle, two pages):
# the next page's Link encoded (as the Hub's), or written raw (a blank and
# UTF-8 bytes, which huggingface_hub's client requotes and follows), gives
# every file; a next link that is no usable URL fails the lock, where it
# used to end the listing after its first page and lock what was there
printf '{"name": "u", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/b/w/poids mod\303\250le"}}\n' >"$WORK/mu.json"
# uni_case NAME STYLE: lock mu.json into a fresh store with Link style STYLE ("" = the Hub's)
uni_case() {
	n=$((n + 1))
	[ -n "$2" ] && echo "[{\"match\": \"/api/*\", \"fault\": \"link\", \"style\": \"$2\"}]" >"$WORK/faults.json"
	FGPACK_HOME="$WORK/s$n" "$FGPACK" lock "$WORK/mu.json" -o "$WORK/c$n.lock" >"$WORK/c$n.out" 2>&1
	rc=$?
	echo '[]' >"$WORK/faults.json"
	if [ $rc -eq 0 ] && [ "$(grep -c '"path": ' "$WORK/c$n.lock")" -eq 3 ] && grep -q '"path": "a b.txt"' "$WORK/c$n.lock" &&
	   grep -q '"path": "cödé.txt"' "$WORK/c$n.lock"; then
		ok "$1: all 3 files of its folder locked"
	else
		not_ok "$1: all 3 files of its folder locked (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" "$WORK/c$n.lock" 2>/dev/null | tail -12
	fi
}
uni_case "Link: a next page of the folder w/poids modèle, encoded" ""
uni_case "Link: a next page of the folder w/poids modèle, its path written raw" raw
n=$((n + 1))
echo '[{"match": "/api/*", "fault": "link", "style": "badport"}]' >"$WORK/faults.json"
FGPACK_HOME="$WORK/s$n" "$FGPACK" lock "$WORK/mu.json" -o "$WORK/c$n.lock" >"$WORK/c$n.out" 2>&1
rc=$?
echo '[]' >"$WORK/faults.json"
if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/c$n.out")" -eq 1 ] && [ ! -e "$WORK/c$n.lock" ] &&
   grep -q "WEIGHTS_BUCKET: .*next page whose link is no usable URL" "$WORK/c$n.out"; then
	ok "Link: a next page whose URL is unusable (port 99999): exit 1, no lock, one line: $(cat "$WORK/c$n.out")"
else
	not_ok "Link: a next page whose URL is unusable (port 99999): exit 1, no lock, one line (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" | tail -5
fi
# waited PATH SECONDS: the faultd log shows a retry of PATH at least SECONDS after its failed answer
waited() {
	python3 - "$WORK/f.log" "$1" "$2" <<'PY'
import json, sys
log, path, want = sys.argv[1], sys.argv[2], float(sys.argv[3])
t = [r for r in map(json.loads, open(log)) if r['path'].endswith(path) and r['method'] == 'GET']
gap = t[1]['time'] - t[0]['time'] if len(t) >= 2 and t[0]['status'] >= 400 else -1
print('retried after %.2f s' % gap)
sys.exit(0 if gap >= want else 1)
PY
}
lock_case "503 with Retry-After as an HTTP date" '[{"match": "*/f1.json", "fault": "status", "code": 503, "retry_after_date": 2, "times": 1}]' ok
check "the HTTP-date Retry-After was waited for" waited /f1.json 0.9
lock_case "429 with the Hub's RateLimit (t=2) and no Retry-After" '[{"match": "*/f2.json", "fault": "status", "code": 429, "ratelimit": 2, "times": 1}]' ok
check "the RateLimit reset (2 s) was waited for" waited /f2.json 1.9
for code in 301 302 303 307 308; do
	lock_case "relative redirect ($code) on the big file" "[{$R, \"fault\": \"redirect\", \"code\": $code, \"name\": 1, \"times\": 2}]" ok
done
check_grep "the relative Location was followed" 'model.safetensors\?moved=1' "$WORK/f.log"

# a chain: the hub answers 308 to another host, which redirects within itself
echo '[{"match": "*", "fault": "redirect", "code": 302, "name": 1, "times": 1}]' >"$WORK/faults2.json"
: >"$WORK/f2.log"
lock_case "308 to another host, then a relative 302 there" "[{$R, \"fault\": \"redirect\", \"code\": 308, \"to\": \"http://127.0.0.1:$port2/cdn\"}]" ok
echo '[]' >"$WORK/faults2.json"
check_grep "the other host served the file" '"/cdn/buckets/acme/b/resolve/w/model.safetensors\?moved=1".*"status": 206' "$WORK/f2.log"
if grep -q hf_interop_secret "$WORK/f2.log"; then not_ok "no token sent to the other host"; else ok "no token sent to the other host"; fi
check_grep "the token went to the hub" 'Bearer hf_interop_secret' "$WORK/f.log"

# HF_ENDPOINT with a path and a trailing slash
check "HF_ENDPOINT=http://host/mirror/: lock" env HF_ENDPOINT="http://127.0.0.1:$port3/mirror/" FGPACK_HOME="$WORK/sm" \
	"$FGPACK" lock "$WORK/m.json" -o "$WORK/mirror.lock"
grep -o '"sha256": "[0-9a-f]*"' "$WORK/mirror.lock" >"$WORK/mirror.sums"
check "the mirror's lock has the same sha256s" cmp "$WORK/good.sums" "$WORK/mirror.sums"
check_grep "every listing page came through the prefix" '"/mirror/api/buckets/acme/b/tree/w\?recursive=true&cursor=p2"' "$WORK/f3.log"
if grep -q '"path": "//\|"path": "/api\|"path": "/buckets' "$WORK/f3.log"; then not_ok "no request outside the prefix"; else ok "no request outside the prefix"; fi
check_grep "the token went to the mirror (it is the endpoint)" 'Bearer hf_interop_secret' "$WORK/f3.log"

# a file replaced by a longer one after the listing: its bytes must not be
# hashed as the listed file's (the lock would pin a blob that never existed)
lock_case "Content-Range total says the file grew since the listing" "[{$R, \"fault\": \"grow\", \"by\": 10}]" \
	fail 3 "fetch WEIGHTS_BUCKET/model.safetensors: the remote file is now 3158083 bytes, 3158073 when listed \(it changed; lock again\)"
lock_case "a 200 whose Content-Length says the file grew" "[{$R, \"fault\": \"grow\", \"by\": 10, \"norange\": 1}]" \
	fail 3 "the remote file is now 3158083 bytes"
# the same 200 sent chunked (no length beforehand): the bytes past the
# listed size show it
lock_case "a chunked 200 (no Content-Length) longer than listed" "[{$R, \"fault\": \"grow\", \"by\": 10, \"norange\": 1, \"nolength\": 1}]" \
	fail 3 "fetch WEIGHTS_BUCKET/model.safetensors: the remote file is now longer than the 3158073 bytes listed \(it changed; lock again\)"

# a renamed repo: the Hub answers a relative 307 to the new name; the commit
# to pin is on the answer after it, not "main"
printf '{"name": "r", "model_id": "ns/old-drafter", "env": {}}\n' >"$WORK/renamed.json"
echo '[{"match": "*/ns/old-drafter/*", "fault": "redirect", "code": 307, "replace": ["/ns/old-drafter/", "/ns/drafter/"]}]' >"$WORK/faults.json"
check "renamed model repo: lock" env FGPACK_HOME="$WORK/sr" "$FGPACK" lock "$WORK/renamed.json" -o "$WORK/renamed.lock"
echo '[]' >"$WORK/faults.json"
check_grep "renamed model repo: pinned to the commit behind the redirect" "\"revision\": \"$commit\"" "$WORK/renamed.lock"
if grep -q '"commit": "main"' "$WORK/renamed.lock"; then not_ok "renamed model repo: no file locked at \"main\""; else ok "renamed model repo: no file locked at \"main\""; fi

# a branch that moved between its listing and the HEAD giving its commit
printf '{"name": "mv", "model_id": "ns/moving", "env": {}}\n' >"$WORK/moving.json"
: >"$WORK/f.log"
check "branch moved after its listing: lock" env FGPACK_HOME="$WORK/smv" "$FGPACK" lock "$WORK/moving.json" -o "$WORK/moving.lock"
check_grep "  locked at the commit the HEAD gave" "\"revision\": \"$commit2\"" "$WORK/moving.lock"
if grep -q gone.bin "$WORK/moving.lock"; then not_ok "  the files are the commit's (no gone.bin)"; else ok "  the files are the commit's (no gone.bin)"; fi
check_grep "  listed again at that commit" "\"/api/models/ns/moving/tree/$commit2\?recursive=true" "$WORK/f.log"

# a plain URL on a server that refuses HEAD (405) but serves GET
U="http://127.0.0.1:$port/buckets/acme/b/resolve/w/model.safetensors"
printf '{"name": "u", "env": {"WEIGHTS_BUCKET": "%s"}}\n' "$U" >"$WORK/url.json"
echo '[{"match": "*", "fault": "nohead"}]' >"$WORK/faults.json"
: >"$WORK/f.log"
check "HEAD refused (405): lock from a GET of byte 0" env FGPACK_HOME="$WORK/su" "$FGPACK" lock "$WORK/url.json" -o "$WORK/url.lock"
check_grep "the size came from the Content-Range total" '"size": 3158073' "$WORK/url.lock"
check_grep "the right sha256" "$big_sha" "$WORK/url.lock"
check_grep "the probe asked for byte 0 alone" '"range": "bytes=0-0", "status": 206' "$WORK/f.log"
check_grep "then ranges in parallel" '"range": "bytes=1048576-2097151", "status": 206' "$WORK/f.log"
check_grep "the token went to the Hub's own origin, as for hf:// refs" '"auth": "Bearer hf_interop_secret"' "$WORK/f.log"
check "--locked re-probes the same way and passes" env FGPACK_HOME="$WORK/su" "$FGPACK" pull "$WORK/url.json" --lock "$WORK/url.lock" --locked
echo '[{"match": "*", "fault": "nohead", "norange": 1}]' >"$WORK/faults.json"
: >"$WORK/f.log"
check "HEAD refused and Range ignored: lock" env FGPACK_HOME="$WORK/su2" "$FGPACK" lock "$WORK/url.json" -o "$WORK/url2.lock"
check_grep "the size came from the Content-Length" '"size": 3158073' "$WORK/url2.lock"
check_grep "the right sha256" "$big_sha" "$WORK/url2.lock"
n_get=$(grep -c '"method": "GET"' "$WORK/f.log")
[ "$n_get" -eq 2 ] && ok "one probe GET, then one GET for the whole file" || not_ok "one probe GET, then one GET for the whole file (got $n_get GETs)"
# a URL redirecting to a CDN URL presigned for GET (S3 query auth signs the
# method, so the CDN refuses a HEAD with 403 SignatureDoesNotMatch): the
# GET of byte 0 sizes it (RFC 9110 9.3.2 wants HEAD answered as GET; a
# presigned URL cannot)
echo "[{\"match\": \"*\", \"fault\": \"redirect\", \"code\": 302, \"to\": \"http://127.0.0.1:$port2/cdn\"}]" >"$WORK/faults.json"
echo '[{"match": "*", "fault": "nohead", "code": 403}]' >"$WORK/faults2.json"
: >"$WORK/f2.log"
check "HEAD refused with 403 behind a redirect (URL presigned for GET): lock" env FGPACK_HOME="$WORK/su4" "$FGPACK" lock "$WORK/url.json" -o "$WORK/url4.lock"
check_grep "  the CDN refused the HEAD" '"method": "HEAD", .*"status": 403' "$WORK/f2.log"
check_grep "  the size came from the Content-Range total" '"size": 3158073' "$WORK/url4.lock"
check_grep "  the right sha256" "$big_sha" "$WORK/url4.lock"
check "  --locked re-probes the same way and passes" env FGPACK_HOME="$WORK/su4" "$FGPACK" pull "$WORK/url.json" --lock "$WORK/url4.lock" --locked
echo '[]' >"$WORK/faults2.json"
# a server streaming from a backend: HEAD and 200 without Content-Length
# (chunked), ranges answered as usual
echo '[{"match": "*", "fault": "nolength"}]' >"$WORK/faults.json"
: >"$WORK/f.log"
check "HEAD without Content-Length: lock from a GET of byte 0" env FGPACK_HOME="$WORK/su3" "$FGPACK" lock "$WORK/url.json" -o "$WORK/url3.lock"
check_grep "the size came from the Content-Range total" '"size": 3158073' "$WORK/url3.lock"
check_grep "the right sha256" "$big_sha" "$WORK/url3.lock"
check_grep "the probe asked for byte 0 alone" '"range": "bytes=0-0", "status": 206' "$WORK/f.log"
check "--locked re-probes the same way and passes" env FGPACK_HOME="$WORK/su3" "$FGPACK" pull "$WORK/url.json" --lock "$WORK/url3.lock" --locked
# an empty file there: byte 0 is past its end, so the probe gets 416 with
# "Content-Range: bytes */0" (RFC 9110 14.1.2, 15.5.17): its size is 0
UE="http://127.0.0.1:$port/buckets/acme/e/resolve/empty.bin"
printf '{"name": "ue", "env": {"WEIGHTS_BUCKET": "%s"}}\n' "$UE" >"$WORK/urle.json"
for f in nohead nolength; do
	echo "[{\"match\": \"*\", \"fault\": \"$f\"}]" >"$WORK/faults.json"
	: >"$WORK/f.log"
	check "an empty file, $f: lock" env FGPACK_HOME="$WORK/sue$f" "$FGPACK" lock "$WORK/urle.json" -o "$WORK/urle$f.lock"
	check_grep "  the probe got 416" '"range": "bytes=0-0", "status": 416' "$WORK/f.log"
	check_grep "  locked as 0 bytes" '"size": 0' "$WORK/urle$f.lock"
	check_grep "  with the empty sha256" e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 "$WORK/urle$f.lock"
	check "  --locked re-probes the same way and passes" env FGPACK_HOME="$WORK/sue$f" "$FGPACK" pull "$WORK/urle.json" --lock "$WORK/urle$f.lock" --locked
done
echo '[]' >"$WORK/faults.json"

# a model-repo reference naming one file (as buckets allow): its tree is no
# folder (404), so a HEAD of the file at the pinned commit sizes it
md_sha=$(sha256sum "$WORK/md/model.safetensors" | cut -d' ' -f1)
printf '{"name": "mf", "env": {"DRAFTER_MODEL": "hf://ns/drafter@%s/model.safetensors", "LOCAL_DRAFTER_DIR": "/tmp/d"}}\n' "$commit" >"$WORK/mfile.json"
: >"$WORK/f.log"
check "a model-repo reference naming one file: lock" env FGPACK_HOME="$WORK/smf" "$FGPACK" lock "$WORK/mfile.json" -o "$WORK/mfile.lock"
check_grep "  the one file, its sha256" "$md_sha" "$WORK/mfile.lock"
check_grep "  locked under its own name" '"path": "model.safetensors"' "$WORK/mfile.lock"
check "  pulled into its target" env FGPACK_HOME="$WORK/smf" "$FGPACK" pull "$WORK/mfile.json" --lock "$WORK/mfile.lock" --into "$WORK/mf"
check "  its bytes placed" cmp "$WORK/md/model.safetensors" "$WORK/mf/tmp/d/model.safetensors"
check "  the lock replays offline" env HF_HUB_OFFLINE=1 FGPACK_HOME="$WORK/smf" "$FGPACK" pull "$WORK/mfile.json" --lock "$WORK/mfile.lock" --into "$WORK/mf2"


# the Hub's words for a refusal (X-Error-Code, X-Error-Message) in the
# one-line error, control characters dropped, and whether HF_TOKEN went along
printf '{"name": "g", "model_id": "ns/drafter"}\n' >"$WORK/gated.json"
python3 -c "
import json, sys
json.dump([{'match': '/api/models/ns/drafter/*', 'fault': 'status', 'code': 403, 'error_code': 'GatedRepo',
            'error_message': 'Access to model ns/drafter is restricted.\x1b[2J You must have access to it and be authenticated to access it. Please log in.'}],
          open(sys.argv[1], 'w'))" "$WORK/faults.json"
check_exit "a gated repo, HF_TOKEN set: fails" 1 env FGPACK_HOME="$WORK/sg" "$FGPACK" lock "$WORK/gated.json" -o "$WORK/g.lock"
cp "$WORK/.out" "$WORK/g.err"
check_grep "  the Hub's code and message in the error" "HTTP 403 GatedRepo: Access to model ns/drafter is restricted\.\[2J You must have access" "$WORK/g.err"
check_grep "  the token went: the terms are what is missing" "HF_TOKEN was sent: accept the repo's terms on the Hub" "$WORK/g.err"
check "  one line, no control character" python3 -c "
d = open('$WORK/g.err', 'rb').read()
assert d.count(b'\n') == 1 and not any(c < 32 and c != 10 for c in d), d"
python3 -c "
import json, sys
json.dump([{'match': '/api/models/ns/drafter/*', 'fault': 'status', 'code': 401, 'error_code': 'RepoNotFound',
            'error_message': 'Repository not found'}], open(sys.argv[1], 'w'))" "$WORK/faults.json"
check_exit "a private repo, no token anywhere: fails" 1 env -u HF_TOKEN HF_HOME="$WORK/nohome" FGPACK_HOME="$WORK/sg" "$FGPACK" lock "$WORK/gated.json" -o "$WORK/g.lock"
check_grep "  saying no token was found" "HTTP 401 RepoNotFound: Repository not found \(no HF_TOKEN was found: private and gated repos need one\)" "$WORK/.out"
check "  no lock written" test ! -e "$WORK/g.lock"
echo '[]' >"$WORK/faults.json"

# a gated or private file given as a plain resolve URL on the Hub's own
# origin gets HF_TOKEN, as huggingface_hub sends it to its endpoint; never a
# redirect's other host (the CDN, on another port of the same address)
PU="$HUB/ns/drafter/resolve/$commit/model.safetensors"
printf '{"name": "pu", "env": {"DRAFTER_BUCKET": "%s", "LOCAL_DRAFTER_DIR": "/tmp/pd"}}\n' "$PU" >"$WORK/purl.json"
echo '[{"match": "/ns/drafter/resolve/*", "token": "hf_interop_secret"}]' >"$WORK/faults.json"
: >"$WORK/f.log"
check_exit "a private file as a plain Hub URL, no token anywhere: fails" 1 env -u HF_TOKEN HF_HOME="$WORK/nohome" FGPACK_HOME="$WORK/spu0" "$FGPACK" lock "$WORK/purl.json" -o "$WORK/purl0.lock"
check_grep "  saying no token was found" "HTTP 401 RepoNotFound: Repository not found \(no HF_TOKEN was found: private and gated repos need one\)" "$WORK/.out"
check "  no lock written" test ! -e "$WORK/purl0.lock"
: >"$WORK/f.log"
check "a private file as a plain Hub URL, HF_TOKEN set: lock" env FGPACK_HOME="$WORK/spu" "$FGPACK" lock "$WORK/purl.json" -o "$WORK/purl.lock"
check_grep "  the file's sha256" "$md_sha" "$WORK/purl.lock"
check_grep "  the probe carried the token" '"method": "(HEAD|GET)", .*"status": 20[06], .*"auth": "Bearer hf_interop_secret"' "$WORK/f.log"
if grep '"status": 401' "$WORK/f.log" >/dev/null; then not_ok "  no request went without it"; else ok "  no request went without it"; fi
check "  pull --into places it" env FGPACK_HOME="$WORK/spu" "$FGPACK" pull "$WORK/purl.json" --lock "$WORK/purl.lock" --into "$WORK/pu"
check "  its bytes" cmp "$WORK/md/model.safetensors" "$WORK/pu/tmp/pd/model.safetensors"
check "  --locked probes again with the token and passes" env FGPACK_HOME="$WORK/spu" "$FGPACK" pull "$WORK/purl.json" --lock "$WORK/purl.lock" --locked
# the Hub answers (with the token) by a redirect to another origin: the
# token stays behind
echo "[{\"match\": \"/ns/drafter/resolve/*\", \"token\": \"hf_interop_secret\", \"fault\": \"redirect\", \"to\": \"http://127.0.0.1:$port2/cdn\"}]" >"$WORK/faults.json"
: >"$WORK/f.log"
: >"$WORK/f2.log"
check "a private plain Hub URL redirected to a CDN: lock" env FGPACK_HOME="$WORK/spu2" "$FGPACK" lock "$WORK/purl.json" -o "$WORK/purl2.lock"
check_grep "  the file's sha256" "$md_sha" "$WORK/purl2.lock"
check_grep "  the Hub got the token" '"status": 302, .*"auth": "Bearer hf_interop_secret"' "$WORK/f.log"
check_grep "  the CDN served the file" '"path": "/cdn/ns/drafter/resolve/.*"status": 20[06]' "$WORK/f2.log"
if grep -q hf_interop_secret "$WORK/f2.log"; then not_ok "  no token reached the CDN"; else ok "  no token reached the CDN"; fi
# the same URL on the CDN's origin given directly: not the Hub's, no token
printf '{"name": "cu", "env": {"DRAFTER_BUCKET": "http://127.0.0.1:%s/cdn/ns/drafter/resolve/%s/model.safetensors"}}\n' "$port2" "$commit" >"$WORK/curl.json"
: >"$WORK/f2.log"
check "a plain URL on another origin: lock" env FGPACK_HOME="$WORK/spu3" "$FGPACK" lock "$WORK/curl.json" -o "$WORK/curl.lock"
if grep -q hf_interop_secret "$WORK/f2.log"; then not_ok "  no token sent to it"; else ok "  no token sent to it"; fi
echo '[]' >"$WORK/faults.json"

finish
