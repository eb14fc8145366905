#!/bin/sh
# bake_int4.sh - `fgpack bake int4` end to end on a tiny Gemma 4-shaped
# checkpoint made by tests/int4/int4ref.py (real tensor names, sharded input):
# every tensor accounted for and bit-identical to an independent numpy
# quantizer; -j1, -j2 and the non-SIMD path byte-identical; the tree digest and
# provenance statement; and each kind of bad input refused with one line
# naming file and tensor, leaving no output behind.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
REF="$TOP/tests/int4/int4ref.py"
cd "$WORK" || exit 1

check "make a tiny sharded Gemma 4 checkpoint" $PY "$REF" make src --special --shards 2 --seed 7

check "bake -j 1" sh -c "'$FGPACK' bake int4 src out1 -j 1 >digest1 2>log1"
check "bake -j 2" sh -c "'$FGPACK' bake int4 src out2 -j 2 >digest2 2>log2"
check "bake again, scalar path (no SIMD)" sh -c "FGPACK_NO_SIMD=1 '$FGPACK' bake int4 src out3 -j 2 >digest3 2>/dev/null"
check "bake again, shards read by pread() (FG_BAKE_PREAD=1)" sh -c "FG_BAKE_PREAD=1 '$FGPACK' bake int4 src out4 -j 2 >/dev/null 2>&1"
check "-j1 and -j2 outputs byte-identical" diff -r out1 out2
check "the mapped and the pread() reads byte-identical" diff -r out2 out4
check "two runs and the scalar path byte-identical" diff -r out2 out3
check "the printed tree digests agree" sh -c 'test "$(cut -d" " -f1 digest1)" = "$(cut -d" " -f1 digest3)"'
check "every tensor accounted for, bit-identical to the numpy reference" $PY "$REF" check src out1 --group 128

# Tree digest: sha256 over "<sha256> <size> <path>\n" lines sorted by path.
tree_digest() {
	(cd "$1" && for f in $(ls | LC_ALL=C sort); do
		printf '%s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(wc -c <"$f" | tr -d ' ')" "$f"
	done) | sha256sum | cut -d' ' -f1
}
check "tree digest recomputed with sha256sum" sh -c "test \"\$(cut -d' ' -f1 digest1)\" = '$(tree_digest out1)'"
# Small shards: several output shards, whose digests -j 3 computes on two
# hashing threads side by side (each shard to the one given fewer bytes).
check "bake --max-shard-size 64KiB -j 1" sh -c "'$FGPACK' bake int4 src outs1 -j 1 --max-shard-size 64KiB >digests1 2>/dev/null"
check "bake --max-shard-size 64KiB -j 3" sh -c "'$FGPACK' bake int4 src outs3 -j 3 --max-shard-size 64KiB >digests3 2>/dev/null"
check "small shards: more than two of them" sh -c 'test "$(ls outs3 | grep -c "^model-.*safetensors$")" -gt 2'
check "small shards: -j1 and -j3 byte-identical" diff -r outs1 outs3
check "small shards: every tensor accounted for" $PY "$REF" check src outs3 --group 128
check "small shards: tree digest recomputed with sha256sum" sh -c "test \"\$(cut -d' ' -f1 digests3)\" = '$(tree_digest outs3)'"
check "small shards: the statement names the shard limit" grep -q '"max_shard_bytes": *65536' outs3.intoto.json
check "--max-shard-size refuses a size it cannot read" sh -c "! '$FGPACK' bake int4 src outx --max-shard-size 5XB 2>err && grep -q 'max-shard-size' err && test ! -e outx"
check "tokenizer and generation config copied" cmp src/tokenizer.json out1/tokenizer.json
check "processor config copied" cmp src/processor_config.json out1/processor_config.json
check "no temporary folder left beside the output" sh -c '! ls -a | grep -q fgpack-tmp'

# Provenance: subjects are the output files, dependencies the inputs, by sha256.
check "statement next to the output" test -f out1.intoto.json
check "statement lists output files and input files by sha256" $PY - <<EOF
import json, hashlib, os
st = json.load(open("out1.intoto.json"))
assert st["_type"] == "https://in-toto.io/Statement/v1"
assert st["predicateType"] == "https://slsa.dev/provenance/v1"
h = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
subj = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
assert subj == {f: h("out1/" + f) for f in os.listdir("out1")}, subj
deps = {d["name"]: d["digest"]["sha256"] for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]}
assert deps == {f: h("src/" + f) for f in os.listdir("src")}, deps
ext = st["predicate"]["buildDefinition"]["externalParameters"]
assert ext["group_size"] == 128 and ext["head"] == "keep"
b = st["predicate"]["runDetails"]["builder"]
assert b["version"]["fgpack"] and b["version"]["build"]
bp = st["predicate"]["runDetails"]["byproducts"][0]
assert bp["digest"]["sha256"] == open("digest1").read().split()[0]
EOF
# every mediaType in the statement is a media type (RFC 6838 type/subtype,
# RFC 9110 parameters), as a consumer of a ResourceDescriptor parses it
check "every mediaType in the statement is type/subtype[; name=value]" $PY - <<'EOF'
import json, re
name = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
token = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
param = r"[ \t]*;[ \t]*" + token + r"=(?:" + token + r'|"(?:[^"\\]|\\.)*")'
mt = re.compile(name + "/" + name + "(?:" + param + ")*")
seen = []
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "mediaType":
                seen.append(x)
                assert isinstance(x, str) and mt.fullmatch(x), "not a media type: %r" % (x,)
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(json.load(open("out1.intoto.json")))
assert seen, "no mediaType in the statement"
EOF

# the signed statement checks the folder it describes: its subjects are
# named relative to OUT_DIR, beside which OUT_DIR.intoto.json lies; a changed
# or removed output file fails verify-sig
"$FGPACK" keygen -o sk.pem >/dev/null 2>&1
cp -a out1 sv && cp out1.intoto.json sv.intoto.json
nsubj=$($PY -c 'import json; print(len(json.load(open("sv.intoto.json"))["subject"]))')
check "sign the bake's statement" sh -c "'$FGPACK' sign --key sk.pem sv.intoto.json >/dev/null"
check "verify-sig checks every output file of the folder" sh -c "'$FGPACK' verify-sig --key sk.pub.pem sv.intoto.json | grep -q ', $nsubj subjects checked, signed by'"
# its signature given for the folder is no model signature of it: one line
# naming the provenance predicateType (exit 3), not "read sv: Is a directory"
check_exit "the statement's signature given for the folder fails" 3 "$FGPACK" verify-sig --key sk.pub.pem --sig sv.intoto.json.sig sv
check_grep "  naming the statement's predicateType" "sv: the signature's statement is https://slsa.dev/provenance/v1, not a model signature" "$WORK/.out"
# given for one of its output files, which is no statement, it does not
# cover it: one line naming the predicateType and the first subjects (exit 3)
check_exit "the statement's signature given for an output file fails" 3 "$FGPACK" verify-sig --key sk.pub.pem --sig sv.intoto.json.sig sv/config.json
check_grep "  naming the statement's predicateType and subjects" "sv/config.json: the signature's statement \\(https://slsa.dev/provenance/v1, subjects \"[^\"]+\", .* does not cover sv/config.json" "$WORK/.out"
printf 'x' >>sv/config.json
check_exit "a changed output file fails" 3 "$FGPACK" verify-sig --key sk.pub.pem sv.intoto.json
check_grep "  naming it" "subject config.json: content changed" "$WORK/.out"
rm sv/config.json
check_exit "a removed output file fails" 3 "$FGPACK" verify-sig --key sk.pub.pem sv.intoto.json
check_grep "  naming it" "subject config.json: signed but missing" "$WORK/.out"

check "bake --group 32 --head int4" sh -c "'$FGPACK' bake int4 src out32 --group 32 --head int4 -j 2 >/dev/null 2>&1"
check "group 32 with an untied INT4 lm_head matches the reference" $PY "$REF" check src out32 --group 32 --head int4
check "bake --group 64 from a single-file checkpoint" sh -c "$PY '$REF' make one --seed 3 && '$FGPACK' bake int4 one out64 --group 64 >/dev/null 2>&1"
check "group 64 matches the reference" $PY "$REF" check one out64 --group 64

# F32 and F16 checkpoints (transformers saves a model in its dtype): widened
# exactly, then the bf16 arithmetic (docs/formats/int4.md, "F32 and F16 input")
cat >dt.py <<EOF
import sys, os, shutil, numpy as np
sys.path.insert(0, os.path.dirname("$REF"))
import int4ref as r
def val(d, a):
    a = np.asarray(a)
    return r.bf16_to_f32(a) if d == "BF16" else a.astype(np.float32)
if sys.argv[1] == "copy":  # copy SRC DST DTYPE: every float tensor as DTYPE
    src, dst, dt = sys.argv[2:5]
    shutil.copytree(src, dst)
    out = []
    for k, (d, shp, a) in r.st_read(src + "/model.safetensors").items():
        if d in ("BF16", "F16", "F32"):
            v = val(d, a)
            out.append((k, dt, shp, v if dt == "F32" else v.astype(np.float16)))
        else:
            out.append((k, d, shp, np.asarray(a)))
    r.st_write(dst + "/model.safetensors", out)
else:  # same A B DTYPE: INT4 tensors byte-equal, the others B's DTYPE with A's values
    a, b = (r.st_read(x + "/model.safetensors") for x in sys.argv[2:4])
    assert sorted(a) == sorted(b)
    n = 0
    for k, (d, shp, x) in a.items():
        e, _, y = b[k]
        if k.endswith((".weight_packed", ".weight_scale", ".weight_shape")):
            assert d == e and np.asarray(x).tobytes() == np.asarray(y).tobytes(), k
            n += 1
        elif d in ("BF16", "F16", "F32"):
            assert e == sys.argv[4] and (val(d, x) == val(e, y)).all(), k
    assert n > 10, n
EOF
check "an exact F32 copy of the bf16 checkpoint" $PY dt.py copy one one32 F32
check "bake the F32 copy, -j 1 and -j 2" sh -c "'$FGPACK' bake int4 one32 o32a --group 64 -j 1 >/dev/null 2>&1 && '$FGPACK' bake int4 one32 o32b --group 64 -j 2 >/dev/null 2>&1"
check "F32: -j1 and -j2 byte-identical" diff -r o32a o32b
check "F32: INT4 tensors equal the bf16 bake's, the others F32 of the same values" $PY dt.py same out64 o32a F32
check "an F16 copy (rounded by numpy) and that copy's exact F32 copy" sh -c "$PY dt.py copy one one16 F16 && $PY dt.py copy one16 one16w F32"
check "bake both" sh -c "'$FGPACK' bake int4 one16 o16 --group 64 >/dev/null 2>&1 && '$FGPACK' bake int4 one16w o16w --group 64 -j 1 >/dev/null 2>&1"
check "F16: INT4 tensors equal those of the same values in F32, the others F16" $PY dt.py same o16w o16 F16

# Bad input: exit 1, one line naming the file (and tensor), nothing left behind.
bad() { # name, expected-pattern, src
	"$FGPACK" bake int4 "$3" badout -j 2 >/dev/null 2>err
	rc=$?
	if [ $rc -eq 1 ] && [ "$(wc -l <err)" -eq 1 ] && grep -Eq -- "$2" err && [ ! -e badout ] &&
		! ls -a | grep -q 'badout.*fgpack-tmp'; then
		ok "$1"
	else
		not_ok "$1 (exit $rc)"
		sed 's/^/#   /' err
	fi
}
mkdir b_garbage && cp one/config.json b_garbage/ && head -c 1000 /dev/urandom >b_garbage/model.safetensors
bad "not a safetensors file" "b_garbage/model.safetensors: not a safetensors file" b_garbage
mkdir b_trunc && cp one/config.json b_trunc/ && head -c 50000 one/model.safetensors >b_trunc/model.safetensors
bad "truncated data" "b_trunc/model.safetensors: .*tensor" b_trunc
mkdir b_noconf && cp one/model.safetensors b_noconf/
bad "missing config.json" "b_noconf/config.json: missing" b_noconf
cat >mkbad.py <<EOF
import sys, os, json, shutil, numpy as np
sys.path.insert(0, os.path.dirname("$REF"))
import int4ref as r
q = "model.language_model.layers.0.self_attn.q_proj.weight"
def alter(d, f):  # a copy of the valid checkpoint "one" with f applied to its tensors
    shutil.copytree("one", d)
    t = [(k, dt, shp, np.array(a)) for k, (dt, shp, a) in r.st_read("one/model.safetensors").items()]
    r.st_write(d + "/model.safetensors", f(t))
def as_i32(t):
    return [(k, "I32", s, np.zeros(s, np.int32)) if k == q else (k, d, s, a) for k, d, s, a in t]
def nan_at_2_77(t):
    for k, d, s, a in t:
        if k == q:
            a[2, 77] = 0x7fc0
    return t
alter("b_dtype", as_i32)
alter("b_nan", nan_at_2_77)
os.makedirs("b_lie")
r.st_write("b_lie/model.safetensors", [(q, "BF16", (8, 128), np.zeros((8, 128), np.uint16))])
json.dump({"model_type": "gemma4"}, open("b_lie/config.json", "w"))
# A header that lies: claim a larger shape than the bytes it spans.
b = open("b_lie/model.safetensors", "rb").read()
b = b.replace(b"[8,128]", b"[9,128]")
open("b_lie/model.safetensors", "wb").write(b)
EOF
check "make bad checkpoints" $PY mkbad.py
# a Linear in a dtype the engine does not read: refused by the engine loader's
# own check (fg_g4_model_check), which the bake applies before writing
# anything (tests/integration/bake_model_check.sh: misshapen and missing tensors)
bad "unsupported dtype for a Linear" "b_dtype/model.safetensors: tensor model.language_model.layers.0.self_attn.q_proj.weight: dtype I32 is not supported \\(BF16, F16, F32\\)" b_dtype
# a checkpoint transformers made whose widths the group does not divide
cp -r "$TOP/tests/fixtures/oracle/variants/attn-bias" b_width
bad "input width not a multiple of the group" "b_width/model.safetensors: tensor model\\.layers\\.[0-9]+\\.[a-z_.]+\\.weight: input width [0-9]+ is not a multiple of the group size 128 \\(no --group fits" b_width
bad "NaN weight" "b_nan/model.safetensors: tensor model.language_model.layers.0.self_attn.q_proj.weight: non-finite value .* at \[2, 77\]" b_nan
bad "a header that lies about a shape" "b_lie/model.safetensors: tensor model.language_model.layers.0.self_attn.q_proj.weight: shape and dtype need" b_lie
# Sub-folders: every file under SRC is copied (links to files as plain files),
# listed in the statement by its relative path; hidden names are skipped.
cp -r one tree
mkdir -p tree/tokenizer/extra tree/.git tree/assets
printf 'vocab\n' >tree/tokenizer/extra/vocab.txt
printf 'spaced\n' >"tree/assets/a b.txt"
printf 'hidden\n' >tree/.git/HEAD
ln -s ../config.json tree/assets/config-link.json
check "bake a checkpoint with sub-folders and a link to a file" sh -c "'$FGPACK' bake int4 tree outtree -j 2 >treedigest 2>/dev/null"
check "files in sub-folders copied byte for byte" sh -c 'cmp tree/tokenizer/extra/vocab.txt outtree/tokenizer/extra/vocab.txt && cmp "tree/assets/a b.txt" "outtree/assets/a b.txt"'
check "a link to a file is copied as a plain file" sh -c 'test -f outtree/assets/config-link.json && ! test -L outtree/assets/config-link.json && cmp tree/config.json outtree/assets/config-link.json'
check "hidden folders are not copied" test ! -e outtree/.git
check "statement lists sub-folder files by relative path, in and out" $PY - <<EOF
import json, hashlib, os
st = json.load(open("outtree.intoto.json"))
h = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
def walk(top):
    out = {}
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for f in files:
            if not f.startswith("."):
                rel = os.path.relpath(os.path.join(d, f), top)
                out[rel] = h(os.path.join(top, rel))
    return out
subj = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
assert subj == walk("outtree"), subj
deps = {d["name"]: d["digest"]["sha256"] for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]}
assert deps == walk("tree"), deps
assert "tokenizer/extra/vocab.txt" in deps and "assets/a b.txt" in subj
lines = ["%s %d %s\n" % (subj[k], os.path.getsize("outtree/" + k), k) for k in sorted(subj, key=lambda k: k.encode())]
assert hashlib.sha256("".join(lines).encode()).hexdigest() == open("treedigest").read().split()[0]
EOF
cp -r one b_dirlink && ln -s .. b_dirlink/up
bad "a link to a folder is refused, naming it" "b_dirlink/up: a link to a folder is not followed" b_dirlink
cp -r one b_fifo && mkdir b_fifo/sub && mkfifo b_fifo/sub/pipe
bad "a FIFO is refused, naming it" "b_fifo/sub/pipe: not a regular file or folder" b_fifo
cp -r one b_ctrl && printf x >"b_ctrl/$(printf 'a\tb')"
bad "a name with a control character is refused" "a file name with control characters" b_ctrl
# A pulled checkpoint: inputs that are hard links to store blobs are named by
# the blob's sha256 (not hashed) while their inode is unchanged since the store
# checked them; an edit in place, --rehash or a lost stamp means hashing.
FGPACK_HOME="$WORK/store"
export FGPACK_HOME
printf '{"name": "b", "env": {"WEIGHTS_BUCKET": "file://%s/src", "LOCAL_MODEL_DIR": "/m"}}\n' "$WORK" >pullman.json
check "pull the checkpoint (file://) into a store, hard-linked into a folder" "$FGPACK" pull pullman.json --lock pull.lock --into pulled
check "the pulled shards are links to store blobs" sh -c 'test "$(stat -c %h pulled/m/model-00001-of-00002.safetensors)" -ge 2'
# provenance FOLDER STATEMENT WANT: every input by its true sha256; WANT maps
# names to the expected "fgpack_digest" annotation (default "read")
provenance() {
	$PY - "$@" <<'EOF'
import json, hashlib, os, sys
top, stp, want = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
st = json.load(open(stp))
deps = st["predicate"]["buildDefinition"]["resolvedDependencies"]
h = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
for d in deps:
    assert d["digest"]["sha256"] == h(os.path.join(top, d["name"])), d
    src = d["annotations"]["fgpack_digest"]
    assert src == want.get(d["name"], "read"), (d["name"], src)
assert sorted(d["name"] for d in deps) == sorted(os.listdir(top))
EOF
}
S1=model-00001-of-00002.safetensors
S2=model-00002-of-00002.safetensors
STORED="{\"$S1\": \"store\", \"$S2\": \"store\", \"config.json\": \"store\", \"model.safetensors.index.json\": \"store\"}"
check "bake the pulled checkpoint" sh -c "'$FGPACK' bake int4 pulled/m outp -j 2 >digestp 2>logp"
check_grep "it says how many inputs the store named" 'named by their store blob \(not hashed\): 4 files' logp
check "the same bytes as the bake of the plain folder" diff -r out1 outp
check "statement: true digests; shards, config and index named by the store" provenance pulled/m outp.intoto.json "$STORED"
check "--rehash hashes every input" sh -c "'$FGPACK' bake int4 pulled/m outr --rehash >/dev/null 2>&1"
check "statement after --rehash: every input read" provenance pulled/m outr.intoto.json '{}'
check "--rehash gives the same bytes" diff -r out1 outr
rm -f "$FGPACK_HOME"/stamps/*
check "with the stamps lost, a bake hashes (and notes the stamps again)" sh -c "'$FGPACK' bake int4 pulled/m outl >/dev/null 2>&1"
check "statement without stamps: every input read" provenance pulled/m outl.intoto.json '{}'
check "the next bake is named by the store again" sh -c "'$FGPACK' bake int4 pulled/m outn >/dev/null 2>&1"
check "statement of the next bake: shards named by the store" provenance pulled/m outn.intoto.json "$STORED"
# edited in place after the pull (same size): one mantissa bit of the last bf16 value
chmod u+w "pulled/m/$S2"
$PY -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(-2, 2); b = f.read(1); f.seek(-2, 2); f.write(bytes([b[0] ^ 1])); f.close()" "pulled/m/$S2"
check "bake after an in-place edit" sh -c "'$FGPACK' bake int4 pulled/m oute >digeste 2>/dev/null"
check "the edited shard is hashed again, with its new digest" provenance pulled/m oute.intoto.json \
	"{\"$S1\": \"store\", \"config.json\": \"store\", \"model.safetensors.index.json\": \"store\"}"
check "and the output follows the edit" sh -c '! cmp -s digestp digeste'
check_exit "--store naming no store is refused" 1 "$FGPACK" bake int4 src outs --store "$WORK/nostore"
# The plain (unpulled) checkpoint with the store: a first bake hashes its
# inputs and keeps their seen records (each file last changed 2 s or more
# before); the next names them by those records, until one changes
newest=$(find src -type f -printf '%C@\n' | sort -n | tail -1 | cut -d. -f1)
while [ $(($(date +%s) - newest)) -lt 3 ]; do sleep 0.2; done
SEEN="{\"$S1\": \"seen\", \"$S2\": \"seen\", \"config.json\": \"seen\", \"model.safetensors.index.json\": \"seen\"}"
check "seen: a bake of the plain folder with the store hashes every input" sh -c "'$FGPACK' bake int4 src outsn1 >/dev/null 2>&1"
check "seen:   statement: every input read" provenance src outsn1.intoto.json '{}'
check "seen: the next bake names its inputs by their seen records" sh -c "'$FGPACK' bake int4 src outsn2 >/dev/null 2>logsn2"
check_grep "seen:   and says how many" 'inputs hashed before and unchanged since \(not hashed\): 4 files' logsn2
check "seen:   statement: true digests, annotated seen" provenance src outsn2.intoto.json "$SEEN"
check "seen:   the same bytes" diff -r out1 outsn2
check "seen: --rehash reads them" sh -c "'$FGPACK' bake int4 src outsn3 --rehash >/dev/null 2>&1"
check "seen:   statement: every input read" provenance src outsn3.intoto.json '{}'
cp "src/$S2" shard.tmp && $PY -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(-2, 2); b = f.read(1); f.seek(-2, 2); f.write(bytes([b[0] ^ 1])); f.close()" "src/$S2"
check "seen: a shard edited in place is read again, with its new digest" sh -c "'$FGPACK' bake int4 src outsn4 >/dev/null 2>&1"
check "seen:   statement" provenance src outsn4.intoto.json "{\"$S1\": \"seen\", \"config.json\": \"seen\", \"model.safetensors.index.json\": \"seen\"}"
cat shard.tmp >"src/$S2" && rm -f shard.tmp
# the output shards, hashed as the bake wrote them, get seen records at once:
# a pack right after the bake names them without hashing them again
check "seen: bake with the store" sh -c "'$FGPACK' bake int4 src outw >/dev/null 2>&1"
check "seen:   a pack of the fresh output names its shard by its record" sh -c "'$FGPACK' pack --model outw --no-golden -o w1.fgb 2>w1.err >/dev/null && grep -q '^fgpack pack: 1 file ([0-9.]* GB) hashed before' w1.err"
check "seen:   the same bundle as with --rehash, and it verifies" sh -c "'$FGPACK' pack --model outw --no-golden --rehash -o w2.fgb >/dev/null 2>&1 && cmp w1.fgb w2.fgb && '$FGPACK' verify w1.fgb --no-replay --summary - >/dev/null"
unset FGPACK_HOME
check_exit "an existing non-empty output folder is refused" 1 "$FGPACK" bake int4 src out1
check_exit "bad --group is a usage error" 2 "$FGPACK" bake int4 src outx --group 48
check_exit "--help" 0 "$FGPACK" bake int4 --help
# a checkpoint transformers made whose widths no group fits (attention
# biases; per_layer_projection 8 wide): refused, or baked with --ignore-misfits
V="$TOP/tests/fixtures/oracle/variants/attn-bias"
check_exit "a width no group fits is refused" 1 "$FGPACK" bake int4 "$V" outm --group 32
check_grep "naming --ignore-misfits" 'input width 48 is not a multiple of the group size 32 \(no --group fits every Linear of this checkpoint; --ignore-misfits' "$WORK/.out"
check "--ignore-misfits -j2 bakes it" sh -c "'$FGPACK' bake int4 '$V' outm --group 32 --ignore-misfits -j2 >/dev/null 2>logm"
check_grep "and says how many Linears it left" '^  \(of them 26 Linears whose width the group does not divide\);' logm
check "-j1 gives the same bytes" sh -c "'$FGPACK' bake int4 '$V' outm1 --group 32 --ignore-misfits -j 1 >/dev/null 2>&1 && diff -r outm outm1"
check_grep "each Linear left is ignored by name" '"re:\.\*\\\\\.layers\\\\\.0\\\\\.per_layer_projection\$"' outm/config.json

# pack --model OUT takes OUT.intoto.json along when its subjects are OUT's
# files as they are now, and audit shows the model derived from the bake's
# inputs; a statement that no longer describes its folder stays out
check "pack --model out1: the bake's statement is attached" sh -c "'$FGPACK' pack --model out1 --no-golden -o p1.fgb >/dev/null 2>packlog1"
check_grep "... pack says so" '^fgpack pack: attached out1.intoto.json, the provenance of components/model \([0-9]* files\)$' packlog1
check "... under attestations/" sh -c "zstd -dc p1.fgb | tar tf - | grep -qx attestations/out1.intoto.json"
check "audit: the model derived from the bake's inputs, with its parameters (not the bundle)" sh -c "'$FGPACK' audit p1.fgb --json >a1.json && $PY - <<'PY'
import json
d = json.load(open('a1.json'))
rows = {c['key']: c for c in d['components']}
m = rows['model']['derived_from']
names = sorted(i['name'] for i in m['inputs'])
assert any(n.endswith('.safetensors') for n in names), names
assert m['parameters']['group_size'] == 128, m
assert rows['bundle'].get('derived_from') is None, rows['bundle']
PY"
cp -r out1 outs1 && cp out1.intoto.json outs1.intoto.json && printf ' ' >>outs1/config.json
check "a folder changed since its bake: packed without the statement" sh -c "'$FGPACK' pack --model outs1 --no-golden -o ps.fgb >/dev/null 2>packlogs && ! zstd -dc ps.fgb | tar tf - | grep -q '^attestations/'"
check_grep "... with a warning naming the file" '^fgpack pack: warning: outs1.intoto.json does not describe outs1 now \(config.json: sha256 differs\): not attached$' packlogs
cp -r out1 outa
check "--attest of the statement under another name: audit still finds the model by the subjects' digests" sh -c "'$FGPACK' pack --model outa --no-golden --attest out1.intoto.json -o pa.fgb >/dev/null 2>&1 && '$FGPACK' audit pa.fgb --json >aa.json && $PY -c \"import json; d = json.load(open('aa.json')); r = {c['key']: c for c in d['components']}; assert r['model'].get('derived_from') and r['bundle'].get('derived_from') is None, r\""
# Shards in a sub-folder of the checkpoint, named by the index with their
# folder ("w/model-00001-of-00002.safetensors"): transformers joins each
# weight_map value to the folder, and so does fg_st_open; the bake must take
# them as the checkpoint's shards (not "not among the input files"), bake the
# same tensors, and not copy them as other files. A top-level .safetensors of
# the same base name that the index does not name stays left out.
mkdir -p srcsub/w
cp src/config.json srcsub/
for f in src/model-*.safetensors; do cp "$f" srcsub/w/; done
cp src/model-00001-of-00002.safetensors srcsub/model-00001-of-00002.safetensors
sed 's|"model-0000|"w/model-0000|g' src/model.safetensors.index.json >srcsub/model.safetensors.index.json
check "shards in a sub-folder named by the index: bake -j 2" sh -c "'$FGPACK' bake int4 srcsub outsub -j 2 >/dev/null 2>errsub"
check "... the same tensors as from the top-level shards" cmp out1/model.safetensors outsub/model.safetensors
check "... the shards are not copied, the stray top-level one left out" sh -c "test ! -e outsub/w && test ! -e outsub/model-00001-of-00002.safetensors"
check "... the statement names the inputs by their paths under SRC" sh -c "grep -q 'w/model-00001-of-00002.safetensors' outsub.intoto.json && ! grep -q '\"model-00001-of-00002.safetensors' outsub.intoto.json"
finish
