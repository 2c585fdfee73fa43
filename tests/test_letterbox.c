/* test_letterbox: the CPU letterbox against hand-computed cases, OpenCV's warpAffine/cvtColor outputs and
 * Darknet's network inputs; the plan and inverse transform; bad input. */
#include "testutil.h"

#include "imageio.h"
#include "letterbox.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static mk_image_t run_cpu(const mk_image_t *src, int w, int h, mk_letterbox_mode_t mode)
{
    mk_image_t dst = mk_image_desc_planar(w, h, 3, MK_F32);
    TU_OK(mk_image_alloc(NULL, &dst, MK_MEM_HOST));
    TU_OK(mk_letterbox(tu_cpu, src, &dst, mode, NULL));
    return dst;
}

static float at(const mk_image_t *t, int plane, int x, int y)
{
    return ((const float *)mk_image_row(t, plane, y))[x];
}

/* Number of output values that differ from an expected u8 BGR picture (divided by 255). */
static long diff_vs_bgr(const mk_image_t *out, const mk_image_t *bgr, const char *what)
{
    long bad = 0;
    assert_int_equal(out->width, bgr->width);
    assert_int_equal(out->height, bgr->height);
    for (int y = 0; y < out->height; y++) {
        const uint8_t *e = mk_image_row(bgr, 0, y);
        for (int x = 0; x < out->width; x++)
            for (int c = 0; c < 3; c++) {
                float want = e[3 * x + 2 - c] / 255.0f, got = at(out, c, x, y);
                if (got != want && bad++ < 3)
                    print_message("%s: (%d,%d) plane %d: got %.7f (%.2f/255), want %d/255\n", what, x, y, c, got,
                                  got * 255, e[3 * x + 2 - c]);
            }
    }
    return bad;
}

/* Letterboxes src in warp mode and checks the result against the picture `expected` (a path under tests/data). */
static void check_warp(const mk_image_t *src, int w, int h, const char *expected, const char *what)
{
    char path[4096];
    mk_image_t want = {0};
    TU_OK(mk_imageio_load(tu_test_data(path, sizeof path, expected), MK_FMT_BGR, &want));
    mk_image_t out = run_cpu(src, w, h, MK_LETTERBOX_WARP);
    assert_int_equal(diff_vs_bgr(&out, &want, what), 0);
    mk_image_free(NULL, &out);
    mk_image_free(NULL, &want);
}

/* 1x1 source into 3x3: centre exact, edge pixels mixed with the 114 border in OpenCV's 1/32 fixed point. */
static void test_warp_hand(void **state)
{
    (void)state;
    mk_image_t src = mk_image_desc(1, 1, MK_FMT_BGR, MK_U8);
    TU_OK(mk_image_alloc(NULL, &src, MK_MEM_HOST));
    uint8_t *p = src.data;
    p[0] = 10, p[1] = 20, p[2] = 30; /* B, G, R */
    mk_image_t out = run_cpu(&src, 3, 3, MK_LETTERBOX_WARP);
    /* Centre: exactly the pixel, RGB order. */
    assert_true(at(&out, 0, 1, 1) == 30 / 255.0f);
    assert_true(at(&out, 1, 1, 1) == 20 / 255.0f);
    assert_true(at(&out, 2, 1, 1) == 10 / 255.0f);
    /* x = 0: source x = -1/3 -> X = (round(-341.33) + 16) >> 5 = -11: neighbours -1 (114, weight 11/32) and 0
     * (weight 21/32); y exact. R: (114*11 + 30*21 + 16) / 32 = 59; B: (114*11 + 10*21 + 16) / 32 = 46. */
    assert_true(at(&out, 0, 0, 1) == 59 / 255.0f);
    assert_true(at(&out, 2, 0, 1) == 46 / 255.0f);
    /* Corner: both axes mixed: the border gets 11*11 + 21*11 + 11*21 = 583 of 1024, the pixel 21*21 = 441. */
    assert_true(at(&out, 0, 0, 0) == ((114 * 583 + 30 * 441 + 512) >> 10) / 255.0f);
    mk_image_free(NULL, &out);
    mk_image_free(NULL, &src);
}

/* 2x2 source into 3x3 (darknet): new size 3x3, scales 0.5; values by hand. */
static void test_darknet_hand(void **state)
{
    (void)state;
    mk_image_t src = mk_image_desc(2, 2, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(NULL, &src, MK_MEM_HOST));
    const uint8_t r[4] = {0, 255, 51, 102};
    for (int i = 0; i < 4; i++) {
        uint8_t *px = (uint8_t *)mk_image_row(&src, 0, i / 2) + 3 * (i % 2);
        px[0] = r[i];
        px[1] = 7;
        px[2] = 255 - r[i];
    }
    mk_image_t out = run_cpu(&src, 3, 3, MK_LETTERBOX_DARKNET);
    assert_float_equal(at(&out, 0, 0, 0), 0.0f, 0);
    assert_float_equal(at(&out, 0, 1, 0), 0.5f, 1e-7);                     /* half of 0 and 1 */
    assert_float_equal(at(&out, 0, 2, 0), 1.0f, 0);                        /* last column: the last pixel */
    assert_float_equal(at(&out, 0, 1, 1), 0.5f * 0.5f + 0.5f * 0.3f, 1e-7); /* rows 0.5 and 0.3 mixed */
    assert_float_equal(at(&out, 0, 0, 2), 0.2f, 1e-7);                     /* last row: the last source row */
    assert_float_equal(at(&out, 1, 1, 1), 7 / 255.0f, 1e-7);
    assert_float_equal(at(&out, 2, 1, 0), 0.5f, 1e-7);
    mk_image_free(NULL, &out);
    mk_image_free(NULL, &src);
}

static void test_darknet_padding(void **state)
{
    (void)state;
    mk_letterbox_t lb;
    TU_OK(mk_letterbox_plan(&lb, 768, 576, 320, 320, MK_LETTERBOX_DARKNET));
    assert_int_equal(lb.new_w, 320);
    assert_int_equal(lb.new_h, 240);
    assert_int_equal(lb.pad_x, 0);
    assert_int_equal(lb.pad_y, 40);
    assert_true(lb.w_scale == 767.0f / 319.0f);
    mk_image_t src = tu_random_image(5, 768, 576, MK_FMT_BGR);
    mk_image_t out = run_cpu(&src, 320, 320, MK_LETTERBOX_DARKNET);
    for (int p = 0; p < 3; p++) {
        assert_true(at(&out, p, 17, 39) == 0.5f);
        assert_true(at(&out, p, 17, 280) == 0.5f);
        assert_true(at(&out, p, 0, 0) == 0.5f);
    }
    /* First content pixel is the first source pixel. */
    const uint8_t *s = src.data;
    assert_true(at(&out, 0, 0, 40) == s[2] / 255.0f);
    mk_image_free(NULL, &out);
    mk_image_free(NULL, &src);
}

static void test_plan_and_inverse(void **state)
{
    (void)state;
    const int sizes[][4] = {{1920, 1080, 416, 416}, {640, 480, 320, 320}, {321, 481, 608, 352}, {1, 1, 5, 7},
                            {7, 3000, 64, 64},      {4000, 3, 416, 416}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int m = 0; m < 2; m++) {
            mk_letterbox_t lb;
            const int *s = sizes[i];
            int rc = mk_letterbox_plan(&lb, s[0], s[1], s[2], s[3], (mk_letterbox_mode_t)m);
            if (m == 1 && rc == MK_ERANGE)
                continue; /* darknet: the 4000x3 frame would be 0 rows high */
            TU_OK(rc);
            /* Round trips. */
            for (int k = 0; k < 5; k++) {
                double xs = k * 97.3 - 13, ys = k * 41.7 + 2, xn, yn, xb, yb;
                mk_letterbox_to_net(&lb, xs, ys, &xn, &yn);
                mk_letterbox_to_src(&lb, xn, yn, &xb, &yb);
                assert_true(fabs(xb - xs) < 1e-9 * (1 + fabs(xs)) && fabs(yb - ys) < 1e-9 * (1 + fabs(ys)));
            }
            double xc, yc;
            if (m == 0) {
                /* Pixel-centre alignment: the source centre lands on the network centre. */
                mk_letterbox_to_net(&lb, (s[0] - 1) / 2.0, (s[1] - 1) / 2.0, &xc, &yc);
                assert_true(fabs(xc - (s[2] - 1) / 2.0) < 1e-3 && fabs(yc - (s[3] - 1) / 2.0) < 1e-3);
                /* The inverse in double agrees with the float forward matrix. */
                assert_true(fabs(lb.inv[0] * lb.m[0] - 1) < 1e-12 && fabs(lb.inv[2] + (double)lb.m[2] / lb.m[0]) < 1e-9);
            } else {
                /* Darknet: the content box maps onto the whole source (correct_yolo_boxes). */
                float box[4] = {(float)((s[2] - lb.new_w) / 2.0), (float)((s[3] - lb.new_h) / 2.0), (float)lb.new_w,
                                (float)lb.new_h};
                mk_letterbox_box_to_src(&lb, box);
                assert_true(fabs(box[0]) < 1e-3 && fabs(box[1]) < 1e-3);
                assert_true(fabs(box[2] - s[0]) < 1e-2 && fabs(box[3] - s[1]) < 1e-2);
            }
        }
}

static void test_opencv_warp_synthetic(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    char path[4096];
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "warp"))
    {
        int sw, sh, nw, nh;
        tu_json_size(cJSON_GetObjectItem(c, "src"), &sw, &sh);
        tu_json_size(cJSON_GetObjectItem(c, "net"), &nw, &nh);
        mk_image_t src = tu_random_image((uint64_t)cJSON_GetObjectItem(c, "seed")->valuedouble, sw, sh, MK_FMT_BGR);
        mk_image_t want = {0};
        TU_OK(mk_imageio_load(tu_test_data(path, sizeof path, cJSON_GetObjectItem(c, "expected")->valuestring),
                              MK_FMT_BGR, &want));
        /* Also through a source with a pitch wider than its rows and an RGB copy of it. */
        tu_guarded_t g;
        tu_guarded_alloc(&g, src, 13, 0xa5);
        mk_image_t rgb = mk_image_desc(sw, sh, MK_FMT_RGB, MK_U8);
        TU_OK(mk_image_alloc(NULL, &rgb, MK_MEM_HOST));
        for (int y = 0; y < sh; y++) {
            const uint8_t *s = mk_image_row(&src, 0, y);
            uint8_t *d = mk_image_row(&rgb, 0, y);
            memcpy(mk_image_row(&g.img, 0, y), s, (size_t)sw * 3);
            for (int x = 0; x < sw; x++)
                d[3 * x] = s[3 * x + 2], d[3 * x + 1] = s[3 * x + 1], d[3 * x + 2] = s[3 * x];
        }
        mk_image_t outs[3] = {run_cpu(&src, nw, nh, MK_LETTERBOX_WARP), run_cpu(&g.img, nw, nh, MK_LETTERBOX_WARP),
                              run_cpu(&rgb, nw, nh, MK_LETTERBOX_WARP)};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "warp %dx%d->%dx%d (variant %d)", sw, sh, nw, nh, k);
            assert_int_equal(diff_vs_bgr(&outs[k], &want, path), 0);
            mk_image_free(NULL, &outs[k]);
        }
        assert_true(tu_guard_ok(&g));
        tu_guarded_free(&g);
        mk_image_free(NULL, &rgb);
        mk_image_free(NULL, &src);
        mk_image_free(NULL, &want);
        n++;
    }
    assert_true(n >= 10);
    cJSON_Delete(refs);
}

static void test_opencv_warp_real(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    char path[4096];
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "warp_real"))
    {
        if (!tu_data_path(path, sizeof path, cJSON_GetObjectItem(c, "image")->valuestring)) {
            cJSON_Delete(refs);
            skip();
        }
        mk_image_t src = {0};
        int w, h;
        TU_OK(mk_imageio_load(path, MK_FMT_BGR, &src));
        tu_json_size(cJSON_GetObjectItem(c, "net"), &w, &h);
        check_warp(&src, w, h, cJSON_GetObjectItem(c, "expected")->valuestring,
                   cJSON_GetObjectItem(c, "image")->valuestring);
        mk_image_free(NULL, &src);
    }
    cJSON_Delete(refs);
}

static void test_opencv_yuyv(void **state)
{
    (void)state;
    cJSON *refs = tu_opencv_refs(), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "yuyv"))
    {
        int w, h, nw, nh;
        tu_json_size(cJSON_GetObjectItem(c, "src"), &w, &h);
        tu_json_size(cJSON_GetObjectItem(c, "net"), &nw, &nh);
        mk_image_t src = tu_random_image((uint64_t)cJSON_GetObjectItem(c, "seed")->valuedouble, w, h, MK_FMT_YUYV);
        check_warp(&src, nw, nh, cJSON_GetObjectItem(c, "expected")->valuestring, "yuyv");
        mk_image_free(NULL, &src);
    }
    /* Every combination of extreme Y, U, V values through an identity letterbox (cvtColor alone). */
    cJSON *ex = cJSON_GetObjectItem(refs, "yuyv_extremes"), *v;
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
    check_warp(&src, w, 1, cJSON_GetObjectItem(ex, "expected")->valuestring, "yuyv extremes");
    mk_image_free(NULL, &src);
    cJSON_Delete(refs);
}

/* The fused YUYV path equals converting first (OpenCV's cvtColor output as the RGB source), in darknet mode too. */
static void test_yuyv_fused_equals_converted(void **state)
{
    (void)state;
    char path[4096];
    cJSON *refs = tu_opencv_refs();
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(refs, "yuyv"), 1); /* 64x48, identity: cvtColor's output */
    mk_image_t yuyv = tu_random_image((uint64_t)cJSON_GetObjectItem(c, "seed")->valuedouble, 64, 48, MK_FMT_YUYV);
    mk_image_t bgr = {0};
    TU_OK(mk_imageio_load(tu_test_data(path, sizeof path, cJSON_GetObjectItem(c, "expected")->valuestring), MK_FMT_BGR,
                          &bgr));
    assert_int_equal(bgr.width, 64);
    for (int m = 0; m < 2; m++) {
        mk_image_t a = run_cpu(&yuyv, 50, 37, (mk_letterbox_mode_t)m), b = run_cpu(&bgr, 50, 37, (mk_letterbox_mode_t)m);
        for (int p = 0; p < 3; p++)
            for (int y = 0; y < 37; y++)
                assert_memory_equal(mk_image_row(&a, p, y), mk_image_row(&b, p, y), 50 * sizeof(float));
        mk_image_free(NULL, &a);
        mk_image_free(NULL, &b);
    }
    mk_image_free(NULL, &yuyv);
    mk_image_free(NULL, &bgr);
    cJSON_Delete(refs);
}

/* Finds the source photo of a Darknet reference: images/NAME.jpg or grabcut/images/NAME.jpg. */
static int find_photo(const char *name, char *path, size_t n)
{
    const char *dirs[] = {"images", "grabcut/images"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, n, "%s/%s/%.255s.jpg", tu_data_dir(), dirs[i], name);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return 0;
        }
    }
    return -1;
}

/* Darknet's own letterbox_image outputs (reference/darknet/MODEL/NAME.input.f32) from the TurboJPEG decode. */
static void test_darknet_reference(void **state)
{
    (void)state;
    char dir[4096], path[8800];
    if (!tu_data_path(dir, sizeof dir, "reference/darknet"))
        skip();
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    double worst = 0;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char model[4400];
        snprintf(model, sizeof model, "%s/%s", dir, e->d_name);
        DIR *md = opendir(model);
        if (!md)
            continue;
        struct dirent *f;
        while ((f = readdir(md))) {
            size_t len = strlen(f->d_name);
            if (len < 6 || strcmp(f->d_name + len - 5, ".json"))
                continue;
            snprintf(path, sizeof path, "%s/%s", model, f->d_name);
            cJSON *j = tu_load_json(path);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(len - 5), f->d_name);
            int nw = cJSON_GetObjectItem(j, "net_w")->valueint, nh = cJSON_GetObjectItem(j, "net_h")->valueint;
            char photo[8800];
            assert_int_equal(find_photo(name, photo, sizeof photo), 0);
            mk_image_t src = {0};
            TU_OK(mk_imageio_load(photo, MK_FMT_RGB, &src));
            assert_int_equal(src.width, cJSON_GetObjectItem(j, "image_w")->valueint);
            assert_int_equal(src.height, cJSON_GetObjectItem(j, "image_h")->valueint);
            mk_image_t out = run_cpu(&src, nw, nh, MK_LETTERBOX_DARKNET);
            snprintf(path, sizeof path, "%s/%s", model, cJSON_GetObjectItem(j, "input")->valuestring);
            void *ref = NULL;
            size_t bytes = 0;
            TU_OK(mk_file_read(path, &ref, &bytes));
            assert_int_equal(bytes, (size_t)nw * nh * 3 * sizeof(float));
            double maxd = 0;
            for (int p = 0; p < 3; p++)
                for (int y = 0; y < nh; y++)
                    for (int x = 0; x < nw; x++) {
                        double dv = fabs(at(&out, p, x, y) - ((float *)ref)[((size_t)p * nh + y) * nw + x]);
                        maxd = dv > maxd ? dv : maxd;
                    }
            print_message("darknet %s/%s %dx%d -> %dx%d: max |diff| %.3g\n", e->d_name, name, src.width, src.height,
                          nw, nh, maxd);
            assert_true(maxd <= 1e-4);
            worst = maxd > worst ? maxd : worst;
            files++;
            free(ref);
            mk_image_free(NULL, &out);
            mk_image_free(NULL, &src);
            cJSON_Delete(j);
        }
        closedir(md);
    }
    closedir(d);
    print_message("darknet letterbox: %d reference inputs, max |diff| %.3g\n", files, worst);
    assert_true(files >= 10);
}

static void test_bad_input(void **state)
{
    (void)state;
    mk_letterbox_t lb;
    mk_image_t src = tu_random_image(1, 8, 6, MK_FMT_BGR), dst = mk_image_desc_planar(4, 4, 3, MK_F32);
    TU_OK(mk_image_alloc(NULL, &dst, MK_MEM_HOST));
    assert_int_equal(mk_letterbox(NULL, &src, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    assert_int_equal(mk_letterbox(tu_cpu, NULL, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    assert_int_equal(mk_letterbox(tu_cpu, &src, NULL, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    assert_int_equal(mk_letterbox(tu_cpu, &src, &dst, (mk_letterbox_mode_t)7, NULL), MK_EINVAL);
    assert_true(strlen(mk_err_msg()) > 0);
    /* wrong formats */
    mk_image_t gray = tu_random_image(2, 8, 6, MK_FMT_GRAY);
    assert_int_equal(mk_letterbox(tu_cpu, &gray, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    assert_int_equal(mk_letterbox(tu_cpu, &src, &src, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    mk_image_t two = dst;
    two.channels = 2;
    assert_int_equal(mk_letterbox(tu_cpu, &src, &two, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    /* mismatched pitch, zero and huge sizes, wrong memory space */
    mk_image_t bad = src;
    bad.pitch = 10;
    assert_int_equal(mk_letterbox(tu_cpu, &bad, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    bad = src;
    bad.width = 0;
    assert_int_equal(mk_letterbox(tu_cpu, &bad, &dst, MK_LETTERBOX_WARP, NULL), MK_ERANGE);
    bad = src;
    bad.height = MK_IMAGE_MAX_DIM + 1;
    assert_int_equal(mk_letterbox(tu_cpu, &bad, &dst, MK_LETTERBOX_WARP, NULL), MK_ERANGE);
    bad = src;
    bad.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_letterbox(tu_cpu, &bad, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    bad = src;
    bad.data = NULL;
    assert_int_equal(mk_letterbox(tu_cpu, &bad, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    /* odd-width YUYV */
    mk_image_t y = mk_image_desc(7, 2, MK_FMT_YUYV, MK_U8);
    y.pitch = 16;
    y.data = src.data;
    assert_int_equal(mk_letterbox(tu_cpu, &y, &dst, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    /* plans */
    assert_int_equal(mk_letterbox_plan(&lb, 0, 10, 416, 416, MK_LETTERBOX_WARP), MK_ERANGE);
    assert_int_equal(mk_letterbox_plan(&lb, 10, 10, 416, 0, MK_LETTERBOX_DARKNET), MK_ERANGE);
    assert_int_equal(mk_letterbox_plan(&lb, 16384, 1, 416, 416, MK_LETTERBOX_DARKNET), MK_ERANGE);
    assert_int_equal(mk_letterbox_plan(NULL, 10, 10, 4, 4, MK_LETTERBOX_WARP), MK_EINVAL);
    assert_int_equal(mk_letterbox_mode_parse("affine", &lb.mode), MK_EINVAL);
    /* 16384x1 in warp mode is still fine: one row of content. */
    TU_OK(mk_letterbox_plan(&lb, 16384, 1, 416, 416, MK_LETTERBOX_WARP));
    mk_image_free(NULL, &gray);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warp_hand),
        cmocka_unit_test(test_darknet_hand),
        cmocka_unit_test(test_darknet_padding),
        cmocka_unit_test(test_plan_and_inverse),
        cmocka_unit_test(test_opencv_warp_synthetic),
        cmocka_unit_test(test_opencv_warp_real),
        cmocka_unit_test(test_opencv_yuyv),
        cmocka_unit_test(test_yuyv_fused_equals_converted),
        cmocka_unit_test(test_darknet_reference),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, tu_setup_cpu, tu_teardown_cpu);
}
