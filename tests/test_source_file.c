/* test_source_file: file sources — the otb_man JPEG directory and its MJPEG AVI (same frames, frame count, the
 * AVI's rate; the AVI with its index removed or made absolute), a raw MJPEG stream of the same JPEGs with garbage
 * between them, loop, real-time pacing, held frames, Y4M files of every supported colour space written here, a
 * directory with empty and unreadable entries, and files that must be refused (a FIFO, which must not block the
 * open). */
#include "testutil.h"

#include "imageio.h"
#include "mjpeg.h"
#include "source.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static int group_setup(void **state)
{
    (void)state;
    tu_mkdtemp(tmpdir, sizeof tmpdir, "test_source_file");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(tmpdir);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static mk_source_t *open_file(const char *path, int loop, int realtime, double fps)
{
    char spec[4200];
    snprintf(spec, sizeof spec, "file:%s", path);
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.loop = loop;
    c.realtime = realtime;
    c.fps = fps;
    mk_source_t *src = NULL;
    TU_OK(mk_source_open(spec, &c, &src));
    return src;
}

/* Reads frames until EOS (at most max) and checks each against the JPEG files' bytes, in order. */
static int read_all(mk_source_t *src, const tu_blob_t *want, int nwant, int max)
{
    int n = 0;
    for (;;) {
        mk_frame_t f;
        int rc = mk_source_next(src, 5000, &f);
        if (rc == MK_SOURCE_EOS)
            return n;
        assert_int_equal(rc, MK_SOURCE_FRAME);
        assert_int_equal(f.kind, MK_FRAME_MJPEG);
        assert_int_equal(f.seq, n);
        assert_true(n < nwant);
        if (f.len != want[n].len || memcmp(f.data, want[n].data, f.len))
            fail_msg("frame %d: %zu bytes differ from the JPEG file's %zu", n, f.len, want[n].len);
        assert_int_equal(f.width, 241);
        assert_int_equal(f.height, 193);
        TU_OK(mk_source_release(src, &f));
        if (++n == max)
            return n;
    }
}

static const char *otb(char *buf, size_t n, const char *rel)
{
    char r[256];
    snprintf(r, sizeof r, "video/otb_man/%s", rel);
    return tu_data_path(buf, n, r);
}

/* ---- JPEG directory and AVI ------------------------------------------------------------------------------ */

static void test_dir_and_avi(void **state)
{
    (void)state;
    char dir[4096], avi[4096];
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames || !otb(dir, sizeof dir, "frames") || !otb(avi, sizeof avi, "man_mjpeg.avi")) {
        tu_blobs_free(frames, n);
        skip();
    }
    assert_int_equal(n, 134);
    mk_source_info_t info;
    mk_source_t *src = open_file(dir, 0, 0, 0);
    mk_source_info(src, &info);
    assert_string_equal(info.kind, "jpeg-dir");
    assert_int_equal(info.frames, 134);
    assert_int_equal(info.width, 241);
    assert_int_equal(info.height, 193);
    assert_int_equal(info.frame_kind, MK_FRAME_MJPEG);
    assert_int_equal(read_all(src, frames, n, 1000), 134);
    mk_frame_t f;
    assert_int_equal(mk_source_next(src, 0, &f), MK_SOURCE_EOS); /* and it stays there */
    assert_int_equal(mk_source_state(src), MK_SOURCE_STATE_EOS);
    mk_source_close(src);

    src = open_file(avi, 0, 0, 0);
    mk_source_info(src, &info);
    assert_string_equal(info.kind, "avi");
    assert_int_equal(info.frames, 134);
    assert_int_equal(info.width, 241);
    assert_int_equal(info.height, 193);
    assert_true(info.fps == 25.0); /* strh rate / scale */
    assert_int_equal(read_all(src, frames, n, 1000), 134);
    mk_source_close(src);

    /* The same frames decoded from both: the AVI's first and last frames against the files, as pixels. */
    src = open_file(avi, 0, 0, 0);
    for (int i = 0; i < 134; i++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        assert_null(f.name); /* names are a directory's only */
        if (i == 0 || i == 133) {
            mk_image_t a = {0}, b = {0};
            TU_OK(mk_imageio_decode(f.data, f.len, MK_FMT_RGB, &a, "avi frame"));
            TU_OK(mk_imageio_decode(frames[i].data, frames[i].len, MK_FMT_RGB, &b, "jpeg file"));
            for (int y = 0; y < a.height; y++)
                assert_memory_equal(mk_image_row(&a, 0, y), mk_image_row(&b, 0, y), (size_t)a.width * 3);
            mk_image_free(NULL, &a);
            mk_image_free(NULL, &b);
        }
        TU_OK(mk_source_release(src, &f));
    }
    mk_source_close(src);
    tu_blobs_free(frames, n);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The offset of a top-level RIFF chunk (or LIST of type `type`) with id `id`. */
static size_t find_chunk(const uint8_t *d, size_t len, const char *id, const char *type)
{
    for (size_t p = 12; p + 12 <= len;) {
        uint32_t sz = le32(d + p + 4);
        if (!memcmp(d + p, id, 4) && (!type || !memcmp(d + p + 8, type, 4)))
            return p;
        p += 8 + sz + (sz & 1);
    }
    fail_msg("no %s chunk", id);
    return 0;
}

/* The AVI without its idx1 (renamed JUNK: the movi list is scanned) and with absolute idx1 offsets. */
static void test_avi_index_variants(void **state)
{
    (void)state;
    char avi[4096], path[512];
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames || !otb(avi, sizeof avi, "man_mjpeg.avi")) {
        tu_blobs_free(frames, n);
        skip();
    }
    void *buf;
    size_t len;
    TU_OK(mk_file_read(avi, &buf, &len));
    uint8_t *d = buf;
    size_t idx1 = find_chunk(d, len, "idx1", NULL), movi = find_chunk(d, len, "LIST", "movi");

    memcpy(d + idx1, "JUNK", 4);
    snprintf(path, sizeof path, "%s/noindex.avi", tmpdir);
    TU_OK(mk_file_write(path, d, len));
    mk_source_t *src = open_file(path, 0, 0, 0);
    assert_int_equal(read_all(src, frames, n, 1000), 134);
    mk_source_close(src);

    memcpy(d + idx1, "idx1", 4);
    uint32_t entries = le32(d + idx1 + 4) / 16;
    for (uint32_t i = 0; i < entries; i++) {
        uint8_t *e = d + idx1 + 8 + 16 * i;
        put_le32(e + 8, le32(e + 8) + (uint32_t)(movi + 8));
    }
    snprintf(path, sizeof path, "%s/absolute.avi", tmpdir);
    TU_OK(mk_file_write(path, d, len));
    src = open_file(path, 0, 0, 0);
    assert_int_equal(read_all(src, frames, n, 1000), 134);
    mk_source_close(src);

    /* Cut short in the middle of the movi list: the frames before the cut. */
    snprintf(path, sizeof path, "%s/cut.avi", tmpdir);
    size_t cut = 0;
    for (uint32_t i = 0, k = 0; i < entries; i++) {
        const uint8_t *e = d + idx1 + 8 + 16 * i;
        if (!memcmp(e, "00dc", 4) && k++ == 50)
            cut = le32(e + 8) + 8 + le32(e + 12) / 2; /* absolute now: half of frame 50 */
    }
    TU_OK(mk_file_write(path, d, cut));
    src = open_file(path, 0, 0, 0);
    assert_int_equal(read_all(src, frames, n, 1000), 50);
    mk_source_close(src);

    /* Not MJPEG: the video stream's compression says so. */
    size_t strf = 0;
    for (size_t p = 12; p + 4 <= len && !strf; p++)
        if (!memcmp(d + p, "strf", 4))
            strf = p;
    assert_true(strf > 0);
    memcpy(d + strf + 8 + 16, "H264", 4);
    snprintf(path, sizeof path, "%s/h264.avi", tmpdir);
    TU_OK(mk_file_write(path, d, len));
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", path);
    mk_source_t *bad = NULL;
    assert_int_equal(mk_source_open(spec, NULL, &bad), MK_EUNSUPPORTED);
    assert_non_null(strstr(mk_err_msg(), "H264"));
    free(buf);
    tu_blobs_free(frames, n);
}

/* ---- raw MJPEG stream ------------------------------------------------------------------------------------ */

static void test_raw_stream(void **state)
{
    (void)state;
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames)
        skip();
    /* The JPEGs back to back, with garbage (stray bytes, fill, a lone FF D8 not followed by a marker) between some. */
    static const uint8_t junk[] = {'j', 'u', 'n', 'k', 0xFF, 0xFF, 0xD8, 0x00, 0xFF};
    size_t total = 0, junk_bytes = 0;
    for (int i = 0; i < n; i++)
        total += frames[i].len + sizeof junk;
    uint8_t *s = malloc(total), *p = s;
    assert_non_null(s);
    for (int i = 0; i < n; i++) {
        if (i % 3 == 1) {
            memcpy(p, junk, sizeof junk);
            p += sizeof junk;
            junk_bytes += sizeof junk;
        }
        memcpy(p, frames[i].data, frames[i].len);
        p += frames[i].len;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/stream.mjpeg", tmpdir);
    TU_OK(mk_file_write(path, s, (size_t)(p - s)));
    mk_source_t *src = open_file(path, 0, 0, 0);
    mk_source_info_t info;
    mk_source_info(src, &info);
    assert_string_equal(info.kind, "mjpeg");
    assert_int_equal(info.frames, -1);
    assert_int_equal(read_all(src, frames, n, 1000), 134);
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.skipped_bytes, junk_bytes);
    mk_source_close(src);
    free(s);
    tu_blobs_free(frames, n);
}

/* ---- loop and pacing ------------------------------------------------------------------------------------- */

static void test_loop(void **state)
{
    (void)state;
    char dir[4096], avi[4096];
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames || !otb(dir, sizeof dir, "frames") || !otb(avi, sizeof avi, "man_mjpeg.avi")) {
        tu_blobs_free(frames, n);
        skip();
    }
    const char *paths[2] = {dir, avi};
    for (int k = 0; k < 2; k++) {
        mk_source_t *src = open_file(paths[k], 1, 0, 0);
        for (int i = 0; i < 2 * n + 5; i++) {
            mk_frame_t f;
            assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
            assert_int_equal(f.seq, i);
            int j = i % n;
            assert_int_equal(f.len, frames[j].len);
            assert_memory_equal(f.data, frames[j].data, f.len);
            assert_int_equal(!!(f.flags & MK_FRAME_F_LOOPED), i > 0 && j == 0);
            TU_OK(mk_source_release(src, &f));
        }
        mk_source_stats_t st;
        mk_source_stats(src, &st);
        assert_int_equal(st.loops, 2);
        mk_source_close(src);
    }
    tu_blobs_free(frames, n);
}

static void test_pacing(void **state)
{
    (void)state;
    char dir[4096], avi[4096];
    if (!otb(dir, sizeof dir, "frames") || !otb(avi, sizeof avi, "man_mjpeg.avi"))
        skip();
    /* The AVI's own 25 fps: 6 frames span 5 intervals of 40 ms at least. */
    mk_source_t *src = open_file(avi, 0, 1, 0);
    mk_frame_t f;
    int64_t t0 = now_ns(), first = 0, last = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        if (i == 0)
            first = f.capture_ns;
        last = f.capture_ns;
        TU_OK(mk_source_release(src, &f));
    }
    assert_true(now_ns() - t0 >= 195000000);
    assert_true(last - first >= 195000000);
    mk_source_close(src);

    /* The configured rate wins over the directory's default: 100 fps, 11 frames, 10 intervals. */
    src = open_file(dir, 0, 1, 100);
    mk_source_info_t info;
    mk_source_info(src, &info);
    assert_true(info.fps == 100);
    t0 = now_ns();
    for (int i = 0; i < 11; i++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        TU_OK(mk_source_release(src, &f));
    }
    assert_true(now_ns() - t0 >= 95000000);
    mk_source_close(src);

    /* At 5 fps: not due yet, a zero timeout returns a timeout. A consumer that falls behind gets the next frame
     * when it asks and the one after a full period later: the schedule restarts, no burst of catch-up frames. */
    src = open_file(dir, 0, 1, 5);
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    TU_OK(mk_source_release(src, &f));
    assert_int_equal(mk_source_next(src, 0, &f), MK_SOURCE_TIMEOUT);
    struct timespec nap = {0, 500000000};
    nanosleep(&nap, NULL);
    assert_int_equal(mk_source_next(src, 0, &f), MK_SOURCE_FRAME);
    int64_t late = f.capture_ns;
    TU_OK(mk_source_release(src, &f));
    assert_int_equal(mk_source_next(src, 0, &f), MK_SOURCE_TIMEOUT);
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    assert_true(f.capture_ns - late >= 195000000);
    TU_OK(mk_source_release(src, &f));
    mk_source_close(src);
}

/* Held frames keep their bytes while later ones are read. */
static void test_held_frames(void **state)
{
    (void)state;
    char dir[4096];
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames || !otb(dir, sizeof dir, "frames")) {
        tu_blobs_free(frames, n);
        skip();
    }
    mk_source_t *src = open_file(dir, 0, 0, 0);
    int max = mk_source_max_held(src);
    assert_int_equal(max, 4);
    mk_frame_t f[5];
    for (int i = 0; i < max; i++)
        assert_int_equal(mk_source_next(src, 1000, &f[i]), MK_SOURCE_FRAME);
    assert_int_equal(mk_source_next(src, 1000, &f[max]), MK_ESTATE);
    TU_OK(mk_source_release(src, &f[1]));
    assert_int_equal(mk_source_next(src, 1000, &f[1]), MK_SOURCE_FRAME);
    for (int i = 0; i < max; i++) {
        int j = i == 1 ? max : i;
        assert_int_equal(f[i].len, frames[j].len);
        assert_memory_equal(f[i].data, frames[j].data, f[i].len);
        TU_OK(mk_source_release(src, &f[i]));
    }
    mk_source_close(src);
    tu_blobs_free(frames, n);
}

/* ---- Y4M ------------------------------------------------------------------------------------------------- */

typedef enum { C420, C422, C444, CMONO } chroma_t;

/* Writes a Y4M of `frames` random frames; returns the planes (caller frees). `cut` bytes are left off the end. */
static uint8_t *write_y4m(const char *path, const char *header, int w, int h, chroma_t c, int frames, size_t cut,
                          size_t *frame_bytes)
{
    size_t cw = c == C444 ? (size_t)w : (size_t)(w + 1) / 2, ch = c == C420 ? (size_t)(h + 1) / 2 : (size_t)h;
    size_t fb = (size_t)w * h + (c == CMONO ? 0 : 2 * cw * ch);
    uint8_t *planes = malloc(fb * (size_t)frames);
    assert_non_null(planes);
    tu_rng_t r = {(uint64_t)w * 131 + (uint64_t)c};
    for (size_t i = 0; i < fb * (size_t)frames; i++)
        planes[i] = (uint8_t)(tu_rand(&r) >> 56);
    size_t cap = strlen(header) + (size_t)frames * (fb + 32);
    char *file = malloc(cap);
    assert_non_null(file);
    size_t len = (size_t)snprintf(file, cap, "%s\n", header);
    for (int k = 0; k < frames; k++) {
        len += (size_t)snprintf(file + len, cap - len, k == 1 ? "FRAME Ixyz\n" : "FRAME\n");
        memcpy(file + len, planes + (size_t)k * fb, fb);
        len += fb;
    }
    TU_OK(mk_file_write(path, file, len - cut));
    free(file);
    *frame_bytes = fb;
    return planes;
}

/* The YUYV the source must deliver for frame planes p: Y as is; U and V of each pixel pair from the chroma sample
 * at (x/2, y/2) for 4:2:0, (x/2, y) for 4:2:2, (x, y) of the pair's first pixel for 4:4:4, 128 for mono. */
static void check_yuyv(const mk_image_t *img, const uint8_t *p, int w, int h, chroma_t c)
{
    size_t cw = c == C444 ? (size_t)w : (size_t)w / 2, ch = c == C420 ? (size_t)(h + 1) / 2 : (size_t)h;
    const uint8_t *Y = p, *U = p + (size_t)w * h, *V = U + cw * ch;
    assert_int_equal(img->format, MK_FMT_YUYV);
    assert_int_equal(img->width, w);
    assert_int_equal(img->height, h);
    for (int y = 0; y < h; y++) {
        const uint8_t *row = mk_image_row(img, 0, y);
        for (int x = 0; x < w; x++) {
            int cx = c == C444 ? x & ~1 : x / 2, cy = c == C420 ? y / 2 : y;
            int u = c == CMONO ? 128 : U[(size_t)cy * cw + (size_t)cx], v = c == CMONO ? 128 : V[(size_t)cy * cw + (size_t)cx];
            if (row[2 * x] != Y[(size_t)y * w + (size_t)x] || row[(x & ~1) * 2 + 1] != u || row[(x & ~1) * 2 + 3] != v)
                fail_msg("chroma %d %dx%d: pixel (%d,%d) is Y%d U%d V%d, expected Y%d U%d V%d", (int)c, w, h, x, y,
                         row[2 * x], row[(x & ~1) * 2 + 1], row[(x & ~1) * 2 + 3], Y[(size_t)y * w + (size_t)x], u, v);
        }
    }
}

static void test_y4m(void **state)
{
    (void)state;
    const struct {
        const char *header;
        int w, h;
        chroma_t c;
        double fps;
    } cases[] = {
        {"YUV4MPEG2 W64 H48 F30:1 Ip A1:1 C420jpeg XYSCSS=420JPEG", 64, 48, C420, 30},
        {"YUV4MPEG2 W38 H21 F30000:1001 C420mpeg2", 38, 21, C420, 30000.0 / 1001},
        {"YUV4MPEG2 H20 W10", 10, 20, C420, 30}, /* no C: 4:2:0; no F: the default rate */
        {"YUV4MPEG2 W40 H30 F25:1 C422", 40, 30, C422, 25},
        {"YUV4MPEG2 W40 H30 F25:1 C444", 40, 30, C444, 25},
        {"YUV4MPEG2 W40 H30 F25:1 Cmono", 40, 30, CMONO, 25},
    };
    char path[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/t%zu.y4m", tmpdir, i);
        size_t fb;
        uint8_t *planes = write_y4m(path, cases[i].header, cases[i].w, cases[i].h, cases[i].c, 3, 0, &fb);
        mk_source_t *src = open_file(path, 1, 0, 0);
        mk_source_info_t info;
        mk_source_info(src, &info);
        assert_string_equal(info.kind, "y4m");
        assert_int_equal(info.frame_kind, MK_FRAME_RAW);
        assert_int_equal(info.raw_format, MK_FMT_YUYV);
        assert_true(info.fps == cases[i].fps);
        for (int k = 0; k < 5; k++) { /* 3 frames, then the loop */
            mk_frame_t f;
            assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
            assert_int_equal(f.kind, MK_FRAME_RAW);
            assert_int_equal(!!(f.flags & MK_FRAME_F_LOOPED), k == 3);
            check_yuyv(&f.image, planes + (size_t)(k % 3) * fb, cases[i].w, cases[i].h, cases[i].c);
            TU_OK(mk_source_release(src, &f));
        }
        mk_source_close(src);
        free(planes);
    }

    /* A truncated last frame: counted and dropped, the stream ends. */
    snprintf(path, sizeof path, "%s/cut.y4m", tmpdir);
    size_t fb;
    uint8_t *planes = write_y4m(path, "YUV4MPEG2 W16 H16 F30:1 C420jpeg", 16, 16, C420, 3, 100, &fb);
    mk_source_t *src = open_file(path, 0, 0, 0);
    mk_frame_t f;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        check_yuyv(&f.image, planes + (size_t)k * fb, 16, 16, C420);
        TU_OK(mk_source_release(src, &f));
    }
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_EOS);
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.corrupt, 1);
    mk_source_close(src);
    free(planes);

    /* Refused: odd width, high bit depth, 4:1:1, a broken header. */
    const struct {
        const char *header;
        int rc;
    } bad[] = {
        {"YUV4MPEG2 W15 H16 C420jpeg", MK_EUNSUPPORTED},
        {"YUV4MPEG2 W16 H16 C420p10", MK_EUNSUPPORTED},
        {"YUV4MPEG2 W16 H16 C411", MK_EUNSUPPORTED},
        {"YUV4MPEG2 W0 H16", MK_EFORMAT},
        {"YUV4MPEG2 W16 H99999", MK_EFORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/bad%zu.y4m", tmpdir, i);
        TU_OK(mk_file_write(path, bad[i].header, strlen(bad[i].header)));
        char spec[600];
        snprintf(spec, sizeof spec, "file:%s", path);
        FILE *fp = fopen(path, "ab");
        assert_non_null(fp);
        fputs("\nFRAME\n", fp);
        fclose(fp);
        src = NULL;
        int rc = mk_source_open(spec, NULL, &src);
        if (rc != bad[i].rc)
            fail_msg("'%s': %s (%s), expected %s", bad[i].header, mk_err_name(rc), mk_err_msg(),
                     mk_err_name(bad[i].rc));
        assert_null(src);
    }
}

/* ---- mutated files ------------------------------------------------------------------------------------ */

/* Opens `path` and reads it to its end (at most 300 frames): the open and every read either work or fail with a
 * message; no crash, no hang (a sanitizer build checks the reads). Returns the frames delivered, -1 if refused. */
static int read_mutated(const char *path, const char *what, int i)
{
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", path);
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.realtime = 0;
    mk_source_t *src = NULL;
    mk_err_clear();
    if (mk_source_open(spec, &c, &src)) {
        if (!mk_err_msg()[0])
            fail_msg("%s mutation %d: refused without a message", what, i);
        assert_null(src);
        return -1;
    }
    int n = 0;
    for (; n < 300; n++) {
        mk_frame_t f;
        int rc = mk_source_next(src, 2000, &f);
        if (rc == MK_SOURCE_EOS)
            break;
        if (rc < 0) {
            if (!mk_err_msg()[0])
                fail_msg("%s mutation %d: a read error without a message", what, i);
            break;
        }
        if (rc != MK_SOURCE_FRAME)
            fail_msg("%s mutation %d: status %d from a file", what, i, rc);
        assert_true(f.kind == MK_FRAME_MJPEG ? f.data && f.len > 0 : f.image.data != NULL);
        TU_OK(mk_source_release(src, &f));
    }
    mk_source_close(src);
    return n;
}

/* `data` with its bytes [from, to) replaced by a mutation of them, written to `path`. */
static void write_mutated(const char *path, tu_rng_t *r, const uint8_t *data, size_t len, size_t from, size_t to)
{
    static const char *const tokens[] = {"RIFF", "LIST", "movi", "idx1", "00dc", "strh", "strf", "avih", "JUNK",
                                         "\xff\xff\xff\x7f", "\0\0\0\0", "\xff\xd8", "\xff\xd9",
                                         "FRAME\n", "YUV4MPEG2 ", "W99999 ", "H0 ", "C411 ", "F0:0 "};
    size_t n;
    char *m = tu_mutate(r, (const char *)data + from, to - from, tokens, (int)(sizeof tokens / sizeof tokens[0]), &n);
    uint8_t *out = malloc(len - (to - from) + n);
    assert_non_null(out);
    memcpy(out, data, from);
    memcpy(out + from, m, n);
    memcpy(out + from + n, data + to, len - to);
    TU_OK(mk_file_write(path, out, len - (to - from) + n));
    free(out);
    free(m);
}

/* Random mutations of the otb AVI (its headers and its index), of a raw MJPEG stream and of a Y4M file. */
static void test_mutations(void **state)
{
    (void)state;
    char avi[4096], path[512];
    void *a;
    size_t alen;
    if (!otb(avi, sizeof avi, "man_mjpeg.avi"))
        skip();
    TU_OK(mk_file_read(avi, &a, &alen));
    tu_rng_t r = {31337};
    int refused = 0, read = 0;
    snprintf(path, sizeof path, "%s/m.avi", tmpdir);
    for (int i = 0; i < 120; i++) {
        /* the headers (up to the first frames), the index at the end, or one span anywhere */
        size_t from = i % 3 == 0 ? 0 : i % 3 == 1 ? alen - 2400 : (size_t)(tu_rand(&r) % (alen - 64));
        size_t to = i % 3 == 0 ? 12000 : i % 3 == 1 ? alen : from + 64;
        write_mutated(path, &r, a, alen, from, to);
        int n = read_mutated(path, "avi", i);
        refused += n < 0;
        read += n > 0;
    }
    free(a);
    /* a raw MJPEG stream: the first 6 otb frames back to back */
    int nf;
    tu_blob_t *frames = tu_otb_frames(&nf);
    assert_non_null(frames);
    size_t slen = 0;
    for (int i = 0; i < 6; i++)
        slen += frames[i].len;
    uint8_t *stream = malloc(slen), *p = stream;
    assert_non_null(stream);
    for (int i = 0; i < 6; i++) {
        memcpy(p, frames[i].data, frames[i].len);
        p += frames[i].len;
    }
    tu_blobs_free(frames, nf);
    snprintf(path, sizeof path, "%s/m.mjpeg", tmpdir);
    for (int i = 0; i < 60; i++) {
        size_t from = (size_t)(tu_rand(&r) % (slen - 64));
        write_mutated(path, &r, stream, slen, from, from + 64);
        int n = read_mutated(path, "mjpeg", i);
        refused += n < 0;
        read += n > 0;
    }
    free(stream);
    /* a Y4M of 3 frames: its header, or 12 bytes around where a frame starts */
    size_t fb, ylen;
    snprintf(path, sizeof path, "%s/seed.y4m", tmpdir);
    free(write_y4m(path, "YUV4MPEG2 W40 H30 F25:1 C420jpeg", 40, 30, C420, 3, 0, &fb));
    void *y;
    TU_OK(mk_file_read(path, &y, &ylen));
    snprintf(path, sizeof path, "%s/m.y4m", tmpdir);
    for (int i = 0; i < 120; i++) {
        size_t hdr = strlen("YUV4MPEG2 W40 H30 F25:1 C420jpeg\n"), frame = hdr + (size_t)(i % 3) * (fb + 6);
        size_t from = i % 2 ? 0 : frame, to = i % 2 ? hdr : frame + 12;
        write_mutated(path, &r, y, ylen, from, to);
        int n = read_mutated(path, "y4m", i);
        refused += n < 0;
        read += n > 0;
    }
    free(y);
    print_message("mutated files: %d refused, %d read with frames\n", refused, read);
    assert_true(refused > 0 && read > 0);
}

/* A JPEG directory with files that are no frame — an empty one (truncated to nothing), a directory named like a
 * JPEG — skips and counts them as corrupt and delivers the others; a looping directory with no readable frame at
 * all ends (EOS) instead of spinning. The source does not decode: any bytes make a frame here. */
static void test_dir_unreadable(void **state)
{
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/unreadable", tmpdir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    TU_OK(mk_file_write(path, "\xff\xd8\xff first", 9));
    snprintf(path, sizeof path, "%s/b.jpg", dir);
    TU_OK(mk_file_write(path, "", 0));
    snprintf(path, sizeof path, "%s/c.jpg", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/d.jpg", dir);
    TU_OK(mk_file_write(path, "\xff\xd8\xff second", 10));
    mk_source_t *src = open_file(dir, 0, 0, 0);
    const char *want[] = {"\xff\xd8\xff first", "\xff\xd8\xff second"}, *names[] = {"a.jpg", "d.jpg"};
    for (int i = 0; i < 2; i++) {
        mk_frame_t f;
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        assert_int_equal(f.len, strlen(want[i]));
        assert_memory_equal(f.data, want[i], f.len);
        assert_non_null(f.name); /* the file's name, the skipped ones passed over */
        assert_string_equal(f.name, names[i]);
        TU_OK(mk_source_release(src, &f));
    }
    mk_frame_t f;
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_EOS);
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.frames, 2);
    assert_int_equal(st.corrupt, 2);
    mk_source_close(src);

    snprintf(path, sizeof path, "%s/a.jpg", dir);
    TU_OK(mk_file_write(path, "", 0));
    snprintf(path, sizeof path, "%s/d.jpg", dir);
    TU_OK(mk_file_write(path, "", 0));
    src = open_file(dir, 1, 0, 0);
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_EOS);
    mk_source_stats(src, &st);
    assert_int_equal(st.frames, 0);
    assert_int_equal(st.corrupt, 4);
    mk_source_close(src);
}

static void test_refused(void **state)
{
    (void)state;
    char path[512], spec[600];
    mk_source_t *src = NULL;
    snprintf(spec, sizeof spec, "file:%s/does-not-exist", tmpdir);
    assert_int_equal(mk_source_open(spec, NULL, &src), MK_EIO);
    snprintf(path, sizeof path, "%s/empty", tmpdir);
    mkdir(path, 0700);
    snprintf(spec, sizeof spec, "file:%s", path);
    assert_int_equal(mk_source_open(spec, NULL, &src), MK_EFORMAT);
    snprintf(path, sizeof path, "%s/text.txt", tmpdir);
    TU_OK(mk_file_write(path, "hello, world\n", 13));
    snprintf(spec, sizeof spec, "file:%s", path);
    assert_int_equal(mk_source_open(spec, NULL, &src), MK_EUNSUPPORTED);
    snprintf(path, sizeof path, "%s/riff.avi", tmpdir);
    TU_OK(mk_file_write(path, "RIFF\x04\x00\x00\x00" "AVI ", 12));
    snprintf(spec, sizeof spec, "file:%s", path);
    assert_int_equal(mk_source_open(spec, NULL, &src), MK_EFORMAT);
    assert_null(src);
}

/* A FIFO (or a device) is no file source: refused at once with a clear error, never waited on (an open() of a FIFO
 * without a writer blocks); a FIFO named like a JPEG in a directory is skipped as corrupt. An alarm turns a hang
 * into a failure. */
static void test_fifo(void **state)
{
    (void)state;
    char path[600], spec[700];
    mk_source_t *src = NULL;
    alarm(20);
    snprintf(path, sizeof path, "%s/pipe.mjpeg", tmpdir);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(spec, sizeof spec, "file:%s", path);
    int64_t t0 = now_ns();
    assert_int_equal(mk_source_open(spec, NULL, &src), MK_EUNSUPPORTED);
    assert_true(now_ns() - t0 < 1000000000);
    assert_null(src);
    assert_non_null(strstr(mk_err_msg(), "is a FIFO"));
    assert_non_null(strstr(mk_err_msg(), "a regular file or a directory is needed"));
    assert_int_equal(mk_source_open("file:/dev/null", NULL, &src), MK_EUNSUPPORTED);
    assert_non_null(strstr(mk_err_msg(), "is a character device"));

    char dir[512];
    snprintf(dir, sizeof dir, "%s/fifodir", tmpdir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    TU_OK(mk_file_write(path, "\xff\xd8\xff first", 9));
    snprintf(path, sizeof path, "%s/b.jpg", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/c.jpg", dir);
    TU_OK(mk_file_write(path, "\xff\xd8\xff second", 10));
    src = open_file(dir, 0, 0, 0);
    mk_frame_t f;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        assert_int_equal(f.len, i ? 10 : 9);
        TU_OK(mk_source_release(src, &f));
    }
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_EOS);
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.corrupt, 1);
    mk_source_close(src);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dir_and_avi),   cmocka_unit_test(test_avi_index_variants),
        cmocka_unit_test(test_raw_stream),    cmocka_unit_test(test_loop),
        cmocka_unit_test(test_pacing),        cmocka_unit_test(test_held_frames),
        cmocka_unit_test(test_y4m),           cmocka_unit_test(test_dir_unreadable),
        cmocka_unit_test(test_refused),       cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
