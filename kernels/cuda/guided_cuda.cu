/* guided_cuda: the guided filter and fast guided upsampling on the device.
 *
 * Working radius r <= MK_GUIDED_TILE_RADIUS (r = 8 at 1080p, r / s for the fast filter): strip kernels. A warp owns
 * a strip of 128 working columns and a band of rows and walks down the band (final_kernel's warps in pairs, one up
 * and one down from a shared centre row). Lane L keeps the vertical window sums of columns 4L..4L+3 in registers
 * (one row enters and one leaves per step); the horizontal window sums of a row are differences of prefix sums
 * across the warp (shuffles; at the radius kFixedR, compiled in, the lanes' totals over the window summed by
 * doubling instead of a scan). Only final_kernel's pairs swap their warm-up sums through shared memory; every sum
 * costs the same for any radius, and a strip yields 128 - 2r output columns rounded down to a multiple of 4 (a band
 * pays 2r + 1 rows of warm-up, a pair of final_kernel's bands r + 1 rows each).
 *   coef_kernel:  the window sums of the moments of shifted samples (guide - 128, source - 32768) as exact
 *                 integers (32 bits; the guide-times-source ones in int64 past r = 10), then per pixel the
 *                 reference's own solve, told the shifts (mk_px_guided_solve_shifted): a and b as floats, the same
 *                 bits as the CPU's.
 *                 a and b go to C + 1 planes (rows padded to 4 floats): the strips' working columns start on a
 *                 multiple of 4, so a lane's four columns of a plane row are one aligned float4.
 *   final_kernel: the window sums of a and b in double (another order than the reference's tables: equal to
 *                 ~1e-13 relative), then per pixel q and its mask product (s = 1) or the coefficient means at low
 *                 resolution (s > 1). A warp whose strip lies inside the image reads a plane row as one float4 per
 *                 lane; the strips at the image's left and right edges (reflected columns) read one float each.
 * The fast filter (s > 1) starts with reduce_kernel, the guide reduced by s x s area averages (one thread per
 * reduced pixel, the block's loads unrolled for s = 2, 3, 4), and ends with up_kernel: bilinear means applied to the
 * full-resolution guide, the mask product and zeros outside the pasted rectangle in one pass over the output. Between
 * them, for working radii up to kLowRMax (8), one low_kernel computes the means of a tile in shared memory (the
 * moments, a and b over the tile and its margin, their sums); larger radii run the strip kernels at low resolution.
 * Launches: s = 1 two (and a clearing pass for a partial paste), s > 1 three (four past kLowRMax); each after the
 * first is a programmatic dependent launch (its blocks are scheduled as the previous kernel's leave the SMs and wait
 * in cudaGridDependencySynchronize() before touching what that kernel wrote), so the launch gaps overlap the previous
 * kernel's tail.
 * Larger radii run the CPU reference's algorithm in parallel (summed-area tables built by one thread per row, then
 * per column, in the reference's order; one thread per pixel after), so that path equals the CPU bit for bit;
 * its tables take (moments + C + 1) x 8 bytes per working pixel of the context's scratch.
 * Nothing is allocated per call: coefficients, means, the reduced guide and the tables live in the context's
 * MK_SCRATCH_GUIDED slot. */
#include "backend.h"
#include "cuda_check.h"
#include "guided_px.h"
#include "mask_cuda.h"
#include "occupancy.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

const unsigned kFull = 0xffffffffu;
const int kWarp = 32, kLaneCols = 4, kStripCols = kWarp * kLaneCols, kRMax = MK_GUIDED_TILE_RADIUS;
const int kStripWarps = 4, kStripThreads = kStripWarps * kWarp;
/* up_kernel: a block of kUpThreads threads for kUpCols x kUpRows output pixels, a thread per kUpPx neighbouring
 * columns and every kUpStep-th row; the y-interpolated means of the block's rows in at most kUpVMax low-resolution
 * columns. Columns x .. x + kUpCols - 1 reach from i0(x) = floor((2x + 1 - s) / 2s) to i1 = floor((2x + 2 kUpCols -
 * 1 - s) / 2s) + 1: at most ceil((kUpCols - 1) / s) + 2 columns, 66 at s = 2 (the worst case, for any alignment of
 * x). */
const int kUpCols = 128, kUpRows = 32, kUpThreads = 256, kUpPx = 4, kUpTx = kUpCols / kUpPx,
          kUpStep = kUpThreads / kUpTx;
const int kUpVMax = kUpCols / 2 + 2;

/* The most low-resolution columns kUpCols neighbouring output columns reach, over every scale and alignment (the
 * pattern repeats every 2s columns), as mk_px_up_coord computes them before clamping. */
constexpr int up_columns_max()
{
    int worst = 0;
    for (int s = 2; s <= MK_GUIDED_MAX_SCALE; s++)
        for (int x = 0; x < 2 * s; x++) {
            auto lo = [s](int v) { const int num = 2 * v + 1 - s, den = 2 * s; return num >= 0 ? num / den : -((-num + den - 1) / den); };
            const int n = lo(x + kUpCols - 1) + 1 - lo(x) + 1;
            worst = n > worst ? n : worst;
        }
    return worst;
}
static_assert(kUpVMax >= up_columns_max(), "up_kernel's shared columns");
/* The strips of radius r: each yields strip_outs(r) output columns, a multiple of kLaneCols (2r + 1 working
 * columns of a window fit the strip's 128), so that the working columns of every strip start on a multiple of
 * kLaneCols; the first strip's outputs start strip_shift(r) (0..3) columns left of the image for that (those are
 * not stored). Then a lane's four working columns are 16-byte aligned in the coefficient planes. */
__host__ __device__ constexpr int strip_outs(int r)
{
    return (kStripCols - 2 * r) & ~(kLaneCols - 1);
}
__host__ __device__ constexpr int strip_shift(int r)
{
    return (kLaneCols - r % kLaneCols) % kLaneCols;
}
__host__ __device__ constexpr int strip_count(int r, int wl)
{
    return (wl + strip_shift(r) + strip_outs(r) - 1) / strip_outs(r);
}
/* The strip kernels' coefficient planes: a_0..a_{C-1}, b, each of hl rows of coef_pitch(wl) floats. */
__host__ __device__ constexpr int coef_pitch(int wl)
{
    return (wl + kLaneCols - 1) & ~(kLaneCols - 1);
}
static_assert(strip_outs(kRMax) >= kLaneCols, "a strip yields outputs at the largest tile radius");
/* The full filter's strip kernels are also compiled for this radius (the default guided.radius and the benchmark's),
 * whose window sums need no scan (strip_box); other radii take the general kernels. */
const int kFixedR = 8;
/* coef_kernel sums the moments of shifted samples, guide levels minus kG0 and source values minus kP0 (|g| <= 128,
 * |p| <= 32768; the solve takes the shifts back, mk_px_guided_solve_shifted), as exact integers: vertical sums of
 * 2r + 1 moments fit int32. The horizontal sums are differences of prefix sums along the strip taken modulo 2^32
 * (unsigned arithmetic), exact wherever the window's sum itself fits int32: for every moment at any radius up to
 * kRMax but the guide-times-source ones, and for those too while (2r + 1)^2 128 32768 < 2^31 (r <= 10, narrow_r);
 * above that they are summed in int64. */
const int kG0 = 128, kP0 = 32768;
static_assert(128LL * 32768 * (2 * kRMax + 1) < (1LL << 31), "column sums of g p overflow int32");
static_assert(128LL * 128 * (2 * kRMax + 1) * (2 * kRMax + 1) < (1LL << 31), "window sums of g g overflow int32");
__host__ __device__ constexpr bool narrow_r(int r)
{
    return 128LL * 32768 * (2 * r + 1) * (2 * r + 1) < (1LL << 31);
}

static_assert(narrow_r(kFixedR), "the fixed radius's window sums fit 32 bits");

struct in_t {
    const uint8_t *guide;   /* the full-resolution guide, C bytes per pixel */
    size_t gpitch;
    const unsigned *rguide; /* s > 1, strip kernels: the reduced guide, levels in bytes 0..C-1, wl per row */
    const void *src;        /* the source at the working resolution */
    size_t spitch;
    int src_f32;
    int g4; /* the guide's address and pitch are multiples of 4 bytes */
    int svec; /* the source's address and pitch are multiples of 16 bytes (f32) or 4 (u8): a strip's row in vectors */
};

__host__ __device__ constexpr size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

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

/* Programmatic dependent launch (sm_90 and later; nothing on older targets, where launches serialize): wait until
 * the previous kernel on the stream has completed and its memory is visible; let the next kernel's blocks be
 * scheduled (it still waits for this one in its own wait_previous_kernel). */
__device__ __forceinline__ void wait_previous_kernel()
{
#if __CUDA_ARCH__ >= 900
    cudaGridDependencySynchronize();
#endif
}

__device__ __forceinline__ void allow_next_kernel()
{
#if __CUDA_ARCH__ >= 900
    cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/* v as a double, exactly, with one addition instead of a conversion (a quarter-rate op). */
__device__ __forceinline__ double exact_f64s(int v)
{
    return __hiloint2double(0x43300000, (int)((unsigned)v ^ 0x80000000u)) - 4503601774854144.0; /* 2^52 + 2^31 */
}

/* v (0 <= v < 2^52) as a double, exactly, with one addition instead of a conversion (a quarter-rate op). */
__device__ __forceinline__ double exact_f64(long long v)
{
    return __hiloint2double(0x43300000 | (int)(v >> 32), (int)(unsigned)v) - 4503599627370496.0;
}

__device__ __forceinline__ double exact_f64(unsigned v)
{
    return __hiloint2double(0x43300000, (int)v) - 4503599627370496.0;
}

/* ---- the strip kernels ---------------------------------------------------------------------------------- */

/* A warp's strip: working columns x0 - r .. x0 - r + 127 (reflected at the image edges; x0 - r is a multiple of
 * kLaneCols), output columns x0 .. x0 + strip_outs(r) - 1 (those inside the image), rows y0 .. y1 - 1. The warps of
 * a block take consecutive bands of one strip (strip_of). */
struct strip_t {
    int x0, y0, y1;
    int top; /* PAIR: the pair's first row (the up walker's y0) */
    int dir; /* final_kernel: +1 walks down from y0, -1 walks up from y1 - 1 */
};

/* The warps of a block take kStripWarps consecutive bands of one strip (band-major): their warm-up rows overlap,
 * so that one SM loads the lines they share (in L1) instead of several SMs (session 24: 1080p colour -2.5 us in
 * final_kernel against neighbouring strips of one band). */
template <bool PAIR = false>
__device__ __forceinline__ bool strip_of(const mk_guided_plan_t &pl, int band_rows, strip_t &st)
{
    const int outs = strip_outs(pl.r), strips = strip_count(pl.r, pl.wl);
    const int bg = (int)blockIdx.x / strips, strip = (int)blockIdx.x - bg * strips;
    const int band = bg * kStripWarps + (int)threadIdx.x / kWarp;
    st.x0 = strip * outs - strip_shift(pl.r);
    st.dir = 1;
    if constexpr (PAIR) { /* bands 2p (up) and 2p + 1 (down) around the centre c of rows 2p R .. 2p R + 2R - 1 */
        const int top = (band >> 1) * 2 * band_rows, c = min(top + band_rows, pl.hl);
        st.dir = (band & 1) ? 1 : -1;
        st.y0 = st.dir > 0 ? c : top;
        st.y1 = st.dir > 0 ? min(c + band_rows, pl.hl) : c;
        st.top = top;
        return top < pl.hl; /* both walkers of a live pair take part in the swap, an empty one too */
    }
    st.y0 = band * band_rows;
    st.y1 = min(st.y0 + band_rows, pl.hl);
    return st.y0 < pl.hl;
}

/* v + (the v of lane - d, where that lane exists): the shuffle's own lane-valid predicate guards the addition, one
 * instruction less per step than a compare and a select (the same sum, the same bits). */
__device__ __forceinline__ unsigned shfl_up_add(unsigned v, int d)
{
    asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
        "shfl.sync.up.b32 t|p, %0, %1, 0, -1;\n\t"
        "@p add.u32 %0, %0, t;\n\t}"
        : "+r"(v)
        : "r"(d));
    return v;
}

__device__ __forceinline__ long long shfl_up_add(long long v, int d)
{
    asm("{\n\t.reg .pred p;\n\t.reg .b32 lo, hi, tl, th;\n\t.reg .b64 t;\n\t"
        "mov.b64 {lo, hi}, %0;\n\t"
        "shfl.sync.up.b32 tl|p, lo, %1, 0, -1;\n\t"
        "shfl.sync.up.b32 th, hi, %1, 0, -1;\n\t"
        "mov.b64 t, {tl, th};\n\t"
        "@p add.s64 %0, %0, t;\n\t}"
        : "+l"(v)
        : "r"(d));
    return v;
}

__device__ __forceinline__ double shfl_up_add(double v, int d)
{
    asm("{\n\t.reg .pred p;\n\t.reg .b32 lo, hi, tl, th;\n\t.reg .f64 t;\n\t"
        "mov.b64 {lo, hi}, %0;\n\t"
        "shfl.sync.up.b32 tl|p, lo, %1, 0, -1;\n\t"
        "shfl.sync.up.b32 th, hi, %1, 0, -1;\n\t"
        "mov.b64 t, {tl, th};\n\t"
        "@p add.rn.f64 %0, %0, t;\n\t}"
        : "+d"(v)
        : "r"(d));
    return v;
}

/* Inclusive prefix sum of v over the lanes of the warp (every lane of the warp takes part). */
template <typename T> __device__ __forceinline__ T warp_prefix(T v)
{
#pragma unroll
    for (int d = 1; d < kWarp; d <<= 1)
        v = shfl_up_add(v, d);
    return v;
}

/* The sum of v over lanes L .. L + N - 1 (N >= 1, known at compile time), by doubling: s holds sums of 2^k lanes
 * starting at L, and the powers of two in N are added at their offsets. Lanes past the warp's end read their own
 * value (their sums are not used). */
template <int N, typename T> __device__ __forceinline__ T lane_range_sum(T v)
{
    T s = v, sum = v;
    bool have = false;
    int off = 0;
#pragma unroll
    for (int k = 0; (1 << k) <= N; k++) {
        if (k > 0)
            s = s + __shfl_down_sync(kFull, s, 1 << (k - 1));
        if (N & (1 << k)) {
            const T t = off ? __shfl_down_sync(kFull, s, off) : s;
            sum = have ? sum + t : t;
            have = true;
            off += 1 << k;
        }
    }
    return sum;
}

/* Window sums of 2r + 1 columns along a strip: lane L holds the values c[0..3] of columns 4L..4L+3, and out[j]
 * becomes the sum over columns 4L+j .. 4L+j+2r, valid where 4L + j + 2r < 128.
 * RS = 0 (any r): with P the prefix sums along the strip, out[j] = P(4L+j+2r) - P(4L+j-1); the first term comes from
 * lane L + (j+2r)/4, element (j+2r) % 4 (a scan of the lanes' totals, then four shuffles).
 * RS = r > 0 (known at compile time; 2r = 4d + 2e): the window is the totals of lanes L .. L+d-1 less this lane's
 * columns before j, plus the columns up to j + 2e of lane L + d (past its end, lane L + d + 1's): no scan, the
 * totals summed over d lanes by doubling. Integer sums are exact either way (modulo 2^32 where the window's sum
 * fits); double sums round in another order. */
template <int RS, typename T>
__device__ __forceinline__ void strip_box(const T c[kLaneCols], int r, T out[kLaneCols])
{
    const T p0 = c[0], p1 = p0 + c[1], p2 = p1 + c[2], p3 = p2 + c[3];
    static_assert(RS == 0 || RS >= 2, "a fixed radius of at least 2 (the window spans whole lanes)");
    if constexpr (RS > 0) {
        constexpr int d = RS >> 1;
        const T R = lane_range_sum<d>(p3);
        const T x0 = __shfl_down_sync(kFull, p0, d), x1 = __shfl_down_sync(kFull, p1, d);
        const T x2 = __shfl_down_sync(kFull, p2, d), x3 = __shfl_down_sync(kFull, p3, d);
        if constexpr (RS & 1) { /* 2r = 4d + 2 */
            const T y0 = __shfl_down_sync(kFull, p0, d + 1), y1 = __shfl_down_sync(kFull, p1, d + 1);
            const T R1 = R + x3;
            out[0] = R + x2;
            out[1] = (R - p0) + x3;
            out[2] = (R1 - p1) + y0;
            out[3] = (R1 - p2) + y1;
        } else { /* 2r = 4d */
            out[0] = R + x0;
            out[1] = (R - p0) + x1;
            out[2] = (R - p1) + x2;
            out[3] = (R - p2) + x3;
        }
        (void)r;
        return;
    }
    const T left = warp_prefix(p3) - p3; /* the columns of the lanes before this one */
    const T P0 = left + p0, P1 = left + p1, P2 = left + p2, P3 = left + p3;
    const int d = r >> 1;
    T hi0, hi1, hi2, hi3;
    if (r & 1) { /* 2r = 4d + 2 */
        hi0 = __shfl_down_sync(kFull, P2, d);
        hi1 = __shfl_down_sync(kFull, P3, d);
        hi2 = __shfl_down_sync(kFull, P0, d + 1);
        hi3 = __shfl_down_sync(kFull, P1, d + 1);
    } else { /* 2r = 4d */
        hi0 = __shfl_down_sync(kFull, P0, d);
        hi1 = __shfl_down_sync(kFull, P1, d);
        hi2 = __shfl_down_sync(kFull, P2, d);
        hi3 = __shfl_down_sync(kFull, P3, d);
    }
    out[0] = hi0 - left;
    out[1] = hi1 - P0;
    out[2] = hi2 - P1;
    out[3] = hi3 - P2;
}

/* v += SIGN x the moments of a pixel of guide levels g and source fixed point pq, in the order of mk_px_moments
 * (int32: each at most 255 * 65535); the sign goes on one factor, so that each product is one multiply-add. */
template <int C, int SIGN> __device__ __forceinline__ void add_moments(const int g[3], int pq, int v[MK_GUIDED_NM(C)])
{
    int sg[3], k = 0;
#pragma unroll
    for (int i = 0; i < C; i++)
        sg[i] = SIGN * g[i];
#pragma unroll
    for (int i = 0; i < C; i++)
        v[k++] += sg[i];
#pragma unroll
    for (int i = 0; i < C; i++)
#pragma unroll
        for (int l = i; l < C; l++)
            v[k++] += sg[i] * g[l];
    v[k++] += SIGN * pq;
#pragma unroll
    for (int i = 0; i < C; i++)
        v[k++] += sg[i] * pq;
}

/* The lane's columns of working row y: guide levels g and source fixed point pq, shifted by kG0 and kP0, every load
 * issued before any value is used (no branch depends on a loaded value). REDUCED: the guide is the reduced one
 * (s > 1). */
template <int C, bool REDUCED> struct row_px {
    int g[kLaneCols][3], pq[kLaneCols];

    __device__ __forceinline__ void fetch(const in_t &in, const mk_guided_plan_t &pl, const int col[kLaneCols], int y)
    {
        if constexpr (REDUCED) {
            const unsigned *grow = in.rguide + (size_t)y * pl.wl;
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
                const unsigned u = __ldg(grow + col[j]);
#pragma unroll
                for (int c = 0; c < C; c++)
                    g[j][c] = (int)((u >> (8 * c)) & 255u) - kG0;
            }
        } else {
            const uint8_t *grow = in.guide + (size_t)y * in.gpitch;
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
#pragma unroll
                for (int c = 0; c < C; c++)
                    g[j][c] = __ldg(grow + col[j] * C + c) - kG0;
        }
        const char *srow = (const char *)in.src + (size_t)y * in.spitch;
        if (in.src_f32) {
            float v[kLaneCols];
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                v[j] = __ldg((const float *)srow + col[j]);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                pq[j] = mk_px_src_q_f32(v[j]) - kP0;
        } else {
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                pq[j] = __ldg((const uint8_t *)srow + col[j]) * 257 - kP0;
        }
    }

    /* ST: the row from the pair's staged rows (stage_in): gb the lane's guide bytes, sb its source words. */
    __device__ __forceinline__ void fetch_st(const signed char *gb, const unsigned *sb)
    {
#pragma unroll
        for (int j = 0; j < kLaneCols; j++)
#pragma unroll
            for (int c = 0; c < C; c++)
                g[j][c] = gb[j * C + c];
        const uint2 w = *(const uint2 *)sb;
        pq[0] = (int)(w.x << 16) >> 16, pq[1] = (int)w.x >> 16;
        pq[2] = (int)(w.y << 16) >> 16, pq[3] = (int)w.y >> 16;
    }

    /* v += SIGN x the moments of column j (add_moments below). */
    template <int SIGN> __device__ __forceinline__ void add_moments(int j, int v[MK_GUIDED_NM(C)]) const
    {
        ::add_moments<C, SIGN>(g[j], pq[j], v);
    }
};

/* Asks L2 for the rows y0 .. y1 - 1 of the guide and the source at the lane's first working column c0: the lines
 * of the band's whole input are requested at the start, without registers, instead of one row step at a time as
 * the walk reaches them (session 24: 1080p colour -2.5 us; every warp's 17-row warm-up starts at once, a burst of
 * loads from DRAM). Rows outside the image are left out: they reflect onto the first or last r rows, which the
 * pair's ranges hold (a hint only: a row missed is read from DRAM when the walk reaches it). Session 26: rows
 * clamped, addresses stepped, the pair's range split between its walkers: 720p 1-8 % faster, 1080p the same. */
template <int C, bool REDUCED>
__device__ __forceinline__ void prefetch_rows(const in_t &in, const mk_guided_plan_t &pl, int c0, int y0, int y1)
{
    y0 = max(y0, 0);
    y1 = min(y1, pl.hl);
    const size_t gp = REDUCED ? (size_t)pl.wl * sizeof(unsigned) : in.gpitch;
    const char *g = REDUCED ? (const char *)(in.rguide + (size_t)y0 * pl.wl + c0)
                            : (const char *)(in.guide + (size_t)y0 * in.gpitch + (size_t)c0 * C);
    const char *q = (const char *)in.src + (size_t)y0 * in.spitch + (size_t)c0 * (in.src_f32 ? 4 : 1);
#pragma unroll 1
    for (int y = y0; y < y1; y++, g += gp, q += in.spitch) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(g));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(q));
    }
}

/* coef_kernel's staged input (ST, session 29): the two walkers of a pair load the rows their bands read, R0 = top - r
 * .. R0 + stage_rows - 1 (reflected into the image), into shared memory once, before their warm-up. A staged row is
 * the guide's levels minus kG0 as signed bytes at the strip's 128 working columns, then the source's fixed point
 * minus kP0 as int16 pairs. The walks read their two rows a step from there: shared loads at fixed offsets instead
 * of global loads with an address per column, the shifts and the source's conversion done once per row instead of
 * once per read (a row is read two or three times), and no L2 round trip inside a row step. */
template <int C> __host__ __device__ constexpr int stage_row_bytes()
{
    return kStripCols * C + kStripCols * 2;
}
__host__ __device__ constexpr int stage_rows(int band_rows, int r)
{
    return 2 * band_rows + 2 * r + 1; /* the pair's two bands and r rows beyond each (an empty band reads row c + r) */
}

/* Rows own, own + 2, .. of a pair's n staged rows (own: 0 or 1, the walker). VEC: the strip's working columns lie
 * inside the image, and rows are read in words (guide) and 16- or 4-byte vectors (f32 or u8 source); else each lane
 * gathers its four reflected columns. L2 is asked for every row first; then the loads of kStageBatch rows are
 * issued before their stores (session 29, 1080p colour: batches of 12 rows 84.7-86.1 us, of 8 86.4-86.9 and of 4
 * without the L2 requests 85.8-86.9, against 86.5-88.0 for the unstaged kernel in the same call). */
const int kStageBatch = 12;
template <int C, bool VEC>
__device__ __forceinline__ void stage_in(const in_t &in, const mk_guided_plan_t &pl, const int col[kLaneCols], int wx0,
                                         int R0, int n, int own, unsigned char *sm)
{
    constexpr int RB = stage_row_bytes<C>(), GB = kStripCols * C, NB = VEC ? kStageBatch : 2; /* rows a batch */
    const int lane = (int)threadIdx.x % kWarp;
    if constexpr (VEC) { /* L2 asked for the walker's rows first (lanes 0-3: the guide's lines, 4-8: the source's) */
        const int sb = kStripCols * (in.src_f32 ? 4 : 1), k = lane < 4 ? lane : lane - 4; /* a source row's bytes */
        const size_t off = lane < 4 ? (size_t)wx0 * C + min(128 * k, GB - 1)
                                    : (size_t)wx0 * (sb / kStripCols) + min(128 * k, sb - 1);
        const char *base = lane < 4 ? (const char *)in.guide : (const char *)in.src;
        const size_t pitch = lane < 4 ? in.gpitch : in.spitch;
#pragma unroll 1
        for (int i = own; i < n && lane < 9; i += 2)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (size_t)mk_px_reflect(R0 + i, pl.hl) * pitch + off));
    }
#pragma unroll 1
    for (int i0 = own; i0 < n; i0 += 2 * NB) {
        unsigned gw[NB][C];
        int q[NB][kLaneCols];
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const int y = mk_px_reflect(R0 + min(i0 + 2 * b, n - 1), pl.hl);
            const uint8_t *grow = in.guide + (size_t)y * in.gpitch;
            const char *srow = (const char *)in.src + (size_t)y * in.spitch;
            if constexpr (VEC) {
                const unsigned *g = (const unsigned *)(grow + (size_t)wx0 * C);
#pragma unroll
                for (int k = 0; k < C; k++)
                    gw[b][k] = __ldg(g + lane + kWarp * k) ^ 0x80808080u;
                if (in.src_f32) {
                    const float4 v = __ldg((const float4 *)(srow + (size_t)wx0 * sizeof(float)) + lane);
                    q[b][0] = mk_px_src_q_f32(v.x) - kP0, q[b][1] = mk_px_src_q_f32(v.y) - kP0;
                    q[b][2] = mk_px_src_q_f32(v.z) - kP0, q[b][3] = mk_px_src_q_f32(v.w) - kP0;
                } else {
                    const unsigned u = __ldg((const unsigned *)(srow + wx0) + lane);
#pragma unroll
                    for (int j = 0; j < kLaneCols; j++)
                        q[b][j] = (int)((u >> (8 * j)) & 255u) * 257 - kP0;
                }
            } else {
#pragma unroll
                for (int k = 0; k < C; k++)
                    gw[b][k] = 0;
#pragma unroll
                for (int j = 0; j < kLaneCols; j++) {
#pragma unroll
                    for (int c = 0; c < C; c++) {
                        const int o = j * C + c;
                        gw[b][o / 4] |= ((unsigned)__ldg(grow + (size_t)col[j] * C + c) ^ 0x80u) << (8 * (o % 4));
                    }
                    q[b][j] = in.src_f32 ? mk_px_src_q_f32(__ldg((const float *)srow + col[j])) - kP0
                                         : __ldg((const uint8_t *)srow + col[j]) * 257 - kP0;
                }
            }
        }
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const int i = i0 + 2 * b;
            if (i >= n)
                continue;
            unsigned char *row = sm + (size_t)i * RB;
#pragma unroll
            for (int k = 0; k < C; k++)
                ((unsigned *)row)[VEC ? lane + kWarp * k : C * lane + k] = gw[b][k];
            *(uint2 *)(row + GB + 8 * lane) = make_uint2(((unsigned)q[b][0] & 0xffffu) | ((unsigned)q[b][1] << 16),
                                                         ((unsigned)q[b][2] & 0xffffu) | ((unsigned)q[b][3] << 16));
        }
    }
}

/* coef_kernel's row: the window sums of every moment but the source's (sp, already summed) from the column sums
 * v, and the solve of the lane's four columns (a_0..a_{C-1}, b). Every lane solves its four columns, also those
 * past the strip's outputs (partial windows, dropped at the store): the four solves then carry no branch and are
 * independent chains the scheduler can interleave. */
template <int C, bool NARROW, int RS>
__device__ __forceinline__ void solve_row(const mk_guided_plan_t &pc, const int (&v)[kLaneCols][MK_GUIDED_NM(C)],
                                          const unsigned (&sp)[kLaneCols], float (&a)[C + 1][kLaneCols])
{
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1, N32 = NM - C, KP = N32 - 1; /* N32..: guide-times-source */
    constexpr int NU = NARROW ? NM : N32; /* moments summed modulo 2^32 */
    const int r = pc.r;
    unsigned s32[NU][kLaneCols];
    long long s64[NARROW ? 1 : C][kLaneCols];
#pragma unroll
    for (int k = 0; k < NU; k++) {
        if (k == KP) {
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                s32[k][j] = sp[j];
            continue;
        }
        const unsigned c[kLaneCols] = {(unsigned)v[0][k], (unsigned)v[1][k], (unsigned)v[2][k], (unsigned)v[3][k]};
        strip_box<RS>(c, r, s32[k]);
    }
    if constexpr (!NARROW) {
#pragma unroll
        for (int k = 0; k < C; k++) {
            const long long c[kLaneCols] = {v[0][N32 + k], v[1][N32 + k], v[2][N32 + k], v[3][N32 + k]};
            strip_box<RS>(c, r, s64[k]);
        }
    }
#pragma unroll
    for (int j = 0; j < kLaneCols; j++) {
        double S[NM];
#pragma unroll
        for (int k = 0; k < NU; k++)
            S[k] = __int2double_rn((int)s32[k][j]); /* one I2F.F64 (XU) rather than exact_f64s's three issue slots:
                                                     * session 28, 1080p colour -1 us (the XU pipe is 13 % busy here) */
        if constexpr (!NARROW) {
#pragma unroll
            for (int k = 0; k < C; k++)
                S[N32 + k] = __ll2double_rn(s64[k][j]);
        }
        float aj[NC];
        mk_px_guided_solve_shifted(&pc, S, kG0, kP0, aj, aj + C);
#pragma unroll
        for (int c = 0; c < NC; c++)
            a[c][j] = aj[c];
    }
}

/* coef_kernel: a warp's strip, its column sums walked down the band, the window sums of each row, the solve.
 * NARROW: narrow_r(pl.r), every window sum in 32 bits. ST: the pair's input rows staged in shared memory first
 * (stage_in; dynamic shared memory of kStripWarps / 2 x stage_rows x stage_row_bytes bytes). */
template <int C, bool REDUCED, bool NARROW, int RS = 0, bool ST = false>
__global__ void __launch_bounds__(kStripThreads, 3) coef_kernel(in_t in, mk_guided_plan_t pl, int band_rows,
                                                                float *__restrict__ ab)
{
    static_assert(!(ST && REDUCED), "staged rows: the full-resolution guide only");
    constexpr int NM = MK_GUIDED_NM(C), NC = C + 1, KP = NM - C - 1; /* moment KP: the source */
    wait_previous_kernel(); /* s > 1: reduce_kernel's output */
    allow_next_kernel();
    static_assert(kStripWarps % 2 == 0, "coef_kernel's warps walk in pairs");
    /* ST: one half, the swap in two phases (the staged rows take the rest of the shared memory) */
    __shared__ int xch_all[kStripWarps / 2][(ST ? 1 : 2) * NM * kLaneCols * kWarp];
    extern __shared__ __align__(16) unsigned char stg[];
    strip_t st;
    if (!strip_of<true>(pl, band_rows, st))
        return;
    const int lane = (int)threadIdx.x % kWarp, r = pl.r, outs = strip_outs(r), wp = coef_pitch(pl.wl);
    const size_t plane = (size_t)wp * pl.hl;
    /* the lane's four outputs x .. x + 3 in one float4 per plane: all inside the strip's outputs and the image,
     * and x a multiple of 4 (r a multiple of 4: the strip's working columns start on one) */
    const int xl = st.x0 + kLaneCols * lane;
    const bool vec_store = kLaneCols * lane < outs && xl >= 0 && xl + kLaneCols <= pl.wl && xl % kLaneCols == 0;
    const int wx = st.x0 - r + kLaneCols * lane; /* the lane's first working column */
    mk_guided_plan_t pc = pl; /* C known at compile time: the solve's branches fold */
    pc.C = C;
    int col[kLaneCols], v[kLaneCols][NM]; /* v: sums over rows y - r .. y + r of column col[j] */
    const unsigned lo_sum = (unsigned)(-kP0) * (unsigned)((2 * r + 1) * (2 * r + 1)); /* source 0 (shifted) ... */
    const unsigned hi_sum = (unsigned)(MK_GUIDED_Q - kP0) * (unsigned)((2 * r + 1) * (2 * r + 1)); /* ... and 1 */
#pragma unroll
    for (int j = 0; j < kLaneCols; j++) {
        col[j] = mk_px_reflect(wx + j, pl.wl);
#pragma unroll
        for (int k = 0; k < NM; k++)
            v[j][k] = 0;
    }
    const int pair = (int)threadIdx.x / (2 * kWarp), R0 = st.top - r;
    constexpr int RB = stage_row_bytes<C>(), GB = kStripCols * C;
    unsigned char *sp = stg + (size_t)pair * stage_rows(band_rows, r) * RB;
    if constexpr (ST) {
        const int wx0 = st.x0 - r; /* the strip's first working column */
        if (wx0 >= 0 && wx0 + kStripCols <= pl.wl && in.g4 && in.svec)
            stage_in<C, true>(in, pl, col, wx0, R0, stage_rows(band_rows, r), st.dir > 0, sp);
        else
            stage_in<C, false>(in, pl, col, wx0, R0, stage_rows(band_rows, r), st.dir > 0, sp);
        asm volatile("bar.sync %0, %1;" ::"r"(1 + pair), "r"(2 * kWarp) : "memory");
    } else {
        /* the pair's input split at its centre: the up walker asks for rows y0 - r .. c - 1, the down walker for
         * c .. y1 + r - 1 (each reads its own side first: its r warm-up rows and then its band) */
        prefetch_rows<C, REDUCED>(in, pl, col[0], st.dir > 0 ? st.y0 : st.y0 - r, st.dir > 0 ? st.y1 + r : st.y1);
    }
    /* row y (unreflected) of the lane's columns */
    auto fetch_row = [&](row_px<C, REDUCED> &p, int y) {
        if constexpr (ST) {
            const size_t o = (size_t)(y - R0) * RB;
            p.fetch_st((const signed char *)sp + o + kLaneCols * C * lane, (const unsigned *)(sp + o + GB + 8 * lane));
        } else {
            p.fetch(in, pl, col, mk_px_reflect(y, pl.hl));
        }
    };
    /* in pairs as final_walk: each walker sums r rows beside the centre, they swap, each adds its last row */
    const int w0 = st.dir > 0 ? st.y0 : st.y1 - r;
#pragma unroll 4
    for (int i = 0; i < r; i++) {
        row_px<C, REDUCED> p;
        fetch_row(p, w0 + i);
#pragma unroll
        for (int j = 0; j < kLaneCols; j++)
            p.template add_moments<1>(j, v[j]);
    }
    {
        int *xch = xch_all[pair];
        if constexpr (ST) { /* [kLaneCols][NM][kWarp]: the up walker's sums, swapped by the down walker */
            const bool down = st.dir > 0;
            if (!down)
#pragma unroll
                for (int j = 0; j < kLaneCols; j++)
#pragma unroll
                    for (int k = 0; k < NM; k++)
                        xch[(j * NM + k) * kWarp + lane] = v[j][k];
            asm volatile("bar.sync %0, %1;" ::"r"(1 + pair), "r"(2 * kWarp) : "memory");
            if (down)
#pragma unroll
                for (int j = 0; j < kLaneCols; j++)
#pragma unroll
                    for (int k = 0; k < NM; k++) {
                        const int e = (j * NM + k) * kWarp + lane, t = xch[e];
                        xch[e] = v[j][k];
                        v[j][k] += t;
                    }
            asm volatile("bar.sync %0, %1;" ::"r"(1 + pair), "r"(2 * kWarp) : "memory");
            if (!down)
#pragma unroll
                for (int j = 0; j < kLaneCols; j++)
#pragma unroll
                    for (int k = 0; k < NM; k++)
                        v[j][k] += xch[(j * NM + k) * kWarp + lane]; /* integers: either order */
            row_px<C, REDUCED> p;
            fetch_row(p, st.dir > 0 ? st.y0 + r : st.y1 - r - 1);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                p.template add_moments<1>(j, v[j]);
        } else {
            const int own = st.dir > 0 ? 1 : 0; /* [0 up walker, 1 down walker][kLaneCols][NM][kWarp] */
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
#pragma unroll
                for (int k = 0; k < NM; k++)
                    xch[((own * kLaneCols + j) * NM + k) * kWarp + lane] = v[j][k];
            asm volatile("bar.sync %0, %1;" ::"r"(1 + pair), "r"(2 * kWarp) : "memory");
            row_px<C, REDUCED> p;
            fetch_row(p, st.dir > 0 ? st.y0 + r : st.y1 - r - 1);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
#pragma unroll
                for (int k = 0; k < NM; k++)
                    v[j][k] += xch[(((1 - own) * kLaneCols + j) * NM + k) * kWarp + lane]; /* integers: either order */
                p.template add_moments<1>(j, v[j]);
            }
        }
    }
    const int step = st.dir, yfirst = step > 0 ? st.y0 : st.y1 - 1, ylast = step > 0 ? st.y1 : st.y0 - 1;
    const int de = step * r, dl = -step * (r + 1); /* the rows that enter and leave, relative to y */
    for (int y = yfirst; y != ylast; y += step) {
        if (y != yfirst) {
            row_px<C, REDUCED> enter, leave;
            fetch_row(enter, y + de);
            fetch_row(leave, y + dl);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
                enter.template add_moments<1>(j, v[j]);
                leave.template add_moments<-1>(j, v[j]);
            }
        }
        /* The source's window sums first: where every window of the warp's outputs holds one extreme source value
         * (0 or 1: the background or the object of a mask, most of its rows), a = 0 and b is that value without the
         * other moments' sums or the solve (mk_px_guided_b_flat, the solve's own bits). */
        unsigned sp[kLaneCols];
        {
            const unsigned c[kLaneCols] = {(unsigned)v[0][KP], (unsigned)v[1][KP], (unsigned)v[2][KP],
                                           (unsigned)v[3][KP]};
            strip_box<RS>(c, r, sp);
        }
        bool flat = true;
#pragma unroll
        for (int j = 0; j < kLaneCols; j++) {
            const int o = kLaneCols * lane + j, x = st.x0 + o;
            flat &= o >= outs || x < 0 || x >= pl.wl || sp[j] == lo_sum || sp[j] == hi_sum;
        }
        float a[NC][kLaneCols];
        if (__all_sync(kFull, flat)) {
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
#pragma unroll
                for (int c = 0; c < C; c++)
                    a[c][j] = 0.0f;
                a[C][j] = mk_px_guided_b_flat(&pc, exact_f64s((int)sp[j]), kP0);
            }
        } else {
            solve_row<C, NARROW, RS>(pc, v, sp, a);
        }
        float *row = ab + (size_t)y * wp;
        if (vec_store) {
#pragma unroll
            for (int c = 0; c < NC; c++)
                *(float4 *)(row + c * plane + xl) = make_float4(a[c][0], a[c][1], a[c][2], a[c][3]);
        } else {
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
                const int o = kLaneCols * lane + j, x = st.x0 + o;
                if (o < outs && x >= 0 && x < pl.wl)
#pragma unroll
                    for (int c = 0; c < NC; c++)
                        row[c * plane + x] = a[c][j];
            }
        }
    }
}

/* A plane row's coefficients at a lane's four working columns col[0..3] (reflected): VEC, the four are neighbours
 * inside the image and col[0] is a multiple of 4: one float4; else one load each. */
template <bool VEC>
__device__ __forceinline__ void load_coef_plane(const float *row, const int col[kLaneCols], float v[kLaneCols])
{
    if constexpr (VEC) {
        const float4 t = __ldg((const float4 *)(row + col[0]));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
#pragma unroll
        for (int j = 0; j < kLaneCols; j++)
            v[j] = __ldg(row + col[j]);
    }
}

/* final_kernel's walk down its strip. VEC: every lane of the warp loads its coefficients as float4 (a strip away
 * from the image's left and right edges); the choice is the warp's, so each instantiation has one kind of load. */
template <int C, int MODE, bool VEC, int RS>
__device__ __forceinline__ void final_walk(const in_t &in, const mk_guided_plan_t &pl, const strip_t &st,
                                           const float *__restrict__ ab, const mk_mask_out_t &out,
                                           float *__restrict__ means, double *xch)
{
    constexpr int NC = C + 1;
    const int lane = (int)threadIdx.x % kWarp, r = pl.r, outs = strip_outs(r), wp = coef_pitch(pl.wl);
    const size_t plane = (size_t)wp * pl.hl;
    mk_guided_plan_t pc = pl;
    pc.C = C;
    int col[kLaneCols];
    double v[kLaneCols][NC]; /* sums over rows y - r .. y + r of a_0..a_{C-1}, b at column col[j] */
    const int wx = st.x0 - r + kLaneCols * lane; /* the lane's first working column, a multiple of 4 */
#pragma unroll
    for (int j = 0; j < kLaneCols; j++) {
        col[j] = mk_px_reflect(wx + j, pl.wl);
#pragma unroll
        for (int c = 0; c < NC; c++)
            v[j][c] = 0.0;
    }
    const int rw = RS > 0 ? RS : r; /* as in coef_kernel */
    /* the warps walk in pairs around a centre row c = the down walker's y0 = the up walker's y1: the down walker
     * sums rows c .. c + r - 1, the up walker c - r .. c - 1, they swap those r-row sums through xch, and each adds
     * its own last row (c + r, c - r - 1): one warm-up of 2r + 1 rows for two warps (session 24: 1080p colour
     * 91.1-91.5 -> 86.1 us; the warm-up was a sixth of the instructions and a third of the stalls) */
    const int w0 = st.dir > 0 ? st.y0 : st.y1 - rw;
#pragma unroll 4
    for (int i = 0; i < rw; i++) {
        const float *row = ab + (size_t)mk_px_reflect(w0 + i, pl.hl) * wp;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float a[kLaneCols];
            load_coef_plane<VEC>(row + c * plane, col, a);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                v[j][c] += (double)a[j];
        }
    }
    {
        const int own = st.dir > 0 ? 1 : 0; /* xch: [0 up walker, 1 down walker][NC * kLaneCols][kWarp] */
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                xch[((own * NC + c) * kLaneCols + j) * kWarp + lane] = v[j][c];
        asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)threadIdx.x / (2 * kWarp)), "r"(2 * kWarp) : "memory");
        const float *row = ab + (size_t)mk_px_reflect(st.dir > 0 ? st.y0 + rw : st.y1 - rw - 1, pl.hl) * wp;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float a[kLaneCols];
            load_coef_plane<VEC>(row + c * plane, col, a);
#pragma unroll
            for (int j = 0; j < kLaneCols; j++)
                v[j][c] = (xch[(c * kLaneCols + j) * kWarp + lane] + xch[((NC + c) * kLaneCols + j) * kWarp + lane]) +
                          (double)a[j];
        }
    }
    const int n = st.y1 - st.y0, step = st.dir;
    for (int i = 0; i < n; i++) {
        const int y = step > 0 ? st.y0 + i : st.y1 - 1 - i;
        /* s = 1: the row's guide pixels, loaded with the coefficients (not after the sums) so that their latency
         * overlaps; columns outside the image read its first or last pixel and are not written. */
        int g[kLaneCols][3];
        if constexpr (MODE == 0) {
            const uint8_t *grow = in.guide + (size_t)y * in.gpitch;
#pragma unroll
            for (int j = 0; j < kLaneCols; j++) {
                const int x = mk_px_clamp(st.x0 + kLaneCols * lane + j, 0, pl.w - 1);
#pragma unroll
                for (int c = 0; c < C; c++)
                    g[j][c] = __ldg(grow + (size_t)x * C + c);
            }
        }
        if (i > 0) {
            const float *re = ab + (size_t)mk_px_reflect(y + step * r, pl.hl) * wp;
            const float *rl = ab + (size_t)mk_px_reflect(y - step * (r + 1), pl.hl) * wp;
#pragma unroll
            for (int c = 0; c < NC; c++) {
                float e[kLaneCols], l[kLaneCols];
                load_coef_plane<VEC>(re + c * plane, col, e);
                load_coef_plane<VEC>(rl + c * plane, col, l);
#pragma unroll
                for (int j = 0; j < kLaneCols; j++)
                    v[j][c] += (double)e[j] - (double)l[j];
            }
        }
        double s[NC][kLaneCols];
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const double cs[kLaneCols] = {v[0][c], v[1][c], v[2][c], v[3][c]};
            strip_box<RS>(cs, r, s[c]);
        }
#pragma unroll
        for (int j = 0; j < kLaneCols; j++) {
            const int o = kLaneCols * lane + j, x = st.x0 + o;
            if (o >= outs || x < 0 || x >= pl.wl)
                continue;
            double A[3] = {0, 0, 0};
#pragma unroll
            for (int c = 0; c < C; c++)
                A[c] = s[c][j];
            if constexpr (MODE == 0) {
                mk_mask_out_put(out, x, y, mk_px_guided_apply(&pc, A, s[C][j], g[j]));
            } else {
                float m[NC];
                mk_px_guided_means(&pc, A, s[C][j], m);
                store_coef<C>(means + ((size_t)y * pl.wl + x) * NC, m);
            }
        }
    }
}

/* MODE 0 (s = 1): q and its mask product at each pixel; MODE 1 (s > 1): the coefficient means. */
template <int C, int MODE, int RS = 0>
__global__ void __launch_bounds__(kStripThreads, C == 3 ? 4 : 1)
    final_kernel(in_t in, mk_guided_plan_t pl, int band_rows, const float *__restrict__ ab, mk_mask_out_t out,
                 float *__restrict__ means)
{
    wait_previous_kernel(); /* coef_kernel's a and b */
    allow_next_kernel();
    static_assert(kStripWarps % 2 == 0, "final_kernel's warps walk in pairs");
    __shared__ double xch[kStripWarps / 2][2 * 4 * kLaneCols * kWarp];
    strip_t st;
    if (!strip_of<true>(pl, band_rows, st))
        return;
    double *px = xch[(int)threadIdx.x / (2 * kWarp)];
    /* float4 loads when the strip's working columns are all inside the image (their first is a multiple of 4) */
    if (st.x0 - pl.r >= 0 && st.x0 - pl.r + kStripCols <= pl.wl)
        final_walk<C, MODE, true, RS>(in, pl, st, ab, out, means, px);
    else
        final_walk<C, MODE, false, RS>(in, pl, st, ab, out, means, px);
}

/* The reduced guide pixel (x, y) for scale S whose S x S block lies inside the guide, as mk_px_guide_at computes
 * it, levels in bytes 0..C-1; every load issued before any sum. WORDS: the block's rows are read in words (the guide's
 * address and pitch are multiples of 4 bytes, and S C is). */
template <int C, int S, bool WORDS> __device__ __forceinline__ unsigned reduced_px(const in_t &in, int x, int y)
{
    const uint8_t *p = in.guide + (size_t)y * S * in.gpitch + (size_t)x * S * C;
    int sum[3] = {0, 0, 0};
    if constexpr (WORDS) {
        static_assert(S * C % 4 == 0, "a block row in words");
        constexpr int NW = S * C / 4;
        unsigned v[S][NW];
#pragma unroll
        for (int i = 0; i < S; i++)
#pragma unroll
            for (int k = 0; k < NW; k++)
                v[i][k] = __ldg((const unsigned *)(p + (size_t)i * in.gpitch) + k);
#pragma unroll
        for (int i = 0; i < S; i++)
#pragma unroll
            for (int k = 0; k < NW; k++)
#pragma unroll
                for (int b = 0; b < 4; b++)
                    sum[(4 * k + b) % C] += (int)((v[i][k] >> (8 * b)) & 255u);
    } else {
        uint8_t v[S][S * C];
#pragma unroll
        for (int i = 0; i < S; i++)
#pragma unroll
            for (int k = 0; k < S * C; k++)
                v[i][k] = __ldg(p + (size_t)i * in.gpitch + k);
#pragma unroll
        for (int i = 0; i < S; i++)
#pragma unroll
            for (int k = 0; k < S * C; k++)
                sum[k % C] += v[i][k];
    }
    constexpr int cnt = S * S;
    unsigned u = 0;
#pragma unroll
    for (int c = 0; c < C; c++)
        u |= (unsigned)((2 * sum[c] + cnt) / (2 * cnt)) << (8 * c);
    return u;
}

/* ---- the fast filter's low-resolution pass in one kernel ----------------------------------------------- */

/* low_kernel: a block computes the means of a TW x TH tile of the working image from the reduced guide and the
 * source: both staged with a margin of 2r (reflected at the image edges), the moments' sums over 2r + 1 rows, a and b
 * over the tile and a margin of r (where a window reaches past the image, the sums of the mirrored window are the
 * same integers, so a and b there are those of the reflected position, as the reference's reflected box sums take
 * them), then their sums over 2r + 1 rows and the means. All in shared memory; the working radius R is a template
 * parameter (0..kLowRMax), so every loop has a fixed trip count. Threads: 32 x 8, x fastest. */
const int kLowThreads = 256, kLowRMax = 8;

/* The tile is 32 - 2R columns wide, so that a and b take exactly one warp's width (32), and 16 - 2R rows tall (8
 * from R = 5 on): about 3 blocks per SM at 1080p / 4, R = 2. */
template <int C, int R> struct low_geom {
    static constexpr int NM = MK_GUIDED_NM(C), NC = C + 1;
    static constexpr int TW = 32 - 2 * R, TH = R <= 4 ? 16 - 2 * R : 8;
    static constexpr int GW = TW + 4 * R, GH = TH + 4 * R, AW = TW + 2 * R, AH = TH + 2 * R;
    static constexpr size_t PX = (size_t)GW * GH * sizeof(unsigned);
    static constexpr size_t OFF_PV = PX, OFF_COL = (2 * PX + 15) & ~(size_t)15;
    /* a and b's sums over rows (TH x AW x NC doubles) reuse the moments' column sums (NM x AH x GW ints) */
    static constexpr size_t OFF_AB = (OFF_COL + (size_t)NM * AH * GW * sizeof(int) + 15) & ~(size_t)15;
    static constexpr size_t BYTES = OFF_AB + (size_t)NC * AH * AW * sizeof(float);
    static_assert((size_t)NM * AH * GW * sizeof(int) >= (size_t)NC * TH * AW * sizeof(double), "aliasing");
    static_assert(AW == 32 && TW > 0 && TH > 0, "low_kernel's layout");
};

/* low_kernel's staging: dst[gy * GW + gx] = load(Y, X) over the GH x GW region, the thread (tx, ty) of 32 x 8 taking
 * rows ty + 8j (reflected: Y[j]) and columns tx + 32k (X[k]); every load issued before any store. */
template <int KY, int KX, int GH, int GW, typename T, typename F>
__device__ __forceinline__ void stage_region(T *dst, const int Y[KY], const int X[KX], int tx, int ty, F load)
{
    T q[KY][KX];
#pragma unroll
    for (int j = 0; j < KY; j++)
#pragma unroll
        for (int k = 0; k < KX; k++)
            if (ty + 8 * j < GH && tx + 32 * k < GW)
                q[j][k] = load(Y[j], X[k]);
#pragma unroll
    for (int j = 0; j < KY; j++)
#pragma unroll
        for (int k = 0; k < KX; k++)
            if (ty + 8 * j < GH && tx + 32 * k < GW)
                dst[(ty + 8 * j) * GW + tx + 32 * k] = q[j][k];
}

/* The sum of N values p[0], p[stride], ..., in that order, in type S. */
template <int N, typename S, typename T> __device__ __forceinline__ S line_sum(const T *p, int stride)
{
    S v = 0;
#pragma unroll
    for (int d = 0; d < N; d++)
        v += (S)p[d * stride];
    return v;
}

template <int C, int R>
__global__ void __launch_bounds__(kLowThreads) low_kernel(in_t in, mk_guided_plan_t pl, float *__restrict__ means)
{
    using G = low_geom<C, R>;
    constexpr int NM = G::NM, NC = G::NC, N32 = NM - C; /* moments N32.. are guide-times-source */
    constexpr int TW = G::TW, TH = G::TH, GW = G::GW, GH = G::GH, AW = G::AW, AH = G::AH;
    constexpr int NCOL = GW * AH, NAB = AW * AH, NRS = AW * TH;
    constexpr int KX = (GW + 31) / 32, KY = (GH + 7) / 8; /* staged columns and rows of a thread */
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned *gv = (unsigned *)smem;
    int *pv = (int *)(smem + G::OFF_PV), *col = (int *)(smem + G::OFF_COL);
    float *ab = (float *)(smem + G::OFF_AB);
    double *rs = (double *)(smem + G::OFF_COL);
    const int tx = (int)threadIdx.x & 31, ty = (int)threadIdx.x >> 5;
    const int x0 = (int)blockIdx.x * TW, y0 = (int)blockIdx.y * TH;
    mk_guided_plan_t pc = pl; /* C known at compile time: the solve's branches fold */
    pc.C = C;
    int X[KX], Y[KY];
#pragma unroll
    for (int k = 0; k < KX; k++)
        X[k] = mk_px_reflect(x0 - 2 * R + tx + 32 * k, pl.wl);
#pragma unroll
    for (int j = 0; j < KY; j++)
        Y[j] = mk_px_reflect(y0 - 2 * R + ty + 8 * j, pl.hl);
    /* the source first (older than this call's kernels), then the reduced guide after the wait */
    stage_region<KY, KX, GH, GW>(pv, Y, X, tx, ty, [&](int yy, int xx) {
        return mk_px_src_q((const char *)in.src + (size_t)yy * in.spitch, in.src_f32, xx);
    });
    wait_previous_kernel(); /* reduce_kernel's guide */
    allow_next_kernel();
    stage_region<KY, KX, GH, GW>(gv, Y, X, tx, ty,
                                 [&](int yy, int xx) { return __ldg(in.rguide + (size_t)yy * pl.wl + xx); });
    __syncthreads();
    /* the moments summed over rows ay .. ay + 2R of the staged region, per staged column (exact in int32) */
#pragma unroll 1
    for (int ay = ty; ay < AH; ay += 8)
#pragma unroll
        for (int k = 0; k < KX; k++) {
            const int gx = tx + 32 * k;
            if (gx >= GW)
                continue;
            int v[NM];
#pragma unroll
            for (int m = 0; m < NM; m++)
                v[m] = 0;
#pragma unroll
            for (int d = 0; d <= 2 * R; d++) {
                const unsigned u = gv[(ay + d) * GW + gx];
                int g[3];
#pragma unroll
                for (int c = 0; c < C; c++)
                    g[c] = (int)((u >> (8 * c)) & 255u);
                add_moments<C, 1>(g, pv[(ay + d) * GW + gx], v);
            }
#pragma unroll
            for (int m = 0; m < NM; m++)
                col[m * NCOL + ay * GW + gx] = v[m];
        }
    __syncthreads();
    /* a and b at the tile and a margin of R: the window sums along the row, then the reference's solve */
#pragma unroll 1
    for (int ay = ty; ay < AH; ay += 8)
#pragma unroll
        for (int k = 0; k < (AW + 31) / 32; k++) {
            const int ax = tx + 32 * k;
            if (ax >= AW)
                continue;
            const int *cb = col + ay * GW + ax;
            double S[NM];
#pragma unroll
            for (int m = 0; m < N32; m++)
                S[m] = exact_f64((unsigned)line_sum<2 * R + 1, int>(cb + m * NCOL, 1));
#pragma unroll
            for (int m = 0; m < C; m++)
                S[N32 + m] = exact_f64(line_sum<2 * R + 1, long long>(cb + (N32 + m) * NCOL, 1));
            float a[NC];
            mk_px_guided_solve(&pc, S, a, a + C);
#pragma unroll
            for (int c = 0; c < NC; c++)
                ab[c * NAB + ay * AW + ax] = a[c];
        }
    __syncthreads();
    /* a and b summed over rows ty .. ty + 2R (double), per column of their region */
#pragma unroll
    for (int j = 0; j < (TH + 7) / 8; j++) {
        const int ry = ty + 8 * j, ax = tx;
        if (ry < TH)
#pragma unroll
            for (int c = 0; c < NC; c++)
                rs[c * NRS + ry * AW + ax] = line_sum<2 * R + 1, double>(ab + c * NAB + ry * AW + ax, AW);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < (TH + 7) / 8; j++) {
        const int ry = ty + 8 * j, Xo = x0 + tx, Yo = y0 + ry;
        if (tx >= TW || ry >= TH || Xo >= pl.wl || Yo >= pl.hl)
            continue;
        double A[NC];
#pragma unroll
        for (int c = 0; c < NC; c++)
            A[c] = line_sum<2 * R + 1, double>(rs + c * NRS + ry * AW + tx, 1);
        double Ag[3] = {0, 0, 0};
#pragma unroll
        for (int c = 0; c < C; c++)
            Ag[c] = A[c];
        float m[NC];
        mk_px_guided_means(&pc, Ag, A[C], m);
        store_coef<C>(means + ((size_t)Yo * pl.wl + Xo) * NC, m);
    }
}

/* ---- the fast filter's reduced guide and full-resolution pass ------------------------------------------- */

/* The guide reduced by s x s block averages as mk_px_guide_at computes them, one thread per reduced pixel. S > 0:
 * the scale known at compile time (every load of a full block issued at once); S = 0: pl.s. */
template <int C, int S> __global__ void reduce_kernel(in_t in, mk_guided_plan_t pl, unsigned *__restrict__ rg)
{
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x), y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    allow_next_kernel();
    if (x >= pl.wl || y >= pl.hl)
        return;
    unsigned *dst = rg + (size_t)y * pl.wl + x;
    if constexpr (S > 0) {
        if ((x + 1) * S <= pl.w && (y + 1) * S <= pl.h) { /* a whole block: every load issued at once */
            if constexpr (S * C % 4 == 0)
                *dst = in.g4 ? reduced_px<C, S, true>(in, x, y) : reduced_px<C, S, false>(in, x, y);
            else
                *dst = reduced_px<C, S, false>(in, x, y);
            return;
        }
    }
    const int s = S > 0 ? S : pl.s;
    const int xa = x * s, ya = y * s, xb = min(xa + s, pl.w), yb = min(ya + s, pl.h), n = (xb - xa) * C;
    int sum[3] = {0, 0, 0};
#pragma unroll 2
    for (int yy = ya; yy < yb; yy++) {
        const uint8_t *p = in.guide + (size_t)yy * in.gpitch + (size_t)xa * C;
#pragma unroll 4
        for (int k = 0; k < n; k += C)
#pragma unroll
            for (int c = 0; c < C; c++)
                sum[c] += __ldg(p + k + c);
    }
    const int cnt = (xb - xa) * (yb - ya);
    unsigned u = 0;
#pragma unroll
    for (int c = 0; c < C; c++)
        u |= (unsigned)((2 * sum[c] + cnt) / (2 * cnt)) << (8 * c);
    *dst = u;
}

/* reduce_kernel for pl.s, launched as any first kernel of a call. */
template <int C> int launch_reduce(cudaStream_t st, const in_t &in, const mk_guided_plan_t &pl, unsigned *rg)
{
    dim3 block(32, 8), grid((unsigned)(pl.wl + 31) / 32, (unsigned)(pl.hl + 7) / 8);
    switch (pl.s) {
    case 2: reduce_kernel<C, 2><<<grid, block, 0, st>>>(in, pl, rg); break;
    case 3: reduce_kernel<C, 3><<<grid, block, 0, st>>>(in, pl, rg); break;
    case 4: reduce_kernel<C, 4><<<grid, block, 0, st>>>(in, pl, rg); break;
    default: reduce_kernel<C, 0><<<grid, block, 0, st>>>(in, pl, rg); break;
    }
    return MK_CUDA_LAUNCH_CHECK(reduce_kernel);
}

/* Over the whole output (dw x dh): a block's kUpCols x kUpRows pixels. A thread owns kUpPx neighbouring columns
 * (their interpolation coordinates from a table the block fills, one column per thread) and every kUpStep-th row,
 * and loads its guide pixels before the wait for the means: a row's kUpPx pixels in C words where the guide's
 * alignment allows (vec & 1). Then the means of each of the block's rows are interpolated along y once per
 * low-resolution column (shared memory), and each pixel interpolates those along x and applies them
 * (mk_px_guided_up_row, mk_px_guided_up's order); the u8 products of a thread's row leave in one word, f32 ones in
 * one float4 (vec & 2). Pixels outside the pasted rectangle get 0. */
template <int C, bool F32>
__global__ void __launch_bounds__(kUpThreads) up_kernel(in_t in, mk_guided_plan_t pl, const float *__restrict__ means,
                                                        mk_mask_out_t out, int vec)
{
    constexpr int NC = C + 1, NR = kUpRows / kUpStep;
    static_assert(kUpRows % kUpStep == 0 && kUpCols + kUpRows <= kUpThreads, "up_kernel's layout");
    __shared__ int sj0[kUpRows], sj1[kUpRows], si0[kUpCols], si1[kUpCols];
    __shared__ float sfy[kUpRows], sfx[kUpCols];
    __shared__ __align__(16) float sv[kUpRows][kUpVMax][NC];
    const int t = (int)threadIdx.x, tx = t % kUpTx, sub = t / kUpTx;
    const int dx0 = (int)blockIdx.x * kUpCols, dy0 = (int)blockIdx.y * kUpRows, dxa = dx0 + kUpPx * tx;
    const int xa = dxa - out.x; /* the guide column of the thread's first pixel */
    /* the interpolation coordinates of the block's columns and rows, one per thread */
    if (t < kUpCols)
        mk_px_up_coord(mk_px_clamp(dx0 + t - out.x, 0, pl.w - 1), pl.s, pl.wl, &si0[t], &si1[t], &sfx[t]);
    else if (t - kUpCols < kUpRows)
        mk_px_up_coord(mk_px_clamp(dy0 + t - kUpCols - out.y, 0, pl.h - 1), pl.s, pl.hl, &sj0[t - kUpCols],
                       &sj1[t - kUpCols], &sfy[t - kUpCols]);
    bool xin[kUpPx];
#pragma unroll
    for (int p = 0; p < kUpPx; p++)
        xin[p] = dxa + p < out.dw && xa + p >= 0 && xa + p < pl.w;
    const bool all_in = xin[0] && xin[kUpPx - 1], vg = (vec & 1) && all_in, vo = (vec & 2) && dxa + kUpPx <= out.dw;
    /* the thread's rows inside the rectangle: [ka, kb) of k, row dy0 + sub + kUpStep k */
    const int yb = min(out.dh, out.y + pl.h) - dy0 - sub, ya = out.y - dy0 - sub;
    const int ka = ya > 0 ? (ya + kUpStep - 1) / kUpStep : 0, kb = yb > 0 ? (yb + kUpStep - 1) / kUpStep : 0;
    unsigned gw[NR][C]; /* row k's guide bytes of the kUpPx pixels, in memory order */
    {
        const uint8_t *p = in.guide + (ptrdiff_t)(dy0 + sub - out.y) * (ptrdiff_t)in.gpitch + (ptrdiff_t)xa * C;
        const size_t gstep = (size_t)kUpStep * in.gpitch;
#pragma unroll
        for (int k = 0; k < NR; k++, p += gstep) {
#pragma unroll
            for (int c = 0; c < C; c++)
                gw[k][c] = 0;
            if (k < ka || k >= kb)
                continue;
            if (vg) {
#pragma unroll
                for (int c = 0; c < C; c++)
                    gw[k][c] = __ldg((const unsigned *)p + c);
            } else {
#pragma unroll
                for (int b = 0; b < kUpPx * C; b++)
                    if (xin[b / C])
                        gw[k][b / 4] |= (unsigned)__ldg(p + b) << (8 * (b % 4));
            }
        }
    }
    __syncthreads();
    wait_previous_kernel(); /* the means */
    const int ilo = si0[0], ni = si1[kUpCols - 1] - ilo + 1;
    int i0[kUpPx], i1[kUpPx];
    float fx[kUpPx];
#pragma unroll
    for (int p = 0; p < kUpPx; p++) {
        i0[p] = si0[kUpPx * tx + p] - ilo;
        i1[p] = si1[kUpPx * tx + p] - ilo;
        fx[p] = sfx[kUpPx * tx + p];
    }
    const float rni = 1.0f / (float)ni;
    for (int e = t; e < kUpRows * ni; e += kUpThreads) {
        const int r = (int)(((float)e + 0.5f) * rni), i = e - r * ni;
        const float fy = sfy[r], gy = MK_FSUB(1.0f, fy);
        float m0[NC], m1[NC];
        load_coef<C>(means + ((size_t)sj0[r] * pl.wl + ilo + i) * NC, m0);
        load_coef<C>(means + ((size_t)sj1[r] * pl.wl + ilo + i) * NC, m1);
#pragma unroll
        for (int c = 0; c < NC; c++)
            sv[r][i][c] = mk_px_lerp(gy, m0[c], fy, m1[c]);
    }
    __syncthreads();
    if (dxa >= out.dw)
        return;
    char *o = (char *)out.data + (size_t)(dy0 + sub) * out.pitch + (size_t)dxa * (F32 ? 4 : 1);
    const size_t ostep = (size_t)kUpStep * out.pitch;
    const int kend = min(NR, (out.dh - dy0 - sub + kUpStep - 1) / kUpStep);
#pragma unroll
    for (int k = 0; k < NR; k++, o += ostep) {
        if (k >= kend)
            continue;
        const bool row_in = k >= ka && k < kb;
        float q[kUpPx];
        const int r = sub + kUpStep * k;
#pragma unroll
        for (int p = 0; p < kUpPx; p++) {
            int g[3];
#pragma unroll
            for (int c = 0; c < C; c++) {
                const int b = p * C + c;
                g[c] = (int)((gw[k][b / 4] >> (8 * (b % 4))) & 255u);
            }
            q[p] = mk_px_guided_up_row(C, sv[r][i0[p]], sv[r][i1[p]], fx[p], g);
        }
        if constexpr (F32) {
            float v[kUpPx];
#pragma unroll
            for (int p = 0; p < kUpPx; p++)
                v[p] = row_in && xin[p] ? q[p] : 0.0f;
            if (vo) {
                *(float4 *)o = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int p = 0; p < kUpPx; p++)
                    if (dxa + p < out.dw)
                        ((float *)o)[p] = v[p];
            }
        } else {
            unsigned w = 0;
#pragma unroll
            for (int p = 0; p < kUpPx; p++)
                if (row_in && xin[p])
                    w |= (unsigned)mk_px_mask_u8(q[p], out.mode, out.thresh, out.feather) << (8 * p);
            if (vo) {
                *(unsigned *)o = w;
            } else {
#pragma unroll
                for (int p = 0; p < kUpPx; p++)
                    if (dxa + p < out.dw)
                        ((uint8_t *)o)[p] = (uint8_t)(w >> (8 * p));
            }
        }
    }
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

dim3 grid2d(int w, int h, dim3 block)
{
    return dim3((unsigned)(w + (int)block.x - 1) / block.x, (unsigned)(h + (int)block.y - 1) / block.y);
}

/* A kernel that reads what the previous kernel on the stream wrote, as a programmatic dependent launch (the kernel
 * calls wait_previous_kernel() before any memory access). */
template <typename... P, typename... A>
int launch_after_smem(cudaStream_t s, dim3 grid, dim3 block, size_t smem, void (*kernel)(P...), A... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return MK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

template <typename... P, typename... A>
int launch_after(cudaStream_t s, dim3 grid, dim3 block, void (*kernel)(P...), A... args)
{
    return launch_after_smem(s, grid, block, 0, kernel, args...);
}

/* low_kernel<C, R> allowed its shared memory (once per process), then launched after reduce_kernel. */
template <int C, int R> int launch_low(cudaStream_t s, const in_t &in, const mk_guided_plan_t &pl, float *means)
{
    static std::atomic<int> ready{0};
    const size_t bytes = low_geom<C, R>::BYTES;
    int rc;
    if (!ready.load(std::memory_order_relaxed)) {
        if ((rc = MK_CUDA_CHECK(cudaFuncSetAttribute(low_kernel<C, R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     (int)bytes))))
            return rc;
        ready.store(1, std::memory_order_relaxed);
    }
    using G = low_geom<C, R>;
    dim3 grid((unsigned)(pl.wl + G::TW - 1) / G::TW, (unsigned)(pl.hl + G::TH - 1) / G::TH);
    return launch_after_smem(s, grid, kLowThreads, bytes, low_kernel<C, R>, in, pl, means);
}

template <int C, int R = 0> int launch_low_r(cudaStream_t s, const in_t &in, const mk_guided_plan_t &pl, float *means)
{
    if constexpr (R < kLowRMax) {
        if (pl.r != R)
            return launch_low_r<C, R + 1>(s, in, pl, means);
    }
    return launch_low<C, R>(s, in, pl, means);
}

/* Blocks of kStripThreads of kernel K resident on one SM (its registers decide; occupancy.h), at least 1. */
template <auto K> int strip_blocks_per_sm(int *n)
{
    static std::atomic<int> cached{0};
    int rc = mk_cached_per_sm(
        cached,
        [](int *v) { return MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(v, K, kStripThreads, 0)); },
        n);
    if (!rc && *n < 1)
        *n = 1;
    return rc;
}

/* A launch of a strip kernel: rows per band and blocks. */
struct bands_t {
    int rows;
    unsigned blocks;
};

/* Bands for strip kernel K: as short as it takes for the strips to fill every SM with as many warps as can be
 * resident (one wave; a band's warm-up of 2r + 1 rows is paid again for each band, but each warp walks its rows
 * serially, so resident warps are what hides the latency of a row step). pair: bands in pairs around centre rows
 * (final_kernel), an even count. */
template <auto K> int strip_bands(const mk_ctx_t *ctx, const mk_guided_plan_t &pl, bands_t *b, bool pair = false)
{
    int per_sm, rc = strip_blocks_per_sm<K>(&per_sm);
    if (rc)
        return rc;
    const long strips = strip_count(pl.r, pl.wl);
    const long want = (long)per_sm * kStripWarps * (ctx->sm_count > 0 ? ctx->sm_count : 1);
    long rows = (strips * pl.hl + want - 1) / want;
    rows = rows < 1 ? 1 : rows;
    const long bands = pair ? 2 * ((pl.hl + 2 * rows - 1) / (2 * rows)) : (pl.hl + rows - 1) / rows;
    b->rows = (int)rows;
    b->blocks = (unsigned)(strips * ((bands + kStripWarps - 1) / kStripWarps)); /* band-major (strip_of) */
    return 0;
}

/* Whether the staged coef_kernel K keeps per_sm blocks on an SM with bytes of staged rows per block (the answer for
 * the last size asked is kept; the kernel is allowed the device's largest shared memory once). */
template <auto K> int stage_fits(size_t bytes, int per_sm, bool *ok)
{
    static std::atomic<long long> last{-1}; /* bytes << 1 | fits */
    static std::atomic<int> room{-1};       /* dynamic shared memory the kernel may ask for */
    const long long l = last.load(std::memory_order_relaxed);
    if (l >= 0 && (size_t)(l >> 1) == bytes) {
        *ok = l & 1;
        return 0;
    }
    int rc, m = room.load(std::memory_order_relaxed);
    if (m < 0) {
        int dev, optin;
        cudaFuncAttributes fa;
        if ((rc = MK_CUDA_CHECK(cudaGetDevice(&dev))) ||
            (rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev))) ||
            (rc = MK_CUDA_CHECK(cudaFuncGetAttributes(&fa, K))))
            return rc;
        m = optin - (int)fa.sharedSizeBytes;
        if ((rc = MK_CUDA_CHECK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, m))))
            return rc;
        room.store(m, std::memory_order_relaxed);
    }
    int v = 0;
    if (bytes <= (size_t)m &&
        (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, K, kStripThreads, bytes))))
        return rc;
    *ok = v >= per_sm;
    last.store((long long)(bytes << 1) | (*ok ? 1 : 0), std::memory_order_relaxed);
    return 0;
}

/* MASKD_GUIDED_STAGE: 0 keeps coef_kernel unstaged for colour guides too, 1 stages them wherever the stage fits
 * (whatever the band height), unset or anything else the default rule (full_strips). Measuring aids, and how the tests
 * reach both colour kernels on every path: tests/meson.build runs parity_guided three ways, since by the default rule
 * most of its colour cases (small images: short bands) run unstaged. */
int stage_mode()
{
    static const int mode = [] {
        const char *e = getenv("MASKD_GUIDED_STAGE");
        return e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "1") ? 1 : 2;
    }();
    return mode;
}

/* The full filter (s = 1) on the strip kernels: coef_kernel, then final_kernel as a dependent launch. */
template <int C, bool NARROW, int RS>
int full_strips(mk_ctx_t *ctx, const in_t &in, const mk_guided_plan_t &pl, float *ab, const mk_mask_out_t &out)
{
    cudaStream_t s = MK_STREAM(ctx);
    bands_t bc, bf;
    int rc, per_sm;
    if ((rc = strip_bands<coef_kernel<C, false, NARROW, RS>>(ctx, pl, &bc, true)) ||
        (rc = strip_bands<final_kernel<C, 0, RS>>(ctx, pl, &bf, true)) ||
        (rc = strip_blocks_per_sm<coef_kernel<C, false, NARROW, RS>>(&per_sm)))
        return rc;
    const size_t sbytes = (size_t)(kStripWarps / 2) * stage_rows(bc.rows, pl.r) * stage_row_bytes<C>();
    bool staged = false;
    /* Staged rows (stage_in) for colour guides, where a pair's two bands cover at least its 2r + 1 warm-up rows (so
     * that most staged rows are read twice) and the stage fits beside the blocks the registers allow. Session 29
     * (H100, NOTES.md): 1080p colour photo 83.6 against 85.5-86.1 us, mask 74.6-74.8 against 75.5-76.1. Session 30:
     * 720p colour (bands of 6 rows) unstaged by the band rule 47.0-47.7 against 48.0-48.1 us staged; final_kernel
     * asking for the staged kernel's shared-memory carveout made no difference (dropped). A grey guide's rows cost
     * too little for the staging to pay: 720p 1-2 us slower, 1080p equal. */
    const int mode = stage_mode();
    if (C == 3 && mode && (mode == 1 || 2 * bc.rows >= 2 * pl.r + 1) &&
        (rc = stage_fits<coef_kernel<C, false, NARROW, RS, true>>(sbytes, per_sm, &staged)))
        return rc;
    if (staged)
        coef_kernel<C, false, NARROW, RS, true><<<bc.blocks, kStripThreads, sbytes, s>>>(in, pl, bc.rows, ab);
    else
        coef_kernel<C, false, NARROW, RS><<<bc.blocks, kStripThreads, 0, s>>>(in, pl, bc.rows, ab);
    if ((rc = MK_CUDA_LAUNCH_CHECK(coef_kernel)))
        return rc;
    return launch_after(s, bf.blocks, kStripThreads, final_kernel<C, 0, RS>, in, pl, bf.rows, (const float *)ab, out,
                        (float *)nullptr);
}

template <int C>
int strip_path(mk_ctx_t *ctx, const in_t &in, const mk_guided_plan_t &pl, float *ab, float *means, unsigned *rg,
               const mk_mask_out_t &out)
{
    cudaStream_t s = MK_STREAM(ctx);
    bands_t bc, bf;
    int rc;
    const bool narrow = narrow_r(pl.r);
    if (pl.s == 1) {
        if (pl.r == kFixedR) /* the window sums without a scan (strip_box), r known when compiled */
            return full_strips<C, true, kFixedR>(ctx, in, pl, ab, out);
        return narrow ? full_strips<C, true, 0>(ctx, in, pl, ab, out) : full_strips<C, false, 0>(ctx, in, pl, ab, out);
    }
    in_t work = in;
    work.rguide = rg;
    if (pl.r <= kLowRMax) {
        if ((rc = launch_reduce<C>(s, in, pl, rg)))
            return rc;
        return launch_low_r<C>(s, work, pl, means);
    }
    if ((rc = narrow ? strip_bands<coef_kernel<C, true, true>>(ctx, pl, &bc, true)
                     : strip_bands<coef_kernel<C, true, false>>(ctx, pl, &bc, true)) ||
        (rc = strip_bands<final_kernel<C, 1>>(ctx, pl, &bf, true)))
        return rc;
    if ((rc = launch_reduce<C>(s, in, pl, rg)) ||
        (rc = narrow ? launch_after(s, bc.blocks, kStripThreads, coef_kernel<C, true, true>, work, pl, bc.rows, ab)
                     : launch_after(s, bc.blocks, kStripThreads, coef_kernel<C, true, false>, work, pl, bc.rows, ab)))
        return rc;
    return launch_after(s, bf.blocks, kStripThreads, final_kernel<C, 1>, in, pl, bf.rows, (const float *)ab, out,
                        means);
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
    const bool strips = pl.r <= kRMax, fast = pl.s > 1;
    const size_t npx = (size_t)pl.wl * pl.hl, plane = ((size_t)pl.wl + 1) * ((size_t)pl.hl + 1);
    /* the strip kernels' planes (rows padded to a multiple of 4 floats) or the tables' interleaved a, b */
    const size_t coef_bytes = align256((size_t)coef_pitch(pl.wl) * pl.hl * NC * sizeof(float));
    const size_t off_means = coef_bytes, off_more = off_means + (fast ? coef_bytes : 0);
    /* then the reduced guide (strip kernels, s > 1) or the summed-area tables */
    const size_t off_sat2 = off_more + (strips ? 0 : align256(NM * plane * sizeof(long long)));
    const size_t total = strips ? off_more + (fast ? npx * sizeof(unsigned) : 0)
                                : off_sat2 + NC * plane * sizeof(double);
    void *p;
    int rc = mk_ctx_scratch(ctx, MK_SCRATCH_GUIDED, total, &p, NULL);
    if (rc)
        return rc;
    char *base = (char *)p;
    float *ab = (float *)base, *means = (float *)(base + off_means);
    rc = strips ? strip_path<C>(ctx, in, pl, ab, means, (unsigned *)(base + off_more), out)
                : sat_path<C>(ctx, in, pl, ab, means, (long long *)(base + off_more), (double *)(base + off_sat2), out);
    if (rc)
        return rc;
    if (fast) {
        const uintptr_t oa = (uintptr_t)out.data | (uintptr_t)out.pitch;
        const int vec = (in.g4 && out.x % kUpPx == 0 ? 1 : 0) | (oa % (out.f32 ? 16 : 4) == 0 ? 2 : 0);
        dim3 block(kUpThreads), grid((unsigned)(out.dw + kUpCols - 1) / kUpCols, (unsigned)(out.dh + kUpRows - 1) / kUpRows);
        auto kernel = out.f32 ? up_kernel<C, true> : up_kernel<C, false>;
        if (strips)
            return launch_after(MK_STREAM(ctx), grid, block, kernel, in, pl, (const float *)means, out, vec);
        kernel<<<grid, block, 0, MK_STREAM(ctx)>>>(in, pl, means, out, vec);
        return MK_CUDA_LAUNCH_CHECK(up_kernel);
    }
    if (mk_mask_out_partial(&out)) {
        dim3 block(32, 8);
        clear_outside_kernel<<<grid2d(out.dw, out.dh, block), block, 0, MK_STREAM(ctx)>>>(out);
        return MK_CUDA_LAUNCH_CHECK(clear_outside_kernel);
    }
    return 0;
}

} // namespace

extern "C" int mk_guided_upsample_cuda(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask,
                                       mk_image_t *dst, const mk_guided_plan_t *pl, const mk_mask_t *m)
{
    in_t in = {(const uint8_t *)guide->data, guide->pitch, nullptr, mask->data, mask->pitch, mask->dtype == MK_F32,
               ((uintptr_t)guide->data | guide->pitch) % 4 == 0,
               ((uintptr_t)mask->data | mask->pitch) % (mask->dtype == MK_F32 ? 16 : 4) == 0};
    mk_mask_out_t out = mk_mask_out(dst, m, pl->w, pl->h);
    return pl->C == 3 ? run<3>(ctx, in, *pl, out) : run<1>(ctx, in, *pl, out);
}
