#!/usr/bin/python3
"""int4ref.py - independent numpy side of `fgpack bake int4`'s tests and benchmark.

  make OUT [--shape tiny|e4b] [--layers N] [--shards N] [--seed S] [--special]
      writes a bf16 Gemma 4-shaped checkpoint with the real tensor names
      (model.language_model.*, vision/audio tower stand-ins), config.json,
      tokenizer/generation files; safetensors written here by hand.
  check SRC OUT [--group G] [--head keep|int4]
      reads both checkpoints with its own safetensors parser, requires every
      source tensor to be accounted for (quantized or byte-identical), and
      compares every packed word and scale with this file's own numpy
      quantizer, bit for bit; checks |dequant - w| stays within the bound.
  quant SRC OUT [--group G]
      the same quantizer, vectorised numpy, writing packed/scale arrays
      (the benchmark's comparison point).

The quantizer follows compressed-tensors on bf16 tensors: s = bf16(amax/7.5)
(2^-7 when 0), q = rint(clip(bf16(w/s), -8, 7)), nibble = q + 8.
"""
import json
import os
import re
import struct
import sys

import numpy as np

TARGET = re.compile(
    r"^model\.(language_model\.)?(per_layer_model_projection\.weight|layers\.\d+\.("
    r"self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj|per_layer_input_gate|per_layer_projection)\.weight)$")


# ---- bf16 helpers (uint16 arrays) ----

def f32_to_bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def bf16_to_f32(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


# ---- safetensors by hand ----

DT = {"BF16": (np.uint16, 2), "F32": (np.float32, 4), "I32": (np.int32, 4), "I64": (np.int64, 8),
      "U8": (np.uint8, 1), "F16": (np.float16, 2)}


def st_write(path, tensors, meta=None):
    """tensors: list of (name, dtype, shape, ndarray or bytes)."""
    hdr, off = {}, 0
    for name, dt, shape, data in tensors:
        n = int(np.prod(shape, dtype=np.int64)) * DT[dt][1]
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    if meta:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, dt, shape, data in tensors:
            if callable(data):  # generated only now, so memory holds one tensor
                data = data()
            b = data if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes()
            assert len(b) == int(np.prod(shape, dtype=np.int64)) * DT[dt][1], name
            f.write(b)


def st_read(path):
    """Returns {name: (dtype, shape, memoryview-backed ndarray)} via np.memmap."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + n
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        arr = mm[base + b:base + e].view(DT[v["dtype"]][0]).reshape(v["shape"]) if e > b else \
            np.zeros(v["shape"], dtype=DT[v["dtype"]][0])
        out[k] = (v["dtype"], tuple(v["shape"]), arr)
    return out


def ckpt_read(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
        else ["model.safetensors"]
    out = {}
    for fn in files:
        for k, v in st_read(os.path.join(d, fn)).items():
            assert k not in out, "duplicate " + k
            out[k] = v
    return out


# ---- the reference quantizer ----

def quantize(w16, group):
    """w16: uint16 [rows, cols] bf16 bits -> (packed int32 [rows, cols/8], scale uint16 [rows, cols/group])."""
    rows, cols = w16.shape
    f = bf16_to_f32(w16).reshape(rows, cols // group, group)
    if not np.isfinite(f).all():
        raise ValueError("non-finite weight")
    amax = np.abs(f).max(axis=2)
    sb = f32_to_bf16((amax / np.float32(7.5)).astype(np.float32))
    sb[sb == 0] = 0x3C00
    s = bf16_to_f32(sb)
    v = bf16_to_f32(f32_to_bf16((f / s[:, :, None]).astype(np.float32)))
    q = np.rint(np.clip(v, np.float32(-8), np.float32(7))).astype(np.int32)
    nib = (q + 8).astype(np.uint32).reshape(rows, cols // 8, 8)
    word = np.zeros((rows, cols // 8), dtype=np.uint32)
    for i in range(8):
        word |= nib[:, :, i] << np.uint32(4 * i)
    return word.view(np.int32), sb


def dequantize(packed, sb, group):
    rows, c8 = packed.shape
    u = packed.view(np.uint32)
    q = np.stack([((u >> np.uint32(4 * i)) & np.uint32(15)).astype(np.int32) - 8 for i in range(8)], axis=2)
    q = q.reshape(rows, c8 * 8)
    s = np.repeat(bf16_to_f32(sb), group, axis=1)
    return q.astype(np.float64) * s.astype(np.float64), s


# ---- checkpoint generator ----

SHAPES = {
    "tiny": dict(hidden=128, inter=256, heads=2, kv=1, hd=64, ghd=128, ple=128, layers=8, vocab=512,
                 shared=2, vis=64, aud=64),
    "e4b": dict(hidden=2560, inter=10240, heads=8, kv=2, hd=256, ghd=512, ple=256, layers=42,
                vocab=262144, shared=18, vis=768, aud=1536),
}


class Pool:
    """Random bf16 values: fresh normal draws for small tensors; for big ones
    a fixed pool reused with a per-tensor rotation (generation speed, not
    statistics, is what the benchmark needs)."""

    def __init__(self, seed, big=False):
        self.rng = np.random.default_rng(seed)
        self.big = big
        if big:
            self.pool = f32_to_bf16(self.rng.normal(0, 0.02, 1 << 24).astype(np.float32))
        self.k = 0

    def get(self, shape, scale=0.02):
        n = int(np.prod(shape))
        if not self.big or n < (1 << 20):
            return f32_to_bf16((self.rng.normal(0, scale, n)).astype(np.float32)).reshape(shape)
        self.k += 1
        reps = -(-n // self.pool.size)
        out = np.tile(np.roll(self.pool, self.k * 7919), reps)[:n]
        return out.reshape(shape)


def layer_types(L):
    # 5 sliding then 1 full, the last layer always full (as Gemma4TextConfig makes it)
    return ["full_attention" if (i % 6) == 5 or i == L - 1 else "sliding_attention" for i in range(L)]


def make(out, shape="tiny", layers=None, shards=1, seed=1, special=False):
    c = dict(SHAPES[shape])
    if layers:
        c["layers"] = layers
        c["shared"] = min(c["shared"], max(0, layers - 2))
    H, I, P, L, V = c["hidden"], c["inter"], c["ple"], c["layers"], c["vocab"]
    # a shared layer reads the KV of the last earlier layer of its type, so
    # each needs one (else the config is not a model transformers or
    # fgpack's engine loads, and fgpack bake refuses it): fewer shared
    # layers where the first ones do not hold every type
    types = layer_types(L)
    while c["shared"] and any(t not in types[:L - c["shared"]] for t in types[L - c["shared"]:]):
        c["shared"] -= 1
    pool = Pool(seed, big=(shape == "e4b"))
    os.makedirs(out, exist_ok=True)
    lm = "model.language_model."
    T = []

    def add(name, shp, arr=None, dt="BF16"):
        if arr is None and pool.big:
            arr = (lambda shp=shp: pool.get(shp))  # E4B: generate while writing
        T.append((name, dt, shp, pool.get(shp) if arr is None else arr))

    add(lm + "embed_tokens.weight", (V, H))
    add(lm + "embed_tokens_per_layer.weight", (V, L * P))
    add(lm + "per_layer_model_projection.weight", (L * P, H))
    add(lm + "per_layer_projection_norm.weight", (P,))
    first_shared = L - c["shared"]
    for i in range(L):
        p = "%slayers.%d." % (lm, i)
        hd = c["ghd"] if types[i] == "full_attention" else c["hd"]
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm"):
            add(p + n + ".weight", (H,))
        add(p + "self_attn.q_proj.weight", (c["heads"] * hd, H))
        add(p + "self_attn.q_norm.weight", (hd,))
        if i < first_shared:
            add(p + "self_attn.k_proj.weight", (c["kv"] * hd, H))
            add(p + "self_attn.v_proj.weight", (c["kv"] * hd, H))
            add(p + "self_attn.k_norm.weight", (hd,))
        add(p + "self_attn.o_proj.weight", (H, c["heads"] * hd))
        add(p + "mlp.gate_proj.weight", (I, H))
        add(p + "mlp.up_proj.weight", (I, H))
        add(p + "mlp.down_proj.weight", (H, I))
        add(p + "per_layer_input_gate.weight", (P, H))
        add(p + "per_layer_projection.weight", (H, P))
        add(p + "layer_scalar", (1,))
    add(lm + "norm.weight", (H,))
    # Tower stand-ins: names like the real ones (they contain q_proj etc. but must pass through).
    for t, d in (("vision_tower.encoder.layers.0", c["vis"]), ("audio_tower.layers.0", c["aud"])):
        for n in ("self_attn.q_proj.linear.weight", "self_attn.k_proj.linear.weight",
                  "mlp.gate_proj.linear.weight"):
            add("model.%s.%s" % (t, n), (d, d))
    add("model.embed_vision.embedding_projection.weight", (H, c["vis"]))
    add("model.embed_audio.embedding_projection.weight", (H, c["aud"]))
    add("model.vision_tower.patch_embedder.position_embedding_table", (4, c["vis"]), dt="F32",
        arr=np.arange(4 * c["vis"], dtype=np.float32).reshape(4, c["vis"]))
    if special:
        # Awkward values in the first rows of layer 0's q_proj: an all-zero
        # group, ±max, exact ties after scaling, denormals, negative zero.
        name = lm + "layers.0.self_attn.q_proj.weight"
        k = [i for i, t in enumerate(T) if t[0] == name][0]
        w = (T[k][3]() if callable(T[k][3]) else T[k][3]).copy()
        w[0, :] = 0
        w[1, :] = f32_to_bf16(np.float32(-0.0))
        w[2, :] = f32_to_bf16(np.float32(1e-39))  # bf16 denormals
        w[3, 0] = f32_to_bf16(np.float32(7.5))
        w[3, 1:] = f32_to_bf16(np.float32(-7.5))
        w[4, :] = f32_to_bf16(np.tile(np.float32([7.5, 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -7.5]), H // 8))
        w[5, :] = f32_to_bf16(np.float32(3e38) * np.where(np.arange(H) % 2, 1, -1).astype(np.float32))
        T[k] = (name, "BF16", T[k][2], w)
    # Files.
    if shards <= 1:
        st_write(os.path.join(out, "model.safetensors"), T, {"format": "pt"})
    else:
        per = -(-len(T) // shards)
        wm = {}
        total = 0
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = T[s * per:(s + 1) * per]
            st_write(os.path.join(out, fn), part, {"format": "pt"})
            for t in part:
                wm[t[0]] = fn
                total += int(np.prod(t[2])) * DT[t[1]][1]
        json.dump({"metadata": {"total_size": total}, "weight_map": wm},
                  open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
    text = {"model_type": "gemma4_text", "hidden_size": H, "intermediate_size": I,
            "num_hidden_layers": L, "num_attention_heads": c["heads"],
            "num_key_value_heads": c["kv"], "head_dim": c["hd"], "global_head_dim": c["ghd"],
            "hidden_size_per_layer_input": P, "vocab_size": V, "vocab_size_per_layer_input": V,
            "layer_types": types, "num_kv_shared_layers": c["shared"], "sliding_window": 512,
            "final_logit_softcapping": 30.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
            "hidden_activation": "gelu_pytorch_tanh"}
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
           "text_config": text, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
              open(os.path.join(out, "generation_config.json"), "w"), indent=2)
    json.dump({"model": {"type": "BPE"}, "added_tokens": []}, open(os.path.join(out, "tokenizer.json"), "w"))
    json.dump({"processor_class": "Gemma4Processor"}, open(os.path.join(out, "processor_config.json"), "w"))
    return T


# ---- check a baked checkpoint against the reference ----

def check(src, out, group=128, head="keep"):
    S, O = ckpt_read(src), ckpt_read(out)
    seen = set()
    nq = npass = 0
    worst = 0.0
    nsub = [0]
    for name, (dt, shp, arr) in S.items():
        if TARGET.match(name) or (head == "int4" and name == "lm_head.weight"):
            base = name[:-len(".weight")]
            assert name not in O, "quantized tensor still present: " + name
            for sfx, want_dt in ((".weight_packed", "I32"), (".weight_scale", "BF16"), (".weight_shape", "I64")):
                assert O[base + sfx][0] == want_dt, (base + sfx, O[base + sfx][0])
                seen.add(base + sfx)
            packed, scale = quantize(np.asarray(arr), group)
            assert O[base + ".weight_packed"][1] == (shp[0], shp[1] // 8)
            assert O[base + ".weight_scale"][1] == (shp[0], shp[1] // group)
            assert list(O[base + ".weight_shape"][2]) == list(shp), base
            if not np.array_equal(np.asarray(O[base + ".weight_packed"][2]), packed):
                raise AssertionError("packed words differ from the reference: " + base)
            if not np.array_equal(np.asarray(O[base + ".weight_scale"][2]), scale):
                raise AssertionError("scales differ from the reference: " + base)
            deq, s = dequantize(np.asarray(O[base + ".weight_packed"][2]), np.asarray(O[base + ".weight_scale"][2]), group)
            err = np.abs(deq - bf16_to_f32(np.asarray(arr)).astype(np.float64)) / s
            # A subnormal scale has fewer than 8 significant bits, so the
            # bound cannot hold there (compressed-tensors behaves the same).
            normal = s >= np.float32(2.0 ** -126)
            nsub[0] += int((~normal).sum())
            if normal.any():
                worst = max(worst, float(err[normal].max()))
            nq += 1
        else:
            assert name in O, "missing from output: " + name
            assert O[name][0] == dt and O[name][1] == shp, name
            assert np.asarray(O[name][2]).tobytes() == np.asarray(arr).tobytes(), "changed: " + name
            seen.add(name)
            npass += 1
    if head == "int4" and "lm_head.weight" not in S:
        emb = [k for k in ("model.language_model.embed_tokens.weight", "model.embed_tokens.weight") if k in S][0]
        packed, scale = quantize(np.asarray(S[emb][2]), group)
        assert np.array_equal(np.asarray(O["lm_head.weight_packed"][2]), packed), "lm_head packed"
        assert np.array_equal(np.asarray(O["lm_head.weight_scale"][2]), scale), "lm_head scale"
        assert list(O["lm_head.weight_shape"][2]) == list(S[emb][1])
        seen.update(["lm_head.weight_packed", "lm_head.weight_scale", "lm_head.weight_shape"])
        nq += 1
    extra = set(O) - seen
    assert not extra, "unexpected output tensors: %s" % sorted(extra)[:5]
    cfg = json.load(open(os.path.join(out, "config.json")))
    qc = cfg["quantization_config"]
    w = qc["config_groups"]["group_0"]["weights"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "pack-quantized"
    assert w["num_bits"] == 4 and w["symmetric"] is True and w["group_size"] == group
    assert w["strategy"] == "group" and w["type"] == "int"
    if head == "int4":
        assert cfg["tie_word_embeddings"] is False and cfg["text_config"]["tie_word_embeddings"] is False
    else:
        assert "lm_head" in qc["ignore"]
    for fn in os.listdir(src):
        if not fn.endswith(".safetensors") and fn not in ("model.safetensors.index.json", "config.json"):
            assert open(os.path.join(src, fn), "rb").read() == open(os.path.join(out, fn), "rb").read(), fn
    # Bound: half a step from rounding, plus the bf16 rounding of w/s (2^-9
    # relative, |w/s| <= 7.5 * (1 + 2^-8)) and of the scale (clamp at 7).
    bound = 0.5 + 7.6 * 2.0 ** -8
    print("checked %d quantized, %d unchanged; worst |w - q*s| = %.4f steps (bound %.4f); "
          "%d weights under subnormal scales" % (nq, npass, worst, bound, nsub[0]))
    assert worst <= bound, worst
    return worst


def quant_dir(src, out, group=128):
    """The numpy bake used as the benchmark's comparison: every target tensor quantized."""
    os.makedirs(out, exist_ok=True)
    S = ckpt_read(src)
    T = []
    for name, (dt, shp, arr) in S.items():
        if TARGET.match(name):
            packed, scale = quantize(np.asarray(arr), group)
            base = name[:-7]
            T += [(base + ".weight_packed", "I32", packed.shape, packed),
                  (base + ".weight_scale", "BF16", scale.shape, scale),
                  (base + ".weight_shape", "I64", (2,), np.array(shp, dtype=np.int64))]
        else:
            T.append((name, dt, shp, np.asarray(arr)))
    st_write(os.path.join(out, "model.safetensors"), T)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    m.add_argument("--layers", type=int)
    m.add_argument("--shards", type=int, default=1)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--special", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("src")
    c.add_argument("out")
    c.add_argument("--group", type=int, default=128)
    c.add_argument("--head", default="keep")
    q = sub.add_parser("quant")
    q.add_argument("src")
    q.add_argument("out")
    q.add_argument("--group", type=int, default=128)
    a = ap.parse_args(argv)
    if a.cmd == "make":
        make(a.out, a.shape, a.layers, a.shards, a.seed, a.special)
    elif a.cmd == "check":
        check(a.src, a.out, a.group, a.head)
    else:
        quant_dir(a.src, a.out, a.group)


if __name__ == "__main__":
    main(sys.argv[1:])
