/* guided: planning, argument checks and backend dispatch of the guided filter and the fast guided upsampling. */
#include "guided.h"

#include "backend.h"
#include "errors.h"

#include <math.h>

int mk_guided_work_radius(const mk_guided_t *g)
{
    return g->scale <= 1 ? g->radius : (g->radius + g->scale / 2) / g->scale;
}

int mk_guided_plan(const mk_guided_t *g, int C, int w, int h, mk_guided_plan_t *pl)
{
    if (!g || !pl)
        return mk_err_set(MK_EINVAL, "guided: NULL parameters");
    if (g->radius < 0 || g->radius > MK_GUIDED_MAX_RADIUS)
        return mk_err_set(MK_ERANGE, "guided radius %d outside 0..%d", g->radius, MK_GUIDED_MAX_RADIUS);
    if (!isfinite(g->eps) || g->eps < 0)
        return mk_err_set(MK_ERANGE, "guided eps %g must be finite and >= 0", g->eps);
    if (g->scale < 1 || g->scale > MK_GUIDED_MAX_SCALE)
        return mk_err_set(MK_ERANGE, "guided scale %d outside 1..%d", g->scale, MK_GUIDED_MAX_SCALE);
    if (g->flags & ~(unsigned)MK_GUIDED_OPENCV)
        return mk_err_set(MK_EINVAL, "unknown guided flags 0x%x", g->flags);
    if ((C != 1 && C != 3) || w < 1 || h < 1 || w > MK_IMAGE_MAX_DIM || h > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_EINVAL, "guided: %d-channel %dx%d guide", C, w, h);
    pl->C = C;
    pl->nm = MK_GUIDED_NM(C);
    pl->s = g->scale;
    pl->w = w;
    pl->h = h;
    pl->wl = (w + g->scale - 1) / g->scale;
    pl->hl = (h + g->scale - 1) / g->scale;
    pl->r = mk_guided_work_radius(g);
    double side = 2.0 * pl->r + 1.0;
    pl->n = side * side;
    pl->inv_n = 1.0 / pl->n;
    /* The moment sums count guide levels (x 255) and source steps (x 65535) over n samples: a covariance
     * n S_ij - S_i S_j is n^2 255^2 times its value for the guide in [0,1]. */
    double k = pl->n * pl->n * 65025.0;
    pl->lambda = (g->eps > MK_GUIDED_EPS_MIN ? g->eps : MK_GUIDED_EPS_MIN) * k;
    pl->compat = (g->flags & MK_GUIDED_OPENCV) && C == 3 && g->eps < 1e-2;
    pl->guard_det = k * k * k;
    pl->guard = 1e-6 * pl->guard_det;
    return 0;
}

static int check_in(mk_ctx_t *ctx, const mk_image_t *img, const char *what, int color)
{
    int rc = mk_image_check(img, what);
    if (rc)
        return rc;
    if (color) {
        if (img->dtype != MK_U8 ||
            (img->format != MK_FMT_GRAY && img->format != MK_FMT_RGB && img->format != MK_FMT_BGR))
            return mk_err_set(MK_EINVAL, "%s must be u8 gray, rgb or bgr, not %s %s", what, mk_dtype_name(img->dtype),
                              mk_format_name(img->format));
    } else if ((img->dtype != MK_U8 && img->dtype != MK_F32) || img->format != MK_FMT_GRAY) {
        return mk_err_set(MK_EINVAL, "%s must be u8 or f32 gray, not %s %s", what, mk_dtype_name(img->dtype),
                          mk_format_name(img->format));
    }
    if (img->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "%s is in %s memory; a %s context needs %s memory", what, mk_mem_name(img->mem),
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    return 0;
}

int mk_guided_upsample(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask, mk_image_t *dst,
                       const mk_guided_t *g, const mk_mask_t *m)
{
    int rc;
    mk_guided_plan_t pl;
    mk_mask_t soft = mk_mask_soft();
    if (!ctx || !g)
        return mk_err_set(MK_EINVAL, "guided: NULL argument");
    m = m ? m : &soft;
    if ((rc = check_in(ctx, guide, "guided guide", 1)) || (rc = check_in(ctx, mask, "guided source", 0)) ||
        (rc = mk_guided_plan(g, guide->channels, guide->width, guide->height, &pl)) ||
        (rc = mk_mask_check(m, guide->width, guide->height, dst)))
        return rc;
    if (mask->width != pl.wl || mask->height != pl.hl)
        return mk_err_set(MK_EINVAL, "guided: a %dx%d guide at scale %d needs a %dx%d source, not %dx%d", pl.w, pl.h,
                          pl.s, pl.wl, pl.hl, mask->width, mask->height);
    if (dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "guided output is in %s memory; a %s context needs %s memory",
                          mk_mem_name(dst->mem), mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    if (mk_image_overlap(dst, guide) || mk_image_overlap(dst, mask))
        return mk_err_set(MK_EINVAL, "guided output overlaps an input");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        rc = mk_guided_upsample_cuda(ctx, guide, mask, dst, &pl, m);
    else
#endif
        rc = mk_guided_upsample_cpu(ctx, guide, mask, dst, &pl, m);
    return rc ? rc : mk_mask_finish(ctx, dst, m, pl.w, pl.h);
}

int mk_guided_filter(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *src, mk_image_t *dst, int radius,
                     double eps, unsigned flags)
{
    mk_guided_t g = {radius, eps, 1, flags};
    mk_mask_t m = mk_mask_soft();
    if (dst && dst->dtype == MK_U8)
        m.mode = MK_MASK_ALPHA;
    if (dst && guide && (dst->width != guide->width || dst->height != guide->height))
        return mk_err_set(MK_EINVAL, "guided: output %dx%d differs from the %dx%d guide", dst->width, dst->height,
                          guide->width, guide->height);
    return mk_guided_upsample(ctx, guide, src, dst, &g, &m);
}
