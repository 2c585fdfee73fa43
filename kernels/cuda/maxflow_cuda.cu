/* maxflow_cuda: push-relabel max-flow on the 8-connected grid in one cooperative kernel (maxflow_cuda.h explains
 * the algorithm and the state), the solver object around it, and mk_maxflow_grid_cuda.
 *
 * Kernel layout: 1024 threads per block (MK_PR_THREADS), one block per SM; a tile visit gives each thread one pixel
 * of a 32 x 32 tile (with 512 or 256 threads, two or four pixels of one column, kRows rows apart). A tile visit is
 * a chain of dependent shared-memory steps separated by block barriers, so its latency, not the device's
 * throughput, sets the pace of a pass: one pixel per thread makes each step about four times shorter than four
 * pixels per thread (H100, 640x480 GrabCut graph: 1.68 ms against 3.09 ms; NOTES.md, session 6).
 * A pass visits the tiles on its list (the first BFS pass of a global relabel: every tile of tiling 0): tiles are
 * put on the next pass's list when their flag is raised (wake, or the relabel's scan for active pixels) and the
 * blocks share the list out evenly, so the few active tiles of a pass never queue behind each other on one block.
 * Passes are separated by grid.sync(), and every choice after a sync (another pass, another round, stop) is made
 * from values written before it, so all blocks take it alike. Mutable global state is read with __ldcg and written
 * with __stcg or atomics (L2), never through the incoherent L1.
 *
 * MASKD_MAXFLOW_PROFILE=1 selects an instantiation of the kernel that counts clock cycles per phase (tile load,
 * local BFS, sweeps, store, BFS visits, waiting at grid barriers) and the slowest visit of every pass, printed to
 * stderr after each solve with statistics; the default instantiation has none of that code. */
#include "maxflow_cuda.h"

#include "cuda_check.h"
#include "log.h"
#include "maxflow_tiles.h"

#include <cooperative_groups.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

namespace {

#ifndef MK_PR_THREADS
#define MK_PR_THREADS 1024 /* threads per block: 1024 (a pixel each), 512 or 256 (2 or 4, rows kRows apart) */
#endif
const int kThreads = MK_PR_THREADS;
const int kTile = MK_PR_TILE;
const int kRows = kThreads / 32;              /* tile rows a step covers: thread t has column t % 32, row t / 32 */
const int kRing = kTile + 2;                  /* side of a tile with its one-pixel ring */
const int kPix = kTile * kTile / kThreads;    /* pixels per thread in a tile visit */
const int kRingCells = 4 * kTile + 4;         /* pixels of the ring */
const int kInf = 1 << 30;                     /* label/distance of a pixel that cannot reach the sink */
const int kMaxPasses = 200000;                /* all passes of one solve, whatever the rounds */
const unsigned kSink = 1u << 8;               /* residual mask: the pixel has capacity to the sink (w < 0) */
const unsigned kExcess = 1u << 9;             /* residual mask: the pixel has excess (w > 0) */

/* Directions 0..7: E, SE, S, SW, W, NW, N, NE; d ^ 4 is the reverse of d, and d < 4 are the stored ones. */
__host__ __device__ constexpr int ddx(int d)
{
    return d == 0 || d == 1 || d == 7 ? 1 : d >= 3 && d <= 5 ? -1 : 0;
}
__host__ __device__ constexpr int ddy(int d)
{
    return d >= 1 && d <= 3 ? 1 : d >= 5 ? -1 : 0;
}
/* Offset of direction d in a ring-padded tile array. */
__host__ __device__ constexpr int hoff(int d)
{
    return ddx(d) + kRing * ddy(d);
}

/* Device control block: pass counters, the last global relabel's summary, the outcome. */
struct pr_ctl {
    unsigned cnt[3];  /* tiles woken for the next pass; pass g counts in cnt[(g + 1) % 3] */
    int active;       /* pixels with excess and a finite distance after the last global relabel */
    int dmax;         /* largest finite distance of the last global relabel */
    int status;       /* 0 converged, 1 out of rounds, 2 out of passes */
    int relabels;     /* global relabels */
    int push_passes;
    int bfs_passes;
    long long flow;
};

/* MASKD_MAXFLOW_PROFILE=1: where a solve's time goes, in SM clock cycles (clock64), counted by thread 0 of every
 * block and added up over the blocks at the end of the kernel. */
enum {
    PF_PUSH_LOAD, PF_PUSH_LBFS, PF_PUSH_SWEEP, PF_PUSH_STORE, PF_BFS_VISIT, PF_SYNC, PF_SKIP, PF_LABELS, /* cycles */
    PF_PUSH_VISITS, PF_BFS_VISITS, PF_LBFS_ITERS, PF_SWEEPS, PF_STALL_BFS, PF_BFS_ITERS, PF_KERNEL, PF_PASSES,
    PF_N,
    PF_PASS_MAX = 32,       /* per pass: the slowest visit's cycles */
    PF_MAX_PASSES = 4096,
    PF_PASS_KIND = PF_PASS_MAX + PF_MAX_PASSES, /* per pass: 1 BFS, 2 push */
    PF_TOTAL = PF_PASS_KIND + PF_MAX_PASSES
};

struct pr_args {
    int w, h;
    int pitch; /* elements per row of every per-pixel array */
    const int32_t *cap[4];
    const int32_t *term;
    int32_t *flow[4];
    int32_t *lab;      /* push labels */
    int32_t *dist;     /* BFS distances (kInf between global relabels) */
    uint16_t *rmask;   /* residual directions, kSink, kExcess: set by each global relabel's first pass */
    unsigned *pflag[2], *bflag[2]; /* per tiling: tiles woken for the next push / BFS pass */
    unsigned *list[2];              /* the tiles of pass g in list[g & 1], cnt[g % 3] of them */
    long long *tile_flow;           /* per tile of tiling 0: its pixels' share of the flow value */
    pr_ctl *ctl;
    uint8_t *cut;
    size_t cut_pitch;
    long long *flow_out;
    int ntx[2], nty[2];
    int sweeps, push_passes, margin, max_rounds;
    unsigned long long *prof; /* PF_TOTAL counters, or NULL */
};

struct sm_push {
    int r[8][kTile * kTile];   /* residual capacity of each pixel in each direction */
    int w[kTile * kTile];      /* balance: excess > 0, sink capacity < 0 */
    int h[kRing * kRing];      /* labels, ring included (the ring's stay as loaded) */
    int d[kRing * kRing];      /* local BFS distances; the ring holds the ring's labels */
};

struct sm_bfs {
    int d[kRing * kRing];
    int m[kTile * kTile];
    int before[kTile * kTile]; /* distances as loaded */
};

union sm_all {
    sm_push p;
    sm_bfs b;
};

struct sm_block {
    sm_all u;
    long long pf[PF_N];            /* thread 0's profile counters (when a.prof) */
    unsigned next;                 /* bits of the other tiling's 2x2 tiles to wake (maxflow_tiles.h) */
    long long red[kThreads / 32];  /* block reductions */
};

__device__ __forceinline__ bool inside(const pr_args &a, int x, int y)
{
    return x >= 0 && y >= 0 && x < a.w && y < a.h;
}

__device__ __forceinline__ size_t at(const pr_args &a, int x, int y)
{
    return (size_t)y * (size_t)a.pitch + (size_t)x;
}

__device__ __forceinline__ int vload(const int *p)
{
    return *(const volatile int *)p;
}


/* Profile: thread 0 adds the cycles since *t0 to counter k and restarts *t0. */
template <bool P>
__device__ __forceinline__ void pf_mark(const pr_args &a, sm_block &sb, int k, long long &t0)
{
    if (P && a.prof && threadIdx.x == 0) {
        long long t = clock64();
        sb.pf[k] += t - t0;
        t0 = t;
    }
}

template <bool P>
__device__ __forceinline__ void pf_count(const pr_args &a, sm_block &sb, int k, long long v)
{
    if (P && a.prof && threadIdx.x == 0)
        sb.pf[k] += v;
}

/* 1 + the smallest of v's 8 neighbours (ring-padded array, index hidx) over the directions set in mask, or cur if
 * smaller. The 8 loads are issued together (no load waits for a test of another), which is most of a relaxation
 * step's latency; values written concurrently by other threads are read old or new, either is an upper bound. */
__device__ __forceinline__ int relax_min(const int *v, int hidx, unsigned mask, int cur)
{
    int nb[8];
#pragma unroll
    for (int d = 0; d < 8; d++)
        nb[d] = vload(v + hidx + hoff(d));
    int best = cur;
#pragma unroll
    for (int d = 0; d < 8; d++)
        if ((mask >> d) & 1u)
            best = min(best, nb[d] + 1);
    return best;
}

/* Ring cell q (0..kRingCells-1) as tile coordinates (-1..kTile). */
__device__ __forceinline__ void ring_pos(int q, int &i, int &j)
{
    if (q < kRing) {
        i = q - 1;
        j = -1;
    } else if (q < 2 * kRing) {
        i = q - kRing - 1;
        j = kTile;
    } else if (q < 2 * kRing + kTile) {
        i = -1;
        j = q - 2 * kRing;
    } else {
        i = kTile;
        j = q - 2 * kRing - kTile;
    }
}

/* Residual capacities of in-grid pixel (x, y) in the 8 directions and its balance w = term + inflow - outflow,
 * from the global flow. */
__device__ void pixel_state(const pr_args &a, int x, int y, int r[8], int &w)
{
    size_t p = at(a, x, y);
    int bal = __ldg(a.term + p);
#pragma unroll
    for (int d = 0; d < 4; d++) {
        r[d] = 0;
        if (inside(a, x + ddx(d), y + ddy(d))) {
            int f = __ldcg(a.flow[d] + p);
            r[d] = __ldg(a.cap[d] + p) - f;
            bal -= f;
        }
    }
#pragma unroll
    for (int d = 4; d < 8; d++) {
        r[d] = 0;
        int qx = x + ddx(d), qy = y + ddy(d);
        if (inside(a, qx, qy)) {
            size_t q = at(a, qx, qy);
            int f = __ldcg(a.flow[d - 4] + q); /* the flow from q to (x, y) */
            r[d] = __ldg(a.cap[d - 4] + q) + f;
            bal += f;
        }
    }
    w = bal;
}

/* Sum of v over the block, for thread 0. */
__device__ long long block_sum(sm_block &s, long long v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        s.red[threadIdx.x >> 5] = v;
    __syncthreads();
    long long t = 0;
    if (threadIdx.x == 0)
        for (int k = 0; k < kThreads / 32; k++)
            t += s.red[k];
    return t;
}

/* Thread 0: wakes the other tiling's tiles named by the bits (relative to tile (cx, cy) of tiling o): each tile
 * whose flag it raised goes to the next pass's list (list, *cnt entries). */
__device__ void wake(const pr_args &a, unsigned *flags, unsigned bits, int cx, int cy, int o, unsigned *cnt,
                     unsigned *list)
{
    int n = !o, c0 = mk_pr_next_first(cx, o), r0 = mk_pr_next_first(cy, o);
    for (int b = 0; b < 4; b++) {
        int c = c0 + (b & 1), r = r0 + (b >> 1);
        if (!((bits >> b) & 1) || c < 0 || r < 0 || c >= a.ntx[n] || r >= a.nty[n])
            continue;
        if (atomicExch(flags + r * a.ntx[n] + c, 1u) == 0u)
            __stcg(list + atomicAdd(cnt, 1u), (unsigned)(r * a.ntx[n] + c));
    }
}

/* ---- global relabel: one tile of one BFS pass ---- */

/* Relaxes the tile's distances to their fixpoint given the ring: d(p) = 1 for sink pixels, else 1 + the smallest
 * distance over p's residual arcs. Every value is an upper bound of the true distance throughout. */
__device__ int bfs_relax(sm_bfs &s)
{
    const int i = threadIdx.x & 31;
    unsigned mk[kPix]; /* the residual directions of the thread's pixels, 0 for those that never change */
#pragma unroll
    for (int k = 0; k < kPix; k++) {
        unsigned m = (unsigned)s.m[((threadIdx.x >> 5) + kRows * k) * kTile + i];
        mk[k] = (m & kSink) ? 0u : m & 0xffu;
    }
    for (int iter = 1;; iter++) {
        int changed = 0;
#pragma unroll
        for (int k = 0; k < kPix; k++) {
            if (!mk[k])
                continue;
            int j = (threadIdx.x >> 5) + kRows * k;
            int hidx = (j + 1) * kRing + i + 1;
            int cur = vload(&s.d[hidx]), best = relax_min(s.d, hidx, mk[k], cur);
            if (best < cur) {
                *(volatile int *)&s.d[hidx] = best;
                changed = 1;
            }
        }
        if (!__syncthreads_or(changed))
            return iter;
    }
}

/* The first pass of a global relabel (first) computes each pixel's residual mask from the flow, seeds the sink
 * pixels with distance 1 and adds up the tile's share of the flow value; later passes start from the stored
 * masks and distances. Pixels whose distance dropped wake the other tiling's tiles around them. */
template <bool P>
__device__ void bfs_visit(const pr_args &a, sm_block &sb, int o, int t, bool first, unsigned *cnt, unsigned *list)
{
    sm_bfs &s = sb.u.b;
    const int tid = threadIdx.x, i = tid & 31;
    const int cx = t % a.ntx[o], cy = t / a.ntx[o];
    const int x0 = mk_pr_origin(cx, o), y0 = mk_pr_origin(cy, o);
    long long share = 0;
    if (tid == 0)
        sb.next = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, x = x0 + i, y = y0 + j;
        unsigned m = 0;
        int dist = kInf, before = kInf;
        if (inside(a, x, y)) {
            size_t p = at(a, x, y);
            if (first) {
                int r[8], w;
                pixel_state(a, x, y, r, w);
#pragma unroll
                for (int d = 0; d < 8; d++)
                    if (r[d] > 0)
                        m |= 1u << d;
                m |= w < 0 ? kSink : w > 0 ? kExcess : 0u;
                __stcg(a.rmask + p, (uint16_t)m);
                int c = __ldg(a.term + p);
                share += (c < 0 ? -(long long)c : 0) - (w < 0 ? -(long long)w : 0);
                if (m & kSink)
                    dist = 1;
            } else {
                m = __ldcg(a.rmask + p);
                before = dist = __ldcg(a.dist + p);
            }
        }
        s.m[j * kTile + i] = (int)m;
        s.before[j * kTile + i] = before;
        s.d[(j + 1) * kRing + i + 1] = dist;
    }
    for (int q = tid; q < kRingCells; q += kThreads) {
        int ri, rj;
        ring_pos(q, ri, rj);
        int x = x0 + ri, y = y0 + rj;
        s.d[(rj + 1) * kRing + ri + 1] = inside(a, x, y) ? __ldcg(a.dist + at(a, x, y)) : kInf;
    }
    __syncthreads();
    pf_count<P>(a, sb, PF_BFS_ITERS, bfs_relax(s));
    unsigned bits = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, x = x0 + i, y = y0 + j;
        if (!inside(a, x, y))
            continue;
        int dist = s.d[(j + 1) * kRing + i + 1];
        if (dist >= s.before[j * kTile + i])
            continue;
        __stcg(a.dist + at(a, x, y), dist);
        /* The tile's own pixels are at their fixpoint; a change of a border pixel can unsettle the pixels
         * around it in other tiles: wake the other tiling's tiles holding its 3x3 box (clipped to the grid). */
        if (i == 0 || i == kTile - 1 || j == 0 || j == kTile - 1) {
            int xl = max(x - 1, 0), xh = min(x + 1, a.w - 1), yl = max(y - 1, 0), yh = min(y + 1, a.h - 1);
            bits |= mk_pr_next_bit(xl, yl, cx, cy, o) | mk_pr_next_bit(xh, yl, cx, cy, o) |
                    mk_pr_next_bit(xl, yh, cx, cy, o) | mk_pr_next_bit(xh, yh, cx, cy, o);
        }
    }
    if (bits)
        atomicOr(&sb.next, bits);
    if (first) {
        long long tile_share = block_sum(sb, share); /* contains the barrier that publishes sb.next */
        if (tid == 0)
            a.tile_flow[t] = tile_share;
    } else {
        __syncthreads();
    }
    if (tid == 0 && sb.next)
        wake(a, a.bflag[!o], sb.next, cx, cy, o, cnt, list);
    __syncthreads();
}

/* ---- push passes: one tile visit ---- */

/* Local BFS inside the tile: distances to the sink pixels (1) or through the ring (ring label + 1); labels are
 * raised to them (never lowered). Returns whether a pixel with excess has a label below hc. */
__device__ bool push_local_bfs(const pr_args &a, sm_push &s, int x0, int y0, int hc, int &iters)
{
    const int tid = threadIdx.x, i = tid & 31;
    unsigned mk[kPix]; /* residual directions of the thread's pixels; 0 for sinks and pixels outside the grid */
#pragma unroll
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, idx = j * kTile + i;
        bool in = inside(a, x0 + i, y0 + j), sink = in && s.w[idx] < 0;
        s.d[(j + 1) * kRing + i + 1] = sink ? 1 : kInf;
        unsigned m = 0;
#pragma unroll
        for (int d = 0; d < 8; d++)
            m |= (s.r[d][idx] > 0 ? 1u : 0u) << d;
        mk[k] = in && !sink ? m : 0u;
    }
    __syncthreads();
    for (iters = 1;; iters++) {
        int changed = 0;
#pragma unroll
        for (int k = 0; k < kPix; k++) {
            if (!mk[k])
                continue;
            int j = (tid >> 5) + kRows * k, hidx = (j + 1) * kRing + i + 1;
            int cur = vload(&s.d[hidx]), best = relax_min(s.d, hidx, mk[k], cur);
            if (best < cur) {
                *(volatile int *)&s.d[hidx] = best;
                changed = 1;
            }
        }
        if (!__syncthreads_or(changed))
            break;
    }
    int act = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, idx = j * kTile + i, hidx = (j + 1) * kRing + i + 1;
        if (!inside(a, x0 + i, y0 + j))
            continue;
        int h = max(s.h[hidx], s.d[hidx]);
        s.h[hidx] = h;
        act |= s.w[idx] > 0 && h < hc;
    }
    return __syncthreads_or(act) != 0;
}

/* The push step of pixel (i, j) of the tile at grid position (x, y): pushes its excess down to lower neighbours
 * (only the higher end of an edge pushes along it in a step, so each residual pair has one writer). Pushes across
 * the tile's border go to the global flow by atomics and wake the neighbour's tile (bits). Returns 1 if it
 * pushed. */
__device__ int push_pixel(const pr_args &a, sm_push &s, int i, int j, int x, int y, int hc, int cx, int cy, int o,
                          unsigned &bits)
{
    const int idx = j * kTile + i, hidx = (j + 1) * kRing + i + 1;
    int e = vload(&s.w[idx]);
    const int hu = s.h[hidx];
    if (e <= 0 || hu >= hc)
        return 0;
    int pushed = 0;
#pragma unroll
    for (int d = 0; d < 8; d++) {
        if (e <= 0 || s.h[hidx + hoff(d)] >= hu)
            continue;
        int r = s.r[d][idx];
        if (r <= 0)
            continue;
        int delta = min(e, r);
        s.r[d][idx] = r - delta;
        e -= delta;
        pushed += delta;
        int vi = i + ddx(d), vj = j + ddy(d);
        if (vi >= 0 && vi < kTile && vj >= 0 && vj < kTile) {
            int vidx = vj * kTile + vi;
            s.r[d ^ 4][vidx] += delta; /* v is lower: it does not push back along this edge in this step */
            atomicAdd(&s.w[vidx], delta);
        } else {
            int vx = x + ddx(d), vy = y + ddy(d);
            if (d < 4)
                atomicAdd(a.flow[d] + at(a, x, y), delta);
            else
                atomicAdd(a.flow[d - 4] + at(a, vx, vy), -delta);
            bits |= mk_pr_next_bit(vx, vy, cx, cy, o);
        }
    }
    if (pushed)
        atomicSub(&s.w[idx], pushed);
    return pushed != 0;
}

/* The relabel step of pixel idx: an active pixel with no lower residual neighbour goes to 1 + the lowest one.
 * Neighbours relabel concurrently; a neighbour's label read is its old or new value, either keeps the labelling
 * valid. Returns whether the pixel is still active. */
__device__ int relabel_pixel(sm_push &s, int idx, int hidx, int hc)
{
    int hu = s.h[hidx];
    if (s.w[idx] <= 0 || hu >= hc)
        return 0;
    int m = kInf;
#pragma unroll
    for (int d = 0; d < 8; d++)
        if (s.r[d][idx] > 0)
            m = min(m, vload(&s.h[hidx + hoff(d)]));
    if (m >= hu) {
        hu = m >= kInf ? kInf : m + 1;
        *(volatile int *)&s.h[hidx] = hu;
    }
    return hu < hc;
}

template <bool P>
__device__ void push_visit(const pr_args &a, sm_block &sb, int o, int t, int hc, unsigned *cnt, unsigned *list)
{
    sm_push &s = sb.u.p;
    const int tid = threadIdx.x, i = tid & 31;
    const int cx = t % a.ntx[o], cy = t / a.ntx[o];
    const int x0 = mk_pr_origin(cx, o), y0 = mk_pr_origin(cy, o);
    long long t0 = (P && a.prof) ? clock64() : 0;
    int iters = 0;
    if (tid == 0)
        sb.next = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, x = x0 + i, y = y0 + j, idx = j * kTile + i;
        int r[8], w = 0, h = kInf;
#pragma unroll
        for (int d = 0; d < 8; d++)
            r[d] = 0;
        if (inside(a, x, y)) {
            pixel_state(a, x, y, r, w);
            h = __ldcg(a.lab + at(a, x, y));
        }
#pragma unroll
        for (int d = 0; d < 8; d++)
            s.r[d][idx] = r[d];
        s.w[idx] = w;
        s.h[(j + 1) * kRing + i + 1] = h;
    }
    for (int q = tid; q < kRingCells; q += kThreads) {
        int ri, rj;
        ring_pos(q, ri, rj);
        int x = x0 + ri, y = y0 + rj, hq = (rj + 1) * kRing + ri + 1;
        int h = inside(a, x, y) ? __ldcg(a.lab + at(a, x, y)) : kInf;
        s.h[hq] = h;
        s.d[hq] = h;
    }
    __syncthreads();
    pf_mark<P>(a, sb, PF_PUSH_LOAD, t0);
    bool active = push_local_bfs(a, s, x0, y0, hc, iters);
    pf_count<P>(a, sb, PF_LBFS_ITERS, iters);
    pf_mark<P>(a, sb, PF_PUSH_LBFS, t0);
    bool stalled = false;
    for (int sweep = 0; sweep < a.sweeps && active; sweep++) {
        pf_count<P>(a, sb, PF_SWEEPS, 1);
        int pushed = 0;
        unsigned bits = 0;
#pragma unroll 1
        for (int k = 0; k < kPix; k++) {
            int j = (tid >> 5) + kRows * k, x = x0 + i, y = y0 + j;
            if (inside(a, x, y))
                pushed |= push_pixel(a, s, i, j, x, y, hc, cx, cy, o, bits);
        }
        if (bits)
            atomicOr(&sb.next, bits);
        __syncthreads();
        int act = 0;
#pragma unroll 1
        for (int k = 0; k < kPix; k++) {
            int j = (tid >> 5) + kRows * k;
            if (inside(a, x0 + i, y0 + j))
                act |= relabel_pixel(s, j * kTile + i, (j + 1) * kRing + i + 1, hc);
        }
        pushed = __syncthreads_or(pushed);
        active = __syncthreads_or(act) != 0;
        if (!pushed) {
            if (stalled)
                break;
            active = push_local_bfs(a, s, x0, y0, hc, iters);
            pf_count<P>(a, sb, PF_STALL_BFS, 1);
            stalled = true;
        } else {
            stalled = false;
        }
    }
    pf_mark<P>(a, sb, PF_PUSH_SWEEP, t0);
    unsigned bits = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = (tid >> 5) + kRows * k, x = x0 + i, y = y0 + j, idx = j * kTile + i;
        if (!inside(a, x, y))
            continue;
        size_t p = at(a, x, y);
        int h = s.h[(j + 1) * kRing + i + 1];
        __stcg(a.lab + p, h);
        /* Edges inside the tile are this block's alone: store them. Edges across the border were updated by
         * atomics as they were pushed. */
#pragma unroll
        for (int d = 0; d < 4; d++) {
            int vi = i + ddx(d), vj = j + ddy(d);
            if (vi >= 0 && vi < kTile && vj < kTile && inside(a, x + ddx(d), y + ddy(d)))
                __stcg(a.flow[d] + p, __ldg(a.cap[d] + p) - s.r[d][idx]);
        }
        if (s.w[idx] > 0 && h < hc)
            bits |= mk_pr_next_bit(x, y, cx, cy, o);
    }
    if (bits)
        atomicOr(&sb.next, bits);
    __syncthreads();
    if (tid == 0 && sb.next)
        wake(a, a.pflag[!o], sb.next, cx, cy, o, cnt, list);
    __syncthreads();
    pf_mark<P>(a, sb, PF_PUSH_STORE, t0);
}

/* The profile's per-pass slot: the slowest visit of pass g (thread 0). */
template <bool P>
__device__ __forceinline__ void pf_pass(const pr_args &a, unsigned gp, int kind, long long cycles)
{
    if (P && a.prof && threadIdx.x == 0 && gp < (unsigned)PF_MAX_PASSES) {
        atomicMax(a.prof + PF_PASS_MAX + gp, (unsigned long long)cycles);
        if (blockIdx.x == 0)
            a.prof[PF_PASS_KIND + gp] = (unsigned long long)kind;
    }
}

/* ---- the solve ---- */

template <bool P>
__global__ void __launch_bounds__(kThreads) pr_kernel(pr_args a)
{
    __shared__ sm_block sb;
    cg::grid_group grid = cg::this_grid();
    const int tid = threadIdx.x;
    const bool leader = blockIdx.x == 0 && tid == 0;
    const int ntile0 = a.ntx[0] * a.nty[0], ntile1 = a.ntx[1] * a.nty[1]; /* ntile1 >= ntile0 */
    const long long gtid = (long long)blockIdx.x * kThreads + tid, gsize = (long long)gridDim.x * kThreads;
    const long long k0 = (P && a.prof) ? clock64() : 0;
    long long t0 = k0;
    if (P && a.prof && tid == 0)
        for (int k = 0; k < PF_N; k++)
            sb.pf[k] = 0;

    /* Start: the kept flow clamped to the capacities (edges leaving the grid carry none), no distances, no
     * flags. */
    for (int y = blockIdx.x; y < a.h; y += gridDim.x)
        for (int x = tid; x < a.w; x += kThreads) {
            size_t p = at(a, x, y);
#pragma unroll
            for (int d = 0; d < 4; d++) {
                int c = inside(a, x + ddx(d), y + ddy(d)) ? max(__ldg(a.cap[d] + p), 0) : 0;
                int f = __ldcg(a.flow[d] + p);
                __stcg(a.flow[d] + p, min(max(f, -c), c));
            }
            __stcg(a.dist + p, kInf);
        }
    for (long long t = gtid; t < ntile1; t += gsize) {
        if (t < ntile0) {
            __stcg(a.pflag[0] + t, 0u);
            __stcg(a.bflag[0] + t, 0u);
        }
        __stcg(a.pflag[1] + t, 0u);
        __stcg(a.bflag[1] + t, 0u);
    }
    if (leader) {
        pr_ctl *c = a.ctl;
        c->cnt[0] = c->cnt[1] = c->cnt[2] = 0;
        c->active = c->dmax = c->status = 0;
        c->relabels = c->push_passes = c->bfs_passes = 0;
        c->flow = 0;
    }
    grid.sync();

    unsigned gp = 0; /* passes so far: selects the counter slots */
    int passes = 0, status = 0;
    for (int round = 0;; round++) {
        /* Global relabel. */
        for (int bp = 0;; bp++) {
            const int o = bp & 1;
            const bool first = bp == 0;
            unsigned *cnt = &a.ctl->cnt[(gp + 1) % 3], *next = a.list[(gp + 1) & 1];
            const unsigned *mine = a.list[gp & 1];
            /* the first pass visits every tile of tiling 0, the others the tiles woken for them */
            const int n = first ? ntile0 : (int)__ldcg(&a.ctl->cnt[gp % 3]);
            long long slow = 0;
            for (int i = blockIdx.x; i < n; i += gridDim.x) {
                const int t = first ? i : (int)__ldcg(mine + i);
                if (!first && tid == 0)
                    __stcg(a.bflag[o] + t, 0u);
                pf_mark<P>(a, sb, PF_SKIP, t0);
                long long v0 = t0;
                bfs_visit<P>(a, sb, o, t, first, cnt, next);
                pf_mark<P>(a, sb, PF_BFS_VISIT, t0);
                pf_count<P>(a, sb, PF_BFS_VISITS, 1);
                slow = max(slow, t0 - v0);
            }
            pf_pass<P>(a, gp, 1, slow);
            if (first) {
                for (long long t = gtid; t < ntile1; t += gsize) {
                    if (t < ntile0)
                        __stcg(a.pflag[0] + t, 0u);
                    __stcg(a.pflag[1] + t, 0u);
                }
                if (leader)
                    a.ctl->active = a.ctl->dmax = 0;
            }
            if (leader) {
                a.ctl->cnt[(gp + 2) % 3] = 0;
                a.ctl->bfs_passes++;
            }
            pf_mark<P>(a, sb, PF_SKIP, t0);
            grid.sync();
            pf_mark<P>(a, sb, PF_SYNC, t0);
            unsigned woken = __ldcg(cnt);
            gp++;
            if (!woken)
                break;
            if (++passes >= kMaxPasses) {
                status = 2;
                break;
            }
        }
        if (status)
            break;

        /* The distances become the labels (and are reset for the next relabel); the cut of this preflow; is
         * anything active? */
        int active = 0, dmax = 0;
        pf_mark<P>(a, sb, PF_SKIP, t0);
        for (int y = blockIdx.x; y < a.h; y += gridDim.x)
            for (int x = tid; x < a.w; x += kThreads) {
                size_t p = at(a, x, y);
                int dist = __ldcg(a.dist + p);
                __stcg(a.lab + p, dist);
                __stcg(a.dist + p, kInf);
                a.cut[(size_t)y * a.cut_pitch + x] = dist >= kInf;
                if (dist < kInf) {
                    dmax = max(dmax, dist);
                    if (__ldcg(a.rmask + p) & kExcess) {
                        /* the tile goes to the first push pass's list (pass gp: the relabel's last pass left
                         * cnt[gp % 3] at 0) */
                        const unsigned t = (unsigned)((y / kTile) * a.ntx[0] + x / kTile);
                        unsigned *f = a.pflag[0] + t;
                        active++;
                        if (!__ldcg(f) && atomicExch(f, 1u) == 0u)
                            __stcg(a.list[gp & 1] + atomicAdd(&a.ctl->cnt[gp % 3], 1u), t);
                    }
                }
            }
        for (int off = 16; off > 0; off >>= 1) {
            active += __shfl_down_sync(0xffffffffu, active, off);
            dmax = max(dmax, __shfl_down_sync(0xffffffffu, dmax, off));
        }
        if ((tid & 31) == 0) {
            if (active)
                atomicAdd(&a.ctl->active, active);
            if (dmax)
                atomicMax(&a.ctl->dmax, dmax);
        }
        if (leader)
            a.ctl->relabels++;
        pf_mark<P>(a, sb, PF_LABELS, t0);
        grid.sync();
        pf_mark<P>(a, sb, PF_SYNC, t0);
        active = __ldcg(&a.ctl->active);
        dmax = __ldcg(&a.ctl->dmax);
        if (!active)
            break;
        if (round + 1 >= a.max_rounds) {
            status = 1;
            break;
        }

        /* Push passes. */
        const int hc = dmax + a.margin;
        for (int pp = 0; pp < a.push_passes; pp++) {
            const int o = pp & 1;
            unsigned *cnt = &a.ctl->cnt[(gp + 1) % 3], *next = a.list[(gp + 1) & 1];
            const unsigned *mine = a.list[gp & 1];
            const int n = (int)__ldcg(&a.ctl->cnt[gp % 3]);
            long long slow = 0;
            for (int i = blockIdx.x; i < n; i += gridDim.x) {
                const int t = (int)__ldcg(mine + i);
                if (tid == 0)
                    __stcg(a.pflag[o] + t, 0u);
                pf_mark<P>(a, sb, PF_SKIP, t0);
                long long v0 = t0;
                push_visit<P>(a, sb, o, t, hc, cnt, next);
                if (P && a.prof && tid == 0)
                    t0 = clock64();
                pf_count<P>(a, sb, PF_PUSH_VISITS, 1);
                slow = max(slow, t0 - v0);
            }
            pf_pass<P>(a, gp, 2, slow);
            if (leader) {
                a.ctl->cnt[(gp + 2) % 3] = 0;
                a.ctl->push_passes++;
            }
            pf_mark<P>(a, sb, PF_SKIP, t0);
            grid.sync();
            pf_mark<P>(a, sb, PF_SYNC, t0);
            unsigned woken = __ldcg(cnt);
            gp++;
            if (!woken)
                break;
            if (++passes >= kMaxPasses) {
                status = 2;
                break;
            }
        }
        if (status)
            break;
    }

    /* The flow value: the tiles' shares from the last global relabel's first pass. */
    if (blockIdx.x == 0) {
        long long part = 0;
        for (int t = tid; t < ntile0; t += kThreads)
            part += __ldcg(a.tile_flow + t);
        long long flow = block_sum(sb, part);
        if (tid == 0) {
            a.ctl->status = status;
            a.ctl->flow = status ? -1 : flow;
            *a.flow_out = status ? -1 : flow;
        }
    }
    if (P && a.prof && tid == 0) {
        sb.pf[PF_KERNEL] = clock64() - k0;
        if (blockIdx.x == 0)
            sb.pf[PF_PASSES] = gp;
        for (int k = 0; k < PF_N; k++)
            atomicAdd(a.prof + k, (unsigned long long)sb.pf[k]);
    }
}

/* ---- host side ---- */

/* Where each array lives in the solver's buffer (byte offsets, 256-aligned). */
struct layout {
    size_t pitch; /* elements */
    size_t cap[4], term, flow[4], lab, dist, rmask, pflag[2], bflag[2], list[2], tile_flow, ctl, flow_own;
    size_t total;
    int ntx[2], nty[2];
};

size_t take(size_t &off, size_t bytes)
{
    size_t pos = off;
    off += (bytes + 255) / 256 * 256;
    return pos;
}

void layout_of(int w, int h, layout &l)
{
    l.pitch = ((size_t)w + 63) / 64 * 64;
    size_t plane = l.pitch * (size_t)h * sizeof(int32_t), off = 0;
    for (int o = 0; o < 2; o++) {
        l.ntx[o] = mk_pr_ntiles(w, o);
        l.nty[o] = mk_pr_ntiles(h, o);
    }
    size_t tiles0 = (size_t)l.ntx[0] * l.nty[0], tiles1 = (size_t)l.ntx[1] * l.nty[1];
    for (int d = 0; d < 4; d++)
        l.cap[d] = take(off, plane);
    l.term = take(off, plane);
    for (int d = 0; d < 4; d++)
        l.flow[d] = take(off, plane);
    l.lab = take(off, plane);
    l.dist = take(off, plane);
    l.rmask = take(off, l.pitch * (size_t)h * sizeof(uint16_t));
    l.pflag[0] = take(off, tiles0 * sizeof(unsigned));
    l.pflag[1] = take(off, tiles1 * sizeof(unsigned));
    l.bflag[0] = take(off, tiles0 * sizeof(unsigned));
    l.bflag[1] = take(off, tiles1 * sizeof(unsigned));
    l.list[0] = take(off, tiles1 * sizeof(unsigned));
    l.list[1] = take(off, tiles1 * sizeof(unsigned));
    l.tile_flow = take(off, tiles0 * sizeof(long long));
    l.ctl = take(off, sizeof(pr_ctl));
    l.flow_own = take(off, sizeof(long long));
    l.total = off;
}

bool dims_ok(int w, int h)
{
    return w >= 1 && h >= 1 && w <= MK_IMAGE_MAX_DIM && h <= MK_IMAGE_MAX_DIM;
}

} // namespace

struct mk_pr_solver {
    mk_ctx_t *ctx;
    int w, h;
    layout l;
    char *buf;
    int owned;
    int blocks;
    mk_pr_params_t params;
    /* the last solve, for mk_pr_check */
    int solved;
    uint8_t *cut;
    size_t cut_pitch;
    long long *flow_dev;
};

namespace {

int32_t *plane(const mk_pr_solver_t *s, size_t off)
{
    return (int32_t *)(s->buf + off);
}

pr_ctl *ctl_of(const mk_pr_solver_t *s)
{
    return (pr_ctl *)(s->buf + s->l.ctl);
}

/* Copies a device int32 plane into one of the solver's, unless it is that plane. */
int copy_plane(mk_pr_solver_t *s, int32_t *dst, const int32_t *src, size_t pitch, const char *what)
{
    if (!src)
        return mk_err_set(MK_EINVAL, "max-flow: NULL %s", what);
    if (pitch < (size_t)s->w)
        return mk_err_set(MK_EINVAL, "max-flow: %s pitch %zu below the width %d", what, pitch, s->w);
    if (src == dst && pitch == s->l.pitch)
        return 0;
    return MK_CUDA_CHECK(cudaMemcpy2DAsync(dst, s->l.pitch * sizeof(int32_t), src, pitch * sizeof(int32_t),
                                           (size_t)s->w * sizeof(int32_t), (size_t)s->h, cudaMemcpyDeviceToDevice,
                                           MK_STREAM(s->ctx)));
}

int download_plane(const mk_pr_solver_t *s, int32_t *dst, size_t off)
{
    return MK_CUDA_CHECK(cudaMemcpy2D(dst, (size_t)s->w * sizeof(int32_t), s->buf + off, s->l.pitch * sizeof(int32_t),
                                      (size_t)s->w * sizeof(int32_t), (size_t)s->h, cudaMemcpyDeviceToHost));
}

/* MASKD_MAXFLOW_PROFILE=1: the device counters (one buffer for the process, made on first use; profiling is a
 * measuring aid for one solver at a time) and their summary on stderr after each solve with stats. */
unsigned long long *prof_buffer(void)
{
    static unsigned long long *buf = NULL;
    static int state = -1;
    if (state < 0) {
        const char *e = getenv("MASKD_MAXFLOW_PROFILE");
        state = e && !strcmp(e, "1") && cudaMalloc((void **)&buf, PF_TOTAL * sizeof *buf) == cudaSuccess;
    }
    return state ? buf : NULL;
}

void prof_report(const mk_pr_solver_t *s, const unsigned long long *dev)
{
    static unsigned long long v[PF_TOTAL];
    if (cudaMemcpy(v, dev, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess)
        return;
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    double us_per_cycle = clock_khz > 0 ? 1e3 / clock_khz : 0.0;
    unsigned long long passes = v[PF_PASSES];
    double crit[3] = {0, 0, 0};
    int n[3] = {0, 0, 0};
    for (unsigned long long g = 0; g < passes && g < (unsigned long long)PF_MAX_PASSES; g++) {
        int k = (int)v[PF_PASS_KIND + g];
        if (k == 1 || k == 2) {
            crit[k] += (double)v[PF_PASS_MAX + g];
            n[k]++;
        }
    }
    static const char *const names[PF_N] = {"push_load", "push_lbfs", "push_sweep", "push_store", "bfs_visit",
                                            "grid_sync", "skip", "labels", "push_visits", "bfs_visits",
                                            "lbfs_iters", "sweeps", "stall_bfs", "bfs_iters", "kernel", "passes"};
    fprintf(stderr, "maxflow profile %dx%d blocks %d clock_khz %d:", s->w, s->h, s->blocks, clock_khz);
    for (int k = 0; k < PF_N; k++)
        fprintf(stderr, " %s %llu", names[k], v[k]);
    fprintf(stderr, " | per block us: kernel %.1f push(load %.1f lbfs %.1f sweep %.1f store %.1f) bfs %.1f sync %.1f "
            "skip %.1f labels %.1f | critical path us: bfs passes %d %.1f, push passes %d %.1f\n",
            v[PF_KERNEL] * us_per_cycle / s->blocks, v[PF_PUSH_LOAD] * us_per_cycle / s->blocks,
            v[PF_PUSH_LBFS] * us_per_cycle / s->blocks, v[PF_PUSH_SWEEP] * us_per_cycle / s->blocks,
            v[PF_PUSH_STORE] * us_per_cycle / s->blocks, v[PF_BFS_VISIT] * us_per_cycle / s->blocks,
            v[PF_SYNC] * us_per_cycle / s->blocks, v[PF_SKIP] * us_per_cycle / s->blocks,
            v[PF_LABELS] * us_per_cycle / s->blocks, n[1], crit[1] * us_per_cycle, n[2], crit[2] * us_per_cycle);
}

/* MASKD_MAXFLOW_CHECK: the last solve's result against its definition, on the host. */
int host_check(const mk_pr_solver_t *s)
{
    const int w = s->w, h = s->h;
    const size_t n = (size_t)w * h;
    int32_t *cap[4] = {NULL}, *flow[4] = {NULL}, *term = NULL;
    int64_t *bal = NULL;
    uint8_t *cut = NULL, *reach = NULL;
    size_t *queue = NULL;
    long long dev_flow = 0;
    int rc = 0;
    for (int d = 0; d < 4 && !rc; d++) {
        cap[d] = (int32_t *)malloc(n * sizeof(int32_t));
        flow[d] = (int32_t *)malloc(n * sizeof(int32_t));
        if (!cap[d] || !flow[d])
            rc = mk_err_set(MK_ENOMEM, "max-flow check: out of memory");
    }
    term = (int32_t *)malloc(n * sizeof(int32_t));
    bal = (int64_t *)calloc(n, sizeof(int64_t));
    cut = (uint8_t *)malloc(n);
    reach = (uint8_t *)calloc(n, 1);
    queue = (size_t *)malloc(n * sizeof(size_t));
    if (!rc && (!term || !bal || !cut || !reach || !queue))
        rc = mk_err_set(MK_ENOMEM, "max-flow check: out of memory");
    for (int d = 0; d < 4 && !rc; d++)
        if (!(rc = download_plane(s, cap[d], s->l.cap[d])))
            rc = download_plane(s, flow[d], s->l.flow[d]);
    if (!rc)
        rc = download_plane(s, term, s->l.term);
    if (!rc)
        rc = MK_CUDA_CHECK(cudaMemcpy2D(cut, (size_t)w, s->cut, s->cut_pitch, (size_t)w, (size_t)h,
                                        cudaMemcpyDeviceToHost));
    if (!rc)
        rc = MK_CUDA_CHECK(cudaMemcpy(&dev_flow, s->flow_dev, sizeof dev_flow, cudaMemcpyDeviceToHost));
    /* Capacities, balances, the flow value. */
    long long value = 0;
    for (int y = 0; y < h && !rc; y++)
        for (int x = 0; x < w && !rc; x++) {
            size_t p = (size_t)y * w + x;
            bal[p] += term[p];
            value += term[p] < 0 ? -(long long)term[p] : 0;
            for (int d = 0; d < 4 && !rc; d++) {
                int nx = x + ddx(d), ny = y + ddy(d);
                int in = nx >= 0 && nx < w && ny < h;
                int32_t c = in ? (cap[d][p] > 0 ? cap[d][p] : 0) : 0, f = flow[d][p];
                if (f < -c || f > c)
                    rc = mk_err_set(MK_ESTATE, "max-flow check: flow %d of edge %d at (%d, %d) exceeds capacity %d", f,
                                    d, x, y, c);
                else if (in) {
                    bal[p] -= f;
                    bal[(size_t)ny * w + nx] += f;
                }
            }
        }
    for (size_t p = 0; p < n && !rc; p++)
        value -= bal[p] < 0 ? -bal[p] : 0;
    if (!rc && value != dev_flow)
        rc = mk_err_set(MK_ESTATE, "max-flow check: flow value %lld on the device, %lld from the flow", dev_flow,
                        value);
    /* Who reaches the sink: a BFS backwards from the pixels with sink capacity. */
    size_t head = 0, tail = 0;
    for (size_t p = 0; p < n && !rc; p++)
        if (bal[p] < 0) {
            reach[p] = 1;
            queue[tail++] = p;
        }
    while (head < tail && !rc) {
        size_t v = queue[head++];
        int vx = (int)(v % w), vy = (int)(v / w);
        for (int e = 0; e < 8; e++) {
            int ux = vx + ddx(e), uy = vy + ddy(e);
            if (ux < 0 || uy < 0 || ux >= w || uy >= h)
                continue;
            size_t u = (size_t)uy * w + ux;
            if (reach[u])
                continue;
            /* the arc u -> v has direction e ^ 4 from u */
            int d = e ^ 4;
            long long r = d < 4 ? (long long)cap[d][u] - flow[d][u] : (long long)cap[d - 4][v] + flow[d - 4][v];
            if (r > 0) {
                reach[u] = 1;
                queue[tail++] = u;
            }
        }
    }
    for (size_t p = 0; p < n && !rc; p++) {
        int x = (int)(p % w), y = (int)(p / w);
        if (bal[p] > 0 && reach[p])
            rc = mk_err_set(MK_ESTATE, "max-flow check: excess %lld at (%d, %d) can still reach the sink",
                            (long long)bal[p], x, y);
        else if ((cut[p] != 0) == (reach[p] != 0))
            rc = mk_err_set(MK_ESTATE, "max-flow check: cut is %d at (%d, %d), which %s reach the sink", cut[p], x,
                            y, reach[p] ? "can" : "cannot");
    }
    if (!rc)
        MK_DEBUG("max-flow check: %dx%d, flow %lld: ok", w, h, value);
    for (int d = 0; d < 4; d++) {
        free(cap[d]);
        free(flow[d]);
    }
    free(term);
    free(bal);
    free(cut);
    free(reach);
    free(queue);
    return rc;
}

/* Push passes between two global relabels when the parameters leave it to the size: the tiles along the grid's
 * longer side + 2, within 8..24. A relabel costs BFS passes in proportion to the grid's diameter in tiles, and on
 * small grids more frequent relabels paid (a sweep of fixed counts 6..48; why, was not measured). On the H100
 * against a fixed 24 (NOTES.md, session 9): 320 x 180 (12 passes) fixed-model cut 950 -> 725 us, 5 iterations
 * 6189 -> 4397 us; 416 x 416 (15) 5 iterations 6878 -> 5740 us, its fixed-model cut 1482 -> 1554 us; 640 x 480
 * (22) within the noise. */
int passes_between_relabels(const layout &l)
{
    int n = (l.ntx[0] > l.nty[0] ? l.ntx[0] : l.nty[0]) + 2;
    return n < 8 ? 8 : n > 24 ? 24 : n;
}

} // namespace

extern "C" mk_pr_params_t mk_pr_params_default(void)
{
    mk_pr_params_t p;
    p.sweeps = 8;
    p.push_passes = 0; /* by the grid's size (passes_between_relabels) */
    p.margin = 64;
    p.max_rounds = 1000;
    return p;
}

extern "C" size_t mk_pr_device_bytes(int width, int height)
{
    if (!dims_ok(width, height))
        return 0;
    layout l;
    layout_of(width, height, l);
    return l.total;
}

extern "C" int mk_pr_create(mk_ctx_t *ctx, int width, int height, void *device_buf, size_t buf_bytes,
                            mk_pr_solver_t **out)
{
    int rc, coop = 0, per_sm = 0, per_sm_prof = 0;
    if (!out)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL output");
    *out = NULL;
    if (!ctx || ctx->backend != MK_BACKEND_CUDA)
        return mk_err_set(MK_EINVAL, "max-flow solver: needs a CUDA context");
    if (!dims_ok(width, height))
        return mk_err_set(MK_ERANGE, "max-flow solver: grid %dx%d outside 1..%d", width, height, MK_IMAGE_MAX_DIM);
    if ((rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device))) ||
        (rc = MK_CUDA_CHECK(cudaFuncSetAttribute(pr_kernel<false>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                 (int)cudaSharedmemCarveoutMaxShared))) ||
        (rc = MK_CUDA_CHECK(cudaFuncSetAttribute(pr_kernel<true>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                 (int)cudaSharedmemCarveoutMaxShared))) ||
        (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pr_kernel<false>, kThreads, 0))) ||
        (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_prof, pr_kernel<true>, kThreads,
                                                                          0))))
        return rc;
    per_sm = per_sm_prof < per_sm ? per_sm_prof : per_sm; /* one grid size for both */
    if (!coop || per_sm < 1)
        return mk_err_set(MK_EUNSUPPORTED, "max-flow solver: device %s cannot run the cooperative kernel (%s)",
                          ctx->device_name, coop ? "no block fits on an SM" : "no cooperative launch");
    mk_pr_solver_t *s = (mk_pr_solver_t *)calloc(1, sizeof *s);
    if (!s)
        return mk_err_set(MK_ENOMEM, "max-flow solver: out of memory");
    s->ctx = ctx;
    s->w = width;
    s->h = height;
    layout_of(width, height, s->l);
    s->params = mk_pr_params_default();
    const char *pe = getenv("MASKD_PR_PARAMS"); /* a measuring aid: sweeps,push_passes,margin */
    if (pe) {
        mk_pr_params_t q = s->params;
        if (sscanf(pe, "%d,%d,%d", &q.sweeps, &q.push_passes, &q.margin) == 3 && !mk_pr_set_params(s, &q))
            MK_DEBUG("max-flow solver: MASKD_PR_PARAMS %d,%d,%d", q.sweeps, q.push_passes, q.margin);
        else
            MK_WARN("max-flow solver: MASKD_PR_PARAMS=%s ignored (sweeps,push_passes,margin)", pe);
    }
    long long tiles = (long long)s->l.ntx[1] * s->l.nty[1], room = (long long)per_sm * ctx->sm_count;
    s->blocks = (int)(tiles < room ? tiles : room);
    if (device_buf) {
        if (buf_bytes < s->l.total || (uintptr_t)device_buf % 256) {
            rc = mk_err_set(MK_EINVAL, "max-flow solver: buffer of %zu bytes at %p, needs %zu bytes, 256-aligned",
                            buf_bytes, device_buf, s->l.total);
            goto fail;
        }
        s->buf = (char *)device_buf;
    } else {
        if ((rc = mk_cuda_alloc(ctx, s->l.total, MK_MEM_DEVICE, (void **)&s->buf)))
            goto fail;
        s->owned = 1;
        if ((rc = MK_CUDA_CHECK(cudaMemsetAsync(s->buf, 0, s->l.total, MK_STREAM(ctx)))))
            goto fail;
    }
    MK_DEBUG("max-flow solver %dx%d: %zu bytes, %d blocks (%d per SM), tiles %dx%d and %dx%d", width, height,
             s->l.total, s->blocks, per_sm, s->l.ntx[0], s->l.nty[0], s->l.ntx[1], s->l.nty[1]);
    *out = s;
    return 0;
fail:
    mk_pr_destroy(s);
    return rc;
}

extern "C" void mk_pr_destroy(mk_pr_solver_t *s)
{
    if (!s)
        return;
    if (s->owned && s->buf)
        mk_cuda_free(s->ctx, s->buf, MK_MEM_DEVICE);
    free(s);
}

extern "C" int mk_pr_set_params(mk_pr_solver_t *s, const mk_pr_params_t *p)
{
    if (!s || !p)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL argument");
    if (p->sweeps < 1 || p->sweeps > 1024 || p->push_passes < 0 || p->push_passes > 1024 || p->margin < 1 ||
        p->margin > (1 << 20) || p->max_rounds < 1 || p->max_rounds > (1 << 20))
        return mk_err_set(MK_ERANGE, "max-flow solver: parameters out of range (sweeps %d, push passes %d, margin %d, "
                          "rounds %d)", p->sweeps, p->push_passes, p->margin, p->max_rounds);
    s->params = *p;
    return 0;
}

extern "C" mk_pr_graph_t mk_pr_graph(mk_pr_solver_t *s)
{
    mk_pr_graph_t g;
    g.term = plane(s, s->l.term);
    for (int d = 0; d < 4; d++)
        g.edge[d] = plane(s, s->l.cap[d]);
    g.pitch = s->l.pitch;
    return g;
}

extern "C" int mk_pr_set_edges(mk_pr_solver_t *s, const int32_t *const edge[4], size_t pitch)
{
    int rc = 0;
    if (!s || !edge)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL argument");
    for (int d = 0; d < 4 && !rc; d++)
        rc = copy_plane(s, plane(s, s->l.cap[d]), edge[d], pitch, "edge capacities");
    return rc;
}

extern "C" int mk_pr_set_term(mk_pr_solver_t *s, const int32_t *term, size_t pitch)
{
    if (!s)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL argument");
    return copy_plane(s, plane(s, s->l.term), term, pitch, "terminal capacities");
}

extern "C" int mk_pr_reset(mk_pr_solver_t *s)
{
    if (!s)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL argument");
    size_t plane_bytes = s->l.pitch * (size_t)s->h * sizeof(int32_t);
    for (int d = 0; d < 4; d++) {
        int rc = MK_CUDA_CHECK(cudaMemsetAsync(s->buf + s->l.flow[d], 0, plane_bytes, MK_STREAM(s->ctx)));
        if (rc)
            return rc;
    }
    return 0;
}

extern "C" int mk_pr_solve(mk_pr_solver_t *s, uint8_t *cut, size_t cut_pitch, int64_t *flow_dev,
                           mk_maxflow_stats_t *stats)
{
    int rc;
    if (!s || !cut)
        return mk_err_set(MK_EINVAL, "max-flow solve: NULL argument");
    if (cut_pitch < (size_t)s->w)
        return mk_err_set(MK_EINVAL, "max-flow solve: cut pitch %zu below the width %d", cut_pitch, s->w);
    const layout &l = s->l;
    pr_args a;
    a.w = s->w;
    a.h = s->h;
    a.pitch = (int)l.pitch;
    for (int d = 0; d < 4; d++) {
        a.cap[d] = plane(s, l.cap[d]);
        a.flow[d] = plane(s, l.flow[d]);
    }
    a.term = plane(s, l.term);
    a.lab = plane(s, l.lab);
    a.dist = plane(s, l.dist);
    a.rmask = (uint16_t *)(s->buf + l.rmask);
    for (int o = 0; o < 2; o++) {
        a.pflag[o] = (unsigned *)(s->buf + l.pflag[o]);
        a.bflag[o] = (unsigned *)(s->buf + l.bflag[o]);
        a.list[o] = (unsigned *)(s->buf + l.list[o]);
        a.ntx[o] = l.ntx[o];
        a.nty[o] = l.nty[o];
    }
    a.tile_flow = (long long *)(s->buf + l.tile_flow);
    a.ctl = ctl_of(s);
    a.cut = cut;
    a.cut_pitch = cut_pitch;
    a.flow_out = flow_dev ? (long long *)flow_dev : (long long *)(s->buf + l.flow_own);
    a.sweeps = s->params.sweeps;
    a.push_passes = s->params.push_passes ? s->params.push_passes : passes_between_relabels(s->l);
    a.margin = s->params.margin;
    a.max_rounds = s->params.max_rounds;
    a.prof = stats ? prof_buffer() : NULL;
    if (a.prof && (rc = MK_CUDA_CHECK(cudaMemsetAsync(a.prof, 0, PF_TOTAL * sizeof *a.prof, MK_STREAM(s->ctx)))))
        return rc;
    void *args[] = {&a};
    cudaStream_t st = MK_STREAM(s->ctx);
    cudaEvent_t ev[2] = {NULL, NULL};
    if (stats && ((rc = MK_CUDA_CHECK(cudaEventCreate(&ev[0]))) || (rc = MK_CUDA_CHECK(cudaEventCreate(&ev[1]))) ||
                  (rc = MK_CUDA_CHECK(cudaEventRecord(ev[0], st)))))
        goto done;
    if ((rc = MK_CUDA_CHECK(cudaLaunchCooperativeKernel(a.prof ? (const void *)pr_kernel<true>
                                                                : (const void *)pr_kernel<false>,
                                                        dim3((unsigned)s->blocks),
                                                        dim3(kThreads), args, 0, st))))
        goto done;
    s->solved = 1;
    s->cut = cut;
    s->cut_pitch = cut_pitch;
    s->flow_dev = a.flow_out;
    if (stats) {
        pr_ctl c;
        float ms = 0;
        if ((rc = MK_CUDA_CHECK(cudaEventRecord(ev[1], st))) || (rc = MK_CUDA_CHECK(cudaEventSynchronize(ev[1]))) ||
            (rc = MK_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]))) ||
            (rc = MK_CUDA_CHECK(cudaMemcpy(&c, a.ctl, sizeof c, cudaMemcpyDeviceToHost))))
            goto done;
        stats->flow = c.flow;
        stats->rounds = c.push_passes;
        stats->global_relabels = c.relabels;
        stats->us = ms * 1000.0;
        if (a.prof)
            prof_report(s, a.prof);
        MK_DEBUG("max-flow %dx%d: flow %lld, %d global relabels (%d BFS passes), %d push passes, %.1f us", s->w, s->h,
                 c.flow, c.relabels, c.bfs_passes, c.push_passes, stats->us);
        rc = mk_pr_check(s);
    }
done:
    for (int k = 0; k < 2; k++)
        if (ev[k])
            cudaEventDestroy(ev[k]);
    return rc;
}

extern "C" int mk_pr_check(mk_pr_solver_t *s)
{
    int rc;
    pr_ctl c;
    if (!s)
        return mk_err_set(MK_EINVAL, "max-flow check: NULL solver");
    if (!s->solved)
        return mk_err_set(MK_ESTATE, "max-flow check: nothing solved yet");
    if ((rc = mk_cuda_sync(s->ctx)) || (rc = MK_CUDA_CHECK(cudaMemcpy(&c, ctl_of(s), sizeof c, cudaMemcpyDeviceToHost))))
        return rc;
    if (c.status)
        return mk_err_set(MK_ESTATE, "max-flow %dx%d did not converge: gave up after %d global relabels, %d BFS and "
                          "%d push passes (%s)", s->w, s->h, c.relabels, c.bfs_passes, c.push_passes,
                          c.status == 1 ? "round limit" : "pass limit");
    const char *check = getenv("MASKD_MAXFLOW_CHECK");
    if (check && !strcmp(check, "1")) {
        if ((rc = host_check(s)))
            MK_ERROR("%s", mk_err_msg());
        return rc;
    }
    return 0;
}

extern "C" int mk_maxflow_grid_cuda(mk_ctx_t *ctx, const mk_grid_graph_t *g, mk_image_t *cut,
                                    mk_maxflow_stats_t *stats)
{
    size_t bytes = mk_pr_device_bytes(g->width, g->height);
    void *buf = NULL;
    mk_pr_solver_t *s = NULL;
    int rc;
    if (!bytes)
        return mk_err_set(MK_ERANGE, "max-flow: grid %dx%d outside 1..%d", g->width, g->height, MK_IMAGE_MAX_DIM);
    if ((rc = mk_ctx_scratch(ctx, MK_SCRATCH_MAXFLOW, bytes, &buf, NULL)) ||
        (rc = mk_pr_create(ctx, g->width, g->height, buf, bytes, &s)) ||
        (rc = mk_pr_set_edges(s, g->edge, g->pitch)) || (rc = mk_pr_set_term(s, g->term, g->pitch)) ||
        (rc = mk_pr_reset(s)) || (rc = mk_pr_solve(s, (uint8_t *)cut->data, cut->pitch, NULL, stats)))
        goto done;
    if (!stats)
        rc = mk_pr_check(s);
done:
    mk_pr_destroy(s);
    return rc;
}
