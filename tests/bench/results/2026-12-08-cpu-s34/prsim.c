/* prsim: a tile-level CPU model of the CUDA push-relabel (kernels/cuda/maxflow_pr.cuh, session 33's code) on the
 * real graphs of a 5-iteration GrabCut, to count what a solve costs on the GPU (push passes, BFS passes, global
 * relabels, tiles visited) under algorithmic variants without a GPU. Session 34 (no device lent).
 *
 * What it models, as the kernel does it: two tilings of T x T tiles shifted by T/2, used alternately; a global
 * relabel = BFS passes, each tile of the pass relaxed to its fixpoint given its ring (first pass: every tile of
 * tiling 0, sinks at 1; later passes: the tiles woken by a changed border pixel), capped at relabel_cap after a
 * solve's first round (a capped relabel that finds nothing active yet reached the cap is followed by a full one);
 * labels = distances, active = excess with a finite distance, hc = dmax + margin; push passes: each listed tile
 * loads the flows and labels as they were at the start of the pass, runs the local BFS (sinks at 1, border pixels
 * at ring label + 1, labels raised, never lowered, unreached -> inf), then up to `sweeps` synchronous push +
 * relabel sweeps (a sweep that pushes nothing runs the local BFS again, a second one ends the visit), stores its
 * labels and inner flows; pushes across the border go to the live flows at once; the other tiling's tiles that
 * hold a pixel still active or a pixel that received excess are listed for the next pass; push_passes in the
 * first round, later_passes after. Where the GPU races (a pixel reading excess another thread added in the same
 * sweep, a ring label changed by a neighbouring tile in the same pass) the model takes the values at the start of
 * the sweep / pass.
 *
 * The variant under study (session 34): a multi-level cold solve. The graph is coarsened by 2 x 2 blocks (terminal
 * capacities summed, the capacities of the fine edges between two blocks summed onto the coarse edge joining them:
 * 8-connected again), the coarse graph solved (itself from a coarser one, `levels` deep), its flow projected onto the
 * fine edges in proportion to their capacities (rounded towards zero, so within the capacities), and the fine solve
 * started from that flow: any flow within the capacities is a valid start (maxflow_cuda.h), so the result stays
 * exact; only the work changes.
 *
 * Build (from the repository root, after `meson setup build && ninja -C build`):
 *   gcc -O2 -std=gnu11 -Wall -Wextra -I kernels -I build/kernels -I build \
 *       tests/bench/results/2026-12-08-cpu-s34/prsim.c build/kernels/libmaskd-kernels.a \
 *       build/kernels/libmaskd-base.a -L/usr/local/cuda/lib64 -lcudart_static -lcudnn -lturbojpeg -lpng -lm \
 *       -lpthread -ldl -lrt -lstdc++ -o /tmp/prsim
 * Run: /tmp/prsim DATA NAME W H [LEVELS]: the benchmark image NAME resized to W x H (as `bench grabcut` does), the
 * graphs of the 5 cuts of a 5-iteration GrabCut (cut 1 cold, the others warm from the last flow, as the GPU runs
 * them), each checked against Boykov-Kolmogorov (flow and cut: "ok"); with LEVELS > 0 also multi-level cold solves.
 * Knobs (environment): PRSIM_PARAMS=sweeps,push_passes,later_passes,margin,relabel_cap (-1 keeps the default);
 * PRSIM_TILE, PRSIM_BFS_TILE (tile sides of the push and BFS passes), PRSIM_BFS_FIRST (tile side of each global
 * relabel's first pass), PRSIM_BFS_SAME (BFS passes on one tiling); PRSIM_STALL=pct,min (end a round when a pass
 * delivers < pct % of the round's flow so far); PRSIM_ORACLE (a free exact relabel before every push pass: only
 * the push counts mean anything then); PRSIM_PROJ_PCT (share of the coarse flow projected); PRSIM_ITERS (cuts);
 * PRSIM_VERBOSE=1|2 (each relabel | each push pass); PRSIM_BFS_STATS (Jacobi steps of the BFS visits). */
#include "cpu/grabcut_cpu.h"
#include "ctx.h"
#include "grabcut.h"
#include "grabcut_px.h"
#include "image.h"
#include "imageio.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INF (1 << 30)
#define TMAX 128
static const int DX[8] = {1, 1, 0, -1, -1, -1, 0, 1}, DY[8] = {0, 1, 1, 1, 0, -1, -1, -1};

typedef struct {
    int W, H;
    int32_t *cap[4], *term;
    int32_t *f[4];
} graph;

typedef struct {
    int T, sweeps, push_passes, later_passes, margin, relabel_cap;
    int Tb; /* the global relabel's tile side (the kernel: T) */
} prm;

typedef struct {
    long push_passes, bfs_passes, push_tiles, bfs_tiles, relabels, sweeps, push_waves, bfs_waves, bfs_px;
    long solves;
    double push_pass_us; /* push passes by the visit-level model (visit_us): 2.6 + the larger of the slowest visit and the blocks' mean load */
    double visit_crit, visit_sum; /* push passes: the slowest visit's and all visits' modelled us, summed */
    long first_iters, first_iters_max, later_iters, later_iters_max, later_visits; /* Jacobi steps of the BFS visits: first passes (sum, max), later */
} cnt;

static int G_verbose;
static int G_bfs_first; /* PRSIM_BFS_FIRST: tile side of each global relabel's first pass (0: as the others) */
static int G_bfs_same; /* PRSIM_BFS_SAME: the global relabel on one tiling (no alternation) */
static int64_t G_proj_pct = 100; /* the share of the coarse flow projected (PRSIM_PROJ_PCT) */
static int G_blocks = 264; /* co-resident blocks: 2 per SM x 132 SMs (H100, 16 x 16 tiles) */

static void *xcalloc(size_t n, size_t s)
{
    void *p = calloc(n ? n : 1, s);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static graph *graph_new(int W, int H)
{
    graph *g = xcalloc(1, sizeof *g);
    g->W = W, g->H = H;
    for (int d = 0; d < 4; d++) {
        g->cap[d] = xcalloc((size_t)W * H, 4);
        g->f[d] = xcalloc((size_t)W * H, 4);
    }
    g->term = xcalloc((size_t)W * H, 4);
    return g;
}

static void graph_free(graph *g)
{
    for (int d = 0; d < 4; d++) {
        free(g->cap[d]);
        free(g->f[d]);
    }
    free(g->term);
    free(g);
}

static inline int inside(const graph *g, int x, int y)
{
    return x >= 0 && y >= 0 && x < g->W && y < g->H;
}

/* residual of arc (x, y) -> direction d under flows F */
static inline int64_t resid(const graph *g, int32_t *const F[4], int x, int y, int d)
{
    int nx = x + DX[d], ny = y + DY[d];
    if (!inside(g, nx, ny))
        return 0;
    if (d < 4) {
        size_t p = (size_t)y * g->W + x;
        return (int64_t)g->cap[d][p] - F[d][p];
    }
    size_t q = (size_t)ny * g->W + nx;
    return (int64_t)g->cap[d - 4][q] + F[d - 4][q];
}

static inline int64_t balance(const graph *g, int32_t *const F[4], int x, int y)
{
    size_t p = (size_t)y * g->W + x;
    int64_t w = g->term[p];
    for (int d = 0; d < 4; d++) {
        if (inside(g, x + DX[d], y + DY[d]))
            w -= F[d][p];
        int rx = x - DX[d], ry = y - DY[d];
        if (inside(g, rx, ry))
            w += F[d][(size_t)ry * g->W + rx];
    }
    return w;
}

/* ---- tiles ---- */
static inline int off_of(int o, int T) { return o ? T / 2 : 0; }
static inline int ntiles(int n, int o, int T) { return (n + off_of(o, T) + T - 1) / T; }
static inline int tile_of(int v, int o, int T) { return (v + off_of(o, T) + T) / T - 1; }
static inline int origin(int c, int o, int T) { return c * T - off_of(o, T); }

typedef struct {
    int ntx[2], nty[2];
    unsigned char *flag[2];
    int *list[2], n[2]; /* n[o]: entries in list[o] */
} tiles;

static void tiles_init(tiles *t, int W, int H, int T)
{
    for (int o = 0; o < 2; o++) {
        t->ntx[o] = ntiles(W, o, T), t->nty[o] = ntiles(H, o, T);
        t->flag[o] = xcalloc((size_t)t->ntx[o] * t->nty[o], 1);
        t->list[o] = xcalloc((size_t)t->ntx[o] * t->nty[o], sizeof(int));
        t->n[o] = 0;
    }
}

static void tiles_free(tiles *t)
{
    for (int o = 0; o < 2; o++) {
        free(t->flag[o]);
        free(t->list[o]);
    }
}

/* wake the tile of tiling o holding pixel (x, y) (in grid) */
static inline void wake(tiles *t, int o, int x, int y, int T)
{
    int cx = tile_of(x, o, T), cy = tile_of(y, o, T), id = cy * t->ntx[o] + cx;
    if (!t->flag[o][id]) {
        t->flag[o][id] = 1;
        t->list[o][t->n[o]++] = id;
    }
}

/* takes list o for a pass: returns a copy, clears the flags */
static int take_list(tiles *t, int o, int *out)
{
    int n = t->n[o];
    memcpy(out, t->list[o], (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        t->flag[o][out[i]] = 0;
    t->n[o] = 0;
    return n;
}

/* ---- the solver ---- */
typedef struct {
    graph *g;
    prm p;
    cnt c;
    int *lab, *dist, *d0;
    unsigned short *rm; /* residual directions of each pixel, bit 8: sink (w < 0), bit 9: excess */
    int64_t *w;
    int32_t *F0[4];
    int *lab0;
    tiles t, tb;
    int *cur;
} solver;

/* The global relabel: BFS passes over the tiles; returns via dist. lim: largest distance taken. */
static void global_relabel(solver *s, int lim)
{
    graph *g = s->g;
    const int W = g->W, H = g->H, T = s->p.Tb;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            size_t p = (size_t)y * W + x;
            unsigned m = 0;
            for (int d = 0; d < 8; d++)
                if (resid(g, g->f, x, y, d) > 0)
                    m |= 1u << d;
            int64_t w = balance(g, g->f, x, y);
            s->w[p] = w;
            m |= w < 0 ? 0x100u : w > 0 ? 0x200u : 0u;
            s->rm[p] = (unsigned short)m;
            s->dist[p] = INF;
        }
    /* pass 0 may use another tile side (G_bfs_first); the later passes use T, alternating from tiling 1 */
    const int T0 = G_bfs_first ? G_bfs_first : T, TM = T0 > T ? T0 : T;
    int *d = xcalloc((size_t)(TM + 2) * (TM + 2), sizeof(int)), *dj = xcalloc((size_t)(TM + 2) * (TM + 2), sizeof(int));
    int *cur = xcalloc((size_t)s->tb.ntx[1] * s->tb.nty[1] + s->tb.ntx[0] * s->tb.nty[0] +
                           (size_t)ntiles(W, 0, T0) * ntiles(H, 0, T0), sizeof(int));
    for (int bp = 0;; bp++) {
        int o = G_bfs_same ? 0 : bp & 1, n;
        const int Tp = bp == 0 ? T0 : T, ring = Tp + 2;
        if (bp == 0) {
            n = ntiles(W, 0, T0) * ntiles(H, 0, T0);
            for (int i = 0; i < n; i++)
                cur[i] = i;
        } else {
            n = take_list(&s->tb, o, cur);
        }
        if (!n)
            break;
        s->c.bfs_passes++;
        s->c.bfs_tiles += n;
        s->c.bfs_waves += (n + G_blocks - 1) / G_blocks;
        s->c.bfs_px += (long)n * Tp * Tp;
        memcpy(s->d0, s->dist, (size_t)W * H * sizeof(int));
        for (int k = 0; k < n; k++) {
            const int ntx = bp == 0 ? ntiles(W, 0, T0) : s->tb.ntx[o];
            int tid = cur[k], cx = tid % ntx, cy = tid / ntx;
            int x0 = origin(cx, o, Tp), y0 = origin(cy, o, Tp);
            for (int j = -1; j <= Tp; j++)
                for (int i = -1; i <= Tp; i++) {
                    int x = x0 + i, y = y0 + j, v = INF;
                    if (inside(g, x, y)) {
                        size_t p = (size_t)y * W + x;
                        int own = i >= 0 && i < Tp && j >= 0 && j < Tp;
                        if (own && bp == 0)
                            v = (s->rm[p] & 0x100u) ? 1 : INF;
                        else
                            v = s->d0[p];
                    }
                    d[(j + 1) * ring + i + 1] = v;
                }
            /* relax to the fixpoint, in synchronous (Jacobi) steps as counted by iters */
            int iters = 0;
            for (int changed = 1; changed;) {
                changed = 0;
                iters++;
                memcpy(dj, d, sizeof(int) * (size_t)ring * ring);
                for (int j = 0; j < Tp; j++)
                    for (int i = 0; i < Tp; i++) {
                        int x = x0 + i, y = y0 + j;
                        if (!inside(g, x, y))
                            continue;
                        unsigned m = s->rm[(size_t)y * W + x];
                        if (m & 0x100u)
                            continue;
                        int hidx = (j + 1) * ring + i + 1, cur = d[hidx], best = cur;
                        for (int e = 0; e < 8; e++)
                            if (m & (1u << e)) {
                                int v = dj[hidx + DX[e] + ring * DY[e]];
                                if (v < INF && v + 1 < best)
                                    best = v + 1;
                            }
                        if (best < cur && best <= lim) {
                            d[hidx] = best;
                            changed = 1;
                        }
                    }
            }
            if (bp == 0) {
                s->c.first_iters += iters;
                if (iters > s->c.first_iters_max)
                    s->c.first_iters_max = iters;
            } else {
                s->c.later_iters += iters;
                s->c.later_visits++;
                if (iters > s->c.later_iters_max)
                    s->c.later_iters_max = iters;
            }
            for (int j = 0; j < Tp; j++)
                for (int i = 0; i < Tp; i++) {
                    int x = x0 + i, y = y0 + j;
                    if (!inside(g, x, y))
                        continue;
                    size_t p = (size_t)y * W + x;
                    int v = d[(j + 1) * ring + i + 1], before = bp == 0 ? INF : s->d0[p];
                    if (v >= before)
                        continue;
                    s->dist[p] = v;
                    if (i == 0 || j == 0 || i == Tp - 1 || j == Tp - 1)
                        for (int yy = y - 1; yy <= y + 1; yy++)
                            for (int xx = x - 1; xx <= x + 1; xx++)
                                if (inside(g, xx, yy))
                                    wake(&s->tb, G_bfs_same ? 0 : !o, xx, yy, T);
                }
        }
    }
    /* leave no stale flags */
    for (int o = 0; o < 2; o++)
        take_list(&s->tb, o, cur);
    free(d);
    free(dj);
    free(cur);
}

/* local per-visit state */
typedef struct {
    int levels, bfs_calls, sweeps; /* this visit's local BFS level steps and calls, and its sweeps */
    int64_t r[8][TMAX * TMAX];
    int64_t w[TMAX * TMAX];
    int h[(TMAX + 2) * (TMAX + 2)];
    int in[TMAX * TMAX];
} visit_t;

/* local BFS: returns the highest label < hc of a pixel with excess (0 if none) */
static int local_bfs(solver *s, visit_t *v, int hc)
{
    const int T = s->p.T, ring = T + 2;
    int dl[TMAX * TMAX];
    for (int j = 0; j < T; j++)
        for (int i = 0; i < T; i++) {
            int idx = j * T + i;
            dl[idx] = INF;
            if (!v->in[idx])
                continue;
            if (v->w[idx] < 0) {
                dl[idx] = 1;
                continue;
            }
            /* seed: 1 + the lowest ring label over residual arcs leaving the tile */
            for (int d = 0; d < 8; d++) {
                int ni = i + DX[d], nj = j + DY[d];
                if ((ni < 0 || nj < 0 || ni >= T || nj >= T) && v->r[d][idx] > 0) {
                    int hh = v->h[(nj + 1) * ring + ni + 1];
                    if (hh < INF && hh + 1 < dl[idx])
                        dl[idx] = hh + 1;
                }
            }
        }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int j = 0; j < T; j++)
            for (int i = 0; i < T; i++) {
                int idx = j * T + i;
                if (!v->in[idx] || v->w[idx] < 0)
                    continue;
                for (int d = 0; d < 8; d++) {
                    int ni = i + DX[d], nj = j + DY[d];
                    if (ni < 0 || nj < 0 || ni >= T || nj >= T || v->r[d][idx] <= 0)
                        continue;
                    int q = dl[nj * T + ni];
                    if (q < INF && q + 1 < dl[idx]) {
                        dl[idx] = q + 1;
                        changed = 1;
                    }
                }
            }
    }
    /* the warp BFS's level steps (maxflow_pr.cuh, warp_bfs): one per non-empty level, one per empty level it meets
     * (then it jumps to the next seed), one to end */
    {
        static unsigned char seen[4 * TMAX * TMAX + 8];
        int maxd = 0;
        memset(seen, 0, sizeof seen);
        for (int q = 0; q < T * T; q++)
            if (v->in[q] && dl[q] < INF && dl[q] < (int)sizeof seen) {
                seen[dl[q]] = 1;
                if (dl[q] > maxd)
                    maxd = dl[q];
            }
        int steps = 1;
        for (int L = 1; L <= maxd; L++)
            if (seen[L] || seen[L - 1])
                steps++;
        v->levels += steps;
        v->bfs_calls++;
    }
    int top = 0;
    for (int j = 0; j < T; j++)
        for (int i = 0; i < T; i++) {
            int idx = j * T + i, hidx = (j + 1) * ring + i + 1;
            if (!v->in[idx])
                continue;
            int h = dl[idx] >= INF ? INF : (v->h[hidx] > dl[idx] ? v->h[hidx] : dl[idx]);
            v->h[hidx] = h;
            if (v->w[idx] > 0 && h < hc && h > top)
                top = h;
        }
    return top;
}

static void push_visit(solver *s, visit_t *v, int o, int tid, int hc)
{
    graph *g = s->g;
    const int W = g->W, T = s->p.T, ring = T + 2;
    int cx = tid % s->t.ntx[o], cy = tid / s->t.ntx[o];
    int x0 = origin(cx, o, T), y0 = origin(cy, o, T);
    for (int j = -1; j <= T; j++)
        for (int i = -1; i <= T; i++) {
            int x = x0 + i, y = y0 + j;
            v->h[(j + 1) * ring + i + 1] = inside(g, x, y) ? s->lab0[(size_t)y * W + x] : INF;
        }
    for (int j = 0; j < T; j++)
        for (int i = 0; i < T; i++) {
            int idx = j * T + i, x = x0 + i, y = y0 + j;
            v->in[idx] = inside(g, x, y);
            for (int d = 0; d < 8; d++)
                v->r[d][idx] = v->in[idx] ? resid(g, s->F0, x, y, d) : 0;
            v->w[idx] = v->in[idx] ? balance(g, s->F0, x, y) : 0;
        }
    v->levels = v->bfs_calls = v->sweeps = 0;
    int active = local_bfs(s, v, hc) != 0, stalled = 0;
    int64_t wst[TMAX * TMAX];
    int hs[(TMAX + 2) * (TMAX + 2)];
    for (int sweep = 0; sweep < s->p.sweeps && active; sweep++) {
        s->c.sweeps++;
        v->sweeps++;
        memcpy(wst, v->w, sizeof(int64_t) * T * T);
        int pushed = 0;
        for (int j = 0; j < T; j++)
            for (int i = 0; i < T; i++) {
                int idx = j * T + i, hidx = (j + 1) * ring + i + 1;
                if (!v->in[idx])
                    continue;
                int64_t e = wst[idx], sent = 0;
                int hu = v->h[hidx];
                if (e <= 0 || hu >= hc)
                    continue;
                for (int d = 0; d < 8 && e > 0; d++) {
                    int hn = v->h[hidx + DX[d] + ring * DY[d]];
                    if (hn >= hu || v->r[d][idx] <= 0)
                        continue;
                    int64_t delta = e < v->r[d][idx] ? e : v->r[d][idx];
                    v->r[d][idx] -= delta;
                    e -= delta;
                    sent += delta;
                    int ni = i + DX[d], nj = j + DY[d];
                    if (ni >= 0 && nj >= 0 && ni < T && nj < T) {
                        int vi = nj * T + ni;
                        v->r[d ^ 4][vi] += delta;
                        v->w[vi] += delta;
                    } else {
                        int x = x0 + i, y = y0 + j, vx = x + DX[d], vy = y + DY[d];
                        if (d < 4)
                            g->f[d][(size_t)y * W + x] += (int32_t)delta;
                        else
                            g->f[d - 4][(size_t)vy * W + vx] -= (int32_t)delta;
                        wake(&s->t, !o, vx, vy, T);
                    }
                }
                if (sent) {
                    v->w[idx] -= sent;
                    pushed = 1;
                }
            }
        memcpy(hs, v->h, sizeof(int) * ring * ring);
        int act = 0;
        for (int j = 0; j < T; j++)
            for (int i = 0; i < T; i++) {
                int idx = j * T + i, hidx = (j + 1) * ring + i + 1;
                if (!v->in[idx])
                    continue;
                int hu = hs[hidx];
                if (v->w[idx] <= 0 || hu >= hc)
                    continue;
                int m = INF;
                for (int d = 0; d < 8; d++)
                    if (v->r[d][idx] > 0 && hs[hidx + DX[d] + ring * DY[d]] < m)
                        m = hs[hidx + DX[d] + ring * DY[d]];
                if (m >= hu) {
                    hu = m >= INF ? INF : m + 1;
                    v->h[hidx] = hu;
                }
                act |= hu < hc;
            }
        active = act;
        if (!pushed) {
            if (stalled)
                break;
            active = local_bfs(s, v, hc) != 0;
            stalled = 1;
        } else {
            stalled = 0;
        }
    }
    for (int j = 0; j < T; j++)
        for (int i = 0; i < T; i++) {
            int idx = j * T + i, x = x0 + i, y = y0 + j;
            if (!v->in[idx])
                continue;
            size_t p = (size_t)y * W + x;
            int h = v->h[(j + 1) * ring + i + 1];
            s->lab[p] = h;
            for (int d = 0; d < 4; d++) {
                int ni = i + DX[d], nj = j + DY[d];
                if (ni >= 0 && ni < T && nj < T && inside(g, x + DX[d], y + DY[d]))
                    g->f[d][p] = (int32_t)(g->cap[d][p] - v->r[d][idx]);
            }
            if (v->w[idx] > 0 && h < hc)
                wake(&s->t, !o, x, y, T);
        }
}

static void solver_init(solver *s, graph *g, prm p)
{
    memset(s, 0, sizeof *s);
    s->g = g;
    s->p = p;
    size_t n = (size_t)g->W * g->H;
    s->lab = xcalloc(n, sizeof(int));
    s->dist = xcalloc(n, sizeof(int));
    s->d0 = xcalloc(n, sizeof(int));
    s->lab0 = xcalloc(n, sizeof(int));
    s->rm = xcalloc(n, sizeof(unsigned short));
    s->w = xcalloc(n, sizeof(int64_t));
    for (int d = 0; d < 4; d++)
        s->F0[d] = xcalloc(n, 4);
    tiles_init(&s->t, g->W, g->H, p.T);
    tiles_init(&s->tb, g->W, g->H, p.Tb);
    s->cur = xcalloc((size_t)s->t.ntx[1] * s->t.nty[1] + s->t.ntx[0] * s->t.nty[0], sizeof(int));
}

static void solver_free(solver *s)
{
    free(s->lab);
    free(s->dist);
    free(s->d0);
    free(s->lab0);
    free(s->rm);
    free(s->w);
    for (int d = 0; d < 4; d++)
        free(s->F0[d]);
    tiles_free(&s->t);
    tiles_free(&s->tb);
    free(s->cur);
}

static int G_stall_pct, G_stall_min, G_oracle;

/* the flow value of the current preflow */
static int64_t flow_now(solver *s)
{
    graph *g = s->g;
    int64_t fv = 0;
    for (int y = 0; y < g->H; y++)
        for (int x = 0; x < g->W; x++) {
            size_t p = (size_t)y * g->W + x;
            int64_t w = balance(g, g->f, x, y);
            fv += (g->term[p] < 0 ? -(int64_t)g->term[p] : 0) - (w < 0 ? -w : 0);
        }
    return fv;
}

/* A push visit's time on the H100 from its counts, by session 33's MASKD_MAXFLOW_PROFILE run at 416x416 (per
 * visit: load 1.72 us, store 1.0; a local BFS 7002 cycles for 17.1 level steps on average, taken as 1000 + 350 a
 * step; a sweep 1603 cycles; 1.98 GHz). */
static double visit_us(const visit_t *v)
{
    return 2.72 + (1000.0 * v->bfs_calls + 350.0 * v->levels + 1603.0 * v->sweeps) / 1980.0;
}

/* One solve from g's current flow (clamped). Returns the flow value; the cut (1 = cannot reach the sink) in cut. */
static int64_t solve(solver *s, unsigned char *cut)
{
    graph *g = s->g;
    const int W = g->W, H = g->H, T = s->p.T;
    size_t n = (size_t)W * H;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            size_t p = (size_t)y * W + x;
            for (int d = 0; d < 4; d++) {
                int c = inside(g, x + DX[d], y + DY[d]) ? (g->cap[d][p] > 0 ? g->cap[d][p] : 0) : 0;
                int f = g->f[d][p];
                g->f[d][p] = f < -c ? -c : f > c ? c : f;
            }
        }
    visit_t *v = xcalloc(1, sizeof *v);
    int complete_next = 0;
    for (int round = 0;; round++) {
        int capped = s->p.relabel_cap > 0 && round > 0 && !complete_next;
        int lim = capped ? s->p.relabel_cap : INF - 1;
        global_relabel(s, lim);
        s->c.relabels++;
        long active = 0;
        int dmax = 0;
        for (size_t p = 0; p < n; p++) {
            s->lab[p] = s->dist[p];
            if (s->dist[p] < INF) {
                if (s->dist[p] > dmax)
                    dmax = s->dist[p];
                if (s->w[p] > 0) {
                    active++;
                    wake(&s->t, 0, (int)(p % W), (int)(p / W), T);
                }
            }
        }
        if (G_verbose) {
            int64_t fv = 0, ex = 0, trapped = 0;
            long hist[8] = {0};
            for (size_t p = 0; p < n; p++) {
                int64_t w = s->w[p];
                fv += (g->term[p] < 0 ? -(int64_t)g->term[p] : 0) - (w < 0 ? -w : 0);
                if (w > 0 && s->dist[p] < INF) {
                    ex += w;
                    hist[s->dist[p] / 16 < 7 ? s->dist[p] / 16 : 7]++;
                } else if (w > 0) {
                    trapped += w;
                }
            }
            printf("    relabel %d: active %ld dmax %d (lim %d) flow %lld active excess %lld other excess %lld"
                    " | by distance/16: %ld %ld %ld %ld %ld %ld %ld %ld\n", round, active, dmax, lim, (long long)fv,
                    (long long)ex, (long long)trapped, hist[0], hist[1], hist[2], hist[3], hist[4], hist[5], hist[6],
                    hist[7]);
        }
        if (!active && capped && dmax >= lim) {
            complete_next = 1;
            continue;
        }
        if (!active)
            break;
        complete_next = 0;
        if (round > 10000) {
            fprintf(stderr, "no convergence\n");
            exit(1);
        }
        int hc = dmax + s->p.margin, np = round == 0 ? s->p.push_passes : s->p.later_passes;
        if (G_oracle) /* a free exact relabel before every push pass: one pass a round, not counted */
            np = 1, s->c.relabels--, s->c.bfs_passes = 0, s->c.bfs_tiles = 0;
        int64_t fround0 = G_stall_pct ? flow_now(s) : 0, fprev = fround0;
        for (int pp = 0; pp < np; pp++) {
            if (G_stall_pct && pp >= G_stall_min) {
                int64_t fnow = flow_now(s);
                /* the last pass delivered less than G_stall_pct % of what the round delivered so far */
                if ((fnow - fprev) * 100 < (int64_t)G_stall_pct * (fnow - fround0))
                    break;
                fprev = fnow;
            } else if (G_stall_pct) {
                fprev = flow_now(s);
            }
            int o = pp & 1;
            int nt = take_list(&s->t, o, s->cur);
            if (!nt)
                break;
            s->c.push_passes++;
            s->c.push_tiles += nt;
            s->c.push_waves += (nt + G_blocks - 1) / G_blocks;
            for (int d = 0; d < 4; d++)
                memcpy(s->F0[d], g->f[d], n * 4);
            memcpy(s->lab0, s->lab, n * sizeof(int));
            double vmax = 0, vsum = 0;
            for (int k = 0; k < nt; k++) {
                push_visit(s, v, o, s->cur[k], hc);
                double us = visit_us(v);
                vmax = us > vmax ? us : vmax;
                vsum += us;
            }
            s->c.visit_crit += vmax;
            s->c.visit_sum += vsum;
            s->c.push_pass_us += 2.6 + (vsum / G_blocks > vmax ? vsum / G_blocks : vmax);
            if (G_verbose > 2)
                printf(" P%d/%.1f", nt, vmax);
            if (G_verbose > 1) {
                int64_t fv = 0;
                long act = 0;
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++) {
                        size_t p = (size_t)y * W + x;
                        int64_t w = balance(g, g->f, x, y);
                        fv += (g->term[p] < 0 ? -(int64_t)g->term[p] : 0) - (w < 0 ? -w : 0);
                        act += w > 0 && s->lab[p] < hc;
                    }
                printf("      pass %d: tiles %d flow %lld active below hc %ld\n", pp, nt, (long long)fv, act);
            }
        }
        for (int o = 0; o < 2; o++)
            take_list(&s->t, o, s->cur);
    }
    free(v);
    int64_t flow = 0;
    for (size_t p = 0; p < n; p++) {
        int64_t w = s->w[p];
        flow += (g->term[p] < 0 ? -(int64_t)g->term[p] : 0) - (w < 0 ? -w : 0);
        if (cut)
            cut[p] = s->dist[p] >= INF;
    }
    return flow;
}

/* ---- multi-level ---- */

/* direction index of (dx, dy) in -1..1 (not 0, 0) */
static int dir_of(int dx, int dy)
{
    for (int d = 0; d < 8; d++)
        if (DX[d] == dx && DY[d] == dy)
            return d;
    return -1;
}

static graph *coarsen(const graph *g)
{
    int W = (g->W + 1) / 2, H = (g->H + 1) / 2;
    graph *c = graph_new(W, H);
    int64_t *cap[4], *term = xcalloc((size_t)W * H, 8);
    for (int d = 0; d < 4; d++)
        cap[d] = xcalloc((size_t)W * H, 8);
    for (int y = 0; y < g->H; y++)
        for (int x = 0; x < g->W; x++) {
            size_t p = (size_t)y * g->W + x;
            int X = x / 2, Y = y / 2;
            term[(size_t)Y * W + X] += g->term[p];
            for (int d = 0; d < 4; d++) {
                int nx = x + DX[d], ny = y + DY[d];
                if (!inside(g, nx, ny))
                    continue;
                int NX = nx / 2, NY = ny / 2;
                if (NX == X && NY == Y)
                    continue;
                int D = dir_of(NX - X, NY - Y);
                if (D < 4)
                    cap[D][(size_t)Y * W + X] += g->cap[d][p];
                else
                    cap[D - 4][(size_t)NY * W + NX] += g->cap[d][p];
            }
        }
    for (size_t p = 0; p < (size_t)W * H; p++) {
        int64_t t = term[p];
        c->term[p] = (int32_t)(t > MK_GC_CAP_MAX ? MK_GC_CAP_MAX : t < -MK_GC_CAP_MAX ? -MK_GC_CAP_MAX : t);
        for (int d = 0; d < 4; d++)
            c->cap[d][p] = (int32_t)(cap[d][p] > MK_GC_CAP_MAX ? MK_GC_CAP_MAX : cap[d][p]);
    }
    for (int d = 0; d < 4; d++)
        free(cap[d]);
    free(term);
    return c;
}

/* g's flow from c's: each fine edge between two blocks gets the coarse edge's flow times its share of the coarse
 * capacity, rounded towards zero; edges inside a block get none. */
static void project(const graph *c, graph *g)
{
    for (int y = 0; y < g->H; y++)
        for (int x = 0; x < g->W; x++) {
            size_t p = (size_t)y * g->W + x;
            int X = x / 2, Y = y / 2;
            for (int d = 0; d < 4; d++) {
                g->f[d][p] = 0;
                int nx = x + DX[d], ny = y + DY[d];
                if (!inside(g, nx, ny))
                    continue;
                int NX = nx / 2, NY = ny / 2;
                if (NX == X && NY == Y)
                    continue;
                int D = dir_of(NX - X, NY - Y);
                int64_t F, C;
                if (D < 4) {
                    F = c->f[D][(size_t)Y * c->W + X];
                    C = c->cap[D][(size_t)Y * c->W + X];
                } else {
                    F = -(int64_t)c->f[D - 4][(size_t)NY * c->W + NX];
                    C = c->cap[D - 4][(size_t)NY * c->W + NX];
                }
                if (C > 0)
                    g->f[d][p] = (int32_t)(F * G_proj_pct / 100 * g->cap[d][p] / C); /* truncates towards zero */
            }
        }
}

/* Cost model of a solve on the H100, 16 x 16 tiles: a push pass costs 12.5 us per wave of visits (its tiles over the
 * 264 co-resident blocks, rounded up), a BFS pass 8 us a wave, a solve 15 us to start. The two rates are the least-
 * squares fit of session 33's max-flow stage of `bench grabcut` (5 iterations, person1 at 160x120, 320x240, 416x416,
 * 640x480: 2479, 3048, 3912, 6104 us) to this model's counts of the same solves; it gives 2514, 2828, 3916,
 * 6193 us. The relabels' own cost (labels pass, barriers) is folded into the rates. */
static double cost_us(const cnt *c)
{
    return 12.5 * c->push_waves + 8.0 * c->bfs_waves + 15.0 * c->solves;
}

/* The visit-level model: push passes from their visits' counts (visit_us), BFS passes 2.6 us + 5.5 us a wave (the
 * profile's mean slowest BFS visit), 5 us a relabel's labels pass, 20 us to start a solve. */
static double cost2_us(const cnt *c)
{
    return c->push_pass_us + 2.6 * c->bfs_passes + 5.5 * c->bfs_waves + 5.0 * c->relabels + 20.0 * c->solves;
}

static void cnt_add(cnt *a, const cnt *b)
{
    a->push_passes += b->push_passes, a->bfs_passes += b->bfs_passes, a->push_tiles += b->push_tiles;
    a->bfs_tiles += b->bfs_tiles, a->relabels += b->relabels, a->sweeps += b->sweeps;
    a->push_waves += b->push_waves, a->bfs_waves += b->bfs_waves, a->bfs_px += b->bfs_px;
    a->solves += b->solves;
    a->visit_crit += b->visit_crit, a->visit_sum += b->visit_sum, a->push_pass_us += b->push_pass_us;
    a->first_iters += b->first_iters, a->later_iters += b->later_iters, a->later_visits += b->later_visits;
    if (b->later_iters_max > a->later_iters_max)
        a->later_iters_max = b->later_iters_max;
    if (b->first_iters_max > a->first_iters_max)
        a->first_iters_max = b->first_iters_max;
}

static void print_cnt(const char *what, const cnt *c)
{
    printf("  %-34s push %4ld (tiles %6ld waves %4ld) bfs %4ld (tiles %6ld waves %4ld) relabels %3ld  ~%6.0f us\n",
           what, c->push_passes, c->push_tiles, c->push_waves, c->bfs_passes, c->bfs_tiles, c->bfs_waves, c->relabels,
           cost_us(c));
    if (getenv("PRSIM_COST2"))
        printf("  %-34s visit-level model ~%6.0f us (push passes %.0f us; slowest visits %.0f us)\n", "", cost2_us(c),
               c->push_pass_us, c->visit_crit);
    if (getenv("PRSIM_BFS_STATS"))
        printf("  %-34s bfs steps: first passes %ld (max %ld a visit), later passes %ld (%ld visits, max %ld)\n", "",
               c->first_iters, c->first_iters_max, c->later_iters, c->later_visits, c->later_iters_max);
}

/* The default parameters of maxflow_cuda.cu for a w x h grid. */
static prm params_for(int W, int H)
{
    prm p;
    p.T = (W > H ? W : H) <= 640 ? 16 : 32;
    int ntx = (W + p.T - 1) / p.T, nty = (H + p.T - 1) / p.T;
    int n = (ntx > nty ? ntx : nty) * p.T / 32 + 2;
    p.push_passes = n < 8 ? 8 : n > 24 ? 24 : n;
    p.later_passes = p.push_passes < 8 ? p.push_passes : 8;
    p.sweeps = 8;
    p.margin = 8;
    p.relabel_cap = p.T == 16 ? 96 : 0;
    if (getenv("PRSIM_TILE"))
        p.T = atoi(getenv("PRSIM_TILE"));
    p.Tb = getenv("PRSIM_BFS_TILE") ? atoi(getenv("PRSIM_BFS_TILE")) : p.T;
    const char *e = getenv("PRSIM_PARAMS"); /* sweeps,push_passes,later_passes,margin,relabel_cap (-1: keep) */
    if (e) {
        int v[5] = {-1, -1, -1, -1, -1};
        sscanf(e, "%d,%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3], &v[4]);
        if (v[0] >= 0) p.sweeps = v[0];
        if (v[1] >= 0) p.push_passes = v[1];
        if (v[2] >= 0) p.later_passes = v[2];
        if (v[3] >= 0) p.margin = v[3];
        if (v[4] >= 0) p.relabel_cap = v[4];
    }
    return p;
}

/* Solves g from its current flow with the default parameters; counts into *c. */
static int64_t solve_g(graph *g, cnt *c, unsigned char *cut)
{
    solver s;
    solver_init(&s, g, params_for(g->W, g->H));
    int64_t f = solve(&s, cut);
    s.c.solves = 1;
    *c = s.c;
    solver_free(&s);
    return f;
}

/* A multi-level cold solve of g, `levels` coarse levels (0: plain cold). Fine level counts into c[0], the coarse
 * ones into c[1..]. */
static int64_t solve_ml(graph *g, int levels, cnt *c, unsigned char *cut)
{
    if (levels > 0) {
        graph *cg = coarsen(g);
        unsigned char *ccut = xcalloc((size_t)cg->W * cg->H, 1);
        solve_ml(cg, levels - 1, c + 1, ccut);
        project(cg, g);
        free(ccut);
        graph_free(cg);
    }
    return solve_g(g, &c[0], cut);
}

/* ---- the real graphs ---- */
static int resize_bgr(const mk_image_t *src, int w, int h, mk_image_t *out)
{
    *out = mk_image_desc(w, h, src->format, MK_U8);
    int rc = mk_image_alloc(NULL, out, MK_MEM_HOST);
    if (rc)
        return rc;
    double sx = (double)src->width / w, sy = (double)src->height / h;
    for (int y = 0; y < h; y++) {
        double fy = (y + 0.5) * sy - 0.5;
        fy = fy < 0 ? 0 : fy;
        int y0 = (int)fy, y1 = y0 + 1 < src->height ? y0 + 1 : y0;
        double ay = fy - y0;
        const uint8_t *r0 = mk_image_row(src, 0, y0), *r1 = mk_image_row(src, 0, y1);
        uint8_t *d = mk_image_row(out, 0, y);
        for (int x = 0; x < w; x++) {
            double fx = (x + 0.5) * sx - 0.5;
            fx = fx < 0 ? 0 : fx;
            int x0 = (int)fx, x1 = x0 + 1 < src->width ? x0 + 1 : x0;
            double ax = fx - x0;
            for (int ch = 0; ch < 3; ch++) {
                double top = r0[3 * x0 + ch] + ax * (r0[3 * x1 + ch] - r0[3 * x0 + ch]);
                double bot = r1[3 * x0 + ch] + ax * (r1[3 * x1 + ch] - r1[3 * x0 + ch]);
                d[3 * x + ch] = (uint8_t)lrint(top + ay * (bot - top));
            }
        }
    }
    return 0;
}

/* The components of the model of an n-iteration GrabCut of img in rect (mask: its labels after it). */
static int learn_comps(mk_ctx_t *cpu, const mk_image_t *img, mk_image_t *mask, const mk_rect_t *rect, int n,
                       mk_gc_comp_t comps[2][MK_GC_MAX_K])
{
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_model_t model;
    p.iterations = n;
    if (mk_grabcut(cpu, img, mask, rect, &p, &model, NULL)) {
        fprintf(stderr, "grabcut\n");
        return 1;
    }
    for (int gg = 0; gg < 2; gg++) {
        const mk_gmm_t *m = gg ? &model.fgd : &model.bgd;
        for (int k = 0; k < m->K; k++)
            mk_gc_comp_set(m->weight[k], m->mean[k], &m->cov[k][0][0], &comps[gg][k]);
    }
    return 0;
}

/* BK's flow and cut of g (the reference) */
static int64_t bk_solve(mk_ctx_t *cpu, graph *g, unsigned char *bkcut)
{
    mk_grid_graph_t gr = {.width = g->W, .height = g->H, .pitch = (size_t)g->W, .term = g->term};
    for (int d = 0; d < 4; d++)
        gr.edge[d] = g->cap[d];
    mk_image_t bk = mk_image_desc(g->W, g->H, MK_FMT_GRAY, MK_U8);
    mk_image_alloc(NULL, &bk, MK_MEM_HOST);
    mk_maxflow_stats_t ms;
    mk_maxflow_grid(cpu, &gr, &bk, &ms);
    for (int y = 0; y < g->H; y++)
        memcpy(bkcut + (size_t)y * g->W, mk_image_row(&bk, 0, y), (size_t)g->W);
    mk_image_free(NULL, &bk);
    return ms.flow;
}

/* The video fast path: otb_man's frames resized to W x H, the model of a 5-iteration GrabCut of frame 1 in a
 * rectangle around the man (his face box widened to the shoulders and down to the frame's bottom), then the
 * fixed-model cut of every later frame, cold and warm from the previous frame's flow (the daemon's warm_start). */
static int video(const char *data, int W, int H, int frames)
{
    char path[600];
    mk_ctx_t *cpu = NULL;
    mk_ctx_create(MK_BACKEND_CPU, &cpu);
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    mk_image_t mask = mk_image_desc(W, H, MK_FMT_GRAY, MK_U8);
    mk_image_alloc(NULL, &mask, MK_MEM_HOST);
    graph *g = graph_new(W, H);
    unsigned char *cut = xcalloc((size_t)W * H, 1), *bkcut = xcalloc((size_t)W * H, 1);
    int32_t *warm[4];
    for (int d = 0; d < 4; d++)
        warm[d] = xcalloc((size_t)W * H, 4);
    cnt tot_cold = {0}, tot_warm = {0};
    mk_rect_t rect = {0};
    int ok = 1;
    printf("otb_man %dx%d, frames 1..%d (T %d)\n", W, H, frames, params_for(W, H).T);
    for (int fr = 1; fr <= frames; fr++) {
        mk_image_t src = {0}, img;
        snprintf(path, sizeof path, "%s/video/otb_man/frames/%04d.jpg", data, fr);
        if (mk_imageio_load(path, MK_FMT_BGR, &src)) {
            fprintf(stderr, "load %s\n", path);
            return 1;
        }
        resize_bgr(&src, W, H, &img);
        if (fr == 1) {
            /* face box 69,48,94,86 (1-based) in 241 x 193: x 25..214, y 15..bottom */
            int x1 = 25 * W / src.width, y1 = 15 * H / src.height, x2 = 215 * W / src.width - 1;
            rect = (mk_rect_t){x1, y1, x2 - x1 + 1, H - y1};
            if (learn_comps(cpu, &img, &mask, &rect, 5, comps))
                return 1;
        }
        mk_gc_nlinks_cpu(&img, mk_gc_beta_cpu(&img), p.gamma, p.cap_scale, g->cap, W);
        mk_gc_tlinks_cpu(&img, &mask, comps[0], comps[1], p.K, p.lambda, p.cap_scale, g->term, W);
        int64_t ref = bk_solve(cpu, g, bkcut);
        cnt cc, cw;
        for (int d = 0; d < 4; d++)
            memset(g->f[d], 0, (size_t)W * H * 4);
        int64_t fc = solve_g(g, &cc, cut);
        ok &= fc == ref && !memcmp(cut, bkcut, (size_t)W * H);
        for (int d = 0; d < 4; d++)
            memcpy(g->f[d], warm[d], (size_t)W * H * 4);
        int64_t fw = solve_g(g, &cw, cut);
        ok &= fw == ref && !memcmp(cut, bkcut, (size_t)W * H);
        for (int d = 0; d < 4; d++)
            memcpy(warm[d], g->f[d], (size_t)W * H * 4);
        if (fr > 1) { /* frame 1's warm solve starts from nothing: the same as cold */
            cnt_add(&tot_cold, &cc);
            cnt_add(&tot_warm, &cw);
        }
        if (G_verbose) {
            printf(" frame %d\n", fr);
            print_cnt("cold", &cc);
            print_cnt("warm", &cw);
        }
        mk_image_free(NULL, &src);
        mk_image_free(NULL, &img);
    }
    printf("  frames 2..%d, %s\n", frames, ok ? "every flow and cut equal to BK's" : "A FLOW OR CUT DIFFERS FROM BK");
    double n = frames - 1;
    print_cnt("cold, all frames", &tot_cold);
    print_cnt("warm, all frames", &tot_warm);
    printf("  per frame: cold ~%.0f us, warm ~%.0f us (push passes %.1f / %.1f, BFS passes %.1f / %.1f)\n",
           cost_us(&tot_cold) / n, cost_us(&tot_warm) / n, tot_cold.push_passes / n,
           tot_warm.push_passes / n, tot_cold.bfs_passes / n, tot_warm.bfs_passes / n);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: prsim DATA NAME W H [max_levels]\n");
        return 2;
    }
    const char *data = argv[1], *name = argv[2];
    int W = atoi(argv[3]), H = atoi(argv[4]), maxlev = argc > 5 ? atoi(argv[5]) : 2;
    if (getenv("PRSIM_STALL")) /* pct,min_passes: end a round when a pass delivers < pct % of the round's flow */
        sscanf(getenv("PRSIM_STALL"), "%d,%d", &G_stall_pct, &G_stall_min);
    G_oracle = getenv("PRSIM_ORACLE") != NULL;
    G_bfs_same = getenv("PRSIM_BFS_SAME") != NULL;
    G_bfs_first = getenv("PRSIM_BFS_FIRST") ? atoi(getenv("PRSIM_BFS_FIRST")) : 0;
    if (getenv("PRSIM_PROJ_PCT"))
        G_proj_pct = atoi(getenv("PRSIM_PROJ_PCT"));
    G_verbose = getenv("PRSIM_VERBOSE") ? atoi(getenv("PRSIM_VERBOSE")) : 0;
    if (!strcmp(name, "--video"))
        return video(data, W, H, argc > 5 ? atoi(argv[5]) : 134);
    char path[600];
    mk_image_t src = {0}, img;
    snprintf(path, sizeof path, "%s/grabcut/images/%s.jpg", data, name);
    if (mk_imageio_load(path, MK_FMT_BGR, &src)) {
        snprintf(path, sizeof path, "%s/grabcut/images/%s.bmp", data, name);
        if (mk_imageio_load(path, MK_FMT_BGR, &src)) {
            fprintf(stderr, "load %s\n", path);
            return 1;
        }
    }
    snprintf(path, sizeof path, "%s/grabcut/bboxes/%s.txt", data, name);
    FILE *fb = fopen(path, "r");
    int bb[4];
    if (!fb || fscanf(fb, "%d %d %d %d", &bb[0], &bb[1], &bb[2], &bb[3]) != 4)
        return 1;
    fclose(fb);
    resize_bgr(&src, W, H, &img);
    int x1 = bb[0] * W / src.width, y1 = bb[1] * H / src.height;
    int x2 = (bb[2] + 1) * W / src.width - 1, y2 = (bb[3] + 1) * H / src.height - 1;
    mk_rect_t rect = {x1, y1, x2 - x1 + 1, y2 - y1 + 1};
    if (x1 <= 0 && y1 <= 0 && x2 >= W - 1 && y2 >= H - 1)
        rect = (mk_rect_t){0, 0, W - 1, H - 1};
    mk_ctx_t *cpu = NULL;
    mk_ctx_create(MK_BACKEND_CPU, &cpu);
    mk_image_t mask = mk_image_desc(W, H, MK_FMT_GRAY, MK_U8);
    mk_image_alloc(NULL, &mask, MK_MEM_HOST);
    graph *g = graph_new(W, H);
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_nlinks_cpu(&img, mk_gc_beta_cpu(&img), p.gamma, p.cap_scale, g->cap, W);
    unsigned char *cut = xcalloc((size_t)W * H, 1), *bkcut = xcalloc((size_t)W * H, 1);
    cnt tot_plain = {0}, tot_ml[8];
    memset(tot_ml, 0, sizeof tot_ml);
    printf("%s %dx%d (T %d, push passes %d)\n", name, W, H, params_for(W, H).T, params_for(W, H).push_passes);
    /* the graphs of cuts 1..5 of a 5-iteration call (model m_it, the rectangle's hard labels) */
    int iters = getenv("PRSIM_ITERS") ? atoi(getenv("PRSIM_ITERS")) : 5;
    for (int it = 1; it <= iters; it++) {
        mk_gc_comp_t comps[2][MK_GC_MAX_K];
        if (learn_comps(cpu, &img, &mask, &rect, it, comps))
            return 1;
        mk_gc_tlinks_cpu(&img, &mask, comps[0], comps[1], p.K, p.lambda, p.cap_scale, g->term, W);
        /* BK on the CPU: the reference flow and cut */
        mk_maxflow_stats_t ms;
        ms.flow = bk_solve(cpu, g, bkcut);
        printf(" cut %d: BK flow %lld\n", it, (long long)ms.flow);
        /* the warm sequence as the GPU runs it: cut 1 cold, the later ones from the last flow */
        int32_t *keep[4];
        for (int d = 0; d < 4; d++) {
            keep[d] = g->f[d];
            if (it == 1)
                memset(keep[d], 0, (size_t)W * H * 4);
        }
        cnt c;
        int64_t fl = solve_g(g, &c, cut);
        int same = !memcmp(cut, bkcut, (size_t)W * H);
        char what[64];
        snprintf(what, sizeof what, "%s %s%s", it == 1 ? "cold" : "warm", fl == ms.flow ? "ok" : "FLOW MISMATCH",
                 same ? "" : " CUT DIFFERS");
        print_cnt(what, &c);
        cnt_add(&tot_plain, &c);
        /* the multi-level cold solves (and, for cuts 2..5, a cold solve for comparison), on a copy */
        int32_t *save[4];
        for (int d = 0; d < 4; d++) {
            save[d] = malloc((size_t)W * H * 4);
            memcpy(save[d], g->f[d], (size_t)W * H * 4);
        }
        for (int lev = it == 1 ? 1 : 0; lev <= maxlev && (it == 1 || maxlev > 0); lev++) {
            cnt cl[8];
            memset(cl, 0, sizeof cl);
            for (int d = 0; d < 4; d++)
                memset(g->f[d], 0, (size_t)W * H * 4);
            fl = solve_ml(g, lev, cl, cut);
            same = !memcmp(cut, bkcut, (size_t)W * H);
            cnt all = {0};
            for (int k = 0; k <= lev; k++)
                cnt_add(&all, &cl[k]);
            snprintf(what, sizeof what, "cold, %d coarse levels %s%s", lev, fl == ms.flow ? "ok" : "FLOW MISMATCH",
                     same ? "" : " CUT DIFFERS");
            print_cnt(what, &all);
            for (int k = lev; k >= 0; k--) {
                snprintf(what, sizeof what, "    level 1/%d", 1 << k);
                print_cnt(what, &cl[k]);
            }
            if (it == 1)
                cnt_add(&tot_ml[lev], &all);
        }
        for (int d = 0; d < 4; d++) {
            memcpy(g->f[d], save[d], (size_t)W * H * 4);
            free(save[d]);
        }
        fflush(stdout);
    }
    print_cnt("all cuts, warm sequence (GPU's)", &tot_plain);
    return 0;
}
