/* threshold: argument checks, backend dispatch and names of the threshold ops. */
#include "threshold.h"

#include "backend.h"
#include "errors.h"
#include "threshold_px.h"

#include <strings.h>

static const char *const mode_names[] = {"binary", "binary-inv", "trunc", "tozero", "tozero-inv"};

const char *mk_thresh_mode_name(mk_thresh_mode_t mode)
{
    return (unsigned)mode <= MK_THRESH_TOZERO_INV ? mode_names[mode] : "?";
}

int mk_thresh_mode_parse(const char *s, mk_thresh_mode_t *out)
{
    for (int i = 0; s && i <= MK_THRESH_TOZERO_INV; i++)
        if (!strcasecmp(s, mode_names[i])) {
            *out = (mk_thresh_mode_t)i;
            return 0;
        }
    return mk_err_set(MK_EINVAL, "unknown threshold mode '%s' (binary|binary-inv|trunc|tozero|tozero-inv)",
                      s ? s : "(null)");
}

static int check_gray(mk_ctx_t *ctx, const mk_image_t *img, const char *what)
{
    int rc = mk_image_check(img, what);
    if (rc)
        return rc;
    if (img->dtype != MK_U8 || img->format != MK_FMT_GRAY)
        return mk_err_set(MK_EINVAL, "%s must be u8 gray, not %s %s", what, mk_dtype_name(img->dtype),
                          mk_format_name(img->format));
    if (img->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "%s is in %s memory; a %s context needs %s memory", what,
                          mk_mem_name(img->mem), mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    return 0;
}

static int check_pair(mk_ctx_t *ctx, const mk_image_t *src, const mk_image_t *dst, int maxval,
                      mk_thresh_mode_t mode)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "threshold: NULL context");
    if ((rc = check_gray(ctx, src, "threshold source")) || (rc = check_gray(ctx, dst, "threshold output")))
        return rc;
    if (src->width != dst->width || src->height != dst->height)
        return mk_err_set(MK_EINVAL, "threshold: source %dx%d and output %dx%d differ", src->width, src->height,
                          dst->width, dst->height);
    if (src->data == dst->data && src->pitch != dst->pitch)
        return mk_err_set(MK_EINVAL, "threshold in place needs one pitch (%zu vs %zu)", src->pitch, dst->pitch);
    if (maxval < 0 || maxval > 255)
        return mk_err_set(MK_ERANGE, "threshold maxval %d outside 0..255", maxval);
    if ((unsigned)mode > MK_THRESH_TOZERO_INV)
        return mk_err_set(MK_EINVAL, "unknown threshold mode %d", (int)mode);
    return 0;
}

int mk_threshold(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int thresh, int maxval,
                 mk_thresh_mode_t mode)
{
    int rc = check_pair(ctx, src, dst, maxval, mode);
    if (rc)
        return rc;
    if (thresh < 0 || thresh > 255)
        return mk_err_set(MK_ERANGE, "threshold %d outside 0..255", thresh);
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_threshold_cuda(ctx, src, dst, thresh, maxval, mode);
#endif
    return mk_threshold_cpu(ctx, src, dst, thresh, maxval, mode);
}

int mk_threshold_otsu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int maxval, mk_thresh_mode_t mode,
                      int *thresh_out)
{
    int rc = check_pair(ctx, src, dst, maxval, mode);
    if (rc)
        return rc;
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_threshold_otsu_cuda(ctx, src, dst, maxval, mode, thresh_out);
#endif
    return mk_threshold_otsu_cpu(ctx, src, dst, maxval, mode, thresh_out);
}

int mk_histogram(mk_ctx_t *ctx, const mk_image_t *src, uint32_t hist[256])
{
    int rc;
    if (!ctx || !hist)
        return mk_err_set(MK_EINVAL, "histogram: NULL argument");
    if ((rc = check_gray(ctx, src, "histogram source")))
        return rc;
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_histogram_cuda(ctx, src, hist);
#endif
    return mk_histogram_cpu(ctx, src, hist);
}

int mk_otsu_from_histogram(const uint32_t hist[256], uint64_t total)
{
    if (!hist || total == 0)
        return mk_err_set(MK_EINVAL, "otsu: empty histogram");
    return mk_px_otsu(hist, (double)total);
}
