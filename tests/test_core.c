/* test_core: errors, logging (levels, prefix, errno text, rate limit), image descriptors and copies, contexts. */
#include "testutil.h"

#include "ctx_internal.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(mk_err_name(MK_EINVAL), "MK_EINVAL");
    assert_string_equal(mk_err_name(MK_ECUDNN), "MK_ECUDNN");
    assert_string_equal(mk_err_name(-999), "MK_E?");
    assert_string_equal(mk_err_str(MK_ENOMEM), "out of memory");
    assert_int_equal(mk_err_set(MK_EFORMAT, "bad %s at %d", "header", 12), MK_EFORMAT);
    assert_string_equal(mk_err_msg(), "bad header at 12");
    assert_int_equal(mk_err_wrap(MK_EFORMAT, "file %s", "a.jpg"), MK_EFORMAT);
    assert_string_equal(mk_err_msg(), "file a.jpg: bad header at 12");
    mk_err_clear();
    assert_string_equal(mk_err_msg(), "");
    mk_err_wrap(MK_EIO, "reading");
    assert_string_equal(mk_err_msg(), "reading: input/output error");
}

static void *other_thread(void *arg)
{
    (void)arg;
    mk_err_set(MK_EIO, "other thread");
    return NULL;
}

static void test_errors_thread_local(void **state)
{
    (void)state;
    pthread_t t;
    mk_err_set(MK_EINVAL, "main thread");
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(mk_err_msg(), "main thread");
}

/* Runs fn with stderr redirected to a temporary file and returns what it wrote (malloc'd). */
static char *capture_stderr(void (*fn)(void))
{
    char path[] = "/tmp/maskd-logXXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    assert_true(fd >= 0 && saved >= 0);
    dup2(fd, STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = calloc((size_t)n + 1, 1);
    assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
    close(fd);
    unlink(path);
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void burst(int i)
{
    MK_LOG_RL(150, MK_LOG_WARN, "burst %d", i);
}

static void log_burst(void)
{
    for (int i = 0; i < 50; i++)
        burst(i);
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    burst(50);
}

static void log_levels(void)
{
    mk_log_set_level(MK_LOG_INFO);
    MK_DEBUG("hidden %d", 1);
    MK_INFO("shown %d", 2);
    errno = ENOENT;
    MK_LOG_ERRNO(MK_LOG_ERROR, "opening %s", "/nonexistent");
    mk_log_set_level(MK_LOG_DEBUG);
    MK_DEBUG("now shown");
    mk_log_set_level(MK_LOG_INFO);
}

static void test_log(void **state)
{
    (void)state;
    unsetenv("JOURNAL_STREAM");
    char *out = capture_stderr(log_levels);
    assert_int_equal(count_lines(out), 3);
    assert_null(strstr(out, "hidden"));
    assert_non_null(strstr(out, "info  test_core: shown 2"));
    assert_non_null(strstr(out, "opening /nonexistent: No such file or directory"));
    assert_non_null(strstr(out, "now shown"));
    free(out);
    /* Under journald: "<N>prefix: message" with the syslog priority. */
    setenv("JOURNAL_STREAM", "8:1234", 1);
    out = capture_stderr(log_levels);
    unsetenv("JOURNAL_STREAM");
    assert_non_null(strstr(out, "<6>test_core: shown 2\n"));
    assert_non_null(strstr(out, "<3>test_core: opening"));
    free(out);
    mk_log_level_t l;
    TU_OK(mk_log_parse_level("Debug", &l));
    assert_int_equal(l, MK_LOG_DEBUG);
    TU_OK(mk_log_parse_level("0", &l));
    assert_int_equal(l, MK_LOG_ERROR);
    assert_int_equal(mk_log_parse_level("loud", &l), MK_EINVAL);
}

static void test_log_ratelimit(void **state)
{
    (void)state;
    char *out = capture_stderr(log_burst);
    assert_int_equal(count_lines(out), 2);
    assert_non_null(strstr(out, "burst 0\n"));
    assert_non_null(strstr(out, "burst 50 (49 similar messages suppressed)\n"));
    free(out);
}

static void test_image_checks(void **state)
{
    (void)state;
    uint8_t buf[4096];
    mk_image_t img = mk_image_desc(10, 5, MK_FMT_BGR, MK_U8);
    assert_int_equal(img.channels, 3);
    img.pitch = 30;
    img.data = buf;
    TU_OK(mk_image_check(&img, "img"));
    assert_int_equal(mk_image_row_bytes(&img), 30);
    assert_int_equal(mk_image_bytes(&img), 150);
    mk_image_t bad = img;
    bad.pitch = 29;
    assert_int_equal(mk_image_check(&bad, "img"), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "pitch 29"));
    bad = img;
    bad.width = 0;
    assert_int_equal(mk_image_check(&bad, "img"), MK_ERANGE);
    bad.width = MK_IMAGE_MAX_DIM + 1;
    assert_int_equal(mk_image_check(&bad, "img"), MK_ERANGE);
    bad = img;
    bad.data = NULL;
    assert_int_equal(mk_image_check(&bad, "img"), MK_EINVAL);
    bad = img;
    bad.channels = 4;
    assert_int_equal(mk_image_check(&bad, "img"), MK_EINVAL);
    bad = img;
    bad.format = (mk_format_t)42;
    assert_int_equal(mk_image_check(&bad, "img"), MK_EINVAL);
    assert_int_equal(mk_image_check(NULL, "img"), MK_EINVAL);
    mk_image_t f = mk_image_desc_planar(10, 5, 3, MK_F32);
    f.pitch = 42; /* not a multiple of 4 */
    f.data = buf;
    assert_int_equal(mk_image_check(&f, "f"), MK_EINVAL);
    f.pitch = 40;
    TU_OK(mk_image_check(&f, "f"));
    assert_int_equal(mk_image_rows(&f), 15);
    assert_ptr_equal(mk_image_row(&f, 2, 1), buf + (2 * 5 + 1) * 40);
    mk_image_t y = mk_image_desc(9, 2, MK_FMT_YUYV, MK_U8);
    y.pitch = 18;
    y.data = buf;
    assert_int_equal(mk_image_check(&y, "y"), MK_EINVAL);
    mk_image_t p0 = mk_image_desc_planar(4, 4, 0, MK_F32);
    p0.pitch = 16;
    p0.data = buf;
    assert_int_equal(mk_image_check(&p0, "p"), MK_ERANGE);
}

static void test_image_alloc_copy(void **state)
{
    (void)state;
    mk_image_t a = mk_image_desc(13, 7, MK_FMT_RGB, MK_U8), b = a, c = a;
    TU_OK(mk_image_alloc(NULL, &a, MK_MEM_HOST));
    assert_int_equal(a.pitch, 64); /* 39 bytes rounded up to 64 */
    assert_int_equal(a.owned, 1);
    b.pitch = 41;
    TU_OK(mk_image_alloc(NULL, &b, MK_MEM_HOST));
    assert_int_equal(b.pitch, 41);
    c.pitch = 38;
    assert_int_equal(mk_image_alloc(NULL, &c, MK_MEM_HOST), MK_EINVAL);
    assert_null(c.data);
    tu_rng_t r = {9};
    tu_fill_random(&a, &r);
    memset(b.data, 0, mk_image_bytes(&b));
    TU_OK(mk_image_copy(NULL, &b, &a));
    for (int yy = 0; yy < 7; yy++)
        assert_memory_equal(mk_image_row(&a, 0, yy), mk_image_row(&b, 0, yy), 39);
    assert_int_equal(((uint8_t *)b.data)[40], 0); /* pitch padding untouched */
    TU_OK(mk_image_memset(NULL, &b, 0x33));
    assert_int_equal(((uint8_t *)mk_image_row(&b, 0, 6))[38], 0x33);
    assert_int_equal(((uint8_t *)b.data)[40], 0);
    mk_image_t g = mk_image_desc(13, 7, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &g, MK_MEM_HOST));
    assert_int_equal(mk_image_copy(NULL, &g, &a), MK_EINVAL);
    /* device memory without a CUDA context */
    mk_image_t d = mk_image_desc(4, 4, MK_FMT_GRAY, MK_U8);
    assert_int_equal(mk_image_alloc(NULL, &d, MK_MEM_DEVICE), MK_EINVAL);
    /* wrapped (unowned) images are not freed; free zeroes */
    uint8_t stackbuf[16];
    mk_image_t w = mk_image_desc(4, 4, MK_FMT_GRAY, MK_U8);
    w.pitch = 4;
    w.data = stackbuf;
    mk_image_free(NULL, &w);
    assert_null(w.data);
    mk_image_free(NULL, NULL);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    mk_image_free(NULL, &g);
    assert_null(a.data);
}

static void test_ctx_cpu(void **state)
{
    (void)state;
    mk_ctx_t *ctx = NULL;
    TU_OK(mk_ctx_create(MK_BACKEND_CPU, &ctx));
    assert_int_equal(mk_ctx_backend(ctx), MK_BACKEND_CPU);
    assert_int_equal(mk_ctx_mem(ctx), MK_MEM_HOST);
    assert_string_equal(mk_ctx_device_name(ctx), "CPU");
    assert_null(mk_ctx_stream(ctx));
    TU_OK(mk_ctx_sync(ctx));
    /* upload/download on the CPU are copies; directions are checked */
    mk_image_t h = tu_random_image(3, 5, 3, MK_FMT_GRAY), d = mk_image_desc(5, 3, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(ctx, &d, MK_MEM_PINNED)); /* no CUDA: plain host memory */
    assert_int_equal(d.mem, MK_MEM_HOST);
    TU_OK(mk_image_upload(ctx, &d, &h));
    assert_memory_equal(d.data, h.data, 5);
    mk_image_t fake = d;
    fake.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_image_download(ctx, &fake, &d), MK_EINVAL);
    assert_int_equal(mk_image_upload(ctx, &d, &fake), MK_EINVAL);
    /* scratch: zeroed when new, kept between uses, zeroed again when marked dirty */
    void *p;
    int fresh;
    TU_OK(mk_ctx_scratch(ctx, MK_SCRATCH_OTSU, 100, &p, &fresh));
    assert_int_equal(fresh, 1);
    assert_int_equal(((uint8_t *)p)[99], 0);
    memset(p, 7, 100);
    TU_OK(mk_ctx_scratch(ctx, MK_SCRATCH_OTSU, 50, &p, &fresh));
    assert_int_equal(fresh, 0);
    assert_int_equal(((uint8_t *)p)[10], 7);
    mk_ctx_scratch_dirty(ctx, MK_SCRATCH_OTSU);
    TU_OK(mk_ctx_scratch(ctx, MK_SCRATCH_OTSU, 50, &p, &fresh));
    assert_int_equal(fresh, 1);
    assert_int_equal(((uint8_t *)p)[10], 0);
    assert_int_equal(mk_ctx_scratch(ctx, MK_SCRATCH_COUNT, 8, &p, NULL), MK_EINVAL);
    double gbps;
    assert_int_equal(mk_ctx_copy_gbps(ctx, 1024, 2, &gbps), MK_EUNSUPPORTED);
    mk_image_free(ctx, &d);
    mk_image_free(NULL, &h);
    mk_ctx_destroy(ctx);
    mk_ctx_destroy(NULL);
}

static int fail_fn(void *arg)
{
    (*(int *)arg)++;
    return mk_err_set(MK_EIO, "inner failure");
}

static void test_ctx_backends(void **state)
{
    (void)state;
    mk_backend_t b;
    TU_OK(mk_backend_parse("CUDA", &b));
    assert_int_equal(b, MK_BACKEND_CUDA);
    assert_int_equal(mk_backend_parse("opencl", &b), MK_EINVAL);
    assert_int_equal(mk_ctx_create((mk_backend_t)9, NULL), MK_EINVAL);
    mk_ctx_t *ctx = NULL;
    TU_OK(mk_ctx_create(MK_BACKEND_AUTO, &ctx));
    char why[256] = "";
    int n = mk_cuda_device_count(why, sizeof why);
    assert_int_equal(mk_ctx_backend(ctx), n > 0 ? MK_BACKEND_CUDA : MK_BACKEND_CPU);
    int calls = 0;
    double us = -1;
    assert_int_equal(mk_ctx_time_us(ctx, fail_fn, &calls, &us), MK_EIO);
    assert_int_equal(calls, 1);
    assert_true(us >= 0);
    mk_ctx_destroy(ctx);
    if (n <= 0) {
        mk_ctx_t *c2 = (mk_ctx_t *)1;
        assert_int_equal(mk_ctx_create(MK_BACKEND_CUDA, &c2), MK_ENODEV);
        assert_null(c2);
        assert_non_null(strstr(mk_err_msg(), "CUDA backend unavailable"));
        assert_true(strlen(why) > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_errors_thread_local),
        cmocka_unit_test(test_log),           cmocka_unit_test(test_log_ratelimit),
        cmocka_unit_test(test_image_checks),  cmocka_unit_test(test_image_alloc_copy),
        cmocka_unit_test(test_ctx_cpu),       cmocka_unit_test(test_ctx_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
