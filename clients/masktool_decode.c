/* masktool_decode: `masktool decode` — decode + NMS of dumped [yolo] outputs, printed as `detect` prints them. */
#include "masktool.h"
#include "masktool_detect.h"
#include "yolo_cfg.h"

#include "errors.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void decode_help(void)
{
    puts("usage: masktool decode --cfg C --yolo DIR/NAME --image-size WxH [--names N] [--thresh T] [--nms N]\n"
         "                       [--letterbox darknet|warp] [--top-k K] [--class ID] [--image NAME]\n"
         "                       [--backend auto|cpu|cuda] [--pretty]\n"
         "\n"
         "Runs decode + NMS on dumped [yolo] outputs and prints the JSON object `detect` prints for an image.\n"
         "  --cfg C          the network's Darknet cfg ([net] size and [yolo] sections are read)\n"
         "  --yolo DIR/NAME  reads DIR/NAME.yolo0.f32, DIR/NAME.yolo1.f32, ... (one per [yolo], Darknet's layout,\n"
         "                   float32: `masktool forward --dump-yolo` or reference/darknet of the test data)\n"
         "  --image-size WxH the source image the network input was made from\n"
         "  --letterbox M    how that input was made: darknet (default) or warp\n"
         "  --names N        class names, one per line (coco.names)\n"
         "  --thresh T       objectness and class probability threshold (default 0.25)\n"
         "  --nms N          IoU above which a box of the same class is suppressed; 0 = no NMS (default 0.45)\n"
         "  --top-k K        at most K detections, most probable first (default: all)\n"
         "  --class ID       only class ID (default: all)\n"
         "  --image NAME     the image's name in the output (default: NAME)\n"
         "Output: {image, width, height, backend, detections: [{class, name, prob, objectness, x, y, w, h}]},\n"
         "boxes in source pixels with x, y the top-left corner.");
}

static int parse_float(const char *s, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "masktool decode: %s (see masktool decode --help)\n", msg);
    return 2;
}

int mt_decode(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cfg", required_argument, 0, 'c'},     {"yolo", required_argument, 0, 'y'},
        {"image-size", required_argument, 0, 's'}, {"names", required_argument, 0, 'N'},
        {"thresh", required_argument, 0, 't'},  {"nms", required_argument, 0, 'n'},
        {"letterbox", required_argument, 0, 'l'}, {"top-k", required_argument, 0, 'k'},
        {"class", required_argument, 0, 'C'},   {"image", required_argument, 0, 'i'},
        {"backend", required_argument, 0, 'b'}, {"pretty", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *cfg_path = NULL, *prefix = NULL, *names_path = NULL, *image = NULL, *backend = NULL;
    int iw = 0, ih = 0, pretty = 0, c;
    mk_yolo_params_t p = mk_yolo_params_default();
    mk_letterbox_mode_t mode = MK_LETTERBOX_DARKNET;
    while ((c = getopt_long(argc, argv, "c:y:s:N:t:n:l:k:C:i:b:ph", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cfg_path = optarg; break;
        case 'y': prefix = optarg; break;
        case 's':
            if (mt_parse_size(optarg, &iw, &ih))
                return 2;
            break;
        case 'N': names_path = optarg; break;
        case 't':
            if (parse_float(optarg, 0.0f, 0.999999f, &p.thresh))
                return usage_error("--thresh must be in [0, 1)");
            break;
        case 'n':
            if (parse_float(optarg, 0.0f, 1.0f, &p.nms))
                return usage_error("--nms must be in [0, 1]");
            break;
        case 'l':
            if (mk_letterbox_mode_parse(optarg, &mode))
                return usage_error(mk_err_msg());
            break;
        case 'k':
            if (mt_parse_int(optarg, 1, 1 << 20, &p.top_k))
                return usage_error("--top-k must be a positive count");
            break;
        case 'C':
            if (mt_parse_int(optarg, 0, 1 << 20, &p.class_id))
                return usage_error("--class must be a class number");
            break;
        case 'i': image = optarg; break;
        case 'b': backend = optarg; break;
        case 'p': pretty = 1; break;
        case 'h': decode_help(); return 0;
        default: return usage_error("unknown option");
        }
    }
    if (optind != argc)
        return usage_error("unexpected argument");
    if (!cfg_path || !prefix || !iw)
        return usage_error("--cfg, --yolo and --image-size are required");
    if (!image) {
        const char *slash = strrchr(prefix, '/');
        image = slash ? slash + 1 : prefix;
    }

    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    mt_yolo_cfg_t cfg;
    mt_names_t names = {0};
    mk_yolo_layer_t host[MK_YOLO_MAX_LAYERS] = {{0}}, dev[MK_YOLO_MAX_LAYERS];
    mk_image_t imgs[MK_YOLO_MAX_LAYERS] = {{0}};
    mk_letterbox_t lb;
    cJSON *json = NULL;
    int rc, loaded = 0;
    if (!(rc = mt_yolo_cfg_read(cfg_path, &cfg)) && !(rc = mt_yolo_dump_load(&cfg, prefix, host)))
        loaded = 1;
    if (!rc && names_path)
        rc = mt_names_load(names_path, &names);
    if (!rc && !(rc = mk_letterbox_plan(&lb, iw, ih, cfg.net_w, cfg.net_h, mode)) &&
        !(rc = mt_yolo_layers_to_ctx(ctx, host, cfg.nlayers, imgs, dev)))
        rc = mt_detect_json(ctx, dev, cfg.nlayers, &lb, &p, image, names_path ? &names : NULL, &json);
    if (rc)
        fprintf(stderr, "masktool decode: %s\n", mk_err_msg());
    else
        mt_print_json(json, pretty);
    for (int k = 0; loaded && k < cfg.nlayers; k++) {
        mk_image_free(ctx, &imgs[k]);
        free((void *)host[k].data);
    }
    mt_names_free(&names);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
