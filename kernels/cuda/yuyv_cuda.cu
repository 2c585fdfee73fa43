/* yuyv_cuda: the YUYV -> RGB/BGR kernel (one thread per pixel pair: one 4-byte load, six byte stores). */
#include "backend.h"
#include "cuda_check.h"
#include "letterbox_px.h"

static __global__ void yuyv_kernel(const uint8_t *__restrict__ src, size_t src_pitch, uint8_t *__restrict__ dst,
                                   size_t dst_pitch, int pairs, int height, int bgr)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (p >= pairs || y >= height)
        return;
    const uint8_t *s = src + (size_t)y * src_pitch + (size_t)p * 4;
    uint8_t *d = dst + (size_t)y * dst_pitch + (size_t)p * 6;
    uint8_t y0 = s[0], u = s[1], y1 = s[2], v = s[3];
    uint8_t a[3], b[3];
    mk_px_yuv_to_rgb(y0, u, v, a);
    mk_px_yuv_to_rgb(y1, u, v, b);
    for (int c = 0; c < 3; c++) {
        d[bgr ? 2 - c : c] = a[c];
        d[3 + (bgr ? 2 - c : c)] = b[c];
    }
}

extern "C" int mk_yuyv_to_rgb_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    int pairs = src->width / 2;
    dim3 block(64, 4);
    dim3 grid((unsigned)(pairs + 63) / 64, (unsigned)(src->height + 3) / 4);
    yuyv_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const uint8_t *)src->data, src->pitch, (uint8_t *)dst->data,
                                                    dst->pitch, pairs, src->height, dst->format == MK_FMT_BGR);
    return MK_CUDA_LAUNCH_CHECK(yuyv_kernel);
}
