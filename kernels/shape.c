/* shape: argument checks, planning and backend dispatch of the rounded-box fill. */
#include "shape.h"

#include "backend.h"
#include "errors.h"

#include <math.h>

static float clamp01(float v)
{
    return !(v > 0.0f) ? 0.0f : v > 1.0f ? 1.0f : v;
}

mk_rbox_t mk_rbox_make(float x, float y, float w, float h, float round_x, float round_y)
{
    mk_rbox_t b = {x, y, x + w, y + h, 0.0f, 0.0f};
    if (w > 0.0f && h > 0.0f) {
        b.rx = clamp01(round_x) * (w / 2.0f);
        b.ry = clamp01(round_y) * (h / 2.0f);
        /* The radii must not exceed the half sides after rounding. */
        b.rx = fminf(b.rx, (b.x1 - b.x0) / 2.0f);
        b.ry = fminf(b.ry, (b.y1 - b.y0) / 2.0f);
    }
    return b;
}

static int coord_ok(float v)
{
    return isfinite(v) && fabsf(v) <= 4.0f * MK_IMAGE_MAX_DIM;
}

int mk_shape_fill(mk_ctx_t *ctx, mk_image_t *dst, const mk_rbox_t *b)
{
    int rc;
    if (!ctx || !b)
        return mk_err_set(MK_EINVAL, "shape_fill: NULL argument");
    if ((rc = mk_image_check(dst, "shape_fill output")))
        return rc;
    if (dst->format != MK_FMT_GRAY || (dst->dtype != MK_U8 && dst->dtype != MK_F32))
        return mk_err_set(MK_EINVAL, "shape_fill output must be u8 or f32 gray, not %s %s", mk_dtype_name(dst->dtype),
                          mk_format_name(dst->format));
    if (dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "shape_fill output is in %s memory; a %s context needs %s memory",
                          mk_mem_name(dst->mem), mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
    if (!coord_ok(b->x0) || !coord_ok(b->y0) || !coord_ok(b->x1) || !coord_ok(b->y1) || !coord_ok(b->rx) ||
        !coord_ok(b->ry))
        return mk_err_set(MK_ERANGE, "shape_fill: box (%g, %g)-(%g, %g) radii %g, %g: coordinates must be finite "
                          "and within +-%d", b->x0, b->y0, b->x1, b->y1, b->rx, b->ry, 4 * MK_IMAGE_MAX_DIM);
    if (b->x1 < b->x0 || b->y1 < b->y0)
        return mk_err_set(MK_ERANGE, "shape_fill: inverted box (%g, %g)-(%g, %g)", b->x0, b->y0, b->x1, b->y1);
    if (b->rx < 0.0f || b->ry < 0.0f || b->rx > (b->x1 - b->x0) / 2.0f || b->ry > (b->y1 - b->y0) / 2.0f)
        return mk_err_set(MK_ERANGE, "shape_fill: radii %g, %g outside 0..half the box's sides (%g, %g)", b->rx,
                          b->ry, (b->x1 - b->x0) / 2.0f, (b->y1 - b->y0) / 2.0f);
    mk_rbox_plan_t p = {b->x0, b->y0, b->x1, b->y1, b->x0 + b->rx, b->y0 + b->ry,
                        b->x1 - b->rx, b->y1 - b->ry, b->rx, b->ry};
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_shape_fill_cuda(ctx, dst, &p);
#endif
    return mk_shape_fill_cpu(ctx, dst, &p);
}
