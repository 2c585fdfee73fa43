/* shape_cuda: the rounded-box fill (one thread per pixel). */
#include "backend.h"
#include "cuda_check.h"
#include "shape_px.h"

template <typename T>
static __global__ void rbox_kernel(char *__restrict__ dst, size_t pitch, int width, int height, mk_rbox_plan_t p,
                                   T in)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height)
        return;
    T *row = (T *)(dst + (size_t)y * pitch);
    row[x] = mk_px_rbox_inside(&p, x, y) ? in : (T)0;
}

extern "C" int mk_shape_fill_cuda(mk_ctx_t *ctx, mk_image_t *dst, const mk_rbox_plan_t *p)
{
    dim3 block(32, 8);
    dim3 grid((unsigned)(dst->width + 31) / 32, (unsigned)(dst->height + 7) / 8);
    if (dst->dtype == MK_U8) {
        rbox_kernel<uint8_t><<<grid, block, 0, MK_STREAM(ctx)>>>((char *)dst->data, dst->pitch, dst->width,
                                                                 dst->height, *p, (uint8_t)255);
        return MK_CUDA_LAUNCH_CHECK(rbox_kernel<uint8_t>);
    }
    rbox_kernel<float><<<grid, block, 0, MK_STREAM(ctx)>>>((char *)dst->data, dst->pitch, dst->width, dst->height,
                                                           *p, 1.0f);
    return MK_CUDA_LAUNCH_CHECK(rbox_kernel<float>);
}
