/* masktool_detect: class names, the per-image detections JSON and decode + NMS of one image for masktool. */
#include "masktool_detect.h"

#include "errors.h"
#include "imageio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_names_load(const char *path, mt_names_t *out)
{
    void *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = mk_file_read(path, &data, &len);
    if (rc)
        return rc;
    const char *s = data, *end = s + len;
    int lines = 0;
    for (const char *q = s; q < end; q++)
        lines += *q == '\n';
    out->name = calloc((size_t)lines + 1, sizeof *out->name);
    while (out->name && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = (size_t)((nl ? nl : end) - s);
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (!(out->name[out->n] = strndup(s, n)))
            break;
        out->n++;
        s = nl ? nl + 1 : end;
    }
    free(data);
    if (!out->name || s < end) {
        mt_names_free(out);
        return mk_err_set(MK_ENOMEM, "out of memory");
    }
    return 0;
}

void mt_names_free(mt_names_t *names)
{
    for (int i = 0; names->name && i < names->n; i++)
        free(names->name[i]);
    free(names->name);
    memset(names, 0, sizeof *names);
}

const char *mt_names_get(const mt_names_t *names, int class_id)
{
    return names && class_id >= 0 && class_id < names->n ? names->name[class_id] : NULL;
}

/* A float as the shortest decimal of 9 significant digits, which reads back as the same float. */
static double f9(float v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", (double)v);
    return strtod(buf, NULL);
}

cJSON *mt_detections_json(const char *image, int width, int height, const char *backend, const mk_detection_t *d,
                          int n, const mt_names_t *names)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "image", image);
    cJSON_AddNumberToObject(o, "width", width);
    cJSON_AddNumberToObject(o, "height", height);
    cJSON_AddStringToObject(o, "backend", backend);
    cJSON *arr = cJSON_AddArrayToObject(o, "detections");
    for (int i = 0; i < n; i++) {
        cJSON *j = cJSON_CreateObject();
        const char *name = mt_names_get(names, d[i].class_id);
        cJSON_AddNumberToObject(j, "class", d[i].class_id);
        if (name)
            cJSON_AddStringToObject(j, "name", name);
        else
            cJSON_AddNullToObject(j, "name");
        cJSON_AddNumberToObject(j, "prob", f9(d[i].prob));
        cJSON_AddNumberToObject(j, "objectness", f9(d[i].objectness));
        cJSON_AddNumberToObject(j, "x", f9(d[i].x));
        cJSON_AddNumberToObject(j, "y", f9(d[i].y));
        cJSON_AddNumberToObject(j, "w", f9(d[i].w));
        cJSON_AddNumberToObject(j, "h", f9(d[i].h));
        cJSON_AddItemToArray(arr, j);
    }
    return o;
}

int mt_yolo_max_detections(const mk_yolo_layer_t *layers, int nlayers, const mk_yolo_params_t *p)
{
    if (p->top_k > 0)
        return p->top_k;
    long long boxes = 0;
    for (int k = 0; k < nlayers; k++)
        boxes += (long long)layers[k].w * layers[k].h * layers[k].n;
    long long pairs = boxes * (p->class_id >= 0 ? 1 : layers[0].classes);
    return pairs < (1 << 20) ? (int)pairs : 1 << 20;
}

int mt_detect_json(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                   const mk_yolo_params_t *p, const char *image, const mt_names_t *names, cJSON **out)
{
    int max_out = mt_yolo_max_detections(layers, nlayers, p), n = 0;
    mk_detection_t *d = malloc((size_t)(max_out > 0 ? max_out : 1) * sizeof *d);
    if (!d)
        return mk_err_set(MK_ENOMEM, "out of memory for %d detections", max_out);
    int rc = mk_yolo_detect(ctx, layers, nlayers, lb, p, d, max_out, &n);
    if (!rc)
        *out = mt_detections_json(image, lb->src_w, lb->src_h, mk_backend_name(mk_ctx_backend(ctx)), d, n, names);
    free(d);
    return rc;
}

int mt_detect_image(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *rgb, mk_letterbox_mode_t mode,
                    const mk_yolo_params_t *p, const char *image, const mt_names_t *names, cJSON **out)
{
    mk_image_t src = *rgb, in = mk_net_input_desc(net);
    mk_letterbox_t plan;
    mk_yolo_layer_t layers[MK_YOLO_MAX_LAYERS];
    int nl = mk_net_yolo_count(net), rc = 0;
    int upload = mk_ctx_mem(ctx) != MK_MEM_HOST;
    if (nl < 1 || nl > MK_YOLO_MAX_LAYERS)
        return mk_err_set(MK_EUNSUPPORTED, "the network has %d [yolo] layers (1..%d supported)", nl,
                          MK_YOLO_MAX_LAYERS);
    if (upload) {
        src.data = NULL;
        src.owned = 0;
        src.pitch = 0;
        rc = mk_image_alloc(ctx, &src, mk_ctx_mem(ctx));
        if (!rc)
            rc = mk_image_upload(ctx, &src, rgb);
    }
    if (!rc)
        rc = mk_image_alloc(ctx, &in, mk_ctx_mem(ctx));
    if (!rc)
        rc = mk_letterbox(ctx, &src, &in, mode, &plan);
    if (!rc)
        rc = mk_net_forward(net, &in);
    for (int k = 0; k < nl && !rc; k++)
        rc = mk_net_yolo_output(net, k, &layers[k]);
    if (!rc)
        rc = mt_detect_json(ctx, layers, nl, &plan, p, image, names, out);
    mk_image_free(ctx, &in);
    if (upload)
        mk_image_free(ctx, &src);
    return rc;
}
