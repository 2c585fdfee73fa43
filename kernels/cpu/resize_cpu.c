/* resize_cpu: the area downsampling, one output pixel at a time through the guided filter's reduction. */
#include "backend.h"
#include "guided_px.h"

int mk_downsample_area_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s)
{
    (void)ctx;
    int C = src->channels;
    for (int y = 0; y < dst->height; y++) {
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < dst->width; x++) {
            int g[3];
            mk_px_guide_at(src->data, src->pitch, C, src->width, src->height, s, x, y, g);
            for (int c = 0; c < C; c++)
                d[(size_t)x * C + c] = (uint8_t)g[c];
        }
    }
    return 0;
}
