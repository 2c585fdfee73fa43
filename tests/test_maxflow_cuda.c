/* test_maxflow_cuda: the CUDA push-relabel max-flow against the CPU's Boykov-Kolmogorov on the same integer grid
 * graphs — flow values equal, cuts identical — on hand-built grids with known flows, random grids of many shapes
 * and capacity ranges, GrabCut graphs of real images, and warm starts of the solver (kernels/cuda/maxflow_cuda.h).
 * Every CUDA solve is also checked on the host (MASKD_MAXFLOW_CHECK=1: capacities, no excess that can reach the
 * sink, the cut, the flow value). Cuts are written into guarded, poisoned device images. Exits 77 (skipped)
 * without a GPU. */
#include "testutil.h"

#include "backend.h"
#include "cuda/maxflow_cuda.h"
#include "grabcut.h"
#include "grabcut_px.h"
#include "imageio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;
static const uint8_t poisons[2] = {0xa5, 0x5a};
static const int dx[4] = {1, 1, 0, -1}, dy[4] = {0, 1, 1, 1};

/* ---- graphs in host memory ---------------------------------------------------------------------------- */

typedef struct {
    int w, h;
    int32_t *term, *edge[4]; /* tight pitch */
} grid_t;

static grid_t grid_new(int w, int h)
{
    grid_t gr = {.w = w, .h = h};
    size_t n = (size_t)w * h;
    gr.term = calloc(n, sizeof(int32_t));
    assert_non_null(gr.term);
    for (int d = 0; d < 4; d++) {
        gr.edge[d] = calloc(n, sizeof(int32_t));
        assert_non_null(gr.edge[d]);
    }
    return gr;
}

static void grid_free(grid_t *gr)
{
    free(gr->term);
    for (int d = 0; d < 4; d++)
        free(gr->edge[d]);
}

static int edge_in(int w, int h, int x, int y, int d)
{
    int nx = x + dx[d], ny = y + dy[d];
    return nx >= 0 && nx < w && ny < h;
}

static mk_grid_graph_t host_graph(const grid_t *gr)
{
    mk_grid_graph_t g = {.width = gr->w, .height = gr->h, .pitch = (size_t)gr->w, .term = gr->term};
    for (int d = 0; d < 4; d++)
        g.edge[d] = gr->edge[d];
    return g;
}

/* The CPU reference: the flow value, and the cut into `cut` (w * h bytes). */
static int64_t cpu_solve(const grid_t *gr, uint8_t *cut)
{
    mk_grid_graph_t g = host_graph(gr);
    mk_image_t c = mk_image_desc(gr->w, gr->h, MK_FMT_GRAY, MK_U8);
    c.pitch = (size_t)gr->w;
    c.mem = MK_MEM_HOST;
    c.data = cut;
    mk_maxflow_stats_t st;
    TU_OK(mk_maxflow_grid(cpu, &g, &c, &st));
    return st.flow;
}

/* ---- graphs in device memory -------------------------------------------------------------------------- */

/* A host int32 plane as an image (F32 is the 4-byte element type images have). */
static mk_image_t plane_image(const int32_t *data, int w, int h)
{
    mk_image_t im = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
    im.pitch = (size_t)w * sizeof(int32_t);
    im.mem = MK_MEM_HOST;
    im.data = (void *)data;
    return im;
}

typedef struct {
    mk_image_t term, edge[4];
    mk_grid_graph_t g;
} dev_grid_t;

/* Device copies of the planes, `extra` elements of padding per row (one pitch for all). */
static void dev_upload(dev_grid_t *dg, const grid_t *gr, size_t extra)
{
    mk_image_t t = plane_image(gr->term, gr->w, gr->h);
    dg->term = tu_to_ctx(gpu, &t, extra * sizeof(int32_t));
    dg->g = (mk_grid_graph_t){.width = gr->w, .height = gr->h, .pitch = dg->term.pitch / sizeof(int32_t),
                              .term = dg->term.data};
    for (int d = 0; d < 4; d++) {
        mk_image_t e = plane_image(gr->edge[d], gr->w, gr->h);
        dg->edge[d] = tu_to_ctx(gpu, &e, extra * sizeof(int32_t));
        assert_int_equal(dg->edge[d].pitch, dg->term.pitch);
        dg->g.edge[d] = dg->edge[d].data;
    }
}

static void dev_free(dev_grid_t *dg)
{
    mk_image_free(gpu, &dg->term);
    for (int d = 0; d < 4; d++)
        mk_image_free(gpu, &dg->edge[d]);
}

static void assert_same_cut(const uint8_t *ref, const mk_image_t *got, const char *what)
{
    for (int y = 0; y < got->height; y++)
        for (int x = 0; x < got->width; x++) {
            uint8_t a = ref[(size_t)y * got->width + x], b = ((const uint8_t *)got->data)[(size_t)y * got->pitch + x];
            if (a != b)
                fail_msg("%s: cut at (%d, %d) is %d on the CPU, %d on CUDA", what, x, y, a, b);
        }
}

/* mk_maxflow_grid on CUDA (with and without stats, into two differently poisoned guarded cuts) against the CPU.
 * Returns the flow; the CPU's cut goes to ref_cut when it is not NULL. */
static int64_t compare(const grid_t *gr, size_t extra, const char *what, uint8_t *ref_cut)
{
    uint8_t *ref = malloc((size_t)gr->w * gr->h);
    assert_non_null(ref);
    int64_t flow = cpu_solve(gr, ref);
    dev_grid_t dg;
    dev_upload(&dg, gr, extra);
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        tu_dev_guard_alloc(gpu, &g, mk_image_desc(gr->w, gr->h, MK_FMT_GRAY, MK_U8), k ? 7 : 0, poisons[k]);
        mk_maxflow_stats_t st = {.flow = -2};
        TU_OK(mk_maxflow_grid(gpu, &dg.g, &g.img, k ? &st : NULL));
        TU_OK(mk_ctx_sync(gpu));
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        assert_same_cut(ref, &got, what);
        if (k) {
            if (st.flow != flow)
                fail_msg("%s: flow %lld on the CPU, %lld on CUDA", what, (long long)flow, (long long)st.flow);
            if (st.global_relabels < 1 || st.rounds < 0 || !(st.us > 0.0))
                fail_msg("%s: stats %d global relabels, %d rounds, %g us", what, st.global_relabels, st.rounds,
                         st.us);
        }
        mk_image_free(NULL, &got);
        tu_dev_guard_free(gpu, &g);
    }
    dev_free(&dg);
    if (ref_cut)
        memcpy(ref_cut, ref, (size_t)gr->w * gr->h);
    free(ref);
    return flow;
}

/* ---- hand-built grids --------------------------------------------------------------------------------- */

/* Compares with the CPU, then with the known flow and the known cut (a string of '0'/'1', row-major). */
static void known(const grid_t *gr, int64_t flow, const char *cut, const char *what)
{
    uint8_t *ref = malloc((size_t)gr->w * gr->h);
    assert_non_null(ref);
    int64_t got = compare(gr, 3, what, ref);
    if (got != flow)
        fail_msg("%s: flow %lld, expected %lld", what, (long long)got, (long long)flow);
    for (size_t i = 0; cut && i < (size_t)gr->w * gr->h; i++)
        if (ref[i] != cut[i] - '0')
            fail_msg("%s: cut of pixel %zu is %d, expected %c", what, i, ref[i], cut[i]);
    free(ref);
}

static void test_hand(void **state)
{
    (void)state;
    /* One pixel: excess cannot reach the sink (source side), sink capacity reaches it, nothing cannot. */
    const int32_t one[3] = {5, -5, 0};
    const char *one_cut[3] = {"1", "0", "1"};
    for (int i = 0; i < 3; i++) {
        grid_t g = grid_new(1, 1);
        g.term[0] = one[i];
        known(&g, 0, one_cut[i], "1x1");
        grid_free(&g);
    }
    /* Two pixels, 10 from the source, an edge of 7: the sink's 4 is the bottleneck, then the edge. */
    grid_t g = grid_new(2, 1);
    g.term[0] = 10;
    g.term[1] = -4;
    g.edge[0][0] = 7;
    known(&g, 4, "11", "2x1 sink-bound");
    g.term[1] = -20;
    known(&g, 7, "10", "2x1 edge-bound");
    grid_free(&g);
    /* The diagonals alone: SE from (0, 0) to (1, 1), SW from (1, 0) to (0, 1). */
    g = grid_new(2, 2);
    g.term[0] = 9;
    g.term[3] = -6;
    g.edge[1][0] = 4;
    known(&g, 4, "1110", "2x2 SE");
    grid_free(&g);
    g = grid_new(2, 2);
    g.term[1] = 9;
    g.term[2] = -6;
    g.edge[3][1] = 5;
    known(&g, 5, "1101", "2x2 SW");
    grid_free(&g);
    /* Long strips across many tiles of both tilings: source at one end, sink at the other, one narrow edge. */
    const int len = 300, narrow = 170;
    char *cut = malloc(len + 1);
    assert_non_null(cut);
    for (int vertical = 0; vertical < 2; vertical++) {
        g = vertical ? grid_new(1, len) : grid_new(len, 1);
        int d = vertical ? 2 : 0;
        g.term[0] = 1000;
        g.term[len - 1] = -1000;
        for (int i = 0; i + 1 < len; i++)
            g.edge[d][i] = i == narrow ? 7 : 50;
        for (int i = 0; i < len; i++)
            cut[i] = i <= narrow ? '1' : '0';
        cut[len] = 0;
        known(&g, 7, cut, vertical ? "1x300 strip" : "300x1 strip");
        grid_free(&g);
    }
    free(cut);
    /* A serpentine corridor through a 64x64 grid (every row, joined at alternate ends): a residual path of 4096
     * pixels with one narrow edge in row 40; everything before it in corridor order is on the source side. */
    const int n = 64, row = 40, col = 23;
    g = grid_new(n, n);
    char *snake = malloc((size_t)n * n + 1);
    assert_non_null(snake);
    for (int y = 0; y < n; y++) {
        for (int x = 0; x + 1 < n; x++)
            g.edge[0][y * n + x] = y == row && x == col ? 13 : 100;
        if (y + 1 < n)
            g.edge[2][y * n + (y % 2 ? 0 : n - 1)] = 100;
        for (int x = 0; x < n; x++) {
            int pos = y % 2 ? n - 1 - x : x; /* position along the row in corridor order */
            int before = y < row || (y == row && pos <= (row % 2 ? n - 1 - col - 1 : col));
            snake[y * n + x] = before ? '1' : '0';
        }
    }
    snake[n * n] = 0;
    g.term[0] = 1000000;
    g.term[(n - 1) * n + (n % 2 ? n - 1 : 0)] = -1000000;
    known(&g, 13, snake, "64x64 serpentine");
    free(snake);
    grid_free(&g);
}

/* ---- random grids ------------------------------------------------------------------------------------- */

typedef enum { MIXED, ALL_SOURCE, ALL_SINK, NO_EDGES } rand_kind_t;

static grid_t grid_random(tu_rng_t *r, int w, int h, int tmax, int emax, rand_kind_t kind)
{
    grid_t g = grid_new(w, h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            int t = tu_rand_int(r, -tmax, tmax);
            if (kind == ALL_SOURCE)
                t = t < 0 ? -t : t;
            else if (kind == ALL_SINK)
                t = t > 0 ? -t : t;
            g.term[i] = tu_rand_int(r, 0, 4) ? t : 0;
            for (int d = 0; d < 4; d++)
                g.edge[d][i] = kind != NO_EDGES && edge_in(w, h, x, y, d) && tu_rand_int(r, 0, 6) ? tu_rand_int(r, 0, emax)
                                                                                               : 0;
        }
    return g;
}

static void test_random(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 1},  {1, 2},   {2, 1},   {1, 97},  {97, 1},  {1, 1000}, {1000, 1},
                                   {7, 5},  {31, 33}, {32, 32}, {33, 17}, {33, 31}, {48, 16},  {64, 64},
                                   {65, 63}, {100, 3}, {3, 100}, {320, 240}};
    static const struct {
        int tmax, emax;
        rand_kind_t kind;
        const char *name;
    } caps[] = {
        {100, 100, MIXED, "small"},
        {2000, 300, MIXED, "terminal-heavy"},
        {30, 3000, MIXED, "edge-heavy"},
        {MK_GC_CAP_MAX / 16, MK_GC_CAP_MAX / 16, MIXED, "cap/16"},
        {MK_GC_CAP_MAX, MK_GC_CAP_MAX, MIXED, "cap"},
        {500, 100, ALL_SOURCE, "all-source"},
        {500, 100, ALL_SINK, "all-sink"},
        {500, 100, NO_EDGES, "no edges"},
    };
    tu_rng_t r = {4711};
    int i = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++, i++) {
            char what[128];
            snprintf(what, sizeof what, "random %dx%d %s", sizes[s][0], sizes[s][1], caps[c].name);
            grid_t g = grid_random(&r, sizes[s][0], sizes[s][1], caps[c].tmax, caps[c].emax, caps[c].kind);
            compare(&g, i % 3 ? 0 : 13, what, NULL);
            grid_free(&g);
        }
    for (int k = 0; k < 40; k++) {
        int w = tu_rand_int(&r, 1, 200), h = tu_rand_int(&r, 1, 150);
        char what[128];
        snprintf(what, sizeof what, "random %d: %dx%d", k, w, h);
        grid_t g = grid_random(&r, w, h, tu_rand_int(&r, 1, 5000), tu_rand_int(&r, 0, 5000), MIXED);
        compare(&g, (size_t)tu_rand_int(&r, 0, 40), what, NULL);
        grid_free(&g);
    }
    /* The largest ROI the pipeline hands over. */
    grid_t g = grid_random(&r, 1920, 1080, 3000, 1000, MIXED);
    compare(&g, 0, "random 1920x1080", NULL);
    grid_free(&g);
}

/* ---- GrabCut graphs ----------------------------------------------------------------------------------- */

/* A GrabCut-like graph of an RGB image: OpenCV's N-links (beta over the whole image, gamma 50) and T-links of two
 * colour models learnt from a labelling — fg(p) for the pixels of the rectangle x1..x2, y1..y2 (inclusive) whose
 * `fg` byte is set (all of them when fg is NULL), the rest background — each with K = 5 components that split the
 * pixels by brightness. Outside the rectangle T-links are hard background (lambda 450). */
static grid_t grabcut_graph(const mk_image_t *img, int x1, int y1, int x2, int y2, const uint8_t *fg)
{
    const int w = img->width, h = img->height, K = 5;
    grid_t g = grid_new(w, h);
    mk_gc_moments_t mb[5], mf[5];
    memset(mb, 0, sizeof mb);
    memset(mf, 0, sizeof mf);
    int64_t nb = 0, nf = 0, sum = 0;
#define PX(x, y) ((const uint8_t *)mk_image_row(img, 0, (y)) + 3 * (size_t)(x))
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *c = PX(x, y);
            int k = (c[0] + c[1] + c[2]) * K / 766;
            int in = x >= x1 && x <= x2 && y >= y1 && y <= y2 && (!fg || fg[(size_t)y * w + x]);
            mk_gc_moments_add(in ? &mf[k] : &mb[k], c[0], c[1], c[2]);
            *(in ? &nf : &nb) += 1;
            for (int d = 0; d < 4; d++)
                if (edge_in(w, h, x, y, d)) {
                    const uint8_t *o = PX(x + dx[d], y + dy[d]);
                    sum += mk_gc_dist2_int(c[0], c[1], c[2], o[0], o[1], o[2]);
                }
        }
    mk_gc_comp_t cb[5], cf[5];
    for (int k = 0; k < K; k++) {
        if (mk_gc_comp_learn(&mb[k], nb, &cb[k], NULL))
            cb[k].coef = 0.0;
        if (mk_gc_comp_learn(&mf[k], nf, &cf[k], NULL))
            cf[k].coef = 0.0;
    }
    double beta = mk_gc_beta(sum, mk_gc_pairs(w, h));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            const uint8_t *c = PX(x, y);
            for (int d = 0; d < 4; d++)
                if (edge_in(w, h, x, y, d)) {
                    const uint8_t *o = PX(x + dx[d], y + dy[d]);
                    g.edge[d][i] = mk_gc_nlink(mk_gc_dist2_int(c[0], c[1], c[2], o[0], o[1], o[2]), beta, 50.0, d & 1,
                                               MK_GC_CAP_SCALE);
                }
            int in = x >= x1 && x <= x2 && y >= y1 && y <= y2;
            int label = !in ? MK_GC_BGD : (!fg || fg[i]) ? MK_GC_PR_FGD : MK_GC_PR_BGD;
            double source, sink;
            mk_gc_tlinks(label, cb, cf, K, 450.0, c[0], c[1], c[2], &source, &sink);
            g.term[i] = mk_gc_term(source, sink, MK_GC_CAP_SCALE);
        }
#undef PX
    return g;
}

/* A benchmark image of the shared data and its rectangle (bboxes/NAME.txt); 0 (and a skip) when absent. */
static int load_grabcut(const char *name, const char *file, mk_image_t *img, int box[4])
{
    char path[512], rel[128];
    snprintf(rel, sizeof rel, "grabcut/bboxes/%s.txt", name);
    if (!tu_data_path(path, sizeof path, rel))
        return 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = fscanf(f, "%d %d %d %d", &box[0], &box[1], &box[2], &box[3]);
    fclose(f);
    assert_int_equal(n, 4);
    snprintf(rel, sizeof rel, "grabcut/images/%s", file);
    if (!tu_data_path(path, sizeof path, rel))
        return 0;
    TU_OK(mk_imageio_load(path, MK_FMT_RGB, img));
    return 1;
}

static void test_grabcut_graphs(void **state)
{
    (void)state;
    static const char *const images[][2] = {{"book", "book.bmp"}, {"elefant", "elefant.bmp"},
                                            {"scissors", "scissors.jpg"}, {"person1", "person1.jpg"}};
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
        mk_image_t img;
        int b[4];
        if (!load_grabcut(images[i][0], images[i][1], &img, b))
            return;
        char what[128];
        snprintf(what, sizeof what, "GrabCut graph of %s (%dx%d)", images[i][0], img.width, img.height);
        grid_t g = grabcut_graph(&img, b[0], b[1], b[2], b[3], NULL);
        compare(&g, 0, what, NULL);
        grid_free(&g);
        mk_image_free(NULL, &img);
    }
    /* The detector's sample photo (640x424) with a rectangle around its middle. */
    char path[512];
    if (!tu_data_path(path, sizeof path, "images/person.jpg"))
        return;
    mk_image_t img;
    TU_OK(mk_imageio_load(path, MK_FMT_RGB, &img));
    grid_t g = grabcut_graph(&img, img.width / 4, img.height / 8, img.width * 3 / 4, img.height - 4, NULL);
    compare(&g, 5, "GrabCut graph of person.jpg", NULL);
    grid_free(&g);
    mk_image_free(NULL, &img);
}

/* ---- the solver: warm starts, in-place graphs, asynchronous solves, errors --------------------------- */

/* At least `bytes` of device memory, contiguous (rows of 4096 bytes). */
static mk_image_t dev_bytes(size_t bytes)
{
    mk_image_t b = mk_image_desc(4096, (int)((bytes + 4095) / 4096), MK_FMT_GRAY, MK_U8);
    b.pitch = 4096;
    TU_OK(mk_image_alloc(gpu, &b, MK_MEM_DEVICE));
    return b;
}

/* Solves with stats into a fresh device cut; checks flow and cut against the CPU's. */
static void solver_case(mk_pr_solver_t *s, const grid_t *gr, const char *what)
{
    uint8_t *ref = malloc((size_t)gr->w * gr->h);
    assert_non_null(ref);
    int64_t flow = cpu_solve(gr, ref);
    tu_dev_guard_t g;
    tu_dev_guard_alloc(gpu, &g, mk_image_desc(gr->w, gr->h, MK_FMT_GRAY, MK_U8), 5, poisons[0]);
    mk_maxflow_stats_t st = {.flow = -2};
    TU_OK(mk_pr_solve(s, g.img.data, g.img.pitch, NULL, &st));
    if (st.flow != flow)
        fail_msg("%s: flow %lld on the CPU, %lld on CUDA", what, (long long)flow, (long long)st.flow);
    mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[0], what);
    assert_same_cut(ref, &got, what);
    mk_image_free(NULL, &got);
    tu_dev_guard_free(gpu, &g);
    free(ref);
}

static void solver_load(mk_pr_solver_t *s, const grid_t *gr, dev_grid_t *dg)
{
    dev_upload(dg, gr, 9);
    TU_OK(mk_pr_set_edges(s, dg->g.edge, dg->g.pitch));
    TU_OK(mk_pr_set_term(s, dg->g.term, dg->g.pitch));
}

static void test_warm_start(void **state)
{
    (void)state;
    mk_image_t img;
    int b[4];
    if (!load_grabcut("book", "book.bmp", &img, b))
        return;
    const int w = img.width, h = img.height; /* 640x480: cold solves on 16 x 16 tiles, warm ones on 32 x 32 */
    mk_pr_solver_t *s = NULL;
    TU_OK(mk_pr_create(gpu, w, h, NULL, 0, &s));
    dev_grid_t d1, d2, d3;

    /* A first GrabCut iteration, cold. */
    grid_t g1 = grabcut_graph(&img, b[0], b[1], b[2], b[3], NULL);
    solver_load(s, &g1, &d1);
    solver_case(s, &g1, "iteration 1");

    /* The next iteration's T-links (models learnt from the cut), the N-links as they are: warm, then cold. */
    uint8_t *cut1 = malloc((size_t)w * h);
    assert_non_null(cut1);
    cpu_solve(&g1, cut1);
    grid_t g2 = grabcut_graph(&img, b[0], b[1], b[2], b[3], cut1);
    dev_upload(&d2, &g2, 9);
    TU_OK(mk_pr_set_term(s, d2.g.term, d2.g.pitch));
    solver_case(s, &g2, "iteration 2, warm");
    TU_OK(mk_pr_reset(s));
    solver_case(s, &g2, "iteration 2, cold");
    TU_OK(mk_pr_set_term(s, d1.g.term, d1.g.pitch));
    solver_case(s, &g1, "iteration 1 again, warm from iteration 2");

    /* The next frame: the image moved by a few pixels (new N-links and T-links), warm from the last flow, which is
     * clamped to the new capacities. */
    mk_image_t moved = img;
    moved.data = (uint8_t *)mk_image_row(&img, 0, 3) + 3 * 5;
    moved.width = w - 5;
    moved.height = h - 3;
    grid_t g3 = grabcut_graph(&moved, b[0], b[1], b[2] - 5, b[3] - 3, cut1);
    mk_pr_solver_t *s3 = NULL;
    TU_OK(mk_pr_create(gpu, g3.w, g3.h, NULL, 0, &s3));
    solver_load(s3, &g3, &d3);
    solver_case(s3, &g3, "moved frame, cold");
    TU_OK(mk_pr_set_edges(s3, d1.g.edge, d1.g.pitch)); /* the first frame's graph cut to the new size */
    TU_OK(mk_pr_set_term(s3, d1.g.term, d1.g.pitch));
    grid_t g1c = grid_new(g3.w, g3.h);
    for (int y = 0; y < g3.h; y++)
        for (int x = 0; x < g3.w; x++) {
            size_t i = (size_t)y * g3.w + x, j = (size_t)y * w + x;
            g1c.term[i] = g1.term[j];
            for (int d = 0; d < 4; d++)
                g1c.edge[d][i] = edge_in(g3.w, g3.h, x, y, d) ? g1.edge[d][j] : 0;
        }
    solver_case(s3, &g1c, "first frame's graph, warm from the moved frame (edges leaving the grid ignored)");
    mk_pr_destroy(s3);

    /* The graph written in place into the solver's own arrays. */
    mk_pr_graph_t own = mk_pr_graph(s);
    TU_OK(mk_cuda_copy2d(gpu, own.term, own.pitch * sizeof(int32_t), g2.term, (size_t)w * sizeof(int32_t),
                         (size_t)w * sizeof(int32_t), (size_t)h));
    for (int d = 0; d < 4; d++)
        TU_OK(mk_cuda_copy2d(gpu, own.edge[d], own.pitch * sizeof(int32_t), g2.edge[d], (size_t)w * sizeof(int32_t),
                             (size_t)w * sizeof(int32_t), (size_t)h));
    TU_OK(mk_pr_set_edges(s, (const int32_t *const *)own.edge, own.pitch));
    TU_OK(mk_pr_set_term(s, own.term, own.pitch));
    TU_OK(mk_ctx_sync(gpu));
    solver_case(s, &g2, "iteration 2 in place");

    /* Asynchronous: the flow to device memory, the outcome from mk_pr_check. */
    uint8_t *ref = malloc((size_t)w * h);
    assert_non_null(ref);
    int64_t flow = cpu_solve(&g1, ref);
    TU_OK(mk_pr_set_edges(s, d1.g.edge, d1.g.pitch));
    TU_OK(mk_pr_set_term(s, d1.g.term, d1.g.pitch));
    mk_image_t cut = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8), fl = mk_image_desc(8, 1, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(gpu, &cut, MK_MEM_DEVICE));
    TU_OK(mk_image_alloc(gpu, &fl, MK_MEM_DEVICE));
    TU_OK(mk_pr_solve(s, cut.data, cut.pitch, fl.data, NULL));
    TU_OK(mk_pr_check(s));
    mk_image_t hcut = tu_to_host(gpu, &cut), hfl = tu_to_host(gpu, &fl);
    int64_t got;
    memcpy(&got, hfl.data, sizeof got);
    if (got != flow)
        fail_msg("asynchronous solve: flow %lld on the CPU, %lld on CUDA", (long long)flow, (long long)got);
    assert_same_cut(ref, &hcut, "asynchronous solve");

    /* A solve that is not allowed to converge: MK_ESTATE, flow -1 in the stats and on the device. */
    mk_pr_params_t p = mk_pr_params_default();
    p.max_rounds = 1;
    TU_OK(mk_pr_set_params(s, &p));
    TU_OK(mk_pr_reset(s));
    mk_maxflow_stats_t st = {0};
    assert_int_equal(mk_pr_solve(s, cut.data, cut.pitch, fl.data, &st), MK_ESTATE);
    assert_int_equal(st.flow, -1);
    assert_int_equal(mk_pr_check(s), MK_ESTATE);
    mk_image_free(NULL, &hfl);
    hfl = tu_to_host(gpu, &fl);
    memcpy(&got, hfl.data, sizeof got);
    assert_int_equal(got, -1);

    mk_image_free(NULL, &hcut);
    mk_image_free(NULL, &hfl);
    mk_image_free(gpu, &cut);
    mk_image_free(gpu, &fl);
    free(ref);
    free(cut1);
    dev_free(&d1);
    dev_free(&d2);
    dev_free(&d3);
    grid_free(&g1);
    grid_free(&g1c);
    grid_free(&g2);
    grid_free(&g3);
    mk_pr_destroy(s);
    mk_image_free(NULL, &img);
}

/* A solver on a caller's buffer (the way a scratch slot is used), with other parameters. */
static void test_solver_buffer(void **state)
{
    (void)state;
    tu_rng_t r = {31337};
    grid_t g = grid_random(&r, 77, 45, 400, 300, MIXED);
    size_t bytes = mk_pr_device_bytes(g.w, g.h);
    assert_true(bytes > 0);
    mk_image_t buf = dev_bytes(bytes);
    TU_OK(mk_image_memset(gpu, &buf, 0x7f)); /* any flow is a valid start once clamped */
    mk_pr_solver_t *s = NULL;
    TU_OK(mk_pr_create(gpu, g.w, g.h, buf.data, bytes, &s));
    dev_grid_t dg;
    solver_load(s, &g, &dg);
    /* the last four: relabels capped at distances 1, 2 and 16 (a cap every pass reaches), and never capped */
    const mk_pr_params_t params[] = {{1, 1, 1, 1000, 0, 0},  {3, 2, 5, 1000, 0, 0},  {64, 200, 4096, 1000, 0, 0},
                                     {8, 0, 64, 1000, 0, 0}, {8, 12, 8, 1000, 1, 0}, {8, 3, 8, 1000, 30, 0},
                                     {8, 0, 8, 1000, 0, 1},  {8, 0, 8, 1000, 0, 2},  {8, 2, 8, 1000, 2, 16},
                                     {8, 0, 8, 1000, 0, -1}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char what[160];
        snprintf(what, sizeof what, "sweeps %d, push passes %d then %d, margin %d, relabel cap %d", params[i].sweeps,
                 params[i].push_passes, params[i].later_passes, params[i].margin, params[i].relabel_cap);
        TU_OK(mk_pr_set_params(s, &params[i]));
        solver_case(s, &g, what);
        TU_OK(mk_pr_reset(s));
    }
    mk_pr_destroy(s);
    dev_free(&dg);
    mk_image_free(gpu, &buf);
    grid_free(&g);
}

static void test_solver_errors(void **state)
{
    (void)state;
    mk_pr_solver_t *s = NULL;
    assert_int_equal(mk_pr_create(cpu, 8, 8, NULL, 0, &s), MK_EINVAL);
    assert_int_equal(mk_pr_create(gpu, 0, 8, NULL, 0, &s), MK_ERANGE);
    assert_int_equal(mk_pr_create(gpu, 8, MK_IMAGE_MAX_DIM + 1, NULL, 0, &s), MK_ERANGE);
    assert_int_equal(mk_pr_device_bytes(0, 1), 0);
    size_t bytes = mk_pr_device_bytes(8, 8);
    mk_image_t buf = dev_bytes(bytes + 256);
    assert_int_equal(mk_pr_create(gpu, 8, 8, buf.data, bytes - 1, &s), MK_EINVAL);
    assert_int_equal(mk_pr_create(gpu, 8, 8, (char *)buf.data + 1, bytes, &s), MK_EINVAL);
    assert_null(s);
    TU_OK(mk_pr_create(gpu, 8, 8, buf.data, bytes, &s));
    mk_pr_params_t p = mk_pr_params_default();
    p.sweeps = 0;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p = mk_pr_params_default();
    p.max_rounds = 0;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p = mk_pr_params_default();
    p.push_passes = -1;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p = mk_pr_params_default();
    p.later_passes = -1;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p.later_passes = 1025;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p = mk_pr_params_default();
    p.relabel_cap = -2;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p.relabel_cap = (1 << 20) + 1;
    assert_int_equal(mk_pr_set_params(s, &p), MK_ERANGE);
    p.relabel_cap = -1;
    TU_OK(mk_pr_set_params(s, &p));
    assert_int_equal(mk_pr_check(s), MK_ESTATE); /* nothing solved yet */
    mk_image_t cut = mk_image_desc(8, 8, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(gpu, &cut, MK_MEM_DEVICE));
    assert_int_equal(mk_pr_solve(s, NULL, 8, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_pr_solve(s, cut.data, 7, NULL, NULL), MK_EINVAL);
    mk_pr_graph_t own = mk_pr_graph(s);
    const int32_t *none[4] = {own.edge[0], NULL, own.edge[2], own.edge[3]};
    assert_int_equal(mk_pr_set_edges(s, none, own.pitch), MK_EINVAL);
    assert_int_equal(mk_pr_set_edges(s, (const int32_t *const *)own.edge, 7), MK_EINVAL);
    assert_int_equal(mk_pr_set_term(s, NULL, own.pitch), MK_EINVAL);
    mk_pr_destroy(s);
    mk_pr_destroy(NULL);
    mk_image_free(gpu, &cut);
    mk_image_free(gpu, &buf);
}

int main(void)
{
    int start = tu_cuda_main("CUDA max-flow tests", &cpu, &gpu);
    if (start)
        return start;
    setenv("MASKD_MAXFLOW_CHECK", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),         cmocka_unit_test(test_random),
        cmocka_unit_test(test_grabcut_graphs), cmocka_unit_test(test_warm_start),
        cmocka_unit_test(test_solver_buffer), cmocka_unit_test(test_solver_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}
