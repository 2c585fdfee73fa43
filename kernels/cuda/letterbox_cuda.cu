/* letterbox_cuda: the fused letterbox kernel (one thread per output pixel, three coalesced plane stores). */
#include "backend.h"
#include "cuda_check.h"
#include "letterbox_px.h"

static __global__ void letterbox_kernel(mk_letterbox_t lb, const uint8_t *__restrict__ src, size_t src_pitch,
                                        int fmt, char *__restrict__ dst, size_t dst_pitch)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= lb.dst_w || y >= lb.dst_h)
        return;
    float v[3];
    mk_px_letterbox(&lb, src, src_pitch, fmt, x, y, v);
    size_t plane = (size_t)lb.dst_h * dst_pitch;
    float *out = (float *)(dst + (size_t)y * dst_pitch) + x;
    out[0] = v[0];
    *(float *)((char *)out + plane) = v[1];
    *(float *)((char *)out + 2 * plane) = v[2];
}

extern "C" int mk_letterbox_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, const mk_letterbox_t *lb)
{
    dim3 block(32, 8);
    dim3 grid((unsigned)(lb->dst_w + 31) / 32, (unsigned)(lb->dst_h + 7) / 8);
    letterbox_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>(*lb, (const uint8_t *)src->data, src->pitch,
                                                         (int)src->format, (char *)dst->data, dst->pitch);
    return MK_CUDA_LAUNCH_CHECK(letterbox_kernel);
}
