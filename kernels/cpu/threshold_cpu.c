/* threshold_cpu: the reference threshold, histogram and Otsu. */
#include "backend.h"
#include "threshold_px.h"

#include <string.h>

int mk_threshold_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int thresh, int maxval,
                     mk_thresh_mode_t mode)
{
    (void)ctx;
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = mk_image_row(src, 0, y);
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int x = 0; x < src->width; x++)
            d[x] = mk_px_threshold(s[x], thresh, maxval, mode);
    }
    return 0;
}

int mk_histogram_cpu(mk_ctx_t *ctx, const mk_image_t *src, uint32_t hist[256])
{
    (void)ctx;
    memset(hist, 0, 256 * sizeof hist[0]);
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = mk_image_row(src, 0, y);
        for (int x = 0; x < src->width; x++)
            hist[s[x]]++;
    }
    return 0;
}

int mk_threshold_otsu_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int maxval,
                          mk_thresh_mode_t mode, int *thresh_out)
{
    uint32_t hist[256];
    mk_histogram_cpu(ctx, src, hist);
    int t = mk_px_otsu(hist, (double)src->width * src->height);
    if (thresh_out)
        *thresh_out = t;
    return mk_threshold_cpu(ctx, src, dst, t, maxval, mode);
}
