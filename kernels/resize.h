/* resize: area downsampling by an integer factor — the reduction the fast guided filter applies to its guide
 * (guided_px.h, mk_px_guide_at), as an op, so that a cut working at 1/s resolution (GrabCut) sees exactly the
 * colours the guided filter's coefficients are computed against.
 *
 * Output pixel (x, y) is the average of the s x s block at (x s, y s) of the source, clipped at the right and
 * bottom edges, rounded to nearest with halves up (integer arithmetic: CPU and CUDA give the same bytes). */
#ifndef MK_RESIZE_H
#define MK_RESIZE_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_DOWNSAMPLE_MAX_SCALE 64

/* src: u8 GRAY, RGB or BGR; dst: the same format, ceil(w / s) x ceil(h / s); both in the context's memory;
 * s in 1..MK_DOWNSAMPLE_MAX_SCALE. */
int mk_downsample_area(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s);

#ifdef __cplusplus
}
#endif
#endif
