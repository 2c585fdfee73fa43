/* yolo: argument checks and backend dispatch of decode + NMS. */
#include "yolo.h"

#include "backend.h"
#include "errors.h"

#include <math.h>

mk_yolo_params_t mk_yolo_params_default(void)
{
    mk_yolo_params_t p = {.thresh = 0.25f, .nms = 0.45f, .top_k = 0, .class_id = -1};
    return p;
}

static int check_layer(const mk_yolo_layer_t *l, int k, const mk_yolo_layer_t *first)
{
    if (l->w < 1 || l->h < 1 || l->w > MK_IMAGE_MAX_DIM || l->h > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "yolo layer %d: grid %dx%d outside 1..%d", k, l->w, l->h, MK_IMAGE_MAX_DIM);
    if (l->n < 1 || l->n > MK_YOLO_MAX_ANCHORS)
        return mk_err_set(MK_ERANGE, "yolo layer %d: %d anchors (1..%d)", k, l->n, MK_YOLO_MAX_ANCHORS);
    if (l->classes < 1 || l->classes > 65536)
        return mk_err_set(MK_ERANGE, "yolo layer %d: %d classes (1..65536)", k, l->classes);
    if (l->classes != first->classes)
        return mk_err_set(MK_EINVAL, "yolo layer %d has %d classes, layer 0 has %d", k, l->classes, first->classes);
    if (l->net_w != first->net_w || l->net_h != first->net_h)
        return mk_err_set(MK_EINVAL, "yolo layer %d refers to a %dx%d network, layer 0 to %dx%d", k, l->net_w,
                          l->net_h, first->net_w, first->net_h);
    for (int a = 0; a < 2 * l->n; a++)
        if (!(l->anchors[a] > 0) || !isfinite(l->anchors[a]))
            return mk_err_set(MK_ERANGE, "yolo layer %d: anchor %d %s is %g (must be positive)", k, a / 2,
                              a % 2 ? "height" : "width", (double)l->anchors[a]);
    if (!l->data)
        return mk_err_set(MK_EINVAL, "yolo layer %d: no data", k);
    return 0;
}

/* The letterbox must be a plan for the network size: re-planning it gives the same geometry. */
static int check_letterbox(const mk_letterbox_t *lb, int net_w, int net_h)
{
    mk_letterbox_t re;
    if (lb->mode != MK_LETTERBOX_WARP && lb->mode != MK_LETTERBOX_DARKNET)
        return mk_err_set(MK_EINVAL, "yolo decode: unknown letterbox mode %d", (int)lb->mode);
    if (lb->dst_w != net_w || lb->dst_h != net_h)
        return mk_err_set(MK_EINVAL, "yolo decode: the letterbox makes %dx%d inputs, the network takes %dx%d",
                          lb->dst_w, lb->dst_h, net_w, net_h);
    int rc = mk_letterbox_plan(&re, lb->src_w, lb->src_h, lb->dst_w, lb->dst_h, lb->mode);
    if (rc)
        return mk_err_wrap(rc, "yolo decode");
    if (re.new_w != lb->new_w || re.new_h != lb->new_h || re.sx != lb->sx || re.tx != lb->tx || re.sy != lb->sy ||
        re.ty != lb->ty)
        return mk_err_set(MK_EINVAL, "yolo decode: the letterbox is not a plan of %dx%d -> %dx%d (%s)", lb->src_w,
                          lb->src_h, lb->dst_w, lb->dst_h, mk_letterbox_mode_name(lb->mode));
    return 0;
}

int mk_yolo_detect(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                   const mk_yolo_params_t *p, mk_detection_t *out, int max_out, int *n_out)
{
    int rc;
    if (!ctx || !layers || !lb || !p || !n_out || (!out && max_out > 0))
        return mk_err_set(MK_EINVAL, "yolo decode: NULL argument");
    *n_out = 0;
    if (nlayers < 1 || nlayers > MK_YOLO_MAX_LAYERS)
        return mk_err_set(MK_ERANGE, "yolo decode: %d layers (1..%d)", nlayers, MK_YOLO_MAX_LAYERS);
    if (max_out < 0)
        return mk_err_set(MK_ERANGE, "yolo decode: max_out %d is negative", max_out);
    if (!(p->thresh >= 0 && p->thresh < 1))
        return mk_err_set(MK_ERANGE, "yolo decode: thresh %g outside [0, 1)", (double)p->thresh);
    if (!(p->nms >= 0 && p->nms <= 1))
        return mk_err_set(MK_ERANGE, "yolo decode: nms %g outside [0, 1]", (double)p->nms);
    if (p->top_k < 0)
        return mk_err_set(MK_ERANGE, "yolo decode: top_k %d is negative", p->top_k);
    long long boxes = 0;
    for (int k = 0; k < nlayers; k++) {
        if ((rc = check_layer(&layers[k], k, &layers[0])))
            return rc;
        boxes += (long long)layers[k].w * layers[k].h * layers[k].n;
    }
    if (boxes > MK_YOLO_MAX_BOXES)
        return mk_err_set(MK_ERANGE, "yolo decode: %lld boxes (at most %d)", boxes, MK_YOLO_MAX_BOXES);
    if (p->class_id < -1 || p->class_id >= layers[0].classes)
        return mk_err_set(MK_ERANGE, "yolo decode: class %d outside -1..%d", p->class_id, layers[0].classes - 1);
    if ((rc = check_letterbox(lb, layers[0].net_w, layers[0].net_h)))
        return rc;
    int limit = p->top_k > 0 && p->top_k < max_out ? p->top_k : max_out;
    if (limit == 0)
        return 0;
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_yolo_detect_cuda(ctx, layers, nlayers, lb, p, out, limit, n_out);
#endif
    return mk_yolo_detect_cpu(ctx, layers, nlayers, lb, p, out, limit, n_out);
}
