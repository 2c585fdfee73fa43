/* composite_px: the per-pixel arithmetic of the compositing ops (composite.h) and of the bilinear resize
 * (resize.h), shared by the CPU references and the CUDA kernels. Integer arithmetic only: both backends give the
 * same bytes. */
#ifndef MK_COMPOSITE_PX_H
#define MK_COMPOSITE_PX_H

#include "px.h"

#include <stddef.h>
#include <stdint.h>

/* f a + b (255 - a), divided by 255 and rounded to nearest: the sum is at most 255 * 255 and 255 is odd, so
 * (v + 127) / 255 never meets a tie. */
MK_PX uint8_t mk_px_blend(int f, int b, int a)
{
    return (uint8_t)((f * a + b * (255 - a) + 127) / 255);
}

/* One box pass over a line of n samples (sample i at src + i * sstride), window [i - r, i + r] with the line's
 * ends repeated (replicate border), the mean rounded to nearest ((sum + r) / (2r + 1): an odd divisor, no ties),
 * written to dst + i * dstride. A running sum: O(1) per sample whatever r, after a start of O(min(r, n)).
 * src and dst must not overlap. */
MK_PX void mk_px_box_line(const uint8_t *src, ptrdiff_t sstride, uint8_t *dst, ptrdiff_t dstride, int n, int r)
{
    const int last = n - 1, div = 2 * r + 1;
    const int first_v = src[0], last_v = src[(ptrdiff_t)last * sstride];
    /* The window of sample 0: r + 1 copies of src[0], then src[1..r], src[n-1] standing in past the end. */
    int inner = r < last ? r : last;
    int sum = (r + 1) * first_v + (r - inner) * last_v;
    for (int i = 1; i <= inner; i++)
        sum += src[(ptrdiff_t)i * sstride];
    for (int i = 0; i < n; i++) {
        dst[(ptrdiff_t)i * dstride] = (uint8_t)((sum + r) / div);
        int in = i + r + 1, out = i - r;
        sum += in < last ? src[(ptrdiff_t)in * sstride] : last_v;
        sum -= out > 0 ? src[(ptrdiff_t)out * sstride] : first_v;
    }
}

/* Bilinear sampling with 8-bit position fractions. Output column x of n_out samples taken from n_in source
 * samples, pixel centres aligned: the source position (x + 1/2) n_in / n_out - 1/2, floored to 1/256 of a pixel
 * (exact in 64-bit integers), clamped to [0, n_in - 1] (the border repeated). *i0 is its integer part, *frac its
 * fraction in 1/256, *i1 the next sample (i0 again at the last one). */
MK_PX void mk_px_bilinear_pos(int x, int n_in, int n_out, int *i0, int *i1, int *frac)
{
    int64_t num = (int64_t)(2 * x + 1) * n_in * 256 - (int64_t)n_out * 256;
    int64_t den = 2 * (int64_t)n_out;
    int64_t q = num >= 0 ? num / den : -((-num + den - 1) / den); /* floor */
    int64_t hi = (int64_t)(n_in - 1) * 256;
    q = q < 0 ? 0 : q > hi ? hi : q;
    *i0 = (int)(q >> 8);
    *frac = (int)(q & 255);
    *i1 = *i0 < n_in - 1 ? *i0 + 1 : *i0;
}

/* The four neighbours weighted by 1/256 fractions ax (along x) and ay, rounded to nearest (halves up). */
MK_PX uint8_t mk_px_bilinear(int p00, int p01, int p10, int p11, int ax, int ay)
{
    int top = p00 * (256 - ax) + p01 * ax, bottom = p10 * (256 - ax) + p11 * ax;
    return (uint8_t)((top * (256 - ay) + bottom * ay + 32768) >> 16);
}

#endif
