/* grabcut_cpu: the stages of the CPU reference GrabCut (kernels/cpu/grabcut_cpu.c), internal to the kernels and
 * their tests (the CUDA parity tests compare each CUDA stage with these). Every function follows grabcut.h's
 * definitions and grabcut_px.h's arithmetic; images are host images already checked by the caller. */
#ifndef MK_GRABCUT_CPU_H
#define MK_GRABCUT_CPU_H

#include "grabcut.h"
#include "grabcut_px.h"

#include <stdint.h>

/* 1 for the foreground GMM's labels (FGD, PR_FGD), 0 for the background's (BGD, PR_BGD). */
static inline int mk_gc_is_fg(int label)
{
    return label == MK_GC_FGD || label == MK_GC_PR_FGD;
}

/* The colours (3 bytes each, as stored) of the pixels of one GMM (fg 0: background, 1: foreground) in raster
 * order: a new malloc'd array in *samples (NULL when there are none) and their number in *n. */
int mk_gc_samples_cpu(const mk_image_t *img, const mk_image_t *mask, int fg, uint8_t **samples, int64_t *n);

/* k-means of n >= 1 samples into min(K, n) clusters, K in 1..MK_GC_MAX_K, as grabcut.h defines it: labels[n]
 * receives each sample's cluster, centres (may be NULL) the final centres of the min(K, n) clusters. */
int mk_gc_kmeans_cpu(const uint8_t *samples, int64_t n, int K, uint64_t seed, uint8_t *labels,
                     double centres[][3]);

/* One GMM of K components learnt from labelled samples (labels < K): exact integer moments per component, then
 * mk_gc_comp_learn. comps[K] receives the components, gmm (may be NULL) the model (weights, means, covariances).
 * MK_ERANGE when a component's covariance stays singular. */
int mk_gc_learn_cpu(const uint8_t *samples, const uint8_t *labels, int64_t n, int K, mk_gc_comp_t *comps,
                    mk_gmm_t *gmm);

/* beta of the whole image (mk_gc_beta of the exact sum over the 8-neighbour pairs). */
double mk_gc_beta_cpu(const mk_image_t *img);

/* The N-links of img into edge[0..3] (w x h, `pitch` elements per row; 0 for edges leaving the image). */
void mk_gc_nlinks_cpu(const mk_image_t *img, double beta, double gamma, double scale, int32_t *const edge[4],
                      size_t pitch);

/* The net T-links of every pixel (mk_gc_tlinks + mk_gc_term) into term (w x h, `pitch` elements per row) for
 * the labels of mask and the GMMs' first K components; returns the energy constant C (grabcut.h). */
double mk_gc_tlinks_cpu(const mk_image_t *img, const mk_image_t *mask, const mk_gc_comp_t *bgd,
                        const mk_gc_comp_t *fgd, int K, double lambda, double scale, int32_t *term, size_t pitch);

/* E_int of the labelling `labels` on the integer graph g (host arrays), as grabcut.h defines it. */
int64_t mk_gc_energy_int_cpu(const mk_grid_graph_t *g, const mk_image_t *labels);

#endif
