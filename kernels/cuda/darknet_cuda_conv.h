/* darknet_cuda_conv: our convolution kernels for the FP16 NHWC forward pass (CUDA C++ only, used by
 * darknet_cuda.cu), each with the convolution's epilogue (bias, activation, a fused [shortcut] or [yolo]) inside:
 *
 *   small   direct convolution, groups = 1, any c and k (a thread: one pixel x 8 filters; weights in shared memory)
 *   dwR     depthwise K x K (K = 3, 5), stride 1 or 2, c even (a thread: 2 channels x R outputs of a row), R = 1, 2, 4
 *   gemmMxN implicit GEMM on tensor cores (WMMA, half in, float accumulation), groups = 1, c a multiple of 8: an
 *           M pixels x N filters tile per block, multistage cp.async pipeline, optional split-K across blocks
 *           (the last block of a tile sums the partials in split order: deterministic)
 *   dwpwTxN a depthwise convolution and the 1 x 1 convolution that is its only reader in one kernel: a block makes
 *           the depthwise outputs of T pixels in shared memory and multiplies them by N filters on tensor cores
 *
 * Geometry, epilogue and per-thread arithmetic are in darknet_cuda_conv_px.h. Every launcher queues one kernel and
 * returns 0 or a negative MK_E* code with a message; the kernels wait for the previous kernel (programmatic
 * dependent launch) only after loading their weights. */
#ifndef MK_DARKNET_CUDA_CONV_H
#define MK_DARKNET_CUDA_CONV_H

#include "darknet_cuda_conv_px.h"
#include "darknet_cuda_layers.h"

enum dn_conv_kind { DN_CONV_SMALL, DN_CONV_DW, DN_CONV_GEMM, DN_CONV_DWPW, DN_CONV_KINDS };

/* Variants of a kind (1 for small), and their names ("small", "dw4", "gemm64x64", "dwpw32x64"). */
int dn_conv_variants(int kind);
const char *dn_conv_variant_name(int kind, int variant);

/* Whether a variant applies: small needs the weight table in 48 KB; dw a depthwise 3x3 or 5x5 of stride 1 or 2 and
 * even c; gemm groups = 1 and c a multiple of 8; dwpw a depthwise one as dw with c a multiple of 8 (at most 512)
 * feeding a 1 x 1, stride 1 convolution. `g` (and `gp` for dwpw: the pointwise one). */
int dn_conv_small_ok(const dn_cgeom &g);
int dn_conv_dw_ok(const dn_cgeom &g);
int dn_conv_gemm_ok(const dn_cgeom &g);
int dn_conv_dwpw_ok(const dn_cgeom &gd, const dn_cgeom &gp);

/* Split-K for a gemm variant: the number of splits that fills the GPU's `sms` multiprocessors (1: none), and the
 * workspace a split count needs (floats of partial tiles, ints of tile counters; 0 for one split). */
int dn_conv_gemm_splits(int variant, const dn_cgeom &g, int sms);
void dn_conv_gemm_ws(int variant, int splits, const dn_cgeom &g, size_t *floats, size_t *counters);

/* Allows the variants that need more than 48 KB of shared memory to have it (once per process; idempotent). */
int dn_conv_init(void);

int dn_conv_small(const dn_exec &x, const __half *in, const __half *w, const dn_epi &e, const dn_cgeom &g);
int dn_conv_dw(const dn_exec &x, int variant, const __half *in, const __half *w, const dn_epi &e, const dn_cgeom &g);
/* ws / counters: the workspace of dn_conv_gemm_ws (counters zero before the first launch; each launch leaves them
 * zero). */
int dn_conv_gemm(const dn_exec &x, int variant, int splits, const __half *in, const __half *w, const dn_epi &e,
                 const dn_cgeom &g, float *ws, int *counters);
/* The depthwise convolution gd (weights dw_w, bias dw_b, activation dw_act) of `in`, then the pointwise gp (weights
 * pw_w) with epilogue e. */
int dn_conv_dwpw(const dn_exec &x, int variant, const __half *in, const __half *dw_w, const float *dw_b, int dw_act,
                 const dn_cgeom &gd, const __half *pw_w, const dn_epi &e, const dn_cgeom &gp);

#endif
