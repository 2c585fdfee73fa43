/* segment: the per-frame segmentation engine — everything maskd does to one decoded frame, from the host image to
 * its masks in host memory, with up to pipeline.inflight frames in flight:
 *
 *   upload -> YUYV to RGB -> detect (letterbox, forward, decode + NMS, every detect.every_n frames, when a
 *   detector is configured; detect.classes filters) -> box choice (select.*: tracking, holding, fallback) -> ROI
 *   -> cut (cut.method; GrabCut with its keyframes) -> guided upsampling and the mask products (guided.*, mask.*)
 *   -> download into page-locked host memory -> synchronise
 *
 * The bus, statistics, events and READY bookkeeping stay with the caller (daemon/pipeline.c, masktool).
 *
 * Frames in flight. The engine has `depth` slots (pipeline.inflight, 1..MK_SEGMENT_MAX_INFLIGHT); each has its
 * own compute context (its own CUDA stream), its own working images and page-locked outputs, and its own host
 * thread. Frame k (counted from 0 in submission order) always goes to slot k % depth, so frame k+1's upload,
 * detection, guided filter and download overlap frame k's GrabCut on the GPU, and on the CPU backend `depth`
 * frames are computed by `depth` threads at once. Results come back in submission order, and they are IDENTICAL
 * to those of depth 1 on the same frames, because the state carried from frame to frame is handed over in frame
 * order:
 *   - detection: one network, loaded once on the engine's own context (a second load could choose other
 *     convolution kernels by timing and so give other FP16 results); frames take turns in frame order (a ticket:
 *     frame k+1 detects after frame k), so detect.every_n reuses the detections of the frame before, as at depth
 *     1. On CUDA the detector's stream first waits for the slot's upload and conversion (an event,
 *     mk_ctx_wait), and the detector synchronises its stream to read the detections back, so the slot's frame is
 *     no longer read when the slot goes on.
 *   - box choice (select.c): in the same turn, after the detection: frame k+1's choice sees frame k's target.
 *   - GrabCut (cut.c): the working images are per slot (mk_cut_work_t); the model, the keyframe's rectangle and
 *     size and the count of frames since it are shared. Each frame decides keyframe or not in frame order, from
 *     the decisions of the frames before it and the outcome of the last keyframe only: a keyframe whose learning
 *     fails (no foreground or background, a degenerate model) drops the model; a fixed-model cut that fails
 *     (no foreground, say) cuts its box and keeps the model. So frame k+1 waits for frame k's cut only when k is
 *     a keyframe (it needs the model k learns).
 * The cost: a frame's detection waits for the frames before it to have detected, and a frame after a keyframe
 * waits for that keyframe's GrabCut.
 *
 * Configuration. The configuration of a frame is the one in force when it was submitted (each frame carries a
 * copy), so live changes apply from a frame boundary as in a sequential pipeline. mk_segment_set_config() drains
 * the frames in flight first when the change is structural (cut.method: the cut object is replaced); the
 * restart-only options that the engine was built with (backend, detect.cfg/weights/names/fp16/cudnn, pipeline.inflight)
 * are kept as they were at creation.
 *
 * Errors. A frame that fails (a frame the ops refuse, a CUDA error) comes back with rc < 0 and its message in
 * `err`; it still takes its turns, so the frames after it go on. Arguments that cannot be a frame at all are
 * refused by mk_segment_submit() without taking a frame number.
 *
 * Thread rules: create, destroy, submit, collect, release, set_config, set_depth and reset on one thread (the
 * owner's; submit and collect may be on two threads only if the owner serialises them itself). The slot threads
 * are the engine's. Results are the owner's between collect and release. */
#ifndef MK_SEGMENT_H
#define MK_SEGMENT_H

#include "config.h"
#include "ctx.h"
#include "decode.h"
#include "detector.h"
#include "image.h"
#include "maskbus.h"
#include "select.h"
#include "yolo.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_segment mk_segment_t;

#define MK_SEGMENT_MAX_INFLIGHT 4
/* Detections one frame may have. */
#define MK_SEGMENT_MAX_DETS 256
/* Smallest region of interest cut, in pixels per side (a smaller one gives an empty mask, NO_PERSON). */
#define MK_SEGMENT_MIN_ROI 4

/* Statuses of submit and collect (errors are negative MK_E*). */
enum {
    MK_SEGMENT_OK = 0,
    MK_SEGMENT_AGAIN = 1, /* submit: the frame's slot still holds an unreleased result or a frame in process after
                           * timeout_ms; collect: the next result was not done within timeout_ms */
    MK_SEGMENT_EMPTY = 2, /* collect: no frame in flight */
};

/* Wall-clock milliseconds of one frame's stages on its slot's thread. On CUDA most work is queued without
 * waiting, so a stage's time is the host's time in it: detect and cut include the GPU work they synchronise on
 * (the detector reads its detections back; GrabCut reads its status), download includes the rest of the frame's
 * GPU work (the final synchronisation). */
typedef struct {
    double upload;   /* upload and YUYV to RGB */
    double wait;     /* waiting for the detection turn (the frames before in the detector) */
    double detect;   /* letterbox, forward, decode + NMS (0 on frames that reuse detections) */
    double select;   /* box choice and ROI */
    double cut;      /* the cut, with any wait for the GrabCut turn or an earlier keyframe's model */
    double guided;   /* guided upsampling and the mask products (or the empty mask) */
    double download; /* copies into page-locked memory and the final synchronisation */
    double total;    /* from the slot taking the frame to the result being done */
} mk_segment_times_t;

typedef struct {
    /* the frame */
    uint64_t index;         /* engine frame number: 0, 1, 2, ... in submission order (since create or reset) */
    uint64_t seq;           /* as submitted */
    int64_t capture_ns;     /* as submitted */
    void *user;             /* as submitted */
    mk_decoded_t decoded;   /* mk_segment_submit_decoded()'s frame (the caller releases it to its pool after
                             * mk_segment_release); zeros otherwise */
    int width, height;
    int rc;                 /* 0, or the negative MK_E* code that failed the frame: the images below are then
                             * not valid, detections and box may be partial */
    char err[256];          /* rc's message */

    /* masks and frame, host memory (page-locked on CUDA), owned by the engine until mk_segment_release */
    mk_image_t mask;        /* u8 GRAY, width x height: the published mask (mask.threshold applied) */
    mk_image_t alpha;       /* mask.alpha: the soft alpha matte (the same pixels as mask when mask.threshold is
                             * none); data NULL without mask.alpha */
    mk_image_t frame;       /* bus.frame and an RGB frame: the RGB frame the masks belong to (on the CPU backend
                             * possibly the submitted image itself); data NULL otherwise */
    uint32_t flags;         /* MASKBUS_FLAG_KEYFRAME (a cut was made), MASKBUS_FLAG_NO_PERSON (empty mask) */

    /* detection and choice */
    mk_detection_t dets[MK_SEGMENT_MAX_DETS]; /* the frame's detections (of detect.classes), frame pixels, most
                                               * probable first; reused ones on frames between detections */
    int ndets;
    int detected;           /* 1: the detector ran on this frame (det_rc says whether it failed); 0: detections
                             * reused (detect.every_n), no detector, or the frame failed before detection */
    int det_rc;             /* the detector's error on this frame (the frame then has no detections), else 0 */
    int detector_off;       /* 1: the detector failed with MK_EUNSUPPORTED on this frame and is switched off
                             * (select.fallback from now on); det_err says why */
    char det_err[256];
    int chosen;             /* index in dets of the chosen detection, -1 if none */
    mk_select_result_t select; /* how the box was chosen (NONE: empty mask) */
    mk_box_t box;           /* the target box (zeros for NONE) */
    uint32_t track;         /* its track id (0 for NONE) */
    int roi[4];             /* the region cut, x, y, w, h (zeros for NONE) */
    int gc_keyframe;        /* cut.method grabcut: 1 when this frame learnt the model (a keyframe) */

    mk_segment_times_t ms;
    uint64_t submit_ns, done_ns; /* CLOCK_MONOTONIC: submission, result done (masks in host memory) */
} mk_segment_result_t;

/* Builds the engine with cfg (copied): pipeline.inflight slots on the backend `cfg->backend`, the detector when
 * detect.cfg and detect.weights are set (loaded once), the cut of cut.method, the box choice's class set
 * (detect.classes, resolved against detect.names). Errors carry a message (no device, a model that does not
 * load, an unknown class). */
int mk_segment_create(const mk_config_t *cfg, mk_segment_t **out);
/* Finishes the frames in flight (their results are dropped; mk_decoded_t frames in them are NOT released: the
 * caller collects first if it needs them back), stops the threads and frees everything. NULL is a no-op. */
void mk_segment_destroy(mk_segment_t *s);

/* The frame boundary for a new configuration: the frames submitted after this call use it. Drains the frames in
 * flight first when cut.method changed. The options the engine was built with (see above) keep their creation
 * values. MK_EINVAL (nothing applied) when detect.classes does not resolve. */
int mk_segment_set_config(mk_segment_t *s, const mk_config_t *cfg);
/* Uses the first `depth` slots from the next frame on (1..the depth it was created with); drains first. */
int mk_segment_set_depth(mk_segment_t *s, int depth);
/* Drains, then forgets everything carried across frames (the target and its tracks, the GrabCut model, the
 * detections for detect.every_n, the frame numbers): the next frame is handled as the first after create. */
int mk_segment_reset(mk_segment_t *s);

/* Hands a host frame (u8 RGB, BGR or YUYV, 1..MK_IMAGE_MAX_DIM pixels a side) to the engine as frame number
 * `index` = the frames submitted so far. The image is NOT copied: it must stay valid and unchanged until its result is released.
 * Waits up to timeout_ms (< 0: as long as needed) for the frame's slot; MK_SEGMENT_AGAIN when it stayed busy (the
 * caller has to collect and release the older results: a slot is free again once the result of frame
 * index - depth is released). MK_EINVAL for an image that is no frame (NULL data, not host memory, a format or
 * size the engine does not take). */
int mk_segment_submit(mk_segment_t *s, const mk_image_t *frame, uint64_t seq, int64_t capture_ns, void *user,
                      int timeout_ms);
/* The same for a decoded frame of decode.h: seq and capture_ns from it, and it comes back in the result's
 * `decoded` (still owned by the caller's pool). */
int mk_segment_submit_decoded(mk_segment_t *s, const mk_decoded_t *d, int timeout_ms);
/* The next result in submission order, once it is done. Waits up to timeout_ms (< 0: as
 * long as needed); MK_SEGMENT_AGAIN if it is not done by then, MK_SEGMENT_EMPTY when no frame was submitted and
 * not yet collected. The result is the caller's until mk_segment_release(). */
int mk_segment_collect(mk_segment_t *s, int timeout_ms, mk_segment_result_t **out);
/* Gives a collected result back (its slot takes the next frame). */
void mk_segment_release(mk_segment_t *s, mk_segment_result_t *r);

/* Frames submitted and not yet collected; the depth in use; the depth built. */
int mk_segment_pending(const mk_segment_t *s);
int mk_segment_depth(const mk_segment_t *s);
int mk_segment_max_depth(const mk_segment_t *s);

/* The backend, the device's name ("CPU" on the CPU backend), and the device's free and total memory
 * (mk_ctx_device_memory; MK_EUNSUPPORTED on the CPU backend). Any time, on the owner's thread. */
mk_backend_t mk_segment_backend(const mk_segment_t *s);
const char *mk_segment_device_name(const mk_segment_t *s);
int mk_segment_device_memory(mk_segment_t *s, size_t *free_bytes, size_t *total_bytes);
/* The detector (NULL without one): for mk_detector_info/names/flops only — the engine runs it. It stays loaded
 * after it was switched off (until destroy), so its names stay valid. */
const mk_detector_t *mk_segment_detector(const mk_segment_t *s);
/* 1 while the detector is in use (loaded and not switched off). */
int mk_segment_detecting(const mk_segment_t *s);
/* A result as a frame for maskbus_writer_publish: sequence, capture time, size, flags, the mask plane and the
 * alpha and frame planes it has, and its detections into bd (the chosen one first, with its track, so that it is
 * never among those beyond the bus's limit). fr points into r and bd. */
void mk_segment_bus_frame(const mk_segment_result_t *r, maskbus_frame_in_t *fr,
                          maskbus_detection_t bd[MASKBUS_MAX_DETECTIONS]);

/* The name of the cut method in use ("box", "grabcut", ...). */
const char *mk_segment_cut_name(const mk_segment_t *s);

#ifdef __cplusplus
}
#endif
#endif
