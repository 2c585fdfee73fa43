/* test_shape: the CPU rounded-box fill against the geometry evaluated independently in double precision
 * (rectangles, ellipses, rounded boxes, boxes reaching outside the image), through padded pitches with guard
 * bands, both output types, and bad arguments. */
#include "testutil.h"

#include "shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The definition of shape.h in double: 1 inside, 0 outside, -1 within `tol` of the boundary (not compared). */
static int expected(const mk_rbox_t *b, int x, int y, double tol)
{
    double cx = x + 0.5, cy = y + 0.5;
    double dx = fmin(cx - b->x0, b->x1 - cx), dy = fmin(cy - b->y0, b->y1 - cy);
    if (fabs(cx - b->x0) < tol || fabs(cx - b->x1) < tol || fabs(cy - b->y0) < tol || fabs(cy - b->y1) < tol)
        return -1;
    if (dx < 0 || dy < 0)
        return 0;
    double qx = fmax(0.0, fmax(b->x0 + b->rx - cx, cx - (b->x1 - b->rx)));
    double qy = fmax(0.0, fmax(b->y0 + b->ry - cy, cy - (b->y1 - b->ry)));
    if (qx == 0 || qy == 0)
        return 1;
    double r = (qx / b->rx) * (qx / b->rx) + (qy / b->ry) * (qy / b->ry);
    if (fabs(r - 1) < 1e-4)
        return -1;
    return r <= 1;
}

/* Fills a guarded image of `dtype` and compares every pixel with expected(); returns the inside count. */
static long check_fill(const mk_rbox_t *b, int w, int h, mk_dtype_t dtype, size_t extra, const char *what)
{
    tu_guarded_t g;
    tu_guarded_alloc(&g, mk_image_desc(w, h, MK_FMT_GRAY, dtype), extra, 0xa5);
    TU_OK(mk_shape_fill(tu_cpu, &g.img, b));
    if (!tu_guard_ok(&g))
        fail_msg("%s: guard band overwritten", what);
    long inside = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double v = dtype == MK_U8 ? ((const uint8_t *)mk_image_row(&g.img, 0, y))[x] / 255.0
                                      : ((const float *)mk_image_row(&g.img, 0, y))[x];
            if (v != 0.0 && v != 1.0)
                fail_msg("%s: pixel (%d,%d) is %g, not 0 or 1", what, x, y, v);
            inside += v == 1.0;
            int e = expected(b, x, y, 1e-4);
            if (e >= 0 && (int)v != e)
                fail_msg("%s: pixel (%d,%d) is %d, the geometry says %d (box %g,%g-%g,%g radii %g,%g)", what, x, y,
                         (int)v, e, b->x0, b->y0, b->x1, b->y1, b->rx, b->ry);
        }
    tu_guarded_free(&g);
    return inside;
}

static void test_rectangle(void **state)
{
    (void)state;
    /* Integer edges: exactly the pixels [2, 9) x [3, 7). */
    mk_rbox_t b = {2, 3, 9, 7, 0, 0};
    assert_int_equal(check_fill(&b, 12, 10, MK_U8, 3, "rectangle"), 7 * 4);
    /* Half-pixel edges take the pixels whose centres are inside: [2.5, 9.5) holds centres 2.5 .. 8.5. */
    b = (mk_rbox_t){2.5f, 3.5f, 9.5f, 7.5f, 0, 0};
    assert_int_equal(check_fill(&b, 12, 10, MK_F32, 8, "half-pixel rectangle"), 7 * 4);
    /* Empty and out-of-image boxes fill nothing; a box over the whole image fills everything. */
    b = (mk_rbox_t){4, 4, 4, 9, 0, 0};
    assert_int_equal(check_fill(&b, 12, 10, MK_U8, 0, "empty box"), 0);
    b = (mk_rbox_t){-30, -30, -1, -1, 0, 0};
    assert_int_equal(check_fill(&b, 12, 10, MK_U8, 0, "box left of the image"), 0);
    b = (mk_rbox_t){-5, -5, 50, 50, 0, 0};
    assert_int_equal(check_fill(&b, 12, 10, MK_F32, 4, "box over the image"), 120);
}

static void test_ellipse(void **state)
{
    (void)state;
    /* The inscribed ellipse of a 200 x 120 box covers about pi/4 of it. */
    mk_rbox_t b = mk_rbox_make(10, 20, 200, 120, 1, 1);
    assert_true(b.rx == 100 && b.ry == 60);
    long n = check_fill(&b, 230, 150, MK_U8, 1, "ellipse");
    double area = M_PI * 100 * 60;
    assert_true(fabs((double)n - area) < 0.01 * area);
    /* Symmetric about both axes of the box. */
    tu_guarded_t g;
    tu_guarded_alloc(&g, mk_image_desc(220, 160, MK_FMT_GRAY, MK_U8), 0, 0);
    TU_OK(mk_shape_fill(tu_cpu, &g.img, &b));
    for (int y = 20; y < 140; y++)
        for (int x = 10; x < 210; x++) {
            uint8_t v = ((uint8_t *)mk_image_row(&g.img, 0, y))[x];
            assert_int_equal(v, ((uint8_t *)mk_image_row(&g.img, 0, y))[219 - x]);
            assert_int_equal(v, ((uint8_t *)mk_image_row(&g.img, 0, 159 - y))[x]);
        }
    tu_guarded_free(&g);
}

static void test_random(void **state)
{
    (void)state;
    tu_rng_t r = {0x5eed5eedULL};
    for (int i = 0; i < 300; i++) {
        int w = tu_rand_int(&r, 1, 90), h = tu_rand_int(&r, 1, 90);
        float x = (float)tu_rand_int(&r, -400, 4 * w) / 4, y = (float)tu_rand_int(&r, -400, 4 * h) / 4;
        float bw = (float)tu_rand_int(&r, 0, 4 * w) / 3, bh = (float)tu_rand_int(&r, 0, 4 * h) / 3;
        float fx = (float)tu_rand_int(&r, 0, 100) / 100, fy = (float)tu_rand_int(&r, 0, 100) / 100;
        if (i % 5 == 0)
            fx = fy = 1; /* ellipses */
        mk_rbox_t b = mk_rbox_make(x, y, bw, bh, fx, fy);
        char what[64];
        snprintf(what, sizeof what, "random box %d", i);
        size_t extra = (size_t)tu_rand_int(&r, 0, 9);
        long n = check_fill(&b, w, h, i & 1 ? MK_F32 : MK_U8, i & 1 ? 4 * extra : extra, what);
        assert_true(n <= (long)w * h);
    }
}

static void test_bad_args(void **state)
{
    (void)state;
    mk_image_t img = mk_image_desc(8, 8, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    mk_rbox_t ok = {1, 1, 5, 5, 1, 1};
    TU_OK(mk_shape_fill(tu_cpu, &img, &ok));
    mk_rbox_t bad[] = {
        {5, 1, 1, 5, 0, 0},        /* inverted */
        {1, 1, 5, 5, 2.5f, 0},     /* radius beyond half the width */
        {1, 1, 5, 5, 0, -1},       /* negative radius */
        {NAN, 1, 5, 5, 0, 0},      /* not finite */
        {1, 1, INFINITY, 5, 0, 0}, /* not finite */
        {1, 1, 1e9f, 5, 0, 0},     /* too far */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(mk_shape_fill(tu_cpu, &img, &bad[i]), MK_ERANGE);
    assert_int_equal(mk_shape_fill(tu_cpu, &img, NULL), MK_EINVAL);
    mk_image_t rgb = mk_image_desc(8, 8, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(NULL, &rgb, MK_MEM_HOST));
    assert_int_equal(mk_shape_fill(tu_cpu, &rgb, &ok), MK_EINVAL);
    mk_image_t u16 = mk_image_desc(8, 8, MK_FMT_GRAY, MK_U16);
    TU_OK(mk_image_alloc(NULL, &u16, MK_MEM_HOST));
    assert_int_equal(mk_shape_fill(tu_cpu, &u16, &ok), MK_EINVAL);
    mk_image_free(NULL, &img);
    mk_image_free(NULL, &rgb);
    mk_image_free(NULL, &u16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rectangle),
        cmocka_unit_test(test_ellipse),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
