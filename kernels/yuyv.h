/* yuyv: packed YUYV 4:2:2 -> RGB24 or BGR24, as cv::cvtColor(COLOR_YUV2RGB_YUYV / COLOR_YUV2BGR_YUYV).
 *
 * BT.601 limited range (Y in 16..235, U and V in 16..240 centred on 128), in OpenCV's 20-bit fixed point
 * (letterbox_px.h, mk_px_yuv_to_rgb): R = 1.164 (Y-16) + 1.596 (V-128), G = 1.164 (Y-16) - 0.391 (U-128)
 * - 0.813 (V-128), B = 1.164 (Y-16) + 2.018 (U-128), each rounded and saturated to 0..255; Y below 16 counts as 16.
 * Each pixel pair (Y0 U Y1 V) shares its U and V (no chroma interpolation). The CPU and CUDA backends give the same
 * bytes. The device letterbox reads YUYV directly; this op is for consumers that need RGB pixels. */
#ifndef MK_YUYV_H
#define MK_YUYV_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* src: u8 YUYV (even width); dst: u8 RGB or BGR of the same size; both in the context's memory, any pitch. */
int mk_yuyv_to_rgb(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst);

#ifdef __cplusplus
}
#endif
#endif
