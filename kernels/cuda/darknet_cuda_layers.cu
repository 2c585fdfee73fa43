/* darknet_cuda_layers: the Darknet layers that are not cuDNN convolutions — input conversion, the fused bias +
 * activation (+ shortcut) epilogue, direct convolution with that epilogue (or the yolo layer) inside, maxpool,
 * route, shortcut, upsample, yolo — one kernel each, one thread per output element (the element's computation is
 * in darknet_cuda_px.h). */
#include "darknet_cuda_layers.h"

#include "cuda_check.h"
#include "darknet_cuda_px.h"

namespace {

const int kThreads = 256;

int blocks_for(int n)
{
    return (n + kThreads - 1) / kThreads;
}

int size_of(const dn_tensor &t)
{
    return t.c * t.h * t.w;
}

/* The element of this thread, after the previous kernel has finished (programmatic dependent launch). */
#define DN_INDEX(n)                                                                                            \
    dn_grid_wait();                                                                                            \
    dn_grid_trigger();                                                                                         \
    int i = blockIdx.x * blockDim.x + threadIdx.x;                                                             \
    if (i >= (n))                                                                                              \
        return;

template <typename T>
__global__ void input_kernel(const float *src, size_t pitch, T *dst, int c, int h, int w, int nhwc)
{
    DN_INDEX(c * h * w)
    dn_px_input(i, src, pitch, dst, c, h, w, nhwc);
}

template <typename T>
__global__ void bias_act_kernel(const T *y, const float *bias, int act, const T *res, int act2, T *out, int c,
                                int hw, int nhwc)
{
    DN_INDEX(c * hw)
    dn_px_bias_act(i, y, bias, act, res, act2, out, c, hw, nhwc);
}

template <typename T>
__global__ void conv_kernel(const T *in, const float *weights, const float *bias, int act, const T *res, int act2,
                            T *out, dn_conv_geom g)
{
    DN_INDEX(g.oc * g.oh * g.ow)
    dn_px_conv(i, in, weights, bias, act, res, act2, out, g);
}

template <typename T>
__global__ void conv_yolo_kernel(const T *in, const float *weights, const float *bias, int act, int classes,
                                 float scale_x_y, float bias_x_y, float *out, dn_conv_geom g)
{
    DN_INDEX(g.oc * g.oh * g.ow)
    dn_px_conv_yolo(i, in, weights, bias, act, classes, scale_x_y, bias_x_y, out, g);
}

dn_conv_geom geom(const dn_tensor &in, const dn_tensor &out, int size, int stride, int pad, int groups)
{
    return {in.c, in.h, in.w, out.c, out.h, out.w, in.c / groups, out.c / groups, size, stride, pad, in.nhwc};
}

template <typename T>
__global__ void maxpool_kernel(const T *in, T *out, int c, int h, int w, int oh, int ow, int size, int stride,
                               int pad, int nhwc)
{
    DN_INDEX(c * oh * ow)
    dn_px_maxpool(i, in, out, c, h, w, oh, ow, size, stride, pad, nhwc);
}

template <typename T>
__global__ void route_kernel(dn_route_args a, T *out, int c, int h, int w, int nhwc)
{
    DN_INDEX(c * h * w)
    dn_px_route(i, a.n, a.in, out, c, h, w, nhwc);
}

template <typename T>
__global__ void shortcut_kernel(const T *a, const T *b, int act, T *out, int n)
{
    DN_INDEX(n)
    dn_px_shortcut(i, a, b, act, out);
}

template <typename T>
__global__ void upsample_kernel(const T *in, T *out, int c, int h, int w, int stride, float scale, int nhwc)
{
    DN_INDEX(c * h * stride * w * stride)
    dn_px_upsample(i, in, out, c, h, w, stride, scale, nhwc);
}

template <typename T>
__global__ void yolo_kernel(const T *in, const float *bias, int act, int classes, float scale_x_y, float bias_x_y,
                            float *out, int c, int h, int w, int nhwc)
{
    DN_INDEX(c * h * w)
    dn_px_yolo(i, in, bias, act, classes, scale_x_y, bias_x_y, out, c, h, w, nhwc);
}

} // namespace

/* One thread per element of an n-element result. */
#define DN_GRID(n) dim3(blocks_for(n)), dim3(kThreads), 0

int dn_input(const dn_exec &x, const float *src, size_t pitch, const dn_tensor &dst)
{
    int n = size_of(dst);
    if (dst.half)
        return dn_launch(x, "input_kernel", input_kernel<__half>, DN_GRID(n), src, pitch, (__half *)dst.data, dst.c,
                         dst.h, dst.w, dst.nhwc);
    return dn_launch(x, "input_kernel", input_kernel<float>, DN_GRID(n), src, pitch, (float *)dst.data, dst.c, dst.h,
                     dst.w, dst.nhwc);
}

int dn_input_retarget(cudaGraphExec_t exec, cudaGraphNode_t node, const float *src, size_t pitch,
                      const dn_tensor &dst)
{
    int n = size_of(dst), c = dst.c, h = dst.h, w = dst.w, nhwc = dst.nhwc;
    void *data = dst.data, *args[] = {&src, &pitch, &data, &c, &h, &w, &nhwc};
    cudaKernelNodeParams p = {};
    p.func = dst.half ? (void *)input_kernel<__half> : (void *)input_kernel<float>;
    p.gridDim = dim3(blocks_for(n));
    p.blockDim = dim3(kThreads);
    p.kernelParams = args;
    return MK_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

int dn_bias_act(const dn_exec &x, const dn_tensor &y, const float *bias, int act, const dn_tensor *res, int act2,
                const dn_tensor &out)
{
    int n = size_of(out), hw = out.h * out.w;
    if (out.half)
        return dn_launch(x, "bias_act_kernel", bias_act_kernel<__half>, DN_GRID(n), (const __half *)y.data, bias, act,
                         res ? (const __half *)res->data : (const __half *)NULL, act2, (__half *)out.data, out.c, hw,
                         out.nhwc);
    return dn_launch(x, "bias_act_kernel", bias_act_kernel<float>, DN_GRID(n), (const float *)y.data, bias, act,
                     res ? (const float *)res->data : (const float *)NULL, act2, (float *)out.data, out.c, hw,
                     out.nhwc);
}

int dn_conv(const dn_exec &x, const dn_tensor &in, const float *weights, const float *bias, int size, int stride,
            int pad, int groups, int act, const dn_tensor *res, int act2, const dn_tensor &out)
{
    int n = size_of(out);
    dn_conv_geom g = geom(in, out, size, stride, pad, groups);
    if (out.half)
        return dn_launch(x, "conv_kernel", conv_kernel<__half>, DN_GRID(n), (const __half *)in.data, weights, bias,
                         act, res ? (const __half *)res->data : (const __half *)NULL, act2, (__half *)out.data, g);
    return dn_launch(x, "conv_kernel", conv_kernel<float>, DN_GRID(n), (const float *)in.data, weights, bias, act,
                     res ? (const float *)res->data : (const float *)NULL, act2, (float *)out.data, g);
}

int dn_conv_yolo(const dn_exec &x, const dn_tensor &in, const float *weights, const float *bias, int size, int stride,
                 int pad, int groups, int act, int classes, float scale_x_y, float bias_x_y, const dn_tensor &out,
                 float *yolo)
{
    int n = size_of(out);
    dn_conv_geom g = geom(in, out, size, stride, pad, groups);
    if (in.half)
        return dn_launch(x, "conv_yolo_kernel", conv_yolo_kernel<__half>, DN_GRID(n), (const __half *)in.data,
                         weights, bias, act, classes, scale_x_y, bias_x_y, yolo, g);
    return dn_launch(x, "conv_yolo_kernel", conv_yolo_kernel<float>, DN_GRID(n), (const float *)in.data, weights,
                     bias, act, classes, scale_x_y, bias_x_y, yolo, g);
}

int dn_maxpool(const dn_exec &x, const dn_tensor &in, int size, int stride, int pad, const dn_tensor &out)
{
    int n = size_of(out);
    if (out.half)
        return dn_launch(x, "maxpool_kernel", maxpool_kernel<__half>, DN_GRID(n), (const __half *)in.data,
                         (__half *)out.data, in.c, in.h, in.w, out.h, out.w, size, stride, pad, out.nhwc);
    return dn_launch(x, "maxpool_kernel", maxpool_kernel<float>, DN_GRID(n), (const float *)in.data,
                     (float *)out.data, in.c, in.h, in.w, out.h, out.w, size, stride, pad, out.nhwc);
}

int dn_route(const dn_exec &x, const dn_route_args &args, const dn_tensor &out)
{
    int n = size_of(out);
    if (out.half)
        return dn_launch(x, "route_kernel", route_kernel<__half>, DN_GRID(n), args, (__half *)out.data, out.c, out.h,
                         out.w, out.nhwc);
    return dn_launch(x, "route_kernel", route_kernel<float>, DN_GRID(n), args, (float *)out.data, out.c, out.h,
                     out.w, out.nhwc);
}

int dn_shortcut(const dn_exec &x, const dn_tensor &a, const dn_tensor &b, int act, const dn_tensor &out)
{
    int n = size_of(out);
    if (out.half)
        return dn_launch(x, "shortcut_kernel", shortcut_kernel<__half>, DN_GRID(n), (const __half *)a.data,
                         (const __half *)b.data, act, (__half *)out.data, n);
    return dn_launch(x, "shortcut_kernel", shortcut_kernel<float>, DN_GRID(n), (const float *)a.data,
                     (const float *)b.data, act, (float *)out.data, n);
}

int dn_upsample(const dn_exec &x, const dn_tensor &in, int stride, float scale, const dn_tensor &out)
{
    int n = size_of(out);
    if (out.half)
        return dn_launch(x, "upsample_kernel", upsample_kernel<__half>, DN_GRID(n), (const __half *)in.data,
                         (__half *)out.data, in.c, in.h, in.w, stride, scale, out.nhwc);
    return dn_launch(x, "upsample_kernel", upsample_kernel<float>, DN_GRID(n), (const float *)in.data,
                     (float *)out.data, in.c, in.h, in.w, stride, scale, out.nhwc);
}

int dn_yolo(const dn_exec &x, const dn_tensor &in, const float *bias, int act, int classes, float scale_x_y,
            float bias_x_y, float *out)
{
    int n = size_of(in);
    if (in.half)
        return dn_launch(x, "yolo_kernel", yolo_kernel<__half>, DN_GRID(n), (const __half *)in.data, bias, act,
                         classes, scale_x_y, bias_x_y, out, in.c, in.h, in.w, in.nhwc);
    return dn_launch(x, "yolo_kernel", yolo_kernel<float>, DN_GRID(n), (const float *)in.data, bias, act, classes,
                     scale_x_y, bias_x_y, out, in.c, in.h, in.w, in.nhwc);
}
