/* masktool_detect_bench: `masktool bench detect` — latency of a Darknet network's forward pass, printed as JSON. */
#include "masktool.h"

#include "darknet.h"
#include "masktool_detect.h"
#include "errors.h"
#include "letterbox.h"
#include "yolo.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The camera frame the input is letterboxed from. */
enum { SRC_W = 1280, SRC_H = 720 };
/* Forward passes queued back to back for the pipelined figure, and how many such batches are timed. */
enum { PIPELINE = 20, PIPELINE_REPS = 20 };

typedef struct {
    mk_ctx_t *ctx;
    mk_net_t *net;
    const mk_image_t *input;
    /* the other stages: the frame on the context, the letterbox plan, the yolo outputs and the detections */
    const mk_image_t *src, *src_host; /* the frame on the context, and in host memory */
    mk_letterbox_t plan;
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
    int nlayers, max_out, n_out;
    mk_yolo_params_t yp;
    mk_detection_t *det;
} fwd_t;

static int forward_once(void *arg)
{
    const fwd_t *f = arg;
    return mk_net_forward(f->net, f->input);
}

/* The letterbox (warp, the daemon's) of the 1280x720 frame into the network's input. */
static int preprocess_once(void *arg)
{
    fwd_t *f = arg;
    return mk_letterbox(f->ctx, f->src, (mk_image_t *)f->input, MK_LETTERBOX_WARP, &f->plan);
}

/* Decode + NMS of the last forward pass's outputs, detections in host memory on return. */
static int decode_once(void *arg)
{
    fwd_t *f = arg;
    return mk_yolo_detect(f->ctx, f->layers, f->nlayers, &f->plan, &f->yp, f->det, f->max_out, &f->n_out);
}

/* A frame on the device to detections on the host: letterbox, forward, decode + NMS. */
static int detect_once(void *arg)
{
    int rc = preprocess_once(arg);
    if (!rc)
        rc = forward_once(arg);
    if (!rc)
        rc = decode_once(arg);
    return rc;
}

static int forward_pipelined(void *arg)
{
    int rc = 0;
    for (int i = 0; i < PIPELINE && !rc; i++)
        rc = forward_once(arg);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double round2(double v)
{
    return round(v * 100) / 100;
}

typedef struct {
    const char *cfg, *weights;
    mk_net_opts_t opts;
    int runs, warmup;
    int cpu_check; /* compare the CUDA pass with the CPU reference's on the same frame (bench_variant) */
} bench_args_t;

/* Sorts t[0..runs) and adds one result object {stage, variant, runs, warmup, median, p99, min, mean} to results;
 * returns it for more fields. */
static cJSON *add_result(cJSON *results, const char *stage, const char *variant, double *t, int runs, int warmup)
{
    double sum = 0;
    qsort(t, (size_t)runs, sizeof *t, mt_cmp_double);
    for (int i = 0; i < runs; i++)
        sum += t[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "stage", stage);
    cJSON_AddStringToObject(o, "variant", variant);
    cJSON_AddNumberToObject(o, "runs", runs);
    cJSON_AddNumberToObject(o, "warmup", warmup);
    cJSON_AddNumberToObject(o, "median_us", round2(t[runs / 2]));
    cJSON_AddNumberToObject(o, "p99_us", round2(t[(int)ceil(0.99 * runs) - 1]));
    cJSON_AddNumberToObject(o, "min_us", round2(t[0]));
    cJSON_AddNumberToObject(o, "mean_us", round2(sum / runs));
    cJSON_AddItemToArray(results, o);
    return o;
}

static double box_iou(const mk_detection_t *a, const mk_detection_t *b)
{
    float x0 = fmaxf(a->x, b->x), y0 = fmaxf(a->y, b->y);
    float x1 = fminf(a->x + a->w, b->x + b->w), y1 = fminf(a->y + a->h, b->y + b->h);
    double inter = x1 > x0 && y1 > y0 ? (double)(x1 - x0) * (y1 - y0) : 0.0;
    double uni = (double)a->w * a->h + (double)b->w * b->h - inter;
    return uni > 0 ? inter / uni : 0.0;
}

/* The CPU reference on the same frame in the same process: the CPU backend loads the network (FP32) and detects
 * on the frame (warp letterbox, forward, decode + NMS with f's parameters) as the CUDA pass of f does; o gets
 * "cpu_check" with the largest difference of the raw yolo outputs (and the largest CPU value, for scale), both
 * detection counts and how many CPU detections a CUDA one of the same class overlaps with IoU >= 0.95. */
static int cpu_check(fwd_t *f, const bench_args_t *a, const mk_image_t *frame, cJSON *o)
{
    mk_ctx_t *cpu = NULL;
    mk_net_t *net = NULL;
    mk_image_t input = {0};
    mk_letterbox_t plan;
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
    mk_detection_t *det = malloc((size_t)f->max_out * sizeof *det);
    float *x = NULL, *y = NULL;
    double max_diff = 0, max_cpu = 0, t0 = now_ms(), cpu_ms = 0;
    int n_cpu = 0, matched = 0;
    mk_net_opts_t opts = a->opts;
    opts.fp16 = 0;
    int rc = det ? mk_ctx_create(MK_BACKEND_CPU, &cpu) : mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc && !(rc = mk_net_load(cpu, a->cfg, a->weights, &opts, &net))) {
        input = mk_net_input_desc(net);
        t0 = now_ms();
        if (!(rc = mk_image_alloc(cpu, &input, MK_MEM_HOST)) &&
            !(rc = mk_letterbox(cpu, frame, &input, MK_LETTERBOX_WARP, &plan)) && !(rc = mk_net_forward(net, &input)))
            for (int k = 0; k < f->nlayers && !rc; k++)
                rc = mk_net_yolo_output(net, k, &layers[k]);
        if (!rc)
            rc = mk_yolo_detect(cpu, layers, f->nlayers, &plan, &f->yp, det, f->max_out, &n_cpu);
        cpu_ms = now_ms() - t0;
    }
    /* the CUDA pass of the same frame, then its raw outputs next to the CPU's */
    if (!rc)
        rc = detect_once(f);
    for (int k = 0; k < f->nlayers && !rc; k++) {
        size_t count = (size_t)layers[k].n * (size_t)(5 + layers[k].classes) * (size_t)layers[k].h * layers[k].w;
        float *nx = realloc(x, count * sizeof *x), *ny = nx ? realloc(y, count * sizeof *y) : NULL;
        if (nx)
            x = nx;
        if (ny)
            y = ny;
        if (!nx || !ny) {
            rc = mk_err_set(MK_ENOMEM, "out of memory");
            break;
        }
        if ((rc = mk_net_yolo_read(net, k, x, count)) || (rc = mk_net_yolo_read(f->net, k, y, count)))
            break;
        for (size_t i = 0; i < count; i++) {
            max_diff = fmax(max_diff, fabs((double)x[i] - y[i]));
            max_cpu = fmax(max_cpu, fabs((double)x[i]));
        }
    }
    for (int i = 0; i < n_cpu && !rc; i++)
        for (int j = 0; j < f->n_out; j++)
            if (f->det[j].class_id == det[i].class_id && box_iou(&f->det[j], &det[i]) >= 0.95) {
                matched++;
                break;
            }
    if (!rc) {
        cJSON *c = cJSON_AddObjectToObject(o, "cpu_check");
        cJSON_AddNumberToObject(c, "yolo_max_abs_diff", max_diff);
        cJSON_AddNumberToObject(c, "yolo_max_abs_cpu", max_cpu);
        cJSON_AddNumberToObject(c, "detections_cuda", f->n_out);
        cJSON_AddNumberToObject(c, "detections_cpu", n_cpu);
        cJSON_AddNumberToObject(c, "cpu_matched_iou095", matched);
        cJSON_AddNumberToObject(c, "cpu_detect_ms", round2(cpu_ms));
    }
    free(x);
    free(y);
    free(det);
    mk_image_free(cpu, &input);
    mk_net_destroy(net);
    mk_ctx_destroy(cpu);
    return rc;
}

/* Times the stages around the forward pass with the network as loaded: preprocess (letterbox), decode + NMS
 * (Darknet's defaults: thresh 0.25, nms 0.45) and the whole detection of a frame. */
static int bench_stages(fwd_t *f, const bench_args_t *a, const char *variant, double *t, cJSON *results)
{
    static const struct {
        const char *stage;
        int (*fn)(void *);
    } stages[] = {{"preprocess", preprocess_once}, {"decode+nms", decode_once}, {"detect", detect_once}};
    f->nlayers = mk_net_yolo_count(f->net);
    f->yp = mk_yolo_params_default();
    if (f->nlayers < 1 || f->nlayers > MK_YOLO_MAX_LAYERS)
        return 0; /* a network without [yolo] layers has no decode stage */
    int rc = preprocess_once(f);
    if (!rc)
        rc = forward_once(f);
    for (int k = 0; k < f->nlayers && !rc; k++)
        rc = mk_net_yolo_output(f->net, k, &f->layers[k]);
    if (rc)
        return rc;
    f->max_out = mt_yolo_max_detections(f->layers, f->nlayers, &f->yp);
    if (f->max_out < 1)
        f->max_out = 1;
    f->det = malloc((size_t)f->max_out * sizeof *f->det);
    if (!f->det)
        return mk_err_set(MK_ENOMEM, "out of memory for %d detections", f->max_out);
    for (size_t s = 0; s < sizeof stages / sizeof stages[0] && !rc; s++) {
        rc = mt_time_op(f->ctx, stages[s].fn, NULL, f, a->warmup, a->runs, t, NULL, 0, 1);
        if (!rc) {
            cJSON *o = add_result(results, stages[s].stage, variant, t, a->runs, a->warmup);
            if (stages[s].fn != preprocess_once)
                cJSON_AddNumberToObject(o, "detections", f->n_out);
            if (stages[s].fn == detect_once && a->cpu_check && mk_ctx_backend(f->ctx) == MK_BACKEND_CUDA)
                rc = cpu_check(f, a, f->src_host, o);
        }
    }
    free(f->det);
    f->det = NULL;
    return rc;
}

/* Loads the network (MASKD_NO_GRAPH=1 during the load for the layer-by-layer variant), letterboxes the source
 * frame to its input on the context, times the forward pass and adds one result object. */
static int bench_variant(mk_ctx_t *ctx, const bench_args_t *a, const mk_image_t *frame, const char *variant,
                         int no_graph, int stages, cJSON *doc, cJSON *results)
{
    mk_net_t *net = NULL;
    mk_image_t src = *frame, input = {0};
    size_t free0 = 0, free1 = 0, total = 0;
    double *t = calloc((size_t)a->runs, sizeof *t), pipe[PIPELINE_REPS];
    int cuda = mk_ctx_backend(ctx) == MK_BACKEND_CUDA, rc = t ? 0 : mk_err_set(MK_ENOMEM, "out of memory");
    src.data = NULL;
    src.owned = 0;
    src.pitch = 0;
    if (!rc && cuda && !(rc = mk_ctx_sync(ctx)))
        rc = mk_ctx_device_memory(ctx, &free0, &total);
    double t0 = now_ms();
    if (!rc) {
        if (no_graph)
            setenv("MASKD_NO_GRAPH", "1", 1);
        rc = mk_net_load(ctx, a->cfg, a->weights, &a->opts, &net);
        if (no_graph)
            unsetenv("MASKD_NO_GRAPH");
    }
    double load_ms = now_ms() - t0;
    if (!rc && cuda)
        rc = mk_ctx_device_memory(ctx, &free1, &total);
    if (!rc) {
        input = mk_net_input_desc(net);
        if (!(rc = mk_image_alloc(ctx, &src, mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &src, frame)) &&
            !(rc = mk_image_alloc(ctx, &input, mk_ctx_mem(ctx))))
            rc = mk_letterbox(ctx, &src, &input, MK_LETTERBOX_DARKNET, NULL);
    }
    fwd_t f = {.ctx = ctx, .net = net, .input = &input, .src = &src, .src_host = frame};
    if (!rc)
        rc = mt_time_op(ctx, forward_once, forward_pipelined, &f, a->warmup, a->runs, t, pipe,
                        cuda ? PIPELINE_REPS : 0, PIPELINE);
    if (!rc) {
        double flops = mk_net_flops(net);
        if (!cJSON_GetObjectItem(doc, "layers")) {
            int c, h, w;
            char size[32];
            mk_net_input_dims(net, &c, &h, &w);
            snprintf(size, sizeof size, "%dx%d", w, h);
            cJSON_AddStringToObject(doc, "net", size);
            cJSON_AddNumberToObject(doc, "layers", mk_net_layer_count(net));
            cJSON_AddNumberToObject(doc, "yolo_layers", mk_net_yolo_count(net));
            cJSON_AddNumberToObject(doc, "flops", flops);
        }
        cJSON *o = add_result(results, "forward", variant, t, a->runs, a->warmup);
        double median = t[a->runs / 2];
        if (cuda) {
            qsort(pipe, PIPELINE_REPS, sizeof pipe[0], mt_cmp_double);
            cJSON_AddNumberToObject(o, "pipelined_us", round2(pipe[PIPELINE_REPS / 2]));
        }
        cJSON_AddNumberToObject(o, "achieved_TFLOPs", round(flops / (median * 1e-6) / 1e12 * 1000) / 1000);
        cJSON_AddNumberToObject(o, "load_ms", round2(load_ms));
        if (cuda)
            cJSON_AddNumberToObject(o, "device_memory_bytes", free0 > free1 ? (double)(free0 - free1) : 0.0);
        if (stages)
            rc = bench_stages(&f, a, variant, t, results);
    }
    mk_image_free(ctx, &src);
    mk_image_free(ctx, &input);
    mk_net_destroy(net);
    free(t);
    return rc;
}

static void detect_help(void)
{
    puts("usage: masktool bench detect --cfg C (--weights W | --random-weights [--seed N]) [--fp16] [--size WxH]\n"
         "                             [--backend auto|cpu|cuda] [--runs N] [--warmup N] [--image PATH]\n"
         "\n"
         "Times a Darknet network's forward pass (batch 1) and prints one JSON document: the network (input size,\n"
         "layers, FLOPs = 2 x multiply-adds of the convolutions) and, per variant, the median, p99, min and mean\n"
         "latency in microseconds over N runs (default 500, at least 200 on CUDA) after a warm-up (default 50),\n"
         "each call synchronised; pipelined_us (CUDA): per pass with 20 passes queued back to back; the\n"
         "achieved TFLOP/s at the median; the load time (cuDNN's algorithm search included) and, on CUDA, the\n"
         "device memory the network took (free memory before and after the load). CUDA variants: cuda-graph\n"
         "(the pass replayed as one CUDA graph) and layer-by-layer (MASKD_NO_GRAPH=1); the CPU has one.\n"
         "  --cfg C            Darknet .cfg\n"
         "  --weights W        Darknet .weights; --random-weights: deterministic random weights (--seed N)\n"
         "  --fp16             FP16 convolutions and activations (CUDA)\n"
         "  --size WxH         network input size (default: the cfg's)\n"
         "  --image PATH       the photo letterboxed into the input (default: images/person.jpg of the test\n"
         "                     data, mirror-tiled to 1280x720; a generated scene without it)\n"
         "With the graph (and on the CPU) the other stages follow: \"preprocess\" (the warp letterbox of the\n"
         "1280x720 frame on the context), \"decode+nms\" (thresh 0.25, nms 0.45, detections in host memory) and\n"
         "\"detect\" (the three in a row), each with its detection count. On CUDA, \"detect\" also has\n"
         "\"cpu_check\": the CPU reference (FP32) detects on the same frame in the same process; the largest\n"
         "difference of the raw yolo outputs, both detection counts, and the CPU detections that a CUDA one of the\n"
         "same class overlaps with IoU >= 0.95 (--no-cpu-check: skip it; the CPU pass of a large network takes\n"
         "seconds).");
}

int mt_bench_detect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cfg", required_argument, 0, 'c'},      {"weights", required_argument, 0, 'w'},
        {"random-weights", no_argument, 0, 'r'}, {"seed", required_argument, 0, 'S'},
        {"fp16", no_argument, 0, 'F'},           {"size", required_argument, 0, 's'},
        {"backend", required_argument, 0, 'b'},  {"runs", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'W'},   {"image", required_argument, 0, 'i'},
        {"no-cpu-check", no_argument, 0, 'C'},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    bench_args_t a = {.opts = mk_net_opts_default(), .runs = 500, .warmup = 50, .cpu_check = 1};
    const char *backend = NULL, *image = NULL;
    int random = 0, c;
    while ((c = getopt_long(argc, argv, "c:w:rS:Fs:b:n:W:i:Ch", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a.cfg = optarg; break;
        case 'w': a.weights = optarg; break;
        case 'r': random = 1; break;
        case 'S': {
            char *end;
            errno = 0;
            a.opts.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end) {
                fprintf(stderr, "masktool bench detect: bad --seed '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'F': a.opts.fp16 = 1; break;
        case 's':
            if (mt_parse_size(optarg, &a.opts.width, &a.opts.height))
                return 2;
            break;
        case 'b': backend = optarg; break;
        case 'n': a.runs = atoi(optarg); break;
        case 'W': a.warmup = atoi(optarg); break;
        case 'i': image = optarg; break;
        case 'C': a.cpu_check = 0; break;
        case 'h': detect_help(); return 0;
        default: fprintf(stderr, "masktool bench detect: unknown option (see masktool bench detect --help)\n"); return 2;
        }
    }
    if (optind != argc || !a.cfg || random == (a.weights != NULL)) {
        fprintf(stderr, "masktool bench detect: --cfg and one of --weights / --random-weights are required (see "
                        "masktool bench detect --help)\n");
        return 2;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    int cuda = mk_ctx_backend(ctx) == MK_BACKEND_CUDA;
    if (a.runs < (cuda ? 200 : 1) || a.runs > 1000000 || a.warmup < 1 || a.warmup > 100000) {
        fprintf(stderr, "masktool bench detect: --runs must be >= %d and --warmup >= 1\n", cuda ? 200 : 1);
        mk_ctx_destroy(ctx);
        return 2;
    }
    char what[4200] = "", seed[64];
    mk_image_t frame = {0};
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "tool", "masktool bench detect");
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(doc, "device", mk_ctx_device_name(ctx));
    cJSON_AddStringToObject(doc, "cfg", a.cfg);
    snprintf(seed, sizeof seed, "random (seed %llu)", (unsigned long long)a.opts.seed);
    cJSON_AddStringToObject(doc, "weights", a.weights ? a.weights : seed);
    cJSON_AddStringToObject(doc, "precision", a.opts.fp16 ? "fp16" : "fp32");
    cJSON *results = cJSON_CreateArray();
    int rc = mt_source_image(image, MK_FMT_BGR, SRC_W, SRC_H, &frame, what, sizeof what);
    if (!rc && cuda) {
        rc = bench_variant(ctx, &a, &frame, "cuda-graph", 0, 1, doc, results);
        if (!rc)
            rc = bench_variant(ctx, &a, &frame, "layer-by-layer", 1, 0, doc, results);
    } else if (!rc) {
        rc = bench_variant(ctx, &a, &frame, "cpu", 0, 1, doc, results);
    }
    cJSON_AddItemToObject(doc, "results", results);
    cJSON_AddStringToObject(doc, "source", what);
    if (rc)
        fprintf(stderr, "masktool bench detect: %s\n", mk_err_msg());
    mt_print_json(doc, 1);
    mk_image_free(NULL, &frame);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
