/* threshold: fixed-level and Otsu binarisation of u8 single-channel images, as cv::threshold.
 *
 * For a source value v and threshold t (OpenCV's five types):
 *   binary:     v > t ? maxval : 0          binary-inv: v > t ? 0 : maxval
 *   trunc:      v > t ? t : v               tozero:     v > t ? v : 0          tozero-inv: v > t ? 0 : v
 * Otsu's t is the one cv::threshold(THRESH_OTSU) picks: the same histogram and the same double-precision
 * between-class-variance recurrence, the first maximum winning. On the CUDA backend it is chosen on the device
 * and never leaves it unless asked for. */
#ifndef MK_THRESHOLD_H
#define MK_THRESHOLD_H

#include "image.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_THRESH_BINARY = 0,
    MK_THRESH_BINARY_INV = 1,
    MK_THRESH_TRUNC = 2,
    MK_THRESH_TOZERO = 3,
    MK_THRESH_TOZERO_INV = 4,
} mk_thresh_mode_t;

const char *mk_thresh_mode_name(mk_thresh_mode_t mode);
/* "binary" | "binary-inv" | "trunc" | "tozero" | "tozero-inv". */
int mk_thresh_mode_parse(const char *s, mk_thresh_mode_t *out);

/* src, dst: u8 gray of one size in the context's memory (dst may be src). thresh and maxval in 0..255. */
int mk_threshold(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int thresh, int maxval,
                 mk_thresh_mode_t mode);
/* As mk_threshold with Otsu's threshold of src. thresh_out (may be NULL) receives it; on the CUDA backend that
 * costs a synchronisation, without it the call only queues work. */
int mk_threshold_otsu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int maxval, mk_thresh_mode_t mode,
                      int *thresh_out);
/* The 256-bin histogram of a u8 gray image, delivered to host memory (synchronises on CUDA). */
int mk_histogram(mk_ctx_t *ctx, const mk_image_t *src, uint32_t hist[256]);
/* Otsu's threshold of a histogram of `total` pixels (OpenCV's getThreshVal_Otsu), on the host. */
int mk_otsu_from_histogram(const uint32_t hist[256], uint64_t total);

#ifdef __cplusplus
}
#endif
#endif
