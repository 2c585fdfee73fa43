/* darknet_cuda_conv: our convolution kernels of the FP16 NHWC forward pass (see darknet_cuda_conv.h) — small direct,
 * depthwise, implicit GEMM on tensor cores with split-K, and depthwise + pointwise fused. The arithmetic and index
 * math of each thread or tile is in darknet_cuda_conv_px.h; what is here is their parallel schedule: shared memory,
 * cp.async pipelines, WMMA fragments and the split-K handshake. */
#include "darknet_cuda_conv.h"

#include "cuda_check.h"

#include <mma.h>

namespace {

using namespace nvcuda;

/* ---- cp.async ------------------------------------------------------------------------------------------------ */

/* 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros (and reads nothing). */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- small ----------------------------------------------------------------------------------------------------- */

const int kSmallThreads = 128;
const int kSmallMaxKd = 1536; /* the weight table kd x 8 floats within 48 KB */

__global__ void __launch_bounds__(kSmallThreads)
    small_kernel(const __half *__restrict__ in, const __half *__restrict__ w, dn_epi e, dn_cgeom g)
{
    extern __shared__ __align__(16) float table[];
    const int n0 = blockIdx.y * 8;
    /* kd-major over the filters' rows: consecutive threads read consecutive weights. */
    for (int i = threadIdx.x; i < g.kd_n * 8; i += kSmallThreads) {
        int j = i / g.kd_n, kd = i - j * g.kd_n;
        table[kd * 8 + j] = dn_small_w(w, g, n0, kd * 8 + j);
    }
    __syncthreads();
    dn_grid_wait();
    dn_grid_trigger();
    int m = blockIdx.x * kSmallThreads + threadIdx.x;
    if (m >= g.m)
        return;
    float acc[8];
    dn_px_small_conv(in, table, g, m, acc);
    dn_epi_store<8>(e, g, m, n0, acc);
}

/* ---- depthwise ------------------------------------------------------------------------------------------------- */

const int kDwThreads = 128;

template <int K, int S, int R>
__global__ void __launch_bounds__(kDwThreads)
    dw_kernel(const __half *__restrict__ in, const __half *__restrict__ w, dn_epi e, dn_cgeom g)
{
    dn_dw_item t = dn_dw_at(g, R, blockIdx.x * kDwThreads + threadIdx.x);
    if (!t.ok)
        return;
    float wv[K * K * 2], acc[R][2];
    dn_dw_weights<K>(w, t.c0, wv);
    dn_grid_wait();
    dn_grid_trigger();
    dn_px_dw<K, S, R>(in, wv, g, t.c0, t.oy, t.ox0, acc);
#pragma unroll
    for (int r = 0; r < R; r++)
        if (t.ox0 + r < g.ow)
            dn_epi_store<2>(e, g, t.oy * g.ow + t.ox0 + r, t.c0, acc[r]);
}

template <int K, int S>
int launch_dw(const dn_exec &x, int r, const __half *in, const __half *w, const dn_epi &e, const dn_cgeom &g)
{
    long long items = (long long)(g.c / 2) * ((g.ow + r - 1) / r) * g.oh;
    dim3 grid((unsigned)((items + kDwThreads - 1) / kDwThreads));
    switch (r) {
    case 1: return dn_launch(x, "dw_kernel", dw_kernel<K, S, 1>, grid, dim3(kDwThreads), 0, in, w, e, g);
    case 2: return dn_launch(x, "dw_kernel", dw_kernel<K, S, 2>, grid, dim3(kDwThreads), 0, in, w, e, g);
    default: return dn_launch(x, "dw_kernel", dw_kernel<K, S, 4>, grid, dim3(kDwThreads), 0, in, w, e, g);
    }
}

/* ---- implicit GEMM --------------------------------------------------------------------------------------------- */

/* Each template instantiation below is the kDnGemm entry of its index. */
template <int V, int BM, int BN, int WM, int WN, int STAGES>
constexpr bool gemm_is()
{
    return kDnGemm[V].bm == BM && kDnGemm[V].bn == BN && kDnGemm[V].wm == WM && kDnGemm[V].wn == WN &&
           kDnGemm[V].stages == STAGES;
}

template <int BM, int BN, int WM, int WN, int STAGES>
struct gemm_shape {
    static constexpr int threads = WM * WN * 32, tm = BM / WM, tn = BN / WN, fm = tm / 16, fn = tn / 16;
    static constexpr int a_chunks = BM * DN_BK / 8 / threads, b_chunks = BN * DN_BK / 8 / threads;
    static constexpr int rows_per_pass = threads / 4, ldc = BN + 4;
    static constexpr size_t pipe_bytes = (size_t)STAGES * (BM + BN) * DN_LDS * sizeof(__half);
    static constexpr size_t c_bytes = (size_t)BM * ldc * sizeof(float);
    static constexpr size_t smem = pipe_bytes > c_bytes ? pipe_bytes : c_bytes;
    static_assert(fm >= 1 && fn >= 1 && tm % 16 == 0 && tn % 16 == 0, "warp tiles are whole 16 x 16 fragments");
    static_assert(a_chunks >= 1 && b_chunks >= 1 && a_chunks * threads == BM * DN_BK / 8 &&
                      b_chunks * threads == BN * DN_BK / 8,
                  "every thread loads whole chunks of both tiles");
    static_assert(STAGES >= 2, "a pipeline has at least two stages");
};

template <int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(WM *WN * 32)
    gemm_kernel(const __half *__restrict__ in, const __half *__restrict__ w, dn_epi e, dn_cgeom g, int splits,
                float *ws, int *counters)
{
    using S = gemm_shape<BM, BN, WM, WN, STAGES>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int last;
    __half *as = (__half *)smem, *bs = as + STAGES * BM * DN_LDS;
    float *cs = (float *)smem; /* the accumulators, once the pipeline is drained */
    const int tid = threadIdx.x, warp = tid >> 5, wm = warp % WM, wn = warp / WM, kc = tid & 3, r0 = tid >> 2;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    int kt0, kt1;
    dn_gemm_krange(dn_gemm_ktiles(g), splits, blockIdx.z, &kt0, &kt1);
    const int nk = kt1 - kt0;
    dn_arow rows[S::a_chunks];
#pragma unroll
    for (int j = 0; j < S::a_chunks; j++)
        rows[j] = dn_gemm_arow(g, m0 + r0 + j * S::rows_per_pass);

    auto load_a = [&](int stage, int kt) {
        dn_ktap t = dn_gemm_ktap(g, kt * DN_BK + kc * 8);
#pragma unroll
        for (int j = 0; j < S::a_chunks; j++) {
            long long src = dn_gemm_a_src(g, rows[j], t);
            cp_async16(as + (stage * BM + r0 + j * S::rows_per_pass) * DN_LDS + kc * 8, src >= 0 ? in + src : in,
                       src >= 0 ? 16 : 0);
        }
    };
    auto load_b = [&](int stage, int kt) {
        int kd = kt * DN_BK + kc * 8;
#pragma unroll
        for (int j = 0; j < S::b_chunks; j++) {
            int row = r0 + j * S::rows_per_pass;
            long long src = dn_gemm_b_src(g, n0 + row, kd);
            cp_async16(bs + (stage * BN + row) * DN_LDS + kc * 8, src >= 0 ? w + src : w, src >= 0 ? 16 : 0);
        }
    };

    /* The weights do not depend on the previous kernel: the first stages' weight tiles load before waiting for it
     * (they join the first committed group). */
    for (int s = 0; s < STAGES - 1; s++)
        if (s < nk)
            load_b(s, kt0 + s);
    dn_grid_wait();
    dn_grid_trigger();
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk)
            load_a(s, kt0 + s);
        cp_async_commit();
    }

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[S::fm][S::fn];
#pragma unroll
    for (int i = 0; i < S::fm; i++)
#pragma unroll
        for (int j = 0; j < S::fn; j++)
            wmma::fill_fragment(acc[i][j], 0.f);
    for (int it = 0; it < nk; it++) {
        /* Stage it has landed for every thread; every warp is done with the stage the prefetch overwrites. */
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        int pf = it + STAGES - 1;
        if (pf < nk) {
            load_a(pf % STAGES, kt0 + pf);
            load_b(pf % STAGES, kt0 + pf);
        }
        cp_async_commit();
        const __half *a = as + ((it % STAGES) * BM + wm * S::tm) * DN_LDS;
        const __half *b = bs + ((it % STAGES) * BN + wn * S::tn) * DN_LDS;
#pragma unroll
        for (int kk = 0; kk < DN_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[S::fm];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[S::fn];
#pragma unroll
            for (int i = 0; i < S::fm; i++)
                wmma::load_matrix_sync(fa[i], a + i * 16 * DN_LDS + kk, DN_LDS);
#pragma unroll
            for (int j = 0; j < S::fn; j++)
                wmma::load_matrix_sync(fb[j], b + j * 16 * DN_LDS + kk, DN_LDS);
#pragma unroll
            for (int i = 0; i < S::fm; i++)
#pragma unroll
                for (int j = 0; j < S::fn; j++)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int i = 0; i < S::fm; i++)
#pragma unroll
        for (int j = 0; j < S::fn; j++)
            wmma::store_matrix_sync(cs + (wm * S::tm + i * 16) * S::ldc + wn * S::tn + j * 16, acc[i][j], S::ldc,
                                    wmma::mem_row_major);
    __syncthreads();

    if (splits > 1) {
        /* Every split writes its partial tile; the last to arrive sums them all in split order (the same sum
         * whichever block is last) and resets the tile's counter for the next launch. */
        const int tile = blockIdx.y * gridDim.x + blockIdx.x;
        float *part = ws + (size_t)tile * splits * BM * BN;
        for (int q = tid; q < BM * BN; q += S::threads)
            part[(size_t)blockIdx.z * BM * BN + q] = cs[q / BN * S::ldc + q % BN];
        __threadfence();
        __syncthreads();
        if (tid == 0)
            last = atomicAdd(&counters[tile], 1) == splits - 1;
        __syncthreads();
        if (!last)
            return;
        if (tid == 0)
            counters[tile] = 0;
        __threadfence();
        for (int q = tid; q < BM * BN; q += S::threads) {
            float v = 0.f;
            for (int z = 0; z < splits; z++)
                v += __ldcg(part + (size_t)z * BM * BN + q);
            cs[q / BN * S::ldc + q % BN] = v;
        }
        __syncthreads();
    }
    for (int q = tid; q < BM * BN / 8; q += S::threads) {
        int row = q / (BN / 8), col = q % (BN / 8) * 8, m = m0 + row, n = n0 + col;
        if (m < g.m && n < g.k)
            dn_epi_store<8>(e, g, m, n, cs + row * S::ldc + col);
    }
}

int gemm_tiles(const dn_gemm_cfg &c, const dn_cgeom &g)
{
    return ((g.m + c.bm - 1) / c.bm) * ((g.k + c.bn - 1) / c.bn);
}

template <int BM, int BN, int WM, int WN, int STAGES>
size_t gemm_smem()
{
    return gemm_shape<BM, BN, WM, WN, STAGES>::smem;
}

template <int BM, int BN, int WM, int WN, int STAGES>
int launch_gemm(const dn_exec &x, const char *name, int splits, const __half *in, const __half *w, const dn_epi &e,
                const dn_cgeom &g, float *ws, int *counters)
{
    dim3 grid((unsigned)((g.m + BM - 1) / BM), (unsigned)((g.k + BN - 1) / BN), (unsigned)splits);
    return dn_launch(x, name, gemm_kernel<BM, BN, WM, WN, STAGES>, grid, dim3(WM * WN * 32),
                     gemm_smem<BM, BN, WM, WN, STAGES>(), in, w, e, g, splits, ws, counters);
}

/* ---- depthwise + pointwise --------------------------------------------------------------------------------------- */

const int kDwpwMaxC = 512; /* tiles of at most (64 + 64) x 520 halves: 133 KB of shared memory */

template <int V, int TP, int BN, int WM, int WN>
constexpr bool dwpw_is()
{
    return kDnDwpw[V].tp == TP && kDnDwpw[V].bn == BN && kDnDwpw[V].wm == WM && kDnDwpw[V].wn == WN;
}

size_t dwpw_smem(const dn_dwpw_cfg &c, int channels)
{
    size_t ld = (size_t)dn_dwpw_ld(channels), tiles = (size_t)(c.tp + c.bn) * ld * sizeof(__half),
           acc = (size_t)c.tp * (c.bn + 4) * sizeof(float);
    return tiles > acc ? tiles : acc;
}

template <int TP, int BN, int WM, int WN, int K, int S>
__global__ void __launch_bounds__(kDnDwpwThreads)
    dwpw_kernel(const __half *__restrict__ in, const __half *__restrict__ dw_w, const float *__restrict__ dw_b,
                int dw_act, dn_cgeom gd, const __half *__restrict__ pw_w, dn_epi e, dn_cgeom gp)
{
    constexpr int tm = TP / WM, tn = BN / WN, fm = tm / 16, fn = tn / 16, ldc = BN + 4;
    static_assert(WM * WN <= kDnDwpwThreads / 32 && fm >= 1 && fn >= 1 && tm % 16 == 0 && tn % 16 == 0,
                  "at most one warp tile per warp, of whole fragments");
    extern __shared__ __align__(128) unsigned char smem[];
    const int c = gd.k, ld = dn_dwpw_ld(c), cpad = ld - 8, tid = threadIdx.x, warp = tid >> 5;
    const int p0 = blockIdx.x * TP, n0 = blockIdx.y * BN;
    __half *as = (__half *)smem, *bs = as + TP * ld;
    float *cs = (float *)smem; /* the accumulators, after the GEMM */

    /* The pointwise weights of filters n0.. (zero past the last filter and past c): copies issued before waiting
     * for the previous kernel, awaited after the depthwise part. */
    const int row_chunks = cpad / 8;
    for (int q = tid; q < BN * row_chunks; q += kDnDwpwThreads) {
        int row = q / row_chunks, col = (q - row * row_chunks) * 8, ok = n0 + row < gp.k && col < c;
        cp_async16(bs + row * ld + col, ok ? pw_w + (size_t)(n0 + row) * c + col : pw_w, ok ? 16 : 0);
    }
    cp_async_commit();
    dn_grid_wait();
    dn_grid_trigger();
    /* The depthwise outputs of pixels p0.., every channel pair, as the unfused pass would store them. */
    const int pairs = cpad / 2;
#pragma unroll 2
    for (int q = tid; q < TP * pairs; q += kDnDwpwThreads) {
        int p = q / pairs, c0 = (q - p * pairs) * 2, m = p0 + p;
        float v[2] = {0.f, 0.f};
        if (m < gd.m && c0 < c) {
            dn_px_dw1<K, S>(in, dw_w, gd, m, c0, v);
            v[0] = mk_px_activate(v[0] + dw_b[c0], dw_act);
            v[1] = mk_px_activate(v[1] + dw_b[c0 + 1], dw_act);
        }
        dn_st_h<2>(as + p * ld + c0, v);
    }
    cp_async_wait<0>();
    __syncthreads();

    const int wm = warp % WM, wn = warp / WM, active = warp < WM * WN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[fm][fn];
    if (active) {
#pragma unroll
        for (int i = 0; i < fm; i++)
#pragma unroll
            for (int j = 0; j < fn; j++)
                wmma::fill_fragment(acc[i][j], 0.f);
        const __half *a = as + wm * tm * ld, *b = bs + wn * tn * ld;
        for (int k = 0; k < cpad; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[fm];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[fn];
#pragma unroll
            for (int i = 0; i < fm; i++)
                wmma::load_matrix_sync(fa[i], a + i * 16 * ld + k, ld);
#pragma unroll
            for (int j = 0; j < fn; j++)
                wmma::load_matrix_sync(fb[j], b + j * 16 * ld + k, ld);
#pragma unroll
            for (int i = 0; i < fm; i++)
#pragma unroll
                for (int j = 0; j < fn; j++)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    }
    __syncthreads(); /* the tiles are read: the accumulators may overwrite them */
    if (active) {
#pragma unroll
        for (int i = 0; i < fm; i++)
#pragma unroll
            for (int j = 0; j < fn; j++)
                wmma::store_matrix_sync(cs + (wm * tm + i * 16) * ldc + wn * tn + j * 16, acc[i][j], ldc,
                                        wmma::mem_row_major);
    }
    __syncthreads();
    for (int q = tid; q < TP * BN / 8; q += kDnDwpwThreads) {
        int row = q / (BN / 8), col = q % (BN / 8) * 8, m = p0 + row, n = n0 + col;
        if (m < gp.m && n < gp.k)
            dn_epi_store<8>(e, gp, m, n, cs + row * ldc + col);
    }
}

template <int TP, int BN, int WM, int WN, int K, int S>
int launch_dwpw_ks(const dn_exec &x, const dn_dwpw_cfg &cfg, const __half *in, const __half *dw_w, const float *dw_b,
                   int dw_act, const dn_cgeom &gd, const __half *pw_w, const dn_epi &e, const dn_cgeom &gp)
{
    dim3 grid((unsigned)((gp.m + TP - 1) / TP), (unsigned)((gp.k + BN - 1) / BN));
    return dn_launch(x, cfg.name, dwpw_kernel<TP, BN, WM, WN, K, S>, grid, dim3(kDnDwpwThreads),
                     dwpw_smem(cfg, gd.k), in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
}

template <int TP, int BN, int WM, int WN>
int launch_dwpw(const dn_exec &x, const dn_dwpw_cfg &cfg, const __half *in, const __half *dw_w, const float *dw_b,
                int dw_act, const dn_cgeom &gd, const __half *pw_w, const dn_epi &e, const dn_cgeom &gp)
{
    if (gd.size == 3)
        return gd.stride == 1
                   ? launch_dwpw_ks<TP, BN, WM, WN, 3, 1>(x, cfg, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp)
                   : launch_dwpw_ks<TP, BN, WM, WN, 3, 2>(x, cfg, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    return gd.stride == 1 ? launch_dwpw_ks<TP, BN, WM, WN, 5, 1>(x, cfg, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp)
                          : launch_dwpw_ks<TP, BN, WM, WN, 5, 2>(x, cfg, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
}

int max_smem(const void *kernel, size_t bytes)
{
    return MK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

/* The shared memory every (K, S) instantiation of a dwpw variant may need. */
template <int TP, int BN, int WM, int WN>
int max_smem_dwpw(size_t bytes)
{
    int rc;
    if ((rc = max_smem((const void *)dwpw_kernel<TP, BN, WM, WN, 3, 1>, bytes)) ||
        (rc = max_smem((const void *)dwpw_kernel<TP, BN, WM, WN, 3, 2>, bytes)) ||
        (rc = max_smem((const void *)dwpw_kernel<TP, BN, WM, WN, 5, 1>, bytes)))
        return rc;
    return max_smem((const void *)dwpw_kernel<TP, BN, WM, WN, 5, 2>, bytes);
}

} // namespace

int dn_conv_variants(int kind)
{
    switch (kind) {
    case DN_CONV_SMALL: return 1;
    case DN_CONV_DW: return kDnDwCount;
    case DN_CONV_GEMM: return kDnGemmCount;
    case DN_CONV_DWPW: return kDnDwpwCount;
    default: return 0;
    }
}

const char *dn_conv_variant_name(int kind, int variant)
{
    static const char *const dw[] = {"dw1", "dw2", "dw4"};
    static_assert(kDnDwCount == 3 && kDnDwStrips[0] == 1 && kDnDwStrips[1] == 2 && kDnDwStrips[2] == 4,
                  "the names follow kDnDwStrips");
    if (variant < 0 || variant >= dn_conv_variants(kind))
        return "?";
    switch (kind) {
    case DN_CONV_SMALL: return "small";
    case DN_CONV_DW: return dw[variant];
    case DN_CONV_GEMM: return kDnGemm[variant].name;
    default: return kDnDwpw[variant].name;
    }
}

int dn_conv_small_ok(const dn_cgeom &g)
{
    return g.kd_n <= kSmallMaxKd;
}

int dn_conv_dw_ok(const dn_cgeom &g)
{
    return g.k == g.c && g.c % 2 == 0 && (g.size == 3 || g.size == 5) && (g.stride == 1 || g.stride == 2);
}

int dn_conv_gemm_ok(const dn_cgeom &g)
{
    return g.c % 8 == 0;
}

int dn_conv_dwpw_ok(const dn_cgeom &gd, const dn_cgeom &gp)
{
    return gd.k == gd.c && gd.c % 8 == 0 && gd.c <= kDwpwMaxC && (gd.size == 3 || gd.size == 5) &&
           (gd.stride == 1 || gd.stride == 2) && gp.size == 1 && gp.stride == 1 && gp.pad == 0 && gp.c == gd.k &&
           gp.h == gd.oh && gp.w == gd.ow;
}

int dn_conv_gemm_splits(int variant, const dn_cgeom &g, int sms)
{
    const dn_gemm_cfg &c = kDnGemm[variant];
    int tiles = gemm_tiles(c, g), kt = dn_gemm_ktiles(g);
    if (tiles >= sms)
        return 1;
    int s = (sms + tiles - 1) / tiles, cap = kt / 2 < 16 ? kt / 2 : 16; /* at least two k tiles a split */
    s = s < cap ? s : cap;
    return s >= 2 ? s : 1;
}

void dn_conv_gemm_ws(int variant, int splits, const dn_cgeom &g, size_t *floats, size_t *counters)
{
    const dn_gemm_cfg &c = kDnGemm[variant];
    size_t tiles = (size_t)gemm_tiles(c, g);
    *floats = splits > 1 ? tiles * (size_t)splits * c.bm * c.bn : 0;
    *counters = splits > 1 ? tiles : 0;
}

int dn_conv_init(void)
{
    int rc;
    size_t dwpw_max[kDnDwpwCount];
    for (int v = 0; v < kDnDwpwCount; v++)
        dwpw_max[v] = dwpw_smem(kDnDwpw[v], kDwpwMaxC);
    if ((rc = max_smem((const void *)gemm_kernel<128, 128, 2, 4, 3>, gemm_smem<128, 128, 2, 4, 3>())) ||
        (rc = max_smem_dwpw<16, 32, 1, 2>(dwpw_max[0])) || (rc = max_smem_dwpw<16, 64, 1, 4>(dwpw_max[1])) ||
        (rc = max_smem_dwpw<32, 32, 2, 2>(dwpw_max[2])) || (rc = max_smem_dwpw<32, 64, 2, 2>(dwpw_max[3])) ||
        (rc = max_smem_dwpw<64, 64, 2, 2>(dwpw_max[4])))
        return mk_err_wrap(rc, "allowing the convolution kernels their shared memory");
    return 0;
}

int dn_conv_small(const dn_exec &x, const __half *in, const __half *w, const dn_epi &e, const dn_cgeom &g)
{
    dim3 grid((unsigned)((g.m + kSmallThreads - 1) / kSmallThreads), (unsigned)((g.k + 7) / 8));
    return dn_launch(x, "small_kernel", small_kernel, grid, dim3(kSmallThreads), (size_t)g.kd_n * 8 * sizeof(float),
                     in, w, e, g);
}

int dn_conv_dw(const dn_exec &x, int variant, const __half *in, const __half *w, const dn_epi &e, const dn_cgeom &g)
{
    int r = kDnDwStrips[variant];
    if (g.size == 3)
        return g.stride == 1 ? launch_dw<3, 1>(x, r, in, w, e, g) : launch_dw<3, 2>(x, r, in, w, e, g);
    return g.stride == 1 ? launch_dw<5, 1>(x, r, in, w, e, g) : launch_dw<5, 2>(x, r, in, w, e, g);
}

int dn_conv_gemm(const dn_exec &x, int variant, int splits, const __half *in, const __half *w, const dn_epi &e,
                 const dn_cgeom &g, float *ws, int *counters)
{
    static_assert(kDnGemmCount == 7 && gemm_is<0, 32, 32, 2, 2, 3>() && gemm_is<1, 64, 32, 2, 2, 3>() &&
                      gemm_is<2, 32, 64, 2, 2, 3>() && gemm_is<3, 64, 64, 2, 2, 3>() &&
                      gemm_is<4, 128, 64, 4, 2, 3>() && gemm_is<5, 64, 128, 2, 4, 3>() &&
                      gemm_is<6, 128, 128, 2, 4, 3>(),
                  "the cases below follow kDnGemm");
    const char *name = kDnGemm[variant].name;
    switch (variant) {
    case 0: return launch_gemm<32, 32, 2, 2, 3>(x, name, splits, in, w, e, g, ws, counters);
    case 1: return launch_gemm<64, 32, 2, 2, 3>(x, name, splits, in, w, e, g, ws, counters);
    case 2: return launch_gemm<32, 64, 2, 2, 3>(x, name, splits, in, w, e, g, ws, counters);
    case 3: return launch_gemm<64, 64, 2, 2, 3>(x, name, splits, in, w, e, g, ws, counters);
    case 4: return launch_gemm<128, 64, 4, 2, 3>(x, name, splits, in, w, e, g, ws, counters);
    case 5: return launch_gemm<64, 128, 2, 4, 3>(x, name, splits, in, w, e, g, ws, counters);
    default: return launch_gemm<128, 128, 2, 4, 3>(x, name, splits, in, w, e, g, ws, counters);
    }
}

int dn_conv_dwpw(const dn_exec &x, int variant, const __half *in, const __half *dw_w, const float *dw_b, int dw_act,
                 const dn_cgeom &gd, const __half *pw_w, const dn_epi &e, const dn_cgeom &gp)
{
    static_assert(kDnDwpwCount == 5 && dwpw_is<0, 16, 32, 1, 2>() && dwpw_is<1, 16, 64, 1, 4>() &&
                      dwpw_is<2, 32, 32, 2, 2>() && dwpw_is<3, 32, 64, 2, 2>() && dwpw_is<4, 64, 64, 2, 2>(),
                  "the cases below follow kDnDwpw");
    const dn_dwpw_cfg &c = kDnDwpw[variant];
    switch (variant) {
    case 0: return launch_dwpw<16, 32, 1, 2>(x, c, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    case 1: return launch_dwpw<16, 64, 1, 4>(x, c, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    case 2: return launch_dwpw<32, 32, 2, 2>(x, c, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    case 3: return launch_dwpw<32, 64, 2, 2>(x, c, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    default: return launch_dwpw<64, 64, 2, 2>(x, c, in, dw_w, dw_b, dw_act, gd, pw_w, e, gp);
    }
}
