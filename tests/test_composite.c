/* test_composite: the CPU blend, blur and bilinear resize — hand-computed pixels, the blend against the exact
 * rational value rounded, the blur against direct window sums (impulses, random images, odd and 1-pixel sizes,
 * radii beyond the image) and constant images, the resize against its definition evaluated in double precision,
 * guard bands around outputs, and bad arguments. */
#include "testutil.h"

#include "composite.h"
#include "resize.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint8_t px(const mk_image_t *img, int x, int y, int c)
{
    return ((const uint8_t *)mk_image_row(img, 0, y))[x * img->channels + c];
}

static void set_px(mk_image_t *img, int x, int y, int c, uint8_t v)
{
    ((uint8_t *)mk_image_row(img, 0, y))[x * img->channels + c] = v;
}

static mk_image_t host_image(int w, int h, mk_format_t fmt)
{
    mk_image_t img = mk_image_desc(w, h, fmt, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    return img;
}

/* ---- blend ------------------------------------------------------------------------------------------------ */

/* Pixels worked out by hand: (f a + b (255 - a)) / 255 rounded to nearest. */
static void test_blend_hand(void **state)
{
    (void)state;
    static const struct {
        int f, b, a, want;
    } cases[] = {
        {200, 100, 0, 100},   /* alpha 0: the background */
        {200, 100, 255, 200}, /* alpha 255: the frame */
        {200, 100, 128, 150}, /* 38300 / 255 = 150.196 */
        {255, 0, 1, 1},       /* 255 / 255 */
        {1, 0, 128, 1},       /* 128 / 255 = 0.502 */
        {1, 0, 127, 0},       /* 127 / 255 = 0.498 */
        {0, 255, 128, 127},   /* 32385 / 255 = 127 exactly */
        {10, 20, 51, 18},     /* (510 + 4080) / 255 = 18 exactly */
        {255, 255, 77, 255},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int k = 0; k < 2; k++) {
        mk_format_t fmt = k ? MK_FMT_BGR : MK_FMT_RGB;
        mk_image_t f = host_image(n, 1, fmt), b = host_image(n, 1, fmt), a = host_image(n, 1, MK_FMT_GRAY);
        mk_image_t o = host_image(n, 1, fmt);
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < 3; c++) {
                set_px(&f, i, 0, c, (uint8_t)cases[i].f);
                set_px(&b, i, 0, c, (uint8_t)cases[i].b);
            }
            set_px(&a, i, 0, 0, (uint8_t)cases[i].a);
        }
        TU_OK(mk_composite(tu_cpu, &f, &a, &b, &o));
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 3; c++)
                if (px(&o, i, 0, c) != cases[i].want)
                    fail_msg("%s f %d b %d a %d: got %d, want %d", mk_format_name(fmt), cases[i].f, cases[i].b,
                             cases[i].a, px(&o, i, 0, c), cases[i].want);
        mk_image_free(NULL, &f);
        mk_image_free(NULL, &b);
        mk_image_free(NULL, &a);
        mk_image_free(NULL, &o);
    }
}

/* Random images of many sizes through padded guarded outputs, and in place over the frame and over the
 * background: every byte is the exact blend rounded to nearest. */
static void test_blend_random(void **state)
{
    (void)state;
    tu_rng_t r = {606};
    for (int i = 0; i < 40; i++) {
        int w = i == 0 ? 1 : tu_rand_int(&r, 1, 97), h = i == 0 ? 1 : tu_rand_int(&r, 1, 61);
        mk_format_t fmt = i % 2 ? MK_FMT_BGR : MK_FMT_RGB;
        mk_image_t f = tu_random_image(tu_rand(&r), w, h, fmt), b = tu_random_image(tu_rand(&r), w, h, fmt);
        mk_image_t a = tu_random_image(tu_rand(&r), w, h, MK_FMT_GRAY);
        /* Make 0 and 255 frequent. */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                if (px(&a, x, y, 0) < 40 || px(&a, x, y, 0) > 215)
                    set_px(&a, x, y, 0, px(&a, x, y, 0) < 40 ? 0 : 255);
        tu_guarded_t g;
        tu_guarded_alloc(&g, mk_image_desc(w, h, fmt, MK_U8), (size_t)tu_rand_int(&r, 0, 20), 0x5a);
        TU_OK(mk_composite(tu_cpu, &f, &a, &b, &g.img));
        if (!tu_guard_ok(&g))
            fail_msg("blend %d: guard band overwritten", i);
        mk_image_t in_f = host_image(w, h, fmt), in_b = host_image(w, h, fmt);
        TU_OK(mk_image_copy(tu_cpu, &in_f, &f));
        TU_OK(mk_image_copy(tu_cpu, &in_b, &b));
        TU_OK(mk_composite(tu_cpu, &in_f, &a, &b, &in_f));
        TU_OK(mk_composite(tu_cpu, &f, &a, &in_b, &in_b));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++) {
                    int av = px(&a, x, y, 0);
                    double exact = (px(&f, x, y, c) * (double)av + px(&b, x, y, c) * (255.0 - av)) / 255.0;
                    int want = (int)floor(exact + 0.5);
                    if (px(&g.img, x, y, c) != want || px(&in_f, x, y, c) != want || px(&in_b, x, y, c) != want)
                        fail_msg("blend %d (%dx%d): (%d,%d,%d) got %d / %d / %d, want %d", i, w, h, x, y, c,
                                 px(&g.img, x, y, c), px(&in_f, x, y, c), px(&in_b, x, y, c), want);
                }
        tu_guarded_free(&g);
        mk_image_free(NULL, &in_f);
        mk_image_free(NULL, &in_b);
        mk_image_free(NULL, &f);
        mk_image_free(NULL, &b);
        mk_image_free(NULL, &a);
    }
}

/* ---- blur ------------------------------------------------------------------------------------------------- */

/* One box pass by its definition: every window summed directly, indices clamped into the line. */
static void direct_pass(const mk_image_t *src, mk_image_t *dst, int r, int along_rows)
{
    int w = src->width, h = src->height, C = src->channels;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < C; c++) {
                long sum = 0;
                for (int k = -r; k <= r; k++) {
                    int xx = along_rows ? x + k : x, yy = along_rows ? y : y + k;
                    xx = xx < 0 ? 0 : xx >= w ? w - 1 : xx;
                    yy = yy < 0 ? 0 : yy >= h ? h - 1 : yy;
                    sum += px(src, xx, yy, c);
                }
                set_px(dst, x, y, c, (uint8_t)floor((double)sum / (2 * r + 1) + 0.5));
            }
}

/* The blur as documented: three passes along the rows, then three along the columns. */
static mk_image_t direct_blur(const mk_image_t *src, int r)
{
    mk_image_t a = host_image(src->width, src->height, src->format);
    mk_image_t b = host_image(src->width, src->height, src->format);
    direct_pass(src, &a, r, 1);
    direct_pass(&a, &b, r, 1);
    direct_pass(&b, &a, r, 1);
    direct_pass(&a, &b, r, 0);
    direct_pass(&b, &a, r, 0);
    direct_pass(&a, &b, r, 0);
    mk_image_free(NULL, &a);
    return b;
}

static void blur_case(const mk_image_t *src, int r, size_t extra, const char *what)
{
    tu_guarded_t g;
    tu_guarded_alloc(&g, mk_image_desc(src->width, src->height, src->format, MK_U8), extra, 0xa5);
    TU_OK(mk_blur(tu_cpu, src, &g.img, r));
    if (!tu_guard_ok(&g))
        fail_msg("%s: guard band overwritten", what);
    mk_image_t want = direct_blur(src, r);
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++)
            for (int c = 0; c < src->channels; c++)
                if (px(&g.img, x, y, c) != px(&want, x, y, c))
                    fail_msg("%s: (%d,%d,%d) got %d, direct sums give %d", what, x, y, c, px(&g.img, x, y, c),
                             px(&want, x, y, c));
    mk_image_free(NULL, &want);
    tu_guarded_free(&g);
}

static void test_blur_constant(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {17, 5}, {64, 48}};
    const int radii[] = {0, 1, 3, 20, 500};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t k = 0; k < sizeof radii / sizeof radii[0]; k++)
            for (int f = 0; f < 3; f++) {
                mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[f];
                mk_image_t src = host_image(sizes[s][0], sizes[s][1], fmt);
                mk_image_t dst = host_image(sizes[s][0], sizes[s][1], fmt);
                for (int y = 0; y < src.height; y++)
                    for (int x = 0; x < src.width; x++)
                        for (int c = 0; c < src.channels; c++)
                            set_px(&src, x, y, c, (uint8_t)(37 + 90 * c));
                TU_OK(mk_blur(tu_cpu, &src, &dst, radii[k]));
                for (int y = 0; y < src.height; y++)
                    for (int x = 0; x < src.width; x++)
                        for (int c = 0; c < src.channels; c++)
                            if (px(&dst, x, y, c) != 37 + 90 * c)
                                fail_msg("constant %dx%d %s r %d: (%d,%d,%d) is %d", src.width, src.height,
                                         mk_format_name(fmt), radii[k], x, y, c, px(&dst, x, y, c));
                mk_image_free(NULL, &src);
                mk_image_free(NULL, &dst);
            }
}

/* A single bright pixel spreads into a blob, mirror-symmetric about its row and its column (not exactly between
 * the two directions: each pass rounds), whose values are the direct sums'. */
static void test_blur_impulse(void **state)
{
    (void)state;
    const int radii[] = {0, 1, 2, 5};
    for (size_t k = 0; k < sizeof radii / sizeof radii[0]; k++) {
        int r = radii[k], n = 6 * r + 9, m = n / 2;
        mk_image_t src = host_image(n, n, MK_FMT_GRAY);
        TU_OK(mk_image_memset(tu_cpu, &src, 0));
        set_px(&src, m, m, 0, 255);
        char what[64];
        snprintf(what, sizeof what, "impulse r %d", r);
        blur_case(&src, r, 7, what);
        mk_image_t dst = host_image(n, n, MK_FMT_GRAY);
        TU_OK(mk_blur(tu_cpu, &src, &dst, r));
        for (int d = 0; d <= 3 * r + 1; d++) {
            assert_int_equal(px(&dst, m + d, m, 0), px(&dst, m - d, m, 0));
            assert_int_equal(px(&dst, m, m + d, 0), px(&dst, m, m - d, 0));
        }
        if (r > 0) {
            assert_true(px(&dst, m, m, 0) > 0 && px(&dst, m, m, 0) < 255);
            assert_int_equal(px(&dst, m + 3 * r + 1, m, 0), 0); /* beyond three radii nothing arrives */
        } else {
            assert_int_equal(px(&dst, m, m, 0), 255);
        }
        mk_image_free(NULL, &dst);
        mk_image_free(NULL, &src);
    }
}

/* Random images: odd sizes, single rows and columns, 1x1, radii beyond the image. */
static void test_blur_random(void **state)
{
    (void)state;
    tu_rng_t r = {2718};
    const int fixed[][3] = {{1, 1, 3}, {1, 7, 2}, {7, 1, 2}, {5, 3, 40}, {13, 11, 1}, {2, 2, 1}};
    for (int i = 0; i < 40; i++) {
        int w, h, rad;
        if (i < 6) {
            w = fixed[i][0];
            h = fixed[i][1];
            rad = fixed[i][2];
        } else {
            w = tu_rand_int(&r, 1, 45);
            h = tu_rand_int(&r, 1, 37);
            rad = tu_rand_int(&r, 0, i % 4 ? 6 : 60);
        }
        mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3];
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, fmt);
        char what[96];
        snprintf(what, sizeof what, "random %d: %dx%d %s r %d", i, w, h, mk_format_name(fmt), rad);
        blur_case(&src, rad, (size_t)tu_rand_int(&r, 0, 9), what);
        mk_image_free(NULL, &src);
    }
}

/* ---- bilinear resize -------------------------------------------------------------------------------------- */

/* [0, 255] stretched to 4 columns samples the source at -0.25 (clamped to 0), 0.25, 0.75 and 1.25 (clamped to
 * 1): 0, 63.75 -> 64, 191.25 -> 191, 255. Same size is the identity. */
static void test_resize_hand(void **state)
{
    (void)state;
    mk_image_t src = host_image(2, 1, MK_FMT_GRAY), dst = host_image(4, 1, MK_FMT_GRAY);
    set_px(&src, 0, 0, 0, 0);
    set_px(&src, 1, 0, 0, 255);
    TU_OK(mk_resize_bilinear(tu_cpu, &src, &dst));
    const int want[4] = {0, 64, 191, 255};
    for (int x = 0; x < 4; x++)
        assert_int_equal(px(&dst, x, 0, 0), want[x]);
    /* 4 -> 2: positions 0.5 and 2.5, halfway: (0 + 64) / 2 = 32, (191 + 255) / 2 = 223. */
    mk_image_t half = host_image(2, 1, MK_FMT_GRAY);
    TU_OK(mk_resize_bilinear(tu_cpu, &dst, &half));
    assert_int_equal(px(&half, 0, 0, 0), 32);
    assert_int_equal(px(&half, 1, 0, 0), 223);
    mk_image_t a = tu_random_image(5, 13, 7, MK_FMT_RGB), b = host_image(13, 7, MK_FMT_RGB);
    TU_OK(mk_resize_bilinear(tu_cpu, &a, &b));
    for (int y = 0; y < 7; y++)
        assert_memory_equal(mk_image_row(&a, 0, y), mk_image_row(&b, 0, y), 13 * 3);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    mk_image_free(NULL, &half);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
}

/* The source position of output pixel i, floored to 1/256 and clamped, in double precision. */
static void ref_pos(int i, int n_in, int n_out, int *i0, int *i1, int *frac)
{
    double p = ((double)(2 * i + 1) * n_in - n_out) * 256.0 / (2.0 * n_out);
    double q = floor(p);
    q = q < 0 ? 0 : q > (n_in - 1) * 256.0 ? (n_in - 1) * 256.0 : q;
    *i0 = (int)(q / 256);
    *frac = (int)q - *i0 * 256;
    *i1 = *i0 + 1 < n_in ? *i0 + 1 : *i0;
}

static void test_resize_random(void **state)
{
    (void)state;
    tu_rng_t r = {4711};
    for (int i = 0; i < 60; i++) {
        int w = tu_rand_int(&r, 1, 60), h = tu_rand_int(&r, 1, 40);
        int dw = tu_rand_int(&r, 1, 90), dh = tu_rand_int(&r, 1, 70);
        mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3];
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, fmt);
        tu_guarded_t g;
        tu_guarded_alloc(&g, mk_image_desc(dw, dh, fmt, MK_U8), (size_t)tu_rand_int(&r, 0, 12), 0x3c);
        TU_OK(mk_resize_bilinear(tu_cpu, &src, &g.img));
        if (!tu_guard_ok(&g))
            fail_msg("resize %d: guard band overwritten", i);
        for (int y = 0; y < dh; y++) {
            int y0, y1, ay;
            ref_pos(y, h, dh, &y0, &y1, &ay);
            for (int x = 0; x < dw; x++) {
                int x0, x1, ax;
                ref_pos(x, w, dw, &x0, &x1, &ax);
                for (int c = 0; c < src.channels; c++) {
                    double fx = ax / 256.0, fy = ay / 256.0;
                    double v = (px(&src, x0, y0, c) * (1 - fx) + px(&src, x1, y0, c) * fx) * (1 - fy) +
                               (px(&src, x0, y1, c) * (1 - fx) + px(&src, x1, y1, c) * fx) * fy;
                    int want = (int)floor(v + 0.5);
                    if (px(&g.img, x, y, c) != want)
                        fail_msg("resize %d: %dx%d -> %dx%d %s: (%d,%d,%d) got %d, want %d", i, w, h, dw, dh,
                                 mk_format_name(fmt), x, y, c, px(&g.img, x, y, c), want);
                }
            }
        }
        tu_guarded_free(&g);
        mk_image_free(NULL, &src);
    }
}

/* ---- bad arguments ------------------------------------------------------------------------------------------ */

static void test_bad_arguments(void **state)
{
    (void)state;
    mk_image_t f = tu_random_image(1, 8, 6, MK_FMT_RGB), b = tu_random_image(2, 8, 6, MK_FMT_RGB);
    mk_image_t bgr = tu_random_image(3, 8, 6, MK_FMT_BGR), a = tu_random_image(4, 8, 6, MK_FMT_GRAY);
    mk_image_t small = tu_random_image(5, 7, 6, MK_FMT_RGB), a_small = tu_random_image(6, 8, 5, MK_FMT_GRAY);
    mk_image_t o = host_image(8, 6, MK_FMT_RGB), g = host_image(8, 6, MK_FMT_GRAY);
    assert_int_equal(mk_composite(NULL, &f, &a, &b, &o), MK_EINVAL);
    assert_int_equal(mk_composite(tu_cpu, NULL, &a, &b, &o), MK_EINVAL);
    assert_int_equal(mk_composite(tu_cpu, &f, &a, &bgr, &o), MK_EINVAL);     /* formats differ */
    assert_int_equal(mk_composite(tu_cpu, &f, &a, &small, &o), MK_EINVAL);   /* sizes differ */
    assert_int_equal(mk_composite(tu_cpu, &f, &a_small, &b, &o), MK_EINVAL); /* alpha size */
    assert_int_equal(mk_composite(tu_cpu, &f, &f, &b, &o), MK_EINVAL);       /* alpha not gray */
    assert_int_equal(mk_composite(tu_cpu, &g, &a, &g, &g), MK_EINVAL);       /* gray frame */
    mk_image_t shifted = f; /* the frame one pixel on: overlaps the frame without being it */
    shifted.data = (uint8_t *)f.data + 3;
    shifted.width = 7;
    mk_image_t f7 = f;
    f7.width = 7;
    mk_image_t b7 = b;
    b7.width = 7;
    mk_image_t a7 = a;
    a7.width = 7;
    assert_int_equal(mk_composite(tu_cpu, &f7, &a7, &b7, &shifted), MK_EINVAL);
    mk_image_t dev = f;
    dev.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_composite(tu_cpu, &dev, &a, &b, &o), MK_EINVAL);
    mk_image_t f32 = mk_image_desc(8, 6, MK_FMT_RGB, MK_F32);
    TU_OK(mk_image_alloc(NULL, &f32, MK_MEM_HOST));
    assert_int_equal(mk_composite(tu_cpu, &f32, &a, &b, &o), MK_EINVAL);

    assert_int_equal(mk_blur(NULL, &f, &o, 1), MK_EINVAL);
    assert_int_equal(mk_blur(tu_cpu, &f, &o, -1), MK_ERANGE);
    assert_int_equal(mk_blur(tu_cpu, &f, &o, MK_BLUR_MAX_RADIUS + 1), MK_ERANGE);
    assert_int_equal(mk_blur(tu_cpu, &f, &f, 1), MK_EINVAL);   /* in place */
    assert_int_equal(mk_blur(tu_cpu, &f, &bgr, 1), MK_EINVAL); /* formats differ */
    assert_int_equal(mk_blur(tu_cpu, &f, &small, 1), MK_EINVAL);
    assert_int_equal(mk_blur(tu_cpu, &f32, &o, 1), MK_EINVAL);
    TU_OK(mk_blur(tu_cpu, &f, &o, MK_BLUR_MAX_RADIUS));

    assert_int_equal(mk_resize_bilinear(NULL, &f, &small), MK_EINVAL);
    assert_int_equal(mk_resize_bilinear(tu_cpu, &f, &bgr), MK_EINVAL);
    assert_int_equal(mk_resize_bilinear(tu_cpu, &f, &f), MK_EINVAL);
    assert_int_equal(mk_resize_bilinear(tu_cpu, &f, &g), MK_EINVAL);
    assert_int_equal(mk_resize_bilinear(tu_cpu, &f32, &o), MK_EINVAL);
    assert_true(strlen(mk_err_msg()) > 0);
    mk_image_free(NULL, &f32);
    mk_image_free(NULL, &f);
    mk_image_free(NULL, &b);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &small);
    mk_image_free(NULL, &a_small);
    mk_image_free(NULL, &o);
    mk_image_free(NULL, &g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blend_hand),     cmocka_unit_test(test_blend_random),
        cmocka_unit_test(test_blur_constant),  cmocka_unit_test(test_blur_impulse),
        cmocka_unit_test(test_blur_random),    cmocka_unit_test(test_resize_hand),
        cmocka_unit_test(test_resize_random),  cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
