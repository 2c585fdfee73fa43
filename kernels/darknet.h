/* darknet: a Darknet network (.cfg + .weights, AlexeyAB/pjreddie formats) loaded once and run on a context.
 *
 * Supported cfg sections: [net], [convolutional] (grouped/depthwise included), [maxpool], [route], [shortcut],
 * [upsample], [yolo], [dropout] (a no-op at inference); activations linear, leaky, mish, logistic, relu. Anything
 * else (an unknown or unsupported section or key, a bad number, an out-of-range layer index, a layer whose output
 * would be empty) fails to load with MK_EFORMAT or MK_EUNSUPPORTED and a message "file:line: ...". Keys that
 * only matter for training are accepted and ignored by name. Batch normalisation is folded into the convolution
 * weights at load (as Darknet's fuse_conv_batchnorm does), so the forward pass is conv + bias + activation.
 *
 * Lifecycle: mk_net_load() (cfg parsed, weights read and checked, backend buffers prepared) / mk_net_forward()
 * any number of times / mk_net_destroy(). Results of a forward pass (mk_net_yolo_output) stay valid until the
 * next forward pass or destroy.
 *
 * Thread rules: a network belongs to the context it was loaded on and is used by that context's thread only;
 * forward passes are queued on the context's stream (on CUDA the outputs are ready for later ops on that stream
 * at once, and for the host after mk_ctx_sync()). */
#ifndef MK_DARKNET_H
#define MK_DARKNET_H

#include "ctx.h"
#include "image.h"
#include "yolo.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_net mk_net_t;

typedef struct {
    /* Network input size; 0 keeps the cfg's [net] width/height (Darknet's way of running a network at another
     * size: every layer's shape follows; multiples of 32 keep YOLO's grids aligned). */
    int width, height;
    /* Seed of the deterministic random weights used when no weights file is given (benchmarks, tests). */
    uint64_t seed;
    /* CUDA: run the convolutions in FP16 (tensor cores); yolo outputs stay float32. The CPU backend has no FP16
     * mode and fails the load with MK_EUNSUPPORTED. */
    int fp16;
    /* CUDA: which convolutions may go through cuDNN (MK_NET_CUDNN_*). A cuDNN handle loads its engines and
     * cuBLASLt into the process: ~570 MB more host memory than our kernels alone need. */
    int cudnn;
} mk_net_opts_t;

enum {
    /* cuDNN only for convolutions none of our kernels of the network's precision and layout computes well: an FP16
     * network whose convolutions our NHWC kernels all cover runs without cuDNN (no handle); FP32 networks and other
     * FP16 layers time cuDNN against our kernels and keep the faster. */
    MK_NET_CUDNN_AUTO = 0,
    /* Every convolution times cuDNN against our kernels and keeps the faster; FP16 also tries the NCHW layout. */
    MK_NET_CUDNN_ON = 1,
    /* Never cuDNN: our kernels only (FP16 NHWC, or the direct kernel in FP32, much slower on large networks). */
    MK_NET_CUDNN_OFF = 2,
};

/* Defaults: the cfg's size, seed 1, FP32, MK_NET_CUDNN_AUTO. */
mk_net_opts_t mk_net_opts_default(void);

/* Loads a network on `ctx`. `weights` NULL: deterministic random weights from opts->seed (weights uniform with
 * variance 1/fan_in, random batch-norm statistics, then folded like real ones). `opts` NULL: the defaults. Errors:
 * MK_EIO (unreadable file), MK_EFORMAT (malformed cfg or weights: message names file:line, or expected vs actual
 * bytes), MK_EUNSUPPORTED (a valid Darknet feature this port does not have), MK_ENOMEM, backend errors. */
int mk_net_load(mk_ctx_t *ctx, const char *cfg, const char *weights, const mk_net_opts_t *opts, mk_net_t **out);
/* Frees the network and its backend buffers; NULL is a no-op. */
void mk_net_destroy(mk_net_t *net);

/* The input the network takes: `channels` planes of `height` x `width` float32 (RGB in [0,1] for YOLO). */
void mk_net_input_dims(const mk_net_t *net, int *channels, int *height, int *width);
/* A descriptor (no data) for that input: F32 PLANAR of the network's size. */
mk_image_t mk_net_input_desc(const mk_net_t *net);

/* Runs the network on `input` (F32 PLANAR, the network's channels and size, any pitch, in the context's memory:
 * host for CPU, device for CUDA). */
int mk_net_forward(mk_net_t *net, const mk_image_t *input);

/* Number of [yolo] layers, in cfg order. */
int mk_net_yolo_count(const mk_net_t *net);
/* The k-th [yolo] layer's metadata and output of the last forward pass (data NULL before the first). */
int mk_net_yolo_output(const mk_net_t *net, int k, mk_yolo_layer_t *out);

/* Copies the k-th yolo output of the last forward pass into host memory (`count` floats: exactly
 * n * (5 + classes) * h * w), waiting for the pass to finish. */
int mk_net_yolo_read(mk_net_t *net, int k, float *dst, size_t count);

/* Number of cfg layers (sections after [net]) and the multiply-adds of one forward pass times 2 (Darknet's
 * "BFLOPS" x 1e9, convolutions only). */
int mk_net_layer_count(const mk_net_t *net);
double mk_net_flops(const mk_net_t *net);

#ifdef __cplusplus
}
#endif
#endif
