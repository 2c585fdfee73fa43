/* letterbox_px: the per-pixel arithmetic of the letterbox, shared by the CPU reference and the CUDA kernel.
 *
 * warp: cv::warpAffine's INTER_LINEAR path for 8-bit images (imgwarp.cpp, OpenCV 4.x): the inverse matrix in
 * double; per output pixel the source position in 1/32 pixel (AB_BITS = 10 fixed point, rounded with cvRound, plus
 * half a 1/32 step), then cv::remap's bilinear with 15-bit integer weights and BORDER_CONSTANT neighbours.
 * darknet: resize_image's two separable float passes, evaluated for the rows an output pixel needs. */
#ifndef MK_LETTERBOX_PX_H
#define MK_LETTERBOX_PX_H

#include "image.h"
#include "letterbox.h"
#include "px.h"

#include <stddef.h>
#include <stdint.h>

/* cv::cvtColor(COLOR_YUV2RGB_YUYV): BT.601 limited range in 20-bit fixed point (color_yuv.simd.hpp). */
MK_PX void mk_px_yuv_to_rgb(int y, int u, int v, uint8_t rgb[3])
{
    const int cy = 1220542, cub = 2116026, cug = -409993, cvg = -852492, cvr = 1673527, shift = 20;
    int uu = u - 128, vv = v - 128, half = 1 << (shift - 1);
    int yy = (y > 16 ? y - 16 : 0) * cy;
    rgb[0] = mk_px_sat_u8((yy + half + cvr * vv) >> shift);
    rgb[1] = mk_px_sat_u8((yy + half + cvg * vv + cug * uu) >> shift);
    rgb[2] = mk_px_sat_u8((yy + half + cub * uu) >> shift);
}

/* The R, G, B bytes of source pixel (x, y). */
MK_PX void mk_px_fetch_rgb(const uint8_t *src, size_t pitch, int fmt, int x, int y, uint8_t rgb[3])
{
    const uint8_t *row = src + (size_t)y * pitch;
    if (fmt == MK_FMT_YUYV) {
        const uint8_t *p = row + (size_t)(x & ~1) * 2;
        mk_px_yuv_to_rgb(p[(x & 1) * 2], p[1], p[3], rgb);
    } else {
        const uint8_t *p = row + (size_t)x * 3;
        int bgr = fmt == MK_FMT_BGR;
        rgb[0] = p[bgr ? 2 : 0];
        rgb[1] = p[1];
        rgb[2] = p[bgr ? 0 : 2];
    }
}

MK_PX int mk_px_sat_s16(int v)
{
    return mk_px_clamp(v, -32768, 32767);
}

/* Output pixel (x, y) of the warp as R, G, B bytes (before the /255). */
MK_PX void mk_px_warp(const mk_letterbox_t *lb, const uint8_t *src, size_t pitch, int fmt, int x, int y,
                      uint8_t out[3])
{
    const double *m = lb->inv;
    const int w = lb->src_w, h = lb->src_h, fill = 114;
    /* warpAffine: X0/Y0 per row, adelta/bdelta per column, 1/1024 units, then >> 5 to 1/32. */
    int x0 = MK_DROUND(MK_DMUL(MK_DADD(MK_DMUL(m[1], (double)y), m[2]), 1024.0)) + 16;
    int y0 = MK_DROUND(MK_DMUL(MK_DADD(MK_DMUL(m[4], (double)y), m[5]), 1024.0)) + 16;
    int ad = MK_DROUND(MK_DMUL(MK_DMUL(m[0], (double)x), 1024.0));
    int bd = MK_DROUND(MK_DMUL(MK_DMUL(m[3], (double)x), 1024.0));
    int fx = (x0 + ad) >> 5, fy = (y0 + bd) >> 5;
    int sx = mk_px_sat_s16(fx >> 5), sy = mk_px_sat_s16(fy >> 5);
    int ax = fx & 31, ay = fy & 31;
    if (sx >= w || sx + 1 < 0 || sy >= h || sy + 1 < 0) {
        out[0] = out[1] = out[2] = (uint8_t)fill;
        return;
    }
    /* remap's weights: (1 - a/32) products scaled by 2^15, exact integers. */
    int wt[4] = {(32 - ax) * (32 - ay) * 32, ax * (32 - ay) * 32, (32 - ax) * ay * 32, ax * ay * 32};
    int acc[3] = {0, 0, 0};
    for (int k = 0; k < 4; k++) {
        int px = sx + (k & 1), py = sy + (k >> 1);
        uint8_t v[3] = {(uint8_t)fill, (uint8_t)fill, (uint8_t)fill};
        if (px >= 0 && px < w && py >= 0 && py < h)
            mk_px_fetch_rgb(src, pitch, fmt, px, py, v);
        for (int c = 0; c < 3; c++)
            acc[c] += v[c] * wt[k];
    }
    for (int c = 0; c < 3; c++)
        out[c] = mk_px_sat_u8((acc[c] + (1 << 14)) >> 15);
}

/* resize_image's horizontal pass: column c of the resized width at source row `row`, channels R, G, B. */
MK_PX void mk_px_darknet_row(const mk_letterbox_t *lb, const uint8_t *src, size_t pitch, int fmt, int c, int row,
                             float out[3])
{
    uint8_t a[3], b[3];
    if (c == lb->new_w - 1 || lb->src_w == 1) {
        mk_px_fetch_rgb(src, pitch, fmt, lb->src_w - 1, row, a);
        for (int k = 0; k < 3; k++)
            out[k] = mk_px_unit(a[k]);
        return;
    }
    float sx = MK_FMUL((float)c, lb->w_scale);
    int ix = (int)sx;
    float dx = MK_FSUB(sx, (float)ix);
    mk_px_fetch_rgb(src, pitch, fmt, ix, row, a);
    mk_px_fetch_rgb(src, pitch, fmt, ix + 1 < lb->src_w ? ix + 1 : lb->src_w - 1, row, b);
    for (int k = 0; k < 3; k++)
        out[k] = MK_FADD(MK_FMUL(MK_FSUB(1.0f, dx), mk_px_unit(a[k])), MK_FMUL(dx, mk_px_unit(b[k])));
}

/* Output pixel (c, r) of the resized content (without the padding offset), channels R, G, B. */
MK_PX void mk_px_darknet(const mk_letterbox_t *lb, const uint8_t *src, size_t pitch, int fmt, int c, int r,
                         float out[3])
{
    float sy = MK_FMUL((float)r, lb->h_scale);
    int iy = (int)sy;
    float dy = MK_FSUB(sy, (float)iy), p[3];
    mk_px_darknet_row(lb, src, pitch, fmt, c, iy, p);
    for (int k = 0; k < 3; k++)
        out[k] = MK_FMUL(MK_FSUB(1.0f, dy), p[k]);
    if (r == lb->new_h - 1 || lb->src_h == 1)
        return;
    mk_px_darknet_row(lb, src, pitch, fmt, c, iy + 1 < lb->src_h ? iy + 1 : lb->src_h - 1, p);
    for (int k = 0; k < 3; k++)
        out[k] = MK_FADD(out[k], MK_FMUL(dy, p[k]));
}

/* Output pixel (x, y) of the network input, channels R, G, B in [0,1]. */
MK_PX void mk_px_letterbox(const mk_letterbox_t *lb, const uint8_t *src, size_t pitch, int fmt, int x, int y,
                           float out[3])
{
    if (lb->mode == MK_LETTERBOX_WARP) {
        uint8_t v[3];
        mk_px_warp(lb, src, pitch, fmt, x, y, v);
        for (int k = 0; k < 3; k++)
            out[k] = mk_px_unit(v[k]);
        return;
    }
    int c = x - lb->pad_x, r = y - lb->pad_y;
    if (c < 0 || c >= lb->new_w || r < 0 || r >= lb->new_h) {
        out[0] = out[1] = out[2] = lb->fill;
        return;
    }
    mk_px_darknet(lb, src, pitch, fmt, c, r, out);
}

#endif
