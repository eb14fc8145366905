/* moe.cu - the kernels that attention_bias and mixture-of-experts layers
 * (enable_moe_block) add to the decode step: a bias add after a projection.
 * No reductions across threads here; no float atomics. */
#include <math.h>

#include "kernels/kcommon.cuh"

__global__ void add_bias(float *y, const float *__restrict__ b, int n)
{
	fg_pdl_trigger(); /* the next kernel may launch and wait for us */
	fg_pdl_wait();    /* everything earlier kernels wrote is visible */
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] += b[i];
}

extern "C" int fg_k_add_bias(struct fg_kctx *ctx, float *d_y, const float *d_b, int n, struct fg_err *err)
{
	if (fg_need_ctx(ctx, err))
		return FG_EINVAL;
	if (n < 1 || !d_b)
		return fg_err_set(err, FG_EINVAL, "bias add: n = %d, bias %s", n, d_b ? "given" : "missing");
	fg_launch_pdl(ctx, add_bias, dim3((n + 255) / 256), dim3(256), 0, d_y, d_b, n);
	return fg_launched("bias add", err);
}
