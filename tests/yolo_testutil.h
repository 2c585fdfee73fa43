/* yolo_testutil: building [yolo] layer outputs by hand or at random, and the reference Darknet outputs, for the
 * decode + NMS tests (test_yolo, test_yolo_parity). Header-only: each test includes it once. */
#ifndef MK_YOLO_TESTUTIL_H
#define MK_YOLO_TESTUTIL_H

#include "testutil.h"

#include "yolo.h"
#include "yolo_cfg.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A zeroed host layer (every objectness 0: no candidates) with all anchors of size aw x ah. */
static inline mk_yolo_layer_t ty_layer(int w, int h, int n, int classes, int net_w, int net_h, float aw, float ah)
{
    mk_yolo_layer_t l;
    memset(&l, 0, sizeof l);
    l.w = w;
    l.h = h;
    l.n = n;
    l.classes = classes;
    l.net_w = net_w;
    l.net_h = net_h;
    l.scale_x_y = 1;
    for (int a = 0; a < n; a++) {
        l.anchors[2 * a] = aw;
        l.anchors[2 * a + 1] = ah;
    }
    l.data = calloc((size_t)n * (size_t)(5 + classes) * (size_t)w * (size_t)h, sizeof(float));
    assert_non_null(l.data);
    return l;
}

/* Entry e (0 x, 1 y, 2 w, 3 h, 4 objectness, 5 + c class c) of anchor a in cell (col, row). */
static inline float *ty_at(const mk_yolo_layer_t *l, int a, int e, int col, int row)
{
    return (float *)l->data + (((size_t)a * (size_t)(5 + l->classes) + (size_t)e) * (size_t)l->h + (size_t)row) *
                                  (size_t)l->w +
           (size_t)col;
}

/* Sets one anchor's box: x, y, raw w, h, objectness and the first class scores (the rest stay). */
static inline void ty_set(mk_yolo_layer_t *l, int a, int col, int row, float x, float y, float w, float h, float obj,
                          int nscores, const float *scores)
{
    *ty_at(l, a, 0, col, row) = x;
    *ty_at(l, a, 1, col, row) = y;
    *ty_at(l, a, 2, col, row) = w;
    *ty_at(l, a, 3, col, row) = h;
    *ty_at(l, a, 4, col, row) = obj;
    for (int c = 0; c < nscores; c++)
        *ty_at(l, a, 5 + c, col, row) = scores[c];
}

static inline void ty_free(mk_yolo_layer_t *l, int n)
{
    for (int k = 0; k < n; k++) {
        free((void *)l[k].data);
        l[k].data = NULL;
    }
}

static inline float ty_uniform(tu_rng_t *r)
{
    return (float)(tu_rand(r) >> 40) / (float)(1 << 24);
}

/* Random outputs. With `ties`, objectness, scores and boxes come from a few values only, so that equal
 * probabilities and identical boxes are frequent. */
static inline void ty_fill_random(mk_yolo_layer_t *l, tu_rng_t *r, int ties)
{
    static const float levels[4] = {0.5f, 0.75f, 0.875f, 1.0f};
    size_t plane = (size_t)l->w * l->h;
    for (int a = 0; a < l->n; a++)
        for (size_t i = 0; i < plane; i++) {
            float *e = (float *)l->data + (size_t)a * (size_t)(5 + l->classes) * plane + i;
            for (int k = 0; k < 5 + l->classes; k++) {
                float v = ties ? levels[tu_rand_int(r, 0, 3)] : ty_uniform(r);
                if (k == 2 || k == 3)
                    v = ties ? 0.25f * (float)tu_rand_int(r, -2, 2) : 2 * v - 1;
                else if (k == 0 || k == 1)
                    v = ties ? 0.25f * (float)tu_rand_int(r, 0, 4) : v;
                else if (k >= 5 && !ties && tu_rand_int(r, 0, 3))
                    v *= 0.2f; /* most classes weak */
                e[(size_t)k * plane] = v;
            }
        }
}

/* The reference Darknet runs: model folder and the cfg it used. */
static const struct {
    const char *model, *cfg;
} ty_models[] = {
    {"yolo-fastest-1.1-body", "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg"},
    {"yolo-fastest-1.1-coco", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.cfg"},
    {"yolo-fastest-1.1-xl", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.cfg"},
    {"yolov3-tiny-random", "models/cfg/yolov3-tiny.cfg"},
    {"yolov4-tiny-random", "models/cfg/yolov4-tiny.cfg"},
};

/* One reference image: its json, layers (host memory, from its cfg and NAME.yoloK.f32) and darknet letterbox. */
typedef struct {
    char name[512];
    cJSON *json;
    mt_yolo_cfg_t cfg;
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
    mk_letterbox_t lb;
    mk_yolo_params_t p;
} ty_ref_t;

/* Calls fn for every reference image of every model; returns how many there were (0 without the data). */
static inline int ty_for_each_reference(void (*fn)(const ty_ref_t *ref, void *arg), void *arg)
{
    char dir[4096], path[4600];
    int count = 0;
    if (!tu_data_path(dir, sizeof dir, "reference/darknet"))
        return 0;
    for (size_t m = 0; m < sizeof ty_models / sizeof ty_models[0]; m++) {
        char mdir[4400], cfg_path[4400];
        snprintf(mdir, sizeof mdir, "%s/%s", dir, ty_models[m].model);
        snprintf(cfg_path, sizeof cfg_path, "%s/%s", tu_data_dir(), ty_models[m].cfg);
        DIR *d = opendir(mdir);
        if (!d)
            fail_msg("%s: missing", mdir);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
                continue;
            ty_ref_t ref;
            memset(&ref, 0, sizeof ref);
            snprintf(ref.name, sizeof ref.name, "%s/%.*s", ty_models[m].model, (int)(len - 5), e->d_name);
            snprintf(path, sizeof path, "%s/%s", mdir, e->d_name);
            ref.json = tu_load_json(path);
            TU_OK(mt_yolo_cfg_read(cfg_path, &ref.cfg));
            snprintf(path, sizeof path, "%s/%.*s", mdir, (int)(len - 5), e->d_name);
            TU_OK(mt_yolo_dump_load(&ref.cfg, path, ref.layers));
            /* The json's description of each layer agrees with the cfg and the file. */
            cJSON *yl = cJSON_GetObjectItem(ref.json, "yolo_layers");
            assert_int_equal(cJSON_GetArraySize(yl), ref.cfg.nlayers);
            for (int k = 0; k < ref.cfg.nlayers; k++) {
                cJSON *j = cJSON_GetArrayItem(yl, k);
                assert_int_equal(cJSON_GetObjectItem(j, "w")->valueint, ref.layers[k].w);
                assert_int_equal(cJSON_GetObjectItem(j, "h")->valueint, ref.layers[k].h);
                assert_int_equal(cJSON_GetObjectItem(j, "n")->valueint, ref.layers[k].n);
                assert_int_equal(cJSON_GetObjectItem(j, "classes")->valueint, ref.layers[k].classes);
            }
            assert_int_equal(cJSON_GetObjectItem(ref.json, "net_w")->valueint, ref.cfg.net_w);
            assert_int_equal(cJSON_GetObjectItem(ref.json, "net_h")->valueint, ref.cfg.net_h);
            assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ref.json, "letterbox")));
            TU_OK(mk_letterbox_plan(&ref.lb, cJSON_GetObjectItem(ref.json, "image_w")->valueint,
                                    cJSON_GetObjectItem(ref.json, "image_h")->valueint, ref.cfg.net_w, ref.cfg.net_h,
                                    MK_LETTERBOX_DARKNET));
            ref.p = mk_yolo_params_default();
            ref.p.thresh = (float)cJSON_GetObjectItem(ref.json, "thresh")->valuedouble;
            ref.p.nms = (float)cJSON_GetObjectItem(ref.json, "nms")->valuedouble;
            fn(&ref, arg);
            ty_free(ref.layers, ref.cfg.nlayers);
            cJSON_Delete(ref.json);
            count++;
        }
        closedir(d);
    }
    return count;
}

/* How well detections matched the references (ty_match_reference). */
typedef struct {
    int images, boxes;
    double worst_iou, worst_prob;
} ty_ref_stats_t;

static inline double ty_iou_px(const double a[4], const double b[4])
{
    double w = fmin(a[0] + a[2], b[0] + b[2]) - fmax(a[0], b[0]);
    double h = fmin(a[1] + a[3], b[1] + b[3]) - fmax(a[1], b[1]);
    double i = w > 0 && h > 0 ? w * h : 0;
    return i / (a[2] * a[3] + b[2] * b[3] - i);
}

/* Every reference box matched by one of ours of its class with IoU >= 0.98 and |prob difference| <= 0.01, one to
 * one, and no box of ours left over. */
static inline void ty_match_reference(const ty_ref_t *ref, const mk_detection_t *out, int n, ty_ref_stats_t *st)
{
    cJSON *dets = cJSON_GetObjectItem(ref->json, "detections"), *e;
    char used[1024] = {0};
    int nref = cJSON_GetArraySize(dets);
    cJSON_ArrayForEach(e, dets)
    {
        double want[4] = {cJSON_GetObjectItem(e, "x")->valuedouble, cJSON_GetObjectItem(e, "y")->valuedouble,
                          cJSON_GetObjectItem(e, "w")->valuedouble, cJSON_GetObjectItem(e, "h")->valuedouble};
        int cls = cJSON_GetObjectItem(e, "class")->valueint, best = -1;
        double best_iou = 0, prob = cJSON_GetObjectItem(e, "prob")->valuedouble;
        for (int i = 0; i < n; i++) {
            double got[4] = {out[i].x, out[i].y, out[i].w, out[i].h};
            double iou = ty_iou_px(want, got);
            if (!used[i] && out[i].class_id == cls && iou > best_iou && fabs(out[i].prob - prob) <= 0.01) {
                best = i;
                best_iou = iou;
            }
        }
        if (best < 0 || best_iou < 0.98)
            fail_msg("%s: reference box class %d prob %g at (%g, %g) %g x %g: no match (best IoU %g)", ref->name, cls,
                     prob, want[0], want[1], want[2], want[3], best_iou);
        used[best] = 1;
        st->worst_iou = best_iou < st->worst_iou ? best_iou : st->worst_iou;
        st->worst_prob = fmax(st->worst_prob, fabs(out[best].prob - prob));
        assert_float_equal(out[best].objectness, cJSON_GetObjectItem(e, "objectness")->valuedouble, 1e-5);
    }
    if (n != nref)
        fail_msg("%s: %d detections, Darknet %d", ref->name, n, nref);
    st->images++;
    st->boxes += n;
}


#endif
