/* resize: area downsampling by an integer factor, and a bilinear resize to any size.
 *
 * Area downsampling by an integer factor — the reduction the fast guided filter applies to its guide
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

/* Bilinear resize of the whole of src to the whole of dst (any sizes; a crop is a view of src), pixel centres
 * aligned: output pixel x samples the source at (x + 1/2) w_src / w_dst - 1/2 (likewise y), floored to 1/256 of a
 * pixel and clamped to the source (border repeated); the four neighbours are weighted by those 8-bit fractions and
 * the result rounded to nearest (composite_px.h, integers: CPU and CUDA give the same bytes). Meant for upscaling
 * and moderate downscaling: shrink by more than 2 with mk_downsample_area first. src, dst: u8 gray, RGB or BGR of
 * one format, in the context's memory, not overlapping. */
int mk_resize_bilinear(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst);

#ifdef __cplusplus
}
#endif
#endif
