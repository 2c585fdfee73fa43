/* resize_cuda: the area downsampling, one thread per output pixel (the s x s block is read by one thread:
 * s is small, the source rows are shared by neighbouring threads through the L1). */
#include "backend.h"
#include "cuda_check.h"
#include "guided_px.h"

static __global__ void downsample_kernel(const uint8_t *__restrict__ src, size_t src_pitch, int C, int w, int h,
                                         int s, uint8_t *__restrict__ dst, size_t dst_pitch, int dw, int dh)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh)
        return;
    int g[3];
    mk_px_guide_at(src, src_pitch, C, w, h, s, x, y, g);
    uint8_t *d = dst + (size_t)y * dst_pitch + (size_t)x * C;
    for (int c = 0; c < C; c++)
        d[c] = (uint8_t)g[c];
}

extern "C" int mk_downsample_area_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s)
{
    dim3 block(32, 8);
    dim3 grid((unsigned)(dst->width + 31) / 32, (unsigned)(dst->height + 7) / 8);
    downsample_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const uint8_t *)src->data, src->pitch, src->channels,
                                                          src->width, src->height, s, (uint8_t *)dst->data,
                                                          dst->pitch, dst->width, dst->height);
    return MK_CUDA_LAUNCH_CHECK(downsample_kernel);
}
