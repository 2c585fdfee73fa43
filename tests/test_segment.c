/* test_segment: the segmentation engine (daemon/segment.h). With 2 and 3 frames in flight the results — masks,
 * alpha, detections, box, track, flags, GrabCut keyframes — must be byte for byte those of 1 frame in flight, in
 * submission order, over 60 frames of the test pattern and of the shared otb_man clip (when present), with
 * cut.method grabcut and the Yolo-Fastest-1.1 body detector (when the shared models are present; the fallback
 * box otherwise). Also: a bad frame is refused and a frame that fails comes back failed without wedging the
 * engine; destroy with frames in flight; a configuration change between frames gives the same results at every
 * depth. The CPU backend always; argument "cuda": the same on the CUDA backend (skips without a GPU). */
#include "testutil.h"

#include "config.h"
#include "guided.h"
#include "imageio.h"
#include "segment.h"
#include "testpattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NFRAMES = 60, MAXF = 64 };

static mk_backend_t backend = MK_BACKEND_CPU;

/* One frame's outcome, copied out of the engine. */
typedef struct {
    uint64_t index, seq;
    int rc;
    mk_image_t mask, alpha;
    uint32_t flags;
    int ndets, chosen, select, keyframe, detected;
    mk_detection_t dets[8];
    mk_box_t box;
    uint32_t track;
} outcome_t;

typedef struct {
    mk_image_t frames[MAXF];
    int n;
} clip_t;

static mk_image_t host_copy(const mk_image_t *src)
{
    mk_image_t d = mk_image_desc(src->width, src->height, src->format, MK_U8);
    TU_OK(mk_image_alloc(NULL, &d, MK_MEM_HOST));
    TU_OK(mk_image_copy(NULL, &d, src));
    return d;
}

static void keep(outcome_t *o, const mk_segment_result_t *r)
{
    memset(o, 0, sizeof *o);
    o->index = r->index;
    o->seq = r->seq;
    o->rc = r->rc;
    o->flags = r->flags;
    o->ndets = r->ndets;
    o->chosen = r->chosen;
    o->select = (int)r->select;
    o->keyframe = r->gc_keyframe;
    o->detected = r->detected;
    memcpy(o->dets, r->dets, (size_t)(r->ndets < 8 ? r->ndets : 8) * sizeof *o->dets);
    o->box = r->box;
    o->track = r->track;
    if (r->rc)
        return;
    o->mask = host_copy(&r->mask);
    if (r->alpha.data)
        o->alpha = host_copy(&r->alpha);
}

static void outcome_free(outcome_t *o)
{
    mk_image_free(NULL, &o->mask);
    mk_image_free(NULL, &o->alpha);
}

static long image_diff(const mk_image_t *a, const mk_image_t *b)
{
    if (!a->data || !b->data)
        return a->data != b->data;
    if (a->width != b->width || a->height != b->height)
        return -1;
    long d = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            d += ((const uint8_t *)mk_image_row(a, 0, y))[x] != ((const uint8_t *)mk_image_row(b, 0, y))[x];
    return d;
}

/* Fails unless two outcomes are identical. */
static void same(const outcome_t *a, const outcome_t *b, const char *what)
{
    if (a->index != b->index || a->seq != b->seq || a->rc != b->rc || a->flags != b->flags ||
        a->ndets != b->ndets || a->chosen != b->chosen || a->select != b->select || a->keyframe != b->keyframe ||
        a->detected != b->detected || a->track != b->track || memcmp(&a->box, &b->box, sizeof a->box) ||
        memcmp(a->dets, b->dets, sizeof a->dets))
        fail_msg("%s: frame %llu differs (seq %llu/%llu rc %d/%d flags %u/%u dets %d/%d select %d/%d key %d/%d "
                 "track %u/%u box %.2f,%.2f/%.2f,%.2f)",
                 what, (unsigned long long)a->index, (unsigned long long)a->seq, (unsigned long long)b->seq, a->rc,
                 b->rc, a->flags, b->flags, a->ndets, b->ndets, a->select, b->select, a->keyframe, b->keyframe,
                 a->track, b->track, a->box.x, a->box.y, b->box.x, b->box.y);
    long dm = image_diff(&a->mask, &b->mask), da = image_diff(&a->alpha, &b->alpha);
    if (dm || da)
        fail_msg("%s: frame %llu: %ld mask and %ld alpha pixels differ", what, (unsigned long long)a->index, dm,
                 da);
}

static void base_config(mk_config_t *cfg, int with_detector)
{
    mk_config_defaults(cfg);
    cfg->backend = backend == MK_BACKEND_CUDA ? MK_CFG_BACKEND_CUDA : MK_CFG_BACKEND_CPU;
    cfg->cut.method = MK_CFG_CUT_GRABCUT;
    cfg->grabcut.roi_max_side = 160;
    cfg->detect.every_n = 2; /* reuse in frame order too */
    cfg->mask.alpha = 1;
    cfg->mask.threshold = MK_CFG_THRESH_FIXED;
    cfg->pipeline.inflight = 3;
    char buf[1024];
    const char *dir = tu_data_dir();
    if (!with_detector || !dir)
        return;
    snprintf(buf, sizeof buf, "%s/models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg", dir);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        printf("no body detector in %s: the fallback box\n", dir);
        return;
    }
    fclose(f);
    snprintf(cfg->detect.cfg, sizeof cfg->detect.cfg, "%s", buf);
    snprintf(cfg->detect.weights, sizeof cfg->detect.weights,
             "%s/models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights", dir);
    snprintf(cfg->detect.names, sizeof cfg->detect.names, "%s/models/yolo-fastest-1.1-body/body.names", dir);
    cfg->detect.fp16 = backend == MK_BACKEND_CUDA; /* the daemon's networks on the GPU */
}

/* Runs the clip through the engine at `depth` from a reset, submitting ahead as far as the depth allows; the
 * outcomes in out[0..n-1] in the order they come back (which must be the submission order). Before frame
 * `change_at` (if >= 0) the configuration becomes *changed. */
static void run_clip(mk_segment_t *s, const clip_t *c, int depth, outcome_t *out, int change_at,
                     const mk_config_t *changed)
{
    TU_OK(mk_segment_set_depth(s, depth));
    TU_OK(mk_segment_reset(s));
    int got = 0;
    for (int i = 0; i <= c->n; i++) {
        /* collect while the engine is full (or at the end, everything) */
        while (mk_segment_pending(s) >= depth || (i == c->n && mk_segment_pending(s) > 0)) {
            mk_segment_result_t *r;
            assert_int_equal(mk_segment_collect(s, -1, &r), MK_SEGMENT_OK);
            assert_int_equal(r->index, (uint64_t)got);
            assert_int_equal(r->seq, 1000u + (uint64_t)got);
            assert_ptr_equal(r->user, (void *)&c->frames[got]);
            keep(&out[got++], r);
            mk_segment_release(s, r);
        }
        if (i == c->n)
            break;
        if (i == change_at)
            TU_OK(mk_segment_set_config(s, changed));
        assert_int_equal(mk_segment_submit(s, &c->frames[i], 1000u + (uint64_t)i, (int64_t)i, (void *)&c->frames[i],
                                           -1),
                         MK_SEGMENT_OK);
    }
    mk_segment_result_t *r;
    assert_int_equal(mk_segment_collect(s, 0, &r), MK_SEGMENT_EMPTY);
    assert_int_equal(got, c->n);
}

/* Depths 2 and 3 against depth 1 on a clip; the masks must not be trivial. */
static void check_identical(const clip_t *c, const char *name)
{
    mk_config_t cfg;
    base_config(&cfg, 1);
    mk_segment_t *s;
    TU_OK(mk_segment_create(&cfg, &s));
    outcome_t ref[MAXF], o[MAXF];
    run_clip(s, c, 1, ref, -1, NULL);
    long fg = 0;
    int keys = 0, detected = 0, person = 0;
    for (int i = 0; i < c->n; i++) {
        if (ref[i].rc)
            fail_msg("%s frame %d failed: %d", name, i, ref[i].rc);
        keys += ref[i].keyframe;
        detected += ref[i].detected;
        person += !(ref[i].flags & MASKBUS_FLAG_NO_PERSON);
        for (int y = 0; y < ref[i].mask.height; y++)
            for (int x = 0; x < ref[i].mask.width; x++)
                fg += ((const uint8_t *)mk_image_row(&ref[i].mask, 0, y))[x] != 0;
    }
    printf("%s on %s: %d frames, %d with a person, %d GrabCut keyframes, detector ran on %d, %ld mask pixels set\n",
           name, mk_segment_device_name(s), c->n, person, keys, detected, fg);
    if (person < c->n / 2 || fg == 0 || keys < 1 || keys == person)
        fail_msg("%s: a trivial run (%d person frames, %d keyframes, %ld pixels)", name, person, keys, fg);
    if (mk_segment_detector(s) && detected != (c->n + 1) / 2)
        fail_msg("%s: the detector ran on %d frames, expected %d (detect.every_n 2)", name, detected, (c->n + 1) / 2);
    for (int depth = 2; depth <= 3; depth++) {
        run_clip(s, c, depth, o, -1, NULL);
        char what[64];
        snprintf(what, sizeof what, "%s depth %d vs 1", name, depth);
        for (int i = 0; i < c->n; i++) {
            same(&ref[i], &o[i], what);
            outcome_free(&o[i]);
        }
        printf("%s: identical to depth 1\n", what);
    }
    for (int i = 0; i < c->n; i++)
        outcome_free(&ref[i]);
    mk_segment_destroy(s);
}

static void testpattern_clip(clip_t *c, int w, int h, int n)
{
    mk_testpattern_t *tp;
    TU_OK(mk_testpattern_create(w, h, 30, &tp));
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->frames[i] = mk_image_desc(w, h, MK_FMT_RGB, MK_U8);
        TU_OK(mk_image_alloc(NULL, &c->frames[i], MK_MEM_HOST));
        TU_OK(mk_testpattern_frame(tp, (uint64_t)i * 2, &c->frames[i]));
    }
    mk_testpattern_destroy(tp);
}

static void clip_free(clip_t *c)
{
    for (int i = 0; i < c->n; i++)
        mk_image_free(NULL, &c->frames[i]);
    c->n = 0;
}

static void test_identical_testpattern(void **state)
{
    (void)state;
    clip_t c;
    testpattern_clip(&c, 320, 240, NFRAMES);
    check_identical(&c, "testpattern 320x240");
    clip_free(&c);
}

static void test_identical_otb(void **state)
{
    (void)state;
    char path[1024], rel[64];
    clip_t c = {.n = 0};
    for (int i = 0; i < NFRAMES; i++) {
        snprintf(rel, sizeof rel, "video/otb_man/frames/%04d.jpg", i + 1);
        if (!tu_data_path(path, sizeof path, rel))
            return; /* skipped */
        TU_OK(mk_imageio_load(path, MK_FMT_RGB, &c.frames[i]));
        c.n++;
    }
    check_identical(&c, "otb_man");
    clip_free(&c);
}

/* Frames that are no frames are refused without a number; a frame that fails in processing (a guided radius out
 * of range in its configuration: after its cut) comes back failed in its place; a frame of another size is
 * segmented; the frames before them are those of a run without them, and the engine goes on. */
static void test_errors(void **state)
{
    (void)state;
    mk_config_t cfg, failing;
    base_config(&cfg, 0);
    failing = cfg;
    failing.guided.radius = MK_GUIDED_MAX_RADIUS + 1;
    mk_segment_t *s;
    TU_OK(mk_segment_create(&cfg, &s));
    clip_t c;
    testpattern_clip(&c, 160, 120, 8);
    mk_image_t bad = c.frames[0];
    bad.data = NULL;
    assert_true(mk_segment_submit(s, &bad, 1, 0, NULL, 0) < 0);
    mk_image_t gray = mk_image_desc(16, 16, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &gray, MK_MEM_HOST));
    assert_int_equal(mk_segment_submit(s, &gray, 1, 0, NULL, 0), MK_EINVAL);
    mk_image_t odd = mk_image_desc(33, 16, MK_FMT_YUYV, MK_U8);
    odd.pitch = 68;
    odd.data = gray.data;
    assert_int_equal(mk_segment_submit(s, &odd, 1, 0, NULL, 0), MK_EINVAL);
    assert_int_equal(mk_segment_pending(s), 0);
    outcome_t ref[8];
    run_clip(s, &c, 1, ref, -1, NULL);
    mk_image_t small = mk_image_desc(96, 64, MK_FMT_RGB, MK_U8);
    TU_OK(mk_image_alloc(NULL, &small, MK_MEM_HOST));
    TU_OK(mk_image_memset(NULL, &small, 90));
    /* depth 3: frames 0..3, the failing one (frame 1 again), the small one, 4..7 */
    TU_OK(mk_segment_set_depth(s, 3));
    TU_OK(mk_segment_reset(s));
    const mk_image_t *seqs[10];
    int sub = 0;
    for (int i = 0; i < 4; i++)
        seqs[sub++] = &c.frames[i];
    seqs[sub++] = &gray; /* marks the failing frame: c.frames[1] is submitted */
    seqs[sub++] = &small;
    for (int i = 4; i < 8; i++)
        seqs[sub++] = &c.frames[i];
    int n = 0, fails = 0, k = 0;
    for (int i = 0; i <= sub; i++) {
        while (mk_segment_pending(s) >= 3 || (i == sub && mk_segment_pending(s))) {
            mk_segment_result_t *r;
            assert_int_equal(mk_segment_collect(s, -1, &r), MK_SEGMENT_OK);
            assert_int_equal(r->index, (uint64_t)n);
            if (r->user == &gray) {
                assert_int_equal(r->rc, MK_ERANGE);
                assert_true(strstr(r->err, "radius") != NULL);
                assert_true(r->gc_keyframe || r->select != MK_SELECT_NONE); /* it got as far as its cut */
                fails++;
            } else if (r->user == &small) {
                TU_OK(r->rc);
                assert_int_equal(r->width, 96);
                assert_int_equal(r->mask.width, 96);
            } else {
                /* the frames after the others: GrabCut's state may differ (the small frame's keyframe), the box
                 * choice (no detector: the fallback box) does not */
                outcome_t x;
                keep(&x, r);
                assert_int_equal(x.rc, 0);
                assert_int_equal(x.select, ref[k].select);
                assert_memory_equal(&x.box, &ref[k].box, sizeof x.box);
                if (k < 4)
                    same(&x, &ref[k], "frames before the failing one");
                outcome_free(&x);
                k++;
            }
            n++;
            mk_segment_release(s, r);
        }
        if (i == sub)
            break;
        const mk_image_t *f = seqs[i] == &gray ? &c.frames[1] : seqs[i];
        TU_OK(mk_segment_set_config(s, seqs[i] == &gray ? &failing : &cfg));
        assert_int_equal(mk_segment_submit(s, f, 1000u + (uint64_t)i, 0, (void *)seqs[i], -1), MK_SEGMENT_OK);
    }
    assert_int_equal(k, 8);
    assert_int_equal(fails, 1);
    for (int i = 0; i < 8; i++)
        outcome_free(&ref[i]);
    mk_image_free(NULL, &small);
    mk_image_free(NULL, &gray);
    clip_free(&c);
    mk_segment_destroy(s);
}

/* Destroy with frames submitted and none collected, and with a result collected and not released. */
static void test_destroy_inflight(void **state)
{
    (void)state;
    mk_config_t cfg;
    base_config(&cfg, 0);
    clip_t c;
    testpattern_clip(&c, 160, 120, 3);
    for (int round = 0; round < 2; round++) {
        mk_segment_t *s;
        TU_OK(mk_segment_create(&cfg, &s));
        for (int i = 0; i < 3; i++)
            assert_int_equal(mk_segment_submit(s, &c.frames[i], (uint64_t)i, 0, NULL, -1), MK_SEGMENT_OK);
        /* all slots taken: a fourth frame waits for frame 0's release */
        assert_int_equal(mk_segment_submit(s, &c.frames[0], 9, 0, NULL, 0), MK_SEGMENT_AGAIN);
        if (round) {
            mk_segment_result_t *r;
            assert_int_equal(mk_segment_collect(s, -1, &r), MK_SEGMENT_OK);
            assert_int_equal(r->seq, 0);
        }
        mk_segment_destroy(s);
    }
    clip_free(&c);
}

/* Live changes between frames (the mask products, then cut.method) at depth 3 give depth 1's results. */
static void test_config_change(void **state)
{
    (void)state;
    mk_config_t cfg, changed;
    base_config(&cfg, 0);
    changed = cfg;
    changed.mask.threshold = MK_CFG_THRESH_NONE;
    changed.select.margin = 0.2;
    mk_config_t boxcut = changed;
    boxcut.cut.method = MK_CFG_CUT_ELLIPSE;
    clip_t c;
    testpattern_clip(&c, 160, 120, 12);
    for (int kind = 0; kind < 2; kind++) {
        mk_segment_t *s;
        TU_OK(mk_segment_create(&cfg, &s));
        outcome_t ref[12], o[12];
        const mk_config_t *to = kind ? &boxcut : &changed;
        run_clip(s, &c, 1, ref, 5, to);
        TU_OK(mk_segment_set_config(s, &cfg));
        run_clip(s, &c, 3, o, 5, to);
        long changed_px = image_diff(&ref[4].mask, &ref[5].mask);
        for (int i = 0; i < 12; i++) {
            same(&ref[i], &o[i], kind ? "cut.method change" : "mask change");
            outcome_free(&ref[i]);
            outcome_free(&o[i]);
        }
        assert_true(changed_px > 0);
        assert_string_equal(mk_segment_cut_name(s), kind ? "ellipse" : "grabcut");
        TU_OK(mk_segment_set_config(s, &cfg));
        mk_segment_destroy(s);
    }
    /* detect.classes that does not resolve is refused, nothing applied */
    mk_segment_t *s;
    TU_OK(mk_segment_create(&cfg, &s));
    mk_config_t bad = cfg;
    snprintf(bad.detect.classes, sizeof bad.detect.classes, "no-such-class");
    assert_int_equal(mk_segment_set_config(s, &bad), MK_EINVAL);
    mk_segment_destroy(s);
    clip_free(&c);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        mk_ctx_t *cpu = NULL, *gpu = NULL;
        int start = tu_cuda_main("CUDA segmentation engine tests", &cpu, &gpu);
        if (start)
            return start;
        mk_ctx_destroy(cpu);
        mk_ctx_destroy(gpu);
        backend = MK_BACKEND_CUDA;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_testpattern), cmocka_unit_test(test_identical_otb),
        cmocka_unit_test(test_errors),                cmocka_unit_test(test_destroy_inflight),
        cmocka_unit_test(test_config_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
