/* darknet_internal: the loaded network as every backend sees it — layers in cfg order with their shapes, resolved
 * inputs and folded weights — and the backend hooks. Not a public header: kernels/ and the tests only.
 *
 * Invariants (established by the loader, relied on by the backends without re-checking):
 *  - Every tensor is one image, float32, CHW, contiguous (c * h * w values), batch 1.
 *  - A layer's inputs (input, route.layers, shortcut.from) are earlier layers or -1 = the network input, and are
 *    never [dropout] layers: references to a dropout are resolved to what the dropout passes through (which is
 *    how a route or shortcut can name -1), so backends skip MK_LAYER_DROPOUT entirely.
 *  - Shapes are consistent and non-empty; c * h * w and every weight count fit in an int.
 *  - Convolution weights and biases are on the host, batch norm already folded in.
 *
 * Backend hooks (backend.h): mk_net_prepare_<b>() runs once at the end of mk_net_load() and sets up whatever the
 * backend keeps between calls in net->backend_state (buffers, descriptors, uploaded weights) and sets each
 * non-dropout layer's `output` to its output buffer in the context's memory (yolo layers: float32, contiguous,
 * Darknet's layout); mk_net_forward_<b>() runs one pass; mk_net_release_<b>() frees backend_state (it must
 * accept a half-prepared network). */
#ifndef MK_DARKNET_INTERNAL_H
#define MK_DARKNET_INTERNAL_H

#include "darknet.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most inputs of one [route] layer, [yolo] layers in one network, anchors in one [yolo] anchors= list. */
#define MK_NET_MAX_ROUTE 8
#define MK_NET_MAX_YOLO 8
#define MK_NET_MAX_ANCHORS 64

typedef enum {
    MK_LAYER_CONV = 0,
    MK_LAYER_MAXPOOL,
    MK_LAYER_ROUTE,
    MK_LAYER_SHORTCUT,
    MK_LAYER_UPSAMPLE,
    MK_LAYER_YOLO,
    MK_LAYER_DROPOUT,
} mk_layer_type_t;

/* Activations, with Darknet's formulas (darknet_px.h). */
typedef enum {
    MK_ACT_LINEAR = 0,
    MK_ACT_LEAKY,    /* x > 0 ? x : 0.1f * x */
    MK_ACT_MISH,     /* x * tanh(softplus(x)), Darknet's softplus threshold 20 and tanh via expf */
    MK_ACT_LOGISTIC, /* 1 / (1 + expf(-x)) */
    MK_ACT_RELU,     /* x * (x > 0) */
} mk_act_t;

/* [convolutional]: out(f, y, x) = act(bias[f] + sum over the group's input channels ci and the size x size
 * window of weights[f][ci][ky][kx] * in(g * c/groups + ci, y * stride - pad + ky, x * stride - pad + kx)), where
 * g = f / (filters/groups) and inputs outside the image are 0. out_h = (h + 2 pad - size) / stride + 1. */
typedef struct {
    int filters, size, stride, pad, groups;
    int batch_normalize; /* as the cfg says; folded into weights/biases either way */
    float *weights;      /* host, [filters][c/groups][size][size], batch norm folded */
    float *biases;       /* host, [filters], batch norm folded */
} mk_conv_t;

/* [maxpool] (Darknet's rule): pad is the TOTAL padding (cfg padding=, default size-1); out_h =
 * (h + pad - size) / stride + 1; the window of output (x, y) covers inputs x * stride - pad/2 + 0..size-1 (pad/2
 * rounded toward zero), and inputs outside the image are skipped (never 0). */
typedef struct {
    int size, stride, pad;
} mk_maxpool_t;

/* [route]: the concatenation, in order, of each input's channel slice [group_id * c/groups, (group_id+1) *
 * c/groups) (all channels when groups = 1); inputs share h and w. */
typedef struct {
    int n;
    int layers[MK_NET_MAX_ROUTE]; /* resolved layer indices */
    int groups, group_id;
} mk_route_t;

/* [shortcut]: out = act(in + layers[from].output); both of the same shape. */
typedef struct {
    int from; /* resolved layer index */
} mk_shortcut_t;

/* [upsample]: out(c, y, x) = scale * in(c, y / stride, x / stride) (nearest). */
typedef struct {
    int stride;
    float scale;
} mk_upsample_t;

/* [yolo]: out = in, except the x and y planes of each anchor: logistic(v) * scale_x_y + bias_x_y (bias_x_y =
 * (float)(-0.5 * (scale_x_y - 1.0)) in double, as Darknet's scal_add_cpu call), and the objectness and class
 * planes: logistic(v). `meta` is what mk_net_yolo_output() returns (its data pointer set from `output`). */
typedef struct {
    int index;          /* k: the position of this layer among the network's yolo layers */
    int num;            /* anchors in the cfg's anchors= list (num=) */
    int mask[MK_YOLO_MAX_ANCHORS];
    float bias_x_y;
    mk_yolo_layer_t meta;
} mk_yolo_t;

typedef struct {
    mk_layer_type_t type;
    int line;             /* cfg line of the section header, for messages */
    int input;            /* the layer whose output is this layer's input (-1: the network input); a route's
                           * inputs are route.layers */
    int c, h, w;          /* input shape (a route: its first input's h and w, c of the output) */
    int out_c, out_h, out_w;
    mk_act_t act;         /* conv and shortcut; LINEAR elsewhere */
    union {
        mk_conv_t conv;
        mk_maxpool_t maxpool;
        mk_route_t route;
        mk_shortcut_t shortcut;
        mk_upsample_t upsample;
        mk_yolo_t yolo;
    };
    void *output;         /* set by the backend's prepare; NULL for dropout */
} mk_layer_t;

struct mk_net {
    mk_ctx_t *ctx;
    char cfg_name[256];   /* the cfg path as given, for messages */
    int c, h, w;          /* network input */
    int n_layers;
    mk_layer_t *layers;
    int n_yolo;
    int yolo[MK_NET_MAX_YOLO]; /* layer indices of the yolo layers, in order */
    int fp16;             /* opts->fp16: the CUDA backend runs convolutions in FP16 (yolo outputs stay F32) */
    int cudnn;            /* opts->cudnn: MK_NET_CUDNN_* */
    /* The weights file's header (zeros for random weights). */
    int major, minor, revision;
    uint64_t seen;
    double flops;
    int forwarded;        /* a forward pass has run (outputs hold its results) */
    void *backend_state;
};

/* Elements of a layer's output. */
static inline size_t mk_layer_out_size(const mk_layer_t *l)
{
    return (size_t)l->out_c * (size_t)l->out_h * (size_t)l->out_w;
}

/* Name of a layer type / activation as the cfg writes it ("convolutional", "leaky"). */
const char *mk_layer_type_name(mk_layer_type_t t);
const char *mk_act_name(mk_act_t a);

/* The weights (darknet_weights.c), into each convolution's weights and biases with batch norm folded.
 * mk_net_weights_parse reads a Darknet weights file's bytes: the header (major, minor, revision as int32, then
 * `seen` as uint64 when major * 10 + minor >= 2 and both are below 1000 (the transposed-format marker), else as
 * uint32: pjreddie's rule; AlexeyAB's loader drops the "below 1000" part, which only matters for those old
 * transposed files, and a wrong guess shows as a 4-byte size mismatch), then per convolution in cfg order: biases[filters], if batch_normalize scales[filters],
 * rolling_mean[filters] and rolling_variance[filters], then weights. The size must match the cfg exactly.
 * mk_net_weights_random draws the same quantities from a seeded generator. */
int mk_net_weights_parse(mk_net_t *net, const void *data, size_t len, const char *name);
int mk_net_weights_random(mk_net_t *net, uint64_t seed);
/* Darknet's batch-norm epsilon in fuse_conv_batchnorm: w' = w * s / sqrt(var + eps), b' = b - s * mean /
 * sqrt(var + eps), evaluated in double. */
#define MK_NET_BN_EPS 0.00001

/* mk_net_load from memory: the cfg text (cfg_name used in messages), and the weights file's bytes (NULL: random
 * weights from opts->seed; weights_name used in messages). */
int mk_net_load_mem(mk_ctx_t *ctx, const char *cfg_text, size_t cfg_len, const char *cfg_name,
                    const void *weights, size_t weights_len, const char *weights_name, const mk_net_opts_t *opts,
                    mk_net_t **out);

#ifdef __cplusplus
}
#endif
#endif
