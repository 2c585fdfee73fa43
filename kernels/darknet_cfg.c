/* darknet_cfg: the cfg reader — lines to sections, one key table per section, typed values, file:line errors. */
#include "darknet_cfg.h"

#include "errors.h"
#include "imageio.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest values accepted for sizes and counts: far above any real network, low enough that products of them
 * cannot overflow before the loader's own size checks. */
enum { MAX_FILTERS = 1 << 16, MAX_KSIZE = 63, MAX_STRIDE = 64, MAX_PADDING = 1024, MAX_CLASSES = 1 << 16,
       MAX_CHANNELS = 1 << 16, MAX_LAYERS = 1 << 16 };

typedef struct {
    const char *key, *value;
    int line;
} entry_t;

typedef struct {
    const char *name; /* between the brackets */
    int line;
    entry_t *e;
    int n, cap;
} section_t;

typedef struct {
    const char *file;
    section_t *s;
    int n, cap;
} reader_t;

/* ---- key tables ------------------------------------------------------------------------------------------ */

enum { K_USE, K_IGNORE, K_UNSUPPORTED };

typedef struct {
    const char *key;
    int kind;
} cfg_key_t;

#define END {NULL, 0}

static const cfg_key_t net_keys[] = {
    {"width", K_USE}, {"height", K_USE}, {"channels", K_USE},
    /* training: batching, the optimiser, the learning-rate schedule, data augmentation, bookkeeping */
    {"batch", K_IGNORE}, {"subdivisions", K_IGNORE}, {"time_steps", K_IGNORE}, {"sequential_subdivisions", K_IGNORE},
    {"momentum", K_IGNORE}, {"decay", K_IGNORE}, {"learning_rate", K_IGNORE}, {"learning_rate_min", K_IGNORE},
    {"burn_in", K_IGNORE}, {"max_batches", K_IGNORE}, {"policy", K_IGNORE}, {"steps", K_IGNORE},
    {"scales", K_IGNORE}, {"seq_scales", K_IGNORE}, {"step", K_IGNORE}, {"scale", K_IGNORE}, {"gamma", K_IGNORE},
    {"power", K_IGNORE}, {"sgdr_cycle", K_IGNORE}, {"sgdr_mult", K_IGNORE}, {"adam", K_IGNORE}, {"B1", K_IGNORE},
    {"B2", K_IGNORE}, {"eps", K_IGNORE}, {"angle", K_IGNORE}, {"aspect", K_IGNORE}, {"saturation", K_IGNORE},
    {"exposure", K_IGNORE}, {"hue", K_IGNORE}, {"flip", K_IGNORE}, {"blur", K_IGNORE}, {"gaussian_noise", K_IGNORE},
    {"mixup", K_IGNORE}, {"cutmix", K_IGNORE}, {"mosaic", K_IGNORE}, {"mosaic_bound", K_IGNORE},
    {"letter_box", K_IGNORE}, {"max_crop", K_IGNORE}, {"min_crop", K_IGNORE}, {"jitter", K_IGNORE},
    {"label_smooth_eps", K_IGNORE}, {"resize_step", K_IGNORE}, {"max_chart_loss", K_IGNORE},
    {"adversarial_lr", K_IGNORE}, {"attention", K_IGNORE}, {"track", K_IGNORE}, {"augment_speed", K_IGNORE},
    {"try_fix_nan", K_IGNORE}, {"ema_alpha", K_IGNORE}, {"weights_reject_freq", K_IGNORE},
    {"equidistant_point", K_IGNORE}, {"badlabels_rejection_percentage", K_IGNORE},
    {"num_sigmas_reject_badlabels", K_IGNORE}, {"contrastive", K_IGNORE}, {"contrastive_jit_flip", K_IGNORE},
    {"contrastive_color", K_IGNORE}, {"unsupervised", K_IGNORE}, {"loss_scale", K_IGNORE},
    {"dynamic_minibatch", K_IGNORE}, {"optimized_memory", K_IGNORE}, {"workspace_size_limit_MB", K_IGNORE},
    {"use_cuda_graph", K_IGNORE}, {"show_receptive_field", K_IGNORE},
    {"inputs", K_UNSUPPORTED},
    END,
};

/* Keys Darknet reads for every layer section. */
static const cfg_key_t layer_keys[] = {
    {"learning_rate", K_IGNORE}, {"clip", K_IGNORE}, {"onlyforward", K_IGNORE}, {"dont_update", K_IGNORE},
    {"burnin_update", K_IGNORE}, {"stopbackward", K_IGNORE}, {"train_only_bn", K_IGNORE},
    {"dontload", K_UNSUPPORTED}, {"dontloadscales", K_UNSUPPORTED},
    END,
};

static const cfg_key_t conv_keys[] = {
    {"filters", K_USE}, {"size", K_USE}, {"stride", K_USE}, {"pad", K_USE}, {"padding", K_USE}, {"groups", K_USE},
    {"batch_normalize", K_USE}, {"activation", K_USE},
    {"stream", K_IGNORE}, {"wait_stream", K_IGNORE}, {"grad_centr", K_IGNORE},
    {"stride_x", K_UNSUPPORTED}, {"stride_y", K_UNSUPPORTED}, {"dilation", K_UNSUPPORTED},
    {"antialiasing", K_UNSUPPORTED}, {"binary", K_UNSUPPORTED}, {"xnor", K_UNSUPPORTED},
    {"bin_output", K_UNSUPPORTED}, {"cbn", K_UNSUPPORTED}, {"share_index", K_UNSUPPORTED},
    {"flipped", K_UNSUPPORTED}, {"dot", K_UNSUPPORTED}, {"sway", K_UNSUPPORTED}, {"rotate", K_UNSUPPORTED},
    {"stretch", K_UNSUPPORTED}, {"stretch_sway", K_UNSUPPORTED}, {"coordconv", K_UNSUPPORTED},
    {"assisted_excitation", K_UNSUPPORTED}, {"reverse", K_UNSUPPORTED},
    END,
};

static const cfg_key_t maxpool_keys[] = {
    {"size", K_USE}, {"stride", K_USE}, {"padding", K_USE},
    {"stride_x", K_UNSUPPORTED}, {"stride_y", K_UNSUPPORTED}, {"maxpool_depth", K_UNSUPPORTED},
    {"out_channels", K_UNSUPPORTED}, {"antialiasing", K_UNSUPPORTED}, {"maxpool_zero_nonmax", K_UNSUPPORTED},
    END,
};

static const cfg_key_t route_keys[] = {
    {"layers", K_USE}, {"groups", K_USE}, {"group_id", K_USE},
    {"stream", K_IGNORE}, {"wait_stream", K_IGNORE},
    END,
};

static const cfg_key_t shortcut_keys[] = {
    {"from", K_USE}, {"activation", K_USE},
    {"weights_type", K_UNSUPPORTED}, {"weights_normalization", K_UNSUPPORTED},
    END,
};

static const cfg_key_t upsample_keys[] = {
    {"stride", K_USE}, {"scale", K_USE},
    END,
};

static const cfg_key_t yolo_keys[] = {
    {"mask", K_USE}, {"anchors", K_USE}, {"classes", K_USE}, {"num", K_USE}, {"scale_x_y", K_USE},
    /* training: loss terms, target assignment, augmentation; and Darknet's NMS choice (decode's concern) */
    {"jitter", K_IGNORE}, {"ignore_thresh", K_IGNORE}, {"truth_thresh", K_IGNORE}, {"iou_thresh", K_IGNORE},
    {"iou_thresh_kind", K_IGNORE}, {"random", K_IGNORE}, {"resize", K_IGNORE}, {"iou_normalizer", K_IGNORE},
    {"obj_normalizer", K_IGNORE}, {"cls_normalizer", K_IGNORE}, {"delta_normalizer", K_IGNORE},
    {"iou_loss", K_IGNORE}, {"nms_kind", K_IGNORE}, {"beta_nms", K_IGNORE}, {"max_delta", K_IGNORE},
    {"label_smooth_eps", K_IGNORE}, {"counters_per_class", K_IGNORE}, {"max", K_IGNORE}, {"focal_loss", K_IGNORE},
    {"objectness_smooth", K_IGNORE}, {"show_details", K_IGNORE}, {"track_history_size", K_IGNORE},
    {"sim_thresh", K_IGNORE}, {"dets_for_track", K_IGNORE}, {"dets_for_show", K_IGNORE},
    {"track_ciou_norm", K_IGNORE},
    {"new_coords", K_UNSUPPORTED}, {"map", K_UNSUPPORTED}, {"embedding_layer", K_UNSUPPORTED},
    END,
};

static const cfg_key_t dropout_keys[] = {
    {"probability", K_IGNORE}, {"dropblock", K_IGNORE}, {"dropblock_size_rel", K_IGNORE},
    {"dropblock_size_abs", K_IGNORE},
    END,
};

#define NET_SECTION (-1)

static const struct {
    const char *name, *alias;
    int type; /* mk_layer_type_t, or NET_SECTION */
    const cfg_key_t *keys;
} section_types[] = {
    {"net", "network", NET_SECTION, net_keys},
    {"convolutional", "conv", MK_LAYER_CONV, conv_keys},
    {"maxpool", "max", MK_LAYER_MAXPOOL, maxpool_keys},
    {"route", NULL, MK_LAYER_ROUTE, route_keys},
    {"shortcut", NULL, MK_LAYER_SHORTCUT, shortcut_keys},
    {"upsample", NULL, MK_LAYER_UPSAMPLE, upsample_keys},
    {"yolo", NULL, MK_LAYER_YOLO, yolo_keys},
    {"dropout", NULL, MK_LAYER_DROPOUT, dropout_keys},
};

/* Sections Darknet has and this port does not. */
static const char *const unsupported_sections[] = {
    "region", "reorg", "reorg3d", "local", "connected", "conn", "crop", "cost", "detection", "softmax", "soft",
    "avgpool", "avg", "local_avgpool", "local_avg", "batchnorm", "activation", "scale_channels", "sam",
    "Gaussian_yolo", "rnn", "gru", "lstm", "crnn", "conv_lstm", "history", "normalization", "lrn", "empty",
    "silence", "implicit", "contrastive",
};

static const struct {
    const char *name;
    int act; /* mk_act_t, or -1: known to Darknet, not supported here */
} activations[] = {
    {"linear", MK_ACT_LINEAR}, {"leaky", MK_ACT_LEAKY}, {"mish", MK_ACT_MISH}, {"logistic", MK_ACT_LOGISTIC},
    {"relu", MK_ACT_RELU}, {"swish", -1}, {"hard_mish", -1}, {"relu6", -1}, {"elu", -1}, {"selu", -1}, {"gelu", -1},
    {"relie", -1}, {"ramp", -1}, {"revleaky", -1}, {"tanh", -1}, {"loggy", -1}, {"plse", -1}, {"hardtan", -1},
    {"lhtan", -1}, {"stair", -1}, {"normalize_channels", -1}, {"normalize_channels_softmax", -1},
    {"normalize_channels_softmax_maxval", -1},
};

const char *mk_layer_type_name(mk_layer_type_t t)
{
    for (size_t i = 0; i < sizeof section_types / sizeof section_types[0]; i++)
        if (section_types[i].type == (int)t)
            return section_types[i].name;
    return "?";
}

const char *mk_act_name(mk_act_t a)
{
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (activations[i].act == (int)a)
            return activations[i].name;
    return "?";
}

/* ---- errors and values ----------------------------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static int fail(const reader_t *r, int line, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mk_err_set(code, "%s:%d: %s", r->file, line, msg);
}

static const entry_t *find(const section_t *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].key, key))
            return &s->e[i];
    return NULL;
}

static int parse_long(const char *s, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *v = x;
    return 0;
}

static int parse_float(const char *s, float *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(x) || fabs(x) > 3.0e38)
        return -1;
    *v = (float)x;
    return 0;
}

/* An integer key in lo..hi (def when absent). */
static int get_int(const reader_t *r, const section_t *s, const char *key, int def, int lo, int hi, int *out)
{
    const entry_t *e = find(s, key);
    long v;
    *out = def;
    if (!e)
        return 0;
    if (parse_long(e->value, &v))
        return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: not an integer", s->name, key, e->value);
    if (v < lo || v > hi)
        return fail(r, e->line, MK_EFORMAT, "[%s] %s=%ld: out of range %d..%d", s->name, key, v, lo, hi);
    *out = (int)v;
    return 0;
}

/* A finite float key in lo..hi (def when absent). */
static int get_float(const reader_t *r, const section_t *s, const char *key, float def, float lo, float hi,
                     float *out)
{
    const entry_t *e = find(s, key);
    float v;
    *out = def;
    if (!e)
        return 0;
    if (parse_float(e->value, &v))
        return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: not a finite number", s->name, key, e->value);
    if (v < lo || v > hi)
        return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: out of range %g..%g", s->name, key, e->value, lo, hi);
    *out = v;
    return 0;
}

/* Splits a comma-separated list into at most `max` trimmed items (a copy of the value in `buf`); *n = -1 when it
 * has more items than that. Empty items are an error. */
static int split_list(const reader_t *r, const section_t *s, const entry_t *e, char *buf, size_t buflen,
                      char **items, int max, int *n)
{
    if (strlen(e->value) >= buflen)
        return fail(r, e->line, MK_EFORMAT, "[%s] %s=: list too long", s->name, e->key);
    strcpy(buf, e->value);
    *n = 0;
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        char *end = p + strlen(p);
        while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (!*p)
            return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: empty list item", s->name, e->key, e->value);
        if (*n == max) {
            *n = -1;
            return 0;
        }
        items[(*n)++] = p;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* A list of 1..max integers in lo..hi. */
static int get_int_list(const reader_t *r, const section_t *s, const entry_t *e, int *vals, int max, long lo,
                        long hi, int *n)
{
    char buf[4096], *items[MK_NET_MAX_ANCHORS * 2];
    int rc = split_list(r, s, e, buf, sizeof buf, items, max, n);
    if (rc)
        return rc;
    if (*n < 0)
        return fail(r, e->line, MK_EUNSUPPORTED, "[%s] %s=%s: more than %d values", s->name, e->key, e->value, max);
    for (int i = 0; i < *n; i++) {
        long v;
        if (parse_long(items[i], &v))
            return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: '%s' is not an integer", s->name, e->key, e->value,
                        items[i]);
        if (v < lo || v > hi)
            return fail(r, e->line, MK_EFORMAT, "[%s] %s=%s: %ld out of range %ld..%ld", s->name, e->key, e->value,
                        v, lo, hi);
        vals[i] = (int)v;
    }
    return 0;
}

static int get_activation(const reader_t *r, const section_t *s, const char *def, mk_act_t *out)
{
    const entry_t *e = find(s, "activation");
    const char *name = e ? e->value : def;
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (!strcmp(activations[i].name, name)) {
            if (activations[i].act < 0)
                return fail(r, e ? e->line : s->line, MK_EUNSUPPORTED,
                            "[%s] activation=%s is not supported (linear, leaky, mish, logistic, relu)", s->name, name);
            *out = (mk_act_t)activations[i].act;
            return 0;
        }
    return fail(r, e ? e->line : s->line, MK_EFORMAT, "[%s] activation=%s: unknown activation", s->name, name);
}

/* A reference to an earlier layer: negative is relative to layer i, else absolute. */
static int resolve_index(const reader_t *r, const section_t *s, const entry_t *e, int i, int v, int *out)
{
    int idx = v < 0 ? i + v : v;
    if (idx < 0 || idx >= i)
        return fail(r, e->line, MK_EFORMAT,
                    "[%s] %s=%s: %d names layer %d, but layer %d can only use layers 0..%d", s->name, e->key,
                    e->value, v, idx, i, i - 1);
    *out = idx;
    return 0;
}

/* ---- sections -------------------------------------------------------------------------------------------- */

static int parse_net(const reader_t *r, const section_t *s, mk_darknet_cfg_t *cfg)
{
    int rc;
    if ((rc = get_int(r, s, "width", 0, 1, MK_IMAGE_MAX_DIM, &cfg->width)) ||
        (rc = get_int(r, s, "height", 0, 1, MK_IMAGE_MAX_DIM, &cfg->height)) ||
        (rc = get_int(r, s, "channels", 0, 1, MAX_CHANNELS, &cfg->channels)))
        return rc;
    if (!cfg->channels)
        return fail(r, s->line, MK_EFORMAT, "[%s] has no channels=", s->name);
    return 0;
}

static int parse_conv(const reader_t *r, const section_t *s, mk_layer_t *l)
{
    int rc, pad, padding;
    mk_conv_t *c = &l->conv;
    if ((rc = get_int(r, s, "filters", 1, 1, MAX_FILTERS, &c->filters)) ||
        (rc = get_int(r, s, "size", 1, 1, MAX_KSIZE, &c->size)) ||
        (rc = get_int(r, s, "stride", 1, 1, MAX_STRIDE, &c->stride)) ||
        (rc = get_int(r, s, "pad", 0, 0, 1, &pad)) ||
        (rc = get_int(r, s, "padding", 0, 0, MAX_PADDING, &padding)) ||
        (rc = get_int(r, s, "groups", 1, 1, MAX_FILTERS, &c->groups)) ||
        (rc = get_int(r, s, "batch_normalize", 0, 0, 1, &c->batch_normalize)) ||
        (rc = get_activation(r, s, "logistic", &l->act)))
        return rc;
    c->pad = pad ? c->size / 2 : padding; /* Darknet: pad=1 wins over padding= */
    return 0;
}

static int parse_maxpool(const reader_t *r, const section_t *s, mk_layer_t *l)
{
    int rc;
    mk_maxpool_t *m = &l->maxpool;
    if ((rc = get_int(r, s, "stride", 1, 1, MAX_STRIDE, &m->stride)) ||
        (rc = get_int(r, s, "size", m->stride, 1, MAX_KSIZE, &m->size)) ||
        (rc = get_int(r, s, "padding", m->size - 1, 0, MAX_PADDING, &m->pad)))
        return rc;
    return 0;
}

static int parse_route(const reader_t *r, const section_t *s, int i, mk_layer_t *l)
{
    int rc, vals[MK_NET_MAX_ROUTE];
    mk_route_t *rt = &l->route;
    const entry_t *e = find(s, "layers");
    if (!e)
        return fail(r, s->line, MK_EFORMAT, "[%s] has no layers=", s->name);
    if ((rc = get_int_list(r, s, e, vals, MK_NET_MAX_ROUTE, -MAX_LAYERS, MAX_LAYERS, &rt->n)))
        return rc;
    for (int k = 0; k < rt->n; k++)
        if ((rc = resolve_index(r, s, e, i, vals[k], &rt->layers[k])))
            return rc;
    if ((rc = get_int(r, s, "groups", 1, 1, MAX_CHANNELS, &rt->groups)) ||
        (rc = get_int(r, s, "group_id", 0, 0, rt->groups - 1, &rt->group_id)))
        return rc;
    return 0;
}

static int parse_shortcut(const reader_t *r, const section_t *s, int i, mk_layer_t *l)
{
    int rc, vals[2], n;
    const entry_t *e = find(s, "from");
    if (!e)
        return fail(r, s->line, MK_EFORMAT, "[%s] has no from=", s->name);
    if ((rc = get_int_list(r, s, e, vals, 2, -MAX_LAYERS, MAX_LAYERS, &n)))
        return rc;
    if (n != 1)
        return fail(r, e->line, MK_EUNSUPPORTED, "[%s] from=%s: only one layer is supported", s->name, e->value);
    if ((rc = resolve_index(r, s, e, i, vals[0], &l->shortcut.from)) ||
        (rc = get_activation(r, s, "linear", &l->act)))
        return rc;
    return 0;
}

static int parse_upsample(const reader_t *r, const section_t *s, mk_layer_t *l)
{
    int rc;
    if ((rc = get_int(r, s, "stride", 2, -MAX_STRIDE, MAX_STRIDE, &l->upsample.stride)) ||
        (rc = get_float(r, s, "scale", 1.0f, -1e30f, 1e30f, &l->upsample.scale)))
        return rc;
    if (l->upsample.stride < 0)
        return fail(r, find(s, "stride")->line, MK_EUNSUPPORTED, "[%s] stride=%d: downsampling (negative stride) "
                    "is not supported", s->name, l->upsample.stride);
    if (l->upsample.stride == 0)
        return fail(r, find(s, "stride")->line, MK_EFORMAT, "[%s] stride=0: must be at least 1", s->name);
    return 0;
}

static int parse_yolo(const reader_t *r, const section_t *s, mk_layer_t *l)
{
    int rc, n;
    mk_yolo_t *y = &l->yolo;
    char buf[4096], *items[2 * MK_NET_MAX_ANCHORS];
    if ((rc = get_int(r, s, "classes", 20, 1, MAX_CLASSES, &y->meta.classes)) ||
        (rc = get_int(r, s, "num", 1, 1, MK_NET_MAX_ANCHORS, &y->num)) ||
        (rc = get_float(r, s, "scale_x_y", 1.0f, 1e-6f, 1e6f, &y->meta.scale_x_y)))
        return rc;
    y->bias_x_y = (float)(-0.5 * (double)(y->meta.scale_x_y - 1.0f));

    const entry_t *e = find(s, "mask");
    if (e) {
        if ((rc = get_int_list(r, s, e, y->mask, MK_YOLO_MAX_ANCHORS, 0, y->num - 1, &y->meta.n)))
            return rc;
    } else {
        if (y->num > MK_YOLO_MAX_ANCHORS)
            return fail(r, s->line, MK_EUNSUPPORTED, "[%s] num=%d without mask=: more than %d anchors in one layer",
                        s->name, y->num, MK_YOLO_MAX_ANCHORS);
        y->meta.n = y->num;
        for (int a = 0; a < y->num; a++)
            y->mask[a] = a;
    }

    e = find(s, "anchors");
    if (!e)
        return fail(r, s->line, MK_EFORMAT, "[%s] has no anchors=", s->name);
    if ((rc = split_list(r, s, e, buf, sizeof buf, items, 2 * MK_NET_MAX_ANCHORS, &n)))
        return rc;
    if (n < 0)
        return fail(r, e->line, MK_EUNSUPPORTED, "[%s] anchors=: more than %d values", s->name,
                    2 * MK_NET_MAX_ANCHORS);
    if (n != 2 * y->num)
        return fail(r, e->line, MK_EFORMAT, "[%s] anchors=: %d values, num=%d needs %d", s->name, n, y->num,
                    2 * y->num);
    float all[2 * MK_NET_MAX_ANCHORS];
    for (int k = 0; k < n; k++)
        if (parse_float(items[k], &all[k]) || all[k] < 0)
            return fail(r, e->line, MK_EFORMAT, "[%s] anchors=: '%s' is not a non-negative number", s->name,
                        items[k]);
    for (int a = 0; a < y->meta.n; a++) {
        y->meta.anchors[2 * a] = all[2 * y->mask[a]];
        y->meta.anchors[2 * a + 1] = all[2 * y->mask[a] + 1];
    }
    return 0;
}

/* Checks every key of a section against its table (and the common layer keys). */
static int check_keys(const reader_t *r, const section_t *s, const cfg_key_t *keys, int is_layer)
{
    for (int i = 0; i < s->n; i++) {
        const entry_t *e = &s->e[i];
        const cfg_key_t *k = NULL;
        for (const cfg_key_t *t = keys; t->key && !k; t++)
            if (!strcmp(t->key, e->key))
                k = t;
        for (const cfg_key_t *t = layer_keys; is_layer && t->key && !k; t++)
            if (!strcmp(t->key, e->key))
                k = t;
        if (!k)
            return fail(r, e->line, MK_EFORMAT, "unknown key '%s' in [%s]", e->key, s->name);
        if (k->kind == K_UNSUPPORTED)
            return fail(r, e->line, MK_EUNSUPPORTED, "[%s] %s= is not supported by this port", s->name, e->key);
        for (int j = 0; j < i; j++)
            if (!strcmp(s->e[j].key, e->key))
                return fail(r, e->line, MK_EFORMAT, "[%s] %s= given twice (first at line %d)", s->name, e->key,
                            s->e[j].line);
    }
    return 0;
}

static int parse_layer(const reader_t *r, const section_t *s, int i, mk_layer_t *l)
{
    size_t nt = sizeof section_types / sizeof section_types[0];
    for (size_t t = 0; t < nt; t++) {
        if (strcmp(s->name, section_types[t].name) && (!section_types[t].alias || strcmp(s->name, section_types[t].alias)))
            continue;
        if (section_types[t].type == NET_SECTION)
            return fail(r, s->line, MK_EFORMAT, "[%s] may only be the first section", s->name);
        int rc = check_keys(r, s, section_types[t].keys, 1);
        if (rc)
            return rc;
        l->type = (mk_layer_type_t)section_types[t].type;
        l->line = s->line;
        l->input = i - 1;
        l->act = MK_ACT_LINEAR;
        switch (l->type) {
        case MK_LAYER_CONV: return parse_conv(r, s, l);
        case MK_LAYER_MAXPOOL: return parse_maxpool(r, s, l);
        case MK_LAYER_ROUTE: return parse_route(r, s, i, l);
        case MK_LAYER_SHORTCUT: return parse_shortcut(r, s, i, l);
        case MK_LAYER_UPSAMPLE: return parse_upsample(r, s, l);
        case MK_LAYER_YOLO: return parse_yolo(r, s, l);
        case MK_LAYER_DROPOUT: return 0;
        }
    }
    for (size_t k = 0; k < sizeof unsupported_sections / sizeof unsupported_sections[0]; k++)
        if (!strcmp(s->name, unsupported_sections[k]))
            return fail(r, s->line, MK_EUNSUPPORTED,
                        "[%s] layers are not supported by this port (net, convolutional, maxpool, route, shortcut, "
                        "upsample, yolo, dropout)", s->name);
    return fail(r, s->line, MK_EFORMAT, "unknown section [%s]", s->name);
}

/* ---- lines ----------------------------------------------------------------------------------------------- */

static char *trim(char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    char *end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    return p;
}

static void *grow(void *p, int *cap, size_t elem)
{
    int ncap = *cap ? 2 * *cap : 16;
    void *q = realloc(p, (size_t)ncap * elem);
    if (q)
        *cap = ncap;
    return q;
}

static void reader_free(reader_t *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->s[i].e);
    free(r->s);
}

/* Splits `buf` (modified in place) into sections of key/value entries. */
static int read_lines(reader_t *r, char *buf)
{
    int line = 0;
    for (char *p = buf, *next; p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = '\0';
        char *t = trim(p);
        if (!*t || *t == '#' || *t == ';')
            continue;
        if (*t == '[') {
            size_t len = strlen(t);
            if (t[len - 1] != ']')
                return fail(r, line, MK_EFORMAT, "section header '%s' has no closing ']'", t);
            t[len - 1] = '\0';
            t = trim(t + 1);
            if (!*t)
                return fail(r, line, MK_EFORMAT, "empty section name '[]'");
            if (r->n == MAX_LAYERS)
                return fail(r, line, MK_EFORMAT, "more than %d sections", MAX_LAYERS);
            if (r->n == r->cap) {
                section_t *s = grow(r->s, &r->cap, sizeof *s);
                if (!s)
                    return mk_err_set(MK_ENOMEM, "out of memory reading %s", r->file);
                r->s = s;
            }
            r->s[r->n++] = (section_t){.name = t, .line = line};
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq)
            return fail(r, line, MK_EFORMAT, "'%s' is neither [section] nor key=value", t);
        *eq = '\0';
        char *key = trim(t), *value = trim(eq + 1);
        if (!*key)
            return fail(r, line, MK_EFORMAT, "'=%s' has no key", value);
        if (!*value)
            return fail(r, line, MK_EFORMAT, "%s= has no value", key);
        if (!r->n)
            return fail(r, line, MK_EFORMAT, "%s=%s before the first [section]", key, value);
        section_t *s = &r->s[r->n - 1];
        if (s->n == s->cap) {
            entry_t *e = grow(s->e, &s->cap, sizeof *e);
            if (!e)
                return mk_err_set(MK_ENOMEM, "out of memory reading %s", r->file);
            s->e = e;
        }
        s->e[s->n++] = (entry_t){.key = key, .value = value, .line = line};
    }
    return 0;
}

int mk_darknet_cfg_parse(const char *text, size_t len, const char *name, mk_darknet_cfg_t *cfg)
{
    reader_t r = {.file = name ? name : "(cfg)"};
    char *buf = NULL;
    int rc;
    if (!cfg || (!text && len))
        return mk_err_set(MK_EINVAL, "mk_darknet_cfg_parse: NULL argument");
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", r.file);
    const char *nul = len ? memchr(text, '\0', len) : NULL;
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++)
            line += *p == '\n';
        return fail(&r, line, MK_EFORMAT, "NUL byte: not a text file");
    }
    if (!(buf = malloc(len + 1)))
        return mk_err_set(MK_ENOMEM, "out of memory reading %s", r.file);
    if (len)
        memcpy(buf, text, len);
    buf[len] = '\0';
    if ((rc = read_lines(&r, buf)))
        goto done;
    if (!r.n) {
        rc = fail(&r, 1, MK_EFORMAT, "no sections (expected [net] first)");
        goto done;
    }
    if (strcmp(r.s[0].name, "net") && strcmp(r.s[0].name, "network")) {
        rc = fail(&r, r.s[0].line, MK_EFORMAT, "the first section must be [net], not [%s]", r.s[0].name);
        goto done;
    }
    if ((rc = check_keys(&r, &r.s[0], net_keys, 0)) || (rc = parse_net(&r, &r.s[0], cfg)))
        goto done;
    if (r.n == 1) {
        rc = fail(&r, r.s[0].line, MK_EFORMAT, "no layers after [%s]", r.s[0].name);
        goto done;
    }
    if (!(cfg->layers = calloc((size_t)(r.n - 1), sizeof *cfg->layers))) {
        rc = mk_err_set(MK_ENOMEM, "out of memory reading %s", r.file);
        goto done;
    }
    cfg->n_layers = r.n - 1;
    for (int i = 0; i < cfg->n_layers; i++)
        if ((rc = parse_layer(&r, &r.s[i + 1], i, &cfg->layers[i])))
            goto done;
done:
    if (rc)
        mk_darknet_cfg_free(cfg);
    reader_free(&r);
    free(buf);
    return rc;
}

int mk_darknet_cfg_read(const char *path, mk_darknet_cfg_t *cfg)
{
    void *data = NULL;
    size_t len = 0;
    int rc = mk_file_read(path, &data, &len);
    if (rc)
        return rc;
    rc = mk_darknet_cfg_parse(data, len, path, cfg);
    free(data);
    return rc;
}

void mk_darknet_cfg_free(mk_darknet_cfg_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->layers);
    cfg->layers = NULL;
    cfg->n_layers = 0;
}
