#!/usr/bin/env python3
"""rope_probe.py - the RoPE tables transformers itself computes for Gemma 4
text configs with each rope_type, written as a fixture the engine's unit test
compares its own tables with (tests/fixtures/oracle/rope_tables.json, read by
tests/unit/test_rope.c). Run on the GPU machine (torch + transformers 5.17).

For each case below: Gemma4TextConfig(..., rope_parameters=...) of a tiny
shape (head_dim 16 on sliding layers, 32 on full ones), then transformers'
own Gemma4TextRotaryEmbedding(config), and for each layer type its
inverse-frequency buffer and attention scaling (the factor that multiplies
cos and sin) as built, then after forward calls: one uncached pass over
positions 0..L-1 for several L (a fresh module each), and a cached sequence
(a prefill, then one position per call), the inverse frequencies in use after
each call. A case transformers refuses records the error instead.

Every float is written with repr() of its float32 value widened to double,
exact. usage: OUT=dir python3 rope_probe.py
"""
import json
import os
import sys
import traceback

OUT = os.environ.get("OUT", "/tmp/rope_probe_out")

S, F = "sliding_attention", "full_attention"


def rp(s, f):
    return {S: s, F: f}


# (name, max_position_embeddings, rope_parameters)
CASES = [
    ("default-factor", 64, rp({"rope_type": "default", "rope_theta": 10000.0, "factor": 4.0,
                               "partial_rotary_factor": 0.5},
                              {"rope_type": "default", "rope_theta": 1000000.0, "factor": 2.0})),
    ("proportional-factor", 64, rp({"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                                   {"rope_type": "proportional", "rope_theta": 1000000.0,
                                    "partial_rotary_factor": 0.25, "factor": 2.0})),
    ("linear", 64, rp({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
                      {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 8})),
    ("linear-partial", 64, rp({"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0,
                               "partial_rotary_factor": 0.5},
                              {"rope_type": "default", "rope_theta": 1000000.0})),
    ("yarn", 64, rp({"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                     "original_max_position_embeddings": 16, "beta_fast": 16.0, "beta_slow": 2.0},
                    {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0,
                     "original_max_position_embeddings": 16, "mscale": 1.0, "mscale_all_dim": 0.5,
                     "truncate": False})),
    ("yarn-truncate", 64, rp({"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                              "original_max_position_embeddings": 16, "truncate": False},
                             {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                              "original_max_position_embeddings": 16, "truncate": True})),
    ("yarn-defaults", 64, rp({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0},
                             {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 3.0,
                              "attention_factor": 1.5, "original_max_position_embeddings": 8})),
    ("yarn-nofactor", 64, rp({"rope_type": "yarn", "rope_theta": 10000.0, "factor": None,
                              "original_max_position_embeddings": 16},
                             {"rope_type": "default", "rope_theta": 1000000.0})),
    ("yarn-beta", 64, rp({"rope_type": "yarn", "rope_theta": 500.0, "factor": 16.0, "beta_fast": 4,
                          "beta_slow": 0.5, "original_max_position_embeddings": 32, "mscale": 0.707,
                          "mscale_all_dim": 0.707},
                         {"rope_type": "yarn", "rope_theta": 50000.0, "factor": 1.0,
                          "original_max_position_embeddings": 64})),
    ("llama3", 64, rp({"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
                      {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 2.0, "original_max_position_embeddings": 16})),
    ("llama3-noomax", 64, rp({"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0},
                             {"rope_type": "default", "rope_theta": 1000000.0})),
    ("dynamic", 32, rp({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
                       {"rope_type": "dynamic", "rope_theta": 1000000.0, "factor": 3.7})),
    ("dynamic-partial", 32, rp({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0,
                                "partial_rotary_factor": 0.5},
                               {"rope_type": "default", "rope_theta": 1000000.0})),
    ("longrope", 64, rp({"rope_type": "longrope", "rope_theta": 10000.0,
                         "short_factor": [1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 4.0, 5.0],
                         "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0],
                         "original_max_position_embeddings": 16},
                        {"rope_type": "longrope", "rope_theta": 1000000.0, "factor": 3.0, "attention_factor": 1.2,
                         "short_factor": [1.0 + 0.05 * i for i in range(16)],
                         "long_factor": [1.0 + 0.5 * i for i in range(16)],
                         "original_max_position_embeddings": 16})),
    ("unknown", 64, rp({"rope_type": "ntk", "rope_theta": 10000.0, "factor": 2.0},
                       {"rope_type": "default", "rope_theta": 1000000.0})),
]

CALLS = [8, 16, 17, 32, 40]      # uncached passes over positions 0..L-1
PREFILL, STEPS = 12, 10          # cached: positions 0..11, then 12..21 one at a time


def f32list(t):
    return [float(x) for x in t.detach().float().reshape(-1).tolist()]


def case(name, M, params):
    import torch
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
    out = {"name": name, "max_position_embeddings": M, "rope_parameters": json.loads(json.dumps(params))}

    def make():
        cfg = Gemma4TextConfig(vocab_size=64, vocab_size_per_layer_input=64, hidden_size=32, intermediate_size=32,
                               num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                               global_head_dim=32, hidden_size_per_layer_input=0, layer_types=[S, F],
                               sliding_window=4, max_position_embeddings=M,
                               rope_parameters=json.loads(json.dumps(params)))
        return cfg, Gemma4TextRotaryEmbedding(cfg)

    try:
        cfg, rot = make()
    except BaseException as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        return out
    out["config_rope_parameters"] = json.loads(json.dumps(cfg.rope_parameters, default=str))
    out["types"] = {}
    for lt in (S, F):
        d = {"rope_type": rot.rope_type.get(lt), "head_dim": 16 if lt == S else 32,
             "inv_freq": f32list(getattr(rot, lt + "_inv_freq")),
             "attention_scaling": float(getattr(rot, lt + "_attention_scaling"))}
        calls = []
        for L in CALLS:
            r = {"L": L}
            try:
                _, m = make()
                x = torch.zeros(1, L, 8)
                cos, sin = m(x, torch.arange(L)[None], lt)
                r["inv_freq"] = f32list(getattr(m, lt + "_inv_freq"))
                r["cos_last"] = f32list(cos[0, -1])
                r["sin_last"] = f32list(sin[0, -1])
            except BaseException as e:
                r["error"] = "%s: %s" % (type(e).__name__, e)
            calls.append(r)
        d["uncached"] = calls
        seq = []
        try:
            _, m = make()
            m(torch.zeros(1, PREFILL, 8), torch.arange(PREFILL)[None], lt)
            seq.append({"pos_max": PREFILL - 1, "inv_freq": f32list(getattr(m, lt + "_inv_freq"))})
            for p in range(PREFILL, PREFILL + STEPS):
                cos, sin = m(torch.zeros(1, 1, 8), torch.tensor([[p]]), lt)
                seq.append({"pos_max": p, "inv_freq": f32list(getattr(m, lt + "_inv_freq")),
                            "cos0": float(cos[0, 0, 0])})
        except BaseException as e:
            seq.append({"error": "%s: %s" % (type(e).__name__, e)})
        d["cached"] = seq
        out["types"][lt] = d
    return out


def main():
    import torch
    import transformers
    res = {"made_by": "transformers %s, torch %s (tests/oracle/rope_probe.py)" % (transformers.__version__,
                                                                                 torch.__version__),
           "cases": []}
    try:
        import inspect
        import transformers.modeling_rope_utils as ru
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "modeling_rope_utils.py"), "w") as f:
            f.write(inspect.getsource(ru))
    except BaseException:
        traceback.print_exc()
    for name, M, params in CASES:
        try:
            r = case(name, M, params)
        except BaseException as e:
            r = {"name": name, "error": "%s: %s" % (type(e).__name__, e)}
        print("==", name, r.get("error", ""), flush=True)
        for lt, d in r.get("types", {}).items():
            print("  %s %s scaling %.6f inv %s" % (lt, d["rope_type"], d["attention_scaling"],
                                                 ["%.4g" % v for v in d["inv_freq"]]), flush=True)
            for c in d["uncached"]:
                if "error" in c:
                    print("   L=%d error %s" % (c["L"], c["error"]), flush=True)
                elif c["inv_freq"] != d["inv_freq"]:
                    print("   L=%d inv changed" % c["L"], flush=True)
            for c in d["cached"]:
                if "error" in c:
                    print("   cached error %s" % c["error"], flush=True)
        res["cases"].append(r)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rope_tables.json"), "w") as f:
        json.dump(res, f, indent=0)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
