/* cut: the cut interface and its methods (box, ellipse, grabcut), and the frame-ordered hand-over of GrabCut's
 * state between threads. */
#include "cut.h"

#include "errors.h"
#include "grabcut.h"
#include "log.h"
#include "resize.h"
#include "shape.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The box cut's corner radii, as a fraction of the box's half sides. */
#define BOX_ROUND 0.4f

struct mk_cut_work {
    mk_ctx_t *ctx;
    mk_image_t small;  /* the ROI at the cut's resolution, colour */
    mk_image_t labels; /* GrabCut's four labels at that resolution */
};

typedef struct {
    const char *name;
    int (*run)(mk_cut_t *c, mk_cut_work_t *w, uint64_t frame, const mk_image_t *roi, const mk_box_t *box,
               const mk_box_t *frame_box, const mk_config_t *cfg, mk_image_t *lowres, int *keyframe);
} cut_ops_t;

/* GrabCut's state across frames (under mu): the model of the last keyframe and the keyframe policy's facts. */
typedef struct {
    mk_gc_model_t model; /* learnt on the last keyframe */
    int have_model;
    int key_pending;     /* a keyframe has decided and is still learning: the model is not known yet */
    mk_box_t key_box;    /* the keyframe's box, in frame pixels */
    long since_key;      /* frames cut with the model since the keyframe */
    int refine_left;     /* the keyframe's iterations still to run, one per frame (grabcut.key_iterations) */
} gc_state_t;

/* What a frame does: a keyframe (GrabCut from the box), a refinement (the fixed-model cut, then one learning
 * step whose model the next frame uses) or a fixed-model cut. */
enum { GC_FIXED, GC_KEY, GC_REFINE };

struct mk_cut {
    int method;
    const cut_ops_t *ops;
    mk_cut_work_t own;   /* mk_cut_run's working images, on the creation context */
    uint64_t own_next;   /* mk_cut_run's next frame number */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next;       /* the next frame to decide (under mu) */
    gc_state_t gc;       /* under mu */
};

/* The box in low-resolution pixels, as a rounded rectangle. */
static int shape_fill(mk_cut_t *c, mk_ctx_t *ctx, const mk_image_t *roi, const mk_box_t *box, mk_image_t *lowres)
{
    float sx = (float)lowres->width / (float)roi->width, sy = (float)lowres->height / (float)roi->height;
    float round = c->method == MK_CFG_CUT_ELLIPSE ? 1.0f : BOX_ROUND;
    mk_rbox_t b = mk_rbox_make(box->x * sx, box->y * sy, box->w * sx, box->h * sy, round, round);
    return mk_shape_fill(ctx, lowres, &b);
}

/* Frame number `frame` passes its turn (box and ellipse keep no state: they only count). */
static void turn_pass(mk_cut_t *c, uint64_t frame)
{
    pthread_mutex_lock(&c->mu);
    while (c->next != frame)
        pthread_cond_wait(&c->cv, &c->mu);
    c->next++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static int shape_run(mk_cut_t *c, mk_cut_work_t *w, uint64_t frame, const mk_image_t *roi, const mk_box_t *box,
                     const mk_box_t *frame_box, const mk_config_t *cfg, mk_image_t *lowres, int *keyframe)
{
    (void)frame_box;
    (void)cfg;
    (void)keyframe;
    turn_pass(c, frame);
    return shape_fill(c, w->ctx, roi, box, lowres);
}

/* (Re)allocates img as w x h of `format` in the context's memory unless it already is. */
static int ensure(mk_ctx_t *ctx, mk_image_t *img, int w, int h, mk_format_t format)
{
    if (img->data && img->width == w && img->height == h && img->format == format)
        return 0;
    mk_image_free(ctx, img);
    *img = mk_image_desc(w, h, format, MK_U8);
    return mk_image_alloc(ctx, img, mk_ctx_mem(ctx));
}

/* The iterations a keyframe runs on its own frame: grabcut.key_iterations, 0 (or more than grabcut.iterations)
 * meaning all of them; all of them with grabcut.keyframe `always`, where no frame follows a keyframe to run
 * the rest. */
static int key_iterations(const mk_config_t *cfg)
{
    int k = cfg->grabcut.key_iterations;
    if (cfg->grabcut.keyframe == MK_CFG_KEYFRAME_ALWAYS || k < 1 || k > cfg->grabcut.iterations)
        return cfg->grabcut.iterations;
    return k;
}

/* Frame `frame`'s keyframe decision, in frame order and once the last keyframe's or refinement's model is known.
 * A keyframe takes the keyframe facts and leaves the model pending until gc_learnt(); the frames after it run the
 * keyframe's remaining iterations (grabcut.key_iterations), one each: they get a copy of the model in *model and
 * leave the next model pending until gc_refined(); any other frame gets a copy of the model. Returns GC_*.
 *
 * `adaptive` compares the box in frame pixels with the keyframe's: the colour model holds for a box that moved or
 * grew a little (a detector's box jitters by a few pixels from frame to frame, and so does the working size of
 * the region), not for one that moved or changed size markedly (IoU below grabcut.keyframe_iou), whose
 * surroundings, and so the background colours, are others. */
static int gc_decide(mk_cut_t *c, uint64_t frame, const mk_box_t *frame_box, const mk_config_t *cfg,
                     mk_gc_model_t *model)
{
    gc_state_t *st = &c->gc;
    pthread_mutex_lock(&c->mu);
    while (c->next != frame || st->key_pending)
        pthread_cond_wait(&c->cv, &c->mu);
    int key = !st->have_model || cfg->grabcut.keyframe == MK_CFG_KEYFRAME_ALWAYS ||
              st->since_key + 1 >= cfg->grabcut.keyframe_interval;
    if (!key && cfg->grabcut.keyframe == MK_CFG_KEYFRAME_ADAPTIVE)
        key = mk_box_iou(frame_box, &st->key_box) < cfg->grabcut.keyframe_iou;
    int kind = key ? GC_KEY : GC_FIXED;
    if (key) {
        st->key_pending = 1;
        st->key_box = *frame_box;
        st->since_key = 0;
        st->refine_left = cfg->grabcut.iterations - key_iterations(cfg);
    } else {
        *model = st->model;
        st->since_key++;
        if (st->refine_left > 0) {
            st->refine_left--;
            st->key_pending = 1;
            kind = GC_REFINE;
        }
    }
    c->next++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return kind;
}

/* The keyframe's outcome: its model (rc 0) or none. */
static void gc_learnt(mk_cut_t *c, int rc, const mk_gc_model_t *model)
{
    pthread_mutex_lock(&c->mu);
    c->gc.have_model = rc == 0;
    if (rc == 0)
        c->gc.model = *model;
    c->gc.key_pending = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* A refinement's outcome: its learnt model replaces the last one when it is usable (rc 0 and both GMMs with some
 * weight: a class that lost every pixel would otherwise stay lost until the next keyframe); otherwise the last
 * model stays and the refinements stop. */
static void gc_refined(mk_cut_t *c, int rc, const mk_gc_model_t *learnt)
{
    double wb = 0, wf = 0;
    if (rc == 0)
        for (int k = 0; k < MK_GC_MAX_K; k++) {
            wb += k < learnt->bgd.K ? learnt->bgd.weight[k] : 0;
            wf += k < learnt->fgd.K ? learnt->fgd.weight[k] : 0;
        }
    pthread_mutex_lock(&c->mu);
    if (wb > 0 && wf > 0)
        c->gc.model = *learnt;
    else
        c->gc.refine_left = 0;
    c->gc.key_pending = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* GrabCut on the ROI reduced to the mask's resolution, the box as its rectangle (with a background border of at
 * least one pixel). A keyframe learns the colour models from the rectangle (grabcut.iterations rounds); the frames
 * between keyframes reuse them in one fixed-model cut (grabcut.keyframe decides which is which). Where GrabCut
 * cannot run (a grey frame, a box too small or covering the whole region, no foreground or background), the frame
 * gets the box cut instead, and the log says why. */
static int grabcut_run(mk_cut_t *c, mk_cut_work_t *w, uint64_t frame, const mk_image_t *roi, const mk_box_t *box,
                       const mk_box_t *frame_box, const mk_config_t *cfg, mk_image_t *lowres, int *keyframe)
{
    int lw = lowres->width, lh = lowres->height;
    int s = (roi->width + lw - 1) / lw;
    if (s < 1 || (roi->width + s - 1) / s != lw || (roi->height + s - 1) / s != lh) {
        turn_pass(c, frame);
        return mk_err_set(MK_EINVAL, "grabcut: a %dx%d mask is no integer reduction of the %dx%d region", lw, lh,
                          roi->width, roi->height);
    }
    if (roi->format != MK_FMT_RGB && roi->format != MK_FMT_BGR) {
        MK_LOG_RL(60000, MK_LOG_WARN, "cut.method grabcut needs colour frames, not %s: cutting the box instead",
                  mk_format_name(roi->format));
        turn_pass(c, frame);
        return shape_fill(c, w->ctx, roi, box, lowres);
    }
    /* The rectangle in working pixels, inside a one-pixel background border. */
    int x0 = (int)floorf(box->x / s), y0 = (int)floorf(box->y / s);
    int x1 = (int)ceilf((box->x + box->w) / s), y1 = (int)ceilf((box->y + box->h) / s);
    x0 = x0 < 1 ? 1 : x0;
    y0 = y0 < 1 ? 1 : y0;
    x1 = x1 > lw - 1 ? lw - 1 : x1;
    y1 = y1 > lh - 1 ? lh - 1 : y1;
    if (x1 - x0 < 2 || y1 - y0 < 2) {
        MK_LOG_RL(60000, MK_LOG_INFO, "grabcut: the box is %dx%d pixels at 1/%d: cutting the box instead",
                  x1 - x0, y1 - y0, s);
        turn_pass(c, frame);
        return shape_fill(c, w->ctx, roi, box, lowres);
    }
    mk_rect_t rect = {x0, y0, x1 - x0, y1 - y0};
    int rc;
    if ((rc = ensure(w->ctx, &w->small, lw, lh, roi->format)) ||
        (rc = ensure(w->ctx, &w->labels, lw, lh, MK_FMT_GRAY)) ||
        (rc = mk_downsample_area(w->ctx, roi, &w->small, s))) {
        turn_pass(c, frame);
        return rc;
    }
    mk_gc_params_t gp = mk_gc_params_default();
    gp.iterations = cfg->grabcut.iterations;
    gp.warm_start = cfg->grabcut.warm_start;
    gp.reseed = cfg->grabcut.reseed;
    mk_gc_model_t model;
    int kind = gc_decide(c, frame, frame_box, cfg, &model);
    if (keyframe)
        *keyframe = kind == GC_KEY;
    if (kind == GC_KEY) {
        gp.iterations = key_iterations(cfg);
        rc = mk_grabcut(w->ctx, &w->small, &w->labels, &rect, &gp, &model, NULL);
        gc_learnt(c, rc, &model);
    } else {
        mk_image_t inside = w->labels;
        inside.data = (uint8_t *)w->labels.data + (size_t)rect.y * w->labels.pitch + (size_t)rect.x;
        inside.width = rect.width;
        inside.height = rect.height;
        inside.owned = 0;
        if ((rc = mk_image_memset(w->ctx, &w->labels, MK_GC_BGD)) ||
            (rc = mk_image_memset(w->ctx, &inside, MK_GC_PR_FGD))) {
            if (kind == GC_REFINE)
                gc_refined(c, rc, NULL);
            return rc;
        }
        if (kind == GC_REFINE && gp.reseed) {
            /* the cut, then the next model from a k-means of its labels (mk_gc_params_t.reseed's iteration); a
             * class the cut emptied leaves nothing to cluster, and the refinements stop (gc_refined) */
            mk_gc_model_t learnt;
            mk_gc_params_t p0 = gp;
            p0.iterations = 0;
            int lrc = MK_EINVAL;
            rc = mk_grabcut_cut(w->ctx, &w->small, &w->labels, &model, &gp, NULL);
            if (!rc && (lrc = mk_grabcut(w->ctx, &w->small, &w->labels, NULL, &p0, &learnt, NULL)))
                MK_LOG_RL(60000, MK_LOG_INFO, "grabcut: refinement: %s: the model stays", mk_err_msg());
            gc_refined(c, lrc, &learnt);
        } else if (kind == GC_REFINE) {
            mk_gc_model_t learnt;
            rc = mk_grabcut_cut_learn(w->ctx, &w->small, &w->labels, &model, &gp, &learnt, NULL);
            gc_refined(c, rc, &learnt);
            if (rc == MK_ERANGE) /* a singular learnt covariance: the mask is already cut (mk_grabcut_cut_learn) */
                rc = 0;
        } else {
            rc = mk_grabcut_cut(w->ctx, &w->small, &w->labels, &model, &gp, NULL);
        }
    }
    if (rc == MK_EINVAL || rc == MK_ERANGE) {
        /* no foreground or background samples, or a degenerate colour model: this frame gets the box (a
         * keyframe's failure has dropped the model; a fixed-model frame's keeps it) */
        MK_LOG_RL(60000, MK_LOG_INFO, "grabcut: %s: cutting the box instead", mk_err_msg());
        return shape_fill(c, w->ctx, roi, box, lowres);
    }
    if (rc)
        return rc;
    return mk_grabcut_binary(w->ctx, &w->labels, lowres);
}

static const cut_ops_t methods[] = {
    [MK_CFG_CUT_BOX] = {"box", shape_run},
    [MK_CFG_CUT_ELLIPSE] = {"ellipse", shape_run},
    [MK_CFG_CUT_GRABCUT] = {"grabcut", grabcut_run},
};

int mk_cut_create(mk_ctx_t *ctx, int method, mk_cut_t **out)
{
    *out = NULL;
    if (method < 0 || method >= (int)(sizeof methods / sizeof methods[0]) || !methods[method].run)
        return mk_err_set(MK_EINVAL, "unknown cut method %d", method);
    mk_cut_t *c = calloc(1, sizeof *c);
    if (!c)
        return mk_err_set(MK_ENOMEM, "out of memory");
    c->own.ctx = ctx;
    c->method = method;
    c->ops = &methods[method];
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    *out = c;
    return 0;
}

static void work_free(mk_cut_work_t *w)
{
    mk_image_free(w->ctx, &w->small);
    mk_image_free(w->ctx, &w->labels);
}

void mk_cut_destroy(mk_cut_t *c)
{
    if (!c)
        return;
    work_free(&c->own);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int mk_cut_method(const mk_cut_t *c)
{
    return c->method;
}

const char *mk_cut_name(const mk_cut_t *c)
{
    return c->ops->name;
}

const char *mk_cut_method_name(int method)
{
    if (method < 0 || method >= (int)(sizeof methods / sizeof methods[0]) || !methods[method].run)
        return "unknown";
    return methods[method].name;
}

int mk_cut_work_create(mk_ctx_t *ctx, mk_cut_work_t **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return mk_err_set(MK_ENOMEM, "out of memory");
    (*out)->ctx = ctx;
    return 0;
}

void mk_cut_work_destroy(mk_cut_work_t *w)
{
    if (!w)
        return;
    work_free(w);
    free(w);
}

int mk_cut_run_frame(mk_cut_t *c, mk_cut_work_t *w, uint64_t frame, const mk_image_t *roi, const mk_box_t *box,
                     const mk_box_t *frame_box, const mk_config_t *cfg, mk_image_t *lowres, int *keyframe)
{
    if (keyframe)
        *keyframe = 0;
    if (!c || !w)
        return mk_err_set(MK_EINVAL, "mk_cut_run_frame: NULL cut or work");
    if (!roi || !box || !cfg || !lowres) {
        turn_pass(c, frame);
        return mk_err_set(MK_EINVAL, "mk_cut_run_frame: NULL argument");
    }
    if (roi->width < 1 || roi->height < 1 || lowres->width < 1 || lowres->height < 1) {
        turn_pass(c, frame);
        return mk_err_set(MK_EINVAL, "cut: empty region (%dx%d) or mask (%dx%d)", roi->width, roi->height,
                          lowres->width, lowres->height);
    }
    return c->ops->run(c, w, frame, roi, box, frame_box ? frame_box : box, cfg, lowres, keyframe);
}

void mk_cut_skip(mk_cut_t *c, uint64_t frame)
{
    turn_pass(c, frame);
}

void mk_cut_reset(mk_cut_t *c, uint64_t next_frame)
{
    pthread_mutex_lock(&c->mu);
    memset(&c->gc, 0, sizeof c->gc);
    c->next = next_frame;
    pthread_mutex_unlock(&c->mu);
    c->own_next = next_frame;
}

int mk_cut_run(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
               mk_image_t *lowres)
{
    if (!c)
        return mk_err_set(MK_EINVAL, "mk_cut_run: NULL cut");
    return mk_cut_run_frame(c, &c->own, c->own_next++, roi, box, NULL, cfg, lowres, NULL);
}
