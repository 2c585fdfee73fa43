/* test_cut: the cut methods (daemon/cut.c) on the test pattern against its exact person mask — the box of the
 * figure plus a margin as the region, the cut at the region's working resolution as the pipeline sizes it. GrabCut
 * must beat the box cut's overlap with the truth, keyframes and the fixed-model frames between them alike, and
 * give the same masks on the CUDA backend (when there is one) as on the CPU. Also: a grey frame and a box too small
 * for GrabCut fall back to the box cut instead of failing; the keyframe policy decides as documented. */
#include "testutil.h"

#include "config.h"
#include "cut.h"
#include "testpattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 640, H = 480 };

typedef struct {
    double iou;     /* of the low-resolution cut, upsampled by pixel replication, with the truth in the region */
    long fg;        /* person pixels of the low-resolution cut */
    mk_image_t low; /* the cut (host) */
} cut_result_t;

/* Runs one frame through a cut: region = the figure's box plus 10% (as select.margin), working scale s. */
static cut_result_t run_frame(mk_ctx_t *ctx, mk_cut_t *cut, const mk_config_t *cfg, mk_testpattern_t *tp,
                              uint64_t seq, int s)
{
    mk_image_t frame = mk_image_desc(W, H, MK_FMT_RGB, MK_U8), truth = mk_image_desc(W, H, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &frame, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &truth, MK_MEM_HOST));
    TU_OK(mk_testpattern_frame(tp, seq, &frame));
    TU_OK(mk_testpattern_mask(tp, seq, &truth));
    int b[4];
    mk_testpattern_box(tp, seq, b);
    int mx = b[2] / 10, my = b[3] / 10;
    int rx = b[0] - mx < 0 ? 0 : b[0] - mx, ry = b[1] - my < 0 ? 0 : b[1] - my;
    int rw = (b[0] + b[2] + mx > W ? W : b[0] + b[2] + mx) - rx, rh = (b[1] + b[3] + my > H ? H : b[1] + b[3] + my) - ry;
    mk_image_t roi = mk_image_desc(rw, rh, MK_FMT_RGB, MK_U8), low = mk_image_desc((rw + s - 1) / s, (rh + s - 1) / s,
                                                                                        MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(ctx, &roi, mk_ctx_mem(ctx)));
    TU_OK(mk_image_alloc(ctx, &low, mk_ctx_mem(ctx)));
    mk_image_t view = frame;
    view.data = (uint8_t *)frame.data + (size_t)ry * frame.pitch + (size_t)rx * 3;
    view.width = rw;
    view.height = rh;
    view.owned = 0;
    TU_OK(mk_image_copy(ctx, &roi, &view));
    mk_box_t box = {(float)(b[0] - rx), (float)(b[1] - ry), (float)b[2], (float)b[3]};
    TU_OK(mk_cut_run(cut, &roi, &box, cfg, &low));
    cut_result_t r = {0};
    r.low = mk_image_desc(low.width, low.height, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &r.low, MK_MEM_HOST));
    TU_OK(mk_image_copy(ctx, &r.low, &low));
    TU_OK(mk_ctx_sync(ctx));
    long inter = 0, uni = 0;
    for (int y = 0; y < rh; y++)
        for (int x = 0; x < rw; x++) {
            int t = ((const uint8_t *)mk_image_row(&truth, 0, ry + y))[rx + x] >= 128;
            int c = ((const uint8_t *)mk_image_row(&r.low, 0, y / s))[x / s] >= 128;
            inter += t && c;
            uni += t || c;
        }
    for (int y = 0; y < r.low.height; y++)
        for (int x = 0; x < r.low.width; x++)
            r.fg += ((const uint8_t *)mk_image_row(&r.low, 0, y))[x] >= 128;
    r.iou = uni ? (double)inter / (double)uni : 0.0;
    mk_image_free(ctx, &roi);
    mk_image_free(ctx, &low);
    mk_image_free(NULL, &frame);
    mk_image_free(NULL, &truth);
    return r;
}

/* Mean IoU over frames 0, 7, 14, ... (n frames) of one method at scale s; the cuts are kept in out (may be NULL). */
static double mean_iou(mk_ctx_t *ctx, int method, int keyframe, int s, int n, mk_image_t *out)
{
    mk_testpattern_t *tp;
    TU_OK(mk_testpattern_create(W, H, 30, &tp));
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    cfg.grabcut.keyframe = keyframe;
    mk_cut_t *cut;
    TU_OK(mk_cut_create(ctx, method, &cut));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        cut_result_t r = run_frame(ctx, cut, &cfg, tp, (uint64_t)i * 7, s);
        sum += r.iou;
        if (out)
            out[i] = r.low;
        else
            mk_image_free(NULL, &r.low);
    }
    mk_cut_destroy(cut);
    mk_testpattern_destroy(tp);
    return sum / n;
}

static void test_grabcut_beats_box(void **state)
{
    (void)state;
    double box = mean_iou(tu_cpu, MK_CFG_CUT_BOX, MK_CFG_KEYFRAME_ALWAYS, 2, 6, NULL);
    double key = mean_iou(tu_cpu, MK_CFG_CUT_GRABCUT, MK_CFG_KEYFRAME_ALWAYS, 2, 6, NULL);
    double fixed = mean_iou(tu_cpu, MK_CFG_CUT_GRABCUT, MK_CFG_KEYFRAME_INTERVAL, 2, 6, NULL);
    printf("test pattern, region at 1/2, mean IoU with the truth: box %.4f, grabcut keyframes %.4f, grabcut one "
           "keyframe + fixed-model cuts %.4f\n", box, key, fixed);
    if (!(key > box + 0.05 && key > 0.85))
        fail_msg("GrabCut keyframes: IoU %.4f, the box cut %.4f", key, box);
    if (!(fixed > box + 0.05 && fixed > 0.8))
        fail_msg("GrabCut fixed-model cuts: IoU %.4f, the box cut %.4f", fixed, box);
}

/* A grey region and a box of a few working pixels: the frame gets the box cut, and the call succeeds. */
static void test_grabcut_fallbacks(void **state)
{
    (void)state;
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    mk_cut_t *gc, *bx;
    TU_OK(mk_cut_create(tu_cpu, MK_CFG_CUT_GRABCUT, &gc));
    TU_OK(mk_cut_create(tu_cpu, MK_CFG_CUT_BOX, &bx));
    mk_image_t grey = tu_random_image(3, 64, 64, MK_FMT_GRAY), a = mk_image_desc(32, 32, MK_FMT_GRAY, MK_U8),
               b = mk_image_desc(32, 32, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &a, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &b, MK_MEM_HOST));
    mk_box_t box = {16, 16, 32, 32};
    TU_OK(mk_cut_run(gc, &grey, &box, &cfg, &a));
    TU_OK(mk_cut_run(bx, &grey, &box, &cfg, &b));
    for (int y = 0; y < 32; y++)
        assert_memory_equal(mk_image_row(&a, 0, y), mk_image_row(&b, 0, y), 32);
    mk_image_t rgb = tu_random_image(4, 64, 64, MK_FMT_RGB);
    mk_box_t tiny = {30, 30, 2, 2};
    TU_OK(mk_cut_run(gc, &rgb, &tiny, &cfg, &a));
    TU_OK(mk_cut_run(bx, &rgb, &tiny, &cfg, &b));
    for (int y = 0; y < 32; y++)
        assert_memory_equal(mk_image_row(&a, 0, y), mk_image_row(&b, 0, y), 32);
    /* a mask that is no integer reduction of the region */
    mk_image_t odd = mk_image_desc(30, 32, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &odd, MK_MEM_HOST));
    assert_int_equal(mk_cut_run(gc, &rgb, &box, &cfg, &odd), MK_EINVAL);
    mk_image_free(NULL, &odd);
    mk_image_free(NULL, &rgb);
    mk_image_free(NULL, &grey);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    mk_cut_destroy(gc);
    mk_cut_destroy(bx);
}

/* GrabCut's keyframe policy, frame by frame: adaptive keyframes compare the box in frame pixels. A box that
 * jitters by a pixel, with a region (and so a working size) a few pixels smaller, keeps the model; a box that
 * moved across the frame learns anew although its place inside its region is the same; `always` learns every
 * frame; `interval` N every N frames. */
static void test_keyframe_policy(void **state)
{
    (void)state;
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    assert_int_equal(cfg.grabcut.keyframe, MK_CFG_KEYFRAME_ADAPTIVE);
    mk_cut_t *gc;
    mk_cut_work_t *w;
    TU_OK(mk_cut_create(tu_cpu, MK_CFG_CUT_GRABCUT, &gc));
    TU_OK(mk_cut_work_create(tu_cpu, &w));
    /* noise with little red around a red square inside the box: something for the colour models to tell apart */
    mk_image_t img = tu_random_image(11, 96, 96, MK_FMT_RGB), small = img;
    for (int y = 0; y < 96; y++) {
        uint8_t *p = mk_image_row(&img, 0, y);
        for (int x = 0; x < 96; x++) {
            int in = x >= 24 && x < 56 && y >= 24 && y < 56;
            p[3 * x] = (uint8_t)(p[3 * x] / 4 + (in ? 192 : 0));
            if (in)
                p[3 * x + 1] /= 4;
        }
    }
    small.width = small.height = 94; /* a view: the region a little smaller */
    small.owned = 0;
    mk_image_t low48 = mk_image_desc(48, 48, MK_FMT_GRAY, MK_U8), low47 = mk_image_desc(47, 47, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &low48, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &low47, MK_MEM_HOST));
    const mk_box_t in_roi = {20, 20, 40, 40};
    const struct {
        const mk_image_t *roi;
        mk_image_t *low;
        mk_box_t frame_box;
        int policy, interval, key;
    } seq[] = {
        {&img, &low48, {100, 100, 40, 40}, MK_CFG_KEYFRAME_ADAPTIVE, 30, 1},   /* no model yet */
        {&small, &low47, {101, 99, 41, 40}, MK_CFG_KEYFRAME_ADAPTIVE, 30, 0},  /* jitter, other working size */
        {&img, &low48, {102, 101, 40, 41}, MK_CFG_KEYFRAME_ADAPTIVE, 30, 0},
        {&img, &low48, {300, 100, 40, 40}, MK_CFG_KEYFRAME_ADAPTIVE, 30, 1},   /* moved: same place in its region */
        {&img, &low48, {300, 100, 40, 40}, MK_CFG_KEYFRAME_ALWAYS, 30, 1},
        {&img, &low48, {300, 100, 40, 40}, MK_CFG_KEYFRAME_INTERVAL, 2, 0},
        {&img, &low48, {300, 100, 40, 40}, MK_CFG_KEYFRAME_INTERVAL, 2, 1},
        {&img, &low48, {500, 300, 40, 40}, MK_CFG_KEYFRAME_INTERVAL, 2, 0},    /* interval ignores the box */
    };
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        cfg.grabcut.keyframe = seq[i].policy;
        cfg.grabcut.keyframe_interval = seq[i].interval;
        int key = -1;
        TU_OK(mk_cut_run_frame(gc, w, i, seq[i].roi, &in_roi, &seq[i].frame_box, &cfg, seq[i].low, &key));
        if (key != seq[i].key)
            fail_msg("frame %zu: keyframe %d, expected %d", i, key, seq[i].key);
        long fg = 0;
        for (int y = 0; y < seq[i].low->height; y++)
            for (int x = 0; x < seq[i].low->width; x++)
                fg += ((const uint8_t *)mk_image_row(seq[i].low, 0, y))[x] >= 128;
        assert_true(fg > 0); /* a cut was made, not nothing */
    }
    mk_image_free(NULL, &low48);
    mk_image_free(NULL, &low47);
    mk_image_free(NULL, &img);
    mk_cut_work_destroy(w);
    mk_cut_destroy(gc);
}

static int same_image(const mk_image_t *a, const mk_image_t *b)
{
    if (a->width != b->width || a->height != b->height)
        return 0;
    for (int y = 0; y < a->height; y++)
        if (memcmp(mk_image_row(a, 0, y), mk_image_row(b, 0, y), (size_t)a->width))
            return 0;
    return 1;
}

/* grabcut.key_iterations: a keyframe with 1 of 3 iterations, then a frame per remaining iteration (the cut with the
 * model so far, then its learning step). On a still scene frame k's cut is that of a keyframe with
 * min(max(k, 1), 3) iterations: the iterations are spread over the frames, not changed. So with grabcut.reseed
 * too (its learning step: a k-means of the cut's labels). */
static void key_iterations_case(mk_ctx_t *ctx, int reseed)
{
    mk_testpattern_t *tp;
    TU_OK(mk_testpattern_create(W, H, 30, &tp));
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    assert_int_equal(cfg.grabcut.key_iterations, 1);
    assert_int_equal(cfg.grabcut.reseed, 0);
    cfg.grabcut.reseed = reseed;
    cfg.grabcut.keyframe = MK_CFG_KEYFRAME_INTERVAL;
    cfg.grabcut.keyframe_interval = 100;
    cut_result_t ref[4];
    for (int n = 1; n <= 3; n++) {
        mk_cut_t *c;
        TU_OK(mk_cut_create(ctx, MK_CFG_CUT_GRABCUT, &c));
        cfg.grabcut.iterations = n;
        cfg.grabcut.key_iterations = 0; /* all on the keyframe */
        ref[n] = run_frame(ctx, c, &cfg, tp, 0, 2);
        mk_cut_destroy(c);
    }
    if (same_image(&ref[1].low, &ref[3].low))
        fail_msg("the test pattern's cut after 1 and 3 iterations is the same: the test would show nothing");
    mk_cut_t *gc;
    TU_OK(mk_cut_create(ctx, MK_CFG_CUT_GRABCUT, &gc));
    cfg.grabcut.iterations = 3;
    cfg.grabcut.key_iterations = 1;
    const int want[] = {1, 1, 2, 3, 3};
    for (int f = 0; f < 5; f++) {
        cut_result_t r = run_frame(ctx, gc, &cfg, tp, 0, 2);
        if (!same_image(&r.low, &ref[want[f]].low))
            fail_msg("frame %d: not the cut of a %d-iteration keyframe", f, want[f]);
        mk_image_free(NULL, &r.low);
    }
    /* 0: every iteration on the keyframe, as before (a new cut object: frame 0 is its keyframe) */
    mk_cut_destroy(gc);
    TU_OK(mk_cut_create(ctx, MK_CFG_CUT_GRABCUT, &gc));
    cfg.grabcut.key_iterations = 0;
    for (int f = 0; f < 3; f++) {
        cut_result_t r = run_frame(ctx, gc, &cfg, tp, 0, 2);
        if (!same_image(&r.low, &ref[3].low))
            fail_msg("key_iterations 0, frame %d: not the cut of a 3-iteration keyframe", f);
        mk_image_free(NULL, &r.low);
    }
    mk_cut_destroy(gc);
    for (int n = 1; n <= 3; n++)
        mk_image_free(NULL, &ref[n].low);
    mk_testpattern_destroy(tp);
}

static void test_key_iterations(void **state)
{
    mk_ctx_t *ctx = *state ? (mk_ctx_t *)*state : tu_cpu;
    key_iterations_case(ctx, 0);
    key_iterations_case(ctx, 1);
}

/* The same on the CUDA backend. */
static void test_key_iterations_cuda(void **state)
{
    char why[256];
    mk_ctx_t *gpu = NULL;
    (void)state;
    if (mk_cuda_device_count(why, sizeof why) < 1 || mk_ctx_create(MK_BACKEND_CUDA, &gpu)) {
        printf("no CUDA device (%s): CPU only\n", why);
        skip();
    }
    void *st = gpu;
    test_key_iterations(&st);
    mk_ctx_destroy(gpu);
}

/* The CUDA backend's GrabCut cuts, keyframes and fixed-model frames, against the CPU's. */
static void test_grabcut_cuda(void **state)
{
    (void)state;
    char why[256];
    mk_ctx_t *gpu = NULL;
    if (mk_cuda_device_count(why, sizeof why) < 1 || mk_ctx_create(MK_BACKEND_CUDA, &gpu)) {
        printf("no CUDA device (%s): CPU only\n", why);
        skip();
    }
    enum { N = 6 };
    for (int kf = 0; kf < 2; kf++) {
        int keyframe = kf ? MK_CFG_KEYFRAME_INTERVAL : MK_CFG_KEYFRAME_ALWAYS;
        mk_image_t c[N], g[N];
        double ic = mean_iou(tu_cpu, MK_CFG_CUT_GRABCUT, keyframe, 2, N, c);
        double ig = mean_iou(gpu, MK_CFG_CUT_GRABCUT, keyframe, 2, N, g);
        long diff = 0, total = 0;
        for (int i = 0; i < N; i++) {
            for (int y = 0; y < c[i].height; y++)
                for (int x = 0; x < c[i].width; x++)
                    diff += ((const uint8_t *)mk_image_row(&c[i], 0, y))[x] !=
                            ((const uint8_t *)mk_image_row(&g[i], 0, y))[x];
            total += (long)c[i].width * c[i].height;
            mk_image_free(NULL, &c[i]);
            mk_image_free(NULL, &g[i]);
        }
        printf("grabcut %s: IoU with the truth CPU %.4f CUDA %.4f, %ld of %ld pixels differ\n",
               kf ? "fixed-model" : "keyframes", ic, ig, diff, total);
        if (diff * 200 > total)
            fail_msg("CPU and CUDA GrabCut cuts differ on %ld of %ld pixels", diff, total);
    }
    mk_ctx_destroy(gpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grabcut_beats_box),
        cmocka_unit_test(test_grabcut_fallbacks),
        cmocka_unit_test(test_keyframe_policy),
        cmocka_unit_test(test_key_iterations),
        cmocka_unit_test(test_key_iterations_cuda),
        cmocka_unit_test(test_grabcut_cuda),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
