/* test_parity: every op on the CUDA backend against the CPU reference, bit for bit, on random and real inputs of
 * many shapes (odd sizes, 1x1, pitch != width, up- and downscaling), with guard bands around every device output
 * and outputs poisoned twice so that an unwritten element cannot pass. Exits 77 (skipped) without a GPU. */
#include "testutil.h"

#include "composite.h"
#include "imageio.h"
#include "letterbox.h"
#include "resize.h"
#include "shape.h"
#include "threshold.h"
#include "yuyv.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;
static const uint8_t poisons[2] = {0xa5, 0x5a};

static void assert_same(const mk_image_t *a, const mk_image_t *b, const char *what)
{
    size_t row = mk_image_row_bytes(a);
    for (size_t y = 0; y < mk_image_rows(a); y++)
        if (memcmp((const char *)a->data + y * a->pitch, (const char *)b->data + y * b->pitch, row)) {
            for (size_t x = 0; x < row; x++)
                if (((const uint8_t *)a->data)[y * a->pitch + x] != ((const uint8_t *)b->data)[y * b->pitch + x])
                    fail_msg("%s: CPU and CUDA differ at byte %zu of row %zu", what, x, y);
        }
}

/* ---- letterbox ------------------------------------------------------------------------------------------ */

static void letterbox_case(const mk_image_t *src, int nw, int nh, mk_letterbox_mode_t mode, size_t src_extra,
                           size_t dst_extra, const char *what)
{
    mk_image_t ref = mk_image_desc_planar(nw, nh, 3, MK_F32);
    TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
    int rc_cpu = mk_letterbox(cpu, src, &ref, mode, NULL);
    mk_image_t dsrc = tu_to_ctx(gpu, src, src_extra);
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        tu_dev_guard_alloc(gpu, &g, mk_image_desc_planar(nw, nh, 3, MK_F32), dst_extra, poisons[k]);
        int rc = mk_letterbox(gpu, &dsrc, &g.img, mode, NULL);
        if (rc != rc_cpu)
            fail_msg("%s: CPU returned %s, CUDA %s (%s)", what, mk_err_name(rc_cpu), mk_err_name(rc), mk_err_msg());
        TU_OK(mk_ctx_sync(gpu));
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        if (!rc)
            assert_same(&ref, &got, what);
        mk_image_free(NULL, &got);
        tu_dev_guard_free(gpu, &g);
    }
    mk_image_free(gpu, &dsrc);
    mk_image_free(NULL, &ref);
}

static void test_letterbox_fixed(void **state)
{
    (void)state;
    const struct {
        int sw, sh, nw, nh;
        mk_format_t fmt;
    } cases[] = {
        {1920, 1080, 416, 416, MK_FMT_BGR}, {1280, 720, 320, 320, MK_FMT_YUYV}, {640, 480, 416, 416, MK_FMT_RGB},
        {100, 80, 640, 640, MK_FMT_BGR},    {1, 1, 3, 3, MK_FMT_BGR},           {2, 1, 1, 1, MK_FMT_YUYV},
        {1, 1000, 64, 64, MK_FMT_RGB},      {3000, 2, 416, 416, MK_FMT_BGR},    {416, 416, 416, 416, MK_FMT_BGR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_image_t src = tu_random_image(100 + i, cases[i].sw, cases[i].sh, cases[i].fmt);
        for (int m = 0; m < 2; m++) {
            char what[128];
            snprintf(what, sizeof what, "letterbox %s %dx%d %s -> %dx%d", mk_format_name(cases[i].fmt), cases[i].sw,
                     cases[i].sh, m ? "darknet" : "warp", cases[i].nw, cases[i].nh);
            letterbox_case(&src, cases[i].nw, cases[i].nh, (mk_letterbox_mode_t)m, i % 3 ? 0 : 7, i % 2 ? 12 : 0,
                           what);
        }
        mk_image_free(NULL, &src);
    }
}

static void test_letterbox_random(void **state)
{
    (void)state;
    tu_rng_t r = {2024};
    const mk_format_t fmts[3] = {MK_FMT_BGR, MK_FMT_RGB, MK_FMT_YUYV};
    for (int i = 0; i < 150; i++) {
        mk_format_t fmt = fmts[tu_rand_int(&r, 0, 2)];
        int sw = tu_rand_int(&r, 1, 400), sh = tu_rand_int(&r, 1, 400);
        if (fmt == MK_FMT_YUYV && sw % 2)
            sw++;
        int nw = tu_rand_int(&r, 1, 500), nh = tu_rand_int(&r, 1, 500);
        mk_letterbox_mode_t mode = (mk_letterbox_mode_t)tu_rand_int(&r, 0, 1);
        size_t se = (size_t)tu_rand_int(&r, 0, 40), de = 4 * (size_t)tu_rand_int(&r, 0, 9);
        mk_image_t src = tu_random_image(tu_rand(&r), sw, sh, fmt);
        char what[160];
        snprintf(what, sizeof what, "random %d: %s %dx%d (+%zu) %s -> %dx%d (+%zu)", i, mk_format_name(fmt), sw, sh,
                 se, mk_letterbox_mode_name(mode), nw, nh, de);
        letterbox_case(&src, nw, nh, mode, se, de, what);
        mk_image_free(NULL, &src);
    }
}

/* ---- threshold, histogram, Otsu ------------------------------------------------------------------------- */

static void threshold_case(const mk_image_t *src, int otsu, int t, int maxval, mk_thresh_mode_t mode,
                           size_t src_extra, size_t dst_extra, int in_place, const char *what)
{
    mk_image_t ref = mk_image_desc(src->width, src->height, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
    int t_cpu = t, t_gpu = -1;
    if (otsu)
        TU_OK(mk_threshold_otsu(cpu, src, &ref, maxval, mode, &t_cpu));
    else
        TU_OK(mk_threshold(cpu, src, &ref, t, maxval, mode));
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        mk_image_t dsrc = {0};
        tu_dev_guard_alloc(gpu, &g, mk_image_desc(src->width, src->height, MK_FMT_GRAY, MK_U8), in_place ? src_extra : dst_extra,
                        poisons[k]);
        if (in_place) {
            mk_image_t tmp = tu_to_ctx(gpu, src, src_extra);
            TU_OK(mk_image_copy(gpu, &g.img, &tmp));
            mk_image_free(gpu, &tmp);
        } else {
            dsrc = tu_to_ctx(gpu, src, src_extra);
        }
        const mk_image_t *in = in_place ? &g.img : &dsrc;
        if (otsu)
            TU_OK(mk_threshold_otsu(gpu, in, &g.img, maxval, mode, k ? &t_gpu : NULL));
        else
            TU_OK(mk_threshold(gpu, in, &g.img, t, maxval, mode));
        TU_OK(mk_ctx_sync(gpu));
        if (otsu && k && t_gpu != t_cpu)
            fail_msg("%s: Otsu threshold CPU %d, CUDA %d", what, t_cpu, t_gpu);
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        assert_same(&ref, &got, what);
        mk_image_free(NULL, &got);
        mk_image_free(gpu, &dsrc);
        tu_dev_guard_free(gpu, &g);
    }
    mk_image_free(NULL, &ref);
}

static void test_threshold_random(void **state)
{
    (void)state;
    tu_rng_t r = {77};
    for (int i = 0; i < 120; i++) {
        int w = i < 4 ? (int[]){1, 16, 1920, 17}[i] : tu_rand_int(&r, 1, 300);
        int h = i < 4 ? (int[]){1, 1, 1080, 3}[i] : tu_rand_int(&r, 1, 200);
        size_t se = i % 3 == 0 ? 0 : (size_t)tu_rand_int(&r, 0, 40), de = i % 4 == 0 ? 0 : (size_t)tu_rand_int(&r, 0, 33);
        if (i % 5 == 0) { /* rows 16-byte aligned: the vector path */
            se = (16 - (size_t)w % 16) % 16;
            de = se;
        }
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, MK_FMT_GRAY);
        int t = tu_rand_int(&r, 0, 255), mv = tu_rand_int(&r, 0, 255);
        mk_thresh_mode_t mode = (mk_thresh_mode_t)tu_rand_int(&r, 0, 4);
        char what[128];
        snprintf(what, sizeof what, "threshold %d: %dx%d (+%zu,+%zu) t=%d maxval=%d %s", i, w, h, se, de, t, mv,
                 mk_thresh_mode_name(mode));
        threshold_case(&src, 0, t, mv, mode, se, de, i % 7 == 0, what);
        snprintf(what, sizeof what, "otsu %d: %dx%d (+%zu,+%zu) maxval=%d %s", i, w, h, se, de, mv,
                 mk_thresh_mode_name(mode));
        threshold_case(&src, 1, 0, mv, mode, se, de, i % 7 == 3, what);
        mk_image_free(NULL, &src);
    }
}

static void test_histogram(void **state)
{
    (void)state;
    tu_rng_t r = {5};
    for (int i = 0; i < 40; i++) {
        int w = tu_rand_int(&r, 1, 700), h = tu_rand_int(&r, 1, 500);
        mk_image_t src = i % 4 ? tu_random_image(tu_rand(&r), w, h, MK_FMT_GRAY) : tu_otsu_image(i);
        mk_image_t d = tu_to_ctx(gpu, &src, (size_t)tu_rand_int(&r, 0, 20));
        uint32_t a[256], b[256];
        TU_OK(mk_histogram(cpu, &src, a));
        TU_OK(mk_histogram(gpu, &d, b));
        assert_memory_equal(a, b, sizeof a);
        mk_image_free(gpu, &d);
        mk_image_free(NULL, &src);
    }
}

/* Every synthetic histogram of the OpenCV reference set, the >2^23-pixel cases, and real images. */
static void test_otsu_sets(void **state)
{
    (void)state;
    char what[128], path[4096];
    for (int k = 0; k < 350; k++) {
        mk_image_t src = tu_otsu_image(k);
        snprintf(what, sizeof what, "otsu synthetic %d (%dx%d)", k, src.width, src.height);
        threshold_case(&src, 1, 0, 255, MK_THRESH_BINARY, (size_t)(k % 5), (size_t)(k % 3), 0, what);
        mk_image_free(NULL, &src);
    }
    cJSON *refs = tu_opencv_refs(), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "otsu_big"))
    {
        mk_image_t src = tu_otsu_big(c);
        threshold_case(&src, 1, 0, 255, MK_THRESH_BINARY, 0, 0, 0, "otsu big");
        mk_image_free(NULL, &src);
    }
    int real = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "otsu_real"))
    {
        if (!tu_data_path(path, sizeof path, cJSON_GetObjectItem(c, "image")->valuestring))
            break;
        mk_image_t src = tu_real_channel(path, 1);
        threshold_case(&src, 1, 0, 255, MK_THRESH_BINARY, 0, 0, 0, cJSON_GetObjectItem(c, "image")->valuestring);
        mk_image_free(NULL, &src);
        real++;
    }
    print_message("otsu parity: 350 synthetic, big, %d real images\n", real);
    cJSON_Delete(refs);
}

/* The device keeps Otsu state between calls: alternating inputs must not leak into each other. */
static void test_otsu_repeated(void **state)
{
    (void)state;
    mk_image_t a = tu_otsu_image(3), b = tu_random_image(8, 640, 480, MK_FMT_GRAY);
    mk_image_t da = tu_to_ctx(gpu, &a, 0), db = tu_to_ctx(gpu, &b, 0), oa = da, ob = db;
    oa.data = ob.data = NULL;
    oa.owned = ob.owned = 0;
    TU_OK(mk_image_alloc(gpu, &oa, MK_MEM_DEVICE));
    TU_OK(mk_image_alloc(gpu, &ob, MK_MEM_DEVICE));
    int ta, tb, t;
    TU_OK(mk_threshold_otsu(cpu, &a, &a, 255, MK_THRESH_TOZERO, &ta));
    TU_OK(mk_threshold_otsu(cpu, &b, &b, 255, MK_THRESH_TOZERO, &tb));
    for (int i = 0; i < 20; i++) {
        TU_OK(mk_threshold_otsu(gpu, &da, &oa, 255, MK_THRESH_TOZERO, NULL));
        TU_OK(mk_threshold_otsu(gpu, &db, &ob, 255, MK_THRESH_TOZERO, i % 2 ? &t : NULL));
        if (i % 2)
            assert_int_equal(t, tb);
    }
    TU_OK(mk_threshold_otsu(gpu, &da, &oa, 255, MK_THRESH_TOZERO, &t));
    assert_int_equal(t, ta);
    mk_image_t ha = tu_to_host(gpu, &oa), hb = tu_to_host(gpu, &ob);
    assert_same(&a, &ha, "repeated a");
    assert_same(&b, &hb, "repeated b");
    mk_image_free(NULL, &ha);
    mk_image_free(NULL, &hb);
    mk_image_free(gpu, &oa);
    mk_image_free(gpu, &ob);
    mk_image_free(gpu, &da);
    mk_image_free(gpu, &db);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
}

/* One image op from a source on the device: run(arg, src, dst) writes dst from src. */
typedef int (*image_op_fn)(const void *arg, const mk_image_t *src, mk_image_t *dst);

/* Runs op on the GPU into a guarded output of `desc` (extra pitch de) under each poison, and checks that the guard
 * bands are intact and the result equals ref. */
static void check_on_gpu(image_op_fn op, const void *arg, const mk_image_t *dsrc, mk_image_t desc, size_t de,
                         const mk_image_t *ref, const char *what)
{
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        tu_dev_guard_alloc(gpu, &g, desc, de, poisons[k]);
        TU_OK(op(arg, dsrc, &g.img));
        TU_OK(mk_ctx_sync(gpu));
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        assert_same(ref, &got, what);
        mk_image_free(NULL, &got);
        tu_dev_guard_free(gpu, &g);
    }
}

/* ---- YUYV -> RGB/BGR ----------------------------------------------------------------------------------- */

static int yuyv_op(const void *arg, const mk_image_t *src, mk_image_t *dst)
{
    (void)arg;
    return mk_yuyv_to_rgb(gpu, src, dst);
}

static void test_yuyv_random(void **state)
{
    (void)state;
    tu_rng_t r = {4242};
    for (int i = 0; i < 80; i++) {
        int w = i < 3 ? (int[]){2, 1920, 2}[i] : 2 * tu_rand_int(&r, 1, 400);
        int h = i < 3 ? (int[]){1, 1080, 7}[i] : tu_rand_int(&r, 1, 300);
        mk_format_t fmt = i % 2 ? MK_FMT_RGB : MK_FMT_BGR;
        size_t se = (size_t)tu_rand_int(&r, 0, 40), de = (size_t)tu_rand_int(&r, 0, 40);
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, MK_FMT_YUYV);
        mk_image_t ref = mk_image_desc(w, h, fmt, MK_U8);
        TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
        TU_OK(mk_yuyv_to_rgb(cpu, &src, &ref));
        mk_image_t dsrc = tu_to_ctx(gpu, &src, se);
        char what[128];
        snprintf(what, sizeof what, "yuyv %d: %dx%d (+%zu,+%zu) -> %s", i, w, h, se, de, mk_format_name(fmt));
        check_on_gpu(yuyv_op, NULL, &dsrc, mk_image_desc(w, h, fmt, MK_U8), de, &ref, what);
        mk_image_free(gpu, &dsrc);
        mk_image_free(NULL, &ref);
        mk_image_free(NULL, &src);
    }
}

/* ---- area downsampling ------------------------------------------------------------------------------------ */

static int downsample_op(const void *arg, const mk_image_t *src, mk_image_t *dst)
{
    return mk_downsample_area(gpu, src, dst, *(const int *)arg);
}

static void test_downsample_random(void **state)
{
    (void)state;
    tu_rng_t r = {9001};
    for (int i = 0; i < 90; i++) {
        int w = i < 3 ? (int[]){1, 1920, 7}[i] : tu_rand_int(&r, 1, 500);
        int h = i < 3 ? (int[]){1, 1080, 1}[i] : tu_rand_int(&r, 1, 400);
        int s = i < 3 ? (int[]){1, 4, 64}[i] : tu_rand_int(&r, 1, 9);
        mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3];
        int dw = (w + s - 1) / s, dh = (h + s - 1) / s;
        size_t se = (size_t)tu_rand_int(&r, 0, 40), de = (size_t)tu_rand_int(&r, 0, 40);
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, fmt);
        mk_image_t ref = mk_image_desc(dw, dh, fmt, MK_U8);
        TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
        TU_OK(mk_downsample_area(cpu, &src, &ref, s));
        mk_image_t dsrc = tu_to_ctx(gpu, &src, se);
        char what[128];
        snprintf(what, sizeof what, "downsample %d: %dx%d %s by %d (+%zu,+%zu)", i, w, h, mk_format_name(fmt), s, se,
                 de);
        check_on_gpu(downsample_op, &s, &dsrc, mk_image_desc(dw, dh, fmt, MK_U8), de, &ref, what);
        mk_image_free(gpu, &dsrc);
        mk_image_free(NULL, &ref);
        mk_image_free(NULL, &src);
    }
}

/* ---- compositing: blend, blur, bilinear resize ---------------------------------------------------------- */

typedef struct {
    const mk_image_t *alpha, *bg; /* on the device */
    int r;
} composite_arg_t;

static int composite_op(const void *arg, const mk_image_t *src, mk_image_t *dst)
{
    const composite_arg_t *a = arg;
    return mk_composite(gpu, src, a->alpha, a->bg, dst);
}

static int blur_op(const void *arg, const mk_image_t *src, mk_image_t *dst)
{
    return mk_blur(gpu, src, dst, ((const composite_arg_t *)arg)->r);
}

static int bilinear_op(const void *arg, const mk_image_t *src, mk_image_t *dst)
{
    (void)arg;
    return mk_resize_bilinear(gpu, src, dst);
}

/* The blend of frame f, alpha a and background b on both backends: into guarded outputs, and in place over a
 * device copy of the frame. */
static void composite_case(const mk_image_t *f, const mk_image_t *a, const mk_image_t *b, tu_rng_t *r,
                           const char *what)
{
    mk_image_t ref = mk_image_desc(f->width, f->height, f->format, MK_U8);
    TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
    TU_OK(mk_composite(cpu, f, a, b, &ref));
    mk_image_t df = tu_to_ctx(gpu, f, (size_t)tu_rand_int(r, 0, 40));
    mk_image_t da = tu_to_ctx(gpu, a, (size_t)tu_rand_int(r, 0, 40));
    mk_image_t db = tu_to_ctx(gpu, b, (size_t)tu_rand_int(r, 0, 40));
    composite_arg_t arg = {&da, &db, 0};
    check_on_gpu(composite_op, &arg, &df, mk_image_desc(f->width, f->height, f->format, MK_U8),
                 (size_t)tu_rand_int(r, 0, 40), &ref, what);
    TU_OK(mk_composite(gpu, &df, &da, &db, &df));
    mk_image_t got = tu_to_host(gpu, &df);
    assert_same(&ref, &got, what);
    mk_image_free(NULL, &got);
    mk_image_free(gpu, &df);
    mk_image_free(gpu, &da);
    mk_image_free(gpu, &db);
    mk_image_free(NULL, &ref);
}

static void blur_case(const mk_image_t *src, int rad, tu_rng_t *r, const char *what)
{
    mk_image_t ref = mk_image_desc(src->width, src->height, src->format, MK_U8);
    TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
    TU_OK(mk_blur(cpu, src, &ref, rad));
    mk_image_t dsrc = tu_to_ctx(gpu, src, (size_t)tu_rand_int(r, 0, 40));
    composite_arg_t arg = {NULL, NULL, rad};
    check_on_gpu(blur_op, &arg, &dsrc, mk_image_desc(src->width, src->height, src->format, MK_U8),
                 (size_t)tu_rand_int(r, 0, 40), &ref, what);
    mk_image_free(gpu, &dsrc);
    mk_image_free(NULL, &ref);
}

static void bilinear_case(const mk_image_t *src, int dw, int dh, tu_rng_t *r, const char *what)
{
    mk_image_t ref = mk_image_desc(dw, dh, src->format, MK_U8);
    TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
    TU_OK(mk_resize_bilinear(cpu, src, &ref));
    mk_image_t dsrc = tu_to_ctx(gpu, src, (size_t)tu_rand_int(r, 0, 40));
    check_on_gpu(bilinear_op, NULL, &dsrc, mk_image_desc(dw, dh, src->format, MK_U8),
                 (size_t)tu_rand_int(r, 0, 40), &ref, what);
    mk_image_free(gpu, &dsrc);
    mk_image_free(NULL, &ref);
}

static void test_composite_random(void **state)
{
    (void)state;
    tu_rng_t r = {8080};
    for (int i = 0; i < 60; i++) {
        int w = i < 3 ? (int[]){1, 1920, 3}[i] : tu_rand_int(&r, 1, 500);
        int h = i < 3 ? (int[]){1, 1080, 1}[i] : tu_rand_int(&r, 1, 400);
        mk_format_t fmt = i % 2 ? MK_FMT_RGB : MK_FMT_BGR;
        mk_image_t f = tu_random_image(tu_rand(&r), w, h, fmt), b = tu_random_image(tu_rand(&r), w, h, fmt);
        mk_image_t a = tu_random_image(tu_rand(&r), w, h, MK_FMT_GRAY);
        char what[128];
        snprintf(what, sizeof what, "composite %d: %dx%d %s", i, w, h, mk_format_name(fmt));
        composite_case(&f, &a, &b, &r, what);
        mk_image_free(NULL, &f);
        mk_image_free(NULL, &b);
        mk_image_free(NULL, &a);
    }
}

static void test_blur_random(void **state)
{
    (void)state;
    tu_rng_t r = {5150};
    for (int i = 0; i < 60; i++) {
        int w = i < 4 ? (int[]){1, 1920, 1, 33}[i] : tu_rand_int(&r, 1, 400);
        int h = i < 4 ? (int[]){1, 1080, 50, 1}[i] : tu_rand_int(&r, 1, 300);
        int rad = i < 4 ? (int[]){3, 12, 70, 0}[i] : tu_rand_int(&r, 0, i % 5 ? 20 : 600);
        mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3];
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, fmt);
        char what[128];
        snprintf(what, sizeof what, "blur %d: %dx%d %s r %d", i, w, h, mk_format_name(fmt), rad);
        blur_case(&src, rad, &r, what);
        mk_image_free(NULL, &src);
    }
}

static void test_bilinear_random(void **state)
{
    (void)state;
    tu_rng_t r = {6061};
    for (int i = 0; i < 80; i++) {
        int w = i < 3 ? (int[]){1, 640, 1920}[i] : tu_rand_int(&r, 1, 500);
        int h = i < 3 ? (int[]){1, 480, 1080}[i] : tu_rand_int(&r, 1, 400);
        int dw = i < 3 ? (int[]){7, 1920, 1280}[i] : tu_rand_int(&r, 1, 600);
        int dh = i < 3 ? (int[]){1, 1080, 720}[i] : tu_rand_int(&r, 1, 500);
        mk_format_t fmt = (mk_format_t[]){MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR}[i % 3];
        mk_image_t src = tu_random_image(tu_rand(&r), w, h, fmt);
        char what[128];
        snprintf(what, sizeof what, "bilinear %d: %dx%d -> %dx%d %s", i, w, h, dw, dh, mk_format_name(fmt));
        bilinear_case(&src, dw, dh, &r, what);
        mk_image_free(NULL, &src);
    }
}

/* The photos of the shared data: each blended with the next one (resized over it) by an alpha made of its own
 * blurred green channel, blurred at several radii. */
static void test_composite_real(void **state)
{
    (void)state;
    static const char *const names[] = {"person", "dog", "horses", "scream", "eagle"};
    tu_rng_t r = {99};
    int n = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < n; i++) {
        char rel[64], path[4096], next[4096];
        snprintf(rel, sizeof rel, "images/%s.jpg", names[i]);
        if (!tu_data_path(path, sizeof path, rel))
            skip();
        snprintf(rel, sizeof rel, "images/%s.jpg", names[(i + 1) % n]);
        if (!tu_data_path(next, sizeof next, rel))
            skip();
        mk_format_t fmt = i % 2 ? MK_FMT_RGB : MK_FMT_BGR;
        mk_image_t f, other, green;
        TU_OK(mk_imageio_load(path, fmt, &f));
        TU_OK(mk_imageio_load(next, fmt, &other));
        green = tu_real_channel(path, 1);
        char what[160];
        snprintf(what, sizeof what, "%s: bilinear from %s", names[i], names[(i + 1) % n]);
        bilinear_case(&other, f.width, f.height, &r, what);
        mk_image_t bg = mk_image_desc(f.width, f.height, fmt, MK_U8);
        mk_image_t alpha = mk_image_desc(f.width, f.height, MK_FMT_GRAY, MK_U8);
        TU_OK(mk_image_alloc(NULL, &bg, MK_MEM_HOST));
        TU_OK(mk_image_alloc(NULL, &alpha, MK_MEM_HOST));
        TU_OK(mk_resize_bilinear(cpu, &other, &bg));
        TU_OK(mk_blur(cpu, &green, &alpha, 4));
        snprintf(what, sizeof what, "%s: composite", names[i]);
        composite_case(&f, &alpha, &bg, &r, what);
        const int radii[] = {1, 8, 31};
        for (int k = 0; k < 3; k++) {
            snprintf(what, sizeof what, "%s: blur r %d", names[i], radii[k]);
            blur_case(&f, radii[k], &r, what);
        }
        mk_image_free(NULL, &bg);
        mk_image_free(NULL, &alpha);
        mk_image_free(NULL, &green);
        mk_image_free(NULL, &other);
        mk_image_free(NULL, &f);
    }
}

/* ---- rounded-box fill ------------------------------------------------------------------------------------- */

static void test_shape_random(void **state)
{
    (void)state;
    tu_rng_t r = {777};
    for (int i = 0; i < 120; i++) {
        int w = i < 2 ? (int[]){1, 1920}[i] : tu_rand_int(&r, 1, 500);
        int h = i < 2 ? (int[]){1, 1080}[i] : tu_rand_int(&r, 1, 400);
        mk_dtype_t dt = i % 2 ? MK_F32 : MK_U8;
        /* Edges on fractions of a pixel (thirds: never exact in binary) and ellipses, boxes partly outside. */
        float x = (float)tu_rand_int(&r, -3 * w, 9 * w) / 6, y = (float)tu_rand_int(&r, -3 * h, 9 * h) / 6;
        float bw = (float)tu_rand_int(&r, 0, 6 * w) / 3, bh = (float)tu_rand_int(&r, 0, 6 * h) / 3;
        float fx = (float)tu_rand_int(&r, 0, 100) / 100, fy = (float)tu_rand_int(&r, 0, 100) / 100;
        if (i % 3 == 0)
            fx = fy = 1;
        mk_rbox_t b = mk_rbox_make(x, y, bw, bh, fx, fy);
        size_t de = (size_t)tu_rand_int(&r, 0, 10) * mk_dtype_size(dt);
        mk_image_t ref = mk_image_desc(w, h, MK_FMT_GRAY, dt);
        TU_OK(mk_image_alloc(NULL, &ref, MK_MEM_HOST));
        TU_OK(mk_shape_fill(cpu, &ref, &b));
        char what[160];
        snprintf(what, sizeof what, "shape %d: %dx%d %s (+%zu), box %g,%g %gx%g round %g,%g", i, w, h,
                 mk_dtype_name(dt), de, x, y, bw, bh, fx, fy);
        for (int k = 0; k < 2; k++) {
            tu_dev_guard_t g;
            tu_dev_guard_alloc(gpu, &g, mk_image_desc(w, h, MK_FMT_GRAY, dt), de, poisons[k]);
            TU_OK(mk_shape_fill(gpu, &g.img, &b));
            TU_OK(mk_ctx_sync(gpu));
            mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
            assert_same(&ref, &got, what);
            mk_image_free(NULL, &got);
            tu_dev_guard_free(gpu, &g);
        }
        mk_image_free(NULL, &ref);
    }
}

/* Bad input on the CUDA backend: errors, not crashes; host images are refused. */
static void test_cuda_bad_input(void **state)
{
    (void)state;
    mk_image_t h = tu_random_image(1, 8, 8, MK_FMT_BGR), g = tu_random_image(2, 8, 8, MK_FMT_GRAY);
    mk_image_t out = mk_image_desc_planar(4, 4, 3, MK_F32);
    TU_OK(mk_image_alloc(gpu, &out, MK_MEM_DEVICE));
    assert_int_equal(mk_letterbox(gpu, &h, &out, MK_LETTERBOX_WARP, NULL), MK_EINVAL);
    assert_int_equal(mk_threshold(gpu, &g, &g, 1, 255, MK_THRESH_BINARY), MK_EINVAL);
    uint32_t hist[256];
    assert_int_equal(mk_histogram(gpu, &g, hist), MK_EINVAL);
    mk_image_t y = tu_random_image(3, 8, 8, MK_FMT_YUYV), rgb = mk_image_desc(8, 8, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(gpu, &rgb, MK_MEM_DEVICE));
    assert_int_equal(mk_yuyv_to_rgb(gpu, &y, &rgb), MK_EINVAL);
    mk_rbox_t box = {1, 1, 5, 5, 2, 2};
    assert_int_equal(mk_shape_fill(gpu, &g, &box), MK_EINVAL);
    mk_image_t hb = tu_random_image(4, 8, 8, MK_FMT_BGR);
    assert_int_equal(mk_composite(gpu, &h, &g, &hb, &hb), MK_EINVAL);
    assert_int_equal(mk_blur(gpu, &h, &hb, 2), MK_EINVAL);
    assert_int_equal(mk_resize_bilinear(gpu, &h, &hb), MK_EINVAL);
    mk_image_free(NULL, &hb);
    mk_image_free(gpu, &rgb);
    mk_image_free(NULL, &y);
    mk_image_t huge = mk_image_desc(MK_IMAGE_MAX_DIM + 1, 1, MK_FMT_GRAY, MK_U8);
    assert_int_equal(mk_image_alloc(gpu, &huge, MK_MEM_DEVICE), MK_ERANGE);
    mk_image_free(gpu, &out);
    mk_image_free(NULL, &h);
    mk_image_free(NULL, &g);
}

int main(void)
{
    int start = tu_cuda_main("CUDA parity tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_letterbox_fixed), cmocka_unit_test(test_letterbox_random),
        cmocka_unit_test(test_threshold_random), cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_otsu_sets),       cmocka_unit_test(test_otsu_repeated),
        cmocka_unit_test(test_yuyv_random),     cmocka_unit_test(test_shape_random),
        cmocka_unit_test(test_downsample_random), cmocka_unit_test(test_composite_random),
        cmocka_unit_test(test_blur_random),       cmocka_unit_test(test_bilinear_random),
        cmocka_unit_test(test_composite_real),
        cmocka_unit_test(test_cuda_bad_input),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}
