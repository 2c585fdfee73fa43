/* guided: the guided filter of He, Sun and Tang (grey or colour guide) and the fast guided filter of He and Sun
 * (2015) as the upsampling of a low-resolution mask to the guide's resolution, with the mask products fused in.
 *
 * Definitions (guide I scaled to [0,1], source p, radius r, box windows of (2r+1)^2 pixels):
 *   per window: mean_I, mean_p, Sigma = cov(I, I) (3x3 for colour), c = cov(I, p)
 *   a = (Sigma + eps U)^-1 c,  b = mean_p - a . mean_I        (U the identity)
 *   q = mean(a) . I + mean(b)                                  (means over each pixel's window)
 * Fast variant with scale s: a and b are computed at 1/s resolution (the guide reduced by s x s area averages,
 * rounded to u8; the source given at that resolution; radius round(r / s)), mean(a) and mean(b) are taken there,
 * upsampled bilinearly (sample centres aligned: full x maps to (x + 1/2) / s - 1/2, clamped at the edges) and
 * applied to the full-resolution guide in one pass.
 *
 * Borders: every box window reflects at the image edge like OpenCV's guidedFilter (BORDER_REFLECT, fedcba|abcdef),
 * so each window has (2r+1)^2 samples and there is no dark or bright frame; a radius beyond the image reflects
 * again (the image extended periodically with period 2w, mirrored). Results equal
 * cv2.ximgproc.guidedFilter(guide / 255, src, r, eps) to float rounding, border pixels included, for grey guides,
 * for eps >= 1e-2, and otherwise with MK_GUIDED_OPENCV (below).
 *
 * Arithmetic: the guide is u8 and the source is held as a 16-bit fixed-point fraction (u8 v as v * 257 / 65535
 * exactly; f32 p clamped to [0,1] and rounded to the nearest 1/65535), so every box sum of the first pass is an
 * exact integer, whatever the radius. a and b are solved in double from those sums (the covariances
 * n S_ij - S_i S_j are exact up to radius ~75), rounded to float, box-summed in double and applied in double
 * (full filter) or, after the means are rounded to float, in float (fast filter). eps below 1e-12 acts as 1e-12,
 * and a window whose system is not positive definite after rounding (possible only at eps ~ 0) gets a = 0,
 * b = mean_p, so eps = 0 gives finite results everywhere.
 *
 * MK_GUIDED_OPENCV reproduces a quirk of OpenCV 4.x (ximgproc guided_filter.cpp) for colour guides: with
 * eps < 1e-2, a window whose det(Sigma + eps U) < 1e-6 has its determinant replaced by 1, so there a is the
 * adjugate times c, about 0: in flat and mildly textured windows the output is then nearly the box mean of p.
 * That is what OpenCV returns (the eps = 1e-4 references of the shared data were made so); without the flag the
 * filter is the paper's. Grey guides have no such guard in OpenCV and ignore the flag. */
#ifndef MK_GUIDED_H
#define MK_GUIDED_H

#include "image.h"
#include "mask.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_GUIDED_MAX_RADIUS 65535
#define MK_GUIDED_MAX_SCALE 64
/* On the CUDA backend, working radii (mk_guided_work_radius) up to this run the fast strip kernels; larger ones
 * the summed-area-table path: several times slower, with (moments + C + 1) x 8 bytes of scratch per working pixel
 * (about 300 MB for a colour guide at 1920x1080). */
#define MK_GUIDED_TILE_RADIUS 32

enum {
    MK_GUIDED_OPENCV = 1u << 0, /* OpenCV 4.x's determinant guard for colour guides (see above) */
};

typedef struct {
    int radius;     /* box radius in pixels of the guide's (full) resolution, 0..MK_GUIDED_MAX_RADIUS */
    double eps;     /* regularisation for the guide scaled to [0,1] (OpenCV with a u8 guide: eps * 255^2), >= 0 */
    int scale;      /* 1: the guided filter; s > 1: the fast guided filter, source at 1/s; 1..MK_GUIDED_MAX_SCALE */
    unsigned flags; /* MK_GUIDED_* */
} mk_guided_t;

/* The radius the box sums use: radius for scale 1, else radius / scale rounded to nearest (halves up). */
int mk_guided_work_radius(const mk_guided_t *g);

/* Guided filter at one resolution. guide: u8 gray, RGB or BGR; src: u8 gray (v / 255) or f32 gray, the size of
 * guide; dst: f32 gray (q) or u8 gray (alpha, as mk_mask_t's), the size of guide. All in the context's memory; dst
 * must not overlap the inputs. flags: MK_GUIDED_*. */
int mk_guided_filter(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *src, mk_image_t *dst, int radius,
                     double eps, unsigned flags);

/* Fast guided upsampling with the mask products fused: guide (full resolution, u8 gray/RGB/BGR, w x h), mask at
 * ceil(w / s) x ceil(h / s) (u8 gray or f32 gray, as src above), dst the product of mask m (NULL: soft at (0, 0))
 * for a w x h result placed at (m->x, m->y) of dst, the rest of dst zeroed. guide may be a view into a larger frame
 * (a region of interest with the frame's pitch) and dst the full frame's mask. scale 1 is the guided filter. */
int mk_guided_upsample(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask, mk_image_t *dst,
                       const mk_guided_t *g, const mk_mask_t *m);

#ifdef __cplusplus
}
#endif
#endif
