/* masktool_grabcut_bench: `masktool bench grabcut` and `masktool bench maxflow` — latency of GrabCut (5 iterations
 * from a rectangle, the fixed-model cut) and of the grid max-flow on real benchmark images, printed as JSON. */
#include "masktool.h"

#include "cpu/grabcut_cpu.h"
#include "errors.h"
#include "grabcut.h"
#include "imageio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls queued back to back for the pipelined figure (CUDA), and how many such batches are timed. */
enum { PIPELINE = 10, PIPELINE_REPS = 20, STAGE_RUNS_MAX = 20 };

enum { OP_GRABCUT, OP_CUT, OP_MAXFLOW };

typedef struct {
    mk_ctx_t *ctx;
    int op;
    const mk_image_t *img;
    mk_image_t *mask;
    mk_rect_t rect;
    mk_gc_params_t p;
    const mk_gc_model_t *model;
    const mk_grid_graph_t *g;
    mk_image_t *cut;
    const mk_image_t *alt;    /* when not NULL, calls alternate between img and alt */
    int flip;
    mk_gc_stats_t *st;        /* NULL while timing CUDA latency (stats synchronise between stages) */
    mk_maxflow_stats_t *ms;
} gc_call_t;

static int gc_once(void *arg)
{
    gc_call_t *c = arg;
    switch (c->op) {
    case OP_GRABCUT:
        c->flip ^= c->alt != NULL;
        return mk_grabcut(c->ctx, c->flip ? c->alt : c->img, c->mask, &c->rect, &c->p, NULL, c->st);
    case OP_CUT:
        c->flip ^= c->alt != NULL;
        return mk_grabcut_cut(c->ctx, c->flip ? c->alt : c->img, c->mask, c->model, &c->p, c->st);
    default: return mk_maxflow_grid(c->ctx, c->g, c->cut, c->ms);
    }
}

static int gc_pipelined(void *arg)
{
    int rc = 0;
    for (int i = 0; i < PIPELINE && !rc; i++)
        rc = gc_once(arg);
    return rc;
}

static double round2(double v)
{
    return round(v * 100) / 100;
}

/* Bilinear resize (pixel centres aligned, as cv::resize INTER_LINEAR) of a host u8 colour image. */
static int resize_bgr(const mk_image_t *src, int w, int h, mk_image_t *out)
{
    *out = mk_image_desc(w, h, src->format, MK_U8);
    int rc = mk_image_alloc(NULL, out, MK_MEM_HOST);
    if (rc)
        return rc;
    double sx = (double)src->width / w, sy = (double)src->height / h;
    for (int y = 0; y < h; y++) {
        double fy = (y + 0.5) * sy - 0.5;
        fy = fy < 0 ? 0 : fy;
        int y0 = (int)fy, y1 = y0 + 1 < src->height ? y0 + 1 : y0;
        double ay = fy - y0;
        const uint8_t *r0 = mk_image_row(src, 0, y0), *r1 = mk_image_row(src, 0, y1);
        uint8_t *d = mk_image_row(out, 0, y);
        for (int x = 0; x < w; x++) {
            double fx = (x + 0.5) * sx - 0.5;
            fx = fx < 0 ? 0 : fx;
            int x0 = (int)fx, x1 = x0 + 1 < src->width ? x0 + 1 : x0;
            double ax = fx - x0;
            for (int c = 0; c < 3; c++) {
                double top = r0[3 * x0 + c] + ax * (r0[3 * x1 + c] - r0[3 * x0 + c]);
                double bot = r1[3 * x0 + c] + ax * (r1[3 * x1 + c] - r1[3 * x0 + c]);
                d[3 * x + c] = (uint8_t)lrint(top + ay * (bot - top));
            }
        }
    }
    return 0;
}

/* The benchmark image NAME and its rectangle, resized to w x h (the rectangle scaled with it). */
static int load_case(const char *data, const char *name, int w, int h, mk_image_t *img, mk_rect_t *rect, char *what,
                     size_t what_len)
{
    char path[4400], bpath[4400];
    static const char *const ext[] = {"jpg", "bmp"};
    mk_image_t src = {0};
    int rc = MK_EIO, bb[4];
    for (int i = 0; i < 2 && rc; i++) {
        snprintf(path, sizeof path, "%s/grabcut/images/%s.%s", data, name, ext[i]);
        rc = mk_imageio_load(path, MK_FMT_BGR, &src);
    }
    if (rc)
        return mk_err_wrap(rc, "benchmark image %s", name);
    snprintf(bpath, sizeof bpath, "%s/grabcut/bboxes/%s.txt", data, name);
    void *text = NULL;
    size_t len = 0;
    if (!(rc = mk_file_read(bpath, &text, &len))) {
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), (const char *)text);
        if (sscanf(buf, "%d %d %d %d", &bb[0], &bb[1], &bb[2], &bb[3]) != 4)
            rc = mk_err_set(MK_EFORMAT, "%s: expected \"x1 y1 x2 y2\"", bpath);
        free(text);
    }
    if (!rc)
        rc = resize_bgr(&src, w, h, img);
    if (!rc) {
        int x1 = (int)((int64_t)bb[0] * w / src.width), y1 = (int)((int64_t)bb[1] * h / src.height);
        int x2 = (int)((int64_t)(bb[2] + 1) * w / src.width) - 1, y2 = (int)((int64_t)(bb[3] + 1) * h / src.height) - 1;
        mt_gc_rect(x1, y1, x2, y2, w, h, rect);
        snprintf(what, what_len, "%s (%dx%d, resized bilinearly), its benchmark rectangle scaled", path, src.width,
                 src.height);
    }
    mk_image_free(NULL, &src);
    return rc;
}

typedef struct {
    int runs, warmup;
    cJSON *results;
} bench_t;

/* Times one call kind on c (latency, pipelined on CUDA) and adds its result object (without per-stage figures). */
static int time_call(gc_call_t *c, const bench_t *b, const char *op, const char *variant, int w, int h, cJSON **out)
{
    int cuda = mk_ctx_backend(c->ctx) == MK_BACKEND_CUDA, runs = b->runs;
    double *t = calloc((size_t)runs, sizeof *t), pipe[PIPELINE_REPS];
    if (!t)
        return mk_err_set(MK_ENOMEM, "out of memory");
    int rc = mt_time_op(c->ctx, gc_once, gc_pipelined, c, b->warmup, runs, t, pipe, cuda ? PIPELINE_REPS : 0,
                        PIPELINE);
    if (!rc) {
        double sum = 0;
        qsort(t, (size_t)runs, sizeof *t, mt_cmp_double);
        for (int i = 0; i < runs; i++)
            sum += t[i];
        char size[32];
        snprintf(size, sizeof size, "%dx%d", w, h);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", op);
        cJSON_AddStringToObject(o, "variant", variant);
        cJSON_AddStringToObject(o, "size", size);
        cJSON_AddNumberToObject(o, "runs", runs);
        cJSON_AddNumberToObject(o, "warmup", b->warmup);
        cJSON_AddNumberToObject(o, "median_us", round2(t[runs / 2]));
        cJSON_AddNumberToObject(o, "p99_us", round2(t[(int)ceil(0.99 * runs) - 1]));
        cJSON_AddNumberToObject(o, "min_us", round2(t[0]));
        cJSON_AddNumberToObject(o, "mean_us", round2(sum / runs));
        if (cuda) {
            qsort(pipe, PIPELINE_REPS, sizeof pipe[0], mt_cmp_double);
            cJSON_AddNumberToObject(o, "pipelined_us", round2(pipe[PIPELINE_REPS / 2]));
        }
        cJSON_AddItemToArray(b->results, o);
        *out = o;
    }
    free(t);
    return rc;
}

/* Per-stage medians over a few calls with stats (on CUDA these synchronise between stages, so they are separate
 * from the latency runs), and the counts of the last call. */
static int stage_figures(gc_call_t *c, int n, cJSON *o)
{
    double v[5][STAGE_RUNS_MAX];
    mk_gc_stats_t st;
    mk_maxflow_stats_t ms;
    int rc = 0;
    c->st = &st;
    c->ms = &ms;
    for (int i = 0; i < n && !rc; i++) {
        if ((rc = gc_once(c)) || (rc = mk_ctx_sync(c->ctx)))
            break;
        if (c->op == OP_MAXFLOW) {
            v[0][i] = ms.us;
            continue;
        }
        v[0][i] = st.kmeans_us, v[1][i] = st.gmm_us, v[2][i] = st.graph_us, v[3][i] = st.maxflow_us;
        v[4][i] = st.total_us;
    }
    c->st = NULL;
    c->ms = NULL;
    if (rc)
        return rc;
    if (c->op == OP_MAXFLOW) {
        cJSON_AddNumberToObject(o, "solver_us", round2(mt_median(v[0], n)));
        cJSON_AddNumberToObject(o, "flow", (double)ms.flow);
        cJSON_AddNumberToObject(o, "rounds", ms.rounds);
        cJSON_AddNumberToObject(o, "global_relabels", ms.global_relabels);
        return 0;
    }
    cJSON *s = cJSON_AddObjectToObject(o, "stages_us");
    static const char *const names[5] = {"kmeans", "gmm", "graph", "maxflow", "total"};
    for (int k = 0; k < 5; k++)
        cJSON_AddNumberToObject(s, names[k], round2(mt_median(v[k], n)));
    cJSON_AddNumberToObject(o, "stage_runs", n);
    cJSON_AddNumberToObject(o, "rounds", st.rounds);
    cJSON_AddNumberToObject(o, "global_relabels", st.global_relabels);
    cJSON_AddNumberToObject(o, "flow", (double)st.flow);
    cJSON_AddNumberToObject(o, "energy", st.energy);
    return 0;
}

/* The host image moved right by `dx` pixels (the first column repeated), in context memory: the next frame of a
 * slow pan. */
static int shifted_copy(mk_ctx_t *ctx, const mk_image_t *host, int dx, mk_image_t *out)
{
    mk_image_t tmp = mk_image_desc(host->width, host->height, host->format, MK_U8);
    *out = tmp;
    int rc = mk_image_alloc(NULL, &tmp, MK_MEM_HOST);
    for (int y = 0; y < host->height && !rc; y++) {
        const uint8_t *srow = mk_image_row(host, 0, y);
        uint8_t *drow = mk_image_row(&tmp, 0, y);
        for (int x = 0; x < host->width; x++)
            memcpy(drow + 3 * x, srow + 3 * (x - dx < 0 ? 0 : x - dx), 3);
    }
    if (!rc && !(rc = mk_image_alloc(ctx, out, mk_ctx_mem(ctx))))
        rc = mk_image_upload(ctx, out, &tmp);
    mk_image_free(NULL, &tmp);
    return rc;
}

/* GrabCut from the rectangle and the fixed-model cut with the model it learnt, at one size: cold, and warm from the
 * previous call's flow on alternating frames 2 pixels apart (video). */
static int bench_grabcut_size(mk_ctx_t *ctx, const bench_t *b, const mk_image_t *host, const mk_rect_t *rect)
{
    mk_image_t img = *host, mask = mk_image_desc(host->width, host->height, MK_FMT_GRAY, MK_U8), moved = {0};
    mk_gc_model_t model;
    cJSON *o = NULL;
    int stage_runs = b->runs < STAGE_RUNS_MAX ? b->runs : STAGE_RUNS_MAX, rc;
    img.data = NULL;
    img.owned = 0;
    img.pitch = 0;
    gc_call_t c = {.ctx = ctx, .op = OP_GRABCUT, .img = &img, .mask = &mask, .rect = *rect,
                   .p = mk_gc_params_default(), .model = &model};
    if (!(rc = mk_image_alloc(ctx, &img, mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &img, host)) &&
        !(rc = mk_image_alloc(ctx, &mask, mk_ctx_mem(ctx))) &&
        !(rc = time_call(&c, b, "grabcut", "5 iterations from a rectangle", host->width, host->height, &o)))
        rc = stage_figures(&c, stage_runs, o);
    c.p.reseed = 1;
    if (!rc && !(rc = time_call(&c, b, "grabcut-reseed",
                                "5 iterations from a rectangle, the later ones reseeded by k-means of the labels",
                                host->width, host->height, &o)))
        rc = stage_figures(&c, stage_runs, o);
    c.p.reseed = 0;
    /* The model of a full run. Its mask has the rectangle's hard labels; the cut relabels only PR_* pixels and
     * its result does not depend on which PR_* label they start with, so every call does the same work. */
    if (!rc && !(rc = mk_grabcut(ctx, &img, &mask, rect, &c.p, &model, NULL))) {
        c.op = OP_CUT;
        if (!(rc = time_call(&c, b, "grabcut-cut", "fixed-model cut", host->width, host->height, &o)))
            rc = stage_figures(&c, stage_runs, o);
    }
    if (!rc && !(rc = shifted_copy(ctx, host, 2, &moved))) {
        c.alt = &moved;
        c.p.warm_start = 1;
        if (!(rc = time_call(&c, b, "grabcut-cut-warm",
                             "fixed-model cut, max-flow warm from the previous call: the image and the image moved "
                             "2 px, alternating", host->width, host->height, &o)))
            rc = stage_figures(&c, stage_runs, o);
        c.op = OP_GRABCUT;
        if (!rc && !(rc = time_call(&c, b, "grabcut-warm",
                                    "5 iterations from a rectangle, the first max-flow warm from the previous "
                                    "call's flow: the image and the image moved 2 px, alternating",
                                    host->width, host->height, &o)))
            rc = stage_figures(&c, stage_runs, o);
    }
    mk_image_free(ctx, &moved);
    mk_image_free(ctx, &img);
    mk_image_free(ctx, &mask);
    return rc;
}

/* The graph of the fixed-model cut after a full GrabCut of the image on the CPU: N-links, and T-links of the
 * learnt model over its mask (the rectangle's hard labels). The arrays are the 5 planes (term, E, SE, S, SW) of one
 * host image. */
static int build_graph(const mk_image_t *host, const mk_rect_t *rect, mk_image_t *planes, int64_t *cpu_flow)
{
    mk_ctx_t *cpu = mt_ctx("cpu");
    if (!cpu)
        return mk_err_set(MK_ENODEV, "no CPU context");
    mk_gc_params_t p = mk_gc_params_default();
    mk_gc_model_t model;
    mk_gc_comp_t comps[2][MK_GC_MAX_K];
    mk_image_t mask = mk_image_desc(host->width, host->height, MK_FMT_GRAY, MK_U8);
    int w = host->width, h = host->height, rc;
    *planes = mk_image_desc_planar(w, h, 5, MK_F32); /* int32 elements in f32-sized planes */
    if (!(rc = mk_image_alloc(NULL, &mask, MK_MEM_HOST)) && !(rc = mk_image_alloc(NULL, planes, MK_MEM_HOST)))
        rc = mk_grabcut(cpu, host, &mask, rect, &p, &model, NULL);
    for (int g = 0; g < 2 && !rc; g++) {
        const mk_gmm_t *m = g ? &model.fgd : &model.bgd;
        for (int k = 0; k < m->K && !rc; k++)
            if (mk_gc_comp_set(m->weight[k], m->mean[k], &m->cov[k][0][0], &comps[g][k]))
                rc = mk_err_set(MK_ERANGE, "singular model component");
    }
    if (!rc) {
        size_t pitch = planes->pitch / sizeof(int32_t);
        int32_t *edge[4];
        for (int d = 0; d < 4; d++)
            edge[d] = mk_image_row(planes, d + 1, 0);
        mk_gc_nlinks_cpu(host, mk_gc_beta_cpu(host), p.gamma, p.cap_scale, edge, pitch);
        mk_gc_tlinks_cpu(host, &mask, comps[0], comps[1], p.K, p.lambda, p.cap_scale, mk_image_row(planes, 0, 0),
                         pitch);
        mk_grid_graph_t g = {.width = w, .height = h, .pitch = pitch, .term = mk_image_row(planes, 0, 0)};
        for (int d = 0; d < 4; d++)
            g.edge[d] = edge[d];
        mk_image_t cut = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
        mk_maxflow_stats_t ms;
        if (!(rc = mk_image_alloc(NULL, &cut, MK_MEM_HOST)) && !(rc = mk_maxflow_grid(cpu, &g, &cut, &ms)))
            *cpu_flow = ms.flow;
        mk_image_free(NULL, &cut);
    }
    mk_image_free(NULL, &mask);
    mk_ctx_destroy(cpu);
    return rc;
}

static int bench_maxflow_size(mk_ctx_t *ctx, const bench_t *b, const mk_image_t *host, const mk_rect_t *rect)
{
    mk_image_t planes = {0}, dev = {0}, cut = mk_image_desc(host->width, host->height, MK_FMT_GRAY, MK_U8);
    int64_t cpu_flow = -1;
    cJSON *o = NULL;
    int rc = build_graph(host, rect, &planes, &cpu_flow);
    if (!rc) {
        dev = planes;
        dev.data = NULL;
        dev.owned = 0;
        dev.pitch = 0;
        if (!(rc = mk_image_alloc(ctx, &dev, mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &dev, &planes)))
            rc = mk_image_alloc(ctx, &cut, mk_ctx_mem(ctx));
    }
    if (!rc) {
        mk_grid_graph_t g = {.width = host->width, .height = host->height, .pitch = dev.pitch / sizeof(int32_t),
                             .term = mk_image_row(&dev, 0, 0)};
        for (int d = 0; d < 4; d++)
            g.edge[d] = mk_image_row(&dev, d + 1, 0);
        gc_call_t c = {.ctx = ctx, .op = OP_MAXFLOW, .g = &g, .cut = &cut};
        if (!(rc = time_call(&c, b, "maxflow", "GrabCut graph (fixed-model cut after 5 iterations)", host->width,
                             host->height, &o)) &&
            !(rc = stage_figures(&c, b->runs < STAGE_RUNS_MAX ? b->runs : STAGE_RUNS_MAX, o))) {
            cJSON_AddNumberToObject(o, "cpu_flow", (double)cpu_flow);
            if (cJSON_GetObjectItem(o, "flow")->valuedouble != (double)cpu_flow)
                rc = mk_err_set(MK_ESTATE, "maxflow: flow %.0f differs from the CPU reference's %lld",
                                cJSON_GetObjectItem(o, "flow")->valuedouble, (long long)cpu_flow);
        }
    }
    mk_image_free(NULL, &planes);
    mk_image_free(ctx, &dev);
    mk_image_free(ctx, &cut);
    return rc;
}

static void help(void)
{
    puts("usage: masktool bench grabcut|maxflow [--backend auto|cpu|cuda] [--runs N] [--warmup N] [--image NAME]\n"
         "                                     [--sizes WxH,...] [--data DIR]\n"
         "\n"
         "grabcut: GrabCut, 5 iterations from the benchmark rectangle (mask initialised each call), the same\n"
         "reseeded (mk_gc_params_t.reseed), and the fixed-model cut with the model the first learnt; maxflow: the\n"
         "grid max-flow of the fixed-model cut's graph (built on the CPU, solved on the backend; its flow is checked\n"
         "against the CPU reference). Prints one JSON\n"
         "document: per size the median, p99, min and mean latency in microseconds over N runs (default 200 on CUDA,\n"
         "3 on the CPU) after a warm-up (default 20 on CUDA, 1 on the CPU), each call synchronised; pipelined_us\n"
         "(CUDA): per call with 10 queued back to back; per-stage medians (k-means, GMM, graph, max-flow) over up to\n"
         "20 further calls that ask for stats (on CUDA these synchronise between stages), max-flow rounds and\n"
         "global relabels, flow and energy.\n"
         "  --image NAME  a GrabCut benchmark image (DIR/grabcut/images), resized bilinearly to each size with its\n"
         "                rectangle (default person1)\n"
         "  --sizes       default 416x416,640x480,1280x720 (grabcut), 640x480 (maxflow)\n"
         "  --data DIR    the shared data folder (default: $MASKD_TEST_DATA, else ../shared/data)");
}

int mt_bench_grabcut(int argc, char **argv)
{
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"runs", required_argument, 0, 'r'},
        {"warmup", required_argument, 0, 'w'},  {"image", required_argument, 0, 'i'},
        {"sizes", required_argument, 0, 's'},   {"data", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *env = getenv("MASKD_TEST_DATA");
    const char *backend = NULL, *name = "person1", *sizes = NULL, *data = env ? env : "../shared/data";
    int runs = -1, warmup = -1, c, maxflow = !strcmp(argv[0], "maxflow"); /* -1: the backend's default */
    while ((c = getopt_long(argc, argv, "b:r:w:i:s:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': backend = optarg; break;
        case 'r':
        case 'w':
            if (mt_parse_int(optarg, c == 'r', c == 'r' ? 1000000 : 100000, c == 'r' ? &runs : &warmup)) {
                fprintf(stderr, "masktool bench %s: --runs must be 1..1000000 and --warmup 0..100000\n", argv[0]);
                return 2;
            }
            break;
        case 'i': name = optarg; break;
        case 's': sizes = optarg; break;
        case 'd': data = optarg; break;
        case 'h': help(); return 0;
        default: fprintf(stderr, "masktool bench %s: unknown option (see --help)\n", argv[0]); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "masktool bench %s: no positional arguments (see --help)\n", argv[0]);
        return 2;
    }
    char list[256], check[256], what[4600] = "";
    snprintf(list, sizeof list, "%s", sizes ? sizes : maxflow ? "640x480" : "416x416,640x480,1280x720");
    memcpy(check, list, sizeof check);
    for (char *save = NULL, *tok = strtok_r(check, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int w, h;
        if (mt_parse_size(tok, &w, &h)) {
            fprintf(stderr, "masktool bench %s: bad --sizes '%s'\n", argv[0], sizes);
            return 2;
        }
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    int cuda = mk_ctx_backend(ctx) == MK_BACKEND_CUDA;
    bench_t b = {.runs = runs >= 0 ? runs : cuda ? 200 : 3, .warmup = warmup >= 0 ? warmup : cuda ? 20 : 1};
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "tool", "masktool bench");
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(doc, "device", mk_ctx_device_name(ctx));
    b.results = cJSON_AddArrayToObject(doc, "results");
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        int w, h;
        mk_image_t img = {0};
        mk_rect_t rect;
        mt_parse_size(tok, &w, &h); /* checked above */
        if (!(rc = load_case(data, name, w, h, &img, &rect, what, sizeof what)))
            rc = maxflow ? bench_maxflow_size(ctx, &b, &img, &rect) : bench_grabcut_size(ctx, &b, &img, &rect);
        mk_image_free(NULL, &img);
    }
    cJSON_AddStringToObject(doc, "source", what);
    if (rc)
        fprintf(stderr, "masktool bench %s: %s\n", argv[0], mk_err_msg());
    mt_print_json(doc, 1);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
