/* test_resize: the CPU area downsampling against block averages computed independently in double precision
 * (every format, scales 1..12, sizes that do and do not divide, the clipped last row and column), through padded
 * pitches with guard bands, and bad arguments. */
#include "testutil.h"

#include "resize.h"

#include <math.h>
#include <stdio.h>

static void check_case(uint64_t seed, int w, int h, int s, mk_format_t fmt, size_t extra)
{
    char what[96];
    snprintf(what, sizeof what, "%dx%d %s by %d (+%zu)", w, h, mk_format_name(fmt), s, extra);
    mk_image_t src = tu_random_image(seed, w, h, fmt);
    int dw = (w + s - 1) / s, dh = (h + s - 1) / s, C = src.channels;
    tu_guarded_t g;
    tu_guarded_alloc(&g, mk_image_desc(dw, dh, fmt, MK_U8), extra, 0xa5);
    TU_OK(mk_downsample_area(tu_cpu, &src, &g.img, s));
    if (!tu_guard_ok(&g))
        fail_msg("%s: guard band overwritten", what);
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++)
            for (int c = 0; c < C; c++) {
                double sum = 0;
                int n = 0;
                for (int yy = y * s; yy < h && yy < (y + 1) * s; yy++)
                    for (int xx = x * s; xx < w && xx < (x + 1) * s; xx++, n++)
                        sum += ((const uint8_t *)mk_image_row(&src, 0, yy))[xx * C + c];
                int want = (int)floor(sum / n + 0.5);
                int got = ((const uint8_t *)mk_image_row(&g.img, 0, y))[x * C + c];
                if (got != want)
                    fail_msg("%s: (%d,%d) channel %d is %d, the block average rounds to %d", what, x, y, c, got,
                             want);
            }
    tu_guarded_free(&g);
    mk_image_free(NULL, &src);
}

static void test_random(void **state)
{
    (void)state;
    tu_rng_t r = {31337};
    check_case(1, 1, 1, 1, MK_FMT_GRAY, 0);
    check_case(2, 1, 1, 8, MK_FMT_RGB, 3);
    check_case(3, 640, 480, 4, MK_FMT_BGR, 0);
    check_case(4, 641, 479, 4, MK_FMT_RGB, 17);
    for (int i = 0; i < 60; i++)
        check_case(tu_rand(&r), tu_rand_int(&r, 1, 200), tu_rand_int(&r, 1, 150), tu_rand_int(&r, 1, 12),
                   (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3], (size_t)tu_rand_int(&r, 0, 33));
}

/* Halves round up: a 2x1 block of 0 and 1 averages to 0.5 -> 1; of 0 and 0 -> 0; 254 and 255 -> 255. */
static void test_rounding(void **state)
{
    (void)state;
    mk_image_t src = mk_image_desc(6, 1, MK_FMT_GRAY, MK_U8), dst = mk_image_desc(3, 1, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &src, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &dst, MK_MEM_HOST));
    const uint8_t in[6] = {0, 1, 0, 0, 254, 255};
    for (int i = 0; i < 6; i++)
        ((uint8_t *)src.data)[i] = in[i];
    TU_OK(mk_downsample_area(tu_cpu, &src, &dst, 2));
    const uint8_t *o = dst.data;
    assert_int_equal(o[0], 1);
    assert_int_equal(o[1], 0);
    assert_int_equal(o[2], 255);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
}

static void test_bad_args(void **state)
{
    (void)state;
    mk_image_t src = tu_random_image(5, 16, 16, MK_FMT_RGB);
    mk_image_t dst = mk_image_desc(4, 4, MK_FMT_RGB, MK_U8), gray = mk_image_desc(4, 4, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &dst, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &gray, MK_MEM_HOST));
    assert_int_equal(mk_downsample_area(tu_cpu, &src, &dst, 0), MK_ERANGE);
    assert_int_equal(mk_downsample_area(tu_cpu, &src, &dst, MK_DOWNSAMPLE_MAX_SCALE + 1), MK_ERANGE);
    assert_int_equal(mk_downsample_area(tu_cpu, &src, &dst, 3), MK_EINVAL); /* 16 / 3 -> 6x6, not 4x4 */
    assert_int_equal(mk_downsample_area(tu_cpu, &src, &gray, 4), MK_EINVAL);
    assert_int_equal(mk_downsample_area(NULL, &src, &dst, 4), MK_EINVAL);
    assert_int_equal(mk_downsample_area(tu_cpu, &src, &src, 1), MK_EINVAL); /* in place */
    TU_OK(mk_downsample_area(tu_cpu, &src, &dst, 4));
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
    mk_image_free(NULL, &gray);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
