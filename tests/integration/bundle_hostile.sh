#!/bin/sh
# bundle_hostile.sh - bundles that verify must refuse, and that exec then
# refuses the same way (exit 3, one line naming what): bytes after the tar's
# end-of-archive marker (beyond its zero padding), a bundle.json whose files
# list names a path twice or lacks a field, member names no file system can
# create (a component over 255 bytes, a path over 3839), a manifest that is
# no manifest (exec could not read it; audit refuses it too), a skippable
# zstd frame other than pack's two, or one of them malformed, a zstd frame
# that decompresses to nothing, a frame's content checksum that is wrong
# (bytes the id does not cover either). Tars repacked
# by GNU tar and bsdtar, and long names that are valid, keep verifying; pack
# refuses a name it could not have verified, and a manifest that is none.
. "$(dirname "$0")/../lib.sh"

M=$WORK/model
mkdir -p "$M/sub"
printf '{"tiny": true}\n' >"$M/config.json"
head -c 300000 /dev/urandom >"$M/sub/weights.bin"
printf 'x\n' >"$M/sub/tool.sh"
chmod 755 "$M/sub/tool.sh"
check "pack" sh -c "'$FGPACK' pack --model '$M' --no-golden -o '$WORK/a.fgb' >'$WORK/a.id'"
zstd -q -dc "$WORK/a.fgb" >"$WORK/a.tar"

# refused BUNDLE PATTERN WHAT: every way of reading it exits 3 with PATTERN
# in one line: verify (files in lanes or from start to end, --show-id, --id
# of its own tar) and exec, which runs nothing
refused() {
	b=$1 pat=$2 what=$3
	id=$(zstd -q -dc -f "$b" 2>/dev/null | sha256sum | cut -c1-64)
	for mode in "" "--no-replay" "--show-id" "--id $id"; do
		# shellcheck disable=SC2086
		"$FGPACK" verify "$b" $mode --summary - >/dev/null 2>"$WORK/r.err"
		check_exit "$what: verify $mode exits 3" 3 sh -c "exit $?"
		check_grep "  naming it" "$pat" "$WORK/r.err"
	done
	FG_TAR_LANES=0 "$FGPACK" verify "$b" --no-replay --summary - >/dev/null 2>"$WORK/r.err"
	check_exit "$what: verify FG_TAR_LANES=0 exits 3" 3 sh -c "exit $?"
	rm -f "$WORK/ran"
	"$FGPACK" exec "$b" -- touch "$WORK/ran" 2>"$WORK/r.err"
	check_exit "$what: exec exits 3" 3 sh -c "exit $?"
	check "  in one line, the command not run" sh -c "[ \"\$(wc -l <'$WORK/r.err')\" -eq 1 ] && [ ! -e '$WORK/ran' ]"
	check_grep "  naming it" "$pat" "$WORK/r.err"
}

# accepted BUNDLE WHAT: verify in every way and exec exit 0
accepted() {
	b=$1 what=$2
	id=$(zstd -q -dc -f "$b" 2>/dev/null | sha256sum | cut -c1-64)
	for mode in "" "--show-id" "--id $id"; do
		# shellcheck disable=SC2086
		check_exit "$what: verify $mode exits 0" 0 "$FGPACK" verify "$b" $mode --summary -
	done
	check_exit "$what: exec exits 0" 0 "$FGPACK" exec "$b" -- true
}

# ---- 1. bytes after the end-of-archive marker ----
# what pack writes: members, two zero blocks, zeros to a 10240-byte record
check "pack's tar: a whole number of 10240-byte records" sh -c "[ \$((\$(wc -c <'$WORK/a.tar') % 10240)) -eq 0 ]"
accepted "$WORK/a.fgb" "pack's bundle"
accepted "$WORK/a.tar" "pack's tar, uncompressed"
# GNU tar and bsdtar repack the members (their own headers; the same
# names, sizes and modes): end marker and record padding as they write them
mkdir -p "$WORK/x"
tar -xf "$WORK/a.tar" -C "$WORK/x"
(cd "$WORK/x" && find . -type f | sed 's|^\./||' | LC_ALL=C sort >"$WORK/x.list")
check "GNU tar repacks it (--zstd)" sh -c "cd '$WORK/x' && tar --owner=0 --group=0 --numeric-owner --zstd -cf '$WORK/gnu.fgb' -T '$WORK/x.list'"
accepted "$WORK/gnu.fgb" "GNU tar --zstd"
check "GNU tar -b 64 (32 KiB records)" sh -c "cd '$WORK/x' && tar -b 64 -cf '$WORK/gnu64.tar' -T '$WORK/x.list'"
accepted "$WORK/gnu64.tar" "GNU tar -b 64"
if command -v bsdtar >/dev/null; then
	check "bsdtar repacks it (--zstd)" sh -c "cd '$WORK/x' && bsdtar --zstd -cf '$WORK/bsd.fgb' -T '$WORK/x.list'"
	accepted "$WORK/bsd.fgb" "bsdtar --zstd"
fi
# trailing bytes: a non-zero byte in the record padding; text after the
# record; a second archive after the first; the same in a second zstd
# frame; garbage after the zstd frame
python3 - "$WORK/a.tar" "$WORK" <<'EOF'
import io, sys, tarfile
d = open(sys.argv[1], "rb").read()
w = sys.argv[2]
pad = bytearray(d); pad[-100] = 0x01
open(w + "/t-pad.tar", "wb").write(pad)
open(w + "/t-text.tar", "wb").write(d + b"hidden payload\n")
b = io.BytesIO()
t = tarfile.open(fileobj=b, mode="w"); ti = tarfile.TarInfo("components/model/smuggled.py"); ti.size = 3
t.addfile(ti, io.BytesIO(b"bad")); t.close()
open(w + "/t-cat.tar", "wb").write(d + b.getvalue())
open(w + "/t-cat2.bin", "wb").write(b.getvalue())
open(w + "/t-zeros.tar", "wb").write(d + bytes(20480))
EOF
for t in pad text cat; do
	refused "$WORK/t-$t.tar" "after the tar's end-of-archive marker" "tar, trailing $t"
done
zstd -q -c "$WORK/t-text.tar" >"$WORK/t-text.fgb"
refused "$WORK/t-text.fgb" "after the tar's end-of-archive marker" "zstd, trailing text inside the frame"
cat "$WORK/a.fgb" >"$WORK/t-frame.fgb"
zstd -q -c "$WORK/t-cat2.bin" >>"$WORK/t-frame.fgb"
# (since 2026-12-06 named by the frames pack wrote before it, now no longer
# at the file's end)
refused "$WORK/t-frame.fgb" "the identity states' frame at byte [0-9]+ is not the last frame a seek table that ends the file lists" "pack's bundle, then a zstd frame holding an archive"
zstd -q -c "$WORK/a.tar" >"$WORK/t-junk.fgb"
printf 'garbage after the frame' >>"$WORK/t-junk.fgb"
refused "$WORK/t-junk.fgb" "corrupt or hostile" "zstd, garbage after the frame"
accepted "$WORK/t-zeros.tar" "tar, 20480 more zero bytes after its record"
head -c 2000000 /dev/zero >>"$WORK/t-zeros.tar"
refused "$WORK/t-zeros.tar" "more than 1048576 zero bytes after the tar's end-of-archive marker" "tar, 2 MB of zeros after its end"

# ---- 2. bundle.json's files list: each path once, every field there ----
# (rewritten by python3 with the members unchanged; bundle.json is not a
# member of its own list, so nothing else needs to change)
python3 - "$WORK/a.tar" "$WORK" <<'EOF'
import copy, io, json, sys, tarfile
src = tarfile.open(sys.argv[1])
w = sys.argv[2]
meta = json.loads(src.extractfile("bundle.json").read())
def write(name, meta, extra=()):
    out = tarfile.open(w + "/" + name, "w", format=tarfile.PAX_FORMAT)
    for m in src.getmembers():
        if m.name == "bundle.json":
            data = json.dumps(meta, indent=2, sort_keys=True).encode() + b"\n"
            ti = copy.copy(m); ti.size = len(data)
            out.addfile(ti, io.BytesIO(data))
        else:
            out.addfile(m, src.extractfile(m))
    for name, data in extra:
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644
        out.addfile(ti, io.BytesIO(data))
    out.close()
def entry(m, path):
    return [f for f in m["files"] if f["path"] == path][0]
W = "components/model/sub/weights.bin"
m = copy.deepcopy(meta); m["files"].append(copy.deepcopy(entry(m, W))); write("j-dup.tar", m)
m = copy.deepcopy(meta); del entry(m, W)["mode"]; write("j-nomode.tar", m)
m = copy.deepcopy(meta); entry(m, W)["mode"] = 420; write("j-modenum.tar", m)
m = copy.deepcopy(meta); entry(m, W)["size"] = str(entry(m, W)["size"]); write("j-sizestr.tar", m)
m = copy.deepcopy(meta); entry(m, W)["sha256"] = entry(m, W)["sha256"].upper(); write("j-shaupper.tar", m)
m = copy.deepcopy(meta); del entry(m, W)["sha256"]; write("j-nosha.tar", m)
m = copy.deepcopy(meta); m["files"].append(5); write("j-notobj.tar", m)
# paths exec reads bundle.json for: a component's folder outside the
# bundle, a manifest that is not one of its files
m = copy.deepcopy(meta); m["components"][0]["path"] = "../../etc"; write("j-comp.tar", m)
m = copy.deepcopy(meta); m["manifest"] = "manifest.json"; write("j-manifest.tar", m)
# names no file system holds: a component of 300 bytes; a path of 3841
import hashlib
for name, path in (("n-comp.tar", "components/model/" + "n" * 300),
                   ("n-path.tar", "components/model/" + "/".join(["d" * 200] * 19) + "/w.bin")):
    m = copy.deepcopy(meta); data = b"hidden\n"
    m["files"].append({"path": path, "size": len(data), "mode": "0644",
                       "sha256": hashlib.sha256(data).hexdigest()})
    m["files"].sort(key=lambda f: f["path"].encode())
    write(name, m, [(path, data)])
EOF
refused "$WORK/j-dup.tar" "components/model/sub/weights.bin: listed twice in bundle.json" "bundle.json lists a path twice"
refused "$WORK/j-nomode.tar" "components/model/sub/weights.bin: bundle.json gives no mode" "a files entry without mode"
refused "$WORK/j-modenum.tar" "components/model/sub/weights.bin: bundle.json gives no mode" "a files entry whose mode is a number"
refused "$WORK/j-sizestr.tar" "components/model/sub/weights.bin: bundle.json gives no size" "a files entry whose size is a string"
refused "$WORK/j-shaupper.tar" "components/model/sub/weights.bin: bundle.json gives no sha256" "a files entry whose sha256 is upper case"
refused "$WORK/j-nosha.tar" "components/model/sub/weights.bin: bundle.json gives no sha256" "a files entry without sha256"
refused "$WORK/j-notobj.tar" "bundle.json: files\\[[0-9]+\\] is not an object" "a files entry that is no object"
refused "$WORK/j-comp.tar" "bundle.json: components\\[0\\].path '\\.\\./\\.\\./etc' is not a path inside the bundle" "a component's path outside the bundle"
refused "$WORK/j-manifest.tar" "bundle.json: manifest 'manifest.json' is not one of its files" "a manifest that is not in the bundle"

# ---- 3. member names: what verify passes, exec can extract ----
refused "$WORK/n-comp.tar" "component of more than 255 bytes" "a member name with a 300-byte component"
refused "$WORK/n-path.tar" "longer than 3839 bytes" "a member path of 3841 bytes"
# long names that are valid: a path of 4 components of 200 bytes (pax
# names), packed, verified in every way, extracted by exec
L=$(printf '%0200d' 0 | tr 0 l)
mkdir -p "$WORK/lm/$L/$L/$L"
printf '{}\n' >"$WORK/lm/config.json"
head -c 5000 /dev/urandom >"$WORK/lm/$L/$L/$L/$L"
check "pack a model with an 820-byte path" sh -c "'$FGPACK' pack --model '$WORK/lm' --no-golden -o '$WORK/long.fgb' >/dev/null"
accepted "$WORK/long.fgb" "an 820-byte path"
check "  exec extracts it" sh -c "'$FGPACK' exec '$WORK/long.fgb' -- sh -c 'cmp \"\$FGPACK_BUNDLE/components/model/$L/$L/$L/$L\" \"$WORK/lm/$L/$L/$L/$L\"'"
check "  verify --no-replay reads it in lanes" sh -c "'$FGPACK' verify '$WORK/long.fgb' --no-replay --threads 1 --json --summary - | grep -q '\"lanes\": 2'"
# a path pack could not have verified: refused before anything is written
D=$(printf '%0200d' 0 | tr 0 d)
p="$WORK/deep"
i=0
while [ $i -lt 19 ]; do p="$p/$D"; i=$((i + 1)); done
mkdir -p "$p"
printf '{}\n' >"$WORK/deep/config.json"
printf 'w\n' >"$p/w.bin"
"$FGPACK" pack --model "$WORK/deep" --no-golden -o "$WORK/deep.fgb" >/dev/null 2>"$WORK/deep.err"
check_exit "pack of a member path of 3841 bytes: refused" 1 sh -c "exit $?"
check "  in one line, nothing written" sh -c "[ \"\$(wc -l <'$WORK/deep.err')\" -eq 1 ] && ! ls '$WORK' | grep -q '^deep.fgb'"
check_grep "  naming the path and the limit" "bundle member 'components/model/d+\\.\\.\\.' \\(3841 bytes\\): its name is longer than 3839 bytes" "$WORK/deep.err"

# ---- 4. the manifest bundle.json names: one exec can read ----
# (bundle.json's entry for it right, its bytes no manifest: verify never
# parsed it and passed, exec failed with exit 1)
mkdir -p "$WORK/ms"
printf '{"name": "m", "serve": ["true"], "env": {"MAX_MODEL_LEN": "64"}}\n' >"$WORK/ms/manifest.json"
check "pack a manifest bundle" sh -c "'$FGPACK' pack '$WORK/ms/manifest.json' --no-golden -o '$WORK/ms.fgb' >/dev/null 2>&1"
zstd -q -dc "$WORK/ms.fgb" >"$WORK/ms.tar"
check "  verify --no-replay reads it in lanes (the lane that reads the manifest keeps it)" sh -c "'$FGPACK' verify '$WORK/ms.fgb' --no-replay --threads 1 --json --summary - | grep -q '\"lanes\": [2-9]'"
# each as a plain tar and as zstd frames cut at every member with a seek
# table, so that the lanes read it too
python3 - "$WORK/ms.tar" "$WORK" <<'EOF'
import copy, hashlib, io, json, struct, subprocess, sys, tarfile
src = tarfile.open(sys.argv[1])
w = sys.argv[2]
meta = json.loads(src.extractfile("bundle.json").read())
def frame(tarb, cuts, out):
    cuts = sorted(set(c for c in cuts if 0 < c < len(tarb))) + [len(tarb)]
    body, tab, at = b"", b"", 0
    for c in cuts:
        z = subprocess.run(["zstd", "-q", "-c"], input=tarb[at:c], capture_output=True, check=True).stdout
        body += z; tab += struct.pack("<II", len(z), c - at); at = c
    tab += struct.pack("<I", len(cuts)) + b"\0" + struct.pack("<I", 0x8F92EAB1)
    open(out, "wb").write(body + struct.pack("<II", 0x184D2A5E, len(tab)) + tab)
def write(name, mdata):
    m = copy.deepcopy(meta)
    e = [f for f in m["files"] if f["path"] == "manifest.json"][0]
    e["size"] = len(mdata); e["sha256"] = hashlib.sha256(mdata).hexdigest()
    b = io.BytesIO()
    out = tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT)
    offs = []
    for mm in src.getmembers():
        data = src.extractfile(mm).read()
        if mm.name == "bundle.json":
            data = json.dumps(m, indent=2, sort_keys=True).encode() + b"\n"
        elif mm.name == "manifest.json":
            data = mdata
        ti = copy.copy(mm); ti.size = len(data)
        offs.append(b.tell())
        out.addfile(ti, io.BytesIO(data))
    out.close()
    open(w + "/" + name + ".tar", "wb").write(b.getvalue())
    frame(b.getvalue(), offs, w + "/" + name + ".fgb")
write("m-empty", b"{}\n")
write("m-array", b"[1, 2]\n")
write("m-text", b"not json at all\n")
write("m-port", b'{"name": "m", "env": {"PORT": 8000}}\n')
write("m-serve", b'{"name": "m", "serve": "python3 serve.py"}\n')
EOF
for f in tar fgb; do
	accepted "$WORK/m-empty.$f" "manifest {} ($f): a manifest, with nothing in it"
	refused "$WORK/m-array.$f" "^fgpack [a-z]+: manifest.json: not a valid manifest: expected a JSON object at the top, got array\$" "manifest a JSON array ($f)"
	refused "$WORK/m-text.$f" "manifest.json: not a valid manifest: not valid JSON" "manifest not JSON ($f)"
	refused "$WORK/m-port.$f" "manifest.json: not a valid manifest: env.PORT: expected a string, got number" "manifest env.PORT a number ($f)"
	refused "$WORK/m-serve.$f" "manifest.json: not a valid manifest: serve: " "manifest serve a string ($f)"
done
check "  the framed ones are read in lanes" sh -c "'$FGPACK' verify '$WORK/m-empty.fgb' --no-replay --threads 1 --json --summary - | grep -q '\"lanes\": [2-9]'"
"$FGPACK" audit "$WORK/m-array.fgb" >/dev/null 2>"$WORK/au.err"
check_exit "audit of a bundle whose manifest is a JSON array: exit 3" 3 sh -c "exit $?"
check "  in one line, naming the member and what is wrong" sh -c "[ \"\$(wc -l <'$WORK/au.err')\" -eq 1 ] && grep -q '^fgpack audit: manifest.json: not a valid manifest: expected a JSON object at the top, got array\$' '$WORK/au.err'"
check_exit "audit of the bundle whose manifest is {}: exit 0" 0 sh -c "'$FGPACK' audit '$WORK/m-empty.fgb' >/dev/null"
# pack never writes one: a manifest that does not parse is refused
printf '[1, 2]\n' >"$WORK/ms/manifest.json"
"$FGPACK" pack "$WORK/ms/manifest.json" --no-golden -o "$WORK/msbad.fgb" >/dev/null 2>"$WORK/msbad.err"
check_exit "pack of a manifest that is a JSON array: refused" 1 sh -c "exit $?"
check "  in one line, nothing written" sh -c "[ \"\$(wc -l <'$WORK/msbad.err')\" -eq 1 ] && ! ls '$WORK' | grep -q '^msbad.fgb'"
check_grep "  naming the file and what is wrong" "manifest.json: expected a JSON object at the top, got array" "$WORK/msbad.err"

# ---- 5. skippable zstd frames: only the two pack writes ----
# (zstd skips any skippable frame: its bytes reach no member and the bundle
# id does not cover them; every reader accepted them)
check "pack's bundle keeps the identity states' frame and the seek table" sh -c "'$FGPACK' verify '$WORK/a.fgb' --show-id --json --summary - | grep -q '\"lanes\": [2-9]'"
PYTHONPATH="$TOP/tests/integration" python3 - "$WORK/a.fgb" "$WORK" <<'EOF'
import struct, sys
from seektable import frames as frames_of, build
d = open(sys.argv[1], "rb").read()
w = sys.argv[2]
frames = frames_of(d)
assert struct.unpack("<I", frames[-1][0][:4])[0] == 0x184D2A5D
def skip(magic, payload):
    return struct.pack("<II", magic, len(payload)) + payload
def out(name, data):
    open(w + "/" + name, "wb").write(data)
hid = skip(0x184D2A50, b"hidden payload")
# listed in the table as a frame of no tar bytes, between two data frames
out("s-mid.fgb", build(frames[:1] + [[hid, 0]] + frames[1:]))
# before the identity states, listed
out("s-last.fgb", build(frames[:-1] + [[hid, 0]] + frames[-1:]))
# first in the file; after the seek table
out("s-first.fgb", hid + d)
out("s-after.fgb", d + hid)
# the identity states' frame spoilt: version 2; a count its size does not
# hold; an entry's offset not at a frame's start; another magic
idst = bytearray(frames[-1][0])
v2 = bytearray(idst); v2[16:20] = struct.pack("<I", 2)
cnt = bytearray(idst); cnt[20:24] = struct.pack("<I", struct.unpack("<I", idst[20:24])[0] + 1)
ent = bytearray(idst); ent[24:32] = struct.pack("<Q", struct.unpack("<Q", idst[24:32])[0] + 64)
mag = bytearray(idst); mag[0:4] = struct.pack("<I", 0x184D2A5C)
for name, f in (("i-version", v2), ("i-count", cnt), ("i-entry", ent), ("i-magic", mag)):
    out(name + ".fgb", build(frames[:-1] + [[bytes(f), 0]]))
# inside a data frame's entry (the table adds up; only a walk of the frame,
# or its decoder, finds where the frame ends); two data frames as one entry
# (the table lists one frame fewer than there are)
out("s-inside.fgb", build([[frames[0][0] + hid, frames[0][1]]] + frames[1:]))
out("t-two.fgb", build([[frames[0][0] + frames[1][0], frames[0][1] + frames[1][1]]] + frames[2:]))
# a seek table with checksums (descriptor bit 7, 12-byte entries: the
# checksum bytes are nobody's)
tab = b"".join(struct.pack("<III", len(f), u, 0x12345678) for f, u in frames)
tab += struct.pack("<I", len(frames)) + b"\x80" + struct.pack("<I", 0x8F92EAB1)
out("t-chk.fgb", b"".join(f for f, u in frames) + struct.pack("<II", 0x184D2A5E, len(tab)) + tab)
EOF
refused "$WORK/s-mid.fgb" "a skippable zstd frame \\(magic 0x184D2A50, 14 bytes\\) at byte [0-9]+: " "a skippable frame between two data frames"
refused "$WORK/s-last.fgb" "a skippable zstd frame \\(magic 0x184D2A50, 14 bytes\\) at byte [0-9]+: " "a skippable frame before the identity states"
# (the lanes read through the table, their decoders checking each frame
# against it: they give up, and the sequential reader's walk names it)
refused "$WORK/s-inside.fgb" "a skippable zstd frame \\(magic 0x184D2A50, 14 bytes\\) at byte [0-9]+: " "a skippable frame inside a data frame's entry"
refused "$WORK/t-two.fgb" "the identity states' frame at byte [0-9]+ is not the last frame" "two data frames as one entry of the table"
refused "$WORK/s-first.fgb" "a skippable zstd frame \\(magic 0x184D2A50, 14 bytes\\) at byte 0: " "a skippable frame first"
refused "$WORK/s-after.fgb" "the identity states' frame at byte [0-9]+ is not the last" "a skippable frame after the seek table"
refused "$WORK/i-version.fgb" "the identity states' frame at byte [0-9]+: not tag" "identity states of version 2"
refused "$WORK/i-count.fgb" "the identity states' frame at byte [0-9]+: not tag" "identity states whose count is one over"
refused "$WORK/i-entry.fgb" "the identity states' frame at byte [0-9]+: entry 0 " "an identity state at no frame's start"
refused "$WORK/i-magic.fgb" "a skippable zstd frame \\(magic 0x184D2A5C" "identity states under another magic"
refused "$WORK/t-chk.fgb" "the identity states' frame at byte [0-9]+ is not the last frame a seek table" "a seek table with checksums"
python3 - "$WORK/a.fgb" "$WORK/t-chk0.fgb" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<I", d[-9:-5])[0]
st = len(d) - (8 + 8 * n + 9)
last = struct.unpack("<I", d[st + 8 + 8 * (n - 1):st + 12 + 8 * (n - 1)])[0]
body = d[:st - last]  # without the identity states
tab = struct.pack("<III", len(body), 0, 0)  # (entries unused: checked by their sum first)
open(sys.argv[2], "wb").write(body + struct.pack("<II", 0x184D2A5E, 21) + tab + struct.pack("<I", 1) + b"\x80" + struct.pack("<I", 0x8F92EAB1))
EOF
refused "$WORK/t-chk0.fgb" "a seek table frame at byte [0-9]+ that is not pack's" "a seek table with checksums, no identity states"
# pzstd writes a skippable frame before each of its frames: refused before
# (libarchive saw no tar), now named
pzstd -q -c "$WORK/a.tar" >"$WORK/pz.fgb" 2>/dev/null
refused "$WORK/pz.fgb" "a skippable zstd frame \\(magic 0x184D2A50, 4 bytes\\) at byte 0" "pzstd's frames"
"$FGPACK" audit "$WORK/s-mid.fgb" >/dev/null 2>"$WORK/au.err"
check_exit "audit of a bundle with a skippable frame: exit 3" 3 sh -c "exit $?"
check_grep "  naming it" "a skippable zstd frame" "$WORK/au.err"

# ---- 6. empty zstd frames: no content, so not in the bundle id ----
# (zstd passes a frame of no content bytes; pack writes none). What
# `printf '' | zstd` writes (a content size of 0), the same without its
# content size (a raw block of 0 bytes), and a compressed block of no
# literals and no sequences (only decoding shows it empty): between two
# data frames, listed in the seek table with no tar bytes, and first
printf '' | zstd -q -c >"$WORK/empty.zst"
printf '' | zstd -q -c --no-content-size >"$WORK/empty-nofcs.zst"
PYTHONPATH="$TOP/tests/integration" python3 - "$WORK/a.fgb" "$WORK" <<'EOF'
import sys
from seektable import frames as frames_of, build
d = open(sys.argv[1], "rb").read()
w = sys.argv[2]
frames = frames_of(d)
assert len(frames) >= 3 and frames[1][1] > 0
empty = open(w + "/empty.zst", "rb").read()
nofcs = open(w + "/empty-nofcs.zst", "rb").read()
# magic; descriptor 0 (a window byte, no content size, no checksum); a
# window of 1 KiB; a last compressed block of 2 bytes: raw literals of
# size 0, then 0 sequences
cblk = bytes.fromhex("28b52ffd0000" "150000" "0000")
for name, e in (("e-mid", empty), ("e-nofcs", nofcs), ("e-cblk", cblk)):
    open(w + "/" + name + ".fgb", "wb").write(build(frames[:1] + [[e, 0]] + frames[1:]))
open(w + "/e-first.fgb", "wb").write(build([[empty, 0]] + frames))
print(len(frames[0][0]), file=open(w + "/e.at", "w"))
EOF
e_at=$(cat "$WORK/e.at")
check "zstd reads an empty frame as nothing: the same tar, the same id" sh -c "[ \"\$(zstd -q -dc '$WORK/e-cblk.fgb' | sha256sum | cut -c1-64)\" = \"\$(zstd -q -dc '$WORK/a.fgb' | sha256sum | cut -c1-64)\" ]"
refused "$WORK/e-mid.fgb" "an empty zstd frame \\(no content bytes\\) at byte $e_at: pack writes none" "an empty zstd frame between two data frames"
refused "$WORK/e-nofcs.fgb" "an empty zstd frame \\(no content bytes\\) at byte $e_at: " "an empty zstd frame without its content size"
refused "$WORK/e-cblk.fgb" "an empty zstd frame \\(no content bytes\\) at byte $e_at: " "an empty zstd frame of a compressed block"
refused "$WORK/e-first.fgb" "an empty zstd frame \\(no content bytes\\) at byte 0: " "an empty zstd frame first"
for b in e-mid e-cblk; do
	FG_TAR_RAW=0 "$FGPACK" verify "$WORK/$b.fgb" --no-replay --summary - >/dev/null 2>"$WORK/r.err"
	check_exit "$b: verify with zstd alone (FG_TAR_RAW=0) exits 3" 3 sh -c "exit $?"
	check_grep "  naming it" "an empty zstd frame \\(no content bytes\\) at byte $e_at" "$WORK/r.err"
done
"$FGPACK" audit "$WORK/e-cblk.fgb" >/dev/null 2>"$WORK/au.err"
check_exit "audit of a bundle with an empty frame: exit 3" 3 sh -c "exit $?"
check_grep "  naming it" "an empty zstd frame" "$WORK/au.err"

# ---- 7. zstd's content checksums: checked, so they carry nothing ----
# (pack writes one at the end of every frame; the id does not cover its 4
# bytes, and readers did not compute it: any 4 bytes passed.) Each frame
# kind with its checksum's last byte changed: zstd's frame of a header and
# raw blocks (a.fgb's first), zstd's compressed frame (the engine's), pack's
# stored frame (the lanes hand its raw blocks out themselves), and a plain
# `zstd -c` of the tar, one frame, no seek table. A frame with no checksum
# has nothing to check and is read as before.
head -c 3000000 /dev/urandom >"$M/sub/big.bin"
check "pack with a member stored raw" sh -c "'$FGPACK' pack --model '$M' --no-golden -o '$WORK/b.fgb' >/dev/null"
rm -f "$M/sub/big.bin"
zstd -q -c "$WORK/a.tar" >"$WORK/z1.fgb"
PYTHONPATH="$TOP/tests/integration" python3 - "$WORK" <<'EOF'
import sys
import seektable
w = sys.argv[1]
def frames_of(d):  # (offset, length, frame header descriptor) of each frame
    out, at = [], 0
    for f, u in seektable.frames(d):
        out.append((at, len(f), f[4])); at += len(f)
    return out
def spoil(src, dst, at, c):
    d = bytearray(open(w + "/" + src, "rb").read())
    d[at + c - 1] ^= 0x01
    open(w + "/" + dst, "wb").write(d)
    print(at, file=open(w + "/" + dst + ".at", "w"))
fa = frames_of(open(w + "/a.fgb", "rb").read())
fb = frames_of(open(w + "/b.fgb", "rb").read())
# (every data frame pack wrote has its checksum: descriptor bit 2)
assert all(f[2] & 0x04 for f in fa[:-1] + fb[:-1])
spoil("a.fgb", "k-rawtail.fgb", fa[0][0], fa[0][1])
spoil("a.fgb", "k-cooked.fgb", fa[1][0], fa[1][1])
stored = [f for f in fb if f[2] == 0x04]
assert stored, "pack wrote no stored frame"
spoil("b.fgb", "k-stored.fgb", stored[0][0], stored[0][1])
z = open(w + "/z1.fgb", "rb").read()
spoil("z1.fgb", "k-plain.fgb", 0, len(z))
EOF
# (kb: refused sets b)
for kb in k-rawtail k-cooked k-stored k-plain; do
	check "$kb: zstd -t finds the checksum wrong" sh -c "! zstd -q -t '$WORK/$kb.fgb' 2>/dev/null"
	k_at=$(cat "$WORK/$kb.fgb.at")
	refused "$WORK/$kb.fgb" "the zstd frame at byte $k_at: its content checksum is not its content's XXH64" "$kb: a content checksum one bit off"
	FG_TAR_RAW=0 "$FGPACK" verify "$WORK/$kb.fgb" --no-replay --summary - >/dev/null 2>"$WORK/r.err"
	check_exit "$kb: verify with zstd alone (FG_TAR_RAW=0) exits 3" 3 sh -c "exit $?"
	check_grep "  naming it" "the zstd frame at byte $k_at: its content checksum" "$WORK/r.err"
done
accepted "$WORK/b.fgb" "pack's bundle with a stored frame"
zstd -q -c --no-check "$WORK/a.tar" >"$WORK/z0.fgb"
accepted "$WORK/z0.fgb" "zstd --no-check: frames without checksums"
"$FGPACK" audit "$WORK/k-stored.fgb" >/dev/null 2>"$WORK/au.err"
check_exit "audit of a bundle with a wrong checksum: exit 3" 3 sh -c "exit $?"
check_grep "  naming it" "its content checksum is not" "$WORK/au.err"

finish
