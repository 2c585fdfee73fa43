/* grabcut_cuda: GrabCut on the device — beta and N-links, k-means, the GMMs, T-links and the label update around
 * the CUDA grid max-flow — plus the fixed-model cut and the binary mask. It computes what the CPU reference
 * computes (grabcut.h, grabcut_px.h): every sum of the model is an exact integer sum and every double is derived
 * from those sums by the shared px functions, so k-means labels and GMM parameters are bit-identical; only
 * exp()/log() may differ in the last bit, which moves a capacity by 1 in rare pixels.
 *
 * Work per call (mk_grabcut_cuda), all queued on the context's stream:
 *   kmeans_kernel  (cooperative, once): label check and sample counts; k-means++ seeding; 10 Lloyd iterations and
 *                  the final assignment; the first GMMs; every pixel's component for iteration 1.
 *   beta_kernel, graph_kernel: the exact beta sum and the N-links (once per call, when iterations > 0).
 *   per iteration: iter_kernel (cooperative): PR labels from the last cut, moments of every (GMM, component),
 *                  learning (every block learns the same components from the same integer sums), T-links and
 *                  the next iteration's components; then the max-flow (maxflow_cuda.h's solver: the kernels write
 *                  the graph straight into its arrays; it starts cold for each call and keeps its flow from one
 *                  iteration to the next, valid because only the T-links change).
 *   final_kernel:  PR labels from the last cut; the energy when statistics are asked for.
 * The host waits once, at the end, for a small status block (errors found on the device: labels, empty sample
 * sets, singular covariances, a max-flow that gave up; the model; the energy): the return code needs it. With
 * stats, events time the stages and each max-flow synchronises for its own statistics.
 * The fixed-model cut: beta_kernel, graph_kernel (N-links and T-links of the given model in one pass), the
 * max-flow, final_kernel.
 *
 * Sample sets are the pixels of each GMM in raster order, and every pass walks the pixels in that order: block b of
 * a cooperative kernel owns the pixels [b * chunk, (b + 1) * chunk) and walks them a tile of kThreads at a time,
 * so a block scan over a tile's weights, carried from tile to tile and offset by the earlier blocks' sums, is the
 * running sum in sample order (a pixel of the other GMM weighs 0). That makes a copy of the samples unnecessary:
 * both GMMs are handled in the same pass.
 *
 * Reductions (no atomics): per-warp register sums of a (GMM, component) bucket (one __reduce_add_sync per value
 * and distinct bucket in the warp) go to warp-private shared accumulators, then one partial per block and value
 * in global memory, laid out value-major; after a grid barrier every block sums the partials itself (small grids)
 * or one warp per value sums them and every block reads the totals after a second barrier (grid_sums). Integer
 * sums are exact in any order. The
 * seeds' running sums need every block's prefix: there each block reads the few per-block sums itself. Values
 * written by other blocks of the same launch are read with __ldcg (L1 is not coherent).
 *
 * Timing attribution (mk_gc_stats_t): graph_us = beta and N-links; kmeans_us = kmeans_kernel (k-means, the first
 * GMMs and the first assignment); gmm_us = the iteration kernels (relabelling by the previous cut, learning,
 * T-links and the next assignment); maxflow_us = the max-flows and the final relabelling. */
#include "backend.h"
#include "cuda_check.h"
#include "grabcut_cuda.h"
#include "grabcut_px.h"
#include "maxflow_cuda.h"
#include "occupancy.h"

#include <cooperative_groups.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

namespace {

const unsigned kFull = 0xffffffffu;
const int kThreads = 1024; /* cooperative kernels: one block per SM */
const int kWarps = kThreads / 32;
const int kFlatThreads = 256; /* per-pixel kernels */
const int kFlatWarps = kFlatThreads / 32;
const int kBuckets = 2 * MK_GC_MAX_K;       /* (GMM g, component k) -> g * MK_GC_MAX_K + k */
const int kMoments = 10;                    /* n, s[3], ss[6] of mk_gc_moments_t */
const int kCentreSums = 4;                  /* n, s[3] */
const int kPartial = kBuckets * kMoments;   /* partial sums per block of one pass */
const int kLloydIterations = 10;
const int kMaxIterations = 100;             /* mk_gc_params_t's limit */
const int kMaxEvents = 2 * kMaxIterations + 8; /* stage events: graph, k-means, 2 per iteration, final */

enum { F_BAD_LABEL = 1, F_NO_BGD = 2, F_NO_FGD = 4, F_SINGULAR = 8, F_MAXFLOW = 16 };

/* What the host reads back at the end of a call. */
struct gc_result {
    int flags;
    int bad_pixel;                   /* F_BAD_LABEL: the first pixel (raster index) whose value is not a label */
    int bad_gmm, bad_comp, bad_iter; /* F_SINGULAR: the component and the iteration (0: the k-means model);
                                      * F_MAXFLOW: the iteration whose max-flow gave up */
    long long bad_n;
    double bad_det;
    long long eint;                  /* E_int of the final labelling */
    double C, energy;                /* the energy constant and C + eint / cap_scale */
    double beta;
    mk_gc_comp_t comp[2][MK_GC_MAX_K]; /* the GMMs learnt last */
    double cov[2][MK_GC_MAX_K][9];
};

/* Device state in the MK_SCRATCH_GRABCUT slot. The tickets are 0 between calls (their last block resets them). */
struct gc_state {
    gc_result res;
    unsigned beta_ticket, final_ticket;
    int centre[2][MK_GC_MAX_K][3]; /* the k-means++ seeds, as picked */
    long long tot[kPartial];       /* the grid's sums of a cooperative kernel's pass */
    long long flow[kMaxIterations]; /* each max-flow's value (the solver writes -1 when it gives up) */
};

/* One launch's view of the call (passed as a __grid_constant__ parameter). */
struct gc_args {
    const uint8_t *img;
    size_t ipitch;
    uint8_t *mask;
    size_t mpitch;
    int w, h, n, K;
    int32_t *term, *edge[4]; /* the graph: the max-flow solver's arrays, gp elements per row */
    size_t gp;
    uint8_t *comp, *cut;     /* components (bgd | fgd << 4) and the max-flow's cut, lp bytes per row */
    uint8_t *klabel;         /* k-means labels (may be NULL), lp bytes per row */
    size_t lp;
    int32_t *d2;             /* k-means++ D^2, n */
    long long *part;         /* per-block partial sums, value-major: [value][gridDim.x], in two halves (part_of) */
    size_t part_half;        /* elements per half */
    long long *blk;          /* per-block sample counts of kmeans_kernel: [3][gridDim.x] */
    double *cpart;           /* per-block sums of min(s, t) of the last T-link pass */
    int ncpart;              /* how many */
    gc_state *st;
    uint64_t seed;
    double gamma, lambda, scale;
    int chunk;               /* pixels per block of a cooperative kernel, a multiple of kThreads */
    int one_barrier;         /* grid_sums after one barrier (small grids) */
    int iter;                /* iter_kernel: the iteration (1..); final_kernel: that of the last max-flow */
    int relabel;             /* iter_kernel: relabel the PR pixels by the cut first */
    int assign;              /* kmeans_kernel: assign the first iteration's components */
    int energy;              /* final_kernel: compute the energy */
    int reset;               /* beta_kernel: clear the result's flags first (no earlier kernel of the call sets any) */
    int learn;               /* the fixed-model cut learns after it: graph_kernel records the components,
                              * iter_kernel only learns (no T-links) */
};

/* ---- per-pixel helpers ----------------------------------------------------------------------------------- */

struct rgb {
    int v0, v1, v2;
};

__device__ __forceinline__ rgb load_px(const gc_args &a, int x, int y)
{
    const uint8_t *q = a.img + (size_t)y * a.ipitch + 3 * (size_t)x;
    return {q[0], q[1], q[2]};
}

__device__ __forceinline__ uint8_t *label_ptr(const gc_args &a, int x, int y)
{
    return a.mask + (size_t)y * a.mpitch + x;
}

__device__ __forceinline__ size_t gidx(const gc_args &a, int x, int y)
{
    return (size_t)y * a.gp + x;
}

__device__ __forceinline__ size_t lidx(const gc_args &a, int x, int y)
{
    return (size_t)y * a.lp + x;
}

__device__ __forceinline__ long long d2_int(rgb a, rgb b)
{
    return mk_gc_dist2_int(a.v0, a.v1, a.v2, b.v0, b.v1, b.v2);
}

/* Direction d of grabcut.h (E, SE, S, SW) from (x, y) stays inside the image. */
__device__ __forceinline__ bool inside(const gc_args &a, int x, int y, int d)
{
    const int dx = d == 0 || d == 1 ? 1 : d == 2 ? 0 : -1;
    int nx = x + dx;
    return nx >= 0 && nx < a.w && (d == 0 ? true : y + 1 < a.h);
}

__device__ __forceinline__ rgb neighbour(const gc_args &a, int x, int y, int d)
{
    const int dx = d == 0 || d == 1 ? 1 : d == 2 ? 0 : -1;
    return load_px(a, x + dx, y + (d != 0));
}

/* OpenCV's GMM::operator()(color) and whichComponent on one set of component densities: the mixture density as
 * mk_gc_gmm_density sums it and the most likely component as mk_gc_which picks it. */
__device__ __forceinline__ double gmm_eval(const mk_gc_comp_t *c, int K, rgb v, int *which)
{
    double r = 0.0, bp = 0.0;
    int best = 0;
    for (int k = 0; k < K; k++) {
        double p = mk_gc_comp_density(&c[k], v.v0, v.v1, v.v2);
        r = MK_DADD(r, MK_DMUL(c[k].coef, p));
        if (p > bp) {
            best = k;
            bp = p;
        }
    }
    *which = best;
    return r;
}

/* One pixel's net T-link (mk_gc_tlinks, mk_gc_term) and min(source, sink) for the energy constant; with `nib`,
 * also its most likely components for the next assignment (bgd | fgd << 4; for BGD and FGD pixels only their own
 * GMM's, the labels that never change). */
__device__ __forceinline__ int32_t pixel_tlinks(const mk_gc_comp_t (*comp)[MK_GC_MAX_K], int K, int label, rgb v,
                                                double lambda, double scale, uint8_t *nib, double *cmin)
{
    double s, t;
    int wb = 0, wf = 0;
    if (label == MK_GC_PR_BGD || label == MK_GC_PR_FGD) {
        s = -MK_GC_LOG(gmm_eval(comp[0], K, v, &wb));
        t = -MK_GC_LOG(gmm_eval(comp[1], K, v, &wf));
    } else {
        mk_gc_tlinks(label, comp[0], comp[1], K, lambda, v.v0, v.v1, v.v2, &s, &t);
        if (nib)
            gmm_eval(comp[label], K, v, label ? &wf : &wb);
    }
    if (nib)
        *nib = (uint8_t)(wb | wf << 4);
    *cmin = s < t ? s : t;
    return mk_gc_term(s, t, scale);
}

/* ---- block primitives ------------------------------------------------------------------------------------- */

template <typename T> __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(kFull, v, o);
    return v;
}

/* Shared memory of the cooperative kernels. */
struct coop_smem {
    long long acc[kWarps][kPartial]; /* warp-private bucket sums of the current pass */
    long long tot[kPartial];         /* all blocks' sums of the last pass */
    long long wred[kWarps][6];
    long long bs[6];
    long long scan[kWarps];
    long long cnt_pre[3], cnt_tot[3], cnt_own[3]; /* sample counts: before this block, all, this block's */
    long long pre[2], gtot[2], own[2];
    double cred[kWarps];
    double ctr[2][MK_GC_MAX_K][3];
    int cint[2][MK_GC_MAX_K][3];
    mk_gc_comp_t comp[2][MK_GC_MAX_K];
    double cov[2][MK_GC_MAX_K][9];
    int fail[kBuckets];
    long long gn[2];
};

/* The block's sums of v[0..N-1] into sm.bs (all threads may read them until their next block_sums). */
template <int N> __device__ void block_sums(coop_smem &sm, const long long (&v)[N])
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = 0; i < N; i++) {
        long long s = warp_sum(v[i]);
        if (lane == 0)
            sm.wred[warp][i] = s;
    }
    __syncthreads();
    if (threadIdx.x < N) {
        long long s = 0;
        for (int w = 0; w < kWarps; w++)
            s += sm.wred[w][threadIdx.x];
        sm.bs[threadIdx.x] = s;
    }
    __syncthreads();
}

/* Over the per-block values src[i][b] (value-major, gridDim.x blocks): the sum over the blocks before this one
 * into pre[i] and over all blocks into tot[i], for i < N (N <= 3). */
template <int N> __device__ void gather(coop_smem &sm, const long long *src, long long *pre, long long *tot)
{
    long long v[2 * N];
    for (int i = 0; i < 2 * N; i++)
        v[i] = 0;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += kThreads)
        for (int i = 0; i < N; i++) {
            long long x = __ldcg(&src[(size_t)i * gridDim.x + b]);
            v[i] += b < (int)blockIdx.x ? x : 0;
            v[N + i] += x;
        }
    block_sums<2 * N>(sm, v);
    if (threadIdx.x == 0)
        for (int i = 0; i < N; i++) {
            pre[i] = sm.bs[i];
            tot[i] = sm.bs[N + i];
        }
    __syncthreads();
}

/* Inclusive scan of w over the block (thread order); *total receives the block's sum. */
__device__ long long block_scan(coop_smem &sm, long long w, long long *total)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long v = w;
    for (int o = 1; o < 32; o <<= 1) {
        long long t = __shfl_up_sync(kFull, v, o);
        if (lane >= o)
            v += t;
    }
    if (lane == 31)
        sm.scan[warp] = v;
    __syncthreads();
    if (warp == 0) {
        long long s = lane < kWarps ? sm.scan[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            long long t = __shfl_up_sync(kFull, s, o);
            if (lane >= o)
                s += t;
        }
        if (lane < kWarps)
            sm.scan[lane] = s;
    }
    __syncthreads();
    long long r = v + (warp ? sm.scan[warp - 1] : 0);
    *total = sm.scan[kWarps - 1];
    __syncthreads();
    return r;
}

/* Adds the warp's values val[0..M-1] per bucket (-1: none) into the warp's accumulators: one 32-bit warp
 * reduction per value and distinct bucket (a warp's sums of u8 moments fit: 32 * 255^2 < 2^32). */
template <int M> __device__ __forceinline__ void warp_accumulate(coop_smem &sm, int bucket, const int (&val)[M])
{
    int lane = threadIdx.x & 31;
    long long *acc = sm.acc[threadIdx.x >> 5];
    unsigned todo = __ballot_sync(kFull, bucket >= 0);
    while (todo) {
        int leader = __ffs(todo) - 1;
        int b = __shfl_sync(kFull, bucket, leader);
        bool mine = bucket == b;
        todo &= ~__ballot_sync(kFull, mine);
        for (int m = 0; m < M; m++) {
#if __CUDA_ARCH__ >= 800
            unsigned s = __reduce_add_sync(kFull, mine ? (unsigned)val[m] : 0u);
#else
            unsigned s = warp_sum(mine ? (unsigned)val[m] : 0u);
#endif
            if (lane == leader)
                acc[b * M + m] += s;
        }
    }
}

/* The block's accumulators (M values per bucket) into its column of dst (value-major), zeroing them. */
template <int M> __device__ void flush_block(coop_smem &sm, long long *dst)
{
    __syncthreads();
    for (int i = threadIdx.x; i < kBuckets * M; i += kThreads) {
        long long s = 0;
        for (int w = 0; w < kWarps; w++) {
            s += sm.acc[w][i];
            sm.acc[w][i] = 0;
        }
        dst[(size_t)i * gridDim.x + blockIdx.x] = s;
    }
    __syncthreads();
}

/* The half of a.part that pass `phase` of a cooperative kernel flushes to: passes alternate between the two, so a
 * block may flush its next pass while a slower one still reads the last (grid_sums). */
__device__ __forceinline__ long long *part_of(const gc_args &a, int phase)
{
    return a.part + (size_t)(phase & 1) * a.part_half;
}

/* The grid's sums of the V values every block flushed to part_of(a, phase), into sm.tot of every block; phase moves
 * on. On small grids (a.one_barrier: plan_call) every block sums the partials itself after one barrier (kPartial x
 * its blocks loads a block at most); on larger ones one warp per value sums it over the blocks (coalesced) into
 * st->tot and every block reads the totals after a second barrier, so that the partials are read once. Either way
 * the sums are exact integers, the same in any order. A block that leaves reads the partials of pass phase; the
 * next pass flushes to the other half, and the one after it to this half only after the next call's barrier, which
 * every block reaches after its reads. */
__device__ void grid_sums(coop_smem &sm, cg::grid_group &grid, const gc_args &a, int V, int &phase)
{
    const long long *part = part_of(a, phase);
    phase++;
    grid.sync();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (a.one_barrier) {
        for (int i = warp; i < V; i += kWarps) {
            long long s = 0;
            for (int b = lane; b < (int)gridDim.x; b += 32)
                s += __ldcg(&part[(size_t)i * gridDim.x + b]);
            s = warp_sum(s);
            if (lane == 0)
                sm.tot[i] = s;
        }
        __syncthreads();
        return;
    }
    for (int i = (int)blockIdx.x * kWarps + warp; i < V; i += gridDim.x * kWarps) {
        long long s = 0;
        for (int b = lane; b < (int)gridDim.x; b += 32)
            s += __ldcg(&part[(size_t)i * gridDim.x + b]);
        s = warp_sum(s);
        if (lane == 0)
            a.st->tot[i] = s;
    }
    grid.sync();
    for (int i = threadIdx.x; i < V; i += kThreads)
        sm.tot[i] = __ldcg(&a.st->tot[i]);
    __syncthreads();
}

/* The moments of the colour v as the 10 values of one bucket (mk_gc_moments_add's order). */
__device__ __forceinline__ void moment_values(rgb v, int (&m)[kMoments])
{
    m[0] = 1;
    m[1] = v.v0;
    m[2] = v.v1;
    m[3] = v.v2;
    m[4] = v.v0 * v.v0;
    m[5] = v.v0 * v.v1;
    m[6] = v.v0 * v.v2;
    m[7] = v.v1 * v.v1;
    m[8] = v.v1 * v.v2;
    m[9] = v.v2 * v.v2;
}

/* Both GMMs learnt from the moments in sm.tot (every block does the same exact work), into sm.comp / sm.cov;
 * block 0 publishes them in st->res. Returns 1 (the same in every block) when a covariance is singular: the first
 * such component, background GMM first, is recorded as the CPU reference reports it. */
__device__ bool learn_gmms(coop_smem &sm, const gc_args &a, int iter)
{
    int tid = threadIdx.x;
    if (tid < 2) {
        long long n = 0;
        for (int k = 0; k < a.K; k++)
            n += sm.tot[(tid * MK_GC_MAX_K + k) * kMoments];
        sm.gn[tid] = n;
    }
    __syncthreads();
    if (tid < kBuckets) {
        int g = tid / MK_GC_MAX_K, k = tid % MK_GC_MAX_K;
        const long long *t = &sm.tot[tid * kMoments];
        mk_gc_moments_t m;
        m.n = t[0];
        for (int i = 0; i < 3; i++)
            m.s[i] = t[1 + i];
        for (int i = 0; i < 6; i++)
            m.ss[i] = t[4 + i];
        if (k >= a.K)
            m.n = 0;
        sm.fail[tid] = mk_gc_comp_learn(&m, sm.gn[g], &sm.comp[g][k], sm.cov[g][k]) != 0;
    }
    __syncthreads();
    int bad = -1;
    for (int i = 0; i < kBuckets && bad < 0; i++)
        if (sm.fail[i])
            bad = i;
    if (blockIdx.x == 0) {
        if (tid < kBuckets) {
            int g = tid / MK_GC_MAX_K, k = tid % MK_GC_MAX_K;
            a.st->res.comp[g][k] = sm.comp[g][k];
            for (int i = 0; i < 9; i++)
                a.st->res.cov[g][k][i] = sm.cov[g][k][i];
        }
        if (tid == 0 && bad >= 0) {
            int g = bad / MK_GC_MAX_K, k = bad % MK_GC_MAX_K;
            a.st->res.flags |= F_SINGULAR;
            a.st->res.bad_gmm = g;
            a.st->res.bad_comp = k;
            a.st->res.bad_iter = iter;
            a.st->res.bad_n = sm.tot[bad * kMoments];
            a.st->res.bad_det = sm.comp[g][k].det;
        }
    }
    return bad >= 0;
}

/* After a failure found on the device: a valid graph without T-links for the max-flows still queued. */
__device__ void clear_terms(const gc_args &a, int begin, int end)
{
    for (int p = begin + threadIdx.x; p < end; p += kThreads) {
        int y = p / a.w, x = p - y * a.w;
        a.term[gidx(a, x, y)] = 0;
    }
}

/* The sum over the block of a double, in a fixed order (for thread 0). */
template <int WARPS> __device__ double block_sum_double(double v, double *red)
{
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0.0;
    if (threadIdx.x == 0)
        for (int w = 0; w < WARPS; w++)
            s += red[w];
    __syncthreads();
    return s;
}

/* ---- k-means ------------------------------------------------------------------------------------------------ */

/* In this block's pixels of GMM g: the first at which the running sum of the weights (1 per sample, or its D^2),
 * starting from `run`, exceeds `target`; its colour becomes seed c. The caller knows the block holds it. */
__device__ void find_seed(coop_smem &sm, const gc_args &a, int begin, int end, int g, bool by_rank, long long run,
                          long long target, int c)
{
    for (int base = begin; base < end; base += kThreads) {
        int p = base + threadIdx.x, y = p / a.w, x = p - y * a.w;
        long long w = 0;
        if (p < end && (*label_ptr(a, x, y) & 1) == g)
            w = by_rank ? 1 : a.d2[p];
        long long tile, incl = block_scan(sm, w, &tile);
        if (w > 0 && run + incl > target && run + incl - w <= target) {
            rgb v = load_px(a, x, y);
            a.st->centre[g][c][0] = v.v0;
            a.st->centre[g][c][1] = v.v1;
            a.st->centre[g][c][2] = v.v2;
        }
        run += tile;
        if (run > target)
            break;
    }
}

/* The nearest of the kn centres (mk_gc_dist2, the first on ties). */
__device__ __forceinline__ int nearest(const double (*ctr)[3], int kn, rgb v)
{
    int best = 0;
    double bd = mk_gc_dist2(ctr[0], v.v0, v.v1, v.v2);
    for (int k = 1; k < kn; k++) {
        double d = mk_gc_dist2(ctr[k], v.v0, v.v1, v.v2);
        if (d < bd) {
            best = k;
            bd = d;
        }
    }
    return best;
}

/* k-means of both sample sets, the first GMMs, and (a.assign) every pixel's component for iteration 1. */
__global__ void __launch_bounds__(kThreads) kmeans_kernel(const __grid_constant__ gc_args a)
{
    __shared__ coop_smem sm;
    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x, nb = gridDim.x;
    const int begin = (int)blockIdx.x * a.chunk, end = min(begin + a.chunk, a.n);
    int phase = 0; /* grid_sums' passes so far: the half of a.part the next one uses */
    for (int i = tid; i < kWarps * kPartial; i += kThreads)
        (&sm.acc[0][0])[i] = 0;
    if (blockIdx.x == 0 && tid == 0) {
        /* Nothing writes the result before the first barrier. */
        a.st->res.flags = 0;
        a.st->res.bad_pixel = INT_MAX;
    }

    /* Sample counts per GMM and values that are not labels. */
    {
        long long v[3] = {0, 0, 0};
        for (int p = begin + tid; p < end; p += kThreads) {
            int y = p / a.w, x = p - y * a.w, l = *label_ptr(a, x, y);
            v[l > MK_GC_PR_FGD ? 2 : l & 1]++;
        }
        block_sums<3>(sm, v);
        if (tid < 3) {
            sm.cnt_own[tid] = sm.bs[tid];
            a.blk[(size_t)tid * nb + blockIdx.x] = sm.bs[tid];
        }
    }
    grid.sync();
    gather<3>(sm, a.blk, sm.cnt_pre, sm.cnt_tot);
    if (sm.cnt_tot[2] || !sm.cnt_tot[0] || !sm.cnt_tot[1]) {
        if (sm.cnt_own[2])
            for (int p = begin + tid; p < end; p += kThreads) {
                int y = p / a.w, x = p - y * a.w;
                if (*label_ptr(a, x, y) > MK_GC_PR_FGD) {
                    atomicMin(&a.st->res.bad_pixel, p);
                    atomicOr(&a.st->res.flags, F_BAD_LABEL);
                }
            }
        if (blockIdx.x == 0 && tid == 0)
            atomicOr(&a.st->res.flags, (sm.cnt_tot[0] ? 0 : F_NO_BGD) | (sm.cnt_tot[1] ? 0 : F_NO_FGD));
        clear_terms(a, begin, end);
        return;
    }
    const int kn[2] = {(int)min((long long)a.K, sm.cnt_tot[0]), (int)min((long long)a.K, sm.cnt_tot[1])};
    const int kmax = max(kn[0], kn[1]);

    /* k-means++ seeding: seed 0 by rank, seed c by the running D^2 sum (by rank when all D^2 are 0). */
    for (int c = 0; c < kmax; c++) {
        bool by_rank[2] = {true, true};
        if (c > 0) {
            long long w[2] = {0, 0};
            for (int base = begin; base < end; base += kThreads) {
                int p = base + tid;
                if (p >= end)
                    continue;
                int y = p / a.w, x = p - y * a.w, g = *label_ptr(a, x, y) & 1;
                if (c >= kn[g])
                    continue;
                const int *s = sm.cint[g][c - 1];
                rgb v = load_px(a, x, y);
                long long d = mk_gc_dist2_int(v.v0, v.v1, v.v2, s[0], s[1], s[2]);
                if (c > 1 && a.d2[p] < d)
                    d = a.d2[p];
                a.d2[p] = (int32_t)d;
                w[g] += d;
            }
            block_sums<2>(sm, w);
            if (tid < 2) {
                sm.own[tid] = sm.bs[tid];
                a.part[(size_t)tid * nb + blockIdx.x] = sm.bs[tid];
            }
            grid.sync();
            gather<2>(sm, a.part, sm.pre, sm.gtot);
            by_rank[0] = sm.gtot[0] == 0;
            by_rank[1] = sm.gtot[1] == 0;
        }
        uint64_t r = mk_gc_rand(a.seed, (uint64_t)c);
        for (int g = 0; g < 2; g++) {
            if (c >= kn[g])
                continue;
            long long pre = by_rank[g] ? sm.cnt_pre[g] : sm.pre[g], own = by_rank[g] ? sm.cnt_own[g] : sm.own[g];
            long long target = (long long)(r % (uint64_t)(by_rank[g] ? sm.cnt_tot[g] : sm.gtot[g]));
            if (pre <= target && target < pre + own)
                find_seed(sm, a, begin, end, g, by_rank[g], pre, target, c);
        }
        grid.sync();
        if (tid < 6) {
            int g = tid / 3, ch = tid % 3;
            if (c < kn[g])
                sm.cint[g][c][ch] = __ldcg(&a.st->centre[g][c][ch]);
        }
        __syncthreads();
    }

    /* Lloyd: assignment, then every centre with samples to their mean (exact sums, one division). */
    if (tid < 2 * MK_GC_MAX_K * 3) {
        int g = tid / (MK_GC_MAX_K * 3), k = tid / 3 % MK_GC_MAX_K, ch = tid % 3;
        sm.ctr[g][k][ch] = k < kn[g] ? (double)sm.cint[g][k][ch] : 0.0;
    }
    __syncthreads();
    for (int it = 0; it < kLloydIterations; it++) {
        for (int base = begin; base < end; base += kThreads) {
            int p = base + tid, bucket = -1;
            int val[kCentreSums] = {0, 0, 0, 0};
            if (p < end) {
                int y = p / a.w, x = p - y * a.w, g = *label_ptr(a, x, y) & 1;
                rgb v = load_px(a, x, y);
                bucket = g * MK_GC_MAX_K + nearest(sm.ctr[g], kn[g], v);
                val[0] = 1;
                val[1] = v.v0;
                val[2] = v.v1;
                val[3] = v.v2;
            }
            warp_accumulate<kCentreSums>(sm, bucket, val);
        }
        flush_block<kCentreSums>(sm, part_of(a, phase));
        grid_sums(sm, grid, a, kBuckets * kCentreSums, phase);
        if (tid < kBuckets * 3) {
            int b = tid / 3, ch = tid % 3, g = b / MK_GC_MAX_K, k = b % MK_GC_MAX_K;
            long long n = sm.tot[b * kCentreSums];
            if (k < kn[g] && n)
                sm.ctr[g][k][ch] = MK_DDIV((double)sm.tot[b * kCentreSums + 1 + ch], (double)n);
        }
        __syncthreads();
    }

    /* The labels: one more assignment; the first GMMs from their moments. */
    for (int base = begin; base < end; base += kThreads) {
        int p = base + tid, bucket = -1;
        int val[kMoments];
        if (p < end) {
            int y = p / a.w, x = p - y * a.w, g = *label_ptr(a, x, y) & 1;
            rgb v = load_px(a, x, y);
            int k = nearest(sm.ctr[g], kn[g], v);
            if (a.klabel)
                a.klabel[lidx(a, x, y)] = (uint8_t)k;
            bucket = g * MK_GC_MAX_K + k;
            moment_values(v, val);
        } else {
            for (int m = 0; m < kMoments; m++)
                val[m] = 0;
        }
        warp_accumulate<kMoments>(sm, bucket, val);
    }
    flush_block<kMoments>(sm, part_of(a, phase));
    grid_sums(sm, grid, a, kPartial, phase);
    if (learn_gmms(sm, a, 0)) {
        clear_terms(a, begin, end);
        return;
    }
    if (!a.assign)
        return;
    for (int p = begin + tid; p < end; p += kThreads) {
        int y = p / a.w, x = p - y * a.w, g = *label_ptr(a, x, y) & 1, k;
        gmm_eval(sm.comp[g], a.K, load_px(a, x, y), &k);
        a.comp[lidx(a, x, y)] = (uint8_t)(k << (4 * g));
    }
}

/* ---- the iterations ----------------------------------------------------------------------------------------- */

/* One iteration before its max-flow: PR labels from the last cut (a.relabel), moments of every pixel's (GMM,
 * component), both GMMs learnt, then every pixel's T-link and its components under the new GMMs. */
__global__ void __launch_bounds__(kThreads) iter_kernel(const __grid_constant__ gc_args a)
{
    __shared__ coop_smem sm;
    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x;
    const int begin = (int)blockIdx.x * a.chunk, end = min(begin + a.chunk, a.n);
    int phase = 0; /* grid_sums' passes so far: the half of a.part the next one uses */
    /* A failure earlier in the call: the mask stays as it was then (written by an earlier launch: uniform). */
    if (__ldcg(&a.st->res.flags))
        return;
    if (a.relabel && __ldcg(&a.st->flow[a.iter - 2]) < 0) {
        if (blockIdx.x == 0 && tid == 0) {
            a.st->res.flags |= F_MAXFLOW;
            a.st->res.bad_iter = a.iter - 1;
        }
        return;
    }
    for (int i = tid; i < kWarps * kPartial; i += kThreads)
        (&sm.acc[0][0])[i] = 0;
    __syncthreads();
    for (int base = begin; base < end; base += kThreads) {
        int p = base + tid, bucket = -1;
        int val[kMoments];
        if (p < end) {
            int y = p / a.w, x = p - y * a.w;
            uint8_t *lp = label_ptr(a, x, y);
            int l = *lp;
            size_t i = lidx(a, x, y);
            if (a.relabel && (l == MK_GC_PR_BGD || l == MK_GC_PR_FGD)) {
                l = a.cut[i] ? MK_GC_PR_FGD : MK_GC_PR_BGD;
                *lp = (uint8_t)l;
            }
            int g = l & 1;
            bucket = g * MK_GC_MAX_K + ((a.comp[i] >> (4 * g)) & 15);
            moment_values(load_px(a, x, y), val);
        } else {
            for (int m = 0; m < kMoments; m++)
                val[m] = 0;
        }
        warp_accumulate<kMoments>(sm, bucket, val);
    }
    flush_block<kMoments>(sm, part_of(a, phase));
    grid_sums(sm, grid, a, kPartial, phase);
    if (learn_gmms(sm, a, a.iter)) {
        clear_terms(a, begin, end);
        return;
    }
    if (a.learn)
        return;
    double c = 0.0;
    for (int p = begin + tid; p < end; p += kThreads) {
        int y = p / a.w, x = p - y * a.w;
        double m;
        uint8_t nib;
        a.term[gidx(a, x, y)] =
            pixel_tlinks(sm.comp, a.K, *label_ptr(a, x, y), load_px(a, x, y), a.lambda, a.scale, &nib, &m);
        a.comp[lidx(a, x, y)] = nib;
        c += m;
    }
    c = block_sum_double<kWarps>(c, sm.cred);
    if (tid == 0)
        a.cpart[blockIdx.x] = c;
}

/* ---- per-pixel kernels -------------------------------------------------------------------------------------- */

/* The block's sum of a 64-bit value for thread 0 (kFlatThreads threads). */
__device__ long long flat_block_sum(long long v, long long *red)
{
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    long long s = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < kFlatWarps; w++)
            s += red[w];
    __syncthreads();
    return s;
}

/* Every block's sum s (valid in thread 0) is stored in part[blockIdx.x]; the block that finishes last returns true
 * (the others false) and has in thread 0 *total, the sum of all the blocks' parts in block order (so the result does
 * not depend on the blocks' timing). The ticket counts the finished blocks and is left 0 for the next launch. */
__device__ bool grid_total(long long s, long long *part, unsigned *ticket, long long *red, long long *total)
{
    __shared__ bool last;
    if (threadIdx.x == 0) {
        part[blockIdx.x] = s;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return false;
    __threadfence();
    long long t = 0;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += kFlatThreads)
        t += __ldcg(&part[b]);
    t = flat_block_sum(t, red);
    if (threadIdx.x == 0) {
        *total = t;
        *ticket = 0;
    }
    return true;
}

/* The exact sum of the squared colour differences over the 8-neighbour pairs; its last block sets beta. */
__global__ void __launch_bounds__(kFlatThreads) beta_kernel(const __grid_constant__ gc_args a)
{
    __shared__ long long red[kFlatWarps];
    if (a.reset && blockIdx.x == 0 && threadIdx.x == 0) {
        a.st->res.flags = 0;
        a.st->res.bad_pixel = INT_MAX;
    }
    long long s = 0;
    for (int p = blockIdx.x * kFlatThreads + threadIdx.x; p < a.n; p += gridDim.x * kFlatThreads) {
        int y = p / a.w, x = p - y * a.w;
        rgb c = load_px(a, x, y);
        for (int d = 0; d < 4; d++)
            if (inside(a, x, y, d))
                s += d2_int(c, neighbour(a, x, y, d));
    }
    s = flat_block_sum(s, red);
    long long t;
    if (grid_total(s, a.part, &a.st->beta_ticket, red, &t) && threadIdx.x == 0)
        a.st->res.beta = mk_gc_beta(t, mk_gc_pairs(a.w, a.h));
}

/* The N-links of every pixel; with a model (TLINKS), also the T-links and the labels' check, in the same pass
 * (the fixed-model cut). */
template <bool TLINKS>
__global__ void __launch_bounds__(kFlatThreads) graph_kernel(const __grid_constant__ gc_args a,
                                                             const __grid_constant__ mk_gc_model_t model)
{
    __shared__ mk_gc_comp_t comp[2][MK_GC_MAX_K];
    __shared__ double red[kFlatWarps];
    const double beta = a.st->res.beta;
    if (TLINKS) {
        /* Components past a GMM's own K stay unused; the dispatch layer checked that the rest are invertible. */
        if (threadIdx.x < kBuckets) {
            int g = threadIdx.x / MK_GC_MAX_K, k = threadIdx.x % MK_GC_MAX_K;
            const mk_gmm_t *m = g ? &model.fgd : &model.bgd;
            if (k < m->K)
                mk_gc_comp_set(m->weight[k], m->mean[k], &m->cov[k][0][0], &comp[g][k]);
            else
                mk_gc_comp_clear(&comp[g][k]);
        }
        __syncthreads();
    }
    double c = 0.0;
    for (int p = blockIdx.x * kFlatThreads + threadIdx.x; p < a.n; p += gridDim.x * kFlatThreads) {
        int y = p / a.w, x = p - y * a.w;
        size_t i = gidx(a, x, y);
        rgb v = load_px(a, x, y);
        for (int d = 0; d < 4; d++)
            a.edge[d][i] = inside(a, x, y, d)
                               ? mk_gc_nlink(d2_int(v, neighbour(a, x, y, d)), beta, a.gamma, d & 1, a.scale)
                               : 0;
        if (TLINKS) {
            int l = *label_ptr(a, x, y);
            if (l > MK_GC_PR_FGD) {
                atomicMin(&a.st->res.bad_pixel, p);
                atomicOr(&a.st->res.flags, F_BAD_LABEL);
                a.term[i] = 0;
                continue;
            }
            double m;
            uint8_t nib;
            a.term[i] = pixel_tlinks(comp, a.K, l, v, a.lambda, a.scale, a.learn ? &nib : NULL, &m);
            if (a.learn)
                a.comp[lidx(a, x, y)] = nib;
            c += m;
        }
    }
    if (TLINKS) {
        c = block_sum_double<kFlatWarps>(c, red);
        if (threadIdx.x == 0)
            a.cpart[blockIdx.x] = c;
    }
}

/* After the last max-flow: PR labels from the cut; with a.energy, E_int of the result (a neighbour's side is taken
 * from its label and the cut, whichever of its old or new label this thread sees) and, in the last block, the
 * energy. */
__global__ void __launch_bounds__(kFlatThreads) final_kernel(const __grid_constant__ gc_args a)
{
    __shared__ long long red[kFlatWarps];
    if (__ldcg(&a.st->res.flags))
        return;
    if (__ldcg(&a.st->flow[a.iter - 1]) < 0) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            a.st->res.flags |= F_MAXFLOW;
            a.st->res.bad_iter = a.iter;
        }
        return;
    }
    long long e = 0;
    for (int p = blockIdx.x * kFlatThreads + threadIdx.x; p < a.n; p += gridDim.x * kFlatThreads) {
        int y = p / a.w, x = p - y * a.w;
        uint8_t *lp = label_ptr(a, x, y);
        int l = *lp;
        size_t i = gidx(a, x, y);
        bool pr = l == MK_GC_PR_BGD || l == MK_GC_PR_FGD;
        int fg = pr ? a.cut[lidx(a, x, y)] != 0 : l & 1;
        if (pr)
            *lp = fg ? MK_GC_PR_FGD : MK_GC_PR_BGD;
        if (!a.energy)
            continue;
        int32_t t = a.term[i];
        e += fg ? (t < 0 ? -(long long)t : 0) : (t > 0 ? t : 0);
        for (int d = 0; d < 4; d++) {
            if (!inside(a, x, y, d))
                continue;
            int nx = x + (d == 0 || d == 1 ? 1 : d == 2 ? 0 : -1), ny = y + (d != 0);
            int nl = *label_ptr(a, nx, ny);
            int nfg = nl == MK_GC_PR_BGD || nl == MK_GC_PR_FGD ? a.cut[lidx(a, nx, ny)] != 0 : nl & 1;
            if (nfg != fg)
                e += a.edge[d][i];
        }
    }
    if (!a.energy)
        return;
    e = flat_block_sum(e, red);
    long long t;
    if (grid_total(e, a.part, &a.st->final_ticket, red, &t) && threadIdx.x == 0) {
        double C = 0.0;
        for (int b = 0; b < a.ncpart; b++)
            C = MK_DADD(C, __ldcg(&a.cpart[b]));
        a.st->res.eint = t;
        a.st->res.C = C;
        a.st->res.energy = MK_DADD(C, MK_DDIV((double)t, a.scale));
    }
}

__global__ void binary_kernel(const uint8_t *src, size_t spitch, uint8_t *dst, size_t dpitch, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    uint8_t l = src[(size_t)y * spitch + x];
    dst[(size_t)y * dpitch + x] = l == MK_GC_FGD || l == MK_GC_PR_FGD ? 255 : 0;
}

/* ---- host side -------------------------------------------------------------------------------------------- */

size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* A call's geometry, launch shapes, pieces of the scratch and its max-flow solver (whose buffer is part of the
 * scratch: the solver object itself is made per call, which costs no allocation on the device). */
struct gc_plan {
    int w = 0, h = 0, n = 0;
    size_t gp = 0;          /* elements per row of the graph (the solver's arrays) */
    size_t lp = 0;          /* bytes per row of the u8 per-pixel arrays */
    int coop_blocks = 0, chunk = 0, flat_blocks = 0, one_barrier = 0;
    gc_state *st = NULL;
    gc_result *host = NULL; /* pinned */
    int32_t *term = NULL, *edge[4] = {NULL, NULL, NULL, NULL}, *d2 = NULL;
    uint8_t *comp = NULL, *cut = NULL, *klabel = NULL;
    long long *part = NULL, *blk = NULL;
    size_t part_half = 0;
    double *cpart = NULL;
    mk_pr_solver_t *pr = NULL;
    ~gc_plan()
    {
        mk_pr_destroy(pr);
    }
};

/* Grids of up to this many blocks take grid_sums' one-barrier path (NOTES.md, session 33); MASKD_GC_ONE_BARRIER=N,
 * a measuring aid, sets it. */
int one_barrier_blocks(void)
{
    static const int n = [] {
        const char *e = getenv("MASKD_GC_ONE_BARRIER");
        return e && *e ? atoi(e) : 64;
    }();
    return n;
}

/* Blocks of kThreads of the cooperative kernels resident on one SM: the smaller of the two. */
int coop_blocks_per_sm(int *per_sm)
{
    static std::atomic<int> cached{0};
    return mk_cached_per_sm(
        cached,
        [](int *v) {
            int rc, k = 0, i = 0;
            if ((rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k, kmeans_kernel, kThreads, 0))) ||
                (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&i, iter_kernel, kThreads, 0))))
                return rc;
            *v = k < i ? k : i;
            return 0;
        },
        per_sm);
}

/* Launch shapes for a w x h image, the scratch they need and the solver on it. */
int plan_call(mk_ctx_t *ctx, int w, int h, gc_plan *pl)
{
    int rc, per_sm = 0, coop = 0;
    if ((rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device))))
        return rc;
    if (!coop)
        return mk_err_set(MK_EUNSUPPORTED, "grabcut: the device cannot launch cooperative kernels");
    if ((rc = coop_blocks_per_sm(&per_sm)))
        return rc;
    if (per_sm < 1)
        return mk_err_set(MK_ECUDA, "grabcut: the cooperative kernels do not fit on an SM");
    pl->w = w;
    pl->h = h;
    pl->n = w * h;
    pl->lp = align_up((size_t)w, 64);
    long long tiles = (pl->n + kThreads - 1) / kThreads, resident = (long long)per_sm * ctx->sm_count;
    long long blocks = tiles < resident ? tiles : resident;
    pl->chunk = (int)((tiles + blocks - 1) / blocks) * kThreads;
    pl->coop_blocks = (pl->n + pl->chunk - 1) / pl->chunk;
    pl->one_barrier = pl->coop_blocks <= one_barrier_blocks();
    long long flat = (pl->n + kFlatThreads - 1) / kFlatThreads, flat_max = 8LL * ctx->sm_count;
    pl->flat_blocks = (int)(flat < flat_max ? flat : flat_max);

    size_t nbmax = (size_t)(pl->coop_blocks > pl->flat_blocks ? pl->coop_blocks : pl->flat_blocks);
    size_t pix = pl->lp * (size_t)h, pr_bytes = mk_pr_device_bytes(w, h), off = 0;
    size_t o_st, o_part, o_blk, o_cpart, o_d2, o_comp, o_cut, o_kl, o_pr;
    o_st = off;
    off = align_up(off + sizeof(gc_state), 256);
    o_part = off;
    off = align_up(off + 2 * nbmax * kPartial * sizeof(long long), 256);
    o_blk = off;
    off = align_up(off + nbmax * 3 * sizeof(long long), 256);
    o_cpart = off;
    off = align_up(off + nbmax * sizeof(double), 256);
    o_d2 = off;
    off = align_up(off + (size_t)pl->n * sizeof(int32_t), 256);
    o_comp = off;
    off = align_up(off + pix, 256);
    o_cut = off;
    off = align_up(off + pix, 256);
    o_kl = off;
    off = align_up(off + pix, 256);
    o_pr = off;
    off = align_up(off + pr_bytes, 256);

    char *dev;
    void *host;
    if ((rc = mk_ctx_scratch(ctx, MK_SCRATCH_GRABCUT, off, (void **)&dev, NULL)) ||
        (rc = mk_ctx_scratch(ctx, MK_SCRATCH_GRABCUT_HOST, sizeof(gc_result), &host, NULL)) ||
        (rc = mk_pr_create(ctx, w, h, dev + o_pr, pr_bytes, &pl->pr)))
        return rc;
    pl->st = (gc_state *)(dev + o_st);
    pl->host = (gc_result *)host;
    pl->part = (long long *)(dev + o_part);
    pl->part_half = nbmax * kPartial;
    pl->blk = (long long *)(dev + o_blk);
    pl->cpart = (double *)(dev + o_cpart);
    pl->d2 = (int32_t *)(dev + o_d2);
    pl->comp = (uint8_t *)(dev + o_comp);
    pl->cut = (uint8_t *)(dev + o_cut);
    pl->klabel = (uint8_t *)(dev + o_kl);
    mk_pr_graph_t g = mk_pr_graph(pl->pr);
    pl->term = g.term;
    for (int d = 0; d < 4; d++)
        pl->edge[d] = g.edge[d];
    pl->gp = g.pitch;
    return 0;
}

gc_args make_args(const gc_plan &pl, const mk_image_t *img, const mk_image_t *mask, const mk_gc_params_t *p)
{
    gc_args a;
    memset(&a, 0, sizeof a);
    a.img = (const uint8_t *)img->data;
    a.ipitch = img->pitch;
    a.mask = mask ? (uint8_t *)mask->data : NULL;
    a.mpitch = mask ? mask->pitch : 0;
    a.w = pl.w;
    a.h = pl.h;
    a.n = pl.n;
    a.K = p->K;
    a.term = pl.term;
    for (int d = 0; d < 4; d++)
        a.edge[d] = pl.edge[d];
    a.gp = pl.gp;
    a.comp = pl.comp;
    a.cut = pl.cut;
    a.lp = pl.lp;
    a.d2 = pl.d2;
    a.part = pl.part;
    a.part_half = pl.part_half;
    a.blk = pl.blk;
    a.cpart = pl.cpart;
    a.st = pl.st;
    a.seed = p->seed;
    a.gamma = p->gamma;
    a.lambda = p->lambda;
    a.scale = p->cap_scale;
    a.chunk = pl.chunk;
    a.one_barrier = pl.one_barrier;
    return a;
}

/* A failed launch leaves the tickets of the scratch unknown: it is zeroed before its next use. */
int launched(mk_ctx_t *ctx, int rc)
{
    if (rc)
        mk_ctx_scratch_dirty(ctx, MK_SCRATCH_GRABCUT);
    return rc;
}

int launch_coop(mk_ctx_t *ctx, void (*kernel)(gc_args), const gc_plan &pl, const gc_args &a)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3((unsigned)pl.coop_blocks);
    cfg.blockDim = dim3(kThreads);
    cfg.stream = MK_STREAM(ctx);
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return launched(ctx, MK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a)));
}

int launch_beta(mk_ctx_t *ctx, const gc_plan &pl, const gc_args &a)
{
    beta_kernel<<<pl.flat_blocks, kFlatThreads, 0, MK_STREAM(ctx)>>>(a);
    return launched(ctx, MK_CUDA_LAUNCH_CHECK(beta_kernel));
}

template <bool TLINKS> int launch_graph(mk_ctx_t *ctx, const gc_plan &pl, const gc_args &a, const mk_gc_model_t &m)
{
    graph_kernel<TLINKS><<<pl.flat_blocks, kFlatThreads, 0, MK_STREAM(ctx)>>>(a, m);
    return launched(ctx, MK_CUDA_LAUNCH_CHECK(graph_kernel));
}

int launch_final(mk_ctx_t *ctx, const gc_plan &pl, const gc_args &a)
{
    final_kernel<<<pl.flat_blocks, kFlatThreads, 0, MK_STREAM(ctx)>>>(a);
    return launched(ctx, MK_CUDA_LAUNCH_CHECK(final_kernel));
}

/* Waits for the call's work and reads the result block; turns the device's findings into the CPU reference's
 * errors. */
int read_result(mk_ctx_t *ctx, const gc_plan &pl, const mk_image_t *mask, gc_result *res)
{
    int rc;
    if ((rc = MK_CUDA_CHECK(cudaMemcpyAsync(pl.host, &pl.st->res, sizeof *pl.host, cudaMemcpyDeviceToHost,
                                            MK_STREAM(ctx)))) ||
        (rc = mk_cuda_sync(ctx)))
        return launched(ctx, rc);
    *res = *pl.host;
    if (res->flags & F_BAD_LABEL) {
        int x = res->bad_pixel % pl.w, y = res->bad_pixel / pl.w;
        uint8_t v = 0;
        if ((rc = MK_CUDA_CHECK(cudaMemcpy(&v, (const uint8_t *)mk_image_row(mask, 0, y) + x, 1,
                                           cudaMemcpyDeviceToHost))))
            return rc;
        return mk_err_set(MK_EINVAL, "grabcut: mask value %d at (%d,%d) is not a label (0..3)", v, x, y);
    }
    if (res->flags & F_NO_BGD)
        return mk_err_set(MK_EINVAL, "grabcut: no background pixels (BGD or PR_BGD) in the mask");
    if (res->flags & F_NO_FGD)
        return mk_err_set(MK_EINVAL, "grabcut: no foreground pixels (FGD or PR_FGD) in the mask");
    if (res->flags & F_SINGULAR)
        return mk_err_set(MK_ERANGE, "grabcut: GMM component %d of %lld samples has a singular covariance (det %g)",
                          res->bad_comp, res->bad_n, res->bad_det);
    if (res->flags & F_MAXFLOW)
        return mk_err_set(MK_ESTATE, "grabcut: the max-flow of iteration %d did not converge (%dx%d)", res->bad_iter,
                          pl.w, pl.h);
    return 0;
}

/* Events after each stage of a call, read once at its end (stats only). */
enum { ST_GRAPH, ST_KMEANS, ST_GMM, ST_MAXFLOW };

struct stage_timer {
    cudaEvent_t ev[kMaxEvents];
    int stage[kMaxEvents];
    int n = 0;
    bool on = false;
    ~stage_timer()
    {
        for (int i = 0; i < n; i++)
            cudaEventDestroy(ev[i]);
    }
    /* Records an event: the time since the previous one belongs to `stage` (the first marks the start). */
    int mark(mk_ctx_t *ctx, int st)
    {
        int rc;
        if (!on)
            return 0;
        if (n == kMaxEvents)
            return mk_err_set(MK_ESTATE, "grabcut: too many stage events");
        if ((rc = MK_CUDA_CHECK(cudaEventCreate(&ev[n]))))
            return rc;
        stage[n] = st;
        n++;
        return MK_CUDA_CHECK(cudaEventRecord(ev[n - 1], MK_STREAM(ctx)));
    }
    /* After the stream has been synchronised. */
    int read(mk_gc_stats_t *s)
    {
        double *slot[4] = {&s->graph_us, &s->kmeans_us, &s->gmm_us, &s->maxflow_us};
        for (int i = 1; i < n; i++) {
            float ms;
            int rc = MK_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i - 1], ev[i]));
            if (rc)
                return rc;
            *slot[stage[i]] += 1e3 * ms;
            s->total_us += 1e3 * ms;
        }
        return 0;
    }
};

/* The max-flow of the graph in the solver's arrays, warm from the solver's kept flow, into pl.cut; its value goes
 * to st->flow[index] (-1 when the solver gave up: the next kernel stops the call). Asynchronous without stats. */
int solve(const gc_plan &pl, int index, mk_gc_stats_t *stats)
{
    mk_maxflow_stats_t ms;
    int rc = mk_pr_solve(pl.pr, pl.cut, pl.lp, (int64_t *)&pl.st->flow[index], stats ? &ms : NULL);
    if (rc || !stats)
        return rc;
    stats->rounds += ms.rounds;
    stats->global_relabels += ms.global_relabels;
    stats->flow = ms.flow;
    return 0;
}

void model_out(const gc_result &r, int K, mk_gc_model_t *model)
{
    memset(model, 0, sizeof *model);
    mk_gmm_t *g[2] = {&model->bgd, &model->fgd};
    for (int i = 0; i < 2; i++) {
        g[i]->K = K;
        for (int k = 0; k < K; k++) {
            g[i]->weight[k] = r.comp[i][k].coef;
            memcpy(g[i]->mean[k], r.comp[i][k].mean, sizeof g[i]->mean[k]);
            memcpy(g[i]->cov[k], r.cov[i][k], sizeof g[i]->cov[k]);
        }
    }
}

/* The GrabCut slot's tag after a call that leaves a w x h flow in the solver's arrays: a later fixed-model cut of
 * the same size may start from it (mk_gc_params_t.warm_start). */
unsigned long long flow_tag(int w, int h)
{
    return 1ull << 63 | (unsigned long long)w << 32 | (unsigned)h;
}

/* Copies a w x h array of `elem`-byte elements, `spitch` elements per row, to the caller's. */
int copy_out(mk_ctx_t *ctx, const gc_plan &pl, void *dst, size_t dpitch, const void *src, size_t spitch,
             size_t elem)
{
    return mk_cuda_copy2d(ctx, dst, dpitch * elem, src, spitch * elem, (size_t)pl.w * elem, (size_t)pl.h);
}

} // namespace

extern "C" int mk_grabcut_cuda(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_params_t *p,
                               mk_gc_model_t *model, mk_gc_stats_t *stats)
{
    gc_plan pl;
    gc_result res;
    stage_timer tm;
    mk_gc_stats_t st;
    int rc;
    if (p->iterations > kMaxIterations)
        return mk_err_set(MK_ERANGE, "grabcut iterations %d above %d", p->iterations, kMaxIterations);
    memset(&st, 0, sizeof st);
    tm.on = stats != NULL;
    if ((rc = plan_call(ctx, img->width, img->height, &pl)))
        return rc;
    /* Warm: the flow the last call of this size left (mk_gc_params_t.warm_start); the tag is set again only
     * when this call has left its own. A call of 0 iterations (k-means and learning only) does not touch the
     * solver's arrays, so the flow and its tag stay for the next call (the reseeded iterations, the daemon's
     * refining frames). */
    const bool warm = p->warm_start && ctx->scratch[MK_SCRATCH_GRABCUT].tag == flow_tag(pl.w, pl.h);
    if (p->iterations > 0)
        ctx->scratch[MK_SCRATCH_GRABCUT].tag = 0;
    gc_args a = make_args(pl, img, mask, p);
    a.assign = p->iterations > 0;
    if ((rc = tm.mark(ctx, ST_KMEANS)) || (rc = launch_coop(ctx, kmeans_kernel, pl, a)) ||
        (rc = tm.mark(ctx, ST_KMEANS)))
        return rc;
    if (p->iterations > 0) {
        /* The N-links go straight into the solver's arrays, and so do the T-links of each iteration; the solver
         * starts cold for this image (or warm, from the last call's flow) and keeps its flow from one iteration to
         * the next (any flow within the capacities is a valid start: maxflow_cuda.h). */
        mk_gc_model_t none;
        memset(&none, 0, sizeof none);
        if ((!warm && (rc = mk_pr_reset(pl.pr))) || (rc = launch_beta(ctx, pl, a)) ||
            (rc = launch_graph<false>(ctx, pl, a, none)) || (rc = tm.mark(ctx, ST_GRAPH)))
            return rc;
        for (int it = 1; it <= p->iterations; it++) {
            a.iter = it;
            a.relabel = it > 1;
            if ((rc = launch_coop(ctx, iter_kernel, pl, a)) || (rc = tm.mark(ctx, ST_GMM)) ||
                (rc = solve(pl, it - 1, stats ? &st : NULL)) || (rc = tm.mark(ctx, ST_MAXFLOW)))
                return rc;
        }
        a.iter = p->iterations;
        a.energy = stats != NULL;
        a.ncpart = pl.coop_blocks;
        if ((rc = launch_final(ctx, pl, a)) || (rc = tm.mark(ctx, ST_MAXFLOW)))
            return rc;
    }
    if ((rc = read_result(ctx, pl, mask, &res)))
        return rc;
    if (p->iterations > 0)
        ctx->scratch[MK_SCRATCH_GRABCUT].tag = flow_tag(pl.w, pl.h);
    if (model)
        model_out(res, p->K, model);
    if (stats) {
        if ((rc = tm.read(&st)))
            return rc;
        if (p->iterations > 0)
            st.energy = res.energy;
        *stats = st;
    }
    return 0;
}

extern "C" int mk_grabcut_cut_cuda(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask,
                                   const mk_gc_model_t *model, const mk_gc_params_t *p, mk_gc_model_t *learnt,
                                   mk_gc_stats_t *stats)
{
    gc_plan pl;
    gc_result res;
    stage_timer tm;
    mk_gc_stats_t st;
    int rc;
    memset(&st, 0, sizeof st);
    tm.on = stats != NULL;
    if ((rc = plan_call(ctx, img->width, img->height, &pl)))
        return rc;
    gc_args a = make_args(pl, img, mask, p);
    a.K = model->bgd.K > model->fgd.K ? model->bgd.K : model->fgd.K;
    a.reset = 1;
    a.learn = learnt != NULL;
    a.iter = 1;
    a.energy = stats != NULL;
    a.ncpart = pl.flat_blocks;
    /* Warm: the flow the last call of this size left (plan_call's scratch zeroing clears the tag). */
    const bool warm = p->warm_start && ctx->scratch[MK_SCRATCH_GRABCUT].tag == flow_tag(pl.w, pl.h);
    ctx->scratch[MK_SCRATCH_GRABCUT].tag = 0;
    if ((rc = tm.mark(ctx, ST_GRAPH)) || (!warm && (rc = mk_pr_reset(pl.pr))) || (rc = launch_beta(ctx, pl, a)) ||
        (rc = launch_graph<true>(ctx, pl, a, *model)) || (rc = tm.mark(ctx, ST_GRAPH)) ||
        (rc = solve(pl, 0, stats ? &st : NULL)) || (rc = launch_final(ctx, pl, a)) ||
        (rc = tm.mark(ctx, ST_MAXFLOW)))
        return rc;
    if (learnt) {
        /* The next iteration's learning on the final labels (final_kernel has relabelled them; its energy is
         * computed from the graph before iter_kernel touches anything). */
        gc_args l = a;
        l.iter = 2;
        l.relabel = 0;
        if ((rc = launch_coop(ctx, iter_kernel, pl, l)) || (rc = tm.mark(ctx, ST_GMM)))
            return rc;
    }
    if ((rc = read_result(ctx, pl, mask, &res)))
        return rc;
    ctx->scratch[MK_SCRATCH_GRABCUT].tag = flow_tag(pl.w, pl.h);
    if (learnt)
        model_out(res, a.K, learnt);
    if (stats) {
        if ((rc = tm.read(&st)))
            return rc;
        st.energy = res.energy;
        *stats = st;
    }
    return 0;
}

extern "C" int mk_grabcut_binary_cuda(mk_ctx_t *ctx, const mk_image_t *labels, mk_image_t *dst)
{
    dim3 block(32, 8), grid((unsigned)(labels->width + 31) / 32, (unsigned)(labels->height + 7) / 8);
    binary_kernel<<<grid, block, 0, MK_STREAM(ctx)>>>((const uint8_t *)labels->data, labels->pitch,
                                                      (uint8_t *)dst->data, dst->pitch, labels->width,
                                                      labels->height);
    return MK_CUDA_LAUNCH_CHECK(binary_kernel);
}

/* ---- the stages for the parity tests (grabcut_cuda.h) ----------------------------------------------------- */

extern "C" int mk_gc_kmeans_cuda(mk_ctx_t *ctx, const mk_image_t *img, const mk_image_t *mask, int K,
                                 uint64_t seed, mk_image_t *labels)
{
    gc_plan pl;
    gc_result res;
    int rc;
    if ((rc = plan_call(ctx, img->width, img->height, &pl)))
        return rc;
    mk_gc_params_t p = mk_gc_params_default();
    p.K = K;
    p.seed = seed;
    gc_args a = make_args(pl, img, mask, &p);
    a.klabel = pl.klabel;
    if ((rc = launch_coop(ctx, kmeans_kernel, pl, a)) ||
        (rc = copy_out(ctx, pl, labels->data, labels->pitch, pl.klabel, pl.lp, 1)))
        return rc;
    return read_result(ctx, pl, mask, &res);
}

extern "C" int mk_gc_nlinks_cuda(mk_ctx_t *ctx, const mk_image_t *img, double gamma, double scale,
                                 int32_t *const edge[4], size_t pitch, double *beta)
{
    gc_plan pl;
    gc_result res;
    mk_gc_model_t none;
    int rc;
    if ((rc = plan_call(ctx, img->width, img->height, &pl)))
        return rc;
    mk_gc_params_t p = mk_gc_params_default();
    p.gamma = gamma;
    p.cap_scale = scale;
    gc_args a = make_args(pl, img, NULL, &p);
    a.reset = 1;
    memset(&none, 0, sizeof none);
    if ((rc = launch_beta(ctx, pl, a)) || (rc = launch_graph<false>(ctx, pl, a, none)))
        return rc;
    for (int d = 0; d < 4; d++)
        if ((rc = copy_out(ctx, pl, edge[d], pitch, pl.edge[d], pl.gp, sizeof(int32_t))))
            return rc;
    if ((rc = read_result(ctx, pl, NULL, &res)))
        return rc;
    if (beta)
        *beta = res.beta;
    return 0;
}

extern "C" int mk_gc_tlinks_cuda(mk_ctx_t *ctx, const mk_image_t *img, const mk_image_t *mask,
                                 const mk_gc_model_t *model, double lambda, double scale, int32_t *term,
                                 size_t pitch, double *C)
{
    gc_plan pl;
    gc_result res;
    int rc;
    if ((rc = plan_call(ctx, img->width, img->height, &pl)))
        return rc;
    mk_gc_params_t p = mk_gc_params_default();
    p.lambda = lambda;
    p.cap_scale = scale;
    gc_args a = make_args(pl, img, mask, &p);
    a.K = model->bgd.K > model->fgd.K ? model->bgd.K : model->fgd.K;
    a.reset = 1;
    if ((rc = launch_beta(ctx, pl, a)) || (rc = launch_graph<true>(ctx, pl, a, *model)) ||
        (rc = copy_out(ctx, pl, term, pitch, pl.term, pl.gp, sizeof(int32_t))) ||
        (rc = read_result(ctx, pl, mask, &res)))
        return rc;
    if (!C)
        return 0;
    double *part = (double *)malloc((size_t)pl.flat_blocks * sizeof(double));
    if (!part)
        return mk_err_set(MK_ENOMEM, "grabcut: out of host memory");
    if (!(rc = MK_CUDA_CHECK(cudaMemcpy(part, pl.cpart, (size_t)pl.flat_blocks * sizeof(double),
                                        cudaMemcpyDeviceToHost)))) {
        double c = 0.0;
        for (int b = 0; b < pl.flat_blocks; b++)
            c += part[b];
        *C = c;
    }
    free(part);
    return rc;
}
