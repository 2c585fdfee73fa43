/* threshold_cuda: fixed threshold, 256-bin histogram and Otsu on the device.
 *
 * Otsu runs in two launches and never touches the host: hist_kernel builds per-warp shared-memory histograms, adds
 * them into a global one, and its last block to finish (a ticket counter) picks the threshold and resets the
 * global state for the next call; apply_kernel then reads the threshold from device memory. */
#include "backend.h"
#include "cuda_check.h"
#include "threshold_px.h"

#include <float.h>

namespace {

/* Device state kept between calls in the context's MK_SCRATCH_OTSU slot; zero between calls except out_*. */
struct otsu_state {
    unsigned hist[256];     /* accumulated by hist_kernel, reset by its last block */
    unsigned counter;       /* blocks finished */
    unsigned out_hist[256]; /* the last histogram, for mk_histogram */
    int out_thresh;         /* the last Otsu threshold, read by apply_kernel */
};

const int kHistThreads = 256, kWarps = kHistThreads / 32;

/* Four threshold rules on four packed bytes at once. */
__device__ __forceinline__ unsigned thresh4(unsigned v, unsigned t4, unsigned max4, int mode)
{
    unsigned above = __vcmpgtu4(v, t4); /* 0xff in each byte where v > t */
    switch (mode) {
    case MK_THRESH_BINARY: return above & max4;
    case MK_THRESH_BINARY_INV: return ~above & max4;
    case MK_THRESH_TRUNC: return __vminu4(v, t4);
    case MK_THRESH_TOZERO: return above & v;
    default: return ~above & v;
    }
}

/* One thread per 16 bytes of a row; vector loads where rows are 16-byte aligned. The threshold is `t`, or *tp
 * written by the preceding hist_kernel: then this kernel is a programmatic dependent launch (it may start while
 * hist_kernel runs) and waits for that grid's completion and memory before reading *tp. */
__global__ void apply_kernel(const uint8_t *src, size_t spitch, uint8_t *dst,
                             size_t dpitch, int width, int height, int t, const int *tp, int maxval, int mode,
                             int vec)
{
    int chunk = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int x = chunk * 16;
    if (x >= width || y >= height)
        return;
    if (tp) {
        cudaGridDependencySynchronize();
        t = *tp;
    }
    const uint8_t *s = src + (size_t)y * spitch + x;
    uint8_t *d = dst + (size_t)y * dpitch + x;
    if (vec && x + 16 <= width) {
        unsigned t4 = 0x01010101u * (unsigned)t, m4 = 0x01010101u * (unsigned)maxval;
        uint4 v = *(const uint4 *)s;
        v.x = thresh4(v.x, t4, m4, mode);
        v.y = thresh4(v.y, t4, m4, mode);
        v.z = thresh4(v.z, t4, m4, mode);
        v.w = thresh4(v.w, t4, m4, mode);
        *(uint4 *)d = v;
        return;
    }
    int n = width - x < 16 ? width - x : 16;
    for (int i = 0; i < n; i++)
        d[i] = mk_px_threshold(s[i], t, maxval, mode);
}

/* u / q rounded to nearest (as __ddiv_rn), given r = RN(1/q) and rl ~ 1/q - r, both computed off the critical
 * path, and c ~ u rl (to any relative accuracy better than 2^-40): y = RN(u r + c) is within half an ulp plus
 * about 2^-50 ulp, so faithful, and by Markstein's theorem (y faithful, r = RN(1/q)) the one correction
 * y + r (u - q y) rounds to the correctly rounded quotient. Checked against __ddiv_rn on 5e10 pairs
 * (tests/bench/NOTES.md). */
__device__ __forceinline__ double div_rn(double u, double q, double r, double c)
{
    double y = __fma_rn(u, r, c);
    double e = __fma_rn(-q, y, u);
    return __fma_rn(e, r, y);
}

/* Sum over the block (256 threads) of a 64-bit value, for thread 0. */
__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long *partial)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = v;
    __syncthreads();
    unsigned long long s = 0;
    for (int w = 0; w < kWarps; w++)
        s += partial[w];
    return s;
}

/* The first bin after k that is non-empty (want_nonzero) or empty, or 256. */
__device__ int next_bin(const unsigned *nonzero, int k, int want_nonzero)
{
    for (int w = (k + 1) >> 5, bit = (k + 1) & 31; w < kWarps; w++, bit = 0) {
        unsigned bits = (want_nonzero ? nonzero[w] : ~nonzero[w]) >> bit;
        if (bits)
            return (w << 5) + bit + __ffs(bits) - 1;
    }
    return 256;
}

/* Otsu's choice by the whole block (256 threads) on a histogram in shared memory: the same operations as
 * mk_px_otsu, reordered into parallel phases around the two recurrences (q1 and mu1) that must stay serial.
 *
 * The mu1 recurrence m_k = g_k(m_{k-1}) is the critical path. It runs only from the first non-empty bin (before it
 * everything is exactly 0) to the last bin whose sigma is computed (later steps cannot change earlier ones); its
 * operands are loaded one step ahead and its division uses the reciprocal computed in parallel (div_rn). Within a
 * run of empty bins every g_k is the same function (q1 does not change, i*p_i = 0), so once a step leaves m
 * unchanged, the rest of the run does too and is filled in without computing it; runs of non-empty bins go
 * through a loop without that test. */
__device__ int otsu_block(const unsigned *h, double total)
{
    __shared__ double p[256], q1[257], rq[257], rql[257], ip[257], iprl[257], mu1s[256];
    __shared__ unsigned long long partial[kWarps];
    __shared__ unsigned nonzero[kWarps]; /* bit i%32 of word i/32: h[i] != 0 */
    __shared__ int first_bin, last_bin;
    __shared__ double best_sigma[kWarps];
    __shared__ int best_i[kWarps];
    int i = threadIdx.x;
    double scale = __ddiv_rn(1.0, total);
    p[i] = __dmul_rn((double)h[i], scale);
    ip[i] = __dmul_rn((double)i, p[i]);
    unsigned nz = __ballot_sync(0xffffffffu, h[i] != 0);
    if ((i & 31) == 0)
        nonzero[i >> 5] = nz;
    if (i == 0) {
        first_bin = 256;
        last_bin = -1;
        q1[256] = rq[256] = rql[256] = ip[256] = iprl[256] = 0; /* read by the prefetch of the last step */
    }
    /* mu: every partial sum of i*h[i] is an integer below 2^53, so any order gives OpenCV's exact value. */
    double mu = __dmul_rn((double)block_sum_u64((unsigned long long)i * h[i], partial), scale);
    if (i == 0) {
        /* q1: a running sum in OpenCV's order; operands come in register chunks so that loads are not on it. */
        double q = 0, chunk[16];
        for (int c = 0; c < 256; c += 16) {
#pragma unroll
            for (int j = 0; j < 16; j++)
                chunk[j] = p[c + j];
#pragma unroll
            for (int j = 0; j < 16; j++) {
                q = __dadd_rn(q, chunk[j]);
                q1[c + j] = q;
            }
        }
    }
    __syncthreads();
    double q1i = q1[i], q2i = __dsub_rn(1.0, q1i);
    double lo = fmin(q1i, q2i), hi = fmax(q1i, q2i);
    bool skip = lo < FLT_EPSILON || hi > 1. - FLT_EPSILON;
    double r = skip ? -1.0 : __ddiv_rn(1.0, q1i);
    rq[i] = r;
    double rl = skip ? 0.0 : __dmul_rn(__fma_rn(-q1i, r, 1.0), r); /* 1/q1 - r to about 2^-105 */
    rql[i] = rl;
    iprl[i] = __dmul_rn(ip[i], rl);
    if (h[i])
        atomicMin(&first_bin, i);
    if (!skip)
        atomicMax(&last_bin, i);
    __syncthreads();
    if (i == 0) {
        int k = first_bin, last = last_bin;
        double m = 0, qprev = k > 0 ? q1[k - 1] : 0.0;
        /* Bins skipped for q1 < FLT_EPSILON (only in images of over 2^23 pixels) form a prefix: there mu1 is only
         * rescaled (OpenCV's quirk). Skipped bins for q2 form a suffix beyond `last`. */
        for (; k <= last && rq[k] < 0; k++) {
            m = __dmul_rn(m, qprev);
            mu1s[k] = m;
            qprev = q1[k];
        }
        while (k <= last) {
            int nonempty = (nonzero[k >> 5] >> (k & 31)) & 1;
            int end = next_bin(nonzero, k, !nonempty) - 1; /* this run of (non-)empty bins ends at `end` */
            end = end < last ? end : last;
            if (nonempty) {
                /* The hot loop: one step per bin, operands loaded a step ahead, five dependent operations:
                 * t = m qprev; u = t + b and c = t rl + b rl side by side; then div_rn's three. */
                double r_n = rq[k], rl_n = rql[k], q_n = q1[k], b_n = ip[k], brl_n = iprl[k];
                for (; k <= end; k++) {
                    double r = r_n, rl = rl_n, q = q_n, b = b_n, brl = brl_n;
                    r_n = rq[k + 1];
                    rl_n = rql[k + 1];
                    q_n = q1[k + 1];
                    b_n = ip[k + 1];
                    brl_n = iprl[k + 1];
                    double t = __dmul_rn(m, qprev);
                    m = div_rn(__dadd_rn(t, b), q, r, __fma_rn(t, rl, brl));
                    mu1s[k] = m;
                    qprev = q;
                }
            } else {
                /* Empty bins: the same step each time; stop computing at its fixed point. */
                double r = rq[k], rl = rql[k], q = q1[k];
                for (; k <= end; k++) {
                    double t = __dmul_rn(m, qprev);
                    double next = div_rn(t, q, r, __dmul_rn(t, rl));
                    mu1s[k] = next;
                    qprev = q;
                    if (next == m) {
                        while (++k <= end)
                            mu1s[k] = m;
                        break;
                    }
                    m = next;
                }
            }
        }
    }
    __syncthreads();
    double sigma = -1.0;
    if (!skip) {
        double m1 = mu1s[i];
        double mu2 = __ddiv_rn(__dsub_rn(mu, __dmul_rn(q1i, m1)), q2i);
        double d = __dsub_rn(m1, mu2);
        sigma = __dmul_rn(__dmul_rn(__dmul_rn(q1i, q2i), d), d);
    }
    /* The first i with the largest sigma, if that sigma is > 0 (OpenCV starts from max_sigma = 0, max_val = 0). */
    int bi = i;
    for (int off = 16; off > 0; off >>= 1) {
        double os = __shfl_down_sync(0xffffffffu, sigma, off);
        int oi = __shfl_down_sync(0xffffffffu, bi, off);
        if (os > sigma || (os == sigma && oi < bi)) {
            sigma = os;
            bi = oi;
        }
    }
    if ((i & 31) == 0) {
        best_sigma[i >> 5] = sigma;
        best_i[i >> 5] = bi;
    }
    __syncthreads();
    int result = 0;
    if (i == 0) {
        double bs = 0;
        for (int w = 0; w < kWarps; w++)
            if (best_sigma[w] > bs) {
                bs = best_sigma[w];
                result = best_i[w];
            }
    }
    return result;
}

/* Per-warp shared histograms over 16-byte chunks (grid-stride), merged into st->hist; the last block snapshots
 * the histogram, optionally runs Otsu, and resets the accumulators. */
__global__ void __launch_bounds__(kHistThreads) hist_kernel(const uint8_t *__restrict__ src, size_t pitch,
                                                            int width, int height, int vec, otsu_state *st,
                                                            int select)
{
    __shared__ unsigned sh[kWarps][256];
    __shared__ unsigned merged[256];
    __shared__ bool last;
    int tid = threadIdx.x, warp = tid >> 5;
    /* Let a dependent apply_kernel be scheduled now; it still waits for this grid to complete. */
    cudaTriggerProgrammaticLaunchCompletion();
    for (int k = tid; k < kWarps * 256; k += kHistThreads)
        (&sh[0][0])[k] = 0;
    __syncthreads();
    unsigned *mine = sh[warp];
    int cpr = (width + 15) / 16;
    long long chunks = (long long)cpr * height;
    for (long long c = (long long)blockIdx.x * kHistThreads + tid; c < chunks;
         c += (long long)gridDim.x * kHistThreads) {
        int y = (int)(c / cpr), x = (int)(c % cpr) * 16;
        const uint8_t *s = src + (size_t)y * pitch + x;
        if (vec && x + 16 <= width) {
            uint4 v = *(const uint4 *)s;
            unsigned w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                atomicAdd(&mine[w4[j] & 0xff], 1u);
                atomicAdd(&mine[(w4[j] >> 8) & 0xff], 1u);
                atomicAdd(&mine[(w4[j] >> 16) & 0xff], 1u);
                atomicAdd(&mine[w4[j] >> 24], 1u);
            }
        } else {
            int n = width - x < 16 ? width - x : 16;
            for (int j = 0; j < n; j++)
                atomicAdd(&mine[s[j]], 1u);
        }
    }
    __syncthreads();
    unsigned sum = 0;
    for (int w = 0; w < kWarps; w++)
        sum += sh[w][tid];
    if (sum)
        atomicAdd(&st->hist[tid], sum);
    __threadfence();
    __syncthreads();
    if (tid == 0)
        last = atomicAdd(&st->counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    unsigned v = __ldcg(&st->hist[tid]);
    merged[tid] = v;
    st->out_hist[tid] = v;
    st->hist[tid] = 0;
    if (tid == 0)
        st->counter = 0;
    __syncthreads();
    if (select) {
        int t = otsu_block(merged, (double)width * height);
        if (tid == 0)
            st->out_thresh = t;
    }
}

int launch_hist(mk_ctx_t *ctx, const mk_image_t *src, otsu_state *st, int select)
{
    int vec = ((uintptr_t)src->data % 16 == 0) && (src->pitch % 16 == 0);
    long long chunks = (long long)((src->width + 15) / 16) * src->height;
    long long want = (chunks + kHistThreads * 4 - 1) / (kHistThreads * 4); /* about 4 chunks per thread */
    int blocks = (int)(want < 1 ? 1 : want > 2LL * ctx->sm_count ? 2LL * ctx->sm_count : want);
    hist_kernel<<<blocks, kHistThreads, 0, MK_STREAM(ctx)>>>((const uint8_t *)src->data, src->pitch, src->width,
                                                             src->height, vec, st, select);
    int rc = MK_CUDA_LAUNCH_CHECK(hist_kernel);
    if (rc)
        mk_ctx_scratch_dirty(ctx, MK_SCRATCH_OTSU);
    return rc;
}

int launch_apply(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int t, const int *tp, int maxval,
                 int mode)
{
    int vec = ((uintptr_t)src->data % 16 == 0) && (src->pitch % 16 == 0) && ((uintptr_t)dst->data % 16 == 0) &&
              (dst->pitch % 16 == 0);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.blockDim = dim3(32, 8);
    cfg.gridDim = dim3((unsigned)((src->width + 15) / 16 + 31) / 32, (unsigned)(src->height + 7) / 8);
    cfg.stream = MK_STREAM(ctx);
    if (tp) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    return MK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, apply_kernel, (const uint8_t *)src->data, src->pitch,
                                            (uint8_t *)dst->data, dst->pitch, src->width, src->height, t, tp, maxval,
                                            mode, vec));
}

int get_state(mk_ctx_t *ctx, otsu_state **st)
{
    return mk_ctx_scratch(ctx, MK_SCRATCH_OTSU, sizeof(otsu_state), (void **)st, NULL);
}

} // namespace

extern "C" int mk_threshold_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int thresh, int maxval,
                                 mk_thresh_mode_t mode)
{
    return launch_apply(ctx, src, dst, thresh, NULL, maxval, (int)mode);
}

extern "C" int mk_threshold_otsu_cuda(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int maxval,
                                      mk_thresh_mode_t mode, int *thresh_out)
{
    otsu_state *st;
    int rc;
    if ((rc = get_state(ctx, &st)) || (rc = launch_hist(ctx, src, st, 1)) ||
        (rc = launch_apply(ctx, src, dst, 0, &st->out_thresh, maxval, (int)mode)))
        return rc;
    if (!thresh_out)
        return 0;
    if ((rc = MK_CUDA_CHECK(cudaMemcpyAsync(thresh_out, &st->out_thresh, sizeof(int), cudaMemcpyDeviceToHost,
                                            MK_STREAM(ctx)))))
        return rc;
    return mk_cuda_sync(ctx);
}

extern "C" int mk_histogram_cuda(mk_ctx_t *ctx, const mk_image_t *src, uint32_t hist[256])
{
    otsu_state *st;
    int rc;
    if ((rc = get_state(ctx, &st)) || (rc = launch_hist(ctx, src, st, 0)))
        return rc;
    if ((rc = MK_CUDA_CHECK(cudaMemcpyAsync(hist, st->out_hist, 256 * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                            MK_STREAM(ctx)))))
        return rc;
    return mk_cuda_sync(ctx);
}
