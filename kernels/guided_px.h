/* guided_px: the guided filter's arithmetic shared by the CPU reference and the CUDA kernels: border reflection,
 * source fixed point, the reduced guide, per-pixel moments, box sums from summed-area tables, the per-window
 * solve, the application and the bilinear upsampling of the coefficients. Every floating-point operation rounds
 * once in the order written (px.h), so both backends compute the same bits from the same box sums. */
#ifndef MK_GUIDED_PX_H
#define MK_GUIDED_PX_H

#include "px.h"

#include <stddef.h>
#include <stdint.h>

/* The source's fixed point: p = p_q / MK_GUIDED_Q. */
#define MK_GUIDED_Q 65535
/* eps below this acts as this (in [0,1] guide units squared). */
#define MK_GUIDED_EPS_MIN 1e-12
/* Moments per pixel: C guide values, C(C+1)/2 guide products, p, C guide-times-p products. */
#define MK_GUIDED_NM(C) ((C) + (C) * ((C) + 1) / 2 + 1 + (C))
#define MK_GUIDED_MAX_NM 13

/* Everything one call needs, computed once on the host (mk_guided_plan) and passed to the kernels by value. */
typedef struct {
    int C;            /* guide channels: 1 or 3 */
    int nm;           /* MK_GUIDED_NM(C) */
    int s;            /* scale: 1 full, > 1 fast */
    int w, h;         /* guide (output) size */
    int wl, hl;       /* working size: ceil(w / s) x ceil(h / s) */
    int r;            /* working radius */
    double n;         /* samples per window, (2r+1)^2 */
    double inv_n;     /* 1 / n, rounded */
    double lambda;    /* max(eps, MK_GUIDED_EPS_MIN) * n^2 * 255^2: eps in the units of the moment sums */
    int compat;       /* MK_GUIDED_OPENCV on a colour guide with eps < 1e-2 */
    double guard;     /* compat: a determinant below this (1e-6 in [0,1] units) ... */
    double guard_det; /* ... becomes this (1 in [0,1] units) */
} mk_guided_plan_t;

/* Index k of a line of n samples, reflected at both ends as BORDER_REFLECT (any k: periodic with period 2n). */
MK_PX int mk_px_reflect(int k, int n)
{
    if ((unsigned)k < (unsigned)n)
        return k;
    if (n == 1)
        return 0;
    int period = 2 * n, m = k % period;
    m = m < 0 ? m + period : m;
    return m < n ? m : period - 1 - m;
}

/* An f32 source value in fixed point: round(clamp(p, 0, 1) * 65535), NaN 0. Branch-free (selects), so that a
 * kernel's loads need not wait for one another: 0 and 1 give 0.5 and 65535.5 before the truncation. */
MK_PX int mk_px_src_q_f32(float p)
{
    float c = p > 0.0f ? (p < 1.0f ? p : 1.0f) : 0.0f;
    return (int)MK_FADD(MK_FMUL(c, (float)MK_GUIDED_Q), 0.5f);
}

/* Source value in fixed point: u8 v -> v * 257 (v / 255 exactly); f32 as mk_px_src_q_f32. */
MK_PX int mk_px_src_q(const void *row, int is_f32, int x)
{
    if (!is_f32)
        return ((const uint8_t *)row)[x] * 257;
    return mk_px_src_q_f32(((const float *)row)[x]);
}

/* Guide pixel (x, y) at the working resolution: the u8 pixel for s = 1, else the average of the s x s block
 * (clipped at the image edge) rounded to nearest, halves up. */
MK_PX void mk_px_guide_at(const uint8_t *guide, size_t pitch, int C, int w, int h, int s, int x, int y, int g[3])
{
    if (s == 1) {
        const uint8_t *p = guide + (size_t)y * pitch + (size_t)x * C;
        for (int c = 0; c < C; c++)
            g[c] = p[c];
        return;
    }
    int xa = x * s, ya = y * s, xb = xa + s < w ? xa + s : w, yb = ya + s < h ? ya + s : h;
    int sum[3] = {0, 0, 0}, cnt = (xb - xa) * (yb - ya);
    for (int yy = ya; yy < yb; yy++) {
        const uint8_t *p = guide + (size_t)yy * pitch + (size_t)xa * C;
        for (int xx = xa; xx < xb; xx++, p += C)
            for (int c = 0; c < C; c++)
                sum[c] += p[c];
    }
    for (int c = 0; c < C; c++)
        g[c] = (2 * sum[c] + cnt) / (2 * cnt);
}

/* The moments of one pixel, in the order of the box sums: g_i, g_i g_j (i <= j, row by row), p, g_i p. */
MK_PX void mk_px_moments(int C, const int g[3], int pq, long long m[MK_GUIDED_MAX_NM])
{
    int k = 0;
    for (int i = 0; i < C; i++)
        m[k++] = g[i];
    for (int i = 0; i < C; i++)
        for (int j = i; j < C; j++)
            m[k++] = (long long)g[i] * g[j];
    m[k++] = pq;
    for (int i = 0; i < C; i++)
        m[k++] = (long long)g[i] * pq;
}

/* ---- box sums from summed-area tables --------------------------------------------------------------------- */

/* The sum of the first K samples of the reflected, periodic extension e of a line of n samples with prefix sums
 * P (P[0] = 0, P[n] = T), for any K (negative K: minus the sum of e[K..-1]), is c * T + sgn * P[j]. */
typedef struct {
    long long c;
    int sgn, j;
} mk_refl_t;

MK_PX mk_refl_t mk_px_refl_prefix(long long K, int n)
{
    long long period = 2LL * n;
    long long q = K >= 0 ? K / period : -((-K + period - 1) / period);
    long long rem = K - q * period;
    mk_refl_t r;
    if (rem <= n) {
        r.c = 2 * q;
        r.sgn = 1;
        r.j = (int)rem;
    } else { /* one period sums to 2T; the mirrored half up to rem is 2T - P[2n - rem] */
        r.c = 2 * q + 2;
        r.sgn = -1;
        r.j = (int)(period - rem);
    }
    return r;
}

/* The four corners of the window of pixel (x, y) with radius r, as prefix decompositions along each axis. */
typedef struct {
    mk_refl_t x0, x1, y0, y1;
} mk_box_t;

MK_PX mk_box_t mk_px_box_at(int x, int y, int r, int w, int h)
{
    mk_box_t b;
    b.x0 = mk_px_refl_prefix((long long)x - r, w);
    b.x1 = mk_px_refl_prefix((long long)x + r + 1, w);
    b.y0 = mk_px_refl_prefix((long long)y - r, h);
    b.y1 = mk_px_refl_prefix((long long)y + r + 1, h);
    return b;
}

/* Summed-area table I of a w x h image: (w + 1) x (h + 1) entries, row stride st, I[y][x] the sum of the pixels
 * above and left of (x, y). The 2-D prefix of the reflected extension is separable:
 * E(ry, rx) = rx.c (ry.c I[h][w] + ry.sgn I[ry.j][w]) + rx.sgn (ry.c I[h][rx.j] + ry.sgn I[ry.j][rx.j]). */
MK_PX long long mk_px_sat_e_i64(const long long *I, size_t st, int w, int h, mk_refl_t ry, mk_refl_t rx)
{
    long long all = I[(size_t)h * st + w], rows = I[(size_t)ry.j * st + w];
    long long cols = I[(size_t)h * st + rx.j], part = I[(size_t)ry.j * st + rx.j];
    return rx.c * (ry.c * all + ry.sgn * rows) + rx.sgn * (ry.c * cols + ry.sgn * part);
}

MK_PX long long mk_px_sat_box_i64(const long long *I, size_t st, int w, int h, mk_box_t b)
{
    return mk_px_sat_e_i64(I, st, w, h, b.y1, b.x1) - mk_px_sat_e_i64(I, st, w, h, b.y0, b.x1) -
           mk_px_sat_e_i64(I, st, w, h, b.y1, b.x0) + mk_px_sat_e_i64(I, st, w, h, b.y0, b.x0);
}

MK_PX double mk_px_sat_e_f64(const double *I, size_t st, int w, int h, mk_refl_t ry, mk_refl_t rx)
{
    double all = I[(size_t)h * st + w], rows = I[(size_t)ry.j * st + w];
    double cols = I[(size_t)h * st + rx.j], part = I[(size_t)ry.j * st + rx.j];
    double yc = (double)ry.c, ys = (double)ry.sgn;
    double in_rows = MK_DADD(MK_DMUL(yc, all), MK_DMUL(ys, rows));
    double in_part = MK_DADD(MK_DMUL(yc, cols), MK_DMUL(ys, part));
    return MK_DADD(MK_DMUL((double)rx.c, in_rows), MK_DMUL((double)rx.sgn, in_part));
}

MK_PX double mk_px_sat_box_f64(const double *I, size_t st, int w, int h, mk_box_t b)
{
    double v = MK_DSUB(mk_px_sat_e_f64(I, st, w, h, b.y1, b.x1), mk_px_sat_e_f64(I, st, w, h, b.y0, b.x1));
    v = MK_DSUB(v, mk_px_sat_e_f64(I, st, w, h, b.y1, b.x0));
    return MK_DADD(v, mk_px_sat_e_f64(I, st, w, h, b.y0, b.x0));
}

/* ---- the per-window solve and the application ------------------------------------------------------------ */

/* b of a window whose guide-source covariances are all zero, so that a = 0 (mk_px_guided_solve_shifted): the
 * source's mean, from its window sum Sp (shifted by p0, as there). Both forms of the solve's b reduce to this with
 * a = +0 (a dot product of +0 with non-negative plain sums is +0), so a kernel that knows a window is flat can take
 * it alone and still give the solve's bits. */
MK_PX float mk_px_guided_b_flat(const mk_guided_plan_t *pl, double Sp, double p0)
{
    return (float)MK_DMUL(MK_DMUL(MK_DFMA(p0, pl->n, Sp), 1.0 / (double)MK_GUIDED_Q), pl->inv_n);
}

/* a (per guide level, C values) and b of one window from its moment box sums S (exact integers as doubles).
 * Covariances are taken as n S_ij - S_i S_j (exact while below 2^53, true up to radius ~75), eps enters as
 * lambda on the diagonal, and the system is solved by cofactors (as OpenCV does) with one division.
 * S may be the sums of shifted samples, guide levels minus g0 and source values minus p0: the covariances are the
 * same integers, and b takes the plain sums S_i + g0 n and S_p + p0 n (exact integers again), so a solve from
 * shifted sums gives the same bits as one from plain sums.
 * Where every guide-source covariance is zero (a source constant over the window, as in most windows of a mask),
 * a is +0 and b is mk_px_guided_b_flat's: the formulas give the same values there, up to the sign of a zero a. */
MK_PX void mk_px_guided_solve_shifted(const mk_guided_plan_t *pl, const double *S, double g0, double p0, float *a,
                                      float *b)
{
    const double n = pl->n, lam = pl->lambda, q = (double)MK_GUIDED_Q, inv_q = 1.0 / (double)MK_GUIDED_Q;
    /* The window sums are integers, and so is every n S_ij - S_i S_j (below 2^53: exact however it is rounded), so
     * the covariances take a multiply-add; the products after them are fused where one rounding can go. */
    if (pl->C == 1) {
        double v = MK_DADD(MK_DFMA(n, S[1], -MK_DMUL(S[0], S[0])), lam);
        double e = MK_DFMA(n, S[3], -MK_DMUL(S[0], S[2]));
        a[0] = v > 0 ? (float)MK_DDIV(e, MK_DMUL(v, q)) : 0.0f;
        *b = (float)MK_DMUL(MK_DFMA(-(double)a[0], MK_DFMA(g0, n, S[0]), MK_DMUL(MK_DFMA(p0, n, S[2]), inv_q)),
                            pl->inv_n);
        return;
    }
    /* S: 0..2 g_i; 3 g00, 4 g01, 5 g02, 6 g11, 7 g12, 8 g22; 9 p; 10..12 g_i p. */
    double c00 = MK_DADD(MK_DFMA(n, S[3], -MK_DMUL(S[0], S[0])), lam);
    double c01 = MK_DFMA(n, S[4], -MK_DMUL(S[0], S[1]));
    double c02 = MK_DFMA(n, S[5], -MK_DMUL(S[0], S[2]));
    double c11 = MK_DADD(MK_DFMA(n, S[6], -MK_DMUL(S[1], S[1])), lam);
    double c12 = MK_DFMA(n, S[7], -MK_DMUL(S[1], S[2]));
    double c22 = MK_DADD(MK_DFMA(n, S[8], -MK_DMUL(S[2], S[2])), lam);
    double e0 = MK_DFMA(n, S[10], -MK_DMUL(S[0], S[9]));
    double e1 = MK_DFMA(n, S[11], -MK_DMUL(S[1], S[9]));
    double e2 = MK_DFMA(n, S[12], -MK_DMUL(S[2], S[9]));
    double i00 = MK_DFMA(c11, c22, -MK_DMUL(c12, c12));
    double i01 = MK_DFMA(c02, c12, -MK_DMUL(c01, c22));
    double i02 = MK_DFMA(c01, c12, -MK_DMUL(c02, c11));
    double i11 = MK_DFMA(c00, c22, -MK_DMUL(c02, c02));
    double i12 = MK_DFMA(c01, c02, -MK_DMUL(c00, c12));
    double i22 = MK_DFMA(c00, c11, -MK_DMUL(c01, c01));
    double det = MK_DFMA(c02, i02, MK_DFMA(c01, i01, MK_DMUL(c00, i00)));
    if (pl->compat && (det < 0 ? -det : det) < pl->guard)
        det = pl->guard_det;
    /* alpha = adj(M) e / det; a (per guide level) = alpha / 65535, through one reciprocal */
    double rd = det > 0 ? MK_DDIV(1.0, MK_DMUL(det, q)) : 0.0;
    const int flat = e0 == 0.0 && e1 == 0.0 && e2 == 0.0; /* a = +0 (the products give +-0) */
    a[0] = flat ? 0.0f : (float)MK_DMUL(MK_DFMA(i02, e2, MK_DFMA(i01, e1, MK_DMUL(i00, e0))), rd);
    a[1] = flat ? 0.0f : (float)MK_DMUL(MK_DFMA(i12, e2, MK_DFMA(i11, e1, MK_DMUL(i01, e0))), rd);
    a[2] = flat ? 0.0f : (float)MK_DMUL(MK_DFMA(i22, e2, MK_DFMA(i12, e1, MK_DMUL(i02, e0))), rd);
    double dot = MK_DFMA((double)a[2], MK_DFMA(g0, n, S[2]),
                         MK_DFMA((double)a[1], MK_DFMA(g0, n, S[1]), MK_DMUL((double)a[0], MK_DFMA(g0, n, S[0]))));
    *b = (float)MK_DMUL(MK_DFMA(MK_DFMA(p0, n, S[9]), inv_q, -dot), pl->inv_n);
}

/* The solve from plain sums. */
MK_PX void mk_px_guided_solve(const mk_guided_plan_t *pl, const double *S, float *a, float *b)
{
    mk_px_guided_solve_shifted(pl, S, 0.0, 0.0, a, b);
}

/* q at a pixel of guide g from the window sums A (of a, C values) and B (of b): (sum_i A_i g_i + B) / n. */
MK_PX float mk_px_guided_apply(const mk_guided_plan_t *pl, const double *A, double B, const int g[3])
{
    double v = 0.0;
    for (int i = 0; i < pl->C; i++)
        v = MK_DADD(v, MK_DMUL(A[i], (double)g[i]));
    return (float)MK_DMUL(MK_DADD(v, B), pl->inv_n);
}

/* The coefficient means mean(a)_i, mean(b) of a window as floats (the fast filter's low-resolution output). */
MK_PX void mk_px_guided_means(const mk_guided_plan_t *pl, const double *A, double B, float *out)
{
    for (int i = 0; i < pl->C; i++)
        out[i] = (float)MK_DMUL(A[i], pl->inv_n);
    out[pl->C] = (float)MK_DMUL(B, pl->inv_n);
}

/* Bilinear upsampling by s along one axis: full index x -> low indices i0, i1 (clamped to 0..nl-1) and the weight
 * f of i1. Low sample i is centred on full coordinate s i + (s - 1) / 2. */
MK_PX void mk_px_up_coord(int x, int s, int nl, int *i0, int *i1, float *f)
{
    int num = 2 * x + 1 - s, den = 2 * s;
    int q = num >= 0 ? num / den : -((-num + den - 1) / den);
    *f = MK_FDIV((float)(num - q * den), (float)den);
    *i0 = mk_px_clamp(q, 0, nl - 1);
    *i1 = mk_px_clamp(q + 1, 0, nl - 1);
}

/* w0 v0 + w1 v1, rounded as written (one interpolation step). */
MK_PX float mk_px_lerp(float w0, float v0, float w1, float v1)
{
    return MK_FADD(MK_FMUL(w0, v0), MK_FMUL(w1, v1));
}

/* The fast filter's output at a full-resolution pixel from the C + 1 means already interpolated along y in the
 * pixel's left (vl) and right (vr) low-resolution columns: interpolated along x with weight fx, then applied to the
 * guide pixel g (levels 0..255). */
MK_PX float mk_px_guided_up_row(int C, const float *vl, const float *vr, float fx, const int g[3])
{
    float gx = MK_FSUB(1.0f, fx), q = 0.0f;
    for (int i = 0; i <= C; i++) {
        float v = mk_px_lerp(gx, vl[i], fx, vr[i]);
        q = i < C ? MK_FADD(q, MK_FMUL(v, (float)g[i])) : MK_FADD(q, v);
    }
    return q;
}

/* The fast filter's output at a full-resolution pixel: the C + 1 means of the four low-resolution neighbours
 * (m00 left-top, m01 right-top, m10 left-bottom, m11 right-bottom) interpolated with weights fx, fy (first along
 * y in each column, then along x: the CUDA kernel shares the y step among a row's pixels), then applied to the
 * guide pixel g (levels 0..255). */
MK_PX float mk_px_guided_up(int C, const float *m00, const float *m01, const float *m10, const float *m11, float fx,
                            float fy, const int g[3])
{
    float gy = MK_FSUB(1.0f, fy), vl[4], vr[4];
    for (int i = 0; i <= C; i++) {
        vl[i] = mk_px_lerp(gy, m00[i], fy, m10[i]);
        vr[i] = mk_px_lerp(gy, m01[i], fy, m11[i]);
    }
    return mk_px_guided_up_row(C, vl, vr, fx, g);
}

#endif
