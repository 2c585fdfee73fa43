/* detector: loading the person detector and running letterbox -> forward -> decode + NMS on a frame. */
#include "detector.h"

#include "darknet.h"
#include "errors.h"
#include "imageio.h"
#include "letterbox.h"

#include <stdlib.h>
#include <string.h>

struct mk_detector {
    mk_ctx_t *ctx;
    mk_net_t *net;
    mk_image_t input; /* the network input, in the context's memory */
    char **names;
    int nnames;
    int classes;
};

/* One name per line (Darknet's .names): trailing white space and '\r' removed, empty lines kept as "". */
static int load_names(const char *path, mk_detector_t *d)
{
    void *buf;
    size_t len;
    int rc = mk_file_read(path, &buf, &len);
    if (rc)
        return rc;
    char *s = buf;
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += s[i] == '\n';
    if (len && s[len - 1] != '\n')
        lines++;
    d->names = calloc((size_t)lines + 1, sizeof *d->names);
    if (!d->names) {
        free(buf);
        return mk_err_set(MK_ENOMEM, "out of memory");
    }
    size_t start = 0;
    for (size_t i = 0; i <= len && d->nnames < lines; i++) {
        if (i < len && s[i] != '\n')
            continue;
        size_t end = i;
        while (end > start && (s[end - 1] == '\r' || s[end - 1] == ' ' || s[end - 1] == '\t'))
            end--;
        if (!(d->names[d->nnames] = strndup(s + start, end - start))) {
            free(buf);
            return mk_err_set(MK_ENOMEM, "out of memory");
        }
        d->nnames++;
        start = i + 1;
    }
    free(buf);
    return 0;
}

int mk_detector_open(mk_ctx_t *ctx, const mk_config_t *cfg, mk_detector_t **out)
{
    *out = NULL;
    if (!cfg->detect.cfg[0] || !cfg->detect.weights[0])
        return mk_err_set(MK_EINVAL, "the detector needs both detect.cfg and detect.weights (%s is empty)",
                          cfg->detect.cfg[0] ? "detect.weights" : "detect.cfg");
    mk_detector_t *d = calloc(1, sizeof *d);
    if (!d)
        return mk_err_set(MK_ENOMEM, "out of memory");
    d->ctx = ctx;
    mk_net_opts_t o = mk_net_opts_default();
    o.fp16 = cfg->detect.fp16 && mk_ctx_backend(ctx) == MK_BACKEND_CUDA; /* FP16 exists on CUDA only */
    o.cudnn = cfg->detect.cudnn;
    int rc = mk_net_load(ctx, cfg->detect.cfg, cfg->detect.weights, &o, &d->net);
    if (!rc && mk_net_yolo_count(d->net) < 1)
        rc = mk_err_set(MK_EFORMAT, "%s has no [yolo] layer: not a detector", cfg->detect.cfg);
    if (!rc) {
        mk_yolo_layer_t l;
        mk_net_yolo_output(d->net, 0, &l);
        d->classes = l.classes;
        d->input = mk_net_input_desc(d->net);
        rc = mk_image_alloc(ctx, &d->input, mk_ctx_mem(ctx));
    }
    if (!rc && cfg->detect.names[0] && (rc = load_names(cfg->detect.names, d)))
        mk_err_wrap(rc, "detect.names");
    if (rc) {
        mk_detector_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

void mk_detector_close(mk_detector_t *d)
{
    if (!d)
        return;
    mk_image_free(d->ctx, &d->input);
    mk_net_destroy(d->net);
    for (int i = 0; i < d->nnames; i++)
        free(d->names[i]);
    free(d->names);
    free(d);
}

int mk_detector_run(mk_detector_t *d, const mk_image_t *frame, const mk_config_t *cfg, int class_id,
                    mk_detection_t *out, int max, int *n)
{
    *n = 0;
    mk_letterbox_t plan;
    int rc = mk_letterbox(d->ctx, frame, &d->input, (mk_letterbox_mode_t)cfg->detect.letterbox, &plan);
    if (!rc)
        rc = mk_net_forward(d->net, &d->input);
    if (rc)
        return rc;
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
    int nl = mk_net_yolo_count(d->net);
    if (nl > MK_YOLO_MAX_LAYERS)
        nl = MK_YOLO_MAX_LAYERS;
    for (int k = 0; k < nl; k++)
        if ((rc = mk_net_yolo_output(d->net, k, &layers[k])))
            return rc;
    mk_yolo_params_t p = mk_yolo_params_default();
    p.thresh = (float)cfg->detect.thresh;
    p.nms = (float)cfg->detect.nms;
    p.class_id = class_id >= 0 && class_id < d->classes ? class_id : -1;
    return mk_yolo_detect(d->ctx, layers, nl, &plan, &p, out, max, n);
}

void mk_detector_info(const mk_detector_t *d, int *net_w, int *net_h, int *classes)
{
    int c;
    mk_net_input_dims(d->net, &c, net_h, net_w);
    *classes = d->classes;
}

const char *const *mk_detector_names(const mk_detector_t *d, int *n)
{
    *n = d->nnames;
    return d->nnames ? (const char *const *)d->names : NULL;
}

double mk_detector_flops(const mk_detector_t *d)
{
    return mk_net_flops(d->net);
}
