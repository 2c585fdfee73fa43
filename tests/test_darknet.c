/* test_darknet: the network loader and the CPU forward pass — small layers against values worked out by hand or
 * by a direct loop written here, batch-norm folding against the unfolded formula, corrupt weights and cfgs, the
 * yolo outputs against Darknet's reference outputs, and the large stock cfgs with random weights. */
#include "testutil.h"

#include "darknet_internal.h"
#include "imageio.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------------------------- */

/* A weights file being written in memory. */
typedef struct {
    unsigned char *p;
    size_t len;
} wbuf_t;

static void wb_put(wbuf_t *b, const void *v, size_t n)
{
    b->p = realloc(b->p, b->len + n);
    assert_non_null(b->p);
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

/* Header with `seen_bytes` (4 or 8) of seen. */
static void wb_header(wbuf_t *b, int32_t major, int32_t minor, int seen_bytes)
{
    int32_t v[3] = {major, minor, 0};
    uint64_t seen = 12345;
    wb_put(b, v, sizeof v);
    wb_put(b, &seen, (size_t)seen_bytes);
}

static void wb_floats(wbuf_t *b, const float *v, size_t n)
{
    wb_put(b, v, n * sizeof(float));
}

static void wb_free(wbuf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = 0;
}

static int load(const char *cfg, const wbuf_t *w, const mk_net_opts_t *opts, mk_net_t **net)
{
    mk_err_clear();
    return mk_net_load_mem(tu_cpu, cfg, strlen(cfg), "t.cfg", w ? w->p : NULL, w ? w->len : 0, "t.weights", opts,
                           net);
}

static mk_net_t *load_ok(const char *cfg, const wbuf_t *w)
{
    mk_net_t *net = NULL;
    TU_OK(load(cfg, w, NULL, &net));
    return net;
}

/* Fails unless loading gives `code` with `fragment` in the message. */
static void load_fails(const char *cfg, const wbuf_t *w, int code, const char *fragment)
{
    mk_net_t *net = NULL;
    int rc = load(cfg, w, NULL, &net);
    if (rc != code)
        fail_msg("expected %s, got %s (%s)", mk_err_name(code), mk_err_name(rc), mk_err_msg());
    if (!strstr(mk_err_msg(), fragment))
        fail_msg("message '%s' lacks '%s'", mk_err_msg(), fragment);
    assert_null(net);
}

/* Runs the network on a contiguous CHW host tensor. */
static void forward(mk_net_t *net, const float *chw)
{
    mk_image_t in = mk_net_input_desc(net);
    in.pitch = (size_t)in.width * sizeof(float);
    in.mem = MK_MEM_HOST;
    in.data = (void *)chw;
    TU_OK(mk_net_forward(net, &in));
}

static const float *out_of(const mk_net_t *net, int layer)
{
    return net->layers[layer].output;
}

static float frand(tu_rng_t *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)(tu_rand(r) >> 40) / 16777216.0f;
}

static void fill(tu_rng_t *r, float *v, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        v[i] = frand(r, lo, hi);
}

static void assert_close(const float *got, const double *want, size_t n, double tol, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            fail_msg("%s: element %zu: got %.9g, want %.9g (tolerance %g)", what, i, got[i], want[i], tol);
}

/* ---- maxpool ----------------------------------------------------------------------------------------------- */

/* size 2 stride 1: Darknet pads by size-1 = 1 at the right/bottom only (offset -1/2 = 0), and skips the missing
 * inputs (an all-negative image shows they are not taken as 0). */
static void test_maxpool_stride1(void **state)
{
    (void)state;
    const char *cfg = "[net]\nwidth=3\nheight=3\nchannels=1\n[maxpool]\nsize=2\nstride=1\n";
    mk_net_t *net = load_ok(cfg, NULL);
    assert_int_equal(net->layers[0].out_w, 3);
    assert_int_equal(net->layers[0].out_h, 3);
    const float in[9] = {1, 5, 2, 4, 3, 9, 0, 8, 6};
    const double want[9] = {5, 9, 9, 8, 9, 9, 8, 8, 6};
    forward(net, in);
    assert_close(out_of(net, 0), want, 9, 0, "maxpool 2/1");
    const float neg[9] = {-1, -5, -2, -4, -3, -9, -7, -8, -6};
    const double wneg[9] = {-1, -2, -2, -3, -3, -6, -7, -6, -6};
    forward(net, neg);
    assert_close(out_of(net, 0), wneg, 9, 0, "maxpool 2/1 negative");
    mk_net_destroy(net);
}

/* size 3: padding size-1 = 2, windows start one pixel before (offset -2/2). */
static void test_maxpool_size3(void **state)
{
    (void)state;
    const float in[16] = {3, 12, 1, 7, 10, 0, 14, 2, 5, 9, 4, 15, 13, 6, 11, 8};
    mk_net_t *net = load_ok("[net]\nwidth=4\nheight=4\nchannels=1\n[maxpool]\nsize=3\nstride=2\n", NULL);
    assert_int_equal(net->layers[0].out_w, 2); /* (4 + 2 - 3) / 2 + 1 */
    forward(net, in);
    const double want2[4] = {12, 14, 13, 15};
    assert_close(out_of(net, 0), want2, 4, 0, "maxpool 3/2");
    mk_net_destroy(net);

    net = load_ok("[net]\nwidth=4\nheight=4\nchannels=1\n[maxpool]\nsize=3\nstride=1\n", NULL);
    assert_int_equal(net->layers[0].out_w, 4);
    forward(net, in);
    const float *o = out_of(net, 0);
    assert_true(o[0] == 12 && o[5] == 14 && o[3] == 14 && o[12] == 13 && o[15] == 15);
    mk_net_destroy(net);
}

/* ---- route, shortcut, upsample, dropout ------------------------------------------------------------------ */

static void test_route(void **state)
{
    (void)state;
    /* Layer 0 copies the input (maxpool 1/1), 4 channels of 2x1, value 10 c + x. */
    const char *cfg = "[net]\nwidth=2\nheight=1\nchannels=4\n"
                      "[maxpool]\nsize=1\nstride=1\n"                 /* 0 */
                      "[route]\nlayers=-1\ngroups=2\ngroup_id=1\n"    /* 1: channels 2, 3 */
                      "[route]\nlayers=0,1\ngroups=2\ngroup_id=0\n"   /* 2: 0, 1 of layer 0, then 2 of layer 1 */
                      "[dropout]\nprobability=.5\n"                   /* 3 */
                      "[route]\nlayers=-1,1\n";                       /* 4: the dropout is layer 2 */
    mk_net_t *net = load_ok(cfg, NULL);
    const float in[8] = {0, 1, 10, 11, 20, 21, 30, 31};
    forward(net, in);
    const double w1[4] = {20, 21, 30, 31}, w2[6] = {0, 1, 10, 11, 20, 21};
    const double w4[10] = {0, 1, 10, 11, 20, 21, 20, 21, 30, 31};
    assert_int_equal(net->layers[1].out_c, 2);
    assert_close(out_of(net, 1), w1, 4, 0, "route group 1 of 2");
    assert_int_equal(net->layers[2].out_c, 3);
    assert_close(out_of(net, 2), w2, 6, 0, "route of two, group 0 of 2");
    assert_int_equal(net->layers[4].route.layers[0], 2);
    assert_int_equal(net->layers[4].out_c, 5);
    assert_close(out_of(net, 4), w4, 10, 0, "route through a dropout");
    assert_null(net->layers[3].output);
    mk_net_destroy(net);

    /* A dropout right after the input: what names it reads the network input itself. */
    net = load_ok("[net]\nwidth=2\nheight=1\nchannels=1\n[dropout]\n[shortcut]\nfrom=-1\n[route]\nlayers=-2\n",
                  NULL);
    assert_int_equal(net->layers[1].input, -1);
    assert_int_equal(net->layers[1].shortcut.from, -1);
    assert_int_equal(net->layers[2].route.layers[0], -1);
    const float two[2] = {1.5f, -4};
    const double w_sc[2] = {3, -8}, w_rt[2] = {1.5, -4};
    forward(net, two);
    assert_close(out_of(net, 1), w_sc, 2, 0, "shortcut of the input with itself");
    assert_close(out_of(net, 2), w_rt, 2, 0, "route of the input");
    mk_net_destroy(net);
}

/* Layer 1 = 2 * input + bias (a 1x1 convolution), then leaky(layer 1 + input). */
static void test_shortcut(void **state)
{
    (void)state;
    const char *cfg = "[net]\nwidth=2\nheight=2\nchannels=2\n"
                      "[maxpool]\nsize=1\nstride=1\n"
                      "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n"
                      "[shortcut]\nfrom=-2\nactivation=leaky\n";
    wbuf_t w = {0};
    const float biases[2] = {0.5f, -1.0f}, weights[4] = {2, 0, 0, 2};
    wb_header(&w, 0, 2, 8);
    wb_floats(&w, biases, 2);
    wb_floats(&w, weights, 4);
    mk_net_t *net = load_ok(cfg, &w);
    const float in[8] = {1, -1, 0.25f, -2, 3, 0.5f, -0.5f, 0};
    forward(net, in);
    double want[8];
    for (int i = 0; i < 8; i++) {
        double v = 3.0 * in[i] + biases[i / 4];
        want[i] = v > 0 ? v : 0.1 * v;
    }
    assert_close(out_of(net, 2), want, 8, 1e-6, "shortcut");
    mk_net_destroy(net);
    wb_free(&w);
}

static void test_upsample(void **state)
{
    (void)state;
    mk_net_t *net = load_ok("[net]\nwidth=2\nheight=2\nchannels=1\n[upsample]\nstride=2\n"
                            "[upsample]\nstride=3\nscale=0.5\n", NULL);
    const float in[4] = {1, 2, 3, 4};
    forward(net, in);
    const double w[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    assert_int_equal(net->layers[0].out_w, 4);
    assert_close(out_of(net, 0), w, 16, 0, "upsample 2");
    const float *o = out_of(net, 1);
    assert_int_equal(net->layers[1].out_w, 12);
    assert_true(o[0] == 0.5f && o[11] == 1.0f && o[12 * 11] == 1.5f && o[12 * 12 - 1] == 2.0f && o[2 * 12 + 3] == 0.5f);
    mk_net_destroy(net);
}

/* ---- convolution ----------------------------------------------------------------------------------------- */

/* The definition, looped directly, in double. */
static void conv_direct(const float *in, int c, int h, int w, const float *wt, const float *bias, int filters,
                        int size, int stride, int pad, int groups, int oh, int ow, double *out)
{
    int cg = c / groups, fg = filters / groups;
    for (int f = 0; f < filters; f++) {
        int g = f / fg;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                double s = bias[f];
                for (int ci = 0; ci < cg; ci++)
                    for (int ky = 0; ky < size; ky++)
                        for (int kx = 0; kx < size; kx++) {
                            int iy = y * stride - pad + ky, ix = x * stride - pad + kx;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                                continue;
                            s += (double)wt[((f * cg + ci) * size + ky) * size + kx] *
                                 in[((g * cg + ci) * h + iy) * w + ix];
                        }
                out[(f * oh + y) * ow + x] = s;
            }
    }
}

static void conv_case(int c, int h, int w, int filters, int size, int stride, int pad, int groups, uint64_t seed)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "[net]\nwidth=%d\nheight=%d\nchannels=%d\n[convolutional]\nfilters=%d\nsize=%d\n"
             "stride=%d\npadding=%d\ngroups=%d\nactivation=linear\n", w, h, c, filters, size, stride, pad, groups);
    tu_rng_t r = {seed};
    size_t nw = (size_t)filters * (c / groups) * size * size, nin = (size_t)c * h * w;
    float *wt = malloc(nw * sizeof(float)), *bias = malloc((size_t)filters * sizeof(float));
    float *in = malloc(nin * sizeof(float));
    fill(&r, wt, nw, -1, 1);
    fill(&r, bias, (size_t)filters, -1, 1);
    fill(&r, in, nin, -1, 1);
    wbuf_t wb = {0};
    wb_header(&wb, 0, 2, 8);
    wb_floats(&wb, bias, (size_t)filters);
    wb_floats(&wb, wt, nw);
    mk_net_t *net = load_ok(cfg, &wb);
    const mk_layer_t *l = &net->layers[0];
    int oh = (h + 2 * pad - size) / stride + 1, ow = (w + 2 * pad - size) / stride + 1;
    assert_int_equal(l->out_h, oh);
    assert_int_equal(l->out_w, ow);
    double *want = malloc((size_t)filters * oh * ow * sizeof(double));
    conv_direct(in, c, h, w, wt, bias, filters, size, stride, pad, groups, oh, ow, want);
    forward(net, in);
    char what[128];
    snprintf(what, sizeof what, "conv c%d %dx%d f%d k%d s%d p%d g%d", c, w, h, filters, size, stride, pad, groups);
    /* float sums of up to c/groups * size^2 products of magnitude <= 1 */
    assert_close(out_of(net, 0), want, (size_t)filters * oh * ow, 1e-6 * (c / groups) * size * size, what);
    mk_net_destroy(net);
    wb_free(&wb);
    free(want);
    free(in);
    free(bias);
    free(wt);
}

/* Plain, grouped, depthwise, strided, 1x1 (the no-im2col path); sizes that cross the GEMM's blocks (more output
 * pixels than one column block, a reduction longer than one k block, filter counts off the 4-row tile). */
static void test_conv(void **state)
{
    (void)state;
    conv_case(3, 7, 6, 5, 3, 1, 1, 1, 1);
    conv_case(4, 5, 5, 6, 3, 2, 1, 2, 2);     /* grouped */
    conv_case(8, 9, 7, 8, 3, 1, 1, 8, 3);     /* depthwise */
    conv_case(6, 6, 6, 9, 5, 2, 2, 3, 4);     /* grouped 5x5 stride 2 */
    conv_case(16, 17, 20, 6, 3, 1, 1, 1, 5);  /* 340 pixels (256 + 84), k = 144 (128 + 16), 6 filters (4 + 2) */
    conv_case(5, 11, 13, 7, 1, 1, 0, 1, 6);   /* 1x1 */
    conv_case(3, 8, 8, 2, 2, 2, 0, 1, 7);     /* even kernel, no padding */
    conv_case(2, 3, 3, 3, 5, 1, 2, 1, 8);     /* kernel larger than the (padded) input */
}

/* Batch norm folded at load against the unfolded formula scale * (conv - mean) / sqrt(var + 1e-5) + bias. A
 * variance as small as the epsilon makes the epsilon itself matter. */
static void test_bn_fold(void **state)
{
    (void)state;
    const int c = 2, h = 4, w = 5, f = 3, k = 3;
    const char *cfg = "[net]\nwidth=5\nheight=4\nchannels=2\n[convolutional]\nbatch_normalize=1\nfilters=3\n"
                      "size=3\nstride=1\npad=1\nactivation=leaky\n";
    tu_rng_t r = {99};
    float bias[3] = {0.1f, -0.2f, 0.3f}, scale[3] = {1.5f, 0.7f, -0.4f}, mean[3] = {0.2f, -0.3f, 0.05f};
    float var[3] = {0.5f, 0.01f, 1e-5f}, wt[3 * 2 * 9], in[2 * 4 * 5];
    fill(&r, wt, sizeof wt / sizeof wt[0], -1, 1);
    fill(&r, in, sizeof in / sizeof in[0], -1, 1);
    wbuf_t wb = {0};
    wb_header(&wb, 0, 2, 8);
    wb_floats(&wb, bias, 3);
    wb_floats(&wb, scale, 3);
    wb_floats(&wb, mean, 3);
    wb_floats(&wb, var, 3);
    wb_floats(&wb, wt, sizeof wt / sizeof wt[0]);
    mk_net_t *net = load_ok(cfg, &wb);
    forward(net, in);
    const float zero[3] = {0, 0, 0};
    double conv[3 * 4 * 5], want[3 * 4 * 5];
    conv_direct(in, c, h, w, wt, zero, f, k, 1, 1, 1, h, w, conv);
    for (int i = 0; i < f * h * w; i++) {
        int q = i / (h * w);
        double v = scale[q] * (conv[i] - mean[q]) / sqrt((double)var[q] + 1e-5) + bias[q];
        want[i] = v > 0 ? v : 0.1 * v;
    }
    /* outputs up to ~1e3 (scale / sqrt(2e-5)): relative float rounding */
    for (int i = 0; i < f * h * w; i++)
        if (fabs(out_of(net, 0)[i] - want[i]) > 1e-5 * (1 + fabs(want[i])))
            fail_msg("bn fold: element %d: got %.9g want %.9g", i, out_of(net, 0)[i], want[i]);
    mk_net_destroy(net);
    wb_free(&wb);
}

/* ---- activations and the yolo layer ---------------------------------------------------------------------- */

static double mish_ref(double x)
{
    return x * tanh(x > 20 ? x : log1p(exp(x)));
}

/* A 1x1 identity convolution with each activation, on values across the softplus thresholds (+-20). */
static void test_activations(void **state)
{
    (void)state;
    const float xs[] = {-30, -20.5f, -20, -19.5f, -5, -1, -0.3f, -1e-3f, 0, 1e-3f, 0.3f, 1, 2.5f, 5, 19.5f, 20,
                        20.5f, 30};
    const int n = (int)(sizeof xs / sizeof xs[0]);
    const char *names[] = {"linear", "leaky", "mish", "logistic", "relu"};
    for (int a = 0; a < 5; a++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg, "[net]\nwidth=%d\nheight=1\nchannels=1\n[convolutional]\nfilters=1\nsize=1\n"
                 "activation=%s\n", n, names[a]);
        wbuf_t wb = {0};
        const float one = 1, zero = 0;
        wb_header(&wb, 0, 2, 8);
        wb_floats(&wb, &zero, 1);
        wb_floats(&wb, &one, 1);
        mk_net_t *net = load_ok(cfg, &wb);
        forward(net, xs);
        double want[32];
        for (int i = 0; i < n; i++) {
            double x = xs[i];
            switch (a) {
            case 0: want[i] = x; break;
            case 1: want[i] = x > 0 ? x : 0.1 * x; break;
            case 2: want[i] = mish_ref(x); break;
            case 3: want[i] = 1 / (1 + exp(-x)); break;
            default: want[i] = x > 0 ? x : 0; break;
            }
        }
        const float *o = out_of(net, 0);
        for (int i = 0; i < n; i++)
            if (fabs(o[i] - want[i]) > 1e-6 + 2e-6 * fabs(want[i]))
                fail_msg("%s(%g): got %.9g want %.9g", names[a], xs[i], o[i], want[i]);
        mk_net_destroy(net);
        wb_free(&wb);
    }
}

static double logistic(double x)
{
    return 1 / (1 + exp(-x));
}

/* x, y: logistic then scale_x_y; w, h raw; objectness and classes logistic. The metadata: mask's anchors. */
static void test_yolo_layer(void **state)
{
    (void)state;
    const int classes = 2, n = 2, w = 3, h = 2, planes = n * (5 + classes);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "[net]\nwidth=%d\nheight=%d\nchannels=%d\n[maxpool]\nsize=1\nstride=1\n"
             "[yolo]\nmask=2,0\nanchors=1,2, 3,4, 5,6\nclasses=%d\nnum=3\nscale_x_y=1.2\n", w, h, planes, classes);
    mk_net_t *net = load_ok(cfg, NULL);
    mk_yolo_layer_t y;
    assert_int_equal(mk_net_yolo_count(net), 1);
    TU_OK(mk_net_yolo_output(net, 0, &y));
    assert_null(y.data);
    assert_int_equal(y.w, w);
    assert_int_equal(y.h, h);
    assert_int_equal(y.n, n);
    assert_int_equal(y.classes, classes);
    assert_int_equal(y.net_w, w);
    assert_int_equal(y.net_h, h);
    assert_true(y.anchors[0] == 5 && y.anchors[1] == 6 && y.anchors[2] == 1 && y.anchors[3] == 2);
    assert_true(y.scale_x_y == 1.2f);
    assert_int_equal(mk_net_yolo_output(net, 1, &y), MK_ERANGE);

    tu_rng_t r = {7};
    float in[14 * 6];
    fill(&r, in, (size_t)planes * w * h, -4, 4);
    forward(net, in);
    TU_OK(mk_net_yolo_output(net, 0, &y));
    assert_ptr_equal(y.data, out_of(net, 1));
    double want[14 * 6];
    for (int p = 0; p < planes; p++) {
        int e = p % (5 + classes);
        for (int i = 0; i < w * h; i++) {
            double v = in[p * w * h + i];
            want[p * w * h + i] = e < 2 ? logistic(v) * 1.2 - 0.1 : e < 4 ? v : logistic(v);
        }
    }
    assert_close(y.data, want, (size_t)planes * w * h, 1e-6, "yolo layer");
    float copy[14 * 6];
    assert_int_equal(mk_net_yolo_read(net, 0, copy, 10), MK_EINVAL);
    TU_OK(mk_net_yolo_read(net, 0, copy, (size_t)planes * w * h));
    assert_memory_equal(copy, y.data, sizeof copy);
    mk_net_destroy(net);
}

/* ---- loader errors --------------------------------------------------------------------------------------- */

#define TINY_CFG "[net]\nwidth=4\nheight=4\nchannels=1\n[convolutional]\nfilters=2\nsize=1\nactivation=linear\n"

/* The header's `seen` width follows the version; sizes must match to the byte. */
static void test_weights_header(void **state)
{
    (void)state;
    const float v[4] = {0.5f, -0.5f, 2, 3}; /* biases[2], weights[2] */
    const struct {
        int major, minor, seen_bytes, ok;
    } cases[] = {
        {0, 2, 8, 1}, {0, 1, 4, 1}, {1, 0, 8, 1}, {0, 0, 4, 1},
        {1000, 2, 4, 1}, /* the transposed-weights marker: seen is 32 bits */
        {0, 2, 4, 0}, {0, 1, 8, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf_t w = {0};
        mk_net_t *net = NULL;
        wb_header(&w, cases[i].major, cases[i].minor, cases[i].seen_bytes);
        wb_floats(&w, v, 4);
        int rc = load(TINY_CFG, &w, NULL, &net);
        if (cases[i].ok) {
            if (rc)
                fail_msg("version %d.%d: %s", cases[i].major, cases[i].minor, mk_err_msg());
            assert_int_equal(net->major, cases[i].major);
            assert_int_equal(net->minor, cases[i].minor);
            assert_int_equal(net->seen, 12345);
            assert_true(net->layers[0].conv.biases[1] == -0.5f && net->layers[0].conv.weights[1] == 3);
        } else {
            assert_int_equal(rc, MK_EFORMAT);
            assert_non_null(strstr(mk_err_msg(), "t.weights:"));
        }
        mk_net_destroy(net);
        wb_free(&w);
    }
    wbuf_t w = {0};
    wb_header(&w, 0, 2, 8);
    w.len = 10;
    load_fails(TINY_CFG, &w, MK_EFORMAT, "t.weights: 10 bytes: too short for a Darknet weights header");
    w.len = 18;
    load_fails(TINY_CFG, &w, MK_EFORMAT, "t.weights: 18 bytes: too short for a version 0.2 header (20 bytes)");
    w.len = 20;
    load_fails(TINY_CFG, &w, MK_EFORMAT,
               "t.weights: truncated: 20 bytes, t.cfg needs 36 (layer 0, the [convolutional] at line 5, needs bytes "
               "20..36)");
    const float bad[4] = {0, NAN, 1, 1};
    wb_floats(&w, bad, 4);
    load_fails(TINY_CFG, &w, MK_EFORMAT, "t.weights: layer 0 (the [convolutional] at line 5 of t.cfg) has a NaN");
    wb_free(&w);

    const char *bn = "[net]\nwidth=4\nheight=4\nchannels=1\n[convolutional]\nbatch_normalize=1\nfilters=1\nsize=1\n";
    const float bnv[5] = {0, 1, 0, -0.5f, 1}; /* bias, scale, mean, variance < 0, weight */
    wb_header(&w, 0, 2, 8);
    wb_floats(&w, bnv, 5);
    load_fails(bn, &w, MK_EFORMAT, "negative rolling variance -0.5 of filter 0");
    wb_free(&w);
}

/* The real weights, truncated, oversized, or with another cfg. */
static void test_weights_corrupt(void **state)
{
    (void)state;
    char cfgp[4096], wp[4096], other[4096];
    if (!tu_data_path(cfgp, sizeof cfgp, "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg") ||
        !tu_data_path(wp, sizeof wp, "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights") ||
        !tu_data_path(other, sizeof other, "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.cfg"))
        return;
    void *cfg, *wts, *ocfg;
    size_t cfg_len, wlen, olen;
    TU_OK(mk_file_read(cfgp, &cfg, &cfg_len));
    TU_OK(mk_file_read(wp, &wts, &wlen));
    TU_OK(mk_file_read(other, &ocfg, &olen));
    mk_net_t *net = NULL;
    char want[256];
    TU_OK(mk_net_load_mem(tu_cpu, cfg, cfg_len, "body.cfg", wts, wlen, "body.weights", NULL, &net));
    mk_net_destroy(net);
    net = NULL;

    size_t cut[] = {wlen - 1, wlen - 4 * 9, wlen / 2, 21};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        assert_int_equal(mk_net_load_mem(tu_cpu, cfg, cfg_len, "body.cfg", wts, cut[i], "body.weights", NULL, &net),
                         MK_EFORMAT);
        snprintf(want, sizeof want, "body.weights: truncated: %zu bytes, body.cfg needs %zu (layer ", cut[i], wlen);
        if (!strstr(mk_err_msg(), want))
            fail_msg("'%s' lacks '%s'", mk_err_msg(), want);
        assert_null(net);
    }
    unsigned char *big = malloc(wlen + 8);
    memcpy(big, wts, wlen);
    memset(big + wlen, 0, 8);
    assert_int_equal(mk_net_load_mem(tu_cpu, cfg, cfg_len, "body.cfg", big, wlen + 8, "body.weights", NULL, &net),
                     MK_EFORMAT);
    snprintf(want, sizeof want, "body.weights: %zu bytes, body.cfg needs %zu: 8 bytes too many", wlen + 8, wlen);
    if (!strstr(mk_err_msg(), want))
        fail_msg("'%s' lacks '%s'", mk_err_msg(), want);
    /* the 80-class cfg has larger output convolutions than these 1-class weights */
    assert_int_equal(mk_net_load_mem(tu_cpu, ocfg, olen, "coco.cfg", wts, wlen, "body.weights", NULL, &net),
                     MK_EFORMAT);
    assert_non_null(strstr(mk_err_msg(), "body.weights: truncated"));
    assert_null(net);
    free(big);
    free(cfg);
    free(wts);
    free(ocfg);
}

/* Random mutations of the real cfg (with its weights) and of the weights (with its cfg): each load gives a network
 * or an error with a message naming the file, never a crash (the CI's sanitizer build runs this too). A loaded
 * network also runs a forward pass on its input (a cfg mutated into a larger net is skipped past 640x640). */
static void test_mutations(void **state)
{
    (void)state;
    char cfgp[4096], wp[4096];
    if (!tu_data_path(cfgp, sizeof cfgp, "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg") ||
        !tu_data_path(wp, sizeof wp, "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights"))
        return;
    void *cfg, *wts;
    size_t cfg_len, wlen;
    TU_OK(mk_file_read(cfgp, &cfg, &cfg_len));
    TU_OK(mk_file_read(wp, &wts, &wlen));
    static const char *const tokens[] = {"[convolutional]\n", "[route]\nlayers=-1,-3\n", "[shortcut]\nfrom=-2\n",
                                         "[maxpool]\nsize=2\nstride=2\n", "[upsample]\nstride=2\n", "[yolo]\n",
                                         "filters=", "groups=", "size=", "stride=", "layers=", "from=", "mask=",
                                         "anchors=", "activation=", "batch_normalize=", "-1", "0", "9999999999",
                                         "1e30", "nan", "-", ",", "\n"};
    tu_rng_t rng = {20261208};
    int loaded = 0, refused = 0;
    for (int i = 0; i < 400; i++) {
        const int on_cfg = i % 4 != 3; /* three in four mutate the cfg, the rest the weights */
        size_t n;
        char *m = on_cfg ? tu_mutate(&rng, cfg, cfg_len, tokens, (int)(sizeof tokens / sizeof tokens[0]), &n)
                         : tu_mutate(&rng, wts, wlen, NULL, 0, &n);
        mk_net_t *net = NULL;
        mk_err_clear();
        int rc = on_cfg ? mk_net_load_mem(tu_cpu, m, n, "m.cfg", wts, wlen, "m.weights", NULL, &net)
                        : mk_net_load_mem(tu_cpu, cfg, cfg_len, "m.cfg", m, n, "m.weights", NULL, &net);
        if (rc) {
            assert_null(net);
            const char *msg = mk_err_msg();
            if (!strstr(msg, "m.cfg") && !strstr(msg, "m.weights"))
                fail_msg("mutation %d: the message names no file: '%s'", i, msg);
            refused++;
        } else {
            assert_non_null(net);
            int c, h, w;
            mk_net_input_dims(net, &c, &h, &w);
            if ((size_t)h * (size_t)w <= 640u * 640u) {
                mk_image_t in = mk_net_input_desc(net);
                TU_OK(mk_image_alloc(NULL, &in, MK_MEM_HOST));
                memset(in.data, 0, mk_image_bytes(&in));
                rc = mk_net_forward(net, &in);
                if (rc)
                    fail_msg("mutation %d: loaded, then forward failed: %s", i, mk_err_msg());
                mk_image_free(NULL, &in);
            }
            mk_net_destroy(net);
            loaded++;
        }
        free(m);
    }
    print_message("mutations: %d loaded, %d refused with a message\n", loaded, refused);
    assert_true(loaded > 0 && refused > 0);
    free(cfg);
    free(wts);
}

/* Shapes that cannot work, and cfg errors seen through the loader. */
static void test_bad_networks(void **state)
{
    (void)state;
#define N2 "[net]\nwidth=2\nheight=2\nchannels=2\n"
    load_fails(N2 "[convolutional]\nsize=5\n", NULL, MK_EFORMAT,
               "t.cfg:5: [convolutional] size=5 with padding 0 leaves no output for a 2x2 input");
    load_fails(N2 "[maxpool]\nsize=4\nstride=1\npadding=0\n", NULL, MK_EFORMAT,
               "t.cfg:5: [maxpool] size=4 with padding 0 leaves no output for a 2x2 input");
    load_fails(N2 "[convolutional]\nfilters=3\ngroups=2\n", NULL, MK_EFORMAT,
               "t.cfg:5: [convolutional] groups=2 must divide the 2 input channels and filters=3");
    load_fails(N2 "[maxpool]\nsize=2\nstride=2\n[upsample]\n[route]\nlayers=0,1\n", NULL, MK_EFORMAT,
               "t.cfg:9: [route] input layer 1 is 2x2, layer 0 is 1x1: sizes must match");
    load_fails(N2 "[maxpool]\nsize=2\nstride=2\n[route]\nlayers=-1,-1\n[route]\nlayers=-1\ngroups=3\n", NULL,
               MK_EFORMAT, "t.cfg:10: [route] groups=3 does not divide the 4 channels of layer 1");
    load_fails(N2 "[maxpool]\nsize=2\nstride=2\n[shortcut]\nfrom=-1\n[shortcut]\nfrom=-3\n", NULL, MK_EFORMAT,
               "t.cfg:11: [shortcut] from=-3: -3 names layer -1");
    load_fails(N2 "[maxpool]\nsize=2\nstride=2\n[upsample]\n[shortcut]\nfrom=-2\n", NULL, MK_EUNSUPPORTED,
               "t.cfg:9: [shortcut] adds layer 0 (1x1x2) to layer 1 (2x2x2): different shapes are not supported");
    load_fails(N2 "[yolo]\nanchors=1,1\nclasses=1\n", NULL, MK_EFORMAT,
               "t.cfg:5: [yolo] its input has 2 channels; 1 anchors (mask=) x (5 + classes=1) need 6");
    load_fails(N2 "[region]\n", NULL, MK_EUNSUPPORTED, "t.cfg:5: [region] layers are not supported");
    load_fails(N2 "[convolutional]\nsize=x\n", NULL, MK_EFORMAT, "t.cfg:6: [convolutional] size=x: not an integer");
    load_fails("[net]\nchannels=3\n[maxpool]\n", NULL, MK_EFORMAT, "t.cfg: [net] gives no width and height");
#undef N2
    /* the size comes from the options instead */
    mk_net_opts_t o = mk_net_opts_default();
    o.width = 6;
    o.height = 4;
    mk_net_t *net = NULL;
    TU_OK(load("[net]\nchannels=3\n[maxpool]\nsize=2\nstride=2\n", NULL, &o, &net));
    assert_int_equal(net->layers[0].out_w, 3);
    assert_int_equal(net->layers[0].out_h, 2);
    /* a forward pass checks its input */
    mk_image_t in = mk_image_desc_planar(6, 5, 3, MK_F32);
    TU_OK(mk_image_alloc(NULL, &in, MK_MEM_HOST));
    assert_int_equal(mk_net_forward(net, &in), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "takes f32 planar 6x4 with 3 planes"));
    mk_image_free(NULL, &in);
    mk_net_destroy(net);
    o.fp16 = 1;
    assert_int_equal(load("[net]\nchannels=3\n[maxpool]\n", NULL, &o, &net), MK_EUNSUPPORTED);
    o.fp16 = 0;
    o.cudnn = MK_NET_CUDNN_OFF + 1;
    assert_int_equal(load("[net]\nchannels=3\n[maxpool]\n", NULL, &o, &net), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "not an MK_NET_CUDNN_* value"));
    o.cudnn = -1;
    assert_int_equal(load("[net]\nchannels=3\n[maxpool]\n", NULL, &o, &net), MK_EINVAL);
    o.cudnn = MK_NET_CUDNN_OFF; /* the CPU backend has no cuDNN: any value loads */
    TU_OK(load("[net]\nwidth=4\nheight=4\nchannels=3\n[maxpool]\n", NULL, &o, &net));
    mk_net_destroy(net);
    assert_int_equal(mk_net_load(tu_cpu, "/nonexistent/x.cfg", NULL, NULL, &net), MK_EIO);
}

/* ---- random weights -------------------------------------------------------------------------------------- */

static void test_random_weights(void **state)
{
    (void)state;
    const char *cfg = "[net]\nwidth=8\nheight=8\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=4\n"
                      "size=3\npad=1\nactivation=mish\n[convolutional]\nfilters=18\nsize=1\nactivation=linear\n"
                      "[yolo]\nanchors=1,2,3,4,5,6\nnum=3\nclasses=1\n";
    mk_net_opts_t o = mk_net_opts_default();
    mk_net_t *a = NULL, *b = NULL, *c = NULL;
    TU_OK(load(cfg, NULL, &o, &a));
    TU_OK(load(cfg, NULL, &o, &b));
    o.seed = 2;
    TU_OK(load(cfg, NULL, &o, &c));
    size_t n = 4 * 3 * 9;
    assert_memory_equal(a->layers[0].conv.weights, b->layers[0].conv.weights, n * sizeof(float));
    assert_memory_not_equal(a->layers[0].conv.weights, c->layers[0].conv.weights, n * sizeof(float));
    float in[3 * 64], ya[18 * 64], yb[18 * 64];
    tu_rng_t r = {3};
    fill(&r, in, 3 * 64, 0, 1);
    forward(a, in);
    forward(b, in);
    TU_OK(mk_net_yolo_read(a, 0, ya, 18 * 64));
    TU_OK(mk_net_yolo_read(b, 0, yb, 18 * 64));
    assert_memory_equal(ya, yb, sizeof ya);
    mk_net_destroy(a);
    mk_net_destroy(b);
    mk_net_destroy(c);
}

/* ---- Darknet's reference outputs ------------------------------------------------------------------------- */

static double worst_all;

static float *read_f32(const char *path, size_t *n)
{
    void *buf;
    size_t len;
    TU_OK(mk_file_read(path, &buf, &len));
    assert_int_equal(len % sizeof(float), 0);
    *n = len / sizeof(float);
    return buf;
}

/* Every NAME.input.f32 of reference/darknet/<dir>: the yolo outputs within 1e-3 of NAME.yoloK.f32. */
static void parity(const char *dir, const char *cfg, const char *weights)
{
    char refdir[4096], cfgp[4096], wp[4096];
    if (!tu_data_path(refdir, sizeof refdir, dir) || !tu_data_path(cfgp, sizeof cfgp, cfg) ||
        !tu_data_path(wp, sizeof wp, weights))
        return;
    mk_net_t *net = NULL;
    TU_OK(mk_net_load(tu_cpu, cfgp, wp, NULL, &net));
    DIR *d = opendir(refdir);
    assert_non_null(d);
    struct dirent *e;
    int images = 0;
    size_t nan_refs = 0;
    double worst = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 11 || strcmp(e->d_name + len - 10, ".input.f32"))
            continue;
        char name[256], path[8192];
        snprintf(name, sizeof name, "%.*s", (int)(len - 10), e->d_name);
        snprintf(path, sizeof path, "%s/%s.json", refdir, name);
        cJSON *j = tu_load_json(path);
        cJSON *layers = cJSON_GetObjectItem(j, "yolo_layers");
        assert_int_equal(cJSON_GetArraySize(layers), mk_net_yolo_count(net));
        assert_int_equal(cJSON_GetObjectItem(j, "net_w")->valueint, net->w);
        assert_int_equal(cJSON_GetObjectItem(j, "net_h")->valueint, net->h);
        size_t n;
        snprintf(path, sizeof path, "%s/%s", refdir, e->d_name);
        float *in = read_f32(path, &n);
        assert_int_equal(n, (size_t)net->c * net->h * net->w);
        forward(net, in);
        free(in);
        for (int k = 0; k < mk_net_yolo_count(net); k++) {
            cJSON *jl = cJSON_GetArrayItem(layers, k);
            mk_yolo_layer_t y;
            TU_OK(mk_net_yolo_output(net, k, &y));
            assert_int_equal(net->yolo[k], cJSON_GetObjectItem(jl, "layer")->valueint);
            assert_int_equal(y.w, cJSON_GetObjectItem(jl, "w")->valueint);
            assert_int_equal(y.h, cJSON_GetObjectItem(jl, "h")->valueint);
            assert_int_equal(y.n, cJSON_GetObjectItem(jl, "n")->valueint);
            assert_int_equal(y.classes, cJSON_GetObjectItem(jl, "classes")->valueint);
            snprintf(path, sizeof path, "%s/%s", refdir, cJSON_GetObjectItem(jl, "file")->valuestring);
            float *ref = read_f32(path, &n);
            assert_int_equal(n, (size_t)cJSON_GetObjectItem(jl, "floats")->valueint);
            assert_int_equal(n, (size_t)y.n * (5 + y.classes) * y.w * y.h);
            double m = 0;
            size_t at = 0, plane = (size_t)y.w * y.h;
            for (size_t i = 0; i < n; i++) {
                if (!isfinite(y.data[i]))
                    fail_msg("%s %s yolo%d: element %zu is %g", dir, name, k, i, y.data[i]);
                if (isnan(ref[i])) {
                    /* Darknet's -Ofast build computes the logistic through a reciprocal estimate, which turns
                     * 1 / (1 + expf(-x)) into NaN where expf overflows: objectness and class scores whose true
                     * value is below 1e-38 (their neighbours in the reference are ~1e-30). */
                    size_t e = i / plane % (5 + (size_t)y.classes);
                    if (e < 4 || !(y.data[i] >= 0 && y.data[i] <= 1e-30f))
                        fail_msg("%s %s yolo%d: Darknet has NaN at %zu (entry %zu), we have %g", dir, name, k, i, e,
                                 y.data[i]);
                    nan_refs++;
                    continue;
                }
                double diff = fabs((double)y.data[i] - ref[i]);
                if (diff > m) {
                    m = diff;
                    at = i;
                }
            }
            if (m > 1e-3)
                fail_msg("%s %s yolo%d: max |diff| %g at %zu (got %g, Darknet %g)", dir, name, k, m, at, y.data[at],
                         ref[at]);
            worst = m > worst ? m : worst;
            free(ref);
        }
        cJSON_Delete(j);
        images++;
    }
    closedir(d);
    assert_true(images > 0);
    print_message("%-40s %d images, max |diff| vs Darknet %.3g (%zu NaN in Darknet's outputs, 0 here)\n", dir,
                  images, worst, nan_refs);
    worst_all = worst > worst_all ? worst : worst_all;
    mk_net_destroy(net);
}

static void test_parity_fastest_body(void **state)
{
    (void)state;
    parity("reference/darknet/yolo-fastest-1.1-body", "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg",
           "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights");
}

static void test_parity_fastest_coco(void **state)
{
    (void)state;
    parity("reference/darknet/yolo-fastest-1.1-coco", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.cfg",
           "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.weights");
}

static void test_parity_fastest_xl(void **state)
{
    (void)state;
    parity("reference/darknet/yolo-fastest-1.1-xl", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.cfg",
           "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.weights");
}

static void test_parity_yolov3_tiny(void **state)
{
    (void)state;
    parity("reference/darknet/yolov3-tiny-random", "models/cfg/yolov3-tiny.cfg",
           "reference/darknet/random-weights/yolov3-tiny-random.weights");
}

static void test_parity_yolov4_tiny(void **state)
{
    (void)state;
    parity("reference/darknet/yolov4-tiny-random", "models/cfg/yolov4-tiny.cfg",
           "reference/darknet/random-weights/yolov4-tiny-random.weights");
    print_message("all reference models: max |diff| vs Darknet %.3g (bound 1e-3)\n", worst_all);
}

/* ---- the large stock cfgs -------------------------------------------------------------------------------- */

/* Random weights at 416x416 (the cfgs say 608; 416 keeps the CPU run to a few seconds): every yolo output has
 * the grid of its stride, finite values, and x, y, objectness and classes in their ranges. */
static void big_cfg(const char *cfg, const int strides[3])
{
    char cfgp[4096], inp[4096];
    if (!tu_data_path(cfgp, sizeof cfgp, cfg) ||
        !tu_data_path(inp, sizeof inp, "reference/darknet/yolov3-tiny-random/dog.input.f32"))
        return;
    mk_net_opts_t o = mk_net_opts_default();
    o.width = o.height = 416;
    mk_net_t *net = NULL;
    TU_OK(mk_net_load(tu_cpu, cfgp, NULL, &o, &net));
    size_t n;
    float *in = read_f32(inp, &n);
    assert_int_equal(n, 3 * 416 * 416);
    forward(net, in);
    free(in);
    assert_int_equal(mk_net_yolo_count(net), 3);
    for (int k = 0; k < 3; k++) {
        mk_yolo_layer_t y;
        TU_OK(mk_net_yolo_output(net, k, &y));
        assert_int_equal(y.w, 416 / strides[k]);
        assert_int_equal(y.h, 416 / strides[k]);
        assert_int_equal(y.n, 3);
        assert_int_equal(y.classes, 80);
        float lo = -(y.scale_x_y - 1) / 2, hi = 1 + (y.scale_x_y - 1) / 2;
        size_t plane = (size_t)y.w * y.h;
        for (size_t i = 0; i < (size_t)y.n * 85 * plane; i++) {
            size_t e = i / plane % 85;
            float v = y.data[i];
            assert_true(isfinite(v));
            if (e < 2)
                assert_true(v >= lo && v <= hi);
            else if (e >= 4)
                assert_true(v >= 0 && v <= 1);
        }
    }
    print_message("%s at 416: %d layers, %.2f BFLOPs\n", cfg, mk_net_layer_count(net), mk_net_flops(net) / 1e9);
    mk_net_destroy(net);
}

static void test_yolov3(void **state)
{
    (void)state;
    big_cfg("models/cfg/yolov3.cfg", (const int[3]){32, 16, 8});
}

static void test_yolov3_spp(void **state)
{
    (void)state;
    big_cfg("models/cfg/yolov3-spp.cfg", (const int[3]){32, 16, 8});
}

static void test_yolov4(void **state)
{
    (void)state;
    big_cfg("models/cfg/yolov4.cfg", (const int[3]){8, 16, 32});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxpool_stride1),
        cmocka_unit_test(test_maxpool_size3),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_shortcut),
        cmocka_unit_test(test_upsample),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_bn_fold),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_yolo_layer),
        cmocka_unit_test(test_weights_header),
        cmocka_unit_test(test_weights_corrupt),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_bad_networks),
        cmocka_unit_test(test_random_weights),
        cmocka_unit_test(test_parity_fastest_body),
        cmocka_unit_test(test_parity_fastest_coco),
        cmocka_unit_test(test_parity_fastest_xl),
        cmocka_unit_test(test_parity_yolov3_tiny),
        cmocka_unit_test(test_parity_yolov4_tiny),
        cmocka_unit_test(test_yolov3),
        cmocka_unit_test(test_yolov3_spp),
        cmocka_unit_test(test_yolov4),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
