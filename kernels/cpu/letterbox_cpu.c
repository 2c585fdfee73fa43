/* letterbox_cpu: the reference letterbox, one output pixel at a time. */
#include "backend.h"
#include "letterbox_px.h"

int mk_letterbox_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, const mk_letterbox_t *lb)
{
    (void)ctx;
    for (int y = 0; y < dst->height; y++) {
        float *r = mk_image_row(dst, 0, y), *g = mk_image_row(dst, 1, y), *b = mk_image_row(dst, 2, y);
        for (int x = 0; x < dst->width; x++) {
            float v[3];
            mk_px_letterbox(lb, src->data, src->pitch, src->format, x, y, v);
            r[x] = v[0];
            g[x] = v[1];
            b[x] = v[2];
        }
    }
    return 0;
}
