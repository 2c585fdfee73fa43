/* test_grabcut: the CPU GrabCut reference — k-means against grabcut.h's definition re-implemented here, and its
 * determinism; GMM learning against closed-form statistics of synthetic clusters; the energy of a result
 * recomputed from the labelling; a real benchmark image against OpenCV's mask; the fixed-model cut; the rectangle's
 * labels, the binary mask, and bad input. */
#include "testutil.h"

#include "cpu/grabcut_cpu.h"
#include "grabcut.h"
#include "grabcut_px.h"
#include "imageio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int dx[4] = {1, 1, 0, -1}, dy[4] = {0, 1, 1, 1};

static mk_image_t gray(int w, int h, uint8_t fill)
{
    mk_image_t m = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &m, MK_MEM_HOST));
    memset(m.data, fill, mk_image_bytes(&m));
    return m;
}

static uint8_t at(const mk_image_t *m, int x, int y)
{
    return ((const uint8_t *)mk_image_row(m, 0, y))[x];
}

/* n random colours around `nc` centres (spread s), 3 bytes each; the true cluster of each in *truth. */
static uint8_t *blobs(tu_rng_t *r, int n, int nc, const int centres[][3], int s, uint8_t *truth)
{
    uint8_t *v = malloc((size_t)n * 3);
    assert_non_null(v);
    for (int i = 0; i < n; i++) {
        int c = tu_rand_int(r, 0, nc - 1);
        if (truth)
            truth[i] = (uint8_t)c;
        for (int ch = 0; ch < 3; ch++) {
            int x = centres[c][ch] + tu_rand_int(r, -s, s);
            v[3 * i + ch] = (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
        }
    }
    return v;
}

/* ---- k-means ------------------------------------------------------------------------------------------------ */

/* grabcut.h's k-means, written again from its text: k-means++ seeding with exact integer D^2 and mk_gc_rand, 10
 * rounds of (assign, update), a final assignment. */
static void kmeans_spec(const uint8_t *s, int n, int K, uint64_t seed, uint8_t *labels, double c[][3])
{
    int kn = n < K ? n : K;
    long long *d2 = malloc((size_t)n * sizeof *d2);
    int centre[MK_GC_MAX_K];
    assert_non_null(d2);
    centre[0] = (int)(mk_gc_rand(seed, 0) % (uint64_t)n);
    for (int k = 1; k < kn; k++) {
        unsigned long long total = 0;
        for (int i = 0; i < n; i++) {
            long long best = -1;
            for (int j = 0; j < k; j++) {
                long long d = 0;
                for (int ch = 0; ch < 3; ch++)
                    d += (long long)(s[3 * i + ch] - s[3 * centre[j] + ch]) * (s[3 * i + ch] - s[3 * centre[j] + ch]);
                best = best < 0 || d < best ? d : best;
            }
            d2[i] = best;
            total += (unsigned long long)best;
        }
        uint64_t r = mk_gc_rand(seed, (uint64_t)k);
        if (!total) {
            centre[k] = (int)(r % (uint64_t)n);
            continue;
        }
        unsigned long long t = r % total, run = 0;
        int i = 0;
        while ((run += (unsigned long long)d2[i]) <= t)
            i++;
        centre[k] = i;
    }
    free(d2);
    for (int k = 0; k < kn; k++)
        for (int ch = 0; ch < 3; ch++)
            c[k][ch] = s[3 * centre[k] + ch];
    for (int round = 0; round <= 10; round++) {
        for (int i = 0; i < n; i++) {
            int best = 0;
            for (int k = 1; k < kn; k++)
                if (mk_gc_dist2(c[k], s[3 * i], s[3 * i + 1], s[3 * i + 2]) <
                    mk_gc_dist2(c[best], s[3 * i], s[3 * i + 1], s[3 * i + 2]))
                    best = k;
            labels[i] = (uint8_t)best;
        }
        if (round == 10)
            break;
        for (int k = 0; k < kn; k++) {
            long long sum[3] = {0, 0, 0}, cnt = 0;
            for (int i = 0; i < n; i++)
                if (labels[i] == k) {
                    cnt++;
                    for (int ch = 0; ch < 3; ch++)
                        sum[ch] += s[3 * i + ch];
                }
            for (int ch = 0; cnt && ch < 3; ch++)
                c[k][ch] = (double)sum[ch] / (double)cnt;
        }
    }
}

static void test_kmeans(void **state)
{
    (void)state;
    tu_rng_t r = {0x6b6d65616e73ull};
    static const int centres[4][3] = {{20, 30, 200}, {220, 40, 40}, {60, 200, 90}, {128, 128, 128}};
    for (int t = 0; t < 24; t++) {
        int n = t % 6 == 5 ? tu_rand_int(&r, 1, 6) : tu_rand_int(&r, 50, 3000), K = 1 + t % MK_GC_MAX_K;
        uint64_t seed = tu_rand(&r);
        /* Blobs, or (every third case) few distinct colours, so that ties and D^2 totals of 0 occur. */
        uint8_t *s = blobs(&r, n, 4, centres, t % 3 == 2 ? 0 : 25, NULL);
        uint8_t *a = malloc((size_t)n), *b = malloc((size_t)n), *want = malloc((size_t)n);
        double ca[MK_GC_MAX_K][3], cw[MK_GC_MAX_K][3];
        assert_true(a && b && want);
        TU_OK(mk_gc_kmeans_cpu(s, n, K, seed, a, ca));
        kmeans_spec(s, n, K, seed, want, cw);
        if (memcmp(a, want, (size_t)n))
            fail_msg("case %d (n %d, K %d): labels differ from grabcut.h's definition", t, n, K);
        assert_memory_equal(ca, cw, (size_t)(n < K ? n : K) * sizeof ca[0]);
        /* Deterministic: the same seed gives the same labels. */
        TU_OK(mk_gc_kmeans_cpu(s, n, K, seed, b, NULL));
        assert_memory_equal(a, b, (size_t)n);
        for (int i = 0; i < n; i++)
            assert_true(a[i] < (n < K ? n : K));
        free(s), free(a), free(b), free(want);
    }

    /* Well separated blobs are found whatever the seed; a sample set smaller than K gets one cluster per sample. */
    uint8_t truth[600], lab[600];
    uint8_t *s = blobs(&r, 600, 3, centres, 10, truth);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        int map[3] = {-1, -1, -1};
        TU_OK(mk_gc_kmeans_cpu(s, 600, 3, seed, lab, NULL));
        for (int i = 0; i < 600; i++) {
            if (map[truth[i]] < 0)
                map[truth[i]] = lab[i];
            assert_int_equal(map[truth[i]], lab[i]);
        }
        assert_true(map[0] != map[1] && map[1] != map[2] && map[0] != map[2]);
    }
    free(s);
    const uint8_t three[9] = {1, 2, 3, 200, 100, 0, 7, 7, 250};
    TU_OK(mk_gc_kmeans_cpu(three, 3, 5, MK_GC_SEED, lab, NULL));
    assert_true(lab[0] != lab[1] && lab[1] != lab[2] && lab[0] != lab[2]);
    assert_int_equal(mk_gc_kmeans_cpu(three, 0, 5, 1, lab, NULL), MK_EINVAL);
    assert_int_equal(mk_gc_kmeans_cpu(three, 3, 6, 1, lab, NULL), MK_EINVAL);
}

/* ---- GMM learning ------------------------------------------------------------------------------------------- */

/* The determinant of a 3 x 3 matrix by cofactors along the last row (a different order than mk_gc_det3). */
static double det3(const double m[3][3])
{
    return m[2][0] * (m[0][1] * m[1][2] - m[0][2] * m[1][1]) - m[2][1] * (m[0][0] * m[1][2] - m[0][2] * m[1][0]) +
           m[2][2] * (m[0][0] * m[1][1] - m[0][1] * m[1][0]);
}

static void test_gmm_closed_form(void **state)
{
    (void)state;
    tu_rng_t r = {0x676d6dull};
    static const int centres[4][3] = {{40, 60, 180}, {200, 90, 30}, {90, 220, 120}, {10, 10, 10}};
    enum { N = 5000, K = 5 };
    uint8_t labels[N];
    /* Four clusters with different spreads, one a single repeated colour (singular: 0.01 is added to its
     * diagonal), one component left empty. */
    uint8_t *s = malloc(3 * N);
    assert_non_null(s);
    for (int i = 0; i < N; i++) {
        int c = tu_rand_int(&r, 0, 3), spread = c == 3 ? 0 : 6 + 9 * c;
        labels[i] = (uint8_t)(c == 3 ? 4 : c);
        for (int ch = 0; ch < 3; ch++) {
            int v = centres[c][ch] + tu_rand_int(&r, -spread, spread) + (ch == 1 ? tu_rand_int(&r, 0, spread) : 0);
            s[3 * i + ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    mk_gc_comp_t comps[K];
    mk_gmm_t gmm;
    TU_OK(mk_gc_learn_cpu(s, labels, N, K, comps, &gmm));
    assert_int_equal(gmm.K, K);
    double wsum = 0;
    for (int k = 0; k < K; k++) {
        /* Two-pass statistics in long double from the samples. */
        long double n = 0, mu[3] = {0, 0, 0}, cv[3][3] = {{0}};
        for (int i = 0; i < N; i++)
            if (labels[i] == k) {
                n++;
                for (int a = 0; a < 3; a++)
                    mu[a] += s[3 * i + a];
            }
        wsum += gmm.weight[k];
        if (n == 0) {
            assert_true(gmm.weight[k] == 0 && comps[k].coef == 0);
            assert_true(mk_gc_comp_density(&comps[k], 40, 60, 180) == 0.0);
            continue;
        }
        for (int a = 0; a < 3; a++)
            mu[a] /= n;
        for (int i = 0; i < N; i++)
            if (labels[i] == k)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        cv[a][b] += (s[3 * i + a] - mu[a]) * (s[3 * i + b] - mu[b]) / n;
        double cov[3][3];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                cov[a][b] = (double)cv[a][b];
        if (det3(cov) <= 1e-6)
            for (int a = 0; a < 3; a++)
                cov[a][a] += 0.01;
        assert_true(fabs(gmm.weight[k] - (double)(n / N)) < 1e-15);
        for (int a = 0; a < 3; a++) {
            assert_true(fabs(gmm.mean[k][a] - (double)mu[a]) < 1e-12 * 256);
            for (int b = 0; b < 3; b++)
                if (!(fabs(gmm.cov[k][a][b] - cov[a][b]) <= 1e-9 * (1 + fabs(cov[a][b]))))
                    fail_msg("component %d: cov[%d][%d] %.17g, closed form %.17g", k, a, b, gmm.cov[k][a][b],
                             cov[a][b]);
        }
        assert_true(fabs(comps[k].det - det3(cov)) <= 1e-9 * fabs(det3(cov)));
        /* The inverse is one: cov * inv = I. */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                double e = 0;
                for (int m = 0; m < 3; m++)
                    e += cov[a][m] * comps[k].inv[m][b];
                assert_true(fabs(e - (a == b)) < 1e-9);
            }
        /* The density at a few colours against the Gaussian written out: |2 pi cov|^(1/2) is OpenCV's
         * 1 / sqrt(det) without the (2 pi)^(3/2). */
        for (int t = 0; t < 5; t++) {
            int v[3] = {tu_rand_int(&r, 0, 255), tu_rand_int(&r, 0, 255), tu_rand_int(&r, 0, 255)};
            if (t == 0)
                for (int a = 0; a < 3; a++)
                    v[a] = centres[k == 4 ? 3 : k][a];
            double d[3], q = 0;
            for (int a = 0; a < 3; a++)
                d[a] = v[a] - gmm.mean[k][a];
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++)
                    q += d[a] * comps[k].inv[a][b] * d[b];
            double want = exp(-0.5 * q) / sqrt(det3(cov)), got = mk_gc_comp_density(&comps[k], v[0], v[1], v[2]);
            assert_true(fabs(got - want) <= 1e-9 * want + 1e-300);
        }
        /* A stored model gives back the same component bit for bit. */
        mk_gc_comp_t back;
        TU_OK(mk_gc_comp_set(gmm.weight[k], gmm.mean[k], &gmm.cov[k][0][0], &back));
        assert_memory_equal(&back, &comps[k], sizeof back);
    }
    assert_true(fabs(wsum - 1.0) < 1e-12);
    /* A component's label out of range. */
    labels[7] = K;
    assert_int_equal(mk_gc_learn_cpu(s, labels, N, K, comps, NULL), MK_EINVAL);
    free(s);
}

/* ---- whole GrabCut on a real image -------------------------------------------------------------------------- */

typedef struct {
    mk_image_t img;
    int bb[4];
} case_t;

/* A benchmark image and its rectangle; 0 (and a skip) without the data. */
static int load_case(const char *name, case_t *c)
{
    char path[4096], rel[256];
    snprintf(rel, sizeof rel, "grabcut/images/%s.jpg", name);
    if (!tu_data_path(path, sizeof path, rel))
        return 0;
    TU_OK(mk_imageio_load(path, MK_FMT_BGR, &c->img));
    snprintf(rel, sizeof rel, "grabcut/bboxes/%s.txt", name);
    if (!tu_data_path(path, sizeof path, rel))
        return 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d %d %d %d", &c->bb[0], &c->bb[1], &c->bb[2], &c->bb[3]), 4);
    fclose(f);
    return 1;
}

/* The energy of the final labelling from grabcut.h's definition, with the graph rebuilt here from the image, the
 * returned model and the labels (T-links depend only on which labels are hard). Returns E; *e_int the integer
 * part. */
static double energy_of(const mk_image_t *img, const mk_image_t *mask, const mk_gc_model_t *m,
                        const mk_gc_params_t *p, int64_t *e_int)
{
    int w = img->width, h = img->height;
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    for (int k = 0; k < MK_GC_MAX_K; k++) {
        TU_OK(mk_gc_comp_set(k < m->bgd.K ? m->bgd.weight[k] : 0, m->bgd.mean[k], &m->bgd.cov[k][0][0],
                             &comps[0][k]));
        TU_OK(mk_gc_comp_set(k < m->fgd.K ? m->fgd.weight[k] : 0, m->fgd.mean[k], &m->fgd.cov[k][0][0],
                             &comps[1][k]));
    }
    int64_t sum = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int d = 0; d < 4; d++) {
                int nx = x + dx[d], ny = y + dy[d];
                if (nx < 0 || nx >= w || ny >= h)
                    continue;
                const uint8_t *a = (const uint8_t *)mk_image_row(img, 0, y) + 3 * x;
                const uint8_t *b = (const uint8_t *)mk_image_row(img, 0, ny) + 3 * nx;
                sum += mk_gc_dist2_int(a[0], a[1], a[2], b[0], b[1], b[2]);
            }
    double beta = mk_gc_beta(sum, mk_gc_pairs(w, h)), c = 0;
    int64_t e = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *a = (const uint8_t *)mk_image_row(img, 0, y) + 3 * x;
            double s, t;
            int l = at(mask, x, y), fg = l == MK_GC_FGD || l == MK_GC_PR_FGD;
            mk_gc_tlinks(l, comps[0], comps[1], MK_GC_MAX_K, p->lambda, a[0], a[1], a[2], &s, &t);
            int32_t term = mk_gc_term(s, t, p->cap_scale);
            c = MK_DADD(c, s < t ? s : t);
            e += fg ? (term < 0 ? -term : 0) : (term > 0 ? term : 0);
            for (int d = 0; d < 4; d++) {
                int nx = x + dx[d], ny = y + dy[d];
                if (nx < 0 || nx >= w || ny >= h)
                    continue;
                int ln = at(mask, nx, ny), fgn = ln == MK_GC_FGD || ln == MK_GC_PR_FGD;
                const uint8_t *b = (const uint8_t *)mk_image_row(img, 0, ny) + 3 * nx;
                if (fg != fgn)
                    e += mk_gc_nlink(mk_gc_dist2_int(a[0], a[1], a[2], b[0], b[1], b[2]), beta, p->gamma, d & 1,
                                     p->cap_scale);
            }
        }
    *e_int = e;
    return MK_DADD(c, MK_DDIV((double)e, p->cap_scale));
}

static double iou(const mk_image_t *a, const mk_image_t *b)
{
    long inter = 0, uni = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++) {
            int p = at(a, x, y) != 0, q = at(b, x, y) != 0;
            inter += p && q;
            uni += p || q;
        }
    return uni ? (double)inter / uni : 1.0;
}

static void test_real_image(void **state)
{
    (void)state;
    case_t c;
    char path[4096];
    if (!load_case("teddy", &c) || !tu_data_path(path, sizeof path, "reference/opencv-grabcut/teddy.png"))
        skip();
    mk_image_t ref = {0}, mask = gray(c.img.width, c.img.height, 0xee), bin = gray(c.img.width, c.img.height, 0);
    TU_OK(mk_imageio_load(path, MK_FMT_GRAY, &ref));
    mk_rect_t rect = {c.bb[0], c.bb[1], c.bb[2] - c.bb[0] + 1, c.bb[3] - c.bb[1] + 1};
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_model_t model;
    mk_gc_stats_t st;
    memset(&st, 0xff, sizeof st);
    TU_OK(mk_grabcut(tu_cpu, &c.img, &mask, &rect, &p, &model, &st));
    TU_OK(mk_grabcut_binary(tu_cpu, &mask, &bin));
    double v = iou(&bin, &ref);
    print_message("teddy: IoU %.4f vs OpenCV, %d augmenting paths, flow %lld, energy %.3f, %.0f ms\n", v, st.rounds,
                  (long long)st.flow, st.energy, st.total_us / 1e3);
    assert_true(v >= 0.9);
    /* Outside the rectangle every pixel stays BGD; inside, only PR_* labels. */
    for (int y = 0; y < mask.height; y++)
        for (int x = 0; x < mask.width; x++) {
            int inside = x >= rect.x && x < rect.x + rect.width && y >= rect.y && y < rect.y + rect.height;
            uint8_t l = at(&mask, x, y);
            assert_true(inside ? l == MK_GC_PR_BGD || l == MK_GC_PR_FGD : l == MK_GC_BGD);
        }
    /* Stats: every stage timed, no global relabels on the CPU, the counts of a real solve. */
    assert_true(st.kmeans_us > 0 && st.gmm_us > 0 && st.graph_us > 0 && st.maxflow_us > 0);
    assert_true(st.total_us >= st.kmeans_us + st.gmm_us + st.graph_us + st.maxflow_us - 1);
    assert_true(st.rounds > 0 && st.global_relabels == 0 && st.flow > 0);

    /* The energy of the result, recomputed from its definition, and the flow is that of the final labelling
     * (so the labelling is a minimum cut of the last graph). */
    int64_t e_int;
    double e = energy_of(&c.img, &mask, &model, &p, &e_int);
    assert_int_equal(e_int, st.flow);
    if (e != st.energy)
        fail_msg("energy %.17g, recomputed %.17g", st.energy, e);

    /* The fixed-model cut with the last model on the rectangle's labels solves the same graph: the same labels,
     * flow and energy. */
    mk_image_t again = gray(c.img.width, c.img.height, 0);
    mk_gc_params_t p0 = p;
    mk_gc_stats_t st2;
    p0.iterations = 0;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &again, &rect, &p0, NULL, &st2));
    assert_true(st2.flow == 0 && st2.energy == 0 && st2.rounds == 0);
    TU_OK(mk_grabcut_cut(tu_cpu, &c.img, &again, &model, &p, &st2));
    for (int y = 0; y < mask.height; y++)
        assert_memory_equal(mk_image_row(&again, 0, y), mk_image_row(&mask, 0, y), (size_t)mask.width);
    assert_int_equal(st2.flow, st.flow);
    assert_true(st2.energy == st.energy);
    assert_true(st2.kmeans_us == 0 && st2.gmm_us == 0 && st2.maxflow_us > 0);

    /* The same call again gives the same result (deterministic), and a mask input (rect NULL) continues from the
     * labels: one more iteration from a converged result changes little. */
    mk_image_t m2 = gray(c.img.width, c.img.height, 0);
    mk_gc_stats_t st3;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &m2, &rect, &p, NULL, &st3));
    for (int y = 0; y < mask.height; y++)
        assert_memory_equal(mk_image_row(&m2, 0, y), mk_image_row(&mask, 0, y), (size_t)mask.width);
    assert_int_equal(st3.flow, st.flow);
    p0.iterations = 1;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &m2, NULL, &p0, NULL, NULL));
    TU_OK(mk_grabcut_binary(tu_cpu, &m2, &m2));
    assert_true(iou(&m2, &bin) > 0.95);

    mk_image_free(NULL, &c.img);
    mk_image_free(NULL, &ref);
    mk_image_free(NULL, &mask);
    mk_image_free(NULL, &bin);
    mk_image_free(NULL, &again);
    mk_image_free(NULL, &m2);
}

/* Two models equal bit for bit (K, weights, means, covariances). */
static int model_equal(const mk_gc_model_t *a, const mk_gc_model_t *b)
{
    const mk_gmm_t *ga[2] = {&a->bgd, &a->fgd}, *gb[2] = {&b->bgd, &b->fgd};
    for (int g = 0; g < 2; g++) {
        if (ga[g]->K != gb[g]->K)
            return 0;
        for (int k = 0; k < ga[g]->K; k++)
            if (memcmp(&ga[g]->weight[k], &gb[g]->weight[k], sizeof(double)) ||
                memcmp(ga[g]->mean[k], gb[g]->mean[k], sizeof ga[g]->mean[k]) ||
                memcmp(ga[g]->cov[k], gb[g]->cov[k], sizeof ga[g]->cov[k]))
                return 0;
    }
    return 1;
}

/* mk_grabcut_cut_learn continues a GrabCut from its model: after mk_grabcut with n iterations (model m_n), the cut
 * with m_n on the rectangle's labels gives the n-th cut's mask and learns m_(n+1), the model of mk_grabcut with
 * n + 1 iterations; chained, it reproduces every iteration of a 4-iteration GrabCut. */
static void test_cut_learn(void **state)
{
    (void)state;
    case_t c;
    if (!load_case("teddy", &c))
        skip();
    int w = c.img.width, h = c.img.height;
    mk_rect_t rect = {c.bb[0], c.bb[1], c.bb[2] - c.bb[0] + 1, c.bb[3] - c.bb[1] + 1};
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_model_t full[5], cur, next;
    mk_image_t masks[5], m = gray(w, h, 0), init = gray(w, h, 0);
    for (int n = 1; n <= 4; n++) {
        masks[n] = gray(w, h, 0);
        p.iterations = n;
        TU_OK(mk_grabcut(tu_cpu, &c.img, &masks[n], &rect, &p, &full[n], NULL));
    }
    p.iterations = 0;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &init, &rect, &p, NULL, NULL)); /* the rectangle's labels */
    cur = full[1];
    int changed = 0;
    for (int n = 1; n <= 3; n++) {
        mk_gc_stats_t st;
        TU_OK(mk_image_copy(tu_cpu, &m, &init));
        TU_OK(mk_grabcut_cut_learn(tu_cpu, &c.img, &m, &cur, &p, &next, &st));
        for (int y = 0; y < h; y++)
            if (memcmp(mk_image_row(&m, 0, y), mk_image_row(&masks[n], 0, y), (size_t)w))
                fail_msg("cut %d with the learnt model: row %d differs from mk_grabcut's", n, y);
        if (!model_equal(&next, &full[n + 1]))
            fail_msg("the model learnt after cut %d differs from mk_grabcut's with %d iterations", n, n + 1);
        assert_true(st.gmm_us > 0 && st.maxflow_us > 0 && st.kmeans_us == 0);
        changed += !model_equal(&next, &cur);
        cur = next;
    }
    assert_true(changed > 0); /* the learning moved the model (the check above is not of a fixed point) */

    /* A cut that leaves no foreground (every label BGD) learns a foreground GMM of weight 0 (no error); NULL
     * learnt is MK_EINVAL. */
    mk_gc_model_t z;
    TU_OK(mk_image_memset(tu_cpu, &m, MK_GC_BGD));
    TU_OK(mk_grabcut_cut_learn(tu_cpu, &c.img, &m, &cur, &p, &z, NULL));
    for (int k = 0; k < z.fgd.K; k++)
        assert_true(z.fgd.weight[k] == 0);
    assert_true(z.bgd.weight[0] > 0);
    assert_int_equal(mk_grabcut_cut_learn(tu_cpu, &c.img, &m, &cur, &p, NULL, NULL), MK_EINVAL);

    for (int n = 1; n <= 4; n++)
        mk_image_free(NULL, &masks[n]);
    mk_image_free(NULL, &m);
    mk_image_free(NULL, &init);
    mk_image_free(NULL, &c.img);
}

/* ---- small cases and bad input ------------------------------------------------------------------------------ */

/* A w x h image: a bright square on a dark, noisy background. */
static mk_image_t synthetic(int w, int h, uint64_t seed)
{
    tu_rng_t r = {seed};
    mk_image_t img = mk_image_desc(w, h, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int y = 0; y < h; y++) {
        uint8_t *p = mk_image_row(&img, 0, y);
        for (int x = 0; x < w; x++) {
            int in = x >= w / 4 && x < 3 * w / 4 && y >= h / 4 && y < 3 * h / 4;
            for (int ch = 0; ch < 3; ch++)
                p[3 * x + ch] = (uint8_t)((in ? 200 - 40 * ch : 30 + 20 * ch) + tu_rand_int(&r, -12, 12));
        }
    }
    return img;
}

/* mk_gc_params_t.reseed, written again from grabcut.h's text on the teddy image: the first iteration is OpenCV's
 * (the same mask as without the flag); each later one clusters the current labels of each GMM by k-means
 * (kmeans_spec, this file's k-means from the definition), learns the GMMs from those clusters and cuts with them.
 * After 2, 3 and 4 iterations the call's mask, model and energy equal that reference's; the flag changes the
 * result of 4 iterations; a cut that leaves no foreground ends the call with that mask; bad values. */
static void test_reseed(void **state)
{
    (void)state;
    case_t c;
    if (!load_case("teddy", &c))
        skip();
    const int w = c.img.width, h = c.img.height;
    mk_rect_t rect = {c.bb[0], c.bb[1], c.bb[2] - c.bb[0] + 1, c.bb[3] - c.bb[1] + 1};
    mk_image_t ref = gray(w, h, 0), mask = gray(w, h, 0), plain = gray(w, h, 0);
    mk_gc_params_t p = mk_gc_params_default(), rs;
    p.iterations = 1;
    rs = p;
    rs.reseed = 1;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &ref, &rect, &p, NULL, NULL));
    TU_OK(mk_grabcut(tu_cpu, &c.img, &mask, &rect, &rs, NULL, NULL));
    for (int y = 0; y < h; y++)
        assert_memory_equal(mk_image_row(&mask, 0, y), mk_image_row(&ref, 0, y), (size_t)w);
    for (int it = 2; it <= 4; it++) {
        /* the reference's next iteration */
        mk_gc_model_t model;
        mk_gmm_t *gmm[2] = {&model.bgd, &model.fgd};
        for (int g = 0; g < 2; g++) {
            uint8_t *smp = NULL, *lab;
            int64_t n = 0;
            double centres[MK_GC_MAX_K][3];
            mk_gc_comp_t comps[MK_GC_MAX_K];
            TU_OK(mk_gc_samples_cpu(&c.img, &ref, g, &smp, &n));
            assert_true(n > 0);
            assert_non_null(lab = malloc((size_t)n));
            kmeans_spec(smp, (int)n, p.K, p.seed, lab, centres);
            TU_OK(mk_gc_learn_cpu(smp, lab, n, p.K, comps, gmm[g]));
            free(smp);
            free(lab);
        }
        TU_OK(mk_grabcut_cut(tu_cpu, &c.img, &ref, &model, &p, NULL));
        /* the call */
        mk_gc_model_t got;
        mk_gc_stats_t st;
        rs.iterations = it;
        TU_OK(mk_grabcut(tu_cpu, &c.img, &mask, &rect, &rs, &got, &st));
        for (int y = 0; y < h; y++)
            assert_memory_equal(mk_image_row(&mask, 0, y), mk_image_row(&ref, 0, y), (size_t)w);
        assert_true(model_equal(&got, &model));
        int64_t e_int;
        double e = energy_of(&c.img, &mask, &got, &p, &e_int);
        assert_int_equal(e_int, st.flow);
        if (e != st.energy)
            fail_msg("iteration %d: energy %.17g, recomputed %.17g", it, st.energy, e);
        assert_true(st.kmeans_us > 0 && st.gmm_us > 0 && st.maxflow_us > 0 && st.rounds > 0);
    }
    /* OpenCV's learning gives another mask after 4 iterations here */
    p.iterations = 4;
    TU_OK(mk_grabcut(tu_cpu, &c.img, &plain, &rect, &p, NULL, NULL));
    int differ = 0;
    for (int y = 0; y < h && !differ; y++)
        differ = memcmp(mk_image_row(&plain, 0, y), mk_image_row(&mask, 0, y), (size_t)w) != 0;
    assert_true(differ);

    /* A flat image: both GMMs alike, the N-links carry every pixel to the background in the first cut; the second
     * iteration finds no foreground to cluster and the call ends there, without an error. */
    mk_image_t flat = mk_image_desc(40, 30, MK_FMT_RGB, MK_U8), fm = gray(40, 30, 0);
    TU_OK(mk_image_alloc(NULL, &flat, MK_MEM_HOST));
    memset(flat.data, 90, mk_image_bytes(&flat));
    mk_rect_t fr = {5, 5, 20, 15};
    mk_gc_stats_t fst;
    mk_gc_model_t fmod;
    rs.iterations = 3;
    TU_OK(mk_grabcut(tu_cpu, &flat, &fm, &fr, &rs, &fmod, &fst));
    for (int y = 0; y < 30; y++)
        for (int x = 0; x < 40; x++) {
            int inside = x >= fr.x && x < fr.x + fr.width && y >= fr.y && y < fr.y + fr.height;
            assert_int_equal(at(&fm, x, y), inside ? MK_GC_PR_BGD : MK_GC_BGD);
        }
    assert_true(fmod.fgd.K >= 1 && fmod.bgd.K >= 1);

    rs.reseed = 2;
    assert_int_equal(mk_grabcut(tu_cpu, &c.img, &mask, &rect, &rs, NULL, NULL), MK_ERANGE);
    rs.reseed = -1;
    assert_int_equal(mk_grabcut(tu_cpu, &c.img, &mask, &rect, &rs, NULL, NULL), MK_ERANGE);

    mk_image_free(NULL, &c.img);
    mk_image_free(NULL, &ref);
    mk_image_free(NULL, &mask);
    mk_image_free(NULL, &plain);
    mk_image_free(NULL, &flat);
    mk_image_free(NULL, &fm);
}

static void test_synthetic_and_rect(void **state)
{
    (void)state;
    mk_image_t img = synthetic(48, 40, 7), mask = gray(48, 40, 9);
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_stats_t st;
    mk_gc_model_t model;
    /* The rectangle's labels alone (0 iterations): BGD outside, PR_FGD inside; clipping drops the part outside
     * the image (a negative x shortens the rectangle). */
    p.iterations = 0;
    mk_rect_t r = {-6, 5, 20, 100};
    TU_OK(mk_grabcut(tu_cpu, &img, &mask, &r, &p, &model, &st));
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 48; x++)
            assert_int_equal(at(&mask, x, y), x < 14 && y >= 5 ? MK_GC_PR_FGD : MK_GC_BGD);
    assert_int_equal(model.bgd.K, 5);
    assert_int_equal(model.fgd.K, 5);
    /* The square is found from a rectangle around it: every pixel of the square is foreground, every pixel
     * outside the rectangle background. */
    p.iterations = 3;
    r = (mk_rect_t){8, 6, 32, 28};
    TU_OK(mk_grabcut(tu_cpu, &img, &mask, &r, &p, &model, &st));
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 48; x++) {
            int sq = x >= 12 && x < 36 && y >= 10 && y < 30;
            assert_int_equal(mk_gc_is_fg(at(&mask, x, y)), sq);
        }
    int64_t e_int;
    assert_true(energy_of(&img, &mask, &model, &p, &e_int) == st.energy);
    assert_int_equal(e_int, st.flow);
    /* K = 1, another lambda (still above the N-links of a pixel) and a coarse scale: the graph and the energy
     * follow the parameters. */
    p.K = 1;
    p.lambda = 400;
    p.cap_scale = 64;
    TU_OK(mk_grabcut(tu_cpu, &img, &mask, &r, &p, &model, &st));
    assert_int_equal(model.fgd.K, 1);
    assert_true(energy_of(&img, &mask, &model, &p, &e_int) == st.energy);
    assert_int_equal(e_int, st.flow);

    /* A 2 x 1 image with one background and one foreground pixel (one sample per GMM: singular covariances get
     * their 0.01), and a 1 x 1 image, which a rectangle cannot leave background in. */
    mk_image_t tiny = synthetic(2, 1, 3), m2 = gray(2, 1, MK_GC_BGD);
    ((uint8_t *)m2.data)[1] = MK_GC_PR_FGD;
    p = mk_gc_params_default();
    TU_OK(mk_grabcut(tu_cpu, &tiny, &m2, NULL, &p, NULL, &st));
    assert_int_equal(((uint8_t *)m2.data)[0], MK_GC_BGD);
    mk_image_t one = synthetic(1, 1, 4), m1 = gray(1, 1, MK_GC_PR_FGD);
    r = (mk_rect_t){0, 0, 1, 1};
    assert_int_equal(mk_grabcut(tu_cpu, &one, &m1, &r, &p, NULL, NULL), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "no background"));
    assert_int_equal(mk_grabcut(tu_cpu, &one, &m1, NULL, &p, NULL, NULL), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "no background"));
    memset(m1.data, MK_GC_BGD, 1);
    assert_int_equal(mk_grabcut(tu_cpu, &one, &m1, NULL, &p, NULL, NULL), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "no foreground"));
    mk_image_free(NULL, &img);
    mk_image_free(NULL, &mask);
    mk_image_free(NULL, &tiny);
    mk_image_free(NULL, &m2);
    mk_image_free(NULL, &one);
    mk_image_free(NULL, &m1);
}

static void test_binary(void **state)
{
    (void)state;
    tu_guarded_t g;
    mk_image_t labels = gray(7, 3, 0);
    tu_guarded_alloc(&g, mk_image_desc(7, 3, MK_FMT_GRAY, MK_U8), 5, 0x5a);
    for (int i = 0; i < 21; i++)
        ((uint8_t *)mk_image_row(&labels, 0, i / 7))[i % 7] = (uint8_t)(i % 4);
    TU_OK(mk_grabcut_binary(tu_cpu, &labels, &g.img));
    assert_true(tu_guard_ok(&g));
    for (int i = 0; i < 21; i++)
        assert_int_equal(at(&g.img, i % 7, i / 7), i % 4 == MK_GC_FGD || i % 4 == MK_GC_PR_FGD ? 255 : 0);
    TU_OK(mk_grabcut_binary(tu_cpu, &labels, &labels));
    for (int i = 0; i < 21; i++)
        assert_int_equal(at(&labels, i % 7, i / 7), at(&g.img, i % 7, i / 7));
    mk_image_t small = gray(6, 3, 0);
    assert_int_equal(mk_grabcut_binary(tu_cpu, &labels, &small), MK_EINVAL);
    assert_int_equal(mk_grabcut_binary(NULL, &labels, &small), MK_EINVAL);
    assert_int_equal(mk_grabcut_binary(tu_cpu, NULL, &small), MK_EINVAL);
    mk_image_free(NULL, &labels);
    mk_image_free(NULL, &small);
    tu_guarded_free(&g);
}

static void test_bad_input(void **state)
{
    (void)state;
    mk_image_t img = synthetic(20, 16, 5), mask = gray(20, 16, 0);
    mk_gc_params_t p = mk_gc_params_default(), q;
    mk_rect_t r = {4, 4, 8, 8};
    mk_gc_model_t model;
    /* NULLs. */
    assert_int_equal(mk_grabcut(NULL, &img, &mask, &r, &p, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut(tu_cpu, NULL, &mask, &r, &p, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut(tu_cpu, &img, NULL, &r, &p, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut(tu_cpu, &img, &mask, &r, NULL, NULL, NULL), MK_EINVAL);
    /* Rectangles: empty, outside the image, covering it. */
    static const mk_rect_t bad[] = {{4, 4, 0, 5}, {4, 4, 5, -1}, {20, 0, 5, 5}, {0, 16, 5, 5}, {-10, 2, 10, 5},
                                    {0, 0, 20, 16}, {-3, -3, 40, 40}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (mk_grabcut(tu_cpu, &img, &mask, &bad[i], &p, NULL, NULL) != MK_EINVAL)
            fail_msg("rectangle %zu accepted", i);
    /* Parameters out of range. */
    struct {
        int field;
        double v;
    } pb[] = {{0, -1}, {0, 101}, {1, 0}, {1, NAN}, {2, -5}, {2, INFINITY}, {3, 0}, {3, 6}, {4, 0}, {4, NAN}};
    for (size_t i = 0; i < sizeof pb / sizeof pb[0]; i++) {
        q = p;
        switch (pb[i].field) {
        case 0: q.iterations = (int)pb[i].v; break;
        case 1: q.gamma = pb[i].v; break;
        case 2: q.lambda = pb[i].v; break;
        case 3: q.K = (int)pb[i].v; break;
        default: q.cap_scale = pb[i].v; break;
        }
        if (mk_grabcut(tu_cpu, &img, &mask, &r, &q, NULL, NULL) != MK_ERANGE)
            fail_msg("parameter case %zu accepted", i);
    }
    /* Images: gray instead of colour, sizes that differ, a mask value that is no label, device memory. */
    mk_image_t g = gray(20, 16, 0), m_small = gray(19, 16, 0);
    assert_int_equal(mk_grabcut(tu_cpu, &g, &mask, &r, &p, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut(tu_cpu, &img, &m_small, &r, &p, NULL, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut(tu_cpu, &img, &img, &r, &p, NULL, NULL), MK_EINVAL);
    memset(mask.data, MK_GC_PR_FGD, mk_image_bytes(&mask));
    ((uint8_t *)mask.data)[0] = MK_GC_BGD;
    ((uint8_t *)mask.data)[5] = 7;
    assert_int_equal(mk_grabcut(tu_cpu, &img, &mask, NULL, &p, NULL, NULL), MK_EINVAL);
    mk_image_t dev = img;
    dev.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_grabcut(tu_cpu, &dev, &mask, &r, &p, NULL, NULL), MK_EINVAL);
    /* All foreground: no background. */
    memset(mask.data, MK_GC_FGD, mk_image_bytes(&mask));
    assert_int_equal(mk_grabcut(tu_cpu, &img, &mask, NULL, &p, NULL, NULL), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "no background"));

    /* The fixed-model cut: a good model, then broken ones. */
    TU_OK(mk_grabcut(tu_cpu, &img, &mask, &r, &p, &model, NULL));
    TU_OK(mk_grabcut_cut(tu_cpu, &img, &mask, &model, &p, NULL));
    assert_int_equal(mk_grabcut_cut(tu_cpu, &img, &mask, NULL, &p, NULL), MK_EINVAL);
    assert_int_equal(mk_grabcut_cut(NULL, &img, &mask, &model, &p, NULL), MK_EINVAL);
    mk_gc_model_t bm = model;
    bm.fgd.K = 0;
    assert_int_equal(mk_grabcut_cut(tu_cpu, &img, &mask, &bm, &p, NULL), MK_ERANGE);
    bm = model;
    bm.bgd.weight[1] = -0.5;
    assert_int_equal(mk_grabcut_cut(tu_cpu, &img, &mask, &bm, &p, NULL), MK_ERANGE);
    bm = model;
    bm.bgd.mean[0][2] = NAN;
    assert_int_equal(mk_grabcut_cut(tu_cpu, &img, &mask, &bm, &p, NULL), MK_ERANGE);
    /* A GMM without weight (a class that lost every pixel) has density 0: every PR_* pixel goes to the other. */
    bm = model;
    memset(bm.fgd.weight, 0, sizeof bm.fgd.weight);
    TU_OK(mk_grabcut_cut(tu_cpu, &img, &mask, &bm, &p, NULL));
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 20; x++)
            assert_int_equal(at(&mask, x, y), x >= 4 && x < 12 && y >= 4 && y < 12 ? MK_GC_PR_BGD : MK_GC_BGD);
    bm = model;
    memset(bm.fgd.cov[0], 0, sizeof bm.fgd.cov[0]);
    bm.fgd.weight[0] = 0.5;
    assert_int_equal(mk_grabcut_cut(tu_cpu, &img, &mask, &bm, &p, NULL), MK_ERANGE);
    assert_non_null(strstr(mk_err_msg(), "singular"));
    mk_image_free(NULL, &img);
    mk_image_free(NULL, &mask);
    mk_image_free(NULL, &g);
    mk_image_free(NULL, &m_small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kmeans),
        cmocka_unit_test(test_gmm_closed_form),
        cmocka_unit_test(test_real_image),
        cmocka_unit_test(test_cut_learn),
        cmocka_unit_test(test_reseed),
        cmocka_unit_test(test_synthetic_and_rect),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
