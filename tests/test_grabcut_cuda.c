/* test_grabcut_cuda: the CUDA GrabCut against the CPU reference — stage by stage (k-means labels and GMMs bit for
 * bit, N-links identical, T-links equal but for rare last-bit exp()/log() differences of 1) and whole (masks of
 * the GrabCut benchmark images, random masks, the fixed-model cut, the binary mask), with guard bands around the
 * device masks, repeated calls, statistics and bad input. Exits 77 (skipped) without a GPU. */
#include "testutil.h"

#include <stdio.h>

#ifdef MK_HAVE_CUDA
#include "cpu/grabcut_cpu.h"
#include "cuda/grabcut_cuda.h"
#include "grabcut.h"
#include "imageio.h"
#include "resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;
static const uint8_t poisons[2] = {0xa5, 0x5a};

/* Benchmark images of ../shared/data/grabcut (small and large, portrait and landscape, BMP and JPEG). */
static const char *const bench_images[] = {"teddy.jpg", "106024.jpg", "llama.bmp",  "person7.jpg",
                                           "flower.jpg", "21077.jpg", "banana1.bmp"};
enum { N_BENCH = sizeof bench_images / sizeof bench_images[0] };

/* ---- inputs ----------------------------------------------------------------------------------------------- */

/* A benchmark image (BGR, host) and its rectangle (bboxes/NAME.txt: 0-based inclusive corners); 0 if absent. */
static int load_bench(const char *file, mk_image_t *img, mk_rect_t *rect)
{
    char rel[256], path[4096], name[128];
    snprintf(name, sizeof name, "%s", file);
    *strrchr(name, '.') = 0;
    snprintf(rel, sizeof rel, "grabcut/images/%s", file);
    if (!tu_data_path(path, sizeof path, rel))
        return 0;
    TU_OK(mk_imageio_load(path, MK_FMT_BGR, img));
    snprintf(rel, sizeof rel, "grabcut/bboxes/%s.txt", name);
    if (!tu_data_path(path, sizeof path, rel))
        fail_msg("%s has no box", file);
    FILE *f = fopen(path, "r");
    int x1, y1, x2, y2;
    if (!f || fscanf(f, "%d %d %d %d", &x1, &y1, &x2, &y2) != 4)
        fail_msg("cannot read %s", path);
    fclose(f);
    *rect = (mk_rect_t){x1, y1, x2 - x1 + 1, y2 - y1 + 1};
    return 1;
}

/* A host label mask: 0 OpenCV's rectangle (BGD outside, PR_FGD inside), 1 blocks of random labels, 2 random labels
 * per pixel, 3 PR_* blocks with a hard BGD border and a few FGD pixels, 4 PR_FGD with a sparse grid of PR_BGD
 * pixels (no hard label: the background class may lose every pixel in the first cut). Both GMMs get samples when
 * w * h >= 2. */
static mk_image_t label_mask(tu_rng_t *r, int w, int h, int kind)
{
    mk_image_t m = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &m, MK_MEM_HOST));
    int bs = tu_rand_int(r, 1, 12), rx = tu_rand_int(r, 0, w / 3), ry = tu_rand_int(r, 0, h / 3);
    int rw = w - rx - tu_rand_int(r, 0, w / 3), rh = h - ry - tu_rand_int(r, 0, h / 3);
    uint8_t block[64][64];
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            block[i][j] = (uint8_t)tu_rand_int(r, 0, 3);
    for (int y = 0; y < h; y++) {
        uint8_t *row = mk_image_row(&m, 0, y);
        for (int x = 0; x < w; x++) {
            uint8_t l;
            switch (kind) {
            case 0: l = x >= rx && x < rx + rw && y >= ry && y < ry + rh ? MK_GC_PR_FGD : MK_GC_BGD; break;
            case 1: l = block[(y / bs) % 64][(x / bs) % 64]; break;
            case 2: l = (uint8_t)tu_rand_int(r, 0, 3); break;
            case 4: l = x % 9 == 4 && y % 7 == 3 ? MK_GC_PR_BGD : MK_GC_PR_FGD; break;
            default:
                l = x == 0 || y == 0 || x == w - 1 || y == h - 1 ? MK_GC_BGD
                    : tu_rand_int(r, 0, 50) == 0                  ? MK_GC_FGD
                                                                  : 2 + (block[(y / bs) % 64][(x / bs) % 64] & 1);
            }
            row[x] = l;
        }
    }
    /* Both sample sets non-empty: the first pixel background, the last foreground. */
    if (w * h >= 2) {
        uint8_t *first = mk_image_row(&m, 0, 0), *last = mk_image_row(&m, 0, h - 1);
        if (first[0] & 1)
            first[0] = MK_GC_PR_BGD;
        if (!(last[w - 1] & 1))
            last[w - 1] = MK_GC_PR_FGD;
    }
    return m;
}

/* A scene for GrabCut: a vertical gradient, a few ellipses of other colours, noise of +-noise. */
static mk_image_t scene(tu_rng_t *r, int w, int h, int noise)
{
    mk_image_t img = mk_image_desc(w, h, MK_FMT_BGR, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    int top[3], bottom[3], col[4][3], cx[4], cy[4], ax[4], ay[4];
    for (int c = 0; c < 3; c++) {
        top[c] = tu_rand_int(r, 0, 255);
        bottom[c] = tu_rand_int(r, 0, 255);
    }
    for (int e = 0; e < 4; e++) {
        for (int c = 0; c < 3; c++)
            col[e][c] = tu_rand_int(r, 0, 255);
        cx[e] = tu_rand_int(r, 0, w - 1);
        cy[e] = tu_rand_int(r, 0, h - 1);
        ax[e] = tu_rand_int(r, 1, w / 3 + 1);
        ay[e] = tu_rand_int(r, 1, h / 3 + 1);
    }
    for (int y = 0; y < h; y++) {
        uint8_t *row = mk_image_row(&img, 0, y);
        for (int x = 0; x < w; x++) {
            int v[3];
            for (int c = 0; c < 3; c++)
                v[c] = top[c] + (bottom[c] - top[c]) * y / (h > 1 ? h - 1 : 1);
            for (int e = 0; e < 4; e++) {
                double dx = (double)(x - cx[e]) / ax[e], dy = (double)(y - cy[e]) / ay[e];
                if (dx * dx + dy * dy <= 1)
                    memcpy(v, col[e], sizeof v);
            }
            for (int c = 0; c < 3; c++)
                row[3 * x + c] = mk_px_sat_u8(v[c] + (noise ? tu_rand_int(r, -noise, noise) : 0));
        }
    }
    return img;
}

/* A copy of a host image of `format` filled with one colour pattern: 0 constant, 1 two colours, 2 four levels. */
static mk_image_t flat_image(int w, int h, int pattern)
{
    mk_image_t img = mk_image_desc(w, h, MK_FMT_BGR, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int y = 0; y < h; y++) {
        uint8_t *row = mk_image_row(&img, 0, y);
        for (int x = 0; x < w; x++) {
            int v = pattern == 0 ? 90 : pattern == 1 ? ((x + y) % 2 ? 200 : 10) : 60 * ((x / 3 + y) % 4);
            row[3 * x] = (uint8_t)v;
            row[3 * x + 1] = (uint8_t)(255 - v);
            row[3 * x + 2] = (uint8_t)(v / 2);
        }
    }
    return img;
}

static mk_image_t new_host(int w, int h)
{
    mk_image_t m = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &m, MK_MEM_HOST));
    return m;
}

static uint8_t at(const mk_image_t *m, int x, int y)
{
    return ((const uint8_t *)mk_image_row(m, 0, y))[x];
}

/* Intersection over union of two label masks' foregrounds (FGD, PR_FGD); 1 when both are empty. */
/* A w x h host mask of the rectangle's labels: PR_FGD inside, BGD outside. */
static mk_image_t rect_labels(int w, int h, const mk_rect_t *r)
{
    mk_image_t m = new_host(w, h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            ((uint8_t *)mk_image_row(&m, 0, y))[x] =
                x >= r->x && x < r->x + r->width && y >= r->y && y < r->y + r->height ? MK_GC_PR_FGD : MK_GC_BGD;
    return m;
}

static double fg_iou(const mk_image_t *a, const mk_image_t *b, long *differ)
{
    long inter = 0, uni = 0, diff = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++) {
            int fa = at(a, x, y) & 1, fb = at(b, x, y) & 1;
            inter += fa && fb;
            uni += fa || fb;
            diff += at(a, x, y) != at(b, x, y);
        }
    if (differ)
        *differ = diff;
    return uni ? (double)inter / (double)uni : 1.0;
}

static void assert_same_labels(const mk_image_t *a, const mk_image_t *b, const char *what)
{
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            if (at(a, x, y) != at(b, x, y))
                fail_msg("%s: CPU %d, CUDA %d at (%d,%d)", what, at(a, x, y), at(b, x, y), x, y);
}

static void assert_same_gmm(const mk_gmm_t *a, const mk_gmm_t *b, const char *what)
{
    if (a->K != b->K)
        fail_msg("%s: K %d vs %d", what, a->K, b->K);
    for (int k = 0; k < a->K; k++)
        if (memcmp(&a->weight[k], &b->weight[k], sizeof a->weight[k]) ||
            memcmp(a->mean[k], b->mean[k], sizeof a->mean[k]) || memcmp(a->cov[k], b->cov[k], sizeof a->cov[k]))
            fail_msg("%s: component %d differs: weight %.17g / %.17g, mean %.17g / %.17g, cov00 %.17g / %.17g", what,
                     k, a->weight[k], b->weight[k], a->mean[k][0], b->mean[k][0], a->cov[k][0][0], b->cov[k][0][0]);
}

/* ---- k-means -------------------------------------------------------------------------------------------- */

/* CPU k-means of both sample sets vs the CUDA stage, label by label in raster order. */
static void kmeans_case(const mk_image_t *img, const mk_image_t *mask, int K, uint64_t seed, const char *what)
{
    uint8_t *samples[2], *labels[2];
    int64_t n[2], next[2] = {0, 0};
    for (int g = 0; g < 2; g++) {
        TU_OK(mk_gc_samples_cpu(img, mask, g, &samples[g], &n[g]));
        assert_true(n[g] > 0);
        labels[g] = malloc((size_t)n[g]);
        assert_non_null(labels[g]);
        TU_OK(mk_gc_kmeans_cpu(samples[g], n[g], K, seed, labels[g], NULL));
    }
    mk_image_t dimg = tu_to_ctx(gpu, img, 5), dmask = tu_to_ctx(gpu, mask, 3);
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        tu_dev_guard_alloc(gpu, &g, mk_image_desc(img->width, img->height, MK_FMT_GRAY, MK_U8), 7, poisons[k]);
        TU_OK(mk_gc_kmeans_cuda(gpu, &dimg, &dmask, K, seed, &g.img));
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        next[0] = next[1] = 0;
        for (int y = 0; y < img->height; y++)
            for (int x = 0; x < img->width; x++) {
                int gm = mk_gc_is_fg(at(mask, x, y));
                int want = labels[gm][next[gm]++];
                if (at(&got, x, y) != want)
                    fail_msg("%s: k-means label of (%d,%d) (sample %lld of the %s set): CPU %d, CUDA %d", what, x, y,
                             (long long)next[gm] - 1, gm ? "foreground" : "background", want, at(&got, x, y));
            }
        mk_image_free(NULL, &got);
        tu_dev_guard_free(gpu, &g);
    }
    mk_image_free(gpu, &dimg);
    mk_image_free(gpu, &dmask);
    for (int g = 0; g < 2; g++) {
        free(samples[g]);
        free(labels[g]);
    }
}

static void test_kmeans_random(void **state)
{
    (void)state;
    tu_rng_t r = {515};
    static const int sizes[][2] = {{1, 2}, {2, 1}, {3, 3}, {17, 5}, {5, 40}, {64, 48}, {333, 217}, {640, 480}};
    int cases = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int kind = 0; kind < 4; kind++) {
            int w = sizes[s][0], h = sizes[s][1], K = tu_rand_int(&r, 1, MK_GC_MAX_K);
            mk_image_t img = kind % 2 ? scene(&r, w, h, 6) : tu_random_image(tu_rand(&r), w, h, MK_FMT_BGR);
            mk_image_t mask = label_mask(&r, w, h, kind);
            char what[128];
            snprintf(what, sizeof what, "k-means %dx%d mask kind %d K %d", w, h, kind, K);
            kmeans_case(&img, &mask, K, tu_rand(&r), what);
            mk_image_free(NULL, &img);
            mk_image_free(NULL, &mask);
            cases++;
        }
    print_message("k-means parity: %d random cases\n", cases);
}

/* Few distinct colours (all D^2 zero: the rank fallback), fewer samples than K, one sample. */
static void test_kmeans_degenerate(void **state)
{
    (void)state;
    tu_rng_t r = {99};
    for (int pattern = 0; pattern < 3; pattern++)
        for (int K = 1; K <= MK_GC_MAX_K; K++) {
            mk_image_t img = flat_image(37, 23, pattern), mask = label_mask(&r, 37, 23, 1);
            char what[96];
            snprintf(what, sizeof what, "k-means pattern %d K %d", pattern, K);
            kmeans_case(&img, &mask, K, 1000 + (uint64_t)K, what);
            mk_image_free(NULL, &img);
            mk_image_free(NULL, &mask);
        }
    /* 1 to 4 foreground samples for K = 5. */
    for (int nfg = 1; nfg <= 4; nfg++) {
        mk_image_t img = tu_random_image(70 + (uint64_t)nfg, 19, 11, MK_FMT_BGR), mask = new_host(19, 11);
        TU_OK(mk_image_memset(cpu, &mask, MK_GC_BGD));
        for (int i = 0; i < nfg; i++)
            ((uint8_t *)mk_image_row(&mask, 0, 2 + 2 * i))[3 + 4 * i] = MK_GC_PR_FGD;
        kmeans_case(&img, &mask, 5, MK_GC_SEED, "k-means few samples");
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
    }
}

static void test_kmeans_real(void **state)
{
    (void)state;
    int done = 0;
    for (int i = 0; i < N_BENCH; i += 2) {
        mk_image_t img = {0}, mask = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        mask = new_host(img.width, img.height);
        TU_OK(mk_image_memset(cpu, &mask, MK_GC_BGD));
        for (int y = rect.y; y < rect.y + rect.height; y++)
            memset((uint8_t *)mk_image_row(&mask, 0, y) + rect.x, MK_GC_PR_FGD, (size_t)rect.width);
        kmeans_case(&img, &mask, 5, MK_GC_SEED, bench_images[i]);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
        done++;
    }
    print_message("k-means parity: %d benchmark images\n", done);
}

/* ---- the GMMs ------------------------------------------------------------------------------------------- */

/* mk_grabcut with `iters` iterations on both backends from the same mask: the models bit for bit. */
static void model_case(const mk_image_t *img, const mk_image_t *mask, const mk_rect_t *rect, int iters, int K,
                       const char *what)
{
    mk_gc_params_t p = mk_gc_params_default();
    p.iterations = iters;
    p.K = K;
    mk_gc_model_t mc, mg;
    mk_image_t hm = new_host(img->width, img->height);
    TU_OK(mk_image_copy(cpu, &hm, mask));
    TU_OK(mk_grabcut(cpu, img, &hm, rect, &p, &mc, NULL));
    mk_image_t dimg = tu_to_ctx(gpu, img, 0), dmask = tu_to_ctx(gpu, mask, 11);
    memset(&mg, 0x5a, sizeof mg);
    TU_OK(mk_grabcut(gpu, &dimg, &dmask, rect, &p, &mg, NULL));
    char w2[160];
    snprintf(w2, sizeof w2, "%s: background model", what);
    assert_same_gmm(&mc.bgd, &mg.bgd, w2);
    snprintf(w2, sizeof w2, "%s: foreground model", what);
    assert_same_gmm(&mc.fgd, &mg.fgd, w2);
    mk_image_free(gpu, &dimg);
    mk_image_free(gpu, &dmask);
    mk_image_free(NULL, &hm);
}

/* The first GMMs (from k-means) and those of iteration 1 (learnt from the most likely components under the
 * first): every parameter bit for bit. */
static void test_models(void **state)
{
    (void)state;
    tu_rng_t r = {31337};
    for (int i = 0; i < 24; i++) {
        int w = tu_rand_int(&r, 2, 300), h = tu_rand_int(&r, 1, 200), kind = i % 4, K = 1 + i % MK_GC_MAX_K;
        mk_image_t img = i % 3 ? scene(&r, w, h, 10) : tu_random_image(tu_rand(&r), w, h, MK_FMT_BGR);
        mk_image_t mask = label_mask(&r, w, h, kind);
        char what[128];
        for (int iters = 0; iters < 2; iters++) {
            snprintf(what, sizeof what, "model %d: %dx%d kind %d K %d, %d iterations", i, w, h, kind, K, iters);
            model_case(&img, &mask, NULL, iters, K, what);
        }
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
    }
    int done = 0;
    for (int i = 0; i < N_BENCH; i++) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        mk_image_t mask = new_host(img.width, img.height);
        for (int iters = 0; iters < 2; iters++)
            model_case(&img, &mask, &rect, iters, 5, bench_images[i]);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
        done++;
    }
    print_message("GMM parity: 24 random cases, %d benchmark images\n", done);
}

/* ---- the graph ------------------------------------------------------------------------------------------ */

static void nlinks_case(const mk_image_t *img, double gamma, double scale, const char *what)
{
    int w = img->width, h = img->height;
    size_t pitch = (size_t)w + 3, cells = pitch * (size_t)h;
    int32_t *ref = malloc(4 * cells * sizeof *ref), *got = malloc(4 * cells * sizeof *got);
    assert_true(ref && got);
    int32_t *re[4], *ge[4], *de[4];
    for (int d = 0; d < 4; d++) {
        re[d] = ref + d * cells;
        ge[d] = got + d * cells;
    }
    double beta_cpu = mk_gc_beta_cpu(img), beta_gpu = -1;
    mk_gc_nlinks_cpu(img, beta_cpu, gamma, scale, re, pitch);
    mk_image_t dimg = tu_to_ctx(gpu, img, 1);
    mk_image_t arr = mk_image_desc((int)(pitch * 4), h * 4, MK_FMT_GRAY, MK_U8);
    arr.pitch = pitch * 4;
    TU_OK(mk_image_alloc(gpu, &arr, MK_MEM_DEVICE));
    TU_OK(mk_image_memset(gpu, &arr, 0x77));
    for (int d = 0; d < 4; d++)
        de[d] = (int32_t *)((char *)arr.data + (size_t)d * h * arr.pitch);
    assert_int_equal(arr.pitch, pitch * 4);
    TU_OK(mk_gc_nlinks_cuda(gpu, &dimg, gamma, scale, de, pitch, &beta_gpu));
    mk_image_t host = tu_to_host(gpu, &arr);
    /* the host copy has its own row pitch: copy row by row */
    for (int r = 0; r < 4 * h; r++)
        memcpy(got + (size_t)r * pitch, mk_image_row(&host, 0, r), pitch * sizeof *got);
    if (memcmp(&beta_cpu, &beta_gpu, sizeof beta_cpu))
        fail_msg("%s: beta CPU %.17g, CUDA %.17g", what, beta_cpu, beta_gpu);
    for (int d = 0; d < 4; d++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < (int)pitch; x++) {
                int32_t want = x < w ? re[d][y * pitch + x] : 0x77777777;
                if (ge[d][y * pitch + x] != want)
                    fail_msg("%s: N-link %d of (%d,%d): CPU %d, CUDA %d", what, d, x, y, want, ge[d][y * pitch + x]);
            }
    mk_image_free(NULL, &host);
    mk_image_free(gpu, &arr);
    mk_image_free(gpu, &dimg);
    free(ref);
    free(got);
}

static void test_nlinks(void **state)
{
    (void)state;
    tu_rng_t r = {8086};
    for (int i = 0; i < 30; i++) {
        int w = i < 3 ? (int[]){1, 1, 2}[i] : tu_rand_int(&r, 1, 400);
        int h = i < 3 ? (int[]){1, 2, 1}[i] : tu_rand_int(&r, 1, 300);
        mk_image_t img = i % 2 ? scene(&r, w, h, i % 4 * 5) : tu_random_image(tu_rand(&r), w, h, MK_FMT_RGB);
        double gamma = i % 3 ? 50.0 : 0.5 + tu_rand_int(&r, 0, 1000) / 10.0, scale = i % 5 ? 1000.0 : 37.5;
        char what[96];
        snprintf(what, sizeof what, "N-links %d: %dx%d gamma %g scale %g", i, w, h, gamma, scale);
        nlinks_case(&img, gamma, scale, what);
        mk_image_free(NULL, &img);
    }
    mk_image_t flat = flat_image(31, 17, 0); /* beta 0: every N-link gamma / dist */
    nlinks_case(&flat, 50.0, 1000.0, "N-links constant image");
    mk_image_free(NULL, &flat);
    int done = 0;
    for (int i = 0; i < N_BENCH; i += 2) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        nlinks_case(&img, 50.0, MK_GC_CAP_SCALE, bench_images[i]);
        mk_image_free(NULL, &img);
        done++;
    }
    print_message("N-link parity: 31 random cases, %d benchmark images\n", done);
}

/* T-links of a model learnt on the CPU (k-means + learning of `learn_mask`) for the labels of `mask`. */
static void tlinks_case(const mk_image_t *img, const mk_image_t *learn_mask, const mk_image_t *mask, int K,
                        double lambda, double scale, long *pixels, long *off_by_one, const char *what)
{
    int w = img->width, h = img->height;
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    mk_gc_model_t model;
    for (int g = 0; g < 2; g++) {
        uint8_t *samples, *labels;
        int64_t n;
        TU_OK(mk_gc_samples_cpu(img, learn_mask, g, &samples, &n));
        labels = malloc((size_t)n);
        assert_non_null(labels);
        TU_OK(mk_gc_kmeans_cpu(samples, n, K, MK_GC_SEED, labels, NULL));
        TU_OK(mk_gc_learn_cpu(samples, labels, n, K, comps[g], g ? &model.fgd : &model.bgd));
        free(samples);
        free(labels);
    }
    size_t pitch = (size_t)w + 5;
    int32_t *ref = calloc(pitch * (size_t)h, sizeof *ref);
    assert_non_null(ref);
    double c_cpu = mk_gc_tlinks_cpu(img, mask, comps[0], comps[1], K, lambda, scale, ref, pitch), c_gpu = 0;
    mk_image_t dimg = tu_to_ctx(gpu, img, 0), dmask = tu_to_ctx(gpu, mask, 2);
    mk_image_t arr = mk_image_desc((int)(pitch * 4), h, MK_FMT_GRAY, MK_U8);
    arr.pitch = pitch * 4;
    TU_OK(mk_image_alloc(gpu, &arr, MK_MEM_DEVICE));
    TU_OK(mk_image_memset(gpu, &arr, 0x33));
    assert_int_equal(arr.pitch, pitch * 4);
    TU_OK(mk_gc_tlinks_cuda(gpu, &dimg, &dmask, &model, lambda, scale, arr.data, pitch, &c_gpu));
    mk_image_t host = tu_to_host(gpu, &arr);
    long diff = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < (int)pitch; x++) {
            int32_t got = ((const int32_t *)mk_image_row(&host, 0, y))[x];
            if (x >= w) {
                if (got != 0x33333333)
                    fail_msg("%s: T-link array written at (%d,%d) past the width", what, x, y);
                continue;
            }
            int32_t want = ref[y * pitch + x];
            if (got == want)
                continue;
            if (abs(got - want) > 1)
                fail_msg("%s: T-link of (%d,%d) label %d: CPU %d, CUDA %d", what, x, y, at(mask, x, y), want, got);
            diff++;
        }
    if (!(c_cpu == c_gpu || fabs(c_cpu - c_gpu) <= 1e-9 * fmax(1.0, fabs(c_cpu))))
        fail_msg("%s: energy constant CPU %.17g, CUDA %.17g", what, c_cpu, c_gpu);
    *pixels += (long)w * h;
    *off_by_one += diff;
    mk_image_free(NULL, &host);
    mk_image_free(gpu, &arr);
    mk_image_free(gpu, &dimg);
    mk_image_free(gpu, &dmask);
    free(ref);
}

static void test_tlinks(void **state)
{
    (void)state;
    tu_rng_t r = {4711};
    long pixels = 0, diff = 0;
    for (int i = 0; i < 24; i++) {
        int w = tu_rand_int(&r, 2, 320), h = tu_rand_int(&r, 2, 240), K = 1 + i % MK_GC_MAX_K;
        mk_image_t img = i % 2 ? scene(&r, w, h, 12) : tu_random_image(tu_rand(&r), w, h, MK_FMT_BGR);
        mk_image_t learn = label_mask(&r, w, h, i % 4), mask = label_mask(&r, w, h, (i + 1) % 4);
        double lambda = i % 3 ? 450.0 : tu_rand_int(&r, 1, 2000) / 3.0, scale = i % 4 ? 1000.0 : 10.0;
        char what[128];
        snprintf(what, sizeof what, "T-links %d: %dx%d K %d lambda %g scale %g", i, w, h, K, lambda, scale);
        tlinks_case(&img, &learn, &mask, K, lambda, scale, &pixels, &diff, what);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &learn);
        mk_image_free(NULL, &mask);
    }
    for (int i = 0; i < N_BENCH; i++) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        mk_image_t learn = new_host(img.width, img.height), mask = label_mask(&r, img.width, img.height, 3);
        TU_OK(mk_image_memset(cpu, &learn, MK_GC_BGD));
        for (int y = rect.y; y < rect.y + rect.height; y++)
            memset((uint8_t *)mk_image_row(&learn, 0, y) + rect.x, MK_GC_PR_FGD, (size_t)rect.width);
        tlinks_case(&img, &learn, &mask, 5, 450.0, MK_GC_CAP_SCALE, &pixels, &diff, bench_images[i]);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &learn);
        mk_image_free(NULL, &mask);
    }
    print_message("T-link parity: %ld pixels, %ld differ by 1\n", pixels, diff);
    if ((double)diff > 1e-4 * (double)pixels)
        fail_msg("%ld of %ld T-links differ by 1 (more than 1e-4 of them)", diff, pixels);
}

/* ---- whole GrabCut ---------------------------------------------------------------------------------------- */

/* GrabCut on both backends from the same rectangle or mask; the CUDA mask inside guard bands. Returns the IoU. */
static double grabcut_case(const mk_image_t *img, const mk_image_t *mask, const mk_rect_t *rect,
                           const mk_gc_params_t *p, int check_stats, const char *what)
{
    mk_gc_stats_t sc, sg;
    mk_gc_model_t mc, mg;
    mk_image_t hm = new_host(img->width, img->height);
    TU_OK(mk_image_copy(cpu, &hm, mask));
    TU_OK(mk_grabcut(cpu, img, &hm, rect, p, &mc, &sc));
    mk_image_t dimg = tu_to_ctx(gpu, img, 9);
    tu_dev_guard_t g;
    tu_dev_guard_alloc(gpu, &g, mk_image_desc(img->width, img->height, MK_FMT_GRAY, MK_U8), 13, poisons[0]);
    TU_OK(mk_image_upload(gpu, &g.img, mask));
    memset(&sg, 0, sizeof sg);
    TU_OK(mk_grabcut(gpu, &dimg, &g.img, rect, p, &mg, check_stats ? &sg : NULL));
    mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[0], what);
    long differ;
    double iou = fg_iou(&hm, &got, &differ);
    /* Labels outside PR_* never change, on either backend. */
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++)
            if ((at(&hm, x, y) < 2 || at(&got, x, y) < 2) && at(&hm, x, y) != at(&got, x, y))
                fail_msg("%s: hard label at (%d,%d): CPU %d, CUDA %d", what, x, y, at(&hm, x, y), at(&got, x, y));
    print_message("%-40s IoU %.6f, %ld of %ld labels differ; flow CPU %lld CUDA %lld, energy %.6f / %.6f\n", what,
                  iou, differ, (long)img->width * img->height, (long long)sc.flow, (long long)sg.flow, sc.energy,
                  sg.energy);
    if (check_stats && p->iterations > 0) {
        assert_true(sg.total_us > 0 && sg.kmeans_us > 0 && sg.gmm_us > 0 && sg.graph_us > 0 && sg.maxflow_us > 0);
        assert_true(sg.kmeans_us + sg.gmm_us + sg.graph_us + sg.maxflow_us <= sg.total_us * 1.0001);
        assert_true(sg.rounds > 0);
        assert_true(isfinite(sg.energy));
        /* The same labels from the same graph: the same flow, and the energy but for the constant's rounding. */
        if (differ == 0 && sc.flow == sg.flow &&
            !(fabs(sc.energy - sg.energy) <= 1e-9 * fmax(1.0, fabs(sc.energy))))
            fail_msg("%s: energy CPU %.17g, CUDA %.17g", what, sc.energy, sg.energy);
    }
    mk_image_free(NULL, &got);
    tu_dev_guard_free(gpu, &g);
    mk_image_free(gpu, &dimg);
    mk_image_free(NULL, &hm);
    return iou;
}

static void test_grabcut_bench(void **state)
{
    (void)state;
    mk_gc_params_t p = mk_gc_params_default();
    int done = 0;
    double sum = 0;
    for (int i = 0; i < N_BENCH; i++) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        mk_image_t mask = new_host(img.width, img.height);
        TU_OK(mk_image_memset(cpu, &mask, 0x7f)); /* the rectangle overwrites it */
        double iou = grabcut_case(&img, &mask, &rect, &p, 1, bench_images[i]);
        if (iou < 0.99)
            fail_msg("%s: CPU and CUDA masks IoU %.4f < 0.99", bench_images[i], iou);
        sum += iou;
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
        done++;
    }
    if (done)
        print_message("GrabCut parity on %d benchmark images: mean IoU %.6f\n", done, sum / done);
    if (done && done < 5)
        fail_msg("only %d of the benchmark images found", done);
}

/* mk_gc_params_t.reseed on both backends (kernels/grabcut.c composes the same steps for each): benchmark images at
 * full size and reduced by 4 (the upsampling path's working size), 4 iterations. */
static void test_grabcut_reseed(void **state)
{
    (void)state;
    mk_gc_params_t p = mk_gc_params_default();
    p.iterations = 4;
    p.reseed = 1;
    int done = 0;
    for (int i = 0; i < 4; i++) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        for (int s = 1; s <= 4; s += 3) {
            mk_image_t im = img;
            mk_rect_t r = rect;
            if (s > 1) {
                im = mk_image_desc((img.width + s - 1) / s, (img.height + s - 1) / s, MK_FMT_BGR, MK_U8);
                TU_OK(mk_image_alloc(NULL, &im, MK_MEM_HOST));
                TU_OK(mk_downsample_area(cpu, &img, &im, s));
                r = (mk_rect_t){rect.x / s, rect.y / s, rect.width / s > 1 ? rect.width / s : 1,
                                rect.height / s > 1 ? rect.height / s : 1};
            }
            mk_image_t mask = new_host(im.width, im.height);
            TU_OK(mk_image_memset(cpu, &mask, 0x7f)); /* the rectangle overwrites it */
            char what[160];
            snprintf(what, sizeof what, "%s reseeded, 1/%d", bench_images[i], s);
            double iou = grabcut_case(&im, &mask, &r, &p, 1, what);
            if (iou < 0.99)
                fail_msg("%s: CPU and CUDA masks IoU %.4f < 0.99", what, iou);
            if (s > 1)
                mk_image_free(NULL, &im);
            mk_image_free(NULL, &mask);
        }
        mk_image_free(NULL, &img);
        done++;
    }
    if (done && done < 4)
        fail_msg("only %d of the benchmark images found", done);
}

/* From masks with all four labels (and without hard ones), several K, iteration counts, lambdas and capacity
 * scales; images small enough to be many. */
static void test_grabcut_random(void **state)
{
    (void)state;
    tu_rng_t r = {2718};
    double worst = 1;
    for (int i = 0; i < 25; i++) {
        int w = tu_rand_int(&r, 2, 200), h = tu_rand_int(&r, 2, 160);
        mk_gc_params_t p = mk_gc_params_default();
        p.iterations = tu_rand_int(&r, 1, 6);
        p.K = 1 + i % MK_GC_MAX_K;
        p.seed = tu_rand(&r);
        if (i % 3 == 1) {
            p.lambda = 400;
            p.cap_scale = 64;
        } else if (i % 3 == 2) {
            p.gamma = tu_rand_int(&r, 5, 120);
            p.lambda = 9 * p.gamma;
        }
        mk_image_t img = scene(&r, w, h, 8), mask = label_mask(&r, w, h, i % 5);
        char what[160];
        snprintf(what, sizeof what, "random %d: %dx%d mask %d K %d %d iterations gamma %g lambda %g scale %g", i, w,
                 h, i % 5, p.K, p.iterations, p.gamma, p.lambda, p.cap_scale);
        double iou = grabcut_case(&img, &mask, NULL, &p, i % 2, what);
        worst = iou < worst ? iou : worst;
        /* Small images: a handful of pixels is a percent; the sum over the set is what must agree. */
        if (iou < 0.95)
            fail_msg("%s: IoU %.4f", what, iou);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &mask);
    }
    print_message("GrabCut parity on 25 random masks: worst IoU %.6f\n", worst);
}

/* The fixed-model cut: a model learnt on the CPU applied to its own image and to a shifted view of it. */
static void test_cut(void **state)
{
    (void)state;
    int done = 0;
    for (int i = 0; i < N_BENCH; i += 2) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        mk_gc_params_t p = mk_gc_params_default();
        mk_gc_model_t model;
        mk_image_t learn = new_host(img.width, img.height);
        TU_OK(mk_grabcut(cpu, &img, &learn, &rect, &p, &model, NULL));
        for (int shift = 0; shift < 2; shift++) {
            /* A view of the image moved by (8, 5), the rectangle with it. */
            mk_image_t view = img, mask = new_host(img.width - 8 * shift, img.height - 5 * shift);
            view.width = mask.width;
            view.height = mask.height;
            view.data = (uint8_t *)mk_image_row(&img, 0, 5 * shift) + 3 * 8 * shift;
            view.owned = 0;
            TU_OK(mk_image_memset(cpu, &mask, MK_GC_BGD));
            for (int y = rect.y; y < rect.y + rect.height - 5 * shift; y++)
                memset((uint8_t *)mk_image_row(&mask, 0, y) + rect.x, MK_GC_PR_FGD,
                       (size_t)(rect.width - 8 * shift));
            mk_image_t hm = new_host(mask.width, mask.height);
            TU_OK(mk_image_copy(cpu, &hm, &mask));
            mk_gc_stats_t sc, sg;
            TU_OK(mk_grabcut_cut(cpu, &view, &hm, &model, &p, &sc));
            mk_image_t dimg = tu_to_ctx(gpu, &view, 3);
            tu_dev_guard_t g;
            tu_dev_guard_alloc(gpu, &g, mk_image_desc(mask.width, mask.height, MK_FMT_GRAY, MK_U8), 4, poisons[1]);
            TU_OK(mk_image_upload(gpu, &g.img, &mask));
            TU_OK(mk_grabcut_cut(gpu, &dimg, &g.img, &model, &p, shift ? &sg : NULL));
            mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[1], bench_images[i]);
            long differ;
            double iou = fg_iou(&hm, &got, &differ);
            print_message("cut %-12s shift %d: IoU %.6f, %ld labels differ\n", bench_images[i], shift, iou, differ);
            if (iou < 0.99)
                fail_msg("%s: fixed-model cut IoU %.4f < 0.99", bench_images[i], iou);
            if (shift) {
                assert_true(sg.graph_us > 0 && sg.maxflow_us > 0 && sg.total_us > 0 && sg.rounds > 0);
                assert_true(sg.kmeans_us == 0 && sg.gmm_us == 0);
                if (differ == 0 && sc.flow == sg.flow &&
                    !(fabs(sc.energy - sg.energy) <= 1e-9 * fmax(1.0, fabs(sc.energy))))
                    fail_msg("%s: cut energy CPU %.17g, CUDA %.17g", bench_images[i], sc.energy, sg.energy);
            }
            mk_image_free(NULL, &got);
            tu_dev_guard_free(gpu, &g);
            mk_image_free(gpu, &dimg);
            mk_image_free(NULL, &hm);
            mk_image_free(NULL, &mask);
        }
        mk_image_free(NULL, &learn);
        mk_image_free(NULL, &img);
        done++;
    }
    print_message("fixed-model cut parity: %d benchmark images\n", done);
}

/* ---- the binary mask ------------------------------------------------------------------------------------ */

static void test_binary(void **state)
{
    (void)state;
    tu_rng_t r = {1234};
    for (int i = 0; i < 40; i++) {
        int w = tu_rand_int(&r, 1, 700), h = tu_rand_int(&r, 1, 300), in_place = i % 3 == 0;
        mk_image_t labels = label_mask(&r, w, h, 2), ref = new_host(w, h);
        TU_OK(mk_grabcut_binary(cpu, &labels, &ref));
        for (int k = 0; k < 2; k++) {
            tu_dev_guard_t g;
            size_t extra = (size_t)tu_rand_int(&r, 0, 40);
            tu_dev_guard_alloc(gpu, &g, mk_image_desc(w, h, MK_FMT_GRAY, MK_U8), extra, poisons[k]);
            mk_image_t src = {0};
            if (in_place) {
                TU_OK(mk_image_upload(gpu, &g.img, &labels));
                TU_OK(mk_grabcut_binary(gpu, &g.img, &g.img));
            } else {
                src = tu_to_ctx(gpu, &labels, (size_t)tu_rand_int(&r, 0, 9));
                TU_OK(mk_grabcut_binary(gpu, &src, &g.img));
            }
            mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], "binary");
            assert_same_labels(&ref, &got, "binary");
            mk_image_free(NULL, &got);
            mk_image_free(gpu, &src);
            tu_dev_guard_free(gpu, &g);
        }
        mk_image_free(NULL, &labels);
        mk_image_free(NULL, &ref);
    }
}

/* ---- repeated calls, determinism -------------------------------------------------------------------------- */

/* Calls of different sizes and failing calls between two identical ones leave nothing behind; the same input gives
 * the same bits every time. */
static void test_repeated(void **state)
{
    (void)state;
    tu_rng_t r = {77};
    mk_gc_params_t p = mk_gc_params_default();
    mk_image_t big = scene(&r, 416, 416, 10), small = scene(&r, 9, 7, 3);
    mk_image_t dbig = tu_to_ctx(gpu, &big, 0), dsmall = tu_to_ctx(gpu, &small, 0);
    mk_image_t m1 = mk_image_desc(416, 416, MK_FMT_GRAY, MK_U8), m2 = m1, ms = mk_image_desc(9, 7, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(gpu, &m1, MK_MEM_DEVICE));
    TU_OK(mk_image_alloc(gpu, &m2, MK_MEM_DEVICE));
    TU_OK(mk_image_alloc(gpu, &ms, MK_MEM_DEVICE));
    mk_rect_t rect = {60, 40, 300, 330}, rs = {2, 1, 5, 5};
    mk_gc_model_t a, b, c;
    mk_gc_stats_t st;
    TU_OK(mk_grabcut(gpu, &dbig, &m1, &rect, &p, &a, NULL));
    TU_OK(mk_grabcut(gpu, &dsmall, &ms, &rs, &p, &c, &st));
    TU_OK(mk_image_memset(gpu, &ms, 9)); /* not a label */
    assert_int_equal(mk_grabcut(gpu, &dsmall, &ms, NULL, &p, NULL, NULL), MK_EINVAL);
    TU_OK(mk_grabcut(gpu, &dbig, &m2, &rect, &p, &b, &st));
    mk_image_t h1 = tu_to_host(gpu, &m1), h2 = tu_to_host(gpu, &m2);
    assert_same_labels(&h1, &h2, "repeated GrabCut");
    assert_memory_equal(&a, &b, sizeof a);
    mk_image_free(NULL, &h1);
    mk_image_free(NULL, &h2);
    mk_image_free(gpu, &m1);
    mk_image_free(gpu, &m2);
    mk_image_free(gpu, &ms);
    mk_image_free(gpu, &dbig);
    mk_image_free(gpu, &dsmall);
    mk_image_free(NULL, &big);
    mk_image_free(NULL, &small);
}

/* The fixed-model cut warm from the flow of the previous call (mk_gc_params_t.warm_start): frames of a slow pan
 * (the image moved by 0, 3 and 6 pixels) after a keyframe give the labels, flow and energy of a cold cut of the same
 * frame; the same frame twice needs no push pass the second time (the kept flow is already maximum); a call of
 * another size in between makes the next one start cold. */
static void test_cut_warm(void **state)
{
    (void)state;
    mk_image_t img = {0};
    mk_rect_t rect;
    if (!load_bench("person7.jpg", &img, &rect)) {
        print_message("no benchmark images: skipped\n");
        return;
    }
    const int w = img.width, h = img.height;
    mk_gc_params_t cold = mk_gc_params_default(), warm = cold;
    warm.warm_start = 1;
    mk_gc_model_t model;
    mk_gc_stats_t sc, sw;
    mk_image_t dimg = tu_to_ctx(gpu, &img, 3), dm = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8), frames[3];
    TU_OK(mk_image_alloc(gpu, &dm, MK_MEM_DEVICE));
    for (int f = 0; f < 3; f++) {
        mk_image_t moved = mk_image_desc(w, h, img.format, MK_U8);
        TU_OK(mk_image_alloc(NULL, &moved, MK_MEM_HOST));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                memcpy((uint8_t *)mk_image_row(&moved, 0, y) + 3 * x,
                       (const uint8_t *)mk_image_row(&img, 0, y) + 3 * (x - 3 * f < 0 ? 0 : x - 3 * f), 3);
        frames[f] = tu_to_ctx(gpu, &moved, 0);
        mk_image_free(NULL, &moved);
    }
    /* the rectangle's labels, as the daemon sets them before each fixed-model frame */
    mk_image_t labels = rect_labels(w, h, &rect);
    TU_OK(mk_image_upload(gpu, &dm, &labels));
    TU_OK(mk_grabcut(gpu, &dimg, &dm, &rect, &cold, &model, NULL));
    for (int f = 0; f < 4; f++) {
        const mk_image_t *frame = &frames[f < 3 ? f : 2];
        TU_OK(mk_image_upload(gpu, &dm, &labels));
        TU_OK(mk_grabcut_cut(gpu, frame, &dm, &model, &warm, &sw));
        mk_image_t got_w = tu_to_host(gpu, &dm);
        TU_OK(mk_image_upload(gpu, &dm, &labels));
        TU_OK(mk_grabcut_cut(gpu, frame, &dm, &model, &cold, &sc));
        mk_image_t got_c = tu_to_host(gpu, &dm);
        char what[96];
        snprintf(what, sizeof what, "warm cut, frame %d", f);
        assert_same_labels(&got_c, &got_w, what);
        print_message("%s: flow %lld, push passes warm %d cold %d\n", what, (long long)sw.flow, sw.rounds, sc.rounds);
        if (sw.flow != sc.flow || !(fabs(sw.energy - sc.energy) <= 1e-9 * fmax(1.0, fabs(sc.energy))))
            fail_msg("%s: flow %lld energy %.17g, cold %lld %.17g", what, (long long)sw.flow, sw.energy,
                     (long long)sc.flow, sc.energy);
        assert_true(sc.rounds > 0);
        /* The cold cut just left this frame's maximum flow; the next call (frame 3 = frame 2) starts from a
         * maximum flow of its own graph. */
        if (f == 3)
            assert_int_equal(sw.rounds, 0);
        mk_image_free(NULL, &got_w);
        mk_image_free(NULL, &got_c);
    }
    /* A keyframe warm from the last cut's flow: the same labels and model as a cold one (every cut of its five
     * iterations is the unique minimal cut, whatever the flow it starts from). */
    {
        mk_gc_model_t mw, mc;
        mk_gc_stats_t kw, kc;
        TU_OK(mk_image_upload(gpu, &dm, &labels));
        TU_OK(mk_grabcut(gpu, &frames[1], &dm, &rect, &warm, &mw, &kw));
        mk_image_t got_w = tu_to_host(gpu, &dm);
        TU_OK(mk_image_upload(gpu, &dm, &labels));
        TU_OK(mk_grabcut(gpu, &frames[1], &dm, &rect, &cold, &mc, &kc));
        mk_image_t got_c = tu_to_host(gpu, &dm);
        assert_same_labels(&got_c, &got_w, "warm keyframe");
        assert_memory_equal(&mw, &mc, sizeof mw);
        print_message("warm keyframe: push passes warm %d cold %d, energy %.6f\n", kw.rounds, kc.rounds, kw.energy);
        if (!(fabs(kw.energy - kc.energy) <= 1e-9 * fmax(1.0, fabs(kc.energy))))
            fail_msg("warm keyframe energy %.17g, cold %.17g", kw.energy, kc.energy);
        mk_image_free(NULL, &got_w);
        mk_image_free(NULL, &got_c);
    }
    /* Another size in between: the next warm call starts cold. */
    mk_image_t small = mk_image_desc(64, 48, MK_FMT_GRAY, MK_U8), dsmall = dimg;
    TU_OK(mk_image_alloc(gpu, &small, MK_MEM_DEVICE));
    TU_OK(mk_image_memset(gpu, &small, MK_GC_PR_FGD));
    dsmall.width = 64;
    dsmall.height = 48;
    dsmall.owned = 0;
    TU_OK(mk_grabcut_cut(gpu, &dsmall, &small, &model, &warm, NULL));
    TU_OK(mk_image_upload(gpu, &dm, &labels));
    TU_OK(mk_grabcut_cut(gpu, &frames[2], &dm, &model, &warm, &sw));
    assert_true(sw.rounds > 0);
    mk_image_free(gpu, &small);
    for (int f = 0; f < 3; f++)
        mk_image_free(gpu, &frames[f]);
    mk_image_free(NULL, &labels);
    mk_image_free(gpu, &dm);
    mk_image_free(gpu, &dimg);
    mk_image_free(NULL, &img);
}

/* The fixed-model cut with learning (mk_grabcut_cut_learn): on the GPU, the cut with the model of a 1-iteration
 * GrabCut on the rectangle's labels gives that GrabCut's labels and learns, bit for bit, the model of a
 * 2-iteration one; against the CPU from the same model, the same labels and model whenever the cuts agree (the
 * capacities may differ by 1 where exp() does), else IoU >= 0.99. */
static void test_cut_learn(void **state)
{
    (void)state;
    int done = 0;
    for (int i = 0; i < N_BENCH; i += 2) {
        mk_image_t img = {0};
        mk_rect_t rect;
        if (!load_bench(bench_images[i], &img, &rect))
            break;
        const int w = img.width, h = img.height;
        mk_gc_params_t p = mk_gc_params_default();
        mk_gc_model_t m1, m2, lg, lc;
        mk_image_t dimg = tu_to_ctx(gpu, &img, 0), dm = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
        TU_OK(mk_image_alloc(gpu, &dm, MK_MEM_DEVICE));
        mk_image_t labels = rect_labels(w, h, &rect);
        p.iterations = 2;
        TU_OK(mk_grabcut(gpu, &dimg, &dm, &rect, &p, &m2, NULL));
        p.iterations = 1;
        TU_OK(mk_grabcut(gpu, &dimg, &dm, &rect, &p, &m1, NULL));
        mk_image_t one = tu_to_host(gpu, &dm);
        TU_OK(mk_image_upload(gpu, &dm, &labels));
        mk_gc_stats_t st;
        TU_OK(mk_grabcut_cut_learn(gpu, &dimg, &dm, &m1, &p, &lg, &st));
        assert_true(st.gmm_us > 0 && st.maxflow_us > 0 && st.kmeans_us == 0);
        mk_image_t got = tu_to_host(gpu, &dm);
        char what[128];
        snprintf(what, sizeof what, "%s: cut with learning after 1 iteration", bench_images[i]);
        assert_same_labels(&one, &got, what);
        assert_same_gmm(&m2.bgd, &lg.bgd, what);
        assert_same_gmm(&m2.fgd, &lg.fgd, what);
        /* the CPU from the same model */
        mk_image_t hm = new_host(w, h);
        TU_OK(mk_image_copy(cpu, &hm, &labels));
        TU_OK(mk_grabcut_cut_learn(cpu, &img, &hm, &m1, &p, &lc, NULL));
        long differ;
        double iou = fg_iou(&hm, &got, &differ);
        print_message("cut+learn %-12s: %ld labels differ from the CPU's (IoU %.6f)\n", bench_images[i], differ, iou);
        if (differ == 0) {
            snprintf(what, sizeof what, "%s: CPU vs CUDA learnt model", bench_images[i]);
            assert_same_gmm(&lc.bgd, &lg.bgd, what);
            assert_same_gmm(&lc.fgd, &lg.fgd, what);
        } else if (iou < 0.99) {
            fail_msg("%s: cut with learning, CPU vs CUDA IoU %.4f < 0.99", bench_images[i], iou);
        }
        mk_image_free(NULL, &hm);
        mk_image_free(NULL, &got);
        mk_image_free(NULL, &one);
        mk_image_free(NULL, &labels);
        mk_image_free(gpu, &dm);
        mk_image_free(gpu, &dimg);
        mk_image_free(NULL, &img);
        done++;
    }
    print_message("cut with learning: %d benchmark images\n", done);
    if (!done)
        skip(); /* no benchmark images in the data: nothing was checked */
}

/* ---- bad input -------------------------------------------------------------------------------------------- */

/* Both backends on the same bad mask: the same error code, and the CUDA mask as the CPU leaves it. */
static void bad_mask_case(const mk_image_t *img, const mk_image_t *mask, const mk_rect_t *rect, int want,
                          const char *what)
{
    mk_gc_params_t p = mk_gc_params_default();
    mk_image_t hm = new_host(img->width, img->height);
    TU_OK(mk_image_copy(cpu, &hm, mask));
    int rc_cpu = mk_grabcut(cpu, img, &hm, rect, &p, NULL, NULL);
    char msg_cpu[512];
    snprintf(msg_cpu, sizeof msg_cpu, "%s", mk_err_msg());
    mk_image_t dimg = tu_to_ctx(gpu, img, 0), dmask = tu_to_ctx(gpu, mask, 0);
    int rc_gpu = mk_grabcut(gpu, &dimg, &dmask, rect, &p, NULL, NULL);
    if (rc_cpu != want || rc_gpu != want)
        fail_msg("%s: CPU %s (%s), CUDA %s (%s), want %s", what, mk_err_name(rc_cpu), msg_cpu, mk_err_name(rc_gpu),
                 mk_err_msg(), mk_err_name(want));
    if (strcmp(msg_cpu, mk_err_msg()))
        fail_msg("%s: messages differ: CPU '%s', CUDA '%s'", what, msg_cpu, mk_err_msg());
    mk_image_t got = tu_to_host(gpu, &dmask);
    assert_same_labels(&hm, &got, what);
    mk_image_free(NULL, &got);
    mk_image_free(gpu, &dimg);
    mk_image_free(gpu, &dmask);
    mk_image_free(NULL, &hm);
}

static void test_bad_input(void **state)
{
    (void)state;
    tu_rng_t r = {666};
    mk_gc_params_t p = mk_gc_params_default();
    mk_image_t img = scene(&r, 40, 30, 5), mask = label_mask(&r, 40, 30, 1);
    /* A value that is not a label (the first of three in raster order is reported). */
    ((uint8_t *)mk_image_row(&mask, 0, 17))[30] = 4;
    ((uint8_t *)mk_image_row(&mask, 0, 9))[11] = 200;
    ((uint8_t *)mk_image_row(&mask, 0, 29))[0] = 7;
    bad_mask_case(&img, &mask, NULL, MK_EINVAL, "value 200 in the mask");
    /* No foreground, no background. */
    TU_OK(mk_image_memset(cpu, &mask, MK_GC_PR_BGD));
    bad_mask_case(&img, &mask, NULL, MK_EINVAL, "no foreground");
    TU_OK(mk_image_memset(cpu, &mask, MK_GC_FGD));
    bad_mask_case(&img, &mask, NULL, MK_EINVAL, "no background");
    /* Rectangles: the whole image, outside it, empty. */
    mk_rect_t whole = {-5, -5, 60, 60}, outside = {50, 0, 10, 10}, empty = {3, 3, 0, 7};
    bad_mask_case(&img, &mask, &whole, MK_EINVAL, "rectangle over the whole image");
    bad_mask_case(&img, &mask, &outside, MK_EINVAL, "rectangle outside the image");
    bad_mask_case(&img, &mask, &empty, MK_EINVAL, "empty rectangle");
    /* Host images on the CUDA context; parameters out of range. */
    assert_int_equal(mk_grabcut(gpu, &img, &mask, NULL, &p, NULL, NULL), MK_EINVAL);
    mk_image_t dimg = tu_to_ctx(gpu, &img, 0), dmask = tu_to_ctx(gpu, &mask, 0), d1 = {0};
    assert_int_equal(mk_grabcut(gpu, &img, &dmask, NULL, &p, NULL, NULL), MK_EINVAL);
    mk_gc_params_t q = p;
    q.K = 0;
    assert_int_equal(mk_grabcut(gpu, &dimg, &dmask, NULL, &q, NULL, NULL), MK_ERANGE);
    q = p;
    q.iterations = 101;
    assert_int_equal(mk_grabcut(gpu, &dimg, &dmask, NULL, &q, NULL, NULL), MK_ERANGE);
    assert_int_equal(mk_grabcut_binary(gpu, &mask, &dmask), MK_EINVAL);
    /* A 1x1 image has no background outside any rectangle; 1x2 works with one sample per GMM. */
    mk_image_t one = scene(&r, 1, 1, 0), two = scene(&r, 2, 1, 0), m1 = new_host(1, 1), m2 = new_host(2, 1);
    mk_rect_t r1 = {0, 0, 1, 1};
    TU_OK(mk_image_memset(cpu, &m1, 0));
    TU_OK(mk_image_memset(cpu, &m2, 0));
    bad_mask_case(&one, &m1, &r1, MK_EINVAL, "1x1 image");
    double iou = grabcut_case(&two, &m2, &r1, &p, 0, "2x1 image");
    assert_true(iou == 1.0);
    /* The fixed-model cut: labels checked on the device; a negative weight refused; a GMM without weight (density
     * 0 everywhere) accepted, with the same result on both backends. */
    mk_gc_model_t model;
    mk_image_t lm = new_host(40, 30);
    mk_rect_t rect = {5, 4, 30, 20};
    TU_OK(mk_grabcut(cpu, &img, &lm, &rect, &p, &model, NULL));
    d1 = tu_to_ctx(gpu, &lm, 0);
    TU_OK(mk_image_memset(gpu, &dmask, 5));
    assert_int_equal(mk_grabcut_cut(gpu, &dimg, &dmask, &model, &p, NULL), MK_EINVAL);
    mk_gc_model_t bad = model;
    bad.bgd.weight[0] = -0.5;
    assert_int_equal(mk_grabcut_cut(gpu, &dimg, &d1, &bad, &p, NULL), MK_ERANGE);
    mk_gc_model_t zero = model;
    memset(zero.fgd.weight, 0, sizeof zero.fgd.weight);
    mk_image_t hz = new_host(40, 30);
    TU_OK(mk_image_copy(cpu, &hz, &lm));
    TU_OK(mk_grabcut_cut(cpu, &img, &hz, &zero, &p, NULL));
    TU_OK(mk_grabcut_cut(gpu, &dimg, &d1, &zero, &p, NULL));
    mk_image_t gz = tu_to_host(gpu, &d1);
    assert_same_labels(&hz, &gz, "cut with a foreground GMM of no weight");
    mk_image_free(NULL, &gz);
    mk_image_free(NULL, &hz);
    mk_image_free(gpu, &d1);
    mk_image_free(gpu, &dimg);
    mk_image_free(gpu, &dmask);
    mk_image_free(NULL, &lm);
    mk_image_free(NULL, &one);
    mk_image_free(NULL, &two);
    mk_image_free(NULL, &m1);
    mk_image_free(NULL, &m2);
    mk_image_free(NULL, &img);
    mk_image_free(NULL, &mask);
}

int main(void)
{
    int start = tu_cuda_main("CUDA GrabCut tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kmeans_random), cmocka_unit_test(test_kmeans_degenerate),
        cmocka_unit_test(test_kmeans_real),   cmocka_unit_test(test_models),
        cmocka_unit_test(test_nlinks),        cmocka_unit_test(test_tlinks),
        cmocka_unit_test(test_grabcut_bench), cmocka_unit_test(test_grabcut_reseed),
        cmocka_unit_test(test_grabcut_random),
        cmocka_unit_test(test_cut),           cmocka_unit_test(test_binary),
        cmocka_unit_test(test_repeated),      cmocka_unit_test(test_cut_warm),
        cmocka_unit_test(test_cut_learn),
        cmocka_unit_test(test_bad_input),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}

#else

int main(void)
{
    printf("SKIP: CUDA GrabCut tests need a build with the CUDA backend\n");
    return TU_SKIP_CODE;
}

#endif
