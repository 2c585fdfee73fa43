/* darknet_cuda_layers: the CUDA kernels of the Darknet forward pass other than cuDNN's convolutions (CUDA C++ only,
 * included by darknet_cuda.cu). Every launcher queues one kernel on `s`, checks the launch and returns 0 or a
 * negative MK_E* code with a message; none synchronises, so all of them may be captured into a CUDA graph.
 *
 * Launchers take a dn_exec: the stream, and whether kernels are launched with programmatic dependent launch (see
 * dn_grid_wait in darknet_cuda_px.h; every kernel of the pass waits for its predecessor before touching activations).
 *
 * Tensors are one image of c x h x w elements, contiguous, float32 or half (`half`), in NCHW or NHWC order
 * (`nhwc`); arithmetic is float32 whatever the storage type. Formulas are darknet_internal.h's, with the
 * activations of darknet_px.h; each element's computation is in darknet_cuda_px.h. */
#ifndef MK_DARKNET_CUDA_LAYERS_H
#define MK_DARKNET_CUDA_LAYERS_H

#include "cuda_check.h"
#include "darknet_cuda_px.h"
#include "darknet_internal.h"
#include "errors.h"

#include <cuda_runtime.h>

/* A tensor in device memory. */
struct dn_tensor {
    void *data;
    int c, h, w;
    int half; /* elements are __half (else float) */
    int nhwc; /* layout NHWC (else NCHW) */
};

/* Where and how kernels are queued. */
struct dn_exec {
    cudaStream_t stream;
    int pdl; /* programmatic dependent launch */
};

/* Queues kernel<<<grid, block, smem>>>(args) as x says; 0 or MK_ECUDA naming `name`. */
template <typename... P, typename... A>
int dn_launch(const dn_exec &x, const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
              A... args)
{
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = x.stream;
    cfg.attrs = &attr;
    cfg.numAttrs = x.pdl ? 1 : 0;
    int rc = MK_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
    return rc ? mk_err_wrap(rc, "launch of %s (grid %u x %u x %u, block %u, %zu bytes shared)", name, grid.x, grid.y,
                            grid.z, block.x, smem)
              : 0;
}

/* The network input: float32 planes (row pitch `pitch` bytes, plane p row y at (p * h + y) * pitch) into `dst`.
 * dn_input_retarget points that kernel, captured as `node` of the instantiated graph `exec`, at another source
 * (later launches of the graph read it; launches already queued are not affected). */
int dn_input(const dn_exec &x, const float *src, size_t pitch, const dn_tensor &dst);
int dn_input_retarget(cudaGraphExec_t exec, cudaGraphNode_t node, const float *src, size_t pitch,
                      const dn_tensor &dst);

/* out = act2(act(y + bias[c]) + res), or act(y + bias[c]) without `res` (NULL data); out may be y. */
int dn_bias_act(const dn_exec &x, const dn_tensor &y, const float *bias, int act, const dn_tensor *res, int act2,
                const dn_tensor &out);

/* A convolution by our direct kernel (one thread per output element; for depthwise and small convolutions), weights
 * float [filters][c / groups][size][size], with the epilogue in the same kernel: out = act(conv + bias), then with
 * `res` act2(that + res). dn_conv_yolo instead writes the [yolo] layer of act(conv + bias) into `yolo` (float CHW,
 * as dn_yolo); `out` then only gives the convolution's output shape. */
int dn_conv(const dn_exec &x, const dn_tensor &in, const float *weights, const float *bias, int size, int stride,
            int pad, int groups, int act, const dn_tensor *res, int act2, const dn_tensor &out);
int dn_conv_yolo(const dn_exec &x, const dn_tensor &in, const float *weights, const float *bias, int size, int stride,
                 int pad, int groups, int act, int classes, float scale_x_y, float bias_x_y, const dn_tensor &out,
                 float *yolo);

/* Darknet's maxpool: window of output (x, y) at x * stride - pad / 2 + 0..size-1; inputs outside are skipped. */
int dn_maxpool(const dn_exec &x, const dn_tensor &in, int size, int stride, int pad, const dn_tensor &out);

/* Route: out's channels are, in order, the channels of each input (dn_src: a slice of a tensor of out's type and
 * layout, possibly through an upsampling or a maxpool). */
struct dn_route_args {
    int n;
    dn_src in[MK_NET_MAX_ROUTE];
};
int dn_route(const dn_exec &x, const dn_route_args &args, const dn_tensor &out);

/* out = act(a + b), all of one shape and layout. */
int dn_shortcut(const dn_exec &x, const dn_tensor &a, const dn_tensor &b, int act, const dn_tensor &out);

/* Nearest upsampling by `stride`, times `scale`. */
int dn_upsample(const dn_exec &x, const dn_tensor &in, int stride, float scale, const dn_tensor &out);

/* The [yolo] layer into float32 CHW (Darknet's layout) `out` (c * h * w floats): x, y: logistic * scale_x_y +
 * bias_x_y; w, h: as they are; objectness and classes: logistic. With `bias` non-NULL, `in` is the raw output of
 * the convolution before the layer and act(in + bias[c]) is taken first (the convolution's epilogue fused in). */
int dn_yolo(const dn_exec &x, const dn_tensor &in, const float *bias, int act, int classes, float scale_x_y,
            float bias_x_y, float *out);

#endif
