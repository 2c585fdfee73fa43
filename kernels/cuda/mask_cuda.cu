/* mask_cuda: the mask products on the device, one pass over the whole output (outside the pasted rectangle: 0). */
#include "backend.h"
#include "cuda_check.h"
#include "mask_cuda.h"

namespace {

__global__ void compose_kernel(const float *__restrict__ soft, size_t spitch, mk_mask_out_t o)
{
    int dx = blockIdx.x * blockDim.x + threadIdx.x, dy = blockIdx.y * blockDim.y + threadIdx.y;
    if (dx >= o.dw || dy >= o.dh)
        return;
    if (mk_mask_out_outside(o, dx, dy)) {
        mk_mask_out_zero(o, dx, dy);
        return;
    }
    int x = dx - o.x, y = dy - o.y;
    mk_mask_out_put(o, x, y, ((const float *)((const char *)soft + (size_t)y * spitch))[x]);
}

} // namespace

extern "C" int mk_mask_compose_cuda(mk_ctx_t *ctx, const mk_image_t *soft, mk_image_t *dst, const mk_mask_t *m)
{
    mk_mask_out_t o = mk_mask_out(dst, m, soft->width, soft->height);
    dim3 block(32, 8), grid((unsigned)(o.dw + 31) / 32, (unsigned)(o.dh + 7) / 8);
    compose_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const float *)soft->data, soft->pitch, o);
    return MK_CUDA_LAUNCH_CHECK(compose_kernel);
}
