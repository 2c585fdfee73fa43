/* masktool_bench: `masktool bench OP` — timing of the kernels on real data, printed as JSON. */
#include "masktool.h"
#include "yolo_cfg.h"

#include "errors.h"
#include "guided.h"
#include "imageio.h"
#include "letterbox.h"
#include "mask.h"
#include "resize.h"
#include "threshold.h"
#include "yolo.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Source buffers rotate so that together they exceed the GPU's L2 (50 MB on an H100): each run then reads its
 * input from device memory as a fresh frame would, not from cache. */
enum { ROTATE_BYTES = 128 << 20, ROTATE_MAX = 256 };

typedef struct {
    mk_ctx_t *ctx;
    mk_image_t *src, *dst;
    int nbuf, cur;
    int op; /* 0 letterbox, 1 threshold, 2 otsu */
    mk_letterbox_mode_t mode;
} run_t;

static int run_once(void *arg)
{
    run_t *r = arg;
    int i = r->cur;
    r->cur = (r->cur + 1) % r->nbuf;
    switch (r->op) {
    case 0: return mk_letterbox(r->ctx, &r->src[i], &r->dst[i], r->mode, NULL);
    case 1: return mk_threshold(r->ctx, &r->src[i], &r->dst[i], 128, 255, MK_THRESH_BINARY);
    default: return mk_threshold_otsu(r->ctx, &r->src[i], &r->dst[i], 255, MK_THRESH_BINARY, NULL);
    }
}

/* PIPELINE calls back to back: the device never waits for the host, so launch latency is hidden. */
enum { PIPELINE = 20, PIPELINE_REPS = 50 };

int mt_time_op(mk_ctx_t *ctx, int (*once)(void *), int (*pipelined)(void *), void *arg, int warmup, int runs,
               double *t, double *pipe, int npipe, int per_pipe)
{
    int rc = mk_ctx_sync(ctx);
    for (int i = 0; i < warmup && !rc; i++) {
        double us;
        rc = mk_ctx_time_us(ctx, once, arg, &us);
    }
    for (int i = 0; i < runs && !rc; i++)
        rc = mk_ctx_time_us(ctx, once, arg, &t[i]);
    for (int i = 0; i < npipe && !rc; i++) {
        rc = mk_ctx_time_us(ctx, pipelined, arg, &pipe[i]);
        pipe[i] /= per_pipe;
    }
    return rc;
}

static int run_pipelined(void *arg)
{
    int rc = 0;
    for (int i = 0; i < PIPELINE && !rc; i++)
        rc = run_once(arg);
    return rc;
}

/* BT.601 limited-range RGB -> YUYV, for benchmark input only. */
static int to_yuyv(const mk_image_t *bgr, mk_image_t *out)
{
    mk_image_t y = mk_image_desc(bgr->width & ~1, bgr->height, MK_FMT_YUYV, MK_U8);
    int rc = mk_image_alloc(NULL, &y, MK_MEM_HOST);
    if (rc)
        return rc;
    for (int r = 0; r < y.height; r++) {
        const uint8_t *s = mk_image_row(bgr, 0, r);
        uint8_t *d = mk_image_row(&y, 0, r);
        for (int x = 0; x < y.width; x += 2, s += 6, d += 4) {
            int b = (s[0] + s[3]) / 2, g = (s[1] + s[4]) / 2, rr = (s[2] + s[5]) / 2;
            d[0] = (uint8_t)(16 + (66 * s[2] + 129 * s[1] + 25 * s[0] + 128) / 256);
            d[2] = (uint8_t)(16 + (66 * s[5] + 129 * s[4] + 25 * s[3] + 128) / 256);
            d[1] = (uint8_t)(128 + (-38 * rr - 74 * g + 112 * b + 128) / 256);
            d[3] = (uint8_t)(128 + (112 * rr - 94 * g - 18 * b + 128) / 256);
        }
    }
    *out = y;
    return 0;
}

/* Fewest bytes the letterbox must move: the output once, and each source row it samples once. */
static double letterbox_floor_bytes(const mk_letterbox_t *lb, const mk_image_t *src)
{
    char *used = calloc((size_t)lb->src_h, 1);
    if (!used)
        return 0;
    for (int y = 0; y < lb->dst_h; y++) {
        double sy;
        if (lb->mode == MK_LETTERBOX_WARP) {
            sy = lb->inv[4] * y + lb->inv[5];
        } else {
            int r = y - lb->pad_y;
            if (r < 0 || r >= lb->new_h)
                continue;
            sy = (double)r * lb->h_scale;
        }
        int r0 = (int)floor(sy);
        for (int r = r0; r <= r0 + 1; r++)
            if (r >= 0 && r < lb->src_h)
                used[r] = 1;
    }
    size_t rows = 0;
    for (int r = 0; r < lb->src_h; r++)
        rows += used[r];
    free(used);
    return (double)lb->dst_w * lb->dst_h * 3 * sizeof(float) + (double)rows * (double)mk_image_row_bytes(src);
}

static void free_bufs(mk_ctx_t *ctx, mk_image_t *b, int n)
{
    for (int i = 0; b && i < n; i++)
        mk_image_free(ctx, &b[i]);
    free(b);
}

static int bench_one(mk_ctx_t *ctx, int op, mk_letterbox_mode_t mode, int yuyv, const mk_image_t *host_src,
                     int net_w, int net_h, int runs, int warmup, double copy_gbps, cJSON *results)
{
    run_t r = {.ctx = ctx, .op = op, .mode = mode};
    mk_image_t src_h = *host_src, yuv = {0};
    int rc = 0;
    if (yuyv) {
        if ((rc = to_yuyv(host_src, &yuv)))
            return rc;
        src_h = yuv;
    }
    mk_image_t dst_desc = op == 0 ? mk_image_desc_planar(net_w, net_h, 3, MK_F32)
                                  : mk_image_desc(src_h.width, src_h.height, MK_FMT_GRAY, MK_U8);
    size_t per = mk_image_row_bytes(&src_h) * (size_t)src_h.height;
    r.nbuf = (int)(ROTATE_BYTES / per + 1);
    r.nbuf = r.nbuf > ROTATE_MAX ? ROTATE_MAX : r.nbuf < 2 ? 2 : r.nbuf;
    r.src = calloc((size_t)r.nbuf, sizeof *r.src);
    r.dst = calloc((size_t)r.nbuf, sizeof *r.dst);
    double *t = calloc((size_t)runs, sizeof *t);
    if (!r.src || !r.dst || !t)
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    for (int i = 0; i < r.nbuf && !rc; i++) {
        r.src[i] = src_h;
        r.src[i].data = NULL;
        r.src[i].owned = 0;
        r.src[i].pitch = 0;
        r.dst[i] = dst_desc;
        if (!(rc = mk_image_alloc(ctx, &r.src[i], mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &r.src[i], &src_h)))
            rc = mk_image_alloc(ctx, &r.dst[i], mk_ctx_mem(ctx));
    }
    double pipe[PIPELINE_REPS];
    if (!rc)
        rc = mt_time_op(ctx, run_once, run_pipelined, &r, warmup, runs, t, pipe, PIPELINE_REPS, PIPELINE);
    if (!rc) {
        qsort(pipe, PIPELINE_REPS, sizeof pipe[0], mt_cmp_double);
        qsort(t, (size_t)runs, sizeof *t, mt_cmp_double);
        double sum = 0;
        for (int i = 0; i < runs; i++)
            sum += t[i];
        double median = t[runs / 2], p99 = t[(int)ceil(0.99 * runs) - 1];
        double floor_bytes;
        mk_letterbox_t lb;
        if (op == 0) {
            mk_letterbox_plan(&lb, src_h.width, src_h.height, net_w, net_h, mode);
            floor_bytes = letterbox_floor_bytes(&lb, &src_h);
        } else {
            floor_bytes = 2.0 * src_h.width * src_h.height;
        }
        char size[32], net[32];
        snprintf(size, sizeof size, "%dx%d", src_h.width, src_h.height);
        snprintf(net, sizeof net, "%dx%d", net_w, net_h);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", op == 0 ? "letterbox" : op == 1 ? "threshold" : "otsu");
        cJSON_AddStringToObject(o, "variant", op == 0 ? mk_letterbox_mode_name(mode) : op == 1 ? "binary-128" : "binary");
        cJSON_AddStringToObject(o, "src_format", op ? "gray" : yuyv ? "yuyv" : "bgr");
        cJSON_AddStringToObject(o, "size", size);
        if (op == 0)
            cJSON_AddStringToObject(o, "net", net);
        cJSON_AddNumberToObject(o, "runs", runs);
        cJSON_AddNumberToObject(o, "warmup", warmup);
        cJSON_AddNumberToObject(o, "buffers_rotated", r.nbuf);
        cJSON_AddNumberToObject(o, "median_us", round(median * 100) / 100);
        cJSON_AddNumberToObject(o, "p99_us", round(p99 * 100) / 100);
        cJSON_AddNumberToObject(o, "min_us", round(t[0] * 100) / 100);
        cJSON_AddNumberToObject(o, "mean_us", round(sum / runs * 100) / 100);
        cJSON_AddNumberToObject(o, "pipelined_us", round(pipe[PIPELINE_REPS / 2] * 100) / 100);
        cJSON_AddNumberToObject(o, "floor_bytes", floor_bytes);
        if (copy_gbps > 0)
            cJSON_AddNumberToObject(o, "floor_us", round(floor_bytes / copy_gbps / 1e3 * 100) / 100);
        cJSON_AddNumberToObject(o, "achieved_GBps", round(floor_bytes / median / 1e3 * 10) / 10);
        cJSON_AddItemToArray(results, o);
    }
    free_bufs(ctx, r.src, r.nbuf);
    free_bufs(ctx, r.dst, r.nbuf);
    free(t);
    mk_image_free(NULL, &yuv);
    return rc;
}

/* ---- guided filter ---------------------------------------------------------------------------------------- */

/* The guided cases: the full filter (f32 source in, soft f32 out) and the fast upsampling of a 1/4 mask (u8, a
 * GrabCut-like 0/255 mask) with binarisation at 0.5, r = 8 and eps = 1e-4 at full resolution, as in the issue. */
enum { GUIDED_RADIUS = 8, GUIDED_FAST_SCALE = 4 };
#define GUIDED_EPS 1e-4

typedef struct {
    mk_ctx_t *ctx;
    mk_image_t *guide, *src, *dst;
    int nbuf, cur;
    mk_guided_t g;
    mk_mask_t m;
} guided_run_t;

static int guided_once(void *arg)
{
    guided_run_t *r = arg;
    int i = r->cur;
    r->cur = (r->cur + 1) % r->nbuf;
    return mk_guided_upsample(r->ctx, &r->guide[i], &r->src[i], &r->dst[i], &r->g, &r->m);
}

static int guided_pipelined(void *arg)
{
    int rc = 0;
    for (int i = 0; i < PIPELINE && !rc; i++)
        rc = guided_once(arg);
    return rc;
}

/* The source of a case from the guide photo (real data, never zeros): full, the gray level / 255 as f32; fast,
 * the 4x4 block means of the gray level thresholded at 128 (0 or 255). */
static int guided_source(const mk_image_t *gray, int fast, mk_image_t *out)
{
    int s = fast ? GUIDED_FAST_SCALE : 1, w = (gray->width + s - 1) / s, h = (gray->height + s - 1) / s;
    *out = mk_image_desc(w, h, MK_FMT_GRAY, fast ? MK_U8 : MK_F32);
    int rc = mk_image_alloc(NULL, out, MK_MEM_HOST);
    for (int y = 0; y < h && !rc; y++)
        for (int x = 0; x < w; x++) {
            int sum = 0, n = 0;
            for (int yy = y * s; yy < y * s + s && yy < gray->height; yy++)
                for (int xx = x * s; xx < x * s + s && xx < gray->width; xx++, n++)
                    sum += ((const uint8_t *)mk_image_row(gray, 0, yy))[xx];
            if (fast)
                ((uint8_t *)mk_image_row(out, 0, y))[x] = sum > 128 * n ? 255 : 0;
            else
                ((float *)mk_image_row(out, 0, y))[x] = (float)sum / 255.0f;
        }
    return rc;
}

/* The mask case's guide and source: a GrabCut benchmark photo of a person and its ground-truth mask (the unlabelled
 * boundary band as foreground), both resized to w x h (bilinear; the mask thresholded at 128 again, 0 or 255): a
 * full-frame object mask such as the daemon refines, whose windows mostly lie inside or outside the object. */
static int guided_mask_inputs(int w, int h, mk_image_t *bgr, mk_image_t *gray, mk_image_t *mask)
{
    const char *data = getenv("MASKD_TEST_DATA");
    char img[4096], gt[4096];
    snprintf(img, sizeof img, "%s/grabcut/images/person1.jpg", data ? data : "../shared/data");
    snprintf(gt, sizeof gt, "%s/grabcut/gt/person1.bmp", data ? data : "../shared/data");
    mk_image_t in[3] = {{0}}, *out[3] = {bgr, gray, mask};
    const mk_format_t fmt[3] = {MK_FMT_BGR, MK_FMT_GRAY, MK_FMT_GRAY};
    mk_ctx_t *cpu = NULL;
    int rc = mk_ctx_create(MK_BACKEND_CPU, &cpu);
    for (int k = 0; k < 3 && !rc; k++) {
        *out[k] = mk_image_desc(w, h, fmt[k], MK_U8);
        if (!(rc = mk_imageio_load(k < 2 ? img : gt, fmt[k], &in[k])) &&
            !(rc = mk_image_alloc(NULL, out[k], MK_MEM_HOST)))
            rc = mk_resize_bilinear(cpu, &in[k], out[k]);
        mk_image_free(NULL, &in[k]);
    }
    for (int y = 0; y < h && !rc; y++) {
        uint8_t *m = mk_image_row(mask, 0, y);
        for (int x = 0; x < w; x++)
            m[x] = m[x] >= 128 ? 255 : 0;
    }
    mk_ctx_destroy(cpu);
    if (rc)
        for (int k = 0; k < 3; k++)
            mk_image_free(NULL, out[k]);
    return rc;
}

/* On the CPU backend the reference takes up to seconds a call: a few runs, no pipelined series. mask: the full
 * filter of that u8 source (guided_mask_inputs) instead of the guide's grey levels. */
static int bench_guided_one(mk_ctx_t *ctx, const mk_image_t *guide_h, const mk_image_t *gray, int fast, int runs,
                            int warmup, double copy_gbps, cJSON *results, const mk_image_t *mask)
{
    int cuda = mk_ctx_backend(ctx) == MK_BACKEND_CUDA, rc;
    guided_run_t r = {.ctx = ctx, .g = {GUIDED_RADIUS, GUIDED_EPS, fast ? GUIDED_FAST_SCALE : 1, 0}};
    r.m = mk_mask_soft();
    if (fast)
        r.m.mode = MK_MASK_BINARY;
    if (!cuda) {
        runs = runs < 5 ? runs : 5;
        warmup = 1;
    }
    mk_image_t src_h = {0};
    if (mask) {
        src_h = mk_image_desc(mask->width, mask->height, MK_FMT_GRAY, MK_U8);
        rc = mk_image_alloc(NULL, &src_h, MK_MEM_HOST);
        for (int y = 0; y < mask->height && !rc; y++)
            memcpy(mk_image_row(&src_h, 0, y), mk_image_row(mask, 0, y), (size_t)mask->width);
    } else {
        rc = guided_source(gray, fast, &src_h);
    }
    if (rc)
        return rc;
    mk_image_t dst_desc = mk_image_desc(guide_h->width, guide_h->height, MK_FMT_GRAY, fast ? MK_U8 : MK_F32);
    size_t per = mk_image_row_bytes(guide_h) * (size_t)guide_h->height + mk_image_row_bytes(&src_h) * src_h.height;
    r.nbuf = cuda ? (int)(ROTATE_BYTES / per + 1) : 1;
    r.nbuf = r.nbuf > ROTATE_MAX ? ROTATE_MAX : r.nbuf < 1 ? 1 : r.nbuf;
    r.guide = calloc((size_t)r.nbuf, sizeof *r.guide);
    r.src = calloc((size_t)r.nbuf, sizeof *r.src);
    r.dst = calloc((size_t)r.nbuf, sizeof *r.dst);
    double *t = calloc((size_t)runs, sizeof *t), pipe[PIPELINE_REPS];
    if (!r.guide || !r.src || !r.dst || !t)
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    for (int i = 0; i < r.nbuf && !rc; i++) {
        r.guide[i] = *guide_h;
        r.src[i] = src_h;
        r.guide[i].data = r.src[i].data = NULL;
        r.guide[i].owned = r.src[i].owned = 0;
        r.guide[i].pitch = r.src[i].pitch = 0;
        r.dst[i] = dst_desc;
        if (!(rc = mk_image_alloc(ctx, &r.guide[i], mk_ctx_mem(ctx))) &&
            !(rc = mk_image_upload(ctx, &r.guide[i], guide_h)) &&
            !(rc = mk_image_alloc(ctx, &r.src[i], mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &r.src[i], &src_h)))
            rc = mk_image_alloc(ctx, &r.dst[i], mk_ctx_mem(ctx));
    }
    if (!rc)
        rc = mt_time_op(ctx, guided_once, guided_pipelined, &r, warmup, runs, t, pipe, cuda ? PIPELINE_REPS : 0,
                        PIPELINE);
    if (!rc) {
        qsort(t, (size_t)runs, sizeof *t, mt_cmp_double);
        if (cuda)
            qsort(pipe, PIPELINE_REPS, sizeof pipe[0], mt_cmp_double);
        double sum = 0, n = (double)guide_h->width * guide_h->height;
        for (int i = 0; i < runs; i++)
            sum += t[i];
        double median = t[runs / 2], p99 = t[(int)ceil(0.99 * runs) - 1];
        /* The floor: the guide, the source and the output, each once. */
        double floor_bytes = n * guide_h->channels + (double)mk_image_row_bytes(&src_h) * src_h.height +
                             n * (double)mk_dtype_size(dst_desc.dtype);
        char size[32], variant[64];
        snprintf(size, sizeof size, "%dx%d", guide_h->width, guide_h->height);
        if (fast)
            snprintf(variant, sizeof variant, "fast-s%d-r%d-binary", GUIDED_FAST_SCALE, GUIDED_RADIUS);
        else
            snprintf(variant, sizeof variant, "full-r%d%s", GUIDED_RADIUS, mask ? "-mask" : "");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", "guided");
        cJSON_AddStringToObject(o, "variant", variant);
        cJSON_AddStringToObject(o, "src_format", guide_h->channels == 3 ? "bgr" : "gray");
        cJSON_AddStringToObject(o, "size", size);
        cJSON_AddStringToObject(o, "source",
                                fast ? "u8 mask at 1/4" : mask ? "u8 object mask (grabcut person1 gt)" : "f32");
        cJSON_AddStringToObject(o, "output", fast ? "u8 binary (q > 0.5)" : "f32 soft");
        cJSON_AddNumberToObject(o, "eps", GUIDED_EPS);
        cJSON_AddNumberToObject(o, "runs", runs);
        cJSON_AddNumberToObject(o, "warmup", warmup);
        cJSON_AddNumberToObject(o, "buffers_rotated", r.nbuf);
        cJSON_AddNumberToObject(o, "median_us", round(median * 100) / 100);
        cJSON_AddNumberToObject(o, "p99_us", round(p99 * 100) / 100);
        cJSON_AddNumberToObject(o, "min_us", round(t[0] * 100) / 100);
        cJSON_AddNumberToObject(o, "mean_us", round(sum / runs * 100) / 100);
        cJSON_AddNumberToObject(o, "pipelined_us", round((cuda ? pipe[PIPELINE_REPS / 2] : median) * 100) / 100);
        cJSON_AddNumberToObject(o, "floor_bytes", floor_bytes);
        if (copy_gbps > 0)
            cJSON_AddNumberToObject(o, "floor_us", round(floor_bytes / copy_gbps / 1e3 * 100) / 100);
        cJSON_AddNumberToObject(o, "achieved_GBps", round(floor_bytes / median / 1e3 * 10) / 10);
        cJSON_AddItemToArray(results, o);
    }
    free_bufs(ctx, r.guide, r.nbuf);
    free_bufs(ctx, r.src, r.nbuf);
    free_bufs(ctx, r.dst, r.nbuf);
    free(t);
    mk_image_free(NULL, &src_h);
    return rc;
}

/* Colour and grey guides, full and fast, at one size. */
static int bench_guided(mk_ctx_t *ctx, const char *image, int w, int h, int runs, int warmup, double copy_gbps,
                        cJSON *results, char *what, size_t what_len)
{
    mk_image_t bgr = {0}, gray = {0};
    int rc = mt_source_image(image, MK_FMT_BGR, w, h, &bgr, what, what_len);
    if (!rc)
        rc = mt_source_image(image, MK_FMT_GRAY, w, h, &gray, what, what_len);
    for (int k = 0; k < 4 && !rc; k++)
        rc = bench_guided_one(ctx, k < 2 ? &bgr : &gray, &gray, k % 2, runs, warmup, copy_gbps, results, NULL);
    mk_image_free(NULL, &bgr);
    mk_image_free(NULL, &gray);
    /* the full filter of an object mask (the daemon's source), colour and grey: without the data, said and skipped */
    mk_image_t mbgr = {0}, mgray = {0}, mask = {0};
    if (!rc && guided_mask_inputs(w, h, &mbgr, &mgray, &mask)) {
        fprintf(stderr, "masktool bench: guided mask case skipped: %s\n", mk_err_msg());
        return 0;
    }
    for (int k = 0; k < 2 && !rc; k++)
        rc = bench_guided_one(ctx, k ? &mgray : &mbgr, &mgray, 0, runs, warmup, copy_gbps, results, &mask);
    mk_image_free(NULL, &mbgr);
    mk_image_free(NULL, &mgray);
    mk_image_free(NULL, &mask);
    return rc;
}

/* ---- yolo decode + NMS ---------------------------------------------------------------------------------- */

typedef struct {
    mk_ctx_t *ctx;
    const mk_yolo_layer_t *layers;
    int nlayers;
    const mk_letterbox_t *lb;
    const mk_yolo_params_t *p;
    mk_detection_t *out;
    int max_out, n;
} yolo_run_t;

static int yolo_once(void *arg)
{
    yolo_run_t *r = arg;
    return mk_yolo_detect(r->ctx, r->layers, r->nlayers, r->lb, r->p, r->out, r->max_out, &r->n);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Times decode + NMS of host layers `hl` (uploaded once) and appends the result; the counts of boxes above the
 * thresholds say how much work the case is. */
static int bench_yolo_case(mk_ctx_t *ctx, const char *variant, const mk_yolo_layer_t *hl, int nlayers,
                           const mk_letterbox_t *lb, const mk_yolo_params_t *p, int max_out, int runs, int warmup,
                           cJSON *results)
{
    mk_yolo_layer_t dl[MK_YOLO_MAX_LAYERS];
    mk_image_t imgs[MK_YOLO_MAX_LAYERS];
    long boxes = 0, cands = 0, pairs = 0;
    for (int k = 0; k < nlayers; k++) {
        const mk_yolo_layer_t *l = &hl[k];
        size_t plane = (size_t)l->w * l->h;
        boxes += (long)(plane * (size_t)l->n);
        for (int a = 0; a < l->n; a++)
            for (size_t i = 0; i < plane; i++) {
                const float *e = l->data + (size_t)a * (size_t)(5 + l->classes) * plane + i;
                if (!(e[4 * plane] > p->thresh))
                    continue;
                cands++;
                for (int c = 0; c < l->classes; c++)
                    pairs += e[4 * plane] * e[(size_t)(5 + c) * plane] > p->thresh;
            }
    }
    yolo_run_t r = {.ctx = ctx, .layers = dl, .nlayers = nlayers, .lb = lb, .p = p, .max_out = max_out};
    double *t = calloc((size_t)runs, sizeof *t), *wall = calloc((size_t)runs, sizeof *wall);
    r.out = calloc((size_t)max_out, sizeof *r.out);
    int rc = t && wall && r.out ? mt_yolo_layers_to_ctx(ctx, hl, nlayers, imgs, dl)
                                : mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc)
        rc = mk_ctx_sync(ctx);
    for (int i = 0; i < warmup && !rc; i++) {
        double us;
        rc = mk_ctx_time_us(ctx, yolo_once, &r, &us);
    }
    for (int i = 0; i < runs && !rc; i++) {
        double w0 = now_us();
        rc = mk_ctx_time_us(ctx, yolo_once, &r, &t[i]);
        wall[i] = now_us() - w0;
    }
    if (!rc) {
        qsort(t, (size_t)runs, sizeof *t, mt_cmp_double);
        qsort(wall, (size_t)runs, sizeof *wall, mt_cmp_double);
        double sum = 0;
        for (int i = 0; i < runs; i++)
            sum += t[i];
        int p99 = (int)ceil(0.99 * runs) - 1;
        char size[32];
        snprintf(size, sizeof size, "%dx%d", lb->src_w, lb->src_h);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", "yolo-decode");
        cJSON_AddStringToObject(o, "variant", variant);
        cJSON_AddStringToObject(o, "size", size);
        cJSON_AddStringToObject(o, "letterbox", mk_letterbox_mode_name(lb->mode));
        cJSON_AddNumberToObject(o, "classes", hl[0].classes);
        cJSON_AddNumberToObject(o, "boxes", (double)boxes);
        cJSON_AddNumberToObject(o, "candidates", (double)cands);
        cJSON_AddNumberToObject(o, "pairs", (double)pairs);
        cJSON_AddNumberToObject(o, "detections", r.n);
        cJSON_AddNumberToObject(o, "max_out", max_out);
        cJSON_AddNumberToObject(o, "thresh", round(p->thresh * 1e4) / 1e4);
        cJSON_AddNumberToObject(o, "nms", round(p->nms * 1e4) / 1e4);
        cJSON_AddNumberToObject(o, "runs", runs);
        cJSON_AddNumberToObject(o, "warmup", warmup);
        cJSON_AddNumberToObject(o, "median_us", round(t[runs / 2] * 100) / 100);
        cJSON_AddNumberToObject(o, "p99_us", round(t[p99] * 100) / 100);
        cJSON_AddNumberToObject(o, "min_us", round(t[0] * 100) / 100);
        cJSON_AddNumberToObject(o, "mean_us", round(sum / runs * 100) / 100);
        cJSON_AddNumberToObject(o, "wall_median_us", round(wall[runs / 2] * 100) / 100);
        cJSON_AddNumberToObject(o, "wall_p99_us", round(wall[p99] * 100) / 100);
        cJSON_AddItemToArray(results, o);
    }
    for (int k = 0; k < nlayers && t && wall && r.out; k++)
        mk_image_free(ctx, &imgs[k]);
    free(t);
    free(wall);
    free(r.out);
    return rc;
}

/* xorshift64*: uniform in [0, 1). */
static float rnd(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return (float)((*x * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}

/* A YOLOv3-416-like output (grids 13, 26, 52; YOLOv3's anchors) of uniform random values: objectness in [0, 1),
 * so about 3 boxes in 4 pass a 0.25 threshold. With one class its score is in [0.5, 1); with more, a box has one
 * strong class, sometimes a second, and every other score at 0.02. */
static int synth_layers(int classes, uint64_t seed, mk_yolo_layer_t *layers)
{
    static const float anchors[18] = {10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326};
    uint64_t x = seed;
    for (int k = 0; k < 3; k++) {
        mk_yolo_layer_t *l = &layers[k];
        memset(l, 0, sizeof *l);
        l->w = l->h = 13 << k;
        l->n = 3;
        l->classes = classes;
        l->net_w = l->net_h = 416;
        l->scale_x_y = 1;
        memcpy(l->anchors, anchors + 6 * (2 - k), 6 * sizeof(float));
        size_t plane = (size_t)l->w * l->h, per = (size_t)(5 + classes) * plane;
        float *d = malloc((size_t)l->n * per * sizeof(float));
        if (!d)
            return mk_err_set(MK_ENOMEM, "out of memory");
        l->data = d;
        for (int a = 0; a < l->n; a++)
            for (size_t i = 0; i < plane; i++) {
                float *e = d + (size_t)a * per + i;
                e[0] = rnd(&x);
                e[plane] = rnd(&x);
                e[2 * plane] = 2 * rnd(&x) - 1;
                e[3 * plane] = 2 * rnd(&x) - 1;
                e[4 * plane] = rnd(&x);
                if (classes == 1) {
                    e[5 * plane] = 0.5f + 0.5f * rnd(&x);
                    continue;
                }
                for (int c = 0; c < classes; c++)
                    e[(size_t)(5 + c) * plane] = 0.02f;
                e[(size_t)(5 + (int)(rnd(&x) * classes)) * plane] = 0.4f + 0.6f * rnd(&x);
                if (rnd(&x) < 0.25f)
                    e[(size_t)(5 + (int)(rnd(&x) * classes)) * plane] = 0.3f + 0.6f * rnd(&x);
            }
    }
    return 0;
}

/* The reference Darknet outputs of one image (reference/darknet/MODEL/NAME.*) with its cfg, size and thresholds. */
static int bench_yolo_reference(mk_ctx_t *ctx, const char *data, const char *model, const char *cfg_rel,
                                const char *name, int runs, int warmup, cJSON *results)
{
    char path[4200], prefix[4096], variant[256];
    mt_yolo_cfg_t cfg;
    mk_yolo_layer_t hl[MK_YOLO_MAX_LAYERS];
    mk_yolo_params_t p = mk_yolo_params_default();
    mk_letterbox_t lb;
    void *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", data, cfg_rel);
    snprintf(prefix, sizeof prefix, "%s/reference/darknet/%s/%s", data, model, name);
    int rc = mt_yolo_cfg_read(path, &cfg);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s.json", prefix);
    if ((rc = mk_file_read(path, &text, &len)))
        return rc;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    cJSON *iw = cJSON_GetObjectItem(j, "image_w"), *ih = cJSON_GetObjectItem(j, "image_h");
    cJSON *th = cJSON_GetObjectItem(j, "thresh"), *nms = cJSON_GetObjectItem(j, "nms");
    if (!cJSON_IsNumber(iw) || !cJSON_IsNumber(ih) || !cJSON_IsNumber(th) || !cJSON_IsNumber(nms)) {
        cJSON_Delete(j);
        return mk_err_set(MK_EFORMAT, "%s: no image_w, image_h, thresh and nms", path);
    }
    p.thresh = (float)th->valuedouble;
    p.nms = (float)nms->valuedouble;
    rc = mk_letterbox_plan(&lb, iw->valueint, ih->valueint, cfg.net_w, cfg.net_h, MK_LETTERBOX_DARKNET);
    cJSON_Delete(j);
    if (rc || (rc = mt_yolo_dump_load(&cfg, prefix, hl)))
        return rc;
    snprintf(variant, sizeof variant, "%s/%s", model, name);
    rc = bench_yolo_case(ctx, variant, hl, cfg.nlayers, &lb, &p, 100, runs, warmup, results);
    for (int k = 0; k < cfg.nlayers; k++)
        free((void *)hl[k].data);
    return rc;
}

/* Real Darknet outputs (when the test data is there) and two dense synthetic cases. */
static int bench_yolo(mk_ctx_t *ctx, int runs, int warmup, cJSON *results, char *what, size_t what_len)
{
    const char *env = getenv("MASKD_TEST_DATA");
    char data[4096], probe[4200];
    struct stat st;
    int rc = 0;
    snprintf(data, sizeof data, "%s", env ? env : "../shared/data");
    snprintf(probe, sizeof probe, "%s/reference/darknet", data);
    if (stat(probe, &st) == 0) {
        rc = bench_yolo_reference(ctx, data, "yolo-fastest-1.1-coco",
                                  "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.cfg", "dog", runs, warmup, results);
        if (!rc)
            rc = bench_yolo_reference(ctx, data, "yolo-fastest-1.1-body",
                                      "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg", "person", runs, warmup,
                                      results);
        snprintf(what, what_len, "%s/reference/darknet and synthetic 416x416 outputs", data);
    } else {
        snprintf(what, what_len, "synthetic 416x416 outputs (no test data for the reference cases)");
    }
    for (int classes = 80; classes >= 1 && !rc; classes = classes == 80 ? 1 : 0) {
        mk_yolo_layer_t hl[3];
        mk_letterbox_t lb;
        mk_yolo_params_t p = mk_yolo_params_default();
        memset(hl, 0, sizeof hl);
        if (!(rc = synth_layers(classes, 0x5eed + (uint64_t)classes, hl)) &&
            !(rc = mk_letterbox_plan(&lb, 1280, 720, 416, 416, MK_LETTERBOX_WARP)))
            rc = bench_yolo_case(ctx, classes == 1 ? "dense-1-class" : "dense-80-classes", hl, 3, &lb, &p, 1000, runs,
                                 warmup, results);
        for (int k = 0; k < 3; k++)
            free((void *)hl[k].data);
    }
    return rc;
}

static void bench_help(void)
{
    puts("usage: masktool bench OP [--backend auto|cpu|cuda] [--runs N] [--warmup N] [--image PATH]\n"
         "                      [--sizes WxH,...] [--net WxH]\n"
         "\n"
         "Times an op and prints one JSON document: per source size the median, p99, min and mean in\n"
         "microseconds over N runs (default 500, at least 200) after a warm-up (default 50), each call\n"
         "synchronised (latency); pipelined_us: per call with 20 calls queued back to back (throughput); the bytes-moved\n"
         "floor, the floor time at the measured device-to-device copy bandwidth, and the achieved GB/s.\n"
         "  OP          letterbox (warp and darknet from BGR, warp from YUYV), threshold (fixed 128), otsu,\n"
         "              guided (colour and grey guide, r = 8, eps = 1e-4: the full filter of an f32 source, the\n"
         "              fast upsampling of a 1/4 u8 mask with binarisation, and the full filter of an object mask\n"
         "              (grabcut/ person1's ground truth, resized); sizes 1280x720,1920x1080 unless\n"
         "              --sizes; on the CPU backend 5 runs), all (these four), or yolo-decode: decode + NMS of\n"
         "              Darknet's [yolo] outputs of two images (reference/darknet of the test data) and of two\n"
         "              dense synthetic 416x416 outputs with thousands of boxes above the threshold (80 classes,\n"
         "              and 1); wall_*_us: as the caller sees it, results copied to the host included;\n"
         "              detect: a Darknet network's forward pass (masktool bench detect --help); grabcut,\n"
         "              maxflow: GrabCut and its max-flow on benchmark images (masktool bench grabcut --help)\n"
         "  --image     a real photo, mirror-tiled to each size (default: images/person.jpg of the test data;\n"
         "              a generated scene without it)\n"
         "  --sizes     source sizes (default 640x480,1280x720,1920x1080)\n"
         "  --net       letterbox output size (default 416x416)\n"
         "CUDA times are device time between events around each call (launch gaps included), synchronised\n"
         "after every call; the inputs rotate through buffers larger than the L2 cache together.");
}

int mt_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"runs", required_argument, 0, 'r'},
        {"warmup", required_argument, 0, 'w'},  {"image", required_argument, 0, 'i'},
        {"sizes", required_argument, 0, 's'},   {"net", required_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *backend = NULL, *image = NULL, *sizes = "640x480,1280x720,1920x1080", *guided_sizes = NULL;
    int runs = 500, warmup = 50, net_w = 416, net_h = 416, c;
    if (argc >= 2 && !strcmp(argv[1], "detect"))
        return mt_bench_detect(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "grabcut") || !strcmp(argv[1], "maxflow")))
        return mt_bench_grabcut(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "pipeline"))
        return mt_bench_pipeline(argc - 1, argv + 1);
    while ((c = getopt_long(argc, argv, "b:r:w:i:s:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': backend = optarg; break;
        case 'r': runs = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'i': image = optarg; break;
        case 's': sizes = guided_sizes = optarg; break;
        case 'n':
            if (mt_parse_size(optarg, &net_w, &net_h))
                return 2;
            break;
        case 'h': bench_help(); return 0;
        default: fprintf(stderr, "masktool bench: unknown option (see masktool bench --help)\n"); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "masktool bench: one OP expected: letterbox, threshold, otsu, guided, all, yolo-decode, "
                        "detect, grabcut, maxflow or pipeline\n");
        return 2;
    }
    const char *op = argv[optind];
    int do_lb = !strcmp(op, "letterbox") || !strcmp(op, "all"), do_th = !strcmp(op, "threshold") || !strcmp(op, "all"),
        do_otsu = !strcmp(op, "otsu") || !strcmp(op, "all"), do_guided = !strcmp(op, "guided") || !strcmp(op, "all"),
        do_yolo = !strcmp(op, "yolo-decode");
    if (!do_lb && !do_th && !do_otsu && !do_guided && !do_yolo) {
        fprintf(stderr, "masktool bench: unknown op '%s' (letterbox|threshold|otsu|guided|all|yolo-decode)\n", op);
        return 2;
    }
    if (runs < 200 || runs > 1000000 || warmup < 1 || warmup > 100000) {
        fprintf(stderr, "masktool bench: --runs must be >= 200 and --warmup >= 1\n");
        return 2;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    double copy_gbps = 0;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "tool", "masktool bench");
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(doc, "device", mk_ctx_device_name(ctx));
    int rc = 0;
    if (mk_ctx_backend(ctx) == MK_BACKEND_CUDA) {
        if ((rc = mk_ctx_copy_gbps(ctx, 256u << 20, 20, &copy_gbps)) == 0)
            cJSON_AddNumberToObject(doc, "copy_GBps", round(copy_gbps));
    }
    cJSON *results = cJSON_AddArrayToObject(doc, "results");
    char list[256], what[4200] = "";
    snprintf(list, sizeof list, "%s", do_yolo || !(do_lb || do_th || do_otsu) ? "" : sizes);
    if (do_yolo && !rc)
        rc = bench_yolo(ctx, runs, warmup, results, what, sizeof what);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        int w, h;
        if (mt_parse_size(tok, &w, &h)) {
            rc = mk_err_set(MK_EINVAL, "bad --sizes");
            break;
        }
        mk_image_t bgr = {0}, gray = {0};
        if (do_lb && !(rc = mt_source_image(image, MK_FMT_BGR, w, h, &bgr, what, sizeof what))) {
            if (!rc)
                rc = bench_one(ctx, 0, MK_LETTERBOX_WARP, 0, &bgr, net_w, net_h, runs, warmup, copy_gbps, results);
            if (!rc)
                rc = bench_one(ctx, 0, MK_LETTERBOX_DARKNET, 0, &bgr, net_w, net_h, runs, warmup, copy_gbps, results);
            if (!rc)
                rc = bench_one(ctx, 0, MK_LETTERBOX_WARP, 1, &bgr, net_w, net_h, runs, warmup, copy_gbps, results);
        }
        if (!rc && (do_th || do_otsu) && !(rc = mt_source_image(image, MK_FMT_GRAY, w, h, &gray, what, sizeof what))) {
            if (do_th)
                rc = bench_one(ctx, 1, 0, 0, &gray, 0, 0, runs, warmup, copy_gbps, results);
            if (!rc && do_otsu)
                rc = bench_one(ctx, 2, 0, 0, &gray, 0, 0, runs, warmup, copy_gbps, results);
        }
        mk_image_free(NULL, &bgr);
        mk_image_free(NULL, &gray);
    }
    snprintf(list, sizeof list, "%s", guided_sizes ? guided_sizes : "1280x720,1920x1080");
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !rc && do_guided;
         tok = strtok_r(NULL, ",", &save)) {
        int w, h;
        if (mt_parse_size(tok, &w, &h)) {
            rc = mk_err_set(MK_EINVAL, "bad --sizes");
            break;
        }
        rc = bench_guided(ctx, image, w, h, runs, warmup, copy_gbps, results, what, sizeof what);
    }
    cJSON_AddStringToObject(doc, "source", what);
    if (rc)
        fprintf(stderr, "masktool bench: %s\n", mk_err_msg());
    mt_print_json(doc, 1);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
