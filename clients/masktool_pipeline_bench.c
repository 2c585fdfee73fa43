/* masktool_pipeline_bench: `masktool bench pipeline` — maskd's per-frame work (daemon/segment.h) end to end on a
 * clip decoded beforehand into host memory: MJPEG decode throughput with the decode pool, then the engine with 1
 * and with N frames in flight (per-stage and end-to-end latency, throughput, the bus publish), GPU memory, host
 * RSS, detections per frame, and whether the masks with N in flight equal those with 1. JSON on stdout. */
#include "masktool.h"

#include "config.h"
#include "decode.h"
#include "errors.h"
#include "imageio.h"
#include "maskbus.h"
#include "segment.h"
#include "source.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { MAX_SETS = 64, WARMUP = 10 };

typedef struct {
    mk_image_t *frames; /* decoded, host */
    int n;
    double decode_fps;  /* MJPEG frames per second through the pool (0: raw frames) */
    char decoder[32];   /* the pool's MJPEG decoder (mk_decode_decoder), "none" for raw frames */
    double decode_first_ms; /* the first frame through the pool alone (set-up included) */
    uint64_t gpu_decoded, gpu_fallbacks;
    int mjpeg;
    char kind[16];
} clip_t;

/* Per-frame measurements of one run. */
typedef struct {
    double *st[8];      /* upload, wait, detect, select, cut, guided, download, total */
    double *e2e, *pub;  /* submit -> masks in host memory; -> published on the bus */
    int *ndets, *detected, *key; /* key: GrabCut learnt its model on the frame (a keyframe) */
    uint64_t *hash;     /* digest of mask and alpha */
    double wall_s;
    int failed;
} run_t;

static const char *const stage_names[8] = {"upload", "wait", "detect", "select", "cut", "guided", "download", "total"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double r3(double v)
{
    return round(v * 1000) / 1000;
}

/* {"p50", "p99", "mean"} of v[0..n-1] (sorted in place). */
static cJSON *dist(double *v, int n)
{
    cJSON *o = cJSON_CreateObject();
    if (n < 1)
        return o;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    qsort(v, (size_t)n, sizeof *v, mt_cmp_double);
    cJSON_AddNumberToObject(o, "p50", r3(v[(n - 1) / 2]));
    cJSON_AddNumberToObject(o, "p99", r3(v[(int)ceil((n - 1) * 0.99)]));
    cJSON_AddNumberToObject(o, "mean", r3(sum / n));
    cJSON_AddNumberToObject(o, "max", r3(v[n - 1]));
    return o;
}

/* A 64-bit digest of an image's pixels, for the check that masks are the same with 1 and N frames in flight.
 * It runs on the thread that submits frames, so its cost limits the measured frame rate: FNV-1a byte by byte
 * (a serial multiply per byte, ~1.2 ms for a 720p mask) held 1 in flight to ~300 fps. Four independent lanes
 * over 8-byte words instead (~40 us at 720p); each step (h ^ word) * odd is a bijection of the lane, so any single
 * changed word changes the digest. */
static uint64_t digest(uint64_t h, const mk_image_t *img)
{
    const uint64_t P = 1099511628211ull;
    uint64_t lane[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h ^ 0xc2b2ae3d27d4eb4full, h ^ 0x165667b19e3779f9ull};
    size_t row = img->data ? mk_image_row_bytes(img) : 0;
    for (int y = 0; row && y < img->height; y++) {
        const uint8_t *p = mk_image_row(img, 0, y);
        size_t x = 0;
        for (; x + 32 <= row; x += 32)
            for (int k = 0; k < 4; k++) {
                uint64_t w;
                memcpy(&w, p + x + 8 * (size_t)k, sizeof w);
                lane[k] = (lane[k] ^ w) * P;
            }
        for (; x < row; x++)
            lane[0] = (lane[0] ^ p[x]) * P;
    }
    for (int k = 1; k < 4; k++)
        lane[0] = (lane[0] ^ (lane[k] >> 29) ^ lane[k]) * P;
    return lane[0];
}

/* Where the process's resident memory is: /proc/self/smaps summed per mapping name (a library's segments
 * together; anonymous memory as "[anon]"), the `top` largest into an array {"mapping", "rss_mb"}. Also the
 * current total. Linux only; an empty array elsewhere. */
static cJSON *rss_breakdown(int top, double *total_mb)
{
    enum { MAXN = 256 };
    static char names[MAXN][160];
    double kb[MAXN] = {0};
    int n = 0, cur = -1;
    *total_mb = 0;
    cJSON *arr = cJSON_CreateArray();
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return arr;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long long a, b, v;
        char perm[8], path[400] = "";
        if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %399[^\n]", &a, &b, perm, path) >= 3) {
            const char *nm = path;
            while (*nm == ' ')
                nm++;
            if (!*nm)
                nm = "[anon]";
            const char *base = strrchr(nm, '/');
            base = base ? base + 1 : nm;
            cur = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(names[i], base))
                    cur = i;
            if (cur < 0 && n < MAXN) {
                snprintf(names[n], sizeof names[n], "%s", base);
                cur = n++;
            }
        } else if (cur >= 0 && sscanf(line, "Rss: %llu kB", &v) == 1) {
            kb[cur] += (double)v;
            *total_mb += (double)v / 1024.0;
        }
    }
    fclose(f);
    for (int k = 0; k < top; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (kb[i] > 0 && (best < 0 || kb[i] > kb[best]))
                best = i;
        if (best < 0)
            break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "mapping", names[best]);
        cJSON_AddNumberToObject(o, "rss_mb", r3(kb[best] / 1024.0));
        cJSON_AddItemToArray(arr, o);
        kb[best] = 0;
    }
    return arr;
}

/* ---- the clip ----------------------------------------------------------------------------------------------- */

/* Reads n frames of the source (looping a file), MJPEG bytes or raw images, then decodes them all through the
 * pool (timed) into host images. */
static int load_clip(const char *spec, int w, int h, int n, int threads, mk_decoder_t decoder, mk_ctx_t *pin,
                     const char *dump, clip_t *c)
{
    snprintf(c->decoder, sizeof c->decoder, "none");
    mk_source_config_t sc;
    mk_source_config_init(&sc);
    sc.width = w;
    sc.height = h;
    sc.loop = 1;
    sc.realtime = 0;
    mk_source_t *src;
    int rc = mk_source_open(spec, &sc, &src);
    if (rc)
        return rc;
    mk_source_info_t info;
    mk_source_info(src, &info);
    snprintf(c->kind, sizeof c->kind, "%s", info.kind);
    int is_tp = !strcmp(info.kind, "testpattern");
    mk_frame_t *in = calloc((size_t)n, sizeof *in);
    uint8_t **bytes = calloc((size_t)n, sizeof *bytes);
    c->frames = calloc((size_t)n, sizeof *c->frames);
    if (!in || !bytes || !c->frames)
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    /* the frames as MJPEG: a file's own JPEGs; the test pattern's images encoded (quality 90), as a camera's */
    for (int i = 0; !rc && i < n; i++) {
        mk_frame_t f;
        int st;
        while ((st = mk_source_next(src, 1000, &f)) == MK_SOURCE_TIMEOUT)
            ;
        if (st != MK_SOURCE_FRAME) {
            rc = st < 0 ? st : mk_err_set(MK_EIO, "%s: no frame %d (status %s)", spec, i, mk_source_status_name(st));
            break;
        }
        in[i] = f;
        size_t len = 0;
        void *data = NULL;
        if (f.kind == MK_FRAME_MJPEG) {
            len = f.len;
            data = malloc(len);
            if (data)
                memcpy(data, f.data, len);
            else
                rc = mk_err_set(MK_ENOMEM, "out of memory");
        } else if (is_tp && f.image.format != MK_FMT_YUYV) {
            rc = mk_imageio_encode(&f.image, MK_FILE_JPEG, 90, &data, &len);
        }
        if (data) {
            bytes[i] = data;
            in[i].kind = MK_FRAME_MJPEG;
            in[i].data = data;
            in[i].len = len;
        } else if (!rc) {
            /* a raw frame: kept as it is (copied, the source reuses its buffer) */
            mk_image_t copy = mk_image_desc(f.image.width, f.image.height, f.image.format, MK_U8);
            if (!(rc = mk_image_alloc(pin, &copy, pin ? MK_MEM_PINNED : MK_MEM_HOST)) &&
                !(rc = mk_image_copy(NULL, &copy, &f.image)))
                c->frames[i] = copy;
        }
        in[i].slot_ = 0;
        mk_source_release(src, &f);
    }
    mk_source_close(src);
    c->mjpeg = n > 0 && bytes[0] != NULL;
    for (int i = 0; !rc && dump && c->mjpeg && i < n; i++) { /* --dump-jpeg: the clip's JPEG frames as files */
        char path[1200];
        snprintf(path, sizeof path, "%s/frame%04d.jpg", dump, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(in[i].data, 1, in[i].len, f) != in[i].len)
            rc = mk_err_set(MK_EIO, "--dump-jpeg: %s: %s", path, strerror(errno));
        if (f && fclose(f) && !rc)
            rc = mk_err_set(MK_EIO, "--dump-jpeg: %s: %s", path, strerror(errno));
    }
    if (!rc && c->mjpeg) {
        mk_decode_config_t dc;
        mk_decode_config_init(&dc);
        dc.threads = threads;
        dc.depth = 2 * threads + 2;
        dc.pinned = pin != NULL;
        dc.decoder = decoder;
        mk_decode_t *dec;
        if (!(rc = mk_decode_create(&dc, &dec))) {
            snprintf(c->decoder, sizeof c->decoder, "%s", mk_decode_decoder(dec));
            /* The first frame alone (a decoder's first frame of a size sets it up: nvJPEG's hardware decoder
             * takes 0.15-0.5 s), then the rate over the others. The kept copies are allocated before the rate's
             * clock starts, at the first frame's geometry: a page-locked allocation per frame (~1 ms) on this
             * thread would cap the rate below the decoders'. */
            uint64_t t0 = now_ns(), t1 = t0;
            int sub = 0, got = 0;
            int warm = 0; /* frame 0 is out of the pool (decoded, or skipped as corrupt) */
            while (!rc && got < n) {
                if (!warm) {
                    mk_decode_stats_t ds;
                    mk_decode_stats(dec, &ds);
                    if ((warm = got > 0 || ds.corrupt > 0)) {
                        for (int i = 1; got > 0 && !rc && i < n; i++) {
                            c->frames[i] = mk_image_desc(c->frames[0].width, c->frames[0].height,
                                                         c->frames[0].format, MK_U8);
                            rc = mk_image_alloc(pin, &c->frames[i], pin ? MK_MEM_PINNED : MK_MEM_HOST);
                        }
                        t1 = now_ns();
                    }
                }
                while (sub < (warm ? n : 1) && mk_decode_submit(dec, &in[sub], 0) == MK_DECODE_OK)
                    sub++;
                if (sub == n)
                    mk_decode_finish(dec);
                mk_decoded_t d;
                int st = mk_decode_next(dec, 5, &d);
                if (st == MK_DECODE_EOS)
                    break;
                if (st != MK_DECODE_OK)
                    continue;
                mk_image_t *copy = &c->frames[got];
                if (!copy->data || copy->width != d.image.width || copy->height != d.image.height ||
                    copy->format != d.image.format) {
                    mk_image_free(pin, copy);
                    *copy = mk_image_desc(d.image.width, d.image.height, d.image.format, MK_U8);
                    rc = mk_image_alloc(pin, copy, pin ? MK_MEM_PINNED : MK_MEM_HOST);
                }
                if (!rc && !(rc = mk_image_copy(NULL, copy, &d.image)))
                    got++;
                mk_decode_release(dec, &d);
            }
            double s = (double)(now_ns() - t1) / 1e9;
            c->decode_fps = s > 0 && got > 1 ? (got - 1) / s : 0;
            c->decode_first_ms = (double)(t1 - t0) / 1e6;
            mk_decode_stats_t ds;
            mk_decode_stats(dec, &ds);
            c->gpu_decoded = ds.gpu_decoded;
            c->gpu_fallbacks = ds.gpu_fallbacks;
            if (!rc && got < n)
                rc = mk_err_set(MK_EFORMAT, "%d of %d frames did not decode", n - got, n);
            mk_decode_destroy(dec);
        }
    }
    for (int i = 0; i < n; i++)
        free(bytes[i]);
    free(bytes);
    free(in);
    c->n = rc ? 0 : n;
    return rc;
}

/* ---- runs --------------------------------------------------------------------------------------------------- */

static int run_alloc(run_t *r, int n)
{
    memset(r, 0, sizeof *r);
    for (int k = 0; k < 8; k++)
        if (!(r->st[k] = calloc((size_t)n, sizeof(double))))
            return mk_err_set(MK_ENOMEM, "out of memory");
    if (!(r->e2e = calloc((size_t)n, sizeof(double))) || !(r->pub = calloc((size_t)n, sizeof(double))) ||
        !(r->ndets = calloc((size_t)n, sizeof(int))) || !(r->detected = calloc((size_t)n, sizeof(int))) ||
        !(r->key = calloc((size_t)n, sizeof(int))) ||
        !(r->hash = calloc((size_t)n, sizeof(uint64_t))))
        return mk_err_set(MK_ENOMEM, "out of memory");
    return 0;
}

static void run_free(run_t *r)
{
    for (int k = 0; k < 8; k++)
        free(r->st[k]);
    free(r->e2e);
    free(r->pub);
    free(r->ndets);
    free(r->detected);
    free(r->key);
    free(r->hash);
}

static int publish(maskbus_writer_t *bus, const mk_segment_result_t *res)
{
    maskbus_frame_in_t fr;
    maskbus_detection_t bd[MASKBUS_MAX_DETECTIONS];
    mk_segment_bus_frame(res, &fr, bd);
    return maskbus_writer_publish(bus, &fr) < 0 ? mk_err_set(MK_EIO, "bus: %s", maskbus_writer_error(bus)) : 0;
}

/* The clip through the engine at `depth` (from a reset): a frame is submitted as soon as a slot is free (depth 1:
 * one frame at a time), each result is published on the bus (when there is one) and released. */
static int run_clip(mk_segment_t *s, const clip_t *c, int n, int depth, maskbus_writer_t *bus, run_t *r)
{
    int rc;
    if ((rc = mk_segment_set_depth(s, depth)) || (rc = mk_segment_reset(s)))
        return rc;
    int got = 0;
    uint64_t t0 = now_ns();
    for (int i = 0; i <= n && !rc; i++) {
        while (!rc && (mk_segment_pending(s) >= depth || (i == n && mk_segment_pending(s)))) {
            mk_segment_result_t *res;
            if (mk_segment_collect(s, -1, &res) != MK_SEGMENT_OK) {
                rc = mk_err_set(MK_ESTATE, "the engine returned no result");
                break;
            }
            int k = got++;
            if (res->rc) {
                r->failed++;
                fprintf(stderr, "masktool: frame %d: %s\n", k, res->err);
            } else {
                if (bus && (rc = publish(bus, res)))
                    break;
                uint64_t t_pub = now_ns();
                const mk_segment_times_t *m = &res->ms;
                const double ms[8] = {m->upload, m->wait, m->detect, m->select, m->cut, m->guided, m->download,
                                      m->total};
                for (int j = 0; j < 8; j++)
                    r->st[j][k] = ms[j];
                r->e2e[k] = (double)(res->done_ns - res->submit_ns) / 1e6;
                r->pub[k] = (double)(t_pub - res->submit_ns) / 1e6;
                r->hash[k] = digest(digest(1469598103934665603ull, &res->mask), &res->alpha);
            }
            r->ndets[k] = res->ndets;
            r->detected[k] = res->detected;
            r->key[k] = res->gc_keyframe;
            mk_segment_release(s, res);
        }
        if (i < n && !rc && (rc = mk_segment_submit(s, &c->frames[i % c->n], (uint64_t)i, 0, NULL, -1)) > 0)
            rc = mk_err_set(MK_ESTATE, "no free slot");
    }
    r->wall_s = (double)(now_ns() - t0) / 1e9;
    return rc;
}

/* Stage and latency statistics of a run (over the frames that did not fail). */
/* Frame by frame (--per-frame): cut and end-to-end ms and the keyframe flag, in frame order (failed frames 0). */
static void per_frame_json(cJSON *o, const run_t *r, int n)
{
    cJSON *pf = cJSON_AddObjectToObject(o, "per_frame");
    cJSON *cut = cJSON_AddArrayToObject(pf, "cut_ms"), *e2e = cJSON_AddArrayToObject(pf, "e2e_ms");
    cJSON *key = cJSON_AddArrayToObject(pf, "keyframe");
    for (int i = 0; i < n; i++) {
        cJSON_AddItemToArray(cut, cJSON_CreateNumber(r3(r->st[4][i])));
        cJSON_AddItemToArray(e2e, cJSON_CreateNumber(r3(r->e2e[i])));
        cJSON_AddItemToArray(key, cJSON_CreateNumber(r->key[i]));
    }
}

static cJSON *run_json(run_t *r, int n, int bus, int per_frame)
{
    cJSON *o = cJSON_CreateObject();
    if (per_frame)
        per_frame_json(o, r, n);
    cJSON_AddNumberToObject(o, "fps", r3(n / r->wall_s));
    cJSON_AddNumberToObject(o, "failed", r->failed);
    cJSON_AddItemToObject(o, "e2e_ms", dist(r->e2e, n - r->failed));
    if (bus)
        cJSON_AddItemToObject(o, "e2e_published_ms", dist(r->pub, n - r->failed));
    cJSON *st = cJSON_AddObjectToObject(o, "stages_ms");
    for (int k = 0; k < 8; k++) {
        if (k == 2) { /* detect: the frames it ran on */
            double *v = malloc((size_t)n * sizeof *v);
            int m = 0;
            for (int i = 0; v && i < n; i++)
                if (r->detected[i])
                    v[m++] = r->st[2][i];
            cJSON_AddItemToObject(st, stage_names[k], dist(v, m));
            free(v);
            continue;
        }
        cJSON_AddItemToObject(st, stage_names[k], dist(r->st[k], n - r->failed));
    }
    /* the cut of GrabCut's keyframes (the model learnt from the box) and of the frames cut with that model */
    double *kv = malloc((size_t)n * sizeof *kv), *fv = malloc((size_t)n * sizeof *fv);
    int nk = 0, nf = 0;
    for (int i = 0; kv && fv && i < n; i++) {
        if (r->st[7][i] <= 0)
            continue; /* a failed frame */
        if (r->key[i])
            kv[nk++] = r->st[4][i];
        else
            fv[nf++] = r->st[4][i];
    }
    cJSON_AddNumberToObject(o, "keyframes", nk);
    cJSON_AddItemToObject(st, "cut_keyframe", dist(kv, nk));
    cJSON_AddItemToObject(st, "cut_fixed_model", dist(fv, nf));
    free(kv);
    free(fv);
    return o;
}

/* ---- the command -------------------------------------------------------------------------------------------- */

static void pipeline_help(void)
{
    puts("usage: masktool bench pipeline [--source SPEC] [--frames N] [--size WxH] [--backend cpu|cuda|auto]\n"
         "                               [--inflight N] [--config FILE] [--set KEY=VALUE ...] [--no-bus]\n"
         "                               [--per-frame] [--dump-jpeg DIR]\n"
         "\n"
         "maskd's per-frame work (the segmentation engine) on frames decoded beforehand into host memory: MJPEG\n"
         "decode throughput (decode pool, with pipeline.decoder as maskd resolves it: \"decode\".\"decoder\" says\n"
         "which ran), then 1 and N frames in flight: per-stage and end-to-end latency (decoded\n"
         "frame in host memory -> masks in host memory, and -> published on a frame bus), throughput, GPU memory,\n"
         "host peak RSS, detections per frame, and the frames whose masks differ between N and 1 in flight (0).\n"
         "  --source SPEC   a maskd source (default testpattern: at --size; its frames are JPEG-encoded and decoded\n"
         "                  like a camera's); file:CLIP.avi plays at its own size\n"
         "  --frames N      frames per run (default 300 on CUDA, 30 on the CPU); the clip loops\n"
         "  --size WxH      test pattern size (default 1280x720)\n"
         "  --inflight N    frames in flight of the second run, 1..4 (default 2)\n"
         "  --config FILE   a maskd configuration; --set KEY=VALUE over it (after the bench's defaults: the\n"
         "                  Yolo-Fastest-1.1 body detector of the shared data, cut.method grabcut,\n"
         "                  grabcut.roi_max_side 320)\n"
         "  --no-bus        do not publish on a frame bus\n"
         "  --per-frame     also each frame's cut and end-to-end ms and keyframe flag, in frame order\n"
         "  --dump-jpeg DIR also write the clip's JPEG frames (up to 120) to DIR/frameNNNN.jpg, e.g. for\n"
         "                  tests/bench/nvjpeg_bench.c");
}

/* The bench's defaults: the body detector (when the shared data has it), GrabCut at ROI side 320. */
static void bench_defaults(mk_config_t *cfg)
{
    mk_config_defaults(cfg);
    cfg->cut.method = MK_CFG_CUT_GRABCUT;
    cfg->grabcut.roi_max_side = 320;
    const char *env = getenv("MASKD_TEST_DATA");
    const char *dirs[] = {env, "../shared/data", "../../shared/data"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[1024];
        if (!dirs[i])
            continue;
        snprintf(p, sizeof p, "%s/models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg", dirs[i]);
        if (access(p, R_OK))
            continue;
        snprintf(cfg->detect.cfg, sizeof cfg->detect.cfg, "%s", p);
        snprintf(cfg->detect.weights, sizeof cfg->detect.weights,
                 "%s/models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights", dirs[i]);
        snprintf(cfg->detect.names, sizeof cfg->detect.names, "%s/models/yolo-fastest-1.1-body/body.names", dirs[i]);
        return;
    }
}

int mt_bench_pipeline(int argc, char **argv)
{
    static const struct option opts[] = {
        {"source", required_argument, 0, 's'}, {"frames", required_argument, 0, 'n'},
        {"size", required_argument, 0, 'z'},   {"backend", required_argument, 0, 'b'},
        {"inflight", required_argument, 0, 'i'}, {"config", required_argument, 0, 'c'},
        {"set", required_argument, 0, 'S'},    {"no-bus", no_argument, 0, 'B'},
        {"per-frame", no_argument, 0, 'P'},    {"dump-jpeg", required_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *source = NULL, *backend = NULL, *config = NULL, *dump = NULL, *sets[MAX_SETS];
    int nsets = 0, frames = 0, w = 1280, h = 720, inflight = 2, use_bus = 1, per_frame = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:n:z:b:i:c:S:BPD:h", opts, NULL)) != -1) {
        switch (c) {
        case 's': source = optarg; break;
        case 'D': dump = optarg; break;
        case 'n': frames = atoi(optarg); break;
        case 'z':
            if (mt_parse_size(optarg, &w, &h))
                return 2;
            break;
        case 'b': backend = optarg; break;
        case 'i': inflight = atoi(optarg); break;
        case 'c': config = optarg; break;
        case 'S':
            if (nsets == MAX_SETS) {
                fprintf(stderr, "masktool: at most %d --set\n", MAX_SETS);
                return 2;
            }
            sets[nsets++] = optarg;
            break;
        case 'B': use_bus = 0; break;
        case 'P': per_frame = 1; break;
        case 'h': pipeline_help(); return 0;
        default: pipeline_help(); return 2;
        }
    }
    if (inflight < 1 || inflight > MK_SEGMENT_MAX_INFLIGHT) {
        fprintf(stderr, "masktool: --inflight %d: 1..%d\n", inflight, MK_SEGMENT_MAX_INFLIGHT);
        return 2;
    }
    mk_config_t base;
    bench_defaults(&base);
    mk_backend_t be = MK_BACKEND_AUTO;
    if (backend && mk_backend_parse(backend, &be)) {
        fprintf(stderr, "masktool: --backend %s: auto, cpu or cuda\n", backend);
        return 2;
    }
    base.backend = (int)be;
    mk_config_txn_t *t = mk_config_txn_new(&base, 0);
    if (!t)
        return 1;
    if (config)
        mk_config_txn_load_file(t, config);
    for (int i = 0; i < nsets; i++)
        mk_config_txn_set_arg(t, sets[i]);
    if (mk_config_txn_nerrors(t)) {
        for (size_t i = 0; i < mk_config_txn_nerrors(t); i++)
            fprintf(stderr, "masktool: %s\n", mk_config_txn_error(t, i)->msg);
        mk_config_txn_free(t);
        return 2;
    }
    mk_config_t cfg = *mk_config_txn_config(t);
    mk_config_txn_free(t);
    if (backend)
        cfg.backend = (int)be;
    cfg.pipeline.inflight = inflight;

    /* GPU memory before anything of the engine exists */
    mk_ctx_t *probe = mt_ctx(mk_backend_name((mk_backend_t)cfg.backend));
    if (!probe)
        return 1;
    mk_backend_t used = mk_ctx_backend(probe);
    cfg.backend = (int)used;
    size_t free0 = 0, total = 0, free1 = 0;
    int have_mem = mk_ctx_device_memory(probe, &free0, &total) == 0;
    if (!frames)
        frames = used == MK_BACKEND_CUDA ? 300 : 30;
    char spec[64];
    if (!source) {
        snprintf(spec, sizeof spec, "testpattern:%dx%d", w, h);
        source = spec;
    }

    clip_t clip = {0};
    int clip_n = frames < 120 ? frames : 120; /* decoded frames kept; the runs loop over them */
    /* The decoded frames are page-locked on CUDA, as the daemon's decode pool makes them (pipeline.c). */
    int rc = load_clip(source, w, h, clip_n, cfg.pipeline.decode_threads,
                       mk_decoder_for_backend((mk_decoder_t)cfg.pipeline.decoder, used),
                       used == MK_BACKEND_CUDA ? probe : NULL, dump, &clip);
    if (rc) {
        fprintf(stderr, "masktool: %s: %s\n", source, mk_err_msg());
        mk_ctx_destroy(probe);
        return 1;
    }
    mk_segment_t *s = NULL;
    maskbus_writer_t *bus = NULL;
    run_t r1 = {0}, rn = {0};
    if ((rc = mk_segment_create(&cfg, &s))) {
        fprintf(stderr, "masktool: %s\n", mk_err_msg());
        goto out;
    }
    if (use_bus) {
        maskbus_writer_opts_t o;
        maskbus_writer_opts_default(&o);
        o.max_width = (uint32_t)clip.frames[0].width;
        o.max_height = (uint32_t)clip.frames[0].height;
        o.planes = 1u << MASKBUS_PLANE_MASK | (cfg.mask.alpha ? 1u << MASKBUS_PLANE_ALPHA : 0u);
        char inst[64], err[256];
        snprintf(inst, sizeof inst, "bench-pipeline-%d", (int)getpid());
        if (maskbus_writer_open(inst, &o, &bus, err, sizeof err) != MASKBUS_OK) {
            fprintf(stderr, "masktool: frame bus: %s (going on without)\n", err);
            bus = NULL;
        }
    }
    /* a warm-up pass (the first frames allocate), then the runs */
    if ((rc = run_alloc(&r1, frames)) || (rc = run_alloc(&rn, frames)))
        goto out;
    {
        run_t warm;
        if (!(rc = run_alloc(&warm, WARMUP)))
            rc = run_clip(s, &clip, WARMUP, inflight, bus, &warm);
        run_free(&warm);
    }
    if (!rc)
        rc = run_clip(s, &clip, frames, 1, bus, &r1);
    if (!rc)
        rc = run_clip(s, &clip, frames, inflight, bus, &rn);
    if (rc) {
        fprintf(stderr, "masktool: %s\n", mk_err_msg());
        goto out;
    }
    if (have_mem)
        mk_segment_device_memory(s, &free1, &total);

    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "bench", "pipeline");
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_segment_backend(s)));
    cJSON_AddStringToObject(doc, "device", mk_segment_device_name(s));
    cJSON_AddStringToObject(doc, "source", source);
    cJSON_AddNumberToObject(doc, "width", clip.frames[0].width);
    cJSON_AddNumberToObject(doc, "height", clip.frames[0].height);
    cJSON_AddNumberToObject(doc, "frames", frames);
    cJSON_AddNumberToObject(doc, "clip_frames", clip.n);
    cJSON_AddStringToObject(doc, "model", cfg.detect.cfg[0] ? cfg.detect.cfg : "none (select.fallback)");
    /* the precision the network ran in: FP16 exists on CUDA only */
    cJSON_AddBoolToObject(doc, "fp16", cfg.detect.fp16 && mk_segment_backend(s) == MK_BACKEND_CUDA);
    cJSON_AddStringToObject(doc, "cudnn", (const char *[]){"auto", "on", "off"}[cfg.detect.cudnn % 3]);
    cJSON_AddStringToObject(doc, "cut", mk_segment_cut_name(s));
    cJSON_AddNumberToObject(doc, "roi_max_side", cfg.grabcut.roi_max_side);
    cJSON *dec = cJSON_AddObjectToObject(doc, "decode");
    cJSON_AddStringToObject(dec, "input", clip.mjpeg ? "mjpeg" : "raw");
    cJSON_AddNumberToObject(dec, "threads", cfg.pipeline.decode_threads);
    cJSON_AddNumberToObject(dec, "fps", r3(clip.decode_fps));
    cJSON_AddStringToObject(dec, "decoder", clip.decoder);
    cJSON_AddNumberToObject(dec, "first_frame_ms", r3(clip.decode_first_ms));
    if (clip.mjpeg) {
        cJSON_AddNumberToObject(dec, "gpu_decoded", (double)clip.gpu_decoded);
        cJSON_AddNumberToObject(dec, "gpu_fallbacks", (double)clip.gpu_fallbacks);
    }
    cJSON *runs = cJSON_AddObjectToObject(doc, "runs");
    char name[32];
    cJSON_AddItemToObject(runs, "inflight_1", run_json(&r1, frames, bus != NULL, per_frame));
    snprintf(name, sizeof name, "inflight_%d", inflight);
    cJSON_AddItemToObject(runs, inflight == 1 ? "inflight_1_again" : name, run_json(&rn, frames, bus != NULL, per_frame));
    int differ = 0;
    for (int i = 0; i < frames; i++)
        differ += r1.hash[i] != rn.hash[i];
    cJSON *id = cJSON_AddObjectToObject(doc, "identical");
    cJSON_AddNumberToObject(id, "inflight", inflight);
    cJSON_AddNumberToObject(id, "frames_differing", differ);
    if (have_mem) {
        cJSON *gm = cJSON_AddObjectToObject(doc, "gpu_memory_mb");
        cJSON_AddNumberToObject(gm, "used", r3((double)(free0 - free1) / 1048576.0));
        cJSON_AddNumberToObject(gm, "total", r3((double)total / 1048576.0));
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    cJSON_AddNumberToObject(doc, "host_peak_rss_mb", r3((double)ru.ru_maxrss / 1024.0));
    {
        /* the peak includes the bench's own decoded clip, which maskd does not hold (it keeps a few frames) */
        double clip_mb = 0, now_mb;
        for (int i = 0; i < clip.n; i++)
            clip_mb += (double)clip.frames[i].pitch * clip.frames[i].height / 1048576.0;
        cJSON *hr = cJSON_AddObjectToObject(doc, "host_rss");
        cJSON *top = rss_breakdown(8, &now_mb);
        cJSON_AddNumberToObject(hr, "peak_mb", r3((double)ru.ru_maxrss / 1024.0));
        cJSON_AddNumberToObject(hr, "now_mb", r3(now_mb));
        cJSON_AddNumberToObject(hr, "clip_mb", r3(clip_mb));
        cJSON_AddNumberToObject(hr, "peak_without_clip_mb", r3((double)ru.ru_maxrss / 1024.0 - clip_mb));
        cJSON_AddItemToObject(hr, "top_mappings", top);
    }
    cJSON *dets = cJSON_AddObjectToObject(doc, "detections");
    cJSON *per = cJSON_AddArrayToObject(dets, "per_frame");
    double sum = 0;
    for (int i = 0; i < frames; i++) {
        cJSON_AddItemToArray(per, cJSON_CreateNumber(r1.ndets[i]));
        sum += r1.ndets[i];
    }
    cJSON_AddNumberToObject(dets, "mean", r3(sum / frames));
    mt_print_json(doc, 1);
    rc = differ ? 1 : 0;
    if (differ)
        fprintf(stderr, "masktool: %d frames differ between %d and 1 in flight\n", differ, inflight);
out:
    run_free(&r1);
    run_free(&rn);
    mk_segment_destroy(s);
    maskbus_writer_close(bus, 1);
    for (int i = 0; i < clip.n; i++)
        mk_image_free(probe, &clip.frames[i]);
    free(clip.frames);
    mk_ctx_destroy(probe);
    return rc ? 1 : 0;
}
