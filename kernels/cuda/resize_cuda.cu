/* resize_cuda: the area downsampling, one thread per output pixel (the s x s block is read by one thread:
 * s is small, the source rows are shared by neighbouring threads through the L1), and the bilinear resize, one
 * thread per output pixel. */
#include "backend.h"
#include "composite_px.h"
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

static __global__ void bilinear_kernel(const uint8_t *__restrict__ src, size_t src_pitch, int C, int w, int h,
                                       uint8_t *__restrict__ dst, size_t dst_pitch, int dw, int dh)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh)
        return;
    int x0, x1, ax, y0, y1, ay;
    mk_px_bilinear_pos(x, w, dw, &x0, &x1, &ax);
    mk_px_bilinear_pos(y, h, dh, &y0, &y1, &ay);
    const uint8_t *r0 = src + (size_t)y0 * src_pitch, *r1 = src + (size_t)y1 * src_pitch;
    uint8_t *d = dst + (size_t)y * dst_pitch + (size_t)x * C;
    for (int c = 0; c < C; c++)
        d[c] = mk_px_bilinear(r0[x0 * C + c], r0[x1 * C + c], r1[x0 * C + c], r1[x1 * C + c], ax, ay);
}

extern "C" int mk_resize_bilinear_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    dim3 block(32, 8);
    dim3 grid((unsigned)(dst->width + 31) / 32, (unsigned)(dst->height + 7) / 8);
    bilinear_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const uint8_t *)src->data, src->pitch, src->channels,
                                                        src->width, src->height, (uint8_t *)dst->data, dst->pitch,
                                                        dst->width, dst->height);
    return MK_CUDA_LAUNCH_CHECK(bilinear_kernel);
}
