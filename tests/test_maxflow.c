/* test_maxflow: the CPU Boykov-Kolmogorov max-flow on hand-built graphs with known flows and cuts, on random tiny
 * graphs and grids against the enumeration of every cut, on random larger grids against a plain Dinic solver
 * written here, and mk_maxflow_grid's argument checks. */
#include "testutil.h"

#include "cpu/maxflow_cpu.h"
#include "grabcut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int dx[4] = {1, 1, 0, -1}, dy[4] = {0, 1, 1, 1};

static mk_bk_t *bk_new(int nodes, int edges)
{
    mk_bk_t *g = NULL;
    TU_OK(mk_bk_create(nodes, edges, &g));
    return g;
}

static void test_hand_graphs(void **state)
{
    (void)state;
    int64_t flow = -1;
    int paths = -1;

    /* Two nodes: a gets 3 from the source and sends 2 to the sink, b gets 2 and sends 3, a -> b carries 1:
     * everything the source gives reaches the sink (5). */
    mk_bk_t *g = bk_new(2, 1);
    TU_OK(mk_bk_add_term(g, 0, 3, 2));
    TU_OK(mk_bk_add_term(g, 1, 2, 3));
    TU_OK(mk_bk_add_edge(g, 0, 1, 1, 0));
    TU_OK(mk_bk_solve(g, &flow, &paths));
    assert_int_equal(flow, 5);
    /* 2 + 2 of it is the terminal constant min(s, t) of each node; one unit needs a path. */
    assert_int_equal(paths, 1);
    assert_int_equal(mk_bk_solve(g, &flow, NULL), MK_ESTATE);
    mk_bk_destroy(g);

    /* CLRS's network (s, v1..v4, t): maximum flow 23, and the only minimum cut is {s, v1, v2, v4} | {v3, t}. */
    enum { V1, V2, V3, V4 };
    g = bk_new(4, 6);
    TU_OK(mk_bk_add_term(g, V1, 16, 0));
    TU_OK(mk_bk_add_term(g, V2, 13, 0));
    TU_OK(mk_bk_add_term(g, V3, 0, 20));
    TU_OK(mk_bk_add_term(g, V4, 0, 4));
    TU_OK(mk_bk_add_edge(g, V1, V3, 12, 0));
    TU_OK(mk_bk_add_edge(g, V2, V1, 4, 0));
    TU_OK(mk_bk_add_edge(g, V2, V4, 14, 0));
    TU_OK(mk_bk_add_edge(g, V3, V2, 9, 0));
    TU_OK(mk_bk_add_edge(g, V4, V3, 7, 0));
    TU_OK(mk_bk_solve(g, &flow, NULL));
    assert_int_equal(flow, 23);
    assert_int_equal(mk_bk_source_side(g, V1), 1);
    assert_int_equal(mk_bk_source_side(g, V2), 1);
    assert_int_equal(mk_bk_source_side(g, V3), 0);
    assert_int_equal(mk_bk_source_side(g, V4), 1);
    mk_bk_destroy(g);

    /* Parallel edges add up and reverse capacities do not help; nodes without terminal links or edges are on the
     * source side (they cannot reach the sink). */
    g = bk_new(4, 3);
    TU_OK(mk_bk_add_term(g, 0, 100, 0));
    TU_OK(mk_bk_add_term(g, 1, 0, 100));
    TU_OK(mk_bk_add_edge(g, 0, 1, 3, 1));
    TU_OK(mk_bk_add_edge(g, 0, 1, 4, 0));
    TU_OK(mk_bk_add_edge(g, 1, 0, 2, 0));
    TU_OK(mk_bk_solve(g, &flow, NULL));
    assert_int_equal(flow, 7);
    assert_int_equal(mk_bk_source_side(g, 0), 1);
    assert_int_equal(mk_bk_source_side(g, 1), 0);
    assert_int_equal(mk_bk_source_side(g, 2), 1);
    assert_int_equal(mk_bk_source_side(g, 3), 1);
    mk_bk_destroy(g);

    /* Bad arguments. */
    assert_int_equal(mk_bk_create(0, 1, &g), MK_EINVAL);
    assert_int_equal(mk_bk_create(4, (int64_t)1 << 40, &g), MK_ERANGE);
    g = bk_new(2, 1);
    assert_int_equal(mk_bk_add_edge(g, 0, 0, 1, 1), MK_EINVAL);
    assert_int_equal(mk_bk_add_edge(g, 0, 2, 1, 1), MK_EINVAL);
    assert_int_equal(mk_bk_add_edge(g, 0, 1, -1, 1), MK_ERANGE);
    assert_int_equal(mk_bk_add_edge(g, 0, 1, INT32_MAX, 1), MK_ERANGE);
    assert_int_equal(mk_bk_add_term(g, 1, -1, 0), MK_ERANGE);
    TU_OK(mk_bk_add_edge(g, 0, 1, 1, 1));
    assert_int_equal(mk_bk_add_edge(g, 0, 1, 1, 1), MK_ERANGE); /* room for one edge only */
    mk_bk_destroy(g);
    mk_bk_destroy(NULL);
}

/* A grid graph in host arrays (tight pitch). */
typedef struct {
    int w, h;
    int32_t *term, *edge[4];
    mk_grid_graph_t g;
} grid_t;

static void grid_init(grid_t *gr, int w, int h)
{
    size_t n = (size_t)w * h;
    gr->w = w;
    gr->h = h;
    gr->term = calloc(n, sizeof(int32_t));
    assert_non_null(gr->term);
    gr->g = (mk_grid_graph_t){.width = w, .height = h, .pitch = (size_t)w, .term = gr->term};
    for (int d = 0; d < 4; d++) {
        gr->edge[d] = calloc(n, sizeof(int32_t));
        assert_non_null(gr->edge[d]);
        gr->g.edge[d] = gr->edge[d];
    }
}

static void grid_free(grid_t *gr)
{
    free(gr->term);
    for (int d = 0; d < 4; d++)
        free(gr->edge[d]);
}

static int in_grid(const grid_t *gr, int x, int y, int d)
{
    int nx = x + dx[d], ny = y + dy[d];
    return nx >= 0 && nx < gr->w && ny < gr->h;
}

static void grid_random(grid_t *gr, tu_rng_t *r, int tmax, int emax)
{
    for (int y = 0; y < gr->h; y++)
        for (int x = 0; x < gr->w; x++) {
            int i = y * gr->w + x;
            gr->term[i] = tu_rand_int(r, -tmax, tmax);
            for (int d = 0; d < 4; d++)
                gr->edge[d][i] = in_grid(gr, x, y, d) ? tu_rand_int(r, 0, emax) : 0;
        }
}

/* mk_maxflow_grid on the CPU: the flow and the cut. */
static int64_t grid_solve(const grid_t *gr, uint8_t *cut)
{
    mk_image_t c = mk_image_desc(gr->w, gr->h, MK_FMT_GRAY, MK_U8);
    mk_maxflow_stats_t st = {.flow = -1, .rounds = -1, .global_relabels = -1, .us = -1};
    TU_OK(mk_image_alloc(NULL, &c, MK_MEM_HOST));
    memset(c.data, 7, mk_image_bytes(&c));
    TU_OK(mk_maxflow_grid(tu_cpu, &gr->g, &c, &st));
    assert_true(st.rounds >= 0 && st.global_relabels == 0 && st.us >= 0);
    for (int y = 0; y < gr->h; y++)
        memcpy(cut + (size_t)y * gr->w, mk_image_row(&c, 0, y), (size_t)gr->w);
    mk_image_free(NULL, &c);
    return st.flow;
}

/* The cut value of a grid for the source set `s` (bit i: pixel i on the source side). */
static int64_t grid_cut_value(const grid_t *gr, uint32_t s)
{
    int64_t v = 0;
    for (int y = 0; y < gr->h; y++)
        for (int x = 0; x < gr->w; x++) {
            int i = y * gr->w + x;
            uint32_t in = (s >> i) & 1;
            v += in ? (gr->term[i] < 0 ? -gr->term[i] : 0) : (gr->term[i] > 0 ? gr->term[i] : 0);
            for (int d = 0; d < 4; d++)
                if (in_grid(gr, x, y, d) && in != ((s >> ((y + dy[d]) * gr->w + x + dx[d])) & 1))
                    v += gr->edge[d][i];
        }
    return v;
}

/* Every cut of a grid: the minimum value and the union of the source sets that reach it (the largest minimum
 * cut: minimum cuts are closed under union). */
static void grid_brute(const grid_t *gr, int64_t *min, uint32_t *largest)
{
    int n = gr->w * gr->h;
    *min = INT64_MAX;
    *largest = 0;
    for (uint32_t s = 0; s < (1u << n); s++) {
        int64_t v = grid_cut_value(gr, s);
        if (v < *min) {
            *min = v;
            *largest = s;
        } else if (v == *min) {
            *largest |= s;
        }
    }
}

static void test_hand_grids(void **state)
{
    (void)state;
    grid_t gr;
    uint8_t cut[4];
    /* A 3 x 1 chain: source 5 -> 4 -> 2 -> sink 3: flow 2, the last edge is the cut. */
    grid_init(&gr, 3, 1);
    gr.term[0] = 5;
    gr.term[2] = -3;
    gr.edge[0][0] = 4;
    gr.edge[0][1] = 2;
    assert_int_equal(grid_solve(&gr, cut), 2);
    assert_int_equal(cut[0], 1);
    assert_int_equal(cut[1], 1);
    assert_int_equal(cut[2], 0);
    grid_free(&gr);

    /* 2 x 2 with all six edges (E, S, SE, SW): a = (0,0) gets 10, d = (1,1) sends 10; a's edges sum to 9 and so
     * do d's: flow 9, with two minimum cuts {a} and {a, b, c}; the larger one is the answer. */
    grid_init(&gr, 2, 2);
    gr.term[0] = 10;
    gr.term[3] = -10;
    gr.edge[0][0] = 2; /* a - b */
    gr.edge[1][0] = 3; /* a - d */
    gr.edge[2][0] = 4; /* a - c */
    gr.edge[2][1] = 5; /* b - d */
    gr.edge[3][1] = 7; /* b - c */
    gr.edge[0][2] = 1; /* c - d */
    assert_int_equal(grid_solve(&gr, cut), 9);
    const uint8_t want[4] = {1, 1, 1, 0};
    assert_memory_equal(cut, want, 4);
    int64_t min;
    uint32_t largest;
    grid_brute(&gr, &min, &largest);
    assert_int_equal(min, 9);
    assert_int_equal(largest, 7);
    grid_free(&gr);

    /* One pixel: its terminal link alone. */
    grid_init(&gr, 1, 1);
    gr.term[0] = -5;
    assert_int_equal(grid_solve(&gr, cut), 0);
    assert_int_equal(cut[0], 0);
    gr.term[0] = 0;
    assert_int_equal(grid_solve(&gr, cut), 0);
    assert_int_equal(cut[0], 1);
    grid_free(&gr);
}

static void test_random_tiny_grids(void **state)
{
    (void)state;
    tu_rng_t r = {0x6d6178666c6f77ull};
    static const int sizes[][2] = {{3, 3}, {4, 3}, {3, 4}, {1, 5}, {5, 1}, {2, 2}};
    int cases = 0;
    for (int s = 0; s < 6; s++)
        for (int k = 0; k < 60; k++, cases++) {
            grid_t gr;
            uint8_t cut[16];
            int64_t min;
            uint32_t largest;
            grid_init(&gr, sizes[s][0], sizes[s][1]);
            /* Small capacities make ties (several minimum cuts) common; every third case has large ones. */
            grid_random(&gr, &r, k % 3 ? 6 : MK_GC_CAP_MAX, k % 3 ? 4 : MK_GC_CAP_MAX);
            grid_brute(&gr, &min, &largest);
            int64_t flow = grid_solve(&gr, cut);
            if (flow != min)
                fail_msg("case %d (%dx%d): flow %lld, minimum cut %lld", cases, gr.w, gr.h, (long long)flow,
                         (long long)min);
            for (int i = 0; i < gr.w * gr.h; i++)
                if (cut[i] != ((largest >> i) & 1))
                    fail_msg("case %d (%dx%d): pixel %d on side %d, the largest minimum cut says %d", cases, gr.w,
                             gr.h, i, cut[i], (int)((largest >> i) & 1));
            grid_free(&gr);
        }
}

/* Random directed graphs (asymmetric capacities, parallel edges, both terminal links on a node) against the
 * enumeration of every cut. */
static void test_random_tiny_graphs(void **state)
{
    (void)state;
    tu_rng_t r = {0x677261706873ull};
    enum { N = 9, E = 24 };
    for (int k = 0; k < 300; k++) {
        int n = tu_rand_int(&r, 2, N), m = tu_rand_int(&r, 0, E), ei[E], ej[E];
        int64_t src[N], snk[N], cap[E], rev[E];
        mk_bk_t *g = bk_new(n, m);
        for (int i = 0; i < n; i++) {
            src[i] = tu_rand_int(&r, 0, 2) ? tu_rand_int(&r, 0, 9) : 0;
            snk[i] = tu_rand_int(&r, 0, 2) ? tu_rand_int(&r, 0, 9) : 0;
            TU_OK(mk_bk_add_term(g, i, src[i], snk[i]));
        }
        for (int e = 0; e < m; e++) {
            ei[e] = tu_rand_int(&r, 0, n - 1);
            do
                ej[e] = tu_rand_int(&r, 0, n - 1);
            while (ej[e] == ei[e]);
            cap[e] = tu_rand_int(&r, 0, 7);
            rev[e] = tu_rand_int(&r, 0, 3) ? 0 : tu_rand_int(&r, 0, 7);
            TU_OK(mk_bk_add_edge(g, ei[e], ej[e], (int32_t)cap[e], (int32_t)rev[e]));
        }
        int64_t flow, min = INT64_MAX;
        uint32_t largest = 0;
        TU_OK(mk_bk_solve(g, &flow, NULL));
        for (uint32_t s = 0; s < (1u << n); s++) {
            int64_t v = 0;
            for (int i = 0; i < n; i++)
                v += (s >> i) & 1 ? snk[i] : src[i];
            for (int e = 0; e < m; e++) {
                int a = (s >> ei[e]) & 1, b = (s >> ej[e]) & 1;
                v += a && !b ? cap[e] : !a && b ? rev[e] : 0;
            }
            if (v < min) {
                min = v;
                largest = s;
            } else if (v == min) {
                largest |= s;
            }
        }
        if (flow != min)
            fail_msg("graph %d: flow %lld, minimum cut %lld", k, (long long)flow, (long long)min);
        for (int i = 0; i < n; i++)
            if (mk_bk_source_side(g, i) != (int)((largest >> i) & 1))
                fail_msg("graph %d: node %d on the wrong side", k, i);
        mk_bk_destroy(g);
    }
}

/* ---- Dinic's algorithm on the grid, as an independent solver for larger grids ---- */

typedef struct {
    int n, m;
    int *head, *next, *first, *level, *it, *queue;
    int64_t *cap;
} dinic_t;

static void dinic_edge(dinic_t *dn, int u, int v, int64_t c, int64_t rc)
{
    dn->head[dn->m] = v, dn->cap[dn->m] = c, dn->next[dn->m] = dn->first[u], dn->first[u] = dn->m++;
    dn->head[dn->m] = u, dn->cap[dn->m] = rc, dn->next[dn->m] = dn->first[v], dn->first[v] = dn->m++;
}

static int dinic_bfs(dinic_t *dn, int s, int t)
{
    int qh = 0, qt = 0;
    for (int i = 0; i < dn->n; i++)
        dn->level[i] = -1;
    dn->level[s] = 0;
    dn->queue[qt++] = s;
    while (qh < qt) {
        int u = dn->queue[qh++];
        for (int a = dn->first[u]; a >= 0; a = dn->next[a])
            if (dn->cap[a] > 0 && dn->level[dn->head[a]] < 0) {
                dn->level[dn->head[a]] = dn->level[u] + 1;
                dn->queue[qt++] = dn->head[a];
            }
    }
    return dn->level[t] >= 0;
}

static int64_t dinic_dfs(dinic_t *dn, int u, int t, int64_t f)
{
    if (u == t)
        return f;
    for (; dn->it[u] >= 0; dn->it[u] = dn->next[dn->it[u]]) {
        int a = dn->it[u], v = dn->head[a];
        if (dn->cap[a] > 0 && dn->level[v] == dn->level[u] + 1) {
            int64_t got = dinic_dfs(dn, v, t, f < dn->cap[a] ? f : dn->cap[a]);
            if (got > 0) {
                dn->cap[a] -= got;
                dn->cap[a ^ 1] += got;
                return got;
            }
        }
    }
    return 0;
}

/* The flow of a grid and its cut (pixels that cannot reach the sink in the residual graph). */
static int64_t dinic_grid(const grid_t *gr, uint8_t *cut)
{
    int np = gr->w * gr->h, s = np, t = np + 1, maxm = 2 * (np + 4 * np);
    dinic_t dn = {.n = np + 2};
    dn.head = malloc(maxm * sizeof(int));
    dn.next = malloc(maxm * sizeof(int));
    dn.cap = malloc(maxm * sizeof(int64_t));
    dn.first = malloc(dn.n * sizeof(int));
    dn.level = malloc(dn.n * sizeof(int));
    dn.it = malloc(dn.n * sizeof(int));
    dn.queue = malloc(dn.n * sizeof(int));
    assert_true(dn.head && dn.next && dn.cap && dn.first && dn.level && dn.it && dn.queue);
    for (int i = 0; i < dn.n; i++)
        dn.first[i] = -1;
    for (int y = 0; y < gr->h; y++)
        for (int x = 0; x < gr->w; x++) {
            int i = y * gr->w + x;
            if (gr->term[i] > 0)
                dinic_edge(&dn, s, i, gr->term[i], 0);
            else if (gr->term[i] < 0)
                dinic_edge(&dn, i, t, -gr->term[i], 0);
            for (int d = 0; d < 4; d++)
                if (in_grid(gr, x, y, d))
                    dinic_edge(&dn, i, (y + dy[d]) * gr->w + x + dx[d], gr->edge[d][i], gr->edge[d][i]);
        }
    int64_t flow = 0;
    while (dinic_bfs(&dn, s, t)) {
        for (int i = 0; i < dn.n; i++)
            dn.it[i] = dn.first[i];
        for (int64_t f; (f = dinic_dfs(&dn, s, t, INT64_MAX)) > 0;)
            flow += f;
    }
    /* Backwards from the sink: u reaches v when the arc u -> v (the sister of v -> u) has capacity left. */
    int qh = 0, qt = 0;
    for (int i = 0; i < dn.n; i++)
        dn.level[i] = 0;
    dn.level[t] = 1;
    dn.queue[qt++] = t;
    while (qh < qt) {
        int v = dn.queue[qh++];
        for (int a = dn.first[v]; a >= 0; a = dn.next[a])
            if (dn.cap[a ^ 1] > 0 && !dn.level[dn.head[a]]) {
                dn.level[dn.head[a]] = 1;
                dn.queue[qt++] = dn.head[a];
            }
    }
    for (int i = 0; i < np; i++)
        cut[i] = (uint8_t)!dn.level[i];
    free(dn.head), free(dn.next), free(dn.cap), free(dn.first), free(dn.level), free(dn.it), free(dn.queue);
    return flow;
}

static void test_random_grids_vs_dinic(void **state)
{
    (void)state;
    tu_rng_t r = {0x64696e6963ull};
    static const int sizes[][2] = {{7, 5}, {33, 17}, {64, 64}, {1, 40}, {40, 1}, {120, 90}};
    for (int s = 0; s < 6; s++)
        for (int k = 0; k < 4; k++) {
            grid_t gr;
            int w = sizes[s][0], h = sizes[s][1];
            grid_init(&gr, w, h);
            /* Kinds: small capacities (many ties), GrabCut-like (strong terminals, weaker edges), all source but
             * one sink pixel, large capacities. */
            int tmax = k == 0 ? 5 : k == 1 ? 3000 : k == 2 ? 50 : MK_GC_CAP_MAX / 16;
            int emax = k == 0 ? 5 : k == 1 ? 700 : k == 2 ? 20 : MK_GC_CAP_MAX / 16;
            grid_random(&gr, &r, tmax, emax);
            if (k == 2) {
                for (int i = 0; i < w * h; i++)
                    gr.term[i] = gr.term[i] < 0 ? -gr.term[i] : gr.term[i];
                gr.term[w * h / 2] = -1000;
            }
            uint8_t *a = malloc((size_t)w * h), *b = malloc((size_t)w * h);
            assert_true(a && b);
            int64_t fa = grid_solve(&gr, a), fb = dinic_grid(&gr, b);
            if (fa != fb)
                fail_msg("%dx%d kind %d: BK flow %lld, Dinic %lld", w, h, k, (long long)fa, (long long)fb);
            for (int i = 0; i < w * h; i++)
                if (a[i] != b[i])
                    fail_msg("%dx%d kind %d: pixel %d: BK side %d, Dinic %d", w, h, k, i, a[i], b[i]);
            free(a);
            free(b);
            grid_free(&gr);
        }
}

static void test_grid_bad_args(void **state)
{
    (void)state;
    grid_t gr;
    grid_init(&gr, 4, 3);
    mk_image_t cut = mk_image_desc(4, 3, MK_FMT_GRAY, MK_U8), small = mk_image_desc(3, 3, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &cut, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &small, MK_MEM_HOST));
    assert_int_equal(mk_maxflow_grid(NULL, &gr.g, &cut, NULL), MK_EINVAL);
    assert_int_equal(mk_maxflow_grid(tu_cpu, NULL, &cut, NULL), MK_EINVAL);
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &small, NULL), MK_EINVAL);
    mk_grid_graph_t g = gr.g;
    g.pitch = 3;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &g, &cut, NULL), MK_EINVAL);
    g = gr.g;
    g.edge[2] = NULL;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &g, &cut, NULL), MK_EINVAL);
    g = gr.g;
    g.width = 0;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &g, &cut, NULL), MK_EINVAL);
    /* An edge leaving the grid (E of the last column), a negative or too large capacity, a terminal beyond the
     * limit. */
    gr.edge[0][3] = 1;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL), MK_EINVAL);
    gr.edge[0][3] = 0;
    gr.edge[3][4] = 1; /* SW of (0,1) */
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL), MK_EINVAL);
    gr.edge[3][4] = 0;
    gr.edge[2][0] = -1;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL), MK_ERANGE);
    gr.edge[2][0] = MK_GC_CAP_MAX + 1;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL), MK_ERANGE);
    gr.edge[2][0] = 0;
    gr.term[5] = INT32_MIN;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL), MK_ERANGE);
    gr.term[5] = 0;
    TU_OK(mk_maxflow_grid(tu_cpu, &gr.g, &cut, NULL));
    /* A cut in the wrong memory for the context, or of the wrong type. */
    mk_image_t bad = cut;
    bad.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &bad, NULL), MK_EINVAL);
    bad = cut;
    bad.format = MK_FMT_RGB;
    bad.channels = 3;
    assert_int_equal(mk_maxflow_grid(tu_cpu, &gr.g, &bad, NULL), MK_EINVAL);
    mk_image_free(NULL, &cut);
    mk_image_free(NULL, &small);
    grid_free(&gr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_graphs),
        cmocka_unit_test(test_hand_grids),
        cmocka_unit_test(test_random_tiny_grids),
        cmocka_unit_test(test_random_tiny_graphs),
        cmocka_unit_test(test_random_grids_vs_dinic),
        cmocka_unit_test(test_grid_bad_args),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
