/* fp32 vs double per-window solve of the colour guided filter (maskd kernels/guided_px.h).
 * Build: see Makefile. Mirrors cpu/guided_cpu.c (s = 1): exact int64 moment SATs, solve per pixel (variant),
 * a,b stored as float, coefficient SATs in double, apply in double (mk_px_guided_apply). */
#include "ctx.h"
#include "errors.h"
#include "guided.h"
#include "guided_px.h"
#include "image.h"
#include "imageio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mk_guided_plan(const mk_guided_t *g, int C, int w, int h, mk_guided_plan_t *pl);

enum { V_D, V_F, V_FB, V_FR1, V_FR2, V_FK, V_FKR, NV };
static const char *vname[NV] = {"double(ref copy)", "F: all fp32", "Fb: fp32 a, b in double",
                                "Fr1: fp32 adj,det,adj.e; rcp+mul dbl", "Fr2: fp32 adj,det; adj.e,rcp,mul dbl",
                                "Fk: fp32 w/ Kahan fma 2x2 dets", "Fkr: Kahan adj fp32, rest dbl"};

/* Kahan's accurate a*b - c*d with one fma */
static inline float dop(float a, float b, float c, float d)
{
    float w = c * d;
    float e = fmaf(-c, d, w);
    float f = fmaf(a, b, -w);
    return f + e;
}

/* C = 3 only. S are exact int64 sums. */
static void solve_var(int v, const mk_guided_plan_t *pl, const long long *S, float *a, float *b)
{
    if (v == V_D) {
        double Sd[MK_GUIDED_MAX_NM];
        for (int k = 0; k < pl->nm; k++)
            Sd[k] = (double)S[k];
        mk_px_guided_solve(pl, Sd, a, b);
        return;
    }
    long long n = (long long)pl->n;
    /* exact covariances in int64 */
    long long C00 = n * S[3] - S[0] * S[0], C01 = n * S[4] - S[0] * S[1], C02 = n * S[5] - S[0] * S[2];
    long long C11 = n * S[6] - S[1] * S[1], C12 = n * S[7] - S[1] * S[2], C22 = n * S[8] - S[2] * S[2];
    long long E0 = n * S[10] - S[0] * S[9], E1 = n * S[11] - S[1] * S[9], E2 = n * S[12] - S[2] * S[9];
    float lam = (float)pl->lambda;
    float c00 = (float)C00 + lam, c01 = (float)C01, c02 = (float)C02;
    float c11 = (float)C11 + lam, c12 = (float)C12, c22 = (float)C22 + lam;
    float e0 = (float)E0, e1 = (float)E1, e2 = (float)E2;
    float i00, i01, i02, i11, i12, i22, det;
    if (v == V_FK || v == V_FKR) {
        i00 = dop(c11, c22, c12, c12);
        i01 = dop(c02, c12, c01, c22);
        i02 = dop(c01, c12, c02, c11);
        i11 = dop(c00, c22, c02, c02);
        i12 = dop(c01, c02, c00, c12);
        i22 = dop(c00, c11, c01, c01);
    } else {
        i00 = c11 * c22 - c12 * c12;
        i01 = c02 * c12 - c01 * c22;
        i02 = c01 * c12 - c02 * c11;
        i11 = c00 * c22 - c02 * c02;
        i12 = c01 * c02 - c00 * c12;
        i22 = c00 * c11 - c01 * c01;
    }
    det = (c00 * i00 + c01 * i01) + c02 * i02;
    float q = (float)MK_GUIDED_Q;
    if (v == V_F || v == V_FK) {
        if (pl->compat && fabsf(det) < (float)pl->guard)
            det = (float)pl->guard_det;
        float rd = det > 0 ? 1.0f / (det * q) : 0.0f;
        a[0] = ((i00 * e0 + i01 * e1) + i02 * e2) * rd;
        a[1] = ((i01 * e0 + i11 * e1) + i12 * e2) * rd;
        a[2] = ((i02 * e0 + i12 * e1) + i22 * e2) * rd;
        float dot = (a[0] * (float)S[0] + a[1] * (float)S[1]) + a[2] * (float)S[2];
        *b = ((float)S[9] * (1.0f / q) - dot) * (float)pl->inv_n;
        return;
    }
    double dd = det;
    if (pl->compat && fabs(dd) < pl->guard)
        dd = pl->guard_det;
    double rd = dd > 0 ? 1.0 / (dd * (double)q) : 0.0;
    if (v == V_FB) {
        float rf = det > 0 ? 1.0f / (((pl->compat && fabsf(det) < (float)pl->guard) ? (float)pl->guard_det : det) * q)
                           : 0.0f;
        a[0] = ((i00 * e0 + i01 * e1) + i02 * e2) * rf;
        a[1] = ((i01 * e0 + i11 * e1) + i12 * e2) * rf;
        a[2] = ((i02 * e0 + i12 * e1) + i22 * e2) * rf;
    } else if (v == V_FR1) {
        a[0] = (float)((double)((i00 * e0 + i01 * e1) + i02 * e2) * rd);
        a[1] = (float)((double)((i01 * e0 + i11 * e1) + i12 * e2) * rd);
        a[2] = (float)((double)((i02 * e0 + i12 * e1) + i22 * e2) * rd);
    } else { /* FR2, FKR */
        double E[3] = {(double)E0, (double)E1, (double)E2};
        a[0] = (float)((((double)i00 * E[0] + (double)i01 * E[1]) + (double)i02 * E[2]) * rd);
        a[1] = (float)((((double)i01 * E[0] + (double)i11 * E[1]) + (double)i12 * E[2]) * rd);
        a[2] = (float)((((double)i02 * E[0] + (double)i12 * E[1]) + (double)i22 * E[2]) * rd);
    }
    double dot = ((double)a[0] * (double)S[0] + (double)a[1] * (double)S[1]) + (double)a[2] * (double)S[2];
    *b = (float)(((double)S[9] * (1.0 / (double)MK_GUIDED_Q) - dot) * pl->inv_n);
}

typedef struct {
    const mk_guided_plan_t *pl;
    long long *sat;
    double *sat2;
    size_t st, plane;
} ws_t;

static mk_box_t box_at(const mk_guided_plan_t *pl, int x, int y)
{
    return mk_px_box_at(x, y, pl->r, pl->wl, pl->hl);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/work/shared/data/reference/guided";
    const char *names[] = {"65019", "flower", "llama", "person1"};
    int radii[] = {8, 4};
    double epss[] = {1e-4, 1e-2};
    mk_ctx_t *ctx;
    if (mk_ctx_create(MK_BACKEND_CPU, &ctx)) {
        fprintf(stderr, "ctx: %s\n", mk_err_msg());
        return 1;
    }
    printf("%-8s %2s %-6s %-6s | %-38s | %10s %10s | %10s %10s | %s\n", "image", "r", "eps", "mode", "variant",
           "max|dq|", "mean|dq|", "max|da|", "max|db|", "at max dq: (x,y) var/eps(min..) detrel");
    for (int ii = 0; ii < 4; ii++) {
        char path[512];
        mk_image_t guide;
        snprintf(path, sizeof path, "%s/%s.guide.png", dir, names[ii]);
        if (mk_imageio_load(path, MK_FMT_BGR, &guide)) {
            fprintf(stderr, "load %s: %s\n", path, mk_err_msg());
            return 1;
        }
        int w = guide.width, h = guide.height;
        if (getenv("GREYISH")) { /* synthetic worst case: near-grey guide, channels = luma + {-1,0,+1} noise */
            unsigned rs = 12345;
            for (int y = 0; y < h; y++) {
                uint8_t *p = (uint8_t *)guide.data + (size_t)y * guide.pitch;
                for (int x = 0; x < w; x++, p += 3) {
                    int Y = (p[0] * 29 + p[1] * 150 + p[2] * 77 + 128) >> 8;
                    for (int c = 0; c < 3; c++) {
                        rs = rs * 1103515245u + 12345u;
                        int v = Y + (int)((rs >> 16) % 3) - 1;
                        p[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                    }
                }
            }
        }
        mk_image_t src = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
        mk_image_alloc(ctx, &src, MK_MEM_HOST);
        snprintf(path, sizeof path, "%s/%s.src.f32", dir, names[ii]);
        FILE *f = fopen(path, "rb");
        for (int y = 0; y < h; y++)
            if (fread(mk_image_row(&src, 0, y), 4, w, f) != (size_t)w)
                return fprintf(stderr, "short %s\n", path), 1;
        fclose(f);
        mk_image_t qlib = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
        mk_image_alloc(ctx, &qlib, MK_MEM_HOST);

        for (int ri = 0; ri < 2; ri++)
            for (int ei = 0; ei < 2; ei++)
                for (int compat = 0; compat < 2; compat++) {
                    if (compat && epss[ei] >= 1e-2)
                        continue;
                    int r = radii[ri];
                    double eps = epss[ei];
                    unsigned flags = compat ? MK_GUIDED_OPENCV : 0;
                    if (mk_guided_filter(ctx, &guide, &src, &qlib, r, eps, flags)) {
                        fprintf(stderr, "filter: %s\n", mk_err_msg());
                        return 1;
                    }
                    /* if a reference OpenCV output exists for this config, compare too */
                    double maxref = -1;
                    {
                        snprintf(path, sizeof path, "%s/%s.r%d.out.f32", dir, names[ii], r);
                        int match = (r == 4 && eps == 1e-2) || (r == 8 && eps == 1e-4 && compat);
                        FILE *fr = match ? fopen(path, "rb") : NULL;
                        if (fr) {
                            float *o = malloc((size_t)w * h * 4);
                            if (fread(o, 4, (size_t)w * h, fr) == (size_t)w * h) {
                                maxref = 0;
                                for (int y = 0; y < h; y++)
                                    for (int x = 0; x < w; x++) {
                                        double d = fabs(o[y * w + x] - ((float *)mk_image_row(&qlib, 0, y))[x]);
                                        maxref = d > maxref ? d : maxref;
                                    }
                            }
                            free(o);
                            fclose(fr);
                        }
                    }
                    mk_guided_t g = {r, eps, 1, flags};
                    mk_guided_plan_t pl;
                    mk_guided_plan(&g, 3, w, h, &pl);
                    size_t st = (size_t)w + 1, plane = st * (h + 1), npx = (size_t)w * h;
                    long long *sat = calloc((size_t)pl.nm * plane, sizeof *sat);
                    /* moment SATs (as moment_tables) */
                    for (int y = 0; y < h; y++) {
                        const float *srow = mk_image_row(&src, 0, y);
                        long long acc[MK_GUIDED_MAX_NM] = {0}, mo[MK_GUIDED_MAX_NM];
                        for (int x = 0; x < w; x++) {
                            int gg[3];
                            mk_px_guide_at(guide.data, guide.pitch, 3, w, h, 1, x, y, gg);
                            mk_px_moments(3, gg, mk_px_src_q(srow, 1, x), mo);
                            for (int k = 0; k < pl.nm; k++) {
                                long long *t = sat + k * plane;
                                acc[k] += mo[k];
                                t[(y + 1) * st + x + 1] = acc[k] + t[y * st + x + 1];
                            }
                        }
                    }
                    /* window sums per pixel */
                    long long *S = malloc(npx * pl.nm * sizeof *S);
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++) {
                            mk_box_t bx = box_at(&pl, x, y);
                            for (int k = 0; k < pl.nm; k++)
                                S[((size_t)y * w + x) * pl.nm + k] = mk_px_sat_box_i64(sat + k * plane, st, w, h, bx);
                        }
                    float *ab[NV], *q[NV];
                    double *sat2 = malloc(4 * plane * sizeof *sat2);
                    for (int v = 0; v < NV; v++) {
                        ab[v] = malloc(npx * 4 * sizeof(float));
                        q[v] = malloc(npx * sizeof(float));
                        for (size_t p = 0; p < npx; p++)
                            solve_var(v, &pl, S + p * pl.nm, ab[v] + p * 4, ab[v] + p * 4 + 3);
                        /* coefficient tables (as coefficient_tables) */
                        memset(sat2, 0, 4 * plane * sizeof *sat2);
                        for (int y = 0; y < h; y++) {
                            double acc[4] = {0, 0, 0, 0};
                            for (int x = 0; x < w; x++)
                                for (int i = 0; i < 4; i++) {
                                    double *t = sat2 + i * plane;
                                    acc[i] = MK_DADD(acc[i], (double)ab[v][((size_t)y * w + x) * 4 + i]);
                                    t[(y + 1) * st + x + 1] = MK_DADD(acc[i], t[y * st + x + 1]);
                                }
                        }
                        for (int y = 0; y < h; y++)
                            for (int x = 0; x < w; x++) {
                                mk_box_t bx = box_at(&pl, x, y);
                                double A[3], B;
                                int gg[3];
                                for (int i = 0; i < 3; i++)
                                    A[i] = mk_px_sat_box_f64(sat2 + i * plane, st, w, h, bx);
                                B = mk_px_sat_box_f64(sat2 + 3 * plane, st, w, h, bx);
                                mk_px_guide_at(guide.data, guide.pitch, 3, w, h, 1, x, y, gg);
                                q[v][(size_t)y * w + x] = mk_px_guided_apply(&pl, A, B, gg);
                            }
                    }
                    /* check the double copy against the library */
                    double maxlib = 0;
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++) {
                            double d = fabs(q[V_D][(size_t)y * w + x] - ((float *)mk_image_row(&qlib, 0, y))[x]);
                            maxlib = d > maxlib ? d : maxlib;
                        }
                    printf("# %s r=%d eps=%g %s: copy vs library max %.3g%s", names[ii], r, eps,
                           compat ? "opencv" : "paper", maxlib, maxlib == 0 ? " (bit-exact)" : " MISMATCH");
                    if (maxref >= 0)
                        printf("; library vs shared OpenCV ref max %.3g", maxref);
                    printf("\n");
                    double nn = pl.n, k2 = nn * nn * 65025.0;
                    for (int v = 1; v < NV; v++) {
                        double mx = 0, sum = 0, mda = 0, mdb = 0;
                        size_t at = 0;
                        for (size_t p = 0; p < npx; p++) {
                            double d = fabs((double)q[v][p] - q[V_D][p]);
                            sum += d;
                            if (d > mx)
                                mx = d, at = p;
                            for (int i = 0; i < 3; i++) {
                                double da = fabs((double)ab[v][p * 4 + i] - ab[V_D][p * 4 + i]) * 255.0; /* a per [0,1] */
                                mda = da > mda ? da : mda;
                            }
                            double db = fabs((double)ab[v][p * 4 + 3] - ab[V_D][p * 4 + 3]);
                            mdb = db > mdb ? db : mdb;
                        }
                        /* flatness around the worst pixel: guide variance (trace/3, [0,1] units) of its own window,
                         * and min over the windows it averages; detrel = det(Sigma)/det(Sigma+eps) at its window */
                        int ax = (int)(at % w), ay = (int)(at / w);
                        const long long *s = S + at * pl.nm;
                        long long n = (long long)nn;
                        double c00 = (double)(n * s[3] - s[0] * s[0]) / k2, c11 = (double)(n * s[6] - s[1] * s[1]) / k2;
                        double c22 = (double)(n * s[8] - s[2] * s[2]) / k2;
                        double c01 = (double)(n * s[4] - s[0] * s[1]) / k2, c02 = (double)(n * s[5] - s[0] * s[2]) / k2;
                        double c12 = (double)(n * s[7] - s[1] * s[2]) / k2;
                        double var = (c00 + c11 + c22) / 3;
                        double det0 = c00 * (c11 * c22 - c12 * c12) - c01 * (c01 * c22 - c12 * c02) + c02 * (c01 * c12 - c11 * c02);
                        double d00 = c00 + eps, d11 = c11 + eps, d22 = c22 + eps;
                        double dete = d00 * (d11 * d22 - c12 * c12) - c01 * (c01 * d22 - c12 * c02) + c02 * (c01 * c12 - d11 * c02);
                        double minvar = 1e300;
                        for (int yy = ay - r; yy <= ay + r; yy++)
                            for (int xx = ax - r; xx <= ax + r; xx++) {
                                int px = mk_px_reflect(xx, w), py = mk_px_reflect(yy, h);
                                const long long *t = S + ((size_t)py * w + px) * pl.nm;
                                double vv = ((double)(n * t[3] - t[0] * t[0]) + (double)(n * t[6] - t[1] * t[1]) +
                                             (double)(n * t[8] - t[2] * t[2])) / k2 / 3;
                                minvar = vv < minvar ? vv : minvar;
                            }
                        printf("%-8s %2d %-6g %-6s | %-38s | %10.3g %10.3g | %10.3g %10.3g | (%d,%d) %.3g (%.3g) %.3g\n",
                               names[ii], r, eps, compat ? "opencv" : "paper", vname[v], mx, sum / npx, mda, mdb, ax,
                               ay, var / eps, minvar / eps, dete > 0 ? det0 / dete : -1);
                    }
                    for (int v = 0; v < NV; v++)
                        free(ab[v]), free(q[v]);
                    free(sat2);
                    free(S);
                    free(sat);
                }
        mk_image_free(ctx, &qlib);
        mk_image_free(ctx, &src);
        mk_image_free(ctx, &guide);
    }
    mk_ctx_destroy(ctx);
    return 0;
}
