/* maxflow_cuda: the CUDA push-relabel max-flow on the 8-connected grid of grabcut.h as a reusable solver, for
 * mk_maxflow_grid_cuda and the CUDA GrabCut (internal API, CUDA builds only).
 *
 * The graph is grabcut.h's: int32 capacities of the 4 stored edge directions E, SE, S, SW (symmetric: the same
 * capacity both ways), net terminal capacities term (> 0 from the source, < 0 to the sink). Preconditions the
 * solver relies on and does not check: 0 <= edge <= MK_GC_CAP_MAX and |term| <= MK_GC_CAP_MAX (so that no sum
 * overflows int32). Edges that leave the grid are ignored whatever their value.
 *
 * State. The solver keeps one signed flow per stored edge, |flow| <= capacity. Nothing else is state: a pixel's
 * net balance w = term + inflow - outflow says everything about its terminals: w > 0 is excess, w < 0 is residual
 * capacity to the sink (the flow that reached the sink was pushed there as soon as it arrived). Any flow within the
 * capacities is therefore a valid starting point (a preflow of the graph with both terminal capacities of a pixel
 * raised by the same amount, which changes every cut by the same constant — Kohli & Torr's dynamic graph cuts), so
 * the solver can start from the flow of an earlier solve: after new terminal capacities nothing needs adjusting,
 * after new edge capacities the kept flow is clamped to them when the solve starts. The flow value reported is
 * that of the net graph: sum over pixels of max(-term, 0) - max(-w, 0), which at the maximum preflow is the
 * maximum flow of the given graph, equal to the CPU's.
 *
 * Algorithm (one cooperative kernel; every decision is taken on the device):
 *   - global relabel: exact BFS distances to the sink in the residual graph, computed tile by tile in shared
 *     memory (each tile relaxes to its own fixpoint given its ring), in passes over the tiles that a change could
 *     affect until a pass changes nothing;
 *   - if no pixel with excess has a finite distance, the preflow is maximum: the cut is the set of pixels with an
 *     infinite distance (they cannot reach the sink: the largest minimum cut, unique), the flow value is summed,
 *     done;
 *   - else push passes: each tile with active pixels (excess, label below the largest distance + margin) is loaded
 *     into shared memory, relabelled by a local BFS (its ring's labels as seeds; one warp, the tile's rows as bit
 *     masks, a level per step), then runs synchronous push/relabel sweeps (a new local BFS when a sweep cannot
 *     push), pushes across the tile's border going to global memory by atomics; up to push_passes passes in a
 *     solve's first round and later_passes in each round after it, then the next global relabel. Tiles are
 *     16 x 16 pixels on grids up to 640 pixels on the longer side, else 32 x 32; a block visits the pass's tile
 *     list entry of its own index, then, while the list is longer than the grid, the next entry not yet claimed;
 *   - the global relabels after a solve's first may stop at a distance (relabel_cap): pixels farther from the sink
 *     keep an infinite label until a later relabel, and the push passes move the excess near the sink first. A
 *     capped relabel that finds no pixel with excess within the cap, yet reached the cap, is followed by a full one,
 *     which alone can end the solve (one whose distances all stayed below the cap was complete).
 * Passes alternate between two tilings shifted by half a tile (maxflow_tiles.h). Races are ruled out by
 * construction: in a pass the tiles are disjoint, a tile writes its own pixels' labels and the flows of edges
 * inside it with plain stores and the flows of edges crossing its border only with atomic adds; within a sweep an
 * edge can only be pushed along by its higher end. The round count is capped: a solve that does not converge
 * reports MK_ESTATE and flow -1 instead of hanging.
 *
 * Thread rules: a solver belongs to one context and is used by one thread at a time; its work is ordered on the
 * context's stream. Device pointers handed to it must stay valid until that work has run. */
#ifndef MK_MAXFLOW_CUDA_H
#define MK_MAXFLOW_CUDA_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_pr_solver mk_pr_solver_t;

/* Tuning knobs (mk_pr_params_default: sweeps 8, push_passes 0, margin 8, max_rounds 1000, later_passes 0,
 * relabel_cap 0). */
typedef struct {
    int sweeps;      /* push/relabel sweeps per tile visit, 1..1024 */
    int push_passes; /* push passes between two global relabels, 1..1024; 0: by the grid's size (8..24) */
    int margin;      /* labels >= largest finite distance + margin wait for the next global relabel, 1..2^20 */
    int max_rounds;  /* global relabels before giving up (MK_ESTATE), 1..2^20 */
    int later_passes; /* push passes between two global relabels after a solve's first, 0..1024; 0: the smaller
                       * of the first round's and 8 */
    int relabel_cap;  /* global relabels after a solve's first stop at this distance, 1..2^20 (-1: never; 0: by
                       * the grid's size, 96 on 16 x 16 tiles, never on 32 x 32) */
} mk_pr_params_t;

mk_pr_params_t mk_pr_params_default(void);

/* The solver's graph arrays in device memory, for callers that compute the graph in place: width x height int32
 * each, `pitch` elements from one row to the next. */
typedef struct {
    int32_t *term;
    int32_t *edge[4]; /* E, SE, S, SW */
    size_t pitch;
} mk_pr_graph_t;

/* Device bytes a solver for a w x h grid needs (for mk_pr_create's buffer). */
size_t mk_pr_device_bytes(int width, int height);

/* Creates a solver for a width x height grid (1..MK_IMAGE_MAX_DIM each) on a CUDA context. All device memory is
 * taken up front: from `device_buf` when it is not NULL (at least mk_pr_device_bytes; not owned, must outlive the
 * solver; its contents are the initial flow, clamped like any kept flow: zero it or call mk_pr_reset for a cold
 * start), else allocated here and zeroed. MK_EUNSUPPORTED when the device cannot run cooperative kernels. */
int mk_pr_create(mk_ctx_t *ctx, int width, int height, void *device_buf, size_t buf_bytes, mk_pr_solver_t **out);
/* Frees what mk_pr_create allocated (waits for the device); NULL is a no-op. */
void mk_pr_destroy(mk_pr_solver_t *s);

/* MK_ERANGE when a value is outside its range. */
int mk_pr_set_params(mk_pr_solver_t *s, const mk_pr_params_t *p);
/* The solver's own graph arrays, for N-links and T-links computed in place (on the context's stream, before the
 * solve that uses them; a solve reads the arrays as they are when it runs). Handing these same pointers to
 * mk_pr_set_edges / mk_pr_set_term is allowed and copies nothing. */
mk_pr_graph_t mk_pr_graph(mk_pr_solver_t *s);

/* New edge capacities (4 device arrays, `pitch` elements per row, copied on the stream). The kept flow is clamped
 * to them at the next solve. */
int mk_pr_set_edges(mk_pr_solver_t *s, const int32_t *const edge[4], size_t pitch);
/* New net terminal capacities (device array, copied on the stream). The kept flow stays valid as it is. */
int mk_pr_set_term(mk_pr_solver_t *s, const int32_t *term, size_t pitch);
/* Forgets the flow: the next solve starts cold. */
int mk_pr_reset(mk_pr_solver_t *s);

/* Solves the maximum flow of the current graph, starting from the kept flow. Writes the cut (u8, width x height,
 * cut_pitch bytes per row, device memory: 1 = source side, cannot reach the sink) and the flow value to
 * *flow_dev (device int64; may be NULL) — -1 there, and the cut undefined, when the solve gave up. Asynchronous
 * when stats is NULL (mk_pr_check reports the outcome later); with stats it synchronises, fills them (the device
 * time of the solve in us) and returns MK_ESTATE if the solve gave up. */
int mk_pr_solve(mk_pr_solver_t *s, uint8_t *cut, size_t cut_pitch, int64_t *flow_dev, mk_maxflow_stats_t *stats);
/* Waits for the last solve and returns 0, or MK_ESTATE with a message when it gave up (or a CUDA error). With
 * MASKD_MAXFLOW_CHECK=1 in the environment it also checks the result on the host — capacities respected, no
 * pixel with excess can reach the sink, the cut is exactly the set that cannot, the flow value matches — and
 * returns MK_ESTATE with the first violation. */
int mk_pr_check(mk_pr_solver_t *s);

#ifdef __cplusplus
}
#endif
#endif
