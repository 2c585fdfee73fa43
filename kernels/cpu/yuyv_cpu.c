/* yuyv_cpu: the reference YUYV -> RGB/BGR conversion, one pixel pair at a time. */
#include "backend.h"
#include "letterbox_px.h"

int mk_yuyv_to_rgb_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst)
{
    (void)ctx;
    int bgr = dst->format == MK_FMT_BGR;
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = mk_image_row(src, 0, y);
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < src->width; x += 2, s += 4, d += 6) {
            uint8_t a[3], b[3];
            mk_px_yuv_to_rgb(s[0], s[1], s[3], a);
            mk_px_yuv_to_rgb(s[2], s[1], s[3], b);
            for (int c = 0; c < 3; c++) {
                d[bgr ? 2 - c : c] = a[c];
                d[3 + (bgr ? 2 - c : c)] = b[c];
            }
        }
    }
    return 0;
}
