/* mask_cpu: how the CPU ops write a mask product into its place in the output (kernels/cpu only). */
#ifndef MK_MASK_CPU_H
#define MK_MASK_CPU_H

#include "mask.h"

/* Writes the product of soft value q for pixel (x, y) of the mask at (x + m->x, y + m->y) of dst. */
void mk_mask_put_cpu(mk_image_t *dst, const mk_mask_t *m, int x, int y, float q);
/* Zeroes every pixel of dst outside the w x h rectangle at (m->x, m->y). */
void mk_mask_clear_outside_cpu(mk_image_t *dst, const mk_mask_t *m, int w, int h);

#endif
