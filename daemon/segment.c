/* segment: the per-frame segmentation engine — slots with their own contexts and threads, frames handed to them
 * round robin, the detection and box choice taken in frame order, the cut ordered by cut.c, results in order. */
#include "segment.h"

#include "cut.h"
#include "errors.h"
#include "guided.h"
#include "log.h"
#include "mask.h"
#include "yuyv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum {
    SLOT_FREE = 0, /* no frame */
    SLOT_QUEUED,   /* a frame submitted, not yet taken by the slot's thread */
    SLOT_BUSY,     /* being segmented */
    SLOT_DONE,     /* its result is ready */
    SLOT_OUT,      /* its result is the caller's (collected, not yet released) */
} slot_state_t;

typedef struct {
    mk_segment_t *s;
    pthread_t th;
    int started;
    mk_ctx_t *ctx;
    mk_cut_work_t *work;
    slot_state_t state; /* under s->mu */
    /* the frame (written by submit before QUEUED, read by the slot's thread after) */
    mk_image_t input;
    mk_config_t cfg;
    mk_class_set_t classes;
    int single_class;
    mk_cut_t *cut;
    mk_segment_result_t res;
    /* working images (the slot's thread) */
    mk_image_t rgb, dev_in, dev_rgb, low, mask, alpha, h_mask, h_alpha, h_rgb;
} slot_t;

struct mk_segment {
    mk_config_t boot; /* at creation: the options kept (backend, detect.cfg/weights/names/fp16/cudnn, inflight) */
    mk_config_t cfg;  /* for the next submitted frame */
    mk_class_set_t classes;
    int single_class;
    mk_ctx_t *dctx;   /* the detector's context, also the engine's for device queries */
    mk_detector_t *det;
    int det_off;      /* switched off after MK_EUNSUPPORTED (the frame holding the detection turn writes it) */
    mk_cut_t *cut;
    int max_depth, depth;
    slot_t slots[MK_SEGMENT_MAX_INFLIGHT];

    pthread_mutex_t mu;
    pthread_cond_t cv; /* every change of a slot's state or of det_next */
    int quit;
    uint64_t submitted;  /* frames submitted (the next frame's index) */
    uint64_t collected;  /* frames collected */
    int sub_slot, col_slot; /* the slots of the next submitted and the next collected frame */
    uint64_t det_next;   /* the frame whose turn it is to detect and choose */

    /* carried across frames; touched only by the frame holding the detection turn */
    mk_select_state_t sel;
    mk_detection_t dets[MK_SEGMENT_MAX_DETS];
    int ndets, have_dets;
    int roi_prev[4];  /* the last frame's region (mk_select_roi_keep), zeros after a frame without one */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms_between(uint64_t a, uint64_t b)
{
    return (double)(b - a) / 1e6;
}

/* Waits on s->cv until `deadline` (CLOCK_MONOTONIC ns; 0: no limit). 1 when the deadline has passed. */
static int wait_until(mk_segment_t *s, uint64_t deadline)
{
    if (!deadline) {
        pthread_cond_wait(&s->cv, &s->mu);
        return 0;
    }
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    return pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && now_ns() >= deadline;
}

static uint64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* ---- one frame, on its slot's thread ------------------------------------------------------------------------ */

/* (Re)allocates img for the geometry unless it has it. */
static int ensure(mk_ctx_t *ctx, mk_image_t *img, int w, int h, mk_format_t fmt, mk_mem_t mem)
{
    if (img->data && img->width == w && img->height == h && img->format == fmt && img->mem == mem)
        return 0;
    mk_image_free(ctx, img);
    *img = mk_image_desc(w, h, fmt, MK_U8);
    return mk_image_alloc(ctx, img, mem);
}

/* A w x h view at (x, y) of an interleaved u8 image. */
static mk_image_t view(const mk_image_t *img, int x, int y, int w, int h)
{
    mk_image_t v = *img;
    v.data = (uint8_t *)img->data + (size_t)y * img->pitch + (size_t)x * (size_t)img->channels;
    v.width = w;
    v.height = h;
    v.owned = 0;
    return v;
}

static mk_mask_t mask_product(const mk_config_t *cfg, int x, int y)
{
    mk_mask_t m = {MK_MASK_ALPHA, (float)cfg->mask.value, (float)cfg->mask.feather, x, y};
    if (cfg->mask.threshold == MK_CFG_THRESH_FIXED)
        m.mode = MK_MASK_BINARY;
    else if (cfg->mask.threshold == MK_CFG_THRESH_OTSU)
        m.mode = MK_MASK_OTSU;
    return m;
}

/* The frame as u8 RGB (or BGR) in the slot's context's memory. */
static int upload(slot_t *sl, mk_image_t *frame)
{
    mk_ctx_t *ctx = sl->ctx;
    mk_mem_t mem = mk_ctx_mem(ctx);
    const mk_image_t *host = &sl->input;
    int w = host->width, h = host->height, rc;
    if (mem == MK_MEM_HOST) {
        if (host->format != MK_FMT_YUYV) {
            *frame = *host;
            return 0;
        }
        if ((rc = ensure(ctx, &sl->rgb, w, h, MK_FMT_RGB, MK_MEM_HOST)) || (rc = mk_yuyv_to_rgb(ctx, host, &sl->rgb)))
            return rc;
        *frame = sl->rgb;
        return 0;
    }
    if ((rc = ensure(ctx, &sl->dev_in, w, h, host->format, mem)) || (rc = mk_image_upload(ctx, &sl->dev_in, host)))
        return rc;
    *frame = sl->dev_in;
    if (host->format == MK_FMT_YUYV) {
        if ((rc = ensure(ctx, &sl->dev_rgb, w, h, MK_FMT_RGB, mem)) ||
            (rc = mk_yuyv_to_rgb(ctx, &sl->dev_in, &sl->dev_rgb)))
            return rc;
        *frame = sl->dev_rgb;
    }
    return 0;
}

/* Runs the detector on the frame when it is due (the caller holds the detection turn); a detector the backend
 * cannot run is switched off. */
static void detect(mk_segment_t *s, slot_t *sl, const mk_image_t *frame)
{
    mk_segment_result_t *r = &sl->res;
    const mk_config_t *cfg = &sl->cfg;
    if (!s->det || s->det_off || (s->have_dets && r->index % (uint64_t)cfg->detect.every_n != 0))
        return;
    int n = 0;
    /* the detector's stream reads the frame once the slot's upload and conversion are done; it synchronises
     * to read its detections back, so the frame is free again when it returns */
    int rc = mk_ctx_wait(s->dctx, sl->ctx);
    if (!rc)
        rc = mk_detector_run(s->det, frame, cfg, sl->single_class, s->dets, MK_SEGMENT_MAX_DETS, &n);
    if (rc) {
        int sync = mk_ctx_sync(s->dctx); /* a failure may have left work queued that reads the frame */
        (void)sync;
    }
    if (rc == MK_EUNSUPPORTED) {
        snprintf(r->det_err, sizeof r->det_err, "%s", mk_err_msg());
        MK_ERROR("detector switched off: %s; segmenting select.fallback instead", r->det_err);
        pthread_mutex_lock(&s->mu);
        s->det_off = 1;
        pthread_mutex_unlock(&s->mu);
        r->detector_off = 1;
        return;
    }
    if (rc) {
        snprintf(r->det_err, sizeof r->det_err, "%s", mk_err_msg());
        MK_LOG_RL(5000, MK_LOG_ERROR, "detector: %s", r->det_err);
        r->det_rc = rc;
        n = 0;
    }
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (mk_select_class_in(&sl->classes, s->dets[i].class_id))
            s->dets[kept++] = s->dets[i];
    s->ndets = kept;
    s->have_dets = 1;
    r->detected = 1;
}

/* The detection turn: detection and box choice. The frame's region of interest in roi (0 when there is none). */
static int choose(mk_segment_t *s, slot_t *sl, const mk_image_t *frame, int have_frame, int roi[4])
{
    mk_segment_result_t *r = &sl->res;
    const mk_config_t *cfg = &sl->cfg;
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&s->mu);
    while (s->det_next != r->index)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    uint64_t t1 = now_ns();
    r->ms.wait = ms_between(t0, t1);
    int ok = 0;
    if (have_frame) {
        detect(s, sl, frame);
        uint64_t t2 = now_ns();
        r->ms.detect = r->detected ? ms_between(t1, t2) : 0;
        r->ndets = s->ndets;
        memcpy(r->dets, s->dets, (size_t)s->ndets * sizeof *s->dets);
        if (s->det && !s->det_off) {
            r->select = mk_select_choose(&s->sel, cfg, &sl->classes, s->dets, s->ndets, &r->chosen, &r->box,
                                         &r->track);
        } else {
            r->box = mk_select_fallback(cfg, frame->width, frame->height);
            r->select = r->box.w > 0 && r->box.h > 0 ? MK_SELECT_FALLBACK : MK_SELECT_NONE;
        }
        ok = r->select != MK_SELECT_NONE &&
             mk_select_roi(&r->box, cfg->select.margin, frame->width, frame->height, MK_SEGMENT_MIN_ROI, roi) == 0;
        /* in frame order (this turn): a jittering box keeps the region's size, and with it GrabCut's */
        if (ok)
            mk_select_roi_keep(s->roi_prev, roi, frame->width, frame->height);
        for (int k = 0; k < 4; k++)
            s->roi_prev[k] = ok ? roi[k] : 0;
        r->ms.select = ms_between(t2, now_ns());
    }
    pthread_mutex_lock(&s->mu);
    s->det_next++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Cut, guided upsampling and the mask products into the slot's mask (and alpha). The cut's turn is given in every
 * case. */
static int cut_and_refine(slot_t *sl, const mk_image_t *frame, int have_roi, const int roi[4])
{
    mk_segment_result_t *r = &sl->res;
    const mk_config_t *cfg = &sl->cfg;
    mk_ctx_t *ctx = sl->ctx;
    mk_mem_t mem = mk_ctx_mem(ctx);
    int w = frame->width, h = frame->height, rc;
    int alpha_own = cfg->mask.alpha && cfg->mask.threshold != MK_CFG_THRESH_NONE;
    uint64_t t0 = now_ns();
    if ((rc = ensure(ctx, &sl->mask, w, h, MK_FMT_GRAY, mem)) ||
        (alpha_own && (rc = ensure(ctx, &sl->alpha, w, h, MK_FMT_GRAY, mem)))) {
        mk_cut_skip(sl->cut, r->index);
        return rc;
    }
    if (!have_roi) {
        mk_cut_skip(sl->cut, r->index);
        r->select = MK_SELECT_NONE;
        memset(&r->box, 0, sizeof r->box); /* as mk_select_choose gives it: no target, no box */
        r->track = 0;
        r->chosen = -1;
        r->flags |= MASKBUS_FLAG_NO_PERSON;
        uint64_t t1 = now_ns();
        r->ms.cut = ms_between(t0, t1);
        rc = mk_image_memset(ctx, &sl->mask, 0);
        if (!rc && alpha_own)
            rc = mk_image_memset(ctx, &sl->alpha, 0);
        r->ms.guided = ms_between(t1, now_ns());
        return rc;
    }
    memcpy(r->roi, roi, sizeof r->roi);
    int s = cfg->guided.scale, side = roi[2] > roi[3] ? roi[2] : roi[3];
    /* GrabCut works on the region reduced just enough that its longer side fits grabcut.roi_max_side; the guided
     * filter then upsamples from that resolution */
    if (mk_cut_method(sl->cut) == MK_CFG_CUT_GRABCUT)
        s = (side + cfg->grabcut.roi_max_side - 1) / cfg->grabcut.roi_max_side;
    if (s > MK_GUIDED_MAX_SCALE)
        s = MK_GUIDED_MAX_SCALE;
    int lw = (roi[2] + s - 1) / s, lh = (roi[3] + s - 1) / s;
    if ((rc = ensure(ctx, &sl->low, (w + s - 1) / s, (h + s - 1) / s, MK_FMT_GRAY, mem))) {
        mk_cut_skip(sl->cut, r->index);
        return rc;
    }
    mk_image_t roi_img = view(frame, roi[0], roi[1], roi[2], roi[3]);
    mk_image_t low = view(&sl->low, 0, 0, lw, lh);
    mk_box_t in_roi = {r->box.x - (float)roi[0], r->box.y - (float)roi[1], r->box.w, r->box.h};
    rc = mk_cut_run_frame(sl->cut, sl->work, r->index, &roi_img, &in_roi, &r->box, cfg, &low, &r->gc_keyframe);
    uint64_t t1 = now_ns();
    r->ms.cut = ms_between(t0, t1);
    if (rc)
        return rc;
    mk_guided_t g = {cfg->guided.radius, cfg->guided.eps, s, 0};
    mk_mask_t m = mask_product(cfg, roi[0], roi[1]);
    if ((rc = mk_guided_upsample(ctx, &roi_img, &low, &sl->mask, &g, &m)))
        return rc;
    if (alpha_own) {
        m.mode = MK_MASK_ALPHA;
        if ((rc = mk_guided_upsample(ctx, &roi_img, &low, &sl->alpha, &g, &m)))
            return rc;
    }
    r->ms.guided = ms_between(t1, now_ns());
    r->flags |= MASKBUS_FLAG_KEYFRAME;
    return 0;
}

/* The masks (and the frame) into host memory, and the final synchronisation. */
static int download(slot_t *sl)
{
    mk_segment_result_t *r = &sl->res;
    const mk_config_t *cfg = &sl->cfg;
    mk_ctx_t *ctx = sl->ctx;
    mk_mem_t mem = mk_ctx_mem(ctx);
    const mk_image_t *host = &sl->input;
    int w = host->width, h = host->height, rc;
    int alpha_own = cfg->mask.alpha && cfg->mask.threshold != MK_CFG_THRESH_NONE;
    const mk_image_t *hm = &sl->mask, *ha = alpha_own ? &sl->alpha : &sl->mask, *hf = NULL;
    if (cfg->bus.frame)
        hf = host->format == MK_FMT_YUYV ? (mem == MK_MEM_HOST ? &sl->rgb : &sl->dev_rgb) : host;
    if (mem != MK_MEM_HOST) {
        if ((rc = ensure(ctx, &sl->h_mask, w, h, MK_FMT_GRAY, MK_MEM_PINNED)) ||
            (rc = mk_image_download(ctx, &sl->h_mask, &sl->mask)))
            return rc;
        hm = ha = &sl->h_mask;
        if (alpha_own) {
            if ((rc = ensure(ctx, &sl->h_alpha, w, h, MK_FMT_GRAY, MK_MEM_PINNED)) ||
                (rc = mk_image_download(ctx, &sl->h_alpha, &sl->alpha)))
                return rc;
            ha = &sl->h_alpha;
        }
        if (hf && hf->mem == mem) {
            if ((rc = ensure(ctx, &sl->h_rgb, w, h, hf->format, MK_MEM_PINNED)) ||
                (rc = mk_image_download(ctx, &sl->h_rgb, hf)))
                return rc;
            hf = &sl->h_rgb;
        }
    }
    if ((rc = mk_ctx_sync(ctx)))
        return rc;
    if (hf && hf->format != MK_FMT_RGB) {
        MK_LOG_RL(60000, MK_LOG_WARN, "bus.frame: the source delivers %s frames; the frame plane is RGB only",
                  mk_format_name(hf->format));
        hf = NULL;
    }
    r->mask = *hm;
    r->mask.owned = 0;
    if (cfg->mask.alpha) {
        r->alpha = *ha;
        r->alpha.owned = 0;
    }
    if (hf) {
        r->frame = *hf;
        r->frame.owned = 0;
    }
    return 0;
}

static void segment_frame(mk_segment_t *s, slot_t *sl)
{
    mk_segment_result_t *r = &sl->res;
    uint64_t t0 = now_ns();
    mk_err_clear();
    mk_image_t frame;
    int rc = upload(sl, &frame);
    r->ms.upload = ms_between(t0, now_ns());
    int roi[4] = {0, 0, 0, 0};
    int have_roi = choose(s, sl, &frame, rc == 0, roi);
    if (!rc) {
        rc = cut_and_refine(sl, &frame, have_roi, roi);
    } else {
        mk_cut_skip(sl->cut, r->index);
        r->select = MK_SELECT_NONE;
        memset(&r->box, 0, sizeof r->box);
        r->chosen = -1;
    }
    uint64_t t1 = now_ns();
    if (!rc)
        rc = download(sl);
    if (rc && mk_ctx_mem(sl->ctx) != MK_MEM_HOST) {
        int sync = mk_ctx_sync(sl->ctx); /* nothing of the failed frame stays queued on the slot's buffers */
        (void)sync;
    }
    uint64_t done = now_ns();
    r->ms.download = ms_between(t1, done);
    r->ms.total = ms_between(t0, done);
    r->done_ns = done;
    r->rc = rc;
    if (rc) {
        snprintf(r->err, sizeof r->err, "%s", mk_err_msg()[0] ? mk_err_msg() : mk_err_str(rc));
        memset(&r->mask, 0, sizeof r->mask);
        memset(&r->alpha, 0, sizeof r->alpha);
        memset(&r->frame, 0, sizeof r->frame);
    }
}

static void *slot_main(void *arg)
{
    slot_t *sl = arg;
    mk_segment_t *s = sl->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && sl->state != SLOT_QUEUED)
            pthread_cond_wait(&s->cv, &s->mu);
        if (sl->state != SLOT_QUEUED)
            break;
        sl->state = SLOT_BUSY;
        pthread_mutex_unlock(&s->mu);
        segment_frame(s, sl);
        pthread_mutex_lock(&s->mu);
        sl->state = SLOT_DONE;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the engine ------------------------------------------------------------------------------------------- */

/* Waits until no frame is queued or being segmented (results may wait to be collected). Under s->mu. */
static void drain_locked(mk_segment_t *s)
{
    for (;;) {
        int busy = 0;
        for (int i = 0; i < s->max_depth; i++)
            busy |= s->slots[i].state == SLOT_QUEUED || s->slots[i].state == SLOT_BUSY;
        if (!busy)
            return;
        pthread_cond_wait(&s->cv, &s->mu);
    }
}

static void slot_free(slot_t *sl)
{
    mk_image_t *imgs[] = {&sl->rgb,   &sl->dev_in, &sl->dev_rgb, &sl->low,  &sl->mask,
                          &sl->alpha, &sl->h_mask, &sl->h_alpha, &sl->h_rgb};
    for (size_t i = 0; i < sizeof imgs / sizeof imgs[0]; i++)
        mk_image_free(sl->ctx, imgs[i]);
    mk_cut_work_destroy(sl->work);
    mk_ctx_destroy(sl->ctx);
}

void mk_segment_destroy(mk_segment_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    drain_locked(s);
    s->quit = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->max_depth; i++)
        if (s->slots[i].started)
            pthread_join(s->slots[i].th, NULL);
    for (int i = 0; i < s->max_depth; i++)
        slot_free(&s->slots[i]);
    mk_cut_destroy(s->cut);
    mk_detector_close(s->det);
    mk_ctx_destroy(s->dctx);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* The class set of cfg's detect.classes against the detector's names. */
static int resolve_classes(const mk_segment_t *s, const mk_config_t *cfg, mk_class_set_t *out)
{
    int n = 0;
    const char *const *names = s->det ? mk_detector_names(s->det, &n) : NULL;
    return mk_select_classes(cfg->detect.classes, names, n, out);
}

int mk_segment_create(const mk_config_t *cfg, mk_segment_t **out)
{
    *out = NULL;
    if (cfg->pipeline.inflight < 1 || cfg->pipeline.inflight > MK_SEGMENT_MAX_INFLIGHT)
        return mk_err_set(MK_ERANGE, "pipeline.inflight %d: 1..%d", cfg->pipeline.inflight,
                          MK_SEGMENT_MAX_INFLIGHT);
    mk_segment_t *s = calloc(1, sizeof *s);
    if (!s)
        return mk_err_set(MK_ENOMEM, "out of memory");
    s->boot = s->cfg = *cfg;
    s->max_depth = s->depth = cfg->pipeline.inflight;
    mk_select_init(&s->sel);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    mk_backend_t backend = (mk_backend_t)cfg->backend;
    int rc = mk_ctx_create(backend, &s->dctx);
    if (rc)
        mk_err_wrap(rc, "backend %s", mk_backend_name(backend));
    backend = rc ? backend : mk_ctx_backend(s->dctx); /* auto resolved: the slots take the same */
    if (!rc && cfg->detect.cfg[0] && (rc = mk_detector_open(s->dctx, cfg, &s->det)))
        mk_err_wrap(rc, "detector");
    if (!rc && !cfg->detect.cfg[0] && cfg->detect.weights[0])
        rc = mk_err_set(MK_EINVAL, "detect.weights is set but detect.cfg is empty");
    if (!rc && (rc = resolve_classes(s, cfg, &s->classes)))
        mk_err_wrap(rc, "the configuration");
    s->single_class = mk_select_class_single(&s->classes);
    if (!rc)
        rc = mk_cut_create(s->dctx, cfg->cut.method, &s->cut);
    for (int i = 0; !rc && i < s->max_depth; i++) {
        slot_t *sl = &s->slots[i];
        sl->s = s;
        if (!(rc = mk_ctx_create(backend, &sl->ctx)) && !(rc = mk_cut_work_create(sl->ctx, &sl->work))) {
            if (pthread_create(&sl->th, NULL, slot_main, sl))
                rc = mk_err_set(MK_ENOMEM, "cannot start a segmentation thread");
            else
                sl->started = 1;
        }
    }
    if (rc) {
        mk_segment_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

int mk_segment_set_config(mk_segment_t *s, const mk_config_t *cfg)
{
    mk_class_set_t classes;
    int rc = resolve_classes(s, cfg, &classes);
    if (rc)
        return rc;
    if (cfg->cut.method != mk_cut_method(s->cut)) {
        mk_cut_t *c;
        if (mk_cut_create(s->dctx, cfg->cut.method, &c)) {
            MK_WARN("cut.method: %s: keeping %s", mk_err_msg(), mk_cut_name(s->cut));
        } else {
            pthread_mutex_lock(&s->mu);
            drain_locked(s);
            pthread_mutex_unlock(&s->mu);
            mk_cut_reset(c, s->submitted);
            mk_cut_destroy(s->cut);
            s->cut = c;
        }
    }
    mk_config_t next = *cfg;
    const mk_config_t *b = &s->boot;
    next.backend = b->backend;
    memcpy(next.detect.cfg, b->detect.cfg, sizeof next.detect.cfg);
    memcpy(next.detect.weights, b->detect.weights, sizeof next.detect.weights);
    memcpy(next.detect.names, b->detect.names, sizeof next.detect.names);
    next.detect.fp16 = b->detect.fp16;
    next.detect.cudnn = b->detect.cudnn;
    next.pipeline.inflight = b->pipeline.inflight;
    next.cut.method = mk_cut_method(s->cut);
    s->cfg = next;
    s->classes = classes;
    s->single_class = mk_select_class_single(&classes);
    return 0;
}

int mk_segment_set_depth(mk_segment_t *s, int depth)
{
    if (depth < 1 || depth > s->max_depth)
        return mk_err_set(MK_ERANGE, "depth %d: this engine has 1..%d slots", depth, s->max_depth);
    if (mk_segment_pending(s))
        return mk_err_set(MK_ESTATE, "set_depth: collect and release the %d frames in flight first",
                          mk_segment_pending(s));
    for (int i = 0; i < s->max_depth; i++)
        if (s->slots[i].state != SLOT_FREE)
            return mk_err_set(MK_ESTATE, "set_depth: a result is not released");
    s->depth = depth;
    s->sub_slot = s->col_slot = 0;
    return 0;
}

int mk_segment_reset(mk_segment_t *s)
{
    int rc = mk_segment_set_depth(s, s->depth);
    if (rc)
        return mk_err_wrap(rc, "reset");
    pthread_mutex_lock(&s->mu);
    s->submitted = s->collected = s->det_next = 0;
    mk_select_init(&s->sel);
    s->ndets = s->have_dets = 0;
    memset(s->roi_prev, 0, sizeof s->roi_prev);
    pthread_mutex_unlock(&s->mu);
    mk_cut_reset(s->cut, 0);
    return 0;
}

static int submit(mk_segment_t *s, const mk_image_t *frame, uint64_t seq, int64_t capture_ns, void *user,
                  const mk_decoded_t *d, int timeout_ms)
{
    if (!s || !frame)
        return mk_err_set(MK_EINVAL, "mk_segment_submit: NULL argument");
    int rc = mk_image_check(frame, "frame");
    if (rc)
        return rc;
    if (frame->dtype != MK_U8 ||
        (frame->format != MK_FMT_RGB && frame->format != MK_FMT_BGR && frame->format != MK_FMT_YUYV))
        return mk_err_set(MK_EINVAL, "frame: u8 RGB, BGR or YUYV, not %s %s", mk_dtype_name(frame->dtype),
                          mk_format_name(frame->format));
    if (frame->mem == MK_MEM_DEVICE)
        return mk_err_set(MK_EINVAL, "frame: host memory, not device memory");
    uint64_t deadline = deadline_of(timeout_ms);
    pthread_mutex_lock(&s->mu);
    slot_t *sl = &s->slots[s->sub_slot];
    while (sl->state != SLOT_FREE)
        if (wait_until(s, deadline) && sl->state != SLOT_FREE) {
            pthread_mutex_unlock(&s->mu);
            return MK_SEGMENT_AGAIN;
        }
    sl->input = *frame;
    sl->input.owned = 0;
    sl->cfg = s->cfg;
    sl->classes = s->classes;
    sl->single_class = s->single_class;
    sl->cut = s->cut;
    mk_segment_result_t *r = &sl->res;
    memset(r, 0, sizeof *r);
    r->index = s->submitted++;
    r->seq = seq;
    r->capture_ns = capture_ns;
    r->user = user;
    if (d)
        r->decoded = *d;
    r->width = frame->width;
    r->height = frame->height;
    r->chosen = -1;
    r->submit_ns = now_ns();
    sl->state = SLOT_QUEUED;
    s->sub_slot = (s->sub_slot + 1) % s->depth;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return MK_SEGMENT_OK;
}

int mk_segment_submit(mk_segment_t *s, const mk_image_t *frame, uint64_t seq, int64_t capture_ns, void *user,
                      int timeout_ms)
{
    return submit(s, frame, seq, capture_ns, user, NULL, timeout_ms);
}

int mk_segment_submit_decoded(mk_segment_t *s, const mk_decoded_t *d, int timeout_ms)
{
    if (!d)
        return mk_err_set(MK_EINVAL, "mk_segment_submit_decoded: NULL frame");
    return submit(s, &d->image, d->seq, d->capture_ns, NULL, d, timeout_ms);
}

int mk_segment_collect(mk_segment_t *s, int timeout_ms, mk_segment_result_t **out)
{
    *out = NULL;
    uint64_t deadline = deadline_of(timeout_ms);
    pthread_mutex_lock(&s->mu);
    if (s->collected == s->submitted) {
        pthread_mutex_unlock(&s->mu);
        return MK_SEGMENT_EMPTY;
    }
    slot_t *sl = &s->slots[s->col_slot];
    while (sl->state != SLOT_DONE)
        if ((timeout_ms == 0 || wait_until(s, deadline)) && sl->state != SLOT_DONE) {
            pthread_mutex_unlock(&s->mu);
            return MK_SEGMENT_AGAIN;
        }
    sl->state = SLOT_OUT;
    s->collected++;
    s->col_slot = (s->col_slot + 1) % s->depth;
    pthread_mutex_unlock(&s->mu);
    *out = &sl->res;
    return MK_SEGMENT_OK;
}

void mk_segment_release(mk_segment_t *s, mk_segment_result_t *r)
{
    if (!s || !r)
        return;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->max_depth; i++)
        if (&s->slots[i].res == r && s->slots[i].state == SLOT_OUT) {
            s->slots[i].state = SLOT_FREE;
            pthread_cond_broadcast(&s->cv);
        }
    pthread_mutex_unlock(&s->mu);
}

int mk_segment_pending(const mk_segment_t *s)
{
    mk_segment_t *m = (mk_segment_t *)s;
    pthread_mutex_lock(&m->mu);
    int n = (int)(s->submitted - s->collected);
    pthread_mutex_unlock(&m->mu);
    return n;
}

int mk_segment_depth(const mk_segment_t *s)
{
    return s->depth;
}

int mk_segment_max_depth(const mk_segment_t *s)
{
    return s->max_depth;
}

mk_backend_t mk_segment_backend(const mk_segment_t *s)
{
    return mk_ctx_backend(s->dctx);
}

const char *mk_segment_device_name(const mk_segment_t *s)
{
    return mk_ctx_device_name(s->dctx);
}

int mk_segment_device_memory(mk_segment_t *s, size_t *free_bytes, size_t *total_bytes)
{
    return mk_ctx_device_memory(s->dctx, free_bytes, total_bytes);
}

const mk_detector_t *mk_segment_detector(const mk_segment_t *s)
{
    return s->det;
}

int mk_segment_detecting(const mk_segment_t *s)
{
    mk_segment_t *m = (mk_segment_t *)s;
    pthread_mutex_lock(&m->mu);
    int on = s->det && !s->det_off;
    pthread_mutex_unlock(&m->mu);
    return on;
}

const char *mk_segment_cut_name(const mk_segment_t *s)
{
    return mk_cut_name(s->cut);
}

void mk_segment_bus_frame(const mk_segment_result_t *r, maskbus_frame_in_t *fr,
                          maskbus_detection_t bd[MASKBUS_MAX_DETECTIONS])
{
    memset(fr, 0, sizeof *fr);
    fr->frame_seq = r->seq;
    fr->capture_ns = (uint64_t)r->capture_ns;
    fr->width = (uint32_t)r->width;
    fr->height = (uint32_t)r->height;
    fr->flags = r->flags;
    fr->data[MASKBUS_PLANE_MASK] = r->mask.data;
    fr->stride[MASKBUS_PLANE_MASK] = r->mask.pitch;
    if (r->alpha.data) {
        fr->data[MASKBUS_PLANE_ALPHA] = r->alpha.data;
        fr->stride[MASKBUS_PLANE_ALPHA] = r->alpha.pitch;
    }
    if (r->frame.data) {
        fr->data[MASKBUS_PLANE_FRAME] = r->frame.data;
        fr->stride[MASKBUS_PLANE_FRAME] = r->frame.pitch;
    }
    int nb = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->ndets && nb < (int)MASKBUS_MAX_DETECTIONS; i++) {
            if ((i == r->chosen) != (pass == 0))
                continue;
            const mk_detection_t *e = &r->dets[i];
            bd[nb++] = (maskbus_detection_t){e->class_id, e->prob, e->x, e->y, e->w, e->h,
                                             i == r->chosen ? r->track : 0, i == r->chosen ? 1u : 0u};
        }
    fr->ndetections = (uint32_t)nb;
    fr->detections = bd;
}
