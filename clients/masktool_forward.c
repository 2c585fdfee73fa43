/* masktool_forward: `masktool forward` — a Darknet network on a raw input tensor, yolo outputs written raw. */
#include "masktool.h"

#include "darknet.h"
#include "errors.h"
#include "imageio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void forward_help(void)
{
    puts("usage: masktool forward --cfg C (--weights W | --random-weights [--seed N]) --input NAME.input.f32\n"
         "                        --dump-yolo DIR [--size WxH] [--fp16] [--backend auto|cpu|cuda]\n"
         "\n"
         "Runs a Darknet network on a raw input tensor and writes each [yolo] layer's raw output.\n"
         "  --cfg C            Darknet .cfg\n"
         "  --weights W        Darknet .weights (batch norm is folded at load)\n"
         "  --random-weights   deterministic random weights instead (--seed N, default 1)\n"
         "  --input F          float32 CHW of the network's size: Darknet's reference NAME.input.f32, or\n"
         "                     `masktool letterbox --mode darknet -o F.f32`\n"
         "  --dump-yolo DIR    writes DIR/NAME.yoloK.f32 for the K-th [yolo] layer (Darknet's layout: per anchor\n"
         "                     x, y, w, h, objectness, classes planes; x, y, objectness, classes after the logistic)\n"
         "  --size WxH         run at another input size than the cfg's (as Darknet does)\n"
         "  --fp16             FP16 convolutions (CUDA backend)\n"
         "Prints one JSON line: the network, the forward time and the files written.");
}

/* NAME from ".../NAME.input.f32" (or ".../NAME.f32", or the base name). */
static void base_name(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(out, n, "%s", b ? b + 1 : path);
    size_t len = strlen(out);
    const char *exts[] = {".input.f32", ".f32"};
    for (size_t i = 0; i < 2; i++) {
        size_t e = strlen(exts[i]);
        if (len > e && !strcmp(out + len - e, exts[i])) {
            out[len - e] = '\0';
            return;
        }
    }
}

typedef struct {
    mk_net_t *net;
    const mk_image_t *input;
} fwd_t;

static int run_forward(void *arg)
{
    fwd_t *f = arg;
    return mk_net_forward(f->net, f->input);
}

/* Writes yolo output k to DIR/NAME.yoloK.f32 and adds its entry to `files`. */
static int dump_yolo(mk_net_t *net, int k, const char *dir, const char *name, cJSON *files)
{
    mk_yolo_layer_t y;
    char path[4096];
    int rc;
    if ((rc = mk_net_yolo_output(net, k, &y)))
        return rc;
    size_t n = (size_t)y.n * (5 + (size_t)y.classes) * (size_t)y.h * (size_t)y.w;
    float *buf = malloc(n * sizeof(float));
    if (!buf)
        return mk_err_set(MK_ENOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/%s.yolo%d.f32", dir, name, k);
    if (!(rc = mk_net_yolo_read(net, k, buf, n)) && !(rc = mk_file_write(path, buf, n * sizeof(float)))) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddNumberToObject(o, "w", y.w);
        cJSON_AddNumberToObject(o, "h", y.h);
        cJSON_AddNumberToObject(o, "n", y.n);
        cJSON_AddNumberToObject(o, "classes", y.classes);
        cJSON_AddNumberToObject(o, "floats", (double)n);
        cJSON_AddItemToArray(files, o);
    }
    free(buf);
    return rc;
}

int mt_forward(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cfg", required_argument, 0, 'c'},       {"weights", required_argument, 0, 'w'},
        {"random-weights", no_argument, 0, 'r'},  {"seed", required_argument, 0, 'S'},
        {"input", required_argument, 0, 'i'},     {"dump-yolo", required_argument, 0, 'd'},
        {"size", required_argument, 0, 's'},      {"fp16", no_argument, 0, 'F'},
        {"backend", required_argument, 0, 'b'},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *cfg = NULL, *weights = NULL, *input = NULL, *dir = NULL, *backend = NULL;
    int random = 0, c;
    mk_net_opts_t o = mk_net_opts_default();
    while ((c = getopt_long(argc, argv, "c:w:rS:i:d:s:Fb:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cfg = optarg; break;
        case 'w': weights = optarg; break;
        case 'r': random = 1; break;
        case 'S': {
            char *end;
            errno = 0;
            o.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end) {
                fprintf(stderr, "masktool forward: bad --seed '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'i': input = optarg; break;
        case 'd': dir = optarg; break;
        case 's':
            if (mt_parse_size(optarg, &o.width, &o.height))
                return 2;
            break;
        case 'F': o.fp16 = 1; break;
        case 'b': backend = optarg; break;
        case 'h': forward_help(); return 0;
        default: fprintf(stderr, "masktool forward: unknown option (see masktool forward --help)\n"); return 2;
        }
    }
    if (optind != argc || !cfg || !input || !dir || random == (weights != NULL)) {
        fprintf(stderr, "masktool forward: --cfg, --input, --dump-yolo and one of --weights / --random-weights are "
                        "required (see masktool forward --help)\n");
        return 2;
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "masktool forward: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    mk_net_t *net = NULL;
    mk_image_t host = {0}, dev = {0};
    void *buf = NULL;
    size_t len = 0;
    double us = 0;
    char name[1024];
    base_name(input, name, sizeof name);
    cJSON *doc = cJSON_CreateObject(), *files = NULL;
    int rc;
    if ((rc = mk_net_load(ctx, cfg, weights, &o, &net)) || (rc = mk_file_read(input, &buf, &len)))
        goto done;
    host = mk_net_input_desc(net);
    host.pitch = (size_t)host.width * sizeof(float);
    if (len != mk_image_bytes(&host)) {
        rc = mk_err_set(MK_EFORMAT, "%s: %zu bytes; the network takes %dx%dx%d float32 = %zu bytes", input, len,
                        host.width, host.height, host.channels, mk_image_bytes(&host));
        goto done;
    }
    host.mem = MK_MEM_HOST;
    host.data = buf;
    dev = mk_net_input_desc(net);
    fwd_t f = {net, &dev};
    if ((rc = mk_image_alloc(ctx, &dev, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &dev, &host)) ||
        (rc = mk_ctx_time_us(ctx, run_forward, &f, &us)))
        goto done;
    cJSON_AddStringToObject(doc, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(doc, "cfg", cfg);
    cJSON_AddStringToObject(doc, "weights", weights ? weights : "random");
    cJSON *size = cJSON_AddArrayToObject(doc, "net");
    cJSON_AddItemToArray(size, cJSON_CreateNumber(host.width));
    cJSON_AddItemToArray(size, cJSON_CreateNumber(host.height));
    cJSON_AddItemToArray(size, cJSON_CreateNumber(host.channels));
    cJSON_AddNumberToObject(doc, "layers", mk_net_layer_count(net));
    cJSON_AddNumberToObject(doc, "bflops", mk_net_flops(net) / 1e9);
    cJSON_AddNumberToObject(doc, "forward_ms", us / 1000.0);
    files = cJSON_AddArrayToObject(doc, "yolo");
    for (int k = 0; k < mk_net_yolo_count(net) && !rc; k++)
        rc = dump_yolo(net, k, dir, name, files);
done:
    if (rc) {
        fprintf(stderr, "masktool forward: %s\n", mk_err_msg());
        cJSON_Delete(doc);
    } else {
        mt_print_json(doc, 0);
    }
    free(buf);
    mk_image_free(ctx, &dev);
    mk_net_destroy(net);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
