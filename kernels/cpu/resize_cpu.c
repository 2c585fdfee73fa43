/* resize_cpu: the area downsampling, one output pixel at a time through the guided filter's reduction, and the
 * bilinear resize, one output pixel at a time. */
#include "backend.h"
#include "composite_px.h"
#include "guided_px.h"

int mk_downsample_area_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s)
{
    (void)ctx;
    int C = src->channels;
    for (int y = 0; y < dst->height; y++) {
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < dst->width; x++) {
            int g[3] = {0, 0, 0}; /* C values set; initialised for gcc -O3's -Wmaybe-uninitialized */
            mk_px_guide_at(src->data, src->pitch, C, src->width, src->height, s, x, y, g);
            for (int c = 0; c < C; c++)
                d[(size_t)x * C + c] = (uint8_t)g[c];
        }
    }
    return 0;
}

int mk_resize_bilinear_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    (void)ctx;
    int C = src->channels;
    for (int y = 0; y < dst->height; y++) {
        int y0, y1, ay;
        mk_px_bilinear_pos(y, src->height, dst->height, &y0, &y1, &ay);
        const uint8_t *r0 = mk_image_row(src, 0, y0), *r1 = mk_image_row(src, 0, y1);
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < dst->width; x++) {
            int x0, x1, ax;
            mk_px_bilinear_pos(x, src->width, dst->width, &x0, &x1, &ax);
            for (int c = 0; c < C; c++)
                d[x * C + c] = mk_px_bilinear(r0[x0 * C + c], r0[x1 * C + c], r1[x0 * C + c], r1[x1 * C + c], ax, ay);
        }
    }
    return 0;
}
