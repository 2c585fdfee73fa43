/* px: scalar arithmetic shared by the CPU references and the CUDA kernels.
 *
 * Every operation rounds once, in the order written: on the device through the _rn intrinsics (which nvcc never
 * contracts into FMAs), on the host through plain operators with the kernels built with -ffp-contract=off. A fused
 * multiply-add is written as one (MK_DFMA: __fma_rn, C's fma; a single rounding on both). The
 * per-pixel functions built on these therefore give the same bits on both backends. */
#ifndef MK_PX_H
#define MK_PX_H

#include <stdint.h>

#ifdef __CUDACC__
#define MK_PX static __device__ __forceinline__
#define MK_FMUL(a, b) __fmul_rn((a), (b))
#define MK_FADD(a, b) __fadd_rn((a), (b))
#define MK_FSUB(a, b) __fsub_rn((a), (b))
#define MK_FDIV(a, b) __fdiv_rn((a), (b))
#define MK_DMUL(a, b) __dmul_rn((a), (b))
#define MK_DADD(a, b) __dadd_rn((a), (b))
#define MK_DSUB(a, b) __dsub_rn((a), (b))
#define MK_DDIV(a, b) __ddiv_rn((a), (b))
#define MK_DFMA(a, b, c) __fma_rn((a), (b), (c))
/* round half to even, as cvRound */
#define MK_DROUND(a) __double2int_rn(a)
#else
#include <math.h>
#define MK_PX static inline
#define MK_FMUL(a, b) ((float)(a) * (float)(b))
#define MK_FADD(a, b) ((float)(a) + (float)(b))
#define MK_FSUB(a, b) ((float)(a) - (float)(b))
#define MK_FDIV(a, b) ((float)(a) / (float)(b))
#define MK_DMUL(a, b) ((double)(a) * (double)(b))
#define MK_DADD(a, b) ((double)(a) + (double)(b))
#define MK_DSUB(a, b) ((double)(a) - (double)(b))
#define MK_DDIV(a, b) ((double)(a) / (double)(b))
#define MK_DFMA(a, b, c) fma((double)(a), (double)(b), (double)(c))
#define MK_DROUND(a) ((int)lrint(a))
#endif

MK_PX int mk_px_clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

MK_PX uint8_t mk_px_sat_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* u8 -> [0,1] float, as Darknet's loader and numpy's img/255.0 (equal for all 256 values). */
MK_PX float mk_px_unit(int v)
{
    return MK_FDIV((float)v, 255.0f);
}

#endif
