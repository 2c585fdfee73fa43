/* shape_cpu: the reference rounded-box fill, one pixel at a time. */
#include "backend.h"
#include "shape_px.h"

int mk_shape_fill_cpu(mk_ctx_t *ctx, mk_image_t *dst, const mk_rbox_plan_t *p)
{
    (void)ctx;
    for (int y = 0; y < dst->height; y++) {
        if (dst->dtype == MK_U8) {
            uint8_t *d = mk_image_row(dst, 0, y);
            for (int x = 0; x < dst->width; x++)
                d[x] = mk_px_rbox_inside(p, x, y) ? 255 : 0;
        } else {
            float *d = mk_image_row(dst, 0, y);
            for (int x = 0; x < dst->width; x++)
                d[x] = mk_px_rbox_inside(p, x, y) ? 1.0f : 0.0f;
        }
    }
    return 0;
}
