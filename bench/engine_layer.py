#!/usr/bin/env python3
"""engine_layer.py - helpers of bench/engine_cpu.sh (numpy only).

  make DIR [LAYERS]   write DIR/bf16 and DIR/int4 (group 128): an E4B-shaped
                      Gemma 4 checkpoint of LAYERS layers (default 2: one
                      sliding, one full - the last layer is always full),
                      hidden 2560, MLP 10240, 8/2 heads, head dims 256/512,
                      PLE 256, vocab 2048 (small, so the head is ~3% of the
                      work), random weights
  numpy DIR/VARIANT CTX REPS
                      time one decode step of every layer in numpy (fp32
                      weights widened once for bf16; INT4 dequantized at
                      every step, as a plain numpy INT4 path would) with CTX
                      cached positions; prints JSON {ms_per_layer, ...}
  bandwidth MB        numpy single-thread read bandwidth (sum of MB of fp32), GB/s
  bytes DIR/VARIANT   bytes of weights one decode step reads (every linear
                      weight + scales + the tied head + one PLE row), JSON
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
import tiny_gemma4 as tg  # noqa: E402


def e4b_config(layers):
    c = dict(tg.TEXT_CONFIG)
    c.update({"vocab_size": 2048, "vocab_size_per_layer_input": 2048, "hidden_size": 2560,
              "intermediate_size": 10240, "num_hidden_layers": layers, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
              "hidden_size_per_layer_input": 256, "sliding_window": 512, "num_kv_shared_layers": 0,
              "max_position_embeddings": 131072,
              "layer_types": ["sliding_attention"] * (layers - 1) + ["full_attention"]})
    return c


def make(d, layers):
    c = e4b_config(layers)
    rng = np.random.default_rng(5)
    w = {}
    H, I, P, L = c["hidden_size"], c["intermediate_size"], c["hidden_size_per_layer_input"], layers

    def lin(name, o, i):
        w[name] = tg.bf16_round((rng.standard_normal((o, i), dtype=np.float32) * np.float32(1 / np.sqrt(i))))

    def vec(name, n):
        w[name] = tg.bf16_round(rng.uniform(0.5, 1.5, size=(n,)).astype(np.float32))

    w["embed_tokens.weight"] = tg.bf16_round(rng.standard_normal((c["vocab_size"], H), dtype=np.float32) * 0.05)
    w["embed_tokens_per_layer.weight"] = tg.bf16_round(rng.standard_normal((c["vocab_size"], L * P), dtype=np.float32))
    lin("per_layer_model_projection.weight", L * P, H)
    vec("per_layer_projection_norm.weight", P)
    vec("norm.weight", H)
    for i in range(L):
        p = "layers.%d." % i
        hd = tg.head_dim_of(c, i)
        lin(p + "self_attn.q_proj.weight", 8 * hd, H)
        lin(p + "self_attn.k_proj.weight", 2 * hd, H)
        lin(p + "self_attn.v_proj.weight", 2 * hd, H)
        lin(p + "self_attn.o_proj.weight", H, 8 * hd)
        vec(p + "self_attn.q_norm.weight", hd)
        vec(p + "self_attn.k_norm.weight", hd)
        lin(p + "mlp.gate_proj.weight", I, H)
        lin(p + "mlp.up_proj.weight", I, H)
        lin(p + "mlp.down_proj.weight", H, I)
        lin(p + "per_layer_input_gate.weight", P, H)
        lin(p + "per_layer_projection.weight", H, P)
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm"):
            vec(p + n + ".weight", H)
        w[p + "layer_scalar"] = np.array([1.0], dtype=np.float32)
    tg.save_bf16(os.path.join(d, "bf16"), c, w)
    tg.save_int4(os.path.join(d, "int4"), c, w, 128)


def int4_parts(raw, base):
    packed = raw[base + ".weight_packed"].view(np.uint32)
    scale = raw[base + ".weight_scale"]
    return packed, scale


def deq(packed, scale):
    out_f = packed.shape[0]
    q = np.empty((out_f, packed.shape[1] * 8), dtype=np.float32)
    for i in range(8):
        q[:, i::8] = ((packed >> np.uint32(4 * i)) & np.uint32(15)).astype(np.float32) - 8
    g = q.shape[1] // scale.shape[1]
    return (q.reshape(out_f, scale.shape[1], g) * scale[:, :, None]).reshape(out_f, -1)


def numpy_layers(dirpath, ctx, reps):
    conf = json.load(open(os.path.join(dirpath, "config.json")))
    c = conf["text_config"]
    raw = tg.read_safetensors(os.path.join(dirpath, "model.safetensors"))
    pre = tg.PREFIX
    int4 = any(k.endswith(".weight_packed") for k in raw)
    L, H, eps = c["num_hidden_layers"], c["hidden_size"], c["rms_norm_eps"]
    rng = np.random.default_rng(1)

    def W(name):
        if int4 and (pre + name + ".weight_packed") in raw:
            return int4_parts(raw, pre + name)
        return raw[pre + name + ".weight"].astype(np.float32)

    def mv(wt, x):
        if isinstance(wt, tuple):
            return deq(*wt) @ x
        return wt @ x

    layers = []
    for i in range(L):
        p = "layers.%d." % i
        hd = tg.head_dim_of(c, i)
        f = tg.inv_freq(c, c["layer_types"][i])
        lw = {n: W(p + n) for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "per_layer_input_gate",
                                     "per_layer_projection")}
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm", "self_attn.q_norm", "self_attn.k_norm"):
            lw[n] = raw[pre + p + n + ".weight"].astype(np.float32)
        kc = rng.standard_normal((ctx, 2, hd), dtype=np.float32)
        vc = rng.standard_normal((ctx, 2, hd), dtype=np.float32)
        layers.append((lw, hd, f, kc, vc))
    x0 = rng.standard_normal(H, dtype=np.float32)
    ple = rng.standard_normal((L, c["hidden_size_per_layer_input"]), dtype=np.float32)

    def step(x):
        for i, (lw, hd, f, kc, vc) in enumerate(layers):
            a = tg.rmsnorm(x, lw["input_layernorm"], eps)
            q = mv(lw["self_attn.q_proj"], a).reshape(8, hd)
            q = tg.rope(tg.rmsnorm(q, lw["self_attn.q_norm"], eps)[None], np.array([ctx]), f)[0]
            k = mv(lw["self_attn.k_proj"], a).reshape(2, hd)
            k = tg.rope(tg.rmsnorm(k, lw["self_attn.k_norm"], eps)[None], np.array([ctx]), f)[0]
            v = tg.rmsnorm(mv(lw["self_attn.v_proj"], a).reshape(2, hd), None, eps)
            K = np.concatenate([kc, k[None]], axis=0)
            V = np.concatenate([vc, v[None]], axis=0)
            o = np.empty((8, hd), dtype=np.float32)
            for h in range(8):
                s = K[:, h // 4, :] @ q[h]
                e = np.exp(s - s.max())
                o[h] = (e / e.sum()) @ V[:, h // 4, :]
            x = x + tg.rmsnorm(mv(lw["self_attn.o_proj"], o.reshape(-1)), lw["post_attention_layernorm"], eps)
            m = tg.rmsnorm(x, lw["pre_feedforward_layernorm"], eps)
            m = tg.gelu_tanh(mv(lw["mlp.gate_proj"], m)) * mv(lw["mlp.up_proj"], m)
            x = x + tg.rmsnorm(mv(lw["mlp.down_proj"], m), lw["post_feedforward_layernorm"], eps)
            g = tg.gelu_tanh(mv(lw["per_layer_input_gate"], x)) * ple[i]
            x = x + tg.rmsnorm(mv(lw["per_layer_projection"], g), lw["post_per_layer_input_norm"], eps)
        return x

    step(x0)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step(x0)
        times.append(time.perf_counter() - t)
    ms = float(np.median(times)) * 1000 / L
    print(json.dumps({"ms_per_layer": round(ms, 3), "layers": L, "reps": reps, "ctx": ctx,
                      "weights": "int4 dequantized per step" if int4 else "fp32 (widened from bf16 once)"}))


def bandwidth(mb):
    a = np.ones(int(mb) * 1024 * 1024 // 4, dtype=np.float32)
    a.sum()
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t)
    print("%.2f" % (a.nbytes / best / 1e9))


def weight_bytes(dirpath):
    import struct
    with open(os.path.join(dirpath, "model.safetensors"), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
    c = json.load(open(os.path.join(dirpath, "config.json")))["text_config"]
    total = 0
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        size = t["data_offsets"][1] - t["data_offsets"][0]
        if name.endswith("embed_tokens_per_layer.weight"):
            size //= c["vocab_size_per_layer_input"]  # one row per token
        total += size
    print(json.dumps({"bytes_per_token": total}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    elif cmd == "numpy":
        numpy_layers(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "bandwidth":
        bandwidth(sys.argv[2])
    elif cmd == "bytes":
        weight_bytes(sys.argv[2])
