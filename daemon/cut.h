/* cut: the stage that cuts the person out of the chosen box — an interface with one implementation per
 * cut.method, so that GrabCut (a further method) slots in beside the box cut.
 *
 * A cut receives the region of interest (a view into the frame: u8 RGB, BGR or gray, in the context's memory),
 * the chosen box in ROI pixels, and a low-resolution mask to fill (u8 gray, 255 = person, in the context's
 * memory) of ceil(roi_w / s) x ceil(roi_h / s) pixels, s = guided.scale: the pipeline then refines it to full
 * resolution against the frame with mk_guided_upsample and makes the mask products (mask.*).
 *
 * Methods:
 *   box      the box as a rounded rectangle (corner radii 40% of its half sides) filled at 1: a prior that
 *            the guided filter bends to the image's edges
 *   ellipse  the ellipse inscribed in the box, filled at 1
 * Every pixel operation is a kernels op (mk_shape_fill) on the context's backend.
 *
 * Thread rules: a cut belongs to the thread of its context. */
#ifndef MK_CUT_H
#define MK_CUT_H

#include "config.h"
#include "ctx.h"
#include "image.h"
#include "select.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_cut mk_cut_t;

/* A cut of `method` (MK_CFG_CUT_*) on ctx. MK_EINVAL for an unknown method. */
int mk_cut_create(mk_ctx_t *ctx, int method, mk_cut_t **out);
void mk_cut_destroy(mk_cut_t *c);
/* The method (MK_CFG_CUT_*) and its name ("box", ...). */
int mk_cut_method(const mk_cut_t *c);
const char *mk_cut_name(const mk_cut_t *c);
/* The name of a method (MK_CFG_CUT_*), "unknown" for none. */
const char *mk_cut_method_name(int method);

/* Fills `lowres` (whose size fixes the scale: roi->width / lowres->width) from the box (ROI pixels). cfg gives
 * the method's options. Each call is independent of the previous ones for the box cut; methods that track the
 * person across frames (GrabCut's keyframes) keep their state in the object. */
int mk_cut_run(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
               mk_image_t *lowres);

#ifdef __cplusplus
}
#endif
#endif
