/* grabcut: GrabCut (Rother, Kolmogorov, Blake 2004) as OpenCV's grabcut.cpp defines it, and the exact s-t max-flow
 * on an 8-connected pixel grid it needs. CPU reference (Boykov-Kolmogorov max-flow) and CUDA (push-relabel with
 * global relabelling, decided on the device) behind one interface.
 *
 * The model (OpenCV 4.x grabcut.cpp):
 *   - labels: MK_GC_BGD 0, MK_GC_FGD 1, MK_GC_PR_BGD 2, MK_GC_PR_FGD 3 (OpenCV's GC_*), one u8 per pixel;
 *     a rectangle initialises outside = BGD, inside = PR_FGD.
 *   - two GMMs (background: BGD and PR_BGD pixels; foreground: FGD and PR_FGD), K full-covariance components each
 *     (K <= MK_GC_MAX_K, default 5); a component's covariance gets 0.01 added to its diagonal when its determinant
 *     is <= 1e-6; weight = samples / all samples of that GMM.
 *   - initialisation: k-means on each sample set (the pixels of that GMM in raster order, colours as stored; n
 *     samples, min(K, n) centres), then the GMMs learnt from the k-means labels. Seeding is k-means++, exact in
 *     integers and driven by mk_gc_rand() of grabcut_px.h: centre 0 is sample mk_gc_rand(seed, 0) mod n; centre k
 *     (k >= 1) is the first sample at which the running sum of D^2 (a sample's int64 squared distance to its
 *     nearest centre so far, summed in sample order) exceeds mk_gc_rand(seed, k) mod (total D^2), or sample
 *     mk_gc_rand(seed, k) mod n when that total is 0. Both sample sets use the same seed. Then 10 Lloyd iterations,
 *     each an assignment (every sample to the centre of smallest mk_gc_dist2, the first on ties) followed by an
 *     update (a centre becomes (double)sum / (double)count of its samples' channels, from exact integer sums; an
 *     empty cluster keeps its centre); the labels are those of one more assignment after the last update.
 *     (OpenCV's kmeans draws its k-means++ seeds at random, with 3 trials each, and stops early once no centre
 *     moves; a converged run gives the same labels either way.)
 *   - beta = 1 / (2 * mean ||I_p - I_q||^2) over all 8-neighbour pairs of the whole image (0 when that mean is
 *     0); N-link weight between p and q: gamma / dist(p, q) * exp(-beta ||I_p - I_q||^2), dist 1 or sqrt(2).
 *   - T-links: for PR_* pixels  source = -log P_bgd(I_p), sink = -log P_fgd(I_p);  BGD: source 0, sink lambda;
 *     FGD: source lambda, sink 0 (lambda default 9 * gamma = 450).
 *   - each iteration: assign every pixel the most likely component of its own GMM, learn both GMMs from those
 *     assignments, build T-links, solve the max-flow, and set every PR_* pixel to PR_FGD when it is on the source
 *     side of the cut, else PR_BGD. BGD and FGD pixels never change.
 *   - a rectangle is clipped to the image as the intersection of the two (OpenCV moves a negative x or y to 0
 *     without shortening the rectangle; here the part outside the image is dropped).
 *
 * Integer graph. Capacities are scaled and rounded to int32 (round(v * cap_scale), clamped to MK_GC_CAP_MAX), so
 * that the CPU and CUDA max-flows solve the same graph exactly and their flow values compare with ==. The source
 * side of a cut is the set of pixels that cannot reach the sink in the residual graph of the maximum flow (the
 * largest minimum cut): it is unique, so both backends give the same cut on the same integer graph. A pixel with no
 * residual path to the sink (term 0 and no usable N-link, say) is on the source side.
 *
 * Energy. A pixel's T-links s_p (source), t_p (sink) from mk_gc_tlinks enter the graph only as the net capacity
 * term_p = mk_gc_term(s_p, t_p, cap_scale) (the difference quantised once); the rest, min(s_p, t_p), is a
 * constant kept in double: C = sum over pixels of min(s_p, t_p), in raster order (+inf only when some pixel has
 * both T-links infinite). The integer energy of a labelling L, with fg(p) = L_p is FGD or PR_FGD (the source side),
 *   E_int(L) = sum_p (fg(p) ? max(-term_p, 0) : max(term_p, 0))  +  sum of the N-links of fg / non-fg neighbours,
 * is minimal (= the flow value) on the cut; the energy in model units is E(L) = C + E_int(L) / cap_scale.
 * stats.energy is E of the final labelling on the last iteration's graph: C + flow / cap_scale whenever the hard
 * labels (BGD, FGD) lie on their own side of the cut, which holds whenever lambda exceeds the sum of a pixel's
 * N-links (the defaults: 450 > 4 * 50 + 4 * 50 / sqrt(2)).
 *
 * Colour: the image is u8 RGB or BGR (3 channels, interleaved); the model does not depend on channel order except
 * through k-means seeding ties, which use the values as stored. */
#ifndef MK_GRABCUT_H
#define MK_GRABCUT_H

#include <stdint.h>

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MK_GC_BGD = 0, MK_GC_FGD = 1, MK_GC_PR_BGD = 2, MK_GC_PR_FGD = 3 };

#define MK_GC_MAX_K 5
/* Largest integer capacity of one edge (so that a pixel's excess, the sum of at most 9 edges, fits in int32). */
#define MK_GC_CAP_MAX (1 << 26)

/* ---- max-flow on an 8-connected grid ----
 * Edges: direction d of pixel (x, y) joins it to (x + dx[d], y + dy[d]) with (dx, dy) = E (1,0), SE (1,1), S (0,1),
 * SW (-1,1) for d = 0..3; the capacity is the same both ways (GrabCut's N-links are symmetric). edge[d] holds one
 * int32 per pixel (row-major, `pitch` elements per row); an edge leaving the grid must be 0.
 * term holds the net terminal capacity per pixel: > 0 an edge from the source of that capacity, < 0 an edge to the
 * sink of -term (a pixel's two terminal edges reduced to their difference; the constant min(s, t) is kept by the
 * caller). All arrays live in the context's memory (mk_ctx_mem). */
typedef struct {
    int width, height;
    size_t pitch;         /* elements from one row to the next, >= width */
    const int32_t *term;  /* width x height */
    const int32_t *edge[4];
} mk_grid_graph_t;

typedef struct {
    int64_t flow;          /* value of the maximum flow */
    int rounds;            /* CUDA: push/relabel rounds; CPU: augmenting paths */
    int global_relabels;   /* CUDA: global relabels (BFS from the sink); CPU: 0 */
    double us;             /* wall time of the solve (CPU) or device time (CUDA, when timing was asked for) */
} mk_maxflow_stats_t;

/* Solves the maximum flow of g and writes the cut to `cut` (u8 GRAY, width x height, context memory): 1 for a
 * pixel on the source side (cannot reach the sink in the residual graph), 0 otherwise. stats may be NULL. */
int mk_maxflow_grid(mk_ctx_t *ctx, const mk_grid_graph_t *g, mk_image_t *cut, mk_maxflow_stats_t *stats);

/* ---- GrabCut ---- */
typedef struct {
    int K;                    /* components per GMM, 1..MK_GC_MAX_K */
    double weight[MK_GC_MAX_K];
    double mean[MK_GC_MAX_K][3];
    double cov[MK_GC_MAX_K][3][3];
} mk_gmm_t;

typedef struct {
    mk_gmm_t bgd, fgd;
} mk_gc_model_t;

typedef struct {
    int iterations;     /* learn/assign/cut rounds, 0..100 (0: only initialise the model) */
    double gamma;       /* N-link weight, > 0 (OpenCV: 50) */
    double lambda;      /* hard T-link weight, > 0 (OpenCV: 9 * gamma = 450) */
    int K;              /* GMM components, 1..MK_GC_MAX_K (OpenCV: 5) */
    double cap_scale;   /* capacity scale of the integer graph, > 0 (default MK_GC_CAP_SCALE) */
    uint64_t seed;      /* k-means++ seed (default MK_GC_SEED) */
    int warm_start;     /* CUDA: start the (first) max-flow from the flow that the context's last GrabCut call left
                         * when it had the same size (Kohli & Torr's dynamic graph cuts: any flow within the new
                         * capacities is a valid start). Each cut is the unique minimal one either way, so labels,
                         * models and energies do not change; only the time does. The CPU's Boykov-Kolmogorov
                         * starts cold. A call of 0 iterations leaves the kept flow as it was. Default 0. */
    int reseed;         /* 1: every iteration after the first learns both GMMs from a new k-means of its current
                         * labels (the seed above each time, as the initialisation does) instead of assigning the
                         * pixels to the components learnt before, so a component stuck on the colours of the
                         * rectangle's first labels is clustered again. This departs from OpenCV (0, the default);
                         * at 1/4 resolution it scores better on the benchmark (tests/bench/NOTES.md, session 31).
                         * The first iteration is OpenCV's either way; an iteration that finds a class without
                         * pixels ends the call with the mask as the last cut left it. */
} mk_gc_params_t;

#define MK_GC_CAP_SCALE 1000.0
#define MK_GC_SEED 0x6d61736b64ull /* "maskd" */

typedef struct {
    int x, y, width, height; /* as cv::Rect: top-left and size */
} mk_rect_t;

typedef struct {
    double kmeans_us, gmm_us, graph_us, maxflow_us, total_us; /* summed over the call's iterations */
    int rounds, global_relabels;                              /* summed over the call's max-flows */
    int64_t flow;       /* flow of the last max-flow (0 without one) */
    double energy;      /* E of the final labelling in model units (see "Energy" above; 0 without a max-flow) */
} mk_gc_stats_t;

/* OpenCV's defaults: 5 iterations, gamma 50, lambda 450, K 5, MK_GC_CAP_SCALE, MK_GC_SEED, no reseeding. */
mk_gc_params_t mk_gc_params_default(void);

/* GrabCut. img: u8 RGB/BGR, context memory. mask: u8 GRAY of the image's size, context memory, in/out with the
 * four labels. rect: when not NULL the mask is first initialised from it (clipped to the image; a rectangle that
 * leaves no background or is empty after clipping is MK_EINVAL); when NULL the mask's labels are the input.
 * Either GMM's sample set empty is MK_EINVAL ("no background pixels" / "no foreground pixels").
 * model (may be NULL) receives the GMMs learnt last; stats (may be NULL) the timings (CUDA: the device is
 * synchronised between stages only when stats is not NULL). */
int mk_grabcut(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_rect_t *rect,
               const mk_gc_params_t *p, mk_gc_model_t *model, mk_gc_stats_t *stats);

/* The fixed-model cut (the video fast path): T-links from `model`, N-links from img, one max-flow, PR_* pixels of
 * mask relabelled as in an iteration of mk_grabcut. No learning. The model (host memory, as mk_grabcut returns it)
 * needs K in 1..MK_GC_MAX_K, finite values, weights >= 0 and invertible covariances where the weight is > 0
 * (MK_ERANGE otherwise); a GMM whose weights are all 0 (mk_grabcut learns one for a class that lost every pixel)
 * has density 0 everywhere, as in OpenCV. */
int mk_grabcut_cut(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                   const mk_gc_params_t *p, mk_gc_stats_t *stats);

/* The fixed-model cut followed by one learning step on its result, as each iteration of mk_grabcut learns: every
 * pixel to the most likely component (under `model`) of the GMM of its new label, then both GMMs learnt from those
 * assignments, into *learnt (host memory; K as the model's larger K). This spreads a keyframe's iterations over
 * the frames after it: mk_grabcut with n iterations returns the model m_n, and the cut with m_n followed by this
 * step yields m_(n+1), the model mk_grabcut with n + 1 iterations returns, and the mask of its n-th cut. A class
 * that loses every pixel gets a GMM of weight 0 (density 0 everywhere). A covariance that stays singular is
 * MK_ERANGE with the mask already cut and *learnt undefined; every other error leaves both undefined. */
int mk_grabcut_cut_learn(mk_ctx_t *ctx, const mk_image_t *img, mk_image_t *mask, const mk_gc_model_t *model,
                         const mk_gc_params_t *p, mk_gc_model_t *learnt, mk_gc_stats_t *stats);

/* Binary mask from the labels: 255 where FGD or PR_FGD, else 0 (src and dst u8 GRAY, same size, context memory;
 * may be the same image). */
int mk_grabcut_binary(mk_ctx_t *ctx, const mk_image_t *labels, mk_image_t *dst);

#ifdef __cplusplus
}
#endif
#endif
