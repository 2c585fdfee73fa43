/* letterbox: source frame (BGR24, RGB24 or YUYV, any size and pitch) -> network input (float32 CHW RGB in [0,1]),
 * aspect kept and centred, in one fused pass; and the inverse transform that maps boxes back to the source.
 *
 * Two modes:
 *  - MK_LETTERBOX_WARP: the seed's affine warp. Equal, byte for byte before the /255, to
 *    cv2.warpAffine(src, M, (W, H), INTER_LINEAR, BORDER_CONSTANT, 114) where M is the seed's AffineMatrix::i2d
 *    (scale s = min(W/w, H/h), tx = -s*w/2 + W/2 + s/2 - 1/2: pixel centres aligned), computed in float as the
 *    seed does. OpenCV 4's fixed-point arithmetic (1/32-pixel coordinates, 15-bit weights) is reproduced exactly
 *    (checked against OpenCV 4.6); OpenCV 5.0's float warpAffine differs from it by up to 2/255 on photos.
 *  - MK_LETTERBOX_DARKNET: Darknet's letterbox_image (resize_image's separable corner-aligned bilinear in float,
 *    embedded at ((W-new_w)/2, (H-new_h)/2) in an image filled with 0.5), bit for bit.
 * A YUYV source behaves as if first converted with cv::cvtColor(COLOR_YUV2RGB_YUYV) (BT.601 limited range). */
#ifndef MK_LETTERBOX_H
#define MK_LETTERBOX_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_LETTERBOX_WARP = 0,
    MK_LETTERBOX_DARKNET = 1,
} mk_letterbox_mode_t;

/* Everything a letterbox of one geometry needs; filled by mk_letterbox_plan(). */
typedef struct {
    mk_letterbox_mode_t mode;
    int src_w, src_h, dst_w, dst_h;
    /* The scaled image inside the network input: columns pad_x..pad_x+new_w-1, rows pad_y..pad_y+new_h-1. */
    int new_w, new_h, pad_x, pad_y;
    float fill;     /* value of the padding: 114/255 (warp) or 0.5 (darknet) */
    float m[6];     /* warp: the seed's source->network matrix in float (net = m * src at pixel centres) */
    double inv[6];  /* warp: its inverse, computed in double as cv::warpAffine does */
    float w_scale, h_scale; /* darknet: resize_image's (src-1)/(new-1) scales */
    /* network -> source coordinates (continuous, pixel units), used for points and boxes:
     * x_src = x_net * sx + tx, y_src = y_net * sy + ty. warp: the inverse matrix (as the seed's postprocess);
     * darknet: correct_yolo_boxes' letterbox correction scaled to source pixels. */
    double sx, tx, sy, ty;
} mk_letterbox_t;

const char *mk_letterbox_mode_name(mk_letterbox_mode_t mode);
/* "warp" | "darknet". */
int mk_letterbox_mode_parse(const char *s, mk_letterbox_mode_t *out);

/* Plans a src_w x src_h -> dst_w x dst_h letterbox. Fails with MK_ERANGE for sizes outside 1..MK_IMAGE_MAX_DIM or
 * when the scaled content would be empty (darknet mode, extreme aspect ratios). */
int mk_letterbox_plan(mk_letterbox_t *lb, int src_w, int src_h, int dst_w, int dst_h, mk_letterbox_mode_t mode);

/* Maps a point between network-input and source coordinates. */
void mk_letterbox_to_src(const mk_letterbox_t *lb, double x_net, double y_net, double *x_src, double *y_src);
void mk_letterbox_to_net(const mk_letterbox_t *lb, double x_src, double y_src, double *x_net, double *y_net);
/* Maps a box (x, y = top-left corner, w, h) from the network input to source pixels, in place. */
void mk_letterbox_box_to_src(const mk_letterbox_t *lb, float box[4]);

/* src: u8 BGR, RGB or YUYV in the context's memory. dst: f32 planar with 3 planes (R, G, B), of the network size,
 * in the context's memory; any pitch. `plan` (may be NULL) receives the plan used. */
int mk_letterbox(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, mk_letterbox_mode_t mode,
                 mk_letterbox_t *plan);

#ifdef __cplusplus
}
#endif
#endif
