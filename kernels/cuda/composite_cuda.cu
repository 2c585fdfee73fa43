/* composite_cuda: the blend (one thread per pixel) and the blur. The blur's column passes give each thread one
 * byte column, walked down with the running sum of composite_px.h (a warp reads 32 neighbouring bytes of a row:
 * coalesced). Its row passes are column passes of the transposed image: transpose into scratch, three column
 * passes there, transpose back into dst, then the three column passes of the image. */
#include "backend.h"
#include "composite_px.h"
#include "cuda_check.h"

/* frame, bg and out may be one buffer (in place): no __restrict__. */
static __global__ void composite_kernel(const uint8_t *frame, size_t fpitch, const uint8_t *alpha, size_t apitch,
                                        const uint8_t *bg, size_t bpitch, uint8_t *out, size_t opitch, int width,
                                        int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height)
        return;
    const uint8_t *f = frame + (size_t)y * fpitch + (size_t)x * 3, *b = bg + (size_t)y * bpitch + (size_t)x * 3;
    int a = alpha[(size_t)y * apitch + x];
    uint8_t v0 = mk_px_blend(f[0], b[0], a), v1 = mk_px_blend(f[1], b[1], a), v2 = mk_px_blend(f[2], b[2], a);
    uint8_t *o = out + (size_t)y * opitch + (size_t)x * 3;
    o[0] = v0;
    o[1] = v1;
    o[2] = v2;
}

extern "C" int mk_composite_cuda(mk_ctx_t *ctx, const mk_image_t *frame, const mk_image_t *alpha,
                                 const mk_image_t *bg, mk_image_t *out)
{
    dim3 block(32, 8);
    dim3 grid((unsigned)(frame->width + 31) / 32, (unsigned)(frame->height + 7) / 8);
    composite_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const uint8_t *)frame->data, frame->pitch,
                                                         (const uint8_t *)alpha->data, alpha->pitch,
                                                         (const uint8_t *)bg->data, bg->pitch, (uint8_t *)out->data,
                                                         out->pitch, frame->width, frame->height);
    return MK_CUDA_LAUNCH_CHECK(composite_kernel);
}

static const int kTile = 32, kTileRows = 8;

/* dst (h x w pixels of C bytes) = src (w x h) transposed, through a 32 x 32 pixel tile in shared memory so that
 * both the reads and the writes run along rows. */
template <int C>
static __global__ void transpose_kernel(const uint8_t *__restrict__ src, size_t spitch, int w, int h,
                                        uint8_t *__restrict__ dst, size_t dpitch)
{
    __shared__ uint8_t tile[kTile][kTile * C + 1];
    int bx = blockIdx.x * kTile, by = blockIdx.y * kTile, tx = threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        int x = bx + tx, y = by + j;
        if (x < w && y < h)
            for (int c = 0; c < C; c++)
                tile[j][tx * C + c] = src[(size_t)y * spitch + (size_t)x * C + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        int ox = by + tx, oy = bx + j; /* output column = source row, output row = source column */
        if (ox < h && oy < w)
            for (int c = 0; c < C; c++)
                dst[(size_t)oy * dpitch + (size_t)ox * C + c] = tile[tx][j * C + c];
    }
}

/* One box pass down every byte column of a `rows` x `row_bytes` image. */
static __global__ void columns_kernel(const uint8_t *__restrict__ src, size_t spitch, uint8_t *__restrict__ dst,
                                      size_t dpitch, int row_bytes, int rows, int r)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= row_bytes)
        return;
    mk_px_box_line(src + i, (ptrdiff_t)spitch, dst + i, (ptrdiff_t)dpitch, rows, r);
}

/* A u8 image of geometry (w, h, C) at `data` with pitch `pitch`. */
struct plane {
    uint8_t *data;
    size_t pitch;
};

static int transpose(mk_ctx_t *ctx, plane src, int w, int h, int C, plane dst)
{
    dim3 block(kTile, kTileRows);
    dim3 grid((unsigned)(w + kTile - 1) / kTile, (unsigned)(h + kTile - 1) / kTile);
    if (C == 1) {
        transpose_kernel<1><<<grid, block, 0, MK_STREAM(ctx)>>>(src.data, src.pitch, w, h, dst.data, dst.pitch);
        return MK_CUDA_LAUNCH_CHECK(transpose_kernel<1>);
    }
    transpose_kernel<3><<<grid, block, 0, MK_STREAM(ctx)>>>(src.data, src.pitch, w, h, dst.data, dst.pitch);
    return MK_CUDA_LAUNCH_CHECK(transpose_kernel<3>);
}

static int columns(mk_ctx_t *ctx, plane src, plane dst, int row_bytes, int rows, int r)
{
    const int threads = 128;
    columns_kernel<<<(unsigned)(row_bytes + threads - 1) / threads, threads, 0, MK_STREAM(ctx)>>>(
        src.data, src.pitch, dst.data, dst.pitch, row_bytes, rows, r);
    return MK_CUDA_LAUNCH_CHECK(columns_kernel);
}

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

extern "C" int mk_blur_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int r)
{
    int w = src->width, h = src->height, C = src->channels;
    /* Two scratch images, each large enough for the transposed (w rows of h pixels) and the upright geometry. */
    size_t tpitch = round_up((size_t)h * C, 256), upitch = round_up((size_t)w * C, 256);
    size_t half = round_up(tpitch * w > upitch * h ? tpitch * w : upitch * h, 256);
    void *scratch;
    int rc = mk_ctx_scratch(ctx, MK_SCRATCH_BLUR, 2 * half, &scratch, NULL);
    if (rc)
        return rc;
    uint8_t *a = (uint8_t *)scratch, *b = a + half;
    plane in = {(uint8_t *)src->data, src->pitch}, out = {(uint8_t *)dst->data, dst->pitch};
    plane ta = {a, tpitch}, tb = {b, tpitch}, ua = {a, upitch}, ub = {b, upitch};
    /* Rows: src -> A (transposed), A -> B -> A -> B, B -> dst (upright). Columns: dst -> A -> B -> dst. */
    if ((rc = transpose(ctx, in, w, h, C, ta)) || (rc = columns(ctx, ta, tb, h * C, w, r)) ||
        (rc = columns(ctx, tb, ta, h * C, w, r)) || (rc = columns(ctx, ta, tb, h * C, w, r)) ||
        (rc = transpose(ctx, tb, h, w, C, out)) || (rc = columns(ctx, out, ua, w * C, h, r)) ||
        (rc = columns(ctx, ua, ub, w * C, h, r)) || (rc = columns(ctx, ub, out, w * C, h, r)))
        return rc;
    return 0;
}
