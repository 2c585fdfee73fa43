/* decode: turns source frames into host images on a small pool of worker threads, in the order they were
 * submitted. MJPEG frames are decoded with libjpeg-turbo (TurboJPEG: accurate integer DCT, fancy upsampling) to
 * RGB or BGR, with the standard Huffman tables inserted when a frame has none (mjpeg.h); raw frames are copied
 * through unchanged (YUYV for the device letterbox) or, with `raw_to_rgb`, YUYV is converted on the CPU
 * (mk_yuyv_to_rgb: BT.601 limited range, kernels/yuyv.h).
 *
 * GPU decoding (`decoder`): with MK_DECODER_NVJPEG or MK_DECODER_AUTO each worker gets its own nvJPEG decoder
 * (kernels/jpeg_gpu.h: the GPU's JPEG engine where it has one, else nvJPEG's hybrid backend) when libnvjpeg opens
 * and a CUDA device is usable; otherwise the pool decodes on the CPU, saying why in one log line (a warning when
 * nvJPEG was asked for by name, information for AUTO) — it never fails for it. The Huffman tables are inserted and
 * TurboJPEG's header checks and size limits apply first either way. A frame nvJPEG fails on, and a frame cut short
 * (no EOI after a sound structure: mk_mjpeg_split), is decoded by TurboJPEG instead, with its strict checks, and
 * counted in `gpu_fallbacks`. nvJPEG's pixels differ from TurboJPEG's by a few levels (IDCT and chroma upsampling),
 * and it checks less: a frame whose entropy-coded data is damaged but complete may come out (damaged) instead of
 * being counted corrupt.
 *
 * Order and failures: frames come out of mk_decode_next() in submission order. A frame that cannot be decoded
 * (corrupt or truncated JPEG, a warning from the decoder in strict mode, a size outside 1..MK_IMAGE_MAX_DIM) is
 * counted in `corrupt`, logged (rate-limited) and skipped — never returned, never fatal, never reordering the rest.
 *
 * Queue: at most `depth` frames are inside the pool at once — submitted and not yet taken, being decoded, or
 * taken and not yet released. mk_decode_submit() copies the frame's bytes (so the source frame can be released
 * at once) and waits up to its timeout for room; with timeout 0 the caller sees a full pool at once
 * (MK_DECODE_AGAIN) and can drop the frame instead of falling behind.
 *
 * Thread rules: one producer thread calls submit and finish, one consumer thread calls next and release (they may
 * be the same thread); stats may be read from any thread. Output images belong to the pool until released. */
#ifndef MK_DECODE_H
#define MK_DECODE_H

#include "ctx.h"
#include "image.h"
#include "source.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_decode mk_decode_t;

/* Statuses of mk_decode_submit() / mk_decode_next() (errors are negative). */
enum {
    MK_DECODE_OK = 0,
    MK_DECODE_AGAIN = 1, /* submit: the pool stayed full; next: no frame ready within the timeout */
    MK_DECODE_EOS = 2,   /* next: mk_decode_finish() was called and every frame has come out */
};

/* MJPEG decoder of the pool (the option pipeline.decoder: config's MK_CFG_DECODER_* are these). */
typedef enum {
    MK_DECODER_AUTO = 0,   /* nvJPEG when it opens and a CUDA device is usable, else TurboJPEG */
    MK_DECODER_CPU = 1,    /* TurboJPEG on the worker threads */
    MK_DECODER_NVJPEG = 2, /* nvJPEG; TurboJPEG with a warning when it is unavailable */
} mk_decoder_t;

/* "auto", "cpu", "nvjpeg". */
const char *mk_decoder_name(mk_decoder_t d);
/* The decoder a program computing on `backend` uses for the configured `want`: AUTO becomes CPU unless the
 * backend is CUDA (a daemon told to compute on the CPU leaves the GPU alone); CPU and NVJPEG stay. */
mk_decoder_t mk_decoder_for_backend(mk_decoder_t want, mk_backend_t backend);

typedef struct {
    int threads;       /* worker threads, 1..16 (2); one when nvJPEG decodes (see `decoder`) */
    int depth;         /* frames inside the pool at once, 1..64 (2 * threads + 2) */
    mk_format_t format; /* MJPEG output: MK_FMT_RGB (default) or MK_FMT_BGR */
    int raw_to_rgb;    /* 1: YUYV frames are converted to `format`; 0 (default): raw frames pass through */
    int strict;        /* 1 (default): a decoder warning (corrupt data, premature end) makes the frame corrupt */
    int pinned;        /* 1: output images in page-locked host memory, so that a CUDA engine uploads them at DMA
                        * speed (CUDA builds with a device; otherwise, and by default, plain host memory) */
    mk_decoder_t decoder; /* MK_DECODER_CPU (the default, as pipeline.decoder's) */
} mk_decode_config_t;

void mk_decode_config_init(mk_decode_config_t *cfg);

typedef struct {
    uint64_t seq;       /* from the source frame */
    int64_t capture_ns;
    uint32_t flags;
    uint32_t dropped;
    mk_image_t image;   /* host u8: RGB/BGR (decoded or converted) or the raw frame's format; owned by the pool */
    int slot_;          /* private */
} mk_decoded_t;

typedef struct {
    uint64_t submitted;
    uint64_t decoded;   /* MJPEG frames decoded */
    uint64_t passed;    /* raw frames passed through or converted */
    uint64_t corrupt;   /* frames skipped as undecodable */
    uint64_t dht_added; /* frames that lacked Huffman tables */
    uint64_t rejected;  /* submits refused because the pool was full (MK_DECODE_AGAIN) */
    uint64_t gpu_decoded;   /* of `decoded`: by nvJPEG */
    uint64_t gpu_fallbacks; /* MJPEG frames nvJPEG was to decode that went to TurboJPEG (nvJPEG failed or the frame
                             * is cut short); each also counts in `decoded` or `corrupt` */
} mk_decode_stats_t;

int mk_decode_create(const mk_decode_config_t *cfg, mk_decode_t **out);
/* Stops the workers and frees everything; images not yet released become invalid. NULL is a no-op. */
void mk_decode_destroy(mk_decode_t *dec);

/* Copies `frame` into the pool. MK_DECODE_AGAIN if the pool stayed full for timeout_ms (< 0: wait as long as
 * needed); MK_ESTATE after mk_decode_finish(); MK_EINVAL for a frame the pool cannot take. */
int mk_decode_submit(mk_decode_t *dec, const mk_frame_t *frame, int timeout_ms);
/* The next frame in submission order, skipping corrupt ones. MK_DECODE_AGAIN when none is ready within
 * timeout_ms (< 0: wait as long as needed), MK_DECODE_EOS after finish once everything has come out. */
int mk_decode_next(mk_decode_t *dec, int timeout_ms, mk_decoded_t *out);
/* Gives an output back to the pool. MK_EINVAL if it is not a held output of this pool. */
int mk_decode_release(mk_decode_t *dec, mk_decoded_t *out);
/* No more input: mk_decode_next() returns MK_DECODE_EOS once the pool has drained. */
void mk_decode_finish(mk_decode_t *dec);
void mk_decode_stats(mk_decode_t *dec, mk_decode_stats_t *st);
/* The MJPEG decoder in use: "cpu" or the nvJPEG backend ("nvjpeg-hardware", "nvjpeg-hybrid",
 * "nvjpeg-gpu-hybrid"). Valid for the life of the pool. */
const char *mk_decode_decoder(const mk_decode_t *dec);

#ifdef __cplusplus
}
#endif
#endif
