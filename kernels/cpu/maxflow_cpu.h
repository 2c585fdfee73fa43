/* maxflow_cpu: the Boykov-Kolmogorov max-flow (PAMI 2004) on a general graph with integer capacities, the CPU
 * reference's solver (internal to the kernels and their tests). mk_maxflow_grid_cpu (backend.h) builds one from a
 * grid graph.
 *
 * A graph has a fixed number of nodes and room for a fixed number of edges. Each node has a net terminal capacity
 * (> 0: from the source, < 0: to the sink); each edge i -> j has a capacity and a reverse capacity. After
 * mk_bk_solve, a node is on the source side when it cannot reach the sink in the residual graph (grabcut.h's cut:
 * the source side of the largest minimum cut), which is found by a search backwards from the sink, not from the
 * search trees of the algorithm. One thread at a time per graph. */
#ifndef MK_MAXFLOW_CPU_H
#define MK_MAXFLOW_CPU_H

#include <stdint.h>

typedef struct mk_bk mk_bk_t;

/* A graph of `nodes` nodes (>= 1) with room for `edges` edges (>= 0; 2 * edges arcs must fit in int32). */
int mk_bk_create(int nodes, int64_t edges, mk_bk_t **out);
/* Frees the graph; NULL is a no-op. */
void mk_bk_destroy(mk_bk_t *g);

/* Adds `source` to node i's capacity from the source and `sink` to its capacity to the sink (both >= 0). Only the
 * difference is kept on the node; the common part min(source, sink) is flow that every cut pays and is added to
 * the flow value. */
int mk_bk_add_term(mk_bk_t *g, int i, int64_t source, int64_t sink);
/* Adds an edge i -> j of capacity cap and j -> i of capacity rev_cap (i != j, both >= 0, cap + rev_cap at most
 * INT32_MAX). Parallel edges are allowed. */
int mk_bk_add_edge(mk_bk_t *g, int i, int j, int32_t cap, int32_t rev_cap);

/* Computes the maximum flow (once per graph): *flow (may be NULL) receives its value, the terminal constants of
 * mk_bk_add_term included; *paths (may be NULL) the number of augmenting paths. Then marks the cut. */
int mk_bk_solve(mk_bk_t *g, int64_t *flow, int *paths);
/* After mk_bk_solve: 1 when node i cannot reach the sink in the residual graph, else 0. */
int mk_bk_source_side(const mk_bk_t *g, int i);

#endif
