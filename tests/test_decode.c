/* test_decode: the MJPEG marker helpers (stream splitting on tables of crafted inputs, the standard Huffman tables
 * against libjpeg-turbo's encoder, insertion into frames without them) and the decode pool — order under 1 to 8
 * threads on the otb_man frames, truncated and corrupt frames in a raw MJPEG stream counted and skipped with the
 * rest intact and in order, raw frames passed through or converted, back-pressure, finish, bad calls, and
 * pipeline.decoder auto/nvjpeg on a machine without nvJPEG: TurboJPEG's exact pixels (this run hides libnvjpeg
 * through $MASKD_NVJPEG_LIB, whatever the machine has).
 *
 * Argument "cuda": the nvJPEG decoder (kernels/jpeg_gpu.h) and pools with pipeline.decoder nvjpeg against pools
 * decoding on the CPU — the otb_man frames and test-pattern frames (720p, 1080p) JPEG-encoded here, each backend,
 * frames without Huffman tables, garbage, truncated and damaged frames with the counters adding up; the
 * differences from TurboJPEG are printed per image set. Skips (77) without a GPU or libnvjpeg. */
#include "testutil.h"

#include "decode.h"
#include "imageio.h"
#include "jpeg_gpu.h"
#include "mjpeg.h"
#include "source.h"
#include "testpattern.h"
#include "yuyv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char tmpdir[256];

static int group_setup(void **state)
{
    (void)state;
    tu_mkdtemp(tmpdir, sizeof tmpdir, "test_decode");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(tmpdir);
    return 0;
}

static void assert_same_image(const mk_image_t *a, const mk_image_t *b, const char *what)
{
    if (a->width != b->width || a->height != b->height || a->format != b->format)
        fail_msg("%s: %dx%d %s vs %dx%d %s", what, a->width, a->height, mk_format_name(a->format), b->width,
                 b->height, mk_format_name(b->format));
    for (int y = 0; y < a->height; y++)
        if (memcmp(mk_image_row(a, 0, y), mk_image_row(b, 0, y), mk_image_row_bytes(a)))
            fail_msg("%s: row %d differs", what, y);
}

/* A pool of `decoder` (depth 0: the default); pool() below for TurboJPEG. */
static mk_decode_t *pool_with(mk_decoder_t decoder, int threads, int depth, mk_format_t format, int raw_to_rgb,
                              int strict, int pinned)
{
    mk_decode_config_t c;
    mk_decode_config_init(&c);
    c.decoder = decoder;
    c.threads = threads;
    c.depth = depth;
    c.format = format;
    c.raw_to_rgb = raw_to_rgb;
    c.strict = strict;
    c.pinned = pinned;
    mk_decode_t *d = NULL;
    TU_OK(mk_decode_create(&c, &d));
    return d;
}

static mk_decode_t *pool(int threads, int depth, mk_format_t format, int raw_to_rgb, int strict)
{
    return pool_with(MK_DECODER_CPU, threads, depth, format, raw_to_rgb, strict, 0);
}

static mk_frame_t mjpeg_frame(const void *data, size_t len, uint64_t seq)
{
    mk_frame_t f;
    memset(&f, 0, sizeof f);
    f.kind = MK_FRAME_MJPEG;
    f.data = data;
    f.len = len;
    f.seq = seq;
    f.capture_ns = 1000 + (int64_t)seq;
    f.flags = (uint32_t)seq & 3;
    return f;
}

/* ---- marker helpers -------------------------------------------------------------------------------------- */

typedef struct {
    const char *what;
    const uint8_t *in;
    size_t len;
    int at_eof;
    int result;
    size_t start, end;
    int complete;
} split_case_t;

#define BYTES(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})

static void test_split(void **state)
{
    (void)state;
    const split_case_t cases[] = {
        {"garbage", BYTES(1, 2, 3, 4, 5), 0, MK_MJPEG_MORE, 3, 3, 0},
        {"garbage at eof", BYTES(1, 2, 3, 4, 5), 1, MK_MJPEG_NONE, 5, 5, 0},
        {"empty", BYTES(0xFF), 1, MK_MJPEG_NONE, 1, 1, 0},
        {"SOI EOI", BYTES(9, 0xFF, 0xD8, 0xFF, 0xD9, 7), 0, MK_MJPEG_FRAME, 1, 5, 1},
        /* An APP1 whose payload holds FF D8 FF D9 (a thumbnail) does not end the frame. */
        {"app segment", BYTES(0xFF, 0xD8, 0xFF, 0xE1, 0, 6, 0xFF, 0xD8, 0xFF, 0xD9, 0xFF, 0xD9), 0, MK_MJPEG_FRAME, 0,
         12, 1},
        /* Scan data: stuffed FF 00, a restart marker, fill bytes before the EOI. */
        {"scan", BYTES(0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 0xFF, 0, 2, 0xFF, 0xD3, 3, 0xFF, 0xFF, 0xD9, 0xAA), 0,
         MK_MJPEG_FRAME, 0, 16, 1},
        {"scan, more to come", BYTES(0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 0xFF, 0, 2), 0, MK_MJPEG_MORE, 0, 0, 0},
        {"scan cut at eof", BYTES(0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 0xFF, 0, 2), 1, MK_MJPEG_FRAME, 0, 10, 0},
        {"segment length past the end", BYTES(0xFF, 0xD8, 0xFF, 0xDB, 0, 67, 1, 2), 0, MK_MJPEG_MORE, 0, 0, 0},
        /* Cut short in the scan: the next SOI ends it. */
        {"truncated, next SOI", BYTES(0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 2, 0xFF, 0xD8, 0xFF, 0xD9), 0, MK_MJPEG_FRAME, 0,
         8, 0},
        /* Cut short in a header: a byte that is no marker; the frame ends where the next SOI begins. */
        {"broken header", BYTES(0xFF, 0xD8, 0xFF, 0xDB, 0, 4, 1, 2, 0x55, 0x66, 0xFF, 0xD8, 0xFF, 0xD9), 0,
         MK_MJPEG_FRAME, 0, 10, 0},
        {"zero length segment", BYTES(0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 0xFF, 0xD8, 0xFF, 0xD9), 0, MK_MJPEG_FRAME, 0, 6, 0},
        {"broken, no next SOI yet", BYTES(0xFF, 0xD8, 0xFF, 0xDB, 0, 2, 0x55), 0, MK_MJPEG_MORE, 0, 0, 0},
        {"broken at eof", BYTES(0xFF, 0xD8, 0xFF, 0xDB, 0, 2, 0x55), 1, MK_MJPEG_FRAME, 0, 7, 0},
        {"FF D8 without a marker", BYTES(0xFF, 0xD8, 0x00, 0xFF, 0xD8, 0xFF, 0xD9), 0, MK_MJPEG_FRAME, 3, 7, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const split_case_t *c = &cases[i];
        mk_mjpeg_span_t sp;
        int r = mk_mjpeg_split(c->in, c->len, c->at_eof, &sp);
        if (r != c->result || sp.start != c->start || (r == MK_MJPEG_FRAME && (sp.end != c->end || sp.complete != c->complete)))
            fail_msg("%s: result %d start %zu end %zu complete %d; expected %d %zu %zu %d", c->what, r, sp.start,
                     sp.end, sp.complete, c->result, c->start, c->end, c->complete);
    }
}

/* Huffman tables of a JPEG: for each (class, id) the 16 counts and the symbols, as parsed from its DHT segments. */
typedef struct {
    int present;
    uint8_t counts[16];
    uint8_t symbols[256];
    int n;
} huff_t;

static void parse_dht(const uint8_t *d, size_t len, huff_t tables[2][4])
{
    memset(tables, 0, sizeof(huff_t) * 8);
    size_t p = 2;
    while (p + 4 <= len && d[p] == 0xFF && d[p + 1] != 0xDA) {
        size_t seg = (size_t)d[p + 2] << 8 | d[p + 3];
        if (d[p + 1] == 0xC4) {
            size_t q = p + 4, end = p + 2 + seg;
            while (q < end) {
                huff_t *t = &tables[d[q] >> 4][d[q] & 3];
                t->present = 1;
                memcpy(t->counts, d + q + 1, 16);
                t->n = 0;
                for (int k = 0; k < 16; k++)
                    t->n += t->counts[k];
                memcpy(t->symbols, d + q + 17, (size_t)t->n);
                q += 17 + (size_t)t->n;
            }
        }
        p += 2 + seg;
    }
}

/* A copy of a JPEG with every DHT segment left out. */
static uint8_t *strip_dht(const uint8_t *d, size_t len, size_t *out_len)
{
    uint8_t *o = malloc(len);
    assert_non_null(o);
    size_t p = 2, n = 2;
    memcpy(o, d, 2);
    while (d[p + 1] != 0xDA) {
        size_t seg = (size_t)d[p + 2] << 8 | d[p + 3];
        if (d[p + 1] != 0xC4) {
            memcpy(o + n, d + p, 2 + seg);
            n += 2 + seg;
        }
        p += 2 + seg;
    }
    memcpy(o + n, d + p, len - p);
    *out_len = n + len - p;
    return o;
}

static void test_std_dht(void **state)
{
    (void)state;
    /* libjpeg-turbo's encoder (not optimising) writes the Annex K tables: ours must be the same, table by table. */
    mk_image_t img = tu_random_image(11, 48, 32, MK_FMT_RGB);
    void *jpg;
    size_t len;
    TU_OK(mk_imageio_encode(&img, MK_FILE_JPEG, 90, &jpg, &len));
    huff_t ref[2][4], ours[2][4];
    parse_dht(jpg, len, ref);
    size_t dlen;
    const uint8_t *dht = mk_mjpeg_std_dht(&dlen);
    assert_int_equal(dlen, 420);
    uint8_t seg[424] = {0xFF, 0xD8};
    memcpy(seg + 2, dht, dlen);
    seg[2 + dlen] = 0xFF, seg[3 + dlen] = 0xDA;
    parse_dht(seg, sizeof seg, ours);
    int tables = 0;
    for (int c = 0; c < 2; c++)
        for (int id = 0; id < 2; id++) {
            assert_true(ref[c][id].present && ours[c][id].present);
            assert_memory_equal(ref[c][id].counts, ours[c][id].counts, 16);
            assert_int_equal(ref[c][id].n, ours[c][id].n);
            assert_memory_equal(ref[c][id].symbols, ours[c][id].symbols, (size_t)ours[c][id].n);
            tables++;
        }
    assert_int_equal(tables, 4);

    /* Without its tables the frame is flagged; with ours inserted it decodes to the original's pixels. */
    assert_int_equal(mk_mjpeg_has_dht(jpg, len), 1);
    size_t slen;
    uint8_t *stripped = strip_dht(jpg, len, &slen);
    assert_true(slen < len);
    assert_int_equal(mk_mjpeg_has_dht(stripped, slen), 0);
    uint8_t *fixed = NULL;
    size_t cap = 0, flen;
    TU_OK(mk_mjpeg_add_dht(stripped, slen, &fixed, &cap, &flen));
    assert_int_equal(flen, slen + 420);
    assert_int_equal(mk_mjpeg_has_dht(fixed, flen), 1);
    mk_image_t a = {0}, b = {0};
    TU_OK(mk_imageio_decode(jpg, len, MK_FMT_RGB, &a, "original"));
    TU_OK(mk_imageio_decode(fixed, flen, MK_FMT_RGB, &b, "tables inserted"));
    assert_same_image(&a, &b, "tables inserted");
    int w, h;
    TU_OK(mk_mjpeg_size(stripped, slen, &w, &h));
    assert_int_equal(w, 48);
    assert_int_equal(h, 32);

    /* Through the pool: counted, decoded like the original. */
    mk_decode_t *d = pool(2, 0, MK_FMT_RGB, 0, 1);
    mk_frame_t f = mjpeg_frame(stripped, slen, 5);
    TU_OK(mk_decode_submit(d, &f, -1));
    mk_decoded_t out;
    assert_int_equal(mk_decode_next(d, 5000, &out), MK_DECODE_OK);
    assert_same_image(&out.image, &a, "pool, tables inserted");
    TU_OK(mk_decode_release(d, &out));
    mk_decode_stats_t st;
    mk_decode_stats(d, &st);
    assert_int_equal(st.dht_added, 1);
    assert_int_equal(st.decoded, 1);
    mk_decode_destroy(d);

    /* Malformed headers are reported, not trusted. */
    assert_int_equal(mk_mjpeg_has_dht(BYTES(0xFF, 0xD8, 0xFF, 0xDB, 0, 99, 1)), MK_EFORMAT);
    assert_int_equal(mk_mjpeg_has_dht(BYTES(0x00, 0xD8, 0xFF, 0xD9)), MK_EFORMAT);
    assert_int_equal(mk_mjpeg_has_dht(BYTES(0xFF, 0xD8, 0xFF, 0xC4, 0, 2)), MK_EFORMAT); /* no SOS */
    assert_int_equal(mk_mjpeg_add_dht(BYTES(0xFF, 0xD8, 0x12), &fixed, &cap, &flen), MK_EFORMAT);
    free(fixed);
    free(stripped);
    free(jpg);
    mk_image_free(NULL, &a);
    mk_image_free(NULL, &b);
    mk_image_free(NULL, &img);
}

/* ---- the pool -------------------------------------------------------------------------------------------- */

/* Submits frames without blocking, taking outputs whenever the pool is full; checks every output against
 * `want[k]` for the k-th expected frame (its seq in `seqs`). Returns the number of outputs. */
static int run_pool(mk_decode_t *d, const mk_frame_t *in, int nin, const mk_image_t *want, const uint64_t *seqs,
                    int nwant)
{
    int got = 0;
    for (int i = 0; i <= nin; i++) {
        if (i == nin)
            mk_decode_finish(d);
        for (;;) {
            int rc = i < nin ? mk_decode_submit(d, &in[i], 0) : MK_DECODE_AGAIN;
            if (rc == MK_DECODE_OK)
                break;
            assert_int_equal(rc, MK_DECODE_AGAIN);
            mk_decoded_t out;
            rc = mk_decode_next(d, 10000, &out);
            if (rc == MK_DECODE_EOS) {
                assert_int_equal(i, nin);
                return got;
            }
            assert_int_equal(rc, MK_DECODE_OK);
            assert_true(got < nwant);
            if (out.seq != seqs[got])
                fail_msg("output %d is frame %llu, expected %llu", got, (unsigned long long)out.seq,
                         (unsigned long long)seqs[got]);
            assert_int_equal(out.capture_ns, 1000 + (int64_t)out.seq);
            assert_int_equal(out.flags, (uint32_t)out.seq & 3);
            char what[64];
            snprintf(what, sizeof what, "frame %llu", (unsigned long long)out.seq);
            assert_same_image(&out.image, &want[got], what);
            TU_OK(mk_decode_release(d, &out));
            got++;
        }
    }
    return got;
}

static void test_order_threads(void **state)
{
    (void)state;
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames)
        skip();
    /* Twice through the 134 frames; the reference is each file decoded alone by imageio. */
    int total = 2 * n;
    mk_frame_t *in = calloc((size_t)total, sizeof *in);
    mk_image_t *want = calloc((size_t)total, sizeof *want);
    uint64_t *seqs = calloc((size_t)total, sizeof *seqs);
    assert_true(in && want && seqs);
    for (int i = 0; i < total; i++) {
        in[i] = mjpeg_frame(frames[i % n].data, frames[i % n].len, (uint64_t)i);
        seqs[i] = (uint64_t)i;
        if (i < n)
            TU_OK(mk_imageio_decode(frames[i].data, frames[i].len, MK_FMT_BGR, &want[i], "otb frame"));
        else
            want[i] = want[i - n];
    }
    const int threads[] = {1, 2, 4, 8};
    for (int t = 0; t < 4; t++) {
        mk_decode_t *d = pool(threads[t], 0, MK_FMT_BGR, 0, 1);
        assert_int_equal(run_pool(d, in, total, want, seqs, total), total);
        mk_decode_stats_t st;
        mk_decode_stats(d, &st);
        assert_int_equal(st.submitted, total);
        assert_int_equal(st.decoded, total);
        assert_int_equal(st.corrupt, 0);
        assert_int_equal(st.dht_added, 0);
        mk_decode_destroy(d);
    }
    for (int i = 0; i < n; i++)
        mk_image_free(NULL, &want[i]);
    free(in);
    free(want);
    free(seqs);
    tu_blobs_free(frames, n);
}

/* A raw MJPEG stream of 20 otb frames where frame 7 is truncated, frame 12's entropy data is garbage and frame 16's
 * header is broken: through the file source and a 3-thread pool, 17 frames come out, in order, intact. */
static void test_corrupt_stream(void **state)
{
    (void)state;
    int n;
    tu_blob_t *frames = tu_otb_frames(&n);
    if (!frames)
        skip();
    enum { N = 20, TRUNC = 7, GARBLED = 12, BROKEN = 16 };
    uint8_t *s = malloc(40u * 1024 * N), *p = s;
    assert_non_null(s);
    for (int i = 0; i < N; i++) {
        size_t len = frames[i].len;
        memcpy(p, frames[i].data, len);
        if (i == TRUNC)
            len /= 2;
        if (i == GARBLED) {
            /* Random bytes (stuffed after FF) over the middle half of the scan. */
            tu_rng_t r = {99};
            for (size_t k = len / 4; k < 3 * len / 4; k++) {
                p[k] = (uint8_t)(tu_rand(&r) >> 56);
                if (p[k] == 0xFF)
                    p[++k] = 0;
            }
            mk_image_t probe = {0};
            assert_int_not_equal(mk_imageio_decode(p, len, MK_FMT_RGB, &probe, "garbled"), 0); /* precondition */
        }
        if (i == BROKEN)
            p[4] = 0, p[5] = 1; /* an APP0 segment length below 2 */
        p += len;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/corrupt.mjpeg", tmpdir);
    TU_OK(mk_file_write(path, s, (size_t)(p - s)));
    free(s);

    mk_image_t want[N];
    uint64_t seqs[N];
    int nw = 0;
    for (int i = 0; i < N; i++) {
        if (i == TRUNC || i == GARBLED || i == BROKEN)
            continue;
        TU_OK(mk_imageio_decode(frames[i].data, frames[i].len, MK_FMT_RGB, &want[nw], "otb frame"));
        seqs[nw++] = (uint64_t)i; /* the source delivers each bad frame as a piece of its own */
    }
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", path);
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.realtime = 0;
    mk_source_t *src;
    TU_OK(mk_source_open(spec, &c, &src));
    mk_frame_t in[N + 4];
    void *copies[N + 4];
    int nin = 0;
    for (;;) {
        mk_frame_t f;
        int rc = mk_source_next(src, 1000, &f);
        if (rc == MK_SOURCE_EOS)
            break;
        assert_int_equal(rc, MK_SOURCE_FRAME);
        assert_true(nin < N + 4);
        copies[nin] = malloc(f.len);
        memcpy(copies[nin], f.data, f.len);
        in[nin] = mjpeg_frame(copies[nin], f.len, f.seq);
        nin++;
        TU_OK(mk_source_release(src, &f));
    }
    mk_source_close(src);
    assert_int_equal(nin, N); /* every piece between SOIs is a frame; three of them are bad */
    mk_decode_t *d = pool(3, 4, MK_FMT_RGB, 0, 1);
    assert_int_equal(run_pool(d, in, nin, want, seqs, nw), nw);
    mk_decode_stats_t st;
    mk_decode_stats(d, &st);
    assert_int_equal(st.corrupt, 3);
    assert_int_equal(st.decoded, N - 3);
    mk_decode_destroy(d);

    /* Lenient mode decodes the truncated frame (grey where data is missing) instead of dropping it. */
    d = pool(1, 0, MK_FMT_RGB, 0, 0);
    TU_OK(mk_decode_submit(d, &in[TRUNC], -1));
    mk_decoded_t out;
    assert_int_equal(mk_decode_next(d, 5000, &out), MK_DECODE_OK);
    assert_int_equal(out.image.width, 241);
    TU_OK(mk_decode_release(d, &out));
    mk_decode_destroy(d);

    for (int i = 0; i < nin; i++)
        free(copies[i]);
    for (int i = 0; i < nw; i++)
        mk_image_free(NULL, &want[i]);
    tu_blobs_free(frames, n);
}

static mk_frame_t raw_frame(const mk_image_t *img, uint64_t seq)
{
    mk_frame_t f;
    memset(&f, 0, sizeof f);
    f.kind = MK_FRAME_RAW;
    f.image = *img;
    f.width = img->width;
    f.height = img->height;
    f.seq = seq;
    f.capture_ns = 1000 + (int64_t)seq;
    f.flags = (uint32_t)seq & 3;
    return f;
}

static void test_raw_frames(void **state)
{
    (void)state;
    mk_image_t yuyv = tu_random_image(21, 64, 10, MK_FMT_YUYV), rgb = tu_random_image(22, 30, 20, MK_FMT_RGB);
    mk_ctx_t *cpu;
    TU_OK(mk_ctx_create(MK_BACKEND_CPU, &cpu));
    mk_image_t conv = mk_image_desc(64, 10, MK_FMT_BGR, MK_U8);
    TU_OK(mk_image_alloc(NULL, &conv, MK_MEM_HOST));
    TU_OK(mk_yuyv_to_rgb(cpu, &yuyv, &conv));
    for (int mode = 0; mode < 2; mode++) {
        mk_decode_t *d = pool(2, 0, MK_FMT_BGR, mode, 1);
        mk_frame_t f = raw_frame(&yuyv, 0), g = raw_frame(&rgb, 1);
        TU_OK(mk_decode_submit(d, &f, -1));
        TU_OK(mk_decode_submit(d, &g, -1));
        /* The pool copied the frames: the caller's buffers may change at once. */
        mk_image_t yuyv_copy = tu_random_image(21, 64, 10, MK_FMT_YUYV);
        memset(yuyv.data, 0, mk_image_bytes(&yuyv));
        mk_decoded_t out;
        assert_int_equal(mk_decode_next(d, 5000, &out), MK_DECODE_OK);
        assert_int_equal(out.seq, 0);
        assert_same_image(&out.image, mode ? &conv : &yuyv_copy, mode ? "converted" : "passed through");
        TU_OK(mk_decode_release(d, &out));
        assert_int_equal(mk_decode_next(d, 5000, &out), MK_DECODE_OK);
        assert_int_equal(out.seq, 1);
        assert_same_image(&out.image, &rgb, "rgb passed through");
        TU_OK(mk_decode_release(d, &out));
        mk_decode_stats_t st;
        mk_decode_stats(d, &st);
        assert_int_equal(st.passed, 2);
        assert_int_equal(st.decoded, 0);
        memcpy(yuyv.data, yuyv_copy.data, mk_image_bytes(&yuyv));
        mk_image_free(NULL, &yuyv_copy);
        mk_decode_destroy(d);
    }
    mk_image_free(NULL, &conv);
    mk_image_free(NULL, &yuyv);
    mk_image_free(NULL, &rgb);
    mk_ctx_destroy(cpu);
}

/* pinned: the output images are page-locked where a CUDA device exists (uploads at DMA speed), plain host memory
 * otherwise; the pixels are the same either way, for decoded JPEGs and raw frames passed through. */
static void test_pinned(void **state)
{
    (void)state;
    mk_ctx_t *probe = NULL;
    mk_mem_t want_mem = mk_ctx_create(MK_BACKEND_CUDA, &probe) == 0 ? MK_MEM_PINNED : MK_MEM_HOST;
    mk_ctx_destroy(probe);
    mk_image_t src = tu_random_image(31, 96, 40, MK_FMT_RGB), rgb = tu_random_image(32, 30, 20, MK_FMT_RGB), want;
    void *jpeg = NULL;
    size_t len = 0;
    TU_OK(mk_imageio_encode(&src, MK_FILE_JPEG, 90, &jpeg, &len));
    TU_OK(mk_imageio_decode(jpeg, len, MK_FMT_RGB, &want, "encoded"));
    mk_decode_config_t c;
    mk_decode_config_init(&c);
    c.pinned = 1;
    mk_decode_t *d = NULL;
    TU_OK(mk_decode_create(&c, &d));
    for (int i = 0; i < 6; i++) {
        mk_frame_t f = i % 2 ? raw_frame(&rgb, (uint64_t)i) : mjpeg_frame(jpeg, len, (uint64_t)i);
        TU_OK(mk_decode_submit(d, &f, -1));
        mk_decoded_t out;
        assert_int_equal(mk_decode_next(d, 5000, &out), MK_DECODE_OK);
        assert_int_equal(out.seq, (uint64_t)i);
        assert_int_equal(out.image.mem, want_mem);
        assert_same_image(&out.image, i % 2 ? &rgb : &want, i % 2 ? "raw, pinned pool" : "jpeg, pinned pool");
        TU_OK(mk_decode_release(d, &out));
    }
    print_message("decode pool output in %s memory\n", mk_mem_name(want_mem));
    mk_decode_destroy(d);
    free(jpeg);
    mk_image_free(NULL, &want);
    mk_image_free(NULL, &src);
    mk_image_free(NULL, &rgb);
}

static void test_backpressure_and_finish(void **state)
{
    (void)state;
    mk_image_t img = tu_random_image(5, 40, 30, MK_FMT_RGB);
    void *jpg;
    size_t len;
    TU_OK(mk_imageio_encode(&img, MK_FILE_JPEG, 90, &jpg, &len));
    mk_decode_t *d = pool(1, 2, MK_FMT_RGB, 0, 1);
    mk_frame_t f0 = mjpeg_frame(jpg, len, 0), f1 = mjpeg_frame(jpg, len, 1), f2 = mjpeg_frame(jpg, len, 2);
    TU_OK(mk_decode_submit(d, &f0, 0));
    TU_OK(mk_decode_submit(d, &f1, 0));
    assert_int_equal(mk_decode_submit(d, &f2, 0), MK_DECODE_AGAIN);
    assert_int_equal(mk_decode_submit(d, &f2, 20), MK_DECODE_AGAIN);
    mk_decoded_t a, b;
    assert_int_equal(mk_decode_next(d, 5000, &a), MK_DECODE_OK);
    /* Taken but not released: still inside the pool. */
    assert_int_equal(mk_decode_submit(d, &f2, 0), MK_DECODE_AGAIN);
    TU_OK(mk_decode_release(d, &a));
    assert_int_equal(mk_decode_release(d, &a), MK_EINVAL);
    TU_OK(mk_decode_submit(d, &f2, 0));
    mk_decode_finish(d);
    assert_int_equal(mk_decode_submit(d, &f0, 0), MK_ESTATE);
    assert_int_equal(mk_decode_next(d, 5000, &a), MK_DECODE_OK);
    assert_int_equal(a.seq, 1);
    assert_int_equal(mk_decode_next(d, 5000, &b), MK_DECODE_OK);
    assert_int_equal(b.seq, 2);
    assert_int_equal(mk_decode_next(d, 5000, &a), MK_DECODE_EOS);
    TU_OK(mk_decode_release(d, &b));
    mk_decode_stats_t st;
    mk_decode_stats(d, &st);
    assert_int_equal(st.submitted, 3);
    assert_int_equal(st.rejected, 3);
    mk_decode_destroy(d);

    /* Nothing submitted: next times out. */
    d = pool(2, 0, MK_FMT_RGB, 0, 1);
    assert_int_equal(mk_decode_next(d, 20, &a), MK_DECODE_AGAIN);
    assert_int_equal(mk_decode_next(d, 0, &a), MK_DECODE_AGAIN);
    mk_decode_destroy(d);
    free(jpg);
    mk_image_free(NULL, &img);
}

static void test_bad_calls(void **state)
{
    (void)state;
    mk_decode_config_t c;
    mk_decode_t *d = NULL;
    mk_decode_config_init(&c);
    c.threads = 0;
    assert_int_equal(mk_decode_create(&c, &d), MK_ERANGE);
    c.threads = 17;
    assert_int_equal(mk_decode_create(&c, &d), MK_ERANGE);
    mk_decode_config_init(&c);
    c.depth = 65;
    assert_int_equal(mk_decode_create(&c, &d), MK_ERANGE);
    mk_decode_config_init(&c);
    c.format = MK_FMT_YUYV;
    assert_int_equal(mk_decode_create(&c, &d), MK_EINVAL);
    assert_null(d);
    mk_decode_config_init(&c);
    c.decoder = (mk_decoder_t)3;
    assert_int_equal(mk_decode_create(&c, &d), MK_EINVAL);
    assert_null(d);
    d = pool(1, 0, MK_FMT_RGB, 0, 1);
    mk_frame_t f = mjpeg_frame(NULL, 0, 0);
    assert_int_equal(mk_decode_submit(d, &f, 0), MK_EINVAL);
    mk_image_t dev = mk_image_desc(8, 8, MK_FMT_RGB, MK_U8);
    dev.pitch = 24;
    dev.mem = MK_MEM_DEVICE;
    dev.data = &c;
    f = raw_frame(&dev, 0);
    assert_int_equal(mk_decode_submit(d, &f, 0), MK_EINVAL);
    mk_decoded_t out;
    memset(&out, 0, sizeof out);
    out.slot_ = 3;
    assert_int_equal(mk_decode_release(d, &out), MK_EINVAL);
    mk_decode_destroy(d);
    mk_decode_destroy(NULL);
}

/* ---- decoders: helpers ------------------------------------------------------------------------------------ */

/* n test-pattern frames of w x h, JPEG-encoded (quality 90, 4:2:0) as `masktool bench pipeline` encodes them. */
static tu_blob_t *testpattern_jpegs(int w, int h, int n)
{
    mk_testpattern_t *tp;
    TU_OK(mk_testpattern_create(w, h, 30, &tp));
    mk_image_t img = mk_image_desc(w, h, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    tu_blob_t *b = calloc((size_t)n, sizeof *b);
    assert_non_null(b);
    for (int i = 0; i < n; i++) {
        void *data;
        TU_OK(mk_testpattern_frame(tp, (uint64_t)i * 7, &img));
        TU_OK(mk_imageio_encode(&img, MK_FILE_JPEG, 90, &data, &b[i].len));
        b[i].data = data;
    }
    mk_image_free(NULL, &img);
    mk_testpattern_destroy(tp);
    return b;
}

static mk_decode_t *decoder_pool(mk_decoder_t decoder, int threads, mk_format_t format, int strict, int pinned)
{
    return pool_with(decoder, threads, 0, format, 0, strict, pinned);
}

/* Takes one output: checks that it is the next in order and keeps a copy in out[seq] (plain host memory). */
static void take_one(mk_decode_t *d, mk_image_t *out, int n, int64_t *last)
{
    mk_decoded_t o;
    assert_int_equal(mk_decode_next(d, 20000, &o), MK_DECODE_OK);
    assert_true((int64_t)o.seq > *last && o.seq < (uint64_t)n);
    *last = (int64_t)o.seq;
    mk_image_t *c = &out[o.seq];
    *c = mk_image_desc(o.image.width, o.image.height, o.image.format, MK_U8);
    TU_OK(mk_image_alloc(NULL, c, MK_MEM_HOST));
    TU_OK(mk_image_copy(NULL, c, &o.image));
    TU_OK(mk_decode_release(d, &o));
}

/* Every frame through the pool (seq = index), without blocking on a full pool; out[i] gets frame i's image, or
 * stays empty (data NULL) when it was skipped as corrupt. */
static void decode_all(mk_decode_t *d, const tu_blob_t *in, int n, mk_image_t *out, mk_decode_stats_t *st)
{
    int64_t last = -1;
    memset(out, 0, sizeof *out * (size_t)n);
    for (int i = 0; i < n; i++) {
        mk_frame_t f = mjpeg_frame(in[i].data, in[i].len, (uint64_t)i);
        int rc;
        while ((rc = mk_decode_submit(d, &f, 0)) == MK_DECODE_AGAIN)
            take_one(d, out, n, &last);
        TU_OK(rc);
    }
    mk_decode_finish(d);
    for (;;) {
        mk_decoded_t o;
        int rc = mk_decode_next(d, 20000, &o);
        if (rc == MK_DECODE_EOS)
            break;
        assert_int_equal(rc, MK_DECODE_OK);
        assert_true((int64_t)o.seq > last && o.seq < (uint64_t)n);
        last = (int64_t)o.seq;
        mk_image_t *c = &out[o.seq];
        *c = mk_image_desc(o.image.width, o.image.height, o.image.format, MK_U8);
        TU_OK(mk_image_alloc(NULL, c, MK_MEM_HOST));
        TU_OK(mk_image_copy(NULL, c, &o.image));
        TU_OK(mk_decode_release(d, &o));
    }
    mk_decode_stats(d, st);
}

static void free_images(mk_image_t *img, int n)
{
    for (int i = 0; i < n; i++)
        mk_image_free(NULL, &img[i]);
}

/* The largest and the summed absolute difference of two images of one geometry, byte by byte. */
static void diff_images(const mk_image_t *a, const mk_image_t *b, int *maxd, double *sum, double *count)
{
    if (a->width != b->width || a->height != b->height || a->format != b->format)
        fail_msg("%dx%d %s vs %dx%d %s", a->width, a->height, mk_format_name(a->format), b->width, b->height,
                 mk_format_name(b->format));
    size_t row = mk_image_row_bytes(a);
    for (int y = 0; y < a->height; y++) {
        const uint8_t *p = mk_image_row(a, 0, y), *q = mk_image_row(b, 0, y);
        for (size_t x = 0; x < row; x++) {
            int dd = abs((int)p[x] - (int)q[x]);
            *sum += dd;
            *maxd = dd > *maxd ? dd : *maxd;
        }
    }
    *count += (double)row * a->height;
}

/* ---- decoders on a machine without nvJPEG (this run hides libnvjpeg) ------------------------------------------ */

static void test_decoder_without_nvjpeg(void **state)
{
    (void)state;
    char why[600] = "";
    assert_int_equal(mk_jpeg_gpu_available(why, sizeof why), 0);
    assert_true(strlen(why) > 10);
    print_message("nvJPEG unavailable (as this run arranges): %s\n", why);
    mk_jpeg_gpu_t *g = (mk_jpeg_gpu_t *)&why;
    int rc = mk_jpeg_gpu_create(MK_JPEG_GPU_AUTO, &g);
    assert_true(rc == MK_EUNSUPPORTED || rc == MK_ENODEV);
    assert_null(g);
    assert_true(strlen(mk_err_msg()) > 10);
    mk_jpeg_gpu_destroy(NULL);
    assert_string_equal(mk_jpeg_gpu_backend_name(MK_JPEG_GPU_HARDWARE), "nvjpeg-hardware");
    assert_string_equal(mk_jpeg_gpu_backend_name(MK_JPEG_GPU_HYBRID), "nvjpeg-hybrid");
    assert_string_equal(mk_decoder_name(MK_DECODER_AUTO), "auto");
    assert_string_equal(mk_decoder_name(MK_DECODER_CPU), "cpu");
    assert_string_equal(mk_decoder_name(MK_DECODER_NVJPEG), "nvjpeg");
    /* auto is nvJPEG only for a program computing on CUDA; a name asked for stays */
    assert_int_equal(mk_decoder_for_backend(MK_DECODER_AUTO, MK_BACKEND_CPU), MK_DECODER_CPU);
    assert_int_equal(mk_decoder_for_backend(MK_DECODER_AUTO, MK_BACKEND_CUDA), MK_DECODER_AUTO);
    assert_int_equal(mk_decoder_for_backend(MK_DECODER_NVJPEG, MK_BACKEND_CPU), MK_DECODER_NVJPEG);
    assert_int_equal(mk_decoder_for_backend(MK_DECODER_CPU, MK_BACKEND_CUDA), MK_DECODER_CPU);
    mk_decode_config_t c;
    mk_decode_config_init(&c);
    assert_int_equal(c.decoder, MK_DECODER_CPU);

    /* auto, nvjpeg and cpu pools: all TurboJPEG, the same bytes as imageio's decode of each frame */
    int n = 6, otb_files = 0;
    tu_blob_t *tp = testpattern_jpegs(320, 240, n), *otb = tu_data_dir() ? tu_otb_frames(&otb_files) : NULL;
    int notb = otb_files < 24 ? otb_files : 24;
    const mk_decoder_t decs[] = {MK_DECODER_AUTO, MK_DECODER_NVJPEG, MK_DECODER_CPU};
    for (int set = 0; set < 2; set++) {
        tu_blob_t *in = set ? otb : tp;
        int m = set ? notb : n;
        if (!in)
            continue;
        mk_image_t *want = calloc((size_t)m, sizeof *want), *got = calloc((size_t)m, sizeof *got);
        assert_true(want && got);
        for (int i = 0; i < m; i++)
            TU_OK(mk_imageio_decode(in[i].data, in[i].len, MK_FMT_RGB, &want[i], "frame"));
        for (int k = 0; k < 3; k++) {
            mk_decode_t *d = decoder_pool(decs[k], 2, MK_FMT_RGB, 1, 0);
            assert_string_equal(mk_decode_decoder(d), "cpu");
            mk_decode_stats_t st;
            decode_all(d, in, m, got, &st);
            for (int i = 0; i < m; i++)
                assert_same_image(&got[i], &want[i], set ? "otb frame, nvJPEG unavailable" : "test pattern frame");
            assert_int_equal(st.decoded, m);
            assert_int_equal(st.gpu_decoded, 0);
            assert_int_equal(st.gpu_fallbacks, 0);
            assert_int_equal(st.corrupt, 0);
            free_images(got, m);
            mk_decode_destroy(d);
        }
        free_images(want, m);
        free(want);
        free(got);
    }
    tu_blobs_free(tp, n);
    if (otb)
        tu_blobs_free(otb, otb_files);
}

/* ---- nvJPEG (argument "cuda") -------------------------------------------------------------------------------- */

/* TOLERANCE: nvJPEG's pixels against TurboJPEG's, over each image set (mean over every byte, max of any byte).
 * Measured on an H100 (nvJPEG 13.0.1, every backend): mean 0.26-0.39, max 62-65, the max at the test pattern's
 * saturated colour edges, where nvJPEG's chroma upsampling and TurboJPEG's fancy (triangular) upsampling differ
 * most; a wrong channel order or a shifted row would give means in the tens. */
#define NVJPEG_TOL_MEAN 1.0 /* TOLERANCE */
#define NVJPEG_TOL_MAX 80   /* TOLERANCE */

static void check_tolerance(const char *what, int maxd, double mean)
{
    print_message("nvJPEG vs TurboJPEG: %-44s max abs diff %3d, mean abs diff %.4f\n", what, maxd, mean);
    if (mean > NVJPEG_TOL_MEAN || maxd > NVJPEG_TOL_MAX) /* TOLERANCE */
        fail_msg("%s: max %d, mean %.4f beyond the tolerance (max %d, mean %.2f)", what, maxd, mean,
                 NVJPEG_TOL_MAX, NVJPEG_TOL_MEAN);
}

/* Each nvJPEG backend on its own, on 720p test-pattern frames in RGB and BGR; bad arguments and bad data leave the
 * decoder usable. */
static void test_gpu_backends(void **state)
{
    (void)state;
    int n = 8;
    tu_blob_t *in = testpattern_jpegs(1280, 720, n);
    mk_image_t want[8], wantb[8];
    for (int i = 0; i < n; i++) {
        TU_OK(mk_imageio_decode(in[i].data, in[i].len, MK_FMT_RGB, &want[i], "frame"));
        TU_OK(mk_imageio_decode(in[i].data, in[i].len, MK_FMT_BGR, &wantb[i], "frame"));
    }
    const mk_jpeg_gpu_backend_t all[] = {MK_JPEG_GPU_HARDWARE, MK_JPEG_GPU_HYBRID, MK_JPEG_GPU_GPU_HYBRID};
    int working = 0;
    for (int k = 0; k < 3; k++) {
        const char *name = mk_jpeg_gpu_backend_name(all[k]);
        mk_jpeg_gpu_t *g = NULL;
        if (mk_jpeg_gpu_create(all[k], &g)) {
            print_message("%s: unavailable: %s\n", name, mk_err_msg());
            assert_null(g);
            continue;
        }
        working++;
        assert_int_equal(mk_jpeg_gpu_backend(g), all[k]);
        for (int bgr = 0; bgr < 2; bgr++) {
            int maxd = 0;
            double sum = 0, count = 0, t0 = 0, t = 0;
            for (int i = 0; i < n; i++) {
                mk_image_t out = mk_image_desc(1280, 720, bgr ? MK_FMT_BGR : MK_FMT_RGB, MK_U8);
                out.pitch = 1280 * 3 + 64; /* any pitch */
                TU_OK(mk_image_alloc(NULL, &out, MK_MEM_HOST));
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                TU_OK(mk_jpeg_gpu_decode(g, in[i].data, in[i].len, &out));
                clock_gettime(CLOCK_MONOTONIC, &b);
                double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
                if (i == 0)
                    t0 = ms;
                else
                    t += ms;
                diff_images(&out, bgr ? &wantb[i] : &want[i], &maxd, &sum, &count);
                mk_image_free(NULL, &out);
            }
            char what[96];
            snprintf(what, sizeof what, "%s, 1280x720 test pattern %s", name, bgr ? "BGR" : "RGB");
            print_message("%s: first decode %.2f ms, then %.3f ms per frame (pageable host output)\n", what, t0,
                          t / (n - 1));
            check_tolerance(what, maxd, sum / count);
        }
        /* bad calls and bad data: errors with messages, and the decoder still decodes */
        mk_image_t small = mk_image_desc(640, 360, MK_FMT_RGB, MK_U8), dev = small;
        TU_OK(mk_image_alloc(NULL, &small, MK_MEM_HOST));
        assert_int_equal(mk_jpeg_gpu_decode(g, in[0].data, in[0].len, &small), MK_EFORMAT); /* not its size */
        dev.mem = MK_MEM_DEVICE;
        dev.pitch = 640 * 3;
        dev.data = small.data;
        assert_int_equal(mk_jpeg_gpu_decode(g, in[0].data, in[0].len, &dev), MK_EINVAL);
        assert_int_equal(mk_jpeg_gpu_decode(g, NULL, 10, &small), MK_EINVAL);
        uint8_t junk[3000];
        tu_rng_t r = {7};
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)(tu_rand(&r) >> 56);
        assert_int_not_equal(mk_jpeg_gpu_decode(g, junk, sizeof junk, &small), 0);
        print_message("%s on garbage: %s\n", name, mk_err_msg());
        mk_image_t out = mk_image_desc(1280, 720, MK_FMT_RGB, MK_U8);
        TU_OK(mk_image_alloc(NULL, &out, MK_MEM_HOST));
        TU_OK(mk_jpeg_gpu_decode(g, in[1].data, in[1].len, &out));
        int maxd = 0;
        double sum = 0, count = 0;
        diff_images(&out, &want[1], &maxd, &sum, &count);
        assert_true(maxd <= NVJPEG_TOL_MAX);
        mk_image_free(NULL, &out);
        mk_image_free(NULL, &small);
        mk_jpeg_gpu_destroy(g);
    }
    assert_true(working > 0);
    mk_jpeg_gpu_t *g = NULL;
    TU_OK(mk_jpeg_gpu_create(MK_JPEG_GPU_AUTO, &g));
    print_message("auto: %s (%s)\n", mk_jpeg_gpu_backend_name(mk_jpeg_gpu_backend(g)), mk_jpeg_gpu_library());
    mk_jpeg_gpu_destroy(g);
    free_images(want, n);
    free_images(wantb, n);
    tu_blobs_free(in, n);
}

/* One image set through a pool with pipeline.decoder nvjpeg and through one decoding on the CPU. */
static void compare_set(const char *what, const tu_blob_t *in, int n, mk_format_t format, int threads, int pinned,
                        int all_on_gpu)
{
    mk_image_t *cpu = calloc((size_t)n, sizeof *cpu), *gpu = calloc((size_t)n, sizeof *gpu);
    assert_true(cpu && gpu);
    mk_decode_stats_t sc, sg;
    mk_decode_t *d = decoder_pool(MK_DECODER_CPU, threads, format, 1, 0);
    decode_all(d, in, n, cpu, &sc);
    mk_decode_destroy(d);
    d = decoder_pool(MK_DECODER_NVJPEG, threads, format, 1, pinned);
    const char *dec = mk_decode_decoder(d);
    assert_true(!strncmp(dec, "nvjpeg-", 7));
    decode_all(d, in, n, gpu, &sg);
    mk_decode_destroy(d);
    assert_int_equal(sc.decoded, n);
    assert_int_equal(sg.decoded, n);
    assert_int_equal(sg.corrupt, 0);
    assert_int_equal(sg.gpu_decoded + sg.gpu_fallbacks, n); /* no frame failed the header checks */
    int w = cpu[0].width, h = cpu[0].height, maxd = 0;
    double sum = 0, count = 0;
    for (int i = 0; i < n; i++)
        diff_images(&gpu[i], &cpu[i], &maxd, &sum, &count);
    char label[160];
    snprintf(label, sizeof label, "%s (%d, %dx%d %s, %s)", what, n, w, h, mk_format_name(format), dec);
    print_message("%s: gpu_decoded %llu, gpu_fallbacks %llu\n", label, (unsigned long long)sg.gpu_decoded,
                  (unsigned long long)sg.gpu_fallbacks);
    check_tolerance(label, maxd, sum / count);
    if (all_on_gpu) {
        assert_int_equal(sg.gpu_decoded, n);
        assert_int_equal(sg.gpu_fallbacks, 0);
    } else {
        assert_true(sg.gpu_decoded > 0);
    }
    free_images(cpu, n);
    free_images(gpu, n);
    free(cpu);
    free(gpu);
}

static void test_gpu_pool_sets(void **state)
{
    (void)state;
    int n = 24;
    tu_blob_t *tp = testpattern_jpegs(1280, 720, n);
    compare_set("test pattern 720p, pinned output", tp, n, MK_FMT_RGB, 2, 1, 1);
    compare_set("test pattern 720p, 4 threads", tp, n, MK_FMT_BGR, 4, 0, 1);
    tu_blobs_free(tp, n);
    tp = testpattern_jpegs(1920, 1080, 8);
    compare_set("test pattern 1080p", tp, 8, MK_FMT_RGB, 2, 1, 1);
    tu_blobs_free(tp, 8);
    int notb = 0;
    tu_blob_t *otb = tu_data_dir() ? tu_otb_frames(&notb) : NULL;
    if (otb) {
        /* the pixels are compared whichever way each frame went; a backend that refuses these frames shows
         * in gpu_fallbacks */
        compare_set("otb_man frames", otb, notb, MK_FMT_BGR, 3, 0, 0);
        compare_set("otb_man frames", otb, notb, MK_FMT_RGB, 1, 1, 0);
        tu_blobs_free(otb, notb);
    } else {
        print_message("shared test data absent: the otb_man set is not compared\n");
    }
    /* auto on a machine with nvJPEG: nvJPEG */
    mk_decode_t *d = decoder_pool(MK_DECODER_AUTO, 2, MK_FMT_RGB, 1, 0);
    assert_true(!strncmp(mk_decode_decoder(d), "nvjpeg-", 7));
    mk_decode_destroy(d);
}

/* Frames without Huffman tables (webcam MJPEG): the standard tables go in, nvJPEG decodes them. */
static void test_gpu_no_dht(void **state)
{
    (void)state;
    int n = 6;
    tu_blob_t *in = testpattern_jpegs(1280, 720, n);
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *s = strip_dht(in[i].data, in[i].len, &len);
        assert_int_equal(mk_mjpeg_has_dht(s, len), 0);
        free(in[i].data);
        in[i].data = s;
        in[i].len = len;
    }
    mk_image_t cpu[6], gpu[6];
    mk_decode_stats_t sc, sg;
    mk_decode_t *d = decoder_pool(MK_DECODER_CPU, 2, MK_FMT_RGB, 1, 0);
    decode_all(d, in, n, cpu, &sc);
    mk_decode_destroy(d);
    d = decoder_pool(MK_DECODER_NVJPEG, 2, MK_FMT_RGB, 1, 0);
    decode_all(d, in, n, gpu, &sg);
    mk_decode_destroy(d);
    assert_int_equal(sc.dht_added, n);
    assert_int_equal(sg.dht_added, n);
    assert_int_equal(sg.decoded, n);
    assert_int_equal(sg.gpu_decoded, n);
    assert_int_equal(sg.gpu_fallbacks, 0);
    int maxd = 0;
    double sum = 0, count = 0;
    for (int i = 0; i < n; i++)
        diff_images(&gpu[i], &cpu[i], &maxd, &sum, &count);
    check_tolerance("720p frames without Huffman tables", maxd, sum / count);
    free_images(cpu, n);
    free_images(gpu, n);
    tu_blobs_free(in, n);
}

/* Bad frames between good ones through a one-thread nvJPEG pool, one at a time so that each frame's effect on the
 * counters shows: garbage bytes (refused by the header checks: corrupt, never handed to nvJPEG), a truncated frame
 * (no EOI: handed to TurboJPEG, which refuses it in strict mode and decodes it in lenient mode), damaged scan data
 * and a scan without data (nvJPEG decodes them or fails; either way the counters add up), an empty-looking header.
 * The good frames after each come out decoded by nvJPEG. */
enum { B_GOOD, B_GARBAGE, B_TRUNCATED, B_GARBLED, B_NOSCAN, B_BADHEADER };

static void test_gpu_corrupt(void **state)
{
    (void)state;
    int ngood = 6;
    tu_blob_t *good = testpattern_jpegs(1280, 720, ngood);
    const int kinds[] = {B_GOOD, B_GARBAGE, B_GOOD, B_TRUNCATED, B_GOOD, B_GARBLED, B_GOOD, B_NOSCAN, B_GOOD,
                         B_BADHEADER, B_GOOD, B_GOOD};
    const int n = (int)(sizeof kinds / sizeof kinds[0]);
    static const char *const names[] = {"good", "garbage", "truncated", "garbled scan", "no scan data", "bad header"};
    tu_blob_t in[12];
    int g = 0;
    for (int i = 0; i < n; i++) {
        const tu_blob_t *src = &good[g % ngood];
        in[i].len = src->len;
        in[i].data = malloc(src->len);
        assert_non_null(in[i].data);
        memcpy(in[i].data, src->data, src->len);
        tu_rng_t r = {(uint64_t)i + 1};
        if (kinds[i] == B_GOOD) {
            g++;
        } else if (kinds[i] == B_GARBAGE) {
            for (size_t k = 0; k < in[i].len; k++)
                in[i].data[k] = (uint8_t)(tu_rand(&r) >> 56);
        } else if (kinds[i] == B_TRUNCATED) {
            in[i].len /= 2;
        } else if (kinds[i] == B_GARBLED) {
            for (size_t k = in[i].len / 4; k < 3 * in[i].len / 4; k++) {
                in[i].data[k] = (uint8_t)(tu_rand(&r) >> 56);
                if (in[i].data[k] == 0xFF)
                    in[i].data[++k] = 0;
            }
        } else if (kinds[i] == B_NOSCAN) {
            /* the header up to the SOS segment, then EOI at once */
            size_t p = 2;
            while (!(in[i].data[p] == 0xFF && in[i].data[p + 1] == 0xDA))
                p += 2 + ((size_t)in[i].data[p + 2] << 8 | in[i].data[p + 3]);
            p += 2 + ((size_t)in[i].data[p + 2] << 8 | in[i].data[p + 3]);
            in[i].data[p] = 0xFF;
            in[i].data[p + 1] = 0xD9;
            in[i].len = p + 2;
        } else if (kinds[i] == B_BADHEADER) {
            in[i].data[4] = 0, in[i].data[5] = 1; /* an APP0 length below 2 */
        }
    }
    mk_image_t want[12];
    memset(want, 0, sizeof want);
    for (int i = 0; i < n; i++)
        if (kinds[i] == B_GOOD)
            TU_OK(mk_imageio_decode(in[i].data, in[i].len, MK_FMT_RGB, &want[i], "good frame"));
    for (int strict = 1; strict >= 0; strict--) {
        mk_decode_t *d = decoder_pool(MK_DECODER_NVJPEG, 1, MK_FMT_RGB, strict, 0);
        mk_decode_stats_t prev, st;
        memset(&prev, 0, sizeof prev);
        uint64_t header_rejects = 0;
        for (int i = 0; i < n; i++) {
            mk_frame_t f = mjpeg_frame(in[i].data, in[i].len, (uint64_t)i);
            TU_OK(mk_decode_submit(d, &f, -1));
            for (int waited = 0;; waited++) { /* until the frame is decoded or skipped */
                mk_decode_stats(d, &st);
                if (st.decoded + st.corrupt == st.submitted)
                    break;
                assert_true(waited < 20000);
                nanosleep(&(struct timespec){0, 1000000}, NULL);
            }
            int out = st.decoded > prev.decoded, on_gpu = st.gpu_decoded > prev.gpu_decoded,
                fell = st.gpu_fallbacks > prev.gpu_fallbacks;
            print_message("%s, frame %2d (%s): %s%s\n", strict ? "strict" : "lenient", i, names[kinds[i]],
                          !out ? "skipped as corrupt" : on_gpu ? "decoded by nvJPEG" : "decoded by TurboJPEG",
                          fell ? " after falling back from nvJPEG" : "");
            if (out) {
                mk_decoded_t o;
                assert_int_equal(mk_decode_next(d, 5000, &o), MK_DECODE_OK);
                assert_int_equal(o.seq, (uint64_t)i);
                if (kinds[i] == B_GOOD) {
                    int maxd = 0;
                    double sum = 0, count = 0;
                    diff_images(&o.image, &want[i], &maxd, &sum, &count);
                    assert_true(maxd <= NVJPEG_TOL_MAX && sum / count <= NVJPEG_TOL_MEAN);
                }
                TU_OK(mk_decode_release(d, &o));
            }
            /* every frame goes one way: nvJPEG, a fallback to TurboJPEG, or out at the header checks */
            assert_int_equal((st.gpu_decoded - prev.gpu_decoded) + (st.gpu_fallbacks - prev.gpu_fallbacks) +
                                 (!on_gpu && !fell),
                             1);
            switch (kinds[i]) {
            case B_GOOD:
                assert_true(out && on_gpu);
                break;
            case B_GARBAGE:
            case B_BADHEADER:
                assert_true(!out && !fell);
                header_rejects++;
                break;
            case B_TRUNCATED:
                assert_true(fell && out == !strict);
                break;
            default: /* garbled, no scan data: either way, without a crash */
                break;
            }
            prev = st;
        }
        mk_decode_finish(d);
        mk_decoded_t o;
        assert_int_equal(mk_decode_next(d, 5000, &o), MK_DECODE_EOS);
        mk_decode_stats(d, &st);
        print_message("%s: submitted %llu, decoded %llu (gpu %llu), corrupt %llu, gpu_fallbacks %llu\n",
                      strict ? "strict" : "lenient", (unsigned long long)st.submitted,
                      (unsigned long long)st.decoded, (unsigned long long)st.gpu_decoded,
                      (unsigned long long)st.corrupt, (unsigned long long)st.gpu_fallbacks);
        /* the counters add up */
        assert_int_equal(st.submitted, n);
        assert_int_equal(st.decoded + st.corrupt, st.submitted);
        assert_int_equal(st.gpu_decoded + st.gpu_fallbacks + header_rejects, st.submitted);
        assert_int_equal(st.decoded - st.gpu_decoded, st.gpu_fallbacks - (st.corrupt - header_rejects));
        assert_true(st.gpu_decoded >= (uint64_t)ngood);
        mk_decode_destroy(d);
    }
    for (int i = 0; i < n; i++) {
        free(in[i].data);
        mk_image_free(NULL, &want[i]);
    }
    tu_blobs_free(good, ngood);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        char why[600] = "";
        if (!mk_jpeg_gpu_available(why, sizeof why)) {
            printf("SKIP: the nvJPEG decode tests need a GPU and libnvjpeg: %s\n", why);
            return TU_SKIP_CODE;
        }
        printf("nvJPEG: %s\n", mk_jpeg_gpu_library());
        const struct CMUnitTest cuda[] = {
            cmocka_unit_test(test_gpu_backends), cmocka_unit_test(test_gpu_pool_sets),
            cmocka_unit_test(test_gpu_no_dht),   cmocka_unit_test(test_gpu_corrupt),
        };
        return cmocka_run_group_tests(cuda, group_setup, group_teardown);
    }
    /* This run is that of a machine without nvJPEG, whatever this one has: pools asking for nvJPEG decode on the
     * CPU, with TurboJPEG's exact pixels. */
    setenv("MASKD_NVJPEG_LIB", "/nonexistent/libnvjpeg-hidden-by-test_decode.so", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),         cmocka_unit_test(test_std_dht),
        cmocka_unit_test(test_order_threads), cmocka_unit_test(test_corrupt_stream),
        cmocka_unit_test(test_raw_frames),    cmocka_unit_test(test_backpressure_and_finish),
        cmocka_unit_test(test_bad_calls),     cmocka_unit_test(test_pinned),
        cmocka_unit_test(test_decoder_without_nvjpeg),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
