/* masktool_bench: `masktool bench OP` — timing of the kernels on real data, printed as JSON. */
#include "masktool.h"

#include "errors.h"
#include "letterbox.h"
#include "threshold.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int run_pipelined(void *arg)
{
    int rc = 0;
    for (int i = 0; i < PIPELINE && !rc; i++)
        rc = run_once(arg);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
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
    if (!rc)
        rc = mk_ctx_sync(ctx);
    for (int i = 0; i < warmup && !rc; i++) {
        double us;
        rc = mk_ctx_time_us(ctx, run_once, &r, &us);
    }
    for (int i = 0; i < runs && !rc; i++)
        rc = mk_ctx_time_us(ctx, run_once, &r, &t[i]);
    double pipe[PIPELINE_REPS];
    for (int i = 0; i < PIPELINE_REPS && !rc; i++) {
        rc = mk_ctx_time_us(ctx, run_pipelined, &r, &pipe[i]);
        pipe[i] /= PIPELINE;
    }
    if (!rc) {
        qsort(pipe, PIPELINE_REPS, sizeof pipe[0], cmp_double);
        qsort(t, (size_t)runs, sizeof *t, cmp_double);
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

static void bench_help(void)
{
    puts("usage: masktool bench OP [--backend auto|cpu|cuda] [--runs N] [--warmup N] [--image PATH]\n"
         "                      [--sizes WxH,...] [--net WxH]\n"
         "\n"
         "Times an op and prints one JSON document: per source size the median, p99, min and mean in\n"
         "microseconds over N runs (default 500, at least 200) after a warm-up (default 50), each call\n"
         "synchronised (latency); pipelined_us: per call with 20 calls queued back to back (throughput); the bytes-moved\n"
         "floor, the floor time at the measured device-to-device copy bandwidth, and the achieved GB/s.\n"
         "  OP          letterbox (warp and darknet from BGR, warp from YUYV), threshold (fixed 128), otsu, all;\n"
         "              detect: a Darknet network's forward pass (masktool bench detect --help)\n"
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
    const char *backend = NULL, *image = NULL, *sizes = "640x480,1280x720,1920x1080";
    int runs = 500, warmup = 50, net_w = 416, net_h = 416, c;
    if (argc >= 2 && !strcmp(argv[1], "detect"))
        return mt_bench_detect(argc - 1, argv + 1);
    while ((c = getopt_long(argc, argv, "b:r:w:i:s:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': backend = optarg; break;
        case 'r': runs = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'i': image = optarg; break;
        case 's': sizes = optarg; break;
        case 'n':
            if (mt_parse_size(optarg, &net_w, &net_h))
                return 2;
            break;
        case 'h': bench_help(); return 0;
        default: fprintf(stderr, "masktool bench: unknown option (see masktool bench --help)\n"); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "masktool bench: one OP expected: letterbox, threshold, otsu or all\n");
        return 2;
    }
    const char *op = argv[optind];
    int do_lb = !strcmp(op, "letterbox") || !strcmp(op, "all"), do_th = !strcmp(op, "threshold") || !strcmp(op, "all"),
        do_otsu = !strcmp(op, "otsu") || !strcmp(op, "all");
    if (!do_lb && !do_th && !do_otsu) {
        fprintf(stderr, "masktool bench: unknown op '%s' (letterbox|threshold|otsu|all)\n", op);
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
    snprintf(list, sizeof list, "%s", sizes);
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
    cJSON_AddStringToObject(doc, "source", what);
    if (rc)
        fprintf(stderr, "masktool bench: %s\n", mk_err_msg());
    mt_print_json(doc, 1);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
