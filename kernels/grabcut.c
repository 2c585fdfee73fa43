/* grabcut: argument checks, the rectangle's labels and backend dispatch of GrabCut and the grid max-flow. */
#include "grabcut.h"

#include "backend.h"
#include "errors.h"
#include "grabcut_px.h"

#include <math.h>
#include <string.h>

/* The CUDA GrabCut comes in two parts, each built when its source is in the build: the max-flow
 * (cuda/maxflow_cuda.cu, MK_HAVE_CUDA_MAXFLOW) and the GrabCut stages (cuda/grabcut_cuda.cu, MK_HAVE_CUDA_GRABCUT);
 * kernels/meson.build defines the flags. A CUDA context without them gets MK_EUNSUPPORTED. */
#if defined(MK_HAVE_CUDA) && defined(MK_HAVE_CUDA_MAXFLOW)
#define CUDA_MAXFLOW 1
#else
#define CUDA_MAXFLOW 0
#endif
#if defined(MK_HAVE_CUDA) && defined(MK_HAVE_CUDA_GRABCUT)
#define CUDA_GRABCUT 1
#else
#define CUDA_GRABCUT 0
#endif

mk_gc_params_t mk_gc_params_default(void)
{
    mk_gc_params_t p = {
        .iterations = 5, .gamma = 50.0, .lambda = 450.0, .K = 5, .cap_scale = MK_GC_CAP_SCALE, .seed = MK_GC_SEED};
    return p;
}

#if !CUDA_MAXFLOW || !CUDA_GRABCUT
static int no_cuda(const char *what)
{
    return mk_err_set(MK_EUNSUPPORTED, "%s: the CUDA implementation is not in this build", what);
}
#endif

static int check_mem(mk_ctx_t *ctx, const mk_image_t *img, const char *what)
{
    if (img->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "%s is in %s memory; a %s context needs %s memory", what, mk_mem_name(img->mem),
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    return 0;
}

static int check_gray(mk_ctx_t *ctx, const mk_image_t *img, const char *what)
{
    int rc = mk_image_check(img, what);
    if (rc)
        return rc;
    if (img->dtype != MK_U8 || img->format != MK_FMT_GRAY)
        return mk_err_set(MK_EINVAL, "%s must be u8 gray, not %s %s", what, mk_dtype_name(img->dtype),
                          mk_format_name(img->format));
    return check_mem(ctx, img, what);
}

/* The colour image and its mask. */
static int check_pair(mk_ctx_t *ctx, const mk_image_t *img, const mk_image_t *mask)
{
    int rc = mk_image_check(img, "grabcut image");
    if (rc)
        return rc;
    if (img->dtype != MK_U8 || (img->format != MK_FMT_RGB && img->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "grabcut image must be u8 rgb or bgr, not %s %s", mk_dtype_name(img->dtype),
                          mk_format_name(img->format));
    if ((rc = check_mem(ctx, img, "grabcut image")) || (rc = check_gray(ctx, mask, "grabcut mask")))
        return rc;
    if (img->width != mask->width || img->height != mask->height)
        return mk_err_set(MK_EINVAL, "grabcut: image %dx%d and mask %dx%d differ", img->width, img->height,
                          mask->width, mask->height);
    if (mk_image_overlap(img, mask))
        return mk_err_set(MK_EINVAL, "grabcut: the mask overlaps the image");
    return 0;
}

static int check_params(const mk_gc_params_t *p)
{
    if (!p)
        return mk_err_set(MK_EINVAL, "grabcut: NULL parameters");
    if (p->iterations < 0 || p->iterations > 100)
        return mk_err_set(MK_ERANGE, "grabcut iterations %d outside 0..100", p->iterations);
    if (!isfinite(p->gamma) || !(p->gamma > 0))
        return mk_err_set(MK_ERANGE, "grabcut gamma %g must be finite and > 0", p->gamma);
    if (!isfinite(p->lambda) || !(p->lambda > 0))
        return mk_err_set(MK_ERANGE, "grabcut lambda %g must be finite and > 0", p->lambda);
    if (p->K < 1 || p->K > MK_GC_MAX_K)
        return mk_err_set(MK_ERANGE, "grabcut K %d outside 1..%d", p->K, MK_GC_MAX_K);
    if (!isfinite(p->cap_scale) || !(p->cap_scale > 0))
        return mk_err_set(MK_ERANGE, "grabcut cap_scale %g must be finite and > 0", p->cap_scale);
    if (p->reseed != 0 && p->reseed != 1)
        return mk_err_set(MK_ERANGE, "grabcut reseed %d must be 0 or 1", p->reseed);
    return 0;
}

/* A model for the fixed-model cut: K in range, finite values, weights >= 0, and every used component's
 * covariance invertible as mk_gc_comp_set sees it. A GMM whose weights are all 0 (what mk_grabcut learns for a
 * class that lost all its pixels) has density 0 everywhere, as in OpenCV. */
static int check_gmm(const mk_gmm_t *g, const char *which)
{
    if (g->K < 1 || g->K > MK_GC_MAX_K)
        return mk_err_set(MK_ERANGE, "grabcut %s model: K %d outside 1..%d", which, g->K, MK_GC_MAX_K);
    for (int k = 0; k < g->K; k++) {
        int finite = isfinite(g->weight[k]);
        for (int i = 0; i < 3; i++)
            finite = finite && isfinite(g->mean[k][i]);
        for (int i = 0; i < 9; i++)
            finite = finite && isfinite(g->cov[k][i / 3][i % 3]);
        if (!finite || g->weight[k] < 0)
            return mk_err_set(MK_ERANGE, "grabcut %s model: component %d has a negative or non-finite value", which,
                              k);
        mk_gc_comp_t c;
        if (mk_gc_comp_set(g->weight[k], g->mean[k], &g->cov[k][0][0], &c))
            return mk_err_set(MK_ERANGE, "grabcut %s model: component %d has a singular covariance (det %g)", which,
                              k, c.det);
    }
    return 0;
}

/* Clips rect to the w x h image; MK_EINVAL when nothing is left or nothing outside it. */
static int clip_rect(const mk_rect_t *r, int w, int h, mk_rect_t *out)
{
    int64_t x0 = r->x > 0 ? r->x : 0, y0 = r->y > 0 ? r->y : 0;
    int64_t x1 = (int64_t)r->x + r->width, y1 = (int64_t)r->y + r->height;
    x1 = x1 < w ? x1 : w;
    y1 = y1 < h ? y1 : h;
    if (r->width <= 0 || r->height <= 0 || x1 <= x0 || y1 <= y0)
        return mk_err_set(MK_EINVAL, "grabcut: rectangle (%d,%d) %dx%d is empty inside the %dx%d image", r->x, r->y,
                          r->width, r->height, w, h);
    if (x0 == 0 && y0 == 0 && x1 == w && y1 == h)
        return mk_err_set(MK_EINVAL, "grabcut: rectangle (%d,%d) %dx%d covers the whole %dx%d image: no background "
                          "pixels", r->x, r->y, r->width, r->height, w, h);
    *out = (mk_rect_t){(int)x0, (int)y0, (int)(x1 - x0), (int)(y1 - y0)};
    return 0;
}

/* OpenCV's initMaskWithRect: BGD everywhere, PR_FGD inside the (clipped) rectangle, written on the backend. */
static int label_rect(mk_ctx_t *ctx, mk_image_t *mask, const mk_rect_t *r)
{
    int rc = mk_image_memset(ctx, mask, MK_GC_BGD);
    if (rc)
        return rc;
    mk_image_t in = *mask;
    in.width = r->width;
    in.height = r->height;
    in.data = (uint8_t *)mk_image_row(mask, 0, r->y) + r->x;
    in.owned = 0;
    return mk_image_memset(ctx, &in, MK_GC_PR_FGD);
}

int mk_maxflow_grid(mk_ctx_t *ctx, const mk_grid_graph_t *g, mk_image_t *cut, mk_maxflow_stats_t *stats)
{
    int rc;
    if (!ctx || !g || !cut)
        return mk_err_set(MK_EINVAL, "maxflow: NULL argument");
    if (g->width < 1 || g->height < 1 || g->width > MK_IMAGE_MAX_DIM || g->height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_EINVAL, "maxflow: grid %dx%d outside 1..%d", g->width, g->height, MK_IMAGE_MAX_DIM);
    if (g->pitch < (size_t)g->width)
        return mk_err_set(MK_EINVAL, "maxflow: pitch %zu below the width %d", g->pitch, g->width);
    if (!g->term || !g->edge[0] || !g->edge[1] || !g->edge[2] || !g->edge[3])
        return mk_err_set(MK_EINVAL, "maxflow: NULL capacity array");
    if ((rc = check_gray(ctx, cut, "maxflow cut")))
        return rc;
    if (cut->width != g->width || cut->height != g->height)
        return mk_err_set(MK_EINVAL, "maxflow: cut %dx%d and grid %dx%d differ", cut->width, cut->height, g->width,
                          g->height);
    if (ctx->backend == MK_BACKEND_CUDA) {
#if CUDA_MAXFLOW
        return mk_maxflow_grid_cuda(ctx, g, cut, stats);
#else
        return no_cuda("maxflow");
#endif
    }
    return mk_maxflow_grid_cpu(ctx, g, cut, stats);
}

/* The backend's GrabCut on checked arguments (the mask's labels are the input). */
static int grabcut_call(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_params_t *p,
                        mk_gc_model_t *model, mk_gc_stats_t *stats)
{
    if (ctx->backend == MK_BACKEND_CUDA) {
#if CUDA_GRABCUT
        return mk_grabcut_cuda(ctx, img, mask, p, model, stats);
#else
        (void)model;
        (void)stats;
        return no_cuda("grabcut");
#endif
    }
    return mk_grabcut_cpu(ctx, img, mask, p, model, stats);
}

static int cut_call(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                    const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats);

/* stats of one step added to *sum (times, rounds and relabels); flow and energy are those of the step's cut (cut:
 * the step ended with one) */
static void add_stats(mk_gc_stats_t *sum, const mk_gc_stats_t *st, int cut)
{
    sum->kmeans_us += st->kmeans_us;
    sum->gmm_us += st->gmm_us;
    sum->graph_us += st->graph_us;
    sum->maxflow_us += st->maxflow_us;
    sum->total_us += st->total_us;
    sum->rounds += st->rounds;
    sum->global_relabels += st->global_relabels;
    if (cut) {
        sum->flow = st->flow;
        sum->energy = st->energy;
    }
}

/* mk_gc_params_t.reseed: OpenCV's first iteration, then each later one as a fresh initialisation (k-means of the
 * current labels and the GMMs learnt from its clusters: the backend's GrabCut of 0 iterations) followed by the
 * fixed-model cut with that model. Both backends run the same steps, so their masks stay equal. The first
 * iteration starts warm if the caller asks; on CUDA each later cut starts from the flow of the one before (the
 * k-means call leaves it), as OpenCV's iterations keep theirs inside one call. */
static int grabcut_reseeded(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_params_t *p,
                            mk_gc_model_t *model, mk_gc_stats_t *stats)
{
    mk_gc_params_t q = *p;
    mk_gc_stats_t sum, st;
    mk_gc_model_t m, next; /* the model of the last cut, the one clustered for the next */
    memset(&sum, 0, sizeof sum);
    memset(&st, 0, sizeof st);
    q.iterations = 1;
    int rc = grabcut_call(ctx, img, mask, &q, &m, stats ? &st : NULL);
    add_stats(&sum, &st, 1);
    for (int it = 1; it < p->iterations && !rc; it++) {
        q.iterations = 0;
        memset(&st, 0, sizeof st);
        rc = grabcut_call(ctx, img, mask, &q, &next, stats ? &st : NULL);
        add_stats(&sum, &st, 0);
        if (rc == MK_EINVAL) { /* the last cut left a class without pixels: nothing to cluster, the mask stays */
            mk_err_clear();
            rc = 0;
            break;
        }
        if (rc)
            break;
        m = next;
        q.iterations = 1;
        q.warm_start = 1; /* CUDA: from the flow of this image's last cut (the k-means call keeps it) */
        memset(&st, 0, sizeof st);
        rc = cut_call(ctx, img, mask, &m, &q, NULL, stats ? &st : NULL);
        add_stats(&sum, &st, 1);
    }
    if (rc)
        return rc;
    if (model)
        *model = m;
    if (stats)
        *stats = sum;
    return 0;
}

int mk_grabcut(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_rect_t *rect,
               const mk_gc_params_t *p, mk_gc_model_t *model, mk_gc_stats_t *stats)
{
    int rc;
    mk_rect_t r = {0, 0, 0, 0};
    if (!ctx)
        return mk_err_set(MK_EINVAL, "grabcut: NULL context");
    if (!img || !mask)
        return mk_err_set(MK_EINVAL, "grabcut: NULL image or mask");
    if ((rc = check_pair(ctx, img, mask)) || (rc = check_params(p)))
        return rc;
    if (rect && ((rc = clip_rect(rect, img->width, img->height, &r)) || (rc = label_rect(ctx, mask, &r))))
        return rc;
    if (p->reseed && p->iterations > 1)
        return grabcut_reseeded(ctx, img, mask, p, model, stats);
    return grabcut_call(ctx, img, mask, p, model, stats);
}

static int cut_call(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                    const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "grabcut cut: NULL context");
    if (!img || !mask || !model)
        return mk_err_set(MK_EINVAL, "grabcut cut: NULL image, mask or model");
    if ((rc = check_pair(ctx, img, mask)) || (rc = check_params(p)) || (rc = check_gmm(&model->bgd, "background")) ||
        (rc = check_gmm(&model->fgd, "foreground")))
        return rc;
    if (ctx->backend == MK_BACKEND_CUDA) {
#if CUDA_GRABCUT
        return mk_grabcut_cut_cuda(ctx, img, mask, model, p, learnt, stats);
#else
        (void)learnt;
        (void)stats;
        return no_cuda("grabcut cut");
#endif
    }
    return mk_grabcut_cut_cpu(ctx, img, mask, model, p, learnt, stats);
}

int mk_grabcut_cut(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                   const mk_gc_params_t *p, mk_gc_stats_t *stats)
{
    return cut_call(ctx, img, mask, model, p, NULL, stats);
}

int mk_grabcut_cut_learn(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                         const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats)
{
    if (!learnt)
        return mk_err_set(MK_EINVAL, "grabcut cut: NULL learnt model");
    return cut_call(ctx, img, mask, model, p, learnt, stats);
}

int mk_grabcut_binary(mk_ctx_t *ctx, const mk_image_t *labels, mk_image_t *dst)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "grabcut binary: NULL context");
    if (!labels || !dst)
        return mk_err_set(MK_EINVAL, "grabcut binary: NULL image");
    if ((rc = check_gray(ctx, labels, "grabcut labels")) || (rc = check_gray(ctx, dst, "grabcut binary output")))
        return rc;
    if (labels->width != dst->width || labels->height != dst->height)
        return mk_err_set(MK_EINVAL, "grabcut binary: labels %dx%d and output %dx%d differ", labels->width,
                          labels->height, dst->width, dst->height);
    if (labels->data == dst->data ? labels->pitch != dst->pitch : mk_image_overlap(labels, dst))
        return mk_err_set(MK_EINVAL, "grabcut binary: output overlaps the labels (in place needs one image)");
    if (ctx->backend == MK_BACKEND_CUDA) {
#if CUDA_GRABCUT
        return mk_grabcut_binary_cuda(ctx, labels, dst);
#else
        return no_cuda("grabcut binary");
#endif
    }
    return mk_grabcut_binary_cpu(ctx, labels, dst);
}
