/* resize: argument checks and backend dispatch of the area downsampling. */
#include "resize.h"

#include "backend.h"
#include "errors.h"

int mk_downsample_area(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "downsample: NULL context");
    if ((rc = mk_image_check(src, "downsample source")) || (rc = mk_image_check(dst, "downsample output")))
        return rc;
    if (s < 1 || s > MK_DOWNSAMPLE_MAX_SCALE)
        return mk_err_set(MK_ERANGE, "downsample: scale %d outside 1..%d", s, MK_DOWNSAMPLE_MAX_SCALE);
    if (src->dtype != MK_U8 || dst->dtype != MK_U8 || src->format != dst->format ||
        (src->format != MK_FMT_GRAY && src->format != MK_FMT_RGB && src->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "downsample: source and output must be u8 gray, rgb or bgr of one format "
                                     "(%s %s -> %s %s)",
                          mk_dtype_name(src->dtype), mk_format_name(src->format), mk_dtype_name(dst->dtype),
                          mk_format_name(dst->format));
    int w = (src->width + s - 1) / s, h = (src->height + s - 1) / s;
    if (dst->width != w || dst->height != h)
        return mk_err_set(MK_EINVAL, "downsample: %dx%d by %d gives %dx%d, not %dx%d", src->width, src->height, s,
                          w, h, dst->width, dst->height);
    if (src->mem != mk_ctx_mem(ctx) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "downsample on %s needs %s images (source in %s, output in %s memory)",
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem),
                          mk_mem_name(dst->mem));
    if (mk_image_overlap(src, dst))
        return mk_err_set(MK_EINVAL, "downsample: source and output overlap");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_downsample_area_cuda(ctx, src, dst, s);
#endif
    return mk_downsample_area_cpu(ctx, src, dst, s);
}
