#!/bin/sh
# demo.sh - `make demo`: serve the demo bucket (tests/fixtures/demo-hub) with
# nginx on a free loopback port, pull manifests/demo.json through it into a
# fresh store and folder, show the lock and the materialized files, then
# generate a few tokens from the pulled model with fgpack run; stop nginx.
# DEMO_KEEP=1 keeps the temporary folder. Writes nothing in the repository.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fgpack-demo.XXXXXX")
cleanup() {
	sh tests/servers/serve-hub.sh stop "$tmp/hub" 2>/dev/null || true
	[ "${DEMO_KEEP:-}" = 1 ] || rm -rf "$tmp"
}
trap cleanup EXIT
ports=$(sh tests/servers/serve-hub.sh start tests/fixtures/demo-hub "$tmp/hub")
port=${ports%% *}
export HF_ENDPOINT="http://127.0.0.1:$port"
export FGPACK_HOME="$tmp/store"
unset HF_HUB_OFFLINE HF_TOKEN
echo "== demo hub: $HF_ENDPOINT (nginx serving tests/fixtures/demo-hub)"
echo "== fgpack pull manifests/demo.json --into $tmp/out --lock $tmp/buckets.lock"
./fgpack pull manifests/demo.json --into "$tmp/out" --lock "$tmp/buckets.lock"
echo "== the lock ($tmp/buckets.lock)"
cat "$tmp/buckets.lock"
if cmp -s "$tmp/buckets.lock" buckets.lock; then
	echo "== identical to the committed buckets.lock"
else
	echo "== differs from the committed buckets.lock (the demo bucket changed: run 'sh tests/demo.sh --update-lock')"
fi
echo "== materialized files (hard links into the store at $FGPACK_HOME)"
(cd "$tmp/out" && find . -type f | sort | while read -r f; do
	printf '%s  %s\n' "$(sha256sum "$f" | cut -c1-16)" "$f"
done)
echo "== a second pull is a no-op (everything is in the store):"
./fgpack pull manifests/demo.json --into "$tmp/out" --lock "$tmp/buckets.lock"
echo "== has the bucket changed since the lock? (lists it again, fetches nothing; exit 3 when it has)"
./fgpack lock manifests/demo.json --lock "$tmp/buckets.lock" --check
if [ "${1:-}" = --update-lock ]; then
	cp "$tmp/buckets.lock" buckets.lock
	echo "== buckets.lock updated"
fi
model="$tmp/out/tmp/fgpack-demo/model"
echo "== fgpack run on the pulled weights: a tiny Gemma 4 text model, INT4, random weights (the text is meaningless)"
echo "== fgpack run --model $model --prompt 'pulled, locked, verified' -n 16 --json"
./fgpack run --model "$model" --prompt "pulled, locked, verified" -n 16 --ignore-eos --json
