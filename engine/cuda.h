/* cuda.h - the Gemma 4 decode step on the GPU, for the engine's
 * FG_DEVICE_CUDA path: the loaded model's weights copied to the device (INT4
 * repacked into the kernels' tile layout, q|k|v and gate|up concatenated),
 * a device KV cache, and one token's forward pass built from the kernels of
 * kernels/fg_kernels.h, captured once as a CUDA graph and replayed.
 *
 * The math is engine/cpu's, operation for operation (fp32 activations and
 * accumulation, the same RoPE table); sums run in another order, so logits
 * agree with the CPU path within rounding, and bit for bit between runs. */
#ifndef FG_ENGINE_CUDA_H
#define FG_ENGINE_CUDA_H

#include <stdint.h>

#include "engine/model.h"
#include "err.h"

struct fg_g4_gpu;

/* Uploads m (borrowed; must outlive the result). inv[2] are the RoPE inverse
 * frequency tables by layer type (fg_g4_rope_table), window the sliding
 * window in use, max_seq the cache size. Embedding tables in F16 or F32 are
 * widened to f32 on the device (4 bytes an element). FG_EUNSUPPORTED names
 * what this path cannot run; FG_EDEVICE when there is no GPU, FG_ENOMEM when
 * the GPU lacks the memory (the error names the tensor). */
int fg_g4_gpu_new(struct fg_g4_gpu **out, const struct fg_g4_model *m, const float *const inv[2], int window,
		  int max_seq, struct fg_err *err);
void fg_g4_gpu_free(struct fg_g4_gpu *g);

/* One token id at position pos (the cache holds positions < pos); a
 * multimodal placeholder id is embedded as pad (fg_g4_input_id). When
 * logits is not NULL it receives the softcapped logits [vocab]; *best (may be
 * NULL) the argmax, lowest id on ties. */
int fg_g4_gpu_step(struct fg_g4_gpu *g, int32_t id, int pos, float *logits, int32_t *best, struct fg_err *err);

/* n prompt tokens at positions pos, pos + 1, ... whose logits nobody reads
 * (the cache holds positions < pos): in chunks of up to FG_PREFILL_CHUNK rows
 * (default 64; 0 = one fg_g4_gpu_step each), each chunk's matrices read once
 * (a mixture of experts' experts row by row). The caches end up with the
 * same bits as n steps would leave (fg_kernels.h, "prompt chunks"). */
int fg_g4_gpu_prefill(struct fg_g4_gpu *g, const int32_t *ids, int n, int pos, struct fg_err *err);
/* The rows per chunk in use (0: token by token). */
int fg_g4_gpu_chunk(const struct fg_g4_gpu *g);

/* "NVIDIA H200 (sm_90, ...)"; borrowed. */
const char *fg_g4_gpu_device(const struct fg_g4_gpu *g);
/* The device's identity (name, compute capability, SMs, driver and CUDA
 * versions); see fg_kctx_device_info. */
struct fg_kdevice;
int fg_g4_gpu_info(const struct fg_g4_gpu *g, struct fg_kdevice *out, struct fg_err *err);

#endif
