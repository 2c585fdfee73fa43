/* darknet_weights: a Darknet .weights file (or seeded random weights) into each convolution's folded weights. */
#include "darknet_internal.h"

#include "errors.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Darknet weights files are little-endian; this loader reads them in place"
#endif

/* The floats a convolution stores in the file: biases, optionally the three batch-norm vectors, weights. */
static size_t conv_floats(const mk_layer_t *l)
{
    const mk_conv_t *cv = &l->conv;
    size_t nw = (size_t)cv->filters * (size_t)(l->c / cv->groups) * (size_t)cv->size * (size_t)cv->size;
    return (size_t)cv->filters * (cv->batch_normalize ? 4u : 1u) + nw;
}

/* Allocates the layer's arrays and folds the batch norm: Darknet's fuse_conv_batchnorm, in double. */
static int fold(mk_layer_t *l, const float *biases, const float *scales, const float *mean, const float *var,
                const float *weights)
{
    mk_conv_t *cv = &l->conv;
    size_t per = (size_t)(l->c / cv->groups) * (size_t)cv->size * (size_t)cv->size;
    free(cv->weights);
    free(cv->biases);
    cv->weights = malloc((size_t)cv->filters * per * sizeof(float));
    cv->biases = malloc((size_t)cv->filters * sizeof(float));
    if (!cv->weights || !cv->biases)
        return mk_err_set(MK_ENOMEM, "out of memory for the weights of layer at line %d", l->line);
    for (int f = 0; f < cv->filters; f++) {
        const float *w = weights + (size_t)f * per;
        float *o = cv->weights + (size_t)f * per;
        if (!cv->batch_normalize) {
            cv->biases[f] = biases[f];
            memcpy(o, w, per * sizeof(float));
            continue;
        }
        double d = sqrt((double)var[f] + MK_NET_BN_EPS);
        cv->biases[f] = (float)(biases[f] - (double)scales[f] * mean[f] / d);
        double k = scales[f] / d;
        for (size_t i = 0; i < per; i++)
            o[i] = (float)(w[i] * k);
    }
    return 0;
}

static int all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

int mk_net_weights_parse(mk_net_t *net, const void *data, size_t len, const char *name)
{
    const unsigned char *p = data;
    int32_t ver[3];
    if (len < 16)
        return mk_err_set(MK_EFORMAT, "%s: %zu bytes: too short for a Darknet weights header", name, len);
    memcpy(ver, p, sizeof ver);
    long long version = (long long)ver[0] * 10 + ver[1];
    int seen64 = version >= 2 && ver[0] < 1000 && ver[1] < 1000;
    size_t header = seen64 ? 20 : 16;
    if (len < header)
        return mk_err_set(MK_EFORMAT, "%s: %zu bytes: too short for a version %d.%d header (%zu bytes)", name, len,
                          ver[0], ver[1], header);
    net->major = ver[0];
    net->minor = ver[1];
    net->revision = ver[2];
    if (seen64) {
        memcpy(&net->seen, p + 12, sizeof net->seen);
    } else {
        uint32_t s32;
        memcpy(&s32, p + 12, sizeof s32);
        net->seen = s32;
    }

    size_t expect = header;
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].type == MK_LAYER_CONV)
            expect += conv_floats(&net->layers[i]) * sizeof(float);
    if (len < expect) {
        size_t at = header;
        const mk_layer_t *l = NULL;
        for (int i = 0; i < net->n_layers && !l; i++) {
            if (net->layers[i].type != MK_LAYER_CONV)
                continue;
            size_t need = conv_floats(&net->layers[i]) * sizeof(float);
            if (at + need > len)
                l = &net->layers[i];
            else
                at += need;
        }
        return mk_err_set(MK_EFORMAT, "%s: truncated: %zu bytes, %s needs %zu (layer %d, the [convolutional] at "
                          "line %d, needs bytes %zu..%zu)", name, len, net->cfg_name, expect, (int)(l - net->layers),
                          l->line, at, at + conv_floats(l) * sizeof(float));
    }
    if (len > expect)
        return mk_err_set(MK_EFORMAT, "%s: %zu bytes, %s needs %zu: %zu bytes too many (weights of another cfg?)",
                          name, len, net->cfg_name, expect, len - expect);

    size_t at = header;
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        size_t nf = conv_floats(l), f = (size_t)l->conv.filters;
        float *v = malloc(nf * sizeof(float));
        if (!v)
            return mk_err_set(MK_ENOMEM, "out of memory reading %s", name);
        memcpy(v, p + at, nf * sizeof(float));
        at += nf * sizeof(float);
        int bn = l->conv.batch_normalize, rc = 0;
        const float *scales = v + f, *mean = v + 2 * f, *var = v + 3 * f, *w = v + (bn ? 4 : 1) * f;
        if (!all_finite(v, nf))
            rc = mk_err_set(MK_EFORMAT, "%s: layer %d (the [convolutional] at line %d of %s) has a NaN or infinite "
                            "value", name, i, l->line, net->cfg_name);
        for (size_t k = 0; bn && !rc && k < f; k++)
            if (var[k] < 0)
                rc = mk_err_set(MK_EFORMAT, "%s: layer %d (line %d of %s): negative rolling variance %g of filter "
                                "%zu", name, i, l->line, net->cfg_name, var[k], k);
        if (!rc)
            rc = fold(l, v, scales, mean, var, w);
        free(v);
        if (rc)
            return rc;
    }
    return 0;
}

/* xorshift64*: a uniform float in [lo, hi). */
static float uniform(uint64_t *s, float lo, float hi)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t x = *s * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * (float)(x >> 40) * (1.0f / 16777216.0f);
}

int mk_net_weights_random(mk_net_t *net, uint64_t seed)
{
    uint64_t s = seed ^ 0x9e3779b97f4a7c15ull;
    if (!s)
        s = 1;
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        size_t nf = conv_floats(l), f = (size_t)l->conv.filters, nw = nf - f * (l->conv.batch_normalize ? 4 : 1);
        float *v = malloc(nf * sizeof(float));
        if (!v)
            return mk_err_set(MK_ENOMEM, "out of memory for random weights");
        float *bias = v, *scales = v + f, *mean = v + 2 * f, *var = v + 3 * f;
        float *w = v + (l->conv.batch_normalize ? 4 : 1) * f;
        /* He-style scale (variance 2 / fan_in) keeps activations of order 1 through leaky/mish stacks. */
        float a = sqrtf(6.0f * (float)f / (float)nw);
        for (size_t k = 0; k < f; k++)
            bias[k] = uniform(&s, -0.1f, 0.1f);
        if (l->conv.batch_normalize)
            for (size_t k = 0; k < f; k++) {
                scales[k] = uniform(&s, 0.5f, 1.5f);
                mean[k] = uniform(&s, -0.1f, 0.1f);
                var[k] = uniform(&s, 0.5f, 1.5f);
            }
        for (size_t k = 0; k < nw; k++)
            w[k] = uniform(&s, -a, a);
        int rc = fold(l, bias, scales, mean, var, w);
        free(v);
        if (rc)
            return rc;
    }
    return 0;
}
