/* darknet_cuda_px: one output element of each kernel of darknet_cuda_layers.cu, as plain functions of the element
 * index. The kernels are thin wrappers around these; without nvcc they compile as host code (like px.h), so the
 * layer logic — layouts, route slices, maxpool windows, fused epilogues — can be exercised without a GPU.
 *
 * Element i of a c x h x w tensor is (channel, row, column) = coords(i) in its layout: NCHW ((ch * h + y) * w + x)
 * or NHWC ((y * w + x) * c + ch). Storage is float or __half; arithmetic is float32. */
#ifndef MK_DARKNET_CUDA_PX_H
#define MK_DARKNET_CUDA_PX_H

#include "darknet_px.h"

#include <cuda_fp16.h>
#include <float.h>
#include <stddef.h>

#ifdef __CUDACC__
#define DN_PX static __device__ __forceinline__
#else
#define DN_PX static inline
#endif

/* Programmatic dependent launch: a kernel launched with it may start while the kernel before it in the stream still
 * runs. dn_grid_wait() returns once that kernel has finished and its writes are visible; every kernel calls it
 * before it reads or writes any activation (it returns at once without the launch attribute). dn_grid_trigger()
 * lets the next kernel start launching; the kernels call it right after the wait, so that at most two kernels
 * overlap. Both are no-ops on the host and before sm_90. */
DN_PX void dn_grid_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

DN_PX void dn_grid_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

DN_PX float dn_ld(const float *p, size_t i)
{
    return p[i];
}

DN_PX float dn_ld(const __half *p, size_t i)
{
    return __half2float(p[i]);
}

DN_PX void dn_st(float *p, size_t i, float v)
{
    p[i] = v;
}

DN_PX void dn_st(__half *p, size_t i, float v)
{
    p[i] = __float2half_rn(v);
}

DN_PX void dn_coords(int i, int c, int h, int w, int nhwc, int *ch, int *y, int *x)
{
    if (nhwc) {
        *ch = i % c;
        int p = i / c;
        *x = p % w;
        *y = p / w;
    } else {
        *x = i % w;
        int p = i / w;
        *y = p % h;
        *ch = p / h;
    }
}

DN_PX size_t dn_at(int ch, int y, int x, int c, int h, int w, int nhwc)
{
    return nhwc ? ((size_t)y * w + x) * c + ch : ((size_t)ch * h + y) * w + x;
}

/* The network input: float planes with a row pitch in bytes, into dst's type and layout. */
template <typename T>
DN_PX void dn_px_input(int i, const float *src, size_t pitch, T *dst, int c, int h, int w, int nhwc)
{
    int ch, y, x;
    dn_coords(i, c, h, w, nhwc, &ch, &y, &x);
    const float *row = (const float *)((const char *)src + ((size_t)ch * h + y) * pitch);
    dn_st(dst, i, row[x]);
}

/* out = act(y + bias[ch]), then with res: act2(that + res). out may be y. */
template <typename T>
DN_PX void dn_px_bias_act(int i, const T *y, const float *bias, int act, const T *res, int act2, T *out, int c,
                          int hw, int nhwc)
{
    int ch = nhwc ? i % c : i / hw;
    float v = mk_px_activate(dn_ld(y, i) + bias[ch], act);
    if (res)
        v = mk_px_activate(v + dn_ld(res, i), act2);
    dn_st(out, i, v);
}

/* A direct convolution: input c x h x w, output oc x oh x ow, groups of cg input and kg output channels, weights
 * float [oc][cg][size][size]. */
struct dn_conv_geom {
    int c, h, w, oc, oh, ow, cg, kg, size, stride, pad, nhwc;
};

/* The convolution sum (without bias) at output channel k, row oy, column ox, in the CPU reference's order
 * (input channel, then kernel row, then column). */
template <typename T>
DN_PX float dn_px_conv_sum(const T *in, const float *weights, const dn_conv_geom &g, int k, int oy, int ox)
{
    const float *wk = weights + (size_t)k * g.cg * g.size * g.size;
    int c0 = k / g.kg * g.cg, y0 = oy * g.stride - g.pad, x0 = ox * g.stride - g.pad;
    float sum = 0.f;
    for (int ci = 0; ci < g.cg; ci++)
        for (int ky = 0; ky < g.size; ky++) {
            int y = y0 + ky;
            if (y < 0 || y >= g.h)
                continue;
            for (int kx = 0; kx < g.size; kx++) {
                int x = x0 + kx;
                if (x >= 0 && x < g.w)
                    sum += wk[(ci * g.size + ky) * g.size + kx] * dn_ld(in, dn_at(c0 + ci, y, x, g.c, g.h, g.w, g.nhwc));
            }
        }
    return sum;
}

/* Output element i (in the output's layout) of a direct convolution with its epilogue: act(sum + bias), then with
 * res act2(that + res). */
template <typename T>
DN_PX void dn_px_conv(int i, const T *in, const float *weights, const float *bias, int act, const T *res, int act2,
                      T *out, const dn_conv_geom &g)
{
    int k, oy, ox;
    dn_coords(i, g.oc, g.oh, g.ow, g.nhwc, &k, &oy, &ox);
    float v = mk_px_activate(dn_px_conv_sum(in, weights, g, k, oy, ox) + bias[k], act);
    if (res)
        v = mk_px_activate(v + dn_ld(res, i), act2);
    dn_st(out, i, v);
}

/* Darknet's maxpool (darknet_internal.h) at output (oy, ox) of channel ch of the c x h x w input: inputs outside
 * the image are skipped. */
template <typename T>
DN_PX float dn_px_pool(const T *in, int ch, int oy, int ox, int c, int h, int w, int size, int stride, int pad,
                       int nhwc)
{
    int off = -pad / 2;
    float best = -FLT_MAX;
    for (int dy = 0; dy < size; dy++) {
        int y = off + oy * stride + dy;
        if (y < 0 || y >= h)
            continue;
        for (int dx = 0; dx < size; dx++) {
            int x = off + ox * stride + dx;
            if (x >= 0 && x < w) {
                float v = dn_ld(in, dn_at(ch, y, x, c, h, w, nhwc));
                if (v > best)
                    best = v;
            }
        }
    }
    return best;
}

template <typename T>
DN_PX void dn_px_maxpool(int i, const T *in, T *out, int c, int h, int w, int oh, int ow, int size, int stride,
                         int pad, int nhwc)
{
    int ch, oy, ox;
    dn_coords(i, c, oh, ow, nhwc, &ch, &oy, &ox);
    dn_st(out, i, dn_px_pool(in, ch, oy, ox, c, h, w, size, stride, pad, nhwc));
}

/* One input of a route: channels [first, first + count) of the c x h x w tensor at data, read as they are
 * (DN_SRC_COPY: h, w are the route's), through Darknet's nearest upsampling by stride times scale (DN_SRC_UPSAMPLE:
 * the route's h, w are stride times the tensor's), or through Darknet's maxpool of size, stride, pad
 * (DN_SRC_MAXPOOL: the tensor is the pool's input). The last two are [upsample] and [maxpool] layers whose only
 * reader is the route, computed inside its kernel with their own arithmetic. */
enum { DN_SRC_COPY, DN_SRC_UPSAMPLE, DN_SRC_MAXPOOL };

struct dn_src {
    const void *data;
    int c, h, w, first, count;
    int op, size, stride, pad;
    float scale;
};

/* Route: output channel ch comes from input k = the first whose count it falls in, channel first + the rest. */
template <typename T>
DN_PX void dn_px_route(int i, int n, const dn_src *in, T *out, int c, int h, int w, int nhwc)
{
    int ch, y, x, k = 0;
    dn_coords(i, c, h, w, nhwc, &ch, &y, &x);
    while (k < n - 1 && ch >= in[k].count) {
        ch -= in[k].count;
        k++;
    }
    const dn_src &s = in[k];
    const T *p = (const T *)s.data;
    ch += s.first;
    switch (s.op) {
    case DN_SRC_UPSAMPLE:
        dn_st(out, i, s.scale * dn_ld(p, dn_at(ch, y / s.stride, x / s.stride, s.c, s.h, s.w, nhwc)));
        break;
    case DN_SRC_MAXPOOL: dn_st(out, i, dn_px_pool(p, ch, y, x, s.c, s.h, s.w, s.size, s.stride, s.pad, nhwc)); break;
    default: out[i] = p[dn_at(ch, y, x, s.c, s.h, s.w, nhwc)];
    }
}

template <typename T>
DN_PX void dn_px_shortcut(int i, const T *a, const T *b, int act, T *out)
{
    dn_st(out, i, mk_px_activate(dn_ld(a, i) + dn_ld(b, i), act));
}

/* Nearest upsampling: out is c x (h * stride) x (w * stride). */
template <typename T>
DN_PX void dn_px_upsample(int i, const T *in, T *out, int c, int h, int w, int stride, float scale, int nhwc)
{
    int ch, y, x;
    dn_coords(i, c, h * stride, w * stride, nhwc, &ch, &y, &x);
    dn_st(out, i, scale * dn_ld(in, dn_at(ch, y / stride, x / stride, c, h, w, nhwc)));
}

/* The [yolo] transform of entry plane `ch` (x, y: logistic * scale_x_y + bias_x_y; w, h: unchanged; the rest:
 * logistic). */
DN_PX float dn_px_yolo_entry(float v, int ch, int classes, float scale_x_y, float bias_x_y)
{
    int e = ch % (5 + classes);
    if (e < 2)
        return mk_px_yolo_xy(v, scale_x_y, bias_x_y);
    return e >= 4 ? mk_px_logistic(v) : v;
}

/* [yolo] element i of the float CHW output; with bias, in is the raw convolution output and act(in + bias) is
 * taken first. */
template <typename T>
DN_PX void dn_px_yolo(int i, const T *in, const float *bias, int act, int classes, float scale_x_y, float bias_x_y,
                      float *out, int c, int h, int w, int nhwc)
{
    int hw = h * w, ch = i / hw, p = i - ch * hw, y = p / w, x = p - y * w;
    float v = dn_ld(in, dn_at(ch, y, x, c, h, w, nhwc));
    if (bias)
        v = mk_px_activate(v + bias[ch], act);
    out[i] = dn_px_yolo_entry(v, ch, classes, scale_x_y, bias_x_y);
}

/* [yolo] element i of the float CHW output computed straight from a direct convolution's input. */
template <typename T>
DN_PX void dn_px_conv_yolo(int i, const T *in, const float *weights, const float *bias, int act, int classes,
                           float scale_x_y, float bias_x_y, float *out, const dn_conv_geom &g)
{
    int hw = g.oh * g.ow, k = i / hw, p = i - k * hw, oy = p / g.ow, ox = p - oy * g.ow;
    float v = mk_px_activate(dn_px_conv_sum(in, weights, g, k, oy, ox) + bias[k], act);
    out[i] = dn_px_yolo_entry(v, k, classes, scale_x_y, bias_x_y);
}

#endif
