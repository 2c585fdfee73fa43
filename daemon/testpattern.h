/* testpattern: the built-in synthetic scene — a person-like figure (head with hair, neck, striped shirt, arms with
 * bare forearms and hands) swaying and waving in front of a static textured room (brick wall, window, bookshelf,
 * wooden floor) — with its exact ground-truth person mask.
 *
 * Frame N depends only on (width, height, fps, N): the figure's pose is a function of the time N / fps, so the
 * same frame number always gives the same bytes, in any order and from any number of generators. The mask is 255
 * on every pixel the figure covers in the frame and 0 elsewhere; every other pixel of the frame equals the
 * background image. Rendering costs a copy of the background plus the figure's pixels (cheap at 640x480@30).
 *
 * Thread rules: a generator is read-only after create: frames and masks may be rendered from several threads. */
#ifndef MK_TESTPATTERN_H
#define MK_TESTPATTERN_H

#include "image.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_testpattern mk_testpattern_t;

/* width and height in 16..MK_IMAGE_MAX_DIM, fps in (0, 1000]. */
int mk_testpattern_create(int width, int height, double fps, mk_testpattern_t **out);
void mk_testpattern_destroy(mk_testpattern_t *tp);

/* Renders frame `seq` into a host u8 RGB or BGR image of the generator's size (any pitch). */
int mk_testpattern_frame(const mk_testpattern_t *tp, uint64_t seq, mk_image_t *img);
/* Renders the person mask of frame `seq` into a host u8 gray image of the generator's size (255 person, 0 not). */
int mk_testpattern_mask(const mk_testpattern_t *tp, uint64_t seq, mk_image_t *mask);
/* A box (x, y, w, h; clipped to the frame) that contains every person pixel of frame `seq`, at most 2 pixels
 * larger than the tightest one on each side. */
void mk_testpattern_box(const mk_testpattern_t *tp, uint64_t seq, int box[4]);
/* The static background (host u8 RGB), owned by the generator. */
const mk_image_t *mk_testpattern_background(const mk_testpattern_t *tp);

#ifdef __cplusplus
}
#endif
#endif
