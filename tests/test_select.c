/* test_select: the box choice of the pipeline — class sets (table), the choice among detections (minimum score,
 * class filter, preferring the previous target, track ids), holding the box through missed frames, the fallback
 * rectangle and the region of interest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config.h"
#include "errors.h"
#include "select.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"person", "bicycle", "car", "traffic light"};

static const struct {
    const char *spec;
    int ok;
    int in[6]; /* membership of classes 0..5 */
    int single;
} class_cases[] = {
    {"", 1, {1, 1, 1, 1, 1, 1}, -1},
    {"0", 1, {1, 0, 0, 0, 0, 0}, 0},
    {"2,5", 1, {0, 0, 1, 0, 0, 1}, -1},
    {" 3 , 1 ", 1, {0, 1, 0, 1, 0, 0}, -1},
    {"person", 1, {1, 0, 0, 0, 0, 0}, 0},
    {"traffic light,car", 1, {0, 0, 1, 1, 0, 0}, -1},
    {"person,0", 1, {1, 0, 0, 0, 0, 0}, 0},
    {"1023", 1, {0, 0, 0, 0, 0, 0}, 1023},
    {"1024", 0, {0}, 0},
    {"dog", 0, {0}, 0},
    {"99999999999", 0, {0}, 0},
};

static void test_classes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof class_cases / sizeof class_cases[0]; i++) {
        mk_class_set_t s;
        int rc = mk_select_classes(class_cases[i].spec, names, 4, &s);
        if (!class_cases[i].ok) {
            if (rc != MK_EINVAL)
                fail_msg("'%s' should be refused", class_cases[i].spec);
            assert_non_null(strstr(mk_err_msg(), "detect.classes"));
            continue;
        }
        if (rc)
            fail_msg("'%s': %s", class_cases[i].spec, mk_err_msg());
        for (int c = 0; c < 6; c++)
            if (mk_select_class_in(&s, c) != class_cases[i].in[c])
                fail_msg("'%s': class %d membership %d", class_cases[i].spec, c, mk_select_class_in(&s, c));
        assert_int_equal(mk_select_class_single(&s), class_cases[i].single);
        assert_false(mk_select_class_in(&s, -1) && !s.all);
    }
    /* Names need a names file. */
    mk_class_set_t s;
    assert_int_equal(mk_select_classes("person", NULL, 0, &s), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "detect.names"));
}

static mk_detection_t det(float x, float y, float w, float h, float prob, int cls)
{
    mk_detection_t d = {x, y, w, h, prob, prob, cls, 0};
    return d;
}

static void test_iou(void **state)
{
    (void)state;
    mk_box_t a = {0, 0, 10, 10}, b = {5, 0, 10, 10}, c = {20, 20, 5, 5}, e = {0, 0, 0, 10};
    assert_true(fabsf(mk_box_iou(&a, &b) - 50.0f / 150.0f) < 1e-6f);
    assert_true(mk_box_iou(&a, &a) == 1.0f);
    assert_true(mk_box_iou(&a, &c) == 0.0f);
    assert_true(mk_box_iou(&a, &e) == 0.0f);
}

static void test_choose(void **state)
{
    (void)state;
    mk_config_t cfg;
    mk_config_defaults(&cfg); /* min_score 0.3, prefer_previous, hold_frames 15 */
    cfg.select.hold_frames = 2;
    mk_class_set_t persons;
    assert_int_equal(mk_select_classes("0", NULL, 0, &persons), 0);
    mk_select_state_t st;
    mk_select_init(&st);
    int chosen;
    mk_box_t box;
    uint32_t track;

    /* The best-scoring person above min_score; other classes and weak boxes do not count. */
    mk_detection_t d1[] = {det(0, 0, 50, 100, 0.9f, 2), det(100, 10, 40, 90, 0.25f, 0), det(200, 20, 40, 80, 0.6f, 0),
                           det(300, 20, 40, 80, 0.5f, 0)};
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d1, 4, &chosen, &box, &track), MK_SELECT_DETECTED);
    assert_int_equal(chosen, 2);
    assert_true(box.x == 200 && box.w == 40);
    assert_int_equal(track, 1);

    /* The previous target is preferred over a better-scoring newcomer, and keeps its track id. */
    mk_detection_t d2[] = {det(0, 0, 40, 80, 0.95f, 0), det(205, 22, 40, 80, 0.4f, 0)};
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d2, 2, &chosen, &box, &track), MK_SELECT_DETECTED);
    assert_int_equal(chosen, 1);
    assert_int_equal(track, 1);
    /* Without the preference, the best score wins, and a box far from the previous one is a new track. */
    cfg.select.prefer_previous = 0;
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d2, 2, &chosen, &box, &track), MK_SELECT_DETECTED);
    assert_int_equal(chosen, 0);
    assert_int_equal(track, 2);
    cfg.select.prefer_previous = 1;

    /* Nothing detected: the box is held for hold_frames frames, then dropped. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mk_select_choose(&st, &cfg, &persons, NULL, 0, &chosen, &box, &track), MK_SELECT_HELD);
        assert_int_equal(chosen, -1);
        assert_true(box.x == 0 && box.w == 40 && box.h == 80);
        assert_int_equal(track, 2);
    }
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d1, 1, &chosen, &box, &track), MK_SELECT_NONE);
    assert_true(box.w == 0 && box.h == 0 && track == 0 && chosen == -1);
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, NULL, 0, &chosen, &box, &track), MK_SELECT_NONE);
    /* A detection after the loss starts a new track; a held box that is found again keeps its track. */
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d2, 1, &chosen, &box, &track), MK_SELECT_DETECTED);
    assert_int_equal(track, 3);
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, NULL, 0, &chosen, &box, &track), MK_SELECT_HELD);
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d2, 1, &chosen, &box, &track), MK_SELECT_DETECTED);
    assert_int_equal(track, 3);
    /* hold_frames 0: no holding at all. */
    cfg.select.hold_frames = 0;
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, NULL, 0, &chosen, &box, &track), MK_SELECT_NONE);
    /* min_score 1 refuses everything below it. */
    cfg.select.min_score = 1;
    assert_int_equal(mk_select_choose(&st, &cfg, &persons, d1, 4, &chosen, &box, &track), MK_SELECT_NONE);
}

static void test_fallback(void **state)
{
    (void)state;
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    mk_box_t b = mk_select_fallback(&cfg, 640, 480);
    assert_true(b.x == 160 && b.w == 320 && b.y == 48 && b.h == 384);
    cfg.select.fallback = (mk_cfg_rect_t){40, 60, 200, 300};
    b = mk_select_fallback(&cfg, 640, 480);
    assert_true(b.x == 40 && b.y == 60 && b.w == 200 && b.h == 300);
    b = mk_select_fallback(&cfg, 100, 100); /* clipped */
    assert_true(b.x == 40 && b.y == 60 && b.w == 60 && b.h == 40);
    cfg.select.fallback = (mk_cfg_rect_t){700, 10, 50, 50};
    b = mk_select_fallback(&cfg, 640, 480); /* outside: empty */
    assert_true(b.w == 0);
}

static void test_roi(void **state)
{
    (void)state;
    int roi[4];
    mk_box_t b = {100, 50, 200, 300};
    assert_int_equal(mk_select_roi(&b, 0.1, 640, 480, 4, roi), 0);
    assert_true(roi[0] == 80 && roi[1] == 20 && roi[2] == 240 && roi[3] == 360);
    assert_int_equal(mk_select_roi(&b, 0, 640, 480, 4, roi), 0);
    assert_true(roi[0] == 100 && roi[1] == 50 && roi[2] == 200 && roi[3] == 300);
    /* Fractions round outwards; the frame clips. */
    mk_box_t f = {10.5f, 20.25f, 30.5f, 40.5f};
    assert_int_equal(mk_select_roi(&f, 0, 640, 480, 4, roi), 0);
    assert_true(roi[0] == 10 && roi[1] == 20 && roi[2] == 31 && roi[3] == 41);
    mk_box_t edge = {-20, 400, 100, 200};
    assert_int_equal(mk_select_roi(&edge, 0.5, 640, 480, 4, roi), 0);
    assert_true(roi[0] == 0 && roi[1] == 300 && roi[2] == 130 && roi[3] == 180);
    /* Too small, or outside. */
    mk_box_t tiny = {5, 5, 2, 2}, out = {700, 500, 10, 10};
    assert_int_equal(mk_select_roi(&tiny, 0, 640, 480, 4, roi), MK_ERANGE);
    assert_int_equal(mk_select_roi(&out, 0.1, 640, 480, 4, roi), MK_ERANGE);
}

/* The region keeps the last one's size while the new one is within 7/8..1 of it, contains the new one and stays in
 * the frame. */
static void test_roi_keep(void **state)
{
    (void)state;
    int none[4] = {0, 0, 0, 0}, prev[4] = {100, 100, 200, 160}, roi[4];
    int a[4] = {110, 120, 190, 150};
    memcpy(roi, a, sizeof roi);
    assert_int_equal(mk_select_roi_keep(none, roi, 640, 480), 0);
    assert_memory_equal(roi, a, sizeof roi);
    assert_int_equal(mk_select_roi_keep(prev, roi, 640, 480), 1);
    /* centred on the new region: 110 - 5, 120 - 5 */
    assert_true(roi[0] == 105 && roi[1] == 115 && roi[2] == 200 && roi[3] == 160);
    /* larger than prev, or below 7/8 of it: unchanged */
    int big[4] = {90, 90, 201, 150}, small[4] = {90, 90, 174, 150};
    memcpy(roi, big, sizeof roi);
    assert_int_equal(mk_select_roi_keep(prev, roi, 640, 480), 0);
    assert_memory_equal(roi, big, sizeof roi);
    memcpy(roi, small, sizeof roi);
    assert_int_equal(mk_select_roi_keep(prev, roi, 640, 480), 0);
    /* at the frame's edges the window moves inside, still containing the new region */
    int left[4] = {0, 0, 180, 150}, right[4] = {460, 330, 180, 150};
    memcpy(roi, left, sizeof roi);
    assert_int_equal(mk_select_roi_keep(prev, roi, 640, 480), 1);
    assert_true(roi[0] == 0 && roi[1] == 0 && roi[2] == 200 && roi[3] == 160);
    memcpy(roi, right, sizeof roi);
    assert_int_equal(mk_select_roi_keep(prev, roi, 640, 480), 1);
    assert_true(roi[0] == 440 && roi[1] == 320 && roi[2] == 200 && roi[3] == 160);
    /* every kept window contains the new region and lies in the frame (random cases) */
    unsigned seed = 7;
    for (int i = 0; i < 2000; i++) {
        seed = seed * 1103515245u + 12345u;
        int W = 50 + (int)(seed >> 8) % 600, H = 50 + (int)(seed >> 12) % 400;
        int p[4] = {0, 0, 8 + (int)(seed >> 3) % (W - 7), 8 + (int)(seed >> 5) % (H - 7)};
        int n[4];
        n[2] = p[2] - (int)(seed >> 7) % (p[2] / 8 + 1);
        n[3] = p[3] - (int)(seed >> 9) % (p[3] / 8 + 1);
        n[0] = (int)(seed >> 11) % (W - n[2] + 1);
        n[1] = (int)(seed >> 13) % (H - n[3] + 1);
        int r[4] = {n[0], n[1], n[2], n[3]};
        assert_int_equal(mk_select_roi_keep(p, r, W, H), 1);
        assert_true(r[2] == p[2] && r[3] == p[3]);
        assert_true(r[0] >= 0 && r[1] >= 0 && r[0] + r[2] <= W && r[1] + r[3] <= H);
        assert_true(r[0] <= n[0] && r[1] <= n[1] && r[0] + r[2] >= n[0] + n[2] && r[1] + r[3] >= n[1] + n[3]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes), cmocka_unit_test(test_iou),  cmocka_unit_test(test_choose),
        cmocka_unit_test(test_fallback), cmocka_unit_test(test_roi),  cmocka_unit_test(test_roi_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
