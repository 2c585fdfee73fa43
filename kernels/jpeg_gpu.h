/* jpeg_gpu: JPEG decoding on the GPU with nvJPEG (CUDA Toolkit), into host images.
 *
 * libnvjpeg is not linked: the first call opens it at run time (dlopen of $MASKD_NVJPEG_LIB when set, else
 * libnvjpeg.so.13, libnvjpeg.so, then the same names in the CUDA toolkit's library folder of the build), so that
 * the program builds and runs where the toolkit has no nvJPEG; everything here then fails with a message saying
 * why. Builds without the CUDA backend have only those failures (MK_EUNSUPPORTED).
 *
 * A decoder holds an nvJPEG handle and decoding state, a CUDA stream and a device buffer for the decoded pixels
 * (grown as needed). mk_jpeg_gpu_decode() decodes on the GPU into that buffer (interleaved RGB or BGR), copies it
 * into the host image and waits for the copy. The output is nvJPEG's: its IDCT and chroma upsampling round
 * differently from libjpeg-turbo's, so pixels differ from TurboJPEG's by a few levels (tests/test_decode.c measures
 * it). nvJPEG checks less than TurboJPEG's strict mode: a frame whose entropy-coded data is damaged may decode
 * (with damaged pixels) instead of failing.
 *
 * Backends: `hardware` (the GPU's JPEG engine, A100/H100 and later, through the batched API with batches of one),
 * `hybrid` (Huffman decoding on the calling CPU thread, the rest on the GPU) and `gpu_hybrid` (Huffman decoding
 * on the GPU). MK_JPEG_GPU_AUTO takes the first of hardware, hybrid, gpu_hybrid that opens and decodes a small
 * probe image (encoded here with TurboJPEG) to within a few levels of TurboJPEG's pixels in RGB and BGR order —
 * a check that nvJPEG and our declarations of it (kernels/cuda/nvjpeg_api.h) agree.
 *
 * Thread rules: a decoder is used by one thread at a time (nvJPEG's decoding state is not thread-safe); several
 * decoders may be used at once from different threads. Every failure is an error code with a message
 * (errors.h), never a crash; a decoder whose decode failed stays usable. */
#ifndef MK_JPEG_GPU_H
#define MK_JPEG_GPU_H

#include "image.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_jpeg_gpu mk_jpeg_gpu_t;

typedef enum {
    MK_JPEG_GPU_AUTO = 0, /* create: the first that works of hardware, hybrid, gpu_hybrid */
    MK_JPEG_GPU_HARDWARE = 1,
    MK_JPEG_GPU_HYBRID = 2,
    MK_JPEG_GPU_GPU_HYBRID = 3,
} mk_jpeg_gpu_backend_t;

/* 1 when libnvjpeg opens and a usable CUDA device exists, else 0 with the reason in `why` (may be NULL). */
int mk_jpeg_gpu_available(char *why, size_t why_len);
/* The library opened ("libnvjpeg.so.13, nvJPEG 13.0.1"), or "" before the first successful open. */
const char *mk_jpeg_gpu_library(void);

/* A decoder on CUDA device 0 with `backend` (checked with the probe image). MK_EUNSUPPORTED (no CUDA backend in
 * this build, libnvjpeg missing, the backend not supported by the GPU), MK_ENODEV (no usable device), MK_ECUDA,
 * MK_ENOMEM; the message says which backends were tried and why each failed. */
int mk_jpeg_gpu_create(mk_jpeg_gpu_backend_t backend, mk_jpeg_gpu_t **out);
/* NULL is a no-op. */
void mk_jpeg_gpu_destroy(mk_jpeg_gpu_t *g);
/* The backend in use (never MK_JPEG_GPU_AUTO). */
mk_jpeg_gpu_backend_t mk_jpeg_gpu_backend(const mk_jpeg_gpu_t *g);
/* "nvjpeg-hardware", "nvjpeg-hybrid", "nvjpeg-gpu-hybrid"; "nvjpeg" for AUTO. */
const char *mk_jpeg_gpu_backend_name(mk_jpeg_gpu_backend_t b);

/* Decodes `len` bytes of JPEG into dst: a host (plain or page-locked) u8 RGB or BGR image whose size must be the
 * JPEG's (any pitch). MK_EFORMAT for data nvJPEG cannot read or decode (or of another size), MK_EUNSUPPORTED for a
 * JPEG it does not support (the backend's limits, CMYK), MK_ECUDA/MK_ENOMEM for device failures, MK_EINVAL for bad
 * arguments. After a failure dst's pixels are undefined. */
int mk_jpeg_gpu_decode(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, mk_image_t *dst);

#ifdef __cplusplus
}
#endif
#endif
