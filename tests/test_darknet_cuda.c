/* test_darknet_cuda: the CUDA forward pass of Darknet networks against Darknet's reference outputs and the CPU
 * reference — FP32 within 1e-3, FP16 against FP32 (with each of our FP16 kernels pinned in turn), every layer
 * against the CPU (MASKD_NET_DEBUG=1), the stock large cfgs with random weights, CUDA graph replay and input pitch
 * (bit for bit, split-K and fused kernels included) — with a self-check that prints every layer's difference to the
 * CPU whenever a comparison fails, naming the first layer that diverges. Exits 77 (skipped) without a GPU. */
#include "testutil.h"

#include "darknet.h"
#include "imageio.h"
#include "letterbox.h"

#include <stdio.h>

#ifdef MK_HAVE_CUDA
#include "backend.h"
#include "darknet_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;

/* FP32 against Darknet and against the CPU reference: the bound. */
#define TOL_FP32 1e-3
/* Extra bytes per input row for the pitch cases: 12 (rows not 16-byte aligned) and 1028. */
#define ODD_PITCH 12
#define WIDE_PITCH 1028

typedef struct {
    const char *name;          /* folder in reference/darknet */
    const char *cfg, *weights; /* in the shared data */
    /* FP16 raw outputs against FP32. 2e-2 is the bound; -coco and -xl carry activations of magnitude 30 to
     * 300 through 130 layers, and half storage (11-bit mantissa) leaves their yolo outputs apart: a host emulation of
     * the cuDNN pass gave up to ~0.045, Darknet's own CUDNN_HALF scheme emulated on the same inputs 0.075, and our
     * FP16 kernels measured 0.077 on -xl "horses" (H200, 2026-11-21) and 0.0801 (H100, another load's kernel
     * choice); the other -xl and -coco images 0.005-0.028, and cuDNN alone (MASKD_NET_CONV=cudnn) 0.0276 on -coco.
     * So -coco's bound is 6e-2 and -xl's 1.2e-1 (1.5 times the worst seen). -body stays near the 2e-2 but not always within it: the
     * per-layer kernels are chosen by timing at load, so the rounding differs between loads; its "person3" measured
     * 0.0198 and 0.0214 in two runs: its bound is 3e-2. */
    double fp16_tol;
} model_t;

static const model_t models[] = {
    {"yolo-fastest-1.1-body", "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg",
     "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights", 3e-2},
    {"yolo-fastest-1.1-coco", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.cfg",
     "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.weights", 6e-2},
    {"yolo-fastest-1.1-xl", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.cfg",
     "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.weights", 1.2e-1},
    {"yolov3-tiny-random", "models/cfg/yolov3-tiny.cfg", "reference/darknet/random-weights/yolov3-tiny-random.weights",
     2e-2},
    {"yolov4-tiny-random", "models/cfg/yolov4-tiny.cfg", "reference/darknet/random-weights/yolov4-tiny-random.weights",
     2e-2},
};
#define N_MODELS (sizeof models / sizeof models[0])

/* One reference image of a model: NAME.json's input and yolo outputs. */
typedef struct {
    char name[64];
    int net_w, net_h, n_yolo;
    char input[8192];
    char yolo[MK_NET_MAX_YOLO][8192];
    size_t floats[MK_NET_MAX_YOLO];
    int w[MK_NET_MAX_YOLO], h[MK_NET_MAX_YOLO], n[MK_NET_MAX_YOLO], classes[MK_NET_MAX_YOLO];
} ref_t;

/* The yolo outputs of one pass, in host memory. */
typedef struct {
    int n;
    float *out[MK_NET_MAX_YOLO];
    size_t count[MK_NET_MAX_YOLO];
} outs_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The reference images of a model, sorted by name; 0 (with a message) without the data. */
static int list_refs(const model_t *m, ref_t **out)
{
    char rel[512], dir[4096];
    snprintf(rel, sizeof rel, "reference/darknet/%s", m->name);
    *out = NULL;
    if (!tu_data_path(dir, sizeof dir, rel))
        return 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    ref_t *refs = calloc((size_t)n, sizeof *refs);
    assert_non_null(refs);
    for (int i = 0; i < n; i++) {
        char path[4200];
        ref_t *r = &refs[i];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(r->name, sizeof r->name, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        cJSON *j = tu_load_json(path);
        r->net_w = cJSON_GetObjectItem(j, "net_w")->valueint;
        r->net_h = cJSON_GetObjectItem(j, "net_h")->valueint;
        snprintf(r->input, sizeof r->input, "%s/%s", dir, cJSON_GetObjectItem(j, "input")->valuestring);
        cJSON *ys = cJSON_GetObjectItem(j, "yolo_layers");
        r->n_yolo = cJSON_GetArraySize(ys);
        assert_in_range(r->n_yolo, 1, MK_NET_MAX_YOLO);
        for (int k = 0; k < r->n_yolo; k++) {
            cJSON *y = cJSON_GetArrayItem(ys, k);
            snprintf(r->yolo[k], sizeof r->yolo[k], "%s/%s", dir, cJSON_GetObjectItem(y, "file")->valuestring);
            r->floats[k] = (size_t)cJSON_GetObjectItem(y, "floats")->valuedouble;
            r->w[k] = cJSON_GetObjectItem(y, "w")->valueint;
            r->h[k] = cJSON_GetObjectItem(y, "h")->valueint;
            r->n[k] = cJSON_GetObjectItem(y, "n")->valueint;
            r->classes[k] = cJSON_GetObjectItem(y, "classes")->valueint;
        }
        cJSON_Delete(j);
        free(names[i]);
    }
    *out = refs;
    return n;
}

/* A whole float32 file; `count` floats expected. */
static float *read_floats(const char *path, size_t count)
{
    void *buf = NULL;
    size_t len = 0;
    TU_OK(mk_file_read(path, &buf, &len));
    if (len != count * sizeof(float))
        fail_msg("%s: %zu bytes, expected %zu floats", path, len, count);
    return buf;
}

/* A host F32 planar c x h x w image from a raw CHW file. */
static mk_image_t read_input(const char *path, int c, int w, int h)
{
    float *raw = read_floats(path, (size_t)c * w * h);
    mk_image_t img = mk_image_desc_planar(w, h, c, MK_F32);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int p = 0; p < c; p++)
        for (int y = 0; y < h; y++)
            memcpy(mk_image_row(&img, p, y), raw + ((size_t)p * h + y) * w, (size_t)w * sizeof(float));
    free(raw);
    return img;
}

/* Loads a network with the environment switches `env` (space-separated NAME=value items, or NULL) set during the
 * load; the switches' values from before (those the test runs under) come back after it. */
static int load_net(mk_ctx_t *ctx, const char *cfg, const char *weights, int w, int h, int fp16, const char *env,
                    mk_net_t **net)
{
    mk_net_opts_t o = mk_net_opts_default();
    char buf[512], *names[16], *old[16], *save = NULL;
    int n = 0;
    o.width = w;
    o.height = h;
    o.fp16 = fp16;
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    for (char *item = strtok_r(buf, " ", &save); item && n < 16; item = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(item, '=');
        assert_non_null(eq);
        *eq = '\0';
        old[n] = getenv(item) ? strdup(getenv(item)) : NULL;
        setenv(item, eq + 1, 1);
        names[n++] = item;
    }
    int rc = mk_net_load(ctx, cfg, weights, &o, net);
    for (int k = n - 1; k >= 0; k--) {
        if (old[k])
            setenv(names[k], old[k], 1);
        else
            unsetenv(names[k]);
        free(old[k]);
    }
    return rc;
}

/* The value of switch `name` in an env string as load_net takes it, or NULL. */
static const char *env_value(const char *env, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    for (const char *p = env; p && (p = strstr(p, name)); p += n)
        if ((p == env || p[-1] == ' ') && p[n] == '=') {
            snprintf(buf, len, "%.*s", (int)strcspn(p + n + 1, " "), p + n + 1);
            return buf;
        }
    return NULL;
}

/* Convolutions of a CUDA network whose implementation (mk_net_cuda_conv_impl) starts with `prefix` or, with
 * `infix`, contains it. */
static int count_impls(mk_net_t *net, const char *prefix, int infix)
{
    int count = 0;
    for (int i = 0; i < net->n_layers; i++) {
        char name[64];
        if (net->layers[i].type != MK_LAYER_CONV)
            continue;
        TU_OK(mk_net_cuda_conv_impl(net, i, name, sizeof name));
        count += infix ? strstr(name, prefix) != NULL : !strncmp(name, prefix, strlen(prefix));
    }
    return count;
}

/* The switches that pin implementations took effect: with MASKD_NET_CONV=X some convolution runs X, with
 * MASKD_NET_FUSE=1 some depthwise convolution is fused into a dwpw kernel, with MASKD_NET_SPLITK=N > 1 some gemm is
 * split. Prints what each took. */
static void expect_impls(mk_net_t *net, const char *env)
{
    char v[64];
    if (env_value(env, "MASKD_NET_CONV", v, sizeof v)) {
        int n = count_impls(net, v, 0);
        print_message("  %s: %d convolutions by %s\n", env, n, v);
        if (!n)
            fail_msg("%s: no convolution uses %s", env, v);
    }
    if (env_value(env, "MASKD_NET_FUSE", v, sizeof v) && !strcmp(v, "1") && !count_impls(net, "fused", 0))
        fail_msg("%s: no depthwise convolution was fused", env);
    if (env_value(env, "MASKD_NET_SPLITK", v, sizeof v) && atoi(v) > 1 && !count_impls(net, ".s", 1))
        fail_msg("%s: no gemm convolution was split", env);
}

/* One pass on the host image `in`, copied into the network's context with `extra_pitch` bytes per row. */
static void run(mk_net_t *net, mk_ctx_t *ctx, const mk_image_t *in, size_t extra_pitch, outs_t *o)
{
    mk_image_t d = tu_to_ctx(ctx, in, extra_pitch);
    TU_OK(mk_net_forward(net, &d));
    o->n = mk_net_yolo_count(net);
    for (int k = 0; k < o->n; k++) {
        mk_yolo_layer_t y;
        TU_OK(mk_net_yolo_output(net, k, &y));
        o->count[k] = (size_t)y.n * (5 + (size_t)y.classes) * (size_t)y.h * (size_t)y.w;
        o->out[k] = malloc(o->count[k] * sizeof(float));
        assert_non_null(o->out[k]);
        TU_OK(mk_net_yolo_read(net, k, o->out[k], o->count[k]));
    }
    mk_image_free(ctx, &d);
}

static void outs_free(outs_t *o)
{
    for (int k = 0; k < o->n; k++)
        free(o->out[k]);
    o->n = 0;
}

/* Largest |a - b|; infinite where exactly one is NaN or where they differ in infinity. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) != isnan(b[i]))
                return INFINITY;
            continue;
        }
        double d = a[i] == b[i] ? 0.0 : fabs((double)a[i] - (double)b[i]);
        m = d > m ? d : m;
    }
    return m;
}

/* max_diff against a Darknet reference output. Darknet's reference build (-Ofast) wrote NaN for some logistic
 * entries whose logit is so negative that exp overflows (-coco/-xl horses: objectness and class planes); the true
 * value is 0, so there `ours` must be within TOL_FP32 of 0. Those entries are counted in *nan_refs. */
static double ref_diff(const float *ours, const float *ref, size_t n, int *nan_refs)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = isnan(ref[i]) ? fabs(ours[i]) : ours[i] == ref[i] ? 0.0 : fabs((double)ours[i] - (double)ref[i]);
        if (isnan(ref[i]))
            ++*nan_refs;
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static double max_abs(const float *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

static void assert_outs_equal(const outs_t *a, const outs_t *b, const char *what)
{
    assert_int_equal(a->n, b->n);
    for (int k = 0; k < a->n; k++)
        if (memcmp(a->out[k], b->out[k], a->count[k] * sizeof(float)))
            fail_msg("%s: yolo output %d differs (max |diff| %.3g)", what, k,
                     max_diff(a->out[k], b->out[k], a->count[k]));
}

/* The self-check: the network on both backends, the CUDA one loaded with MASKD_NET_DEBUG=1 (every layer's output
 * kept, nothing fused) plus `env`, compared layer by layer. Prints every layer (verbose) or only those over
 * tolerance, and returns the first layer whose max |diff| exceeds tol * max(1, max |CPU|), or -1. */
static int diagnose(const char *what, const char *cfg, const char *weights, int w, int h, int fp16,
                    const char *env, const mk_image_t *in, double tol, int verbose)
{
    char envs[512];
    mk_net_t *c = NULL, *g = NULL;
    snprintf(envs, sizeof envs, "MASKD_NET_DEBUG=1%s%s", env ? " " : "", env ? env : "");
    outs_t oc = {0}, og = {0};
    int first = -1;
    double worst = 0;
    TU_OK(load_net(cpu, cfg, weights, w, h, 0, NULL, &c));
    TU_OK(load_net(gpu, cfg, weights, w, h, fp16, envs, &g));
    run(c, cpu, in, 0, &oc);
    run(g, gpu, in, 0, &og);
    print_message("self-check %s (%s, CUDA %s vs CPU, every layer):\n", what, cfg, fp16 ? "FP16" : "FP32");
    for (int i = 0; i < c->n_layers; i++) {
        const mk_layer_t *l = &c->layers[i];
        if (l->type == MK_LAYER_DROPOUT)
            continue;
        size_t n = mk_layer_out_size(l);
        float *buf = malloc(n * sizeof(float));
        assert_non_null(buf);
        TU_OK(mk_net_cuda_layer_read(g, i, buf));
        double d = max_diff(buf, l->output, n), m = max_abs(l->output, n), rel = d / (m > 1 ? m : 1);
        int bad = !(rel <= tol);
        if (bad && first < 0)
            first = i;
        worst = rel > worst ? rel : worst;
        if (verbose || bad)
            print_message("  layer %3d %-13s %4d x %4d x %4d (cfg line %4d)  max|diff| %10.3g  max|cpu| %10.3g  "
                          "rel %9.3g%s\n", i, mk_layer_type_name(l->type), l->out_w, l->out_h, l->out_c, l->line, d,
                          m, rel, bad ? "  <-- over tolerance" : "");
        free(buf);
    }
    print_message("  worst relative difference %.3g (tolerance %.3g); %s\n", worst, tol,
                  first < 0 ? "no layer over tolerance" : "first layer over tolerance marked above");
    outs_free(&oc);
    outs_free(&og);
    mk_net_destroy(c);
    mk_net_destroy(g);
    return first;
}

/* A model's cfg, weights and reference images; 0 (with a message) when any is absent, so that a partial copy of
 * the data (the random weights are 60 MB) still tests what it has. */
static int model_data(const model_t *m, char cfg[4096], char weights[4096], ref_t **refs, int *nref)
{
    *refs = NULL;
    *nref = 0;
    if (!tu_data_path(cfg, 4096, m->cfg) || !tu_data_path(weights, 4096, m->weights))
        return 0;
    *nref = list_refs(m, refs);
    return *nref > 0;
}

/* ---- FP32 against Darknet and the CPU ------------------------------------------------------------------ */

/* Returns 0 when the model's data is absent. */
static int check_fp32_model(const model_t *m, const char *env)
{
    char cfg[4096], weights[4096];
    ref_t *refs;
    int nref;
    if (!model_data(m, cfg, weights, &refs, &nref)) {
        free(refs);
        return 0;
    }
    mk_net_t *g = NULL, *c = NULL;
    TU_OK(load_net(gpu, cfg, weights, refs[0].net_w, refs[0].net_h, 0, env, &g));
    expect_impls(g, env);
    TU_OK(load_net(cpu, cfg, weights, refs[0].net_w, refs[0].net_h, 0, NULL, &c));
    for (int i = 0; i < nref; i++) {
        const ref_t *r = &refs[i];
        assert_int_equal(r->net_w, refs[0].net_w);
        assert_int_equal(r->net_h, refs[0].net_h);
        mk_image_t in = read_input(r->input, 3, r->net_w, r->net_h);
        outs_t og = {0}, oc = {0};
        run(g, gpu, &in, i % 2 ? ODD_PITCH : 0, &og);
        run(c, cpu, &in, 0, &oc);
        assert_int_equal(og.n, r->n_yolo);
        int bad = 0;
        for (int k = 0; k < r->n_yolo; k++) {
            mk_yolo_layer_t y;
            TU_OK(mk_net_yolo_output(g, k, &y));
            assert_int_equal(y.w, r->w[k]);
            assert_int_equal(y.h, r->h[k]);
            assert_int_equal(y.n, r->n[k]);
            assert_int_equal(y.classes, r->classes[k]);
            assert_int_equal(og.count[k], r->floats[k]);
            float *ref = read_floats(r->yolo[k], r->floats[k]);
            int nan_refs = 0;
            double d_ref = ref_diff(og.out[k], ref, og.count[k], &nan_refs);
            double d_cpu = max_diff(og.out[k], oc.out[k], og.count[k]);
            print_message("%s%s%s %s yolo%d: CUDA FP32 vs Darknet max|diff| %.3g%s, vs CPU %.3g\n", m->name,
                          env ? " " : "", env ? env : "", r->name, k, d_ref,
                          nan_refs ? " (NaN in Darknet's output taken as 0)" : "", d_cpu);
            bad |= !(d_ref <= TOL_FP32 && d_cpu <= TOL_FP32);
            free(ref);
        }
        if (bad) {
            diagnose(m->name, cfg, weights, r->net_w, r->net_h, 0, env, &in, TOL_FP32, 1);
            fail_msg("%s %s: CUDA FP32 output over %.0e (see the self-check above)", m->name, r->name, TOL_FP32);
        }
        outs_free(&og);
        outs_free(&oc);
        mk_image_free(NULL, &in);
    }
    mk_net_destroy(g);
    mk_net_destroy(c);
    free(refs);
    return 1;
}

static void test_fp32_reference(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < N_MODELS; i++)
        checked += check_fp32_model(&models[i], NULL);
    if (!checked)
        skip();
}

/* The other code paths: on the model with depthwise convolutions, cuDNN's depthwise, cuDNN for every other
 * convolution (none by the direct kernel), no CUDA graph, every convolution by cuDNN, every one by the direct
 * kernel, no programmatic dependent launch; on yolov4-tiny, every convolution by the direct kernel. */
static void test_fp32_variants(void **state)
{
    (void)state;
    int checked = check_fp32_model(&models[1], "MASKD_NET_DEPTHWISE=cudnn");
    checked += check_fp32_model(&models[1], "MASKD_NET_DIRECT_MFLOPS=0");
    checked += check_fp32_model(&models[1], "MASKD_NO_GRAPH=1");
    checked += check_fp32_model(&models[1], "MASKD_NET_CONV=cudnn");
    checked += check_fp32_model(&models[1], "MASKD_NET_CONV=direct");
    checked += check_fp32_model(&models[1], "MASKD_NET_PDL=0");
    checked += check_fp32_model(&models[4], "MASKD_NET_DIRECT_MFLOPS=1e9");
    if (!checked)
        skip();
}

/* Every layer of every reference model against the CPU, on the first reference image. */
static void test_fp32_layers(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        const model_t *m = &models[i];
        char cfg[4096], weights[4096];
        ref_t *refs;
        int nref;
        if (!model_data(m, cfg, weights, &refs, &nref)) {
            free(refs);
            continue;
        }
        checked++;
        mk_image_t in = read_input(refs[0].input, 3, refs[0].net_w, refs[0].net_h);
        int first = diagnose(m->name, cfg, weights, refs[0].net_w, refs[0].net_h, 0, NULL, &in, TOL_FP32, 0);
        if (first >= 0)
            fail_msg("%s: layer %d is the first over tolerance", m->name, first);
        mk_image_free(NULL, &in);
        free(refs);
    }
    if (!checked)
        skip();
}

/* ---- FP16 against FP32 --------------------------------------------------------------------------------- */

static int check_fp16_model(const model_t *m, const char *env)
{
    char cfg[4096], weights[4096];
    ref_t *refs;
    int nref;
    if (!model_data(m, cfg, weights, &refs, &nref)) {
        free(refs);
        return 0;
    }
    mk_net_t *h = NULL, *f = NULL;
    TU_OK(load_net(gpu, cfg, weights, refs[0].net_w, refs[0].net_h, 1, env, &h));
    expect_impls(h, env);
    TU_OK(load_net(gpu, cfg, weights, refs[0].net_w, refs[0].net_h, 0, NULL, &f));
    for (int i = 0; i < nref; i++) {
        const ref_t *r = &refs[i];
        mk_image_t in = read_input(r->input, 3, r->net_w, r->net_h);
        outs_t oh = {0}, of = {0};
        run(h, gpu, &in, i % 2 ? ODD_PITCH : 0, &oh);
        run(f, gpu, &in, 0, &of);
        double worst = 0;
        for (int k = 0; k < oh.n; k++) {
            double d = max_diff(oh.out[k], of.out[k], oh.count[k]);
            print_message("%s%s%s %s yolo%d: CUDA FP16 vs FP32 max|diff| %.3g (bound %.0e)\n", m->name,
                          env ? " " : "", env ? env : "", r->name, k, d, m->fp16_tol);
            worst = d > worst ? d : worst;
        }
        if (!(worst <= m->fp16_tol)) {
            diagnose(m->name, cfg, weights, r->net_w, r->net_h, 1, env, &in, m->fp16_tol, 1);
            fail_msg("%s %s: FP16 output %.3g from FP32 (see the self-check above)", m->name, r->name, worst);
        }
        outs_free(&oh);
        outs_free(&of);
        mk_image_free(NULL, &in);
    }
    mk_net_destroy(h);
    mk_net_destroy(f);
    free(refs);
    return 1;
}

static void test_fp16(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < N_MODELS; i++)
        checked += check_fp16_model(&models[i], NULL);
    /* The other FP16 paths on the model with depthwise convolutions. */
    checked += check_fp16_model(&models[1], "MASKD_NET_LAYOUT=nchw");
    checked += check_fp16_model(&models[1], "MASKD_NET_DEPTHWISE=cudnn");
    checked += check_fp16_model(&models[1], "MASKD_NET_DIRECT_MFLOPS=0");
    checked += check_fp16_model(&models[1], "MASKD_NET_PDL=0");
    checked += check_fp16_model(&models[1], "MASKD_NET_ROUTE_FUSE=0 MASKD_NET_VIEWS=0 MASKD_NET_INPUT_NODE=0");
    checked += check_fp16_model(&models[4], "MASKD_NET_DIRECT_MFLOPS=1e9");
    /* cuDNN timed beside our kernels everywhere, and never */
    checked += check_fp16_model(&models[0], "MASKD_NET_CUDNN=on");
    checked += check_fp16_model(&models[0], "MASKD_NET_CUDNN=off");
    if (!checked)
        skip();
}

/* detect.cudnn: by default (auto) the FP16 networks that our kernels cover load no cuDNN handle and no convolution
 * uses cuDNN; off holds for FP32 too (the direct kernel); on creates the handle; FP32 in auto keeps cuDNN. A bad
 * value of the option or of its switch is refused. */
static void test_cudnn_option(void **state)
{
    (void)state;
    static const struct {
        int model, fp16, cudnn;
        const char *env;
        int handle; /* expected mk_net_cuda_has_cudnn */
    } cases[] = {
        {0, 1, MK_NET_CUDNN_AUTO, NULL, 0}, {4, 1, MK_NET_CUDNN_AUTO, NULL, 0}, {3, 1, MK_NET_CUDNN_AUTO, NULL, 0},
        {0, 0, MK_NET_CUDNN_OFF, NULL, 0},  {0, 1, MK_NET_CUDNN_ON, NULL, 1},   {0, 0, MK_NET_CUDNN_AUTO, NULL, 1},
        {0, 1, MK_NET_CUDNN_ON, "MASKD_NET_CUDNN=auto", 0},                      {0, 1, MK_NET_CUDNN_AUTO, "MASKD_NET_CUDNN=on", 1},
    };
    int checked = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cfg[4096], weights[4096];
        ref_t *refs;
        int nref;
        if (!model_data(&models[cases[k].model], cfg, weights, &refs, &nref)) {
            free(refs);
            continue;
        }
        mk_net_opts_t o = mk_net_opts_default();
        o.fp16 = cases[k].fp16;
        o.cudnn = cases[k].cudnn;
        mk_net_t *net = NULL;
        char buf[64], *old = getenv("MASKD_NET_CUDNN") ? strdup(getenv("MASKD_NET_CUDNN")) : NULL;
        if (cases[k].env)
            setenv("MASKD_NET_CUDNN", strchr(cases[k].env, '=') + 1, 1);
        int rc = mk_net_load(gpu, cfg, weights, &o, &net);
        if (old)
            setenv("MASKD_NET_CUDNN", old, 1);
        else
            unsetenv("MASKD_NET_CUDNN");
        free(old);
        TU_OK(rc);
        int has = mk_net_cuda_has_cudnn(net), on_cudnn = count_impls(net, "cudnn", 0);
        snprintf(buf, sizeof buf, "%s", cases[k].env ? cases[k].env : "");
        print_message("%s %s cudnn=%d %s: handle %d, %d convolutions on cuDNN\n", models[cases[k].model].name,
                      cases[k].fp16 ? "FP16" : "FP32", cases[k].cudnn, buf, has, on_cudnn);
        assert_int_equal(has, cases[k].handle);
        if (!has)
            assert_int_equal(on_cudnn, 0);
        mk_net_destroy(net);
        free(refs);
        checked++;
    }
    if (!checked)
        skip();
}

/* Each of our FP16 NHWC kernels pinned where it applies (expect_impls checks that it ran): the small and depthwise
 * ones (unfused, or the dwpw kernels could take every depthwise layer) and the fused depthwise + pointwise ones on
 * the model with depthwise convolutions, the gemm tiles with and
 * without split-K on yolov4-tiny's larger layers (3 x 3, up to 4608-long sums) and on the 1 x 1 layers of the
 * depthwise model, the cuDNN and direct kernels alone in NHWC. */
static void test_fp16_kernels(void **state)
{
    (void)state;
    static const char *const coco[] = {
        "MASKD_NET_CONV=small",
        "MASKD_NET_CONV=dw1 MASKD_NET_FUSE=0",
        "MASKD_NET_CONV=dw2 MASKD_NET_FUSE=0",
        "MASKD_NET_CONV=dw4 MASKD_NET_FUSE=0",
        "MASKD_NET_CONV=dwpw16x32",
        "MASKD_NET_CONV=dwpw16x64",
        "MASKD_NET_CONV=dwpw32x32",
        "MASKD_NET_CONV=dwpw32x64",
        "MASKD_NET_CONV=dwpw64x64",
        "MASKD_NET_FUSE=0",
        "MASKD_NET_FUSE=1",
        "MASKD_NET_CONV=gemm32x32 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm64x64 MASKD_NET_SPLITK=3",
        "MASKD_NET_CONV=cudnn",
        "MASKD_NET_CONV=direct",
    };
    static const char *const tiny[] = {
        "MASKD_NET_CONV=gemm32x32 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm64x32 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm32x64 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm64x64 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm128x64 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm64x128 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm128x128 MASKD_NET_SPLITK=1",
        "MASKD_NET_CONV=gemm32x32 MASKD_NET_SPLITK=5",
        "MASKD_NET_CONV=gemm64x64 MASKD_NET_SPLITK=4",
        "MASKD_NET_CONV=gemm128x128 MASKD_NET_SPLITK=16",
        "MASKD_NET_CONV=small",
    };
    char env[256];
    int checked = 0;
    for (size_t i = 0; i < sizeof coco / sizeof coco[0]; i++) {
        snprintf(env, sizeof env, "MASKD_NET_LAYOUT=nhwc %s", coco[i]);
        checked += check_fp16_model(&models[1], env);
    }
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        snprintf(env, sizeof env, "MASKD_NET_LAYOUT=nhwc %s", tiny[i]);
        checked += check_fp16_model(&models[4], env);
    }
    if (!checked)
        skip();
}

/* ---- the stock large cfgs with random weights ------------------------------------------------------------ */

/* Letterboxed images/dog.jpg (darknet mode) as a w x h network input, on the host. */
static mk_image_t photo_input(int w, int h)
{
    char path[4096];
    mk_image_t src = {0}, dst = mk_image_desc_planar(w, h, 3, MK_F32);
    if (!tu_data_path(path, sizeof path, "images/dog.jpg"))
        skip();
    TU_OK(mk_imageio_load(path, MK_FMT_BGR, &src));
    TU_OK(mk_image_alloc(NULL, &dst, MK_MEM_HOST));
    TU_OK(mk_letterbox(cpu, &src, &dst, MK_LETTERBOX_DARKNET, NULL));
    mk_image_free(NULL, &src);
    return dst;
}

/* yolov3, yolov3-spp, yolov4 and yolov4-tiny-3l at 416x416 with random weights: CUDA FP32 against the CPU. Random weights let activations grow along the residual chains (to ~1e6 in yolov3),
 * so the bound is relative: 1e-3 of the largest value entering the yolo layer (that bounds the raw w, h entries'
 * error, and the logistic ones' through the logistic's slope <= 1/4). FP16 must load and run; its values are not
 * compared (those activations overflow half). */
static void test_big_random(void **state)
{
    (void)state;
    const struct {
        const char *cfg;
        int size;
    } cases[] = {{"models/cfg/yolov3.cfg", 416},
                 {"models/cfg/yolov3-spp.cfg", 416},
                 {"models/cfg/yolov4.cfg", 416},
                 {"models/cfg/yolov4-tiny-3l.cfg", 416}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[4096];
        if (!tu_data_path(cfg, sizeof cfg, cases[i].cfg))
            skip();
        int s = cases[i].size;
        mk_image_t in = photo_input(s, s);
        mk_net_t *g = NULL, *c = NULL, *h = NULL;
        outs_t og = {0}, oc = {0}, oh = {0};
        TU_OK(load_net(gpu, cfg, NULL, s, s, 0, NULL, &g));
        TU_OK(load_net(cpu, cfg, NULL, s, s, 0, NULL, &c));
        run(g, gpu, &in, ODD_PITCH, &og);
        run(c, cpu, &in, 0, &oc);
        int bad = 0;
        for (int k = 0; k < og.n; k++) {
            const mk_layer_t *yl = &c->layers[c->yolo[k]];
            double scale = max_abs(c->layers[yl->input].output, mk_layer_out_size(&c->layers[yl->input]));
            scale = scale > 1 ? scale : 1;
            double d = max_diff(og.out[k], oc.out[k], og.count[k]);
            print_message("%s %dx%d yolo%d: CUDA FP32 vs CPU max|diff| %.3g, %.3g of the yolo input's max %.3g\n",
                          cases[i].cfg, s, s, k, d, d / scale, scale);
            bad |= !(d <= TOL_FP32 * scale);
        }
        if (bad) {
            diagnose(cases[i].cfg, cfg, NULL, s, s, 0, NULL, &in, TOL_FP32, 1);
            fail_msg("%s: CUDA FP32 differs from the CPU (see the self-check above)", cases[i].cfg);
        }
        TU_OK(load_net(gpu, cfg, NULL, s, s, 1, NULL, &h));
        run(h, gpu, &in, 0, &oh);
        assert_int_equal(oh.n, og.n);
        outs_free(&og);
        outs_free(&oc);
        outs_free(&oh);
        mk_net_destroy(g);
        mk_net_destroy(c);
        mk_net_destroy(h);
        mk_image_free(NULL, &in);
    }
}

/* ---- CUDA graph, repeated passes, input pitch ------------------------------------------------------------ */

/* Bit for bit: graph replay = layer-by-layer launches; a pass is not affected by the one before (A, B, A); the
 * input pitch does not matter. `fp16` < 0: FP32 and FP16. Returns 0 when the model's data is absent. */
static int check_replay(const model_t *m, int fp16, const char *env)
{
    char cfg[4096], weights[4096];
    ref_t *refs;
    int nref;
    if (!model_data(m, cfg, weights, &refs, &nref)) {
        free(refs);
        return 0;
    }
    assert_true(nref >= 2);
    mk_image_t a = read_input(refs[0].input, 3, refs[0].net_w, refs[0].net_h);
    mk_image_t b = read_input(refs[1].input, 3, refs[1].net_w, refs[1].net_h);
    for (int half = fp16 < 0 ? 0 : fp16; half <= (fp16 < 0 ? 1 : fp16); half++) {
        char what[256];
        snprintf(what, sizeof what, "%s %s%s%s", m->name, half ? "FP16" : "FP32", env ? " " : "", env ? env : "");
        mk_net_t *net = NULL;
        outs_t a1 = {0}, b1 = {0}, a2 = {0}, a3 = {0}, e1 = {0}, e2 = {0}, a4 = {0};
        TU_OK(load_net(gpu, cfg, weights, refs[0].net_w, refs[0].net_h, half, env, &net));
        expect_impls(net, env);
        TU_OK(mk_net_cuda_set_graph(net, 1)); /* the graph exists (captured at load) */
        run(net, gpu, &a, 0, &a1);
        run(net, gpu, &b, 0, &b1);
        run(net, gpu, &a, ODD_PITCH, &a2);
        run(net, gpu, &a, WIDE_PITCH, &a3);
        assert_outs_equal(&a1, &a2, what);
        assert_outs_equal(&a1, &a3, what);
        TU_OK(mk_net_cuda_set_graph(net, 0));
        run(net, gpu, &a, 0, &e1);
        run(net, gpu, &b, ODD_PITCH, &e2);
        assert_outs_equal(&a1, &e1, what);
        assert_outs_equal(&b1, &e2, what);
        TU_OK(mk_net_cuda_set_graph(net, 1));
        run(net, gpu, &a, 0, &a4);
        assert_outs_equal(&a1, &a4, what);
        print_message("%s: graph replay, layer-by-layer passes, A-B-A and three input pitches: identical\n", what);
        outs_free(&a1);
        outs_free(&b1);
        outs_free(&a2);
        outs_free(&a3);
        outs_free(&e1);
        outs_free(&e2);
        outs_free(&a4);
        mk_net_destroy(net);
    }
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    free(refs);
    return 1;
}

/* FP32 and FP16, on a model with depthwise convolutions and shortcuts, one with route groups, and the person model;
 * FP16 with split-K (its partial sums and counters) and with the fused depthwise + pointwise kernels; both with the
 * input queued before the graph, every route a kernel and no maxpool or upsample inside a route. */
static void test_graph_replay(void **state)
{
    (void)state;
    int checked = check_replay(&models[0], -1, NULL);
    checked += check_replay(&models[1], -1, NULL);
    checked += check_replay(&models[4], -1, NULL);
    checked += check_replay(&models[4], 1, "MASKD_NET_LAYOUT=nhwc MASKD_NET_CONV=gemm64x64 MASKD_NET_SPLITK=4");
    checked += check_replay(&models[1], 1, "MASKD_NET_LAYOUT=nhwc MASKD_NET_FUSE=1");
    checked += check_replay(&models[1], -1, "MASKD_NET_INPUT_NODE=0 MASKD_NET_VIEWS=0 MASKD_NET_ROUTE_FUSE=0");
    if (!checked)
        skip();
}

/* ---- states and errors ----------------------------------------------------------------------------------- */

static void test_states(void **state)
{
    (void)state;
    const model_t *m = &models[0];
    char cfg[4096], weights[4096];
    if (!tu_data_path(cfg, sizeof cfg, m->cfg) || !tu_data_path(weights, sizeof weights, m->weights))
        skip();
    mk_net_t *net = NULL;
    assert_int_equal(load_net(gpu, cfg, weights, 0, 0, 1, "MASKD_NET_LAYOUT=chwn", &net), MK_EINVAL);
    assert_int_equal(load_net(gpu, cfg, weights, 0, 0, 0, "MASKD_NET_DEPTHWISE=fast", &net), MK_EINVAL);
    assert_int_equal(load_net(gpu, cfg, weights, 0, 0, 0, "MASKD_NET_DIRECT_MFLOPS=-1", &net), MK_EINVAL);
    assert_int_equal(load_net(gpu, cfg, weights, 0, 0, 1, "MASKD_NET_SPLITK=0", &net), MK_EINVAL);
    assert_int_equal(load_net(gpu, cfg, weights, 0, 0, 1, "MASKD_NET_FUSE=2", &net), MK_EINVAL);
    TU_OK(load_net(gpu, cfg, weights, 0, 0, 0, NULL, &net));
    mk_image_t host = mk_net_input_desc(net);
    TU_OK(mk_image_alloc(NULL, &host, MK_MEM_HOST));
    TU_OK(mk_image_memset(NULL, &host, 0));
    assert_int_equal(mk_net_forward(net, &host), MK_EINVAL); /* host memory on a CUDA network */
    outs_t o = {0};
    run(net, gpu, &host, 0, &o);
    /* The yolo output is kept and equals what mk_net_yolo_read gives; the convolution feeding it is fused into
     * the yolo kernel, so its own output does not exist. */
    int yi = net->yolo[0];
    float *buf = malloc(o.count[0] * sizeof(float));
    assert_non_null(buf);
    TU_OK(mk_net_cuda_layer_read(net, yi, buf));
    assert_memory_equal(buf, o.out[0], o.count[0] * sizeof(float));
    assert_int_equal(mk_net_cuda_layer_read(net, net->layers[yi].input, buf), MK_ESTATE);
    assert_int_equal(mk_net_cuda_layer_read(net, net->n_layers, buf), MK_ERANGE);
    char name[64];
    assert_int_equal(mk_net_cuda_conv_impl(net, yi, name, sizeof name), MK_EINVAL); /* not a convolution */
    free(buf);
    outs_free(&o);
    mk_image_free(NULL, &host);
    mk_net_destroy(net);
}

int main(void)
{
    int start = tu_cuda_main("CUDA Darknet tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_reference), cmocka_unit_test(test_fp32_variants),
        cmocka_unit_test(test_fp32_layers),    cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_fp16_kernels),   cmocka_unit_test(test_cudnn_option),
        cmocka_unit_test(test_big_random),     cmocka_unit_test(test_graph_replay),
        cmocka_unit_test(test_states),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}

#else

int main(void)
{
    printf("SKIP: CUDA Darknet tests need a build with the CUDA backend\n");
    return TU_SKIP_CODE;
}

#endif
