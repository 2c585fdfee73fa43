/* threshold_px: the threshold rule and Otsu's choice, shared by the CPU reference and the CUDA kernels. */
#ifndef MK_THRESHOLD_PX_H
#define MK_THRESHOLD_PX_H

#include "px.h"
#include "threshold.h"

#include <float.h>
#include <stdint.h>

MK_PX uint8_t mk_px_threshold(int v, int t, int maxval, int mode)
{
    int above = v > t;
    switch (mode) {
    case MK_THRESH_BINARY: return (uint8_t)(above ? maxval : 0);
    case MK_THRESH_BINARY_INV: return (uint8_t)(above ? 0 : maxval);
    case MK_THRESH_TRUNC: return (uint8_t)(above ? t : v);
    case MK_THRESH_TOZERO: return (uint8_t)(above ? v : 0);
    default: return (uint8_t)(above ? 0 : v);
    }
}

/* OpenCV's getThreshVal_Otsu (thresh.cpp) operation for operation, including its quirk that mu1 stays multiplied
 * by q1 across the bins it skips. Every step rounds as there, so the first maximum is the same one. */
MK_PX int mk_px_otsu(const uint32_t h[256], double total)
{
    double mu = 0, scale = MK_DDIV(1.0, total);
    for (int i = 0; i < 256; i++)
        mu = MK_DADD(mu, MK_DMUL((double)i, (double)h[i]));
    mu = MK_DMUL(mu, scale);
    double mu1 = 0, q1 = 0, max_sigma = 0;
    int max_val = 0;
    for (int i = 0; i < 256; i++) {
        double p_i = MK_DMUL((double)h[i], scale);
        mu1 = MK_DMUL(mu1, q1);
        q1 = MK_DADD(q1, p_i);
        double q2 = MK_DSUB(1.0, q1);
        double lo = q1 < q2 ? q1 : q2, hi = q1 < q2 ? q2 : q1;
        if (lo < FLT_EPSILON || hi > 1. - FLT_EPSILON)
            continue;
        mu1 = MK_DDIV(MK_DADD(mu1, MK_DMUL((double)i, p_i)), q1);
        double mu2 = MK_DDIV(MK_DSUB(mu, MK_DMUL(q1, mu1)), q2);
        double d = MK_DSUB(mu1, mu2);
        double sigma = MK_DMUL(MK_DMUL(MK_DMUL(q1, q2), d), d);
        if (sigma > max_sigma) {
            max_sigma = sigma;
            max_val = i;
        }
    }
    return max_val;
}

#endif
