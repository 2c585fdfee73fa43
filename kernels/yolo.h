/* yolo: one [yolo] layer's raw output and everything decoding it needs (anchors, grid, scale_x_y, network size);
 * decode + NMS of a network's [yolo] outputs into detections in source-image pixels, equal to Darknet's.
 *
 * The network (darknet.h, mk_net_yolo_output) fills the layer descriptor; mk_yolo_detect consumes it. `data` is the
 * layer's output exactly as Darknet lays it out, float32, in the memory of the context (host for CPU, device for
 * CUDA): for each of the n anchors a block of (4 + 1 + classes) planes of h rows of w values,
 *   data[((a * (5 + classes) + e) * h + y) * w + x]
 * with entry e = 0: x, 1: y (logistic, then scale_x_y applied as Darknet's forward_yolo_layer does:
 * v * scale_x_y - (scale_x_y - 1) / 2, so decode must NOT apply it again), 2: w, 3: h (raw: the box size is
 * anchor * exp(v)), 4: objectness, 5..: class scores (both logistic). The box centre of cell (x, y) in network
 * pixels is ((x + data_x) / w * net_w, (y + data_y) / h * net_h), its size
 * (anchors[2a] * exp(data_w), anchors[2a+1] * exp(data_h)) — Darknet's get_yolo_box.
 *
 * Decode + NMS (mk_yolo_detect) reproduces AlexeyAB Darknet's get_network_boxes(..., letter = 1) followed by
 * do_nms_sort and the listing of every (box, class) whose probability exceeds the threshold:
 *  - a box is a candidate when its objectness > thresh; its probability for class c is objectness * score_c
 *    (float), counted only when > thresh;
 *  - the box (get_yolo_box, relative to the network input) is mapped to the source image through the letterbox:
 *    darknet mode with correct_yolo_boxes' own arithmetic (float/double as there), warp mode through the warp's
 *    inverse matrix exactly as mk_letterbox_box_to_src;
 *  - per class, boxes in order of decreasing probability suppress every later box of that class whose IoU with
 *    them (Darknet's box_iou, in float) is > nms; suppressed boxes suppress nothing (greedy). Darknet leaves the
 *    order of equal probabilities to qsort; here they are ordered by `index` (Darknet's detection order), so the
 *    result is fully determined and equal on both backends;
 *  - the survivors are returned most probable first (then class, then index), at most top_k and max_out of them.
 * The CPU and CUDA backends share the per-box arithmetic (yolo_px.h) and return identical detections, bit for bit.
 *
 * Thread rules: as every op, on the context's thread. mk_yolo_detect returns its results in host memory, so on
 * CUDA it waits for the device once, at the end (one copy of the results). */
#ifndef MK_YOLO_H
#define MK_YOLO_H

#include "image.h"
#include "letterbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most anchors one [yolo] layer may use (its mask= entries). */
#define MK_YOLO_MAX_ANCHORS 16
/* Most [yolo] layers one decode takes (Darknet's networks have 2 or 3). */
#define MK_YOLO_MAX_LAYERS 8
/* Most boxes (cells x anchors over all layers) one decode takes: a 2048x2048 YOLOv4 has 258048. */
#define MK_YOLO_MAX_BOXES (1 << 18)

typedef struct {
    int w, h;        /* grid size (cells) */
    int n;           /* anchors of this layer (mask entries), 1..MK_YOLO_MAX_ANCHORS */
    int classes;
    float anchors[2 * MK_YOLO_MAX_ANCHORS]; /* (w, h) of anchor a at [2a], [2a+1], in network-input pixels */
    float scale_x_y; /* already applied to data (see above); for information */
    int net_w, net_h; /* network input size the anchors refer to */
    const float *data; /* n * (5 + classes) * h * w floats, Darknet's layout, in the context's memory */
} mk_yolo_layer_t;

typedef struct {
    float thresh; /* Darknet's -thresh, 0 <= thresh < 1: objectness and class probability must exceed it */
    float nms;    /* Darknet's nms, 0..1: IoU above which a box is suppressed; 0 turns NMS off (Darknet's `if (nms)`) */
    int top_k;    /* at most this many detections (the most probable); 0: no limit besides max_out */
    int class_id; /* decode only this class (e.g. 0, person), or -1 for every class */
} mk_yolo_params_t;

/* thresh 0.25, nms 0.45 (Darknet's detector defaults), no top-k, every class. */
mk_yolo_params_t mk_yolo_params_default(void);

typedef struct {
    float x, y, w, h;  /* box in source-image pixels: top-left corner and size (may reach outside the image) */
    float prob;        /* objectness * class score, > thresh */
    float objectness;
    int class_id;
    int index;         /* the box in Darknet's detection order: layer, then cell (row-major), then anchor */
} mk_detection_t;

/* Decodes `nlayers` [yolo] outputs of one image and runs NMS. `lb` is the plan of the letterbox that made the
 * network input (mk_letterbox_plan or mk_letterbox's `plan`): its network size must be every layer's net_w x net_h.
 * All layers must have the same number of classes. Writes at most max_out detections (fewer with top_k) to `out`
 * (host memory), most probable first, and their number to *n_out.
 * Memory: the CUDA backend keeps a scratch of about 40 bytes per box plus 8 per (box, class) in the context, and
 * copies max_out (or top_k) entries back per call: size them to what you use.
 * Errors: MK_EINVAL / MK_ERANGE for inconsistent layers, letterbox or parameters (on CUDA also for layer data
 * that is not device memory), backend errors. */
int mk_yolo_detect(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                   const mk_yolo_params_t *p, mk_detection_t *out, int max_out, int *n_out);

#ifdef __cplusplus
}
#endif
#endif
