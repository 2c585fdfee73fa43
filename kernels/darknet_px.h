/* darknet_px: Darknet's activation functions and yolo-layer arithmetic, shared by the CPU reference and the CUDA
 * kernels. The formulas are AlexeyAB Darknet's (activations.h, forward_yolo_layer), written the same way so that
 * both backends stay within float rounding of the reference outputs (expf/logf differ in the last ulp between the
 * host libm and CUDA, so parity is to a tolerance, not bit-exact). */
#ifndef MK_DARKNET_PX_H
#define MK_DARKNET_PX_H

#include "darknet_internal.h"
#include "px.h"

MK_PX float mk_px_logistic(float x)
{
    return 1.f / (1.f + expf(-x));
}

MK_PX float mk_px_leaky(float x)
{
    return x > 0 ? x : .1f * x;
}

MK_PX float mk_px_relu(float x)
{
    return x * (float)(x > 0);
}

/* Darknet's tanh_activate: 2 / (1 + e^-2x) - 1. */
MK_PX float mk_px_dn_tanh(float x)
{
    return 2.f / (1.f + expf(-2.f * x)) - 1.f;
}

/* Darknet's softplus_activate with MISH_THRESHOLD = 20. */
MK_PX float mk_px_softplus(float x)
{
    if (x > 20.f)
        return x;
    if (x < -20.f)
        return expf(x);
    return logf(expf(x) + 1.f);
}

MK_PX float mk_px_mish(float x)
{
    return x * mk_px_dn_tanh(mk_px_softplus(x));
}

MK_PX float mk_px_activate(float x, int act)
{
    switch (act) {
    case MK_ACT_LEAKY: return mk_px_leaky(x);
    case MK_ACT_MISH: return mk_px_mish(x);
    case MK_ACT_LOGISTIC: return mk_px_logistic(x);
    case MK_ACT_RELU: return mk_px_relu(x);
    default: return x;
    }
}

/* A yolo layer's x or y entry: logistic, then scal_add_cpu(scale_x_y, bias_x_y). */
MK_PX float mk_px_yolo_xy(float v, float scale_x_y, float bias_x_y)
{
    return mk_px_logistic(v) * scale_x_y + bias_x_y;
}

#endif
