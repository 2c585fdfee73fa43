/* test_threshold: the CPU threshold and Otsu against hand-computed cases and OpenCV's cv::threshold; bad input. */
#include "testutil.h"

#include "imageio.h"
#include "threshold.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static mk_image_t gray_from(const uint8_t *v, int w, int h)
{
    mk_image_t img = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int y = 0; y < h; y++)
        memcpy(mk_image_row(&img, 0, y), v + (size_t)y * w, (size_t)w);
    return img;
}

static mk_image_t gray_like(const mk_image_t *src)
{
    mk_image_t img = mk_image_desc(src->width, src->height, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    return img;
}

static void test_modes_hand(void **state)
{
    (void)state;
    const uint8_t in[6] = {0, 99, 100, 101, 200, 255};
    const uint8_t want[5][6] = {
        {0, 0, 0, 200, 200, 200},     /* binary, t = 100, maxval = 200 */
        {200, 200, 200, 0, 0, 0},     /* binary-inv */
        {0, 99, 100, 100, 100, 100},  /* trunc */
        {0, 0, 0, 101, 200, 255},     /* tozero */
        {0, 99, 100, 0, 0, 0},        /* tozero-inv */
    };
    mk_image_t src = gray_from(in, 6, 1), dst = gray_like(&src);
    for (int m = 0; m < 5; m++) {
        TU_OK(mk_threshold(tu_cpu, &src, &dst, 100, 200, (mk_thresh_mode_t)m));
        assert_memory_equal(dst.data, want[m], 6);
    }
    /* In place. */
    TU_OK(mk_threshold(tu_cpu, &src, &src, 100, 200, MK_THRESH_BINARY));
    assert_memory_equal(src.data, want[0], 6);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
}

static void test_otsu_hand(void **state)
{
    (void)state;
    /* Two values, 3 x 10 and 1 x 200: every split between them has the same variance (exactly, in doubles: all
     * quantities are dyadic), so the first maximum, 10, wins. */
    const uint8_t two[4] = {10, 200, 10, 10};
    mk_image_t src = gray_from(two, 2, 2), dst = gray_like(&src);
    int t = -1;
    TU_OK(mk_threshold_otsu(tu_cpu, &src, &dst, 255, MK_THRESH_BINARY, &t));
    assert_int_equal(t, 10);
    const uint8_t want[4] = {0, 255, 0, 0};
    assert_memory_equal(mk_image_row(&dst, 0, 0), want, 2);
    assert_memory_equal(mk_image_row(&dst, 0, 1), want + 2, 2);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
    /* A constant image: every split is skipped (one class empty): 0. */
    uint32_t hist[256] = {0};
    hist[77] = 1000;
    assert_int_equal(mk_otsu_from_histogram(hist, 1000), 0);
    /* Classes 0 (x2) and 100 (x2), 200 (x4): the best split separates 200: between 100 and 199 the first is 100. */
    memset(hist, 0, sizeof hist);
    hist[0] = 2, hist[100] = 2, hist[200] = 4;
    assert_int_equal(mk_otsu_from_histogram(hist, 8), 100);
}

static void test_histogram(void **state)
{
    (void)state;
    tu_rng_t r = {42};
    mk_image_t img = mk_image_desc(33, 17, MK_FMT_GRAY, MK_U8);
    img.pitch = 40;
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    memset(img.data, 7, mk_image_bytes(&img)); /* the pitch padding must not be counted */
    uint32_t want[256] = {0}, got[256];
    for (int y = 0; y < 17; y++)
        for (int x = 0; x < 33; x++) {
            uint8_t v = (uint8_t)tu_rand_int(&r, 0, 5) * 50;
            ((uint8_t *)mk_image_row(&img, 0, y))[x] = v;
            want[v]++;
        }
    TU_OK(mk_histogram(tu_cpu, &img, got));
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(got[7], 0);
    mk_image_free(NULL, &img);
}

static void test_opencv_fixed(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    cJSON *in = cJSON_GetObjectItem(refs, "threshold_input");
    mk_image_t src = tu_random_image((uint64_t)cJSON_GetObjectItem(in, "seed")->valuedouble,
                                     cJSON_GetArrayItem(cJSON_GetObjectItem(in, "size"), 0)->valueint,
                                     cJSON_GetArrayItem(cJSON_GetObjectItem(in, "size"), 1)->valueint, MK_FMT_GRAY);
    mk_image_t dst = gray_like(&src);
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "threshold"))
    {
        int t = cJSON_GetObjectItem(c, "thresh")->valueint, mv = cJSON_GetObjectItem(c, "maxval")->valueint;
        int mode = cJSON_GetObjectItem(c, "mode")->valueint;
        TU_OK(mk_threshold(tu_cpu, &src, &dst, t, mv, (mk_thresh_mode_t)mode));
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, tu_fnv1a(&dst));
        if (strcmp(hex, cJSON_GetObjectItem(c, "fnv1a")->valuestring))
            fail_msg("threshold t=%d maxval=%d mode=%s differs from OpenCV", t, mv,
                     mk_thresh_mode_name((mk_thresh_mode_t)mode));
        n++;
    }
    assert_int_equal(n, 6 * 3 * 5);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
    cJSON_Delete(refs);
}

static void check_otsu(const mk_image_t *src, cJSON *ref, const char *what)
{
    mk_image_t dst = gray_like(src);
    int t = -1;
    TU_OK(mk_threshold_otsu(tu_cpu, src, &dst, 255, MK_THRESH_BINARY, &t));
    if (t != cJSON_GetObjectItem(ref, "thresh")->valueint)
        fail_msg("%s: Otsu threshold %d, OpenCV %d", what, t, cJSON_GetObjectItem(ref, "thresh")->valueint);
    cJSON *h = cJSON_GetObjectItem(ref, "fnv1a");
    if (h) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, tu_fnv1a(&dst));
        if (strcmp(hex, h->valuestring))
            fail_msg("%s: output differs from OpenCV's", what);
    }
    mk_image_free(NULL, &dst);
}

static void test_opencv_otsu_synthetic(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "otsu_synthetic"))
    {
        char what[64];
        int k = cJSON_GetObjectItem(c, "k")->valueint;
        mk_image_t img = tu_otsu_image(k);
        snprintf(what, sizeof what, "synthetic %d (%dx%d)", k, img.width, img.height);
        check_otsu(&img, c, what);
        mk_image_free(NULL, &img);
        n++;
    }
    assert_int_equal(n, 350);
    cJSON_Delete(refs);
}

/* Over 2^23 pixels one pixel's share is below FLT_EPSILON: OpenCV's skip keeps mu1 multiplied by q1. */
static void test_opencv_otsu_big(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "otsu_big"))
    {
        mk_image_t img = tu_otsu_big(c);
        check_otsu(&img, c, "big");
        mk_image_free(NULL, &img);
    }
    cJSON_Delete(refs);
}

static void test_opencv_otsu_real(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    char path[4096];
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "otsu_real"))
    {
        const char *rel = cJSON_GetObjectItem(c, "image")->valuestring;
        if (!tu_data_path(path, sizeof path, rel)) {
            cJSON_Delete(refs);
            skip();
        }
        const char *ch = cJSON_GetObjectItem(c, "channel")->valuestring;
        mk_image_t g = tu_real_channel(path, ch[0] == 'b' ? 0 : ch[0] == 'g' ? 1 : 2);
        check_otsu(&g, c, rel);
        mk_image_free(NULL, &g);
        n++;
    }
    assert_int_equal(n, cJSON_GetArraySize(cJSON_GetObjectItem(refs, "otsu_real")));
    cJSON_Delete(refs);
}

static void test_bad_input(void **state)
{
    (void)state;
    mk_image_t src = tu_random_image(3, 9, 4, MK_FMT_GRAY), dst = gray_like(&src);
    mk_image_t bgr = tu_random_image(4, 9, 4, MK_FMT_BGR), small = tu_random_image(5, 8, 4, MK_FMT_GRAY);
    uint32_t hist[256];
    int t;
    assert_int_equal(mk_threshold(tu_cpu, &src, &dst, -1, 255, MK_THRESH_BINARY), MK_ERANGE);
    assert_non_null(strstr(mk_err_msg(), "threshold -1"));
    assert_int_equal(mk_threshold(tu_cpu, &src, &dst, 256, 255, MK_THRESH_BINARY), MK_ERANGE);
    assert_int_equal(mk_threshold(tu_cpu, &src, &dst, 10, 300, MK_THRESH_BINARY), MK_ERANGE);
    assert_int_equal(mk_threshold(tu_cpu, &src, &dst, 10, 255, (mk_thresh_mode_t)9), MK_EINVAL);
    assert_int_equal(mk_threshold(tu_cpu, &bgr, &dst, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "u8 gray"));
    assert_int_equal(mk_threshold(tu_cpu, &src, &small, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    assert_int_equal(mk_threshold(NULL, &src, &dst, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    assert_int_equal(mk_threshold(tu_cpu, NULL, &dst, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    assert_int_equal(mk_threshold_otsu(tu_cpu, &src, NULL, 255, MK_THRESH_BINARY, &t), MK_EINVAL);
    assert_int_equal(mk_threshold_otsu(tu_cpu, &src, &dst, -5, MK_THRESH_BINARY, &t), MK_ERANGE);
    mk_image_t alias = src;
    alias.pitch += 4;
    alias.width = src.width;
    assert_int_equal(mk_threshold(tu_cpu, &src, &alias, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    mk_image_t dev = src;
    dev.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_threshold(tu_cpu, &dev, &dst, 10, 255, MK_THRESH_BINARY), MK_EINVAL);
    assert_int_equal(mk_histogram(tu_cpu, &bgr, hist), MK_EINVAL);
    assert_int_equal(mk_histogram(tu_cpu, &src, NULL), MK_EINVAL);
    assert_int_equal(mk_otsu_from_histogram(hist, 0), MK_EINVAL);
    mk_thresh_mode_t m;
    assert_int_equal(mk_thresh_mode_parse("otsu", &m), MK_EINVAL);
    TU_OK(mk_thresh_mode_parse("tozero-inv", &m));
    assert_int_equal(m, MK_THRESH_TOZERO_INV);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_hand),
        cmocka_unit_test(test_otsu_hand),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_opencv_fixed),
        cmocka_unit_test(test_opencv_otsu_synthetic),
        cmocka_unit_test(test_opencv_otsu_big),
        cmocka_unit_test(test_opencv_otsu_real),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
