/* grabcut_cpu: the reference GrabCut — k-means, GMM learning, beta, N-links, T-links, the learn/assign/cut loop,
 * the fixed-model cut and the binary mask — exactly as grabcut.h defines it, on the Boykov-Kolmogorov max-flow. */
#include "grabcut_cpu.h"

#include "backend.h"
#include "errors.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KMEANS_ITERATIONS = 10 };

static const int grid_dx[4] = {1, 1, 0, -1}, grid_dy[4] = {0, 1, 1, 1};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static const uint8_t *pixel(const mk_image_t *img, int x, int y)
{
    return (const uint8_t *)mk_image_row(img, 0, y) + 3 * (size_t)x;
}

static uint8_t label_at(const mk_image_t *mask, int x, int y)
{
    return ((const uint8_t *)mk_image_row(mask, 0, y))[x];
}

/* ---- k-means ----------------------------------------------------------------------------------------------- */

int mk_gc_samples_cpu(const mk_image_t *img, const mk_image_t *mask, int fg, uint8_t **samples, int64_t *n)
{
    int64_t count = 0;
    *samples = NULL;
    *n = 0;
    for (int y = 0; y < mask->height; y++)
        for (int x = 0; x < mask->width; x++)
            count += mk_gc_is_fg(label_at(mask, x, y)) == fg;
    if (!count)
        return 0;
    uint8_t *s = malloc((size_t)count * 3);
    if (!s)
        return mk_err_set(MK_ENOMEM, "grabcut: out of memory for %lld samples", (long long)count);
    int64_t i = 0;
    for (int y = 0; y < mask->height; y++)
        for (int x = 0; x < mask->width; x++)
            if (mk_gc_is_fg(label_at(mask, x, y)) == fg) {
                memcpy(s + 3 * i, pixel(img, x, y), 3);
                i++;
            }
    *samples = s;
    *n = count;
    return 0;
}

/* Every sample to its nearest centre (the first on ties). */
static void kmeans_assign(const uint8_t *s, int64_t n, double c[][3], int k_n, uint8_t *labels)
{
    for (int64_t i = 0; i < n; i++, s += 3) {
        int best = 0;
        double bd = mk_gc_dist2(c[0], s[0], s[1], s[2]);
        for (int k = 1; k < k_n; k++) {
            double d = mk_gc_dist2(c[k], s[0], s[1], s[2]);
            if (d < bd) {
                best = k;
                bd = d;
            }
        }
        labels[i] = (uint8_t)best;
    }
}

/* Every centre with samples to their mean (exact integer sums, one division); empty clusters keep theirs. */
static void kmeans_update(const uint8_t *s, int64_t n, const uint8_t *labels, double c[][3], int k_n)
{
    int64_t sum[MK_GC_MAX_K][3] = {{0}}, count[MK_GC_MAX_K] = {0};
    for (int64_t i = 0; i < n; i++, s += 3) {
        int k = labels[i];
        count[k]++;
        for (int ch = 0; ch < 3; ch++)
            sum[k][ch] += s[ch];
    }
    for (int k = 0; k < k_n; k++)
        if (count[k])
            for (int ch = 0; ch < 3; ch++)
                c[k][ch] = MK_DDIV((double)sum[k][ch], (double)count[k]);
}

int mk_gc_kmeans_cpu(const uint8_t *samples, int64_t n, int K, uint64_t seed, uint8_t *labels,
                     double centres[][3])
{
    if (!samples || !labels || n < 1 || K < 1 || K > MK_GC_MAX_K)
        return mk_err_set(MK_EINVAL, "grabcut k-means: %lld samples, K %d", (long long)n, K);
    int k_n = n < K ? (int)n : K;
    double c[MK_GC_MAX_K][3];
    int64_t *d2 = malloc((size_t)n * sizeof *d2);
    if (!d2)
        return mk_err_set(MK_ENOMEM, "grabcut k-means: out of memory");
    /* k-means++ seeding, exact: D^2 to the nearest centre so far in int64. */
    int64_t pick = (int64_t)(mk_gc_rand(seed, 0) % (uint64_t)n);
    for (int k = 0;;) {
        const uint8_t *p = samples + 3 * pick;
        for (int ch = 0; ch < 3; ch++)
            c[k][ch] = (double)p[ch];
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *q = samples + 3 * i;
            int64_t d = mk_gc_dist2_int(q[0], q[1], q[2], p[0], p[1], p[2]);
            if (k == 0 || d < d2[i])
                d2[i] = d;
        }
        if (++k == k_n)
            break;
        int64_t total = 0;
        for (int64_t i = 0; i < n; i++)
            total += d2[i];
        uint64_t r = mk_gc_rand(seed, (uint64_t)k);
        if (total == 0) {
            pick = (int64_t)(r % (uint64_t)n);
        } else {
            uint64_t t = r % (uint64_t)total, run = 0;
            for (pick = 0; pick < n - 1; pick++) {
                run += (uint64_t)d2[pick];
                if (run > t)
                    break;
            }
        }
    }
    free(d2);
    for (int it = 0; it < KMEANS_ITERATIONS; it++) {
        kmeans_assign(samples, n, c, k_n, labels);
        kmeans_update(samples, n, labels, c, k_n);
    }
    kmeans_assign(samples, n, c, k_n, labels);
    if (centres)
        memcpy(centres, c, (size_t)k_n * sizeof c[0]);
    return 0;
}

/* ---- GMMs -------------------------------------------------------------------------------------------------- */

/* The K components (and the model) of one GMM from its components' moments. */
static int learn_moments(const mk_gc_moments_t *m, int K, mk_gc_comp_t *comps, mk_gmm_t *gmm)
{
    int64_t total = 0;
    for (int k = 0; k < K; k++)
        total += m[k].n;
    if (gmm)
        memset(gmm, 0, sizeof *gmm);
    for (int k = 0; k < K; k++) {
        double cov[9];
        if (mk_gc_comp_learn(&m[k], total, &comps[k], cov))
            return mk_err_set(MK_ERANGE, "grabcut: GMM component %d of %lld samples has a singular covariance "
                              "(det %g)", k, (long long)m[k].n, comps[k].det);
        if (gmm) {
            gmm->weight[k] = comps[k].coef;
            memcpy(gmm->mean[k], comps[k].mean, sizeof gmm->mean[k]);
            memcpy(gmm->cov[k], cov, sizeof cov);
        }
    }
    if (gmm)
        gmm->K = K;
    return 0;
}

int mk_gc_learn_cpu(const uint8_t *samples, const uint8_t *labels, int64_t n, int K, mk_gc_comp_t *comps,
                    mk_gmm_t *gmm)
{
    mk_gc_moments_t m[MK_GC_MAX_K];
    if (!samples || !labels || !comps || n < 1 || K < 1 || K > MK_GC_MAX_K)
        return mk_err_set(MK_EINVAL, "grabcut GMM: %lld samples, K %d", (long long)n, K);
    memset(m, 0, sizeof m);
    for (int64_t i = 0; i < n; i++, samples += 3) {
        if (labels[i] >= K)
            return mk_err_set(MK_EINVAL, "grabcut GMM: sample %lld has component %d of %d", (long long)i, labels[i],
                              K);
        mk_gc_moments_add(&m[labels[i]], samples[0], samples[1], samples[2]);
    }
    return learn_moments(m, K, comps, gmm);
}

/* One iteration's learning: every pixel to the most likely component of its own GMM (under the current
 * components), then both GMMs learnt from those assignments. */
static int assign_learn(const mk_image_t *img, const mk_image_t *mask, int K, mk_gc_comp_t comps[2][MK_GC_MAX_K],
                        mk_gmm_t gmm[2])
{
    mk_gc_moments_t m[2][MK_GC_MAX_K];
    memset(m, 0, sizeof m);
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++) {
            const uint8_t *v = pixel(img, x, y);
            int g = mk_gc_is_fg(label_at(mask, x, y));
            mk_gc_moments_add(&m[g][mk_gc_which(comps[g], K, v[0], v[1], v[2])], v[0], v[1], v[2]);
        }
    int rc = learn_moments(m[0], K, comps[0], &gmm[0]);
    if (!rc)
        rc = learn_moments(m[1], K, comps[1], &gmm[1]);
    return rc;
}

/* ---- the graph --------------------------------------------------------------------------------------------- */

static int64_t diff2(const mk_image_t *img, int x, int y, int d)
{
    const uint8_t *a = pixel(img, x, y), *b = pixel(img, x + grid_dx[d], y + grid_dy[d]);
    return mk_gc_dist2_int(a[0], a[1], a[2], b[0], b[1], b[2]);
}

static int inside(const mk_image_t *img, int x, int y, int d)
{
    int nx = x + grid_dx[d], ny = y + grid_dy[d];
    return nx >= 0 && nx < img->width && ny < img->height;
}

double mk_gc_beta_cpu(const mk_image_t *img)
{
    int64_t sum = 0;
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++)
            for (int d = 0; d < 4; d++)
                if (inside(img, x, y, d))
                    sum += diff2(img, x, y, d);
    return mk_gc_beta(sum, mk_gc_pairs(img->width, img->height));
}

void mk_gc_nlinks_cpu(const mk_image_t *img, double beta, double gamma, double scale, int32_t *const edge[4],
                      size_t pitch)
{
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++)
            for (int d = 0; d < 4; d++)
                edge[d][(size_t)y * pitch + (size_t)x] =
                    inside(img, x, y, d) ? mk_gc_nlink(diff2(img, x, y, d), beta, gamma, d & 1, scale) : 0;
}

double mk_gc_tlinks_cpu(const mk_image_t *img, const mk_image_t *mask, const mk_gc_comp_t *bgd,
                        const mk_gc_comp_t *fgd, int K, double lambda, double scale, int32_t *term, size_t pitch)
{
    double c = 0.0;
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++) {
            const uint8_t *v = pixel(img, x, y);
            double s, t;
            mk_gc_tlinks(label_at(mask, x, y), bgd, fgd, K, lambda, v[0], v[1], v[2], &s, &t);
            term[(size_t)y * pitch + (size_t)x] = mk_gc_term(s, t, scale);
            c = MK_DADD(c, s < t ? s : t);
        }
    return c;
}

int64_t mk_gc_energy_int_cpu(const mk_grid_graph_t *g, const mk_image_t *labels)
{
    int64_t e = 0;
    for (int y = 0; y < g->height; y++)
        for (int x = 0; x < g->width; x++) {
            size_t p = (size_t)y * g->pitch + (size_t)x;
            int fg = mk_gc_is_fg(label_at(labels, x, y));
            int32_t t = g->term[p];
            e += fg ? (t < 0 ? -(int64_t)t : 0) : (t > 0 ? t : 0);
            for (int d = 0; d < 4; d++) {
                int nx = x + grid_dx[d], ny = y + grid_dy[d];
                if (nx >= 0 && nx < g->width && ny < g->height && fg != mk_gc_is_fg(label_at(labels, nx, ny)))
                    e += g->edge[d][p];
            }
        }
    return e;
}

/* ---- the loop ---------------------------------------------------------------------------------------------- */

/* The graph's arrays (w x h each, tight), its description and the cut. */
typedef struct {
    int32_t *buf, *term, *edge[4];
    mk_grid_graph_t g;
    mk_image_t cut;
} graph_t;

static int graph_alloc(graph_t *gr, int w, int h)
{
    size_t n = (size_t)w * h;
    memset(gr, 0, sizeof *gr);
    gr->buf = malloc(5 * n * sizeof *gr->buf);
    gr->cut = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    if (!gr->buf)
        return mk_err_set(MK_ENOMEM, "grabcut: out of memory for a %dx%d graph", w, h);
    int rc = mk_image_alloc(NULL, &gr->cut, MK_MEM_HOST);
    if (rc)
        return rc;
    gr->g.width = w;
    gr->g.height = h;
    gr->g.pitch = (size_t)w;
    gr->g.term = gr->term = gr->buf;
    for (int d = 0; d < 4; d++)
        gr->g.edge[d] = gr->edge[d] = gr->buf + (size_t)(d + 1) * n;
    return 0;
}

static void graph_free(graph_t *gr)
{
    free(gr->buf);
    mk_image_free(NULL, &gr->cut);
}

/* Labels every PR_* pixel by its side of the cut. */
static void relabel(mk_image_t *mask, const mk_image_t *cut)
{
    for (int y = 0; y < mask->height; y++) {
        uint8_t *m = mk_image_row(mask, 0, y);
        const uint8_t *c = mk_image_row(cut, 0, y);
        for (int x = 0; x < mask->width; x++)
            if (m[x] == MK_GC_PR_BGD || m[x] == MK_GC_PR_FGD)
                m[x] = c[x] ? MK_GC_PR_FGD : MK_GC_PR_BGD;
    }
}

/* One graph cut for the current components: T-links, max-flow, relabelling, energy of the result. */
static int cut_once(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, graph_t *gr,
                    mk_gc_comp_t comps[2][MK_GC_MAX_K], int K, const mk_gc_params_t *p, mk_gc_stats_t *st)
{
    mk_maxflow_stats_t ms;
    double t = now_us();
    double c = mk_gc_tlinks_cpu(img, mask, comps[0], comps[1], K, p->lambda, p->cap_scale, gr->term, gr->g.pitch);
    st->graph_us += now_us() - t;
    int rc = mk_maxflow_grid_cpu(ctx, &gr->g, &gr->cut, &ms);
    if (rc)
        return rc;
    t = now_us();
    relabel(mask, &gr->cut);
    st->maxflow_us += ms.us + (now_us() - t);
    st->rounds += ms.rounds;
    st->flow = ms.flow;
    t = now_us();
    st->energy = MK_DADD(c, MK_DDIV((double)mk_gc_energy_int_cpu(&gr->g, mask), p->cap_scale));
    st->graph_us += now_us() - t;
    return 0;
}

/* The mask holds only the four labels. */
static int check_labels(const mk_image_t *mask)
{
    for (int y = 0; y < mask->height; y++)
        for (int x = 0; x < mask->width; x++)
            if (label_at(mask, x, y) > MK_GC_PR_FGD)
                return mk_err_set(MK_EINVAL, "grabcut: mask value %d at (%d,%d) is not a label (0..3)",
                                  label_at(mask, x, y), x, y);
    return 0;
}

int mk_grabcut_cpu(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_params_t *p,
                   mk_gc_model_t *model, mk_gc_stats_t *stats)
{
    double t_start = now_us(), t = t_start;
    mk_gc_stats_t st;
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    mk_gmm_t gmm[2];
    uint8_t *samples[2] = {NULL, NULL}, *labels[2] = {NULL, NULL};
    int64_t n[2] = {0, 0};
    graph_t gr = {0};
    int K = p->K, rc = check_labels(mask);
    memset(&st, 0, sizeof st);
    for (int g = 0; g < 2 && !rc; g++)
        rc = mk_gc_samples_cpu(img, mask, g, &samples[g], &n[g]);
    if (!rc && !n[0])
        rc = mk_err_set(MK_EINVAL, "grabcut: no background pixels (BGD or PR_BGD) in the mask");
    if (!rc && !n[1])
        rc = mk_err_set(MK_EINVAL, "grabcut: no foreground pixels (FGD or PR_FGD) in the mask");
    for (int g = 0; g < 2 && !rc; g++) {
        if (!(labels[g] = malloc((size_t)n[g])))
            rc = mk_err_set(MK_ENOMEM, "grabcut: out of memory");
        else
            rc = mk_gc_kmeans_cpu(samples[g], n[g], K, p->seed, labels[g], NULL);
    }
    st.kmeans_us = now_us() - t;
    t = now_us();
    for (int g = 0; g < 2 && !rc; g++)
        rc = mk_gc_learn_cpu(samples[g], labels[g], n[g], K, comps[g], &gmm[g]);
    st.gmm_us = now_us() - t;
    for (int g = 0; g < 2; g++) {
        free(samples[g]);
        free(labels[g]);
    }
    if (!rc && p->iterations > 0 && !(rc = graph_alloc(&gr, img->width, img->height))) {
        t = now_us();
        mk_gc_nlinks_cpu(img, mk_gc_beta_cpu(img), p->gamma, p->cap_scale, gr.edge, gr.g.pitch);
        st.graph_us += now_us() - t;
        for (int it = 0; it < p->iterations && !rc; it++) {
            t = now_us();
            rc = assign_learn(img, mask, K, comps, gmm);
            st.gmm_us += now_us() - t;
            if (!rc)
                rc = cut_once(ctx, img, mask, &gr, comps, K, p, &st);
        }
    }
    graph_free(&gr);
    if (rc)
        return rc;
    if (model) {
        model->bgd = gmm[0];
        model->fgd = gmm[1];
    }
    st.total_us = now_us() - t_start;
    if (stats)
        *stats = st;
    return 0;
}

int mk_grabcut_cut_cpu(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                       const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats)
{
    double t_start = now_us();
    mk_gc_stats_t st;
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    const mk_gmm_t *gmm[2] = {&model->bgd, &model->fgd};
    graph_t gr = {0};
    int K = model->bgd.K > model->fgd.K ? model->bgd.K : model->fgd.K, rc = check_labels(mask);
    memset(&st, 0, sizeof st);
    /* Components past a GMM's own K stay unused (coef 0: they add exactly 0 to its density). */
    for (int g = 0; g < 2 && !rc; g++)
        for (int k = 0; k < MK_GC_MAX_K && !rc; k++) {
            if (k >= gmm[g]->K)
                mk_gc_comp_clear(&comps[g][k]);
            else if (mk_gc_comp_set(gmm[g]->weight[k], gmm[g]->mean[k], &gmm[g]->cov[k][0][0], &comps[g][k]))
                rc = mk_err_set(MK_ERANGE, "grabcut cut: %s component %d has a singular covariance", g ? "fg" : "bg",
                                k);
        }
    if (!rc && !(rc = graph_alloc(&gr, img->width, img->height))) {
        double t = now_us();
        mk_gc_nlinks_cpu(img, mk_gc_beta_cpu(img), p->gamma, p->cap_scale, gr.edge, gr.g.pitch);
        st.graph_us += now_us() - t;
        rc = cut_once(ctx, img, mask, &gr, comps, K, p, &st);
    }
    graph_free(&gr);
    if (!rc && learnt) {
        /* the next iteration's learning: assignments under the model's components, both GMMs learnt */
        mk_gmm_t g2[2];
        double t = now_us();
        rc = assign_learn(img, mask, K, comps, g2);
        st.gmm_us += now_us() - t;
        learnt->bgd = g2[0];
        learnt->fgd = g2[1];
    }
    if (rc)
        return rc;
    st.total_us = now_us() - t_start;
    if (stats)
        *stats = st;
    return 0;
}

int mk_grabcut_binary_cpu(mk_ctx_t *ctx, const mk_image_t *labels, mk_image_t *dst)
{
    (void)ctx;
    for (int y = 0; y < labels->height; y++) {
        const uint8_t *l = mk_image_row(labels, 0, y);
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < labels->width; x++)
            d[x] = mk_gc_is_fg(l[x]) ? 255 : 0;
    }
    return 0;
}
