/* letterbox: planning, the inverse transform, argument checks and backend dispatch. */
#include "letterbox.h"

#include "backend.h"
#include "errors.h"

#include <math.h>
#include <string.h>
#include <strings.h>

const char *mk_letterbox_mode_name(mk_letterbox_mode_t mode)
{
    return mode == MK_LETTERBOX_WARP ? "warp" : mode == MK_LETTERBOX_DARKNET ? "darknet" : "?";
}

int mk_letterbox_mode_parse(const char *s, mk_letterbox_mode_t *out)
{
    if (s && !strcasecmp(s, "warp")) {
        *out = MK_LETTERBOX_WARP;
        return 0;
    }
    if (s && !strcasecmp(s, "darknet")) {
        *out = MK_LETTERBOX_DARKNET;
        return 0;
    }
    return mk_err_set(MK_EINVAL, "unknown letterbox mode '%s' (warp|darknet)", s ? s : "(null)");
}

/* The seed's AffineMatrix::compute, in its float/double mix, then cv::warpAffine's inversion in double. */
static void plan_warp(mk_letterbox_t *lb)
{
    float scale_x = (float)lb->dst_w / (float)lb->src_w, scale_y = (float)lb->dst_h / (float)lb->src_h;
    float s = scale_x < scale_y ? scale_x : scale_y;
    lb->m[0] = s;
    lb->m[1] = 0;
    lb->m[2] = (float)((double)(-s * (float)lb->src_w) * 0.5 + lb->dst_w * 0.5 + (double)s * 0.5 - 0.5);
    lb->m[3] = 0;
    lb->m[4] = s;
    lb->m[5] = (float)((double)(-s * (float)lb->src_h) * 0.5 + lb->dst_h * 0.5 + (double)s * 0.5 - 0.5);

    double m[6];
    for (int i = 0; i < 6; i++)
        m[i] = lb->m[i];
    double d = m[0] * m[4] - m[1] * m[3];
    d = d != 0 ? 1. / d : 0;
    double a11 = m[4] * d, a22 = m[0] * d;
    m[0] = a11;
    m[1] *= -d;
    m[3] *= -d;
    m[4] = a22;
    double b1 = -m[0] * m[2] - m[1] * m[5];
    double b2 = -m[3] * m[2] - m[4] * m[5];
    m[2] = b1;
    m[5] = b2;
    memcpy(lb->inv, m, sizeof m);

    lb->fill = 114.0f / 255.0f;
    lb->new_w = (int)lrint(s * lb->src_w);
    lb->new_h = (int)lrint(s * lb->src_h);
    lb->new_w = lb->new_w > lb->dst_w ? lb->dst_w : lb->new_w;
    lb->new_h = lb->new_h > lb->dst_h ? lb->dst_h : lb->new_h;
    lb->pad_x = (lb->dst_w - lb->new_w) / 2;
    lb->pad_y = (lb->dst_h - lb->new_h) / 2;
    lb->sx = lb->inv[0];
    lb->tx = lb->inv[2];
    lb->sy = lb->inv[4];
    lb->ty = lb->inv[5];
}

/* Darknet's letterbox_image sizes (integer arithmetic as there) and resize_image's scales. */
static int plan_darknet(mk_letterbox_t *lb)
{
    int w = lb->dst_w, h = lb->dst_h, iw = lb->src_w, ih = lb->src_h;
    if ((float)w / iw < (float)h / ih) {
        lb->new_w = w;
        lb->new_h = (int)(((long long)ih * w) / iw);
    } else {
        lb->new_h = h;
        lb->new_w = (int)(((long long)iw * h) / ih);
    }
    if (lb->new_w < 1 || lb->new_h < 1)
        return mk_err_set(MK_ERANGE, "letterbox %dx%d -> %dx%d: the scaled image would be %dx%d pixels", iw, ih, w,
                          h, lb->new_w, lb->new_h);
    lb->pad_x = (w - lb->new_w) / 2;
    lb->pad_y = (h - lb->new_h) / 2;
    /* Darknet divides by zero for a 1-pixel target and never uses the result, except 0 * inf for a 1-row one. */
    lb->w_scale = lb->new_w > 1 ? (float)(iw - 1) / (float)(lb->new_w - 1) : 0.0f;
    lb->h_scale = lb->new_h > 1 ? (float)(ih - 1) / (float)(lb->new_h - 1) : 0.0f;
    lb->fill = 0.5f;
    lb->sx = (double)iw / lb->new_w;
    lb->tx = (double)(lb->new_w - w) / 2.0 * lb->sx;
    lb->sy = (double)ih / lb->new_h;
    lb->ty = (double)(lb->new_h - h) / 2.0 * lb->sy;
    return 0;
}

int mk_letterbox_plan(mk_letterbox_t *lb, int src_w, int src_h, int dst_w, int dst_h, mk_letterbox_mode_t mode)
{
    if (!lb)
        return mk_err_set(MK_EINVAL, "mk_letterbox_plan: NULL plan");
    memset(lb, 0, sizeof *lb);
    if (src_w < 1 || src_h < 1 || src_w > MK_IMAGE_MAX_DIM || src_h > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "letterbox source size %dx%d outside 1..%d", src_w, src_h, MK_IMAGE_MAX_DIM);
    if (dst_w < 1 || dst_h < 1 || dst_w > MK_IMAGE_MAX_DIM || dst_h > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "letterbox target size %dx%d outside 1..%d", dst_w, dst_h, MK_IMAGE_MAX_DIM);
    lb->mode = mode;
    lb->src_w = src_w;
    lb->src_h = src_h;
    lb->dst_w = dst_w;
    lb->dst_h = dst_h;
    switch (mode) {
    case MK_LETTERBOX_WARP: plan_warp(lb); return 0;
    case MK_LETTERBOX_DARKNET: return plan_darknet(lb);
    }
    return mk_err_set(MK_EINVAL, "unknown letterbox mode %d", (int)mode);
}

void mk_letterbox_to_src(const mk_letterbox_t *lb, double x_net, double y_net, double *x_src, double *y_src)
{
    *x_src = x_net * lb->sx + lb->tx;
    *y_src = y_net * lb->sy + lb->ty;
}

void mk_letterbox_to_net(const mk_letterbox_t *lb, double x_src, double y_src, double *x_net, double *y_net)
{
    *x_net = (x_src - lb->tx) / lb->sx;
    *y_net = (y_src - lb->ty) / lb->sy;
}

void mk_letterbox_box_to_src(const mk_letterbox_t *lb, float box[4])
{
    double x0, y0, x1, y1;
    mk_letterbox_to_src(lb, box[0], box[1], &x0, &y0);
    mk_letterbox_to_src(lb, (double)box[0] + box[2], (double)box[1] + box[3], &x1, &y1);
    box[0] = (float)x0;
    box[1] = (float)y0;
    box[2] = (float)(x1 - x0);
    box[3] = (float)(y1 - y0);
}

int mk_letterbox(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, mk_letterbox_mode_t mode,
                 mk_letterbox_t *plan)
{
    int rc;
    mk_letterbox_t lb;
    if (!ctx)
        return mk_err_set(MK_EINVAL, "letterbox: NULL context");
    if ((rc = mk_image_check(src, "letterbox source")) || (rc = mk_image_check(dst, "letterbox output")))
        return rc;
    if (src->dtype != MK_U8 ||
        (src->format != MK_FMT_BGR && src->format != MK_FMT_RGB && src->format != MK_FMT_YUYV))
        return mk_err_set(MK_EINVAL, "letterbox source must be u8 bgr, rgb or yuyv, not %s %s",
                          mk_dtype_name(src->dtype), mk_format_name(src->format));
    if (dst->dtype != MK_F32 || dst->format != MK_FMT_PLANAR || dst->channels != 3)
        return mk_err_set(MK_EINVAL, "letterbox output must be f32 planar with 3 planes, not %s %s x%d",
                          mk_dtype_name(dst->dtype), mk_format_name(dst->format), dst->channels);
    if (src->mem != mk_ctx_mem(ctx) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "letterbox on %s needs %s images (source in %s, output in %s memory)",
                          mk_backend_name(ctx->backend), mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem),
                          mk_mem_name(dst->mem));
    if ((rc = mk_letterbox_plan(&lb, src->width, src->height, dst->width, dst->height, mode)))
        return rc;
    if (plan)
        *plan = lb;
    if (ctx->backend == MK_BACKEND_CUDA) {
#ifdef MK_HAVE_CUDA
        return mk_letterbox_cuda(ctx, src, dst, &lb);
#endif
    }
    return mk_letterbox_cpu(ctx, src, dst, &lb);
}
