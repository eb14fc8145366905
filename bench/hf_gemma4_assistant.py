"""hf_gemma4_assistant.py - an E4B-shaped Gemma 4 assistant ("MTP") drafter
made by transformers itself, random weights, for the speculative decoding
benchmark (bench/spec_gpu.sh; run where torch + transformers 5.17 exist, i.e.
through the device tool).

Gemma4AssistantForCausalLM(Gemma4AssistantConfig(...)): the shape
../shared/facts/gemma4.md gives for the challenge's drafter (4 layers, hidden
256), matched to bench/hf_gemma4_e4b.py's target: backbone_hidden_size 2560,
vocabulary 262144, head dims 256 (sliding) and 512 (full) with 2 KV heads as
the target's source layers, window 512; use_ordered_embeddings with 2048
centroids, top 32, token_ordering a random permutation. Saved in bf16 by
save_pretrained (config.json + model.safetensors). The weights are random, so
its drafts are almost never what the target says: this measures what
drafting costs, not how often it pays.

usage: hf_gemma4_assistant.py OUT_DIR [LAYERS]"""
import sys


def main():
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    out = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    text = dict(model_type="gemma4_text", vocab_size=262144, hidden_size=256, intermediate_size=2048,
                num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=256,
                global_head_dim=512, hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
                num_kv_shared_layers=layers,
                layer_types=["full_attention" if i == layers - 1 else "sliding_attention" for i in range(layers)],
                sliding_window=512, max_position_embeddings=4096, rms_norm_eps=1e-6,
                final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh",
                rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                    "rope_theta": 1000000.0}},
                attention_bias=False, attention_k_eq_v=False, enable_moe_block=False, use_double_wide_mlp=False,
                bos_token_id=2, eos_token_id=1, pad_token_id=0)
    cfg = Gemma4AssistantConfig(text_config=text, backbone_hidden_size=2560, use_ordered_embeddings=True,
                                num_centroids=2048, centroid_intermediate_top_k=32)
    torch.manual_seed(7)
    m = Gemma4AssistantForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, p.shape[-1] ** -0.5)
        m.masked_embedding.token_ordering.copy_(torch.randperm(262144))
    m.save_pretrained(out)
    print("assistant written to", out)


if __name__ == "__main__":
    main()
