#!/bin/sh
# prune_head.sh - `fgpack bake prune-head` on copies of tiny Gemma 4 models
# (tests/fixtures/oracle/variants: tied and untied heads; INT4 heads written
# here with Python): the pruned head
# holds exactly the keepset's rows of the source, every other tensor is
# unchanged, config.json records the keepset and unties the head, the same
# inputs give the same bytes, and mismatched keepsets and already-pruned
# models are refused. Safetensors are written and read with the helpers of
# tests/int4/int4ref.py (st_write, st_read), the INT4 bake's independent side.
. "$(dirname "$0")/../lib.sh"
export PYTHONPATH="$TOP/tests/int4${PYTHONPATH:+:$PYTHONPATH}"
PY=/usr/bin/python3 # Debian's, with python3-numpy (int4ref.py needs it)
[ -x "$PY" ] || PY=python3

mk() { # DIR FIXTURE: a copy of a tiny Gemma 4 model transformers saved
	# (tests/fixtures/oracle/variants/FIXTURE, BF16, "model.*" names: prune-head
	# refuses a checkpoint the engine would refuse) with a placeholder tokenizer
	mkdir -p "$1" && cp "$TOP/tests/fixtures/oracle/variants/$2/config.json" \
		"$TOP/tests/fixtures/oracle/variants/$2/model.safetensors" "$1/" &&
		printf '{"placeholder": true}\n' >"$1/tokenizer.json"
}
ks() { # FILE FULL_VOCAB IDS...
	f=$1
	v=$2
	shift 2
	python3 -c 'import json,sys; ids=[int(x) for x in sys.argv[3:]]; json.dump({"keep_ids": ids, "pruned_vocab_K": len(ids), "full_vocab": int(sys.argv[2])}, open(sys.argv[1], "w"))' "$f" "$v" "$@"
}
verify() { # SRC OUT HEAD_SOURCE_TENSOR
	"$PY" - "$@" <<'EOF'
import json, struct, sys
from int4ref import st_read
def load(path):  # name -> (dtype, shape, bytes)
    return {k: (dt, list(shape), a.tobytes()) for k, (dt, shape, a) in st_read(path).items()}
src, out, hs = sys.argv[1], sys.argv[2], sys.argv[3]
a, b = load(src + "/model.safetensors"), load(out + "/model.safetensors")
cfg = json.load(open(out + "/config.json"))
ids = json.load(open(out + "/keepset.json"))["keep_ids"]
dt, shape, kb = b["lm_head.keep_ids"]
assert dt == "I32" and list(struct.unpack("<%di" % len(ids), kb)) == ids, "keep_ids tensor"
V, H = a[hs][1]
row = H * 2
dt, shape, w = b["lm_head.weight"]
assert dt == "BF16" and shape == [len(ids), H], shape
assert w == b"".join(a[hs][2][i * row:(i + 1) * row] for i in ids), "rows are the source rows"
for k in a:
    if k != "lm_head.weight":
        assert a[k] == b[k], k
m = cfg["lm_head_keepset"]
assert m["pruned_vocab_K"] == len(ids) and m["full_vocab"] == V and m["head_source"] == hs
assert cfg["tie_word_embeddings"] is False and cfg["vocab_size"] == V
assert open(out + "/tokenizer.json").read() == '{"placeholder": true}\n'
st = json.load(open(out + ".intoto.json"))
names = {s["name"] for s in st["subject"]}
assert {"model.safetensors", "config.json", "keepset.json", "tokenizer.json"} <= names, names
EOF
}

mk "$WORK/tied" rope-linear    # tied, 256 x 32
mk "$WORK/untied" nople-untied # lm_head.weight, 256 x 64
ks "$WORK/k.json" 256 0 1 2 5 9 33 63 255
check "prune a tied head" "$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k.json" "$WORK/out1"
check "rows from the tied embedding, all else unchanged, config records the keepset" \
	verify "$WORK/tied" "$WORK/out1" model.embed_tokens.weight
check "prune an untied head" "$FGPACK" bake prune-head "$WORK/untied" --keepset "$WORK/k.json" "$WORK/out2"
check "rows from lm_head.weight" verify "$WORK/untied" "$WORK/out2" lm_head.weight
check "again into another folder" "$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k.json" "$WORK/out3"
check "same inputs, same bytes" cmp "$WORK/out1/model.safetensors" "$WORK/out3/model.safetensors"
check "same config bytes" cmp "$WORK/out1/config.json" "$WORK/out3/config.json"
# the summary is one line of printable text whatever the names hold: an
# OUT_DIR with ESC and a C1 CSI (U+009B) in its name is shown with '?'
esc=$(printf '\033[31m\302\233x')
check "prune into a folder whose name holds ESC and a C1" sh -c "'$FGPACK' bake prune-head '$WORK/tied' --keepset '$WORK/k.json' '$WORK/out$esc' 2>'$WORK/outesc.err'"
check "  the summary holds no ESC or C1 byte" sh -c "! LC_ALL=C grep -q \"\$(printf '\\033\\|\\302\\233')\" '$WORK/outesc.err'"
check_grep "  and shows them as '?'" "^prune-head: .* -> $WORK/out\\?\\[31m\\?x; provenance " "$WORK/outesc.err"

# the same model pulled into a store and placed by pull --into (hard links):
# its tensor file is named by its store blob, not hashed again; --rehash and
# the plain folder give the same bytes and the same input digests
export FGPACK_HOME="$WORK/store"
printf '{"name": "p", "env": {"WEIGHTS_BUCKET": "file://%s/tied", "LOCAL_MODEL_DIR": "/m"}}\n' "$WORK" >"$WORK/p.json"
check "pull the model into a store (--into)" "$FGPACK" pull "$WORK/p.json" --lock "$WORK/p.lock" --into "$WORK/placed"
check "prune the placed model" sh -c "'$FGPACK' bake prune-head '$WORK/placed/m' --keepset '$WORK/k.json' '$WORK/outp' 2>'$WORK/outp.err'"
check_grep "  says the tensor file was named by its store blob" '^prune-head: 1 tensor file \([0-9.]+ GB\) named by their store blob' "$WORK/outp.err"
check "  the same bytes as from the plain folder" cmp "$WORK/out1/model.safetensors" "$WORK/outp/model.safetensors"
stmt_deps() { # STATEMENT: "name sha256 how" per dependency, sorted
	python3 -c 'import json,sys
st = json.load(open(sys.argv[1]))
for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]:
    print(d["name"].split("/")[-1], d["digest"]["sha256"], (d.get("annotations") or {}).get("fgpack_digest"))' "$1" | sort
}
stmt_deps "$WORK/outp.intoto.json" >"$WORK/deps_p"
check_grep "  the statement says the tensor file's digest came from the store" '^model.safetensors [0-9a-f]{64} store$' "$WORK/deps_p"
check "prune the placed model with --rehash" sh -c "'$FGPACK' bake prune-head '$WORK/placed/m' --keepset '$WORK/k.json' '$WORK/outr' --rehash 2>'$WORK/outr.err'"
stmt_deps "$WORK/outr.intoto.json" >"$WORK/deps_r"
check "  every input read, none named by the store" sh -c "! grep -q ' store\$' '$WORK/deps_r' && ! grep -q 'named by' '$WORK/outr.err'"
check "  the same digests either way" sh -c "cut -d' ' -f1-2 '$WORK/deps_p' >'$WORK/a' && cut -d' ' -f1-2 '$WORK/deps_r' >'$WORK/b' && cmp '$WORK/a' '$WORK/b'"
check_exit "--store of a folder that is no store is refused" 1 sh -c "'$FGPACK' bake prune-head '$WORK/placed/m' --keepset '$WORK/k.json' '$WORK/outn' --store '$WORK/tied' 2>'$WORK/outn.err'"
check_grep "  in one line naming it" "^fgpack bake prune-head: --store: $WORK/tied: not an fgpack store \\(no blobs/sha256\\)$" "$WORK/outn.err"
check "  before writing anything" sh -c "test ! -e '$WORK/outn' -a ! -e '$WORK/outn.intoto.json' && ! ls -a '$WORK' | grep -q '^\.outn\.fgpack-tmp'"
# the plain folder with the store: the first prune hashes its inputs and
# keeps their seen records (each last changed 2 s or more before), the next
# names them by those
newest=$(find "$WORK/tied" "$WORK/k.json" -type f -printf '%C@\n' | sort -n | tail -1 | cut -d. -f1)
while [ $(($(date +%s) - newest)) -lt 3 ]; do sleep 0.2; done
check "seen: prune the plain folder with the store" sh -c "'$FGPACK' bake prune-head '$WORK/tied' --keepset '$WORK/k.json' '$WORK/outs1' 2>'$WORK/outs1.err'"
check "seen: again: the tensor file named by its seen record" sh -c "'$FGPACK' bake prune-head '$WORK/tied' --keepset '$WORK/k.json' '$WORK/outs2' 2>'$WORK/outs2.err' && ! grep -q 'hashed before' '$WORK/outs1.err'"
check_grep "seen:   says so" '^prune-head: 1 tensor file \([0-9.]+ GB\) hashed before and unchanged since' "$WORK/outs2.err"
stmt_deps "$WORK/outs2.intoto.json" >"$WORK/deps_s"
check_grep "seen:   the statement says so for the tensor file" '^model.safetensors [0-9a-f]{64} seen$' "$WORK/deps_s"
stmt_deps "$WORK/outs1.intoto.json" >"$WORK/deps_s1"
check "seen:   the same digests and bytes as the prune that read them" sh -c "cut -d' ' -f1-2 '$WORK/deps_s' >'$WORK/a' && cut -d' ' -f1-2 '$WORK/deps_s1' >'$WORK/b' && cmp '$WORK/a' '$WORK/b' && cmp '$WORK/outs1/model.safetensors' '$WORK/outs2/model.safetensors'"
check "seen: a pack right after a prune names its output shard by the record the prune kept" sh -c "'$FGPACK' pack --model '$WORK/outs2' --no-golden -o '$WORK/ps1.fgb' 2>'$WORK/ps1.err' >/dev/null && grep -q '^fgpack pack: 1 file ([0-9.]* GB) hashed before' '$WORK/ps1.err' && '$FGPACK' pack --model '$WORK/outs2' --no-golden --rehash -o '$WORK/ps2.fgb' >/dev/null 2>&1 && cmp '$WORK/ps1.fgb' '$WORK/ps2.fgb'"
unset FGPACK_HOME

ks "$WORK/k100.json" 100 0 1 2
"$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k100.json" "$WORK/bad1" >"$WORK/e1" 2>&1
check_grep "a keepset for another vocabulary size is refused" 'keepset is for a 100-row head' "$WORK/e1"
check "nothing written on failure" sh -c "test ! -e '$WORK/bad1' && ! ls -a '$WORK' | grep -q '^\.bad1\.fgpack-tmp'"
"$FGPACK" bake prune-head "$WORK/out1" --keepset "$WORK/k.json" "$WORK/bad2" >"$WORK/e2" 2>&1
check_grep "an already pruned model is refused" 'already pruned' "$WORK/e2"
"$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k.json" "$WORK/out1" >"$WORK/e3" 2>&1
check_grep "an existing output folder is refused" 'already exists' "$WORK/e3"
python3 -c 'import json; json.dump({"keep_ids": [3, 1], "full_vocab": 256}, open("'"$WORK"'/uns.json", "w"))'
"$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/uns.json" "$WORK/bad4" >"$WORK/e4" 2>&1
check_grep "an unsorted keepset is refused" 'sorted' "$WORK/e4"
check_exit "an unknown --head is a usage error" 2 "$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k.json" "$WORK/bad5" --head fp8

# --head int4: needs a model that fgpack bake int4 made (a pack-quantized config)
"$FGPACK" bake prune-head "$WORK/tied" --keepset "$WORK/k.json" "$WORK/bad6" --head int4 >"$WORK/e6" 2>&1
check_grep "--head int4 on a model without a quantization_config is refused" 'pack-quantized' "$WORK/e6"
cp -r "$WORK/tied" "$WORK/q"
python3 -c '
import json, sys
p = sys.argv[1] + "/config.json"
c = json.load(open(p))
c["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 8,
        "symmetric": True, "strategy": "group", "type": "int"}}},
    "ignore": ["lm_head", "re:.*vision_tower.*"]}
json.dump(c, open(p, "w"))' "$WORK/q"
check "prune and quantize the head (--head int4)" "$FGPACK" bake prune-head "$WORK/q" --keepset "$WORK/k.json" "$WORK/q4" --head int4
check "INT4 head: the kept rows, quantized (|w - q*s| <= 0.55 s), config updated" "$PY" - "$WORK/q" "$WORK/q4" <<'EOF'
import json, struct, sys
from int4ref import st_read
def load(path):  # name -> (dtype, shape, bytes)
    return {k: (dt, list(shape), a.tobytes()) for k, (dt, shape, a) in st_read(path).items()}
def bf(b):
    return [struct.unpack("<f", b"\0\0" + b[i:i + 2])[0] for i in range(0, len(b), 2)]
a, o = load(sys.argv[1] + "/model.safetensors"), load(sys.argv[2] + "/model.safetensors")
cfg = json.load(open(sys.argv[2] + "/config.json"))
ids = json.load(open(sys.argv[2] + "/keepset.json"))["keep_ids"]
K, H = len(ids), a["model.embed_tokens.weight"][1][1]
assert "lm_head.weight" not in o
assert o["lm_head.weight_packed"][0] == "I32" and o["lm_head.weight_packed"][1] == [K, H // 8]
assert o["lm_head.weight_scale"][0] == "BF16" and o["lm_head.weight_scale"][1] == [K, H // 8]
assert struct.unpack("<2q", o["lm_head.weight_shape"][2]) == (K, H)
w = bf(a["model.embed_tokens.weight"][2])
sc = bf(o["lm_head.weight_scale"][2])
words = struct.unpack("<%dI" % (K * H // 8), o["lm_head.weight_packed"][2])
for r, tok in enumerate(ids):
    for c in range(H):
        q = ((words[r * H // 8 + c // 8] >> (4 * (c % 8))) & 15) - 8
        s = sc[r * (H // 8) + c // 8]
        assert abs(w[tok * H + c] - q * s) <= s * 0.55 + 1e-6, (r, c)  # s is rounded to bf16
assert "lm_head" not in cfg["quantization_config"]["ignore"]
assert cfg["lm_head_keepset"]["head_format"] == "int4" and cfg["tie_word_embeddings"] is False
EOF
# an INT4 head that is already there is cut, not re-quantized
"$PY" - "$WORK/q" "$WORK/i4" <<'EOF'
import random, shutil, struct, sys
from int4ref import st_read, st_write
src, d = sys.argv[1], sys.argv[2]
shutil.copytree(src, d)
t = {k: (dt, list(shape), a.tobytes()) for k, (dt, shape, a) in st_read(d + "/model.safetensors").items()}
V, H = t["model.embed_tokens.weight"][1]
rng = random.Random(3)
t["lm_head.weight_packed"] = ("I32", [V, H // 8], bytes(rng.randrange(256) for _ in range(V * H // 2)))
t["lm_head.weight_scale"] = ("BF16", [V, H // 8], bytes(rng.randrange(256) for _ in range(V * H // 4)))
t["lm_head.weight_shape"] = ("I64", [2], struct.pack("<2q", V, H))
st_write(d + "/model.safetensors", [(k,) + t[k] for k in sorted(t)])
EOF
check "prune a model whose head is already INT4" "$FGPACK" bake prune-head "$WORK/i4" --keepset "$WORK/k.json" "$WORK/i4p"
check "INT4 head: packed rows and scales cut, shape [K, H]" "$PY" - "$WORK/i4" "$WORK/i4p" <<'EOF'
import json, struct, sys
from int4ref import st_read
def load(path):  # name -> (dtype, shape, bytes)
    return {k: (dt, list(shape), a.tobytes()) for k, (dt, shape, a) in st_read(path).items()}
a, o = load(sys.argv[1] + "/model.safetensors"), load(sys.argv[2] + "/model.safetensors")
ids = json.load(open(sys.argv[2] + "/keepset.json"))["keep_ids"]
V, H = a["model.embed_tokens.weight"][1]
pr, sr = H // 2, H // 8 * 2
assert o["lm_head.weight_packed"][2] == b"".join(a["lm_head.weight_packed"][2][i * pr:(i + 1) * pr] for i in ids)
assert o["lm_head.weight_scale"][2] == b"".join(a["lm_head.weight_scale"][2][i * sr:(i + 1) * sr] for i in ids)
assert struct.unpack("<2q", o["lm_head.weight_shape"][2]) == (len(ids), H)
assert o["model.embed_tokens.weight"] == a["model.embed_tokens.weight"], "embedding unchanged"
EOF
# The one shard in a sub-folder, named so by the index (transformers joins each
# weight_map value to the folder): the statement names it by its path under
# MODEL_DIR, a file that exists there, not by its base name.
mkdir -p "$WORK/subsh/w"
cp "$WORK/tied/config.json" "$WORK/tied/tokenizer.json" "$WORK/subsh/"
cp "$WORK/tied/model.safetensors" "$WORK/subsh/w/a.safetensors"
"$PY" - "$WORK/subsh" <<'EOF'
import json, struct, sys
d = sys.argv[1]
b = open(d + "/w/a.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
json.dump({"metadata": {}, "weight_map": {k: "w/a.safetensors" for k in h if k != "__metadata__"}},
          open(d + "/model.safetensors.index.json", "w"))
EOF
check "prune a model whose shard the index puts in a sub-folder" "$FGPACK" bake prune-head "$WORK/subsh" --keepset "$WORK/k.json" "$WORK/outsub"
check "... the same tensors" cmp "$WORK/out1/model.safetensors" "$WORK/outsub/model.safetensors"
check "... the statement names the shard w/a.safetensors" sh -c "grep -q '\"w/a.safetensors\"' '$WORK/outsub.intoto.json' && ! grep -q '\"a.safetensors\"' '$WORK/outsub.intoto.json'"
finish
