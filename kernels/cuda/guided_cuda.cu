/* guided_cuda: the guided filter and fast guided upsampling on the device.
 *
 * Working radius <= MK_GUIDED_TILE_RADIUS (r = 8 at 1080p, r/s for the fast filter), two tile kernels:
 *   coef_tile_kernel: a column strip 32 wide, 1..4 chunks of 16 rows, of a, b. Per chunk the inputs and their
 *     halo are staged in shared memory (reflected coordinates; for s > 1 the guide reduced on the fly), then the
 *     moments' box sums are taken separably by running sums: down each column (int32: a column sum of 2r+1
 *     moments fits; the sums carry over from chunk to chunk in registers), then along each row (int32, int64 for
 *     the guide-times-source moments), so each sum costs the same for any radius, and all are exact integers,
 *     equal to the CPU reference's. One thread per pixel then solves and stores a, b (floats).
 *   final_tile_kernel: the same separable running sums (double) over a, b with their halo, then per pixel either
 *     the application and the mask product (s = 1), or the means at low resolution (s > 1).
 * For s > 1, up_apply_kernel interpolates the means, applies them to the full-resolution guide and writes the
 * mask product over the whole output (zeros outside the pasted rectangle) in one pass.
 * Larger radii run the CPU reference's algorithm in parallel (summed-area tables built by one thread per row, then
 * per column, in the reference's order; one thread per pixel after), so that path equals the CPU bit for bit;
 * its tables take (moments + C + 1) x 8 bytes per working pixel of the context's scratch.
 * Nothing is allocated per call: coefficients and tables live in the context's MK_SCRATCH_GUIDED slot. */
#include "backend.h"
#include "cuda_check.h"
#include "guided_px.h"
#include "mask_cuda.h"

namespace {

const int kTW = 32, kTH = 16, kThreads = 256, kRMax = MK_GUIDED_TILE_RADIUS, kMaxDevices = 64;
/* A block walks up to kMaxChunks chunks of kTH rows down its column strip, carrying the column sums across chunks
 * in registers; each thread owns at most kMaxItems (column, channel group) walkers (r <= kRMax). */
const int kMaxChunks = 4, kMaxItems = 2;
static_assert((kTW + 2 * kRMax) * 4 <= kMaxItems * kThreads, "a thread walks at most kMaxItems columns");
/* int32 column sums of 2r+1 guide-times-source moments, int32 box sums of the others, exact. */
static_assert(255LL * MK_GUIDED_Q * (2 * kRMax + 1) < (1LL << 31), "column sums overflow int32");
static_assert((long long)MK_GUIDED_Q * (2 * kRMax + 1) * (2 * kRMax + 1) < (1LL << 31), "box sums overflow int32");

struct in_t {
    const uint8_t *guide;
    size_t gpitch;
    const void *src;
    size_t spitch;
    int src_f32;
};

__host__ __device__ constexpr size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

__host__ __device__ constexpr size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* ---- shared-memory layouts of the tile kernels ------------------------------------------------------------ */

__host__ __device__ constexpr int tile_sw(int r)
{
    return kTW + 2 * r;
}

/* Staged rows per chunk: the chunk's kTH rows, r above and below, and the row that leaves the first window. */
__host__ __device__ constexpr int tile_sh(int r)
{
    return kTH + 2 * r + 1;
}

/* Row pitch of the column-sum planes: odd, so that threads walking different rows hit different banks. */
__host__ __device__ constexpr int tile_vp(int r)
{
    return tile_sw(r) | 1;
}

/* coef_tile_kernel: staged guide (u32) and source (u16), int32 column sums of all moments, int64 row sums of the
 * guide-times-source moments (row pitch kTW + 1). */
__host__ __device__ constexpr size_t coef_off_v(int r)
{
    return align16((size_t)tile_sw(r) * tile_sh(r) * 6);
}

__host__ __device__ constexpr size_t coef_off_s64(int C, int r)
{
    return coef_off_v(r) + align16((size_t)MK_GUIDED_NM(C) * kTH * tile_vp(r) * 4);
}

__host__ __device__ constexpr size_t coef_smem(int C, int r)
{
    return coef_off_s64(C, r) + (size_t)C * kTH * (kTW + 1) * 8;
}

/* final_tile_kernel: staged coefficients (float planes), double column then row sums. */
__host__ __device__ constexpr size_t final_off_v(int C, int r)
{
    return align16((size_t)(C + 1) * tile_sw(r) * tile_sh(r) * 4);
}

__host__ __device__ constexpr size_t final_smem(int C, int r)
{
    return final_off_v(C, r) + (size_t)(C + 1) * kTH * tile_vp(r) * 8;
}

/* ---- coefficients: the tile path ------------------------------------------------------------------------- */

/* Moments are taken in groups that share one staged pixel; group g holds channels ch(g, 0..nv(g)-1).
 * Colour: {g0, g1, g2, p}, {g00, g01, g02}, {g11, g12, g22}, {g0 p, g1 p, g2 p}; grey: {g, p}, {gg}, {g p}. */
template <int C> struct groups;

template <> struct groups<3> {
    static const int n = 4;
    static __device__ __forceinline__ int nv(int g) { return g == 0 ? 4 : 3; }
    static __device__ __forceinline__ int ch(int g, int q)
    {
        return g == 0 ? (q < 3 ? q : 9) : g == 3 ? 10 + q : 3 * g + q;
    }
    static __device__ __forceinline__ void vals(int g, unsigned px, int p, int v[4])
    {
        int g0 = (int)(px & 255), g1 = (int)((px >> 8) & 255), g2 = (int)(px >> 16);
        switch (g) {
        case 0: v[0] = g0, v[1] = g1, v[2] = g2, v[3] = p; break;
        case 1: v[0] = g0 * g0, v[1] = g0 * g1, v[2] = g0 * g2, v[3] = 0; break;
        case 2: v[0] = g1 * g1, v[1] = g1 * g2, v[2] = g2 * g2, v[3] = 0; break;
        default: v[0] = g0 * p, v[1] = g1 * p, v[2] = g2 * p, v[3] = 0; break;
        }
    }
};

template <> struct groups<1> {
    static const int n = 3;
    static __device__ __forceinline__ int nv(int g) { return g == 0 ? 2 : 1; }
    static __device__ __forceinline__ int ch(int g, int q) { return g == 0 ? 2 * q : g == 1 ? 1 : 3; }
    static __device__ __forceinline__ void vals(int g, unsigned px, int p, int v[4])
    {
        int g0 = (int)px;
        v[1] = v[2] = v[3] = 0;
        if (g == 0)
            v[0] = g0, v[1] = p;
        else
            v[0] = g == 1 ? g0 * g0 : g0 * p;
    }
};

template <int C> __device__ __forceinline__ void store_coef(float *p, const float *v)
{
    if constexpr (C == 3)
        *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
    else
        *(float2 *)p = make_float2(v[0], v[1]);
}

template <int C> __device__ __forceinline__ void load_coef(const float *p, float *v)
{
    if constexpr (C == 3) {
        float4 a = __ldg((const float4 *)p);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    } else {
        float2 a = __ldg((const float2 *)p);
        v[0] = a.x, v[1] = a.y;
    }
}

/* v (0 <= v < 2^52) as a double, exactly, with one addition instead of a conversion (a quarter-rate op). */
__device__ __forceinline__ double exact_f64(long long v)
{
    return __hiloint2double(0x43300000 | (int)(v >> 32), (int)(unsigned)v) - 4503599627370496.0;
}

template <int C>
__global__ void __launch_bounds__(kThreads) coef_tile_kernel(in_t in, mk_guided_plan_t pl, int chunks,
                                                             float *__restrict__ ab)
{
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1, GP0 = NM - C; /* channels GP0.. are guide-times-source */
    extern __shared__ __align__(16) unsigned char smem[];
    const int r = pl.r, SW = tile_sw(r), VP = tile_vp(r), n_st = SW * tile_sh(r), tid = threadIdx.x;
    const int n_items = SW * groups<C>::n;
    unsigned *sg = (unsigned *)smem;
    unsigned short *sp = (unsigned short *)(sg + n_st);
    int *V = (int *)(smem + coef_off_v(r));
    long long *S64 = (long long *)(smem + coef_off_s64(C, r));
    const int x0 = blockIdx.x * kTW;
    int acc[kMaxItems][4];

    for (int k = 0; k < chunks; k++) {
        const int cy0 = (blockIdx.y * chunks + k) * kTH;
        if (cy0 >= pl.hl)
            break;
        /* Staged row j is working row cy0 - r - 1 + j. */
        for (int i = tid; i < n_st; i += kThreads) {
            int ty = i / SW, tx = i - ty * SW;
            int xl = mk_px_reflect(x0 - r + tx, pl.wl), yl = mk_px_reflect(cy0 - r - 1 + ty, pl.hl);
            int g[3] = {0, 0, 0};
            mk_px_guide_at(in.guide, in.gpitch, C, pl.w, pl.h, pl.s, xl, yl, g);
            sg[i] = C == 3 ? (unsigned)(g[0] | g[1] << 8 | g[2] << 16) : (unsigned)g[0];
            sp[i] = (unsigned short)mk_px_src_q((const char *)in.src + (size_t)yl * in.spitch, in.src_f32, xl);
        }
        __syncthreads();

        /* Column sums over 2r+1 rows for the chunk's rows: one walker per (column, moment group), its sums kept
         * from the previous chunk (the first chunk starts with a full window). */
#pragma unroll
        for (int it = 0; it < kMaxItems; it++) {
            int item = tid + it * kThreads;
            if (item >= n_items)
                break;
            int grp = item / SW, col = item - grp * SW, nv = groups<C>::nv(grp), v[4], u[4];
            if (k == 0) {
                acc[it][0] = acc[it][1] = acc[it][2] = acc[it][3] = 0;
                for (int j = 1; j <= 2 * r + 1; j++) {
                    groups<C>::vals(grp, sg[j * SW + col], sp[j * SW + col], v);
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        acc[it][q] += v[q];
                }
            } else {
                groups<C>::vals(grp, sg[(2 * r + 1) * SW + col], sp[(2 * r + 1) * SW + col], v);
                groups<C>::vals(grp, sg[col], sp[col], u);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    acc[it][q] += v[q] - u[q];
            }
            for (int t = 0; t < kTH; t++) {
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (q < nv)
                        V[(groups<C>::ch(grp, q) * kTH + t) * VP + col] = acc[it][q];
                if (t + 1 == kTH)
                    break;
                int in_ = (t + 2 * r + 2) * SW + col, out_ = (t + 1) * SW + col;
                groups<C>::vals(grp, sg[in_], sp[in_], v);
                groups<C>::vals(grp, sg[out_], sp[out_], u);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    acc[it][q] += v[q] - u[q];
            }
        }
        __syncthreads();

        /* Row sums over 2r+1 column sums for the kTW output columns: one thread per (moment, row); in place,
         * except the guide-times-source sums, which outgrow int32. */
        for (int item = tid; item < NM * kTH; item += kThreads) {
            int ch = item / kTH, t = item - ch * kTH;
            int *row = V + (ch * kTH + t) * VP;
            long long sum = 0;
            for (int j = 0; j <= 2 * r; j++)
                sum += row[j];
            long long *o = ch >= GP0 ? S64 + ((ch - GP0) * kTH + t) * (kTW + 1) : nullptr;
            for (int x = 0; x < kTW; x++) {
                int leave = row[x];
                if (o)
                    o[x] = sum;
                else
                    row[x] = (int)sum;
                if (x + 1 < kTW)
                    sum += row[x + 2 * r + 1] - leave;
            }
        }
        __syncthreads();

        for (int item = tid; item < kTW * kTH; item += kThreads) {
            int t = item / kTW, x = item - t * kTW, gx = x0 + x, gy = cy0 + t;
            if (gx >= pl.wl || gy >= pl.hl)
                continue;
            double S[NM];
#pragma unroll
            for (int ch = 0; ch < NM; ch++)
                S[ch] = exact_f64(ch >= GP0 ? S64[((ch - GP0) * kTH + t) * (kTW + 1) + x] : V[(ch * kTH + t) * VP + x]);
            float o[NC];
            mk_px_guided_solve(&pl, S, o, o + C);
            store_coef<C>(ab + ((size_t)gy * pl.wl + gx) * NC, o);
        }
        __syncthreads();
    }
}

/* ---- coefficient means, application: the tile path ------------------------------------------------------ */

/* MODE 0 (s = 1): q and its mask product at each pixel; MODE 1 (s > 1): the coefficient means. */
template <int C, int MODE>
__global__ void __launch_bounds__(kThreads) final_tile_kernel(in_t in, mk_guided_plan_t pl, int chunks,
                                                              const float *__restrict__ ab, mk_mask_out_t out,
                                                              float *__restrict__ means)
{
    constexpr int NC = C + 1;
    extern __shared__ __align__(16) unsigned char smem[];
    const int r = pl.r, SW = tile_sw(r), VP = tile_vp(r), n_st = SW * tile_sh(r), tid = threadIdx.x;
    const int n_items = SW * NC;
    float *sab = (float *)smem;
    double *V = (double *)(smem + final_off_v(C, r));
    const int x0 = blockIdx.x * kTW;
    double acc[kMaxItems];
    mk_guided_plan_t pc = pl; /* C known at compile time: the per-channel loops unroll into registers */
    pc.C = C;

    for (int k = 0; k < chunks; k++) {
        const int cy0 = (blockIdx.y * chunks + k) * kTH;
        if (cy0 >= pl.hl)
            break;
        for (int i = tid; i < n_st; i += kThreads) {
            int ty = i / SW, tx = i - ty * SW;
            int xl = mk_px_reflect(x0 - r + tx, pl.wl), yl = mk_px_reflect(cy0 - r - 1 + ty, pl.hl);
            float v[NC];
            load_coef<C>(ab + ((size_t)yl * pl.wl + xl) * NC, v);
#pragma unroll
            for (int c = 0; c < NC; c++)
                sab[c * n_st + i] = v[c];
        }
        __syncthreads();

#pragma unroll
        for (int it = 0; it < kMaxItems; it++) {
            int item = tid + it * kThreads;
            if (item >= n_items)
                break;
            int c = item / SW, col = item - c * SW;
            const float *v = sab + c * n_st + col;
            if (k == 0) {
                acc[it] = 0;
                for (int j = 1; j <= 2 * r + 1; j++)
                    acc[it] += (double)v[j * SW];
            } else {
                acc[it] += (double)v[(2 * r + 1) * SW] - (double)v[0];
            }
            for (int t = 0; t < kTH; t++) {
                V[(c * kTH + t) * VP + col] = acc[it];
                if (t + 1 < kTH)
                    acc[it] += (double)v[(t + 2 * r + 2) * SW] - (double)v[(t + 1) * SW];
            }
        }
        __syncthreads();

        for (int item = tid; item < NC * kTH; item += kThreads) {
            int c = item / kTH, t = item - c * kTH;
            double *row = V + (c * kTH + t) * VP, sum = 0;
            for (int j = 0; j <= 2 * r; j++)
                sum += row[j];
            for (int x = 0; x < kTW; x++) {
                double leave = row[x];
                row[x] = sum;
                if (x + 1 < kTW)
                    sum += row[x + 2 * r + 1] - leave;
            }
        }
        __syncthreads();

        for (int item = tid; item < kTW * kTH; item += kThreads) {
            int t = item / kTW, x = item - t * kTW, gx = x0 + x, gy = cy0 + t;
            if (gx >= pl.wl || gy >= pl.hl)
                continue;
            double A[3] = {0, 0, 0};
#pragma unroll
            for (int c = 0; c < C; c++)
                A[c] = V[(c * kTH + t) * VP + x];
            double B = V[(C * kTH + t) * VP + x];
            if constexpr (MODE == 0) {
                int g[3];
                mk_px_guide_at(in.guide, in.gpitch, C, pl.w, pl.h, 1, gx, gy, g);
                mk_mask_out_put(out, gx, gy, mk_px_guided_apply(&pc, A, B, g));
            } else {
                float m[NC];
                mk_px_guided_means(&pc, A, B, m);
                store_coef<C>(means + ((size_t)gy * pl.wl + gx) * NC, m);
            }
        }
        __syncthreads();
    }
}

/* ---- the full-resolution pass of the fast filter, and clearing ------------------------------------------ */

template <int C>
__global__ void up_apply_kernel(in_t in, mk_guided_plan_t pl, const float *__restrict__ means, mk_mask_out_t out)
{
    constexpr int NC = C + 1;
    int dx = blockIdx.x * blockDim.x + threadIdx.x, dy = blockIdx.y * blockDim.y + threadIdx.y;
    if (dx >= out.dw || dy >= out.dh)
        return;
    if (mk_mask_out_outside(out, dx, dy)) {
        mk_mask_out_zero(out, dx, dy);
        return;
    }
    int x = dx - out.x, y = dy - out.y, i0, i1, j0, j1, g[3];
    float fx, fy, m00[NC], m01[NC], m10[NC], m11[NC];
    mk_px_up_coord(x, pl.s, pl.wl, &i0, &i1, &fx);
    mk_px_up_coord(y, pl.s, pl.hl, &j0, &j1, &fy);
    const float *r0 = means + (size_t)j0 * pl.wl * NC, *r1 = means + (size_t)j1 * pl.wl * NC;
    load_coef<C>(r0 + i0 * NC, m00);
    load_coef<C>(r0 + i1 * NC, m01);
    load_coef<C>(r1 + i0 * NC, m10);
    load_coef<C>(r1 + i1 * NC, m11);
    mk_px_guide_at(in.guide, in.gpitch, C, pl.w, pl.h, 1, x, y, g);
    mk_mask_out_put(out, x, y, mk_px_guided_up(C, m00, m01, m10, m11, fx, fy, g));
}

__global__ void clear_outside_kernel(mk_mask_out_t out)
{
    int dx = blockIdx.x * blockDim.x + threadIdx.x, dy = blockIdx.y * blockDim.y + threadIdx.y;
    if (dx < out.dw && dy < out.dh && mk_mask_out_outside(out, dx, dy))
        mk_mask_out_zero(out, dx, dy);
}

/* ---- large radii: the reference's summed-area tables ----------------------------------------------------- */

/* One thread per working row: the running row sums of every moment (and the zero row and column). */
template <int C>
__global__ void sat_rows_moments_kernel(in_t in, mk_guided_plan_t pl, long long *sat, size_t plane)
{
    constexpr int NM = MK_GUIDED_NM(C);
    int y = blockIdx.x * blockDim.x + threadIdx.x;
    if (y >= pl.hl)
        return;
    const size_t st = (size_t)pl.wl + 1;
    if (y == 0)
        for (int k = 0; k < NM; k++)
            for (size_t x = 0; x < st; x++)
                sat[k * plane + x] = 0;
    long long acc[MK_GUIDED_MAX_NM] = {0}, mo[MK_GUIDED_MAX_NM];
    for (int k = 0; k < NM; k++)
        sat[k * plane + (y + 1) * st] = 0;
    const void *srow = (const char *)in.src + (size_t)y * in.spitch;
    for (int x = 0; x < pl.wl; x++) {
        int g[3];
        mk_px_guide_at(in.guide, in.gpitch, C, pl.w, pl.h, pl.s, x, y, g);
        mk_px_moments(C, g, mk_px_src_q(srow, in.src_f32, x), mo);
        for (int k = 0; k < NM; k++) {
            acc[k] += mo[k];
            sat[k * plane + (y + 1) * st + x + 1] = acc[k];
        }
    }
}

/* One thread per working row: the running row sums of the coefficients, in double as the reference. */
template <int C>
__global__ void sat_rows_coef_kernel(mk_guided_plan_t pl, const float *__restrict__ ab, double *sat, size_t plane)
{
    constexpr int NC = C + 1;
    int y = blockIdx.x * blockDim.x + threadIdx.x;
    if (y >= pl.hl)
        return;
    const size_t st = (size_t)pl.wl + 1;
    if (y == 0)
        for (int k = 0; k < NC; k++)
            for (size_t x = 0; x < st; x++)
                sat[k * plane + x] = 0;
    double acc[NC];
    for (int k = 0; k < NC; k++) {
        acc[k] = 0;
        sat[k * plane + (y + 1) * st] = 0;
    }
    for (int x = 0; x < pl.wl; x++) {
        const float *v = ab + ((size_t)y * pl.wl + x) * NC;
        for (int k = 0; k < NC; k++) {
            acc[k] = MK_DADD(acc[k], (double)v[k]);
            sat[k * plane + (y + 1) * st + x + 1] = acc[k];
        }
    }
}

/* One thread per table column: adds the finished entry above to each row sum, top to bottom. */
template <typename T> __device__ __forceinline__ T add_above(T row, T above);
template <> __device__ __forceinline__ long long add_above(long long row, long long above)
{
    return row + above;
}
template <> __device__ __forceinline__ double add_above(double row, double above)
{
    return MK_DADD(row, above);
}

template <typename T> __global__ void sat_cols_kernel(T *sat, size_t plane, int ntab, int wl, int hl)
{
    const size_t st = (size_t)wl + 1;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= st * (size_t)ntab)
        return;
    T *t = sat + (i / st) * plane + i % st;
    for (int y = 1; y <= hl; y++)
        t[y * st] = add_above(t[y * st], t[(y - 1) * st]);
}

template <int C>
__global__ void coef_sat_kernel(mk_guided_plan_t pl, const long long *__restrict__ sat, size_t plane,
                                float *__restrict__ ab)
{
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1;
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= pl.wl || y >= pl.hl)
        return;
    mk_box_t box = mk_px_box_at(x, y, pl.r, pl.wl, pl.hl);
    double S[NM];
    for (int k = 0; k < NM; k++)
        S[k] = (double)mk_px_sat_box_i64(sat + k * plane, (size_t)pl.wl + 1, pl.wl, pl.hl, box);
    float o[NC];
    mk_px_guided_solve(&pl, S, o, o + C);
    store_coef<C>(ab + ((size_t)y * pl.wl + x) * NC, o);
}

template <int C, int MODE>
__global__ void final_sat_kernel(in_t in, mk_guided_plan_t pl, const double *__restrict__ sat, size_t plane,
                                 mk_mask_out_t out, float *__restrict__ means)
{
    constexpr int NC = C + 1;
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= pl.wl || y >= pl.hl)
        return;
    const size_t st = (size_t)pl.wl + 1;
    mk_box_t box = mk_px_box_at(x, y, pl.r, pl.wl, pl.hl);
    double A[3] = {0, 0, 0};
    for (int c = 0; c < C; c++)
        A[c] = mk_px_sat_box_f64(sat + c * plane, st, pl.wl, pl.hl, box);
    double B = mk_px_sat_box_f64(sat + C * plane, st, pl.wl, pl.hl, box);
    mk_guided_plan_t pc = pl;
    pc.C = C;
    if constexpr (MODE == 0) {
        int g[3];
        mk_px_guide_at(in.guide, in.gpitch, C, pl.w, pl.h, 1, x, y, g);
        mk_mask_out_put(out, x, y, mk_px_guided_apply(&pc, A, B, g));
    } else {
        float m[NC];
        mk_px_guided_means(&pc, A, B, m);
        store_coef<C>(means + ((size_t)y * pl.wl + x) * NC, m);
    }
}

/* ---- host side ------------------------------------------------------------------------------------------- */

/* Opts a kernel into the dynamic shared memory of the largest radius once per device. */
template <typename K> int allow_smem(mk_ctx_t *ctx, K kernel, size_t bytes, int *done)
{
    int d = ctx->device >= 0 && ctx->device < kMaxDevices ? ctx->device : -1;
    if (bytes <= 48 * 1024 || (d >= 0 && __atomic_load_n(&done[d], __ATOMIC_ACQUIRE)))
        return 0;
    int rc = MK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    if (!rc && d >= 0)
        __atomic_store_n(&done[d], 1, __ATOMIC_RELEASE);
    return rc;
}

dim3 grid2d(int w, int h, dim3 block)
{
    return dim3((unsigned)(w + (int)block.x - 1) / block.x, (unsigned)(h + (int)block.y - 1) / block.y);
}

/* Chunks per block: as many as keep about three blocks per SM busy (fewer warm-ups), at most kMaxChunks. */
int tile_chunks(const mk_ctx_t *ctx, const mk_guided_plan_t &pl)
{
    long tiles = (long)((pl.wl + kTW - 1) / kTW) * ((pl.hl + kTH - 1) / kTH);
    long c = tiles / (3L * (ctx->sm_count > 0 ? ctx->sm_count : 1));
    return c < 1 ? 1 : c > kMaxChunks ? kMaxChunks : (int)c;
}

template <int C>
int tile_path(mk_ctx_t *ctx, const in_t &in, const mk_guided_plan_t &pl, float *ab, float *means,
              const mk_mask_out_t &out)
{
    static int coef_done[kMaxDevices], apply_done[kMaxDevices], means_done[kMaxDevices];
    cudaStream_t s = MK_STREAM(ctx);
    int rc, chunks = tile_chunks(ctx, pl);
    if ((rc = allow_smem(ctx, coef_tile_kernel<C>, coef_smem(C, kRMax), coef_done)) ||
        (rc = allow_smem(ctx, final_tile_kernel<C, 0>, final_smem(C, kRMax), apply_done)) ||
        (rc = allow_smem(ctx, final_tile_kernel<C, 1>, final_smem(C, kRMax), means_done)))
        return rc;
    dim3 grid((unsigned)(pl.wl + kTW - 1) / kTW, (unsigned)(pl.hl + kTH * chunks - 1) / (kTH * chunks));
    coef_tile_kernel<C><<<grid, kThreads, coef_smem(C, pl.r), s>>>(in, pl, chunks, ab);
    if ((rc = MK_CUDA_LAUNCH_CHECK(coef_tile_kernel)))
        return rc;
    if (pl.s == 1) {
        final_tile_kernel<C, 0><<<grid, kThreads, final_smem(C, pl.r), s>>>(in, pl, chunks, ab, out, nullptr);
        return MK_CUDA_LAUNCH_CHECK(final_tile_kernel);
    }
    final_tile_kernel<C, 1><<<grid, kThreads, final_smem(C, pl.r), s>>>(in, pl, chunks, ab, out, means);
    return MK_CUDA_LAUNCH_CHECK(final_tile_kernel);
}

template <int C>
int sat_path(mk_ctx_t *ctx, const in_t &in, const mk_guided_plan_t &pl, float *ab, float *means, long long *sat,
             double *sat2, const mk_mask_out_t &out)
{
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1;
    cudaStream_t s = MK_STREAM(ctx);
    const size_t st = (size_t)pl.wl + 1, plane = st * ((size_t)pl.hl + 1);
    const unsigned rows = (unsigned)(pl.hl + 63) / 64;
    dim3 block(32, 8), grid = grid2d(pl.wl, pl.hl, block);
    int rc;
    sat_rows_moments_kernel<C><<<rows, 64, 0, s>>>(in, pl, sat, plane);
    if ((rc = MK_CUDA_LAUNCH_CHECK(sat_rows_moments_kernel)))
        return rc;
    sat_cols_kernel<long long><<<(unsigned)((st * NM + 127) / 128), 128, 0, s>>>(sat, plane, NM, pl.wl, pl.hl);
    if ((rc = MK_CUDA_LAUNCH_CHECK(sat_cols_kernel)))
        return rc;
    coef_sat_kernel<C><<<grid, block, 0, s>>>(pl, sat, plane, ab);
    if ((rc = MK_CUDA_LAUNCH_CHECK(coef_sat_kernel)))
        return rc;
    sat_rows_coef_kernel<C><<<rows, 64, 0, s>>>(pl, ab, sat2, plane);
    if ((rc = MK_CUDA_LAUNCH_CHECK(sat_rows_coef_kernel)))
        return rc;
    sat_cols_kernel<double><<<(unsigned)((st * NC + 127) / 128), 128, 0, s>>>(sat2, plane, NC, pl.wl, pl.hl);
    if ((rc = MK_CUDA_LAUNCH_CHECK(sat_cols_kernel)))
        return rc;
    if (pl.s == 1)
        final_sat_kernel<C, 0><<<grid, block, 0, s>>>(in, pl, sat2, plane, out, nullptr);
    else
        final_sat_kernel<C, 1><<<grid, block, 0, s>>>(in, pl, sat2, plane, out, means);
    return MK_CUDA_LAUNCH_CHECK(final_sat_kernel);
}

template <int C>
int run(mk_ctx_t *ctx, const in_t &in, const mk_guided_plan_t &pl, const mk_mask_out_t &out)
{
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1;
    const bool tile = pl.r <= kRMax;
    const size_t npx = (size_t)pl.wl * pl.hl, plane = ((size_t)pl.wl + 1) * ((size_t)pl.hl + 1);
    const size_t coef_bytes = align256(npx * NC * sizeof(float));
    const size_t off_means = coef_bytes, off_sat = off_means + (pl.s > 1 ? coef_bytes : 0);
    const size_t off_sat2 = off_sat + (tile ? 0 : align256(NM * plane * sizeof(long long)));
    const size_t total = off_sat2 + (tile ? 0 : NC * plane * sizeof(double));
    void *p;
    int rc = mk_ctx_scratch(ctx, MK_SCRATCH_GUIDED, total, &p, NULL);
    if (rc)
        return rc;
    char *base = (char *)p;
    float *ab = (float *)base, *means = (float *)(base + off_means);
    rc = tile ? tile_path<C>(ctx, in, pl, ab, means, out)
              : sat_path<C>(ctx, in, pl, ab, means, (long long *)(base + off_sat), (double *)(base + off_sat2), out);
    if (rc)
        return rc;
    dim3 block(32, 8), grid = grid2d(out.dw, out.dh, block);
    if (pl.s > 1) {
        up_apply_kernel<C><<<grid, block, 0, MK_STREAM(ctx)>>>(in, pl, means, out);
        return MK_CUDA_LAUNCH_CHECK(up_apply_kernel);
    }
    if (mk_mask_out_partial(&out)) {
        clear_outside_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>(out);
        return MK_CUDA_LAUNCH_CHECK(clear_outside_kernel);
    }
    return 0;
}

} // namespace

extern "C" int mk_guided_upsample_cuda(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask,
                                       mk_image_t *dst, const mk_guided_plan_t *pl, const mk_mask_t *m)
{
    in_t in = {(const uint8_t *)guide->data, guide->pitch, mask->data, mask->pitch, mask->dtype == MK_F32};
    mk_mask_out_t out = mk_mask_out(dst, m, pl->w, pl->h);
    return pl->C == 3 ? run<3>(ctx, in, *pl, out) : run<1>(ctx, in, *pl, out);
}
