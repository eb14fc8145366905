#!/bin/sh
# bench/pack.sh - fgpack pack / verify against GNU tar + zstd and sha256sum on
# the same files, side by side in one run. Size: FG_BENCH_MB (default 256) of
# model-like data (7/8 incompressible random bytes, 1/8 JSON-ish text), in 8
# files. Real weights compress: zstd -3 takes bf16 and INT4 checkpoints to
# about 80 %, and there the compression, not the hashing, is most of the
# work (bench/pack_baked.sh packs a bake's output). Prints medians of FG_BENCH_RUNS (default 3) runs and ratios,
# of wall time and of CPU time (user + system, the processes and their children),
# and the issue #7 targets: pack wall within 1.2x of tar|zstd, verify re-hash
# >= 1.5 GB per CPU-second (one hashing pass with --id, and without it when
# nothing is replayed; two with --show-id), beside what bounds it: the hash
# alone (openssl speed) and verify's fixed cost (a tiny bundle), with the
# ceiling they leave even if decompression were free; zstd -dc alone beside.
# Also pack of the same files pulled into a store and placed by `pull --into`
# (hard links), which pack names by their store blobs instead of hashing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
FGPACK=${FGPACK:-$top/fgpack}
MB=${FG_BENCH_MB:-256}
RUNS=${FG_BENCH_RUNS:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
M=$W/model
mkdir -p "$M"
per=$((MB / 8))
for i in 1 2 3 4 5 6 7; do head -c $((per << 20)) /dev/urandom >"$M/shard-$i.safetensors"; done
python3 -c "
import json, sys
rows = [{'id': i, 'token': 'tok%d' % i, 'score': i * 0.5} for i in range(2000000)]
s = json.dumps(rows)
sys.stdout.write(s[: $per << 20])" >"$M/tokenizer.json"
# the engine binary goes into every bundle: tar gets the same file, so both
# sides pack the same bytes
ENGINE=${FG_BENCH_ENGINE:-$top/build/fgpack-engine}
[ -x "$ENGINE" ] || ENGINE=$FGPACK
mkdir -p "$W/side/engine"
cp "$ENGINE" "$W/side/engine/fgpack"
bytes=$(( $(du -sb "$M" | cut -f1) + $(stat -c %s "$ENGINE") ))

. "$top/bench/rounds.inc"
rate() { echo "scale=1; $bytes / $1 / 1000000" | bc -l; }
sync
# every file hashed (--rehash: no store's stamps or seen records), as on a
# first pack of a folder
REHASH=
"$FGPACK" pack --help 2>/dev/null | grep -q -- '--rehash' && REHASH=--rehash
fg_pack() { "$FGPACK" pack --model "$M" --no-golden --engine "$ENGINE" $REHASH -o "$W/a.fgb"; }
# the same with every zstd frame through zstd (FG_TAR_STORED=0), as before
# 2026-12-05, when incompressible frames were not yet written as stored
# blocks (older builds ignore it: the row then equals the one above)
fg_pack_zall() { FG_TAR_STORED=0 "$FGPACK" pack --model "$M" --no-golden --engine "$ENGINE" $REHASH -o "$W/z.fgb"; }
# the same folder packed again with a store whose seen records name its files
# (an earlier pack hashed them; they have not changed since): not hashed again
fg_pack_seen() { FGPACK_HOME="$W/seen" "$FGPACK" pack --model "$M" --no-golden --engine "$ENGINE" -o "$W/s.fgb" 2>>"$W/seen.err"; }
gnu_pack() {
	tar -C "$W" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - model side |
		zstd -3 -q -f -o "$W/b.tar.zst"
}
gnu_pack_sync() { gnu_pack && sync "$W/b.tar.zst"; }
fg_verify() { "$FGPACK" verify "$W/a.fgb" --no-replay --summary -; }
# the files check in two lanes on one thread, and from start to end (older
# builds ignore both: the rows then equal the one above)
fg_verify_1t() { "$FGPACK" verify "$W/a.fgb" --no-replay --threads 1 --summary -; }
fg_verify_seq() { FG_TAR_LANES=0 "$FGPACK" verify "$W/a.fgb" --no-replay --threads 1 --summary -; }
# the lanes as before the thirty-fifth session: every block through zstd,
# raw ones too, read with pread (older builds ignore both: the row then
# equals the lanes')
fg_verify_zstd() { FG_TAR_RAW=0 FG_TAR_MMAP=0 "$FGPACK" verify "$W/a.fgb" --no-replay --threads 1 --summary -; }
# the same files pulled into a store (file://) and hard-linked out of it by
# `pull --into`, as a user's pulled checkpoint is: pack names them by their
# store blobs (their stamps hold) instead of hashing them again
fg_pack_pulled() { FGPACK_HOME="$W/store" "$FGPACK" pack --model "$W/pulled/m" --no-golden --engine "$ENGINE" -o "$W/p.fgb" 2>>"$W/pulled.err"; }
fg_verify_id() { "$FGPACK" verify "$W/a.fgb" --no-replay --id "$ID" --summary -; }
fg_verify_show() { "$FGPACK" verify "$W/a.fgb" --no-replay --show-id --summary -; }
fg_verify_tiny() { "$FGPACK" verify "$W/tiny.fgb" --no-replay --summary -; }
zstd_only() { zstd -dc "$W/a.fgb"; }
fg_extract() { rm -rf "$W/x1"; "$FGPACK" exec "$W/a.fgb" --dir "$W/x1" -- true; }
gnu_extract() { rm -rf "$W/x2"; mkdir "$W/x2"; zstd -dc "$W/b.tar.zst" | tar -xf - -C "$W/x2"; }
gnu_extract_hash() { gnu_extract && (cd "$W/x2" && find . -type f -print0 | xargs -0 sha256sum >/dev/null); }
sha_files() { sha256sum "$M"/* "$ENGINE"; }

ID=$(fg_pack 2>/dev/null)
gnu_pack
echo "pack bench: $bytes bytes in $(($(ls "$M" | wc -l) + 1)) files (the engine too), $RUNS runs each, medians"
echo "  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(zstd --version | head -1)"
echo "  load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
ratio() { echo "$1 / $2" | bc -l; }
row() { # label fgpack-wall fgpack-cpu other-label other-wall other-cpu
	printf '  %-34s %6.2fs %7s MB/s %6.2f CPU-s | %-22s %6.2fs %7s MB/s %6.2f CPU-s | wall %.2fx  CPU %.2fx\n' \
		"$1" "$2" "$(rate "$2")" "$3" "$4" "$5" "$(rate "$5")" "$6" "$(ratio "$2" "$5")" "$(ratio "$3" "$6")"
}
has_pulled=0
printf '{"name": "bench", "env": {"WEIGHTS_BUCKET": "file://%s", "LOCAL_MODEL_DIR": "/m"}}\n' "$M" >"$W/pull.json"
if FGPACK_HOME="$W/store" "$FGPACK" pull "$W/pull.json" --lock "$W/pull.lock" --into "$W/pulled" >/dev/null 2>&1 &&
	"$FGPACK" pack --help 2>/dev/null | grep -q -- '--rehash'; then
	has_pulled=1
	sync # the pull's writes on their way to the disk are not pack's cost
fi
# a store for the seen records, filled by one pack (the files are over 2 s
# old by now: the pull above came after them; builds before 2026-12-05 keep
# none, and the row then equals a plain pack)
mkdir -p "$W/seen/blobs/sha256"
fg_pack_seen >/dev/null
n_seen=$(ls "$W/seen/seen" 2>/dev/null | wc -l)
# the pack contenders in alternation
if [ $has_pulled = 1 ]; then
	rounds fg_pack gnu_pack gnu_pack_sync fg_pack_pulled fg_pack_seen fg_pack_zall
else
	rounds fg_pack gnu_pack gnu_pack_sync fg_pack_seen fg_pack_zall
fi
medof fg_pack; tp=$W_; cp=$C_
medof gnu_pack; tg=$W_; cg=$C_
medof gnu_pack_sync; tgs=$W_; cgs=$C_
row "pack: fgpack pack (hashes all)" "$tp" "$cp" "tar|zstd -3" "$tg" "$cg"
row "pack: fgpack pack (fsyncs)" "$tp" "$cp" "tar|zstd -3 + sync" "$tgs" "$cgs"
medof fg_pack_zall; tpz=$W_; cpz=$C_
row "pack: every frame through zstd" "$tpz" "$cpz" "tar|zstd -3" "$tg" "$cg"
row "pack against that (stored frames)" "$tp" "$cp" "FG_TAR_STORED=0" "$tpz" "$cpz"
if [ $has_pulled = 1 ]; then
	medof fg_pack_pulled; tpp=$W_; cpp=$C_
	row "pack: pulled files (store stamps)" "$tpp" "$cpp" "tar|zstd -3" "$tg" "$cg"
fi
medof fg_pack_seen; tps=$W_; cps=$C_
row "pack again: $n_seen files seen before" "$tps" "$cps" "tar|zstd -3" "$tg" "$cg"
row "pack again against the first pack" "$tps" "$cps" "fgpack pack (--rehash)" "$tp" "$cp"
med fg_extract; te=$W_; ce=$C_
med gnu_extract; tx=$W_; cx=$C_
med gnu_extract_hash; th=$W_; ch=$C_
row "extract: fgpack exec --dir" "$te" "$ce" "zstd -dc|tar -x" "$tx" "$cx"
row "extract+hash: fgpack (hashes)" "$te" "$ce" "zstd|tar + sha256sum" "$th" "$ch"
med fg_verify; tv=$W_; cv=$C_
med sha_files; ts=$W_; cs=$C_
row "re-hash: fgpack verify --no-replay" "$tv" "$cv" "sha256sum (files)" "$ts" "$cs"
rounds fg_verify_1t fg_verify_seq fg_verify_zstd
medof fg_verify_1t; t1=$W_; c1=$C_
medof fg_verify_seq; tq=$W_; cq=$C_
medof fg_verify_zstd; tr=$W_; cr=$C_
row "re-hash: verify, 1 thread (lanes)" "$t1" "$c1" "FG_TAR_LANES=0" "$tq" "$cq"
row "re-hash: verify, 1 thread (lanes)" "$t1" "$c1" "RAW=0 MMAP=0" "$tr" "$cr"
has_id=0
"$FGPACK" verify --help 2>/dev/null | grep -q -- '--id' && has_id=1
if [ $has_id = 1 ]; then
	med fg_verify_id; ti=$W_; ci=$C_
	row "re-hash: verify --no-replay --id" "$ti" "$ci" "sha256sum (files)" "$ts" "$cs"
fi
has_show=0
"$FGPACK" verify --help 2>/dev/null | grep -q -- '--show-id' && has_show=1
if [ $has_show = 1 ]; then
	med fg_verify_show; tw=$W_; cw=$C_
	row "re-hash: verify --no-replay --show-id" "$tw" "$cw" "sha256sum (files)" "$ts" "$cs"
fi
# a bundle that is mostly one member, as a challenge bundle is (its INT4
# weights): that member's digest is one SHA-256 stream. Its chain states
# (bundle.json, every 32 MiB) let verify cut it into lanes hashed two at a
# time (lib/sha256x2.c); without them (FG_PACK_STATES_EVERY=0: as a member
# named by its store blob, or a bundle packed before 2026-12-04) it is one
# stream with nothing beside it
mkdir -p "$W/onem" && cat "$M"/shard-*.safetensors >"$W/onem/model.safetensors"
one_bytes=$(( $(stat -c %s "$W/onem/model.safetensors") + $(stat -c %s "$ENGINE") ))
ONE_ID=$("$FGPACK" pack --model "$W/onem" --no-golden --engine "$ENGINE" -o "$W/one.fgb" 2>/dev/null)
# the same bundle without the bundle id's chain states (FG_TAR_ID_STATES=0,
# as packed before 2026-12-04; older builds ignore it): the id one stream
FG_TAR_ID_STATES=0 "$FGPACK" pack --model "$W/onem" --no-golden --engine "$ENGINE" -o "$W/one_nid.fgb" >/dev/null 2>&1
FG_PACK_STATES_EVERY=0 "$FGPACK" pack --model "$W/onem" --no-golden --engine "$ENGINE" -o "$W/one0.fgb" >/dev/null 2>&1
# the same folder pulled (file://) and packed from the placed hard links: the
# member is named by its store blob, its states the ones the store kept
printf '{"name": "bench1", "env": {"WEIGHTS_BUCKET": "file://%s", "LOCAL_MODEL_DIR": "/m"}}\n' "$W/onem" >"$W/pull1.json"
has_one_pulled=0
FGPACK_HOME="$W/store1" "$FGPACK" pull "$W/pull1.json" --lock "$W/pull1.lock" --into "$W/pulled1" >/dev/null 2>&1 &&
	FGPACK_HOME="$W/store1" "$FGPACK" pack --model "$W/pulled1/m" --no-golden --engine "$ENGINE" -o "$W/onep.fgb" >/dev/null 2>&1 &&
	has_one_pulled=1
fg_verify_onep() { [ $has_one_pulled = 1 ] && "$FGPACK" verify "$W/onep.fgb" --no-replay --summary -; }
fg_verify_one() { "$FGPACK" verify "$W/one.fgb" --no-replay --summary -; }
fg_verify_one_1t() { "$FGPACK" verify "$W/one.fgb" --no-replay --threads 1 --summary -; }
fg_verify_one0() { "$FGPACK" verify "$W/one0.fgb" --no-replay --summary -; }
fg_verify_one0_1t() { "$FGPACK" verify "$W/one0.fgb" --no-replay --threads 1 --summary -; }
rounds fg_verify_one fg_verify_one_1t fg_verify_one0 fg_verify_one0_1t fg_verify_onep
medof fg_verify_one; co=$C_; two=$W_
medof fg_verify_one_1t; co1=$C_
medof fg_verify_one0; co0=$C_; two0=$W_
medof fg_verify_one0_1t; co01=$C_
medof fg_verify_onep; cop=$C_
rate_one() { echo "scale=1; $one_bytes / $1 / 1000000" | bc -l; }
# the id's pass over it: verify --id (the bundle id the check, bundle.json
# hashed) and exec (extraction with the id), with the id's states and without
fg_verify_one_id() { "$FGPACK" verify "$W/one.fgb" --no-replay --id "$ONE_ID" --summary -; }
fg_verify_one_id0() { "$FGPACK" verify "$W/one_nid.fgb" --no-replay --id "$ONE_ID" --summary -; }
fg_exec_one() { rm -rf "$W/x3"; "$FGPACK" exec "$W/one.fgb" --dir "$W/x3" -- true; }
fg_exec_one0() { rm -rf "$W/x4"; "$FGPACK" exec "$W/one_nid.fgb" --dir "$W/x4" -- true; }
rounds fg_verify_one_id fg_verify_one_id0 fg_exec_one fg_exec_one0
medof fg_verify_one_id; cid=$C_; tid=$W_
medof fg_verify_one_id0; cid0=$C_; tid0=$W_
medof fg_exec_one; cex=$C_; tex=$W_
medof fg_exec_one0; cex0=$C_; tex0=$W_
rm -rf "$W/x3" "$W/x4"
printf '  re-hash, one member of %d MB (+ the engine): verify --no-replay %s MB per CPU-second (%.2fs), 1 thread %s MB; without chain states %s MB (%.2fs), 1 thread %s MB: CPU %.2fx, wall %.2fx\n' \
	"$(( $(stat -c %s "$W/onem/model.safetensors") / 1000000 ))" "$(rate_one "$co")" "$two" "$(rate_one "$co1")" \
	"$(rate_one "$co0")" "$two0" "$(rate_one "$co01")" "$(ratio "$co" "$co0")" "$(ratio "$two" "$two0")"
printf '  the id over it: verify --no-replay --id %s MB per CPU-second (%.2fs), without the id'"'"'s states %s MB (%.2fs): CPU %.2fx, wall %.2fx; exec (extraction, the id) %.2fs, %.2f CPU-s, without %.2fs, %.2f CPU-s: wall %.2fx\n' \
	"$(rate_one "$cid")" "$tid" "$(rate_one "$cid0")" "$tid0" "$(ratio "$cid" "$cid0")" "$(ratio "$tid" "$tid0")" \
	"$tex" "$cex" "$tex0" "$cex0" "$(ratio "$tex" "$tex0")"
[ $has_one_pulled = 1 ] && printf '  re-hash, the same member pulled (file://) and packed from its store blob (the states the store kept): verify --no-replay %s MB per CPU-second (%s)\n' \
	"$(rate_one "$cop")" "$(unzstd -c "$W/onep.fgb" 2>/dev/null | tar -xOf - bundle.json 2>/dev/null | grep -c sha256_states) members with chain states"
# what bounds the re-hash per CPU-second: the hash alone over every byte and
# verify's fixed cost (start, libraries, bundle.json: a bundle of one 1-byte
# member and a 2-line stand-in engine); zstd -dc alone is shown beside
mkdir -p "$W/tinym" && printf x >"$W/tinym/x"
printf '#!/bin/sh\necho "fgpack 0 (build tiny)"\n' >"$W/tinyeng" && chmod +x "$W/tinyeng"
"$FGPACK" pack --model "$W/tinym" --no-golden --engine "$W/tinyeng" -o "$W/tiny.fgb" >/dev/null 2>&1
med zstd_only; tz=$W_; cz=$C_
med fg_verify_tiny; tt=$W_; ct=$C_
ossl=$(openssl speed -evp sha256 -bytes 16384 -seconds 1 2>/dev/null | awk '/^sha256/ {print $NF}' | tr -d k)
hash_s=$(echo "$bytes / (${ossl:-1} * 1000)" | bc -l)
printf '  bounds: hash alone (openssl speed -evp sha256, 16 KiB) %.0f MB/s = %.3f CPU-s for these bytes; verify of a tiny bundle %.2f CPU-s; zstd -dc alone (CLI) %.2f CPU-s\n' \
	"$(echo "${ossl:-0} / 1000" | bc -l)" "$hash_s" "$ct" "$cz"
printf '  one hashing pass + the fixed cost, decompression free: %.3f CPU-s = a ceiling of %.0f MB per CPU-second for verify on these bytes\n' \
	"$(echo "$hash_s + $ct" | bc -l)" "$(echo "$bytes / ($hash_s + $ct) / 1000000" | bc -l)"
printf '  re-hash per CPU-second: fgpack verify %s MB (1 thread %s MB, all through zstd and pread %s MB, from start to end %s MB)%s%s, sha256sum %s MB\n' "$(rate "$cv")" "$(rate "$c1")" "$(rate "$cr")" "$(rate "$cq")" \
	"$([ $has_id = 1 ] && echo ", verify --id $(rate "$ci") MB")" \
	"$([ $has_show = 1 ] && echo ", verify --show-id $(rate "$cw") MB")" "$(rate "$cs")"
echo "  load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
verdict() { [ "$(echo "$1" | bc -l)" = 1 ] && echo MET || echo "not met"; }
printf '  target pack wall <= 1.2x tar|zstd -3: %.2fx -> %s (CPU %.2fx; vs tar|zstd + sync: wall %.2fx)\n' \
	"$(ratio "$tp" "$tg")" "$(verdict "$tp / $tg <= 1.2")" "$(ratio "$cp" "$cg")" "$(ratio "$tp" "$tgs")"
[ $has_pulled = 1 ] && printf '  target pack wall <= 1.2x tar|zstd -3, pulled files: %.2fx -> %s (CPU %.2fx)\n' \
	"$(ratio "$tpp" "$tg")" "$(verdict "$tpp / $tg <= 1.2")" "$(ratio "$cpp" "$cg")"
printf '  target re-hash >= 1500 MB per CPU-second: verify %s MB%s -> %s\n' "$(rate "$cv")" \
	"$([ $has_id = 1 ] && echo ", verify --id $(rate "$ci") MB")" "$(verdict "$bytes / $cv >= 1500000000")"
printf '  target re-hash >= 1500 MB per CPU-second, a bundle mostly one member: verify %s MB (1 thread %s MB) -> %s; without chain states %s MB -> %s\n' \
	"$(rate_one "$co")" "$(rate_one "$co1")" "$(verdict "$one_bytes / $co >= 1500000000")" \
	"$(rate_one "$co0")" "$(verdict "$one_bytes / $co0 >= 1500000000")"
[ $has_pulled = 1 ] && sort -u "$W/pulled.err" | grep -v warning | sed "s/^/  pulled: /"
ls -l "$W/a.fgb" "$W/z.fgb" "$W/b.tar.zst" | awk '{print "  size", $5, $9}'
