/* darknet_cpu: the reference forward pass — convolution as im2col + GEMM (blocked for the caches, summing in the
 * order Darknet's gemm_nn does), and direct loops for the other layers. Single-threaded. */
#include "backend.h"
#include "darknet_internal.h"
#include "darknet_px.h"
#include "errors.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* Output pixels per im2col block and rows of the reduction per GEMM pass: a KB x NB slice of the column matrix
 * (128 KiB) stays in L2 while every filter row of the block is accumulated into an NB-wide strip in L1. */
enum { NB = 256, KB = 128 };

typedef struct {
    float *input; /* the network input, contiguous */
    float *col;   /* im2col block: K x NB */
} cpu_state_t;

int mk_net_prepare_cpu(mk_ctx_t *ctx, mk_net_t *net)
{
    (void)ctx;
    cpu_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    net->backend_state = st;
    size_t col = 1;
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        if (l->type == MK_LAYER_DROPOUT)
            continue;
        if (!(l->output = calloc(mk_layer_out_size(l), sizeof(float))))
            return mk_err_set(MK_ENOMEM, "out of memory for the output of layer %d of %s", i, net->cfg_name);
        if (l->type == MK_LAYER_CONV) {
            size_t k = (size_t)(l->c / l->conv.groups) * (size_t)l->conv.size * (size_t)l->conv.size;
            col = k * NB > col ? k * NB : col;
        }
    }
    st->input = malloc((size_t)net->c * (size_t)net->h * (size_t)net->w * sizeof(float));
    st->col = malloc(col * sizeof(float));
    if (!st->input || !st->col)
        return mk_err_set(MK_ENOMEM, "out of memory preparing %s", net->cfg_name);
    return 0;
}

void mk_net_release_cpu(mk_ctx_t *ctx, mk_net_t *net)
{
    (void)ctx;
    for (int i = 0; i < net->n_layers; i++) {
        free(net->layers[i].output);
        net->layers[i].output = NULL;
    }
    cpu_state_t *st = net->backend_state;
    if (st) {
        free(st->input);
        free(st->col);
        free(st);
    }
    net->backend_state = NULL;
}

/* Columns j0..j0+nb-1 (output pixels in row-major order) of the im2col matrix of one group's cg input channels:
 * row (c, ky, kx), value in(c, y*stride - pad + ky, x*stride - pad + kx) or 0 outside. */
static void im2col_block(const mk_layer_t *l, const float *im, int cg, int j0, int nb, float *col)
{
    const mk_conv_t *cv = &l->conv;
    int s = cv->size;
    for (int c = 0; c < cg; c++)
        for (int ky = 0; ky < s; ky++)
            for (int kx = 0; kx < s; kx++) {
                float *row = col + ((size_t)(c * s + ky) * s + kx) * nb;
                const float *plane = im + (size_t)c * l->h * l->w;
                int y = j0 / l->out_w, x = j0 % l->out_w;
                for (int j = 0; j < nb; j++) {
                    int iy = y * cv->stride - cv->pad + ky, ix = x * cv->stride - cv->pad + kx;
                    row[j] = iy >= 0 && iy < l->h && ix >= 0 && ix < l->w ? plane[(size_t)iy * l->w + ix] : 0.0f;
                    if (++x == l->out_w) {
                        x = 0;
                        y++;
                    }
                }
            }
}

/* Four floats in one SSE register (GCC/Clang vector extension; element-wise IEEE arithmetic, no reassociation). */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store4(float *p, v4f v)
{
    memcpy(p, &v, sizeof v);
}

/* C[m x nb] (row stride ldc) += A[m x k] (row stride lda) * B[k x nb] (row stride ldb). Every element sums its
 * products in increasing k, one rounding per multiply and per add, whatever the blocking: a 4 x 8 tile of C
 * stays in registers through a KB-row slice of B; the edges use the same loop one element at a time. */
static void gemm_acc(int m, int nb, int k, const float *a, int lda, const float *b, size_t ldb, float *c, size_t ldc)
{
    for (int k0 = 0; k0 < k; k0 += KB) {
        int k1 = k0 + KB < k ? k0 + KB : k, i = 0;
        for (; i + 4 <= m; i += 4) {
            const float *a0 = a + (size_t)i * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
            float *c0 = c + (size_t)i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
            int j = 0;
            for (; j + 8 <= nb; j += 8) {
                v4f s00 = load4(c0 + j), s01 = load4(c0 + j + 4), s10 = load4(c1 + j), s11 = load4(c1 + j + 4);
                v4f s20 = load4(c2 + j), s21 = load4(c2 + j + 4), s30 = load4(c3 + j), s31 = load4(c3 + j + 4);
                for (int kk = k0; kk < k1; kk++) {
                    const float *bk = b + (size_t)kk * ldb + j;
                    v4f b0 = load4(bk), b1 = load4(bk + 4);
                    s00 += a0[kk] * b0;
                    s01 += a0[kk] * b1;
                    s10 += a1[kk] * b0;
                    s11 += a1[kk] * b1;
                    s20 += a2[kk] * b0;
                    s21 += a2[kk] * b1;
                    s30 += a3[kk] * b0;
                    s31 += a3[kk] * b1;
                }
                store4(c0 + j, s00);
                store4(c0 + j + 4, s01);
                store4(c1 + j, s10);
                store4(c1 + j + 4, s11);
                store4(c2 + j, s20);
                store4(c2 + j + 4, s21);
                store4(c3 + j, s30);
                store4(c3 + j + 4, s31);
            }
            for (; j < nb; j++)
                for (int kk = k0; kk < k1; kk++) {
                    float bv = b[(size_t)kk * ldb + j];
                    c0[j] += a0[kk] * bv;
                    c1[j] += a1[kk] * bv;
                    c2[j] += a2[kk] * bv;
                    c3[j] += a3[kk] * bv;
                }
        }
        for (; i < m; i++) {
            float *ci = c + (size_t)i * ldc;
            const float *ai = a + (size_t)i * lda;
            for (int kk = k0; kk < k1; kk++) {
                float av = ai[kk];
                const float *bk = b + (size_t)kk * ldb;
                for (int j = 0; j < nb; j++)
                    ci[j] += av * bk[j];
            }
        }
    }
}

static void conv_forward(const mk_layer_t *l, const float *in, float *out, float *col)
{
    const mk_conv_t *cv = &l->conv;
    int g = cv->groups, cg = l->c / g, fg = cv->filters / g, k = cg * cv->size * cv->size;
    int n = l->out_h * l->out_w;
    int direct = cv->size == 1 && cv->stride == 1 && cv->pad == 0; /* the input is its own column matrix */
    memset(out, 0, mk_layer_out_size(l) * sizeof(float));
    for (int grp = 0; grp < g; grp++) {
        const float *im = in + (size_t)grp * cg * l->h * l->w;
        const float *w = cv->weights + (size_t)grp * fg * k;
        float *o = out + (size_t)grp * fg * n;
        for (int j0 = 0; j0 < n; j0 += NB) {
            int nb = n - j0 < NB ? n - j0 : NB;
            if (direct) {
                gemm_acc(fg, nb, k, w, k, im + j0, (size_t)n, o + j0, (size_t)n);
            } else {
                im2col_block(l, im, cg, j0, nb, col);
                gemm_acc(fg, nb, k, w, k, col, (size_t)nb, o + j0, (size_t)n);
            }
        }
    }
    for (int f = 0; f < cv->filters; f++) {
        float *o = out + (size_t)f * n, b = cv->biases[f];
        for (int j = 0; j < n; j++)
            o[j] = mk_px_activate(o[j] + b, l->act);
    }
}

static void maxpool_forward(const mk_layer_t *l, const float *in, float *out)
{
    const mk_maxpool_t *m = &l->maxpool;
    int off = -m->pad / 2;
    for (int c = 0; c < l->c; c++) {
        const float *plane = in + (size_t)c * l->h * l->w;
        for (int y = 0; y < l->out_h; y++)
            for (int x = 0; x < l->out_w; x++) {
                float best = -FLT_MAX;
                for (int dy = 0; dy < m->size; dy++) {
                    int iy = off + y * m->stride + dy;
                    if (iy < 0 || iy >= l->h)
                        continue;
                    for (int dx = 0; dx < m->size; dx++) {
                        int ix = off + x * m->stride + dx;
                        if (ix >= 0 && ix < l->w && plane[(size_t)iy * l->w + ix] > best)
                            best = plane[(size_t)iy * l->w + ix];
                    }
                }
                out[((size_t)c * l->out_h + y) * l->out_w + x] = best;
            }
    }
}

/* The output of layer i, or the network input for -1. */
static const float *output_of(const mk_net_t *net, int i)
{
    return i < 0 ? ((const cpu_state_t *)net->backend_state)->input : net->layers[i].output;
}

static void route_forward(const mk_net_t *net, const mk_layer_t *l, float *out)
{
    const mk_route_t *r = &l->route;
    size_t plane = (size_t)l->out_h * l->out_w;
    for (int k = 0; k < r->n; k++) {
        int c = r->layers[k] < 0 ? net->c : net->layers[r->layers[k]].out_c;
        size_t part = (size_t)(c / r->groups) * plane;
        memcpy(out, output_of(net, r->layers[k]) + part * (size_t)r->group_id, part * sizeof(float));
        out += part;
    }
}

static void shortcut_forward(const mk_net_t *net, const mk_layer_t *l, const float *in, float *out)
{
    const float *add = output_of(net, l->shortcut.from);
    size_t n = mk_layer_out_size(l);
    for (size_t i = 0; i < n; i++)
        out[i] = mk_px_activate(in[i] + add[i], l->act);
}

static void upsample_forward(const mk_layer_t *l, const float *in, float *out)
{
    int s = l->upsample.stride;
    for (int c = 0; c < l->c; c++)
        for (int y = 0; y < l->out_h; y++) {
            const float *row = in + ((size_t)c * l->h + y / s) * l->w;
            float *o = out + ((size_t)c * l->out_h + y) * l->out_w;
            for (int x = 0; x < l->out_w; x++)
                o[x] = l->upsample.scale * row[x / s];
        }
}

static void yolo_forward(const mk_layer_t *l, const float *in, float *out)
{
    const mk_yolo_t *y = &l->yolo;
    size_t plane = (size_t)l->w * l->h, entries = 5 + (size_t)y->meta.classes;
    for (int a = 0; a < y->meta.n; a++) {
        const float *i = in + (size_t)a * entries * plane;
        float *o = out + (size_t)a * entries * plane;
        for (size_t j = 0; j < 2 * plane; j++)
            o[j] = mk_px_yolo_xy(i[j], y->meta.scale_x_y, y->bias_x_y);
        memcpy(o + 2 * plane, i + 2 * plane, 2 * plane * sizeof(float));
        for (size_t j = 4 * plane; j < entries * plane; j++)
            o[j] = mk_px_logistic(i[j]);
    }
}

int mk_net_forward_cpu(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *input)
{
    (void)ctx;
    cpu_state_t *st = net->backend_state;
    for (int c = 0; c < net->c; c++)
        for (int y = 0; y < net->h; y++)
            memcpy(st->input + ((size_t)c * net->h + y) * net->w, mk_image_row(input, c, y),
                   (size_t)net->w * sizeof(float));
    for (int i = 0; i < net->n_layers; i++) {
        mk_layer_t *l = &net->layers[i];
        const float *in = output_of(net, l->input);
        float *out = l->output;
        switch (l->type) {
        case MK_LAYER_CONV: conv_forward(l, in, out, st->col); break;
        case MK_LAYER_MAXPOOL: maxpool_forward(l, in, out); break;
        case MK_LAYER_ROUTE: route_forward(net, l, out); break;
        case MK_LAYER_SHORTCUT: shortcut_forward(net, l, in, out); break;
        case MK_LAYER_UPSAMPLE: upsample_forward(l, in, out); break;
        case MK_LAYER_YOLO: yolo_forward(l, in, out); break;
        case MK_LAYER_DROPOUT: break;
        }
    }
    return 0;
}
