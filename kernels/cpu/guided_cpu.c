/* guided_cpu: the reference guided filter and fast guided upsampling.
 *
 * Box sums come from summed-area tables, so each costs the same whatever the radius (O(N) in all): the moments'
 * tables are exact 64-bit integers, the coefficients' tables doubles built by a running sum along each row and
 * then an addition down each column (the CUDA large-radius path builds them in the same order). Memory, in the
 * context's scratch: (moments + C + 1) doubles per working pixel plus the coefficients. */
#include "backend.h"
#include "guided_px.h"
#include "mask_cpu.h"

#include <string.h>

/* Scratch layout for one call. */
typedef struct {
    long long *sat;   /* nm tables of (wl+1) x (hl+1) */
    double *sat2;     /* C + 1 tables of the coefficients */
    mk_refl_t *xr;    /* per working column: the window's left and right prefix decompositions */
    float *ab;        /* per working pixel: a_0..a_{C-1}, b */
    float *means;     /* fast filter: per working pixel the C + 1 coefficient means */
} bufs_t;

static int get_bufs(mk_ctx_t *ctx, const mk_guided_plan_t *pl, bufs_t *b)
{
    size_t nc = (size_t)pl->C + 1, plane = ((size_t)pl->wl + 1) * ((size_t)pl->hl + 1);
    size_t npx = (size_t)pl->wl * pl->hl;
    size_t n_sat = (size_t)pl->nm * plane, n_sat2 = nc * plane, n_xr = 2 * (size_t)pl->wl;
    size_t n_ab = npx * nc, n_means = pl->s > 1 ? npx * nc : 0;
    size_t bytes = n_sat * sizeof(long long) + n_sat2 * sizeof(double) + n_xr * sizeof(mk_refl_t) +
                   (n_ab + n_means) * sizeof(float);
    void *p;
    int rc = mk_ctx_scratch(ctx, MK_SCRATCH_GUIDED, bytes, &p, NULL);
    if (rc)
        return rc;
    b->sat = p;
    b->sat2 = (double *)(b->sat + n_sat);
    b->xr = (mk_refl_t *)(b->sat2 + n_sat2);
    b->ab = (float *)(b->xr + n_xr);
    b->means = b->ab + n_ab;
    return 0;
}

/* The moments' tables at the working resolution. */
static void moment_tables(const mk_guided_plan_t *pl, const mk_image_t *guide, const mk_image_t *src, long long *sat)
{
    size_t st = (size_t)pl->wl + 1, plane = st * ((size_t)pl->hl + 1);
    for (int k = 0; k < pl->nm; k++)
        memset(sat + k * plane, 0, st * sizeof *sat);
    for (int y = 0; y < pl->hl; y++) {
        const void *srow = mk_image_row(src, 0, y);
        long long acc[MK_GUIDED_MAX_NM] = {0}, mo[MK_GUIDED_MAX_NM];
        for (int k = 0; k < pl->nm; k++)
            sat[k * plane + (y + 1) * st] = 0;
        for (int x = 0; x < pl->wl; x++) {
            int g[3];
            mk_px_guide_at(guide->data, guide->pitch, pl->C, pl->w, pl->h, pl->s, x, y, g);
            mk_px_moments(pl->C, g, mk_px_src_q(srow, src->dtype == MK_F32, x), mo);
            for (int k = 0; k < pl->nm; k++) {
                long long *t = sat + k * plane;
                acc[k] += mo[k];
                t[(y + 1) * st + x + 1] = acc[k] + t[y * st + x + 1];
            }
        }
    }
}

/* a and b of every working pixel. */
static void coefficients(const mk_guided_plan_t *pl, const bufs_t *b)
{
    size_t st = (size_t)pl->wl + 1, plane = st * ((size_t)pl->hl + 1), nc = (size_t)pl->C + 1;
    for (int x = 0; x < pl->wl; x++) {
        b->xr[2 * x] = mk_px_refl_prefix((long long)x - pl->r, pl->wl);
        b->xr[2 * x + 1] = mk_px_refl_prefix((long long)x + pl->r + 1, pl->wl);
    }
    for (int y = 0; y < pl->hl; y++) {
        mk_box_t box;
        box.y0 = mk_px_refl_prefix((long long)y - pl->r, pl->hl);
        box.y1 = mk_px_refl_prefix((long long)y + pl->r + 1, pl->hl);
        for (int x = 0; x < pl->wl; x++) {
            double S[MK_GUIDED_MAX_NM];
            box.x0 = b->xr[2 * x];
            box.x1 = b->xr[2 * x + 1];
            for (int k = 0; k < pl->nm; k++)
                S[k] = (double)mk_px_sat_box_i64(b->sat + k * plane, st, pl->wl, pl->hl, box);
            float *o = b->ab + ((size_t)y * pl->wl + x) * nc;
            mk_px_guided_solve(pl, S, o, o + pl->C);
        }
    }
}

/* The coefficients' tables: a running sum along each row, plus the finished table entry above. */
static void coefficient_tables(const mk_guided_plan_t *pl, const bufs_t *b)
{
    size_t st = (size_t)pl->wl + 1, plane = st * ((size_t)pl->hl + 1), nc = (size_t)pl->C + 1;
    for (size_t i = 0; i < nc; i++)
        memset(b->sat2 + i * plane, 0, st * sizeof(double));
    for (int y = 0; y < pl->hl; y++) {
        double acc[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < nc; i++)
            b->sat2[i * plane + (y + 1) * st] = 0;
        for (int x = 0; x < pl->wl; x++) {
            const float *v = b->ab + ((size_t)y * pl->wl + x) * nc;
            for (size_t i = 0; i < nc; i++) {
                double *t = b->sat2 + i * plane;
                acc[i] = MK_DADD(acc[i], (double)v[i]);
                t[(y + 1) * st + x + 1] = MK_DADD(acc[i], t[y * st + x + 1]);
            }
        }
    }
}

/* Window sums of the coefficients at working pixel (x, y): A (C values) and *B. */
static void coefficient_sums(const mk_guided_plan_t *pl, const bufs_t *b, int x, int y, double *A, double *B)
{
    size_t st = (size_t)pl->wl + 1, plane = st * ((size_t)pl->hl + 1);
    mk_box_t box;
    box.x0 = b->xr[2 * x];
    box.x1 = b->xr[2 * x + 1];
    box.y0 = mk_px_refl_prefix((long long)y - pl->r, pl->hl);
    box.y1 = mk_px_refl_prefix((long long)y + pl->r + 1, pl->hl);
    for (int i = 0; i < pl->C; i++)
        A[i] = mk_px_sat_box_f64(b->sat2 + i * plane, st, pl->wl, pl->hl, box);
    *B = mk_px_sat_box_f64(b->sat2 + pl->C * plane, st, pl->wl, pl->hl, box);
}

int mk_guided_upsample_cpu(mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask, mk_image_t *dst,
                           const mk_guided_plan_t *pl, const mk_mask_t *m)
{
    bufs_t b;
    int rc = get_bufs(ctx, pl, &b);
    if (rc)
        return rc;
    size_t nc = (size_t)pl->C + 1;
    moment_tables(pl, guide, mask, b.sat);
    coefficients(pl, &b);
    coefficient_tables(pl, &b);
    double A[3], B;
    int g[3];
    if (pl->s == 1) {
        for (int y = 0; y < pl->h; y++)
            for (int x = 0; x < pl->w; x++) {
                coefficient_sums(pl, &b, x, y, A, &B);
                mk_px_guide_at(guide->data, guide->pitch, pl->C, pl->w, pl->h, 1, x, y, g);
                mk_mask_put_cpu(dst, m, x, y, mk_px_guided_apply(pl, A, B, g));
            }
    } else {
        for (int y = 0; y < pl->hl; y++)
            for (int x = 0; x < pl->wl; x++) {
                coefficient_sums(pl, &b, x, y, A, &B);
                mk_px_guided_means(pl, A, B, b.means + ((size_t)y * pl->wl + x) * nc);
            }
        for (int y = 0; y < pl->h; y++) {
            int j0, j1;
            float fy, fx;
            mk_px_up_coord(y, pl->s, pl->hl, &j0, &j1, &fy);
            const float *r0 = b.means + (size_t)j0 * pl->wl * nc, *r1 = b.means + (size_t)j1 * pl->wl * nc;
            for (int x = 0; x < pl->w; x++) {
                int i0, i1;
                mk_px_up_coord(x, pl->s, pl->wl, &i0, &i1, &fx);
                mk_px_guide_at(guide->data, guide->pitch, pl->C, pl->w, pl->h, 1, x, y, g);
                float q = mk_px_guided_up(pl->C, r0 + i0 * nc, r0 + i1 * nc, r1 + i0 * nc, r1 + i1 * nc, fx, fy, g);
                mk_mask_put_cpu(dst, m, x, y, q);
            }
        }
    }
    mk_mask_clear_outside_cpu(dst, m, pl->w, pl->h);
    return 0;
}
