/* test_darknet_conv_px: the FP16 NHWC convolution kernels of kernels/cuda/darknet_cuda_conv.cu emulated on the
 * host — every variant's decomposition into blocks and threads, driven by the kernels' own index math and arithmetic
 * (darknet_cuda_conv_px.h), on shapes with ragged tiles, padding, strides, split-K, residuals and yolo epilogues —
 * against a direct convolution in double precision on the same half-rounded operands. What is not emulated are the
 * device mechanics: cp.async ordering, barriers, and WMMA's fragment layouts (emulated as the 16 x 16 x 16 products
 * they compute, read from the same shared-memory tiles with the same leading dimensions). Runs without a GPU. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
extern "C" {
#include <cmocka.h>
}

#include "darknet_cuda_conv_px.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

namespace {

/* xorshift64*: reproducible operands. */
struct rng_t {
    uint64_t s;
    float uni(float lo, float hi)
    {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        uint64_t v = s * 0x2545F4914F6CDD1DULL;
        return lo + (hi - lo) * (float)((v >> 40) / 16777216.0);
    }
};

/* One convolution and its epilogue. */
struct conv_case {
    dn_cgeom g;
    int depthwise;
    int act, act2;
    int res, yolo, classes;
};

/* Its operands (half, as the kernels read them) and outputs (filled with NaN first, so that a missed output shows). */
struct operands {
    std::vector<__half> in, w, res, out;
    std::vector<float> bias, yolo;
};

const float kScaleXY = 1.05f, kBiasXY = -0.025f;

conv_case make_case(int c, int h, int w, int k, int size, int stride, int pad, int depthwise, int act, int res,
                    int yolo_classes)
{
    conv_case cc;
    int oh = (h + 2 * pad - size) / stride + 1, ow = (w + 2 * pad - size) / stride + 1;
    cc.g = dn_cgeom_make(c, h, w, k, oh, ow, size, stride, pad);
    cc.depthwise = depthwise;
    cc.act = act;
    cc.act2 = MK_ACT_LEAKY;
    cc.res = res;
    cc.yolo = yolo_classes > 0;
    cc.classes = yolo_classes;
    return cc;
}

operands make_operands(const conv_case &cc, uint64_t seed)
{
    const dn_cgeom &g = cc.g;
    rng_t r = {seed * 0x9E3779B97F4A7C15ULL + 1};
    operands t;
    size_t nw = (size_t)g.k * g.size * g.size * (cc.depthwise ? 1 : g.c);
    t.in.resize((size_t)g.h * g.w * g.c);
    t.w.resize(nw);
    t.bias.resize((size_t)g.k);
    for (auto &v : t.in)
        v = __float2half_rn(r.uni(-1.f, 1.f));
    for (auto &v : t.w)
        v = __float2half_rn(r.uni(-1.f, 1.f));
    for (auto &v : t.bias)
        v = r.uni(-1.f, 1.f);
    if (cc.res) {
        t.res.resize((size_t)g.m * g.k);
        for (auto &v : t.res)
            v = __float2half_rn(r.uni(-2.f, 2.f));
    }
    t.out.assign((size_t)g.m * g.k, __float2half_rn(NAN));
    if (cc.yolo)
        t.yolo.assign((size_t)g.m * g.k, NAN);
    return t;
}

dn_epi make_epi(const conv_case &cc, operands &t)
{
    dn_epi e;
    memset(&e, 0, sizeof e);
    e.bias = t.bias.data();
    e.act = cc.act;
    e.act2 = cc.act2;
    e.res = cc.res ? t.res.data() : NULL;
    e.out = t.out.data();
    e.yolo = cc.yolo ? t.yolo.data() : NULL;
    e.classes = cc.classes;
    e.scale_x_y = kScaleXY;
    e.bias_x_y = kBiasXY;
    return e;
}

/* The direct convolution in double over the half operands (weights KRSC), then the epilogue dn_epi documents:
 * NHWC values, or the yolo layer in CHW. */
std::vector<float> reference(const conv_case &cc, const operands &t)
{
    const dn_cgeom &g = cc.g;
    int cg = cc.depthwise ? 1 : g.c;
    std::vector<float> out((size_t)g.m * g.k);
    for (int m = 0; m < g.m; m++) {
        int oy = m / g.ow, ox = m % g.ow;
        for (int n = 0; n < g.k; n++) {
            double s = 0;
            int c0 = cc.depthwise ? n : 0;
            for (int ky = 0; ky < g.size; ky++)
                for (int kx = 0; kx < g.size; kx++) {
                    int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
                    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
                        continue;
                    for (int ci = 0; ci < cg; ci++)
                        s += (double)__half2float(t.w[(((size_t)n * g.size + ky) * g.size + kx) * cg + ci]) *
                             (double)__half2float(t.in[((size_t)iy * g.w + ix) * g.c + c0 + ci]);
                }
            float v = mk_px_activate((float)s + t.bias[n], cc.act);
            if (cc.yolo) {
                out[(size_t)n * g.m + m] = dn_px_yolo_entry(v, n, cc.classes, kScaleXY, kBiasXY);
                continue;
            }
            if (cc.res)
                v = mk_px_activate(v + __half2float(t.res[(size_t)m * g.k + n]), cc.act2);
            out[(size_t)m * g.k + n] = v;
        }
    }
    return out;
}

/* Every output against the reference: within tol * max(1, |ref|), none missing (NaN). */
void check(const char *what, const conv_case &cc, const operands &t, const std::vector<float> &ref, double tol)
{
    double worst = 0;
    size_t n = ref.size(), at = 0;
    for (size_t i = 0; i < n; i++) {
        double v = cc.yolo ? t.yolo[i] : __half2float(t.out[i]), r = ref[i];
        double d = fabs(v - r) / (fabs(r) > 1 ? fabs(r) : 1);
        if (!(d <= worst)) {
            worst = isnan(d) ? INFINITY : d;
            at = i;
        }
    }
    if (!(worst <= tol))
        fail_msg("%s (%dx%dx%d -> %dx%dx%d, %dx%d/%d pad %d%s%s): output %zu is %g, the reference %g (relative "
                 "difference %.3g > %.1g)",
                 what, cc.g.w, cc.g.h, cc.g.c, cc.g.ow, cc.g.oh, cc.g.k, cc.g.size, cc.g.size, cc.g.stride, cc.g.pad,
                 cc.res ? ", residual" : "", cc.yolo ? ", yolo" : "", at,
                 cc.yolo ? t.yolo[at] : __half2float(t.out[at]), ref[at], worst, tol);
}

/* Output of the half kernels: the reference rounded to half is within 2^-11 relative; the float sums differ from
 * the double ones in the last bits. */
const double kTol = 2e-3;

/* 8 halves from src (NULL: zeros), as cp.async with 16 or 0 source bytes. */
void copy8(__half *dst, const __half *src)
{
    for (int i = 0; i < 8; i++)
        dst[i] = src ? src[i] : __float2half_rn(0.f);
}

/* acc[row0 + r][col0 + c] += sum over q < 16 of a[r * lda + q] * b[c * ldb + q], r, c < 16: what
 * wmma::mma_sync computes from a row_major A fragment and a col_major B fragment loaded at a and b. */
void mma16(std::vector<float> &acc, int ld_acc, int row0, int col0, const __half *a, int lda, const __half *b,
           int ldb)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float s = 0;
            for (int q = 0; q < 16; q++)
                s += __half2float(a[r * lda + q]) * __half2float(b[c * ldb + q]);
            acc[(size_t)(row0 + r) * ld_acc + col0 + c] += s;
        }
}

/* ---- the kernels, emulated ------------------------------------------------------------------------------------ */

void emu_small(const conv_case &cc, operands &t)
{
    const dn_cgeom &g = cc.g;
    dn_epi e = make_epi(cc, t);
    std::vector<float> table((size_t)g.kd_n * 8);
    for (int n0 = 0; n0 < g.k; n0 += 8) {
        for (int i = 0; i < g.kd_n * 8; i++) {
            int j = i / g.kd_n, kd = i - j * g.kd_n;
            table[(size_t)kd * 8 + j] = dn_small_w(t.w.data(), g, n0, kd * 8 + j);
        }
        for (int m = 0; m < g.m; m++) {
            float acc[8];
            dn_px_small_conv(t.in.data(), table.data(), g, m, acc);
            dn_epi_store<8>(e, g, m, n0, acc);
        }
    }
}

template <int K, int S, int R>
void emu_dw_krs(const conv_case &cc, operands &t)
{
    const dn_cgeom &g = cc.g;
    dn_epi e = make_epi(cc, t);
    long long items = (long long)(g.c / 2) * ((g.ow + R - 1) / R) * g.oh, threads = 128;
    for (long long i = 0; i < (items + threads - 1) / threads * threads; i++) {
        dn_dw_item it = dn_dw_at(g, R, (int)i);
        if (!it.ok)
            continue;
        float wv[K * K * 2], acc[R][2];
        dn_dw_weights<K>(t.w.data(), it.c0, wv);
        dn_px_dw<K, S, R>(t.in.data(), wv, g, it.c0, it.oy, it.ox0, acc);
        for (int r = 0; r < R; r++)
            if (it.ox0 + r < g.ow)
                dn_epi_store<2>(e, g, it.oy * g.ow + it.ox0 + r, it.c0, acc[r]);
    }
}

template <int K, int S>
void emu_dw_ks(int r, const conv_case &cc, operands &t)
{
    if (r == 1)
        emu_dw_krs<K, S, 1>(cc, t);
    else if (r == 2)
        emu_dw_krs<K, S, 2>(cc, t);
    else
        emu_dw_krs<K, S, 4>(cc, t);
}

/* As dn_conv_dw dispatches. */
void emu_dw(int variant, const conv_case &cc, operands &t)
{
    int r = kDnDwStrips[variant];
    if (cc.g.size == 3)
        cc.g.stride == 1 ? emu_dw_ks<3, 1>(r, cc, t) : emu_dw_ks<3, 2>(r, cc, t);
    else
        cc.g.stride == 1 ? emu_dw_ks<5, 1>(r, cc, t) : emu_dw_ks<5, 2>(r, cc, t);
}

void emu_gemm(const dn_gemm_cfg &cf, int splits, const conv_case &cc, operands &t)
{
    const dn_cgeom &g = cc.g;
    dn_epi e = make_epi(cc, t);
    const int threads = cf.wm * cf.wn * 32, tm = cf.bm / cf.wm, tn = cf.bn / cf.wn, rows_per_pass = threads / 4;
    const int a_chunks = cf.bm * DN_BK / 8 / threads, b_chunks = cf.bn * DN_BK / 8 / threads, ldc = cf.bn + 4;
    const int gx = (g.m + cf.bm - 1) / cf.bm, gy = (g.k + cf.bn - 1) / cf.bn, ktiles = dn_gemm_ktiles(g);
    std::vector<__half> as((size_t)cf.stages * cf.bm * DN_LDS), bs((size_t)cf.stages * cf.bn * DN_LDS);
    std::vector<float> acc, cs((size_t)cf.bm * ldc), ws((size_t)gx * gy * splits * cf.bm * cf.bn);
    for (int by = 0; by < gy; by++)
        for (int bx = 0; bx < gx; bx++)
            for (int z = 0; z < splits; z++) {
                const int m0 = bx * cf.bm, n0 = by * cf.bn, tile = by * gx + bx;
                int kt0, kt1;
                dn_gemm_krange(ktiles, splits, z, &kt0, &kt1);
                assert_true(kt1 > kt0);
                acc.assign((size_t)cf.bm * cf.bn, 0.f);
                for (int it = 0; it < kt1 - kt0; it++) {
                    const int stage = it % cf.stages, kt = kt0 + it;
                    for (int tid = 0; tid < threads; tid++) {
                        const int kc = tid & 3, r0 = tid >> 2;
                        dn_ktap tap = dn_gemm_ktap(g, kt * DN_BK + kc * 8);
                        for (int j = 0; j < a_chunks; j++) {
                            int row = r0 + j * rows_per_pass;
                            long long src = dn_gemm_a_src(g, dn_gemm_arow(g, m0 + row), tap);
                            copy8(&as[((size_t)stage * cf.bm + row) * DN_LDS + kc * 8], src >= 0 ? &t.in[src] : NULL);
                        }
                        for (int j = 0; j < b_chunks; j++) {
                            int row = r0 + j * rows_per_pass;
                            long long src = dn_gemm_b_src(g, n0 + row, kt * DN_BK + kc * 8);
                            copy8(&bs[((size_t)stage * cf.bn + row) * DN_LDS + kc * 8], src >= 0 ? &t.w[src] : NULL);
                        }
                    }
                    for (int warp = 0; warp < cf.wm * cf.wn; warp++) {
                        const int wm = warp % cf.wm, wn = warp / cf.wm;
                        const __half *a = &as[((size_t)stage * cf.bm + wm * tm) * DN_LDS];
                        const __half *b = &bs[((size_t)stage * cf.bn + wn * tn) * DN_LDS];
                        for (int kk = 0; kk < DN_BK; kk += 16)
                            for (int i = 0; i < tm / 16; i++)
                                for (int j = 0; j < tn / 16; j++)
                                    mma16(acc, cf.bn, wm * tm + i * 16, wn * tn + j * 16, a + i * 16 * DN_LDS + kk,
                                          DN_LDS, b + j * 16 * DN_LDS + kk, DN_LDS);
                    }
                }
                for (int q = 0; q < cf.bm * cf.bn; q++)
                    cs[(size_t)(q / cf.bn) * ldc + q % cf.bn] = acc[q];
                if (splits > 1) {
                    float *part = &ws[(size_t)tile * splits * cf.bm * cf.bn];
                    for (int q = 0; q < cf.bm * cf.bn; q++)
                        part[(size_t)z * cf.bm * cf.bn + q] = cs[(size_t)(q / cf.bn) * ldc + q % cf.bn];
                    if (z < splits - 1) /* not the last split to arrive (in this emulation's order) */
                        continue;
                    for (int q = 0; q < cf.bm * cf.bn; q++) {
                        float v = 0.f;
                        for (int zz = 0; zz < splits; zz++)
                            v += part[(size_t)zz * cf.bm * cf.bn + q];
                        cs[(size_t)(q / cf.bn) * ldc + q % cf.bn] = v;
                    }
                }
                for (int q = 0; q < cf.bm * cf.bn / 8; q++) {
                    int row = q / (cf.bn / 8), col = q % (cf.bn / 8) * 8, m = m0 + row, n = n0 + col;
                    if (m < g.m && n < g.k)
                        dn_epi_store<8>(e, g, m, n, &cs[(size_t)row * ldc + col]);
                }
            }
}

/* The depthwise dw (its operands in td) then the pointwise pw (operands and outputs in tp) as one dwpw kernel. */
void emu_dwpw(const dn_dwpw_cfg &cf, const conv_case &dw, const operands &td, const conv_case &pw, operands &tp)
{
    const dn_cgeom &gd = dw.g, &gp = pw.g;
    dn_epi e = make_epi(pw, tp);
    const int c = gd.k, ld = dn_dwpw_ld(c), cpad = ld - 8, tm = cf.tp / cf.wm, tn = cf.bn / cf.wn, ldc = cf.bn + 4;
    std::vector<__half> as((size_t)cf.tp * ld), bs((size_t)cf.bn * ld);
    std::vector<float> acc, cs((size_t)cf.tp * ldc);
    for (int by = 0; by < (gp.k + cf.bn - 1) / cf.bn; by++)
        for (int bx = 0; bx < (gp.m + cf.tp - 1) / cf.tp; bx++) {
            const int p0 = bx * cf.tp, n0 = by * cf.bn, row_chunks = cpad / 8, pairs = cpad / 2;
            for (int q = 0; q < cf.bn * row_chunks; q++) {
                int row = q / row_chunks, col = (q - row * row_chunks) * 8;
                copy8(&bs[(size_t)row * ld + col],
                      n0 + row < gp.k && col < c ? &tp.w[(size_t)(n0 + row) * c + col] : NULL);
            }
            for (int q = 0; q < cf.tp * pairs; q++) {
                int p = q / pairs, c0 = (q - p * pairs) * 2, m = p0 + p;
                float v[2] = {0.f, 0.f};
                if (m < gd.m && c0 < c) {
                    if (gd.size == 3)
                        gd.stride == 1 ? dn_px_dw1<3, 1>(td.in.data(), td.w.data(), gd, m, c0, v)
                                       : dn_px_dw1<3, 2>(td.in.data(), td.w.data(), gd, m, c0, v);
                    else
                        gd.stride == 1 ? dn_px_dw1<5, 1>(td.in.data(), td.w.data(), gd, m, c0, v)
                                       : dn_px_dw1<5, 2>(td.in.data(), td.w.data(), gd, m, c0, v);
                    v[0] = mk_px_activate(v[0] + td.bias[c0], dw.act);
                    v[1] = mk_px_activate(v[1] + td.bias[c0 + 1], dw.act);
                }
                dn_st_h<2>(&as[(size_t)p * ld + c0], v);
            }
            acc.assign((size_t)cf.tp * cf.bn, 0.f);
            for (int warp = 0; warp < cf.wm * cf.wn; warp++) {
                const int wm = warp % cf.wm, wn = warp / cf.wm;
                const __half *a = &as[(size_t)wm * tm * ld], *b = &bs[(size_t)wn * tn * ld];
                for (int k = 0; k < cpad; k += 16)
                    for (int i = 0; i < tm / 16; i++)
                        for (int j = 0; j < tn / 16; j++)
                            mma16(acc, cf.bn, wm * tm + i * 16, wn * tn + j * 16, a + (size_t)i * 16 * ld + k, ld,
                                  b + (size_t)j * 16 * ld + k, ld);
            }
            for (int q = 0; q < cf.tp * cf.bn; q++)
                cs[(size_t)(q / cf.bn) * ldc + q % cf.bn] = acc[q];
            for (int q = 0; q < cf.tp * cf.bn / 8; q++) {
                int row = q / (cf.bn / 8), col = q % (cf.bn / 8) * 8, m = p0 + row, n = n0 + col;
                if (m < gp.m && n < gp.k)
                    dn_epi_store<8>(e, gp, m, n, &cs[(size_t)row * ldc + col]);
            }
        }
}

/* ---- the cases -------------------------------------------------------------------------------------------------- */

/* Groups = 1 convolutions whose c is a multiple of 8 (gemm and small): tails in M, N and kd, strides, padding, the
 * epilogue's three forms, k not a multiple of 8 (scalar stores). */
std::vector<conv_case> gemm_cases()
{
    return {
        make_case(16, 5, 7, 24, 1, 1, 0, 0, MK_ACT_LEAKY, 1, 0),    /* 1x1, M = 35, residual */
        make_case(40, 11, 9, 56, 3, 1, 1, 0, MK_ACT_LEAKY, 0, 0),   /* kd = 360: a partial k tile */
        make_case(8, 13, 13, 16, 3, 2, 1, 0, MK_ACT_MISH, 0, 0),    /* stride 2 */
        make_case(24, 6, 8, 8, 5, 1, 2, 0, MK_ACT_LINEAR, 1, 0),    /* 5x5 */
        make_case(32, 7, 6, 12, 1, 1, 0, 0, MK_ACT_LOGISTIC, 1, 0), /* k = 12: scalar stores */
        make_case(48, 5, 5, 18, 1, 1, 0, 0, MK_ACT_LINEAR, 0, 1),   /* yolo, 3 x (5 + 1) */
        make_case(64, 9, 9, 160, 3, 1, 1, 0, MK_ACT_LEAKY, 0, 0),   /* N over several tiles, 18 k tiles */
    };
}

void test_gemm(void **state)
{
    (void)state;
    std::vector<conv_case> cases = gemm_cases();
    for (size_t i = 0; i < cases.size(); i++) {
        const conv_case &cc = cases[i];
        operands base = make_operands(cc, i + 1);
        std::vector<float> ref = reference(cc, base);
        int kt = dn_gemm_ktiles(cc.g);
        for (int v = 0; v < kDnGemmCount; v++)
            for (int splits : {1, 2, 3, kt}) {
                if (splits > kt)
                    continue;
                char what[64];
                snprintf(what, sizeof what, "%s split %d", kDnGemm[v].name, splits);
                operands t = base;
                emu_gemm(kDnGemm[v], splits, cc, t);
                check(what, cc, t, ref, kTol);
            }
    }
}

void test_small(void **state)
{
    (void)state;
    std::vector<conv_case> cases = gemm_cases();
    cases.push_back(make_case(3, 17, 15, 8, 3, 2, 1, 0, MK_ACT_LEAKY, 0, 0));  /* the first layer: c = 3 */
    cases.push_back(make_case(8, 9, 9, 4, 1, 1, 0, 0, MK_ACT_LINEAR, 1, 0));   /* k = 4 */
    cases.push_back(make_case(4, 10, 6, 24, 1, 1, 0, 0, MK_ACT_LEAKY, 0, 0));  /* c = 4 */
    cases.push_back(make_case(5, 7, 7, 21, 3, 1, 1, 0, MK_ACT_LINEAR, 0, 2)); /* odd c, yolo 3 x (5 + 2) */
    for (size_t i = 0; i < cases.size(); i++) {
        const conv_case &cc = cases[i];
        operands t = make_operands(cc, 100 + i);
        std::vector<float> ref = reference(cc, t);
        emu_small(cc, t);
        check("small", cc, t, ref, kTol);
    }
}

void test_dw(void **state)
{
    (void)state;
    const conv_case cases[] = {
        make_case(24, 9, 10, 24, 3, 1, 1, 1, MK_ACT_LEAKY, 0, 0),
        make_case(16, 9, 9, 16, 3, 2, 1, 1, MK_ACT_LEAKY, 1, 0),
        make_case(10, 6, 7, 10, 5, 1, 2, 1, MK_ACT_LINEAR, 0, 0),
        make_case(12, 11, 9, 12, 5, 2, 2, 1, MK_ACT_LEAKY, 0, 0),
        make_case(8, 5, 13, 8, 3, 1, 1, 1, MK_ACT_RELU, 1, 0),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case &cc = cases[i];
        operands base = make_operands(cc, 200 + i);
        std::vector<float> ref = reference(cc, base);
        for (int v = 0; v < kDnDwCount; v++) {
            char what[32];
            snprintf(what, sizeof what, "dw%d", kDnDwStrips[v]);
            operands t = base;
            emu_dw(v, cc, t);
            check(what, cc, t, ref, kTol);
        }
    }
}

void test_dwpw(void **state)
{
    (void)state;
    /* {depthwise, pointwise} pairs: the pointwise one reads the depthwise output. */
    struct {
        conv_case dw;
        int k, act, res;
    } pairs[] = {
        {make_case(40, 7, 9, 40, 3, 1, 1, 1, MK_ACT_LEAKY, 0, 0), 24, MK_ACT_LINEAR, 1},
        {make_case(16, 6, 6, 16, 5, 1, 2, 1, MK_ACT_LEAKY, 0, 0), 40, MK_ACT_LEAKY, 0},
        {make_case(24, 9, 11, 24, 3, 2, 1, 1, MK_ACT_LINEAR, 0, 0), 16, MK_ACT_LEAKY, 1},
        {make_case(136, 4, 5, 136, 3, 1, 1, 1, MK_ACT_LEAKY, 0, 0), 24, MK_ACT_LINEAR, 1},
        {make_case(32, 7, 7, 32, 5, 2, 2, 1, MK_ACT_LEAKY, 0, 0), 48, MK_ACT_LEAKY, 0},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const conv_case &dw = pairs[i].dw;
        operands td = make_operands(dw, 300 + i);
        std::vector<float> mid = reference(dw, td);
        conv_case pw = make_case(dw.g.k, dw.g.oh, dw.g.ow, pairs[i].k, 1, 1, 0, 0, pairs[i].act, pairs[i].res, 0);
        operands base = make_operands(pw, 400 + i);
        /* The pointwise reference reads the depthwise output as the unfused pass stores it: in half. */
        for (size_t j = 0; j < mid.size(); j++)
            base.in[j] = __float2half_rn(mid[j]);
        std::vector<float> ref = reference(pw, base);
        for (int v = 0; v < kDnDwpwCount; v++) {
            operands t = base;
            emu_dwpw(kDnDwpw[v], dw, td, pw, t);
            check(kDnDwpw[v].name, pw, t, ref, kTol);
        }
    }
}

/* The split ranges tile [0, ktiles) in order, none empty. */
void test_krange(void **state)
{
    (void)state;
    for (int kt = 1; kt < 300; kt++)
        for (int s = 1; s <= kt && s <= 64; s++) {
            int next = 0;
            for (int z = 0; z < s; z++) {
                int a, b;
                dn_gemm_krange(kt, s, z, &a, &b);
                assert_int_equal(a, next);
                assert_true(b > a);
                next = b;
            }
            assert_int_equal(next, kt);
        }
}

/* A route that computes the maxpool and upsample layers it alone reads (darknet_cuda_px.h, dn_src) gives the same
 * bits as those layers' own kernels followed by a plain concatenation, in both layouts: an SPP block (stride-1
 * pools of 5 and 3 of X, X itself) and an upsampled input next to a channel slice and a stride-2 pool. */
void test_route_sources(void **state)
{
    (void)state;
    const int c = 6, h = 5, w = 7;
    rng_t r = {99};
    std::vector<__half> x((size_t)c * h * w), y((size_t)c * 3 * 4), z((size_t)c * 6 * 8), q((size_t)c * 12 * 16);
    for (std::vector<__half> *t : {&x, &y, &z, &q})
        for (auto &v : *t)
            v = __float2half_rn(r.uni(-3.f, 3.f));
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        /* SPP: [maxpool 5/1 pad 4, maxpool 3/1 pad 2, X] */
        std::vector<__half> p5(x.size()), p3(x.size()), spp(3 * x.size()), ref(3 * x.size());
        for (int i = 0; i < c * h * w; i++) {
            dn_px_maxpool(i, x.data(), p5.data(), c, h, w, h, w, 5, 1, 4, nhwc);
            dn_px_maxpool(i, x.data(), p3.data(), c, h, w, h, w, 3, 1, 2, nhwc);
        }
        dn_src spp_in[3] = {{x.data(), c, h, w, 0, c, DN_SRC_MAXPOOL, 5, 1, 4, 1.f},
                            {x.data(), c, h, w, 0, c, DN_SRC_MAXPOOL, 3, 1, 2, 1.f},
                            {x.data(), c, h, w, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f}};
        dn_src spp_ref[3] = {{p5.data(), c, h, w, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f},
                             {p3.data(), c, h, w, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f},
                             {x.data(), c, h, w, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f}};
        for (int i = 0; i < 3 * c * h * w; i++) {
            dn_px_route(i, 3, spp_in, spp.data(), 3 * c, h, w, nhwc);
            dn_px_route(i, 3, spp_ref, ref.data(), 3 * c, h, w, nhwc);
        }
        assert_memory_equal(spp.data(), ref.data(), spp.size() * sizeof(__half));
        /* [Y (3 x 4) upsampled by 2 times 0.5, channels 3..5 of Z (6 x 8), maxpool 2/2 (padding 1) of Q (12 x 16)] */
        std::vector<__half> up((size_t)c * 6 * 8), pq((size_t)c * 6 * 8), cat((size_t)(2 * c + c / 2) * 6 * 8),
            cref(cat.size());
        for (int i = 0; i < c * 6 * 8; i++) {
            dn_px_upsample(i, y.data(), up.data(), c, 3, 4, 2, 0.5f, nhwc);
            dn_px_maxpool(i, q.data(), pq.data(), c, 12, 16, 6, 8, 2, 2, 1, nhwc);
        }
        dn_src cat_in[3] = {{y.data(), c, 3, 4, 0, c, DN_SRC_UPSAMPLE, 0, 2, 0, 0.5f},
                            {z.data(), c, 6, 8, c / 2, c / 2, DN_SRC_COPY, 0, 0, 0, 1.f},
                            {q.data(), c, 12, 16, 0, c, DN_SRC_MAXPOOL, 2, 2, 1, 1.f}};
        dn_src cat_ref[3] = {{up.data(), c, 6, 8, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f},
                             {z.data(), c, 6, 8, c / 2, c / 2, DN_SRC_COPY, 0, 0, 0, 1.f},
                             {pq.data(), c, 6, 8, 0, c, DN_SRC_COPY, 0, 0, 0, 1.f}};
        for (int i = 0; i < (int)cat.size(); i++) {
            dn_px_route(i, 3, cat_in, cat.data(), 2 * c + c / 2, 6, 8, nhwc);
            dn_px_route(i, 3, cat_ref, cref.data(), 2 * c + c / 2, 6, 8, nhwc);
        }
        assert_memory_equal(cat.data(), cref.data(), cat.size() * sizeof(__half));
        /* and the fused forms differ from a wrong one: the pools' windows matter */
        assert_memory_not_equal(p5.data(), p3.data(), p5.size() * sizeof(__half));
    }
}

/* The emulation itself must notice a broken kernel: a gemm whose A rows are off by one pixel fails the check. */
void test_check_bites(void **state)
{
    (void)state;
    conv_case cc = make_case(16, 5, 7, 24, 3, 1, 1, 0, MK_ACT_LEAKY, 0, 0);
    operands t = make_operands(cc, 7);
    std::vector<float> ref = reference(cc, t);
    conv_case off = cc;
    off.g.pad = 0; /* every window shifted by one pixel */
    emu_gemm(kDnGemm[0], 1, off, t);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs(__half2float(t.out[i]) - ref[i]) / (fabs(ref[i]) > 1 ? fabs(ref[i]) : 1);
        worst = d > worst ? d : worst;
    }
    assert_true(worst > 10 * kTol);
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),  cmocka_unit_test(test_small),  cmocka_unit_test(test_dw),
        cmocka_unit_test(test_dwpw),  cmocka_unit_test(test_krange), cmocka_unit_test(test_route_sources),
        cmocka_unit_test(test_check_bites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
