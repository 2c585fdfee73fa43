/* shape: fills a mask with a rounded rectangle — a rectangle whose corners are quarter ellipses, which is the
 * ellipse inscribed in the rectangle when the corner radii are half its sides. The prior of the daemon's box cut
 * (a person's box filled at 1, then refined to the image's edges by the guided filter).
 *
 * Geometry, in continuous pixel coordinates (pixel (x, y) covers [x, x+1) x [y, y+1), its centre is
 * (x + 1/2, y + 1/2)): a pixel is inside when its centre c satisfies x0 <= cx < x1 and y0 <= cy < y1 and, in a
 * corner region (cx outside [x0 + rx, x1 - rx] and cy outside [y0 + ry, y1 - ry]), (qx / rx)^2 + (qy / ry)^2 <= 1
 * with q the distance of c from the inner rectangle [x0 + rx, x1 - rx] x [y0 + ry, y1 - ry]. rx or ry 0 gives the
 * plain rectangle. Every operation is rounded once in float (shape_px.h), so both backends give the same pixels.
 * Inside pixels get 255 (u8) or 1.0 (f32), all others 0: the whole output is written. */
#ifndef MK_SHAPE_H
#define MK_SHAPE_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float x0, y0, x1, y1; /* the rectangle (x0 <= x1, y0 <= y1; may reach outside the image) */
    float rx, ry;         /* corner radii: 0 <= rx <= (x1 - x0) / 2, 0 <= ry <= (y1 - y0) / 2 */
} mk_rbox_t;

/* The rounded box of a rectangle with corner radii as fractions of its half sides (0: square corners, 1: an
 * ellipse); fractions are clamped to [0, 1]. */
mk_rbox_t mk_rbox_make(float x, float y, float w, float h, float round_x, float round_y);

/* dst: u8 gray (255 inside) or f32 gray (1.0 inside), in the context's memory, any pitch; every pixel of dst is
 * written. Errors: MK_EINVAL (image), MK_ERANGE (a coordinate that is not finite, beyond +-4 * MK_IMAGE_MAX_DIM,
 * an inverted rectangle or a radius outside its range). */
int mk_shape_fill(mk_ctx_t *ctx, mk_image_t *dst, const mk_rbox_t *box);

#ifdef __cplusplus
}
#endif
#endif
