/* backend: the entry points each op provides once per backend. MK_OP declares an op's CPU and CUDA
 * implementations from one parameter list, so that both always share name stem and signature. The CUDA ones exist
 * only in CUDA builds (MK_HAVE_CUDA); the dispatch layer (kernels/<op>.c) validates arguments before calling. */
#ifndef MK_BACKEND_H
#define MK_BACKEND_H

#include "composite.h"
#include "ctx_internal.h"
#include "darknet.h"
#include "grabcut.h"
#include "guided.h"
#include "guided_px.h"
#include "jpeg_gpu.h"
#include "letterbox.h"
#include "mask.h"
#include "resize.h"
#include "shape.h"
#include "shape_px.h"
#include "threshold.h"
#include "yolo.h"
#include "yuyv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MK_OP(name, params)                                                                                    \
    int name##_cpu params;                                                                                     \
    int name##_cuda params;

MK_OP(mk_letterbox, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, const mk_letterbox_t *lb))
MK_OP(mk_threshold, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int thresh, int maxval,
                     mk_thresh_mode_t mode))
MK_OP(mk_threshold_otsu, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int maxval,
                          mk_thresh_mode_t mode, int *thresh_out))
MK_OP(mk_histogram, (mk_ctx_t *ctx, const mk_image_t *src, uint32_t hist[256]))
/* Darknet networks (darknet_internal.h says what each hook must do). */
MK_OP(mk_net_prepare, (mk_ctx_t *ctx, mk_net_t *net))
MK_OP(mk_net_forward, (mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *input))
/* max_out arrives already limited by top_k, and is at least 1. */
MK_OP(mk_yolo_detect, (mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers, const mk_letterbox_t *lb,
                       const mk_yolo_params_t *p, mk_detection_t *out, int max_out, int *n_out))
/* The mask's product (soft, alpha, binary; Otsu as alpha) at its place in dst, zero elsewhere in dst. */
MK_OP(mk_mask_compose, (mk_ctx_t *ctx, const mk_image_t *soft, mk_image_t *dst, const mk_mask_t *m))
/* The (fast) guided filter of a checked plan, its output written as mk_mask_compose would write it. */
MK_OP(mk_guided_upsample, (mk_ctx_t *ctx, const mk_image_t *guide, const mk_image_t *mask, mk_image_t *dst,
                           const mk_guided_plan_t *pl, const mk_mask_t *m))
MK_OP(mk_yuyv_to_rgb, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst))
MK_OP(mk_downsample_area, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int s))
MK_OP(mk_resize_bilinear, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst))
MK_OP(mk_composite, (mk_ctx_t *ctx, const mk_image_t *frame, const mk_image_t *alpha, const mk_image_t *bg,
                     mk_image_t *out))
MK_OP(mk_blur, (mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int r))
/* The rounded box of a checked plan, written over the whole of dst (u8 or f32 gray). */
MK_OP(mk_shape_fill, (mk_ctx_t *ctx, mk_image_t *dst, const mk_rbox_plan_t *p))
/* GrabCut (grabcut.h); the dispatch layer has checked the images, the parameters and the graph's geometry, and
 * turned a rectangle into the mask's labels before calling mk_grabcut_*. */
MK_OP(mk_maxflow_grid, (mk_ctx_t *ctx, const mk_grid_graph_t *g, mk_image_t *cut, mk_maxflow_stats_t *stats))
MK_OP(mk_grabcut, (mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_params_t *p,
                   mk_gc_model_t *model, mk_gc_stats_t *stats))
/* learnt NULL: mk_grabcut_cut; else mk_grabcut_cut_learn. */
MK_OP(mk_grabcut_cut, (mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                       const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats))
MK_OP(mk_grabcut_binary, (mk_ctx_t *ctx, const mk_image_t *labels, mk_image_t *dst))

#undef MK_OP

void mk_net_release_cpu(mk_ctx_t *ctx, mk_net_t *net);
void mk_net_release_cuda(mk_ctx_t *ctx, mk_net_t *net);
/* CUDA networks, for tests and measurements (kernels/cuda/darknet_cuda.cu): mk_net_cuda_set_graph() makes later
 * passes replay the CUDA graph (on; captured now if it does not exist yet) or launch layer by layer (off).
 * mk_net_cuda_layer_read() copies layer i's output of the last pass into dst (out_c * out_h * out_w floats, CHW),
 * converting from FP16 / NHWC, and synchronises; MK_ESTATE when that output was not kept (a later layer reused
 * its buffer, or it was fused into a later layer: load with MASKD_NET_DEBUG=1 to keep every output). */
int mk_net_cuda_set_graph(mk_net_t *net, int on);
int mk_net_cuda_layer_read(mk_net_t *net, int i, float *dst);
/* The implementation chosen at load for convolution layer i ("cudnn", "direct", "small", "dw4", "gemm64x64.s3",
 * "dwpw32x64"; "fused" for a depthwise layer computed inside the dwpw kernel of the layer after it); MK_EINVAL for
 * a layer that is not a convolution. */
int mk_net_cuda_conv_impl(mk_net_t *net, int i, char *name, size_t len);
/* 1 when the network holds a cuDNN handle (some convolution may use cuDNN), 0 when not, MK_EINVAL when it is not a
 * network on a CUDA context. */
int mk_net_cuda_has_cudnn(const mk_net_t *net);

/* Checks a guided call's parameters and fills its plan (kernels/guided.c). */
int mk_guided_plan(const mk_guided_t *g, int C, int w, int h, mk_guided_plan_t *pl);
/* After a backend wrote the alpha of an Otsu mask: binarises its w x h region at Otsu's threshold (kernels/mask.c). */
int mk_mask_finish(mk_ctx_t *ctx, mk_image_t *dst, const mk_mask_t *m, int w, int h);

/* CUDA runtime services for the context and images (kernels/cuda/ctx_cuda.cu). */
int mk_cuda_probe(char *why, size_t why_len);
/* mk_gpu_lost of the CUDA backend. */
int mk_cuda_lost(char *why, size_t why_len);
int mk_cuda_ctx_init(mk_ctx_t *ctx);
void mk_cuda_ctx_fini(mk_ctx_t *ctx);
int mk_cuda_sync(mk_ctx_t *ctx);
/* mk_ctx_wait on two CUDA contexts. */
int mk_cuda_wait(mk_ctx_t *waiter, mk_ctx_t *signaller);
int mk_cuda_alloc(mk_ctx_t *ctx, size_t bytes, mk_mem_t mem, void **ptr);
void mk_cuda_free(mk_ctx_t *ctx, void *ptr, mk_mem_t mem);
/* cudaMemcpy2DAsync with the direction inferred from the pointers (unified addressing). */
int mk_cuda_copy2d(mk_ctx_t *ctx, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width_bytes,
                   size_t rows);
int mk_cuda_memset2d(mk_ctx_t *ctx, void *ptr, size_t pitch, int value, size_t width_bytes, size_t rows);
int mk_cuda_time_us(mk_ctx_t *ctx, int (*fn)(void *arg), void *arg, double *us);
int mk_cuda_copy_gbps(mk_ctx_t *ctx, size_t bytes, int reps, double *gbps);
int mk_cuda_device_memory(mk_ctx_t *ctx, size_t *free_bytes, size_t *total_bytes);

/* nvJPEG (jpeg_gpu.h, kernels/cuda/jpeg_gpu_cuda.cu); jpeg_gpu.c checks the arguments and probes the backends.
 * load: opens libnvjpeg once per process (0, or MK_EUNSUPPORTED with the same message every call); library: what
 * was opened, "" before; open: a decoder with exactly that backend (not AUTO), unprobed. */
int mk_jpeg_gpu_load_cuda(void);
const char *mk_jpeg_gpu_library_cuda(void);
int mk_jpeg_gpu_open_cuda(mk_jpeg_gpu_backend_t backend, mk_jpeg_gpu_t **out);
void mk_jpeg_gpu_close_cuda(mk_jpeg_gpu_t *g);
mk_jpeg_gpu_backend_t mk_jpeg_gpu_backend_cuda(const mk_jpeg_gpu_t *g);
int mk_jpeg_gpu_decode_cuda(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, mk_image_t *dst);

#ifdef __cplusplus
}
#endif
#endif
