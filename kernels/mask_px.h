/* mask_px: the mask products of one soft value (mask.h), shared by the CPU reference and the CUDA kernels. */
#ifndef MK_MASK_PX_H
#define MK_MASK_PX_H

#include "mask.h"
#include "px.h"

#include <stdint.h>

/* round(255 * clamp(v, 0, 1)), halves up; NaN gives 0. */
MK_PX uint8_t mk_px_alpha(float v)
{
    float x = MK_FMUL(v, 255.0f);
    if (!(x > 0.0f))
        return 0;
    if (x >= 255.0f)
        return 255;
    return (uint8_t)(int)MK_FADD(x, 0.5f);
}

/* The u8 product of soft value q for the alpha, binary and Otsu modes (Otsu's first step is the alpha). */
MK_PX uint8_t mk_px_mask_u8(float q, int mode, float thresh, float feather)
{
    if (mode != MK_MASK_BINARY)
        return mk_px_alpha(q);
    if (feather > 0.0f)
        return mk_px_alpha(MK_FADD(MK_FDIV(MK_FSUB(q, thresh), feather), 0.5f));
    return q > thresh ? 255 : 0;
}

#endif
