/* darknet: loading a network (cfg, shapes, weights, backend), the forward-pass dispatch and the accessors. */
#include "darknet_internal.h"

#include "backend.h"
#include "darknet_cfg.h"
#include "errors.h"
#include "imageio.h"
#include "log.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mk_net_opts_t mk_net_opts_default(void)
{
    mk_net_opts_t o = {0};
    o.seed = 1;
    return o;
}

__attribute__((format(printf, 4, 5))) static int fail(const mk_net_t *net, const mk_layer_t *l, int code,
                                                      const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mk_err_set(code, "%s:%d: [%s] %s", net->cfg_name, l->line, mk_layer_type_name(l->type), msg);
}

/* A reference to layer `i`, passed through dropouts to the layer that produces the data. */
static int resolve(const mk_net_t *net, int i)
{
    return i >= 0 && net->layers[i].type == MK_LAYER_DROPOUT ? net->layers[i].input : i;
}

static void shape_of(const mk_net_t *net, int i, int *c, int *h, int *w)
{
    if (i < 0) {
        *c = net->c, *h = net->h, *w = net->w;
    } else {
        *c = net->layers[i].out_c, *h = net->layers[i].out_h, *w = net->layers[i].out_w;
    }
}

static int shape_conv(mk_net_t *net, mk_layer_t *l)
{
    mk_conv_t *cv = &l->conv;
    if (l->c % cv->groups || cv->filters % cv->groups)
        return fail(net, l, MK_EFORMAT, "groups=%d must divide the %d input channels and filters=%d", cv->groups,
                    l->c, cv->filters);
    long oh = ((long)l->h + 2L * cv->pad - cv->size) / cv->stride + 1;
    long ow = ((long)l->w + 2L * cv->pad - cv->size) / cv->stride + 1;
    if (l->h + 2L * cv->pad < cv->size || l->w + 2L * cv->pad < cv->size)
        oh = ow = 0;
    if (oh < 1 || ow < 1)
        return fail(net, l, MK_EFORMAT, "size=%d with padding %d leaves no output for a %dx%d input", cv->size,
                    cv->pad, l->w, l->h);
    double nweights = (double)cv->filters * (l->c / cv->groups) * cv->size * cv->size;
    if (nweights > INT_MAX)
        return fail(net, l, MK_EFORMAT, "%.0f weights: too many", nweights);
    l->out_c = cv->filters;
    l->out_h = (int)oh;
    l->out_w = (int)ow;
    net->flops += 2.0 * nweights * (double)oh * (double)ow;
    return 0;
}

static int shape_maxpool(mk_net_t *net, mk_layer_t *l)
{
    const mk_maxpool_t *m = &l->maxpool;
    if (l->h + m->pad < m->size || l->w + m->pad < m->size)
        return fail(net, l, MK_EFORMAT, "size=%d with padding %d leaves no output for a %dx%d input", m->size,
                    m->pad, l->w, l->h);
    l->out_c = l->c;
    l->out_h = (l->h + m->pad - m->size) / m->stride + 1;
    l->out_w = (l->w + m->pad - m->size) / m->stride + 1;
    return 0;
}

static int shape_route(mk_net_t *net, mk_layer_t *l)
{
    mk_route_t *r = &l->route;
    long c = 0;
    for (int k = 0; k < r->n; k++) {
        int ck, hk, wk;
        r->layers[k] = resolve(net, r->layers[k]);
        shape_of(net, r->layers[k], &ck, &hk, &wk);
        if (k == 0) {
            l->h = hk;
            l->w = wk;
        } else if (hk != l->h || wk != l->w) {
            return fail(net, l, MK_EFORMAT, "input layer %d is %dx%d, layer %d is %dx%d: sizes must match",
                        r->layers[k], wk, hk, r->layers[0], l->w, l->h);
        }
        if (ck % r->groups)
            return fail(net, l, MK_EFORMAT, "groups=%d does not divide the %d channels of layer %d", r->groups, ck,
                        r->layers[k]);
        c += ck / r->groups;
    }
    if (c > INT_MAX)
        return fail(net, l, MK_EFORMAT, "%ld channels: too many", c);
    l->c = l->out_c = (int)c;
    l->out_h = l->h;
    l->out_w = l->w;
    l->input = r->layers[0];
    return 0;
}

static int shape_shortcut(mk_net_t *net, mk_layer_t *l)
{
    int c, h, w;
    l->shortcut.from = resolve(net, l->shortcut.from);
    shape_of(net, l->shortcut.from, &c, &h, &w);
    if (c != l->c || h != l->h || w != l->w)
        return fail(net, l, MK_EUNSUPPORTED, "adds layer %d (%dx%dx%d) to layer %d (%dx%dx%d): different shapes are "
                    "not supported", l->shortcut.from, w, h, c, l->input, l->w, l->h, l->c);
    l->out_c = l->c;
    l->out_h = l->h;
    l->out_w = l->w;
    return 0;
}

static int shape_upsample(mk_net_t *net, mk_layer_t *l)
{
    long oh = (long)l->h * l->upsample.stride, ow = (long)l->w * l->upsample.stride;
    if (oh > (1L << 20) || ow > (1L << 20))
        return fail(net, l, MK_EFORMAT, "stride=%d makes the output %ldx%ld", l->upsample.stride, ow, oh);
    l->out_c = l->c;
    l->out_h = (int)oh;
    l->out_w = (int)ow;
    return 0;
}

static int shape_yolo(mk_net_t *net, mk_layer_t *l)
{
    mk_yolo_t *y = &l->yolo;
    long want = (long)y->meta.n * (5L + y->meta.classes);
    if (l->c != want)
        return fail(net, l, MK_EFORMAT, "its input has %d channels; %d anchors (mask=) x (5 + classes=%d) need %ld "
                    "(filters= of the [convolutional] before it)", l->c, y->meta.n, y->meta.classes, want);
    if (net->n_yolo == MK_NET_MAX_YOLO)
        return fail(net, l, MK_EUNSUPPORTED, "more than %d [yolo] layers", MK_NET_MAX_YOLO);
    y->index = net->n_yolo;
    net->yolo[net->n_yolo++] = (int)(l - net->layers);
    y->meta.w = l->w;
    y->meta.h = l->h;
    y->meta.net_w = net->w;
    y->meta.net_h = net->h;
    y->meta.data = NULL;
    l->out_c = l->c;
    l->out_h = l->h;
    l->out_w = l->w;
    return 0;
}

/* Input shapes, output shapes and resolved inputs of every layer, in order. */
static int build_shapes(mk_net_t *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        int rc = 0;
        l->input = resolve(net, l->input);
        shape_of(net, l->input, &l->c, &l->h, &l->w);
        switch (l->type) {
        case MK_LAYER_CONV: rc = shape_conv(net, l); break;
        case MK_LAYER_MAXPOOL: rc = shape_maxpool(net, l); break;
        case MK_LAYER_ROUTE: rc = shape_route(net, l); break;
        case MK_LAYER_SHORTCUT: rc = shape_shortcut(net, l); break;
        case MK_LAYER_UPSAMPLE: rc = shape_upsample(net, l); break;
        case MK_LAYER_YOLO: rc = shape_yolo(net, l); break;
        case MK_LAYER_DROPOUT:
            l->out_c = l->c;
            l->out_h = l->h;
            l->out_w = l->w;
            break;
        }
        if (rc)
            return rc;
        if ((double)l->out_c * l->out_h * l->out_w > INT_MAX)
            return fail(net, l, MK_EFORMAT, "output %dx%dx%d is too large", l->out_w, l->out_h, l->out_c);
    }
    if (!net->n_yolo)
        MK_DEBUG("%s: no [yolo] layer: the network has no detection output", net->cfg_name);
    return 0;
}

int mk_net_load_mem(mk_ctx_t *ctx, const char *cfg_text, size_t cfg_len, const char *cfg_name, const void *weights,
                    size_t weights_len, const char *weights_name, const mk_net_opts_t *opts, mk_net_t **out)
{
    mk_net_opts_t def = mk_net_opts_default();
    mk_darknet_cfg_t cfg;
    mk_net_t *net = NULL;
    int rc;
    if (!ctx || !out || (!cfg_text && cfg_len))
        return mk_err_set(MK_EINVAL, "mk_net_load: NULL argument");
    *out = NULL;
    if (!opts)
        opts = &def;
    if (opts->width < 0 || opts->height < 0 || opts->width > MK_IMAGE_MAX_DIM || opts->height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "network size %dx%d outside 1..%d", opts->width, opts->height, MK_IMAGE_MAX_DIM);
    if (opts->fp16 && ctx->backend != MK_BACKEND_CUDA)
        return mk_err_set(MK_EUNSUPPORTED, "FP16 networks need the CUDA backend (this context is %s)",
                          mk_backend_name(ctx->backend));
    if (opts->cudnn < MK_NET_CUDNN_AUTO || opts->cudnn > MK_NET_CUDNN_OFF)
        return mk_err_set(MK_EINVAL, "mk_net_load: cudnn %d is not an MK_NET_CUDNN_* value", opts->cudnn);
    if ((rc = mk_darknet_cfg_parse(cfg_text, cfg_len, cfg_name, &cfg)))
        return rc;
    if (!(net = calloc(1, sizeof *net))) {
        mk_darknet_cfg_free(&cfg);
        return mk_err_set(MK_ENOMEM, "out of memory loading %s", cfg.name);
    }
    net->ctx = ctx;
    snprintf(net->cfg_name, sizeof net->cfg_name, "%s", cfg.name);
    net->layers = cfg.layers;
    net->n_layers = cfg.n_layers;
    net->c = cfg.channels;
    net->w = opts->width ? opts->width : cfg.width;
    net->h = opts->height ? opts->height : cfg.height;
    net->fp16 = opts->fp16;
    net->cudnn = opts->cudnn;
    if (!net->w || !net->h) {
        rc = mk_err_set(MK_EFORMAT, "%s: [net] gives no width and height, and no network size was asked for",
                        net->cfg_name);
        goto fail;
    }
    if ((rc = build_shapes(net)))
        goto fail;
    rc = weights ? mk_net_weights_parse(net, weights, weights_len, weights_name ? weights_name : "(weights)")
                 : mk_net_weights_random(net, opts->seed);
    if (rc)
        goto fail;
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        rc = mk_net_prepare_cuda(ctx, net);
    else
#endif
        rc = mk_net_prepare_cpu(ctx, net);
    if (rc)
        goto fail;
    MK_DEBUG("%s: %d layers, input %dx%dx%d, %d yolo layers, %.3f BFLOPs, %s weights", net->cfg_name, net->n_layers,
             net->w, net->h, net->c, net->n_yolo, net->flops / 1e9, weights ? "file" : "random");
    *out = net;
    return 0;
fail:
    mk_net_destroy(net);
    return rc;
}

int mk_net_load(mk_ctx_t *ctx, const char *cfg, const char *weights, const mk_net_opts_t *opts, mk_net_t **out)
{
    void *text = NULL, *wdata = NULL;
    size_t text_len = 0, wlen = 0;
    int rc;
    if (!ctx || !cfg || !out)
        return mk_err_set(MK_EINVAL, "mk_net_load: NULL argument");
    *out = NULL;
    if ((rc = mk_file_read(cfg, &text, &text_len)) || (weights && (rc = mk_file_read(weights, &wdata, &wlen))))
        goto done;
    rc = mk_net_load_mem(ctx, text, text_len, cfg, wdata, wlen, weights, opts, out);
done:
    free(text);
    free(wdata);
    return rc;
}

void mk_net_destroy(mk_net_t *net)
{
    if (!net)
        return;
#ifdef MK_HAVE_CUDA
    if (net->ctx->backend == MK_BACKEND_CUDA)
        mk_net_release_cuda(net->ctx, net);
    else
#endif
        mk_net_release_cpu(net->ctx, net);
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].type == MK_LAYER_CONV) {
            free(net->layers[i].conv.weights);
            free(net->layers[i].conv.biases);
        }
    free(net->layers);
    free(net);
}

void mk_net_input_dims(const mk_net_t *net, int *channels, int *height, int *width)
{
    if (channels)
        *channels = net->c;
    if (height)
        *height = net->h;
    if (width)
        *width = net->w;
}

mk_image_t mk_net_input_desc(const mk_net_t *net)
{
    return mk_image_desc_planar(net->w, net->h, net->c, MK_F32);
}

int mk_net_forward(mk_net_t *net, const mk_image_t *input)
{
    int rc;
    if (!net)
        return mk_err_set(MK_EINVAL, "mk_net_forward: NULL network");
    mk_ctx_t *ctx = net->ctx;
    if ((rc = mk_image_check(input, "network input")))
        return rc;
    if (input->dtype != MK_F32 || input->format != MK_FMT_PLANAR || input->channels != net->c ||
        input->width != net->w || input->height != net->h)
        return mk_err_set(MK_EINVAL, "%s takes f32 planar %dx%d with %d planes, not %s %s %dx%d x%d", net->cfg_name,
                          net->w, net->h, net->c, mk_dtype_name(input->dtype), mk_format_name(input->format),
                          input->width, input->height, input->channels);
    if (input->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "network input is in %s memory; a %s context needs %s memory",
                          mk_mem_name(input->mem), mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)));
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        rc = mk_net_forward_cuda(ctx, net, input);
    else
#endif
        rc = mk_net_forward_cpu(ctx, net, input);
    if (!rc)
        net->forwarded = 1;
    return rc;
}

int mk_net_yolo_count(const mk_net_t *net)
{
    return net ? net->n_yolo : 0;
}

int mk_net_yolo_output(const mk_net_t *net, int k, mk_yolo_layer_t *out)
{
    if (!net || !out)
        return mk_err_set(MK_EINVAL, "mk_net_yolo_output: NULL argument");
    if (k < 0 || k >= net->n_yolo)
        return mk_err_set(MK_ERANGE, "yolo output %d: %s has %d yolo layers", k, net->cfg_name, net->n_yolo);
    const mk_layer_t *l = &net->layers[net->yolo[k]];
    *out = l->yolo.meta;
    out->data = net->forwarded ? (const float *)l->output : NULL;
    return 0;
}

int mk_net_yolo_read(mk_net_t *net, int k, float *dst, size_t count)
{
    mk_yolo_layer_t y;
    int rc;
    if (!dst)
        return mk_err_set(MK_EINVAL, "mk_net_yolo_read: NULL destination");
    if ((rc = mk_net_yolo_output(net, k, &y)))
        return rc;
    size_t n = (size_t)y.n * (5 + (size_t)y.classes) * (size_t)y.h * (size_t)y.w;
    if (count != n)
        return mk_err_set(MK_EINVAL, "yolo output %d has %zu floats, not %zu", k, n, count);
    if (!y.data)
        return mk_err_set(MK_ESTATE, "%s: no forward pass has run", net->cfg_name);
#ifdef MK_HAVE_CUDA
    if (net->ctx->backend == MK_BACKEND_CUDA) {
        if ((rc = mk_cuda_copy2d(net->ctx, dst, n * sizeof(float), y.data, n * sizeof(float), n * sizeof(float), 1)))
            return rc;
        return mk_cuda_sync(net->ctx);
    }
#endif
    memcpy(dst, y.data, n * sizeof(float));
    return 0;
}

int mk_net_layer_count(const mk_net_t *net)
{
    return net ? net->n_layers : 0;
}

double mk_net_flops(const mk_net_t *net)
{
    return net ? net->flops : 0;
}
