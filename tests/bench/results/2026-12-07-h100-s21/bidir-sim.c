/* Pixel-level synchronous push-relabel with global relabels on a real GrabCut graph: push only against push + pull
 * (deficits move toward excess along distance-to-excess labels). Counts steps (a step = one Jacobi push sweep +
 * relabel) and global relabels to the maximum preflow; checks the flow against BK. */
#include "grabcut.h"
#include "image.h"
#include "imageio.h"
#include "ctx.h"
#include "cpu/grabcut_cpu.h"
#include "grabcut_px.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>

static int W, H;
static int32_t *cap[4], *term;
static int32_t *f[4];
static int64_t *w;
static int *h, *g, *hn, *gn;
static int *q;
static int64_t *w0;
#define INF (1 << 29)
static const int DX[8] = {1, 1, 0, -1, -1, -1, 0, 1}, DY[8] = {0, 1, 1, 1, 0, -1, -1, -1};

static inline int in(int x, int y) { return x >= 0 && y >= 0 && x < W && y < H; }
/* residual of arc p -> p + d */
static inline int64_t res(int x, int y, int d)
{
    int nx = x + DX[d], ny = y + DY[d];
    if (!in(nx, ny)) return 0;
    if (d < 4) { int p = y * W + x; int c = cap[d][p] > 0 ? cap[d][p] : 0; return (int64_t)c - f[d][p]; }
    int qq = ny * W + nx; int c = cap[d - 4][qq] > 0 ? cap[d - 4][qq] : 0; return (int64_t)c + f[d - 4][qq];
}
static inline void send(int x, int y, int d, int64_t v)
{
    int nx = x + DX[d], ny = y + DY[d];
    if (d < 4) f[d][y * W + x] += (int32_t)v; else f[d - 4][ny * W + nx] -= (int32_t)v;
    w[y * W + x] -= v; w[ny * W + nx] += v;
}
/* BFS: dist to the deficits backwards (lab = h), or from the excess forwards (lab = g) */
static int bfs(int *lab, int to_deficit)
{
    int n = W * H, head = 0, tail = 0, dmax = 0;
    for (int p = 0; p < n; p++) {
        lab[p] = INF;
        if (to_deficit ? w[p] < 0 : w[p] > 0) { lab[p] = 0; q[tail++] = p; }
    }
    while (head < tail) {
        int v = q[head++], vx = v % W, vy = v / W;
        for (int e = 0; e < 8; e++) {
            int ux = vx + DX[e], uy = vy + DY[e];
            if (!in(ux, uy)) continue;
            int u = uy * W + ux;
            if (lab[u] != INF) continue;
            /* to deficit: arc u -> v residual (direction e^4 from u); from excess: arc v -> u residual */
            int64_t r = to_deficit ? res(ux, uy, e ^ 4) : res(vx, vy, e);
            if (r > 0) { lab[u] = lab[v] + 1; if (lab[u] > dmax) dmax = lab[u]; q[tail++] = u; }
        }
    }
    return dmax;
}
static int64_t flow_value(void)
{
    int64_t v = 0;
    for (int p = 0; p < W * H; p++) { v += term[p] < 0 ? -(int64_t)term[p] : 0; v -= w[p] < 0 ? -w[p] : 0; }
    return v;
}

/* one solve; pull: with pulls; K: steps between global relabels; returns steps */
static int solve(int pull, int K, int margin, int *relabels, int64_t *flow)
{
    int n = W * H, steps = 0;
    for (int d = 0; d < 4; d++) memset(f[d], 0, n * sizeof(int32_t));
    for (int p = 0; p < n; p++) w[p] = term[p];
    *relabels = 0;
    for (;;) {
        int dmax = bfs(h, 1), gmax = 0;
        (*relabels)++;
        int active = 0;
        for (int p = 0; p < n; p++) if (w[p] > 0 && h[p] < INF) active++;
        if (!active) break;
        if (pull) gmax = bfs(g, 0);
        int hc = dmax + margin, gc = gmax + margin;
        for (int k = 0; k < K; k++) {
            steps++;
            int moved = 0;
            /* pushes from a snapshot of w: only the higher end of an arc pushes along it */
            memcpy(hn, h, n * sizeof(int));
            memcpy(w0, w, n * sizeof(int64_t));
            for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
                int p = y * W + x;
                if (w0[p] <= 0 || h[p] >= hc) continue;
                int64_t e = w0[p];
                for (int d = 0; d < 8 && e > 0; d++) {
                    int nx = x + DX[d], ny = y + DY[d];
                    if (!in(nx, ny) || h[ny * W + nx] >= h[p]) continue;
                    int64_t r = res(x, y, d);
                    if (r <= 0) continue;
                    int64_t v = e < r ? e : r;
                    /* the receiver's w changes after this pixel read its own: apply to a delta later */
                    send(x, y, d, v); e -= v; moved = 1;
                    w[p] += 0; /* w[p] already reduced by send */
                }
            }
            /* note: send() changes w of receivers within the sweep; a receiver visited later in the same sweep
             * may push what it just received (Gauss-Seidel in scan order). To keep the step Jacobi, the pushes
             * above are computed from e = w at the start... approximated; see jacobi flag below. */
            if (pull) {
                for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
                    int v = y * W + x;
                    if (w0[v] >= 0 || g[v] >= gc) continue;
                    int64_t need = -w0[v];
                    for (int e2 = 0; e2 < 8 && need > 0; e2++) {
                        int ux = x + DX[e2], uy = y + DY[e2];
                        if (!in(ux, uy)) continue;
                        int u = uy * W + ux;
                        if (w0[u] > 0 || g[u] >= g[v]) continue;
                        int64_t r = res(ux, uy, e2 ^ 4);
                        if (r <= 0) continue;
                        int64_t amt = need < r ? need : r;
                        send(ux, uy, e2 ^ 4, amt); need -= amt; moved = 1;
                    }
                }
            }
            /* relabels */
            for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
                int p = y * W + x;
                if (w[p] > 0 && h[p] < hc) {
                    int m = INF;
                    for (int d = 0; d < 8; d++) {
                        int nx = x + DX[d], ny = y + DY[d];
                        if (in(nx, ny) && res(x, y, d) > 0 && h[ny * W + nx] < m) m = h[ny * W + nx];
                    }
                    if (m >= h[p]) hn[p] = m >= INF ? INF : m + 1;
                }
            }
            memcpy(h, hn, n * sizeof(int));
            if (pull) {
                memcpy(gn, g, n * sizeof(int));
                for (int y = 0; y < H; y++) for (int x = 0; x < W; x++) {
                    int v = y * W + x;
                    if (w[v] < 0 && g[v] < gc) {
                        int m = INF;
                        for (int e2 = 0; e2 < 8; e2++) {
                            int ux = x + DX[e2], uy = y + DY[e2];
                            if (in(ux, uy) && res(ux, uy, e2 ^ 4) > 0 && g[uy * W + ux] < m) m = g[uy * W + ux];
                        }
                        if (m >= g[v]) gn[v] = m >= INF ? INF : m + 1;
                    }
                }
                memcpy(g, gn, n * sizeof(int));
            }
            if (!moved) break;
        }
        if (*relabels > 100000) break;
    }
    *flow = flow_value();
    return steps;
}

static void resize(const mk_image_t *src, int nw, int nh, mk_image_t *dst)
{
    *dst = mk_image_desc(nw, nh, MK_FMT_BGR, MK_U8);
    mk_image_alloc(NULL, dst, MK_MEM_HOST);
    for (int y = 0; y < nh; y++) for (int x = 0; x < nw; x++) {
        int sx = x * src->width / nw, sy = y * src->height / nh;
        const uint8_t *s = (const uint8_t *)src->data + (size_t)sy * src->pitch + 3 * sx;
        uint8_t *d = (uint8_t *)dst->data + (size_t)y * dst->pitch + 3 * x;
        d[0] = s[0]; d[1] = s[1]; d[2] = s[2];
    }
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : "../shared/data";
    const char *name = argc > 2 ? argv[2] : "person1";
    W = argc > 3 ? atoi(argv[3]) : 640; H = argc > 4 ? atoi(argv[4]) : 480;
    int iters = argc > 5 ? atoi(argv[5]) : 5; /* the model: after `iters` GrabCut iterations (0: rectangle init) */
    char path[512]; mk_image_t src = {0}, img;
    snprintf(path, sizeof path, "%s/grabcut/images/%s.jpg", data, name);
    if (mk_imageio_load(path, MK_FMT_BGR, &src)) { snprintf(path, sizeof path, "%s/grabcut/images/%s.bmp", data, name); if (mk_imageio_load(path, MK_FMT_BGR, &src)) { fprintf(stderr, "load %s\n", path); return 1; } }
    snprintf(path, sizeof path, "%s/grabcut/bboxes/%s.txt", data, name);
    FILE *fb = fopen(path, "r"); int bb[4]; if (!fb || fscanf(fb, "%d %d %d %d", &bb[0], &bb[1], &bb[2], &bb[3]) != 4) return 1; fclose(fb);
    resize(&src, W, H, &img);
    int x1 = bb[0] * W / src.width, y1 = bb[1] * H / src.height, x2 = (bb[2] + 1) * W / src.width - 1, y2 = (bb[3] + 1) * H / src.height - 1;
    if (x1 < 1) x1 = 1; if (y1 < 1) y1 = 1; if (x2 > W - 2) x2 = W - 2; if (y2 > H - 2) y2 = H - 2;
    mk_rect_t rect = {x1, y1, x2 - x1 + 1, y2 - y1 + 1};
    mk_ctx_t *cpu = NULL; mk_ctx_create(MK_BACKEND_CPU, &cpu);
    mk_gc_params_t p = mk_gc_params_default(); p.iterations = iters;
    mk_gc_model_t model; mk_gc_comp_t comps[2][MK_GC_MAX_K];
    mk_image_t mask = mk_image_desc(W, H, MK_FMT_GRAY, MK_U8); mk_image_alloc(NULL, &mask, MK_MEM_HOST);
    if (mk_grabcut(cpu, &img, &mask, &rect, &p, &model, NULL)) { fprintf(stderr, "grabcut\n"); return 1; }
    if (iters == 0) { /* the labels of the rectangle's initialisation: PR_FGD inside */
        for (int y = 0; y < H; y++) for (int x = 0; x < W; x++)
            ((uint8_t *)mask.data)[(size_t)y * mask.pitch + x] = (x >= rect.x && x < rect.x + rect.width && y >= rect.y && y < rect.y + rect.height) ? 3 : 0;
    }
    for (int gg = 0; gg < 2; gg++) { const mk_gmm_t *m = gg ? &model.fgd : &model.bgd; for (int k = 0; k < m->K; k++) mk_gc_comp_set(m->weight[k], m->mean[k], &m->cov[k][0][0], &comps[gg][k]); }
    int n = W * H;
    for (int d = 0; d < 4; d++) { cap[d] = calloc(n, 4); f[d] = calloc(n, 4); }
    term = calloc(n, 4); w = calloc(n, 8); h = calloc(n, 4); g = calloc(n, 4); hn = calloc(n, 4); gn = calloc(n, 4); q = calloc(n, 4); w0 = calloc(n, 8);
    mk_gc_nlinks_cpu(&img, mk_gc_beta_cpu(&img), p.gamma, p.cap_scale, cap, W);
    mk_gc_tlinks_cpu(&img, &mask, comps[0], comps[1], p.K, p.lambda, p.cap_scale, term, W);
    mk_grid_graph_t gr = {.width = W, .height = H, .pitch = W, .term = term};
    for (int d = 0; d < 4; d++) gr.edge[d] = cap[d];
    mk_image_t cut = mk_image_desc(W, H, MK_FMT_GRAY, MK_U8); mk_image_alloc(NULL, &cut, MK_MEM_HOST);
    mk_maxflow_stats_t ms; mk_maxflow_grid(cpu, &gr, &cut, &ms);
    printf("%s %dx%d iters %d: BK flow %lld\n", name, W, H, iters, (long long)ms.flow);
    int Ks[] = {8, 16, 32, 64};
    for (int ki = 0; ki < 4; ki++) for (int pull = 0; pull < 2; pull++) {
        int rl; int64_t fl; int steps = solve(pull, Ks[ki], 8, &rl, &fl);
        printf("  K %3d %-9s steps %5d relabels %4d flow %lld %s\n", Ks[ki], pull ? "push+pull" : "push", steps, rl, (long long)fl, fl == ms.flow ? "ok" : "MISMATCH");
        fflush(stdout);
    }
    return 0;
}
