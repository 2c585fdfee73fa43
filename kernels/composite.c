/* composite: argument checks and backend dispatch of the blend and the blur. */
#include "composite.h"

#include "backend.h"
#include "errors.h"

static int check_colour(mk_ctx_t *ctx, const mk_image_t *img, const char *what, int gray_ok)
{
    int rc = mk_image_check(img, what);
    if (rc)
        return rc;
    if (img->dtype != MK_U8 ||
        (img->format != MK_FMT_RGB && img->format != MK_FMT_BGR && !(gray_ok && img->format == MK_FMT_GRAY)))
        return mk_err_set(MK_EINVAL, "%s must be u8 %s, not %s %s", what, gray_ok ? "gray, rgb or bgr" : "rgb or bgr",
                          mk_dtype_name(img->dtype), mk_format_name(img->format));
    if (img->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "%s is in %s memory; a %s context needs %s memory", what, mk_mem_name(img->mem),
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    return 0;
}

static int check_same(const mk_image_t *a, const mk_image_t *b, const char *op, const char *an, const char *bn)
{
    if (a->width != b->width || a->height != b->height || a->format != b->format)
        return mk_err_set(MK_EINVAL, "%s: %s %dx%d %s and %s %dx%d %s differ", op, an, a->width, a->height,
                          mk_format_name(a->format), bn, b->width, b->height, mk_format_name(b->format));
    return 0;
}

/* out may be `in` itself (each pixel is read before it is written, by the same thread), not a partial overlap. */
static int check_alias(const mk_image_t *in, const mk_image_t *out, const char *what)
{
    if (in->data == out->data && in->pitch == out->pitch)
        return 0;
    if (mk_image_overlap(in, out))
        return mk_err_set(MK_EINVAL, "composite: the output overlaps the %s without being it", what);
    return 0;
}

int mk_composite(mk_ctx_t *ctx, const mk_image_t *frame, const mk_image_t *alpha, const mk_image_t *bg,
                 mk_image_t *out)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "composite: NULL context");
    if ((rc = check_colour(ctx, frame, "composite frame", 0)) ||
        (rc = check_colour(ctx, bg, "composite background", 0)) || (rc = check_colour(ctx, out, "composite output", 0)))
        return rc;
    if ((rc = mk_image_check(alpha, "composite alpha")))
        return rc;
    if (alpha->dtype != MK_U8 || alpha->format != MK_FMT_GRAY)
        return mk_err_set(MK_EINVAL, "composite alpha must be u8 gray, not %s %s", mk_dtype_name(alpha->dtype),
                          mk_format_name(alpha->format));
    if (alpha->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "composite alpha is in %s memory; a %s context needs %s memory",
                          mk_mem_name(alpha->mem), mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    if ((rc = check_same(frame, bg, "composite", "frame", "background")) ||
        (rc = check_same(frame, out, "composite", "frame", "output")))
        return rc;
    if (alpha->width != frame->width || alpha->height != frame->height)
        return mk_err_set(MK_EINVAL, "composite: alpha %dx%d and frame %dx%d differ", alpha->width, alpha->height,
                          frame->width, frame->height);
    if ((rc = check_alias(frame, out, "frame")) || (rc = check_alias(bg, out, "background")))
        return rc;
    if (mk_image_overlap(alpha, out))
        return mk_err_set(MK_EINVAL, "composite: the output overlaps the alpha");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_composite_cuda(ctx, frame, alpha, bg, out);
#endif
    return mk_composite_cpu(ctx, frame, alpha, bg, out);
}

int mk_blur(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int r)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "blur: NULL context");
    if ((rc = check_colour(ctx, src, "blur source", 1)) || (rc = check_colour(ctx, dst, "blur output", 1)))
        return rc;
    if ((rc = check_same(src, dst, "blur", "source", "output")))
        return rc;
    if (r < 0 || r > MK_BLUR_MAX_RADIUS)
        return mk_err_set(MK_ERANGE, "blur: radius %d outside 0..%d", r, MK_BLUR_MAX_RADIUS);
    if (mk_image_overlap(src, dst))
        return mk_err_set(MK_EINVAL, "blur: source and output overlap");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_blur_cuda(ctx, src, dst, r);
#endif
    return mk_blur_cpu(ctx, src, dst, r);
}
