/* yolo_cfg: what decoding a network's [yolo] outputs needs from its Darknet .cfg — [net] width/height and each
 * [yolo] section's mask, anchors, classes, num and scale_x_y — and loading dumped [yolo] outputs
 * (NAME.yolo0.f32, NAME.yolo1.f32, ...: Darknet's layout, float32) as mk_yolo_layer_t. Used by `masktool decode`,
 * the decode benchmark and the tests; the network loader (darknet.h) reads whole cfgs. */
#ifndef MT_YOLO_CFG_H
#define MT_YOLO_CFG_H

#include "ctx.h"
#include "image.h"
#include "yolo.h"

typedef struct {
    int net_w, net_h;
    int nlayers;
    /* One per [yolo] section in file order: n, classes, anchors (the masked ones), scale_x_y, net_w/net_h set;
     * w, h and data left 0 (they come from the network or a dump). */
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
} mt_yolo_cfg_t;

/* Parses Darknet cfg text (as Darknet reads it: whitespace removed, lines starting with # or ; skipped). Only
 * [net] and [yolo] are read; other sections are skipped whole. Keys of [yolo] other than the five above are
 * training options and ignored, except new_coords=1 (a different box formula: MK_EUNSUPPORTED). Defaults as
 * Darknet's parse_yolo: classes 20, num 1, mask 0..num-1, scale_x_y 1. Errors name `name`:line: MK_EFORMAT for
 * bad numbers, missing or inconsistent values, no [net] size or no [yolo] section. */
int mt_yolo_cfg_parse(const char *text, const char *name, mt_yolo_cfg_t *out);
/* mt_yolo_cfg_parse of a file (MK_EIO if unreadable). */
int mt_yolo_cfg_read(const char *path, mt_yolo_cfg_t *out);

/* Loads PREFIX.yoloK.f32 for each of the cfg's [yolo] layers into host memory: layers[k] is the cfg's layer with
 * data (malloc'ed, the caller frees each with free()) and the grid size, which follows from the file size and the
 * network's aspect (a grid of w x h cells with w / h = net_w / net_h). MK_EIO, MK_EFORMAT (size not a whole grid). */
int mt_yolo_dump_load(const mt_yolo_cfg_t *cfg, const char *prefix, mk_yolo_layer_t *layers);

/* Layers whose data is in ctx's memory: on CUDA each layer is uploaded into imgs[k] (freed by the caller with
 * mk_image_free(ctx, ...)), on the CPU the host data is used as it is (imgs[k] stays empty). The upload is
 * asynchronous: keep `host` until the next mk_ctx_sync (mk_yolo_detect waits for it). */
int mt_yolo_layers_to_ctx(mk_ctx_t *ctx, const mk_yolo_layer_t *host, int nlayers, mk_image_t *imgs,
                          mk_yolo_layer_t *out);

#endif
