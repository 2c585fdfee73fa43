/* composite: putting the person of a frame over another background — the blend of a frame and a background by a
 * mask, and the blur that makes a background of the frame itself.
 *
 * mk_composite: out = frame a + bg (1 - a) per channel with a = alpha / 255, computed as
 * (f a + b (255 - a) + 127) / 255 in integers: the exact blend rounded to nearest (composite_px.h). alpha 255 gives
 * the frame's byte, 0 the background's.
 *
 * mk_blur: an approximate Gaussian of standard deviation about sqrt(r (r + 1)): a box filter of radius r (window
 * 2r + 1) applied three times along every row, then three times along every column, each pass rounding its mean to
 * nearest u8 ((sum + r) / (2r + 1)). Pixels beyond the image repeat its border pixels (replicate), so a constant
 * image stays constant; r larger than the image is allowed (the window is then mostly border copies). Each pass
 * keeps a running sum: the cost per pixel does not grow with r.
 *
 * Both ops give the same bytes on the CPU and CUDA backends. */
#ifndef MK_COMPOSITE_H
#define MK_COMPOSITE_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_BLUR_MAX_RADIUS MK_IMAGE_MAX_DIM

/* frame, bg, out: u8 RGB or BGR, all of one format and size; alpha: u8 gray of that size; all in the context's
 * memory, any pitch. out may be frame or bg (the same data and pitch) but must not otherwise overlap them. */
int mk_composite(mk_ctx_t *ctx, const mk_image_t *frame, const mk_image_t *alpha, const mk_image_t *bg,
                 mk_image_t *out);

/* src, dst: u8 gray, RGB or BGR of one format and size in the context's memory, not overlapping; r in
 * 0..MK_BLUR_MAX_RADIUS (0 copies src). The CPU backend allocates a temporary image per call, the CUDA backend
 * keeps two images' worth of scratch in the context. */
int mk_blur(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int r);

#ifdef __cplusplus
}
#endif
#endif
