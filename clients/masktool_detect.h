/* masktool_detect: the detection side of masktool shared by `detect`, `decode`, the decode benchmark and the
 * tests — class names and the JSON object printed per image. */
#ifndef MASKTOOL_DETECT_H
#define MASKTOOL_DETECT_H

#include "ctx.h"
#include "darknet.h"
#include "letterbox.h"
#include "yolo.h"

#include <cjson/cJSON.h>

/* Class names, one per line of a .names file (Darknet's format). */
typedef struct {
    char **name;
    int n;
} mt_names_t;

int mt_names_load(const char *path, mt_names_t *out);
void mt_names_free(mt_names_t *names);
/* The name of a class, or NULL when unknown (no names, or a class beyond the list). */
const char *mt_names_get(const mt_names_t *names, int class_id);

/* The detections of one image as a JSON object:
 *   {"image": IMAGE, "width": W, "height": H, "backend": "cpu"|"cuda",
 *    "detections": [{"class": C, "name": NAME|null, "prob": P, "objectness": O, "x": X, "y": Y, "w": W, "h": H}]}
 * boxes in source pixels, x/y the top-left corner; floats printed to 9 significant digits (exact for float). */
cJSON *mt_detections_json(const char *image, int width, int height, const char *backend, const mk_detection_t *d,
                          int n, const mt_names_t *names);

/* The most detections a decode of these layers can return with these parameters: top_k, or every (box, class)
 * pair (at most 2^20). */
int mt_yolo_max_detections(const mk_yolo_layer_t *layers, int nlayers, const mk_yolo_params_t *p);

/* Decode + NMS of one image's [yolo] outputs (in ctx's memory) and its JSON object (mt_detections_json; the
 * caller deletes it). `lb` is the letterbox that made the network input; its source size is the image's. */
int mt_detect_json(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                   const mk_yolo_params_t *p, const char *image, const mt_names_t *names, cJSON **out);

/* The whole detector on one image: `rgb` (host, RGB u8) letterboxed in `mode` to the network's input, the forward
 * pass, decode + NMS (mt_detect_json). Runs on ctx's backend; the net must have been loaded on ctx. */
int mt_detect_image(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *rgb, mk_letterbox_mode_t mode,
                    const mk_yolo_params_t *p, const char *image, const mt_names_t *names, cJSON **out);

#endif
