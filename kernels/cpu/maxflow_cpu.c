/* maxflow_cpu: the Boykov-Kolmogorov max-flow (growth, augmentation, adoption of orphans; Kolmogorov's
 * timestamp/distance heuristic for choosing parents), the residual-graph cut, and the grid adapter
 * mk_maxflow_grid_cpu. */
#include "maxflow_cpu.h"

#include "backend.h"
#include "errors.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

/* parent values besides an arc index. */
enum { NO_PARENT = -1, TERMINAL = -2, ORPHAN = -3 };

/* Edge e is the pair of arcs 2e (i -> j) and 2e + 1 (j -> i): an arc's sister (its reverse) is a ^ 1, in the same
 * cache line. rcap[a] + rcap[a ^ 1] never changes. */
typedef struct {
    int32_t head; /* the node it enters */
    int32_t next; /* the next arc out of the same node, -1 at the end */
    int32_t rcap; /* residual capacity */
} arc_t;

typedef struct {
    int32_t first;   /* its first outgoing arc, -1 for none */
    int32_t parent;  /* the arc to its parent in its tree (child -> parent), or NO_PARENT, TERMINAL, ORPHAN */
    int32_t qnext;   /* active FIFO: the next node, itself for the last one, -1 when not queued */
    int32_t dist;    /* distance to the terminal (a root has 1), correct at time ts */
    int32_t ts;
    uint8_t in_sink; /* 1 in the sink tree T, 0 in the source tree S (when parent != NO_PARENT) */
    int64_t tr;      /* residual net terminal capacity: > 0 from the source, < 0 to the sink */
} node_t;

struct mk_bk {
    int n;
    int32_t max_arcs, narcs;
    node_t *nodes;
    arc_t *arcs;
    int32_t *orphans;  /* orphan deque (ring of n), reused as the queue of the final search */
    uint8_t *reach;    /* after solving: 1 when the node reaches the sink in the residual graph */
    int q_first, q_last;
    int o_head, o_count;
    int32_t time;
    int64_t flow;
    int paths;
    int solved;
};

int mk_bk_create(int nodes, int64_t edges, mk_bk_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "maxflow: NULL output");
    *out = NULL;
    if (nodes < 1 || edges < 0)
        return mk_err_set(MK_EINVAL, "maxflow: %d nodes, %lld edges", nodes, (long long)edges);
    if (edges > INT32_MAX / 2)
        return mk_err_set(MK_ERANGE, "maxflow: %lld edges, at most %d", (long long)edges, INT32_MAX / 2);
    mk_bk_t *g = calloc(1, sizeof *g);
    if (!g)
        return mk_err_set(MK_ENOMEM, "maxflow: out of memory");
    g->n = nodes;
    g->max_arcs = (int32_t)(2 * edges);
    g->nodes = calloc((size_t)nodes, sizeof *g->nodes);
    g->arcs = malloc(((size_t)g->max_arcs + 1) * sizeof *g->arcs);
    g->orphans = malloc((size_t)nodes * sizeof *g->orphans);
    g->reach = calloc((size_t)nodes, 1);
    if (!g->nodes || !g->arcs || !g->orphans || !g->reach) {
        mk_bk_destroy(g);
        return mk_err_set(MK_ENOMEM, "maxflow: out of memory for %d nodes and %lld edges", nodes, (long long)edges);
    }
    for (int i = 0; i < nodes; i++)
        g->nodes[i].first = -1;
    *out = g;
    return 0;
}

void mk_bk_destroy(mk_bk_t *g)
{
    if (!g)
        return;
    free(g->nodes);
    free(g->arcs);
    free(g->orphans);
    free(g->reach);
    free(g);
}

int mk_bk_add_term(mk_bk_t *g, int i, int64_t source, int64_t sink)
{
    if (!g || i < 0 || i >= g->n)
        return mk_err_set(MK_EINVAL, "maxflow: terminal capacities of node %d of %d", i, g ? g->n : 0);
    if (source < 0 || sink < 0 || source > INT32_MAX || sink > INT32_MAX)
        return mk_err_set(MK_ERANGE, "maxflow: terminal capacities %lld, %lld outside 0..%d", (long long)source,
                          (long long)sink, INT32_MAX);
    if (g->solved)
        return mk_err_set(MK_ESTATE, "maxflow: the graph was solved already");
    node_t *v = &g->nodes[i];
    if (v->tr > 0)
        source += v->tr;
    else
        sink -= v->tr;
    g->flow += source < sink ? source : sink;
    v->tr = source - sink;
    return 0;
}

int mk_bk_add_edge(mk_bk_t *g, int i, int j, int32_t cap, int32_t rev_cap)
{
    if (!g || i < 0 || j < 0 || i >= g->n || j >= g->n || i == j)
        return mk_err_set(MK_EINVAL, "maxflow: edge %d -> %d in a graph of %d nodes", i, j, g ? g->n : 0);
    if (cap < 0 || rev_cap < 0 || (int64_t)cap + rev_cap > INT32_MAX)
        return mk_err_set(MK_ERANGE, "maxflow: edge capacities %d, %d (each >= 0, sum <= %d)", cap, rev_cap,
                          INT32_MAX);
    if (g->solved)
        return mk_err_set(MK_ESTATE, "maxflow: the graph was solved already");
    if (g->narcs >= g->max_arcs)
        return mk_err_set(MK_ERANGE, "maxflow: more than the %d edges the graph was made for", g->max_arcs / 2);
    int32_t a = g->narcs;
    g->narcs += 2;
    g->arcs[a] = (arc_t){j, g->nodes[i].first, cap};
    g->nodes[i].first = a;
    g->arcs[a + 1] = (arc_t){i, g->nodes[j].first, rev_cap};
    g->nodes[j].first = a + 1;
    return 0;
}

/* ---- active nodes and orphans ---------------------------------------------------------------------------- */

static void set_active(mk_bk_t *g, int i)
{
    if (g->nodes[i].qnext >= 0)
        return;
    if (g->q_last >= 0)
        g->nodes[g->q_last].qnext = i;
    else
        g->q_first = i;
    g->q_last = i;
    g->nodes[i].qnext = i;
}

/* The next queued node that is still in a tree, or -1. */
static int next_active(mk_bk_t *g)
{
    for (;;) {
        int i = g->q_first;
        if (i < 0)
            return -1;
        node_t *v = &g->nodes[i];
        if (v->qnext == i)
            g->q_first = g->q_last = -1;
        else
            g->q_first = v->qnext;
        v->qnext = -1;
        if (v->parent != NO_PARENT)
            return i;
    }
}

/* Orphans found while augmenting go to the front of the deque, those found while adopting to the back (as in
 * Kolmogorov's implementation). A node is an orphan at most once at a time, so n slots suffice. */
static void orphan_front(mk_bk_t *g, int i)
{
    g->nodes[i].parent = ORPHAN;
    g->o_head = g->o_head ? g->o_head - 1 : g->n - 1;
    g->orphans[g->o_head] = i;
    g->o_count++;
}

static void orphan_back(mk_bk_t *g, int i)
{
    int slot = g->o_head + g->o_count;
    g->nodes[i].parent = ORPHAN;
    g->orphans[slot >= g->n ? slot - g->n : slot] = i;
    g->o_count++;
}

/* ---- the three stages ---------------------------------------------------------------------------------------- */

/* Grows node i's tree by one layer; returns the arc from the source tree to the sink tree that it found, or -1. */
static int32_t grow(mk_bk_t *g, int i)
{
    node_t *vi = &g->nodes[i];
    int sink = vi->in_sink;
    for (int32_t a = vi->first; a >= 0; a = g->arcs[a].next) {
        /* Source tree: flow i -> j along a. Sink tree: flow j -> i along a ^ 1. */
        if (!g->arcs[sink ? a ^ 1 : a].rcap)
            continue;
        int j = g->arcs[a].head;
        node_t *vj = &g->nodes[j];
        if (vj->parent == NO_PARENT) {
            vj->in_sink = (uint8_t)sink;
            vj->parent = a ^ 1;
            vj->ts = vi->ts;
            vj->dist = vi->dist + 1;
            set_active(g, j);
        } else if (vj->in_sink != sink) {
            return sink ? a ^ 1 : a;
        } else if (vj->ts <= vi->ts && vj->dist > vi->dist) {
            /* j is closer to the terminal through i. */
            vj->parent = a ^ 1;
            vj->ts = vi->ts;
            vj->dist = vi->dist + 1;
        }
    }
    return -1;
}

/* Pushes the bottleneck along source -> ... -> tail(mid) -> head(mid) -> ... -> sink; saturated tree arcs and
 * terminal links make orphans. */
static void augment(mk_bk_t *g, int32_t mid)
{
    arc_t *arcs = g->arcs;
    node_t *nodes = g->nodes;
    int s = arcs[mid ^ 1].head, t = arcs[mid].head, i;
    int32_t a;
    int64_t b = arcs[mid].rcap;
    for (i = s; (a = nodes[i].parent) != TERMINAL; i = arcs[a].head)
        b = arcs[a ^ 1].rcap < b ? arcs[a ^ 1].rcap : b;
    b = nodes[i].tr < b ? nodes[i].tr : b;
    for (i = t; (a = nodes[i].parent) != TERMINAL; i = arcs[a].head)
        b = arcs[a].rcap < b ? arcs[a].rcap : b;
    b = -nodes[i].tr < b ? -nodes[i].tr : b;

    int32_t f = (int32_t)b;
    arcs[mid ^ 1].rcap += f;
    arcs[mid].rcap -= f;
    for (i = s; (a = nodes[i].parent) != TERMINAL; i = arcs[a].head) {
        arcs[a].rcap += f;
        if (!(arcs[a ^ 1].rcap -= f))
            orphan_front(g, i);
    }
    if (!(nodes[i].tr -= b))
        orphan_front(g, i);
    for (i = t; (a = nodes[i].parent) != TERMINAL; i = arcs[a].head) {
        arcs[a ^ 1].rcap += f;
        if (!(arcs[a].rcap -= f))
            orphan_front(g, i);
    }
    if (!(nodes[i].tr += b))
        orphan_front(g, i);
    g->flow += b;
    g->paths++;
}

/* Finds orphan i a parent in its tree whose path to the terminal is valid (the one nearest the terminal), or frees
 * it: then its neighbours in the tree that could have grown into it become active and its children orphans. */
static void adopt(mk_bk_t *g, int i)
{
    arc_t *arcs = g->arcs;
    node_t *nodes = g->nodes, *vi = &nodes[i];
    int sink = vi->in_sink;
    int32_t best = NO_PARENT;
    int d_min = INT_MAX;
    for (int32_t a0 = vi->first; a0 >= 0; a0 = arcs[a0].next) {
        /* Source tree: the parent j sends flow j -> i along a0 ^ 1. Sink tree: i sends i -> j along a0. */
        if (!arcs[sink ? a0 : a0 ^ 1].rcap)
            continue;
        int j = arcs[a0].head;
        if (nodes[j].in_sink != sink || nodes[j].parent == NO_PARENT)
            continue;
        int d = 0;
        for (;;) {
            node_t *vj = &nodes[j];
            if (vj->ts == g->time) {
                d += vj->dist;
                break;
            }
            int32_t a = vj->parent;
            d++;
            if (a == TERMINAL) {
                vj->ts = g->time;
                vj->dist = 1;
                break;
            }
            if (a == ORPHAN) {
                d = INT_MAX;
                break;
            }
            j = arcs[a].head;
        }
        if (d == INT_MAX)
            continue;
        if (d < d_min) {
            best = a0;
            d_min = d;
        }
        for (j = arcs[a0].head; nodes[j].ts != g->time; j = arcs[nodes[j].parent].head) {
            nodes[j].ts = g->time;
            nodes[j].dist = d--;
        }
    }
    vi->parent = best;
    if (best != NO_PARENT) {
        vi->ts = g->time;
        vi->dist = d_min + 1;
        return;
    }
    for (int32_t a0 = vi->first; a0 >= 0; a0 = arcs[a0].next) {
        int j = arcs[a0].head;
        int32_t a = nodes[j].parent;
        if (nodes[j].in_sink != sink || a == NO_PARENT)
            continue;
        if (arcs[sink ? a0 : a0 ^ 1].rcap)
            set_active(g, j);
        if (a != TERMINAL && a != ORPHAN && arcs[a].head == i)
            orphan_back(g, j);
    }
}

/* Marks every node that reaches the sink in the residual graph: a search backwards from the sink's neighbours. */
static void mark_sink_side(mk_bk_t *g)
{
    int32_t *queue = g->orphans;
    int qh = 0, qt = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].tr < 0) {
            g->reach[i] = 1;
            queue[qt++] = i;
        }
    while (qh < qt) {
        int v = queue[qh++];
        for (int32_t a = g->nodes[v].first; a >= 0; a = g->arcs[a].next) {
            int u = g->arcs[a].head;
            if (!g->reach[u] && g->arcs[a ^ 1].rcap > 0) {
                g->reach[u] = 1;
                queue[qt++] = u;
            }
        }
    }
}

int mk_bk_solve(mk_bk_t *g, int64_t *flow, int *paths)
{
    if (!g)
        return mk_err_set(MK_EINVAL, "maxflow: NULL graph");
    if (g->solved)
        return mk_err_set(MK_ESTATE, "maxflow: the graph was solved already");
    g->q_first = g->q_last = -1;
    g->o_head = g->o_count = 0;
    g->time = 0;
    for (int i = 0; i < g->n; i++) {
        node_t *v = &g->nodes[i];
        v->qnext = -1;
        v->ts = 0;
        v->dist = 1;
        if (v->tr != 0) {
            v->in_sink = v->tr < 0;
            v->parent = TERMINAL;
            set_active(g, i);
        } else {
            v->parent = NO_PARENT;
        }
    }
    /* A node that found a path is grown again before the queue moves on (it may have more to give). */
    int cur = -1;
    for (;;) {
        int i = cur >= 0 && g->nodes[cur].parent != NO_PARENT ? cur : next_active(g);
        cur = -1;
        if (i < 0)
            break;
        int32_t mid = grow(g, i);
        if (g->time == INT32_MAX) {
            /* The timestamps only say which distances are known now: forgetting them all is safe. */
            for (int k = 0; k < g->n; k++)
                g->nodes[k].ts = 0;
            g->time = 0;
        }
        g->time++;
        if (mid < 0)
            continue;
        cur = i;
        augment(g, mid);
        while (g->o_count) {
            int o = g->orphans[g->o_head];
            g->o_head = g->o_head + 1 == g->n ? 0 : g->o_head + 1;
            g->o_count--;
            adopt(g, o);
        }
    }
    mark_sink_side(g);
    g->solved = 1;
    if (flow)
        *flow = g->flow;
    if (paths)
        *paths = g->paths;
    return 0;
}

int mk_bk_source_side(const mk_bk_t *g, int i)
{
    return g && g->solved && i >= 0 && i < g->n && !g->reach[i];
}

/* ---- the grid -------------------------------------------------------------------------------------------- */

static const int grid_dx[4] = {1, 1, 0, -1}, grid_dy[4] = {0, 1, 1, 1};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Checks the capacities (0..MK_GC_CAP_MAX, none leaving the grid, |term| <= MK_GC_CAP_MAX) and counts the
 * non-zero edges. */
static int grid_check(const mk_grid_graph_t *g, int64_t *edges)
{
    int64_t n = 0;
    for (int y = 0; y < g->height; y++)
        for (int x = 0; x < g->width; x++) {
            size_t p = (size_t)y * g->pitch + (size_t)x;
            if (g->term[p] < -MK_GC_CAP_MAX || g->term[p] > MK_GC_CAP_MAX)
                return mk_err_set(MK_ERANGE, "maxflow: terminal capacity %d at (%d,%d) outside +-%d", g->term[p], x,
                                  y, MK_GC_CAP_MAX);
            for (int d = 0; d < 4; d++) {
                int32_t c = g->edge[d][p];
                int nx = x + grid_dx[d], ny = y + grid_dy[d];
                if (c < 0 || c > MK_GC_CAP_MAX)
                    return mk_err_set(MK_ERANGE, "maxflow: edge %d of (%d,%d) has capacity %d outside 0..%d", d, x,
                                      y, c, MK_GC_CAP_MAX);
                if (c && (nx < 0 || nx >= g->width || ny >= g->height))
                    return mk_err_set(MK_EINVAL, "maxflow: edge %d of (%d,%d) leaves the grid with capacity %d", d, x,
                                      y, c);
                n += c != 0;
            }
        }
    *edges = n;
    return 0;
}

int mk_maxflow_grid_cpu(mk_ctx_t *ctx, const mk_grid_graph_t *g, mk_image_t *cut, mk_maxflow_stats_t *stats)
{
    (void)ctx;
    double t0 = now_us();
    int64_t edges = 0, flow = 0;
    int paths = 0, w = g->width, rc = grid_check(g, &edges);
    mk_bk_t *bk = NULL;
    if (rc || (rc = mk_bk_create(w * g->height, edges, &bk)))
        return rc;
    for (int y = 0; y < g->height && !rc; y++)
        for (int x = 0; x < w && !rc; x++) {
            size_t p = (size_t)y * g->pitch + (size_t)x;
            int i = y * w + x;
            int32_t t = g->term[p];
            rc = mk_bk_add_term(bk, i, t > 0 ? t : 0, t < 0 ? -(int64_t)t : 0);
            for (int d = 0; d < 4 && !rc; d++)
                if (g->edge[d][p])
                    rc = mk_bk_add_edge(bk, i, (y + grid_dy[d]) * w + x + grid_dx[d], g->edge[d][p], g->edge[d][p]);
        }
    if (!rc)
        rc = mk_bk_solve(bk, &flow, &paths);
    for (int y = 0; y < g->height && !rc; y++) {
        uint8_t *row = mk_image_row(cut, 0, y);
        for (int x = 0; x < w; x++)
            row[x] = (uint8_t)mk_bk_source_side(bk, y * w + x);
    }
    mk_bk_destroy(bk);
    if (!rc && stats) {
        stats->flow = flow;
        stats->rounds = paths;
        stats->global_relabels = 0;
        stats->us = now_us() - t0;
    }
    return rc;
}
