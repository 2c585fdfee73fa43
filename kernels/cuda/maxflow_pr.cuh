/* maxflow_pr.cuh: the tile-dependent part of the CUDA push-relabel (maxflow_cuda.cu includes it once per tile
 * side, MK_PR_SIDE = 16 or 32, each time in its own namespace): the tile constants, the shared-memory layout of a
 * visit, the tile visits and the cooperative kernel. No include guard: it is meant to be included twice. */

const int kTile = MK_PR_SIDE;
const int kThreads = kTile * kTile;           /* a thread per pixel of a tile: thread t has column t % kTile, row
                                               * t / kTile */
const int kRows = kThreads / kTile;           /* tile rows a step covers */
const int kMinBlocks = kTile == 32 ? 1 : 2;   /* co-resident blocks per SM the registers are sized for (16 x 16
                                               * tiles: 2 x 256 threads, up to 128 registers each) */
const int kRing = kTile + 2;                  /* side of a tile with its one-pixel ring */
const int kPix = kTile * kTile / kThreads;    /* pixels per thread in a tile visit */
const unsigned kRowMask = kTile == 32 ? 0xffffffffu : (1u << kTile) - 1u; /* the bits of a tile row */
static_assert(kPix == 1 && (kTile == 32 || kTile == 16), "the bit-parallel local BFS holds a tile row in a word");
const int kRingCells = 4 * kTile + 4;         /* pixels of the ring */
static_assert(kThreads >= kRingCells, "a thread loads at most one ring cell");

/* Offset of direction d in a ring-padded tile array. */
__host__ __device__ constexpr int hoff(int d)
{
    return ddx(d) + kRing * ddy(d);
}

struct sm_push {
    int r[8][kTile * kTile];   /* residual capacity of each pixel in each direction */
    int w[kTile * kTile];      /* balance: excess > 0, sink capacity < 0 */
    int h[kRing * kRing];      /* labels, ring included (the ring's stay as loaded) */
    unsigned rm[8][kTile];     /* local BFS: bit i of rm[d][j]: pixel (i, j) has a residual arc in direction d */
    unsigned sinkm[kTile];     /* local BFS: the sink pixels, a word per row */
    int seed[4][kTile];        /* local BFS: seed levels of rows 0, kTile - 1 (by column), columns 0, kTile - 1 */
    unsigned vis[kTile];       /* local BFS: the pixels it reached */
    unsigned late[kTile];      /* local BFS: the pixels it reached past kLevels levels (their labels are set) */
    unsigned plane[kLevelBits][kTile]; /* local BFS: bit b of the level index at which each pixel was reached */
    int level[kLevels];        /* local BFS: the distance of each level index */
    /* 16 x 16 tiles: the capacities of the pixels' stored edges, for the flows stored at the end of the visit
     * (32 x 32 tiles load them again there: their static shared memory is nearly full) */
    int cap[kTile == 16 ? 4 : 1][kTile == 16 ? kTile * kTile : 1];
};

struct sm_bfs {
    int d[kRing * kRing];
    int m[kTile * kTile];
    int before[kTile * kTile]; /* distances as loaded */
};

union sm_all {
    sm_push p;
    sm_bfs b;
};

struct sm_block {
    sm_all u;
    long long pf[PF_N];            /* thread 0's profile counters (when a.prof) */
    unsigned next;                 /* bits of the other tiling's 2x2 tiles to wake (maxflow_tiles.h) */
    int claimed;                   /* the list entry thread 0 claimed for the block's next visit (next_visit) */
    long long red[kThreads / 32];  /* block reductions */
    int mx[3];                     /* block_max's slots */
};

__device__ __forceinline__ bool inside(const pr_args &a, int x, int y)
{
    return x >= 0 && y >= 0 && x < a.w && y < a.h;
}

__device__ __forceinline__ size_t at(const pr_args &a, int x, int y)
{
    return (size_t)y * (size_t)a.pitch + (size_t)x;
}

__device__ __forceinline__ int vload(const int *p)
{
    return *(const volatile int *)p;
}


/* Profile: thread 0 adds the cycles since *t0 to counter k and restarts *t0. */
template <bool P>
__device__ __forceinline__ void pf_mark(const pr_args &a, sm_block &sb, int k, long long &t0)
{
    if (P && a.prof && threadIdx.x == 0) {
        long long t = clock64();
        sb.pf[k] += t - t0;
        t0 = t;
    }
}

template <bool P>
__device__ __forceinline__ void pf_count(const pr_args &a, sm_block &sb, int k, long long v)
{
    if (P && a.prof && threadIdx.x == 0)
        sb.pf[k] += v;
}

/* 1 + the smallest of v's 8 neighbours (ring-padded array, index hidx) over the directions set in mask, or cur if
 * smaller. The 8 loads are issued together (no load waits for a test of another), which is most of a relaxation
 * step's latency; values written concurrently by other threads are read old or new, either is an upper bound. */
__device__ __forceinline__ int relax_min(const int *v, int hidx, unsigned mask, int cur)
{
    int nb[8];
#pragma unroll
    for (int d = 0; d < 8; d++)
        nb[d] = vload(v + hidx + hoff(d));
    int best = cur;
#pragma unroll
    for (int d = 0; d < 8; d++)
        if ((mask >> d) & 1u)
            best = min(best, nb[d] + 1);
    return best;
}

/* Ring cell q (0..4T+3) of a tile of side T as tile coordinates (-1..T). */
template <int T> __device__ __forceinline__ void ring_pos(int q, int &i, int &j)
{
    const int ring = T + 2;
    if (q < ring) {
        i = q - 1;
        j = -1;
    } else if (q < 2 * ring) {
        i = q - ring - 1;
        j = T;
    } else if (q < 2 * ring + T) {
        i = -1;
        j = q - 2 * ring;
    } else {
        i = T;
        j = q - 2 * ring - T;
    }
}

/* Residual capacities of in-grid pixel (x, y) in the 8 directions and its balance w = term + inflow - outflow,
 * from the global flow. */
__device__ void pixel_state(const pr_args &a, int x, int y, int r[8], int &w)
{
    size_t p = at(a, x, y);
    int bal = __ldg(a.term + p);
#pragma unroll
    for (int d = 0; d < 4; d++) {
        r[d] = 0;
        if (inside(a, x + ddx(d), y + ddy(d))) {
            int f = __ldcg(a.flow[d] + p);
            r[d] = __ldg(a.cap[d] + p) - f;
            bal -= f;
        }
    }
#pragma unroll
    for (int d = 4; d < 8; d++) {
        r[d] = 0;
        int qx = x + ddx(d), qy = y + ddy(d);
        if (inside(a, qx, qy)) {
            size_t q = at(a, qx, qy);
            int f = __ldcg(a.flow[d - 4] + q); /* the flow from q to (x, y) */
            r[d] = __ldg(a.cap[d - 4] + q) + f;
            bal += f;
        }
    }
    w = bal;
}

/* Sum of v over the block, for thread 0. */
__device__ long long block_sum(sm_block &s, long long v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        s.red[threadIdx.x >> 5] = v;
    __syncthreads();
    long long t = 0;
    if (threadIdx.x == 0)
        for (int k = 0; k < kThreads / 32; k++)
            t += s.red[k];
    return t;
}

/* The largest v (>= 0) over the block, for every thread, with one barrier. The slots rotate with the calls (mk
 * counts them, alike in every thread): the slot reset in call k was last read in call k - 2, which every thread
 * finished before it reached call k - 1's barrier. */
__device__ int block_max(sm_block &s, int v, unsigned &mk)
{
    v = __reduce_max_sync(kFullMask, v);
    if ((threadIdx.x & 31) == 0 && v > 0)
        atomicMax(&s.mx[mk % 3], v);
    if (threadIdx.x == 0)
        s.mx[(mk + 1) % 3] = 0;
    __syncthreads();
    const int r = vload(&s.mx[mk % 3]);
    mk++;
    return r;
}

/* Thread 0: wakes the other tiling's tiles named by the bits (relative to tile (cx, cy) of tiling o): each tile
 * whose flag it raised goes to the next pass's list (list, *cnt entries). */
template <int T>
__device__ void wake(const int ntx[2], const int nty[2], unsigned *flags, unsigned bits, int cx, int cy, int o,
                     unsigned *cnt, unsigned *list)
{
    /* The (up to) four flag exchanges are issued together, then one addition to the count takes the list slots of
     * the tiles whose flag was raised here: two round trips to L2 instead of two per tile, one after the other. */
    const int n = !o, c0 = mk_pr_next_first(cx, o, T), r0 = mk_pr_next_first(cy, o, T);
    unsigned tile[4], old[4];
#pragma unroll
    for (int b = 0; b < 4; b++) {
        const int c = c0 + (b & 1), r = r0 + (b >> 1);
        const bool want = ((bits >> b) & 1) && c >= 0 && r >= 0 && c < ntx[n] && r < nty[n];
        tile[b] = (unsigned)(r * ntx[n] + c);
        old[b] = want ? atomicExch(flags + tile[b], 1u) : 1u;
    }
    unsigned k = 0;
#pragma unroll
    for (int b = 0; b < 4; b++)
        k += old[b] == 0u;
    if (!k)
        return;
    unsigned slot = atomicAdd(cnt, k);
#pragma unroll
    for (int b = 0; b < 4; b++)
        if (old[b] == 0u)
            __stcg(list + slot++, tile[b]);
}

/* ---- global relabel: one tile of one BFS pass ---- */

/* Relaxes the tile's distances to their fixpoint given the ring: d(p) = 1 for sink pixels, else 1 + the smallest
 * distance over p's residual arcs. Every value is an upper bound of the true distance throughout. Distances above
 * lim are not taken (a capped relabel: those pixels stay at kInf until a later relabel). */
__device__ int bfs_relax(sm_bfs &s, int lim)
{
    const int i = threadIdx.x % kTile;
    unsigned mk[kPix]; /* the residual directions of the thread's pixels, 0 for those that never change */
#pragma unroll
    for (int k = 0; k < kPix; k++) {
        unsigned m = (unsigned)s.m[(threadIdx.x / kTile + kRows * k) * kTile + i];
        mk[k] = (m & kSink) ? 0u : m & 0xffu;
    }
    for (int iter = 1;; iter++) {
        int changed = 0;
#pragma unroll
        for (int k = 0; k < kPix; k++) {
            if (!mk[k])
                continue;
            int j = threadIdx.x / kTile + kRows * k;
            int hidx = (j + 1) * kRing + i + 1;
            int cur = vload(&s.d[hidx]), best = relax_min(s.d, hidx, mk[k], cur);
            if (best < cur && best <= lim) {
                *(volatile int *)&s.d[hidx] = best;
                changed = 1;
            }
        }
        if (!__syncthreads_or(changed))
            return iter;
    }
}

/* The first pass of a global relabel (first) computes each pixel's residual mask from the flow, seeds the sink
 * pixels with distance 1 and adds up the tile's share of the flow value; later passes start from the stored
 * masks and distances. Pixels whose distance dropped wake the other tiling's tiles around them. */
template <bool P>
__device__ void bfs_visit(const pr_args &a, sm_block &sb, int o, int t, bool first, int lim, unsigned *cnt,
                          unsigned *list)
{
    sm_bfs &s = sb.u.b;
    const int tid = threadIdx.x, i = tid % kTile;
    const int cx = t % a.ntx[o], cy = t / a.ntx[o];
    const int x0 = mk_pr_origin(cx, o, kTile), y0 = mk_pr_origin(cy, o, kTile);
    long long share = 0;
    if (tid == 0)
        sb.next = 0;
    /* the ring's distances first, so that their loads overlap the pixels' (a thread waits for a load only where
     * it uses the value, and it stores each pixel's state before it would issue the ring's load) */
    int rq = 0, rd = kInf;
    if (tid < kRingCells) {
        int ri, rj;
        ring_pos<kTile>(tid, ri, rj);
        rq = (rj + 1) * kRing + ri + 1;
        if (inside(a, x0 + ri, y0 + rj))
            rd = __ldcg(a.dist + at(a, x0 + ri, y0 + rj));
    }
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = tid / kTile + kRows * k, x = x0 + i, y = y0 + j;
        unsigned m = 0;
        int dist = kInf, before = kInf;
        if (inside(a, x, y)) {
            size_t p = at(a, x, y);
            if (first) {
                int r[8], w;
                pixel_state(a, x, y, r, w);
#pragma unroll
                for (int d = 0; d < 8; d++)
                    if (r[d] > 0)
                        m |= 1u << d;
                m |= w < 0 ? kSink : w > 0 ? kExcess : 0u;
                __stcg(a.rmask + p, (uint16_t)m);
                int c = __ldg(a.term + p);
                share += (c < 0 ? -(long long)c : 0) - (w < 0 ? -(long long)w : 0);
                if (m & kSink)
                    dist = 1;
            } else {
                m = __ldcg(a.rmask + p);
                before = dist = __ldcg(a.dist + p);
            }
        }
        s.m[j * kTile + i] = (int)m;
        s.before[j * kTile + i] = before;
        s.d[(j + 1) * kRing + i + 1] = dist;
    }
    if (tid < kRingCells)
        s.d[rq] = rd;
    __syncthreads();
    pf_count<P>(a, sb, PF_BFS_ITERS, bfs_relax(s, lim));
    unsigned bits = 0;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = tid / kTile + kRows * k, x = x0 + i, y = y0 + j;
        if (!inside(a, x, y))
            continue;
        int dist = s.d[(j + 1) * kRing + i + 1];
        if (dist >= s.before[j * kTile + i])
            continue;
        __stcg(a.dist + at(a, x, y), dist);
        /* The tile's own pixels are at their fixpoint; a change of a border pixel can unsettle the pixels
         * around it in other tiles: wake the other tiling's tiles holding its 3x3 box (clipped to the grid). */
        if (i == 0 || i == kTile - 1 || j == 0 || j == kTile - 1) {
            int xl = max(x - 1, 0), xh = min(x + 1, a.w - 1), yl = max(y - 1, 0), yh = min(y + 1, a.h - 1);
            bits |= mk_pr_next_bit(xl, yl, cx, cy, o, kTile) | mk_pr_next_bit(xh, yl, cx, cy, o, kTile) |
                    mk_pr_next_bit(xl, yh, cx, cy, o, kTile) | mk_pr_next_bit(xh, yh, cx, cy, o, kTile);
        }
    }
    if (bits)
        atomicOr(&sb.next, bits);
    if (first) {
        long long tile_share = block_sum(sb, share); /* contains the barrier that publishes sb.next */
        if (tid == 0)
            a.tile_flow[t] = tile_share;
    } else {
        __syncthreads();
    }
    if (tid == 0 && sb.next)
        wake<kTile>(a.ntx, a.nty, a.bflag[!o], sb.next, cx, cy, o, cnt, list);
    /* No barrier: the other threads may start the next visit while thread 0 wakes (they touch sb.next and the
     * reduction slots only after that visit's first barrier, which thread 0 reaches after its wake). */
}

/* ---- push passes: one tile visit ---- */

/* The BFS of push_local_bfs, run by warp 0 (lane i: row i) once the masks and seeds are in s; the levels it went
 * through. Not inlined: its registers are not added to those live across it in the push visit. */
__device__ __noinline__ int warp_bfs(sm_push &s, int i)
{
    const bool row = i < kTile; /* lanes past the tile's rows (16 x 16 tiles) carry nothing */
    unsigned R[8];
#pragma unroll
    for (int d = 0; d < 8; d++)
        R[d] = row ? s.rm[d][i] : 0u;
    const unsigned sk = row ? s.sinkm[i] : 0u;
    const int sT = row ? s.seed[0][i] : kInf, sB = row ? s.seed[1][i] : kInf; /* pixels (i, 0), (i, kTile - 1) */
    const bool side = row && i > 0 && i < kTile - 1; /* the corners are in sT and sB */
    const int sL = side ? s.seed[2][i] : kInf, sR = side ? s.seed[3][i] : kInf;
    unsigned V = 0, F = 0, late = 0, P[kLevelBits];
#pragma unroll
    for (int b = 0; b < kLevelBits; b++)
        P[b] = 0;
    /* the lowest seed level ahead: the seed masks are only built at that level */
    int next = (int)__reduce_min_sync(kFullMask, (unsigned)min(min(sT, sB), min(sL, sR)));
    int L = 0, levels = 0;
    for (;;) {
        unsigned Fu = __shfl_up_sync(kFullMask, F, 1), Fd = __shfl_down_sync(kFullMask, F, 1);
        Fu = i == 0 ? 0u : Fu;
        Fd = i == kTile - 1 ? 0u : Fd;
        /* bit c of N: pixel (c, i) has a residual arc to a pixel of the frontier */
        unsigned N = ((R[0] & (F >> 1)) | (R[4] & (F << 1) & kRowMask)) | ((R[2] & Fd) | (R[6] & Fu)) |
                     ((R[1] & (Fd >> 1)) | (R[3] & (Fd << 1))) | ((R[7] & (Fu >> 1)) | (R[5] & (Fu << 1)));
        L++;
        if (L == 1)
            N |= sk;
        if (L == next) {
            const unsigned top = __ballot_sync(kFullMask, sT == L), bottom = __ballot_sync(kFullMask, sB == L);
            N |= (sL == L ? 1u : 0u) | (sR == L ? 1u << (kTile - 1) : 0u) | (i == 0 ? top : 0u) |
                 (i == kTile - 1 ? bottom : 0u);
            int p = kInf;
            p = sT > L ? min(p, sT) : p;
            p = sB > L ? min(p, sB) : p;
            p = sL > L ? min(p, sL) : p;
            p = sR > L ? min(p, sR) : p;
            next = (int)__reduce_min_sync(kFullMask, (unsigned)p);
        }
        N &= ~V;
        V |= N;
        F = N;
        if (levels < kLevels) {
            /* the level index in bit planes; the pixels set their labels from them afterwards */
#pragma unroll
            for (int b = 0; b < kLevelBits; b++)
                P[b] |= (levels >> b) & 1 ? N : 0u;
            if (i == 0)
                s.level[levels] = L;
        } else {
            late |= N;
            for (unsigned m = N; m; m &= m - 1) {
                const int hq = (i + 1) * kRing + __ffs(m);
                s.h[hq] = max(s.h[hq], L);
            }
        }
        levels++;
        if (!__any_sync(kFullMask, N != 0)) {
            if (next >= kInf)
                break;
            L = next - 1;
        }
    }
    if (row) {
        s.vis[i] = V;
        s.late[i] = late;
#pragma unroll
        for (int b = 0; b < kLevelBits; b++)
            s.plane[b][i] = P[b];
    }
    return levels;
}

/* Local BFS inside the tile: distances to the sink pixels (1) or through the ring (ring label + 1); labels are
 * raised to them (never lowered), and a pixel that reaches neither gets kInf. Returns the highest label below hc
 * of a pixel with excess, 0 if there is none (labels are >= 1).
 *
 * Bit-parallel, by warp 0 alone: lane j holds row j of the tile as a word per direction for the residual arcs (bit
 * i = pixel (i, j)), and the BFS goes level by level: the pixels reached at level L + 1 are those
 * with a residual arc to a pixel reached at level L (shifts within the row, shuffles between rows), plus the seeds
 * of level L + 1 (the sinks at 1; a border pixel at 1 + the lowest ring label it has a residual arc to). When a
 * level reaches nothing new the BFS jumps to the lowest seed still ahead. A level costs a few dozen instructions of
 * one warp (~400 cycles, a chain of dependent instructions), where relaxing every pixel to a fixpoint cost every
 * thread of the block a step and a barrier per hop. The level index of each pixel is kept in bit planes (past
 * kLevels levels the labels are written directly). The distances are those of the relaxation (both are the exact
 * shortest distances from the seeds). */
__device__ int push_local_bfs(const pr_args &a, sm_block &sb, int x0, int y0, int hc, int &iters, unsigned &mk)
{
    sm_push &s = sb.u.p;
    const int tid = threadIdx.x, i = tid % kTile, j = tid / kTile; /* kPix == 1 */
    const int idx = j * kTile + i, hidx = (j + 1) * kRing + i + 1;
    const bool in = inside(a, x0 + i, y0 + j), sink = in && s.w[idx] < 0;
    int rr[8];
#pragma unroll
    for (int d = 0; d < 8; d++)
        rr[d] = in && !sink ? s.r[d][idx] : 0;
    unsigned word = 0;
#pragma unroll
    for (int d = 0; d < 8; d++) {
        unsigned b = __ballot_sync(kFullMask, rr[d] > 0);
        word = i == d ? b : word;
    }
    unsigned sinks = __ballot_sync(kFullMask, sink);
    const int shift = (tid & 31) / kTile * kTile; /* a warp holds 32 / kTile rows, a ballot as many */
    if (i < 8)
        s.rm[i][j] = (word >> shift) & kRowMask;
    else if (i == 8)
        s.sinkm[j] = (sinks >> shift) & kRowMask;
    if (i == 0 || i == kTile - 1 || j == 0 || j == kTile - 1) {
        int sd = kInf;
#pragma unroll
        for (int d = 0; d < 8; d++) {
            const int ni = i + ddx(d), nj = j + ddy(d);
            if ((ni < 0 || ni >= kTile || nj < 0 || nj >= kTile) && rr[d] > 0)
                sd = min(sd, min(s.h[hidx + hoff(d)], kInf - 1) + 1);
        }
        if (j == 0)
            s.seed[0][i] = sd;
        if (j == kTile - 1)
            s.seed[1][i] = sd;
        if (i == 0)
            s.seed[2][j] = sd;
        if (i == kTile - 1)
            s.seed[3][j] = sd;
    }
    __syncthreads();
    if (tid < 32)
        iters = warp_bfs(s, tid);
    __syncthreads();
    int top = 0;
    if (in) {
        int h = kInf;
        if ((s.vis[j] >> i) & 1u) {
            h = s.h[hidx];
            if (!((s.late[j] >> i) & 1u)) {
                int k = 0;
#pragma unroll
                for (int b = 0; b < kLevelBits; b++)
                    k |= ((s.plane[b][j] >> i) & 1u) << b;
                h = max(h, s.level[k]);
            }
        }
        s.h[hidx] = h;
        top = s.w[idx] > 0 && h < hc ? h : 0;
    }
    return block_max(sb, top, mk);
}

/* The push step of pixel (i, j) of the tile at grid position (x, y): pushes its excess down to lower neighbours
 * (only the higher end of an edge pushes along it in a step, so each residual pair has one writer). Pushes across
 * the tile's border go to the global flow by atomics and wake the neighbour's tile (bits); cand is raised to the
 * labels of the pixels inside the tile that received excess. Returns 1 if it pushed. */
__device__ int push_pixel(const pr_args &a, sm_push &s, int i, int j, int x, int y, int hc, int cx, int cy, int o,
                          unsigned &bits, int &cand)
{
    const int idx = j * kTile + i, hidx = (j + 1) * kRing + i + 1;
    int e = vload(&s.w[idx]);
    const int hu = s.h[hidx];
    if (e <= 0 || hu >= hc)
        return 0;
    /* The pixel's residuals and its neighbours' labels, all loaded before any store: no other thread writes
     * them in this step (a neighbour adds only to residuals of the pixel towards itself, which this pixel, being
     * lower there, does not push along; labels change in the relabel step). */
    int rr[8], hn[8];
#pragma unroll
    for (int d = 0; d < 8; d++) {
        rr[d] = s.r[d][idx];
        hn[d] = s.h[hidx + hoff(d)];
    }
    int pushed = 0;
#pragma unroll
    for (int d = 0; d < 8; d++) {
        if (e <= 0 || hn[d] >= hu || rr[d] <= 0)
            continue;
        int delta = min(e, rr[d]);
        s.r[d][idx] = rr[d] - delta;
        e -= delta;
        pushed += delta;
        int vi = i + ddx(d), vj = j + ddy(d);
        if (vi >= 0 && vi < kTile && vj >= 0 && vj < kTile) {
            int vidx = vj * kTile + vi;
            /* v is lower: it does not push back along this edge in this step, so nothing else writes this
             * residual; an atomic add (its result unused) spares the latency of the load in a plain += */
            atomicAdd(&s.r[d ^ 4][vidx], delta);
            atomicAdd(&s.w[vidx], delta);
            cand = max(cand, hn[d]);
        } else {
            int vx = x + ddx(d), vy = y + ddy(d);
            if (d < 4)
                atomicAdd(a.flow[d] + at(a, x, y), delta);
            else
                atomicAdd(a.flow[d - 4] + at(a, vx, vy), -delta);
            bits |= mk_pr_next_bit(vx, vy, cx, cy, o, kTile);
        }
    }
    if (pushed)
        atomicSub(&s.w[idx], pushed);
    return pushed != 0;
}

/* The relabel step of pixel idx: an active pixel with no lower residual neighbour goes to 1 + the lowest one.
 * Neighbours relabel concurrently; a neighbour's label read is its old or new value, either keeps the labelling
 * valid. The 8 residuals and 8 labels are loaded together, before any test (a label load that waited for its
 * residual's test made the step a chain of 8 round trips). Returns whether the pixel is still active. */
__device__ int relabel_pixel(sm_push &s, int idx, int hidx, int hc)
{
    int hu = s.h[hidx];
    if (s.w[idx] <= 0 || hu >= hc)
        return 0;
    int rr[8], hn[8];
#pragma unroll
    for (int d = 0; d < 8; d++) {
        rr[d] = s.r[d][idx];
        hn[d] = vload(&s.h[hidx + hoff(d)]);
    }
    int m = kInf;
#pragma unroll
    for (int d = 0; d < 8; d++)
        if (rr[d] > 0)
            m = min(m, hn[d]);
    if (m >= hu) {
        hu = m >= kInf ? kInf : m + 1;
        *(volatile int *)&s.h[hidx] = hu;
    }
    return hu < hc;
}

template <bool P>
__device__ void push_visit(const pr_args &a, sm_block &sb, int o, int t, int hc, unsigned *cnt, unsigned *list,
                           unsigned &mk)
{
    sm_push &s = sb.u.p;
    const int tid = threadIdx.x, i = tid % kTile;
    const int cx = t % a.ntx[o], cy = t / a.ntx[o];
    const int x0 = mk_pr_origin(cx, o, kTile), y0 = mk_pr_origin(cy, o, kTile);
    long long t0 = (P && a.prof) ? clock64() : 0;
    int iters = 0;
    if (tid == 0)
        sb.next = 0;
    /* the ring's labels first, so that their loads overlap the pixels' (as in bfs_visit) */
    int rq = 0, rh = kInf;
    if (tid < kRingCells) {
        int ri, rj;
        ring_pos<kTile>(tid, ri, rj);
        rq = (rj + 1) * kRing + ri + 1;
        if (inside(a, x0 + ri, y0 + rj))
            rh = __ldcg(a.lab + at(a, x0 + ri, y0 + rj));
    }
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = tid / kTile + kRows * k, x = x0 + i, y = y0 + j, idx = j * kTile + i;
        int r[8], w = 0, h = kInf;
#pragma unroll
        for (int d = 0; d < 8; d++)
            r[d] = 0;
        if (inside(a, x, y)) {
            pixel_state(a, x, y, r, w);
            h = __ldcg(a.lab + at(a, x, y));
            if (kTile == 16) {
#pragma unroll
                for (int d = 0; d < 4; d++)
                    s.cap[d][idx] = __ldg(a.cap[d] + at(a, x, y));
            }
        }
#pragma unroll
        for (int d = 0; d < 8; d++)
            s.r[d][idx] = r[d];
        s.w[idx] = w;
        s.h[(j + 1) * kRing + i + 1] = h;
    }
    if (tid < kRingCells)
        s.h[rq] = rh;
    __syncthreads();
    pf_mark<P>(a, sb, PF_PUSH_LOAD, t0);
    unsigned pbits = 0; /* tiles of the other tiling that received excess across the border */
    bool active = push_local_bfs(a, sb, x0, y0, hc, iters, mk) != 0;
    pf_count<P>(a, sb, PF_LBFS_ITERS, iters);
    pf_mark<P>(a, sb, PF_PUSH_LBFS, t0);
    bool stalled = false;
    for (int sweep = 0; sweep < a.sweeps && active; sweep++) {
        pf_count<P>(a, sb, PF_SWEEPS, 1);
        int pushed = 0, cand = 0;
#pragma unroll 1
        for (int k = 0; k < kPix; k++) {
            int j = tid / kTile + kRows * k, x = x0 + i, y = y0 + j;
            if (inside(a, x, y))
                pushed |= push_pixel(a, s, i, j, x, y, hc, cx, cy, o, pbits, cand);
        }
        pushed = __syncthreads_or(pushed);
        int act = 0;
#pragma unroll 1
        for (int k = 0; k < kPix; k++) {
            int j = tid / kTile + kRows * k;
            if (inside(a, x0 + i, y0 + j))
                act |= relabel_pixel(s, j * kTile + i, (j + 1) * kRing + i + 1, hc);
        }
        active = __syncthreads_or(act) != 0;
        if (!pushed) {
            if (stalled)
                break;
            active = push_local_bfs(a, sb, x0, y0, hc, iters, mk) != 0;
            pf_count<P>(a, sb, PF_STALL_BFS, 1);
            stalled = true;
        } else {
            stalled = false;
        }
    }
    pf_mark<P>(a, sb, PF_PUSH_SWEEP, t0);
    unsigned bits = pbits;
#pragma unroll 1
    for (int k = 0; k < kPix; k++) {
        int j = tid / kTile + kRows * k, x = x0 + i, y = y0 + j, idx = j * kTile + i;
        if (!inside(a, x, y))
            continue;
        size_t p = at(a, x, y);
        int h = s.h[(j + 1) * kRing + i + 1];
        __stcg(a.lab + p, h);
        /* Edges inside the tile are this block's alone: store them. Edges across the border were updated by
         * atomics as they were pushed. */
#pragma unroll
        for (int d = 0; d < 4; d++) {
            int vi = i + ddx(d), vj = j + ddy(d);
            if (vi >= 0 && vi < kTile && vj < kTile && inside(a, x + ddx(d), y + ddy(d)))
                __stcg(a.flow[d] + p, (kTile == 16 ? s.cap[d][idx] : __ldg(a.cap[d] + p)) - s.r[d][idx]);
        }
        if (s.w[idx] > 0 && h < hc)
            bits |= mk_pr_next_bit(x, y, cx, cy, o, kTile);
    }
    if (bits)
        atomicOr(&sb.next, bits);
    __syncthreads();
    if (tid == 0 && sb.next)
        wake<kTile>(a.ntx, a.nty, a.pflag[!o], sb.next, cx, cy, o, cnt, list);
    /* no barrier (as at the end of bfs_visit) */
    pf_mark<P>(a, sb, PF_PUSH_STORE, t0);
}

/* The grid barrier between passes (all threads of every block). Cooperative groups' grid.sync() does the same
 * arrival (thread 0: a fence, one atomic add on a word whose top bit flips once every block has arrived: block 0
 * adds 2^31 - (blocks - 1), the others 1) but waits with acquire loads, each an L2 round trip followed by an
 * invalidation of the SM's whole L1 (CCTL.IVALL), about a million of them per 640x480 solve while the other block
 * on the SM may still be in a visit (NOTES.md, session 21). Here the wait polls with relaxed loads and one fence
 * follows the flip. The word's low 31 bits are 0 between kernels (mk_pr_create clears it; each barrier adds 2^31
 * in all). */
__device__ __forceinline__ void grid_barrier(const pr_args &a)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        __threadfence();
        const unsigned old = atomicAdd(a.bar, nb);
        unsigned cur;
        do {
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(a.bar) : "memory");
        } while (((old ^ cur) & 0x80000000u) == 0);
        __threadfence();
    }
    __syncthreads();
}

/* The list entry of a block's next visit in pass gp of n tiles (push and BFS passes alike): the first is the
 * block's own (blockIdx.x); after it, when the pass has more tiles than blocks, the block claims the next unvisited
 * entry (gridDim.x + a ticket of the pass's counter, claim[gp % 3], which pass_end clears two passes ahead as it
 * does the tile counts), so that the blocks whose visits end first take the remaining tiles, instead of every
 * block taking every gridDim.x-th entry whatever its earlier visits cost (NOTES.md, session 20: 1-7 % faster
 * solves). Returns n or more when nothing is left. Thread 0 claims; the barrier publishes the entry. */
__device__ __forceinline__ int next_visit(const pr_args &a, sm_block &sb, unsigned gp, int n)
{
    if (n <= (int)gridDim.x)
        return n;
    if (threadIdx.x == 0)
        sb.claimed = (int)gridDim.x + (int)atomicAdd(&a.ctl->claim[gp % 3], 1u);
    __syncthreads();
    return sb.claimed;
}

/* The profile's per-pass slot: the slowest visit of pass g (thread 0). */
template <bool P>
__device__ __forceinline__ void pf_pass(const pr_args &a, unsigned gp, int kind, int tiles, long long cycles)
{
    if (P && a.prof && threadIdx.x == 0 && gp < (unsigned)PF_MAX_PASSES) {
        atomicMax(a.prof + PF_PASS_MAX + gp, (unsigned long long)cycles);
        if (blockIdx.x == 0)
            a.prof[PF_PASS_KIND + gp] = (unsigned long long)kind | (unsigned long long)tiles << 2;
    }
}

/* The end of pass gp: the leader clears the counter of the pass after next and counts this one (*kind), the grid
 * barrier, then whether another pass follows: some tile was woken (cnt) and the cap on passes is not reached
 * (status 2 when it is). The next pass's tile count (pn) and, on 16 x 16 tiles, this block's first entry of its list
 * (pt, meaningful when blockIdx.x < pn) are read here, together: one round trip to L2 before the pass, not three in
 * a row. (The 32 x 32 kernel, at 64 registers, spills more with pt held and was no faster: NOTES.md, session 14.) */
const bool kSpecFirst = kTile == 16;
template <bool P>
__device__ __forceinline__ bool pass_end(const pr_args &a, sm_block &sb, bool leader, int *kind,
                                         const unsigned *cnt, unsigned &gp, int &passes, int &status, long long &t0,
                                         unsigned &pn, unsigned &pt)
{
    if (leader) {
        a.ctl->cnt[(gp + 2) % 3] = 0;
        a.ctl->claim[(gp + 2) % 3] = 0;
        atomicAdd(kind, 1); /* no load: the leader does not wait for it before the barrier */
    }
    pf_mark<P>(a, sb, PF_SKIP, t0);
    grid_barrier(a);
    pf_mark<P>(a, sb, PF_SYNC, t0);
    const unsigned woken = __ldcg(cnt);
    if (kSpecFirst)
        pt = __ldcg(a.list[(gp + 1) & 1] + blockIdx.x); /* the list has a slot for every block */
    pn = woken;
    gp++;
    if (!woken)
        return false;
    if (++passes >= kMaxPasses) {
        status = 2;
        return false;
    }
    return true;
}

/* ---- the solve ---- */

template <bool P>
__global__ void __launch_bounds__(kThreads, kMinBlocks) pr_kernel(pr_args a)
{
    __shared__ sm_block sb;
    const int tid = threadIdx.x;
    const bool leader = blockIdx.x == 0 && tid == 0;
    const int ntile0 = a.ntx[0] * a.nty[0], ntile1 = a.ntx[1] * a.nty[1]; /* ntile1 >= ntile0 */
    const long long gtid = (long long)blockIdx.x * kThreads + tid, gsize = (long long)gridDim.x * kThreads;
    const long long k0 = (P && a.prof) ? clock64() : 0;
    long long t0 = k0;
    unsigned mk = 0; /* block_max calls so far */
    if (P && a.prof && tid == 0)
        for (int k = 0; k < PF_N; k++)
            sb.pf[k] = 0;
    if (tid == 0)
        sb.mx[0] = sb.mx[1] = sb.mx[2] = 0; /* published by the grid barrier below */

    /* Start: the kept flow clamped to the capacities (edges leaving the grid carry none), no distances, no
     * flags. */
    for (int y = blockIdx.x; y < a.h; y += gridDim.x)
        for (int x = tid; x < a.w; x += kThreads) {
            size_t p = at(a, x, y);
#pragma unroll
            for (int d = 0; d < 4; d++) {
                int c = inside(a, x + ddx(d), y + ddy(d)) ? max(__ldg(a.cap[d] + p), 0) : 0;
                int f = __ldcg(a.flow[d] + p);
                __stcg(a.flow[d] + p, min(max(f, -c), c));
            }
            __stcg(a.dist + p, kInf);
        }
    for (long long t = gtid; t < ntile1; t += gsize) {
        if (t < ntile0) {
            __stcg(a.pflag[0] + t, 0u);
            __stcg(a.bflag[0] + t, 0u);
        }
        __stcg(a.pflag[1] + t, 0u);
        __stcg(a.bflag[1] + t, 0u);
    }
    if (leader) {
        pr_ctl *c = a.ctl;
        c->cnt[0] = c->cnt[1] = c->cnt[2] = 0;
        c->claim[0] = c->claim[1] = c->claim[2] = 0;
        c->active = c->dmax = c->status = 0;
        c->relabels = c->push_passes = c->bfs_passes = 0;
        c->flow = 0;
    }
    grid_barrier(a);

    unsigned gp = 0; /* passes so far: selects the counter slots */
    unsigned pn = 0, pt = 0; /* the pass's tile count and this block's first tile (pass_end) */
    int passes = 0, status = 0;
    bool complete_next = false; /* the last relabel was capped and found nothing active within the cap */
    for (int round = 0;; round++) {
        const bool capped = a.relabel_cap > 0 && round > 0 && !complete_next;
        const int lim = capped ? a.relabel_cap : kInf - 1;
        /* Global relabel. */
        for (int bp = 0;; bp++) {
            const int o = bp & 1;
            const bool first = bp == 0;
            unsigned *cnt = &a.ctl->cnt[(gp + 1) % 3], *next = a.list[(gp + 1) & 1];
            const unsigned *mine = a.list[gp & 1];
            /* the first pass visits every tile of tiling 0, the others the tiles woken for them */
            const int n = first ? ntile0 : (int)pn;
            long long slow = 0;
            for (int i = blockIdx.x; i < n; i = next_visit(a, sb, gp, n)) {
                const int t = first ? i : kSpecFirst && i == (int)blockIdx.x ? (int)pt : (int)__ldcg(mine + i);
                if (!first && tid == 0)
                    __stcg(a.bflag[o] + t, 0u);
                pf_mark<P>(a, sb, PF_SKIP, t0);
                long long v0 = t0;
                bfs_visit<P>(a, sb, o, t, first, lim, cnt, next);
                pf_mark<P>(a, sb, PF_BFS_VISIT, t0);
                pf_count<P>(a, sb, PF_BFS_VISITS, 1);
                slow = max(slow, t0 - v0);
            }
            pf_pass<P>(a, gp, 1, n, slow);
            if (first) {
                for (long long t = gtid; t < ntile1; t += gsize) {
                    if (t < ntile0)
                        __stcg(a.pflag[0] + t, 0u);
                    __stcg(a.pflag[1] + t, 0u);
                }
                if (leader)
                    a.ctl->active = a.ctl->dmax = 0;
            }
            if (!pass_end<P>(a, sb, leader, &a.ctl->bfs_passes, cnt, gp, passes, status, t0, pn, pt))
                break;
        }
        /* The labels' pass below counts the first push pass's tiles in the counter every thread has just read
         * (pass_end: zero) to end the relabel: a thread still to read it would see the new count, run another BFS
         * pass alone and break the block's and the grid's barriers. So all read it first. */
        pf_mark<P>(a, sb, PF_SKIP, t0);
        grid_barrier(a);
        pf_mark<P>(a, sb, PF_SYNC, t0);
        if (status)
            break;

        /* The distances become the labels (and are reset for the next relabel); the cut of this preflow; is
         * anything active? */
        int active = 0, dmax = 0;
        pf_mark<P>(a, sb, PF_SKIP, t0);
        for (int y = blockIdx.x; y < a.h; y += gridDim.x)
            for (int x = tid; x < a.w; x += kThreads) {
                size_t p = at(a, x, y);
                const int dist = __ldcg(a.dist + p);
                const unsigned rm = __ldcg(a.rmask + p); /* with the distance: one round trip */
                __stcg(a.lab + p, dist);
                __stcg(a.dist + p, kInf);
                a.cut[(size_t)y * a.cut_pitch + x] = dist >= kInf;
                if (dist < kInf) {
                    dmax = max(dmax, dist);
                    if (rm & kExcess) {
                        /* the tile goes to the first push pass's list (pass gp: the relabel's last pass left
                         * cnt[gp % 3] at 0) */
                        const unsigned t = (unsigned)((y / kTile) * a.ntx[0] + x / kTile);
                        unsigned *f = a.pflag[0] + t;
                        active++;
                        if (!__ldcg(f) && atomicExch(f, 1u) == 0u)
                            __stcg(a.list[gp & 1] + atomicAdd(&a.ctl->cnt[gp % 3], 1u), t);
                    }
                }
            }
        for (int off = 16; off > 0; off >>= 1) {
            active += __shfl_down_sync(0xffffffffu, active, off);
            dmax = max(dmax, __shfl_down_sync(0xffffffffu, dmax, off));
        }
        if ((tid & 31) == 0) {
            if (active)
                atomicAdd(&a.ctl->active, active);
            if (dmax)
                atomicMax(&a.ctl->dmax, dmax);
        }
        if (leader)
            atomicAdd(&a.ctl->relabels, 1);
        pf_mark<P>(a, sb, PF_LABELS, t0);
        grid_barrier(a);
        pf_mark<P>(a, sb, PF_SYNC, t0);
        active = __ldcg(&a.ctl->active);
        dmax = __ldcg(&a.ctl->dmax);
        if (P && a.prof && leader && round < PF_MAX_ROUNDS)
            a.prof[PF_ROUND + round] = (unsigned)active | (unsigned long long)(unsigned)dmax << 32 | 1ull << 63;
        /* Nothing active within the cap: a full relabel decides (a capped one whose distances all stayed below the
         * cap was complete: any pixel farther away would have a neighbour at the cap). */
        if (!active && capped && dmax >= lim) {
            complete_next = true;
            if (round + 1 >= a.max_rounds) {
                status = 1;
                break;
            }
            continue;
        }
        if (!active)
            break;
        complete_next = false;
        if (round + 1 >= a.max_rounds) {
            status = 1;
            break;
        }

        /* Push passes. */
        const int hc = dmax + a.margin;
        const int np = round == 0 ? a.push_passes : a.later_passes;
        for (int pp = 0; pp < np; pp++) {
            const int o = pp & 1;
            unsigned *cnt = &a.ctl->cnt[(gp + 1) % 3], *next = a.list[(gp + 1) & 1];
            const unsigned *mine = a.list[gp & 1];
            if (pp == 0) { /* the labels pass's count and list (later passes: pass_end) */
                pn = __ldcg(&a.ctl->cnt[gp % 3]);
                if (kSpecFirst)
                    pt = __ldcg(mine + blockIdx.x);
            }
            const int n = (int)pn;
            long long slow = 0;
            for (int i = blockIdx.x; i < n; i = next_visit(a, sb, gp, n)) {
                const int t = kSpecFirst && i == (int)blockIdx.x ? (int)pt : (int)__ldcg(mine + i);
                if (tid == 0)
                    __stcg(a.pflag[o] + t, 0u);
                pf_mark<P>(a, sb, PF_SKIP, t0);
                long long v0 = t0;
                push_visit<P>(a, sb, o, t, hc, cnt, next, mk);
                if (P && a.prof && tid == 0)
                    t0 = clock64();
                pf_count<P>(a, sb, PF_PUSH_VISITS, 1);
                slow = max(slow, t0 - v0);
            }
            pf_pass<P>(a, gp, 2, n, slow);
            if (!pass_end<P>(a, sb, leader, &a.ctl->push_passes, cnt, gp, passes, status, t0, pn, pt))
                break;
        }
        if (status)
            break;
    }

    /* The flow value: the tiles' shares from the last global relabel's first pass. */
    if (blockIdx.x == 0) {
        long long part = 0;
        for (int t = tid; t < ntile0; t += kThreads)
            part += __ldcg(a.tile_flow + t);
        long long flow = block_sum(sb, part);
        if (tid == 0) {
            a.ctl->status = status;
            a.ctl->flow = status ? -1 : flow;
            *a.flow_out = status ? -1 : flow;
        }
    }
    if (P && a.prof && tid == 0) {
        sb.pf[PF_KERNEL] = clock64() - k0;
        if (blockIdx.x == 0)
            sb.pf[PF_PASSES] = gp;
        for (int k = 0; k < PF_N; k++)
            atomicAdd(a.prof + k, (unsigned long long)sb.pf[k]);
    }
}

