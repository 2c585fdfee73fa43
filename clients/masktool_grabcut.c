/* masktool_grabcut: `masktool grabcut` (GrabCut of an image file from a rectangle) and `masktool grabcut-score`
 * (accuracy on the GrabCut benchmark against its ground truth and OpenCV's masks). */
#include "masktool.h"

#include "errors.h"
#include "grabcut.h"
#include "guided.h"
#include "imageio.h"
#include "resize.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int mt_gc_parse_rect(const char *s, int *x1, int *y1, int *x2, int *y2)
{
    char *end;
    long v[4];
    for (int i = 0; i < 4; i++) {
        errno = 0;
        v[i] = strtol(s, &end, 10);
        if (errno || end == s || v[i] < -MK_IMAGE_MAX_DIM || v[i] > 2 * MK_IMAGE_MAX_DIM ||
            *end != (i < 3 ? ',' : '\0'))
            return mk_err_set(MK_EINVAL, "bad rectangle '%s': expected x1,y1,x2,y2", s);
        s = end + 1;
    }
    if (v[2] < v[0] || v[3] < v[1])
        return mk_err_set(MK_EINVAL, "bad rectangle: x2 < x1 or y2 < y1");
    *x1 = (int)v[0], *y1 = (int)v[1], *x2 = (int)v[2], *y2 = (int)v[3];
    return 0;
}

int mt_gc_rect(int x1, int y1, int x2, int y2, int w, int h, mk_rect_t *out)
{
    *out = (mk_rect_t){x1, y1, x2 - x1 + 1, y2 - y1 + 1};
    if (x1 > 0 || y1 > 0 || x2 < w - 1 || y2 < h - 1 || w < 2 || h < 2)
        return 0;
    out->x = out->y = 0;
    out->width = w - 1;
    out->height = h - 1;
    return 1;
}

int mt_gc_run(mk_ctx_t *ctx, const mk_image_t *img, const mk_rect_t *rect, const mk_gc_params_t *p, int labels,
              mk_image_t *mask, mk_gc_stats_t *stats)
{
    mk_image_t dimg = *img, dmask = mk_image_desc(img->width, img->height, MK_FMT_GRAY, MK_U8);
    int rc;
    dimg.data = NULL;
    dimg.owned = 0;
    dimg.pitch = 0;
    *mask = dmask;
    if (!(rc = mk_image_alloc(ctx, &dimg, mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &dimg, img)) &&
        !(rc = mk_image_alloc(ctx, &dmask, mk_ctx_mem(ctx))) &&
        !(rc = mk_grabcut(ctx, &dimg, &dmask, rect, p, NULL, stats)) &&
        !(rc = labels ? 0 : mk_grabcut_binary(ctx, &dmask, &dmask)) && !(rc = mk_image_alloc(NULL, mask, MK_MEM_HOST)))
        rc = mk_image_download(ctx, mask, &dmask);
    if (!rc)
        rc = mk_ctx_sync(ctx);
    mk_image_free(ctx, &dimg);
    mk_image_free(ctx, &dmask);
    if (rc)
        mk_image_free(NULL, mask);
    return rc;
}

static double now_ms(void);

/* GrabCut at 1/s and the fast guided filter back to full resolution (issue 6's upsampling path): the image
 * reduced by s x s area averages, the rectangle's corners divided by s (rounded to the nearest reduced pixel
 * boundary: the reduced rectangle closest to the full one), the binary cut at 1/s
 * upsampled against the full-resolution image (radius, eps) and binarised at 1/2 into `mask` (host, 0/255). The
 * times of the reduction + GrabCut and of the upsampling go to gc_ms and up_ms (the context synchronised). */
static int gc_run_scaled(mk_ctx_t *ctx, const mk_image_t *img, const mk_rect_t *rect, const mk_gc_params_t *p,
                         int s, int radius, double eps, mk_image_t *mask, mk_gc_stats_t *stats, double *gc_ms,
                         double *up_ms)
{
    int w = img->width, h = img->height, lw = (w + s - 1) / s, lh = (h + s - 1) / s;
    mk_mem_t mem = mk_ctx_mem(ctx);
    mk_image_t dimg = *img, small = mk_image_desc(lw, lh, img->format, MK_U8),
               low = mk_image_desc(lw, lh, MK_FMT_GRAY, MK_U8), full = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    /* Rounded outwards instead (up to s - 1 pixels of background more inside the rectangle on every side), the 33
     * benchmark images scored 0.7900 instead of 0.8049 at s = 4 (NOTES.md, session 19). */
    int x0 = (rect->x + s / 2) / s, y0 = (rect->y + s / 2) / s;
    int x1 = (rect->x + rect->width + s / 2) / s, y1 = (rect->y + rect->height + s / 2) / s;
    /* at least one reduced pixel inside the image, however small the rectangle */
    x0 = x0 > lw - 1 ? lw - 1 : x0;
    y0 = y0 > lh - 1 ? lh - 1 : y0;
    x1 = x1 > lw ? lw : x1 <= x0 ? x0 + 1 : x1;
    y1 = y1 > lh ? lh : y1 <= y0 ? y0 + 1 : y1;
    mk_rect_t r = {x0, y0, x1 - x0, y1 - y0};
    if (r.x == 0 && r.y == 0 && r.width == lw && r.height == lh) {
        r.width--; /* as at full resolution: leave background at the right and the bottom */
        r.height--;
    }
    mk_guided_t g = {radius, eps, s, 0};
    mk_mask_t m = {MK_MASK_BINARY, 0.5f, 0.0f, 0, 0};
    /* The energy of the reduced image approximates the full one's over s^2 when the N-links are scaled by 1/s: a
     * reduced pixel stands for s^2 pixels' T-links but only s pixels of boundary. */
    mk_gc_params_t ps = *p;
    ps.gamma = p->gamma / s;
    int rc;
    dimg.data = NULL;
    dimg.owned = 0;
    dimg.pitch = 0;
    *mask = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    if ((rc = mk_image_alloc(ctx, &dimg, mem)) || (rc = mk_image_upload(ctx, &dimg, img)) ||
        (rc = mk_image_alloc(ctx, &small, mem)) || (rc = mk_image_alloc(ctx, &low, mem)) ||
        (rc = mk_image_alloc(ctx, &full, mem)) || (rc = mk_ctx_sync(ctx)))
        goto out;
    double t0 = now_ms();
    if ((rc = mk_downsample_area(ctx, &dimg, &small, s)) || (rc = mk_grabcut(ctx, &small, &low, &r, &ps, NULL, stats)) ||
        (rc = mk_grabcut_binary(ctx, &low, &low)) || (rc = mk_ctx_sync(ctx)))
        goto out;
    double t1 = now_ms();
    if ((rc = mk_guided_upsample(ctx, &dimg, &low, &full, &g, &m)) || (rc = mk_ctx_sync(ctx)))
        goto out;
    *gc_ms = t1 - t0;
    *up_ms = now_ms() - t1;
    if (!(rc = mk_image_alloc(NULL, mask, MK_MEM_HOST)) && !(rc = mk_image_download(ctx, mask, &full)))
        rc = mk_ctx_sync(ctx);
out:
    mk_image_free(ctx, &dimg);
    mk_image_free(ctx, &small);
    mk_image_free(ctx, &low);
    mk_image_free(ctx, &full);
    if (rc)
        mk_image_free(NULL, mask);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double round_to(double v, double unit)
{
    return round(v / unit) * unit;
}

enum { MAX_SCORE_RUNS = 1000 };


/* ---- masktool grabcut ------------------------------------------------------------------------------------- */

static void grabcut_help(void)
{
    puts("usage: masktool grabcut IMAGE --rect x1,y1,x2,y2 -o MASK.png [--iters N] [--labels | --binary]\n"
         "                        [--energy] [--seed N] [--reseed] [--backend auto|cpu|cuda]\n"
         "\n"
         "GrabCut (OpenCV's grabcut.cpp model: 5-component GMMs, gamma 50, lambda 450) of IMAGE from a rectangle.\n"
         "  IMAGE          JPEG, PNG, BMP or PNM (colour)\n"
         "  --rect         0-based inclusive corners, as the benchmark's bboxes/*.txt; a rectangle covering the\n"
         "                 whole image leaves no background and is shrunk by one pixel at the right and the bottom\n"
         "                 (as the OpenCV reference masks were made), with a note on stderr\n"
         "  --iters N      learn/assign/cut iterations, 0..100 (default 5)\n"
         "  -o MASK        the mask: binary 0/255 (the default, --binary) or the four labels 0..3 (--labels:\n"
         "                 0 background, 1 foreground, 2 probably background, 3 probably foreground)\n"
         "  --energy       add the max-flow value and the energy of the result to the JSON line\n"
         "  --seed N       k-means++ seed (default: MK_GC_SEED)\n"
         "  --reseed       iterations after the first cluster their labels again by k-means instead of OpenCV's\n"
         "                 assignment to the earlier components (mk_gc_params_t.reseed)\n"
         "Prints one JSON line: backend, size, the rectangle used, iterations, per-stage times (ms).");
}

int mt_grabcut(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rect", required_argument, 0, 'r'},  {"iters", required_argument, 0, 'i'},
        {"output", required_argument, 0, 'o'}, {"labels", no_argument, 0, 'l'},
        {"binary", no_argument, 0, 'B'},      {"energy", no_argument, 0, 'e'},
        {"seed", required_argument, 0, 'S'},  {"backend", required_argument, 0, 'b'},
        {"reseed", no_argument, 0, 'R'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *rect_s = NULL, *out_path = NULL, *backend = NULL;
    int labels = 0, energy = 0, c, x1, y1, x2, y2;
    mk_gc_params_t p = mk_gc_params_default();
    while ((c = getopt_long(argc, argv, "r:i:o:lBeS:b:Rh", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'r': rect_s = optarg; break;
        case 'i':
            errno = 0;
            p.iterations = (int)strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || p.iterations < 0 || p.iterations > 100) {
                fprintf(stderr, "masktool grabcut: --iters must be 0..100\n");
                return 2;
            }
            break;
        case 'o': out_path = optarg; break;
        case 'l': labels = 1; break;
        case 'B': labels = 0; break;
        case 'e': energy = 1; break;
        case 'S':
            errno = 0;
            p.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end) {
                fprintf(stderr, "masktool grabcut: bad --seed '%s'\n", optarg);
                return 2;
            }
            break;
        case 'b': backend = optarg; break;
        case 'R': p.reseed = 1; break;
        case 'h': grabcut_help(); return 0;
        default: fprintf(stderr, "masktool grabcut: unknown option (see masktool grabcut --help)\n"); return 2;
        }
    }
    if (optind != argc - 1 || !rect_s || !out_path) {
        fprintf(stderr, "masktool grabcut: one IMAGE, --rect and -o are required (see masktool grabcut --help)\n");
        return 2;
    }
    if (mt_gc_parse_rect(rect_s, &x1, &y1, &x2, &y2)) {
        fprintf(stderr, "masktool grabcut: %s\n", mk_err_msg());
        return 2;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    mk_image_t img = {0}, mask = {0};
    mk_gc_stats_t st;
    mk_rect_t r = {0, 0, 0, 0};
    double t0 = now_ms(), ms = 0;
    int rc = mk_imageio_load(argv[optind], MK_FMT_BGR, &img);
    if (!rc) {
        if (mt_gc_rect(x1, y1, x2, y2, img.width, img.height, &r))
            fprintf(stderr, "masktool grabcut: the rectangle %d,%d,%d,%d covers the whole %dx%d image (no background): "
                    "shrunk to %d,%d,%d,%d\n", x1, y1, x2, y2, img.width, img.height, r.x, r.y,
                    r.x + r.width - 1, r.y + r.height - 1);
        t0 = now_ms();
        rc = mt_gc_run(ctx, &img, &r, &p, labels, &mask, &st);
        ms = now_ms() - t0;
    }
    if (!rc)
        rc = mk_imageio_save(out_path, &mask);
    if (rc) {
        fprintf(stderr, "masktool grabcut: %s\n", mk_err_msg());
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "backend", mk_backend_name(mk_ctx_backend(ctx)));
        cJSON_AddStringToObject(o, "image", argv[optind]);
        cJSON *sz = cJSON_AddArrayToObject(o, "size");
        cJSON_AddItemToArray(sz, cJSON_CreateNumber(img.width));
        cJSON_AddItemToArray(sz, cJSON_CreateNumber(img.height));
        cJSON *rr = cJSON_AddArrayToObject(o, "rect");
        int used[4] = {r.x, r.y, r.x + r.width - 1, r.y + r.height - 1};
        for (int i = 0; i < 4; i++)
            cJSON_AddItemToArray(rr, cJSON_CreateNumber(used[i]));
        cJSON_AddNumberToObject(o, "iterations", p.iterations);
        cJSON_AddBoolToObject(o, "reseed", p.reseed);
        cJSON_AddNumberToObject(o, "kmeans_ms", round_to(st.kmeans_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "gmm_ms", round_to(st.gmm_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "graph_ms", round_to(st.graph_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "maxflow_ms", round_to(st.maxflow_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "grabcut_ms", round_to(st.total_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "wall_ms", round_to(ms, 1e-3));
        cJSON_AddNumberToObject(o, "rounds", st.rounds);
        cJSON_AddNumberToObject(o, "global_relabels", st.global_relabels);
        if (energy) {
            cJSON_AddNumberToObject(o, "flow", (double)st.flow);
            cJSON_AddNumberToObject(o, "energy", st.energy);
        }
        cJSON_AddStringToObject(o, "mask", labels ? "labels" : "binary");
        cJSON_AddStringToObject(o, "output", out_path);
        mt_print_json(o, 0);
    }
    mk_image_free(NULL, &img);
    mk_image_free(NULL, &mask);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}

/* ---- masktool grabcut-score ------------------------------------------------------------------------------- */

typedef struct {
    char name[64], file[128];
} bench_image_t;

/* The benchmark's images from grabcut/index.txt (name, file, ...). */
static int read_index(const char *data, bench_image_t **out, int *n)
{
    char path[4200];
    void *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/grabcut/index.txt", data);
    int rc = mk_file_read(path, &text, &len);
    if (rc)
        return rc;
    bench_image_t *v = NULL;
    int count = 0;
    char *s = malloc(len + 1), *save = NULL;
    if (!s) {
        free(text);
        return mk_err_set(MK_ENOMEM, "out of memory");
    }
    memcpy(s, text, len);
    s[len] = '\0';
    free(text);
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        bench_image_t b;
        if (sscanf(line, "%63s %127s", b.name, b.file) != 2)
            continue;
        bench_image_t *nv = realloc(v, (size_t)(count + 1) * sizeof *v);
        if (!nv) {
            free(v);
            free(s);
            return mk_err_set(MK_ENOMEM, "out of memory");
        }
        v = nv;
        v[count++] = b;
    }
    free(s);
    if (!count) {
        free(v);
        return mk_err_set(MK_EFORMAT, "%s lists no images", path);
    }
    *out = v;
    *n = count;
    return 0;
}

static int read_bbox(const char *data, const char *name, int bb[4])
{
    char path[4200];
    void *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/grabcut/bboxes/%s.txt", data, name);
    int rc = mk_file_read(path, &text, &len);
    if (rc)
        return rc;
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), (const char *)text);
    free(text);
    if (sscanf(buf, "%d %d %d %d", &bb[0], &bb[1], &bb[2], &bb[3]) != 4)
        return mk_err_set(MK_EFORMAT, "%s: expected one line \"x1 y1 x2 y2\"", path);
    return 0;
}

/* IoU and error over the pixels whose ground truth is not 128 (the unlabelled band), as SCORES.txt of the OpenCV
 * reference computes them; IoU between two binary masks over all pixels. */
static void score_gt(const mk_image_t *m, const mk_image_t *gt, double *iou, double *err)
{
    int64_t inter = 0, uni = 0, wrong = 0, valid = 0;
    for (int y = 0; y < m->height; y++) {
        const uint8_t *a = mk_image_row(m, 0, y), *g = mk_image_row(gt, 0, y);
        for (int x = 0; x < m->width; x++) {
            if (g[x] == 128)
                continue;
            int fa = a[x] != 0, fg = g[x] == 255;
            valid++;
            inter += fa && fg;
            uni += fa || fg;
            wrong += fa != fg;
        }
    }
    *iou = uni ? (double)inter / (double)uni : 1.0;
    *err = valid ? 100.0 * (double)wrong / (double)valid : 0.0;
}

static double iou_masks(const mk_image_t *a, const mk_image_t *b)
{
    int64_t inter = 0, uni = 0;
    for (int y = 0; y < a->height; y++) {
        const uint8_t *p = mk_image_row(a, 0, y), *q = mk_image_row(b, 0, y);
        for (int x = 0; x < a->width; x++) {
            inter += p[x] && q[x];
            uni += p[x] || q[x];
        }
    }
    return uni ? (double)inter / (double)uni : 1.0;
}

static void score_help(void)
{
    puts("usage: masktool grabcut-score [--data DIR] [--backend auto|cpu|cuda] [--iters N] [--seed N] [--out DIR]\n"
         "                              [--scale S [--radius R] [--eps E]] [--reseed] [--runs N] [--json]\n"
         "\n"
         "Runs GrabCut from each benchmark rectangle (DIR/grabcut: images, bboxes, gt; index.txt lists them) and\n"
         "scores the binary mask against the ground truth (IoU and error %, pixels of the 128 band excluded, as\n"
         "DIR/reference/opencv-grabcut/SCORES.txt) and against OpenCV's mask (IoU over all pixels). A rectangle\n"
         "over the whole image is shrunk as `masktool grabcut` does. Prints a table (or --json) with the means.\n"
         "  --data DIR   the shared data folder (default: $MASKD_TEST_DATA, else ../shared/data)\n"
         "  --seed N     k-means++ seed (default: MK_GC_SEED)\n"
         "  --reseed     iterations after the first cluster their labels again by k-means (mk_gc_params_t.reseed)\n"
         "  --out DIR    also write each mask as DIR/NAME.png\n"
         "  --runs N     time each image as the median of N calls after an untimed one (default 1: one call)\n"
         "  --scale S    GrabCut on the image reduced S times (area averages, the rectangle scaled to the nearest\n"
         "               reduced pixel), then the fast guided filter back to full resolution against the image\n"
         "               (--radius R, default 8; --eps E, default 1e-4), binarised at 1/2: the daemon's upsampling\n"
         "               path. Adds the time of each part.");
}

int mt_grabcut_score(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, 0, 'd'}, {"backend", required_argument, 0, 'b'},
        {"iters", required_argument, 0, 'i'}, {"out", required_argument, 0, 'o'},
        {"json", no_argument, 0, 'j'},        {"seed", required_argument, 0, 'S'},
        {"scale", required_argument, 0, 's'}, {"radius", required_argument, 0, 'r'},
        {"eps", required_argument, 0, 'e'},   {"reseed", no_argument, 0, 'R'},
        {"runs", required_argument, 0, 'n'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *env = getenv("MASKD_TEST_DATA");
    const char *data = env ? env : "../shared/data", *backend = NULL, *out_dir = NULL;
    int json = 0, c, scale = 1, radius = 8, runs = 1;
    double eps = 1e-4;
    mk_gc_params_t p = mk_gc_params_default();
    while ((c = getopt_long(argc, argv, "d:b:i:o:jS:s:r:e:Rn:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'd': data = optarg; break;
        case 'b': backend = optarg; break;
        case 'i':
            if (mt_parse_int(optarg, 0, 100, &p.iterations)) {
                fprintf(stderr, "masktool grabcut-score: --iters must be 0..100\n");
                return 2;
            }
            break;
        case 'o': out_dir = optarg; break;
        case 'j': json = 1; break;
        case 'S':
            errno = 0;
            p.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end) {
                fprintf(stderr, "masktool grabcut-score: bad --seed '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (mt_parse_int(optarg, 1, MK_GUIDED_MAX_SCALE, &scale)) {
                fprintf(stderr, "masktool grabcut-score: --scale must be 1..%d\n", MK_GUIDED_MAX_SCALE);
                return 2;
            }
            break;
        case 'r':
            if (mt_parse_int(optarg, 1, 1000, &radius)) {
                fprintf(stderr, "masktool grabcut-score: --radius must be 1..1000\n");
                return 2;
            }
            break;
        case 'e':
            eps = strtod(optarg, &end);
            if (end == optarg || *end || !(eps >= 0 && eps <= 1)) {
                fprintf(stderr, "masktool grabcut-score: --eps must be in [0, 1]\n");
                return 2;
            }
            break;
        case 'R': p.reseed = 1; break;
        case 'n':
            if (mt_parse_int(optarg, 1, MAX_SCORE_RUNS, &runs)) {
                fprintf(stderr, "masktool grabcut-score: --runs must be 1..%d\n", MAX_SCORE_RUNS);
                return 2;
            }
            break;
        case 'h': score_help(); return 0;
        default: fprintf(stderr, "masktool grabcut-score: unknown option (see --help)\n"); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "masktool grabcut-score: no positional arguments (see --help)\n");
        return 2;
    }
    if (out_dir && mkdir(out_dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "masktool grabcut-score: cannot create %s: %s\n", out_dir, strerror(errno));
        return 1;
    }
    bench_image_t *list = NULL;
    int n = 0, rc = read_index(data, &list, &n);
    if (rc) {
        fprintf(stderr, "masktool grabcut-score: %s\n", mk_err_msg());
        return 1;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx) {
        free(list);
        return 1;
    }
    cJSON *doc = cJSON_CreateObject(), *rows = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "tool", "masktool grabcut-score");
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(doc, "device", mk_ctx_device_name(ctx));
    cJSON_AddStringToObject(doc, "data", data);
    cJSON_AddNumberToObject(doc, "iterations", p.iterations);
    cJSON_AddNumberToObject(doc, "seed", (double)p.seed);
    cJSON_AddBoolToObject(doc, "reseed", p.reseed);
    cJSON_AddNumberToObject(doc, "scale", scale);
    cJSON_AddNumberToObject(doc, "runs", runs);
    if (scale > 1) {
        cJSON_AddNumberToObject(doc, "guided_radius", radius);
        cJSON_AddNumberToObject(doc, "guided_eps", eps);
    }
    double sum_gc = 0, sum_up = 0;
    double sum_iou = 0, sum_err = 0, sum_cv = 0, sum_ms = 0;
    int scored = 0;
    if (!json)
        printf("%-10s %-9s %-8s %-8s %-10s %s\n", "image", "size", "iou", "err%", "iou_ocv", "ms");
    for (int i = 0; i < n && !rc; i++) {
        char path[4400];
        int bb[4];
        mk_image_t img = {0}, gt = {0}, ref = {0}, mask = {0};
        mk_gc_stats_t st;
        mk_rect_t r;
        snprintf(path, sizeof path, "%s/grabcut/images/%s", data, list[i].file);
        if ((rc = mk_imageio_load(path, MK_FMT_BGR, &img)) || (rc = read_bbox(data, list[i].name, bb)))
            goto next;
        snprintf(path, sizeof path, "%s/grabcut/gt/%s.bmp", data, list[i].name);
        if ((rc = mk_imageio_load(path, MK_FMT_GRAY, &gt)))
            goto next;
        snprintf(path, sizeof path, "%s/reference/opencv-grabcut/%s.png", data, list[i].name);
        if ((rc = mk_imageio_load(path, MK_FMT_GRAY, &ref)))
            goto next;
        if (gt.width != img.width || gt.height != img.height || ref.width != img.width || ref.height != img.height) {
            rc = mk_err_set(MK_EFORMAT, "%s: image, ground truth and reference sizes differ", list[i].name);
            goto next;
        }
        int shrunk = mt_gc_rect(bb[0], bb[1], bb[2], bb[3], img.width, img.height, &r);
        /* With --runs N > 1: one untimed call first, then the median of N calls (the mask of the last one). */
        double t_all[MAX_SCORE_RUNS], t_gc[MAX_SCORE_RUNS], t_up[MAX_SCORE_RUNS];
        for (int k = runs > 1 ? -1 : 0; k < runs; k++) {
            double t0 = now_ms(), gc_ms = 0, up_ms = 0;
            mk_image_free(NULL, &mask);
            if (scale > 1 ? (rc = gc_run_scaled(ctx, &img, &r, &p, scale, radius, eps, &mask, &st, &gc_ms, &up_ms))
                          : (rc = mt_gc_run(ctx, &img, &r, &p, 0, &mask, &st)))
                goto next;
            if (k >= 0)
                t_all[k] = now_ms() - t0, t_gc[k] = gc_ms, t_up[k] = up_ms;
        }
        double ms = mt_median(t_all, runs), gc_ms = mt_median(t_gc, runs), up_ms = mt_median(t_up, runs);
        double iou, err, iou_cv = iou_masks(&mask, &ref);
        sum_gc += gc_ms;
        sum_up += up_ms;
        score_gt(&mask, &gt, &iou, &err);
        if (out_dir) {
            snprintf(path, sizeof path, "%s/%s.png", out_dir, list[i].name);
            if ((rc = mk_imageio_save(path, &mask)))
                goto next;
        }
        sum_iou += iou;
        sum_err += err;
        sum_cv += iou_cv;
        sum_ms += ms;
        scored++;
        if (!json)
            printf("%-10s %4dx%-4d %.4f   %5.2f    %.4f     %.1f%s\n", list[i].name, img.width, img.height, iou, err,
                   iou_cv, ms, shrunk ? "  (rectangle shrunk: it covered the image)" : "");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "image", list[i].name);
        cJSON_AddNumberToObject(o, "width", img.width);
        cJSON_AddNumberToObject(o, "height", img.height);
        cJSON *rr = cJSON_AddArrayToObject(o, "rect");
        int used[4] = {r.x, r.y, r.x + r.width - 1, r.y + r.height - 1};
        for (int k = 0; k < 4; k++)
            cJSON_AddItemToArray(rr, cJSON_CreateNumber(used[k]));
        cJSON_AddNumberToObject(o, "iou_gt", round_to(iou, 1e-4));
        cJSON_AddNumberToObject(o, "err_pct", round_to(err, 1e-2));
        cJSON_AddNumberToObject(o, "iou_opencv", round_to(iou_cv, 1e-4));
        cJSON_AddNumberToObject(o, "ms", round_to(ms, 0.1));
        if (scale > 1) {
            cJSON_AddNumberToObject(o, "grabcut_ms", round_to(gc_ms, 1e-3));
            cJSON_AddNumberToObject(o, "upsample_ms", round_to(up_ms, 1e-3));
        }
        cJSON_AddNumberToObject(o, "kmeans_ms", round_to(st.kmeans_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "gmm_ms", round_to(st.gmm_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "graph_ms", round_to(st.graph_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "maxflow_ms", round_to(st.maxflow_us / 1e3, 1e-3));
        cJSON_AddNumberToObject(o, "rounds", st.rounds);
        cJSON_AddNumberToObject(o, "global_relabels", st.global_relabels);
        cJSON_AddNumberToObject(o, "energy", st.energy);
        cJSON_AddItemToArray(rows, o);
    next:
        if (rc)
            mk_err_wrap(rc, "%s", list[i].name);
        mk_image_free(NULL, &img);
        mk_image_free(NULL, &gt);
        mk_image_free(NULL, &ref);
        mk_image_free(NULL, &mask);
    }
    cJSON_AddItemToObject(doc, "images", rows);
    if (scored) {
        cJSON_AddNumberToObject(doc, "n", scored);
        cJSON_AddNumberToObject(doc, "mean_iou_gt", round_to(sum_iou / scored, 1e-4));
        cJSON_AddNumberToObject(doc, "mean_err_pct", round_to(sum_err / scored, 1e-2));
        cJSON_AddNumberToObject(doc, "mean_iou_opencv", round_to(sum_cv / scored, 1e-4));
        cJSON_AddNumberToObject(doc, "mean_ms", round_to(sum_ms / scored, 0.1));
        if (scale > 1) {
            cJSON_AddNumberToObject(doc, "mean_grabcut_ms", round_to(sum_gc / scored, 1e-3));
            cJSON_AddNumberToObject(doc, "mean_upsample_ms", round_to(sum_up / scored, 1e-3));
        }
        if (!json)
            printf("mean_iou=%.4f mean_err=%.2f mean_iou_opencv=%.4f mean_ms=%.1f n=%d\n", sum_iou / scored,
                   sum_err / scored, sum_cv / scored, sum_ms / scored, scored);
    }
    if (rc)
        fprintf(stderr, "masktool grabcut-score: %s\n", mk_err_msg());
    if (json)
        mt_print_json(doc, 1);
    else
        cJSON_Delete(doc);
    mk_ctx_destroy(ctx);
    free(list);
    return rc ? 1 : 0;
}
