/* yolo_px: the per-box arithmetic of decode + NMS, shared by the CPU reference and the CUDA kernels.
 *
 * Each formula is Darknet's (AlexeyAB yolo_layer.c and box.c), with C's float/double promotions written out so
 * that every operation rounds once in the same order on both backends (see px.h). The one library function
 * Darknet calls, exp(), is replaced by mk_px_exp: the same arithmetic on host and device, so the boxes agree bit
 * for bit, and within an ulp of double of libm, so they agree with Darknet's float results. Halving is written as a
 * multiplication by 0.5, which gives exactly the quotient by 2 (both are the exact value, correctly rounded). */
#ifndef MK_YOLO_PX_H
#define MK_YOLO_PX_H

#include "letterbox.h"
#include "px.h"

#include <math.h>
#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#endif

MK_PX uint32_t mk_px_float_bits(float f)
{
#ifdef __CUDACC__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

MK_PX float mk_px_bits_float(uint32_t u)
{
#ifdef __CUDACC__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* e^x in double: x = k ln2 + r (Cody-Waite, |r| <= ln2 / 2), e^r by its Taylor series to r^13 (truncation below
 * 2^-57), scaled by 2^k exactly. Within a few ulp of double of the exact value; NaN, overflow and underflow as
 * exp(). */
MK_PX double mk_px_exp(double x)
{
    const double ln2_hi = 6.93147180369123816490e-01; /* 21 trailing zero bits: k * ln2_hi is exact */
    const double ln2_lo = 1.90821492927058770002e-10;
    const double c[12] = {2.08767569878681e-09,   2.505210838544172e-08,  2.755731922398589e-07,
                          2.7557319223985893e-06, 2.48015873015873e-05,   0.0001984126984126984,
                          0.001388888888888889,   0.008333333333333333,   0.041666666666666664,
                          0.16666666666666666,    0.5,                    1.0}; /* 1/12! .. 1/1! */
    if (x != x)
        return x;
    if (x > 709.782712893384)
        return (double)INFINITY;
    if (x < -745.2)
        return 0.0;
    int k = MK_DROUND(MK_DMUL(x, 1.4426950408889634));
    double r = MK_DSUB(MK_DSUB(x, MK_DMUL((double)k, ln2_hi)), MK_DMUL((double)k, ln2_lo));
    double p = 1.6059043836821613e-10; /* 1/13! */
    for (int i = 0; i < 12; i++)
        p = MK_DADD(MK_DMUL(p, r), c[i]);
    p = MK_DADD(MK_DMUL(p, r), 1.0);
    return ldexp(p, k);
}

/* get_yolo_box: the box (centre x, y, size w, h) of one anchor of cell (col, row) relative to the network input,
 * from the layer's x, y (logistic and scaled), raw w, h and the anchor's size in network pixels. Darknet:
 *   b.x = (i + x) / lw (float);   b.w = exp(w) * anchor_w / net_w (double, stored as float). */
MK_PX void mk_px_yolo_box(float tx, float ty, float tw, float th, int col, int row, int lw, int lh, float aw,
                          float ah, int net_w, int net_h, float b[4])
{
    b[0] = MK_FDIV(MK_FADD((float)col, tx), (float)lw);
    b[1] = MK_FDIV(MK_FADD((float)row, ty), (float)lh);
    b[2] = (float)MK_DDIV(MK_DMUL(mk_px_exp((double)tw), (double)aw), (double)net_w);
    b[3] = (float)MK_DDIV(MK_DMUL(mk_px_exp((double)th), (double)ah), (double)net_h);
}

/* Maps a get_yolo_box box to the source image. `nbox` (centre form) is the frame NMS compares boxes in, `obox`
 * the reported box (top-left form, source pixels).
 *  darknet: correct_yolo_boxes(letter = 1) with the letterbox's new_w/new_h (computed by both exactly as
 *    letterbox_image does): nbox relative to the source image, as Darknet's detections; obox = nbox scaled to
 *    pixels as draw_detections does, (b.x - b.w / 2.) * im.w (double), kept in float.
 *  warp: the box in network pixels, (x - w/2, y - h/2, w, h), through the warp's inverse with the arithmetic of
 *    mk_letterbox_box_to_src (double, rounded to float): obox in source pixels; nbox its centre form. */
MK_PX void mk_px_yolo_place(const mk_letterbox_t *lb, const float b[4], float nbox[4], float obox[4])
{
    if (lb->mode == MK_LETTERBOX_DARKNET) {
        float deltaw = (float)(lb->dst_w - lb->new_w), deltah = (float)(lb->dst_h - lb->new_h);
        float ratiow = MK_FDIV((float)lb->new_w, (float)lb->dst_w);
        float ratioh = MK_FDIV((float)lb->new_h, (float)lb->dst_h);
        nbox[0] = (float)MK_DDIV(MK_DSUB((double)b[0], MK_DDIV(MK_DMUL((double)deltaw, 0.5), (double)lb->dst_w)),
                                 (double)ratiow);
        nbox[1] = (float)MK_DDIV(MK_DSUB((double)b[1], MK_DDIV(MK_DMUL((double)deltah, 0.5), (double)lb->dst_h)),
                                 (double)ratioh);
        nbox[2] = MK_FMUL(b[2], MK_FDIV(1.0f, ratiow));
        nbox[3] = MK_FMUL(b[3], MK_FDIV(1.0f, ratioh));
        obox[0] = (float)MK_DMUL(MK_DSUB((double)nbox[0], MK_DMUL((double)nbox[2], 0.5)), (double)lb->src_w);
        obox[1] = (float)MK_DMUL(MK_DSUB((double)nbox[1], MK_DMUL((double)nbox[3], 0.5)), (double)lb->src_h);
        obox[2] = (float)MK_DMUL((double)nbox[2], (double)lb->src_w);
        obox[3] = (float)MK_DMUL((double)nbox[3], (double)lb->src_h);
        return;
    }
    float w = MK_FMUL(b[2], (float)lb->dst_w), h = MK_FMUL(b[3], (float)lb->dst_h);
    float left = MK_FSUB(MK_FMUL(b[0], (float)lb->dst_w), MK_FMUL(w, 0.5f));
    float top = MK_FSUB(MK_FMUL(b[1], (float)lb->dst_h), MK_FMUL(h, 0.5f));
    double x0 = MK_DADD(MK_DMUL((double)left, lb->sx), lb->tx);
    double y0 = MK_DADD(MK_DMUL((double)top, lb->sy), lb->ty);
    double x1 = MK_DADD(MK_DMUL(MK_DADD((double)left, (double)w), lb->sx), lb->tx);
    double y1 = MK_DADD(MK_DMUL(MK_DADD((double)top, (double)h), lb->sy), lb->ty);
    obox[0] = (float)x0;
    obox[1] = (float)y0;
    obox[2] = (float)MK_DSUB(x1, x0);
    obox[3] = (float)MK_DSUB(y1, y0);
    nbox[0] = MK_FADD(obox[0], MK_FMUL(obox[2], 0.5f));
    nbox[1] = MK_FADD(obox[1], MK_FMUL(obox[3], 0.5f));
    nbox[2] = obox[2];
    nbox[3] = obox[3];
}

/* Darknet's overlap(): the length of the intersection of two centred intervals (negative when disjoint). */
MK_PX float mk_px_overlap(float x1, float w1, float x2, float w2)
{
    float l1 = MK_FSUB(x1, MK_FMUL(w1, 0.5f)), l2 = MK_FSUB(x2, MK_FMUL(w2, 0.5f));
    float left = l1 > l2 ? l1 : l2;
    float r1 = MK_FADD(x1, MK_FMUL(w1, 0.5f)), r2 = MK_FADD(x2, MK_FMUL(w2, 0.5f));
    float right = r1 < r2 ? r1 : r2;
    return MK_FSUB(right, left);
}

/* Darknet's box_iou on centre-form boxes (x, y, w, h). Each side of the intersection is the larger left / top and
 * the smaller right / bottom taken coordinate by coordinate (the seed's first IoU compared [left, top] pairs as
 * lists, which took the top edge from the wrong box). */
MK_PX float mk_px_box_iou(const float a[4], const float b[4])
{
    float w = mk_px_overlap(a[0], a[2], b[0], b[2]), h = mk_px_overlap(a[1], a[3], b[1], b[3]);
    float inter = (w < 0 || h < 0) ? 0.0f : MK_FMUL(w, h);
    float uni = MK_FSUB(MK_FADD(MK_FMUL(a[2], a[3]), MK_FMUL(b[2], b[3])), inter);
    if (inter == 0 || uni == 0)
        return 0;
    return MK_FDIV(inter, uni);
}

/* The sort key of one (box, class) pair within its class: ascending keys are decreasing probability, then
 * increasing index. prob > 0, so its bits order as its value. */
MK_PX uint64_t mk_px_yolo_key(float prob, uint32_t index)
{
    return ((uint64_t)(~mk_px_float_bits(prob)) << 32) | index;
}

MK_PX float mk_px_yolo_key_prob(uint64_t key)
{
    return mk_px_bits_float(~(uint32_t)(key >> 32));
}

MK_PX uint32_t mk_px_yolo_key_index(uint64_t key)
{
    return (uint32_t)key;
}

#endif
