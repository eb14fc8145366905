#!/bin/sh
# pull_git.sh - `git+https://…@<commit>` dependencies: a local repository
# served by nginx over TLS as dumb HTTP (git update-server-info), with a CA
# made here. --deps fetches exactly that commit with the system git, stores
# its tree as a tar and records commit, tree id, sha256 and size; a branch is
# unpinned (warned, not fetched); a commit the server lacks fails naming the
# dependency; offline, --locked and audit use the lock.
. "$(dirname "$0")/../lib.sh"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
if ! command -v git >/dev/null 2>&1; then ok "git dependencies # SKIP no git"; finish; exit 0; fi
G="git -c user.name=t -c user.email=t@example.invalid -c init.defaultBranch=main -c commit.gpgsign=false"
mkdir -p "$WORK/src" "$WORK/www" "$WORK/ngx/tmp"
( cd "$WORK/src" && $G init -q . && printf 'first\n' >a.txt && mkdir -p pkg && printf 'x = 1\n' >pkg/m.py &&
  $G add . && GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' $G commit -qm one &&
  printf 'second\n' >a.txt && GIT_COMMITTER_DATE='2026-01-02T00:00:00Z' GIT_AUTHOR_DATE='2026-01-02T00:00:00Z' \
	$G commit -qam two ) || { not_ok "make a git repository"; finish; exit 1; }
C1=$(git -C "$WORK/src" rev-parse HEAD~1)
T1=$(git -C "$WORK/src" rev-parse "HEAD~1^{tree}")
git clone -q --bare "$WORK/src" "$WORK/www/repo.git" && git -C "$WORK/www/repo.git" update-server-info ||
	{ not_ok "bare repository for dumb HTTP"; finish; exit 1; }

test_ca "$WORK" || { not_ok "openssl makes a CA and a certificate"; finish; exit 1; }
tls=$(free_port)
nginx_conf '$request_method $request_uri $status auth=$http_authorization' <<EOF
    server {
        listen 127.0.0.1:$tls ssl;
        ssl_certificate $WORK/srv.pem;
        ssl_certificate_key $WORK/srv.key;
        root $WORK/www;
    }
}
EOF
nginx_start
wait_port "$tls" || { not_ok "nginx listens"; finish; exit 1; }
log=$WORK/ngx/access.log
export FGPACK_HOME="$WORK/store" CURL_CA_BUNDLE="$WORK/ca.pem" HF_TOKEN=hf_secret FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE SSL_CERT_FILE
U="https://127.0.0.1:$tls/repo.git"
cd "$WORK" || exit 1
printf '{"name": "g", "dependencies": ["mypkg @ git+%s@%s", "git+%s@main"], "env": {}}\n' "$U" "$C1" "$U" >g.json

check "lock without --deps" "$FGPACK" lock g.json -o g.lock
check_grep "the branch is warned about as unpinned" 'warning: dependency "git\+https://127.0.0.1:[0-9]+/repo.git@main" is not pinned' "$WORK/.out"
n=$(grep -c 'warning: dependency' "$WORK/.out")
[ "$n" -eq 1 ] && ok "the commit-pinned one is not warned about" || not_ok "the commit-pinned one is not warned about (got $n warnings)"
check "classified: url with its commit, the branch unpinned; nothing fetched" python3 -c "
import json, sys
d = json.load(open('g.lock'))['manifests']['g.json']['dependencies']
assert [x['kind'] for x in d] == ['url', 'unpinned'], d
assert d[0]['commit'] == sys.argv[1] and d[0]['url'] == 'git+' + sys.argv[2] + '@' + sys.argv[1], d[0]
assert 'sha256' not in d[0] and 'tree' not in d[0] and 'commit' not in d[1], d" "$C1" "$U"
[ ! -s "$log" ] && ok "no request without --deps" || not_ok "no request without --deps"

check "pull --deps fetches the pinned commit with git" "$FGPACK" pull g.json --lock g.lock --deps
check_grep "git spoke dumb HTTP to the server" '^GET /repo.git/info/refs' "$log"
if grep -q 'hf_secret' "$log"; then not_ok "the Hub token is never sent to the git server"; else ok "the Hub token is never sent to the git server"; fi
sha=$(python3 -c "import json; print(json.load(open('g.lock'))['manifests']['g.json']['dependencies'][0].get('sha256', ''))")
check "the lock records the commit's tree id, sha256 and size" python3 -c "
import json, os, sys
d = json.load(open('g.lock'))['manifests']['g.json']['dependencies'][0]
assert d['tree'] == sys.argv[1] and len(d['sha256']) == 64 and d['size'] > 0, d" "$T1"
blob=$(find "$FGPACK_HOME/blobs" -type f -name "$sha")
check "the blob is a tar of exactly that commit's tree" sh -c "tar -tf '$blob' | sort | tr '\n' ' ' | grep -qx 'a.txt pkg/ pkg/m.py ' && tar -xOf '$blob' a.txt | grep -qx first"
check "its bytes are git archive's of that commit" sh -c "git -C '$WORK/src' -c tar.umask=0022 archive --format=tar $C1 | cmp - '$blob'"
lines=$(wc -l <"$log")
check "pull --deps again: present, nothing fetched" "$FGPACK" pull g.json --lock g.lock --deps
[ "$(wc -l <"$log")" -eq "$lines" ] && ok "... no request" || not_ok "... no request"
check "fgpack lock again (no --deps) keeps sha256 and tree" sh -c "'$FGPACK' lock g.json -o g.lock 2>/dev/null && grep -q '\"tree\": \"$T1\"' g.lock && grep -q '\"sha256\": \"$sha\"' g.lock"
check "--locked --deps passes" "$FGPACK" pull g.json --lock g.lock --locked --deps
check "offline --deps from the store" env HF_HUB_OFFLINE=1 "$FGPACK" pull g.json --lock g.lock --deps
rm -f "$blob"
check_exit "offline --deps without the blob fails" 1 env HF_HUB_OFFLINE=1 "$FGPACK" pull g.json --lock g.lock --deps
check_grep "... naming the dependency and its sha256" "offline: dependency mypkg @ git\+$U@$C1 \(sha256 $sha\) is not in the store" "$WORK/.out"
check "--locked --deps fetches it again and it matches the lock" "$FGPACK" pull g.json --lock g.lock --locked --deps
[ -n "$(find "$FGPACK_HOME/blobs" -type f -name "$sha")" ] && ok "... the same blob is back" || not_ok "... the same blob is back"

"$FGPACK" audit g.json --lock g.lock --json >aud.json 2>&1
check "audit lists the git dependency with commit, tree, sha256 and size" python3 -c "
import json, sys
d = json.load(open('aud.json'))['dependencies']
assert d[0]['kind'] == 'url' and d[0]['commit'] == sys.argv[1] and d[0]['tree'] == sys.argv[2] and d[0]['sha256'] == sys.argv[3] and d[0]['size'] > 0, d[0]
assert d[1]['kind'] == 'unpinned' and d[1]['sha256'] is None, d[1]" "$C1" "$T1" "$sha"

# a commit id the server does not have: one line naming the dependency, nothing kept
bad=0123456789abcdef0123456789abcdef01234567
printf '{"name": "b", "dependencies": ["git+%s@%s"], "env": {}}\n' "$U" "$bad" >b.json
n0=$(find "$FGPACK_HOME/blobs" -type f | wc -l)
check_exit "a commit the server lacks fails" 1 "$FGPACK" pull b.json --lock b.lock --deps
check_grep "... naming the dependency and git's reason" "^fgpack pull: dependency git\+$U@$bad: git fetch failed: " "$WORK/.out"
if [ ! -e b.lock ] && [ "$(find "$FGPACK_HOME/blobs" -type f | wc -l)" -eq "$n0" ] && [ -z "$(ls "$FGPACK_HOME/tmp" 2>/dev/null)" ]; then
	ok "... no lock written, nothing left in the store"; else not_ok "... no lock written, nothing left in the store"; fi
finish
