#!/usr/bin/env python3
"""moe_shape.py OUT LAYERS VOCAB - a Gemma4ForCausalLM checkpoint with 26B-A4B's
layer shapes (hidden 2816, 16 heads, sliding 8 KV heads of 256, full 2 KV
heads of 512 with k_eq_v, dense MLP 2112, 128 experts of 704, top 8), LAYERS
layers (the last full), a VOCAB-token tied head, bf16 values tiled from one
random block (timing only; pure Python, no numpy). Also writes
OUT-dense/config.json (enable_moe_block false) beside a link to the same
weights: the two `fgpack run --device cuda` speeds give the experts' cost
(docs/gpu.md, "Mixture of experts and attention biases")."""
import json, math, os, random, struct, sys

out, L, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
H, NH, I, E, MI = 2816, 16, 2112, 128, 704
rnd = random.Random(7)


def bf16(f):
    u = struct.unpack('<I', struct.pack('<f', f))[0]
    return (u + 0x7fff + ((u >> 16) & 1)) >> 16


BLOCK = b''.join(struct.pack('<H', bf16(rnd.gauss(0, 0.03))) for _ in range(1 << 18))
BLOCK_V = b''.join(struct.pack('<H', bf16(rnd.uniform(0.5, 1.5))) for _ in range(1 << 14))
tensors = []  # (name, shape, vector?)


def t(name, shape, vec=False):
    tensors.append(("model." + name, shape, vec))


t("embed_tokens.weight", [V, H])
t("norm.weight", [H], True)
types = ["sliding_attention"] * (L - 1) + ["full_attention"]
for i in range(L):
    p = "layers.%d." % i
    full = types[i] == "full_attention"
    hd, kv = (512, 2) if full else (256, 8)
    t(p + "self_attn.q_proj.weight", [NH * hd, H])
    t(p + "self_attn.k_proj.weight", [kv * hd, H])
    if not full:
        t(p + "self_attn.v_proj.weight", [kv * hd, H])
    t(p + "self_attn.o_proj.weight", [H, NH * hd])
    t(p + "self_attn.q_norm.weight", [hd], True)
    t(p + "self_attn.k_norm.weight", [hd], True)
    t(p + "mlp.gate_proj.weight", [I, H])
    t(p + "mlp.up_proj.weight", [I, H])
    t(p + "mlp.down_proj.weight", [H, I])
    for n in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
              "post_feedforward_layernorm", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_1",
              "post_feedforward_layernorm_2"]:
        t(p + n + ".weight", [H], True)
    t(p + "layer_scalar", [1], True)
    t(p + "router.proj.weight", [E, H])
    t(p + "router.scale", [H], True)
    t(p + "router.per_expert_scale", [E], True)
    t(p + "experts.gate_up_proj", [E, 2 * MI, H])
    t(p + "experts.down_proj", [E, H, MI])
hdr, off = {}, 0
for name, shape, vec in tensors:
    n = 2 * math.prod(shape)
    hdr[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
    off += n
hj = json.dumps(hdr).encode()
hj += b' ' * (-len(hj) % 8)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack('<Q', len(hj)) + hj)
    for name, shape, vec in tensors:
        n, blk = 2 * math.prod(shape), BLOCK_V if vec else BLOCK
        for _ in range(n // len(blk)):
            f.write(blk)
        f.write(blk[:n % len(blk)])
cfg = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "attention_k_eq_v": True,
       "enable_moe_block": True, "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
       "hidden_activation": "gelu_pytorch_tanh", "hidden_size": H, "hidden_size_per_layer_input": 0,
       "intermediate_size": I, "max_position_embeddings": 4096, "moe_intermediate_size": MI,
       "num_attention_heads": NH, "num_experts": E, "num_global_key_value_heads": 2, "num_hidden_layers": L,
       "num_key_value_heads": 8, "num_kv_shared_layers": 0, "rms_norm_eps": 1e-06,
       "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                              "rope_type": "proportional"},
                           "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
       "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": 8, "vocab_size": V,
       "layer_types": types, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
       "use_double_wide_mlp": False}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
d = out.rstrip("/") + "-dense"
os.makedirs(d, exist_ok=True)
cfg["enable_moe_block"] = False
json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
if not os.path.exists(os.path.join(d, "model.safetensors")):
    os.symlink(os.path.abspath(os.path.join(out, "model.safetensors")), os.path.join(d, "model.safetensors"))
print("wrote %s: %.2f GB" % (out, off / 1e9))
