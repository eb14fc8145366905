#!/bin/sh
# multimodal.sh - the whole pipeline on Gemma4ForConditionalGeneration
# checkpoints that transformers 5.17 saved itself (tests/oracle/variants_mm.py:
# config.json with text_config, vision_config, audio_config; tensors
# model.language_model.*, model.vision_tower.*, model.audio_tower.*,
# model.embed_vision.*, model.embed_audio.*, 0-d +-inf clip buffers in the
# audio tower; mm-e4b-sharded through model.safetensors.index.json):
# fgpack run gives transformers' greedy tokens; bake int4 quantizes exactly the
# text decoder's Linears (bit-identical to tests/int4/int4ref.py), passes every
# tower and embedder tensor through byte for byte, ignores every Linear it
# leaves unquantized for vLLM, keeps the rest of config.json, and the engine
# runs the result as it runs the numpy-dequantized F32 copy; prune-head cuts
# tied and untied heads, bf16 and INT4; pack and verify the sharded set.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-numpy (int4ref.py needs it)
[ -x "$PY" ] || PY=python3
V="$TOP/tests/fixtures/oracle/variants"
cd "$WORK" || exit 1

cat >mm.py <<'EOF'
import json, os, re, subprocess, sys
sys.path.insert(0, os.environ["TOP"] + "/tests/int4")
import numpy as np
import int4ref as r

def greedy(fg, d, prompt, n):
    p = subprocess.run([fg, "run", "--model", d, "--ids", ",".join(map(str, prompt)), "-n", str(n),
                        "--ignore-eos", "--json", "-j", "1"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["generated_ids"]

def prompts(oracle_dir):
    return json.load(open(oracle_dir + "/oracle.json"))["prompts"]

cmd, a = sys.argv[1], sys.argv[2:]
if cmd == "oracle":      # FGPACK DIR: transformers' greedy tokens for every prompt
    for p in prompts(a[1]):
        g = greedy(a[0], a[1], p["prompt"], len(p["generated"]))
        assert g == p["generated"], (p["prompt"], g, p["generated"])
elif cmd == "pair":      # FGPACK A B ORACLE_DIR: A's greedy tokens are B's, every prompt
    for p in prompts(a[3]):
        ga, gb = greedy(a[0], a[1], p["prompt"], 16), greedy(a[0], a[2], p["prompt"], 16)
        assert ga == gb, (p["prompt"], ga, gb)
    print("identical on %d prompts" % len(prompts(a[3])))
elif cmd == "kept":      # FGPACK DIR KEEPSET ORACLE_DIR: greedy tokens all in the keepset
    keep = set(json.load(open(a[2]))["keep_ids"])
    for p in prompts(a[3]):
        g = greedy(a[0], a[1], p["prompt"], 16)
        assert len(g) == 16 and set(g) <= keep, (p["prompt"], g)
elif cmd == "dequant":   # BAKED OUT GROUP: the INT4 Linears widened to F32, exactly q * s
    S, ts = r.ckpt_read(a[0]), []
    for k, (dt, shp, arr) in S.items():
        if k.endswith(".weight_packed"):
            b = k[:-len("_packed")]
            deq, _ = r.dequantize(np.asarray(arr), np.asarray(S[b + "_scale"][2]), int(a[2]))
            ts.append((b, "F32", deq.shape, deq.astype(np.float32)))
        elif not k.endswith((".weight_scale", ".weight_shape")):
            ts.append((k, dt, shp, np.asarray(arr)))
    os.makedirs(a[1])
    r.st_write(a[1] + "/model.safetensors", ts)
    cfg = json.load(open(a[0] + "/config.json"))
    del cfg["quantization_config"]
    json.dump(cfg, open(a[1] + "/config.json", "w"))
elif cmd == "ignore":    # SRC BAKED: the quantization_config vLLM reads; the rest of config.json kept
    src, out = json.load(open(a[0] + "/config.json")), json.load(open(a[1] + "/config.json"))
    qc = out.pop("quantization_config")
    assert out == src, "config.json changed beyond quantization_config"
    assert "vision_config" in out and "audio_config" in out and out["image_token_id"] == 250
    ign = qc["ignore"]
    pats = [re.compile(x[3:]) for x in ign if x.startswith("re:")]
    ignored = lambda m: m in ign or any(p.fullmatch(m) for p in pats)
    O, nlin, towers = r.ckpt_read(a[1]), 0, 0
    for k, (dt, shp, _) in O.items():
        if k.endswith(".weight_packed"):
            assert not ignored(k[:-len(".weight_packed")]), "quantized but ignored: " + k
            assert k.startswith("model.language_model.") or k.startswith("lm_head."), k
        elif k.endswith(".weight") and len(shp) == 2 and not k.endswith(("embed_tokens.weight",
                                                                          "embed_tokens_per_layer.weight")):
            # a Linear left in bf16: vLLM must be told, or it expects INT4 there
            assert ignored(k[:-len(".weight")]), "unquantized Linear not in ignore: " + k
            nlin += 1
        towers += k.startswith(("model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                                "model.embed_audio."))
    assert nlin > 10 and towers > 100, (nlin, towers)
    print("%d unquantized Linears, all ignored; %d tower/embedder tensors" % (nlin, towers))
elif cmd == "same":      # A B: the same tensors (names, dtypes, shapes, bytes), whatever the files
    A, B = r.ckpt_read(a[0]), r.ckpt_read(a[1])
    assert sorted(A) == sorted(B), set(A) ^ set(B)
    for k in A:
        assert A[k][:2] == B[k][:2] and np.asarray(A[k][2]).tobytes() == np.asarray(B[k][2]).tobytes(), k
elif cmd == "keepset":   # OUT: every third id (and 1, 2) of the tiny models' 256
    ids = sorted(set(range(0, 256, 3)) | {1, 2})
    json.dump({"keep_ids": ids, "pruned_vocab_K": len(ids), "full_vocab": 256}, open(a[0], "w"))
EOF
export TOP
mm() { $PY "$WORK/mm.py" "$@"; }

for m in mm-e4b mm-e4b-sharded mm-tie-top mm-tie-text; do
	check "run $m: greedy tokens = transformers' on every prompt" mm oracle "$FGPACK" "$V/$m"
done

# INT4: the multimodal checkpoint, single file and sharded
check "bake int4 mm-e4b" sh -c "'$FGPACK' bake int4 '$V/mm-e4b' b32 --group 32 -j 2 >/dev/null 2>&1"
check "bake int4 mm-e4b-sharded (through the index)" sh -c "'$FGPACK' bake int4 '$V/mm-e4b-sharded' b32s --group 32 -j 2 >/dev/null 2>&1"
check "every tensor accounted for: text Linears = numpy reference, towers unchanged" $PY "$TOP/tests/int4/int4ref.py" check "$V/mm-e4b" b32 --group 32
check "sharded input: the same" $PY "$TOP/tests/int4/int4ref.py" check "$V/mm-e4b-sharded" b32s --group 32
check "sharded and single-file input bake to the same tensors" mm same b32 b32s
check "quantization_config ignores every Linear left in bf16; config.json otherwise kept" mm ignore "$V/mm-e4b" b32
check "generation_config.json copied" cmp "$V/mm-e4b/generation_config.json" b32/generation_config.json
check "the F32 dequantized copy (numpy)" mm dequant b32 d32 32
check "engine on the INT4 bake: greedy = the F32 dequantized copy's" mm pair "$FGPACK" b32 d32 "$V/mm-e4b"
# (mm-tie-top's MLP width 48 takes no INT4 group: its untied head is cut by prune-head below)
check "bake int4 --head int4 mm-e4b (the head from the tied embedding)" sh -c "'$FGPACK' bake int4 '$V/mm-e4b' h4 --group 32 --head int4 >/dev/null 2>&1"
check "its INT4 lm_head and every other tensor match the reference" $PY "$TOP/tests/int4/int4ref.py" check "$V/mm-e4b" h4 --group 32 --head int4
check "the F32 dequantized copy of it" mm dequant h4 dh4 32
check "engine on it: greedy = the F32 copy's" mm pair "$FGPACK" h4 dh4 "$V/mm-e4b"

# prune-head: tied (from the embedding), untied, sharded, INT4
check "a keepset of 88 ids" mm keepset k.json
for m in mm-e4b mm-tie-top mm-tie-text mm-e4b-sharded; do
	check "prune-head $m" sh -c "'$FGPACK' bake prune-head '$V/$m' --keepset k.json p-$m >/dev/null 2>&1"
	check "engine on pruned $m: greedy tokens all kept" mm kept "$FGPACK" "p-$m" k.json "$V/$m"
done
check "pruned mm-e4b: the sharded source gives the same tensors" mm same p-mm-e4b p-mm-e4b-sharded
check "prune-head --head int4 of the INT4 bake" sh -c "'$FGPACK' bake prune-head b32 --keepset k.json pi4 --head int4 >/dev/null 2>&1"
check "engine on it: greedy tokens all kept" mm kept "$FGPACK" pi4 k.json "$V/mm-e4b"

# pack + verify the sharded multimodal set
check "pack mm-e4b-sharded" sh -c "'$FGPACK' pack --model '$V/mm-e4b-sharded' --prompts 2 --golden-tokens 8 -o mm.fgb >mm.id 2>pack.err"
check "the bundle holds every shard and the index" sh -c "zstd -dc mm.fgb | tar tf - >list && grep -q components/model/model.safetensors.index.json list && [ \$(grep -c 'components/model/model-000..-of-00010.safetensors' list) -eq 10 ]"
check_exit "verify it: exit 0" 0 "$FGPACK" verify mm.fgb --id "$(cat mm.id)" --max-new 8 --warmup 2 --summary s.json
check_grep "verify: the golden transcript replays at the logits level" '"level": "logits"' s.json
finish
