/* masktool_segment: `masktool segment` — maskd's per-frame segmentation engine (daemon/segment.h) run offline on
 * an image, a JPEG directory, an MJPEG AVI or stream, or a Y4M, writing a mask (or an RGBA cut-out, or the person
 * over another background) per frame and a JSON report.
 *
 * Threads: a feeder thread reads the source (daemon/source.h, file:PATH, not paced, not looped) into the decode
 * pool (daemon/decode.h, MJPEG decoded on pipeline.decode_threads workers while the engine computes); the main
 * thread hands decoded frames to the engine, collects the results in frame order, composites and writes them.
 * SIGINT/SIGTERM: no new frame is taken, the frames in flight are finished and written, then the report. */
#include "masktool.h"

#include "composite.h"
#include "config.h"
#include "decode.h"
#include "errors.h"
#include "imageio.h"
#include "log.h"
#include "paths.h"
#include "resize.h"
#include "segment.h"
#include "source.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Waits of the loops below: how soon a stop request is seen. */
#define POLL_MS 100
/* Non-tty progress: one line this often. */
#define PROGRESS_LINE_S 2.0

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef enum { OUT_MASK = 0, OUT_ALPHA, OUT_COMPOSITE, OUT_BLUR } product_t;

typedef struct {
    /* options */
    const char *input, *outdir, *bg_path;
    product_t product;
    int blur_radius, quiet;
    mk_config_t *cfg;

    /* input */
    int single;            /* one image file (no source) */
    int dir;               /* a JPEG directory */
    char stem[256];        /* its name without directory and extension */
    int png_out;           /* composites as PNG (the input was PNG) */
    mk_source_t *src;
    mk_decode_t *dec;
    long long total;       /* frames expected, -1 unknown */
    pthread_t feeder;
    int feeder_started;
    volatile int feeder_stop;
    int feeder_rc;
    char feeder_err[512];
    pthread_mutex_t names_mu;
    char **names;          /* JPEG directory: the file name of each source frame seq */
    size_t nnames_cap;

    /* engine and compositing */
    mk_segment_t *seg;
    mk_ctx_t *ctx;         /* compositing context, the engine's backend */
    mk_image_t bg_file;    /* --composite: the background as loaded (host) */
    mk_image_t bg_dev, bg_fit, bg_small, frame_dev, alpha_dev, out_dev, out_host;

    /* report */
    cJSON *frames;
    uint64_t done, failed, corrupt, next_seq;
    cJSON *corrupt_names;
    double *ms;
    size_t nms, ms_cap;
    double t0, last_line;
    int tty;
} seg_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: masktool segment INPUT -o OUTDIR [--alpha] [--composite BG | --blur R] [--config FILE]\n"
            "                        [--set KEY=VALUE]... [--backend auto|cpu|cuda] [--inflight N] [--quiet]\n"
            "Runs maskd's per-frame segmentation (detection, box choice, cut, guided upsampling, mask products)\n"
            "on INPUT and writes, per frame, OUTDIR/NAME.png: the 8-bit mask (255 = person).\n"
            "INPUT: an image (PNG, BMP, PNM, or JPEG named *.jpg or *.jpeg), a directory of JPEGs (in version\n"
            "order of their names), an MJPEG AVI, a raw MJPEG stream (other JPEG files) or a Y4M file. NAME is the\n"
            "image's file name without its extension, or the frame number (%%06d, from 0) of a video. Frames that\n"
            "cannot be decoded are reported and skipped. GrabCut (cut.method grabcut) learns the colours of every\n"
            "image of a directory (grabcut.keyframe always, unless set to interval); a video's frames use the\n"
            "configuration's keyframes.\n"
            "\n"
            "  -o, --output OUTDIR  where the files go (created if missing), with OUTDIR/segment.json: per frame\n"
            "                       the size, detections, chosen box, flags and time; totals and frames per second\n"
            "  --alpha              OUTDIR/NAME.png is the frame with the alpha matte as its alpha channel (RGBA)\n"
            "  --composite BG       OUTDIR/NAME.jpg (.png for PNG input): the person over the image BG, scaled to\n"
            "                       cover the frame (aspect kept, centred, the excess cropped)\n"
            "  --blur R             the same over the frame blurred (three box filters of radius R, about a\n"
            "                       Gaussian of sigma sqrt(R (R + 1)))\n"
            "                       --alpha, --composite and --blur use the soft alpha matte (mask.alpha is on)\n"
            "  --config FILE        configuration file (default: " MK_PATHS_CONFIG_DIR "/" MK_DEFAULT_INSTANCE
            ".json if it exists,\n"
            "                       else " MK_PATHS_CONFIG_DIR "/maskd.json if it exists, else the built-in\n"
            "                       defaults), read as maskd reads it (config/README.md)\n"
            "  --set KEY=VALUE      sets an option (repeatable), as maskd --set\n"
            "  --backend B          auto, cpu or cuda (sets backend)\n"
            "  --inflight N         frames in flight in the engine (sets pipeline.inflight)\n"
            "  --quiet              no progress bar on stderr\n"
            "The person detector is the configuration's (detect.cfg, detect.weights): like maskd, without one the\n"
            "cut is the fixed rectangle select.fallback. For example, with M the folder of Yolo-Fastest 1.1 body:\n"
            "  --set detect.cfg=M/yolo-fastest-1.1_body.cfg --set detect.weights=M/yolo-fastest-1.1_body.weights\n"
            "cut.method is the configuration's (box by default; grabcut when asked). source.* options do not\n"
            "apply: INPUT is read once, as fast as it is processed. Logging: warnings, unless log.level is set or\n"
            "MASKD_LOG=error|warn|info|debug|trace.\n"
            "Exit status: 0 when every frame was written (corrupt frames skipped and counted), 1 on an error or\n"
            "when a frame failed; SIGINT/SIGTERM finish the frames in hand, write segment.json and exit with 130.\n");
}

static int fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("masktool segment: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* mkdir -p. */
static int make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(buf, 0755) && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st))
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return access(buf, W_OK | X_OK);
}

static void stem_of(const char *path, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, n, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = '\0';
}

/* ---- input: the feeder thread -------------------------------------------------------------------------- */

static int remember_name(seg_t *s, uint64_t seq, const char *name)
{
    int rc = 0;
    pthread_mutex_lock(&s->names_mu);
    if (seq >= s->nnames_cap) {
        size_t cap = s->nnames_cap ? s->nnames_cap * 2 : 256;
        while (cap <= seq)
            cap *= 2;
        char **n = realloc(s->names, cap * sizeof *n);
        if (!n) {
            rc = mk_err_set(MK_ENOMEM, "out of memory");
        } else {
            memset(n + s->nnames_cap, 0, (cap - s->nnames_cap) * sizeof *n);
            s->names = n;
            s->nnames_cap = cap;
        }
    }
    if (!rc) {
        char stem[256];
        stem_of(name, stem, sizeof stem);
        if (!(s->names[seq] = strdup(stem)))
            rc = mk_err_set(MK_ENOMEM, "out of memory");
    }
    pthread_mutex_unlock(&s->names_mu);
    return rc;
}

/* The output name of source frame `seq`. */
static void frame_name(seg_t *s, uint64_t seq, char *out, size_t n)
{
    if (s->single) {
        snprintf(out, n, "%s", s->stem);
        return;
    }
    pthread_mutex_lock(&s->names_mu);
    const char *name = seq < s->nnames_cap ? s->names[seq] : NULL;
    if (name)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%06llu", (unsigned long long)seq);
    pthread_mutex_unlock(&s->names_mu);
}

static void *feeder_main(void *arg)
{
    seg_t *s = arg;
    int rc = 0;
    while (!s->feeder_stop && !rc) {
        mk_frame_t f;
        rc = mk_source_next(s->src, POLL_MS, &f);
        if (rc == MK_SOURCE_TIMEOUT) {
            rc = 0;
            continue;
        }
        if (rc == MK_SOURCE_EOS) {
            rc = 0;
            break;
        }
        if (rc) {
            if (rc > 0)
                rc = mk_err_set(MK_EIO, "source: %s", mk_source_status_name(rc));
            break;
        }
        if (f.name)
            rc = remember_name(s, f.seq, f.name);
        while (!rc && !s->feeder_stop && (rc = mk_decode_submit(s->dec, &f, POLL_MS)) == MK_DECODE_AGAIN)
            rc = 0;
        if (rc == MK_DECODE_AGAIN)
            rc = 0;
        int rrc = mk_source_release(s->src, &f);
        if (!rc && rrc < 0)
            rc = rrc;
    }
    if (rc < 0) {
        s->feeder_rc = rc;
        snprintf(s->feeder_err, sizeof s->feeder_err, "%s", mk_err_msg());
    }
    mk_decode_finish(s->dec);
    return NULL;
}

static int open_input(seg_t *s)
{
    struct stat st;
    if (stat(s->input, &st))
        return mk_err_set(MK_EIO, "%s: %s", s->input, strerror(errno));
    if (S_ISREG(st.st_mode)) {
        unsigned char head[64];
        FILE *f = fopen(s->input, "rb");
        if (!f)
            return mk_err_set(MK_EIO, "%s: %s", s->input, strerror(errno));
        size_t len = fread(head, 1, sizeof head, f);
        fclose(f);
        mk_file_format_t ff = mk_imageio_sniff(head, len);
        /* JPEG data is one image when the name says so, else a raw MJPEG stream (concatenated JPEGs). */
        if (ff != MK_FILE_UNKNOWN && (ff != MK_FILE_JPEG || mk_imageio_format_from_path(s->input) == MK_FILE_JPEG)) {
            s->single = 1;
            s->png_out = ff == MK_FILE_PNG;
            s->total = 1;
            stem_of(s->input, s->stem, sizeof s->stem);
            return 0;
        }
    }
    s->dir = S_ISDIR(st.st_mode);
    char spec[4200];
    snprintf(spec, sizeof spec, "file:%s", s->input);
    mk_source_config_t sc;
    mk_source_config_init(&sc);
    sc.loop = 0;
    sc.realtime = 0;
    int rc = mk_source_open(spec, &sc, &s->src);
    if (rc)
        return rc;
    mk_source_info_t info;
    mk_source_info(s->src, &info);
    s->total = info.frames;
    mk_decode_config_t dc;
    mk_decode_config_init(&dc);
    dc.threads = s->cfg->pipeline.decode_threads;
    /* Room for the frames decoding, those decoded and waiting, and those held in the engine until released. */
    dc.depth = 2 * dc.threads + 2 + s->cfg->pipeline.inflight;
    if (dc.depth > 64)
        dc.depth = 64;
    dc.format = MK_FMT_RGB;
    dc.raw_to_rgb = 1;
    dc.pinned = s->cfg->backend != MK_CFG_BACKEND_CPU; /* falls back to plain memory without a device */
    /* as maskd: auto decodes with nvJPEG unless the engine is told to compute on the CPU */
    dc.decoder = mk_decoder_for_backend((mk_decoder_t)s->cfg->pipeline.decoder,
                                        s->cfg->backend == MK_CFG_BACKEND_CPU ? MK_BACKEND_CPU : MK_BACKEND_CUDA);
    if ((rc = mk_decode_create(&dc, &s->dec)))
        return rc;
    if (pthread_create(&s->feeder, NULL, feeder_main, s))
        return mk_err_set(MK_ENOMEM, "cannot start the reader thread");
    s->feeder_started = 1;
    return 0;
}

/* ---- compositing ------------------------------------------------------------------------------------------ */

/* (Re)allocates img in `mem` for the geometry unless it has it. */
static int ensure(mk_ctx_t *ctx, mk_image_t *img, int w, int h, mk_format_t fmt, mk_mem_t mem)
{
    if (img->data && img->width == w && img->height == h && img->format == fmt && img->mem == mem)
        return 0;
    mk_image_free(ctx, img);
    *img = mk_image_desc(w, h, fmt, MK_U8);
    return mk_image_alloc(ctx, img, mem);
}

/* A host image as an input of the context: itself on the CPU (page-locked memory seen as host memory), else
 * uploaded into *dev. */
static int ctx_input(seg_t *s, const mk_image_t *host, mk_image_t *dev, mk_image_t *out)
{
    if (mk_ctx_mem(s->ctx) == MK_MEM_HOST) {
        *out = *host;
        out->mem = MK_MEM_HOST;
        out->owned = 0;
        return 0;
    }
    int rc = ensure(s->ctx, dev, host->width, host->height, host->format, mk_ctx_mem(s->ctx));
    if (!rc)
        rc = mk_image_upload(s->ctx, dev, host);
    *out = *dev;
    return rc;
}

/* The background image scaled to cover w x h (aspect kept, centred, the excess cropped), in bg_fit: the centred
 * crop of the frame's aspect, reduced by area averaging while it is at least twice the frame's size, then
 * bilinear to the frame's size. Kept for the next frames of that size. */
static int fit_background(seg_t *s, int w, int h)
{
    if (s->bg_fit.data && s->bg_fit.width == w && s->bg_fit.height == h)
        return 0;
    const mk_image_t *bg = &s->bg_file;
    int bw = bg->width, bh = bg->height, cw, ch;
    if ((long long)bw * h > (long long)w * bh) { /* wider than the frame: crop the sides */
        ch = bh;
        cw = (int)(((long long)2 * bh * w + h) / (2LL * h));
    } else {
        cw = bw;
        ch = (int)(((long long)2 * bw * h + w) / (2LL * w));
    }
    cw = cw < 1 ? 1 : cw > bw ? bw : cw;
    ch = ch < 1 ? 1 : ch > bh ? bh : ch;
    mk_image_t whole;
    int rc = ctx_input(s, bg, &s->bg_dev, &whole);
    if (rc)
        return rc;
    mk_image_t crop = whole;
    crop.data = (uint8_t *)whole.data + (size_t)((bh - ch) / 2) * whole.pitch + (size_t)((bw - cw) / 2) * 3;
    crop.width = cw;
    crop.height = ch;
    crop.owned = 0;
    int f = cw / w < ch / h ? cw / w : ch / h;
    if (f > MK_DOWNSAMPLE_MAX_SCALE)
        f = MK_DOWNSAMPLE_MAX_SCALE;
    if (f >= 2) {
        if ((rc = ensure(s->ctx, &s->bg_small, (cw + f - 1) / f, (ch + f - 1) / f, bg->format, mk_ctx_mem(s->ctx))) ||
            (rc = mk_downsample_area(s->ctx, &crop, &s->bg_small, f)))
            return rc;
        crop = s->bg_small;
    }
    if ((rc = ensure(s->ctx, &s->bg_fit, w, h, bg->format, mk_ctx_mem(s->ctx))))
        return rc;
    return mk_resize_bilinear(s->ctx, &crop, &s->bg_fit);
}

/* The composite of a frame (host RGB) by the result's alpha matte, into out_host. */
static int composite(seg_t *s, const mk_image_t *frame, const mk_image_t *alpha, const mk_image_t **out)
{
    int w = frame->width, h = frame->height, rc;
    mk_mem_t mem = mk_ctx_mem(s->ctx);
    mk_image_t f, a;
    if ((rc = ctx_input(s, frame, &s->frame_dev, &f)) || (rc = ctx_input(s, alpha, &s->alpha_dev, &a)) ||
        (rc = ensure(s->ctx, &s->out_dev, w, h, frame->format, mem)))
        return rc;
    const mk_image_t *bg = &s->bg_fit;
    if (s->product == OUT_BLUR) {
        if ((rc = ensure(s->ctx, &s->bg_fit, w, h, frame->format, mem)) ||
            (rc = mk_blur(s->ctx, &f, &s->bg_fit, s->blur_radius)))
            return rc;
    } else if ((rc = fit_background(s, w, h))) {
        return rc;
    }
    if ((rc = mk_composite(s->ctx, &f, &a, bg, &s->out_dev)))
        return rc;
    if (mem == MK_MEM_HOST) {
        *out = &s->out_dev;
        return 0;
    }
    if ((rc = ensure(s->ctx, &s->out_host, w, h, frame->format, MK_MEM_PINNED)) ||
        (rc = mk_image_download(s->ctx, &s->out_host, &s->out_dev)) || (rc = mk_ctx_sync(s->ctx)))
        return rc;
    *out = &s->out_host;
    return 0;
}

/* ---- results ---------------------------------------------------------------------------------------------- */

static double round_to(double v, double unit)
{
    return round(v / unit) * unit;
}

static cJSON *box_json(float x, float y, float w, float h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "x", round_to(x, 0.1));
    cJSON_AddNumberToObject(o, "y", round_to(y, 0.1));
    cJSON_AddNumberToObject(o, "w", round_to(w, 0.1));
    cJSON_AddNumberToObject(o, "h", round_to(h, 0.1));
    return o;
}

static cJSON *result_json(const mk_segment_result_t *r, const char *name, const char *file)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "index", (double)r->seq);
    cJSON_AddNumberToObject(o, "width", r->width);
    cJSON_AddNumberToObject(o, "height", r->height);
    if (file)
        cJSON_AddStringToObject(o, "file", file);
    else
        cJSON_AddStringToObject(o, "error", r->err);
    cJSON *dets = cJSON_AddArrayToObject(o, "detections");
    for (int i = 0; i < r->ndets; i++) {
        cJSON *d = box_json(r->dets[i].x, r->dets[i].y, r->dets[i].w, r->dets[i].h);
        cJSON_AddNumberToObject(d, "class", r->dets[i].class_id);
        cJSON_AddNumberToObject(d, "score", round_to(r->dets[i].prob, 1e-4));
        cJSON_AddItemToArray(dets, d);
    }
    cJSON_AddBoolToObject(o, "detected", r->detected);
    if (r->det_rc)
        cJSON_AddStringToObject(o, "detector_error", r->det_err);
    cJSON_AddStringToObject(o, "select", mk_select_result_name(r->select));
    if (r->select != MK_SELECT_NONE) {
        cJSON *b = box_json(r->box.x, r->box.y, r->box.w, r->box.h);
        cJSON_AddNumberToObject(b, "track", r->track);
        cJSON_AddNumberToObject(b, "detection", r->chosen);
        cJSON_AddItemToObject(o, "box", b);
    } else {
        cJSON_AddNullToObject(o, "box");
    }
    cJSON *flags = cJSON_AddArrayToObject(o, "flags");
    if (r->flags & MASKBUS_FLAG_KEYFRAME)
        cJSON_AddItemToArray(flags, cJSON_CreateString("keyframe"));
    if (r->flags & MASKBUS_FLAG_NO_PERSON)
        cJSON_AddItemToArray(flags, cJSON_CreateString("no_person"));
    if (r->gc_keyframe)
        cJSON_AddItemToArray(flags, cJSON_CreateString("grabcut_keyframe"));
    cJSON_AddNumberToObject(o, "ms", round_to(r->ms.total, 1e-3));
    return o;
}

/* Writes the output file of a result; 0, or an error with its message. */
static int write_output(seg_t *s, const mk_segment_result_t *r, const mk_image_t *frame, char *file, size_t n,
                        const char *name)
{
    const mk_image_t *alpha = r->alpha.data ? &r->alpha : &r->mask;
    char path[8192];
    int rc;
    switch (s->product) {
    case OUT_MASK:
        snprintf(file, n, "%s.png", name);
        snprintf(path, sizeof path, "%s/%s", s->outdir, file);
        return mk_imageio_save(path, &r->mask);
    case OUT_ALPHA:
        snprintf(file, n, "%s.png", name);
        snprintf(path, sizeof path, "%s/%s", s->outdir, file);
        return mk_imageio_save_rgba(path, frame, alpha);
    default: {
        const mk_image_t *out;
        if ((rc = composite(s, frame, alpha, &out)))
            return rc;
        snprintf(file, n, "%s.%s", name, s->png_out ? "png" : "jpg");
        snprintf(path, sizeof path, "%s/%s", s->outdir, file);
        return mk_imageio_save(path, out);
    }
    }
}

static void progress(seg_t *s, int final)
{
    if (s->quiet)
        return;
    double t = now_s(), el = t - s->t0;
    if (!final && !s->tty && t - s->last_line < PROGRESS_LINE_S)
        return;
    if (!final && s->tty && t - s->last_line < 0.1)
        return;
    s->last_line = t;
    uint64_t n = s->done + s->failed;
    double fps = el > 0 ? (double)n / el : 0;
    char line[256], total[32] = "", eta[48] = "";
    if (s->total > 0) {
        snprintf(total, sizeof total, "/%lld", s->total);
        if (fps > 0 && (long long)n < s->total) {
            int left = (int)((double)(s->total - (long long)n) / fps + 0.5);
            snprintf(eta, sizeof eta, "  ETA %d:%02d", left / 60, left % 60);
        }
    }
    int len = snprintf(line, sizeof line, "segment: %llu%s frames  %.1f fps%s", (unsigned long long)n, total, fps,
                       eta);
    if (s->failed || s->corrupt)
        snprintf(line + len, sizeof line - (size_t)len, "  (%llu failed, %llu corrupt)",
                 (unsigned long long)s->failed, (unsigned long long)s->corrupt);
    if (s->tty)
        fprintf(stderr, "\r%-78s%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s\n", line);
}

/* Frames of the source that never came out of the decoder before `seq`: corrupt, skipped. */
static void note_skipped(seg_t *s, uint64_t seq)
{
    for (; s->next_seq < seq; s->next_seq++) {
        char name[256];
        frame_name(s, s->next_seq, name, sizeof name);
        fprintf(stderr, "%smasktool segment: %s: corrupt frame skipped\n", s->tty && !s->quiet ? "\r\n" : "", name);
        cJSON_AddItemToArray(s->corrupt_names, cJSON_CreateString(name));
        s->corrupt++;
    }
    s->next_seq = seq + 1;
}

/* Writes and accounts one collected result, then gives it back (and its decoded frame to the pool). */
static void finish_result(seg_t *s, mk_segment_result_t *r)
{
    char name[256], file[300];
    if (!s->single)
        note_skipped(s, r->seq);
    frame_name(s, r->seq, name, sizeof name);
    int rc = r->rc;
    if (!rc) {
        const mk_image_t *frame = s->single ? r->user : &r->decoded.image;
        if ((rc = write_output(s, r, frame, file, sizeof file, name)))
            snprintf(r->err, sizeof r->err, "%s", mk_err_msg());
    }
    if (rc) {
        fprintf(stderr, "%smasktool segment: %s: %s\n", s->tty && !s->quiet ? "\r\n" : "", name, r->err);
        s->failed++;
    } else {
        s->done++;
        if (s->nms == s->ms_cap) {
            size_t cap = s->ms_cap ? s->ms_cap * 2 : 1024;
            double *m = realloc(s->ms, cap * sizeof *m);
            if (m) {
                s->ms = m;
                s->ms_cap = cap;
            }
        }
        if (s->nms < s->ms_cap)
            s->ms[s->nms++] = r->ms.total;
    }
    cJSON_AddItemToArray(s->frames, result_json(r, name, rc ? NULL : file));
    if (r->decoded.image.data)
        mk_decode_release(s->dec, &r->decoded);
    mk_segment_release(s->seg, r);
    progress(s, 0);
}

/* Collects the next result (waiting as long as it takes, in steps that let a stop request through). Returns 1 when
 * one was handled, 0 when none is in flight, or an error. */
static int collect_one(seg_t *s)
{
    mk_segment_result_t *r;
    int rc;
    while ((rc = mk_segment_collect(s->seg, POLL_MS, &r)) == MK_SEGMENT_AGAIN)
        ;
    if (rc == MK_SEGMENT_EMPTY)
        return 0;
    if (rc < 0)
        return rc;
    finish_result(s, r);
    return 1;
}

static int run_single(seg_t *s)
{
    mk_image_t img;
    int rc = mk_imageio_load(s->input, MK_FMT_RGB, &img);
    if (rc)
        return rc;
    if (!(rc = mk_segment_submit(s->seg, &img, 0, 0, &img, -1)))
        rc = collect_one(s) < 0 ? -1 : 0;
    mk_image_free(NULL, &img);
    return rc;
}

static int run_stream(seg_t *s)
{
    for (;;) {
        mk_decoded_t d;
        int rc = MK_DECODE_AGAIN;
        while (!stop_requested && (rc = mk_decode_next(s->dec, POLL_MS, &d)) == MK_DECODE_AGAIN)
            ;
        if (stop_requested || rc == MK_DECODE_EOS)
            return 0;
        if (rc < 0)
            return rc;
        while ((rc = mk_segment_submit_decoded(s->seg, &d, 0)) == MK_SEGMENT_AGAIN)
            if ((rc = collect_one(s)) < 0)
                break;
        if (rc < 0) {
            mk_decode_release(s->dec, &d);
            return rc;
        }
    }
}

static double percentile(double *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static int write_report(seg_t *s, int interrupted, const char *error)
{
    double el = now_s() - s->t0;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "input", s->input);
    mk_source_info_t info;
    memset(&info, 0, sizeof info);
    if (s->src)
        mk_source_info(s->src, &info);
    cJSON_AddStringToObject(doc, "kind", s->single ? "image" : info.kind);
    static const char *const products[] = {"mask", "alpha", "composite", "blur"};
    cJSON_AddStringToObject(doc, "product", products[s->product]);
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_segment_backend(s->seg)));
    cJSON_AddStringToObject(doc, "device", mk_segment_device_name(s->seg));
    if (s->dec)
        cJSON_AddStringToObject(doc, "decoder", mk_decode_decoder(s->dec));
    cJSON_AddStringToObject(doc, "detector", mk_segment_detecting(s->seg) ? s->cfg->detect.cfg : "");
    cJSON_AddStringToObject(doc, "cut", mk_segment_cut_name(s->seg));
    cJSON_AddNumberToObject(doc, "inflight", mk_segment_depth(s->seg));
    cJSON_AddItemToObject(doc, "frames", s->frames);
    s->frames = NULL;
    cJSON *t = cJSON_AddObjectToObject(doc, "totals");
    uint64_t src_corrupt = 0;
    if (s->src) {
        mk_source_stats_t st;
        mk_source_stats(s->src, &st);
        src_corrupt = st.corrupt;
    }
    cJSON_AddNumberToObject(t, "written", (double)s->done);
    cJSON_AddNumberToObject(t, "failed", (double)s->failed);
    cJSON_AddNumberToObject(t, "corrupt", (double)(s->corrupt + src_corrupt));
    cJSON_AddItemToObject(t, "corrupt_frames", s->corrupt_names);
    s->corrupt_names = NULL;
    cJSON_AddNumberToObject(t, "seconds", round_to(el, 1e-3));
    cJSON_AddNumberToObject(t, "fps", el > 0 ? round_to((double)(s->done + s->failed) / el, 0.01) : 0);
    qsort(s->ms, s->nms, sizeof *s->ms, mt_cmp_double);
    double sum = 0;
    for (size_t i = 0; i < s->nms; i++)
        sum += s->ms[i];
    cJSON *ms = cJSON_AddObjectToObject(t, "frame_ms");
    cJSON_AddNumberToObject(ms, "mean", s->nms ? round_to(sum / (double)s->nms, 1e-3) : 0);
    cJSON_AddNumberToObject(ms, "p50", round_to(percentile(s->ms, s->nms, 0.5), 1e-3));
    cJSON_AddNumberToObject(ms, "p99", round_to(percentile(s->ms, s->nms, 0.99), 1e-3));
    cJSON_AddBoolToObject(doc, "interrupted", interrupted);
    if (error)
        cJSON_AddStringToObject(doc, "error", error);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text)
        return mk_err_set(MK_ENOMEM, "out of memory");
    char path[8192];
    snprintf(path, sizeof path, "%s/segment.json", s->outdir);
    size_t len = strlen(text);
    text[len] = '\n';
    int rc = mk_file_write(path, text, len + 1);
    free(text);
    return rc;
}

static void cleanup(seg_t *s)
{
    if (s->feeder_started) {
        s->feeder_stop = 1;
        pthread_join(s->feeder, NULL);
    }
    mk_segment_destroy(s->seg);
    mk_decode_destroy(s->dec);
    mk_source_close(s->src);
    mk_image_t *imgs[] = {&s->bg_dev,    &s->bg_fit,  &s->bg_small, &s->frame_dev,
                          &s->alpha_dev, &s->out_dev, &s->out_host};
    for (size_t i = 0; i < sizeof imgs / sizeof imgs[0]; i++)
        mk_image_free(s->ctx, imgs[i]);
    mk_image_free(NULL, &s->bg_file);
    mk_ctx_destroy(s->ctx);
    for (size_t i = 0; i < s->nnames_cap; i++)
        free(s->names[i]);
    free(s->names);
    pthread_mutex_destroy(&s->names_mu);
    cJSON_Delete(s->frames);
    cJSON_Delete(s->corrupt_names);
    free(s->ms);
    free(s->cfg);
}

static int add_set(char ***sets, int *n, const char *key, const char *value)
{
    char **m = realloc(*sets, (size_t)(*n + 1) * sizeof *m);
    if (!m)
        return -1;
    *sets = m;
    size_t len = strlen(key) + strlen(value) + 2;
    if (!(m[*n] = malloc(len)))
        return -1;
    snprintf(m[*n], len, "%s%s%s", key, *value ? "=" : "", value);
    (*n)++;
    return 0;
}

int mt_segment(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},  {"alpha", no_argument, 0, 'a'},
        {"composite", required_argument, 0, 'c'}, {"blur", required_argument, 0, 'r'},
        {"config", required_argument, 0, 'C'},  {"set", required_argument, 0, 'S'},
        {"backend", required_argument, 0, 'b'}, {"inflight", required_argument, 0, 'n'},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    seg_t s = {.product = OUT_MASK, .total = -1};
    pthread_mutex_init(&s.names_mu, NULL);
    char **sets = NULL, config_path[4096] = "";
    int nsets = 0, config_explicit = 0, opt, rc = 1, nproducts = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
        char *end;
        long v;
        switch (opt) {
        case 'o': s.outdir = optarg; break;
        case 'a':
            s.product = OUT_ALPHA;
            nproducts++;
            break;
        case 'c':
            s.product = OUT_COMPOSITE;
            s.bg_path = optarg;
            nproducts++;
            break;
        case 'r':
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 0 || v > MK_BLUR_MAX_RADIUS) {
                fail_msg("--blur: '%s' is not a radius in 0..%d", optarg, MK_BLUR_MAX_RADIUS);
                goto out;
            }
            s.product = OUT_BLUR;
            s.blur_radius = (int)v;
            nproducts++;
            break;
        case 'C':
            snprintf(config_path, sizeof config_path, "%s", optarg);
            config_explicit = 1;
            break;
        case 'S':
            if (!strchr(optarg, '=')) {
                fail_msg("--set needs KEY=VALUE, not '%s'", optarg);
                goto out;
            }
            if (add_set(&sets, &nsets, optarg, ""))
                goto oom;
            break;
        case 'b':
            if (add_set(&sets, &nsets, "backend", optarg))
                goto oom;
            break;
        case 'n':
            if (add_set(&sets, &nsets, "pipeline.inflight", optarg))
                goto oom;
            break;
        case 'q': s.quiet = 1; break;
        case 'h':
            usage(stdout);
            rc = 0;
            goto out;
        default: fprintf(stderr, "(see masktool segment --help)\n"); goto out;
        }
    }
    if (optind != argc - 1) {
        if (optind < argc)
            fail_msg("one INPUT expected, not %d arguments", argc - optind);
        else
            fail_msg("no INPUT given");
        goto out;
    }
    s.input = argv[optind];
    if (!s.outdir) {
        fail_msg("no output directory (-o OUTDIR)");
        goto out;
    }
    if (nproducts > 1) {
        fail_msg("--alpha, --composite and --blur exclude each other");
        goto out;
    }
    if (!config_explicit)
        mk_paths_config_file(MK_DEFAULT_INSTANCE, config_path, sizeof config_path);
    if (!(s.cfg = malloc(sizeof *s.cfg)) || !(s.frames = cJSON_CreateArray()) ||
        !(s.corrupt_names = cJSON_CreateArray()))
        goto oom;
    if (mk_config_build(config_path, config_explicit, sets, nsets, MK_LOG_ERROR, s.cfg)) {
        fail_msg("%s", mk_err_msg());
        goto out;
    }
    if (s.product != OUT_MASK)
        s.cfg->mask.alpha = 1;
    if (!getenv("MASKD_LOG")) { /* log.level when it was asked for; else warnings only, beside the progress */
        mk_config_t *def = malloc(sizeof *def);
        if (!def)
            goto oom;
        mk_config_defaults(def);
        mk_log_set_level(s.cfg->log.level != def->log.level ? (mk_log_level_t)s.cfg->log.level : MK_LOG_WARN);
        free(def);
    }
    if (s.bg_path && mk_imageio_load(s.bg_path, MK_FMT_RGB, &s.bg_file)) {
        fail_msg("background: %s", mk_err_msg());
        goto out;
    }
    if (make_dirs(s.outdir)) {
        fail_msg("output directory %s: %s", s.outdir, strerror(errno));
        goto out;
    }
    if (open_input(&s)) {
        fail_msg("%s", mk_err_msg());
        goto out;
    }
    if (s.dir && s.cfg->grabcut.keyframe == MK_CFG_KEYFRAME_ADAPTIVE) {
        /* a directory holds photos as often as a video's frames: GrabCut learns each one's colours unless the
         * configuration asks for another policy (a video's adaptive keyframes would cut a photo with the colours
         * of the one before it whenever the two boxes overlap) */
        s.cfg->grabcut.keyframe = MK_CFG_KEYFRAME_ALWAYS;
    }
    if (mk_segment_create(s.cfg, &s.seg)) {
        fail_msg("%s", mk_err_msg());
        goto out;
    }
    if (s.product == OUT_COMPOSITE || s.product == OUT_BLUR) {
        mk_backend_t b = mk_segment_backend(s.seg);
        if (mk_ctx_create(b, &s.ctx)) {
            fail_msg("%s", mk_err_msg());
            goto out;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    s.tty = isatty(STDERR_FILENO);
    s.t0 = s.last_line = now_s();
    int run_rc = s.single ? run_single(&s) : run_stream(&s);
    char error[600] = "";
    if (run_rc < 0)
        snprintf(error, sizeof error, "%s", mk_err_msg());
    /* Finish the frames in flight. */
    int c;
    while ((c = collect_one(&s)) > 0)
        ;
    if (c < 0 && !error[0])
        snprintf(error, sizeof error, "%s", mk_err_msg());
    if (s.feeder_started) {
        s.feeder_stop = 1;
        pthread_join(s.feeder, NULL);
        s.feeder_started = 0;
        if (s.feeder_rc && !error[0])
            snprintf(error, sizeof error, "%s", s.feeder_err);
    }
    if (!stop_requested && !error[0] && s.dec) { /* frames the decoder skipped after the last result */
        mk_decode_stats_t ds;
        mk_decode_stats(s.dec, &ds);
        note_skipped(&s, ds.submitted);
    }
    progress(&s, 1);
    if (error[0])
        fail_msg("%s", error);
    int interrupted = stop_requested != 0;
    if (write_report(&s, interrupted, error[0] ? error : NULL)) {
        fail_msg("%s", mk_err_msg());
        goto out;
    }
    if (interrupted)
        fail_msg("interrupted: %llu frames written, segment.json too", (unsigned long long)s.done);
    rc = interrupted ? 128 + SIGINT : error[0] || s.failed ? 1 : 0;
    goto out;
oom:
    fail_msg("out of memory");
out:
    cleanup(&s);
    for (int i = 0; i < nsets; i++)
        free(sets[i]);
    free(sets);
    return rc;
}
