/* mask_cuda: how the CUDA kernels write a mask product into its place in the output (CUDA files only). */
#ifndef MK_MASK_CUDA_H
#define MK_MASK_CUDA_H

#include "mask.h"
#include "mask_px.h"

#include <stddef.h>
#include <stdint.h>

/* The output of an op that ends in a mask product: dst and the w x h rectangle at (x, y) the result goes to. */
struct mk_mask_out_t {
    void *data;
    size_t pitch;
    int dw, dh;    /* dst size */
    int f32;       /* soft output (f32), else u8 */
    int mode;      /* mk_mask_mode_t */
    float thresh, feather;
    int x, y, w, h;
};

static inline mk_mask_out_t mk_mask_out(const mk_image_t *dst, const mk_mask_t *m, int w, int h)
{
    mk_mask_out_t o;
    o.data = dst->data;
    o.pitch = dst->pitch;
    o.dw = dst->width;
    o.dh = dst->height;
    o.f32 = m->mode == MK_MASK_SOFT;
    o.mode = (int)m->mode;
    o.thresh = m->thresh;
    o.feather = m->feather;
    o.x = m->x;
    o.y = m->y;
    o.w = w;
    o.h = h;
    return o;
}

/* 1 when the rectangle leaves part of dst to be cleared. */
static inline int mk_mask_out_partial(const mk_mask_out_t *o)
{
    return o->x > 0 || o->y > 0 || o->w < o->dw || o->h < o->dh;
}

/* The product of q for pixel (x, y) of the result. */
static __device__ __forceinline__ void mk_mask_out_put(const mk_mask_out_t &o, int x, int y, float q)
{
    char *row = (char *)o.data + (size_t)(y + o.y) * o.pitch;
    if (o.f32)
        ((float *)row)[x + o.x] = q;
    else
        ((uint8_t *)row)[x + o.x] = mk_px_mask_u8(q, o.mode, o.thresh, o.feather);
}

/* Zero at dst pixel (dx, dy). */
static __device__ __forceinline__ void mk_mask_out_zero(const mk_mask_out_t &o, int dx, int dy)
{
    char *row = (char *)o.data + (size_t)dy * o.pitch;
    if (o.f32)
        ((float *)row)[dx] = 0.0f;
    else
        ((uint8_t *)row)[dx] = 0;
}

/* Whether dst pixel (dx, dy) lies outside the rectangle. */
static __device__ __forceinline__ bool mk_mask_out_outside(const mk_mask_out_t &o, int dx, int dy)
{
    return dx < o.x || dy < o.y || dx >= o.x + o.w || dy >= o.y + o.h;
}

#endif
