/* maxflow_cpu: the Boykov-Kolmogorov max-flow (growth, augmentation, adoption of orphans; Kolmogorov's
 * timestamp/distance heuristic for choosing parents), the residual-graph cut, and the grid adapter
 * mk_maxflow_grid_cpu. */
#include "maxflow_cpu.h"

#include "backend.h"
#include "errors.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

/* parent[] values besides an arc index. */
enum { NO_PARENT = -1, TERMINAL = -2, ORPHAN = -3 };

/* Edge e is the pair of arcs 2e (i -> j) and 2e + 1 (j -> i): an arc's sister (its reverse) is a ^ 1. */
struct mk_bk {
    int n;
    int32_t max_arcs, narcs;
    int32_t *first;    /* per node: its first outgoing arc, -1 for none */
    int32_t *next;     /* per arc: the next arc out of the same node */
    int32_t *head;     /* per arc: the node it enters */
    int32_t *rcap;     /* per arc: residual capacity; rcap[a] + rcap[a ^ 1] never changes */
    int64_t *tr;       /* per node: residual net terminal capacity (> 0 from the source, < 0 to the sink) */
    int32_t *parent;   /* per node: the arc to its parent in its tree (child -> parent), or NO_PARENT etc. */
    uint8_t *in_sink;  /* per node: 1 in the sink tree T, 0 in the source tree S (when parent != NO_PARENT) */
    int64_t *ts;       /* per node: time its distance to the terminal was last known correct */
    int32_t *dist;     /* per node: that distance (a root has 1) */
    int32_t *qnext;    /* active FIFO: the next node, itself for the last one, -1 when not queued */
    int32_t *orphans;  /* orphan deque (ring of n), reused as the queue of the final search */
    uint8_t *reach;    /* after solving: 1 when the node reaches the sink in the residual graph */
    int q_first, q_last;
    int o_head, o_count;
    int64_t time;
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
    size_t n = (size_t)nodes, a = (size_t)(2 * edges) + 1;
    g->n = nodes;
    g->max_arcs = (int32_t)(2 * edges);
    g->first = malloc(n * sizeof *g->first);
    g->next = malloc(a * sizeof *g->next);
    g->head = malloc(a * sizeof *g->head);
    g->rcap = malloc(a * sizeof *g->rcap);
    g->tr = calloc(n, sizeof *g->tr);
    g->parent = malloc(n * sizeof *g->parent);
    g->in_sink = calloc(n, 1);
    g->ts = malloc(n * sizeof *g->ts);
    g->dist = malloc(n * sizeof *g->dist);
    g->qnext = malloc(n * sizeof *g->qnext);
    g->orphans = malloc(n * sizeof *g->orphans);
    g->reach = calloc(n, 1);
    if (!g->first || !g->next || !g->head || !g->rcap || !g->tr || !g->parent || !g->in_sink || !g->ts || !g->dist ||
        !g->qnext || !g->orphans || !g->reach) {
        mk_bk_destroy(g);
        return mk_err_set(MK_ENOMEM, "maxflow: out of memory for %d nodes and %lld edges", nodes, (long long)edges);
    }
    for (size_t i = 0; i < n; i++)
        g->first[i] = -1;
    *out = g;
    return 0;
}

void mk_bk_destroy(mk_bk_t *g)
{
    if (!g)
        return;
    free(g->first);
    free(g->next);
    free(g->head);
    free(g->rcap);
    free(g->tr);
    free(g->parent);
    free(g->in_sink);
    free(g->ts);
    free(g->dist);
    free(g->qnext);
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
    if (g->tr[i] > 0)
        source += g->tr[i];
    else
        sink -= g->tr[i];
    g->flow += source < sink ? source : sink;
    g->tr[i] = source - sink;
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
    g->head[a] = j;
    g->rcap[a] = cap;
    g->next[a] = g->first[i];
    g->first[i] = a;
    g->head[a + 1] = i;
    g->rcap[a + 1] = rev_cap;
    g->next[a + 1] = g->first[j];
    g->first[j] = a + 1;
    return 0;
}

/* ---- active nodes and orphans ---------------------------------------------------------------------------- */

static void set_active(mk_bk_t *g, int i)
{
    if (g->qnext[i] >= 0)
        return;
    if (g->q_last >= 0)
        g->qnext[g->q_last] = i;
    else
        g->q_first = i;
    g->q_last = i;
    g->qnext[i] = i;
}

/* The next queued node that is still in a tree, or -1. */
static int next_active(mk_bk_t *g)
{
    for (;;) {
        int i = g->q_first;
        if (i < 0)
            return -1;
        if (g->qnext[i] == i)
            g->q_first = g->q_last = -1;
        else
            g->q_first = g->qnext[i];
        g->qnext[i] = -1;
        if (g->parent[i] != NO_PARENT)
            return i;
    }
}

/* Orphans found while augmenting go to the front of the deque, those found while adopting to the back (as in
 * Kolmogorov's implementation). A node is an orphan at most once at a time, so n slots suffice. */
static void orphan_front(mk_bk_t *g, int i)
{
    g->parent[i] = ORPHAN;
    g->o_head = (g->o_head + g->n - 1) % g->n;
    g->orphans[g->o_head] = i;
    g->o_count++;
}

static void orphan_back(mk_bk_t *g, int i)
{
    g->parent[i] = ORPHAN;
    g->orphans[(g->o_head + g->o_count) % g->n] = i;
    g->o_count++;
}

/* ---- the three stages ---------------------------------------------------------------------------------------- */

/* Grows node i's tree by one layer; returns the arc from the source tree to the sink tree that it found, or -1. */
static int grow(mk_bk_t *g, int i)
{
    int sink = g->in_sink[i];
    for (int32_t a = g->first[i]; a >= 0; a = g->next[a]) {
        /* Source tree: flow i -> j along a. Sink tree: flow j -> i along a ^ 1. */
        if (!g->rcap[sink ? a ^ 1 : a])
            continue;
        int j = g->head[a];
        if (g->parent[j] == NO_PARENT) {
            g->in_sink[j] = (uint8_t)sink;
            g->parent[j] = a ^ 1;
            g->ts[j] = g->ts[i];
            g->dist[j] = g->dist[i] + 1;
            set_active(g, j);
        } else if (g->in_sink[j] != sink) {
            return sink ? a ^ 1 : a;
        } else if (g->ts[j] <= g->ts[i] && g->dist[j] > g->dist[i]) {
            /* j is closer to the terminal through i. */
            g->parent[j] = a ^ 1;
            g->ts[j] = g->ts[i];
            g->dist[j] = g->dist[i] + 1;
        }
    }
    return -1;
}

/* Pushes the bottleneck along source -> ... -> tail(mid) -> head(mid) -> ... -> sink; saturated tree arcs and
 * terminal links make orphans. */
static void augment(mk_bk_t *g, int32_t mid)
{
    int s = g->head[mid ^ 1], t = g->head[mid], i;
    int32_t a;
    int64_t b = g->rcap[mid];
    for (i = s; (a = g->parent[i]) != TERMINAL; i = g->head[a])
        b = g->rcap[a ^ 1] < b ? g->rcap[a ^ 1] : b;
    b = g->tr[i] < b ? g->tr[i] : b;
    for (i = t; (a = g->parent[i]) != TERMINAL; i = g->head[a])
        b = g->rcap[a] < b ? g->rcap[a] : b;
    b = -g->tr[i] < b ? -g->tr[i] : b;

    g->rcap[mid ^ 1] += (int32_t)b;
    g->rcap[mid] -= (int32_t)b;
    for (i = s; (a = g->parent[i]) != TERMINAL; i = g->head[a]) {
        g->rcap[a] += (int32_t)b;
        g->rcap[a ^ 1] -= (int32_t)b;
        if (!g->rcap[a ^ 1])
            orphan_front(g, i);
    }
    g->tr[i] -= b;
    if (!g->tr[i])
        orphan_front(g, i);
    for (i = t; (a = g->parent[i]) != TERMINAL; i = g->head[a]) {
        g->rcap[a ^ 1] += (int32_t)b;
        g->rcap[a] -= (int32_t)b;
        if (!g->rcap[a])
            orphan_front(g, i);
    }
    g->tr[i] += b;
    if (!g->tr[i])
        orphan_front(g, i);
    g->flow += b;
    g->paths++;
}

/* Finds orphan i a parent in its tree whose path to the terminal is valid (the one nearest the terminal), or frees
 * it: then its neighbours in the tree that could have grown into it become active and its children orphans. */
static void adopt(mk_bk_t *g, int i)
{
    int sink = g->in_sink[i];
    int32_t best = NO_PARENT;
    int d_min = INT_MAX;
    for (int32_t a0 = g->first[i]; a0 >= 0; a0 = g->next[a0]) {
        /* Source tree: the parent j sends flow j -> i along a0 ^ 1. Sink tree: i sends i -> j along a0. */
        if (!g->rcap[sink ? a0 : a0 ^ 1])
            continue;
        int j = g->head[a0];
        if (g->in_sink[j] != sink || g->parent[j] == NO_PARENT)
            continue;
        int d = 0;
        for (;;) {
            if (g->ts[j] == g->time) {
                d += g->dist[j];
                break;
            }
            int32_t a = g->parent[j];
            d++;
            if (a == TERMINAL) {
                g->ts[j] = g->time;
                g->dist[j] = 1;
                break;
            }
            if (a == ORPHAN) {
                d = INT_MAX;
                break;
            }
            j = g->head[a];
        }
        if (d == INT_MAX)
            continue;
        if (d < d_min) {
            best = a0;
            d_min = d;
        }
        for (j = g->head[a0]; g->ts[j] != g->time; j = g->head[g->parent[j]]) {
            g->ts[j] = g->time;
            g->dist[j] = d--;
        }
    }
    g->parent[i] = best;
    if (best != NO_PARENT) {
        g->ts[i] = g->time;
        g->dist[i] = d_min + 1;
        return;
    }
    for (int32_t a0 = g->first[i]; a0 >= 0; a0 = g->next[a0]) {
        int j = g->head[a0];
        int32_t a = g->parent[j];
        if (g->in_sink[j] != sink || a == NO_PARENT)
            continue;
        if (g->rcap[sink ? a0 : a0 ^ 1])
            set_active(g, j);
        if (a != TERMINAL && a != ORPHAN && g->head[a] == i)
            orphan_back(g, j);
    }
}

/* Marks every node that reaches the sink in the residual graph: a search backwards from the sink's neighbours. */
static void mark_sink_side(mk_bk_t *g)
{
    int32_t *queue = g->orphans;
    int qh = 0, qt = 0;
    for (int i = 0; i < g->n; i++)
        if (g->tr[i] < 0) {
            g->reach[i] = 1;
            queue[qt++] = i;
        }
    while (qh < qt) {
        int v = queue[qh++];
        for (int32_t a = g->first[v]; a >= 0; a = g->next[a]) {
            int u = g->head[a];
            if (!g->reach[u] && g->rcap[a ^ 1] > 0) {
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
        g->qnext[i] = -1;
        g->ts[i] = 0;
        g->dist[i] = 1;
        if (g->tr[i] != 0) {
            g->in_sink[i] = g->tr[i] < 0;
            g->parent[i] = TERMINAL;
            set_active(g, i);
        } else {
            g->parent[i] = NO_PARENT;
        }
    }
    /* A node that found a path is grown again before the queue moves on (it may have more to give). */
    int cur = -1;
    for (;;) {
        int i = cur >= 0 && g->parent[cur] != NO_PARENT ? cur : next_active(g);
        cur = -1;
        if (i < 0)
            break;
        int32_t mid = grow(g, i);
        g->time++;
        if (mid < 0)
            continue;
        cur = i;
        augment(g, mid);
        while (g->o_count) {
            int o = g->orphans[g->o_head];
            g->o_head = (g->o_head + 1) % g->n;
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
