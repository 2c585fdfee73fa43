/* test_imageio: image file decoding/encoding (JPEG, PNG, BMP, PNM), corrupt input, and atomic file writes. */
#include "testutil.h"

#include "imageio.h"

#include <png.h>
#include <turbojpeg.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef unsigned char u8;

static char tmpdir[256];

/* ---- helpers --------------------------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_imageio.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

/* A host u8 image with `extra` bytes of padding per row; padding is 0xA5, pixels random (or 0xA5 if r is NULL). */
static mk_image_t make_img(int w, int h, mk_format_t f, size_t extra, tu_rng_t *r)
{
    mk_image_t img = mk_image_desc(w, h, f, MK_U8);
    img.pitch = mk_image_row_bytes(&img) + extra;
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    memset(img.data, 0xA5, mk_image_bytes(&img));
    if (r)
        tu_fill_random(&img, r);
    return img;
}

static u8 *px(const mk_image_t *img, int x, int y)
{
    return (u8 *)mk_image_row(img, 0, y) + (size_t)x * (size_t)img->channels;
}

/* The BT.601 integer luma the module documents, written out independently. */
static int ref_luma(int r, int g, int b)
{
    return (299 * r + 587 * g + 114 * b + 500) / 1000;
}

static void assert_geometry(const mk_image_t *img, int w, int h, mk_format_t f)
{
    assert_int_equal(img->width, w);
    assert_int_equal(img->height, h);
    assert_int_equal(img->format, f);
    assert_int_equal(img->channels, f == MK_FMT_GRAY ? 1 : 3);
    assert_int_equal(img->dtype, MK_U8);
    assert_int_equal(img->mem, MK_MEM_HOST);
    assert_true(img->owned);
    assert_non_null(img->data);
    assert_true(img->pitch >= mk_image_row_bytes(img));
}

/* Same geometry and format, identical pixels (padding ignored). */
static void assert_same_pixels(const mk_image_t *a, const mk_image_t *b, const char *what)
{
    assert_geometry(b, a->width, a->height, a->format);
    size_t row = mk_image_row_bytes(a);
    for (int y = 0; y < a->height; y++) {
        const u8 *pa = mk_image_row(a, 0, y), *pb = mk_image_row(b, 0, y);
        for (size_t i = 0; i < row; i++)
            if (pa[i] != pb[i])
                fail_msg("%s: byte %zu of row %d differs: %d vs %d", what, i, y, pa[i], pb[i]);
    }
}

static int max_abs_diff(const mk_image_t *a, const mk_image_t *b)
{
    int m = 0;
    size_t row = mk_image_row_bytes(a);
    for (int y = 0; y < a->height; y++) {
        const u8 *pa = mk_image_row(a, 0, y), *pb = mk_image_row(b, 0, y);
        for (size_t i = 0; i < row; i++) {
            int d = abs((int)pa[i] - (int)pb[i]);
            m = d > m ? d : m;
        }
    }
    return m;
}

static mk_image_t decode_ok(const void *d, size_t n, mk_format_t want)
{
    mk_image_t out;
    TU_OK(mk_imageio_decode(d, n, want, &out, "test"));
    return out;
}

static int all_zero(const void *p, size_t n)
{
    const u8 *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Decoding fails with `code` (any negative code if code is 0), a message naming `what`, and *out zeroed. */
static void expect_fail_(const void *d, size_t n, mk_format_t want, int code, const char *what, int line)
{
    mk_image_t out;
    memset(&out, 0x5a, sizeof out);
    mk_err_clear();
    int rc = mk_imageio_decode(d, n, want, &out, what);
    if (code ? rc != code : rc >= 0) {
        if (rc == 0)
            mk_image_free(NULL, &out);
        fail_msg("line %d: %s (%zu bytes): expected %s, got %s (%s)", line, what, n, code ? mk_err_name(code) : "<0",
                 mk_err_name(rc), mk_err_msg());
    }
    if (!strstr(mk_err_msg(), what))
        fail_msg("line %d: %s: message does not name the input: \"%s\"", line, what, mk_err_msg());
    if (!all_zero(&out, sizeof out))
        fail_msg("line %d: %s: output descriptor not zeroed after failure", line, what);
}
#define expect_fail(d, n, want, code, what) expect_fail_((d), (n), (want), (code), (what), __LINE__)

static void encode_ok(const mk_image_t *img, mk_file_format_t fmt, void **data, size_t *len)
{
    TU_OK(mk_imageio_encode(img, fmt, 95, data, len));
    assert_non_null(*data);
    assert_true(*len > 0);
    assert_int_equal(mk_imageio_sniff(*data, *len), fmt);
}

static void write_bytes(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return (size_t)-1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Entries of tmpdir whose names contain `needle`. */
static int count_entries(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

static const mk_format_t fmts3[] = {MK_FMT_GRAY, MK_FMT_RGB, MK_FMT_BGR};
static const mk_file_format_t lossless[] = {MK_FILE_PNG, MK_FILE_BMP, MK_FILE_PNM};
static const char *file_fmt_name(mk_file_format_t f)
{
    return f == MK_FILE_JPEG ? "jpeg" : f == MK_FILE_PNG ? "png" : f == MK_FILE_BMP ? "bmp" : "pnm";
}

/* ---- sniffing and extensions ----------------------------------------------------------------------------- */

static void test_sniff(void **state)
{
    (void)state;
    static const u8 jpg[] = {0xff, 0xd8, 0xff, 0xe0}, png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0};
    assert_int_equal(mk_imageio_sniff(jpg, 3), MK_FILE_JPEG);
    assert_int_equal(mk_imageio_sniff(jpg, 2), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff(png, 9), MK_FILE_PNG);
    assert_int_equal(mk_imageio_sniff(png, 7), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff("BM", 2), MK_FILE_BMP);
    assert_int_equal(mk_imageio_sniff("BA", 2), MK_FILE_UNKNOWN);
    for (char c = '1'; c <= '7'; c++) {
        char m[3] = {'P', c, '\n'};
        assert_int_equal(mk_imageio_sniff(m, 3), MK_FILE_PNM);
    }
    assert_int_equal(mk_imageio_sniff("P8\n", 3), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff("P0\n", 3), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff("GIF89a", 6), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff(NULL, 10), MK_FILE_UNKNOWN);
    assert_int_equal(mk_imageio_sniff("BM", 0), MK_FILE_UNKNOWN);
}

static void test_format_from_path(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        mk_file_format_t fmt;
    } cases[] = {
        {"a.jpg", MK_FILE_JPEG},      {"a.JPEG", MK_FILE_JPEG},  {"/x/y.Jpg", MK_FILE_JPEG},
        {"a.png", MK_FILE_PNG},       {"a.tar.PNG", MK_FILE_PNG}, {"a.bmp", MK_FILE_BMP},
        {"a.pgm", MK_FILE_PNM},       {"a.PPM", MK_FILE_PNM},    {"a.pnm", MK_FILE_PNM},
        {"a.tiff", MK_FILE_UNKNOWN},  {"png", MK_FILE_UNKNOWN},  {"dir.png/file", MK_FILE_UNKNOWN},
        {"a.png.bak", MK_FILE_UNKNOWN}, {"a.", MK_FILE_UNKNOWN}, {".png", MK_FILE_UNKNOWN},
        {"", MK_FILE_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (mk_imageio_format_from_path(cases[i].path) != cases[i].fmt)
            fail_msg("%s: got %d, expected %d", cases[i].path, mk_imageio_format_from_path(cases[i].path),
                     cases[i].fmt);
    assert_int_equal(mk_imageio_format_from_path(NULL), MK_FILE_UNKNOWN);
}

/* ---- round trips ----------------------------------------------------------------------------------------- */

/* PNG, BMP and PNM are exact for every format, odd sizes and padded pitches; the encoding does not depend on the
 * padding bytes; decoded images have the documented 64-byte-rounded pitch. */
static void test_roundtrip_lossless(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 1}, {3, 5}, {17, 9}, {2, 1}, {1, 7}, {33, 2}};
    tu_rng_t rng = {42};
    for (size_t fi = 0; fi < 3; fi++) {
        for (size_t ci = 0; ci < 3; ci++) {
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                for (size_t extra = 0; extra <= 13; extra += 13) {
                    mk_image_t img = make_img(sizes[si][0], sizes[si][1], fmts3[ci], extra, &rng);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s %dx%d pad %zu", file_fmt_name(lossless[fi]),
                             mk_format_name(fmts3[ci]), img.width, img.height, extra);
                    void *enc = NULL;
                    size_t len = 0;
                    encode_ok(&img, lossless[fi], &enc, &len);
                    mk_image_t out = decode_ok(enc, len, fmts3[ci]);
                    assert_same_pixels(&img, &out, what);
                    assert_int_equal(out.pitch, (mk_image_row_bytes(&out) + 63) / 64 * 64);
                    if (extra) {
                        /* different padding, same bytes out */
                        for (int y = 0; y < img.height; y++)
                            memset((u8 *)mk_image_row(&img, 0, y) + mk_image_row_bytes(&img), 0x3c, extra);
                        void *enc2 = NULL;
                        size_t len2 = 0;
                        encode_ok(&img, lossless[fi], &enc2, &len2);
                        assert_int_equal(len2, len);
                        assert_memory_equal(enc2, enc, len);
                        free(enc2);
                    }
                    free(enc);
                    mk_image_free(NULL, &out);
                    mk_image_free(NULL, &img);
                }
            }
        }
    }
}

/* Saving chooses the format from the extension (case-insensitive) and loading from the magic bytes. */
static void test_save_load_files(void **state)
{
    (void)state;
    static const char *names[] = {"rt.png", "rt.BMP", "rt.pgm", "rt.ppm", "rt.pnm", "rt.jpg", "rt.JPEG"};
    static const mk_file_format_t expect[] = {MK_FILE_PNG, MK_FILE_BMP, MK_FILE_PNM, MK_FILE_PNM,
                                              MK_FILE_PNM, MK_FILE_JPEG, MK_FILE_JPEG};
    tu_rng_t rng = {7};
    for (size_t ci = 0; ci < 3; ci++) {
        mk_image_t img = make_img(19, 11, fmts3[ci], 5, &rng);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char path[512];
            tmp_path(path, sizeof path, names[i]);
            TU_OK(mk_imageio_save(path, &img));
            void *d = NULL;
            size_t n = 0;
            TU_OK(mk_file_read(path, &d, &n));
            assert_int_equal(mk_imageio_sniff(d, n), expect[i]);
            /* the file holds what encode gives (JPEG at quality 95) */
            void *e = NULL;
            size_t ne = 0;
            TU_OK(mk_imageio_encode(&img, expect[i], 95, &e, &ne));
            assert_int_equal(n, ne);
            assert_memory_equal(d, e, n);
            free(e);
            free(d);
            mk_image_t out;
            TU_OK(mk_imageio_load(path, fmts3[ci], &out));
            if (expect[i] == MK_FILE_JPEG)
                assert_geometry(&out, 19, 11, fmts3[ci]); /* lossy on noise: the geometry only */
            else
                assert_same_pixels(&img, &out, names[i]);
            mk_image_free(NULL, &out);
            assert_int_equal(count_entries(tmpdir, ".tmp."), 0);
        }
        mk_image_free(NULL, &img);
    }
}

/* A smooth image: r, g, b ramps. */
static mk_image_t smooth_img(int w, int h, mk_format_t f, size_t extra)
{
    mk_image_t img = make_img(w, h, f, extra, NULL);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            /* at most about 4 levels per pixel, whatever the size */
            int sw = w > 50 ? w : 50, sh = h > 45 ? h : 45;
            int r = 20 + x * 200 / sw, g = 30 + y * 180 / sh, b = 60 + (x + y) * 120 / (sw + sh);
            u8 *p = px(&img, x, y);
            if (f == MK_FMT_GRAY) {
                p[0] = (u8)r;
            } else {
                p[0] = (u8)(f == MK_FMT_RGB ? r : b);
                p[1] = (u8)g;
                p[2] = (u8)(f == MK_FMT_RGB ? b : r);
            }
        }
    return img;
}

static void test_roundtrip_jpeg(void **state)
{
    (void)state;
    static const int sizes[][2] = {{64, 48}, {17, 9}, {1, 1}, {3, 5}};
    tjhandle tj = tjInitDecompress();
    assert_non_null(tj);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t ci = 0; ci < 3; ci++) {
            mk_image_t img = smooth_img(sizes[si][0], sizes[si][1], fmts3[ci], 7);
            void *enc = NULL;
            size_t len = 0;
            encode_ok(&img, MK_FILE_JPEG, &enc, &len);
            int w, h, ss, cs;
            assert_int_equal(tjDecompressHeader3(tj, enc, len, &w, &h, &ss, &cs), 0);
            assert_int_equal(w, img.width);
            assert_int_equal(h, img.height);
            assert_int_equal(ss, fmts3[ci] == MK_FMT_GRAY ? TJSAMP_GRAY : TJSAMP_420);
            mk_image_t out = decode_ok(enc, len, fmts3[ci]);
            assert_geometry(&out, img.width, img.height, fmts3[ci]);
            int d = max_abs_diff(&img, &out);
            if (d > 8)
                fail_msg("JPEG %dx%d %s: max abs diff %d > 8", img.width, img.height, mk_format_name(fmts3[ci]), d);
            mk_image_free(NULL, &out);
            if (fmts3[ci] == MK_FMT_GRAY) {
                /* a gray JPEG asked for as colour: the gray values replicated */
                mk_image_t g = decode_ok(enc, len, MK_FMT_GRAY), c = decode_ok(enc, len, MK_FMT_BGR);
                for (int y = 0; y < g.height; y++)
                    for (int x = 0; x < g.width; x++)
                        for (int k = 0; k < 3; k++)
                            assert_int_equal(px(&c, x, y)[k], px(&g, x, y)[0]);
                mk_image_free(NULL, &g);
                mk_image_free(NULL, &c);
            }
            free(enc);
            mk_image_free(NULL, &img);
        }
    }
    tjDestroy(tj);
    /* quality */
    mk_image_t img = smooth_img(8, 8, MK_FMT_RGB, 0);
    void *enc = (void *)1;
    size_t len = 1;
    assert_int_equal(mk_imageio_encode(&img, MK_FILE_JPEG, 0, &enc, &len), MK_ERANGE);
    assert_null(enc);
    assert_int_equal(len, 0);
    assert_int_equal(mk_imageio_encode(&img, MK_FILE_JPEG, 101, &enc, &len), MK_ERANGE);
    void *lo = NULL, *hi = NULL;
    size_t nlo = 0, nhi = 0;
    mk_image_free(NULL, &img);
    img = make_img(64, 64, MK_FMT_RGB, 0, &(tu_rng_t){3});
    TU_OK(mk_imageio_encode(&img, MK_FILE_JPEG, 10, &lo, &nlo));
    TU_OK(mk_imageio_encode(&img, MK_FILE_JPEG, 100, &hi, &nhi));
    assert_true(nlo < nhi);
    free(lo);
    free(hi);
    mk_image_free(NULL, &img);
}

/* The files written follow the formats' specifications, read here without the module. */
static void test_written_files_are_standard(void **state)
{
    (void)state;
    tu_rng_t rng = {99};
    mk_image_t rgb = make_img(5, 3, MK_FMT_RGB, 3, &rng), gray = make_img(5, 3, MK_FMT_GRAY, 1, &rng);
    void *d = NULL;
    size_t n = 0;

    /* BMP: 54-byte headers, bottom-up rows padded to 4 bytes, B G R order */
    TU_OK(mk_imageio_encode(&rgb, MK_FILE_BMP, 0, &d, &n));
    const u8 *b = d;
    assert_int_equal(n, 54 + 3 * 16);
    assert_int_equal(b[0], 'B');
    assert_int_equal(b[1], 'M');
    assert_int_equal(b[2] | b[3] << 8, n);
    assert_int_equal(b[10], 54);
    assert_int_equal(b[14], 40);
    assert_int_equal(b[18], 5);
    assert_int_equal(b[22], 3);
    assert_int_equal(b[28], 24);
    assert_int_equal(b[30], 0);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            for (int k = 0; k < 3; k++)
                assert_int_equal(b[54 + (2 - y) * 16 + x * 3 + k], px(&rgb, x, y)[2 - k]);
    free(d);
    TU_OK(mk_imageio_encode(&gray, MK_FILE_BMP, 0, &d, &n));
    b = d;
    assert_int_equal(n, 54 + 1024 + 3 * 8);
    assert_int_equal(b[10] | b[11] << 8, 1078);
    assert_int_equal(b[28], 8);
    for (int i = 0; i < 256; i++)
        assert_true(b[54 + 4 * i] == i && b[55 + 4 * i] == i && b[56 + 4 * i] == i);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            assert_int_equal(b[1078 + (2 - y) * 8 + x], px(&gray, x, y)[0]);
    free(d);

    /* PNM: P6 in R G B order from a BGR image, P5 for gray */
    mk_image_t bgr = make_img(5, 3, MK_FMT_BGR, 2, &rng);
    TU_OK(mk_imageio_encode(&bgr, MK_FILE_PNM, 0, &d, &n));
    static const char p6[] = "P6\n5 3\n255\n";
    assert_int_equal(n, strlen(p6) + 45);
    assert_memory_equal(d, p6, strlen(p6));
    b = (const u8 *)d + strlen(p6);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            for (int k = 0; k < 3; k++)
                assert_int_equal(b[(y * 5 + x) * 3 + k], px(&bgr, x, y)[2 - k]);
    free(d);
    TU_OK(mk_imageio_encode(&gray, MK_FILE_PNM, 0, &d, &n));
    assert_int_equal(n, strlen("P5\n5 3\n255\n") + 15);
    assert_memory_equal(d, "P5\n5 3\n255\n", strlen("P5\n5 3\n255\n"));
    free(d);

    /* PNG read back by libpng itself */
    TU_OK(mk_imageio_encode(&bgr, MK_FILE_PNG, 0, &d, &n));
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_memory(&im, d, n));
    assert_int_equal(im.width, 5);
    assert_int_equal(im.height, 3);
    assert_int_equal(im.format, PNG_FORMAT_RGB);
    u8 pix[45];
    assert_true(png_image_finish_read(&im, NULL, pix, 15, NULL));
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            for (int k = 0; k < 3; k++)
                assert_int_equal(pix[(y * 5 + x) * 3 + k], px(&bgr, x, y)[2 - k]);
    free(d);

    /* JPEG read back by TurboJPEG itself */
    mk_image_t sm = smooth_img(16, 16, MK_FMT_BGR, 4);
    TU_OK(mk_imageio_encode(&sm, MK_FILE_JPEG, 95, &d, &n));
    tjhandle tj = tjInitDecompress();
    u8 jp[16 * 16 * 3];
    assert_int_equal(tjDecompress2(tj, d, n, jp, 16, 48, 16, TJPF_BGR, 0), 0);
    tjDestroy(tj);
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++)
            for (int k = 0; k < 3; k++)
                assert_true(abs(jp[(y * 16 + x) * 3 + k] - px(&sm, x, y)[k]) <= 8);
    free(d);
    mk_image_free(NULL, &sm);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &rgb);
    mk_image_free(NULL, &gray);
}

/* ---- conversions ----------------------------------------------------------------------------------------- */

/* Checks `out` (any format) against colour source pixels given as R, G, B. */
static void check_converted(const mk_image_t *src, const mk_image_t *out, const char *what)
{
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++) {
            const u8 *s = px(src, x, y), *o = px(out, x, y);
            int r, g, b;
            if (src->format == MK_FMT_GRAY)
                r = g = b = s[0];
            else if (src->format == MK_FMT_RGB)
                r = s[0], g = s[1], b = s[2];
            else
                r = s[2], g = s[1], b = s[0];
            int ok;
            if (out->format == MK_FMT_GRAY)
                ok = o[0] == (src->format == MK_FMT_GRAY ? r : ref_luma(r, g, b));
            else if (out->format == MK_FMT_RGB)
                ok = o[0] == r && o[1] == g && o[2] == b;
            else
                ok = o[0] == b && o[1] == g && o[2] == r;
            if (!ok)
                fail_msg("%s: pixel (%d, %d) wrongly converted", what, x, y);
        }
}

static void test_conversions(void **state)
{
    (void)state;
    tu_rng_t rng = {1234};
    for (size_t fi = 0; fi < 3; fi++)
        for (size_t si = 0; si < 3; si++)
            for (size_t wi = 0; wi < 3; wi++) {
                mk_image_t img = make_img(7, 4, fmts3[si], 3, &rng);
                void *enc = NULL;
                size_t len = 0;
                encode_ok(&img, lossless[fi], &enc, &len);
                mk_image_t out = decode_ok(enc, len, fmts3[wi]);
                assert_geometry(&out, 7, 4, fmts3[wi]);
                char what[64];
                snprintf(what, sizeof what, "%s %s as %s", file_fmt_name(lossless[fi]), mk_format_name(fmts3[si]),
                         mk_format_name(fmts3[wi]));
                check_converted(&img, &out, what);
                mk_image_free(NULL, &out);
                free(enc);
                mk_image_free(NULL, &img);
            }
    /* The luma formula on known values, including its rounding. */
    mk_image_t img = make_img(4, 1, MK_FMT_RGB, 0, NULL);
    static const u8 v[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 31}};
    static const u8 luma_expect[4] = {76, 150, 29, 18}; /* 76.245, 149.685, 29.07, 18.264 */
    memcpy(img.data, v, sizeof v);
    void *enc = NULL;
    size_t len = 0;
    encode_ok(&img, MK_FILE_PNG, &enc, &len);
    mk_image_t g = decode_ok(enc, len, MK_FMT_GRAY);
    assert_memory_equal(g.data, luma_expect, 4);
    mk_image_free(NULL, &g);
    free(enc);
    mk_image_free(NULL, &img);
}

static uint32_t crc32_png(const u8 *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void put_be32(u8 *p, uint32_t v)
{
    p[0] = (u8)(v >> 24), p[1] = (u8)(v >> 16), p[2] = (u8)(v >> 8), p[3] = (u8)v;
}

static size_t png_chunk(u8 *o, const char *type, const u8 *data, size_t n)
{
    put_be32(o, (uint32_t)n);
    memcpy(o + 4, type, 4);
    if (n)
        memcpy(o + 8, data, n);
    put_be32(o + 8 + n, crc32_png(o + 4, n + 4));
    return n + 12;
}

/* A PNG written by hand (zlib stored blocks, no compression): `raw` holds the scanlines with their filter bytes.
 * Lets the tests use bit depths and chunks that libpng's simplified writer cannot produce. */
static u8 *png_build(int w, int h, int depth, int ctype, const u8 *raw, size_t nraw, const u8 *plte, size_t nplte,
                     const u8 *trns, size_t ntrns, size_t *len)
{
    assert_true(nraw < 65536);
    u8 *o = calloc(1, 8 + 25 + 12 + nplte + 12 + ntrns + 12 + nraw + 11 + 12), *p = o;
    assert_non_null(o);
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p += 8;
    u8 ihdr[13] = {0};
    put_be32(ihdr, (uint32_t)w);
    put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = (u8)depth, ihdr[9] = (u8)ctype;
    p += png_chunk(p, "IHDR", ihdr, 13);
    if (nplte)
        p += png_chunk(p, "PLTE", plte, nplte);
    if (ntrns)
        p += png_chunk(p, "tRNS", trns, ntrns);
    u8 *z = malloc(nraw + 11);
    assert_non_null(z);
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < nraw; i++)
        a = (a + raw[i]) % 65521, b = (b + a) % 65521;
    z[0] = 0x78, z[1] = 0x01, z[2] = 1; /* one final stored block */
    z[3] = (u8)nraw, z[4] = (u8)(nraw >> 8), z[5] = (u8)~nraw, z[6] = (u8)(~nraw >> 8);
    memcpy(z + 7, raw, nraw);
    put_be32(z + 7 + nraw, b << 16 | a);
    p += png_chunk(p, "IDAT", z, nraw + 11);
    free(z);
    p += png_chunk(p, "IEND", NULL, 0);
    *len = (size_t)(p - o);
    return o;
}

/* 16-bit files without gamma information are read as sRGB (v / 257), not as linear light; low bit depths scale
 * to 0..255; a gray tRNS (alpha) is dropped. */
static void test_png_depths(void **state)
{
    (void)state;
    size_t n;
    /* 16-bit gray 4x1: 0x0000 0x8080 0x1234 0xffff */
    static const u8 raw16g[] = {0, 0x00, 0x00, 0x80, 0x80, 0x12, 0x34, 0xff, 0xff};
    u8 *b = png_build(4, 1, 16, 0, raw16g, sizeof raw16g, NULL, 0, NULL, 0, &n);
    mk_image_t o = decode_ok(b, n, MK_FMT_GRAY);
    static const u8 e16g[4] = {0, 128, 18, 255};
    assert_memory_equal(o.data, e16g, 4);
    mk_image_free(NULL, &o);
    free(b);
    /* 16-bit RGB 2x1: (0x8080, 0x4040, 0xc0c0) (0x0101, 0xfefe, 0x1234) */
    static const u8 raw16c[] = {0, 0x80, 0x80, 0x40, 0x40, 0xc0, 0xc0, 0x01, 0x01, 0xfe, 0xfe, 0x12, 0x34};
    b = png_build(2, 1, 16, 2, raw16c, sizeof raw16c, NULL, 0, NULL, 0, &n);
    o = decode_ok(b, n, MK_FMT_BGR);
    static const u8 e16c[6] = {192, 64, 128, 18, 254, 1};
    assert_memory_equal(o.data, e16c, 6);
    mk_image_free(NULL, &o);
    o = decode_ok(b, n, MK_FMT_GRAY);
    static const u8 e16cg[2] = {(299 * 128 + 587 * 64 + 114 * 192 + 500) / 1000,
                                (299 * 1 + 587 * 254 + 114 * 18 + 500) / 1000};
    assert_memory_equal(o.data, e16cg, 2);
    mk_image_free(NULL, &o);
    free(b);
    /* 2-bit gray 5x2 (rows padded to a byte) with a tRNS on value 2 */
    static const u8 raw2[] = {0, 0x1b, 0xc0, 0, 0xe4, 0x40};
    static const u8 trns[2] = {0, 2};
    b = png_build(5, 2, 2, 0, raw2, sizeof raw2, NULL, 0, trns, 2, &n);
    o = decode_ok(b, n, MK_FMT_GRAY);
    static const u8 e2[2][5] = {{0, 85, 170, 255, 255}, {255, 170, 85, 0, 85}};
    assert_memory_equal(mk_image_row(&o, 0, 0), e2[0], 5);
    assert_memory_equal(mk_image_row(&o, 0, 1), e2[1], 5);
    mk_image_free(NULL, &o);
    free(b);
    /* 1-bit palette with a transparent entry: colours as they are */
    static const u8 plte[6] = {10, 20, 30, 200, 150, 100}, trnsp[1] = {0};
    static const u8 raw1[] = {0, 0xa0};
    b = png_build(3, 1, 1, 3, raw1, sizeof raw1, plte, 6, trnsp, 1, &n);
    o = decode_ok(b, n, MK_FMT_RGB);
    static const u8 e1[9] = {200, 150, 100, 10, 20, 30, 200, 150, 100};
    assert_memory_equal(o.data, e1, 9);
    mk_image_free(NULL, &o);
    free(b);
}

/* PNG variants from libpng's writer: alpha is dropped (not composited), palettes expand exactly. */
static void test_png_variants(void **state)
{
    (void)state;
    png_image im;
    png_alloc_size_t n = 1 << 16;
    u8 *buf = malloc(n);
    assert_non_null(buf);

    static const u8 rgba[2][3][4] = {{{10, 20, 30, 0}, {200, 100, 50, 128}, {1, 2, 3, 255}},
                                     {{255, 255, 255, 0}, {0, 0, 0, 7}, {90, 180, 45, 255}}};
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION, im.width = 3, im.height = 2, im.format = PNG_FORMAT_RGBA;
    n = 1 << 16;
    assert_true(png_image_write_to_memory(&im, buf, &n, 0, rgba, 0, NULL));
    mk_image_t o = decode_ok(buf, n, MK_FMT_RGB);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            assert_memory_equal(px(&o, x, y), rgba[y][x], 3);
    mk_image_free(NULL, &o);
    o = decode_ok(buf, n, MK_FMT_GRAY);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            assert_int_equal(px(&o, x, y)[0], ref_luma(rgba[y][x][0], rgba[y][x][1], rgba[y][x][2]));
    mk_image_free(NULL, &o);

    static const u8 ga[2][2][2] = {{{0, 0}, {77, 9}}, {{128, 255}, {255, 100}}};
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION, im.width = 2, im.height = 2, im.format = PNG_FORMAT_GA;
    n = 1 << 16;
    assert_true(png_image_write_to_memory(&im, buf, &n, 0, ga, 0, NULL));
    o = decode_ok(buf, n, MK_FMT_GRAY);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            assert_int_equal(px(&o, x, y)[0], ga[y][x][0]);
    mk_image_free(NULL, &o);
    o = decode_ok(buf, n, MK_FMT_BGR);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            for (int k = 0; k < 3; k++)
                assert_int_equal(px(&o, x, y)[k], ga[y][x][0]);
    mk_image_free(NULL, &o);

    /* palette */
    static const u8 cmap[4][3] = {{255, 0, 0}, {0, 128, 255}, {7, 7, 7}, {250, 240, 10}};
    static const u8 idx[2][4] = {{0, 1, 2, 3}, {3, 3, 1, 0}};
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION, im.width = 4, im.height = 2, im.format = PNG_FORMAT_RGB_COLORMAP;
    im.colormap_entries = 4;
    n = 1 << 16;
    assert_true(png_image_write_to_memory(&im, buf, &n, 0, idx, 0, cmap));
    o = decode_ok(buf, n, MK_FMT_RGB);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 4; x++)
            assert_memory_equal(px(&o, x, y), cmap[idx[y][x]], 3);
    mk_image_free(NULL, &o);
    o = decode_ok(buf, n, MK_FMT_GRAY);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 4; x++) {
            const u8 *c = cmap[idx[y][x]];
            assert_int_equal(px(&o, x, y)[0], ref_luma(c[0], c[1], c[2]));
        }
    mk_image_free(NULL, &o);
    free(buf);
}

/* ---- real data ------------------------------------------------------------------------------------------- */

static void test_jpeg_real(void **state)
{
    (void)state;
    char path[4096];
    if (!tu_data_path(path, sizeof path, "images/dog.jpg"))
        skip();
    void *d = NULL;
    size_t n = 0;
    TU_OK(mk_file_read(path, &d, &n));
    mk_image_t a = decode_ok(d, n, MK_FMT_RGB), b = decode_ok(d, n, MK_FMT_RGB);
    assert_geometry(&a, 768, 576, MK_FMT_RGB);
    assert_int_equal(a.pitch, 2304);
    assert_same_pixels(&a, &b, "dog.jpg decoded twice");
    mk_image_free(NULL, &b);
    TU_OK(mk_imageio_load(path, MK_FMT_RGB, &b));
    assert_same_pixels(&a, &b, "dog.jpg loaded");
    mk_image_free(NULL, &b);

    mk_image_t bgr = decode_ok(d, n, MK_FMT_BGR);
    assert_geometry(&bgr, 768, 576, MK_FMT_BGR);
    mk_image_t gray = decode_ok(d, n, MK_FMT_GRAY);
    assert_geometry(&gray, 768, 576, MK_FMT_GRAY);
    assert_int_equal(gray.pitch, 768);
    long long sum_diff = 0, sum = 0;
    int maxd = 0;
    for (int y = 0; y < 576; y++)
        for (int x = 0; x < 768; x++) {
            const u8 *p = px(&a, x, y), *q = px(&bgr, x, y);
            if (p[0] != q[2] || p[1] != q[1] || p[2] != q[0])
                fail_msg("dog.jpg: BGR decode is not RGB swapped at (%d, %d)", x, y);
            /* TurboJPEG's gray is the decoded Y plane: close to the luma of the decoded colour */
            int dd = abs(px(&gray, x, y)[0] - ref_luma(p[0], p[1], p[2]));
            maxd = dd > maxd ? dd : maxd;
            sum_diff += dd;
            sum += p[0] + p[1] + p[2];
        }
    print_message("dog.jpg: gray vs luma(rgb): max %d, mean %.3f\n", maxd, (double)sum_diff / (768 * 576));
    assert_true(sum_diff < 768 * 576); /* mean difference below one level */
    assert_true(sum > 768LL * 576 * 3 * 20 && sum < 768LL * 576 * 3 * 235); /* neither blank nor saturated */
    mk_image_free(NULL, &gray);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &a);

    /* The same coefficients as a progressive file decode to the same pixels. */
    tjhandle tx = tjInitTransform();
    tjtransform xf;
    memset(&xf, 0, sizeof xf);
    xf.op = TJXOP_NONE;
    xf.options = TJXOPT_PROGRESSIVE;
    u8 *prog = NULL;
    unsigned long np = 0;
    assert_int_equal(tjTransform(tx, d, n, 1, &prog, &np, &xf, 0), 0);
    tjDestroy(tx);
    a = decode_ok(d, n, MK_FMT_RGB);
    b = decode_ok(prog, np, MK_FMT_RGB);
    assert_same_pixels(&a, &b, "dog.jpg progressive");
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    /* a truncated progressive file is an error too */
    expect_fail(prog, np / 2, MK_FMT_RGB, MK_EFORMAT, "half-progressive");
    tjFree(prog);
    free(d);
}

static void test_jpeg_cmyk_unsupported(void **state)
{
    (void)state;
    u8 cmyk[8 * 8 * 4];
    for (size_t i = 0; i < sizeof cmyk; i++)
        cmyk[i] = (u8)(i * 7);
    tjhandle tj = tjInitCompress();
    u8 *jpg = NULL;
    unsigned long n = 0;
    assert_int_equal(tjCompress2(tj, cmyk, 8, 32, 8, TJPF_CMYK, &jpg, &n, TJSAMP_444, 90, 0), 0);
    tjDestroy(tj);
    expect_fail(jpg, n, MK_FMT_RGB, MK_EUNSUPPORTED, "cmyk.jpg");
    expect_fail(jpg, n, MK_FMT_GRAY, MK_EUNSUPPORTED, "cmyk.jpg");
    tjFree(jpg);
}

/* 24-bit GrabCut images: sizes (513 wide exercises row padding), and pixels read independently of the module. */
static void test_bmp_grabcut_images(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        int w, h;
        struct {
            int x, y;
            u8 rgb[3];
        } px[5];
    } cases[] = {
        {"grabcut/images/banana1.bmp", 640, 480,
         {{0, 0, {141, 92, 16}}, {639, 0, {151, 97, 27}}, {0, 479, {147, 92, 25}}, {639, 479, {157, 100, 23}},
          {637, 7, {160, 103, 24}}}},
        {"grabcut/images/llama.bmp", 513, 371,
         {{0, 0, {137, 130, 101}}, {512, 0, {119, 132, 125}}, {0, 370, {155, 121, 96}},
          {512, 370, {178, 172, 158}}, {256, 185, {90, 46, 37}}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4096];
        if (!tu_data_path(path, sizeof path, cases[i].file))
            skip();
        mk_image_t rgb, bgr, gray;
        TU_OK(mk_imageio_load(path, MK_FMT_RGB, &rgb));
        TU_OK(mk_imageio_load(path, MK_FMT_BGR, &bgr));
        TU_OK(mk_imageio_load(path, MK_FMT_GRAY, &gray));
        assert_geometry(&rgb, cases[i].w, cases[i].h, MK_FMT_RGB);
        assert_geometry(&gray, cases[i].w, cases[i].h, MK_FMT_GRAY);
        for (int k = 0; k < 5; k++) {
            int x = cases[i].px[k].x, y = cases[i].px[k].y;
            const u8 *e = cases[i].px[k].rgb;
            assert_memory_equal(px(&rgb, x, y), e, 3);
            assert_int_equal(px(&bgr, x, y)[0], e[2]);
            assert_int_equal(px(&gray, x, y)[0], ref_luma(e[0], e[1], e[2]));
        }
        check_converted(&rgb, &bgr, cases[i].file);
        check_converted(&rgb, &gray, cases[i].file);
        mk_image_free(NULL, &rgb);
        mk_image_free(NULL, &bgr);
        mk_image_free(NULL, &gray);
    }
}

/* 8-bit palettised ground truth: values only 0/128/255, counts as in the set's index.txt, and the foreground's
 * bounding box (which catches a vertical flip). */
static void test_bmp_grabcut_gt(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        int w, h, fg, unk;
        int box[4];
    } cases[] = {
        {"grabcut/gt/banana1.bmp", 640, 480, 78705, 2562, {33, 37, 600, 415}},
        {"grabcut/gt/llama.bmp", 513, 371, 33455, 0, {122, 116, 358, 370}},
        {"grabcut/gt/106024.bmp", 481, 321, 13720, 0, {-1, -1, -1, -1}},
        {"grabcut/gt/153077.bmp", 481, 321, 38016, 2116, {-1, -1, -1, -1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4096];
        if (!tu_data_path(path, sizeof path, cases[i].file))
            skip();
        mk_image_t g, c;
        TU_OK(mk_imageio_load(path, MK_FMT_GRAY, &g));
        TU_OK(mk_imageio_load(path, MK_FMT_RGB, &c));
        assert_geometry(&g, cases[i].w, cases[i].h, MK_FMT_GRAY);
        int fg = 0, unk = 0, x0 = g.width, y0 = g.height, x1 = -1, y1 = -1;
        for (int y = 0; y < g.height; y++)
            for (int x = 0; x < g.width; x++) {
                int v = px(&g, x, y)[0];
                if (v != 0 && v != 128 && v != 255)
                    fail_msg("%s: value %d at (%d, %d)", cases[i].file, v, x, y);
                const u8 *p = px(&c, x, y);
                assert_true(p[0] == v && p[1] == v && p[2] == v);
                unk += v == 128;
                if (v == 255) {
                    fg++;
                    x0 = x < x0 ? x : x0, y0 = y < y0 ? y : y0;
                    x1 = x > x1 ? x : x1, y1 = y > y1 ? y : y1;
                }
            }
        assert_int_equal(fg, cases[i].fg);
        assert_int_equal(unk, cases[i].unk);
        if (cases[i].box[0] >= 0) {
            assert_int_equal(x0, cases[i].box[0]);
            assert_int_equal(y0, cases[i].box[1]);
            assert_int_equal(x1, cases[i].box[2]);
            assert_int_equal(y1, cases[i].box[3]);
        }
        mk_image_free(NULL, &g);
        mk_image_free(NULL, &c);
    }
}

/* Rectangle trimaps (when the set has them): 0/64/128/255 only, and the 128 region is the published box. */
static void test_bmp_grabcut_trimap(void **state)
{
    (void)state;
    char path[4096], boxp[4096];
    if (!tu_data_path(path, sizeof path, "grabcut/trimap_rect/banana1.bmp") ||
        !tu_data_path(boxp, sizeof boxp, "grabcut/bboxes/banana1.txt"))
        skip();
    int bx0, by0, bx1, by1;
    FILE *f = fopen(boxp, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d %d %d %d", &bx0, &by0, &bx1, &by1), 4);
    fclose(f);
    mk_image_t g;
    TU_OK(mk_imageio_load(path, MK_FMT_GRAY, &g));
    assert_geometry(&g, 640, 480, MK_FMT_GRAY);
    for (int y = 0; y < g.height; y++)
        for (int x = 0; x < g.width; x++) {
            int v = px(&g, x, y)[0], inside = x >= bx0 && x <= bx1 && y >= by0 && y <= by1;
            assert_true(v == 0 || v == 64 || v == 128 || v == 255);
            assert_int_equal(v == 128, inside);
        }
    mk_image_free(NULL, &g);
}

/* ---- hand-made BMP files --------------------------------------------------------------------------------- */

typedef struct {
    uint32_t hsize;      /* info header size */
    int32_t w, h;        /* h < 0: top-down */
    uint32_t bpp, comp, clr_used, planes;
    const u8 *pal;       /* npal entries of B, G, R, X */
    uint32_t npal;
    const uint32_t *masks; /* 3 masks for BI_BITFIELDS */
    const u8 *rows;      /* |h| packed rows, top-down, of (w * bpp + 7) / 8 bytes each */
    int32_t off_delta;   /* added to the correct pixel data offset */
} bmp_spec_t;

static void put16(u8 *p, uint32_t v)
{
    p[0] = (u8)v, p[1] = (u8)(v >> 8);
}

static void put32(u8 *p, uint32_t v)
{
    put16(p, v);
    put16(p + 2, v >> 16);
}

static u8 *bmp_build(const bmp_spec_t *s, size_t *len)
{
    int rows = s->h < 0 ? -s->h : s->h;
    size_t packed = ((size_t)s->w * s->bpp + 7) / 8, stride = ((size_t)s->w * s->bpp + 31) / 32 * 4;
    size_t masks = s->masks && s->hsize == 40 ? 12 : 0;
    size_t off = 14 + s->hsize + masks + 4 * (size_t)s->npal;
    *len = off + stride * (size_t)rows;
    /* room for every field written below, even when a short header or no pixels make the file shorter */
    u8 *b = calloc(1, *len > 66 ? *len : 66);
    assert_non_null(b);
    b[0] = 'B', b[1] = 'M';
    put32(b + 2, (uint32_t)*len);
    put32(b + 10, (uint32_t)((int64_t)off + s->off_delta));
    put32(b + 14, s->hsize);
    put32(b + 18, (uint32_t)s->w);
    put32(b + 22, (uint32_t)s->h);
    put16(b + 26, s->planes ? s->planes : 1);
    put16(b + 28, s->bpp);
    put32(b + 30, s->comp);
    put32(b + 34, (uint32_t)(stride * (size_t)rows));
    put32(b + 46, s->clr_used);
    if (s->masks)
        for (int i = 0; i < 3; i++)
            put32(b + 54 + 4 * i, s->masks[i]);
    if (s->npal)
        memcpy(b + 14 + s->hsize + masks, s->pal, 4 * (size_t)s->npal);
    for (int y = 0; y < rows && s->rows; y++)
        memcpy(b + off + (size_t)(s->h < 0 ? y : rows - 1 - y) * stride, s->rows + (size_t)y * packed, packed);
    return b;
}

static void test_bmp_handmade(void **state)
{
    (void)state;
    size_t n;
    u8 *b;
    mk_image_t o;

    /* 24-bit 3x2, top-down and bottom-up, 40- and 108-byte headers: rows hold B, G, R */
    static const u8 rows24[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    static const uint32_t hsizes[] = {40, 108, 124};
    for (int hi = 0; hi < 3; hi++)
        for (int td = 0; td < 2; td++) {
            bmp_spec_t s = {.hsize = hsizes[hi], .w = 3, .h = td ? -2 : 2, .bpp = 24, .rows = rows24};
            b = bmp_build(&s, &n);
            o = decode_ok(b, n, MK_FMT_RGB);
            assert_geometry(&o, 3, 2, MK_FMT_RGB);
            static const u8 expect[2][9] = {{3, 2, 1, 6, 5, 4, 9, 8, 7}, {12, 11, 10, 15, 14, 13, 18, 17, 16}};
            assert_memory_equal(mk_image_row(&o, 0, 0), expect[0], 9);
            assert_memory_equal(mk_image_row(&o, 0, 1), expect[1], 9);
            mk_image_free(NULL, &o);
            o = decode_ok(b, n, MK_FMT_BGR);
            assert_memory_equal(mk_image_row(&o, 0, 0), rows24, 9);
            assert_memory_equal(mk_image_row(&o, 0, 1), rows24 + 9, 9);
            mk_image_free(NULL, &o);
            free(b);
        }

    /* 32-bit: BI_RGB, BI_BITFIELDS after a 40-byte header and inside a V5 header; the 4th byte is ignored */
    static const u8 rows32[] = {10, 20, 30, 0, 40, 50, 60, 255, 70, 80, 90, 17, 100, 110, 120, 200};
    static const uint32_t std_masks[3] = {0x00ff0000, 0x0000ff00, 0x000000ff};
    static const uint32_t odd_masks[3] = {0x000000ff, 0x0000ff00, 0x00ff0000};
    for (int v = 0; v < 3; v++) {
        bmp_spec_t s = {.hsize = v == 2 ? 124 : 40, .w = 2, .h = 2, .bpp = 32, .comp = v ? 3 : 0,
                        .masks = v ? std_masks : NULL, .rows = rows32};
        b = bmp_build(&s, &n);
        o = decode_ok(b, n, MK_FMT_RGB);
        static const u8 e0[6] = {30, 20, 10, 60, 50, 40}, e1[6] = {90, 80, 70, 120, 110, 100};
        assert_memory_equal(mk_image_row(&o, 0, 0), e0, 6);
        assert_memory_equal(mk_image_row(&o, 0, 1), e1, 6);
        mk_image_free(NULL, &o);
        free(b);
    }
    bmp_spec_t s32 = {.hsize = 40, .w = 2, .h = 2, .bpp = 32, .comp = 3, .masks = odd_masks, .rows = rows32};
    b = bmp_build(&s32, &n);
    expect_fail(b, n, MK_FMT_RGB, MK_EUNSUPPORTED, "masks.bmp");
    free(b);

    /* 8-bit with a 3-colour palette, odd width (padding) */
    static const u8 pal3[] = {0, 0, 255, 0, 0, 255, 0, 0, 200, 100, 50, 0}; /* red, green, (50,100,200) */
    static const u8 rows8[] = {0, 1, 2, 2, 1, 0, 1, 1, 0, 2};
    bmp_spec_t s8 = {.hsize = 40, .w = 5, .h = 2, .bpp = 8, .clr_used = 3, .pal = pal3, .npal = 3, .rows = rows8};
    b = bmp_build(&s8, &n);
    static const u8 cols[3][3] = {{255, 0, 0}, {0, 255, 0}, {50, 100, 200}};
    o = decode_ok(b, n, MK_FMT_RGB);
    mk_image_t g = decode_ok(b, n, MK_FMT_GRAY);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 5; x++) {
            const u8 *c = cols[rows8[y * 5 + x]];
            assert_memory_equal(px(&o, x, y), c, 3);
            assert_int_equal(px(&g, x, y)[0], ref_luma(c[0], c[1], c[2]));
        }
    mk_image_free(NULL, &o);
    mk_image_free(NULL, &g);
    free(b);
    /* an index beyond the palette */
    static const u8 rows8bad[] = {0, 1, 2, 2, 1, 0, 1, 3, 0, 2};
    s8.rows = rows8bad;
    b = bmp_build(&s8, &n);
    expect_fail(b, n, MK_FMT_RGB, MK_EFORMAT, "badindex.bmp");
    expect_fail(b, n, MK_FMT_GRAY, MK_EFORMAT, "badindex.bmp");
    free(b);

    /* 4-bit and 1-bit palettes (clr_used 0: the full 16 / 2 entries) */
    u8 pal16[64];
    for (int i = 0; i < 16; i++)
        pal16[4 * i] = (u8)(i * 16), pal16[4 * i + 1] = (u8)(i * 16), pal16[4 * i + 2] = (u8)(i * 16),
        pal16[4 * i + 3] = 0;
    static const u8 rows4[] = {0x12, 0x3f, 0xa0, 0xfe, 0xdc, 0xb0}; /* 5 pixels per row: 1 2 3 f a / f e d c b */
    bmp_spec_t s4 = {.hsize = 40, .w = 5, .h = -2, .bpp = 4, .pal = pal16, .npal = 16, .rows = rows4};
    b = bmp_build(&s4, &n);
    o = decode_ok(b, n, MK_FMT_GRAY);
    static const u8 e4[2][5] = {{16, 32, 48, 240, 160}, {240, 224, 208, 192, 176}};
    assert_memory_equal(mk_image_row(&o, 0, 0), e4[0], 5);
    assert_memory_equal(mk_image_row(&o, 0, 1), e4[1], 5);
    mk_image_free(NULL, &o);
    free(b);
    static const u8 pal2[] = {0, 0, 0, 0, 255, 255, 255, 0};
    static const u8 rows1[] = {0xa5, 0x80, 0x3c, 0x00}; /* 9 pixels: 1 0 1 0 0 1 0 1 1 / 0 0 1 1 1 1 0 0 0 */
    bmp_spec_t s1 = {.hsize = 40, .w = 9, .h = 2, .bpp = 1, .pal = pal2, .npal = 2, .rows = rows1};
    b = bmp_build(&s1, &n);
    o = decode_ok(b, n, MK_FMT_RGB);
    static const int e1b[2][9] = {{1, 0, 1, 0, 0, 1, 0, 1, 1}, {0, 0, 1, 1, 1, 1, 0, 0, 0}};
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 9; x++)
            for (int k = 0; k < 3; k++)
                assert_int_equal(px(&o, x, y)[k], e1b[y][x] ? 255 : 0);
    mk_image_free(NULL, &o);
    free(b);
}

static void test_bmp_bad_headers(void **state)
{
    (void)state;
    static const u8 rows24[64] = {0};
    static const u8 pal[1024] = {0};
    static const uint32_t std_masks[3] = {0x00ff0000, 0x0000ff00, 0x000000ff};
    static const struct {
        bmp_spec_t s;
        int code;
        const char *what;
    } cases[] = {
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 8, .comp = 1, .pal = pal, .npal = 256, .rows = rows24}, MK_EUNSUPPORTED,
         "rle8.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 4, .comp = 2, .pal = pal, .npal = 16, .rows = rows24}, MK_EUNSUPPORTED,
         "rle4.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 16, .rows = rows24}, MK_EUNSUPPORTED, "16bit.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .comp = 4, .rows = rows24}, MK_EUNSUPPORTED, "jpeg-in.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .comp = 3, .masks = std_masks, .rows = rows24}, MK_EUNSUPPORTED,
         "24-bitfields.bmp"},
        {{.hsize = 12, .w = 2, .h = 2, .bpp = 24, .rows = rows24}, MK_EUNSUPPORTED, "os2.bmp"},
        {{.hsize = 20, .w = 2, .h = 2, .bpp = 24, .rows = rows24}, MK_EFORMAT, "hsize20.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .comp = 9, .rows = rows24}, MK_EFORMAT, "comp9.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 7, .rows = rows24}, MK_EFORMAT, "bpp7.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .planes = 2, .rows = rows24}, MK_EFORMAT, "planes.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 8, .clr_used = 300, .pal = pal, .npal = 256, .rows = rows24},
         MK_EFORMAT, "palette300.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .rows = rows24, .off_delta = 1}, MK_EFORMAT, "offset+1.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .rows = rows24, .off_delta = 100000}, MK_EFORMAT, "far.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 24, .rows = rows24, .off_delta = -2}, MK_EFORMAT, "inhdr.bmp"},
        {{.hsize = 40, .w = 2, .h = 2, .bpp = 8, .pal = pal, .npal = 256, .rows = rows24, .off_delta = -4},
         MK_EFORMAT, "inpal.bmp"},
        {{.hsize = 40, .w = 0, .h = 2, .bpp = 24, .rows = rows24}, MK_ERANGE, "w0.bmp"},
        {{.hsize = 40, .w = 2, .h = 0, .bpp = 24, .rows = rows24}, MK_ERANGE, "h0.bmp"},
        {{.hsize = 40, .w = -2, .h = 2, .bpp = 24, .rows = rows24}, MK_ERANGE, "wneg.bmp"},
        {{.hsize = 40, .w = 16385, .h = 1, .bpp = 24}, MK_ERANGE, "wide.bmp"},
        {{.hsize = 40, .w = 1, .h = -16385, .bpp = 24}, MK_ERANGE, "tall.bmp"},
        {{.hsize = 40, .w = 1, .h = INT32_MIN, .bpp = 8}, MK_ERANGE, "intmin.bmp"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        bmp_spec_t s = cases[i].s;
        if (s.w < 0 || s.w > 16384 || s.h < -16384) {
            /* headers only: the geometry is rejected before any pixel data is looked for */
            u8 hdr[54 + 1024] = {0};
            bmp_spec_t hs = s;
            hs.h = 1, hs.w = 1;
            u8 *b = bmp_build(&hs, &n);
            memcpy(hdr, b, n < sizeof hdr ? n : sizeof hdr);
            free(b);
            put32(hdr + 18, (uint32_t)s.w);
            put32(hdr + 22, (uint32_t)s.h);
            expect_fail(hdr, sizeof hdr, MK_FMT_RGB, cases[i].code, cases[i].what);
            continue;
        }
        u8 *b = bmp_build(&s, &n);
        expect_fail(b, n, MK_FMT_RGB, cases[i].code, cases[i].what);
        free(b);
    }
    /* 16384 wide is within range, but needs its pixel data */
    u8 hdr[60] = {0};
    bmp_spec_t s = {.hsize = 40, .w = 1, .h = 1, .bpp = 24};
    size_t n;
    u8 *b = bmp_build(&s, &n);
    memcpy(hdr, b, n);
    free(b);
    put32(hdr + 18, 16384);
    expect_fail(hdr, sizeof hdr, MK_FMT_RGB, MK_EFORMAT, "wide-truncated.bmp");
}

/* ---- hand-made PNM files --------------------------------------------------------------------------------- */

static void test_pnm_handmade(void **state)
{
    (void)state;
    /* maxval 10, comments and assorted whitespace: (v * 255 + 5) / 10, halves rounded up */
    static const char p5[] = "P5\n# a comment\n3\t2 # another\r\n10\n\x00\x0a\x01\x03\x07\x09";
    mk_image_t o = decode_ok(p5, sizeof p5 - 1, MK_FMT_GRAY);
    assert_geometry(&o, 3, 2, MK_FMT_GRAY);
    static const u8 e5[2][3] = {{0, 255, 26}, {77, 179, 230}}; /* 25.5, 76.5, 178.5, 229.5 */
    assert_memory_equal(mk_image_row(&o, 0, 0), e5[0], 3);
    assert_memory_equal(mk_image_row(&o, 0, 1), e5[1], 3);
    mk_image_free(NULL, &o);
    o = decode_ok(p5, sizeof p5 - 1, MK_FMT_RGB);
    for (int k = 0; k < 3; k++)
        assert_int_equal(px(&o, 2, 1)[k], 230);
    mk_image_free(NULL, &o);
    /* maxval 7 in colour: 36.43 72.86 109.29 / 145.71 182.14 218.57 */
    static const char p6m7[] = "P6\n2 1\n7\n\x01\x02\x03\x04\x05\x06";
    o = decode_ok(p6m7, sizeof p6m7 - 1, MK_FMT_RGB);
    static const u8 e6m7[6] = {36, 73, 109, 146, 182, 219};
    assert_memory_equal(o.data, e6m7, 6);
    mk_image_free(NULL, &o);

    static const char p6[] = "P6 2 1 255\n\x0a\x14\x1f\xff\x80\x00";
    o = decode_ok(p6, sizeof p6 - 1, MK_FMT_RGB);
    static const u8 e6[6] = {10, 20, 31, 255, 128, 0};
    assert_memory_equal(o.data, e6, 6);
    mk_image_free(NULL, &o);
    o = decode_ok(p6, sizeof p6 - 1, MK_FMT_BGR);
    static const u8 e6b[6] = {31, 20, 10, 0, 128, 255};
    assert_memory_equal(o.data, e6b, 6);
    mk_image_free(NULL, &o);
    o = decode_ok(p6, sizeof p6 - 1, MK_FMT_GRAY);
    static const u8 e6g[2] = {18, 151}; /* 18.264, 151.381 */
    assert_memory_equal(o.data, e6g, 2);
    mk_image_free(NULL, &o);

    static const char p6m1[] = "P6\n2 1\n1\n\x01\x00\x01\x00\x01\x00";
    o = decode_ok(p6m1, sizeof p6m1 - 1, MK_FMT_RGB);
    static const u8 e6m1[6] = {255, 0, 255, 0, 255, 0};
    assert_memory_equal(o.data, e6m1, 6);
    mk_image_free(NULL, &o);

    /* trailing bytes after the pixels are ignored */
    static const char p5x[] = "P5 1 1 255 \x42 extra";
    o = decode_ok(p5x, sizeof p5x - 1, MK_FMT_GRAY);
    assert_int_equal(((u8 *)o.data)[0], 0x42);
    mk_image_free(NULL, &o);

    static const struct {
        const char *data;
        size_t len;
        int code;
    } bad[] = {
#define C(s, code) {s, sizeof s - 1, code}
        C("P1\n1 1\n1\n", MK_EUNSUPPORTED),
        C("P2\n1 1\n255\n0\n", MK_EUNSUPPORTED),
        C("P3\n1 1\n255\n0 0 0\n", MK_EUNSUPPORTED),
        C("P4\n8 1\n\x00", MK_EUNSUPPORTED),
        C("P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n\x00", MK_EUNSUPPORTED),
        C("P5\n1 1\n65535\n\x00\x00", MK_EUNSUPPORTED),
        C("P5\n1 1\n256\n\x00\x00", MK_EUNSUPPORTED),
        C("P5\n1 1\n0\n\x00", MK_EFORMAT),
        C("P5\n1 1\n70000\n\x00\x00", MK_EFORMAT),
        C("P5\n2 1\n15\n\x01\x10", MK_EFORMAT), /* sample above maxval */
        C("P5\n0 1\n255\n", MK_ERANGE),
        C("P5\n1 0\n255\n", MK_ERANGE),
        C("P5\n16385 1\n255\n", MK_ERANGE),
        C("P5\n99999999999999999999999 1\n255\n", MK_ERANGE),
        C("P5\n1 -1\n255\n\x00", MK_EFORMAT),
        C("P5\n1 1\n255", MK_EFORMAT),          /* no whitespace after maxval */
        C("P5\n1 1\n255\n", MK_EFORMAT),        /* no pixels */
        C("P6\n2 2\n255\n\x01\x02\x03", MK_EFORMAT),
        C("P5x1 1 255\n\x00", MK_EFORMAT),
        C("P51 1 255\n\x00", MK_EFORMAT),
        C("P5\n1x 1 255\n\x00", MK_EFORMAT),
        C("P5\n1 1\n255#c\n\x00", MK_EFORMAT),
        C("P5 # only a comment", MK_EFORMAT),
        C("P5", MK_EFORMAT),
        C("P", MK_EFORMAT), /* not even a PNM magic: unknown format */
#undef C
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "pnm-case-%zu", i);
        expect_fail(bad[i].data, bad[i].len, MK_FMT_GRAY, bad[i].code, what);
    }
}

/* ---- corrupt input --------------------------------------------------------------------------------------- */

/* Offset just past the JPEG's SOS segment header (its first entropy-coded byte). */
static size_t jpeg_sos_end(const u8 *d, size_t n)
{
    size_t p = 2;
    while (p + 4 <= n && d[p] == 0xff) {
        size_t seg = (size_t)d[p + 2] << 8 | d[p + 3];
        if (d[p + 1] == 0xda)
            return p + 2 + seg;
        p += 2 + seg;
    }
    fail_msg("no SOS marker");
    return 0;
}

typedef struct {
    mk_file_format_t fmt;
    mk_format_t src;
    void *data;
    size_t len, header; /* bytes of headers (and palette) before the pixel data */
    char what[32];
} sample_t;

/* Encodings of random 17x9 images in every format; freed with free_samples. */
static int make_samples(sample_t *s, tu_rng_t *rng)
{
    int n = 0;
    static const mk_file_format_t all[] = {MK_FILE_JPEG, MK_FILE_PNG, MK_FILE_BMP, MK_FILE_PNM};
    for (size_t fi = 0; fi < 4; fi++)
        for (size_t ci = 0; ci < 2; ci++) {
            mk_format_t f = ci ? MK_FMT_RGB : MK_FMT_GRAY;
            mk_image_t img = make_img(17, 9, f, 4, rng);
            sample_t *p = &s[n++];
            p->fmt = all[fi];
            p->src = f;
            encode_ok(&img, all[fi], &p->data, &p->len);
            snprintf(p->what, sizeof p->what, "%s-%s", file_fmt_name(all[fi]), mk_format_name(f));
            const u8 *d = p->data;
            switch (all[fi]) {
            case MK_FILE_JPEG: p->header = jpeg_sos_end(d, p->len); break;
            case MK_FILE_PNG: p->header = 33; break;
            case MK_FILE_BMP: p->header = (size_t)d[10] | (size_t)d[11] << 8; break;
            default: p->header = (size_t)((const u8 *)memmem(d, p->len, "255\n", 4) - d) + 4; break;
            }
            assert_true(p->header > 0 && p->header < p->len);
            mk_image_free(NULL, &img);
        }
    return n;
}

static void free_samples(sample_t *s, int n)
{
    for (int i = 0; i < n; i++)
        free(s[i].data);
}

/* Every truncation of every format is an error with a message (a copy of exactly the truncated length, so that
 * valgrind sees any read past its end). */
static void test_truncations(void **state)
{
    (void)state;
    tu_rng_t rng = {5};
    sample_t s[8];
    int ns = make_samples(s, &rng);
    for (int i = 0; i < ns; i++) {
        mk_image_t ok = decode_ok(s[i].data, s[i].len, s[i].src);
        mk_image_free(NULL, &ok);
        size_t named[] = {0, 1, s[i].header, s[i].len / 2, s[i].len - 1};
        for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
            u8 *cut = malloc(named[k] ? named[k] : 1);
            memcpy(cut, s[i].data, named[k]);
            expect_fail(cut, named[k], MK_FMT_RGB, named[k] ? 0 : MK_EFORMAT, s[i].what);
            free(cut);
        }
        for (size_t len = 0; len < s[i].len; len++) {
            u8 *cut = malloc(len ? len : 1);
            memcpy(cut, s[i].data, len);
            for (size_t w = 0; w < 3; w++)
                expect_fail(cut, len, fmts3[w], 0, s[i].what);
            free(cut);
        }
    }
    free_samples(s, ns);
}

static void png_fix_ihdr_crc(u8 *d)
{
    uint32_t c = crc32_png(d + 12, 17);
    d[29] = (u8)(c >> 24), d[30] = (u8)(c >> 16), d[31] = (u8)(c >> 8), d[32] = (u8)c;
}

/* Decodes a corrupted buffer: it may fail (with a message and a zeroed output) or give a consistent image. */
static int decode_any(const u8 *d, size_t n, mk_format_t want, const char *what)
{
    mk_image_t out;
    memset(&out, 0x5a, sizeof out);
    mk_err_clear();
    int rc = mk_imageio_decode(d, n, want, &out, what);
    if (rc == 0) {
        assert_geometry(&out, out.width, out.height, want);
        assert_true(out.width >= 1 && out.width <= MK_IMAGE_MAX_DIM && out.height >= 1 &&
                    out.height <= MK_IMAGE_MAX_DIM);
        mk_image_free(NULL, &out);
        return 0;
    }
    assert_true(rc < 0);
    if (!strstr(mk_err_msg(), what))
        fail_msg("%s: message does not name the input: \"%s\"", what, mk_err_msg());
    assert_true(all_zero(&out, sizeof out));
    return rc;
}

static void test_header_corruption(void **state)
{
    (void)state;
    tu_rng_t rng = {77};
    sample_t s[8];
    int ns = make_samples(s, &rng);
    for (int i = 0; i < ns; i++) {
        u8 *d = malloc(s[i].len);
        /* a broken magic is an unknown format */
        memcpy(d, s[i].data, s[i].len);
        d[0] ^= 0x40;
        expect_fail(d, s[i].len, MK_FMT_RGB, MK_EFORMAT, s[i].what);
        /* random flips in the header: never a crash, failures carry a message */
        int failed = 0;
        for (int it = 0; it < 300; it++) {
            memcpy(d, s[i].data, s[i].len);
            int flips = tu_rand_int(&rng, 1, 3);
            for (int f = 0; f < flips; f++)
                d[tu_rand_int(&rng, 0, (int)s[i].header - 1)] ^= (u8)tu_rand_int(&rng, 1, 255);
            if (s[i].fmt == MK_FILE_PNG && it % 2)
                png_fix_ihdr_crc(d); /* reach past the CRC check half of the time */
            failed += decode_any(d, s[i].len, fmts3[it % 3], s[i].what) != 0;
        }
        print_message("%s: %d of 300 header corruptions rejected\n", s[i].what, failed);
        assert_true(failed > 0);
        free(d);
    }

    /* targeted: sizes out of range, zero sizes */
    for (int i = 0; i < ns; i++) {
        u8 *d = malloc(s[i].len);
        const u8 *o = s[i].data;
        for (int v = 0; v < 3; v++) {
            uint32_t wv = v == 0 ? 0 : v == 1 ? 16385 : 17, hv = v == 2 ? 40000 : 9;
            memcpy(d, o, s[i].len);
            int code = v == 0 ? MK_EFORMAT : MK_ERANGE;
            if (s[i].fmt == MK_FILE_PNG) {
                put_be32(d + 16, wv);
                put_be32(d + 20, hv);
                png_fix_ihdr_crc(d);
            } else if (s[i].fmt == MK_FILE_JPEG) {
                size_t p = 2; /* find SOF0 */
                while (o[p + 1] != 0xc0)
                    p += 2 + ((size_t)o[p + 2] << 8 | o[p + 3]);
                d[p + 5] = (u8)(hv >> 8), d[p + 6] = (u8)hv, d[p + 7] = (u8)(wv >> 8), d[p + 8] = (u8)wv;
                if (v == 2)
                    code = MK_ERANGE;
            } else if (s[i].fmt == MK_FILE_BMP) {
                put32(d + 18, wv);
                put32(d + 22, hv);
                code = MK_ERANGE;
            } else {
                continue; /* PNM headers are text: covered by test_pnm_handmade */
            }
            expect_fail(d, s[i].len, MK_FMT_RGB, code, s[i].what);
        }
        free(d);
    }
    /* a corrupted PNG chunk CRC */
    for (int i = 0; i < ns; i++)
        if (s[i].fmt == MK_FILE_PNG) {
            u8 *d = malloc(s[i].len);
            memcpy(d, s[i].data, s[i].len);
            d[17] ^= 1; /* width, CRC not fixed */
            expect_fail(d, s[i].len, MK_FMT_RGB, MK_EFORMAT, s[i].what);
            free(d);
        }
    free_samples(s, ns);
}

/* Random buffers, with and without a valid magic, and random mutations of valid files anywhere. */
static void test_garbage(void **state)
{
    (void)state;
    tu_rng_t rng = {2024};
    static const char *magics[] = {"", "\xff\xd8\xff", "\x89PNG\r\n\x1a\n", "BM", "P5 ", "P6\n", "P5\n3 3\n255\n",
                                   "P3\n"};
    for (int it = 0; it < 600; it++) {
        size_t n = (size_t)tu_rand_int(&rng, 0, 3000);
        const char *m = magics[it % 8];
        size_t ml = strlen(m);
        u8 *d = malloc(n + ml + 1);
        memcpy(d, m, ml);
        for (size_t i = 0; i < n; i++)
            d[ml + i] = (u8)(tu_rand(&rng) >> 56);
        if (it % 8 == 3 && n >= 52) {
            /* plausible BMP header sizes, random everything else */
            static const uint32_t hs[] = {40, 108, 124, 12};
            put32(d + 14, hs[it % 4]);
        }
        decode_any(d, n + ml, fmts3[it % 3], "garbage");
        free(d);
    }
    int ok = 0;
    sample_t s[8];
    int ns = make_samples(s, &rng);
    for (int i = 0; i < ns; i++) {
        u8 *d = malloc(s[i].len);
        for (int it = 0; it < 150; it++) {
            memcpy(d, s[i].data, s[i].len);
            int flips = tu_rand_int(&rng, 1, 6);
            for (int f = 0; f < flips; f++)
                d[tu_rand_int(&rng, 0, (int)s[i].len - 1)] = (u8)(tu_rand(&rng) >> 56);
            if (s[i].fmt == MK_FILE_PNG)
                png_fix_ihdr_crc(d);
            ok += decode_any(d, s[i].len, fmts3[it % 3], s[i].what) == 0;
        }
        free(d);
    }
    print_message("%d of %d mutated files still decoded\n", ok, ns * 150);
    free_samples(s, ns);
}

/* ---- arguments, files ------------------------------------------------------------------------------------ */

static void test_bad_args(void **state)
{
    (void)state;
    tu_rng_t rng = {11};
    mk_image_t img = make_img(4, 3, MK_FMT_RGB, 0, &rng), out;
    void *png = NULL;
    size_t n = 0;
    encode_ok(&img, MK_FILE_PNG, &png, &n);

    memset(&out, 0x5a, sizeof out);
    assert_int_equal(mk_imageio_decode(NULL, n, MK_FMT_RGB, &out, "x"), MK_EINVAL);
    assert_true(all_zero(&out, sizeof out));
    assert_int_equal(mk_imageio_decode(png, n, MK_FMT_RGB, NULL, "x"), MK_EINVAL);
    assert_true(strlen(mk_err_msg()) > 0);
    expect_fail(png, n, MK_FMT_YUYV, MK_EINVAL, "yuyv-wanted");
    expect_fail(png, n, MK_FMT_PLANAR, MK_EINVAL, "planar-wanted");
    expect_fail(png, n, (mk_format_t)99, MK_EINVAL, "99-wanted");
    expect_fail(png, 0, MK_FMT_RGB, MK_EFORMAT, "empty-buffer");
    expect_fail("GIF89a......", 12, MK_FMT_RGB, MK_EFORMAT, "gif");
    expect_fail("\x01", 1, MK_FMT_RGB, MK_EFORMAT, "one-byte");
    /* NULL name: "(buffer)" */
    assert_int_equal(mk_imageio_decode("xyz", 3, MK_FMT_RGB, &out, NULL), MK_EFORMAT);
    assert_non_null(strstr(mk_err_msg(), "(buffer)"));

    /* encoding */
    void *d = (void *)1;
    size_t len = 1;
    assert_int_equal(mk_imageio_encode(NULL, MK_FILE_PNG, 95, &d, &len), MK_EINVAL);
    assert_null(d);
    assert_int_equal(len, 0);
    assert_int_equal(mk_imageio_encode(&img, MK_FILE_PNG, 95, NULL, &len), MK_EINVAL);
    assert_int_equal(mk_imageio_encode(&img, MK_FILE_PNG, 95, &d, NULL), MK_EINVAL);
    assert_int_equal(mk_imageio_encode(&img, MK_FILE_UNKNOWN, 95, &d, &len), MK_EINVAL);
    assert_int_equal(mk_imageio_encode(&img, (mk_file_format_t)42, 95, &d, &len), MK_EINVAL);
    assert_null(d);
    mk_image_t bad = img;
    bad.width = 0;
    for (int f = MK_FILE_JPEG; f <= MK_FILE_PNM; f++)
        assert_int_equal(mk_imageio_encode(&bad, (mk_file_format_t)f, 95, &d, &len), MK_ERANGE);
    bad = img;
    bad.data = NULL;
    assert_int_equal(mk_imageio_encode(&bad, MK_FILE_BMP, 95, &d, &len), MK_EINVAL);
    bad = img;
    bad.pitch = 5; /* less than a row */
    assert_int_equal(mk_imageio_encode(&bad, MK_FILE_PNG, 95, &d, &len), MK_EINVAL);
    bad = img;
    bad.mem = MK_MEM_DEVICE;
    assert_int_equal(mk_imageio_encode(&bad, MK_FILE_PNG, 95, &d, &len), MK_EINVAL);
    bad = img;
    bad.mem = MK_MEM_PINNED; /* pinned memory is host memory */
    TU_OK(mk_imageio_encode(&bad, MK_FILE_PNM, 95, &d, &len));
    free(d);
    mk_image_t u16 = mk_image_desc(4, 3, MK_FMT_RGB, MK_U16);
    TU_OK(mk_image_alloc(NULL, &u16, MK_MEM_HOST));
    assert_int_equal(mk_imageio_encode(&u16, MK_FILE_PNG, 95, &d, &len), MK_EINVAL);
    mk_image_free(NULL, &u16);
    mk_image_t yuyv = mk_image_desc(4, 3, MK_FMT_YUYV, MK_U8);
    TU_OK(mk_image_alloc(NULL, &yuyv, MK_MEM_HOST));
    assert_int_equal(mk_imageio_encode(&yuyv, MK_FILE_BMP, 95, &d, &len), MK_EINVAL);
    mk_image_free(NULL, &yuyv);

    /* saving */
    char path[512];
    assert_int_equal(mk_imageio_save(tmp_path(path, sizeof path, "x.tiff"), &img), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "x.tiff"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(mk_imageio_save(tmp_path(path, sizeof path, "noext"), &img), MK_EINVAL);
    assert_int_equal(mk_imageio_save(NULL, &img), MK_EINVAL);
    assert_int_equal(mk_imageio_save(tmp_path(path, sizeof path, "no-such-dir/x.png"), &img), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "no-such-dir/x.png"));
    bad = img;
    bad.width = 0;
    assert_int_equal(mk_imageio_save(tmp_path(path, sizeof path, "zero.png"), &bad), MK_ERANGE);
    assert_non_null(strstr(mk_err_msg(), "zero.png"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_entries(tmpdir, ".tmp."), 0);

    /* loading */
    memset(&out, 0x5a, sizeof out);
    assert_int_equal(mk_imageio_load(tmp_path(path, sizeof path, "missing.png"), MK_FMT_RGB, &out), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "missing.png"));
    assert_true(all_zero(&out, sizeof out));
    assert_int_equal(mk_imageio_load(tmpdir, MK_FMT_RGB, &out), MK_EIO);
    assert_int_equal(mk_imageio_load(NULL, MK_FMT_RGB, &out), MK_EINVAL);
    assert_int_equal(mk_imageio_load(path, MK_FMT_RGB, NULL), MK_EINVAL);
    write_bytes(tmp_path(path, sizeof path, "empty.png"), "", 0);
    assert_int_equal(mk_imageio_load(path, MK_FMT_RGB, &out), MK_EFORMAT);
    assert_non_null(strstr(mk_err_msg(), "empty.png"));
    write_bytes(tmp_path(path, sizeof path, "good.png"), png, n);
    assert_int_equal(mk_imageio_load(path, MK_FMT_YUYV, &out), MK_EINVAL);
    assert_true(all_zero(&out, sizeof out));
    TU_OK(mk_imageio_load(path, MK_FMT_RGB, &out));
    assert_same_pixels(&img, &out, "good.png");
    mk_image_free(NULL, &out);

    free(png);
    mk_image_free(NULL, &img);
}

/* mk_imageio_save_rgba: libpng reads back the colours (from RGB and BGR sources) and the alpha byte for byte;
 * loading drops the alpha; other extensions, mismatched sizes and formats are refused. */
static void test_save_rgba(void **state)
{
    (void)state;
    char dir[256], path[512];
    tu_mkdtemp(dir, sizeof dir, "mk-rgba");
    snprintf(path, sizeof path, "%s/a.png", dir);
    for (int k = 0; k < 2; k++) {
        mk_format_t fmt = k ? MK_FMT_BGR : MK_FMT_RGB;
        mk_image_t rgb = tu_random_image(11 + k, 37, 23, fmt), alpha = tu_random_image(21 + k, 37, 23, MK_FMT_GRAY);
        TU_OK(mk_imageio_save_rgba(path, &rgb, &alpha));
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        assert_true(png_image_begin_read_from_file(&im, path));
        assert_int_equal(im.width, 37);
        assert_int_equal(im.height, 23);
        assert_true(im.format & PNG_FORMAT_FLAG_ALPHA);
        im.format = PNG_FORMAT_RGBA;
        uint8_t *px = malloc(37 * 23 * 4);
        assert_non_null(px);
        assert_true(png_image_finish_read(&im, NULL, px, 37 * 4, NULL));
        for (int y = 0; y < 23; y++)
            for (int x = 0; x < 37; x++) {
                const uint8_t *s = (const uint8_t *)mk_image_row(&rgb, 0, y) + 3 * x, *d = px + (y * 37 + x) * 4;
                assert_int_equal(d[0], s[k ? 2 : 0]);
                assert_int_equal(d[1], s[1]);
                assert_int_equal(d[2], s[k ? 0 : 2]);
                assert_int_equal(d[3], ((const uint8_t *)mk_image_row(&alpha, 0, y))[x]);
            }
        free(px);
        mk_image_t back;
        TU_OK(mk_imageio_load(path, fmt, &back));
        for (int y = 0; y < 23; y++)
            assert_memory_equal(mk_image_row(&back, 0, y), mk_image_row(&rgb, 0, y), 37 * 3);
        mk_image_free(NULL, &back);
        snprintf(path + strlen(dir), sizeof path - strlen(dir), "/a.jpg");
        assert_int_equal(mk_imageio_save_rgba(path, &rgb, &alpha), MK_EINVAL);
        snprintf(path + strlen(dir), sizeof path - strlen(dir), "/a.png");
        assert_int_equal(mk_imageio_save_rgba(path, &alpha, &alpha), MK_EINVAL);
        assert_int_equal(mk_imageio_save_rgba(path, &rgb, &rgb), MK_EINVAL);
        alpha.width--;
        assert_int_equal(mk_imageio_save_rgba(path, &rgb, &alpha), MK_EINVAL);
        alpha.width++;
        assert_int_equal(mk_imageio_save_rgba(NULL, &rgb, &alpha), MK_EINVAL);
        mk_image_free(NULL, &rgb);
        mk_image_free(NULL, &alpha);
    }
    tu_rmtree(dir);
}

static void test_file_read(void **state)
{
    (void)state;
    char path[512];
    void *d = (void *)1;
    size_t n = 1;
    static const char text[] = "hello, file";
    write_bytes(tmp_path(path, sizeof path, "hello.bin"), text, sizeof text);
    TU_OK(mk_file_read(path, &d, &n));
    assert_int_equal(n, sizeof text);
    assert_memory_equal(d, text, sizeof text);
    free(d);
    write_bytes(tmp_path(path, sizeof path, "empty.bin"), "", 0);
    TU_OK(mk_file_read(path, &d, &n));
    assert_int_equal(n, 0);
    free(d);
    /* a non-regular file read to EOF */
    TU_OK(mk_file_read("/dev/null", &d, &n));
    assert_int_equal(n, 0);
    free(d);

    d = (void *)1;
    assert_int_equal(mk_file_read(tmp_path(path, sizeof path, "nope.bin"), &d, &n), MK_EIO);
    assert_null(d);
    assert_int_equal(n, 0);
    assert_non_null(strstr(mk_err_msg(), "nope.bin"));
    assert_non_null(strstr(mk_err_msg(), strerror(ENOENT)));
    assert_int_equal(mk_file_read(tmpdir, &d, &n), MK_EIO);
    assert_int_equal(mk_file_read(NULL, &d, &n), MK_EINVAL);
    assert_int_equal(mk_file_read(path, NULL, &n), MK_EINVAL);
    assert_int_equal(mk_file_read(path, &d, NULL), MK_EINVAL);

    /* a FIFO: no size known up front, data arriving in pieces */
    enum { NF = 300000 };
    u8 *big = malloc(NF);
    assert_non_null(big);
    for (size_t i = 0; i < NF; i++)
        big[i] = (u8)(i * 31 + (i >> 9));
    assert_int_equal(mkfifo(tmp_path(path, sizeof path, "fifo"), 0600), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int wfd = open(path, O_WRONLY);
        for (size_t off = 0; wfd >= 0 && off < NF; off += 1000) {
            if (write(wfd, big + off, NF - off < 1000 ? NF - off : 1000) < 0)
                _exit(1);
            if (off % 50000 == 0)
                usleep(1000);
        }
        _exit(wfd >= 0 ? 0 : 1);
    }
    TU_OK(mk_file_read(path, &d, &n));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n, NF);
    assert_memory_equal(d, big, NF);
    free(d);
    free(big);
    unlink(path);

    /* over the 1 GiB limit (a sparse file: nothing is read) */
    int fd = open(tmp_path(path, sizeof path, "huge.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)(1 << 30) + 1), 0);
    close(fd);
    assert_int_equal(mk_file_read(path, &d, &n), MK_ERANGE);
    assert_null(d);
    assert_non_null(strstr(mk_err_msg(), "huge.bin"));
    unlink(path);

    assert_int_equal(mk_file_write(NULL, text, 1), MK_EINVAL);
    assert_int_equal(mk_file_write(path, NULL, 1), MK_EINVAL);
    TU_OK(mk_file_write(path, NULL, 0));
    TU_OK(mk_file_read(path, &d, &n));
    assert_int_equal(n, 0);
    free(d);
    unlink(path);
}

/* Replacing a file: readers see the old or the new content, never a mix; no temporary file remains, also after
 * a failure. */
static void test_file_write_atomic(void **state)
{
    (void)state;
    char path[512], buf[70000];
    enum { NA = 65536, NB = 40000, ROUNDS = 60 };
    static char a[NA], b[NB];
    memset(a, 'a', NA);
    memset(b, 'b', NB);
    tmp_path(path, sizeof path, "atomic.bin");
    TU_OK(mk_file_write(path, a, NA));
    assert_int_equal(slurp(path, buf, sizeof buf), NA);
    TU_OK(mk_file_write(path, b, NB));
    assert_int_equal(slurp(path, buf, sizeof buf), NB);
    assert_memory_equal(buf, b, NB);
    assert_int_equal(count_entries(tmpdir, "atomic.bin.tmp"), 0);

    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < ROUNDS; i++)
            if (mk_file_write(path, i % 2 ? b : a, i % 2 ? NB : NA) != 0)
                _exit(1);
        _exit(0);
    }
    int reads = 0, status = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        size_t n = slurp(path, buf, sizeof buf);
        if (n == NA)
            assert_memory_equal(buf, a, NA);
        else if (n == NB)
            assert_memory_equal(buf, b, NB);
        else
            fail_msg("read %zu bytes: a partial file", n);
        reads++;
        if (done == pid)
            break;
        assert_int_equal(done, 0);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(slurp(path, buf, sizeof buf), NB); /* the last round wrote b */
    print_message("%d reads during %d replacements\n", reads, ROUNDS);
    assert_int_equal(count_entries(tmpdir, "atomic.bin.tmp"), 0);

    /* a failed replacement (the destination is a non-empty directory) leaves no temporary file */
    char dir[512], inner[600];
    tmp_path(dir, sizeof dir, "dest-dir");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(inner, sizeof inner, "%s/keep", dir);
    write_bytes(inner, "k", 1);
    assert_int_equal(mk_file_write(dir, a, NA), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "dest-dir"));
    assert_int_equal(count_entries(tmpdir, "dest-dir.tmp"), 0);
    assert_int_equal(slurp(inner, buf, sizeof buf), 1);

    /* a failed save keeps the old file */
    tu_rng_t rng = {3};
    mk_image_t img = make_img(3, 3, MK_FMT_GRAY, 0, &rng), bad = img;
    TU_OK(mk_imageio_save(tmp_path(path, sizeof path, "keep.pgm"), &img));
    bad.format = MK_FMT_YUYV, bad.channels = 2, bad.width = 2;
    assert_int_equal(mk_imageio_save(path, &bad), MK_EINVAL);
    mk_image_t out;
    TU_OK(mk_imageio_load(path, MK_FMT_GRAY, &out));
    assert_same_pixels(&img, &out, "keep.pgm");
    mk_image_free(NULL, &out);
    mk_image_free(NULL, &img);
    assert_int_equal(count_entries(tmpdir, ".tmp."), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sniff),
        cmocka_unit_test(test_format_from_path),
        cmocka_unit_test(test_roundtrip_lossless),
        cmocka_unit_test(test_save_load_files),
        cmocka_unit_test(test_roundtrip_jpeg),
        cmocka_unit_test(test_written_files_are_standard),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_png_variants),
        cmocka_unit_test(test_png_depths),
        cmocka_unit_test(test_save_rgba),
        cmocka_unit_test(test_jpeg_real),
        cmocka_unit_test(test_jpeg_cmyk_unsupported),
        cmocka_unit_test(test_bmp_grabcut_images),
        cmocka_unit_test(test_bmp_grabcut_gt),
        cmocka_unit_test(test_bmp_grabcut_trimap),
        cmocka_unit_test(test_bmp_handmade),
        cmocka_unit_test(test_bmp_bad_headers),
        cmocka_unit_test(test_pnm_handmade),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_header_corruption),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_file_read),
        cmocka_unit_test(test_file_write_atomic),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
