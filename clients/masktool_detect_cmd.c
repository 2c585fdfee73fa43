/* masktool_detect_cmd: `masktool detect` — the whole detector (letterbox, Darknet network, decode + NMS) on images. */
#include "masktool.h"
#include "masktool_detect.h"

#include "errors.h"
#include "imageio.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void detect_help(void)
{
    puts("usage: masktool detect --cfg C --weights W [--names N] [--thresh T] [--nms N] [--letterbox warp|darknet]\n"
         "                       [--fp16] [--backend auto|cpu|cuda] [--json] IMAGE...\n"
         "\n"
         "Finds objects in images with a Darknet network: letterbox, forward pass, decode + NMS as Darknet does\n"
         "(get_network_boxes + do_nms_sort). Boxes are in source pixels, x/y the top-left corner.\n"
         "  --cfg C, --weights W   the network (.cfg, .weights)\n"
         "  --names N              class names, one per line (Darknet's .names)\n"
         "  --thresh T             probability threshold, 0 <= T < 1 (default 0.25)\n"
         "  --nms N                IoU above which a box is suppressed (default 0.45; 0 = no NMS)\n"
         "  --letterbox M          darknet (default: Darknet's letterbox_image, for parity) or warp (OpenCV-style)\n"
         "  --fp16                 FP16 convolutions (CUDA backend)\n"
         "  --json                 one JSON object per image instead of text lines");
}

static int parse_unit(const char *s, float *out, int below_one, const char *what)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || (below_one ? v >= 1 : v > 1)) {
        fprintf(stderr, "masktool detect: %s needs a number in [0, 1%s, not '%s'\n", what, below_one ? ")" : "]", s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

static void print_text(const cJSON *doc)
{
    const cJSON *d;
    printf("%s: %dx%d, %d detections\n", cJSON_GetObjectItem(doc, "image")->valuestring,
           cJSON_GetObjectItem(doc, "width")->valueint, cJSON_GetObjectItem(doc, "height")->valueint,
           cJSON_GetArraySize(cJSON_GetObjectItem(doc, "detections")));
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(doc, "detections"))
    {
        const cJSON *name = cJSON_GetObjectItem(d, "name");
        printf("  %-12s %5.1f%%  x %.1f y %.1f w %.1f h %.1f\n",
               cJSON_IsString(name) ? name->valuestring : "(class)", 100 * cJSON_GetObjectItem(d, "prob")->valuedouble,
               cJSON_GetObjectItem(d, "x")->valuedouble, cJSON_GetObjectItem(d, "y")->valuedouble,
               cJSON_GetObjectItem(d, "w")->valuedouble, cJSON_GetObjectItem(d, "h")->valuedouble);
    }
}

int mt_detect(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cfg", required_argument, 0, 'c'},       {"weights", required_argument, 0, 'w'},
        {"names", required_argument, 0, 'n'},     {"thresh", required_argument, 0, 't'},
        {"nms", required_argument, 0, 'N'},       {"letterbox", required_argument, 0, 'l'},
        {"fp16", no_argument, 0, 'F'},            {"backend", required_argument, 0, 'b'},
        {"json", no_argument, 0, 'j'},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *cfg = NULL, *weights = NULL, *names_path = NULL, *backend = NULL;
    int json = 0, c;
    mk_letterbox_mode_t mode = MK_LETTERBOX_DARKNET;
    mk_yolo_params_t p = mk_yolo_params_default();
    mk_net_opts_t o = mk_net_opts_default();
    while ((c = getopt_long(argc, argv, "c:w:n:t:N:l:Fb:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cfg = optarg; break;
        case 'w': weights = optarg; break;
        case 'n': names_path = optarg; break;
        case 't':
            if (parse_unit(optarg, &p.thresh, 1, "--thresh"))
                return 2;
            break;
        case 'N':
            if (parse_unit(optarg, &p.nms, 0, "--nms"))
                return 2;
            break;
        case 'l':
            if (!strcmp(optarg, "darknet"))
                mode = MK_LETTERBOX_DARKNET;
            else if (!strcmp(optarg, "warp"))
                mode = MK_LETTERBOX_WARP;
            else {
                fprintf(stderr, "masktool detect: --letterbox is warp or darknet, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'F': o.fp16 = 1; break;
        case 'b': backend = optarg; break;
        case 'j': json = 1; break;
        case 'h': detect_help(); return 0;
        default: fprintf(stderr, "masktool detect: unknown option (see masktool detect --help)\n"); return 2;
        }
    }
    if (!cfg || !weights || optind >= argc) {
        fprintf(stderr, "masktool detect: --cfg, --weights and at least one image are required (see --help)\n");
        return 2;
    }
    mt_names_t names = {0};
    if (names_path && mt_names_load(names_path, &names)) {
        fprintf(stderr, "masktool detect: %s\n", mk_err_msg());
        return 1;
    }
    mk_ctx_t *ctx = mt_ctx(backend);
    mk_net_t *net = NULL;
    int rc = 1;
    if (ctx && mk_net_load(ctx, cfg, weights, &o, &net)) {
        fprintf(stderr, "masktool detect: %s\n", mk_err_msg());
        goto done;
    }
    rc = 0;
    for (int i = optind; ctx && i < argc; i++) {
        mk_image_t img = {0};
        cJSON *doc = NULL;
        if (mk_imageio_load(argv[i], MK_FMT_RGB, &img) ||
            mt_detect_image(ctx, net, &img, mode, &p, argv[i], names_path ? &names : NULL, &doc)) {
            fprintf(stderr, "masktool detect: %s: %s\n", argv[i], mk_err_msg());
            rc = 1; /* the other images still run */
        } else if (json) {
            mt_print_json(doc, 0);
            doc = NULL;
        } else {
            print_text(doc);
        }
        cJSON_Delete(doc);
        mk_image_free(NULL, &img);
    }
done:
    mk_net_destroy(net);
    mk_ctx_destroy(ctx);
    mt_names_free(&names);
    return rc;
}
