/* resize: argument checks and backend dispatch of the area downsampling and the bilinear resize. */
#include "resize.h"

#include "backend.h"
#include "errors.h"

#include <stdio.h>

/* Checks shared by both ops: two u8 gray/rgb/bgr images of one format in the context's memory, not overlapping. */
static int check_pair(mk_ctx_t *ctx, const mk_image_t *src, const mk_image_t *dst, const char *op)
{
    int rc;
    char ws[64], wd[64];
    snprintf(ws, sizeof ws, "%s source", op);
    snprintf(wd, sizeof wd, "%s output", op);
    if (!ctx)
        return mk_err_set(MK_EINVAL, "%s: NULL context", op);
    if ((rc = mk_image_check(src, ws)) || (rc = mk_image_check(dst, wd)))
        return rc;
    if (src->dtype != MK_U8 || dst->dtype != MK_U8 || src->format != dst->format ||
        (src->format != MK_FMT_GRAY && src->format != MK_FMT_RGB && src->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "%s: source and output must be u8 gray, rgb or bgr of one format "
                                     "(%s %s -> %s %s)",
                          op, mk_dtype_name(src->dtype), mk_format_name(src->format), mk_dtype_name(dst->dtype),
                          mk_format_name(dst->format));
    if (src->mem != mk_ctx_mem(ctx) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "%s on %s needs %s images (source in %s, output in %s memory)", op,
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem),
                          mk_mem_name(dst->mem));
    if (mk_image_overlap(src, dst))
        return mk_err_set(MK_EINVAL, "%s: source and output overlap", op);
    return 0;
}

int mk_downsample_area(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s)
{
    int rc = check_pair(ctx, src, dst, "downsample");
    if (rc)
        return rc;
    if (s < 1 || s > MK_DOWNSAMPLE_MAX_SCALE)
        return mk_err_set(MK_ERANGE, "downsample: scale %d outside 1..%d", s, MK_DOWNSAMPLE_MAX_SCALE);
    int w = (src->width + s - 1) / s, h = (src->height + s - 1) / s;
    if (dst->width != w || dst->height != h)
        return mk_err_set(MK_EINVAL, "downsample: %dx%d by %d gives %dx%d, not %dx%d", src->width, src->height, s,
                          w, h, dst->width, dst->height);
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_downsample_area_cuda(ctx, src, dst, s);
#endif
    return mk_downsample_area_cpu(ctx, src, dst, s);
}

int mk_resize_bilinear(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    int rc = check_pair(ctx, src, dst, "resize");
    if (rc)
        return rc;
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_resize_bilinear_cuda(ctx, src, dst);
#endif
    return mk_resize_bilinear_cpu(ctx, src, dst);
}
