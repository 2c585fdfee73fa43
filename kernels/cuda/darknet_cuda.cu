/* darknet_cuda: the CUDA forward pass of a Darknet network — cuDNN convolutions, our kernels for everything else
 * (darknet_cuda_layers.cu), the whole pass replayed as one CUDA graph.
 *
 * Prepared once at load: folded weights uploaded (FP32, or FP16 for cuDNN with float32 biases), a cuDNN handle
 * on the context's stream, descriptors per convolution, the algorithm chosen once by cudnnFind...Ex among the
 * deterministic ones (FP32: CUDNN_FMA_MATH, no TF32, for parity with the CPU reference; FP16: tensor-op math),
 * one workspace of the largest size they need, and every activation buffer in one arena. Outputs whose lifetimes
 * do not overlap share arena slots, except the [yolo] outputs (float32, Darknet's layout, kept until the next
 * pass). Then one warm-up pass runs layer by layer and the pass is captured into a CUDA graph.
 *
 * A forward pass queues the copy (FP32) or conversion (FP16) of the caller's input into the internal input
 * buffer, then launches the graph. The copy stays outside the graph: a captured copy keeps the caller's pointer,
 * and 2-D copy nodes cannot be retargeted in an instantiated graph (only 1-D ones), so any input image works this
 * way at the cost of one more operation on the stream. Nothing in a pass synchronises with the host.
 *
 * Kernels per layer: a convolution is cuDNN's kernel(s) plus one epilogue (bias + activation), or — depthwise
 * convolutions (groups = channels = filters) and convolutions of at most MASKD_NET_DIRECT_MFLOPS (default 8)
 * million FLOPs — one direct kernel of ours with the epilogue inside. Either epilogue also does the add + activation
 * of a [shortcut] that is the convolution's only reader, or the whole [yolo] layer that is its only reader. A
 * [route] of one input in NCHW is a view (no kernel); maxpool, route, shortcut, upsample, yolo are one kernel
 * each; dropout is nothing. (The default threshold: these networks are launch-bound, a graph node costs about
 * 2 µs, and the direct kernel at a pessimistic 4 TFLOP/s does 8 MFLOPs in that time, so below it one node cannot
 * lose to cuDNN's node plus the epilogue's.)
 *
 * Layouts: FP32 runs NCHW. FP16 keeps activations in half, NHWC by default (cuDNN's tensor-core layout); if
 * cuDNN has no algorithm for a layer in NHWC the network is prepared again in NCHW.
 *
 * Switches, read from the environment at load (for measurements and debugging):
 *   MASKD_NO_GRAPH=1            launch layer by layer instead of the CUDA graph
 *   MASKD_NET_LAYOUT=nchw|nhwc  FP16 activation layout
 *   MASKD_NET_DEPTHWISE=cudnn   depthwise convolutions through cuDNN + epilogue instead of our kernel (=kernel)
 *   MASKD_NET_DIRECT_MFLOPS=N   other convolutions of at most N MFLOPs by our direct kernel (0: none)
 *   MASKD_NET_DEBUG=1           every layer keeps its own output buffer and nothing is fused, so that
 *                               mk_net_cuda_layer_read() can read any layer after a pass */
#include "backend.h"
#include "cuda_check.h"
#include "darknet_cuda_layers.h"
#include "darknet_internal.h"
#include "errors.h"
#include "log.h"

#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

const size_t kAlign = 256;
/* Largest workspace offered to cudnnFind: algorithms that want more are not considered. */
const size_t kFindWorkspaceCap = (size_t)256 << 20;
const int kMaxPerf = 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT;

struct conv_state {
    int cudnn; /* 0: our direct kernel (weights float [filters][c/groups][size][size]) */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t w_off, b_off; /* in the weight arena */
    void *w;             /* cuDNN's filter (float or half, KCRS or KRSC), or our kernel's float [c][size][size] */
    float *bias;
    int shortcut; /* the [shortcut] whose add + activation this epilogue does, or -1 */
    int yolo;     /* the [yolo] layer this epilogue computes, or -1 */
};

/* A layer output as a logical buffer: written at layer `def` (-1: the network input), last read at `last_use`;
 * placed in arena slot `slot`. */
struct value_t {
    size_t bytes;
    int def, last_use, pinned, slot;
};

struct slot_t {
    size_t bytes, off;
    int last_def; /* the last value definition placed here */
    int busy;
};

struct layer_state {
    int value;    /* -1: no output (dropout) */
    size_t off;   /* byte offset of the output inside the value (route views) */
    int run;      /* 0: nothing to launch (dropout, a route view, a layer done by a convolution's epilogue) */
    int fused;    /* a convolution whose own output is never materialised (its epilogue writes a later layer's) */
    dn_tensor out;
};

struct net_state {
    cudnnHandle_t dnn;
    int half, nhwc, graph, debug, own_dw;
    size_t esize;
    layer_state *ls;
    conv_state *conv; /* per layer; used for convolutions */
    value_t *values;
    int n_values, in_value;
    slot_t *slots;
    int n_slots;
    dn_tensor in;
    void *weights, *arena, *ws;
    size_t weight_bytes, arena_bytes, ws_bytes;
    cudaGraphExec_t exec;
};

struct options {
    int half, nhwc, graph, debug, own_dw, layout_forced;
    double direct_mflops;
};

int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* For the calls whose failure leaves nothing to undo (destroying things): a warning. */
void warn_failed(int rc)
{
    if (rc)
        MK_WARN("%s", mk_err_msg());
}

size_t align_up(size_t n)
{
    return (n + kAlign - 1) / kAlign * kAlign;
}

/* The layers whose outputs layer l reads, in order; returns how many. */
int inputs_of(const mk_layer_t *l, int in[MK_NET_MAX_ROUTE + 1])
{
    switch (l->type) {
    case MK_LAYER_DROPOUT: return 0;
    case MK_LAYER_ROUTE:
        for (int k = 0; k < l->route.n; k++)
            in[k] = l->route.layers[k];
        return l->route.n;
    case MK_LAYER_SHORTCUT:
        in[0] = l->input;
        in[1] = l->shortcut.from;
        return 2;
    default: in[0] = l->input; return 1;
    }
}

const dn_tensor &tensor_of(const net_state *st, int i)
{
    return i < 0 ? st->in : st->ls[i].out;
}

int new_value(net_state *st, size_t bytes, int def, int pinned)
{
    value_t *v = &st->values[st->n_values];
    v->bytes = bytes;
    v->def = v->last_use = def;
    v->pinned = pinned;
    v->slot = -1;
    return st->n_values++;
}

/* A free slot for `bytes`: the smallest that fits, else the largest free one (grown), else a new one. */
int take_slot(net_state *st, size_t bytes, int def)
{
    int fit = -1, big = -1;
    for (int s = 0; s < st->n_slots; s++) {
        const slot_t *sl = &st->slots[s];
        if (sl->busy)
            continue;
        if (sl->bytes >= bytes && (fit < 0 || sl->bytes < st->slots[fit].bytes))
            fit = s;
        if (big < 0 || sl->bytes > st->slots[big].bytes)
            big = s;
    }
    int s = fit >= 0 ? fit : big >= 0 ? big : st->n_slots++;
    slot_t *sl = &st->slots[s];
    if (sl->bytes < bytes)
        sl->bytes = bytes;
    sl->busy = 1;
    sl->last_def = def;
    return s;
}

/* Which layers are fused into a convolution's epilogue, which outputs are views, which values exist, how long
 * each lives and where it goes in the arena. */
int plan(mk_net_t *net, net_state *st)
{
    int n = net->n_layers, in[MK_NET_MAX_ROUTE + 1];
    int *readers = (int *)calloc((size_t)n, sizeof(int));
    st->values = (value_t *)calloc((size_t)n + 1, sizeof(value_t));
    st->slots = (slot_t *)calloc((size_t)n + 1, sizeof(slot_t));
    if (!readers || !st->values || !st->slots) {
        free(readers);
        return mk_err_set(MK_ENOMEM, "out of memory planning %s", net->cfg_name);
    }
    for (int i = 0; i < n; i++) {
        const mk_layer_t *l = &net->layers[i];
        int m = inputs_of(l, in);
        for (int k = 0; k < m; k++) {
            if (in[k] >= 0) {
                readers[in[k]]++;
                if (st->half && net->layers[in[k]].type == MK_LAYER_YOLO) {
                    free(readers);
                    return mk_err_set(MK_EUNSUPPORTED, "%s:%d: layer %d reads the [yolo] layer %d: not supported "
                                      "in FP16", net->cfg_name, l->line, i, in[k]);
                }
            }
        }
        st->ls[i].run = l->type != MK_LAYER_DROPOUT;
        st->conv[i].shortcut = st->conv[i].yolo = -1;
    }
    for (int i = 0; i < n && !st->debug; i++) {
        const mk_layer_t *l = &net->layers[i];
        int j = l->input;
        if ((l->type != MK_LAYER_SHORTCUT && l->type != MK_LAYER_YOLO) || j < 0 ||
            net->layers[j].type != MK_LAYER_CONV || readers[j] != 1)
            continue;
        if (l->type == MK_LAYER_SHORTCUT && l->shortcut.from < j) /* the residual exists when the epilogue runs */
            st->conv[j].shortcut = i;
        else if (l->type == MK_LAYER_YOLO)
            st->conv[j].yolo = i;
        else
            continue;
        st->ls[i].run = 0;
        st->ls[j].fused = 1;
    }
    free(readers);

    st->in_value = new_value(st, (size_t)net->c * net->h * net->w * st->esize, -1, st->debug);
    for (int i = 0; i < n; i++) {
        const mk_layer_t *l = &net->layers[i];
        layer_state *ls = &st->ls[i];
        ls->value = -1;
        if (l->type == MK_LAYER_DROPOUT)
            continue;
        if (l->type == MK_LAYER_ROUTE && l->route.n == 1 && !st->nhwc) {
            int k = l->route.layers[0], ck = k < 0 ? net->c : net->layers[k].out_c;
            ls->value = k < 0 ? st->in_value : st->ls[k].value;
            ls->off = (k < 0 ? 0 : st->ls[k].off) +
                      (size_t)l->route.group_id * (size_t)(ck / l->route.groups) * l->h * l->w * st->esize;
            ls->run = 0;
        } else if (l->type == MK_LAYER_SHORTCUT && !ls->run) {
            ls->value = st->ls[l->input].value;
        } else if (l->type == MK_LAYER_YOLO) {
            ls->value = new_value(st, mk_layer_out_size(l) * sizeof(float), ls->run ? i : l->input, 1);
        } else {
            ls->value = new_value(st, mk_layer_out_size(l) * st->esize, i, st->debug);
        }
    }
    for (int i = 0; i < n; i++) {
        int m = inputs_of(&net->layers[i], in);
        for (int k = 0; k < m; k++) {
            value_t *v = &st->values[in[k] < 0 ? st->in_value : st->ls[in[k]].value];
            if (v->last_use < i)
                v->last_use = i;
        }
    }
    /* Slots: each value takes one when it is written and gives it back after its last reader. */
    for (int t = -1; t < n; t++) {
        for (int v = 0; v < st->n_values; v++)
            if (st->values[v].def == t)
                st->values[v].slot = take_slot(st, st->values[v].bytes, t);
        for (int v = 0; v < st->n_values; v++)
            if (st->values[v].last_use == t && !st->values[v].pinned)
                st->slots[st->values[v].slot].busy = 0;
    }
    st->arena_bytes = 0;
    for (int s = 0; s < st->n_slots; s++) {
        st->slots[s].off = st->arena_bytes;
        st->arena_bytes += align_up(st->slots[s].bytes);
    }
    return 0;
}

/* Creates the cuDNN descriptors of convolution layer i. */
int describe_conv(mk_net_t *net, net_state *st, int i)
{
    const mk_layer_t *l = &net->layers[i];
    const mk_conv_t *cv = &l->conv;
    conv_state *c = &st->conv[i];
    cudnnDataType_t dt = st->half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    cudnnTensorFormat_t fmt = st->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    int rc, on, oc, oh, ow;
    if ((rc = MK_CUDNN_CHECK(cudnnCreateTensorDescriptor(&c->xd))) ||
        (rc = MK_CUDNN_CHECK(cudnnCreateTensorDescriptor(&c->yd))) ||
        (rc = MK_CUDNN_CHECK(cudnnCreateFilterDescriptor(&c->wd))) ||
        (rc = MK_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c->cd))) ||
        (rc = MK_CUDNN_CHECK(cudnnSetTensor4dDescriptor(c->xd, fmt, dt, 1, l->c, l->h, l->w))) ||
        (rc = MK_CUDNN_CHECK(cudnnSetTensor4dDescriptor(c->yd, fmt, dt, 1, l->out_c, l->out_h, l->out_w))) ||
        (rc = MK_CUDNN_CHECK(
             cudnnSetFilter4dDescriptor(c->wd, dt, fmt, cv->filters, l->c / cv->groups, cv->size, cv->size))) ||
        (rc = MK_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c->cd, cv->pad, cv->pad, cv->stride, cv->stride, 1, 1,
                                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT))) ||
        (rc = MK_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c->cd, cv->groups))) ||
        (rc = MK_CUDNN_CHECK(cudnnSetConvolutionMathType(c->cd, st->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH))) ||
        (rc = MK_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh, &ow))))
        return mk_err_wrap(rc, "%s:%d: layer %d", net->cfg_name, l->line, i);
    if (on != 1 || oc != l->out_c || oh != l->out_h || ow != l->out_w)
        return mk_err_set(MK_ESTATE, "%s:%d: layer %d: cuDNN computes a %dx%dx%d output, the network %dx%dx%d",
                          net->cfg_name, l->line, i, ow, oh, oc, l->out_w, l->out_h, l->out_c);
    return 0;
}

/* Lays out every convolution's bias (float) and weights (cuDNN's type and layout, or float for our kernel) in
 * one host buffer, as the weight arena will hold them. */
int stage_weights(const mk_net_t *net, net_state *st, char **out)
{
    size_t total = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        size_t nw = (size_t)l->conv.filters * (size_t)(l->c / l->conv.groups) * l->conv.size * l->conv.size;
        st->conv[i].b_off = total;
        total += align_up((size_t)l->conv.filters * sizeof(float));
        st->conv[i].w_off = total;
        total += align_up(nw * (st->conv[i].cudnn ? st->esize : sizeof(float)));
    }
    st->weight_bytes = total;
    *out = NULL;
    if (!total)
        return 0;
    char *host = (char *)calloc(1, total);
    if (!host)
        return mk_err_set(MK_ENOMEM, "out of memory staging the weights of %s", net->cfg_name);
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        const mk_conv_t *cv = &l->conv;
        const conv_state *c = &st->conv[i];
        int cg = l->c / cv->groups, kk = cv->size * cv->size;
        size_t nw = (size_t)cv->filters * cg * kk;
        memcpy(host + c->b_off, cv->biases, (size_t)cv->filters * sizeof(float));
        if (!c->cudnn || !st->half) {
            memcpy(host + c->w_off, cv->weights, nw * sizeof(float));
            continue;
        }
        __half *w = (__half *)(host + c->w_off);
        for (int f = 0; f < cv->filters; f++)
            for (int ci = 0; ci < cg; ci++)
                for (int k = 0; k < kk; k++) {
                    size_t src = ((size_t)f * cg + ci) * kk + k;
                    size_t dst = st->nhwc ? ((size_t)f * kk + k) * cg + ci : src; /* KRSC for NHWC filters */
                    w[dst] = __float2half_rn(cv->weights[src]);
                }
    }
    *out = host;
    return 0;
}

int upload_weights(mk_ctx_t *ctx, mk_net_t *net, net_state *st)
{
    char *host;
    int rc = stage_weights(net, st, &host);
    if (rc || !host)
        return rc;
    if (!(rc = mk_cuda_alloc(ctx, st->weight_bytes, MK_MEM_DEVICE, &st->weights)) &&
        !(rc = MK_CUDA_CHECK(
              cudaMemcpyAsync(st->weights, host, st->weight_bytes, cudaMemcpyHostToDevice, MK_STREAM(ctx)))))
        rc = MK_CUDA_CHECK(cudaStreamSynchronize(MK_STREAM(ctx)));
    free(host);
    return rc;
}

/* Points every tensor, convolution parameter and layer output into the arenas (st->arena, st->weights). Yolo
 * outputs are float32 NCHW whatever the mode. */
void bind(mk_net_t *net, net_state *st)
{
    const value_t *iv = &st->values[st->in_value];
    st->in = {(char *)st->arena + st->slots[iv->slot].off, net->c, net->h, net->w, st->half, st->nhwc};
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        layer_state *ls = &st->ls[i];
        if (l->type == MK_LAYER_CONV) {
            st->conv[i].w = (char *)st->weights + st->conv[i].w_off;
            st->conv[i].bias = (float *)((char *)st->weights + st->conv[i].b_off);
        }
        if (ls->value < 0)
            continue;
        int yolo = l->type == MK_LAYER_YOLO;
        char *p = (char *)st->arena + st->slots[st->values[ls->value].slot].off + ls->off;
        ls->out = {p, l->out_c, l->out_h, l->out_w, yolo ? 0 : st->half, yolo ? 0 : st->nhwc};
        l->output = p;
    }
}

const char *math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-conv";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

/* Times every algorithm of convolution layer i on its real buffers and keeps the fastest usable one: it ran,
 * it is deterministic (graph replays must equal eager passes bit for bit) and, in FP32, it uses FMA math (no
 * TF32). Returns the workspace it needs in *ws. */
int choose_algo(mk_net_t *net, net_state *st, int i, void *find_ws, size_t find_bytes, size_t *ws)
{
    const mk_layer_t *l = &net->layers[i];
    conv_state *c = &st->conv[i];
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxPerf];
    int max_count = 0, got = 0, rc;
    if ((rc = MK_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(st->dnn, &max_count))) ||
        (rc = MK_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
             st->dnn, c->xd, tensor_of(st, l->input).data, c->wd, c->w, c->cd, c->yd, st->ls[i].out.data,
             max_count < kMaxPerf ? max_count : kMaxPerf, &got, perf, find_ws, find_bytes))))
        return mk_err_wrap(rc, "%s:%d: layer %d", net->cfg_name, l->line, i);
    for (int k = 0; k < got; k++) {
        const cudnnConvolutionFwdAlgoPerf_t *p = &perf[k];
        if (p->status != CUDNN_STATUS_SUCCESS || p->determinism != CUDNN_DETERMINISTIC ||
            (!st->half && p->mathType != CUDNN_FMA_MATH) || p->memory > find_bytes)
            continue;
        size_t need = 0;
        c->algo = p->algo;
        if ((rc = MK_CUDNN_CHECK(cudnnSetConvolutionMathType(c->cd, p->mathType))) ||
            (rc = MK_CUDNN_CHECK(
                 cudnnGetConvolutionForwardWorkspaceSize(st->dnn, c->xd, c->wd, c->cd, c->yd, c->algo, &need))))
            return mk_err_wrap(rc, "%s:%d: layer %d", net->cfg_name, l->line, i);
        *ws = need > p->memory ? need : p->memory;
        MK_DEBUG("%s: layer %d conv %dx%d/%d %d->%d groups %d: algo %d, %s math, %.3f ms, workspace %zu",
                 net->cfg_name, i, l->conv.size, l->conv.size, l->conv.stride, l->c, l->out_c, l->conv.groups,
                 (int)p->algo, math_name(p->mathType), (double)p->time, *ws);
        return 0;
    }
    char list[320] = "";
    size_t len = 0;
    for (int k = 0; k < got && len < sizeof list; k++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s algo %d: %s, %s, %s math", k ? ";" : "",
                                (int)perf[k].algo, cudnnGetErrorString(perf[k].status),
                                perf[k].determinism == CUDNN_DETERMINISTIC ? "deterministic" : "non-deterministic",
                                math_name(perf[k].mathType));
    return mk_err_set(MK_EUNSUPPORTED, "%s:%d: layer %d (%dx%d/%d conv, %d->%d channels, groups %d, %s %s): cuDNN "
                      "has no usable algorithm (%s)", net->cfg_name, l->line, i, l->conv.size, l->conv.size,
                      l->conv.stride, l->c, l->out_c, l->conv.groups, st->half ? "FP16" : "FP32",
                      st->nhwc ? "NHWC" : "NCHW", got ? list : "none returned");
}

/* Chooses every convolution's algorithm and allocates the one workspace they share. */
int choose_algos(mk_ctx_t *ctx, mk_net_t *net, net_state *st)
{
    size_t find_bytes = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const conv_state *c = &st->conv[i];
        if (net->layers[i].type != MK_LAYER_CONV || !c->cudnn)
            continue;
        for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++) {
            size_t sz = 0;
            /* Algorithms that do not apply answer with an error status: they are simply not offered room. */
            if (cudnnGetConvolutionForwardWorkspaceSize(st->dnn, c->xd, c->wd, c->cd, c->yd,
                                                        (cudnnConvolutionFwdAlgo_t)a, &sz) == CUDNN_STATUS_SUCCESS &&
                sz <= kFindWorkspaceCap && sz > find_bytes)
                find_bytes = sz;
        }
    }
    void *find_ws = NULL;
    int rc = find_bytes ? mk_cuda_alloc(ctx, find_bytes, MK_MEM_DEVICE, &find_ws) : 0;
    for (int i = 0; i < net->n_layers && !rc; i++) {
        size_t ws = 0;
        if (net->layers[i].type != MK_LAYER_CONV || !st->conv[i].cudnn)
            continue;
        if (!(rc = choose_algo(net, st, i, find_ws, find_bytes, &ws)) && ws > st->ws_bytes)
            st->ws_bytes = ws;
    }
    if (find_ws)
        mk_cuda_free(ctx, find_ws, MK_MEM_DEVICE);
    if (!rc && st->ws_bytes)
        rc = mk_cuda_alloc(ctx, st->ws_bytes, MK_MEM_DEVICE, &st->ws);
    return rc;
}

/* Queues every layer of one pass on `s` (the body of the CUDA graph). */
int run_layers(mk_net_t *net, net_state *st, cudaStream_t s)
{
    static const float one = 1.f, zero = 0.f;
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        const layer_state *ls = &st->ls[i];
        const dn_tensor &out = ls->out;
        int rc = 0;
        if (!ls->run)
            continue;
        switch (l->type) {
        case MK_LAYER_CONV: {
            const conv_state *c = &st->conv[i];
            const dn_tensor &in = tensor_of(st, l->input);
            const mk_conv_t *cv = &l->conv;
            if (!c->cudnn && c->yolo >= 0) {
                const mk_yolo_t *y = &net->layers[c->yolo].yolo;
                rc = dn_conv_yolo(s, in, (const float *)c->w, c->bias, cv->size, cv->stride, cv->pad, cv->groups,
                                  l->act, y->meta.classes, y->meta.scale_x_y, y->bias_x_y, out,
                                  (float *)st->ls[c->yolo].out.data);
                break;
            }
            if (!c->cudnn) {
                const mk_layer_t *sc = c->shortcut >= 0 ? &net->layers[c->shortcut] : NULL;
                rc = dn_conv(s, in, (const float *)c->w, c->bias, cv->size, cv->stride, cv->pad, cv->groups, l->act,
                             sc ? &tensor_of(st, sc->shortcut.from) : NULL, sc ? sc->act : MK_ACT_LINEAR, out);
                break;
            }
            if ((rc = MK_CUDNN_CHECK(cudnnConvolutionForward(st->dnn, &one, c->xd, in.data, c->wd, c->w, c->cd,
                                                             c->algo, st->ws, st->ws_bytes, &zero, c->yd,
                                                             out.data))))
                break;
            if (c->yolo >= 0) {
                const mk_yolo_t *y = &net->layers[c->yolo].yolo;
                rc = dn_yolo(s, out, c->bias, l->act, y->meta.classes, y->meta.scale_x_y, y->bias_x_y,
                             (float *)st->ls[c->yolo].out.data);
            } else if (c->shortcut >= 0) {
                const mk_layer_t *sc = &net->layers[c->shortcut];
                rc = dn_bias_act(s, out, c->bias, l->act, &tensor_of(st, sc->shortcut.from), sc->act, out);
            } else {
                rc = dn_bias_act(s, out, c->bias, l->act, NULL, MK_ACT_LINEAR, out);
            }
            break;
        }
        case MK_LAYER_MAXPOOL:
            rc = dn_maxpool(s, tensor_of(st, l->input), l->maxpool.size, l->maxpool.stride, l->maxpool.pad, out);
            break;
        case MK_LAYER_ROUTE: {
            dn_route_args a;
            a.n = l->route.n;
            for (int k = 0; k < a.n; k++) {
                const dn_tensor &t = tensor_of(st, l->route.layers[k]);
                a.in[k] = t.data;
                a.in_c[k] = t.c;
                a.count[k] = t.c / l->route.groups;
                a.first[k] = l->route.group_id * a.count[k];
            }
            rc = dn_route(s, a, out);
            break;
        }
        case MK_LAYER_SHORTCUT:
            rc = dn_shortcut(s, tensor_of(st, l->input), tensor_of(st, l->shortcut.from), l->act, out);
            break;
        case MK_LAYER_UPSAMPLE:
            rc = dn_upsample(s, tensor_of(st, l->input), l->upsample.stride, l->upsample.scale, out);
            break;
        case MK_LAYER_YOLO:
            rc = dn_yolo(s, tensor_of(st, l->input), NULL, MK_ACT_LINEAR, l->yolo.meta.classes, l->yolo.meta.scale_x_y,
                         l->yolo.bias_x_y, (float *)out.data);
            break;
        case MK_LAYER_DROPOUT: break;
        }
        if (rc)
            return mk_err_wrap(rc, "%s: layer %d (%s, cfg line %d)", net->cfg_name, i, mk_layer_type_name(l->type),
                               l->line);
    }
    return 0;
}

/* Records one pass into a CUDA graph and instantiates it. */
int capture(mk_net_t *net, net_state *st, cudaStream_t s)
{
    cudaGraph_t g = NULL;
    int rc = MK_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (rc)
        return rc;
    int lrc = run_layers(net, st, s);
    cudaError_t end = cudaStreamEndCapture(s, &g);
    rc = lrc ? lrc : MK_CUDA_CHECK(end);
    if (!rc)
        rc = MK_CUDA_CHECK(cudaGraphInstantiate(&st->exec, g, 0));
    if (g)
        warn_failed(MK_CUDA_CHECK(cudaGraphDestroy(g)));
    if (rc) {
        st->exec = NULL;
        cudaGetLastError(); /* the failed capture's error is reported through rc; nothing sticky is left */
    }
    return rc;
}

/* The state of a network before anything is placed on the device: options, which convolutions go through cuDNN
 * (with their descriptors), the plan. */
int setup(mk_net_t *net, const options *o)
{
    int n = net->n_layers, rc;
    net_state *st = (net_state *)calloc(1, sizeof *st);
    if (!st)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    net->backend_state = st;
    st->half = o->half;
    st->nhwc = o->nhwc;
    st->graph = o->graph;
    st->debug = o->debug;
    st->own_dw = o->own_dw;
    st->esize = st->half ? sizeof(__half) : sizeof(float);
    st->ls = (layer_state *)calloc((size_t)n, sizeof *st->ls);
    st->conv = (conv_state *)calloc((size_t)n, sizeof *st->conv);
    if (!st->ls || !st->conv)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    for (int i = 0; i < n; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        const mk_conv_t *cv = &l->conv;
        int depthwise = cv->groups > 1 && cv->groups == l->c && cv->filters == l->c;
        double flops = 2.0 * cv->filters * (l->c / cv->groups) * cv->size * cv->size * l->out_h * l->out_w;
        st->conv[i].cudnn = depthwise ? !o->own_dw : !(flops <= o->direct_mflops * 1e6);
        if (st->conv[i].cudnn && (rc = describe_conv(net, st, i)))
            return rc;
    }
    return plan(net, st);
}

int prepare(mk_ctx_t *ctx, mk_net_t *net, const options *o)
{
    int rc;
    if ((rc = setup(net, o)))
        return rc;
    net_state *st = (net_state *)net->backend_state;
    if ((rc = MK_CUDNN_CHECK(cudnnCreate(&st->dnn))) || (rc = MK_CUDNN_CHECK(cudnnSetStream(st->dnn, MK_STREAM(ctx)))))
        return rc;
    if ((rc = upload_weights(ctx, net, st)) || (rc = mk_cuda_alloc(ctx, st->arena_bytes, MK_MEM_DEVICE, &st->arena)) ||
        (rc = MK_CUDA_CHECK(cudaMemsetAsync(st->arena, 0, st->arena_bytes, MK_STREAM(ctx)))))
        return rc;
    bind(net, st);
    if ((rc = choose_algos(ctx, net, st)))
        return rc;
    /* Warm-up: every kernel loaded and run once before the capture; errors surface here, at load. */
    if ((rc = run_layers(net, st, MK_STREAM(ctx))) || (rc = MK_CUDA_CHECK(cudaStreamSynchronize(MK_STREAM(ctx)))))
        return rc;
    if (st->graph && (rc = capture(net, st, MK_STREAM(ctx)))) {
        MK_WARN("%s: capturing the forward pass into a CUDA graph failed, running layer by layer: %s",
                net->cfg_name, mk_err_msg());
        st->graph = 0;
    }
    MK_DEBUG("%s: CUDA %s %s: weights %.1f MB, activations %.1f MB in %d slots for %d values, workspace %.1f MB, "
             "%s", net->cfg_name, st->half ? "FP16" : "FP32", st->nhwc ? "NHWC" : "NCHW", st->weight_bytes / 1e6,
             st->arena_bytes / 1e6, st->n_slots, st->n_values, st->ws_bytes / 1e6,
             st->graph ? "CUDA graph" : "layer by layer");
    return 0;
}

} // namespace

extern "C" int mk_net_prepare_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    options o;
    const char *layout = getenv("MASKD_NET_LAYOUT"), *dw = getenv("MASKD_NET_DEPTHWISE");
    o.half = net->fp16;
    o.nhwc = o.half;
    o.layout_forced = 0;
    if (layout && *layout) {
        if (strcmp(layout, "nchw") && strcmp(layout, "nhwc"))
            return mk_err_set(MK_EINVAL, "MASKD_NET_LAYOUT=%s: expected nchw or nhwc", layout);
        o.nhwc = o.half && !strcmp(layout, "nhwc");
        o.layout_forced = 1;
    }
    if (dw && *dw && strcmp(dw, "cudnn") && strcmp(dw, "kernel"))
        return mk_err_set(MK_EINVAL, "MASKD_NET_DEPTHWISE=%s: expected cudnn or kernel", dw);
    o.own_dw = !(dw && !strcmp(dw, "cudnn"));
    o.direct_mflops = 8;
    const char *direct = getenv("MASKD_NET_DIRECT_MFLOPS");
    if (direct && *direct) {
        char *end;
        o.direct_mflops = strtod(direct, &end);
        if (*end || !(o.direct_mflops >= 0))
            return mk_err_set(MK_EINVAL, "MASKD_NET_DIRECT_MFLOPS=%s: expected a number >= 0", direct);
    }
    o.graph = !env_flag("MASKD_NO_GRAPH");
    o.debug = env_flag("MASKD_NET_DEBUG");
    int rc = prepare(ctx, net, &o);
    if (rc == MK_EUNSUPPORTED && o.nhwc && !o.layout_forced) {
        MK_WARN("%s: %s; preparing it again in NCHW", net->cfg_name, mk_err_msg());
        mk_net_release_cuda(ctx, net);
        o.nhwc = 0;
        rc = prepare(ctx, net, &o);
    }
    return rc;
}

extern "C" int mk_net_forward_cuda(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *input)
{
    net_state *st = (net_state *)net->backend_state;
    cudaStream_t s = MK_STREAM(ctx);
    size_t row = (size_t)net->w * sizeof(float);
    int rc = st->half ? dn_input(s, (const float *)input->data, input->pitch, st->in)
                      : mk_cuda_copy2d(ctx, st->in.data, row, input->data, input->pitch, row, (size_t)net->c * net->h);
    if (rc)
        return rc;
    if (st->graph && st->exec)
        return MK_CUDA_CHECK(cudaGraphLaunch(st->exec, s));
    return run_layers(net, st, s);
}

extern "C" void mk_net_release_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    net_state *st = (net_state *)net->backend_state;
    for (int i = 0; i < net->n_layers; i++)
        net->layers[i].output = NULL;
    if (!st)
        return;
    if (st->exec)
        warn_failed(MK_CUDA_CHECK(cudaGraphExecDestroy(st->exec)));
    for (int i = 0; st->conv && i < net->n_layers; i++) {
        conv_state *c = &st->conv[i];
        if (c->xd)
            warn_failed(MK_CUDNN_CHECK(cudnnDestroyTensorDescriptor(c->xd)));
        if (c->yd)
            warn_failed(MK_CUDNN_CHECK(cudnnDestroyTensorDescriptor(c->yd)));
        if (c->wd)
            warn_failed(MK_CUDNN_CHECK(cudnnDestroyFilterDescriptor(c->wd)));
        if (c->cd)
            warn_failed(MK_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(c->cd)));
    }
    if (st->dnn)
        warn_failed(MK_CUDNN_CHECK(cudnnDestroy(st->dnn)));
    if (st->weights)
        mk_cuda_free(ctx, st->weights, MK_MEM_DEVICE);
    if (st->arena)
        mk_cuda_free(ctx, st->arena, MK_MEM_DEVICE);
    if (st->ws)
        mk_cuda_free(ctx, st->ws, MK_MEM_DEVICE);
    free(st->ls);
    free(st->conv);
    free(st->values);
    free(st->slots);
    free(st);
    net->backend_state = NULL;
}

extern "C" int mk_net_cuda_set_graph(mk_net_t *net, int on)
{
    if (!net || !net->backend_state || net->ctx->backend != MK_BACKEND_CUDA)
        return mk_err_set(MK_EINVAL, "mk_net_cuda_set_graph: not a network on a CUDA context");
    net_state *st = (net_state *)net->backend_state;
    int rc;
    if (on && !st->exec && (rc = capture(net, st, MK_STREAM(net->ctx))))
        return rc;
    st->graph = on;
    return 0;
}

extern "C" int mk_net_cuda_layer_read(mk_net_t *net, int i, float *dst)
{
    if (!net || !net->backend_state || net->ctx->backend != MK_BACKEND_CUDA || !dst)
        return mk_err_set(MK_EINVAL, "mk_net_cuda_layer_read: not a network on a CUDA context, or no destination");
    net_state *st = (net_state *)net->backend_state;
    if (i < 0 || i >= net->n_layers)
        return mk_err_set(MK_ERANGE, "layer %d: %s has %d layers", i, net->cfg_name, net->n_layers);
    const mk_layer_t *l = &net->layers[i];
    const layer_state *ls = &st->ls[i];
    if (ls->value < 0)
        return mk_err_set(MK_EINVAL, "layer %d of %s is a dropout: it has no output", i, net->cfg_name);
    const value_t *v = &st->values[ls->value];
    if (ls->fused || st->slots[v->slot].last_def != v->def)
        return mk_err_set(MK_ESTATE, "layer %d of %s: its output is %s (load with MASKD_NET_DEBUG=1 to keep it)", i,
                          net->cfg_name, ls->fused ? "fused into a later layer" : "overwritten by a later layer");
    const dn_tensor &t = ls->out;
    size_t count = mk_layer_out_size(l), esize = t.half ? sizeof(__half) : sizeof(float);
    char *raw = (char *)malloc(count * esize);
    if (!raw)
        return mk_err_set(MK_ENOMEM, "out of memory");
    int rc;
    if (!(rc = MK_CUDA_CHECK(cudaMemcpyAsync(raw, t.data, count * esize, cudaMemcpyDeviceToHost,
                                             MK_STREAM(net->ctx)))) &&
        !(rc = MK_CUDA_CHECK(cudaStreamSynchronize(MK_STREAM(net->ctx))))) {
        for (int c = 0; c < t.c; c++)
            for (int y = 0; y < t.h; y++)
                for (int x = 0; x < t.w; x++) {
                    size_t src = t.nhwc ? ((size_t)y * t.w + x) * t.c + c : ((size_t)c * t.h + y) * t.w + x;
                    dst[((size_t)c * t.h + y) * t.w + x] =
                        t.half ? __half2float(((const __half *)raw)[src]) : ((const float *)raw)[src];
                }
    }
    free(raw);
    return rc;
}
