/* test_yolo: decode + NMS on the CPU — boxes worked out by hand, the letterbox mappings against Darknet's formulas
 * and mk_letterbox_box_to_src, NMS at its threshold, across classes, on ties and chains, top-k and class filters,
 * an independent straightforward implementation on random outputs, Darknet's own outputs against its detections,
 * bad input; the cfg reader, dumped outputs, names and the detections JSON of masktool. */
#include "yolo_testutil.h"

#include "imageio.h"
#include "masktool_detect.h"
#include "yolo_px.h"

#include <float.h>
#include <unistd.h>

static mk_letterbox_t plan(int sw, int sh, int nw, int nh, mk_letterbox_mode_t mode)
{
    mk_letterbox_t lb;
    TU_OK(mk_letterbox_plan(&lb, sw, sh, nw, nh, mode));
    return lb;
}

/* Entries beyond max_out that detect() checks are left alone. */
#define GUARD 4

/* Runs decode + NMS on the CPU into out[0..max_out) (out has GUARD more entries), checking that nothing beyond
 * n_out is written. */
static int detect(const mk_yolo_layer_t *l, int nl, const mk_letterbox_t *lb, const mk_yolo_params_t *p,
                  mk_detection_t *out, int max_out)
{
    int n = -1;
    memset(out, 0xa5, (size_t)(max_out + GUARD) * sizeof *out);
    TU_OK(mk_yolo_detect(tu_cpu, l, nl, lb, p, out, max_out, &n));
    assert_true(n >= 0 && n <= max_out);
    const unsigned char *end = (const unsigned char *)(out + max_out + GUARD);
    for (const unsigned char *b = (const unsigned char *)(out + n); b < end; b++)
        if (*b != 0xa5)
            fail_msg("decode wrote beyond its %d detections", n);
    return n;
}

static mk_yolo_params_t params(float thresh, float nms)
{
    mk_yolo_params_t p = mk_yolo_params_default();
    p.thresh = thresh;
    p.nms = nms;
    return p;
}

/* ---- arithmetic ------------------------------------------------------------------------------------------ */

/* mk_px_exp against libm: a few ulp of double, and the same float after rounding (as Darknet stores box sizes). */
static void test_exp(void **state)
{
    (void)state;
    double worst = 0;
    int float_diff = 0;
    for (int i = 0; i <= 400000; i++) {
        double x = -40.0 + 80.0 * i / 400000.0;
        double a = mk_px_exp(x), b = exp(x);
        double rel = fabs(a - b) / b;
        worst = rel > worst ? rel : worst;
        float_diff += (float)a != (float)b;
    }
    print_message("mk_px_exp: worst relative error %.3g (2^%.1f); %d of 400001 floats differ from libm's\n", worst,
                  log2(worst), float_diff);
    assert_true(worst <= 4 * DBL_EPSILON);
    assert_int_equal(float_diff, 0);
    assert_true(mk_px_exp(0) == 1.0);
    assert_true(isnan(mk_px_exp(NAN)));
    assert_true(isinf(mk_px_exp(710)) && mk_px_exp(INFINITY) == INFINITY);
    assert_true(mk_px_exp(-746) == 0 && mk_px_exp(-INFINITY) == 0);
    assert_true(fabs(mk_px_exp(709.7) / exp(709.7) - 1) < 4 * DBL_EPSILON);
    assert_true(fabs(mk_px_exp(-700) / exp(-700) - 1) < 4 * DBL_EPSILON);
}

/* Darknet's box_iou on corner boxes written as centre form; the case the seed's list-max IoU got wrong (the box
 * with the larger left edge has the smaller top edge). */
static void test_iou(void **state)
{
    (void)state;
    /* A: (2,0)-(10,10), B: (0,5)-(10,10): intersection (2,5)-(10,10) = 40, union 80 + 50 - 40 = 90. */
    const float a[4] = {6, 5, 8, 10}, b[4] = {5, 7.5f, 10, 5};
    assert_float_equal(mk_px_box_iou(a, b), 40.0 / 90.0, 1e-7);
    assert_float_equal(mk_px_box_iou(b, a), 40.0 / 90.0, 1e-7);
    /* Disjoint, touching and identical boxes. */
    const float c[4] = {20, 5, 4, 4}, d[4] = {12, 5, 4, 10};
    assert_true(mk_px_box_iou(a, c) == 0);
    assert_true(mk_px_box_iou(a, d) == 0); /* d's left edge is a's right edge */
    assert_true(mk_px_box_iou(a, a) == 1);
    /* Empty boxes give 0, not NaN. */
    const float e[4] = {6, 5, 0, 0};
    assert_true(mk_px_box_iou(e, e) == 0);
}

/* ---- decode by hand -------------------------------------------------------------------------------------- */

/* A 2x2 grid on a 64x64 network, one 20x40 anchor, 2 classes, a 64x64 source (the letterbox is the identity). */
static void test_decode_hand(void **state)
{
    (void)state;
    mk_yolo_layer_t l = ty_layer(2, 2, 1, 2, 64, 64, 20, 40);
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = params(0.25f, 0.45f);
    mk_detection_t out[8 + GUARD];
    /* Cell (1, 0): centre ((1 + 0.5) / 2, (0 + 0.25) / 2) * 64 = (48, 8), size 20 x 40: top-left (38, -12). Class 0:
     * 0.9 * 0.8; class 1: 0.09 <= 0.25, dropped. */
    ty_set(&l, 0, 1, 0, 0.5f, 0.25f, 0, 0, 0.9f, 2, (const float[]){0.8f, 0.1f});
    /* Cell (0, 1): centre (8, 56), size 20 * 1.5 x 40 = 30 x 40: top-left (-7, 36). Class 1: 0.5 * 0.6 = 0.3. */
    ty_set(&l, 0, 0, 1, 0.25f, 0.75f, logf(1.5f), 0, 0.5f, 2, (const float[]){0.2f, 0.6f});
    /* Cell (1, 1): objectness exactly at the threshold (not above it): no box. */
    ty_set(&l, 0, 1, 1, 0.5f, 0.5f, 0, 0, 0.25f, 2, (const float[]){1, 1});
    int n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 2);
    assert_int_equal(out[0].class_id, 0);
    assert_int_equal(out[0].index, 1); /* cell 1 (row 0, column 1), anchor 0 */
    assert_true(out[0].prob == 0.9f * 0.8f);
    assert_true(out[0].objectness == 0.9f);
    assert_true(out[0].x == 38 && out[0].y == -12 && out[0].w == 20 && out[0].h == 40);
    assert_int_equal(out[1].class_id, 1);
    assert_int_equal(out[1].index, 2);
    assert_true(out[1].prob == 0.5f * 0.6f);
    assert_float_equal(out[1].x, -7, 1e-4);
    assert_float_equal(out[1].w, 30, 1e-4);
    assert_true(out[1].y == 36 && out[1].h == 40);
    /* A class probability exactly at the threshold does not count either. */
    ty_set(&l, 0, 0, 1, 0.25f, 0.75f, logf(1.5f), 0, 0.5f, 2, (const float[]){0.2f, 0.5f});
    n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].index, 1);
    ty_free(&l, 1);
}

/* A 128x64 source letterboxed into 64x64: one box in the middle of the network, 16x16, in both modes. */
static void test_decode_letterbox(void **state)
{
    (void)state;
    mk_yolo_layer_t l = ty_layer(1, 1, 1, 1, 64, 64, 16, 16);
    mk_yolo_params_t p = params(0.25f, 0.45f);
    mk_detection_t out[4 + GUARD];
    ty_set(&l, 0, 0, 0, 0.5f, 0.5f, 0, 0, 0.9f, 1, (const float[]){1});
    /* darknet: new size 64x32, 16 rows of padding above. Relative to the source: x = 0.5, w = 0.25; y = (0.5 - 0.25)
     * / 0.5 = 0.5, h = 0.25 / 0.5 = 0.5. In pixels: (48, 16) 32 x 32. */
    mk_letterbox_t lb = plan(128, 64, 64, 64, MK_LETTERBOX_DARKNET);
    assert_int_equal(detect(&l, 1, &lb, &p, out, 4), 1);
    assert_true(out[0].x == 48 && out[0].y == 16 && out[0].w == 32 && out[0].h == 32);
    /* warp: scale 0.5, translation (-0.25, 15.75), inverse x -> 2x + 0.5, y -> 2y - 31.5. The network box (24, 24)
     * 16 x 16 becomes (48.5, 16.5) 32 x 32: pixel centres stay aligned. */
    lb = plan(128, 64, 64, 64, MK_LETTERBOX_WARP);
    assert_int_equal(detect(&l, 1, &lb, &p, out, 4), 1);
    assert_true(out[0].x == 48.5f && out[0].y == 16.5f && out[0].w == 32 && out[0].h == 32);
    float box[4] = {24, 24, 16, 16};
    mk_letterbox_box_to_src(&lb, box);
    assert_memory_equal(&out[0].x, box, sizeof box);
    ty_free(&l, 1);
}

/* Darknet's get_yolo_box, correct_yolo_boxes (letter = 1) and draw_detections' pixel box, transcribed with its
 * own types and libm's exp. */
static void darknet_box(const mk_yolo_layer_t *l, int a, int col, int row, int iw, int ih, double px[4])
{
    float bx = (col + *ty_at(l, a, 0, col, row)) / l->w, by = (row + *ty_at(l, a, 1, col, row)) / l->h;
    float bw = exp(*ty_at(l, a, 2, col, row)) * l->anchors[2 * a] / l->net_w;
    float bh = exp(*ty_at(l, a, 3, col, row)) * l->anchors[2 * a + 1] / l->net_h;
    int netw = l->net_w, neth = l->net_h, new_w, new_h;
    if (((float)netw / iw) < ((float)neth / ih)) {
        new_w = netw;
        new_h = (ih * netw) / iw;
    } else {
        new_h = neth;
        new_w = (iw * neth) / ih;
    }
    float deltaw = netw - new_w, deltah = neth - new_h, ratiow = (float)new_w / netw, ratioh = (float)new_h / neth;
    bx = (bx - deltaw / 2. / netw) / ratiow;
    by = (by - deltah / 2. / neth) / ratioh;
    bw *= 1 / ratiow;
    bh *= 1 / ratioh;
    px[0] = (bx - bw / 2.) * iw;
    px[1] = (by - bh / 2.) * ih;
    px[2] = (double)bw * iw;
    px[3] = (double)bh * ih;
}

/* Random boxes through both mappings, for sources of every shape: darknet mode against the transcription above
 * (and, loosely, against the letterbox's own inverse), warp mode bit for bit against mk_letterbox_box_to_src. */
static void test_mappings(void **state)
{
    (void)state;
    const int sizes[][4] = {{640, 424, 320, 320}, {768, 576, 416, 416}, {424, 640, 416, 416}, {333, 777, 320, 320},
                            {1001, 3, 416, 416},  {5, 300, 64, 64},     {640, 480, 416, 256}, {300, 300, 608, 608},
                            {1920, 1080, 320, 192}};
    tu_rng_t r = {99};
    mk_yolo_params_t p = params(0.1f, 0);
    mk_detection_t out[64 + GUARD];
    double worst = 0, worst_inv = 0;
    int exact = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int *z = sizes[s];
        mk_yolo_layer_t l = ty_layer(7, 5, 1, 1, z[2], z[3], 37, 23);
        for (int i = 0; i < 35; i++)
            ty_set(&l, 0, i % 7, i / 7, ty_uniform(&r), ty_uniform(&r), 3 * ty_uniform(&r) - 1.5f,
                   3 * ty_uniform(&r) - 1.5f, 0.9f, 1, (const float[]){1});
        mk_letterbox_t lb = plan(z[0], z[1], z[2], z[3], MK_LETTERBOX_DARKNET);
        int n = detect(&l, 1, &lb, &p, out, 64);
        assert_int_equal(n, 35);
        for (int i = 0; i < n; i++) {
            double want[4], got[4] = {out[i].x, out[i].y, out[i].w, out[i].h};
            darknet_box(&l, 0, out[i].index % 7, out[i].index / 7, z[0], z[1], want);
            for (int k = 0; k < 4; k++) {
                double d = fabs(got[k] - want[k]) / (fabs(want[k]) + 1);
                worst = d > worst ? d : worst;
                exact += got[k] == (float)want[k];
            }
            /* The centre through the letterbox's inverse map (the same transform, other arithmetic). */
            float bx = (out[i].index % 7 + *ty_at(&l, 0, 0, out[i].index % 7, out[i].index / 7)) / 7 * z[2];
            double xs, ys;
            mk_letterbox_to_src(&lb, bx, 0, &xs, &ys);
            double d = fabs(xs - (got[0] + got[2] / 2));
            worst_inv = d > worst_inv ? d : worst_inv;
        }
        /* warp, with raw sizes 0 (exp(0) = 1 exactly): the box is mk_letterbox_box_to_src of the network box. */
        for (int i = 0; i < 35; i++)
            *ty_at(&l, 0, 2, i % 7, i / 7) = *ty_at(&l, 0, 3, i % 7, i / 7) = 0;
        lb = plan(z[0], z[1], z[2], z[3], MK_LETTERBOX_WARP);
        n = detect(&l, 1, &lb, &p, out, 64);
        assert_int_equal(n, 35);
        for (int i = 0; i < n; i++) {
            int col = out[i].index % 7, row = out[i].index / 7;
            float bx = (col + *ty_at(&l, 0, 0, col, row)) / 7, by = (row + *ty_at(&l, 0, 1, col, row)) / 5;
            float w = (float)(37.0 / z[2]) * z[2], h = (float)(23.0 / z[3]) * z[3];
            float box[4] = {bx * z[2] - w / 2, by * z[3] - h / 2, w, h};
            mk_letterbox_box_to_src(&lb, box);
            assert_memory_equal(&out[i].x, box, sizeof box);
        }
        ty_free(&l, 1);
    }
    print_message("darknet mapping: %d of %d values equal to Darknet's formulas (worst relative difference %.3g); "
                  "centre vs the letterbox's inverse %.3g px\n",
                  exact, 9 * 35 * 4, worst, worst_inv);
    assert_int_equal(exact, 9 * 35 * 4);
    assert_true(worst_inv < 1e-3);
}

/* ---- NMS ------------------------------------------------------------------------------------------------- */

/* A 1x1 grid of a 64x64 network with `n` anchors of 16x16 and 2 classes; box k shifted right by dx[k] of a box
 * width (relative to the network: box width 0.25), objectness obj[k], score 1 for class cls[k]. */
static mk_yolo_layer_t nms_layer(int n, const float *dx, const float *obj, const int *cls)
{
    mk_yolo_layer_t l = ty_layer(1, 1, n, 2, 64, 64, 16, 16);
    for (int k = 0; k < n; k++) {
        float s[2] = {cls[k] == 0, cls[k] == 1};
        ty_set(&l, k, 0, 0, 0.5f + 0.25f * dx[k], 0.5f, 0, 0, obj[k], 2, s);
    }
    return l;
}

/* Two equal boxes shifted by d (in box widths) overlap with IoU (1 - d) / (1 + d). */
static void test_nms_threshold(void **state)
{
    (void)state;
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_detection_t out[8 + GUARD];
    /* d = 0.5: IoU exactly 1/3 in float (0.125 * 0.25 / 0.09375): at nms = 1/3 the box stays (Darknet suppresses
     * only above nms), just below it goes. */
    mk_yolo_layer_t l = nms_layer(2, (const float[]){0, 0.5f}, (const float[]){0.9f, 0.8f}, (const int[]){0, 0});
    mk_yolo_params_t p = params(0.25f, 1.0f / 3.0f);
    assert_true(mk_px_box_iou((const float[]){0.5f, 0.5f, 0.25f, 0.25f}, (const float[]){0.625f, 0.5f, 0.25f, 0.25f}) ==
                1.0f / 3.0f);
    assert_int_equal(detect(&l, 1, &lb, &p, out, 8), 2);
    p.nms = nextafterf(1.0f / 3.0f, 0);
    assert_int_equal(detect(&l, 1, &lb, &p, out, 8), 1);
    assert_int_equal(out[0].index, 0);
    ty_free(&l, 1);
    /* IoU 0.453 and 0.447 against nms 0.45. */
    for (int above = 0; above < 2; above++) {
        double iou = above ? 0.453 : 0.447, d = (1 - iou) / (1 + iou);
        l = nms_layer(2, (const float[]){0, (float)d}, (const float[]){0.9f, 0.8f}, (const int[]){0, 0});
        p.nms = 0.45f;
        int n = detect(&l, 1, &lb, &p, out, 8);
        assert_int_equal(n, above ? 1 : 2);
        assert_true(out[0].index == 0 && out[0].prob == 0.9f);
        ty_free(&l, 1);
    }
    /* nms = 0 turns suppression off (Darknet calls do_nms_sort only when nms != 0). */
    l = nms_layer(2, (const float[]){0, 0}, (const float[]){0.9f, 0.8f}, (const int[]){0, 0});
    p.nms = 0;
    assert_int_equal(detect(&l, 1, &lb, &p, out, 8), 2);
    p.nms = 1; /* IoU 1 is not above 1 either */
    assert_int_equal(detect(&l, 1, &lb, &p, out, 8), 2);
    ty_free(&l, 1);
}

static void test_nms_classes(void **state)
{
    (void)state;
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = params(0.25f, 0.45f);
    mk_detection_t out[8 + GUARD];
    /* Nearly the same box in two classes: neither suppresses the other. */
    mk_yolo_layer_t l = nms_layer(2, (const float[]){0, 0.05f}, (const float[]){0.9f, 0.8f}, (const int[]){0, 1});
    int n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 2);
    assert_true(out[0].class_id == 0 && out[1].class_id == 1);
    /* Box 0 also in class 1 (0.9 * 0.5): box 1 (class 1, 0.8) suppresses it there, not in class 0. */
    *ty_at(&l, 0, 6, 0, 0) = 0.5f;
    n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 2);
    assert_true(out[0].index == 0 && out[0].class_id == 0 && out[0].prob == 0.9f);
    assert_true(out[1].index == 1 && out[1].class_id == 1 && out[1].prob == 0.8f);
    /* Apart, box 0 is a detection in both classes. */
    *ty_at(&l, 1, 0, 0, 0) = 2;
    n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 3);
    assert_true(out[0].index == 0 && out[0].class_id == 0 && out[0].prob == 0.9f);
    assert_true(out[1].index == 1 && out[1].class_id == 1 && out[1].prob == 0.8f);
    assert_true(out[2].index == 0 && out[2].class_id == 1 && out[2].prob == 0.9f * 0.5f);
    ty_free(&l, 1);
}

/* Equal probabilities: the lower index goes first and wins, wherever the boxes are; equal probabilities across
 * classes are listed in class order. */
static void test_nms_ties(void **state)
{
    (void)state;
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = params(0.25f, 0.45f);
    mk_detection_t out[8 + GUARD];
    for (int swap = 0; swap < 2; swap++) {
        mk_yolo_layer_t l = nms_layer(3, swap ? (const float[]){0.1f, 0, 3} : (const float[]){0, 0.1f, 3},
                                      (const float[]){0.8f, 0.8f, 0.8f}, (const int[]){0, 0, 1});
        int n = detect(&l, 1, &lb, &p, out, 8);
        assert_int_equal(n, 2);
        assert_true(out[0].index == 0 && out[0].class_id == 0);
        assert_true(out[1].index == 2 && out[1].class_id == 1);
        assert_true(out[0].prob == out[1].prob);
        ty_free(&l, 1);
    }
}

/* Greedy, not all-pairs: A removes B, B would remove C but is gone, so C stays. */
static void test_nms_chain(void **state)
{
    (void)state;
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = params(0.25f, 0.3f);
    mk_detection_t out[8 + GUARD];
    /* IoU(A, B) = IoU(B, C) = 0.7 / 1.3 = 0.54, IoU(A, C) = 0.4 / 1.6 = 0.25. */
    mk_yolo_layer_t l = nms_layer(3, (const float[]){0, 0.3f, 0.6f}, (const float[]){0.9f, 0.8f, 0.7f},
                                  (const int[]){0, 0, 0});
    int n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 2);
    assert_true(out[0].index == 0 && out[1].index == 2);
    ty_free(&l, 1);
}

/* top_k, max_out and the class filter keep the most probable detections, in order. */
static void test_limits(void **state)
{
    (void)state;
    mk_letterbox_t lb = plan(64, 64, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = params(0.25f, 0.45f);
    mk_detection_t out[8 + GUARD];
    mk_yolo_layer_t l = nms_layer(4, (const float[]){0, 2, 4, 6}, (const float[]){0.6f, 0.9f, 0.7f, 0.8f},
                                  (const int[]){0, 1, 0, 1});
    int n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 4);
    const int order[4] = {1, 3, 2, 0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i].index, order[i]);
    p.top_k = 3;
    assert_int_equal(detect(&l, 1, &lb, &p, out, 8), 3);
    assert_int_equal(detect(&l, 1, &lb, &p, out, 2), 2);
    assert_true(out[0].index == 1 && out[1].index == 3);
    p.top_k = 0;
    p.class_id = 0;
    n = detect(&l, 1, &lb, &p, out, 8);
    assert_int_equal(n, 2);
    assert_true(out[0].index == 2 && out[1].index == 0 && out[0].class_id == 0 && out[1].class_id == 0);
    p.class_id = 1;
    assert_int_equal(detect(&l, 1, &lb, &p, out, 1), 1);
    assert_true(out[0].index == 1);
    /* max_out 0: nothing to do, nothing written. */
    n = -1;
    TU_OK(mk_yolo_detect(tu_cpu, &l, 1, &lb, &p, NULL, 0, &n));
    assert_int_equal(n, 0);
    ty_free(&l, 1);
}

/* ---- against a straightforward implementation ------------------------------------------------------------ */

typedef struct {
    float nbox[4], obox[4], obj;
    float *prob;
    int index;
} odet_t;

/* Darknet's steps literally: get_network_boxes over the layers (a det per box with a prob per class), then per
 * class a selection of the remaining most probable (lowest index on ties) and do_nms_sort's loop, then every
 * nonzero (det, class) ordered by probability, class, index. Shares only the per-box arithmetic with the code. */
static int oracle(const mk_yolo_layer_t *layers, int nl, const mk_letterbox_t *lb, const mk_yolo_params_t *p,
                  mk_detection_t *out, int max_out)
{
    int classes = layers[0].classes, nd = 0, idx = 0;
    int total = 0;
    for (int k = 0; k < nl; k++)
        total += layers[k].w * layers[k].h * layers[k].n;
    odet_t *d = calloc((size_t)total, sizeof *d);
    for (int k = 0; k < nl; k++) {
        const mk_yolo_layer_t *l = &layers[k];
        for (int cell = 0; cell < l->w * l->h; cell++)
            for (int a = 0; a < l->n; a++, idx++) {
                int col = cell % l->w, row = cell / l->w;
                float obj = *ty_at(l, a, 4, col, row);
                if (!(obj > p->thresh))
                    continue;
                float b[4];
                mk_px_yolo_box(*ty_at(l, a, 0, col, row), *ty_at(l, a, 1, col, row), *ty_at(l, a, 2, col, row),
                               *ty_at(l, a, 3, col, row), col, row, l->w, l->h, l->anchors[2 * a],
                               l->anchors[2 * a + 1], l->net_w, l->net_h, b);
                mk_px_yolo_place(lb, b, d[nd].nbox, d[nd].obox);
                d[nd].obj = obj;
                d[nd].index = idx;
                d[nd].prob = calloc((size_t)classes, sizeof(float));
                for (int c = 0; c < classes; c++) {
                    float pr = obj * *ty_at(l, a, 5 + c, col, row);
                    d[nd].prob[c] = pr > p->thresh && (p->class_id < 0 || p->class_id == c) ? pr : 0;
                }
                nd++;
            }
    }
    int *order = malloc((size_t)(nd ? nd : 1) * sizeof *order);
    for (int c = 0; c < classes && p->nms > 0; c++) {
        for (int i = 0; i < nd; i++)
            order[i] = i;
        for (int i = 0; i < nd; i++) { /* selection sort: probability down, then index up */
            int best = i;
            for (int j = i + 1; j < nd; j++)
                if (d[order[j]].prob[c] > d[order[best]].prob[c] ||
                    (d[order[j]].prob[c] == d[order[best]].prob[c] && d[order[j]].index < d[order[best]].index))
                    best = j;
            int t = order[i];
            order[i] = order[best];
            order[best] = t;
        }
        for (int i = 0; i < nd; i++) {
            if (d[order[i]].prob[c] == 0)
                continue;
            for (int j = i + 1; j < nd; j++)
                if (mk_px_box_iou(d[order[i]].nbox, d[order[j]].nbox) > p->nms)
                    d[order[j]].prob[c] = 0;
        }
    }
    int n = 0;
    for (;;) { /* repeatedly take the first remaining (det, class) in output order */
        int bi = -1, bc = -1;
        for (int i = 0; i < nd; i++)
            for (int c = 0; c < classes; c++) {
                if (d[i].prob[c] == 0)
                    continue;
                if (bi < 0 || d[i].prob[c] > d[bi].prob[bc] ||
                    (d[i].prob[c] == d[bi].prob[bc] && (c < bc || (c == bc && d[i].index < d[bi].index)))) {
                    bi = i;
                    bc = c;
                }
            }
        if (bi < 0 || n == max_out)
            break;
        mk_detection_t *o = &out[n++];
        o->x = d[bi].obox[0];
        o->y = d[bi].obox[1];
        o->w = d[bi].obox[2];
        o->h = d[bi].obox[3];
        o->prob = d[bi].prob[bc];
        o->objectness = d[bi].obj;
        o->class_id = bc;
        o->index = d[bi].index;
        d[bi].prob[bc] = 0;
    }
    for (int i = 0; i < nd; i++)
        free(d[i].prob);
    free(d);
    free(order);
    return n;
}

static void test_random_vs_oracle(void **state)
{
    (void)state;
    tu_rng_t r = {4242};
    mk_detection_t *a = malloc((4096 + GUARD) * sizeof *a), *b = malloc(4096 * sizeof *b);
    long total = 0;
    for (int t = 0; t < 120; t++) {
        int nl = tu_rand_int(&r, 1, 3), classes = tu_rand_int(&r, 1, 12), net = 32 * tu_rand_int(&r, 2, 13);
        int net_h = t % 3 ? net : 32 * tu_rand_int(&r, 2, 13);
        mk_yolo_layer_t l[3];
        for (int k = 0; k < nl; k++) {
            int gw = tu_rand_int(&r, 1, 9), gh = t % 3 ? gw : tu_rand_int(&r, 1, 9);
            l[k] = ty_layer(gw, gh, tu_rand_int(&r, 1, 4), classes, net, net_h, 10 + 10 * ty_uniform(&r),
                            10 + 30 * ty_uniform(&r));
            ty_fill_random(&l[k], &r, t % 2);
        }
        mk_letterbox_t lb = plan(tu_rand_int(&r, 100, 2000), tu_rand_int(&r, 100, 2000), net, net_h,
                                 t % 4 < 2 ? MK_LETTERBOX_DARKNET : MK_LETTERBOX_WARP);
        mk_yolo_params_t p = params(0.05f * tu_rand_int(&r, 0, 12), (float[]){0, 0.3f, 0.45f, 0.7f}[t % 4]);
        p.top_k = t % 5 == 0 ? tu_rand_int(&r, 1, 20) : 0;
        p.class_id = t % 7 == 0 ? tu_rand_int(&r, 0, classes - 1) : -1;
        int max_out = t % 6 == 0 ? tu_rand_int(&r, 1, 10) : 4096;
        int lim = p.top_k && p.top_k < max_out ? p.top_k : max_out;
        int n = detect(l, nl, &lb, &p, a, max_out), m = oracle(l, nl, &lb, &p, b, lim);
        if (n != m)
            fail_msg("case %d: %d detections, the straightforward implementation %d", t, n, m);
        for (int i = 0; i < n; i++)
            if (memcmp(&a[i], &b[i], sizeof a[i]))
                fail_msg("case %d: detection %d differs: index %d class %d prob %.9g vs index %d class %d prob %.9g",
                         t, i, a[i].index, a[i].class_id, a[i].prob, b[i].index, b[i].class_id, b[i].prob);
        total += n;
        ty_free(l, nl);
    }
    print_message("random outputs: 120 cases, %ld detections equal to the straightforward implementation\n", total);
    assert_true(total > 1000);
    free(a);
    free(b);
}

/* ---- Darknet's own outputs ------------------------------------------------------------------------------- */

/* Every reference box matched by one of ours of its class with IoU >= 0.98 and |prob difference| <= 0.01, one to
 * one, and no box of ours left over. */
static void check_reference(const ty_ref_t *ref, void *arg)
{
    mk_detection_t out[1000 + GUARD];
    int n = detect(ref->layers, ref->cfg.nlayers, &ref->lb, &ref->p, out, 1000);
    ty_match_reference(ref, out, n, arg);
}

static void test_darknet_reference(void **state)
{
    (void)state;
    ty_ref_stats_t st = {0, 0, 1, 0};
    int count = ty_for_each_reference(check_reference, &st);
    if (!count)
        skip();
    print_message("darknet reference: %d images, %d boxes, worst IoU %.6f, worst |prob diff| %.3g\n", st.images,
                  st.boxes, st.worst_iou, st.worst_prob);
    assert_int_equal(st.images, 22); /* 8 + 7 + 3 + 2 + 2 images of the five models */
    assert_true(st.boxes > 50);
}

/* ---- bad input ------------------------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    mk_yolo_layer_t l[2] = {ty_layer(2, 2, 1, 3, 64, 64, 10, 10), ty_layer(4, 4, 1, 3, 64, 64, 10, 10)};
    mk_letterbox_t lb = plan(100, 50, 64, 64, MK_LETTERBOX_DARKNET);
    mk_yolo_params_t p = mk_yolo_params_default();
    mk_detection_t out[4 + GUARD];
    int n;
    TU_OK(mk_yolo_detect(tu_cpu, l, 2, &lb, &p, out, 4, &n));
    assert_int_equal(mk_yolo_detect(NULL, l, 2, &lb, &p, out, 4, &n), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, NULL, 2, &lb, &p, out, 4, &n), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, NULL, &p, out, 4, &n), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &lb, NULL, out, 4, &n), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &lb, &p, NULL, 4, &n), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &lb, &p, out, 4, NULL), MK_EINVAL);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 0, &lb, &p, out, 4, &n), MK_ERANGE);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, MK_YOLO_MAX_LAYERS + 1, &lb, &p, out, 4, &n), MK_ERANGE);
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &lb, &p, out, -1, &n), MK_ERANGE);
    const struct {
        float thresh, nms;
        int top_k, class_id;
    } bad_p[] = {{-0.1f, 0.45f, 0, -1}, {1, 0.45f, 0, -1}, {NAN, 0.45f, 0, -1}, {0.25f, -0.1f, 0, -1},
                 {0.25f, 1.5f, 0, -1},  {0.25f, NAN, 0, -1}, {0.25f, 0.45f, -1, -1}, {0.25f, 0.45f, 0, 3},
                 {0.25f, 0.45f, 0, -2}};
    for (size_t i = 0; i < sizeof bad_p / sizeof bad_p[0]; i++) {
        mk_yolo_params_t q = {bad_p[i].thresh, bad_p[i].nms, bad_p[i].top_k, bad_p[i].class_id};
        assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &lb, &q, out, 4, &n), MK_ERANGE);
    }
    /* Layers: each field out of range, or disagreeing with layer 0 or the letterbox. */
    for (int f = 0; f < 9; f++) {
        mk_yolo_layer_t b[2] = {l[0], l[1]};
        int want = MK_ERANGE;
        switch (f) {
        case 0: b[1].w = 0; break;
        case 1: b[1].n = MK_YOLO_MAX_ANCHORS + 1; break;
        case 2: b[1].classes = 0; break;
        case 3: b[1].classes = 4, want = MK_EINVAL; break;
        case 4: b[1].net_w = 32, want = MK_EINVAL; break;
        case 5: b[1].anchors[1] = 0; break;
        case 6: b[1].anchors[0] = NAN; break;
        case 7: b[1].data = NULL, want = MK_EINVAL; break;
        default: b[0].net_w = b[1].net_w = 32, want = MK_EINVAL; break; /* the letterbox makes 64x64 */
        }
        int rc = mk_yolo_detect(tu_cpu, b, 2, &lb, &p, out, 4, &n);
        if (rc != want)
            fail_msg("bad layer case %d: got %s (%s), want %s", f, mk_err_name(rc), mk_err_msg(), mk_err_name(want));
    }
    /* Too many boxes in all. */
    mk_yolo_layer_t big = l[0];
    big.w = 513; /* 513 x 512 > 2^18 */
    big.h = 512;
    assert_int_equal(mk_yolo_detect(tu_cpu, &big, 1, &lb, &p, out, 4, &n), MK_ERANGE);
    /* A letterbox that is not a plan of its sizes. */
    mk_letterbox_t bad = lb;
    bad.new_h += 1;
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &bad, &p, out, 4, &n), MK_EINVAL);
    bad = lb;
    bad.mode = (mk_letterbox_mode_t)7;
    assert_int_equal(mk_yolo_detect(tu_cpu, l, 2, &bad, &p, out, 4, &n), MK_EINVAL);
    ty_free(l, 2);
}

/* ---- masktool: cfg reader, dumps, names, JSON ------------------------------------------------------------ */

static void test_cfg_parse(void **state)
{
    (void)state;
    const char *net = "[net]\nwidth=320\nheight=256\n";
    const struct {
        const char *text;
        int rc, n0, classes0, nlayers;
        float anchor_w0, sxy0;
    } cases[] = {
        {"[yolo]\nmask=1,2\nanchors=1,2, 3,4,  5,6\nclasses=7\nnum=3\n", 0, 2, 7, 1, 3, 1},
        {"[convolutional]\nfilters=18\n# comment\n;other\n[yolo]\n mask = 0 \nanchors=9,8\nnum=1\nclasses = 1\n"
         "scale_x_y=1.05\njitter=.3\n[route]\nlayers=-4\n[yolo]\nanchors=1,1,2,2\nnum=2\n",
         0, 1, 1, 2, 9, 1.05f},
        {"[yolo]\nanchors=4,5\n", 0, 1, 20, 1, 4, 1}, /* Darknet's defaults: num 1, classes 20 */
        {"[yolo]\nmask=0\nanchors=1,2,3\nnum=2\n", MK_EFORMAT, 0, 0, 0, 0, 0},          /* 3 values for 2 anchors */
        {"[yolo]\nmask=2\nanchors=1,2,3,4\nnum=2\n", MK_EFORMAT, 0, 0, 0, 0, 0},        /* mask beyond num */
        {"[yolo]\nmask=0\nanchors=1,2\nnum=1\nclasses=x\n", MK_EFORMAT, 0, 0, 0, 0, 0}, /* bad number */
        {"[yolo]\nmask=0,\nanchors=1,2\n", MK_EFORMAT, 0, 0, 0, 0, 0},                   /* trailing comma */
        {"[yolo]\nmask=0\nanchors=1,-2\n", MK_EFORMAT, 0, 0, 0, 0, 0},                   /* negative anchor */
        {"[yolo]\nanchors=1,2\nscale_x_y=0\n", MK_EFORMAT, 0, 0, 0, 0, 0},
        {"[yolo]\nanchors=1,2\nnew_coords=1\n", MK_EUNSUPPORTED, 0, 0, 0, 0, 0},
        {"[yolo]\nanchors=1,2\nclasses=0\n", MK_EFORMAT, 0, 0, 0, 0, 0},
        {"[yolo\nanchors=1,2\n", MK_EFORMAT, 0, 0, 0, 0, 0},
        {"[yolo]\nanchors\n", MK_EFORMAT, 0, 0, 0, 0, 0},
        {"[convolutional]\nfilters=3\n", MK_EFORMAT, 0, 0, 0, 0, 0}, /* no [yolo] */
        {"[yolo]\nmask=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\nanchors=1,2\n", MK_EFORMAT, 0, 0, 0, 0, 0},
    };
    char text[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_yolo_cfg_t cfg;
        snprintf(text, sizeof text, "%s%s", net, cases[i].text);
        int rc = mt_yolo_cfg_parse(text, "t.cfg", &cfg);
        if (rc != cases[i].rc)
            fail_msg("cfg case %zu: got %s (%s), want %s", i, mk_err_name(rc), mk_err_msg(), mk_err_name(cases[i].rc));
        if (rc) {
            assert_non_null(strstr(mk_err_msg(), "t.cfg"));
            continue;
        }
        assert_int_equal(cfg.net_w, 320);
        assert_int_equal(cfg.net_h, 256);
        assert_int_equal(cfg.nlayers, cases[i].nlayers);
        assert_int_equal(cfg.layers[0].n, cases[i].n0);
        assert_int_equal(cfg.layers[0].classes, cases[i].classes0);
        assert_true(cfg.layers[0].anchors[0] == cases[i].anchor_w0);
        assert_true(cfg.layers[0].scale_x_y == cases[i].sxy0);
        assert_true(cfg.layers[0].net_w == 320 && cfg.layers[0].net_h == 256);
    }
    /* The masked anchors, in mask order. */
    mt_yolo_cfg_t cfg;
    TU_OK(mt_yolo_cfg_parse("[net]\nwidth=32\nheight=32\n[yolo]\nmask=2,0\nanchors=1,2,3,4,5,6\nnum=3\n", "m", &cfg));
    assert_true(cfg.layers[0].anchors[0] == 5 && cfg.layers[0].anchors[1] == 6 && cfg.layers[0].anchors[2] == 1 &&
                cfg.layers[0].anchors[3] == 2);
    /* No [net] size; the error names the line. */
    assert_int_equal(mt_yolo_cfg_parse("[yolo]\nanchors=1,2\n", "n", &cfg), MK_EFORMAT);
    assert_int_equal(mt_yolo_cfg_parse("[net]\nwidth=32\nheight=32\n[yolo]\nclasses=1\nmask=1\n", "l", &cfg),
                     MK_EFORMAT);
    assert_non_null(strstr(mk_err_msg(), "l:4"));
    assert_int_equal(mt_yolo_cfg_read("/nonexistent/x.cfg", &cfg), MK_EIO);
}

/* The stock cfgs: as many layers as [yolo] sections, anchors as their masks pick. */
static void test_cfg_real(void **state)
{
    (void)state;
    const char *cfgs[] = {"models/cfg/yolov3-tiny.cfg", "models/cfg/yolov3.cfg",        "models/cfg/yolov4-tiny.cfg",
                          "models/cfg/yolov4.cfg",      "models/cfg/yolov4-tiny-3l.cfg", "models/cfg/yolov3-spp.cfg"};
    char path[4096];
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        if (!tu_data_path(path, sizeof path, cfgs[i]))
            skip();
        mt_yolo_cfg_t cfg;
        TU_OK(mt_yolo_cfg_read(path, &cfg));
        void *text;
        size_t len;
        TU_OK(mk_file_read(path, &text, &len));
        int sections = 0;
        for (const char *s = text; (s = memmem(s, len - (size_t)(s - (const char *)text), "[yolo]", 6)); s += 6)
            sections++;
        free(text);
        assert_int_equal(cfg.nlayers, sections);
        for (int k = 0; k < cfg.nlayers; k++) {
            assert_int_equal(cfg.layers[k].classes, 80);
            assert_true(cfg.layers[k].n == 3);
        }
    }
    /* yolov4: scale_x_y 1.2, 1.1, 1.05; its last layer uses anchors 6..8 (142,110 192,243 459,401). */
    mt_yolo_cfg_t cfg;
    TU_OK(mt_yolo_cfg_read(tu_data_path(path, sizeof path, "models/cfg/yolov4.cfg"), &cfg));
    assert_true(cfg.layers[0].scale_x_y == 1.2f && cfg.layers[1].scale_x_y == 1.1f && cfg.layers[2].scale_x_y == 1.05f);
    assert_true(cfg.layers[2].anchors[0] == 142 && cfg.layers[2].anchors[5] == 401);
    assert_true(cfg.net_w == 608 && cfg.net_h == 608);
}

static void test_dump_load(void **state)
{
    (void)state;
    char dir[4096], prefix[4200], path[4300];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_yolo_XXXXXX", tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/img", dir);
    mt_yolo_cfg_t cfg;
    TU_OK(mt_yolo_cfg_parse("[net]\nwidth=96\nheight=64\n[yolo]\nanchors=1,2\nclasses=2\n[yolo]\nanchors=3,4,5,6\n"
                            "num=2\nclasses=2\n",
                            "d", &cfg));
    /* Layer 0: 6x4 grid (aspect 3:2), 1 anchor; layer 1: 3x2 grid, 2 anchors. */
    size_t n0 = 6 * 4 * 7, n1 = 3 * 2 * 2 * 7;
    float *buf = malloc(n0 * sizeof(float));
    for (size_t i = 0; i < n0; i++)
        buf[i] = (float)i;
    snprintf(path, sizeof path, "%s.yolo0.f32", prefix);
    TU_OK(mk_file_write(path, buf, n0 * sizeof(float)));
    snprintf(path, sizeof path, "%s.yolo1.f32", prefix);
    TU_OK(mk_file_write(path, buf, n1 * sizeof(float)));
    mk_yolo_layer_t l[2];
    TU_OK(mt_yolo_dump_load(&cfg, prefix, l));
    assert_true(l[0].w == 6 && l[0].h == 4 && l[1].w == 3 && l[1].h == 2 && l[1].n == 2);
    assert_true(l[0].data[n0 - 1] == (float)(n0 - 1));
    ty_free(l, 2);
    /* A size that is no grid of the network's aspect. */
    TU_OK(mk_file_write(path, buf, (n1 - 7) * sizeof(float)));
    assert_int_equal(mt_yolo_dump_load(&cfg, prefix, l), MK_EFORMAT);
    unlink(path);
    assert_int_equal(mt_yolo_dump_load(&cfg, prefix, l), MK_EIO);
    snprintf(path, sizeof path, "%s.yolo0.f32", prefix);
    unlink(path);
    rmdir(dir);
    free(buf);
}

static void test_json(void **state)
{
    (void)state;
    char path[4096];
    mt_names_t names = {0};
    if (tu_data_path(path, sizeof path, "models/cfg/coco.names")) {
        TU_OK(mt_names_load(path, &names));
        assert_int_equal(names.n, 80);
        assert_string_equal(mt_names_get(&names, 0), "person");
        assert_string_equal(mt_names_get(&names, 79), "toothbrush");
    }
    assert_null(mt_names_get(&names, 80));
    assert_null(mt_names_get(NULL, 0));
    const mk_detection_t d[2] = {{10.5f, -3.25f, 100.125f, 50, 0.9f, 0.95f, 0, 7},
                                 {1.0f / 3, 2, 3, 4, 0.3f, 0.6f, 200, 8}};
    cJSON *o = mt_detections_json("dog.jpg", 768, 576, "cpu", d, 2, names.n ? &names : NULL);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    o = cJSON_Parse(s);
    free(s);
    assert_string_equal(cJSON_GetObjectItem(o, "image")->valuestring, "dog.jpg");
    assert_int_equal(cJSON_GetObjectItem(o, "width")->valueint, 768);
    assert_int_equal(cJSON_GetObjectItem(o, "height")->valueint, 576);
    assert_string_equal(cJSON_GetObjectItem(o, "backend")->valuestring, "cpu");
    cJSON *dets = cJSON_GetObjectItem(o, "detections");
    assert_int_equal(cJSON_GetArraySize(dets), 2);
    cJSON *a = cJSON_GetArrayItem(dets, 0), *b = cJSON_GetArrayItem(dets, 1);
    assert_int_equal(cJSON_GetObjectItem(a, "class")->valueint, 0);
    if (names.n)
        assert_string_equal(cJSON_GetObjectItem(a, "name")->valuestring, "person");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "name"))); /* class 200: no name */
    /* Printed floats read back as the same floats. */
    assert_true((float)cJSON_GetObjectItem(a, "x")->valuedouble == 10.5f);
    assert_true((float)cJSON_GetObjectItem(a, "y")->valuedouble == -3.25f);
    assert_true((float)cJSON_GetObjectItem(a, "prob")->valuedouble == 0.9f);
    assert_true((float)cJSON_GetObjectItem(a, "objectness")->valuedouble == 0.95f);
    assert_true((float)cJSON_GetObjectItem(b, "x")->valuedouble == 1.0f / 3);
    assert_true((float)cJSON_GetObjectItem(b, "h")->valuedouble == 4);
    cJSON_Delete(o);
    mt_names_free(&names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_iou),
        cmocka_unit_test(test_decode_hand),
        cmocka_unit_test(test_decode_letterbox),
        cmocka_unit_test(test_mappings),
        cmocka_unit_test(test_nms_threshold),
        cmocka_unit_test(test_nms_classes),
        cmocka_unit_test(test_nms_ties),
        cmocka_unit_test(test_nms_chain),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_random_vs_oracle),
        cmocka_unit_test(test_darknet_reference),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cfg_parse),
        cmocka_unit_test(test_cfg_real),
        cmocka_unit_test(test_dump_load),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
