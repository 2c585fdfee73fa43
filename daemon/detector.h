/* detector: the person detector of the pipeline — a Darknet network (detect.cfg, detect.weights, detect.names)
 * loaded on the pipeline's context, run on a frame as letterbox -> forward -> YOLO decode + NMS, every step a
 * kernels op on the context's backend. Boxes come back in frame pixels.
 *
 * Thread rules: as the context it was opened on (the pipeline's processing thread). */
#ifndef MK_DETECTOR_H
#define MK_DETECTOR_H

#include "config.h"
#include "ctx.h"
#include "yolo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_detector mk_detector_t;

/* Loads detect.cfg with detect.weights (both required) and detect.names (optional) on ctx. Errors name the file
 * (MK_EIO, MK_EFORMAT, MK_EUNSUPPORTED, ...). */
int mk_detector_open(mk_ctx_t *ctx, const mk_config_t *cfg, mk_detector_t **out);
void mk_detector_close(mk_detector_t *d);

/* Detects on `frame` (u8 RGB, BGR or YUYV in the context's memory) with detect.thresh, detect.nms and
 * detect.letterbox from cfg, decoding only class_id (or every class: -1). At most max detections, most probable
 * first, into out (host memory); *n their number. */
int mk_detector_run(mk_detector_t *d, const mk_image_t *frame, const mk_config_t *cfg, int class_id,
                    mk_detection_t *out, int max, int *n);

/* The network's input size and classes; the class names (NULL when detect.names is empty) and their count. */
void mk_detector_info(const mk_detector_t *d, int *net_w, int *net_h, int *classes);
const char *const *mk_detector_names(const mk_detector_t *d, int *n);
/* Multiply-adds of one forward pass times 2. */
double mk_detector_flops(const mk_detector_t *d);

#ifdef __cplusplus
}
#endif
#endif
