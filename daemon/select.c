/* select: class sets, the per-frame box choice with holding, the fallback rectangle and the region of interest. */
#include "select.h"

#include "errors.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int mk_select_classes(const char *spec, const char *const *names, int nnames, mk_class_set_t *out)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) {
        out->all = 1;
        return 0;
    }
    const char *p = spec;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *a = p, *b = p + len;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        int id = -1;
        if (a < b && strspn(a, "0123456789") >= (size_t)(b - a)) {
            errno = 0;
            long v = strtol(a, NULL, 10);
            if (errno || v >= MK_SELECT_MAX_CLASSES || b - a > 6)
                return mk_err_set(MK_EINVAL, "detect.classes: class %.*s outside 0..%d", (int)(b - a), a,
                                  MK_SELECT_MAX_CLASSES - 1);
            id = (int)v;
        } else {
            for (int i = 0; names && i < nnames && i < MK_SELECT_MAX_CLASSES; i++)
                if (names[i] && strlen(names[i]) == (size_t)(b - a) && !strncmp(names[i], a, (size_t)(b - a))) {
                    id = i;
                    break;
                }
            if (id < 0)
                return mk_err_set(MK_EINVAL, "detect.classes: unknown class '%.*s'%s", (int)(b - a), a,
                                  names && nnames ? "" : " (no detect.names: give class numbers)");
        }
        out->bits[id / 64] |= 1ull << (id % 64);
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

int mk_select_class_in(const mk_class_set_t *set, int class_id)
{
    if (set->all)
        return 1;
    return class_id >= 0 && class_id < MK_SELECT_MAX_CLASSES && (set->bits[class_id / 64] >> (class_id % 64) & 1);
}

int mk_select_class_single(const mk_class_set_t *set)
{
    if (set->all)
        return -1;
    int found = -1;
    for (int i = 0; i < MK_SELECT_MAX_CLASSES; i++)
        if (set->bits[i / 64] >> (i % 64) & 1) {
            if (found >= 0)
                return -1;
            found = i;
        }
    return found;
}

void mk_select_init(mk_select_state_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_track = 1;
}

float mk_box_iou(const mk_box_t *a, const mk_box_t *b)
{
    if (!(a->w > 0 && a->h > 0 && b->w > 0 && b->h > 0))
        return 0;
    float ix = fminf(a->x + a->w, b->x + b->w) - fmaxf(a->x, b->x);
    float iy = fminf(a->y + a->h, b->y + b->h) - fmaxf(a->y, b->y);
    if (ix <= 0 || iy <= 0)
        return 0;
    float inter = ix * iy;
    return inter / (a->w * a->h + b->w * b->h - inter);
}

mk_select_result_t mk_select_choose(mk_select_state_t *st, const mk_config_t *cfg, const mk_class_set_t *classes,
                                    const mk_detection_t *dets, int n, int *chosen, mk_box_t *box,
                                    uint32_t *track)
{
    int best = -1;
    float best_key = -1;
    for (int i = 0; i < n; i++) {
        const mk_detection_t *d = &dets[i];
        if (!mk_select_class_in(classes, d->class_id) || d->prob < cfg->select.min_score || !(d->w > 0 && d->h > 0))
            continue;
        mk_box_t b = {d->x, d->y, d->w, d->h};
        /* With a previous target to prefer, overlap ranks first (as 1 + IoU), score breaks ties and ranks the
         * boxes that do not overlap it. */
        float iou = st->have && cfg->select.prefer_previous ? mk_box_iou(&b, &st->box) : 0;
        float key = iou > 0 ? 1 + iou : d->prob;
        if (key > best_key) {
            best_key = key;
            best = i;
        }
    }
    *chosen = best;
    if (best >= 0) {
        mk_box_t b = {dets[best].x, dets[best].y, dets[best].w, dets[best].h};
        if (!st->have || mk_box_iou(&b, &st->box) < MK_SELECT_TRACK_IOU)
            st->track_id = st->next_track++;
        st->have = 1;
        st->box = b;
        st->missed = 0;
        *box = b;
        *track = st->track_id;
        return MK_SELECT_DETECTED;
    }
    if (st->have && st->missed < cfg->select.hold_frames) {
        st->missed++;
        *box = st->box;
        *track = st->track_id;
        return MK_SELECT_HELD;
    }
    st->have = 0;
    st->missed = 0;
    memset(box, 0, sizeof *box);
    *track = 0;
    return MK_SELECT_NONE;
}

mk_box_t mk_select_fallback(const mk_config_t *cfg, int w, int h)
{
    const mk_cfg_rect_t *r = &cfg->select.fallback;
    mk_box_t b;
    if (r->w == 0 || r->h == 0) {
        b.w = (float)w / 2;
        b.h = (float)h * 0.8f;
        b.x = ((float)w - b.w) / 2;
        b.y = ((float)h - b.h) / 2;
        return b;
    }
    float x0 = fminf((float)r->x, (float)w), y0 = fminf((float)r->y, (float)h);
    float x1 = fminf((float)r->x + (float)r->w, (float)w), y1 = fminf((float)r->y + (float)r->h, (float)h);
    b.x = x0;
    b.y = y0;
    b.w = x1 - x0;
    b.h = y1 - y0;
    return b;
}

int mk_select_roi(const mk_box_t *box, double margin, int w, int h, int min_side, int roi[4])
{
    double mx = margin * box->w, my = margin * box->h;
    double x0 = floor(box->x - mx), y0 = floor(box->y - my);
    double x1 = ceil(box->x + box->w + mx), y1 = ceil(box->y + box->h + my);
    x0 = fmax(x0, 0);
    y0 = fmax(y0, 0);
    x1 = fmin(x1, w);
    y1 = fmin(y1, h);
    if (!(x1 - x0 >= min_side && y1 - y0 >= min_side)) {
        roi[0] = roi[1] = roi[2] = roi[3] = 0;
        return mk_err_set(MK_ERANGE, "region of interest %gx%g is smaller than %d pixels", x1 - x0, y1 - y0,
                          min_side);
    }
    roi[0] = (int)x0;
    roi[1] = (int)y0;
    roi[2] = (int)(x1 - x0);
    roi[3] = (int)(y1 - y0);
    return 0;
}

/* One axis of mk_select_roi_keep: the start of a window of `size` (>= len) around [pos, pos + len) inside [0, n). */
static int keep_axis(int pos, int len, int size, int n)
{
    int x = pos - (size - len) / 2, lo = pos + len - size, hi = pos;
    lo = lo < 0 ? 0 : lo;
    hi = hi > n - size ? n - size : hi;
    return x < lo ? lo : x > hi ? hi : x;
}

int mk_select_roi_keep(const int prev[4], int roi[4], int w, int h)
{
    int pw = prev[2], ph = prev[3];
    if (pw <= 0 || ph <= 0 || pw > w || ph > h || roi[2] > pw || roi[3] > ph || 8 * roi[2] < 7 * pw ||
        8 * roi[3] < 7 * ph)
        return 0;
    roi[0] = keep_axis(roi[0], roi[2], pw, w);
    roi[1] = keep_axis(roi[1], roi[3], ph, h);
    roi[2] = pw;
    roi[3] = ph;
    return 1;
}

const char *mk_select_result_name(mk_select_result_t r)
{
    switch (r) {
    case MK_SELECT_DETECTED: return "detected";
    case MK_SELECT_HELD: return "held";
    case MK_SELECT_FALLBACK: return "fallback";
    default: return "none";
    }
}
