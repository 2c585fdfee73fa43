/* test_yuyv: the CPU YUYV -> RGB/BGR conversion against OpenCV's cvtColor outputs (random frames and every
 * combination of extreme Y, U, V values), through padded pitches, and bad input. */
#include "testutil.h"

#include "imageio.h"
#include "yuyv.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* Converts src into a guarded output of `format` and compares it with the BGR picture `want`. */
static void check_against(const mk_image_t *src, const mk_image_t *want, mk_format_t format, const char *what)
{
    tu_guarded_t g;
    tu_guarded_alloc(&g, mk_image_desc(src->width, src->height, format, MK_U8), 5, 0xa5);
    TU_OK(mk_yuyv_to_rgb(tu_cpu, src, &g.img));
    assert_true(tu_guard_ok(&g));
    for (int y = 0; y < src->height; y++) {
        const uint8_t *e = mk_image_row(want, 0, y), *o = mk_image_row(&g.img, 0, y);
        for (int x = 0; x < src->width; x++)
            for (int c = 0; c < 3; c++) {
                int oc = format == MK_FMT_BGR ? c : 2 - c;
                if (o[3 * x + oc] != e[3 * x + c])
                    fail_msg("%s (%s): pixel (%d,%d) channel %d is %d, cvtColor gives %d", what,
                             mk_format_name(format), x, y, c, o[3 * x + oc], e[3 * x + c]);
            }
    }
    tu_guarded_free(&g);
}

static void test_opencv_random(void **state)
{
    (void)state;
    char path[4096];
    cJSON *refs = tu_opencv_refs(), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "yuyv"))
    {
        int w, h, nw, nh;
        tu_json_size(cJSON_GetObjectItem(c, "src"), &w, &h);
        tu_json_size(cJSON_GetObjectItem(c, "net"), &nw, &nh);
        if (w != nw || h != nh)
            continue; /* a warped reference: not cvtColor alone */
        mk_image_t src = tu_random_image((uint64_t)cJSON_GetObjectItem(c, "seed")->valuedouble, w, h, MK_FMT_YUYV);
        mk_image_t want = {0};
        TU_OK(mk_imageio_load(tu_test_data(path, sizeof path, cJSON_GetObjectItem(c, "expected")->valuestring),
                              MK_FMT_BGR, &want));
        /* The same source again through a wider pitch. */
        tu_guarded_t g;
        tu_guarded_alloc(&g, src, 11, 0x5a);
        for (int y = 0; y < h; y++)
            memcpy(mk_image_row(&g.img, 0, y), mk_image_row(&src, 0, y), (size_t)w * 2);
        for (int f = 0; f < 2; f++) {
            check_against(&src, &want, f ? MK_FMT_RGB : MK_FMT_BGR, "random yuyv");
            check_against(&g.img, &want, f ? MK_FMT_RGB : MK_FMT_BGR, "random yuyv, padded pitch");
        }
        tu_guarded_free(&g);
        mk_image_free(NULL, &src);
        mk_image_free(NULL, &want);
        n++;
    }
    assert_true(n >= 2);
    cJSON_Delete(refs);
}

static void test_opencv_extremes(void **state)
{
    (void)state;
    char path[4096];
    cJSON *refs = tu_opencv_refs(), *ex = cJSON_GetObjectItem(refs, "yuyv_extremes"), *v;
    int vals[16], nv = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(ex, "values")) vals[nv++] = v->valueint;
    int w = 2 * nv * nv * nv;
    mk_image_t src = mk_image_desc(w, 1, MK_FMT_YUYV, MK_U8);
    TU_OK(mk_image_alloc(NULL, &src, MK_MEM_HOST));
    uint8_t *p = src.data;
    for (int a = 0; a < nv; a++)
        for (int b = 0; b < nv; b++)
            for (int d = 0; d < nv; d++, p += 4)
                p[0] = (uint8_t)vals[a], p[1] = (uint8_t)vals[b], p[2] = (uint8_t)(vals[a] ^ 0xff), p[3] = (uint8_t)vals[d];
    mk_image_t want = {0};
    TU_OK(mk_imageio_load(tu_test_data(path, sizeof path, cJSON_GetObjectItem(ex, "expected")->valuestring),
                          MK_FMT_BGR, &want));
    assert_int_equal(want.width, w);
    check_against(&src, &want, MK_FMT_BGR, "extremes");
    check_against(&src, &want, MK_FMT_RGB, "extremes");
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &want);
    cJSON_Delete(refs);
}

static void test_bad_input(void **state)
{
    (void)state;
    mk_image_t yuyv = tu_random_image(1, 8, 4, MK_FMT_YUYV), rgb = mk_image_desc(8, 4, MK_FMT_RGB, MK_U8);
    mk_image_t small = mk_image_desc(6, 4, MK_FMT_RGB, MK_U8), gray = mk_image_desc(8, 4, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &rgb, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &small, MK_MEM_HOST));
    TU_OK(mk_image_alloc(NULL, &gray, MK_MEM_HOST));
    assert_int_equal(mk_yuyv_to_rgb(NULL, &yuyv, &rgb), MK_EINVAL);
    assert_int_equal(mk_yuyv_to_rgb(tu_cpu, &rgb, &rgb), MK_EINVAL);   /* source not yuyv */
    assert_int_equal(mk_yuyv_to_rgb(tu_cpu, &yuyv, &gray), MK_EINVAL); /* output not colour */
    assert_int_equal(mk_yuyv_to_rgb(tu_cpu, &yuyv, &small), MK_EINVAL);
    mk_image_t odd = yuyv;
    odd.width = 7;
    assert_int_equal(mk_yuyv_to_rgb(tu_cpu, &odd, &rgb), MK_EINVAL);
    mk_image_t dev = rgb;
    dev.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_yuyv_to_rgb(tu_cpu, &yuyv, &dev), MK_EINVAL);
    mk_image_free(NULL, &yuyv);
    mk_image_free(NULL, &rgb);
    mk_image_free(NULL, &small);
    mk_image_free(NULL, &gray);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opencv_random),
        cmocka_unit_test(test_opencv_extremes),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
