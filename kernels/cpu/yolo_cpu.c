/* yolo_cpu: the reference decode + NMS, step by step as Darknet: candidates in Darknet's order, then per class a
 * sort and the greedy suppression of do_nms_sort, then every surviving (box, class) most probable first. */
#include "backend.h"
#include "errors.h"
#include "yolo_px.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float nbox[4], obox[4]; /* NMS frame (centre form) and source pixels (top-left form), see mk_px_yolo_place */
    float objectness;
    int index;
} cand_t;

typedef struct {
    uint64_t key; /* mk_px_yolo_key: probability and index */
    int class_id;
    int cand;
} pair_t;

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = ((const pair_t *)a)->key, y = ((const pair_t *)b)->key;
    return x < y ? -1 : x > y;
}

/* Most probable first, then class, then index: a total order (no two pairs share class and index). */
static int cmp_out(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    uint32_t px = (uint32_t)(x->key >> 32), py = (uint32_t)(y->key >> 32);
    if (px != py)
        return px < py ? -1 : 1;
    if (x->class_id != y->class_id)
        return x->class_id < y->class_id ? -1 : 1;
    return cmp_key(a, b);
}

static const float *entry(const mk_yolo_layer_t *l, int a, int e, int cell)
{
    return l->data + ((size_t)a * (size_t)(5 + l->classes) + (size_t)e) * (size_t)l->w * (size_t)l->h + (size_t)cell;
}

/* get_yolo_detections (with correct_yolo_boxes) over all layers: layer by layer, cell by cell, anchor by anchor.
 * Without `cands` it only counts: candidates into *ncand and the pairs of class c into cursor[c - c0 + 1]. With
 * them it fills the candidates and puts each pair of class c at pairs[cursor[c - c0]++]. */
static void scan(const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb, const mk_yolo_params_t *p,
                 int c0, int c1, cand_t *cands, pair_t *pairs, size_t *cursor, size_t *ncand)
{
    int index = 0;
    size_t nc = 0;
    for (int k = 0; k < nlayers; k++) {
        const mk_yolo_layer_t *l = &layers[k];
        for (int cell = 0; cell < l->w * l->h; cell++)
            for (int a = 0; a < l->n; a++, index++) {
                float obj = *entry(l, a, 4, cell);
                if (!(obj > p->thresh))
                    continue;
                if (cands) {
                    float b[4];
                    mk_px_yolo_box(*entry(l, a, 0, cell), *entry(l, a, 1, cell), *entry(l, a, 2, cell),
                                   *entry(l, a, 3, cell), cell % l->w, cell / l->w, l->w, l->h, l->anchors[2 * a],
                                   l->anchors[2 * a + 1], l->net_w, l->net_h, b);
                    mk_px_yolo_place(lb, b, cands[nc].nbox, cands[nc].obox);
                    cands[nc].objectness = obj;
                    cands[nc].index = index;
                }
                for (int c = c0; c < c1; c++) {
                    float prob = MK_FMUL(obj, *entry(l, a, 5 + c, cell));
                    if (!(prob > p->thresh))
                        continue;
                    if (!cands) {
                        cursor[c - c0 + 1]++;
                        continue;
                    }
                    pair_t *pr = &pairs[cursor[c - c0]++];
                    pr->key = mk_px_yolo_key(prob, (uint32_t)index);
                    pr->class_id = c;
                    pr->cand = (int)nc;
                }
                nc++;
            }
    }
    *ncand = nc;
}

int mk_yolo_detect_cpu(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                       const mk_yolo_params_t *p, mk_detection_t *out, int max_out, int *n_out)
{
    (void)ctx;
    int c0 = p->class_id >= 0 ? p->class_id : 0, c1 = p->class_id >= 0 ? p->class_id + 1 : layers[0].classes;
    size_t ncls = (size_t)(c1 - c0), ncand = 0, nkept = 0;
    size_t *start = calloc(ncls + 1, sizeof *start), *cursor = calloc(ncls + 1, sizeof *cursor);
    cand_t *cands = NULL;
    pair_t *pairs = NULL;
    unsigned char *removed = NULL;
    int rc = 0;
    if (!start || !cursor)
        goto nomem;
    scan(layers, nlayers, lb, p, c0, c1, NULL, NULL, start, &ncand);
    for (size_t c = 0; c < ncls; c++)
        start[c + 1] += start[c];
    memcpy(cursor, start, (ncls + 1) * sizeof *start);
    cands = malloc((ncand ? ncand : 1) * sizeof *cands);
    pairs = malloc((start[ncls] ? start[ncls] : 1) * sizeof *pairs);
    removed = malloc(start[ncls] ? start[ncls] : 1);
    if (!cands || !pairs || !removed)
        goto nomem;
    scan(layers, nlayers, lb, p, c0, c1, cands, pairs, cursor, &ncand);
    /* do_nms_sort, one class at a time: most probable first; a box still standing removes every later one of its
     * class that overlaps it by more than nms. The survivors move to the front of `pairs`. */
    for (size_t c = 0; c < ncls; c++) {
        pair_t *list = pairs + start[c];
        size_t m = start[c + 1] - start[c];
        qsort(list, m, sizeof *list, cmp_key);
        memset(removed, 0, m);
        for (size_t i = 0; i < m && p->nms > 0; i++) {
            if (removed[i])
                continue;
            const float *a = cands[list[i].cand].nbox;
            for (size_t j = i + 1; j < m; j++)
                if (!removed[j] && mk_px_box_iou(a, cands[list[j].cand].nbox) > p->nms)
                    removed[j] = 1;
        }
        for (size_t i = 0; i < m; i++)
            if (!removed[i])
                pairs[nkept++] = list[i]; /* nkept <= start[c] + i: in place */
    }
    qsort(pairs, nkept, sizeof *pairs, cmp_out);
    int n = nkept < (size_t)max_out ? (int)nkept : max_out;
    for (int i = 0; i < n; i++) {
        const cand_t *cd = &cands[pairs[i].cand];
        mk_detection_t *d = &out[i];
        d->x = cd->obox[0];
        d->y = cd->obox[1];
        d->w = cd->obox[2];
        d->h = cd->obox[3];
        d->prob = mk_px_yolo_key_prob(pairs[i].key);
        d->objectness = cd->objectness;
        d->class_id = pairs[i].class_id;
        d->index = cd->index;
    }
    *n_out = n;
    goto done;
nomem:
    rc = mk_err_set(MK_ENOMEM, "yolo decode: out of memory");
done:
    free(start);
    free(cursor);
    free(cands);
    free(pairs);
    free(removed);
    return rc;
}
