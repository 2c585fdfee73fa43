/* grabcut_px: the per-pixel and per-component arithmetic of GrabCut, shared by the CPU reference and the CUDA
 * kernels so that both backends compute the same bits wherever the math allows it.
 *
 * Exactness plan (what makes CPU and CUDA agree):
 *   - colours are integers; k-means seeding distances, the k-means and GMM sums (count, sum c, sum c c^T) and the
 *     beta sum are exact integer sums (int64), whatever the summation order;
 *   - means, covariances, inverses and determinants are derived from those sums in double, in the order written
 *     here (MK_D* macros: no FMA contraction on either side), so every model parameter is bit-identical;
 *   - the component density needs exp(), and CUDA's exp() and glibc's may differ in the last bit; after scaling and
 *     rounding to the integer graph the capacities then rarely differ by 1, which is the only CPU/CUDA difference.
 *
 * Random numbers for k-means++: mk_gc_rand(seed, i) = splitmix64(seed + (i + 1) * golden gamma), one draw per
 * centre; a draw r picks the sample at which the running D^2 sum first exceeds r mod (total D^2). */
#ifndef MK_GRABCUT_PX_H
#define MK_GRABCUT_PX_H

#include <stdint.h>

#include "grabcut.h"
#include "px.h"

#ifndef __CUDACC__
#include <math.h>
#define MK_GC_EXP(a) exp(a)
#define MK_GC_LOG(a) log(a)
#define MK_GC_SQRT(a) sqrt(a)
#else
#define MK_GC_EXP(a) exp(a)
#define MK_GC_LOG(a) log(a)
#define MK_GC_SQRT(a) __dsqrt_rn(a)
#endif

/* A GMM component ready for evaluation (OpenCV's coefs, mean, inverseCovs, covDeterms). coef 0: unused. */
typedef struct {
    double coef;
    double mean[3];
    double inv[3][3];
    double det;
    double norm; /* 1 / sqrt(det) */
} mk_gc_comp_t;

/* Integer moments of one component's samples. */
typedef struct {
    int64_t n;
    int64_t s[3];
    int64_t ss[6]; /* 00 01 02 11 12 22 */
} mk_gc_moments_t;

MK_PX uint64_t mk_gc_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

MK_PX uint64_t mk_gc_rand(uint64_t seed, uint64_t i)
{
    return mk_gc_splitmix64(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
}

MK_PX int64_t mk_gc_dist2_int(int r0, int g0, int b0, int r1, int g1, int b1)
{
    int64_t d0 = r0 - r1, d1 = g0 - g1, d2 = b0 - b1;
    return d0 * d0 + d1 * d1 + d2 * d2;
}

/* Squared distance of an integer colour to a double centre, summed in channel order. */
MK_PX double mk_gc_dist2(const double c[3], int v0, int v1, int v2)
{
    double d0 = MK_DSUB((double)v0, c[0]), d1 = MK_DSUB((double)v1, c[1]), d2 = MK_DSUB((double)v2, c[2]);
    return MK_DADD(MK_DADD(MK_DMUL(d0, d0), MK_DMUL(d1, d1)), MK_DMUL(d2, d2));
}

MK_PX void mk_gc_moments_add(mk_gc_moments_t *m, int v0, int v1, int v2)
{
    m->n += 1;
    m->s[0] += v0;
    m->s[1] += v1;
    m->s[2] += v2;
    m->ss[0] += (int64_t)v0 * v0;
    m->ss[1] += (int64_t)v0 * v1;
    m->ss[2] += (int64_t)v0 * v2;
    m->ss[3] += (int64_t)v1 * v1;
    m->ss[4] += (int64_t)v1 * v2;
    m->ss[5] += (int64_t)v2 * v2;
}

MK_PX double mk_gc_det3(const double c[9])
{
    double t0 = MK_DSUB(MK_DMUL(c[4], c[8]), MK_DMUL(c[5], c[7]));
    double t1 = MK_DSUB(MK_DMUL(c[3], c[8]), MK_DMUL(c[5], c[6]));
    double t2 = MK_DSUB(MK_DMUL(c[3], c[7]), MK_DMUL(c[4], c[6]));
    return MK_DADD(MK_DSUB(MK_DMUL(c[0], t0), MK_DMUL(c[1], t1)), MK_DMUL(c[2], t2));
}

/* An unused component: coef 0 and zeros, never evaluated. */
MK_PX void mk_gc_comp_clear(mk_gc_comp_t *out)
{
    out->coef = 0.0;
    for (int i = 0; i < 3; i++)
        out->mean[i] = 0.0;
    for (int i = 0; i < 9; i++)
        out->inv[i / 3][i % 3] = 0.0;
    out->det = 0.0;
    out->norm = 0.0;
}

/* The determinant d of covariance c (row-major), its inverse and 1 / sqrt(d) into out (OpenCV's
 * calcInverseCovAndDeterm after its singular fix). Returns 0, or -1 when d is not above DBL_EPSILON. */
MK_PX int mk_gc_comp_invert(const double c[9], double d, mk_gc_comp_t *out)
{
    out->det = d;
    if (!(d > 2.220446049250313e-16))
        return -1;
    out->norm = MK_DDIV(1.0, MK_GC_SQRT(d));
    out->inv[0][0] = MK_DDIV(MK_DSUB(MK_DMUL(c[4], c[8]), MK_DMUL(c[5], c[7])), d);
    out->inv[1][0] = MK_DDIV(-MK_DSUB(MK_DMUL(c[3], c[8]), MK_DMUL(c[5], c[6])), d);
    out->inv[2][0] = MK_DDIV(MK_DSUB(MK_DMUL(c[3], c[7]), MK_DMUL(c[4], c[6])), d);
    out->inv[0][1] = MK_DDIV(-MK_DSUB(MK_DMUL(c[1], c[8]), MK_DMUL(c[2], c[7])), d);
    out->inv[1][1] = MK_DDIV(MK_DSUB(MK_DMUL(c[0], c[8]), MK_DMUL(c[2], c[6])), d);
    out->inv[2][1] = MK_DDIV(-MK_DSUB(MK_DMUL(c[0], c[7]), MK_DMUL(c[1], c[6])), d);
    out->inv[0][2] = MK_DDIV(MK_DSUB(MK_DMUL(c[1], c[5]), MK_DMUL(c[2], c[4])), d);
    out->inv[1][2] = MK_DDIV(-MK_DSUB(MK_DMUL(c[0], c[5]), MK_DMUL(c[2], c[3])), d);
    out->inv[2][2] = MK_DDIV(MK_DSUB(MK_DMUL(c[0], c[4]), MK_DMUL(c[1], c[3])), d);
    return 0;
}

/* OpenCV's GMM::endLearning for one component from its moments and the GMM's total sample count: weight, mean,
 * covariance (0.01 added to the diagonal when the determinant is <= 1e-6), inverse and determinant. Returns 0, or
 * -1 when the determinant is still not above DBL_EPSILON (OpenCV asserts there; callers report MK_ERANGE). A
 * component without samples gets coef 0 and is never evaluated. `cov` (may be NULL) receives the covariance. */
MK_PX int mk_gc_comp_learn(const mk_gc_moments_t *m, int64_t total, mk_gc_comp_t *out, double cov[9])
{
    double c[9];
    int i;
    if (m->n == 0) {
        mk_gc_comp_clear(out);
        if (cov)
            for (i = 0; i < 9; i++)
                cov[i] = 0.0;
        return 0;
    }
    double inv_n = MK_DDIV(1.0, (double)m->n);
    out->coef = MK_DDIV((double)m->n, (double)total);
    for (i = 0; i < 3; i++)
        out->mean[i] = MK_DMUL((double)m->s[i], inv_n);
    const double *mu = out->mean;
    c[0] = MK_DSUB(MK_DMUL((double)m->ss[0], inv_n), MK_DMUL(mu[0], mu[0]));
    c[1] = MK_DSUB(MK_DMUL((double)m->ss[1], inv_n), MK_DMUL(mu[0], mu[1]));
    c[2] = MK_DSUB(MK_DMUL((double)m->ss[2], inv_n), MK_DMUL(mu[0], mu[2]));
    c[3] = MK_DSUB(MK_DMUL((double)m->ss[1], inv_n), MK_DMUL(mu[1], mu[0]));
    c[4] = MK_DSUB(MK_DMUL((double)m->ss[3], inv_n), MK_DMUL(mu[1], mu[1]));
    c[5] = MK_DSUB(MK_DMUL((double)m->ss[4], inv_n), MK_DMUL(mu[1], mu[2]));
    c[6] = MK_DSUB(MK_DMUL((double)m->ss[2], inv_n), MK_DMUL(mu[2], mu[0]));
    c[7] = MK_DSUB(MK_DMUL((double)m->ss[4], inv_n), MK_DMUL(mu[2], mu[1]));
    c[8] = MK_DSUB(MK_DMUL((double)m->ss[5], inv_n), MK_DMUL(mu[2], mu[2]));
    double d = mk_gc_det3(c);
    if (d <= 1e-6) {
        c[0] = MK_DADD(c[0], 0.01);
        c[4] = MK_DADD(c[4], 0.01);
        c[8] = MK_DADD(c[8], 0.01);
        d = mk_gc_det3(c);
    }
    if (cov)
        for (i = 0; i < 9; i++)
            cov[i] = c[i];
    return mk_gc_comp_invert(c, d, out);
}

/* A component from a stored model (OpenCV's GMM built from a model: weight, mean and covariance as given, no
 * singular fix), for the fixed-model cut. coef <= 0: an unused component. Returns 0, or -1 when coef > 0 and the
 * determinant is not above DBL_EPSILON. A model that mk_grabcut returned gives back bit for bit the components it
 * was learnt as. */
MK_PX int mk_gc_comp_set(double coef, const double mean[3], const double cov[9], mk_gc_comp_t *out)
{
    mk_gc_comp_clear(out);
    if (!(coef > 0.0))
        return 0;
    out->coef = coef;
    for (int i = 0; i < 3; i++)
        out->mean[i] = mean[i];
    return mk_gc_comp_invert(cov, mk_gc_det3(cov), out);
}

/* The unweighted density of component k at colour v (OpenCV's GMM::operator()(ci, color)); 0 when coef is 0. */
MK_PX double mk_gc_comp_density(const mk_gc_comp_t *k, int v0, int v1, int v2)
{
    if (!(k->coef > 0.0))
        return 0.0;
    double d0 = MK_DSUB((double)v0, k->mean[0]);
    double d1 = MK_DSUB((double)v1, k->mean[1]);
    double d2 = MK_DSUB((double)v2, k->mean[2]);
    double m0 = MK_DADD(MK_DADD(MK_DMUL(d0, k->inv[0][0]), MK_DMUL(d1, k->inv[1][0])), MK_DMUL(d2, k->inv[2][0]));
    double m1 = MK_DADD(MK_DADD(MK_DMUL(d0, k->inv[0][1]), MK_DMUL(d1, k->inv[1][1])), MK_DMUL(d2, k->inv[2][1]));
    double m2 = MK_DADD(MK_DADD(MK_DMUL(d0, k->inv[0][2]), MK_DMUL(d1, k->inv[1][2])), MK_DMUL(d2, k->inv[2][2]));
    double mult = MK_DADD(MK_DADD(MK_DMUL(d0, m0), MK_DMUL(d1, m1)), MK_DMUL(d2, m2));
    return MK_DMUL(k->norm, MK_GC_EXP(MK_DMUL(-0.5, mult)));
}

/* OpenCV's GMM::whichComponent: the component of largest unweighted density (first on ties). */
MK_PX int mk_gc_which(const mk_gc_comp_t *comps, int K, int v0, int v1, int v2)
{
    int best = 0;
    double bp = 0.0;
    for (int k = 0; k < K; k++) {
        double p = mk_gc_comp_density(&comps[k], v0, v1, v2);
        if (p > bp) {
            best = k;
            bp = p;
        }
    }
    return best;
}

/* The mixture density sum_k coef_k * density_k (OpenCV's GMM::operator()(color)), in component order. */
MK_PX double mk_gc_gmm_density(const mk_gc_comp_t *comps, int K, int v0, int v1, int v2)
{
    double r = 0.0;
    for (int k = 0; k < K; k++)
        r = MK_DADD(r, MK_DMUL(comps[k].coef, mk_gc_comp_density(&comps[k], v0, v1, v2)));
    return r;
}

/* round(v * scale) clamped to +-MK_GC_CAP_MAX; infinities clamp by sign, NaN gives 0. */
MK_PX int32_t mk_gc_quantise(double v, double scale)
{
    double s = MK_DMUL(v, scale);
    if (!(s == s))
        return 0;
    if (s >= (double)MK_GC_CAP_MAX)
        return MK_GC_CAP_MAX;
    if (s <= -(double)MK_GC_CAP_MAX)
        return -MK_GC_CAP_MAX;
    return (int32_t)MK_DROUND(s);
}

/* The T-link pair of a pixel (source, sink) in model units, as OpenCV's constructGCGraph sets them. A zero
 * density gives -log(0) = +inf, which quantises to MK_GC_CAP_MAX. */
MK_PX void mk_gc_tlinks(int label, const mk_gc_comp_t *bgd, const mk_gc_comp_t *fgd, int K, double lambda, int v0,
                        int v1, int v2, double *source, double *sink)
{
    if (label == MK_GC_PR_BGD || label == MK_GC_PR_FGD) {
        *source = -MK_GC_LOG(mk_gc_gmm_density(bgd, K, v0, v1, v2));
        *sink = -MK_GC_LOG(mk_gc_gmm_density(fgd, K, v0, v1, v2));
    } else if (label == MK_GC_BGD) {
        *source = 0.0;
        *sink = lambda;
    } else {
        *source = lambda;
        *sink = 0.0;
    }
}

/* The net terminal capacity of the integer graph: round((source - sink) * scale), clamped. */
MK_PX int32_t mk_gc_term(double source, double sink, double scale)
{
    if (source == sink)
        return 0;
    return mk_gc_quantise(MK_DSUB(source, sink), scale);
}

/* beta from the exact sum of squared colour differences over the `pairs` 8-neighbour pairs (each counted once:
 * E, SE, S, SW), as OpenCV's calcBeta: 1 / (2 * mean), 0 when the mean is <= DBL_EPSILON. */
MK_PX double mk_gc_beta(int64_t sum, int64_t pairs)
{
    double mean = pairs > 0 ? MK_DDIV((double)sum, (double)pairs) : 0.0;
    if (mean <= 2.220446049250313e-16)
        return 0.0;
    return MK_DDIV(1.0, MK_DMUL(2.0, mean));
}

/* The number of 8-neighbour pairs of a w x h grid: 4wh - 3w - 3h + 2. */
MK_PX int64_t mk_gc_pairs(int w, int h)
{
    return 4 * (int64_t)w * h - 3 * (int64_t)w - 3 * (int64_t)h + 2;
}

/* The N-link capacity for a squared colour difference d2: round(gamma / dist * exp(-beta d2) * scale), dist 1 for
 * E and S, sqrt(2) for SE and SW (diag != 0). */
MK_PX int32_t mk_gc_nlink(int64_t d2, double beta, double gamma, int diag, double scale)
{
    double g = diag ? MK_DDIV(gamma, 1.4142135623730951) : gamma;
    return mk_gc_quantise(MK_DMUL(g, MK_GC_EXP(MK_DMUL(-beta, (double)d2))), scale);
}

#endif
