/* shape_px: the inside test of a rounded box at one pixel, shared by the CPU reference and the CUDA kernel. */
#ifndef MK_SHAPE_PX_H
#define MK_SHAPE_PX_H

#include "px.h"

/* The rounded box as the per-pixel test reads it (prepared once per call by kernels/shape.c). */
typedef struct {
    float x0, y0, x1, y1; /* the rectangle */
    float ix0, iy0, ix1, iy1; /* the inner rectangle: x0 + rx, y0 + ry, x1 - rx, y1 - ry */
    float rx, ry;
} mk_rbox_plan_t;

/* 1 when the centre of pixel (x, y) lies inside. */
MK_PX int mk_px_rbox_inside(const mk_rbox_plan_t *p, int x, int y)
{
    float cx = MK_FADD((float)x, 0.5f), cy = MK_FADD((float)y, 0.5f);
    if (!(cx >= p->x0 && cx < p->x1 && cy >= p->y0 && cy < p->y1))
        return 0;
    float qx = cx < p->ix0 ? MK_FSUB(p->ix0, cx) : cx > p->ix1 ? MK_FSUB(cx, p->ix1) : 0.0f;
    float qy = cy < p->iy0 ? MK_FSUB(p->iy0, cy) : cy > p->iy1 ? MK_FSUB(cy, p->iy1) : 0.0f;
    if (qx == 0.0f || qy == 0.0f)
        return 1; /* both radii are > 0 in a corner region: qx > 0 needs rx > 0 */
    float u = MK_FDIV(qx, p->rx), v = MK_FDIV(qy, p->ry);
    return MK_FADD(MK_FMUL(u, u), MK_FMUL(v, v)) <= 1.0f;
}

#endif
