/* mask: names, argument checks and backend dispatch of the mask products. */
#include "mask.h"

#include "backend.h"
#include "errors.h"
#include "threshold.h"

#include <math.h>
#include <strings.h>

static const char *const mode_names[] = {"soft", "alpha", "binary", "otsu"};

const char *mk_mask_mode_name(mk_mask_mode_t mode)
{
    return (unsigned)mode <= MK_MASK_OTSU ? mode_names[mode] : "?";
}

int mk_mask_mode_parse(const char *s, mk_mask_mode_t *out)
{
    for (int i = 0; s && i <= MK_MASK_OTSU; i++)
        if (!strcasecmp(s, mode_names[i])) {
            *out = (mk_mask_mode_t)i;
            return 0;
        }
    return mk_err_set(MK_EINVAL, "unknown mask mode '%s' (soft|alpha|binary|otsu)", s ? s : "(null)");
}

int mk_mask_check(const mk_mask_t *m, int w, int h, const mk_image_t *dst)
{
    int rc;
    if (!m)
        return mk_err_set(MK_EINVAL, "mask: NULL product specification");
    if ((unsigned)m->mode > MK_MASK_OTSU)
        return mk_err_set(MK_EINVAL, "unknown mask mode %d", (int)m->mode);
    if (!isfinite(m->thresh))
        return mk_err_set(MK_ERANGE, "mask threshold is not finite");
    if (!isfinite(m->feather) || m->feather < 0)
        return mk_err_set(MK_ERANGE, "mask feather %g must be finite and >= 0", (double)m->feather);
    if ((rc = mk_image_check(dst, "mask output")))
        return rc;
    mk_dtype_t want = m->mode == MK_MASK_SOFT ? MK_F32 : MK_U8;
    if (dst->format != MK_FMT_GRAY || dst->dtype != want)
        return mk_err_set(MK_EINVAL, "a %s mask needs a %s gray output, not %s %s", mk_mask_mode_name(m->mode),
                          mk_dtype_name(want), mk_dtype_name(dst->dtype), mk_format_name(dst->format));
    if (m->x < 0 || m->y < 0 || m->x > dst->width - w || m->y > dst->height - h)
        return mk_err_set(MK_ERANGE, "a %dx%d mask at (%d, %d) does not fit the %dx%d output", w, h, m->x, m->y,
                          dst->width, dst->height);
    return 0;
}

int mk_mask_finish(mk_ctx_t *ctx, mk_image_t *dst, const mk_mask_t *m, int w, int h)
{
    if (m->mode != MK_MASK_OTSU)
        return 0;
    mk_image_t roi = *dst;
    roi.data = (uint8_t *)mk_image_row(dst, 0, m->y) + m->x;
    roi.width = w;
    roi.height = h;
    roi.owned = 0;
    return mk_threshold_otsu(ctx, &roi, &roi, 255, MK_THRESH_BINARY, NULL);
}

int mk_mask_compose(mk_ctx_t *ctx, const mk_image_t *soft, mk_image_t *dst, const mk_mask_t *m)
{
    int rc;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "mask: NULL context");
    if ((rc = mk_image_check(soft, "soft mask")))
        return rc;
    if (soft->dtype != MK_F32 || soft->format != MK_FMT_GRAY)
        return mk_err_set(MK_EINVAL, "soft mask must be f32 gray, not %s %s", mk_dtype_name(soft->dtype),
                          mk_format_name(soft->format));
    if ((rc = mk_mask_check(m, soft->width, soft->height, dst)))
        return rc;
    if (soft->mem != mk_ctx_mem(ctx) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "mask on %s needs %s images (soft mask in %s, output in %s memory)",
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(soft->mem),
                          mk_mem_name(dst->mem));
    if (mk_image_overlap(soft, dst))
        return mk_err_set(MK_EINVAL, "mask output overlaps the soft mask");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        rc = mk_mask_compose_cuda(ctx, soft, dst, m);
    else
#endif
        rc = mk_mask_compose_cpu(ctx, soft, dst, m);
    return rc ? rc : mk_mask_finish(ctx, dst, m, soft->width, soft->height);
}
