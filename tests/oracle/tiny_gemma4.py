#!/usr/bin/env python3
"""tiny_gemma4.py - builds the tiny random-weight Gemma 4 text models the engine
is tested against, and holds a plain numpy forward pass of the same math.

Runs anywhere numpy exists (Debian python3-numpy). It writes OUTDIR/bf16:
config.json in the layout of google/gemma-4-E4B (text keys under "text_config",
tensors named model.language_model.*) plus a bf16 model.safetensors. The INT4
fixture is that folder baked by `fgpack bake int4 --group 32`; --compare-int4
checks the bake against this file's own compressed-tensors quantizer
(quantize_int4, docs/formats/int4.md), tensor value by tensor value. --int4
also writes that quantizer's own checkpoint to OUTDIR/int4-py (norms in F32).

The numpy forward is used to choose the init (greedy continuations must vary,
margins must not be tiny) and, on the GPU machine, as a cross-check of this
project's reading of the transformers code. transformers itself
(gemma4_oracle.py) produces the reference numbers the C engine is held to.

usage: tiny_gemma4.py OUTDIR [--seed N] [--int4] [--check]
       tiny_gemma4.py --compare-int4 BF16_DIR BAKED_DIR GROUP
"""
import json
import math
import os
import struct
import sys

import numpy as np

# The tiny shape family: every structural feature of E4B, small numbers.
# hidden 96 makes sqrt(hidden) inexact (a wrong embedding scale shows), head
# dims differ between sliding (32) and full (64) layers, layers 5..7 share
# KV (5 and 7 with full layer 2, 6 with sliding layer 4), and the window (8)
# is shorter than most test prompts.
TEXT_CONFIG = {
    "model_type": "gemma4_text",
    "vocab_size": 512,
    "vocab_size_per_layer_input": 512,
    "hidden_size": 96,
    "intermediate_size": 128,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "global_head_dim": 64,
    "hidden_size_per_layer_input": 32,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "full_attention"],
    "sliding_window": 8,
    "num_kv_shared_layers": 3,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                           "rope_theta": 1000000.0},
    },
    "final_logit_softcapping": 30.0,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-06,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 128,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_k_eq_v": False,
    "enable_moe_block": False,
    "use_double_wide_mlp": False,
    "use_bidirectional_attention": None,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "pad_token_id": 0,
    "initializer_range": 0.02,
}

GROUP = 32
PREFIX = "model.language_model."


def full_config(text, quant=None):
    cfg = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "tie_word_embeddings": True,
        "bos_token_id": 2,
        "eos_token_id": [1, 106],
        "pad_token_id": 0,
        "torch_dtype": "bfloat16",
        "fgpack_note": "tiny random-weight Gemma 4 text model made by tests/oracle/tiny_gemma4.py; "
                       "the weights are random, the text it generates is meaningless",
    }
    if quant:
        cfg["quantization_config"] = quant
    return cfg


# ---- bf16 and safetensors ------------------------------------------------

def to_bf16_bits(a):
    """fp32 array -> uint16 bf16 bits, round to nearest even (as torch does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def bf16_round(a):
    return from_bf16_bits(to_bf16_bits(a))


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, raw bytes), written in name order."""
    tensors = sorted(tensors, key=lambda t: t[0])
    header = {}
    off = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, raw in tensors:
            f.write(raw)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[b:e]
        dt = t["dtype"]
        if dt == "BF16":
            a = from_bf16_bits(np.frombuffer(raw, dtype=np.uint16))
        elif dt == "F32":
            a = np.frombuffer(raw, dtype=np.float32).copy()
        elif dt == "I32":
            a = np.frombuffer(raw, dtype=np.int32).copy()
        elif dt == "I64":
            a = np.frombuffer(raw, dtype=np.int64).copy()
        else:
            raise ValueError("dtype " + dt)
        out[name] = a.reshape(t["shape"])
    return out


def write_tar(path, files):
    """files (name -> bytes) as one plain tar at path, names sorted; returns its size."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for n, b in sorted(files.items()):
            ti = tarfile.TarInfo(n)
            ti.size = len(b)
            tf.addfile(ti, io.BytesIO(b))
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return len(buf.getvalue())


# ---- the model's tensors -------------------------------------------------

def first_shared(c):
    return c["num_hidden_layers"] - c["num_kv_shared_layers"]


def head_dim_of(c, i):
    return c["global_head_dim"] if c["layer_types"][i] == "full_attention" else c["head_dim"]


def make_weights(c, seed, s):
    """Random fp32 weights already rounded to bf16. s: init scales."""
    rng = np.random.default_rng(seed)
    H, I, P, L = c["hidden_size"], c["intermediate_size"], c["hidden_size_per_layer_input"], c["num_hidden_layers"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    w = {}

    def lin(name, out_f, in_f, scale):
        w[name] = rng.normal(0.0, scale / math.sqrt(in_f), size=(out_f, in_f)).astype(np.float32)

    def norm(name, n, lo, hi):
        w[name] = rng.uniform(lo, hi, size=(n,)).astype(np.float32)

    w["embed_tokens.weight"] = rng.normal(0.0, s["embed"], size=(c["vocab_size"], H)).astype(np.float32)
    w["embed_tokens_per_layer.weight"] = rng.normal(
        0.0, s["ple"], size=(c["vocab_size_per_layer_input"], L * P)).astype(np.float32)
    lin("per_layer_model_projection.weight", L * P, H, s["lin"])
    norm("per_layer_projection_norm.weight", P, 0.5, 1.5)
    norm("norm.weight", H, s["final_norm"][0], s["final_norm"][1])
    for i in range(L):
        p = "layers.%d." % i
        d = head_dim_of(c, i)
        lin(p + "self_attn.q_proj.weight", nh * d, H, s["lin"])
        norm(p + "self_attn.q_norm.weight", d, 0.5, 1.5)
        if i < first_shared(c):
            lin(p + "self_attn.k_proj.weight", nkv * d, H, s["lin"])
            lin(p + "self_attn.v_proj.weight", nkv * d, H, s["lin"])
            norm(p + "self_attn.k_norm.weight", d, 0.5, 1.5)
        lin(p + "self_attn.o_proj.weight", H, nh * d, s["lin"])
        lin(p + "mlp.gate_proj.weight", I, H, s["lin"])
        lin(p + "mlp.up_proj.weight", I, H, s["lin"])
        lin(p + "mlp.down_proj.weight", H, I, s["lin"])
        lin(p + "per_layer_input_gate.weight", P, H, s["lin"])
        lin(p + "per_layer_projection.weight", H, P, s["lin"])
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm"):
            norm(p + n + ".weight", H, s["norm"][0], s["norm"][1])
        w[p + "layer_scalar"] = np.array([rng.uniform(0.6, 1.4)], dtype=np.float32)
    return {k: bf16_round(v) for k, v in w.items()}


LINEAR_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                   "gate_proj.weight", "up_proj.weight", "down_proj.weight",
                   "per_layer_input_gate.weight", "per_layer_projection.weight",
                   "per_layer_model_projection.weight")


def is_linear(name):
    return name.endswith(LINEAR_SUFFIXES)


def quantize_int4(wt, group):
    """compressed-tensors symmetric group quantization of one [out, in] matrix
    (docs/formats/int4.md): s = bf16(absmax / 7.5) (2^-7 when 0),
    q = rint_half_even(clamp(bf16(w / s), -8, 7)). Returns (packed int32
    [out, in/8], scale bf16 bits [out, in/group], dequantized fp32)."""
    out_f, in_f = wt.shape
    g = wt.reshape(out_f, in_f // group, group)
    absmax = np.abs(g).max(axis=2)
    scale = bf16_round(absmax / np.float32(7.5))
    scale = np.where(scale == 0, np.float32(2.0 ** -7), scale).astype(np.float32)
    r = bf16_round((g / scale[:, :, None]).astype(np.float32))
    q = np.rint(np.clip(r, -8, 7)).astype(np.int32)
    deq = (q.astype(np.float32) * scale[:, :, None]).reshape(out_f, in_f)
    nib = (q + 8).reshape(out_f, in_f // 8, 8).astype(np.uint32)
    packed = np.zeros((out_f, in_f // 8), dtype=np.uint32)
    for i in range(8):
        packed |= nib[:, :, i] << np.uint32(4 * i)
    return packed.view(np.int32), to_bf16_bits(scale), deq


def save_bf16(outdir, c, w):
    os.makedirs(outdir, exist_ok=True)
    ts = [(PREFIX + k, "BF16", v.shape, to_bf16_bits(v).tobytes()) for k, v in w.items()]
    write_safetensors(os.path.join(outdir, "model.safetensors"), ts)
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(full_config(c), f, indent=2, sort_keys=True)
        f.write("\n")


def save_int4(outdir, c, w, group):
    """Writes the quantized checkpoint; returns the dequantized weights."""
    os.makedirs(outdir, exist_ok=True)
    ts, deq = [], {}
    for k, v in w.items():
        if is_linear(k):
            packed, scale, d = quantize_int4(v, group)
            base = PREFIX + k[:-len(".weight")]
            ts.append((base + ".weight_packed", "I32", packed.shape, packed.tobytes()))
            ts.append((base + ".weight_scale", "BF16", scale.shape, scale.tobytes()))
            ts.append((base + ".weight_shape", "I64", (2,), np.array(v.shape, dtype=np.int64).tobytes()))
            deq[k] = d
        elif k.endswith("norm.weight") or k.endswith("layer_scalar"):
            ts.append((PREFIX + k, "F32", v.shape, v.astype(np.float32).tobytes()))
            deq[k] = v
        else:
            ts.append((PREFIX + k, "BF16", v.shape, to_bf16_bits(v).tobytes()))
            deq[k] = v
    write_safetensors(os.path.join(outdir, "model.safetensors"), ts)
    quant = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "input_activations": None,
            "output_activations": None,
            "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                        "group_size": group, "dynamic": False, "actorder": None,
                        "observer": "minmax"}}},
        "ignore": ["lm_head"],
    }
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(full_config(c, quant), f, indent=2, sort_keys=True)
        f.write("\n")
    return deq


def load_dequantized(dirpath):
    """Reads either folder back as fp32 weights keyed without PREFIX."""
    raw = read_safetensors(os.path.join(dirpath, "model.safetensors"))
    w = {}
    for k, v in raw.items():
        k2 = k[len(PREFIX):] if k.startswith(PREFIX) else k
        if k2.endswith(".weight_packed"):
            base = k2[:-len(".weight_packed")]
            shape = raw[k[:-len(".weight_packed")] + ".weight_shape"]
            scale = raw[k[:-len(".weight_packed")] + ".weight_scale"]
            u = v.view(np.uint32)
            out_f, in_f = int(shape[0]), int(shape[1])
            q = np.zeros((out_f, in_f), dtype=np.float32)
            for i in range(8):
                q[:, i::8] = ((u >> np.uint32(4 * i)) & 15).astype(np.float32) - 8
            group = in_f // scale.shape[1]
            w[base + ".weight"] = q * np.repeat(scale, group, axis=1)
        elif k2.endswith(".weight_scale") or k2.endswith(".weight_shape"):
            continue
        else:
            w[k2] = v.astype(np.float32)
    return w


# ---- numpy forward (fp32), the math of transformers' Gemma4ForCausalLM ----

def rmsnorm(x, w, eps):
    y = x * np.power(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps), np.float32(-0.5))
    return y * w if w is not None else y


def gelu_tanh(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(np.float32(math.sqrt(2 / math.pi)) *
                                                          (x + np.float32(0.044715) * x * x * x)))


def inv_freq(c, layer_type):
    rp = c["rope_parameters"][layer_type]
    base = rp["rope_theta"]
    if layer_type == "full_attention" and rp["rope_type"] == "proportional":
        d = c["global_head_dim"]
        angles = int(rp.get("partial_rotary_factor", 1.0) * d // 2)
        f = 1.0 / (base ** (np.arange(0, 2 * angles, 2, dtype=np.float32) / d))
        f = np.concatenate([f.astype(np.float32), np.zeros(d // 2 - angles, dtype=np.float32)])
    else:
        d = c["head_dim"] if layer_type == "sliding_attention" else c["global_head_dim"]
        f = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float32) / d))
    return (f / rp.get("factor", 1.0)).astype(np.float32)


def rope(x, pos, f):
    """x [T, heads, d]; rotate-half with frequencies f [d/2]."""
    ang = pos[:, None].astype(np.float32) * f[None, :]
    cos = np.cos(np.concatenate([ang, ang], axis=-1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], axis=-1))[:, None, :]
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rot * sin


def forward(c, w, ids, window=None):
    """Logits [T, vocab] for every position of ids (no cache: the whole
    sequence at once, as transformers' prefill does)."""
    ids = np.asarray(ids)
    T = len(ids)
    H, P, L = c["hidden_size"], c["hidden_size_per_layer_input"], c["num_hidden_layers"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    eps = c["rms_norm_eps"]
    W = window or c["sliding_window"]
    pos = np.arange(T)
    x = w["embed_tokens.weight"][ids] * np.float32(H ** 0.5)
    tok = (w["embed_tokens_per_layer.weight"][ids] * np.float32(P ** 0.5)).reshape(T, L, P)
    ctx = (x @ w["per_layer_model_projection.weight"].T) * np.float32(H ** -0.5)
    ctx = rmsnorm(ctx.reshape(T, L, P), w["per_layer_projection_norm.weight"], eps)
    ple = (ctx + tok) * np.float32(2 ** -0.5)
    shared = {}
    fs = first_shared(c)
    qi = pos[:, None]
    ki = pos[None, :]
    for i in range(L):
        p = "layers.%d." % i
        lt = c["layer_types"][i]
        d = head_dim_of(c, i)
        f = inv_freq(c, lt)
        res = x
        a = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).reshape(T, nh, d)
        q = rope(rmsnorm(q, w[p + "self_attn.q_norm.weight"], eps), pos, f)
        if i >= fs:
            k, v = shared[lt]
        else:
            k = (a @ w[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, d)
            v = (a @ w[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, d)
            k = rope(rmsnorm(k, w[p + "self_attn.k_norm.weight"], eps), pos, f)
            v = rmsnorm(v, None, eps)
            last = max(j for j in range(fs) if c["layer_types"][j] == lt)
            if i == last:
                shared[lt] = (k, v)
        allowed = ki <= qi
        if lt == "sliding_attention":
            allowed = allowed & (qi - ki < W)
        o = np.zeros((T, nh, d), dtype=np.float32)
        g = nh // nkv
        for h in range(nh):
            s = q[:, h, :] @ k[:, h // g, :].T
            s = np.where(allowed, s, -np.inf)
            s = s - s.max(axis=1, keepdims=True)
            e = np.exp(s)
            pr = e / e.sum(axis=1, keepdims=True)
            o[:, h, :] = pr @ v[:, h // g, :]
        o = o.reshape(T, nh * d) @ w[p + "self_attn.o_proj.weight"].T
        x = res + rmsnorm(o, w[p + "post_attention_layernorm.weight"], eps)
        res = x
        m = rmsnorm(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        m = gelu_tanh(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)
        m = m @ w[p + "mlp.down_proj.weight"].T
        x = res + rmsnorm(m, w[p + "post_feedforward_layernorm.weight"], eps)
        res = x
        g2 = gelu_tanh(x @ w[p + "per_layer_input_gate.weight"].T) * ple[:, i, :]
        g2 = g2 @ w[p + "per_layer_projection.weight"].T
        x = res + rmsnorm(g2, w[p + "post_per_layer_input_norm.weight"], eps)
        x = x * w[p + "layer_scalar"][0]
    x = rmsnorm(x, w["norm.weight"], eps)
    z = x @ w["embed_tokens.weight"].T
    cap = c["final_logit_softcapping"]
    return (np.tanh(z / np.float32(cap)) * np.float32(cap)).astype(np.float32)


def greedy(c, w, prompt, n):
    seq = list(prompt)
    margins = []
    for _ in range(n):
        lg = forward(c, w, seq)[-1]
        o = np.argsort(-lg, kind="stable")
        seq.append(int(o[0]))
        margins.append(float(lg[o[0]] - lg[o[1]]))
    return seq[len(prompt):], margins


# Prompts: token ids (the tiny vocab has no tokenizer). Lengths 1, 7, 19, 44:
# the last two are longer than the sliding window.
def prompts(seed=7):
    rng = np.random.default_rng(seed)
    out = [[2]]
    for n in (7, 19, 44):
        out.append([2] + [int(t) for t in rng.integers(3, 512, size=n - 1)])
    return out


SCALES = {"embed": 0.1, "ple": 0.6, "lin": 2.0, "norm": (0.4, 1.6), "final_norm": (4.0, 12.0)}


def compare_int4(bf16_dir, baked_dir, group):
    """Quantizes bf16_dir's weights here and compares every tensor value with
    baked_dir (made by `fgpack bake int4 --group GROUP`). Returns the names
    that differ."""
    w = load_dequantized(bf16_dir)
    baked = read_safetensors(os.path.join(baked_dir, "model.safetensors"))
    bad = []
    for k, v in w.items():
        if is_linear(k):
            packed, scale, _ = quantize_int4(v, group)
            base = PREFIX + k[:-len(".weight")]
            got_p = baked.get(base + ".weight_packed")
            got_s = baked.get(base + ".weight_scale")
            got_shape = baked.get(base + ".weight_shape")
            if (got_p is None or not np.array_equal(got_p, packed) or got_s is None
                    or not np.array_equal(to_bf16_bits(got_s), scale)
                    or got_shape is None or list(got_shape) != list(v.shape)):
                bad.append(base)
        elif not np.array_equal(baked.get(PREFIX + k), v):
            bad.append(PREFIX + k)
    return bad


def main(argv):
    if len(argv) >= 2 and argv[1] == "--compare-int4":
        bad = compare_int4(argv[2], argv[3], int(argv[4]))
        print("%d tensors differ%s" % (len(bad), (": " + ", ".join(bad[:5])) if bad else ""))
        return 1 if bad else 0
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    outdir = argv[1]
    seed = 11
    if "--seed" in argv:
        seed = int(argv[argv.index("--seed") + 1])
    c = TEXT_CONFIG
    w = make_weights(c, seed, SCALES)
    save_bf16(os.path.join(outdir, "bf16"), c, w)
    if "--int4" in argv:
        save_int4(os.path.join(outdir, "int4-py"), c, w, GROUP)
    if "--check" in argv:
        variants = [("bf16", w)]
        if "--int4" in argv:
            variants.append(("int4-py", load_dequantized(os.path.join(outdir, "int4-py"))))
        for variant, wd in variants:
            for pr in prompts():
                ids, m = greedy(c, wd, pr, 32)
                lg = forward(c, wd, pr)
                print("%s len %2d: distinct %2d/32, min margin %.4f, |logit| max %.2f std %.2f: %s" % (
                    variant, len(pr), len(set(ids)), min(m), np.abs(lg).max(), lg.std(), ids[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
