/* draft.cu - the assistant drafter's centroid-masked head
 * (use_ordered_embeddings, engine/draft.h): the top_k best of the centroid
 * scores and their clusters' token ids (fg_k_centroid_select), and the dot
 * products of the lm_head rows of those tokens with the drafter's output
 * (fg_k_gather_matvec). Both read only what earlier kernels wrote through
 * device memory, so one captured graph serves every draft step. No float
 * atomics; every sum in a fixed order (kernels/cpu_twin.c gives the bits). */
#include "kernels/kcommon.cuh"

/* ---- top_k of the centroid scores ---------------------------------------------*/

#define CS_THREADS 512

/* An order-preserving key: a larger number has a larger key, -0 and +0 the
 * same one, every NaN key 0, below -Inf's (0x007fffff). */
__device__ __forceinline__ uint32_t cs_key(float f)
{
	uint32_t b = __float_as_uint(f);

	if (f != f)
		return 0u;
	if ((b << 1) == 0u)
		b = 0u;
	return b & 0x80000000u ? ~b : b | 0x80000000u;
}

/* One block. A radix select on the keys, 8 bits a pass from the top, finds
 * the high bits pre (32 - shift of them) of the top_k-th key: fewer than
 * top_k keys have larger high bits (all chosen), and `need` of those whose
 * high bits equal pre are chosen too, the lowest indices first (a scan in
 * index order; none when they are all needed). Each pass's histogram counts
 * with integer atomics, so its counts, and the choice, never vary. The
 * chosen top_k (key, index) pairs, distinct, are then ranked by larger key,
 * then lower index, and cluster c's `per` token ids copied out in rank order. */
__global__ void __launch_bounds__(CS_THREADS)
	centroid_select(int32_t *__restrict__ ids, const float *__restrict__ z, int n, int k,
			const int32_t *__restrict__ order, int per)
{
	__shared__ unsigned hist[256], wcount[CS_THREADS / 32];
	__shared__ uint32_t ckey[FG_CENTROID_MAX_K];
	__shared__ int32_t cidx[FG_CENTROID_MAX_K], sel[FG_CENTROID_MAX_K];
	__shared__ unsigned s_digit, s_need, s_count;
	__shared__ int s_taken;
	int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, shift = 32, all;
	unsigned pre = 0, need = (unsigned)k;

	fg_pdl_trigger();
	fg_pdl_wait(); /* the centroid scores come from the kernel before */
	for (;;) {
		for (int i = tid; i < 256; i += CS_THREADS)
			hist[i] = 0;
		__syncthreads();
		for (int i = tid; i < n; i += CS_THREADS) {
			uint32_t key = cs_key(z[i]);

			if (shift == 32 || key >> shift == pre)
				atomicAdd(&hist[(key >> (shift - 8)) & 255u], 1u);
		}
		__syncthreads();
		if (warp == 0) { /* lane l holds bins 255 - 8l down to 248 - 8l */
			unsigned c[8], s = 0, inc;

#pragma unroll
			for (int t = 0; t < 8; t++)
				c[t] = hist[255 - 8 * lane - t], s += c[t];
			inc = s;
			for (int o = 1; o < 32; o <<= 1) {
				unsigned v = __shfl_up_sync(0xffffffffu, inc, o);

				if (lane >= o)
					inc += v;
			}
			if (inc - s < need && need <= inc) { /* one lane: the top_k-th key is in its bins */
				unsigned cum = inc - s;

				for (int t = 0; t < 8; t++) {
					if (cum + c[t] >= need) {
						s_digit = 255u - 8u * lane - t, s_need = need - cum, s_count = c[t];
						break;
					}
					cum += c[t];
				}
			}
		}
		__syncthreads();
		pre = pre << 8 | s_digit, need = s_need, shift -= 8;
		if (shift == 0 || s_count == need)
			break;
		/* s_* are written again only after the next pass's histogram barrier */
	}
	all = s_count == need; /* every key with these high bits is chosen */
	if (tid == 0)
		s_taken = 0;
	__syncthreads();
	for (int i = tid; i < n; i += CS_THREADS) {
		uint32_t key = cs_key(z[i]), hi = key >> shift;

		if (hi > pre || (all && hi == pre)) { /* at most top_k of these: slots in any order */
			int s = atomicAdd(&s_taken, 1);

			ckey[s] = key, cidx[s] = i;
		}
	}
	if (!all) { /* the first `need` in index order of the keys with high bits pre */
		unsigned base = 0, gt = (unsigned)k - need;

		for (int t0 = 0; t0 < n && base < need; t0 += CS_THREADS) {
			int i = t0 + tid;
			uint32_t key = i < n ? cs_key(z[i]) : 0u;
			bool f = i < n && key >> shift == pre;
			unsigned b = __ballot_sync(0xffffffffu, f), off = base, tot = base;

			if (lane == 0)
				wcount[warp] = __popc(b);
			__syncthreads();
			for (int w = 0; w < CS_THREADS / 32; w++) {
				off += w < warp ? wcount[w] : 0u;
				tot += wcount[w];
			}
			off += __popc(b & ((1u << lane) - 1u));
			if (f && off < need)
				ckey[gt + off] = key, cidx[gt + off] = i;
			base = tot;
			__syncthreads(); /* wcount is rewritten next tile */
		}
	}
	__syncthreads();
	if (tid < k) {
		uint32_t mk = ckey[tid];
		int mi = cidx[tid], r = 0;

		for (int j = 0; j < k; j++)
			r += ckey[j] > mk || (ckey[j] == mk && cidx[j] < mi);
		sel[r] = mi;
	}
	__syncthreads();
	for (long long e = tid, tot = (long long)k * per; e < tot; e += CS_THREADS) {
		long long i = e / per;

		ids[e] = order[(long long)sel[i] * per + (e - i * per)];
	}
}

extern "C" int fg_k_centroid_select(struct fg_kctx *ctx, int32_t *d_ids, const float *d_z, int n, int top_k,
				    const int32_t *d_order, int per, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || n > FG_CENTROID_MAX_N || top_k < 1 || top_k > FG_CENTROID_MAX_K || top_k > n || per < 1)
		return fg_err_set(err, FG_EINVAL, "centroid select: top %d of %d (1..%d of at most %d), %d per cluster",
				  top_k, n, FG_CENTROID_MAX_K, FG_CENTROID_MAX_N, per);
	if (!d_ids || !d_z || !d_order)
		return fg_err_set(err, FG_EINVAL, "centroid select: ids, scores or token order missing");
	fg_launch_pdl(ctx, centroid_select, dim3(1), dim3(CS_THREADS), 0, d_ids, d_z, n, top_k, d_order, per);
	return fg_launched("centroid select", err);
}

/* ---- the chosen tokens' logits --------------------------------------------------*/

#define GM_WARPS 4  /* rows per block, a warp each */
#define GM_UNROLL 4 /* 16-byte loads of a lane in flight at once */

/* Warp w of block b: y[4b + w] = table row ids[4b + w] . x. Lane l sums, in
 * order, the 16-byte pieces l, l + 32, l + 64, ... of the row (PER elements
 * each, in element order, one fmaf each), then, if k is not a multiple of
 * PER, the tail element k - k % PER + l, then a fixed xor tree: the order of
 * fg_k_moe_matvec's rows. VEC: the table and its rows are 16-byte aligned
 * and read 16 bytes a load; otherwise element by element in the same order.
 * A negative id gives NaN. */
template <typename T, bool VEC>
__global__ void __launch_bounds__(GM_WARPS * 32)
	gather_matvec(float *__restrict__ y, const T *__restrict__ table, const int32_t *__restrict__ ids, int n_ids,
		      const float *__restrict__ x, int k)
{
	constexpr int PER = 16 / sizeof(T);
	int j = blockIdx.x * GM_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31, kp = k / PER, id;
	float acc = 0.0f;

	fg_pdl_trigger();
	fg_pdl_wait(); /* ids and x come from the kernels before */
	if (j >= n_ids)
		return;
	id = ids[j];
	if (id < 0) {
		if (lane == 0)
			y[j] = __int_as_float(0x7fc00000);
		return;
	}
	const T *row = table + (size_t)id * (size_t)k;

	for (int p = lane; p < kp; p += 32 * GM_UNROLL) {
		if constexpr (VEC) {
			uint4 v[GM_UNROLL];

#pragma unroll
			for (int u = 0; u < GM_UNROLL; u++)
				if (p + 32 * u < kp)
					v[u] = __ldg((const uint4 *)row + p + 32 * u);
#pragma unroll
			for (int u = 0; u < GM_UNROLL; u++)
				if (p + 32 * u < kp)
					acc = fg_dot16(row, v[u], x + (p + 32 * u) * PER, acc);
		} else {
			for (int u = 0; u < GM_UNROLL && p + 32 * u < kp; u++)
#pragma unroll
				for (int t = 0; t < PER; t++) {
					int e = (p + 32 * u) * PER + t;
					float f;

					if constexpr (sizeof(T) == 2)
						f = fg_bf16f(__ldg(row + e));
					else
						f = __ldg(row + e);
					acc = fmaf(f, x[e], acc);
				}
		}
	}
	if (kp * PER + lane < k) { /* the tail, as fg_k_moe_matvec's rows */
		float f;

		if constexpr (sizeof(T) == 2)
			f = fg_bf16f(__ldg(row + kp * PER + lane));
		else
			f = __ldg(row + kp * PER + lane);
		acc = fmaf(f, x[kp * PER + lane], acc);
	}
	acc = fg_warp_sum(acc);
	if (lane == 0)
		y[j] = acc;
}

template <typename T>
static void gather_launch(struct fg_kctx *ctx, float *d_y, const T *d_table, const int32_t *d_ids, int n_ids,
			  const float *d_x, int k)
{
	dim3 grid((unsigned)((n_ids + GM_WARPS - 1) / GM_WARPS)), block(GM_WARPS * 32);

	if (((uintptr_t)d_table & 15) == 0 && k % (16 / (int)sizeof(T)) == 0) /* rows 16-byte aligned */
		fg_launch_pdl(ctx, gather_matvec<T, true>, grid, block, 0, d_y, d_table, d_ids, n_ids, d_x, k);
	else
		fg_launch_pdl(ctx, gather_matvec<T, false>, grid, block, 0, d_y, d_table, d_ids, n_ids, d_x, k);
}

extern "C" int fg_k_gather_matvec(struct fg_kctx *ctx, float *d_y, const void *d_table, int bf16, const int32_t *d_ids,
				  int n_ids, const float *d_x, int k, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n_ids < 0 || k < 1 || k > FG_GATHER_MAX_K)
		return fg_err_set(err, FG_EINVAL, "gather matvec: %d rows of k = %d (k from 1 to %d)", n_ids, k,
				  FG_GATHER_MAX_K);
	if (!d_y || !d_table || !d_ids || !d_x)
		return fg_err_set(err, FG_EINVAL, "gather matvec: output, table, ids or x missing");
	if ((uintptr_t)d_x & 15)
		return fg_err_set(err, FG_EINVAL, "gather matvec: x at %p is not 16-byte aligned", (const void *)d_x);
	if ((!bf16 && ((uintptr_t)d_table & 3)) || (bf16 && ((uintptr_t)d_table & 1)))
		return fg_err_set(err, FG_EINVAL, "gather matvec: table at %p is not %d-byte aligned", d_table,
				  bf16 ? 2 : 4);
	if (n_ids == 0)
		return 0;
	if (bf16)
		gather_launch(ctx, d_y, (const uint16_t *)d_table, d_ids, n_ids, d_x, k);
	else
		gather_launch(ctx, d_y, (const float *)d_table, d_ids, n_ids, d_x, k);
	return fg_launched("gather matvec", err);
}

FG_KTRACE_TU(draft)
