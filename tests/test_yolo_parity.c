/* test_yolo_parity: decode + NMS on the CUDA backend against the CPU reference — the same detections, bit for bit,
 * in the same order — on Darknet's own outputs (both letterbox modes, filters, low thresholds), on random outputs
 * of many shapes with many candidates and frequent ties, and on one-class lists longer than shared memory holds.
 * The output array is poisoned past the detections and checked. Exits 77 (skipped) without a GPU. */
#include "yolo_testutil.h"

static mk_ctx_t *cpu, *gpu;

enum { GUARD = 4 };

/* Both backends on the same host outputs (uploaded for CUDA); returns the number of detections. */
static int parity_case(const mk_yolo_layer_t *hl, int nl, const mk_letterbox_t *lb, const mk_yolo_params_t *p,
                       int max_out, const char *what)
{
    mk_yolo_layer_t dl[MK_YOLO_MAX_LAYERS];
    mk_image_t imgs[MK_YOLO_MAX_LAYERS];
    size_t len = (size_t)(max_out + GUARD);
    mk_detection_t *a = malloc(len * sizeof *a), *b = malloc(len * sizeof *b);
    assert_true(a && b);
    memset(b, 0x5a, len * sizeof *b);
    TU_OK(mt_yolo_layers_to_ctx(gpu, hl, nl, imgs, dl));
    int na = -1, nb = -1;
    int rc_cpu = mk_yolo_detect(cpu, hl, nl, lb, p, a, max_out, &na);
    int rc_gpu = mk_yolo_detect(gpu, dl, nl, lb, p, b, max_out, &nb);
    if (rc_cpu || rc_gpu)
        fail_msg("%s: CPU %s, CUDA %s (%s)", what, mk_err_name(rc_cpu), mk_err_name(rc_gpu), mk_err_msg());
    if (na != nb)
        fail_msg("%s: CPU %d detections, CUDA %d", what, na, nb);
    for (int i = 0; i < na; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]))
            fail_msg("%s: detection %d: CPU index %d class %d prob %.9g box (%.9g, %.9g, %.9g, %.9g), CUDA index %d "
                     "class %d prob %.9g box (%.9g, %.9g, %.9g, %.9g)",
                     what, i, a[i].index, a[i].class_id, a[i].prob, a[i].x, a[i].y, a[i].w, a[i].h, b[i].index,
                     b[i].class_id, b[i].prob, b[i].x, b[i].y, b[i].w, b[i].h);
    for (const unsigned char *c = (const unsigned char *)(b + nb); c < (const unsigned char *)(b + len); c++)
        if (*c != 0x5a)
            fail_msg("%s: CUDA wrote beyond its %d detections", what, nb);
    for (int k = 0; k < nl; k++)
        mk_image_free(gpu, &imgs[k]);
    free(a);
    free(b);
    return na;
}

/* ---- Darknet's outputs ----------------------------------------------------------------------------------- */

static void reference_case(const ty_ref_t *ref, void *arg)
{
    long *total = arg;
    char what[700];
    mk_yolo_params_t p = ref->p;
    snprintf(what, sizeof what, "%s (darknet letterbox)", ref->name);
    *total += parity_case(ref->layers, ref->cfg.nlayers, &ref->lb, &p, 1000, what);
    mk_letterbox_t warp;
    TU_OK(mk_letterbox_plan(&warp, ref->lb.src_w, ref->lb.src_h, ref->lb.dst_w, ref->lb.dst_h, MK_LETTERBOX_WARP));
    snprintf(what, sizeof what, "%s (warp letterbox)", ref->name);
    *total += parity_case(ref->layers, ref->cfg.nlayers, &warp, &p, 1000, what);
    p.thresh = 0.02f; /* many more candidates and detections */
    snprintf(what, sizeof what, "%s (thresh 0.02)", ref->name);
    *total += parity_case(ref->layers, ref->cfg.nlayers, &ref->lb, &p, 4000, what);
    p.top_k = 5;
    snprintf(what, sizeof what, "%s (thresh 0.02, top 5)", ref->name);
    *total += parity_case(ref->layers, ref->cfg.nlayers, &ref->lb, &p, 4000, what);
    p.top_k = 0;
    p.class_id = 0;
    snprintf(what, sizeof what, "%s (thresh 0.02, class 0)", ref->name);
    *total += parity_case(ref->layers, ref->cfg.nlayers, &ref->lb, &p, 4000, what);
}

static void test_reference(void **state)
{
    (void)state;
    long total = 0;
    int n = ty_for_each_reference(reference_case, &total);
    if (!n)
        skip();
    print_message("yolo parity: %d reference images x 5 settings, %ld detections equal\n", n, total);
    assert_true(total > 1000);
}

/* ---- random outputs -------------------------------------------------------------------------------------- */

static void test_random(void **state)
{
    (void)state;
    tu_rng_t r = {31337};
    long total = 0;
    for (int t = 0; t < 300; t++) {
        /* Up to 4800 boxes and 40 classes, or (one case in ten) up to 400 boxes and 160 classes: every list fits
         * the CPU reference's quadratic NMS in a test's time. */
        int many = t % 10 == 0, nl = many ? 1 : tu_rand_int(&r, 1, 3);
        int classes = many ? tu_rand_int(&r, 81, 160) : tu_rand_int(&r, 1, 40), gmax = many ? 10 : 20;
        int net_w = 32 * tu_rand_int(&r, 2, 20), net_h = t % 3 ? net_w : 32 * tu_rand_int(&r, 2, 20);
        mk_yolo_layer_t l[3];
        for (int k = 0; k < nl; k++) {
            int gw = tu_rand_int(&r, 1, gmax), gh = t % 3 ? gw : tu_rand_int(&r, 1, gmax);
            l[k] = ty_layer(gw, gh, tu_rand_int(&r, 1, 4), classes, net_w, net_h, 5 + 100 * ty_uniform(&r),
                            5 + 100 * ty_uniform(&r));
            for (int a = 1; a < l[k].n; a++) {
                l[k].anchors[2 * a] = 5 + 200 * ty_uniform(&r);
                l[k].anchors[2 * a + 1] = 5 + 200 * ty_uniform(&r);
            }
            ty_fill_random(&l[k], &r, t % 2);
        }
        mk_letterbox_t lb;
        TU_OK(mk_letterbox_plan(&lb, tu_rand_int(&r, 100, 4000), tu_rand_int(&r, 100, 4000), net_w, net_h,
                                t % 4 < 2 ? MK_LETTERBOX_DARKNET : MK_LETTERBOX_WARP));
        mk_yolo_params_t p = mk_yolo_params_default();
        p.thresh = 0.05f * tu_rand_int(&r, 0, 18);
        p.nms = (float[]){0, 0.3f, 0.45f, 0.6f, 0.9f, 1}[tu_rand_int(&r, 0, 5)];
        p.top_k = t % 5 == 0 ? tu_rand_int(&r, 1, 50) : 0;
        p.class_id = t % 7 == 0 ? tu_rand_int(&r, 0, classes - 1) : -1;
        int max_out = t % 6 == 0 ? tu_rand_int(&r, 1, 10) : 20000;
        char what[160];
        snprintf(what, sizeof what, "random %d: %d layers, %d classes, %dx%d %s, thresh %g nms %g top %d class %d", t,
                 nl, classes, net_w, net_h, mk_letterbox_mode_name(lb.mode), (double)p.thresh, (double)p.nms,
                 p.top_k, p.class_id);
        total += parity_case(l, nl, &lb, &p, max_out, what);
        ty_free(l, nl);
    }
    print_message("yolo parity: 300 random cases, %ld detections equal\n", total);
    assert_true(total > 10000);
}

/* One class, every box a candidate: m = 8112 (shared memory beyond the default 48 KB) and m = 48000 (longer than
 * shared memory holds: sorted in global memory). Boxes of random sizes; large ones overlap most others. */
static void test_long_lists(void **state)
{
    (void)state;
    const int grids[2][2] = {{52, 52}, {160, 100}};
    tu_rng_t r = {7};
    for (int g = 0; g < 2; g++) {
        for (int big = 0; big < 2; big++) {
            mk_yolo_layer_t l = ty_layer(grids[g][0], grids[g][1], 3, 1, 32 * grids[g][0] / 4, 32 * grids[g][1] / 4,
                                         30, 30);
            for (int a = 0; a < 3; a++)
                for (int y = 0; y < l.h; y++)
                    for (int x = 0; x < l.w; x++) {
                        float s = big ? 2.5f + ty_uniform(&r) : 2 * ty_uniform(&r) - 1;
                        float ties = (float)tu_rand_int(&r, 1, 64) / 64; /* many equal probabilities */
                        ty_set(&l, a, x, y, ty_uniform(&r), ty_uniform(&r), s, s, 0.3f + 0.7f * ties, 1,
                               (const float[]){1});
                    }
            mk_letterbox_t lb;
            TU_OK(mk_letterbox_plan(&lb, 1920, 1080, l.net_w, l.net_h, g ? MK_LETTERBOX_WARP : MK_LETTERBOX_DARKNET));
            mk_yolo_params_t p = mk_yolo_params_default();
            char what[128];
            snprintf(what, sizeof what, "one class, %d candidates, %s boxes", l.w * l.h * 3, big ? "large" : "mixed");
            int n = parity_case(&l, 1, &lb, &p, 60000, what);
            print_message("%s: %d detections equal\n", what, n);
            assert_true(n > 0);
            ty_free(&l, 1);
        }
    }
}

/* Calls alternate between two inputs: nothing of one call leaks into the next. */
static void test_repeated(void **state)
{
    (void)state;
    tu_rng_t r = {5};
    mk_yolo_layer_t a = ty_layer(13, 13, 3, 80, 416, 416, 40, 60), b = ty_layer(26, 26, 3, 80, 416, 416, 20, 30);
    ty_fill_random(&a, &r, 0);
    ty_fill_random(&b, &r, 1);
    mk_letterbox_t lb;
    TU_OK(mk_letterbox_plan(&lb, 1280, 720, 416, 416, MK_LETTERBOX_WARP));
    mk_yolo_params_t p = mk_yolo_params_default();
    for (int i = 0; i < 6; i++)
        parity_case(i % 2 ? &b : &a, 1, &lb, &p, 5000, i % 2 ? "repeated b" : "repeated a");
    ty_free(&a, 1);
    ty_free(&b, 1);
}

/* Host data on a CUDA context is refused (it would fault the kernel), and the context still works after. */
static void test_host_data(void **state)
{
    (void)state;
    mk_yolo_layer_t l = ty_layer(4, 4, 1, 2, 64, 64, 10, 10);
    mk_letterbox_t lb;
    TU_OK(mk_letterbox_plan(&lb, 64, 64, 64, 64, MK_LETTERBOX_DARKNET));
    mk_yolo_params_t p = mk_yolo_params_default();
    mk_detection_t out[4];
    int n;
    assert_int_equal(mk_yolo_detect(gpu, &l, 1, &lb, &p, out, 4, &n), MK_EINVAL);
    ty_set(&l, 0, 1, 1, 0.5f, 0.5f, 0, 0, 0.9f, 2, (const float[]){0.9f, 0.1f});
    assert_int_equal(parity_case(&l, 1, &lb, &p, 4, "after refusing host data"), 1);
    ty_free(&l, 1);
}

int main(void)
{
    int start = tu_cuda_main("CUDA parity tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),   cmocka_unit_test(test_random), cmocka_unit_test(test_long_lists),
        cmocka_unit_test(test_repeated),    cmocka_unit_test(test_host_data),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}
