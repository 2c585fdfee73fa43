/* darknet_cuda: the CUDA forward pass of a Darknet network — cuDNN convolutions or our own kernels, chosen per layer
 * by timing both at load, our kernels for everything else (darknet_cuda_layers.cu, darknet_cuda_conv.cu), the whole
 * pass replayed as one CUDA graph.
 *
 * Prepared once at load: folded weights uploaded (FP32: float; FP16: half, cuDNN's filter layout, float32 biases),
 * a cuDNN handle on the context's stream, descriptors per convolution, the algorithm chosen once by
 * cudnnFind...Ex among the deterministic ones (FP32: CUDNN_FMA_MATH, no TF32, for parity with the CPU reference;
 * FP16: tensor-op math), one workspace of the largest size they need, and every activation buffer in one arena.
 * Outputs whose lifetimes do not overlap share arena slots, except the [yolo] outputs (float32, Darknet's layout,
 * kept until the next pass). Then each convolution's implementation is chosen (below), one warm-up pass runs layer
 * by layer and the pass is captured into a CUDA graph.
 *
 * A forward pass launches the graph, whose first node is the kernel that copies (FP32) or converts (FP16) the
 * caller's input into the internal input buffer: when the caller's pointer or pitch changes, that kernel node is
 * pointed at the new source in the instantiated graph first (a kernel node can be, a 2-D copy node cannot). Layer
 * by layer, the copy or conversion is queued before the layers. Nothing in a pass synchronises with the host.
 *
 * A convolution is one of (darknet_cuda_conv.h for ours):
 *   cudnn   cuDNN's kernel(s) plus one epilogue kernel (bias + activation)
 *   direct  one thread per output, any convolution, any layout (darknet_cuda_layers.cu; the FP32 and NCHW path)
 *   small, dwR, gemmMxN[.sK]   our FP16 NHWC kernels (K: split-K)
 *   dwpwTxN a depthwise convolution and the 1 x 1 convolution reading it, in one kernel
 * Each of these has the epilogue inside (cuDNN's in its epilogue kernel), which also does the add + activation of a
 * [shortcut] that is the convolution's only reader, or the whole [yolo] layer that is its only reader. At load
 * every applicable implementation of each convolution is timed on the layer's own buffers (a CUDA graph of a few
 * launches, replayed, the least time kept: the cost a graph node really has) and the fastest kept; layers of equal
 * shape share one measurement. Then each depthwise -> pointwise pair is timed fused against its two kernels. A
 * [route] of one input (all channels, or any channel group in NCHW) is a view (no kernel); a [route] of several
 * is one kernel, which also computes the [maxpool] and [upsample] layers read by it alone (SPP blocks, the
 * upsampling before a concatenation); maxpool, shortcut, upsample, yolo are one kernel each otherwise; dropout is
 * nothing. Every kernel is launched with programmatic
 * dependent launch (sm_90): the next kernel's launch and weight loads overlap the end of the one before.
 *
 * Layouts: FP32 runs NCHW. FP16 keeps activations in half, in NHWC (cuDNN's tensor-core layout and that of our
 * kernels) or NCHW: both are prepared and the faster pass is kept; if cuDNN has no algorithm for a layer that has
 * no other implementation in NHWC, NCHW is used.
 *
 * Switches, read from the environment at load (for measurements, tests and debugging):
 *   MASKD_NO_GRAPH=1            launch layer by layer instead of the CUDA graph
 *   MASKD_NET_LAYOUT=nchw|nhwc  FP16 activation layout (default: the faster)
 *   MASKD_NET_DEPTHWISE=cudnn|kernel  depthwise convolutions through cuDNN only / our kernels only
 *   MASKD_NET_DIRECT_MFLOPS=N   other convolutions of at most N MFLOPs by our kernels, the rest by cuDNN (0: all
 *                               cuDNN; default: each timed)
 *   MASKD_NET_CONV=NAME         only implementations whose name starts with NAME ("gemm64x64", "gemm", "dw4",
 *                               "small", "direct", "cudnn", "dwpw32x64"), for each layer that has one
 *   MASKD_NET_SPLITK=N          split-K of the gemm kernels fixed to N (1: none)
 *   MASKD_NET_FUSE=0|1          depthwise -> pointwise fusion never / wherever it applies (default: timed)
 *   MASKD_NET_PDL=0             no programmatic dependent launch
 *   MASKD_NET_ROUTE_FUSE=0      maxpool and upsample layers as kernels of their own, never inside a route's kernel
 *   MASKD_NET_VIEWS=0           every [route] is a kernel (no views)
 *   MASKD_NET_CUDNN=auto|on|off which convolutions may use cuDNN, instead of the network's option (MK_NET_CUDNN_*)
 *   MASKD_NET_INPUT_NODE=0      the input copy or conversion queued before each graph launch, not inside the graph
 *   MASKD_NET_DEBUG=1           every layer keeps its own output buffer and nothing is fused, so that
 *                               mk_net_cuda_layer_read() can read any layer after a pass */
#include "backend.h"
#include "cuda_check.h"
#include "darknet_cuda_conv.h"
#include "darknet_cuda_layers.h"
#include "darknet_internal.h"
#include "errors.h"
#include "log.h"

#include <cuda_fp16.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

const size_t kAlign = 256;
/* Largest workspace offered to cudnnFind: algorithms that want more are not considered. */
const size_t kFindWorkspaceCap = (size_t)256 << 20;
const int kMaxPerf = 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
/* A candidate's time: the least of kTuneTrials replays of a graph of kTuneReps launches, per launch. */
const int kTuneReps = 8, kTuneTrials = 3;
/* The direct kernel is a candidate up to this many FLOPs where faster kernels exist (beyond it never wins, and its
 * timing runs would only lengthen the load). */
const double kDirectMaxFlops = 64e6;
/* Candidates of one convolution: cuDNN, direct, small, dw variants, gemm variants with and without split-K. */
const int kMaxCand = 4 + 2 * 8 + 8;

enum impl_kind { IMPL_CUDNN, IMPL_DIRECT, IMPL_SMALL, IMPL_DW, IMPL_GEMM, IMPL_DWPW };

/* One way to compute a convolution: kind, variant of our kernel, split-K (gemm). */
struct conv_impl {
    int kind, variant, splits;
};

struct conv_state {
    int depthwise; /* groups = c = filters */
    conv_impl cand[kMaxCand];
    int n_cand;
    conv_impl impl; /* the chosen one */
    double us;      /* its time per launch (< 0: not measured) */
    int has_w, has_wf;
    int dw_from;    /* IMPL_DWPW: the depthwise layer this kernel computes first */
    int dw_pair;    /* the depthwise layer whose input the plan keeps until this convolution, so that one dwpw
                     * kernel may compute both (tune_fusion decides), or -1 */
    dn_cgeom geom;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t w_off, wf_off, b_off; /* in the weight arena */
    void *w;   /* the mode's weights: float KCRS (FP32), half KRSC (FP16 NHWC) or half KCRS (FP16 NCHW) */
    float *wf; /* float KCRS for the direct kernel (w itself in FP32) */
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
    int fused;    /* a convolution whose own output is never materialised (its epilogue writes a later layer's, or
                   * a later convolution's kernel computes it on the fly) */
    int readers;  /* layers reading this output */
    dn_tensor out;
};

enum { DW_AUTO, DW_CUDNN, DW_KERNEL };

struct options {
    int half, nhwc, graph, debug, layout_forced, pdl;
    int dw_mode;          /* DW_* */
    double direct_mflops; /* < 0: each convolution timed */
    char conv[32];        /* MASKD_NET_CONV, "" when unset */
    int splitk;           /* MASKD_NET_SPLITK, 0 when unset */
    int fuse;             /* MASKD_NET_FUSE: 0, 1, or -1 (timed) */
    int route_fuse;       /* MASKD_NET_ROUTE_FUSE */
    int views;            /* MASKD_NET_VIEWS */
    int in_node;          /* MASKD_NET_INPUT_NODE */
    int cudnn;            /* MK_NET_CUDNN_*: the network's, or MASKD_NET_CUDNN */
};

struct net_state {
    cudnnHandle_t dnn;
    int half, nhwc, graph, debug, pdl, sms;
    int route_fuse, views, in_graph; /* the options' route_fuse, views, in_node */
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
    float *split_ws; /* split-K partial tiles */
    int *split_cnt;  /* split-K tile counters (zero between launches) */
    size_t split_floats, split_counters;
    cudaEvent_t ev[2];
    cudaGraph_t graph_def;    /* the captured pass, kept for its input node */
    cudaGraphNode_t in_node;  /* the input kernel, the graph's first node */
    const void *in_src;       /* where that kernel reads now, */
    size_t in_pitch;          /* with this pitch */
    float *in_zero;           /* a zero input: what the graph reads until the first pass, and the timings */
    cudaGraphExec_t exec;
};

int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* A switch that is on unless set to "0". */
int env_off(const char *name)
{
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}

/* For the calls whose failure leaves nothing to undo (destroying things): a warning (a debug line once the GPU
 * context is lost). */
void warn_failed(int rc)
{
    mk_cuda_teardown_check(rc);
}

size_t align_up(size_t n)
{
    return (n + kAlign - 1) / kAlign * kAlign;
}

dn_exec exec_of(const net_state *st, cudaStream_t s)
{
    return {s, st->pdl};
}

/* An implementation's name: "cudnn", "direct", "small", "dw4", "gemm64x64", "gemm64x64.s3", "dwpw32x64". */
const char *impl_name(const conv_impl &m, char *buf, size_t len)
{
    switch (m.kind) {
    case IMPL_CUDNN: snprintf(buf, len, "cudnn"); break;
    case IMPL_DIRECT: snprintf(buf, len, "direct"); break;
    case IMPL_SMALL: snprintf(buf, len, "%s", dn_conv_variant_name(DN_CONV_SMALL, m.variant)); break;
    case IMPL_DW: snprintf(buf, len, "%s", dn_conv_variant_name(DN_CONV_DW, m.variant)); break;
    case IMPL_DWPW: snprintf(buf, len, "%s", dn_conv_variant_name(DN_CONV_DWPW, m.variant)); break;
    default:
        if (m.splits > 1)
            snprintf(buf, len, "%s.s%d", dn_conv_variant_name(DN_CONV_GEMM, m.variant), m.splits);
        else
            snprintf(buf, len, "%s", dn_conv_variant_name(DN_CONV_GEMM, m.variant));
    }
    return buf;
}

int name_matches(const char *prefix, const char *name)
{
    return *prefix && !strncmp(name, prefix, strlen(prefix));
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

/* The layer whose output a reader of layer j's output really reads: j, or for a maxpool or upsample computed inside
 * the route that reads it, that layer's input. */
int read_from(const mk_net_t *net, const net_state *st, int j)
{
    if (j >= 0 && st->ls[j].fused &&
        (net->layers[j].type == MK_LAYER_MAXPOOL || net->layers[j].type == MK_LAYER_UPSAMPLE))
        return net->layers[j].input;
    return j;
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
        st->conv[i].shortcut = st->conv[i].yolo = st->conv[i].dw_pair = -1;
    }
    for (int i = 0; i < n; i++)
        st->ls[i].readers = readers[i];
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
    /* A [maxpool] or [upsample] read only by a concatenating [route] is computed by the route's kernel. */
    for (int i = 0; i < n && !st->debug && st->route_fuse; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_ROUTE || l->route.n < 2)
            continue;
        for (int k = 0; k < l->route.n; k++) {
            int j = l->route.layers[k];
            if (j >= 0 && readers[j] == 1 &&
                (net->layers[j].type == MK_LAYER_MAXPOOL || net->layers[j].type == MK_LAYER_UPSAMPLE)) {
                st->ls[j].run = 0;
                st->ls[j].fused = 1;
            }
        }
    }
    /* A depthwise convolution read by one convolution alone: the two may become one dwpw kernel, which reads the
     * depthwise layer's input when the second layer runs. */
    for (int j = 0; j < n && st->half && st->nhwc && !st->debug; j++) {
        const mk_layer_t *l = &net->layers[j];
        int i = l->input;
        if (l->type != MK_LAYER_CONV || l->conv.groups != 1 || i < 0 || readers[i] != 1 ||
            net->layers[i].type != MK_LAYER_CONV || st->ls[i].fused)
            continue;
        const mk_layer_t *d = &net->layers[i];
        if (d->conv.groups > 1 && d->conv.groups == d->c && d->conv.filters == d->c)
            st->conv[j].dw_pair = i;
    }
    free(readers);

    st->in_value = new_value(st, (size_t)net->c * net->h * net->w * st->esize, -1, st->debug);
    for (int i = 0; i < n; i++) {
        const mk_layer_t *l = &net->layers[i];
        layer_state *ls = &st->ls[i];
        ls->value = -1;
        if (l->type == MK_LAYER_DROPOUT)
            continue;
        if (l->type == MK_LAYER_ROUTE && l->route.n == 1 && st->views && (!st->nhwc || l->route.groups == 1)) {
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
            int j = read_from(net, st, in[k]);
            value_t *v = &st->values[j < 0 ? st->in_value : st->ls[j].value];
            if (v->last_use < i)
                v->last_use = i;
        }
        int d = st->conv[i].dw_pair;
        if (d >= 0) {
            int j = net->layers[d].input;
            value_t *v = &st->values[j < 0 ? st->in_value : st->ls[j].value];
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

void add_cand(conv_state *c, int kind, int variant, int splits)
{
    if (c->n_cand < kMaxCand)
        c->cand[c->n_cand++] = {kind, variant, splits};
}

/* The implementations that may compute convolution layer i, as the options allow. */
void candidates(const mk_net_t *net, net_state *st, const options *o, int i)
{
    const mk_layer_t *l = &net->layers[i];
    const mk_conv_t *cv = &l->conv;
    conv_state *c = &st->conv[i];
    const dn_cgeom &g = c->geom;
    double flops = 2.0 * cv->filters * (l->c / cv->groups) * cv->size * cv->size * l->out_h * l->out_w;
    int ours = st->half && st->nhwc, use_cudnn = 1, use_own = 1;
    if (c->depthwise) {
        use_cudnn = o->dw_mode != DW_KERNEL;
        use_own = o->dw_mode != DW_CUDNN;
    } else if (o->direct_mflops >= 0) {
        use_own = flops <= o->direct_mflops * 1e6;
        use_cudnn = !use_own;
    }
    if (o->cudnn == MK_NET_CUDNN_OFF) {
        use_cudnn = 0;
        use_own = 1;
    }
    c->n_cand = 0;
    if (use_cudnn)
        add_cand(c, IMPL_CUDNN, 0, 1);
    if (use_own && ours) {
        if (c->depthwise && dn_conv_dw_ok(g))
            for (int v = 0; v < dn_conv_variants(DN_CONV_DW); v++)
                add_cand(c, IMPL_DW, v, 1);
        /* small: for few channels (no gemm) or little work; gemm: small tiles only where they are not too many */
        if (cv->groups == 1 && dn_conv_small_ok(g) && (!dn_conv_gemm_ok(g) || flops <= kDirectMaxFlops))
            add_cand(c, IMPL_SMALL, 0, 1);
        if (cv->groups == 1 && dn_conv_gemm_ok(g))
            for (int v = 0; v < dn_conv_variants(DN_CONV_GEMM); v++) {
                int kt = dn_gemm_ktiles(g), split = dn_conv_gemm_splits(v, g, st->sms);
                const dn_gemm_cfg &cf = kDnGemm[v];
                if ((long long)((g.m + cf.bm - 1) / cf.bm) * ((g.k + cf.bn - 1) / cf.bn) > 16LL * st->sms &&
                    cf.bm * cf.bn < 128 * 64)
                    continue;
                if (o->splitk) {
                    add_cand(c, IMPL_GEMM, v, o->splitk < kt ? o->splitk : kt);
                    continue;
                }
                add_cand(c, IMPL_GEMM, v, 1);
                if (split > 1)
                    add_cand(c, IMPL_GEMM, v, split);
            }
    }
    if (use_own && (c->n_cand == use_cudnn || name_matches(o->conv, "direct") ||
                    (!ours && (c->depthwise || flops <= kDirectMaxFlops || o->direct_mflops >= 0))))
        add_cand(c, IMPL_DIRECT, 0, 1);
    /* auto: our FP16 NHWC kernels, where one applies, without cuDNN beside them (unless a switch names cuDNN) */
    if (o->cudnn == MK_NET_CUDNN_AUTO && ours && !*o->conv && c->n_cand > 1 && c->cand[0].kind == IMPL_CUDNN &&
        c->cand[1].kind != IMPL_DIRECT) {
        memmove(c->cand, c->cand + 1, (size_t)(c->n_cand - 1) * sizeof c->cand[0]);
        c->n_cand--;
    }
    if (*o->conv) {
        conv_impl keep[kMaxCand];
        int n = 0;
        char name[32];
        for (int k = 0; k < c->n_cand; k++)
            if (name_matches(o->conv, impl_name(c->cand[k], name, sizeof name)))
                keep[n++] = c->cand[k];
        if (n) {
            memcpy(c->cand, keep, (size_t)n * sizeof keep[0]);
            c->n_cand = n;
        }
    }
}

int has_cand(const conv_state *c, int kind)
{
    for (int k = 0; k < c->n_cand; k++)
        if (c->cand[k].kind == kind)
            return 1;
    return 0;
}

/* Which weight copies convolution layer i needs: the mode's (cuDNN and our FP16 kernels; in FP32 also the direct
 * kernel's) and float KCRS for the direct kernel in FP16. */
void weight_needs(net_state *st, int i)
{
    conv_state *c = &st->conv[i];
    c->has_wf = has_cand(c, IMPL_DIRECT);
    c->has_w = !st->half || c->n_cand > c->has_wf;
}

/* Lays out every convolution's bias (float) and weights (weight_needs) in one host buffer, as the weight arena
 * will hold them. */
int stage_weights(const mk_net_t *net, net_state *st, char **out)
{
    size_t total = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        conv_state *c = &st->conv[i];
        size_t nw = (size_t)l->conv.filters * (size_t)(l->c / l->conv.groups) * l->conv.size * l->conv.size;
        c->b_off = total;
        total += align_up((size_t)l->conv.filters * sizeof(float));
        c->w_off = total;
        if (c->has_w)
            total += align_up(nw * st->esize);
        c->wf_off = total;
        if (c->has_wf && st->half)
            total += align_up(nw * sizeof(float));
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
        if (c->has_wf && st->half)
            memcpy(host + c->wf_off, cv->weights, nw * sizeof(float));
        if (!c->has_w)
            continue;
        if (!st->half) {
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
            conv_state *c = &st->conv[i];
            char *base = (char *)st->weights;
            c->w = c->has_w ? base + c->w_off : NULL;
            c->wf = !c->has_wf ? NULL : st->half ? (float *)(base + c->wf_off) : (float *)c->w;
            c->bias = (float *)(base + c->b_off);
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
    if ((rc = MK_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(st->dnn, &max_count))))
        return mk_err_wrap(rc, "%s:%d: layer %d", net->cfg_name, l->line, i);
    /* Twice: the first search loads the algorithms' kernels (CUDA loads modules lazily, at first launch) while the
     * GPU leaves its idle clocks; cuDNN bills both to the algorithms it tries first, and a fresh process kept
     * algorithms up to 30x slower than the best (yolov3-tiny on an H100: 280 µs passes instead of 175). */
    for (int pass = 0; pass < 2 && !rc; pass++)
        rc = MK_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            st->dnn, c->xd, tensor_of(st, l->input).data, c->wd, c->w, c->cd, c->yd, st->ls[i].out.data,
            max_count < kMaxPerf ? max_count : kMaxPerf, &got, perf, find_ws, find_bytes));
    if (rc)
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

/* Chooses the algorithm of every convolution that may go through cuDNN and allocates the one workspace they share.
 * A layer for which cuDNN has no usable algorithm keeps its other candidates; without any, MK_EUNSUPPORTED. */
int choose_algos(mk_ctx_t *ctx, mk_net_t *net, net_state *st)
{
    size_t find_bytes = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const conv_state *c = &st->conv[i];
        if (net->layers[i].type != MK_LAYER_CONV || !has_cand(c, IMPL_CUDNN))
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
        conv_state *c = &st->conv[i];
        if (net->layers[i].type != MK_LAYER_CONV || !has_cand(c, IMPL_CUDNN))
            continue;
        rc = choose_algo(net, st, i, find_ws, find_bytes, &ws);
        if (rc == MK_EUNSUPPORTED && c->n_cand > 1) {
            MK_DEBUG("%s; the layer's other implementations remain", mk_err_msg());
            int n = 0;
            for (int k = 0; k < c->n_cand; k++)
                if (c->cand[k].kind != IMPL_CUDNN)
                    c->cand[n++] = c->cand[k];
            c->n_cand = n;
            rc = 0;
        } else if (!rc && ws > st->ws_bytes) {
            st->ws_bytes = ws;
        }
    }
    if (find_ws)
        mk_cuda_free(ctx, find_ws, MK_MEM_DEVICE);
    if (!rc && st->ws_bytes)
        rc = mk_cuda_alloc(ctx, st->ws_bytes, MK_MEM_DEVICE, &st->ws);
    return rc;
}

/* The split-K workspace of every gemm candidate, counters zeroed. */
int alloc_split_ws(mk_ctx_t *ctx, mk_net_t *net, net_state *st)
{
    for (int i = 0; i < net->n_layers; i++) {
        const conv_state *c = &st->conv[i];
        if (net->layers[i].type != MK_LAYER_CONV)
            continue;
        for (int k = 0; k < c->n_cand; k++) {
            size_t f, n;
            if (c->cand[k].kind != IMPL_GEMM)
                continue;
            dn_conv_gemm_ws(c->cand[k].variant, c->cand[k].splits, c->geom, &f, &n);
            st->split_floats = f > st->split_floats ? f : st->split_floats;
            st->split_counters = n > st->split_counters ? n : st->split_counters;
        }
    }
    int rc = 0;
    if (st->split_floats &&
        (rc = mk_cuda_alloc(ctx, st->split_floats * sizeof(float), MK_MEM_DEVICE, (void **)&st->split_ws)))
        return rc;
    if (st->split_counters &&
        !(rc = mk_cuda_alloc(ctx, st->split_counters * sizeof(int), MK_MEM_DEVICE, (void **)&st->split_cnt)))
        rc = MK_CUDA_CHECK(cudaMemsetAsync(st->split_cnt, 0, st->split_counters * sizeof(int), MK_STREAM(ctx)));
    return rc;
}

/* The epilogue of convolution layer i for our FP16 kernels. */
dn_epi epi_of(const mk_net_t *net, const net_state *st, int i)
{
    const conv_state *c = &st->conv[i];
    dn_epi e = {};
    e.bias = c->bias;
    e.act = net->layers[i].act;
    e.act2 = MK_ACT_LINEAR;
    e.out = (__half *)st->ls[i].out.data;
    if (c->shortcut >= 0) {
        const mk_layer_t *sc = &net->layers[c->shortcut];
        e.res = (const __half *)tensor_of(st, sc->shortcut.from).data;
        e.act2 = sc->act;
    }
    if (c->yolo >= 0) {
        const mk_yolo_t *y = &net->layers[c->yolo].yolo;
        e.yolo = (float *)st->ls[c->yolo].out.data;
        e.classes = y->meta.classes;
        e.scale_x_y = y->meta.scale_x_y;
        e.bias_x_y = y->bias_x_y;
    }
    return e;
}

/* Queues convolution layer i, computed by m, with its epilogue. */
int run_conv(mk_net_t *net, net_state *st, int i, const conv_impl &m, const dn_exec &x)
{
    static const float one = 1.f, zero = 0.f;
    const mk_layer_t *l = &net->layers[i];
    const conv_state *c = &st->conv[i];
    const dn_tensor &in = tensor_of(st, l->input), &out = st->ls[i].out;
    const mk_conv_t *cv = &l->conv;
    const mk_layer_t *sc = c->shortcut >= 0 ? &net->layers[c->shortcut] : NULL;
    const mk_yolo_t *y = c->yolo >= 0 ? &net->layers[c->yolo].yolo : NULL;
    float *yolo_out = y ? (float *)st->ls[c->yolo].out.data : NULL;
    int rc;
    switch (m.kind) {
    case IMPL_CUDNN:
        if ((rc = MK_CUDNN_CHECK(cudnnConvolutionForward(st->dnn, &one, c->xd, in.data, c->wd, c->w, c->cd, c->algo,
                                                         st->ws, st->ws_bytes, &zero, c->yd, out.data))))
            return rc;
        if (y)
            return dn_yolo(x, out, c->bias, l->act, y->meta.classes, y->meta.scale_x_y, y->bias_x_y, yolo_out);
        return dn_bias_act(x, out, c->bias, l->act, sc ? &tensor_of(st, sc->shortcut.from) : NULL,
                           sc ? sc->act : MK_ACT_LINEAR, out);
    case IMPL_DIRECT:
        if (y)
            return dn_conv_yolo(x, in, c->wf, c->bias, cv->size, cv->stride, cv->pad, cv->groups, l->act,
                                y->meta.classes, y->meta.scale_x_y, y->bias_x_y, out, yolo_out);
        return dn_conv(x, in, c->wf, c->bias, cv->size, cv->stride, cv->pad, cv->groups, l->act,
                       sc ? &tensor_of(st, sc->shortcut.from) : NULL, sc ? sc->act : MK_ACT_LINEAR, out);
    case IMPL_SMALL:
        return dn_conv_small(x, (const __half *)in.data, (const __half *)c->w, epi_of(net, st, i), c->geom);
    case IMPL_DW:
        return dn_conv_dw(x, m.variant, (const __half *)in.data, (const __half *)c->w, epi_of(net, st, i), c->geom);
    case IMPL_GEMM:
        return dn_conv_gemm(x, m.variant, m.splits, (const __half *)in.data, (const __half *)c->w,
                            epi_of(net, st, i), c->geom, st->split_ws, st->split_cnt);
    default: {
        const conv_state *d = &st->conv[c->dw_from];
        const mk_layer_t *dl = &net->layers[c->dw_from];
        return dn_conv_dwpw(x, m.variant, (const __half *)tensor_of(st, dl->input).data, (const __half *)d->w, d->bias,
                            dl->act, d->geom, (const __half *)c->w, epi_of(net, st, i), c->geom);
    }
    }
}

/* Queues every layer of one pass on `s` (the body of the CUDA graph). */
int run_layers(mk_net_t *net, net_state *st, cudaStream_t s)
{
    const dn_exec x = exec_of(st, s);
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        const layer_state *ls = &st->ls[i];
        const dn_tensor &out = ls->out;
        int rc = 0;
        if (!ls->run)
            continue;
        switch (l->type) {
        case MK_LAYER_CONV: rc = run_conv(net, st, i, st->conv[i].impl, x); break;
        case MK_LAYER_MAXPOOL:
            rc = dn_maxpool(x, tensor_of(st, l->input), l->maxpool.size, l->maxpool.stride, l->maxpool.pad, out);
            break;
        case MK_LAYER_ROUTE: {
            dn_route_args a;
            a.n = l->route.n;
            for (int k = 0; k < a.n; k++) {
                int j = l->route.layers[k], src = read_from(net, st, j);
                const dn_tensor &t = tensor_of(st, src);
                dn_src *in = &a.in[k];
                *in = {t.data, t.c, t.h, t.w, 0, t.c / l->route.groups, DN_SRC_COPY, 0, 0, 0, 1.f};
                in->first = l->route.group_id * in->count;
                if (src != j && net->layers[j].type == MK_LAYER_UPSAMPLE) {
                    in->op = DN_SRC_UPSAMPLE;
                    in->stride = net->layers[j].upsample.stride;
                    in->scale = net->layers[j].upsample.scale;
                } else if (src != j) {
                    in->op = DN_SRC_MAXPOOL;
                    in->size = net->layers[j].maxpool.size;
                    in->stride = net->layers[j].maxpool.stride;
                    in->pad = net->layers[j].maxpool.pad;
                }
            }
            rc = dn_route(x, a, out);
            break;
        }
        case MK_LAYER_SHORTCUT:
            rc = dn_shortcut(x, tensor_of(st, l->input), tensor_of(st, l->shortcut.from), l->act, out);
            break;
        case MK_LAYER_UPSAMPLE:
            rc = dn_upsample(x, tensor_of(st, l->input), l->upsample.stride, l->upsample.scale, out);
            break;
        case MK_LAYER_YOLO:
            rc = dn_yolo(x, tensor_of(st, l->input), NULL, MK_ACT_LINEAR, l->yolo.meta.classes, l->yolo.meta.scale_x_y,
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

/* Records what `body` queues on `s` into a CUDA graph and instantiates it; the graph itself is destroyed, or kept in
 * *keep. */
template <typename F>
int capture_graph(cudaStream_t s, F body, cudaGraphExec_t *exec, cudaGraph_t *keep = NULL)
{
    cudaGraph_t g = NULL;
    *exec = NULL;
    int rc = MK_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (rc)
        return rc;
    int brc = body();
    cudaError_t end = cudaStreamEndCapture(s, &g);
    rc = brc ? brc : MK_CUDA_CHECK(end);
    if (!rc)
        rc = MK_CUDA_CHECK(cudaGraphInstantiate(exec, g, 0));
    if (rc && *exec) {
        warn_failed(MK_CUDA_CHECK(cudaGraphExecDestroy(*exec)));
        *exec = NULL;
    }
    if (g && (rc || !keep))
        warn_failed(MK_CUDA_CHECK(cudaGraphDestroy(g)));
    else if (keep)
        *keep = g;
    if (rc)
        cudaGetLastError(); /* the failed capture's error is reported through rc; nothing sticky is left */
    return rc;
}

/* The least of `trials` replays of `exec` on `s`, in µs (one replay first, untimed). */
int time_exec(net_state *st, cudaStream_t s, cudaGraphExec_t exec, int trials, double *us)
{
    double best = DBL_MAX;
    int rc = MK_CUDA_CHECK(cudaGraphLaunch(exec, s));
    for (int t = 0; t < trials && !rc; t++) {
        float ms = 0;
        if (!(rc = MK_CUDA_CHECK(cudaEventRecord(st->ev[0], s))) && !(rc = MK_CUDA_CHECK(cudaGraphLaunch(exec, s))) &&
            !(rc = MK_CUDA_CHECK(cudaEventRecord(st->ev[1], s))) &&
            !(rc = MK_CUDA_CHECK(cudaEventSynchronize(st->ev[1]))) &&
            !(rc = MK_CUDA_CHECK(cudaEventElapsedTime(&ms, st->ev[0], st->ev[1]))))
            best = ms * 1e3 < best ? ms * 1e3 : best;
    }
    *us = best;
    return rc;
}

/* The time per call of what `body` queues, replayed as a graph of `reps` calls. */
template <typename F>
int time_body(net_state *st, cudaStream_t s, F body, int reps, double *us)
{
    cudaGraphExec_t exec;
    int rc = capture_graph(
        s,
        [&]() {
            int brc = 0;
            for (int r = 0; r < reps && !brc; r++)
                brc = body();
            return brc;
        },
        &exec);
    if (rc)
        return rc;
    rc = time_exec(st, s, exec, kTuneTrials, us);
    *us /= reps;
    warn_failed(MK_CUDA_CHECK(cudaGraphExecDestroy(exec)));
    return rc;
}

int time_conv(mk_ctx_t *ctx, mk_net_t *net, net_state *st, int i, const conv_impl &m, double *us)
{
    cudaStream_t s = MK_STREAM(ctx);
    const dn_exec x = exec_of(st, s);
    return time_body(st, s, [&]() { return run_conv(net, st, i, m, x); }, kTuneReps, us);
}

/* Layers whose convolutions are alike for the timing: shape, epilogue and candidates. */
int same_conv(const mk_net_t *net, const net_state *st, int a, int b)
{
    const mk_layer_t *la = &net->layers[a], *lb = &net->layers[b];
    const conv_state *ca = &st->conv[a], *cb = &st->conv[b];
    const mk_conv_t *va = &la->conv, *vb = &lb->conv;
    return la->c == lb->c && la->h == lb->h && la->w == lb->w && va->filters == vb->filters &&
           va->size == vb->size && va->stride == vb->stride && va->pad == vb->pad && va->groups == vb->groups &&
           la->act == lb->act && (ca->shortcut < 0) == (cb->shortcut < 0) && (ca->yolo < 0) == (cb->yolo < 0) &&
           ca->n_cand == cb->n_cand && !memcmp(ca->cand, cb->cand, (size_t)ca->n_cand * sizeof ca->cand[0]);
}

/* Chooses convolution layer i's implementation: the fastest candidate (or the one there is). */
int tune_conv(mk_ctx_t *ctx, mk_net_t *net, net_state *st, int i)
{
    const mk_layer_t *l = &net->layers[i];
    conv_state *c = &st->conv[i];
    char list[1024] = "", name[32];
    size_t len = 0;
    c->impl = c->cand[0];
    c->us = -1;
    if (c->n_cand == 0)
        return mk_err_set(MK_EUNSUPPORTED, "%s:%d: layer %d (%dx%d/%d conv, %d->%d channels, groups %d): no "
                          "implementation in %s %s", net->cfg_name, l->line, i, l->conv.size, l->conv.size,
                          l->conv.stride, l->c, l->out_c, l->conv.groups, st->half ? "FP16" : "FP32",
                          st->nhwc ? "NHWC" : "NCHW");
    if (c->n_cand == 1)
        return 0;
    for (int j = 0; j < i; j++)
        if (net->layers[j].type == MK_LAYER_CONV && st->conv[j].us >= 0 && same_conv(net, st, i, j)) {
            c->impl = st->conv[j].impl;
            c->us = st->conv[j].us;
            return 0;
        }
    for (int k = 0; k < c->n_cand; k++) {
        double us;
        int rc = time_conv(ctx, net, st, i, c->cand[k], &us);
        impl_name(c->cand[k], name, sizeof name);
        if (rc) {
            /* A candidate the device cannot launch (resources): the others remain. */
            MK_DEBUG("%s: layer %d: %s failed: %s", net->cfg_name, i, name, mk_err_msg());
            continue;
        }
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, " %s %.1f", name, us);
        if (c->us < 0 || us < c->us) {
            c->us = us;
            c->impl = c->cand[k];
        }
    }
    if (c->us < 0)
        return mk_err_set(MK_ECUDA, "%s:%d: layer %d: none of its %d implementations ran", net->cfg_name, l->line,
                          i, c->n_cand);
    MK_DEBUG("%s: layer %d conv %dx%d/%d %d->%d %dx%d: %s (µs:%s)", net->cfg_name, i, l->conv.size, l->conv.size,
             l->conv.stride, l->c, l->out_c, l->out_w, l->out_h, impl_name(c->impl, name, sizeof name), list);
    return 0;
}

/* Whether a convolution may run on one of our FP16 NHWC kernels (the switches left it one). */
int own_allowed(const conv_state *c)
{
    return has_cand(c, IMPL_SMALL) || has_cand(c, IMPL_DW) || has_cand(c, IMPL_GEMM);
}

/* Whether the depthwise layer i and the 1 x 1 convolution j reading it may run as one dwpw kernel: both allowed on
 * our kernels, the depthwise output read by j alone and not fused into anything else, the depthwise input kept by
 * the plan until j. */
int dwpw_pair(const mk_net_t *net, const net_state *st, int i, int j)
{
    const conv_state *d = &st->conv[i], *p = &st->conv[j];
    const mk_layer_t *lj = &net->layers[j];
    return lj->type == MK_LAYER_CONV && lj->input == i && p->dw_pair == i && net->layers[i].type == MK_LAYER_CONV &&
           d->depthwise && st->ls[i].readers == 1 && d->shortcut < 0 && d->yolo < 0 && !st->ls[i].fused && d->has_w &&
           p->has_w && own_allowed(d) && own_allowed(p) && p->impl.kind != IMPL_DWPW && lj->conv.groups == 1 &&
           dn_conv_dwpw_ok(d->geom, p->geom);
}

/* Fuses depthwise -> pointwise pairs where one dwpw kernel is faster than the two (or where MASKD_NET_FUSE=1 or
 * MASKD_NET_CONV names a dwpw variant). */
int tune_fusion(mk_ctx_t *ctx, mk_net_t *net, net_state *st, const options *o)
{
    int forced_variant = 0;
    char name[32];
    for (int v = 0; v < dn_conv_variants(DN_CONV_DWPW); v++)
        forced_variant |= name_matches(o->conv, dn_conv_variant_name(DN_CONV_DWPW, v));
    for (int j = 0; j < net->n_layers; j++) {
        int i = net->layers[j].input, rc;
        if (i < 0 || !dwpw_pair(net, st, i, j))
            continue;
        conv_state *d = &st->conv[i], *p = &st->conv[j];
        double sep = 0, best = -1, us;
        conv_impl fused = {IMPL_DWPW, -1, 1};
        if (o->fuse < 0 && !forced_variant) {
            if ((d->us < 0 && (rc = time_conv(ctx, net, st, i, d->impl, &d->us))) ||
                (p->us < 0 && (rc = time_conv(ctx, net, st, j, p->impl, &p->us))))
                return rc;
            sep = d->us + p->us;
        }
        p->dw_from = i;
        for (int v = 0; v < dn_conv_variants(DN_CONV_DWPW); v++) {
            conv_impl m = {IMPL_DWPW, v, 1};
            if (forced_variant && !name_matches(o->conv, dn_conv_variant_name(DN_CONV_DWPW, v)))
                continue;
            if ((rc = time_conv(ctx, net, st, j, m, &us))) {
                MK_DEBUG("%s: layers %d+%d: %s failed: %s", net->cfg_name, i, j, impl_name(m, name, sizeof name),
                         mk_err_msg());
                continue;
            }
            if (best < 0 || us < best) {
                best = us;
                fused = m;
            }
        }
        if (best < 0 || (o->fuse < 0 && !forced_variant && best >= sep))
            continue;
        MK_DEBUG("%s: layers %d+%d fused: %s %.1f µs (apart %.1f µs)", net->cfg_name, i, j,
                 impl_name(fused, name, sizeof name), best, sep);
        p->impl = fused;
        p->us = best;
        st->ls[i].run = 0;
        st->ls[i].fused = 1;
    }
    return 0;
}

/* Every convolution's implementation. First, whether graphs can hold programmatic dependent launches at all (the
 * timings are graphs): two input conversions in a row. */
int tune(mk_ctx_t *ctx, mk_net_t *net, net_state *st, const options *o)
{
    cudaStream_t s = MK_STREAM(ctx);
    size_t row = (size_t)net->w * sizeof(float);
    double us;
    int rc;
    if (st->pdl &&
        time_body(st, s, [&]() { return dn_input(exec_of(st, s), st->in_zero, row, st->in); }, 2, &us)) {
        MK_WARN("%s: a graph with programmatic dependent launch failed (%s); launching without it", net->cfg_name,
                mk_err_msg());
        st->pdl = 0;
    }
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].type == MK_LAYER_CONV && (rc = tune_conv(ctx, net, st, i)))
            return rc;
    if (st->half && st->nhwc && !st->debug && o->fuse != 0)
        return tune_fusion(ctx, net, st, o);
    return 0;
}

int value_of(const net_state *st, int j)
{
    return j < 0 ? st->in_value : st->ls[j].value;
}

/* Whether value v, read by layer i, still holds what its definition wrote: no other value placed in its slot is
 * defined after it and up to i (at i itself: the layer would write over its own input). */
int intact(const net_state *st, int v, int i)
{
    const value_t *a = &st->values[v];
    for (int w = 0; w < st->n_values; w++) {
        const value_t *b = &st->values[w];
        if (w != v && b->slot == a->slot && b->def > a->def && b->def <= i)
            return 0;
    }
    return 1;
}

/* Checks the plan against what the chosen kernels really read (after the fusions): every buffer a kernel reads is
 * intact when it runs. A violation is a planner bug, which would make passes read overwritten data (results that
 * depend on the previous pass or on the order of blocks): refused at load. */
int check_plan(const mk_net_t *net, const net_state *st)
{
    int in[MK_NET_MAX_ROUTE + 2];
    for (int i = 0; i < net->n_layers; i++) {
        const mk_layer_t *l = &net->layers[i];
        const conv_state *c = &st->conv[i];
        if (!st->ls[i].run)
            continue;
        int m = inputs_of(l, in);
        for (int k = 0; k < m; k++)
            in[k] = read_from(net, st, in[k]);
        if (l->type == MK_LAYER_CONV && c->shortcut >= 0)
            in[m++] = net->layers[c->shortcut].shortcut.from;
        if (l->type == MK_LAYER_CONV && c->impl.kind == IMPL_DWPW)
            in[0] = net->layers[c->dw_from].input;
        for (int k = 0; k < m; k++)
            if (!intact(st, value_of(st, in[k]), i))
                return mk_err_set(MK_ESTATE, "%s: layer %d (%s, cfg line %d) reads the output of layer %d after "
                                  "another value took its buffer (a planner bug)", net->cfg_name, i,
                                  mk_layer_type_name(l->type), l->line, in[k]);
    }
    return 0;
}

/* Records one pass into the state's CUDA graph, the input kernel first (reading the zero input until a pass points it
 * at the caller's; with MASKD_NET_INPUT_NODE=0 the input is queued before each launch instead); without
 * programmatic dependent launch if that fails. */
int capture(mk_net_t *net, net_state *st, cudaStream_t s)
{
    size_t row = (size_t)net->w * sizeof(float), n = 1;
    int rc;
    st->in_src = st->in_zero;
    st->in_pitch = row;
    st->in_node = NULL;
    auto pass = [&]() {
        int prc = st->in_graph ? dn_input(exec_of(st, s), st->in_zero, row, st->in) : 0;
        return prc ? prc : run_layers(net, st, s);
    };
    rc = capture_graph(s, pass, &st->exec, &st->graph_def);
    if (rc && st->pdl) {
        MK_WARN("%s: capturing the pass with programmatic dependent launch failed (%s); capturing without it",
                net->cfg_name, mk_err_msg());
        st->pdl = 0;
        rc = capture_graph(s, pass, &st->exec, &st->graph_def);
    }
    if (rc || !st->in_graph)
        return rc;
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    if (!(rc = MK_CUDA_CHECK(cudaGraphGetRootNodes(st->graph_def, NULL, &n))) && n == 1 &&
        !(rc = MK_CUDA_CHECK(cudaGraphGetRootNodes(st->graph_def, &st->in_node, &n))) &&
        !(rc = MK_CUDA_CHECK(cudaGraphNodeGetType(st->in_node, &type))) && type != cudaGraphNodeTypeKernel)
        rc = mk_err_set(MK_ESTATE, "%s: the captured pass does not start with the input kernel", net->cfg_name);
    else if (!rc && n != 1)
        rc = mk_err_set(MK_ESTATE, "%s: the captured pass has %zu first nodes, expected the input kernel alone",
                        net->cfg_name, n);
    if (rc) {
        warn_failed(MK_CUDA_CHECK(cudaGraphExecDestroy(st->exec)));
        warn_failed(MK_CUDA_CHECK(cudaGraphDestroy(st->graph_def)));
        st->exec = NULL;
        st->graph_def = NULL;
    }
    return rc;
}

/* The state of a network before anything is placed on the device: options, geometry and candidates of every
 * convolution (with cuDNN descriptors where cuDNN is one), the plan. */
int setup(mk_net_t *net, const options *o, net_state **out)
{
    int n = net->n_layers, rc, dev = 0;
    net_state *st = (net_state *)calloc(1, sizeof *st);
    if (!st)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    *out = st;
    st->half = o->half;
    st->nhwc = o->nhwc;
    st->graph = o->graph;
    st->debug = o->debug;
    st->pdl = o->pdl;
    st->route_fuse = o->route_fuse;
    st->views = o->views;
    st->in_graph = o->in_node;
    st->esize = st->half ? sizeof(__half) : sizeof(float);
    if ((rc = MK_CUDA_CHECK(cudaGetDevice(&dev))) ||
        (rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&st->sms, cudaDevAttrMultiProcessorCount, dev))))
        return rc;
    st->ls = (layer_state *)calloc((size_t)n, sizeof *st->ls);
    st->conv = (conv_state *)calloc((size_t)n, sizeof *st->conv);
    if (!st->ls || !st->conv)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    if ((rc = plan(net, st)))
        return rc;
    for (int i = 0; i < n; i++) {
        const mk_layer_t *l = &net->layers[i];
        if (l->type != MK_LAYER_CONV)
            continue;
        const mk_conv_t *cv = &l->conv;
        conv_state *c = &st->conv[i];
        c->depthwise = cv->groups > 1 && cv->groups == l->c && cv->filters == l->c;
        c->dw_from = -1;
        c->geom = dn_cgeom_make(c->depthwise ? l->c : l->c / cv->groups, l->h, l->w, cv->filters, l->out_h,
                                l->out_w, cv->size, cv->stride, cv->pad);
        candidates(net, st, o, i);
        weight_needs(st, i);
        if (has_cand(c, IMPL_CUDNN) && (rc = describe_conv(net, st, i)))
            return rc;
    }
    return 0;
}

int prepare(mk_ctx_t *ctx, mk_net_t *net, const options *o, net_state **out)
{
    int rc;
    if ((rc = setup(net, o, out)))
        return rc;
    net_state *st = *out;
    cudaStream_t s = MK_STREAM(ctx);
    /* cuDNN's handle only where a convolution may use it: with a handle, the algorithm search loads cuDNN's engines
     * and cuBLASLt (about 570 MB of host memory for the body network, NOTES.md session 8). */
    int need_dnn = 0;
    for (int i = 0; i < net->n_layers; i++)
        need_dnn |= net->layers[i].type == MK_LAYER_CONV && has_cand(&st->conv[i], IMPL_CUDNN);
    if ((need_dnn && ((rc = MK_CUDNN_CHECK(cudnnCreate(&st->dnn))) ||
                      (rc = MK_CUDNN_CHECK(cudnnSetStream(st->dnn, s))))) ||
        (rc = MK_CUDA_CHECK(cudaEventCreate(&st->ev[0]))) || (rc = MK_CUDA_CHECK(cudaEventCreate(&st->ev[1]))) ||
        (st->half && st->nhwc && (rc = dn_conv_init())))
        return rc;
    size_t in_bytes = (size_t)net->c * net->h * net->w * sizeof(float);
    if ((rc = upload_weights(ctx, net, st)) || (rc = mk_cuda_alloc(ctx, st->arena_bytes, MK_MEM_DEVICE, &st->arena)) ||
        (rc = MK_CUDA_CHECK(cudaMemsetAsync(st->arena, 0, st->arena_bytes, s))) ||
        (rc = mk_cuda_alloc(ctx, in_bytes, MK_MEM_DEVICE, (void **)&st->in_zero)) ||
        (rc = MK_CUDA_CHECK(cudaMemsetAsync(st->in_zero, 0, in_bytes, s))))
        return rc;
    bind(net, st);
    if ((rc = choose_algos(ctx, net, st)) || (rc = alloc_split_ws(ctx, net, st)) || (rc = tune(ctx, net, st, o)) ||
        (rc = check_plan(net, st)))
        return rc;
    /* Warm-up: every kernel loaded and run once before the capture; errors surface here, at load. */
    if ((rc = run_layers(net, st, s)) || (rc = MK_CUDA_CHECK(cudaStreamSynchronize(s))))
        return rc;
    if (st->graph && (rc = capture(net, st, s))) {
        MK_WARN("%s: capturing the forward pass into a CUDA graph failed, running layer by layer: %s",
                net->cfg_name, mk_err_msg());
        st->graph = 0;
    }
    int kinds[IMPL_DWPW + 1] = {0};
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].type == MK_LAYER_CONV && st->ls[i].run)
            kinds[st->conv[i].impl.kind]++;
    MK_DEBUG("%s: CUDA %s %s: weights %.1f MB, activations %.1f MB in %d slots for %d values, workspace %.1f MB, "
             "%s; convolutions: %d cudnn, %d direct, %d small, %d dw, %d gemm, %d dwpw", net->cfg_name,
             st->half ? "FP16" : "FP32", st->nhwc ? "NHWC" : "NCHW", st->weight_bytes / 1e6, st->arena_bytes / 1e6,
             st->n_slots, st->n_values, st->ws_bytes / 1e6, st->graph ? "CUDA graph" : "layer by layer",
             kinds[IMPL_CUDNN], kinds[IMPL_DIRECT], kinds[IMPL_SMALL], kinds[IMPL_DW], kinds[IMPL_GEMM],
             kinds[IMPL_DWPW]);
    return 0;
}

/* The time of one whole pass of a prepared state (its graph, or a graph captured for the measurement). */
int time_pass(mk_ctx_t *ctx, mk_net_t *net, net_state *st, double *us)
{
    cudaStream_t s = MK_STREAM(ctx);
    if (st->graph && st->exec)
        return time_exec(st, s, st->exec, kTuneTrials, us);
    return time_body(st, s, [&]() { return run_layers(net, st, s); }, 1, us);
}

void release_state(mk_ctx_t *ctx, mk_net_t *net, net_state *st)
{
    if (!st)
        return;
    if (st->exec)
        warn_failed(MK_CUDA_CHECK(cudaGraphExecDestroy(st->exec)));
    if (st->graph_def)
        warn_failed(MK_CUDA_CHECK(cudaGraphDestroy(st->graph_def)));
    if (st->in_zero)
        mk_cuda_free(ctx, st->in_zero, MK_MEM_DEVICE);
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
    for (int k = 0; k < 2; k++)
        if (st->ev[k])
            warn_failed(MK_CUDA_CHECK(cudaEventDestroy(st->ev[k])));
    if (st->dnn)
        warn_failed(MK_CUDNN_CHECK(cudnnDestroy(st->dnn)));
    if (st->weights)
        mk_cuda_free(ctx, st->weights, MK_MEM_DEVICE);
    if (st->arena)
        mk_cuda_free(ctx, st->arena, MK_MEM_DEVICE);
    if (st->ws)
        mk_cuda_free(ctx, st->ws, MK_MEM_DEVICE);
    if (st->split_ws)
        mk_cuda_free(ctx, st->split_ws, MK_MEM_DEVICE);
    if (st->split_cnt)
        mk_cuda_free(ctx, st->split_cnt, MK_MEM_DEVICE);
    free(st->ls);
    free(st->conv);
    free(st->values);
    free(st->slots);
    free(st);
}

/* Reads the switches. */
int read_options(const mk_net_t *net, options *o)
{
    const char *layout = getenv("MASKD_NET_LAYOUT"), *dw = getenv("MASKD_NET_DEPTHWISE"),
               *direct = getenv("MASKD_NET_DIRECT_MFLOPS"), *conv = getenv("MASKD_NET_CONV"),
               *splitk = getenv("MASKD_NET_SPLITK"), *fuse = getenv("MASKD_NET_FUSE"),
               *cudnn = getenv("MASKD_NET_CUDNN");
    int dev = 0, major = 0, rc;
    memset(o, 0, sizeof *o);
    o->half = net->fp16;
    o->nhwc = o->half;
    if (layout && *layout) {
        if (strcmp(layout, "nchw") && strcmp(layout, "nhwc"))
            return mk_err_set(MK_EINVAL, "MASKD_NET_LAYOUT=%s: expected nchw or nhwc", layout);
        o->nhwc = o->half && !strcmp(layout, "nhwc");
        o->layout_forced = 1;
    }
    o->dw_mode = DW_AUTO;
    if (dw && *dw) {
        if (strcmp(dw, "cudnn") && strcmp(dw, "kernel"))
            return mk_err_set(MK_EINVAL, "MASKD_NET_DEPTHWISE=%s: expected cudnn or kernel", dw);
        o->dw_mode = !strcmp(dw, "cudnn") ? DW_CUDNN : DW_KERNEL;
    }
    o->direct_mflops = -1;
    if (direct && *direct) {
        char *end;
        o->direct_mflops = strtod(direct, &end);
        if (*end || !(o->direct_mflops >= 0))
            return mk_err_set(MK_EINVAL, "MASKD_NET_DIRECT_MFLOPS=%s: expected a number >= 0", direct);
    }
    if (conv && strlen(conv) >= sizeof o->conv)
        return mk_err_set(MK_EINVAL, "MASKD_NET_CONV=%s: too long", conv);
    snprintf(o->conv, sizeof o->conv, "%s", conv ? conv : "");
    if (splitk && *splitk) {
        char *end;
        long v = strtol(splitk, &end, 10);
        if (*end || v < 1 || v > 64)
            return mk_err_set(MK_EINVAL, "MASKD_NET_SPLITK=%s: expected 1 to 64", splitk);
        o->splitk = (int)v;
    }
    o->fuse = -1;
    if (fuse && *fuse) {
        if (strcmp(fuse, "0") && strcmp(fuse, "1"))
            return mk_err_set(MK_EINVAL, "MASKD_NET_FUSE=%s: expected 0 or 1", fuse);
        o->fuse = fuse[0] - '0';
    }
    if ((rc = MK_CUDA_CHECK(cudaGetDevice(&dev))) ||
        (rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev))))
        return rc;
    o->pdl = major >= 9 && !env_off("MASKD_NET_PDL");
    o->route_fuse = !env_off("MASKD_NET_ROUTE_FUSE");
    o->views = !env_off("MASKD_NET_VIEWS");
    o->in_node = !env_off("MASKD_NET_INPUT_NODE");
    o->graph = !env_flag("MASKD_NO_GRAPH");
    o->debug = env_flag("MASKD_NET_DEBUG");
    o->cudnn = net->cudnn;
    if (cudnn && *cudnn) {
        static const char *const names[] = {"auto", "on", "off"};
        int k = 0;
        while (k < 3 && strcmp(cudnn, names[k]))
            k++;
        if (k == 3)
            return mk_err_set(MK_EINVAL, "MASKD_NET_CUDNN=%s: expected auto, on or off", cudnn);
        o->cudnn = k;
    }
    return 0;
}

} // namespace

extern "C" int mk_net_prepare_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    options o;
    net_state *st = NULL, *other = NULL;
    int rc = read_options(net, &o);
    if (rc)
        return rc;
    rc = prepare(ctx, net, &o, &st);
    net->backend_state = st; /* a failed preparation is released with the network */
    if (rc == MK_EUNSUPPORTED && o.nhwc && !o.layout_forced) {
        MK_WARN("%s: %s; preparing it again in NCHW", net->cfg_name, mk_err_msg());
        mk_net_release_cuda(ctx, net);
        o.nhwc = 0;
        rc = prepare(ctx, net, &o, &st);
        net->backend_state = st;
        return rc;
    }
    /* auto: a pass that needed no cuDNN is kept (NCHW would need it for every convolution) */
    if (rc || !o.half || o.layout_forced || o.cudnn == MK_NET_CUDNN_OFF || (o.cudnn == MK_NET_CUDNN_AUTO && !st->dnn))
        return rc;
    /* FP16 in either layout: both prepared, the faster pass kept. */
    o.nhwc = 0;
    double t_nhwc = 0, t_nchw = 0;
    int orc = prepare(ctx, net, &o, &other);
    if (!orc && !(orc = time_pass(ctx, net, st, &t_nhwc)))
        orc = time_pass(ctx, net, other, &t_nchw);
    if (orc) {
        MK_WARN("%s: the NCHW alternative failed (%s); keeping NHWC", net->cfg_name, mk_err_msg());
    } else if (t_nchw < t_nhwc) {
        net_state *t = st;
        st = other;
        other = t;
    }
    release_state(ctx, net, other);
    net->backend_state = st;
    bind(net, st);
    MK_DEBUG("%s: FP16 pass NHWC %.1f µs, NCHW %.1f µs: %s kept", net->cfg_name, t_nhwc, t_nchw,
             st->nhwc ? "NHWC" : "NCHW");
    return 0;
}

extern "C" int mk_net_forward_cuda(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *input)
{
    net_state *st = (net_state *)net->backend_state;
    cudaStream_t s = MK_STREAM(ctx);
    size_t row = (size_t)net->w * sizeof(float);
    int rc;
    if (st->graph && st->exec && st->in_node) {
        if (input->data != st->in_src || input->pitch != st->in_pitch) {
            if ((rc = dn_input_retarget(st->exec, st->in_node, (const float *)input->data, input->pitch, st->in)))
                return rc;
            st->in_src = input->data;
            st->in_pitch = input->pitch;
        }
        return MK_CUDA_CHECK(cudaGraphLaunch(st->exec, s));
    }
    rc = st->half ? dn_input(exec_of(st, s), (const float *)input->data, input->pitch, st->in)
                  : mk_cuda_copy2d(ctx, st->in.data, row, input->data, input->pitch, row, (size_t)net->c * net->h);
    if (rc)
        return rc;
    return st->graph && st->exec ? MK_CUDA_CHECK(cudaGraphLaunch(st->exec, s)) : run_layers(net, st, s);
}

extern "C" void mk_net_release_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    for (int i = 0; i < net->n_layers; i++)
        net->layers[i].output = NULL;
    release_state(ctx, net, (net_state *)net->backend_state);
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

extern "C" int mk_net_cuda_conv_impl(mk_net_t *net, int i, char *name, size_t len)
{
    if (!net || !net->backend_state || net->ctx->backend != MK_BACKEND_CUDA || !name || !len)
        return mk_err_set(MK_EINVAL, "mk_net_cuda_conv_impl: not a network on a CUDA context, or no buffer");
    if (i < 0 || i >= net->n_layers || net->layers[i].type != MK_LAYER_CONV)
        return mk_err_set(MK_EINVAL, "layer %d of %s is not a convolution", i, net->cfg_name);
    const net_state *st = (const net_state *)net->backend_state;
    if (!st->ls[i].run) /* a depthwise convolution done by the next layer's dwpw kernel */
        snprintf(name, len, "fused");
    else
        impl_name(st->conv[i].impl, name, len);
    return 0;
}
extern "C" int mk_net_cuda_has_cudnn(const mk_net_t *net)
{
    if (!net || !net->backend_state || net->ctx->backend != MK_BACKEND_CUDA)
        return mk_err_set(MK_EINVAL, "mk_net_cuda_has_cudnn: not a network on a CUDA context");
    return ((const net_state *)net->backend_state)->dnn != NULL;
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
