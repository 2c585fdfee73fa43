/* yuyv: argument checks and backend dispatch of the YUYV -> RGB/BGR conversion. */
#include "yuyv.h"

#include "backend.h"
#include "errors.h"

int mk_yuyv_to_rgb(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "yuyv_to_rgb: NULL context");
    if ((rc = mk_image_check(src, "yuyv_to_rgb source")) || (rc = mk_image_check(dst, "yuyv_to_rgb output")))
        return rc;
    if (src->format != MK_FMT_YUYV)
        return mk_err_set(MK_EINVAL, "yuyv_to_rgb source must be yuyv, not %s", mk_format_name(src->format));
    if (dst->dtype != MK_U8 || (dst->format != MK_FMT_RGB && dst->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "yuyv_to_rgb output must be u8 rgb or bgr, not %s %s",
                          mk_dtype_name(dst->dtype), mk_format_name(dst->format));
    if (src->width != dst->width || src->height != dst->height)
        return mk_err_set(MK_EINVAL, "yuyv_to_rgb: source %dx%d and output %dx%d differ", src->width, src->height,
                          dst->width, dst->height);
    if (src->mem != mk_ctx_mem(ctx) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "yuyv_to_rgb on %s needs %s images (source in %s, output in %s memory)",
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem),
                          mk_mem_name(dst->mem));
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_yuyv_to_rgb_cuda(ctx, src, dst);
#endif
    return mk_yuyv_to_rgb_cpu(ctx, src, dst);
}
