/* mask: the products made from a soft mask (values nominally in [0,1], 1 = foreground): soft f32, alpha u8,
 * binary u8 by a fixed threshold (optionally feathered) or by Otsu's threshold, pasted into a full-frame mask.
 *
 * For a soft value q:
 *   soft:    q unchanged (f32 output)
 *   alpha:   round(255 * clamp(q, 0, 1)) (halves round up; NaN gives 0)
 *   binary:  q > thresh ? 255 : 0; with feather f > 0 a linear ramp of width f centred on thresh instead:
 *            255 * clamp((q - thresh) / f + 1/2, 0, 1), rounded as alpha
 *   otsu:    the alpha of the pasted region, then binarised at Otsu's threshold of that region's histogram
 *            (mk_threshold_otsu, binary, maxval 255)
 * Paste: the result of a w x h soft mask lands at (x, y) in the output, which may be larger (the full frame);
 * every output pixel outside that rectangle is set to 0 (background) in the same pass. */
#ifndef MK_MASK_H
#define MK_MASK_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_MASK_SOFT = 0,   /* f32 output */
    MK_MASK_ALPHA = 1,  /* u8 output */
    MK_MASK_BINARY = 2, /* u8 output: 0 or 255 (ramp values with feather) */
    MK_MASK_OTSU = 3,   /* u8 output: 0 or 255 */
} mk_mask_mode_t;

typedef struct {
    mk_mask_mode_t mode;
    float thresh;  /* binary: foreground where q > thresh (finite) */
    float feather; /* binary: width of the ramp around thresh in q units, >= 0 (0: hard threshold) */
    int x, y;      /* where the soft mask's top-left pixel lands in the output (>= 0; the whole mask must fit) */
} mk_mask_t;

/* Soft output at (0, 0): what a plain filter call produces. */
static inline mk_mask_t mk_mask_soft(void)
{
    mk_mask_t m = {MK_MASK_SOFT, 0.5f, 0.0f, 0, 0};
    return m;
}

const char *mk_mask_mode_name(mk_mask_mode_t mode);
/* "soft" | "alpha" | "binary" | "otsu". */
int mk_mask_mode_parse(const char *s, mk_mask_mode_t *out);
/* Checks a product specification for a w x h soft mask going into `dst` (dtype by mode, rectangle inside dst). */
int mk_mask_check(const mk_mask_t *m, int w, int h, const mk_image_t *dst);

/* soft: f32 gray in the context's memory. dst: f32 gray (soft) or u8 gray (other modes) in the context's memory,
 * at least (x + soft width) x (y + soft height); it must not overlap soft. */
int mk_mask_compose(mk_ctx_t *ctx, const mk_image_t *soft, mk_image_t *dst, const mk_mask_t *m);

#ifdef __cplusplus
}
#endif
#endif
