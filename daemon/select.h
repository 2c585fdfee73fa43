/* select: which box of a frame is cut out — the classes that count as a person, the choice among the detector's
 * boxes (minimum score, preferring the previous target), holding the last box through frames without a
 * detection, the fallback rectangle without a detector, and the region of interest around the box (margin).
 *
 * Boxes are in frame pixels (x, y = top-left corner). The choice per frame:
 *  - candidates: detections of a person class (mk_select_classes) with score >= select.min_score;
 *  - with select.prefer_previous and a current target, the candidate overlapping it most (IoU > 0) is taken,
 *    else the best-scoring one; the target keeps its track id while the chosen box overlaps the previous one
 *    (IoU >= MK_SELECT_TRACK_IOU), and gets a new one otherwise;
 *  - no candidate: the target box is held for select.hold_frames frames (result MK_SELECT_HELD), then dropped
 *    (MK_SELECT_NONE: the frame's mask is empty and flagged no-person).
 * This is bookkeeping of a few boxes per frame; pixels are the kernels' business.
 *
 * Thread rules: a state belongs to one thread (the pipeline's processing thread). */
#ifndef MK_SELECT_H
#define MK_SELECT_H

#include "config.h"
#include "yolo.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_SELECT_TRACK_IOU 0.3f
/* Class ids a class set can hold. */
#define MK_SELECT_MAX_CLASSES 1024

typedef struct {
    float x, y, w, h;
} mk_box_t;

/* Classes that count as a person. */
typedef struct {
    int all; /* every class (detect.classes empty) */
    uint64_t bits[MK_SELECT_MAX_CLASSES / 64];
} mk_class_set_t;

/* Parses detect.classes: comma-separated indices or names (looked up in names[0..nnames-1]; names may be NULL),
 * spaces around items ignored; empty: every class. MK_EINVAL (message names the item) for an unknown name or an
 * index outside 0..MK_SELECT_MAX_CLASSES-1. */
int mk_select_classes(const char *spec, const char *const *names, int nnames, mk_class_set_t *out);
int mk_select_class_in(const mk_class_set_t *set, int class_id);
/* The only class of the set when it has exactly one (so the detector can decode just that class), else -1. */
int mk_select_class_single(const mk_class_set_t *set);

typedef enum {
    MK_SELECT_NONE = 0,     /* no target: empty mask */
    MK_SELECT_DETECTED = 1, /* a detection was chosen (*chosen is its index) */
    MK_SELECT_HELD = 2,     /* no candidate: the previous target box is held */
    MK_SELECT_FALLBACK = 3, /* no detector: the fallback rectangle */
} mk_select_result_t;

typedef struct {
    int have;           /* a current target */
    mk_box_t box;       /* its box */
    uint32_t track_id;  /* its track id (>= 1) */
    int missed;         /* frames since it was last detected */
    uint32_t next_track;
} mk_select_state_t;

void mk_select_init(mk_select_state_t *st);

/* IoU of two boxes (0 for empty ones). */
float mk_box_iou(const mk_box_t *a, const mk_box_t *b);

/* One frame's choice among n detections (n may be 0); classes filter them. *chosen: the index of the chosen
 * detection or -1; *box: the target box (NONE: zeros); *track: its track id (0 for NONE). */
mk_select_result_t mk_select_choose(mk_select_state_t *st, const mk_config_t *cfg, const mk_class_set_t *classes,
                                    const mk_detection_t *dets, int n, int *chosen, mk_box_t *box,
                                    uint32_t *track);

/* The fallback rectangle of select.fallback for a w x h frame: as configured, clipped to the frame; w or h 0: the
 * centred box of half the frame's width and 80% of its height. Empty when the configured one lies outside. */
mk_box_t mk_select_fallback(const mk_config_t *cfg, int w, int h);

/* The region of interest around `box` in a w x h frame: the box grown by select.margin of its width and height
 * on each side, rounded outwards to whole pixels and clipped to the frame: roi = {x, y, w, h}. Returns 0 when it
 * is at least min_side pixels on each side, else MK_ERANGE (too small to cut). */
int mk_select_roi(const mk_box_t *box, double margin, int w, int h, int min_side, int roi[4]);

/* Region hysteresis: when the new region `roi` is no wider and no taller than `prev` (the last frame's region; w or
 * h 0: none) and at least 7/8 of it on each side, it takes prev's size, centred on where it was and moved only as
 * far as needed to stay inside the w x h frame while still containing the new region. So GrabCut keeps its working
 * size while a box jitters (a frame's max-flow can then start from the flow of the frame before: grabcut.warm_start),
 * and the box always stays inside. Returns 1 when it kept prev's size, else 0 (roi unchanged). */
int mk_select_roi_keep(const int prev[4], int roi[4], int w, int h);

const char *mk_select_result_name(mk_select_result_t r);

#ifdef __cplusplus
}
#endif
#endif
