/* test_testpattern: the synthetic scene — determinism (same frame number, same bytes, whatever the order or the
 * generator), motion, the ground-truth mask against the rendered frame and the background, the box, the colours
 * the figure is drawn in; and the test pattern as a source (spec parsing, frames, pacing, held frames). */
#include "testutil.h"

#include "source.h"
#include "testpattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mk_image_t host_image(int w, int h, mk_format_t f, size_t extra)
{
    mk_image_t img = mk_image_desc(w, h, f, MK_U8);
    img.pitch = mk_image_row_bytes(&img) + extra;
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    return img;
}

static int same_pixels(const mk_image_t *a, const mk_image_t *b)
{
    for (int y = 0; y < a->height; y++)
        if (memcmp(mk_image_row(a, 0, y), mk_image_row(b, 0, y), mk_image_row_bytes(a)))
            return 0;
    return 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_deterministic(void **state)
{
    (void)state;
    mk_testpattern_t *a, *b;
    TU_OK(mk_testpattern_create(320, 240, 30, &a));
    TU_OK(mk_testpattern_create(320, 240, 30, &b));
    const uint64_t seqs[] = {0, 17, 1000, 123456789};
    mk_image_t fa[4], fb = host_image(320, 240, MK_FMT_RGB, 7), bgr = host_image(320, 240, MK_FMT_BGR, 0);
    for (int i = 0; i < 4; i++) {
        fa[i] = host_image(320, 240, MK_FMT_RGB, 0);
        TU_OK(mk_testpattern_frame(a, seqs[i], &fa[i]));
    }
    /* Another generator, the reverse order, a padded pitch: the same bytes. */
    for (int i = 3; i >= 0; i--) {
        TU_OK(mk_testpattern_frame(b, seqs[i], &fb));
        assert_true(same_pixels(&fa[i], &fb));
        TU_OK(mk_testpattern_frame(a, seqs[i], &fb));
        assert_true(same_pixels(&fa[i], &fb));
        TU_OK(mk_testpattern_frame(a, seqs[i], &bgr));
        for (int y = 0; y < 240; y++) {
            const uint8_t *p = mk_image_row(&fa[i], 0, y), *q = mk_image_row(&bgr, 0, y);
            for (int x = 0; x < 320; x++)
                assert_true(p[3 * x] == q[3 * x + 2] && p[3 * x + 1] == q[3 * x + 1] && p[3 * x + 2] == q[3 * x]);
        }
    }
    /* The figure moves: neighbouring frames and their masks differ. */
    assert_false(same_pixels(&fa[0], &fa[1]));
    mk_image_t m0 = host_image(320, 240, MK_FMT_GRAY, 0), m1 = host_image(320, 240, MK_FMT_GRAY, 0);
    TU_OK(mk_testpattern_mask(a, 0, &m0));
    TU_OK(mk_testpattern_mask(a, 1, &m1));
    assert_false(same_pixels(&m0, &m1));
    TU_OK(mk_testpattern_mask(b, 0, &m1));
    assert_true(same_pixels(&m0, &m1));
    for (int i = 0; i < 4; i++)
        mk_image_free(NULL, &fa[i]);
    mk_image_free(NULL, &fb);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &m0);
    mk_image_free(NULL, &m1);
    mk_testpattern_destroy(a);
    mk_testpattern_destroy(b);
}

/* For frame `seq`: outside the mask the frame is the background; inside it the figure's colours (skin, shirt
 * blue, hair, eyes) replace the background; the box holds the mask within 2 pixels; the mask is a plausible
 * person (a few to half of the frame, its top a head narrower than the shoulders below it). */
static void check_mask(mk_testpattern_t *tp, int w, int h, uint64_t seq)
{
    mk_image_t frame = host_image(w, h, MK_FMT_RGB, 3), mask = host_image(w, h, MK_FMT_GRAY, 5);
    TU_OK(mk_testpattern_frame(tp, seq, &frame));
    TU_OK(mk_testpattern_mask(tp, seq, &mask));
    const mk_image_t *bg = mk_testpattern_background(tp);
    assert_non_null(bg);
    long area = 0, differs = 0, skin = 0, blue = 0;
    int x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (int y = 0; y < h; y++) {
        const uint8_t *f = mk_image_row(&frame, 0, y), *b = mk_image_row(bg, 0, y), *m = mk_image_row(&mask, 0, y);
        for (int x = 0; x < w; x++) {
            const uint8_t *p = f + 3 * x, *q = b + 3 * x;
            if (m[x] == 0) {
                if (memcmp(p, q, 3))
                    fail_msg("frame %llu (%dx%d): pixel (%d,%d) outside the mask is not the background",
                             (unsigned long long)seq, w, h, x, y);
                continue;
            }
            assert_int_equal(m[x], 255);
            area++;
            differs += memcmp(p, q, 3) != 0;
            skin += abs(p[0] - 222) <= 4 && abs(p[1] - 170) <= 4 && abs(p[2] - 138) <= 4;
            blue += p[2] > p[0] + 80;
            x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1, y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
        }
    }
    assert_true(area > (long)w * h / 40 && area < (long)w * h / 2);
    assert_true(differs >= area * 97 / 100);
    assert_true(skin >= area / 20);
    assert_true(blue >= area / 4);
    assert_int_equal(y1, h - 1); /* the torso reaches the bottom edge */
    int box[4];
    mk_testpattern_box(tp, seq, box);
    assert_true(box[0] <= x0 && box[1] <= y0 && box[0] + box[2] - 1 >= x1 && box[1] + box[3] - 1 >= y1);
    assert_true(x0 - box[0] <= 2 && y0 - box[1] <= 2 && box[0] + box[2] - 1 - x1 <= 2 && box[1] + box[3] - 1 - y1 <= 2);
    /* The head: the first mask rows are narrower than the shoulders further down. */
    int head_w = 0, body_w = 0;
    const uint8_t *top = mk_image_row(&mask, 0, y0 + (y1 - y0) / 10), *mid = mk_image_row(&mask, 0, y0 + (y1 - y0) * 6 / 10);
    for (int x = 0; x < w; x++)
        head_w += top[x] != 0, body_w += mid[x] != 0;
    assert_true(head_w > 0 && body_w > 2 * head_w);
    mk_image_free(NULL, &frame);
    mk_image_free(NULL, &mask);
}

static void test_mask(void **state)
{
    (void)state;
    const struct {
        int w, h;
        double fps;
    } sizes[] = {{640, 480, 30}, {321, 241, 25}, {1280, 720, 60}, {64, 48, 30}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        mk_testpattern_t *tp;
        TU_OK(mk_testpattern_create(sizes[i].w, sizes[i].h, sizes[i].fps, &tp));
        const uint64_t seqs[] = {0, 7, 45, 200, 1234};
        for (int k = 0; k < 5; k++)
            check_mask(tp, sizes[i].w, sizes[i].h, seqs[k]);
        mk_testpattern_destroy(tp);
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    mk_testpattern_t *tp = NULL;
    assert_int_equal(mk_testpattern_create(15, 100, 30, &tp), MK_ERANGE);
    assert_int_equal(mk_testpattern_create(100, 100, 0, &tp), MK_ERANGE);
    assert_int_equal(mk_testpattern_create(100, 100, 30, NULL), MK_EINVAL);
    assert_null(tp);
    TU_OK(mk_testpattern_create(100, 80, 30, &tp));
    mk_image_t wrong = host_image(80, 100, MK_FMT_RGB, 0), gray = host_image(100, 80, MK_FMT_GRAY, 0);
    mk_image_t rgb = host_image(100, 80, MK_FMT_RGB, 0);
    assert_int_equal(mk_testpattern_frame(tp, 0, &wrong), MK_EINVAL);
    assert_int_equal(mk_testpattern_frame(tp, 0, &gray), MK_EINVAL);
    assert_int_equal(mk_testpattern_mask(tp, 0, &rgb), MK_EINVAL);
    assert_int_equal(mk_testpattern_frame(NULL, 0, &rgb), MK_EINVAL);
    mk_image_free(NULL, &wrong);
    mk_image_free(NULL, &gray);
    mk_image_free(NULL, &rgb);
    mk_testpattern_destroy(tp);
    mk_testpattern_destroy(NULL);
}

/* ---- as a source ----------------------------------------------------------------------------------------- */

static void test_spec_parsing(void **state)
{
    (void)state;
    const struct {
        const char *spec;
        int w, h;
        double fps;
        int expect_fail;
    } cases[] = {
        {"testpattern", 640, 480, 30, 0},     {"testpattern:320x240", 320, 240, 30, 0},
        {"testpattern:320x240@60", 320, 240, 60, 0}, {"testpattern:@12.5", 640, 480, 12.5, 0},
        {"testpattern:16X16@1", 16, 16, 1, 0}, {"testpattern:320", 0, 0, 0, MK_EINVAL},
        {"testpattern:320x", 0, 0, 0, MK_EINVAL}, {"testpattern:320x240@", 0, 0, 0, MK_EINVAL},
        {"testpattern:320x240@0", 0, 0, 0, MK_ERANGE}, {"testpattern:8x8", 0, 0, 0, MK_ERANGE},
        {"testpattern:320x240x", 0, 0, 0, MK_EINVAL}, {"testpatterns", 0, 0, 0, MK_EINVAL},
        {"", 0, 0, 0, MK_EINVAL},             {"v4l2:", 0, 0, 0, MK_EINVAL},
        {"file:", 0, 0, 0, MK_EINVAL},        {"camera0", 0, 0, 0, MK_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_source_t *src = NULL;
        int rc = mk_source_open(cases[i].spec, NULL, &src);
        if (cases[i].expect_fail) {
            if (rc != cases[i].expect_fail)
                fail_msg("'%s': %s, expected %s", cases[i].spec, mk_err_name(rc), mk_err_name(cases[i].expect_fail));
            assert_null(src);
            assert_true(mk_err_msg()[0] != '\0');
            continue;
        }
        TU_OK(rc);
        mk_source_info_t info;
        mk_source_info(src, &info);
        assert_string_equal(info.kind, "testpattern");
        assert_int_equal(info.width, cases[i].w);
        assert_int_equal(info.height, cases[i].h);
        assert_true(info.fps == cases[i].fps);
        mk_source_close(src);
    }
    /* The config's size and rate are used when the spec gives none. */
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.width = 200, c.height = 100, c.fps = 10;
    mk_source_t *src;
    TU_OK(mk_source_open("testpattern", &c, &src));
    mk_source_info_t info;
    mk_source_info(src, &info);
    assert_int_equal(info.width, 200);
    assert_true(info.fps == 10);
    mk_source_close(src);
    c.width = 0;
    assert_int_equal(mk_source_open("testpattern", &c, &src), MK_ERANGE); /* 0 x 100 */
    mk_source_close(NULL);
}

static void test_source_frames(void **state)
{
    (void)state;
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.buffers = 3;
    mk_source_t *src;
    TU_OK(mk_source_open("testpattern:160x120@100", &c, &src));
    mk_testpattern_t *tp;
    TU_OK(mk_testpattern_create(160, 120, 100, &tp));
    mk_image_t want = host_image(160, 120, MK_FMT_RGB, 0);
    assert_int_equal(mk_source_max_held(src), 3);
    mk_frame_t f[4];
    int64_t t0 = now_ns(), last = 0;
    for (int i = 0; i < 12; i++) {
        mk_frame_t *fr = &f[i % 3];
        assert_int_equal(mk_source_next(src, 1000, fr), MK_SOURCE_FRAME);
        assert_int_equal(fr->seq, i);
        assert_int_equal(fr->kind, MK_FRAME_RAW);
        assert_int_equal(fr->image.format, MK_FMT_RGB);
        assert_true(fr->capture_ns > last);
        last = fr->capture_ns;
        TU_OK(mk_testpattern_frame(tp, (uint64_t)i, &want));
        assert_true(same_pixels(&fr->image, &want));
        if (i % 3 == 2) { /* hold three at once, then give them back */
            assert_int_equal(mk_source_next(src, 0, &f[3]), MK_ESTATE);
            for (int k = 0; k < 3; k++)
                TU_OK(mk_source_release(src, &f[k]));
        }
    }
    /* Paced at 100 fps: 11 intervals of 10 ms at least (no upper bound asserted: shared machines). */
    assert_true(now_ns() - t0 >= 100000000);
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.frames, 12);
    mk_source_close(src);

    /* A zero timeout before the next frame is due (1 fps): a timeout, not a frame. */
    TU_OK(mk_source_open("testpattern:64x48@1", &c, &src));
    assert_int_equal(mk_source_next(src, 1000, &f[0]), MK_SOURCE_FRAME);
    TU_OK(mk_source_release(src, &f[0]));
    assert_int_equal(mk_source_next(src, 0, &f[0]), MK_SOURCE_TIMEOUT);
    mk_source_stats(src, &st);
    assert_int_equal(st.timeouts, 1);
    mk_source_close(src);

    /* Unpaced: frames as fast as asked. */
    c.realtime = 0;
    TU_OK(mk_source_open("testpattern:64x48@0.1", &c, &src));
    t0 = now_ns();
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mk_source_next(src, 0, &f[0]), MK_SOURCE_FRAME);
        TU_OK(mk_source_release(src, &f[0]));
    }
    assert_true(now_ns() - t0 < 10000000000LL); /* paced, this would take 40 s */
    mk_source_close(src);
    mk_image_free(NULL, &want);
    mk_testpattern_destroy(tp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_mask),
        cmocka_unit_test(test_bad_input),     cmocka_unit_test(test_spec_parsing),
        cmocka_unit_test(test_source_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
