/* darknet_cuda_conv_px: the index math and arithmetic of the convolution kernels of darknet_cuda_conv.cu, as plain
 * functions of a thread's or a tile's position. Like darknet_cuda_px.h they compile as host code without nvcc, so
 * that a host emulation of every kernel (tests/test_darknet_conv_px.cc) checks tiling, padding, split-K ranges and
 * epilogues against a reference convolution without a GPU.
 *
 * Tensors are NHWC half, one image; arithmetic is float32. Weights are half in cuDNN's NHWC filter layout KRSC:
 * [filters][size][size][c / groups] (for a depthwise convolution, [c][size][size]). Biases are float. */
#ifndef MK_DARKNET_CUDA_CONV_PX_H
#define MK_DARKNET_CUDA_CONV_PX_H

#include "darknet_cuda_px.h"

#include <stdint.h>

/* Index math also used by the launchers on the host; loop unrolling (whole, or by 4 for loops of unknown length,
 * so that several loads are in flight) for nvcc only. */
#ifdef __CUDACC__
#define DN_HD static __host__ __device__ __forceinline__
#define DN_UNROLL _Pragma("unroll")
#define DN_UNROLL4 _Pragma("unroll 4")
#else
#define DN_HD static inline
#define DN_UNROLL
#define DN_UNROLL4
#endif

/* A convolution: input c x h x w, output k x oh x ow. For groups = 1 it is the GEMM out[m][n] = sum over kd of
 * A[m][kd] * W[n][kd] with M = oh * ow output pixels, N = k filters and kd = (ky * size + kx) * c + ci, the
 * KRSC order (tap-major, channel-minor), of length kd_n = size * size * c. A depthwise one has k = c. */
struct dn_cgeom {
    int c, h, w;
    int k, oh, ow;
    int size, stride, pad;
    int m, kd_n;
};

DN_HD dn_cgeom dn_cgeom_make(int c, int h, int w, int k, int oh, int ow, int size, int stride, int pad)
{
    dn_cgeom g;
    g.c = c;
    g.h = h;
    g.w = w;
    g.k = k;
    g.oh = oh;
    g.ow = ow;
    g.size = size;
    g.stride = stride;
    g.pad = pad;
    g.m = oh * ow;
    g.kd_n = size * size * c;
    return g;
}

/* What a kernel does with its sums: v = act(sum + bias[n]); with res (same shape as out), act2(v + res); stored as
 * half at out[m * k + n]. With yolo set, the [yolo] layer of act(sum + bias) is written instead, float CHW
 * (yolo[n * M + m]), as dn_px_yolo does. */
struct dn_epi {
    const float *bias;
    int act, act2;
    const __half *res;
    __half *out;
    float *yolo;
    int classes;
    float scale_x_y, bias_x_y;
};

/* N consecutive halves (N = 8: 16-byte aligned; N = 2: 4-byte aligned) to floats, and back (round to nearest): one
 * vector access on the device, element by element on the host. */
template <int N>
DN_PX void dn_ld_h(const __half *p, float *v)
{
#ifdef __CUDACC__
    if constexpr (N == 8) {
        uint4 u = *(const uint4 *)p;
        const __half2 *h = (const __half2 *)&u;
DN_UNROLL
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(h[i]);
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    } else {
        static_assert(N == 2, "vectors of 2 or 8 halves");
        float2 f = __half22float2(*(const __half2 *)p);
        v[0] = f.x;
        v[1] = f.y;
    }
#else
    for (int i = 0; i < N; i++)
        v[i] = __half2float(p[i]);
#endif
}

template <int N>
DN_PX void dn_st_h(__half *p, const float *v)
{
#ifdef __CUDACC__
    if constexpr (N == 8) {
        uint4 u;
        __half2 *h = (__half2 *)&u;
DN_UNROLL
        for (int i = 0; i < 4; i++)
            h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        *(uint4 *)p = u;
    } else {
        static_assert(N == 2, "vectors of 2 or 8 halves");
        *(__half2 *)p = __floats2half2_rn(v[0], v[1]);
    }
#else
    for (int i = 0; i < N; i++)
        p[i] = __float2half_rn(v[i]);
#endif
}

/* 8 floats from a 16-byte aligned pointer (shared memory in the kernels). */
DN_PX void dn_ld_f8(const float *p, float *v)
{
#ifdef __CUDACC__
    float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
    v[4] = b.x;
    v[5] = b.y;
    v[6] = b.z;
    v[7] = b.w;
#else
    for (int i = 0; i < 8; i++)
        v[i] = p[i];
#endif
}

/* The epilogue of outputs n0 .. n0 + N - 1 (those below k) of pixel m, from their sums. n0 is a multiple of N; when k
 * is too, the N values are loaded and stored as one vector. */
template <int N>
DN_PX void dn_epi_store(const dn_epi &e, const dn_cgeom &g, int m, int n0, const float *sum)
{
    if (e.yolo) {
        for (int j = 0; j < N && n0 + j < g.k; j++) {
            int n = n0 + j;
            e.yolo[(size_t)n * g.m + m] =
                dn_px_yolo_entry(mk_px_activate(sum[j] + e.bias[n], e.act), n, e.classes, e.scale_x_y, e.bias_x_y);
        }
        return;
    }
    size_t o = (size_t)m * g.k + n0;
    if (g.k % N == 0) {
        float v[N], r[N];
DN_UNROLL
        for (int j = 0; j < N; j++)
            v[j] = mk_px_activate(sum[j] + e.bias[n0 + j], e.act);
        if (e.res) {
            dn_ld_h<N>(e.res + o, r);
DN_UNROLL
            for (int j = 0; j < N; j++)
                v[j] = mk_px_activate(v[j] + r[j], e.act2);
        }
        dn_st_h<N>(e.out + o, v);
        return;
    }
    for (int j = 0; j < N && n0 + j < g.k; j++) {
        float v = mk_px_activate(sum[j] + e.bias[n0 + j], e.act);
        if (e.res)
            v = mk_px_activate(v + __half2float(e.res[o + j]), e.act2);
        e.out[o + j] = __float2half_rn(v);
    }
}

/* ---- implicit GEMM (groups = 1, c a multiple of 8) ------------------------------------------------------------
 * A block computes a BM x BN tile of out (pixels m0.., filters n0..) over the k tiles [kt0, kt1) of its split,
 * DN_BK values of kd per k tile. Shared tiles are rows of DN_BK halves padded to DN_LDS (row starts 80 bytes apart:
 * 16-byte chunks of 8 consecutive rows fall in distinct banks). A tile row is an output pixel, B tile row a filter.
 * Every 16-byte chunk (8 kd values) lies within one tap because c is a multiple of 8; thread t loads the chunks
 * q = t + j * threads, row q / 4, chunk q % 4 of the row. */
enum { DN_BK = 32, DN_LDS = DN_BK + 8 };

/* The gemm variants: block tile (pixels x filters), warps along each (a warp computes (bm / wm) x (bn / wn) in
 * 16 x 16 fragments), pipeline stages. */
struct dn_gemm_cfg {
    int bm, bn, wm, wn, stages;
    const char *name;
};

constexpr dn_gemm_cfg kDnGemm[] = {
    {32, 32, 2, 2, 3, "gemm32x32"},   {64, 32, 2, 2, 3, "gemm64x32"},   {32, 64, 2, 2, 3, "gemm32x64"},
    {64, 64, 2, 2, 3, "gemm64x64"},   {128, 64, 4, 2, 3, "gemm128x64"}, {64, 128, 2, 4, 3, "gemm64x128"},
    {128, 128, 2, 4, 3, "gemm128x128"},
};
constexpr int kDnGemmCount = (int)(sizeof kDnGemm / sizeof kDnGemm[0]);

/* An A row: the top-left input position of output pixel m's window; ok = 0 past the last pixel. */
struct dn_arow {
    int iy0, ix0, ok;
};

DN_HD dn_arow dn_gemm_arow(const dn_cgeom &g, int m)
{
    dn_arow r;
    int oy = m / g.ow, ox = m - oy * g.ow;
    r.iy0 = oy * g.stride - g.pad;
    r.ix0 = ox * g.stride - g.pad;
    r.ok = m < g.m;
    return r;
}

/* kd (a multiple of 8) as tap (ky, kx) and input channel; ok = 0 past kd_n. */
struct dn_ktap {
    int ky, kx, ci, ok;
};

DN_HD dn_ktap dn_gemm_ktap(const dn_cgeom &g, int kd)
{
    dn_ktap t;
    int tap = kd / g.c;
    t.ci = kd - tap * g.c;
    t.ky = tap / g.size;
    t.kx = tap - t.ky * g.size;
    t.ok = kd < g.kd_n;
    return t;
}

/* Element offset in the input of A[m][kd .. kd + 7], or -1 where it is zero padding (outside the image, past the
 * last pixel or past kd_n). */
DN_HD long long dn_gemm_a_src(const dn_cgeom &g, const dn_arow &r, const dn_ktap &t)
{
    int iy = r.iy0 + t.ky, ix = r.ix0 + t.kx;
    if (!r.ok || !t.ok || iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
        return -1;
    return ((long long)iy * g.w + ix) * g.c + t.ci;
}

/* Element offset in the weights of W[n][kd .. kd + 7], or -1 (zero) past the last filter or past kd_n. */
DN_HD long long dn_gemm_b_src(const dn_cgeom &g, int n, int kd)
{
    return n < g.k && kd < g.kd_n ? (long long)n * g.kd_n + kd : -1;
}

DN_HD int dn_gemm_ktiles(const dn_cgeom &g)
{
    return (g.kd_n + DN_BK - 1) / DN_BK;
}

/* The k tiles [*kt0, *kt1) of split z of `splits` (every split gets at least one when splits <= ktiles). */
DN_HD void dn_gemm_krange(int ktiles, int splits, int z, int *kt0, int *kt1)
{
    *kt0 = (int)((long long)ktiles * z / splits);
    *kt1 = (int)((long long)ktiles * (z + 1) / splits);
}

/* ---- small direct convolution (groups = 1, any c, k) ------------------------------------------------------------
 * A thread computes 8 filters n0 .. n0 + 7 of one output pixel; the block's weights are a shared float table
 * ws[kd][8] (0 past the last filter), so every weight read is a broadcast. */

/* Entry e of that table (e = kd * 8 + j). */
DN_PX float dn_small_w(const __half *w, const dn_cgeom &g, int n0, int e)
{
    int kd = e >> 3, n = n0 + (e & 7);
    return n < g.k ? __half2float(w[(size_t)n * g.kd_n + kd]) : 0.f;
}

/* The sums of pixel m for the table's 8 filters, in the order tap, then input channel. */
DN_PX void dn_px_small_conv(const __half *in, const float *ws, const dn_cgeom &g, int m, float acc[8])
{
    for (int j = 0; j < 8; j++)
        acc[j] = 0.f;
    int oy = m / g.ow, ox = m - oy * g.ow;
    for (int ky = 0; ky < g.size; ky++) {
        int iy = oy * g.stride - g.pad + ky;
        if (iy < 0 || iy >= g.h)
            continue;
        for (int kx = 0; kx < g.size; kx++) {
            int ix = ox * g.stride - g.pad + kx;
            if (ix < 0 || ix >= g.w)
                continue;
            const __half *px = in + ((size_t)iy * g.w + ix) * g.c;
            const float *wt = ws + (size_t)(ky * g.size + kx) * g.c * 8;
            if (g.c % 8 == 0) {
                DN_UNROLL4
                for (int ci = 0; ci < g.c; ci += 8) {
                    float x[8];
                    dn_ld_h<8>(px + ci, x);
DN_UNROLL
                    for (int q = 0; q < 8; q++) {
                        float wv[8];
                        dn_ld_f8(wt + (ci + q) * 8, wv);
DN_UNROLL
                        for (int j = 0; j < 8; j++)
                            acc[j] += x[q] * wv[j];
                    }
                }
            } else {
                DN_UNROLL4
                for (int ci = 0; ci < g.c; ci++) {
                    float x = __half2float(px[ci]), wv[8];
                    dn_ld_f8(wt + ci * 8, wv);
DN_UNROLL
                    for (int j = 0; j < 8; j++)
                        acc[j] += x * wv[j];
                }
            }
        }
    }
}

/* ---- depthwise convolution (k = c, c even) ------------------------------------------------------------------
 * A thread computes channels c0, c0 + 1 of R consecutive outputs (oy, ox0 ..) of a K x K, stride S convolution:
 * the (R - 1) * S + K input columns of each kernel row are loaded once and shared by the R outputs. Taps are
 * summed in the order (ky, kx). Weights wv[(ky * K + kx) * 2 + p] for channel c0 + p. */

template <int K>
DN_PX void dn_dw_weights(const __half *w, int c0, float *wv)
{
    for (int t = 0; t < K * K; t++)
        for (int p = 0; p < 2; p++)
            wv[t * 2 + p] = __half2float(w[(size_t)(c0 + p) * K * K + t]);
}

template <int K, int S, int R>
DN_PX void dn_px_dw(const __half *in, const float *wv, const dn_cgeom &g, int c0, int oy, int ox0, float acc[R][2])
{
    const int NX = (R - 1) * S + K;
DN_UNROLL
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = 0.f;
DN_UNROLL
    for (int ky = 0; ky < K; ky++) {
        int iy = oy * S - g.pad + ky;
        if (iy < 0 || iy >= g.h)
            continue;
        const __half *row = in + (size_t)iy * g.w * g.c + c0;
        float x[NX][2];
DN_UNROLL
        for (int q = 0; q < NX; q++) {
            int ix = ox0 * S - g.pad + q;
            if (ix >= 0 && ix < g.w) {
                dn_ld_h<2>(row + (size_t)ix * g.c, x[q]);
            } else {
                x[q][0] = x[q][1] = 0.f;
            }
        }
DN_UNROLL
        for (int r = 0; r < R; r++)
DN_UNROLL
            for (int kx = 0; kx < K; kx++)
DN_UNROLL
                for (int p = 0; p < 2; p++)
                    acc[r][p] += wv[(ky * K + kx) * 2 + p] * x[r * S + kx][p];
    }
}

/* The depthwise variants: outputs per thread. */
constexpr int kDnDwStrips[] = {1, 2, 4};
constexpr int kDnDwCount = (int)(sizeof kDnDwStrips / sizeof kDnDwStrips[0]);

/* Thread i of a depthwise launch of R-wide strips: channel pair, output row and strip; ok = 0 past the last. */
struct dn_dw_item {
    int c0, oy, ox0, ok;
};

DN_HD dn_dw_item dn_dw_at(const dn_cgeom &g, int R, int i)
{
    dn_dw_item t;
    int pairs = g.c / 2, strips = (g.ow + R - 1) / R, s = i / pairs;
    t.c0 = (i - s * pairs) * 2;
    t.oy = s / strips;
    t.ox0 = (s - t.oy * strips) * R;
    t.ok = t.oy < g.oh;
    return t;
}

/* ---- depthwise then pointwise, fused ------------------------------------------------------------------------
 * A block takes TP consecutive output pixels p0 .. and BN filters n0 .. of the pointwise (1 x 1) convolution that
 * reads a depthwise one: it computes the depthwise outputs of those pixels for all C channels into a shared A
 * tile [TP][ld] of halves (act(sum + bias), rounded to half as the unfused pass stores it; zero past the last
 * pixel and past C), the pointwise weights into a B tile [BN][ld], then the GEMM over kd < the padded C. */

/* The dwpw variants: pixels x filters per block of kDnDwpwThreads, warps along each (at most the block's; the
 * others only help with the depthwise part and the epilogue). */
struct dn_dwpw_cfg {
    int tp, bn, wm, wn;
    const char *name;
};

constexpr int kDnDwpwThreads = 128;
constexpr dn_dwpw_cfg kDnDwpw[] = {
    {16, 32, 1, 2, "dwpw16x32"}, {16, 64, 1, 4, "dwpw16x64"}, {32, 32, 2, 2, "dwpw32x32"},
    {32, 64, 2, 2, "dwpw32x64"}, {64, 64, 2, 2, "dwpw64x64"},
};
constexpr int kDnDwpwCount = (int)(sizeof kDnDwpw / sizeof kDnDwpw[0]);

/* Row length of those tiles: C rounded up to 16 (the MMA's k step), plus 8 halves so that rows are 16 bytes off
 * the banks of the one before. */
DN_HD int dn_dwpw_ld(int c)
{
    return (c + 15) / 16 * 16 + 8;
}

/* The depthwise sums of channels c0, c0 + 1 at output pixel m of a K x K, stride S convolution, taps in the order
 * (ky, kx) (a tap outside the image adds w * 0, which leaves the sum as skipping it would); weights half
 * [c][K][K]. All K * K loads are issued before the first multiply. */
template <int K, int S>
DN_PX void dn_px_dw1(const __half *in, const __half *w, const dn_cgeom &g, int m, int c0, float v[2])
{
    int oy = m / g.ow, ox = m - oy * g.ow;
    float x[K * K][2];
    DN_UNROLL
    for (int t = 0; t < K * K; t++) {
        int iy = oy * S - g.pad + t / K, ix = ox * S - g.pad + t % K;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) {
            dn_ld_h<2>(in + ((size_t)iy * g.w + ix) * g.c + c0, x[t]);
        } else {
            x[t][0] = x[t][1] = 0.f;
        }
    }
    v[0] = v[1] = 0.f;
    DN_UNROLL
    for (int t = 0; t < K * K; t++) {
        v[0] += __half2float(w[(size_t)c0 * K * K + t]) * x[t][0];
        v[1] += __half2float(w[(size_t)(c0 + 1) * K * K + t]) * x[t][1];
    }
}

#endif
