/* maxflow_cuda: push-relabel max-flow on the 8-connected grid in one cooperative kernel (maxflow_cuda.h explains
 * the algorithm and the state), the solver object around it, and mk_maxflow_grid_cuda.
 *
 * Kernel layout: a tile visit gives each thread one pixel of a T x T tile (T x T threads per block; a chain of
 * dependent shared-memory steps separated by block barriers, so its latency, not the device's throughput, sets the
 * pace of a pass). T is 16 for grids up to 640 pixels on the longer side and 32 above (tile_for): a 16 x 16 visit
 * costs about 60 % of a 32 x 32 one, but a solve needs more passes, which outweighs it on larger grids (H100,
 * NOTES.md, sessions 10, 18 and 20). The kernel is compiled for both sides (maxflow_pr.cuh, included once per
 * side).
 * A pass visits the tiles on its list (the first BFS pass of a global relabel: every tile of tiling 0): tiles are
 * put on the next pass's list when their flag is raised (wake, or the relabel's scan for active pixels); block b
 * visits entry b, and when the list is longer than the grid, a block whose visit ended claims the next entry not
 * yet taken (next_visit), so the few active tiles of a pass never queue behind each other on one block and the
 * blocks that finish first take the rest.
 * Passes are separated by a grid barrier (grid_barrier), and every choice after one (another pass, another round,
 * stop) is made from values written before it, so all blocks take it alike. Mutable global state is read with
 * __ldcg and written with __stcg or atomics (L2), never through the incoherent L1.
 *
 * MASKD_MAXFLOW_PROFILE=1 selects an instantiation of the kernel that counts clock cycles per phase (tile load,
 * local BFS, sweeps, store, BFS visits, waiting at grid barriers) and the slowest visit of every pass, printed to
 * stderr after each solve with statistics; the default instantiation has none of that code. */
#include "maxflow_cuda.h"

#include "cuda_check.h"
#include "log.h"
#include "maxflow_tiles.h"
#include "occupancy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

const unsigned kFullMask = 0xffffffffu;
const int kLevelBits = 8, kLevels = 1 << kLevelBits; /* local BFS levels recorded as bit planes */
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

/* Device control block: pass counters, the last global relabel's summary, the outcome. */
struct pr_ctl {
    unsigned cnt[3];  /* tiles woken for the next pass; pass g counts in cnt[(g + 1) % 3] */
    unsigned claim[3]; /* visits claimed past a block's first in pass g: claim[g % 3] */
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
    PF_PASS_KIND = PF_PASS_MAX + PF_MAX_PASSES, /* per pass: 1 BFS, 2 push, | the tiles visited << 2 */
    PF_MAX_ROUNDS = 256,
    PF_ROUND = PF_PASS_KIND + PF_MAX_PASSES,    /* per global relabel: active pixels | largest distance << 32 | 1 << 63 */
    PF_TOTAL = PF_ROUND + PF_MAX_ROUNDS
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
    int ntx[2], nty[2]; /* tiles per tiling */
    int sweeps, push_passes, later_passes, margin, max_rounds; /* push passes: the first round, the later ones */
    int relabel_cap; /* distance at which the global relabels after a solve's first stop, or 0 */
    unsigned long long *prof; /* PF_TOTAL counters, or NULL */
    unsigned *bar;            /* grid_barrier's word */
};

} // namespace

/* The tile-dependent kernel code, once per tile side (maxflow_pr.cuh). */
namespace {
namespace pr16 {
#define MK_PR_SIDE 16
#include "maxflow_pr.cuh"
#undef MK_PR_SIDE
} // namespace pr16
namespace pr32 {
#define MK_PR_SIDE 32
#include "maxflow_pr.cuh"
#undef MK_PR_SIDE
} // namespace pr32

/* ---- host side ---- */

/* Where each array lives in the solver's buffer (byte offsets, 256-aligned). */
struct layout {
    size_t pitch; /* elements */
    size_t bar, cap[4], term, flow[4], lab, dist, rmask, pflag[2], bflag[2], list[2], tile_flow, ctl, flow_own;
    size_t total;
    int tile; /* the tiles' side: 16 or 32 */
    int ntx[2], nty[2];
};

size_t take(size_t &off, size_t bytes)
{
    size_t pos = off;
    off += (bytes + 255) / 256 * 256;
    return pos;
}

/* The tile side for a w x h grid: 16 up to kColdTile16Max pixels on the longer side for a cold solve (no kept
 * flow), kWarmTile16Max for a warm one, else 32 (16 x 16 tiles make a visit cheaper, 32 x 32 tiles need fewer
 * passes: NOTES.md, session 10; the rule was 16 up to 512 for both until sessions 18 and 20). On the H100
 * (NOTES.md, session 18) cold solves at 640x480 on 16 x 16 tiles: max-flow 1353-1364 -> 1182-1214 us, fixed-model
 * cut 1364-1375 -> 1173-1182, 5 iterations (the first solve cold) 7035-7194 -> 6725-6800; at 1280x720 the
 * fixed-model cut gained 4 % but 5 iterations lost 2 % (the warm solves after a 16 x 16 cold one took more passes),
 * so larger grids keep 32 x 32. MASKD_PR_TILE=16 or 32 overrides both (a measuring aid; mk_pr_device_bytes allows
 * for either). */
const int kColdTile16Max = 640;
/* Warm solves: 16 x 16 up to 640 pixels as well since blocks claim their visits (session 20, H100, same binary,
 * MASKD_PR_TILE=16 against the 512 of before: 5 iterations at 640x480 6564-6694 -> 6282-6292 us; at 1280x720 16 x 16
 * everywhere lost 2.5 %). */
const int kWarmTile16Max = 640;

int tile_for(int w, int h, bool cold)
{
    const char *e = getenv("MASKD_PR_TILE");
    if (e && (!strcmp(e, "16") || !strcmp(e, "32")))
        return atoi(e);
    return (w > h ? w : h) <= (cold ? kColdTile16Max : kWarmTile16Max) ? 16 : 32;
}

/* The grid barrier's word and the planes first (their offsets do not depend on the tiles), then the per-tile arrays
 * and the control block. */
void layout_of(int w, int h, int tile, layout &l)
{
    l.pitch = ((size_t)w + 63) / 64 * 64;
    l.tile = tile;
    size_t plane = l.pitch * (size_t)h * sizeof(int32_t), off = 0;
    for (int o = 0; o < 2; o++) {
        l.ntx[o] = mk_pr_ntiles(w, o, tile);
        l.nty[o] = mk_pr_ntiles(h, o, tile);
    }
    size_t tiles0 = (size_t)l.ntx[0] * l.nty[0], tiles1 = (size_t)l.ntx[1] * l.nty[1];
    l.bar = take(off, sizeof(unsigned)); /* first: the same place in every layout, which no other array covers */
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

/* The cooperative kernel for the layout's tiles, and its threads per block. */
const void *kernel_of(const layout &l, bool prof)
{
    if (l.tile == 16)
        return prof ? (const void *)pr16::pr_kernel<true> : (const void *)pr16::pr_kernel<false>;
    return prof ? (const void *)pr32::pr_kernel<true> : (const void *)pr32::pr_kernel<false>;
}

int threads_of(const layout &l)
{
    return l.tile * l.tile;
}

/* Blocks of the cooperative kernel for the layout's tile side resident on one SM, the smaller of its two
 * instantiations (one grid size for both), with the largest shared-memory carveout asked for both; kept per tile
 * side (occupancy.h: a solver is made for every GrabCut call). */
int blocks_per_sm(const layout &l, int *per_sm)
{
    static std::atomic<int> cached[2] = {{0}, {0}};
    return mk_cached_per_sm(
        cached[l.tile == 16 ? 0 : 1],
        [&l](int *v) {
            const void *k = kernel_of(l, false), *kp = kernel_of(l, true);
            int rc, a = 0, b = 0;
            if ((rc = MK_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                         (int)cudaSharedmemCarveoutMaxShared))) ||
                (rc = MK_CUDA_CHECK(cudaFuncSetAttribute(kp, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                         (int)cudaSharedmemCarveoutMaxShared))) ||
                (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, k, threads_of(l), 0))) ||
                (rc = MK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kp, threads_of(l), 0))))
                return rc;
            *v = b < a ? b : a;
            return 0;
        },
        per_sm);
}

} // namespace

struct mk_pr_solver {
    mk_ctx_t *ctx;
    int w, h;
    layout l;          /* the tiles of the last solve (the planes are at the same offsets in every layout) */
    layout tiled[2];   /* the tiles of a warm solve [0] and of a cold one [1] */
    int tiled_blocks[2];
    int cold;          /* the kept flow is zero (a new solver with its own memory, or mk_pr_reset) */
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
        int k = (int)(v[PF_PASS_KIND + g] & 3u);
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
    /* the passes in order: B (BFS) or P (push), the tiles visited, the slowest visit in us; then each global
     * relabel's active pixels and largest distance */
    fprintf(stderr, "maxflow passes:");
    for (unsigned long long g = 0; g < passes && g < (unsigned long long)PF_MAX_PASSES; g++)
        fprintf(stderr, " %c%llu/%.1f", (v[PF_PASS_KIND + g] & 3u) == 1 ? 'B' : 'P', v[PF_PASS_KIND + g] >> 2,
                (double)v[PF_PASS_MAX + g] * us_per_cycle);
    fprintf(stderr, "\nmaxflow relabels (active pixels/largest distance):");
    for (int g = 0; g < PF_MAX_ROUNDS && v[PF_ROUND + g]; g++)
        fprintf(stderr, " %llu/%llu", v[PF_ROUND + g] & 0xffffffffu, (v[PF_ROUND + g] >> 32) & 0x7fffffffu);
    fprintf(stderr, "\n");
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
    int n = (l.ntx[0] > l.nty[0] ? l.ntx[0] : l.nty[0]) * l.tile / 32 + 2; /* 32-pixel strips on the longer side, + 2 */
    return n < 8 ? 8 : n > 24 ? 24 : n;
}

/* Push passes of the rounds after a solve's first when the parameters leave it open: at most kLaterPasses. The first
 * round moves the bulk of the excess; what is left after it either reaches the sink within a few passes or is cut
 * off, which only the next global relabel can tell, and passes past ~8 mostly raise the labels of excess that is
 * cut off. On the H100 against as many as the first round (NOTES.md, session 15, three runs each): fixed-model cut
 * 320x180 522-557 -> 468-474 us, 416x416 990-1008 -> 945-984, 1280x720 2888-2921 -> 2630-2758; 5 iterations 320x180
 * 3227-3239 -> 3045-3095, 416x416 4420-4620 -> 4344-4409; 640x480 within the noise. */
const int kLaterPasses = 8;

/* The relabel cap when the parameters leave it to the size: 96 on 16 x 16 tiles (grids up to 640 pixels), none on
 * 32 x 32. On the H100 against no cap (NOTES.md, session 16, two calls, two runs each): 416x416 5 iterations
 * 4407-4567 -> 4028-4096 us, warm from the last frame 4419-4582 -> 3728-3883, the fixed-model cut warm from the last
 * frame 1164-1179 -> 882-899, cold 935-980 -> 910-976; 320x180 cut warm 638-671 -> 521-534, cold and 5 iterations
 * unchanged. On 32 x 32 tiles it made cold solves slower (5 iterations 640x480 +2 %, 1280x720 +8 %). */
const int kRelabelCap16 = 96;

int relabel_cap_of(const layout &l)
{
    return l.tile == 16 ? kRelabelCap16 : 0;
}

} // namespace

extern "C" mk_pr_params_t mk_pr_params_default(void)
{
    mk_pr_params_t p;
    p.sweeps = 8;
    p.push_passes = 0; /* by the grid's size (passes_between_relabels) */
    p.margin = 8;
    p.max_rounds = 1000;
    p.later_passes = 0; /* the smaller of push_passes and kLaterPasses */
    p.relabel_cap = 0;  /* by the tiles (relabel_cap_of) */
    return p;
}

extern "C" size_t mk_pr_device_bytes(int width, int height)
{
    if (!dims_ok(width, height))
        return 0;
    layout l16, l32;
    layout_of(width, height, 16, l16);
    layout_of(width, height, 32, l32);
    return l16.total > l32.total ? l16.total : l32.total;
}

extern "C" int mk_pr_create(mk_ctx_t *ctx, int width, int height, void *device_buf, size_t buf_bytes,
                            mk_pr_solver_t **out)
{
    int rc, coop = 0, per_sm = 0;
    if (!out)
        return mk_err_set(MK_EINVAL, "max-flow solver: NULL output");
    *out = NULL;
    if (!ctx || ctx->backend != MK_BACKEND_CUDA)
        return mk_err_set(MK_EINVAL, "max-flow solver: needs a CUDA context");
    if (!dims_ok(width, height))
        return mk_err_set(MK_ERANGE, "max-flow solver: grid %dx%d outside 1..%d", width, height, MK_IMAGE_MAX_DIM);
    layout tl[2];
    int blocks[2];
    if ((rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device))))
        return rc;
    for (int c = 0; c < 2; c++) {
        layout &l = tl[c];
        layout_of(width, height, tile_for(width, height, c == 1), l);
        if ((rc = blocks_per_sm(l, &per_sm)))
            return rc;
        if (!coop || per_sm < 1)
            return mk_err_set(MK_EUNSUPPORTED, "max-flow solver: device %s cannot run the cooperative kernel (%s)",
                              ctx->device_name, coop ? "no block fits on an SM" : "no cooperative launch");
        long long tiles = (long long)l.ntx[1] * l.nty[1], room = (long long)per_sm * ctx->sm_count;
        blocks[c] = (int)(tiles < room ? tiles : room);
    }
    mk_pr_solver_t *s = (mk_pr_solver_t *)calloc(1, sizeof *s);
    if (!s)
        return mk_err_set(MK_ENOMEM, "max-flow solver: out of memory");
    s->ctx = ctx;
    s->w = width;
    s->h = height;
    for (int c = 0; c < 2; c++) {
        s->tiled[c] = tl[c];
        s->tiled_blocks[c] = blocks[c];
    }
    s->l = tl[0];
    s->blocks = blocks[0];
    s->params = mk_pr_params_default();
    /* a measuring aid: sweeps,push_passes,margin[,later_passes[,relabel_cap]] */
    const char *pe = getenv("MASKD_PR_PARAMS");
    if (pe) {
        mk_pr_params_t q = s->params;
        int n = sscanf(pe, "%d,%d,%d,%d,%d", &q.sweeps, &q.push_passes, &q.margin, &q.later_passes, &q.relabel_cap);
        if (n >= 3 && !mk_pr_set_params(s, &q))
            MK_DEBUG("max-flow solver: MASKD_PR_PARAMS %d,%d,%d,%d,%d", q.sweeps, q.push_passes, q.margin,
                     q.later_passes, q.relabel_cap);
        else
            MK_WARN("max-flow solver: MASKD_PR_PARAMS=%s ignored "
                    "(sweeps,push_passes,margin[,later_passes[,relabel_cap]])", pe);
    }
    {
        const size_t need = tl[0].total > tl[1].total ? tl[0].total : tl[1].total;
        if (device_buf) {
            if (buf_bytes < need || (uintptr_t)device_buf % 256) {
                rc = mk_err_set(MK_EINVAL, "max-flow solver: buffer of %zu bytes at %p, needs %zu bytes, 256-aligned",
                                buf_bytes, device_buf, need);
                goto fail;
            }
            s->buf = (char *)device_buf;
            /* the grid barrier's word starts at 0 (an owned buffer is cleared whole below) */
            if ((rc = MK_CUDA_CHECK(cudaMemsetAsync(s->buf + tl[0].bar, 0, sizeof(unsigned), MK_STREAM(ctx)))))
                goto fail;
        } else {
            if ((rc = mk_cuda_alloc(ctx, need, MK_MEM_DEVICE, (void **)&s->buf)))
                goto fail;
            s->owned = 1;
            s->cold = 1;
            if ((rc = MK_CUDA_CHECK(cudaMemsetAsync(s->buf, 0, need, MK_STREAM(ctx)))))
                goto fail;
        }
        MK_DEBUG("max-flow solver %dx%d: %zu bytes; warm solves %d blocks, %d x %d tiles; cold solves %d blocks, "
                 "%d x %d tiles", width, height, need, blocks[0], tl[0].tile, tl[0].tile, blocks[1], tl[1].tile,
                 tl[1].tile);
    }
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
        p->margin > (1 << 20) || p->max_rounds < 1 || p->max_rounds > (1 << 20) || p->later_passes < 0 ||
        p->later_passes > 1024 || p->relabel_cap < -1 || p->relabel_cap > (1 << 20))
        return mk_err_set(MK_ERANGE, "max-flow solver: parameters out of range (sweeps %d, push passes %d, margin %d, "
                          "rounds %d, later push passes %d, relabel cap %d)", p->sweeps, p->push_passes, p->margin,
                          p->max_rounds, p->later_passes, p->relabel_cap);
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
    s->cold = 1;
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
    s->l = s->tiled[s->cold];
    s->blocks = s->tiled_blocks[s->cold];
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
    a.later_passes = s->params.later_passes ? s->params.later_passes
                                            : a.push_passes < kLaterPasses ? a.push_passes : kLaterPasses;
    a.margin = s->params.margin;
    a.max_rounds = s->params.max_rounds;
    a.relabel_cap = s->params.relabel_cap > 0   ? s->params.relabel_cap
                    : s->params.relabel_cap < 0 ? 0
                                                : relabel_cap_of(l);
    a.prof = stats ? prof_buffer() : NULL;
    a.bar = (unsigned *)(s->buf + l.bar);
    if (a.prof && (rc = MK_CUDA_CHECK(cudaMemsetAsync(a.prof, 0, PF_TOTAL * sizeof *a.prof, MK_STREAM(s->ctx)))))
        return rc;
    void *args[] = {&a};
    cudaStream_t st = MK_STREAM(s->ctx);
    cudaEvent_t ev[2] = {NULL, NULL};
    if (stats && ((rc = MK_CUDA_CHECK(cudaEventCreate(&ev[0]))) || (rc = MK_CUDA_CHECK(cudaEventCreate(&ev[1]))) ||
                  (rc = MK_CUDA_CHECK(cudaEventRecord(ev[0], st)))))
        goto done;
    if ((rc = MK_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_of(l, a.prof != NULL),
                                                        dim3((unsigned)s->blocks),
                                                        dim3(threads_of(l)), args, 0, st))))
        goto done;
    s->solved = 1;
    s->cold = 0;
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
