/* grabcut_cuda: the stages of the CUDA GrabCut (kernels/cuda/grabcut_cuda.cu) one at a time, internal to the
 * kernels and their tests: the cuda suite compares each with the CPU reference's stage (cpu/grabcut_cpu.h). They
 * run the kernels mk_grabcut_cuda runs. Images and arrays live in a CUDA context's device memory and are checked
 * by the caller (images as mk_grabcut checks them); each function synchronises before it returns. */
#ifndef MK_GRABCUT_CUDA_H
#define MK_GRABCUT_CUDA_H

#include "grabcut.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The k-means of both GMMs' sample sets of mask (grabcut.h; K in 1..MK_GC_MAX_K): labels (u8 GRAY, the image's
 * size) receives every pixel's cluster within its own GMM's samples. MK_EINVAL, as mk_grabcut, for a mask value
 * that is not a label or an empty sample set. */
int mk_gc_kmeans_cuda(mk_ctx_t *ctx, const mk_image_t *img, const mk_image_t *mask, int K, uint64_t seed,
                      mk_image_t *labels);

/* beta of img (*beta, may be NULL) and the N-links into edge[0..3] (width x height int32 each, `pitch` elements
 * per row, 0 for the edges leaving the image). */
int mk_gc_nlinks_cuda(mk_ctx_t *ctx, const mk_image_t *img, double gamma, double scale, int32_t *const edge[4],
                      size_t pitch, double *beta);

/* The net T-links (mk_gc_tlinks + mk_gc_term) of every pixel for mask's labels and the components of model
 * (mk_gc_comp_set; K = the larger of the two GMMs' K, as mk_grabcut_cut) into term (`pitch` elements per row);
 * *C (may be NULL) receives the energy constant, summed in another order than the CPU's. The model must pass
 * mk_grabcut_cut's checks. MK_EINVAL for a mask value that is not a label. */
int mk_gc_tlinks_cuda(mk_ctx_t *ctx, const mk_image_t *img, const mk_image_t *mask, const mk_gc_model_t *model,
                      double lambda, double scale, int32_t *term, size_t pitch, double *C);

#ifdef __cplusplus
}
#endif
#endif
