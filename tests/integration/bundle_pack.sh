#!/bin/sh
# bundle_pack.sh - pack is reproducible; verify re-hashes every member, names a
# flipped byte and exits 3; corrupt and hostile bundles are refused with
# nothing written; settings from a manifest are recorded.
. "$(dirname "$0")/../lib.sh"

M=$WORK/model
mkdir -p "$M/sub"
printf '{"tiny": true}\n' >"$M/config.json"
head -c 3000000 /dev/urandom >"$M/sub/weights.bin"
printf 'x\n' >"$M/sub/tool.sh"
chmod 755 "$M/sub/tool.sh"

# a folder for the seen records' checks at the end, made now so that it is
# over 2 s old there (a file changed less than 2 s before it is hashed gets
# no record)
SM=$WORK/seenmodel
mkdir -p "$SM"
printf '{"seen": true}\n' >"$SM/config.json"
head -c 2000000 /dev/urandom >"$SM/weights.bin"
seen_t0=$(date +%s)

check "pack once" sh -c "'$FGPACK' pack --model '$M' --no-golden -o '$WORK/a.fgb' >'$WORK/a.id'"
touch "$M/config.json"
check "pack again (mtime of a source changed)" sh -c "'$FGPACK' pack --model '$M' --no-golden -o '$WORK/b.fgb' >'$WORK/b.id'"
check "same bundle id twice" cmp "$WORK/a.id" "$WORK/b.id"
check "same bytes twice" cmp "$WORK/a.fgb" "$WORK/b.fgb"
# -o a FIFO or a character device (what /dev/null is): written through, the
# node left as it was; a socket or folder refused before any hashing
special_outputs "pack" "'$FGPACK' pack --model '$M' --no-golden -o \"\$OUT\"" "$WORK/a.fgb"
# the temporary bundle is fg_file_write_atomic's: a new name past a link
# planted at the first one (exec keeps the pid the name is made of), the
# link's target untouched; removed on a signal mid-pack
echo keep >"$WORK/victim"
check "pack past a link planted at its temporary name" sh -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" pack --model "$4" --no-golden -o "$2" >/dev/null' sh "$WORK/victim" "$WORK/planted.fgb" "$FGPACK" "$M"
check "  the link's target untouched" test "$(cat "$WORK/victim")" = keep
check "  the same bundle as to a plain path" cmp "$WORK/a.fgb" "$WORK/planted.fgb"
rm -f "$WORK"/planted.fgb.tmp.*
mkdir -p "$WORK/bigm"
head -c 134217728 /dev/urandom >"$WORK/bigm/w.bin"
printf '{"big": true}\n' >"$WORK/bigm/config.json"
pack_term() {
	(exec env --default-signal=TERM "$FGPACK" pack --model "$WORK/bigm" --no-golden -o "$WORK/sig.fgb") >"$WORK/sig.log" 2>&1 &
	signal_when $! "$WORK/sig.fgb.tmp.$!" TERM
}
for try in 1 2 3; do
	rm -f "$WORK/sig.fgb"
	got=$(pack_term)
	[ "$got" = missed ] || break
done
check "pack stopped by SIGTERM while writing exits 143 (caught: $got)" test "$got" = 143
check "  its temporary bundle removed, no bundle written" sh -c "! ls -A '$WORK' | grep -q '^sig[.]fgb'"
rm -rf "$WORK/bigm"
check "--threads 1 and 4 (frames compressed on 3 threads at once): same bytes" sh -c "'$FGPACK' pack --model '$M' --no-golden --threads 1 -o '$WORK/th1.fgb' >/dev/null && '$FGPACK' pack --model '$M' --no-golden --threads 4 -o '$WORK/th4.fgb' >/dev/null && cmp '$WORK/th1.fgb' '$WORK/a.fgb' && cmp '$WORK/th4.fgb' '$WORK/a.fgb'"
check "FG_SHA256_X2=0 (one file per hashing item, not two interleaved): same bytes" sh -c "FG_SHA256_X2=0 '$FGPACK' pack --model '$M' --no-golden -o '$WORK/x1.fgb' >/dev/null && cmp '$WORK/x1.fgb' '$WORK/a.fgb'"
cp -r "$M" "$WORK/model5"
head -c 70001 /dev/urandom >"$WORK/model5/odd.bin"
check "an odd count of files (the last hashed alone) packs and verifies" sh -c "'$FGPACK' pack --model '$WORK/model5' --no-golden -o '$WORK/o5.fgb' >/dev/null && '$FGPACK' verify '$WORK/o5.fgb' --no-replay --summary - >/dev/null"
check "... the same bytes with FG_SHA256_X2=0" sh -c "FG_SHA256_X2=0 '$FGPACK' pack --model '$WORK/model5' --no-golden -o '$WORK/o6.fgb' >/dev/null && cmp '$WORK/o5.fgb' '$WORK/o6.fgb'"
# a write that fails (the file size limit: EFBIG) fails the pack with the
# writing thread's message, with either thread count, and leaves nothing
for th in 1 2 4; do
	sh -c "trap '' XFSZ; ulimit -f 2000; exec '$FGPACK' pack --model '$M' --no-golden --threads $th -o '$WORK/big$th.fgb'" >/dev/null 2>"$WORK/efbig$th.err"
	check_exit "a failing write fails the pack (--threads $th)" 1 sh -c "exit $?"
	check_grep "  naming the write" "fgpack pack: write .*big$th.fgb.tmp.*: File too large" "$WORK/efbig$th.err"
	check "  and leaves no bundle and no temporary file" sh -c "! ls '$WORK' | grep -q '^big$th.fgb'"
done
check "pack --threads 1 and --threads 3: same bytes (1 and 2 zstd workers)" sh -c "'$FGPACK' pack --model '$M' --no-golden --threads 1 -o '$WORK/t1.fgb' >/dev/null && '$FGPACK' pack --model '$M' --no-golden --threads 3 -o '$WORK/t3.fgb' >/dev/null && cmp '$WORK/t1.fgb' '$WORK/a.fgb' && cmp '$WORK/t3.fgb' '$WORK/a.fgb'"
check "bundle id is sha256 of the uncompressed tar" sh -c "[ \"\$(zstd -dc '$WORK/a.fgb' | sha256sum | cut -c1-64)\" = \"\$(cat '$WORK/a.id')\" ]"
check "SOURCE_DATE_EPOCH changes member times" sh -c "SOURCE_DATE_EPOCH=1700000000 '$FGPACK' pack --model '$M' --no-golden -o '$WORK/c.fgb' >/dev/null && ! cmp -s '$WORK/a.fgb' '$WORK/c.fgb' && zstd -dc '$WORK/c.fgb' | tar tvf - | grep -q 2023-11"
check "GNU tar lists it: uid/gid 0, modes normalized" sh -c "zstd -dc '$WORK/a.fgb' | tar tvf - >'$WORK/list' && grep -q '^-rwxr-xr-x 0/0 .* components/model/sub/tool.sh' '$WORK/list' && grep -q '^-rw-r--r-- 0/0 .* components/model/sub/weights.bin' '$WORK/list' && head -1 '$WORK/list' | grep -q ' bundle.json$'"

cd "$WORK" || exit 1
check_exit "verify a clean bundle exits 0" 0 "$FGPACK" verify a.fgb --summary "$WORK/s.json"
check_grep "summary.json says verified-files" '"verdict": "verified-files"' "$WORK/s.json"
special_outputs "verify --summary" "'$FGPACK' verify '$WORK/a.fgb' --no-replay --summary \"\$OUT\""
check_grep "verify --summary to a FIFO: its reader got the summary" '"verdict": "verified-files"' "$WORK/special.got"
# nothing replayed and no --id: the member digests are the check, one
# hashing pass; the id is computed only on request
check_grep "files check without --id: the id is not computed" '"bundle": null' "$WORK/s.json"
check_exit "verify --show-id exits 0" 0 "$FGPACK" verify a.fgb --show-id --summary "$WORK/show.json"
check_grep "--show-id: summary.json has the bundle id" "\"bundle\": \"$(cat "$WORK/a.id")\"" "$WORK/show.json"
check_grep "--show-id: member digests still proved the files" '"checked_by": "member digests"' "$WORK/show.json"

# flip one byte inside a component's data in the tar, keep the archive valid
python3 - "$WORK/a.fgb" "$WORK/flip.tar" <<'EOF'
import io, subprocess, sys, tarfile
d = bytearray(subprocess.run(["zstd", "-dc", sys.argv[1]], capture_output=True, check=True).stdout)
m = tarfile.open(fileobj=io.BytesIO(bytes(d))).getmember("components/model/sub/weights.bin")
d[m.offset_data + 12345] ^= 0x40
open(sys.argv[2], "wb").write(d)
EOF
zstd -q -f "$WORK/flip.tar" -o "$WORK/flip.fgb"
"$FGPACK" verify "$WORK/flip.fgb" --summary "$WORK/flip.json" >"$WORK/flip.out" 2>&1
check "flipped byte: exit code 3" [ $? -eq 3 ]
check_grep "flipped byte: names the file" 'components/model/sub/weights.bin: sha256 differs' "$WORK/flip.out"
check_grep "flipped byte: summary verdict mismatch" '"verdict": "mismatch"' "$WORK/flip.json"
# against an expected id: one pass proves it; a mismatch still names the file
check_exit "verify --id (the right id) exits 0" 0 "$FGPACK" verify a.fgb --id "$(cat "$WORK/a.id")" --summary "$WORK/sid.json"
check_grep "verify --id: the id proved the files" '"checked_by": "bundle id"' "$WORK/sid.json"
check_grep "verify without --id: member digests proved them" '"checked_by": "member digests"' "$WORK/s.json"
"$FGPACK" verify "$WORK/flip.fgb" --id "$(cat "$WORK/a.id")" --summary - >"$WORK/flipid.out" 2>&1
check "flipped byte, --id: exit code 3" [ $? -eq 3 ]
check_grep "flipped byte, --id: names the file" 'components/model/sub/weights.bin: sha256 differs' "$WORK/flipid.out"
check_grep "flipped byte, --id: and the id" "[(]archive[)]: bundle id .* is not the expected $(cat "$WORK/a.id")" "$WORK/flipid.out"
check_exit "verify --id of another bundle: exit 3" 3 "$FGPACK" verify a.fgb --id 0000000000000000000000000000000000000000000000000000000000000000 --summary -
check_exit "verify --id that is not a sha256: usage" 2 "$FGPACK" verify a.fgb --id abc
check_exit "verify --no-replay of a missing file: exit 1, not a mismatch" 1 "$FGPACK" verify "$WORK/none.fgb" --no-replay --summary -

# an extra member that bundle.json does not list
python3 - "$WORK/flip.tar" "$WORK/extra.tar" <<'EOF'
import io, subprocess, sys, tarfile
src = tarfile.open(sys.argv[1])
out = tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT)
for m in src.getmembers():
    out.addfile(m, src.extractfile(m) if m.isfile() else None)
ti = tarfile.TarInfo("components/model/smuggled.py"); ti.size = 3
out.addfile(ti, io.BytesIO(b"bad"))
out.close()
EOF
"$FGPACK" verify "$WORK/extra.tar" --summary - >"$WORK/extra.out" 2>&1
check "unlisted member: exit 3" [ $? -eq 3 ]
check_grep "unlisted member: named" 'smuggled.py: in the archive but not in bundle.json' "$WORK/extra.out"

head -c 40000 "$WORK/a.fgb" >"$WORK/trunc.fgb"
check_exit "truncated bundle: exit 3" 3 "$FGPACK" verify "$WORK/trunc.fgb" --summary -
# a bundle.json that is not one (not JSON, no files array) or a file that
# is no archive at all is a corrupt bundle, exit 3, with or without a replay
# (each gave exit 1; the file that is no archive only with --no-replay)
python3 - "$WORK/notjson.tar" "$WORK/nofiles.tar" <<'EOF'
import io, sys, tarfile
for out, data in ((sys.argv[1], b"{x}"), (sys.argv[2], b'{"schema": 1}')):
    t = tarfile.open(out, "w"); ti = tarfile.TarInfo("bundle.json"); ti.size = len(data)
    t.addfile(ti, io.BytesIO(data)); t.close()
EOF
head -c 5000 /dev/urandom >"$WORK/noise.fgb"
for f in notjson.tar nofiles.tar noise.fgb; do
	check_exit "$f: verify exits 3" 3 "$FGPACK" verify "$WORK/$f" --summary -
	"$FGPACK" verify "$WORK/$f" --no-replay --summary - >/dev/null 2>"$WORK/$f.err"
	check_exit "$f: verify --no-replay exits 3" 3 sh -c "exit $?"
	check_grep "  in one line naming the bundle" "^fgpack verify: bundle .*$f is corrupt or hostile: " "$WORK/$f.err"
	check_exit "$f: exec exits 3" 3 "$FGPACK" exec "$WORK/$f" -- true
done
# a flipped byte in the compressed stream, inside the raw (stored) block of
# random weights: zstd's frame checksum is not checked when every byte is
# hashed anyway, so it is the member digest, or the id, that must catch it
python3 - "$WORK/a.fgb" "$WORK/zflip.fgb" "$M/sub/weights.bin" <<'EOF'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
w = open(sys.argv[3], "rb").read()
at = d.find(w[1000000:1000064])  # stored verbatim: random bytes do not compress
assert at > 0
d[at + 7] ^= 0x01
open(sys.argv[2], "wb").write(d)
EOF
"$FGPACK" verify "$WORK/zflip.fgb" --summary - >"$WORK/zflip.out" 2>&1
check "flipped compressed byte: exit code 3" [ $? -eq 3 ]
# (since 2026-12-06 the stored frame's content checksum, which every
# reader checks, finds it before the member's digest: the frame is named)
check_grep "flipped compressed byte: names its frame's checksum" 'the zstd frame at byte [0-9]+: its content checksum is not' "$WORK/zflip.out"
check_exit "flipped compressed byte, --id: exit 3" 3 "$FGPACK" verify "$WORK/zflip.fgb" --id "$(cat "$WORK/a.id")" --summary -
check "zstd itself still sees it (its frame checksum)" sh -c "! zstd -t -q '$WORK/zflip.fgb' 2>/dev/null"
# the same flip with the frame's checksum written again (zreseal.py, its
# XXH64 checked here against zstd's own): the frame decodes and its checksum
# holds, so it is the member's digest that must catch it
head -c 100003 /dev/urandom >"$WORK/xx.bin"
zstd -q -f "$WORK/xx.bin" -o "$WORK/xx.zst"
check "zreseal.py's XXH64 is zstd's (a frame's last 4 bytes)" sh -c "[ \"\$(python3 '$TOP/tests/integration/zreseal.py' --sum '$WORK/xx.bin')\" = \"\$(tail -c 4 '$WORK/xx.zst' | od -An -tx4 | tr -d ' ')\" ]"
zat=$(python3 -c "
import sys
d = open('$WORK/a.fgb', 'rb').read()
w = open('$M/sub/weights.bin', 'rb').read()
print(d.find(w[1000000:1000064]) + 7)")
check "resealed flip: made" python3 "$TOP/tests/integration/zreseal.py" "$WORK/a.fgb" "$WORK/zrs.fgb" "$zat"
check "  zstd decodes it (its checksum holds)" zstd -t -q "$WORK/zrs.fgb"
"$FGPACK" verify "$WORK/zrs.fgb" --summary - >"$WORK/zrs.out" 2>&1
check "resealed flipped compressed byte: exit code 3" [ $? -eq 3 ]
check_grep "resealed flipped compressed byte: names the file" 'components/model/sub/weights.bin: sha256 differs' "$WORK/zrs.out"
check "  not the frame's checksum" sh -c "! grep -q 'content checksum' '$WORK/zrs.out'"
"$FGPACK" verify "$WORK/zrs.fgb" --id "$(cat "$WORK/a.id")" --summary - >"$WORK/zrsid.out" 2>&1
check "resealed flipped compressed byte, --id: exit 3" [ $? -eq 3 ]
check_grep "resealed flipped compressed byte, --id: names the file" 'components/model/sub/weights.bin: sha256 differs' "$WORK/zrsid.out"
check_grep "resealed flipped compressed byte, --id: and the id" "[(]archive[)]: bundle id .* is not the expected $(cat "$WORK/a.id")" "$WORK/zrsid.out"
# the files check without the id reads a bundle in lanes (its zstd frames
# start at members; the seek table at the end says where): two per thread
check "pack wrote zstd's seekable format (its seek table ends the bundle)" sh -c "tail -c 4 '$WORK/a.fgb' | od -An -tx1 | grep -q 'b1 ea 92 8f'"
check "zstd -l: the frames the seek table counts (the identity's states frame among them) and the table, two skippable, which zstd counts among its frames" sh -c "n=\$(tail -c 9 '$WORK/a.fgb' | head -c 4 | od -An -tu4 | tr -d ' '); zstd -l '$WORK/a.fgb' | awk -v n=\$n 'NR == 2 && \$1 == n + 1 && \$2 == 2 { ok = 1 } END { exit !ok }'"
check "GNU tar --zstd lists the members (the table skipped)" sh -c "tar --zstd -tf '$WORK/a.fgb' | grep -qx 'components/model/sub/weights.bin'"
"$FGPACK" verify a.fgb --no-replay --threads 1 --json --summary - >"$WORK/lanes.json" 2>&1
check_grep "verify --no-replay --threads 1: read in two lanes" '"lanes": 2' "$WORK/lanes.json"
"$FGPACK" verify a.fgb --no-replay --threads 2 --json --summary - >"$WORK/lanes2.json" 2>&1
# (an engine over 32 MiB has a chain state, where a fourth lane starts)
esz=$(zstd -dc a.fgb | tar xOf - bundle.json | python3 -c 'import json, sys; print([f["size"] for f in json.load(sys.stdin)["files"] if f["path"] == "engine/fgpack"][0])')
want=3
[ "$esz" -gt 33554432 ] && want=4
check_grep "--threads 2: a lane per frame that starts a member (the small files, weights.bin, the engine) or at a chain state: $want" "\"lanes\": $want" "$WORK/lanes2.json"
"$FGPACK" verify a.fgb --no-replay --show-id --threads 1 --json --summary - >"$WORK/showl.json" 2>&1
check "--show-id: read in lanes that compute the id from the states pack keeps, pack's id" sh -c "grep -q '\"lanes\": 2' '$WORK/showl.json' && grep -q '\"bundle\": \"$(cat "$WORK/a.id")\"' '$WORK/showl.json'"
"$FGPACK" verify a.fgb --no-replay --id "$(cat "$WORK/a.id")" --threads 2 --json --summary - >"$WORK/idl.json" 2>&1
check "--id: the id checked in lanes (the same count as without the id), verified" sh -c "grep -q '\"lanes\": $want' '$WORK/idl.json' && grep -q '\"checked_by\": \"bundle id\"' '$WORK/idl.json' && grep -q '\"problems\": \[\]' '$WORK/idl.json'"
FG_TAR_LANES=0 "$FGPACK" verify a.fgb --no-replay --id "$(cat "$WORK/a.id")" --json --summary - >"$WORK/id0.json" 2>&1
check "--id: the same summary as from start to end (but times and lanes)" sh -c "grep -v 'seconds\|mb_per_s\|lanes' '$WORK/idl.json' >'$WORK/i1' && grep -v 'seconds\|mb_per_s\|lanes' '$WORK/id0.json' >'$WORK/i2' && cmp '$WORK/i1' '$WORK/i2'"
# a bundle packed without them (as before 2026-12-04, or FG_TAR_ID_STATES=0):
# the id is one pass from start to end, the same id and bytes but the frame
FG_TAR_ID_STATES=0 "$FGPACK" pack --model "$M" --no-golden -o "$WORK/nost.fgb" >"$WORK/nost.id" 2>/dev/null
check "FG_TAR_ID_STATES=0: the same bundle id" cmp "$WORK/nost.id" "$WORK/a.id"
"$FGPACK" verify "$WORK/nost.fgb" --no-replay --show-id --threads 1 --json --summary - >"$WORK/nost.json" 2>&1
check "  --show-id on it: one paired pass from start to end (no lanes), the id" sh -c "grep -q '\"lanes\": 1' '$WORK/nost.json' && grep -q '\"bundle\": \"$(cat "$WORK/a.id")\"' '$WORK/nost.json'"
# exec extracts the same way: FGPACK_BUNDLE_ID is the id either way
check "exec --threads 2 (lanes on one, the id on the other): FGPACK_BUNDLE_ID is pack's id, the files extracted" sh -c "[ \"\$('$FGPACK' exec a.fgb --threads 2 -- sh -c 'cmp -s \"\$FGPACK_BUNDLE/components/model/sub/weights.bin\" \"$M/sub/weights.bin\" && echo \"\$FGPACK_BUNDLE_ID\"')\" = \"\$(cat '$WORK/a.id')\" ]"
check "exec with FG_TAR_LANES=0: the same id" sh -c "[ \"\$(FG_TAR_LANES=0 '$FGPACK' exec a.fgb -- sh -c 'echo \"\$FGPACK_BUNDLE_ID\"')\" = \"\$(cat '$WORK/a.id')\" ]"
FG_TAR_LANES=0 "$FGPACK" verify a.fgb --no-replay --json --summary - >"$WORK/nolanes.json" 2>&1
check_grep "FG_TAR_LANES=0: from start to end" '"lanes": 1' "$WORK/nolanes.json"
check "... the same files, bytes and verdict either way" sh -c "grep -v 'seconds\|mb_per_s\|lanes' '$WORK/lanes.json' >'$WORK/l1' && grep -v 'seconds\|mb_per_s\|lanes' '$WORK/nolanes.json' >'$WORK/l2' && cmp '$WORK/l1' '$WORK/l2'"
"$FGPACK" verify "$WORK/zflip.fgb" --no-replay --threads 1 --json --summary - >"$WORK/zflipl.out" 2>&1
check "flipped compressed byte, read in lanes: exit 3" [ $? -eq 3 ]
# (the lanes find the frame's checksum wrong and give up; the sequential
# reader names it, since 2026-12-06)
check_grep "  names its frame's checksum" 'the zstd frame at byte [0-9]+: its content checksum is not' "$WORK/zflipl.out"
"$FGPACK" verify "$WORK/zrs.fgb" --no-replay --threads 1 --json --summary - >"$WORK/zrsl.out" 2>&1
check "resealed flipped compressed byte, read in lanes: exit 3" [ $? -eq 3 ]
check_grep "  names the file" 'components/model/sub/weights.bin.*sha256 differs' "$WORK/zrsl.out"
check_grep "  and was read in lanes" '"lanes": 2' "$WORK/zrsl.out"

# chain states (docs/formats/bundle.md): pack keeps a hashed file's SHA-256
# state every FG_PACK_STATES_EVERY bytes; verify cuts the file there into
# lanes that each start from one and must end on the next
mkdir -p "$WORK/big"
printf '{}\n' >"$WORK/big/config.json"
head -c 20971525 /dev/urandom >"$WORK/big/w.bin"
check "FG_PACK_STATES_EVERY=8388608: pack" sh -c "FG_PACK_STATES_EVERY=8388608 '$FGPACK' pack --model '$WORK/big' --no-golden -o '$WORK/ch.fgb' >/dev/null"
zstd -dc "$WORK/ch.fgb" | tar xOf - bundle.json >"$WORK/ch.json"
check "  bundle.json: 2 states for a file of 20 MiB and 5 bytes, every 8388608 bytes" python3 -c "
import json, re, sys
f = [f for f in json.load(open('$WORK/ch.json'))['files'] if f['path'] == 'components/model/w.bin'][0]
s = f['sha256_states']
sys.exit(not (s['every'] == 8388608 and len(s['states']) == 2 and all(re.fullmatch('[0-9a-f]{64}', x) for x in s['states'])))"
"$FGPACK" verify ch.fgb --no-replay --threads 2 --json --summary - >"$WORK/ch2.json" 2>&1
check_grep "  verify --threads 2: 4 lanes" '"lanes": 4' "$WORK/ch2.json"
check_grep "  verified" '"verdict": "verified-files"' "$WORK/ch2.json"
FG_TAR_LANES=0 "$FGPACK" verify ch.fgb --no-replay --json --summary - >"$WORK/ch0.json" 2>&1
check "  the same files, bytes and verdict as from start to end" sh -c "grep -v 'seconds\|mb_per_s\|lanes' '$WORK/ch2.json' >'$WORK/c1' && grep -v 'seconds\|mb_per_s\|lanes' '$WORK/ch0.json' >'$WORK/c2' && cmp '$WORK/c1' '$WORK/c2'"
for at in 4000000 12000000 20000000; do
	python3 -c "
import sys
d = bytearray(open('$WORK/ch.fgb', 'rb').read())
d[$at] ^= 0x01
open('$WORK/chf.fgb', 'wb').write(d)"
	"$FGPACK" verify "$WORK/chf.fgb" --no-replay --threads 2 --summary - >"$WORK/chf.out" 2>&1
	check "  a byte flipped at $at of the bundle (inside w.bin): exit 3" [ $? -eq 3 ]
	check_grep "    naming its frame's checksum (since 2026-12-06, before the digest)" 'the zstd frame at byte [0-9]+: its content checksum is not' "$WORK/chf.out"
done
# the same flips resealed (zreseal.py): the member's digest finds them (a
# lane cut at a chain state that ends in another state gives up; the
# sequential reader names the file)
for at in 4000000 12000000 20000000; do
	python3 "$TOP/tests/integration/zreseal.py" "$WORK/ch.fgb" "$WORK/chr.fgb" "$at"
	"$FGPACK" verify "$WORK/chr.fgb" --no-replay --threads 2 --json --summary - >"$WORK/chr.out" 2>&1
	check "  a byte flipped at $at of the bundle (inside w.bin), resealed: exit 3" [ $? -eq 3 ]
	check_grep "    naming the file" 'components/model/w.bin.*sha256 differs' "$WORK/chr.out"
done
check "FG_PACK_STATES_EVERY=0: no states" sh -c "FG_PACK_STATES_EVERY=0 '$FGPACK' pack --model '$WORK/big' --no-golden -o '$WORK/ch0.fgb' >/dev/null && ! zstd -dc '$WORK/ch0.fgb' | tar xOf - bundle.json | grep -q sha256_states"
check "  the same members" sh -c "zstd -dc '$WORK/ch0.fgb' | tar tf - >'$WORK/t0' && zstd -dc '$WORK/ch.fgb' | tar tf - >'$WORK/t1' && cmp '$WORK/t0' '$WORK/t1'"
FG_PACK_STATES_EVERY=1000 "$FGPACK" pack --model "$WORK/big" --no-golden -o "$WORK/chx.fgb" >"$WORK/chx.out" 2>&1
check "FG_PACK_STATES_EVERY=1000: refused, no bundle" sh -c "[ $? -ne 0 ] && [ ! -e '$WORK/chx.fgb' ]"
check_grep "  in one line naming the variable" 'FG_PACK_STATES_EVERY=1000: not 0 or a multiple of 8388608 bytes' "$WORK/chx.out"

# tar-slip inside a bundle: refused, nothing written above the temp folder
python3 - "$WORK/slip.tar" <<'EOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w")
for name in ("bundle.json", "../../../../../../tmp/fgpack-slip-test"):
    ti = tarfile.TarInfo(name); ti.size = 2; t.addfile(ti, io.BytesIO(b"{}"))
t.close()
EOF
rm -f /tmp/fgpack-slip-test
mkdir -p "$WORK/tmp"
check_exit "tar-slip bundle: exit 3" 3 env TMPDIR="$WORK/tmp" "$FGPACK" verify "$WORK/slip.tar" --summary -
check "tar-slip bundle: nothing written" sh -c "[ ! -e /tmp/fgpack-slip-test ] && [ -z \"\$(ls -A '$WORK/tmp')\" ]"

# engine settings from a manifest
mkdir -p "$WORK/sub"
cat >"$WORK/sub/manifest.json" <<'EOF'
{"name": "settings-test", "model_id": "google/gemma-4-E4B-it", "serve": ["python", "serve.py"],
 "env": {"SLIDING_WINDOW": "188", "MAX_MODEL_LEN": "4096", "CENTROID_TOP_K": "49",
         "SPECULATIVE_CONFIG": "{\"method\":\"mtp\",\"model\":\"/tmp/d\",\"num_speculative_tokens\":7}",
         "OVERRIDE_GENERATION_CONFIG": "{\"temperature\":0.0,\"top_p\":1.0,\"top_k\":0}"}}
EOF
printf 'print("serve")\n' >"$WORK/sub/serve.py"
printf '# patch\n' >"$WORK/sub/attn_patch.py"
check "pack from a manifest" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --model '$M' --no-golden -o '$WORK/m.fgb' >/dev/null"
zstd -dc "$WORK/m.fgb" | tar xOf - bundle.json >"$WORK/m.json"
check_grep "settings: sliding window" '"sliding_window": 188' "$WORK/m.json"
check_grep "settings: max_model_len" '"max_model_len": 4096' "$WORK/m.json"
check_grep "settings: num_speculative_tokens" '"num_speculative_tokens": 7' "$WORK/m.json"
check_grep "settings: speculative recorded as not honoured" '"key": "SPECULATIVE_CONFIG.num_speculative_tokens"' "$WORK/m.json"
check_grep "settings: centroid top-k not honoured" '"key": "CENTROID_TOP_K"' "$WORK/m.json"
check_grep "settings: greedy override honoured" '"OVERRIDE_GENERATION_CONFIG"' "$WORK/m.json"
check "manifest and patches packed" sh -c "zstd -dc '$WORK/m.fgb' | tar tf - | tr '\n' ' ' | grep -q 'manifest.json patches/attn_patch.py patches/serve.py'"
check_fails "a manifest component without a source is refused" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/n.fgb'"
printf '{"_type": "https://in-toto.io/Statement/v1"}\n' >"$WORK/prov.intoto.json"
check "--attest puts a statement under attestations/" sh -c "'$FGPACK' pack --model '$M' --no-golden --attest '$WORK/prov.intoto.json' -o '$WORK/at.fgb' >/dev/null && zstd -dc '$WORK/at.fgb' | tar tf - | grep -qx 'attestations/prov.intoto.json'"
check_exit "pack without -o is a usage error" 2 "$FGPACK" pack --model "$M"
# a bundle written into the folder it packs would be taken in by the next
# pack of that folder: refused before anything is written
check_exit "pack -o inside the --model folder: a usage error" 2 "$FGPACK" pack --model "$M" --no-golden -o "$M/in.fgb"
check_grep "  names the folder" "lies inside $M" "$WORK/.out"
check "  nothing written there" sh -c "! ls '$M' | grep -q 'in.fgb'"
check_exit "  the same through ./ and a trailing slash" 2 sh -c "cd '$M' && '$FGPACK' pack --model ./ --no-golden -o ./sub.fgb"

# files an earlier pack hashed, unchanged since, are named by the store's
# seen records and not hashed again; a change in place is seen and hashed
S=$WORK/seenstore
mkdir -p "$S/blobs/sha256"
while [ $(($(date +%s) - seen_t0)) -lt 3 ]; do sleep 0.2; done
check "seen: pack with a store hashes the folder and records its files" sh -c "FGPACK_HOME='$S' '$FGPACK' pack --model '$SM' --no-golden -o '$WORK/se1.fgb' 2>'$WORK/se1.err' >/dev/null && ! grep -q 'hashed before' '$WORK/se1.err' && [ -s \"\$(ls -d '$S'/seen/* | head -1)\" ] && grep -q ' $SM/weights.bin\$' '$S'/seen/*"
check "seen: pack again names them by their records, the same bytes" sh -c "FGPACK_HOME='$S' '$FGPACK' pack --model '$SM' --no-golden -o '$WORK/se2.fgb' 2>'$WORK/se2.err' >/dev/null && cmp '$WORK/se1.fgb' '$WORK/se2.fgb'"
check_grep "seen:   and says how many" '^fgpack pack: [2-9] files \([0-9.]+ GB\) hashed before \(an earlier pack or bake\), unchanged since, not hashed again' "$WORK/se2.err"
check "seen: --rehash hashes them, the same bytes" sh -c "FGPACK_HOME='$S' '$FGPACK' pack --model '$SM' --no-golden --rehash -o '$WORK/se3.fgb' 2>'$WORK/se3.err' >/dev/null && ! grep -q 'hashed before' '$WORK/se3.err' && cmp '$WORK/se1.fgb' '$WORK/se3.fgb'"
# one byte of the weights changed in place, the size the same
printf 'Z' | dd of="$SM/weights.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null
check "seen: a file changed in place is hashed again: its new digest listed, the bundle verifies" sh -c "FGPACK_HOME='$S' '$FGPACK' pack --model '$SM' --no-golden -o '$WORK/se4.fgb' 2>/dev/null >/dev/null && zstd -dc '$WORK/se4.fgb' | tar xOf - bundle.json | grep -q \"\$(sha256sum '$SM/weights.bin' | cut -c1-64)\" && '$FGPACK' verify '$WORK/se4.fgb' --no-replay --summary - >/dev/null"
finish
