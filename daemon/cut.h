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
 *   grabcut  GrabCut on the region reduced to the mask's size, with keyframes (grabcut.*)
 * Every pixel operation is a kernels op (mk_shape_fill, mk_grabcut, ...) on the context's backend.
 *
 * Frames in flight (daemon/segment.h). The cut object holds what is carried from frame to frame (GrabCut's model,
 * the keyframe's box, frames since the keyframe); the working images of one frame are in a
 * mk_cut_work_t, one per thread, on that thread's context. Frames are numbered 0, 1, 2, ... and every number is
 * given exactly once, to mk_cut_run_frame() or mk_cut_skip(), from any threads in any order: a frame decides
 * keyframe or not after every frame before it has decided, and from their decisions and the outcome of the last
 * keyframe only — a keyframe that fails to learn (no foreground or background, a degenerate model) drops the
 * model; a fixed-model cut that fails (no foreground, ...) cuts the box and KEEPS the model. So a frame waits for
 * an earlier frame's cut only when that one is a keyframe, and the masks do not depend on how many frames are in
 * flight.
 *
 * Thread rules: mk_cut_run (the sequential form) on the thread of the cut's context; mk_cut_run_frame and
 * mk_cut_skip from any threads, each with its own work object; create, reset and destroy with no frame in
 * flight. */
#ifndef MK_CUT_H
#define MK_CUT_H

#include "config.h"
#include "ctx.h"
#include "image.h"
#include "select.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_cut mk_cut_t;
typedef struct mk_cut_work mk_cut_work_t;

/* A cut of `method` (MK_CFG_CUT_*); ctx is the context of mk_cut_run. MK_EINVAL for an unknown method. */
int mk_cut_create(mk_ctx_t *ctx, int method, mk_cut_t **out);
void mk_cut_destroy(mk_cut_t *c);
/* The method (MK_CFG_CUT_*) and its name ("box", ...). */
int mk_cut_method(const mk_cut_t *c);
const char *mk_cut_name(const mk_cut_t *c);
/* The name of a method (MK_CFG_CUT_*), "unknown" for none. */
const char *mk_cut_method_name(int method);

/* Fills `lowres` (whose size fixes the scale: roi->width / lowres->width) from the box (ROI pixels). cfg gives
 * the method's options. Each call is independent of the previous ones for the box cut; methods that track the
 * person across frames (GrabCut's keyframes) keep their state in the object. The sequential form: the next frame
 * number, the cut's own working images on its context. */
int mk_cut_run(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
               mk_image_t *lowres);

/* Working images of one thread on ctx (allocated at first use). */
int mk_cut_work_create(mk_ctx_t *ctx, mk_cut_work_t **out);
void mk_cut_work_destroy(mk_cut_work_t *w);
/* mk_cut_run for frame number `frame` with the working images of w (roi and lowres in w's context's memory).
 * frame_box: the same box in frame pixels, which GrabCut's adaptive keyframes compare from frame to frame (NULL:
 * `box`, for a region that is the whole frame). *keyframe (may be NULL): 1 when this frame learnt GrabCut's model.
 * Waits for the frames before it as described above. A failure still counts the frame as given. */
int mk_cut_run_frame(mk_cut_t *c, mk_cut_work_t *w, uint64_t frame, const mk_image_t *roi, const mk_box_t *box,
                     const mk_box_t *frame_box, const mk_config_t *cfg, mk_image_t *lowres, int *keyframe);
/* Frame number `frame` is not cut (no target, or it failed before its cut). */
void mk_cut_skip(mk_cut_t *c, uint64_t frame);
/* Forgets the state carried across frames; the next frame number is `next_frame`. */
void mk_cut_reset(mk_cut_t *c, uint64_t next_frame);

#ifdef __cplusplus
}
#endif
#endif
