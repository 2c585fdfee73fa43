/* maxflow_tiles: the tile geometry of the CUDA push-relabel (maxflow_cuda.cu), in plain C so that the CPU tests
 * can check it exhaustively.
 *
 * The grid is cut into T x T tiles (T even; maxflow_cuda.cu uses 16 or 32) in two tilings: tiling 0 starts at pixel (0, 0), tiling 1 is shifted by half a tile, its first tile starting at
 * (-T/2, -T/2). Passes alternate between the
 * tilings, so that a path running along the border of one tiling's tiles lies inside the other's. A tile's
 * "extended region" is the tile plus a one-pixel ring; everything a tile visit reads or writes of its neighbours
 * lies in that ring, and every in-grid pixel of the extended region of a tile of one tiling lies in one of the 2x2
 * tiles of the other tiling that overlap it (mk_pr_next_*): a visit's wake-up flags for the next pass fit in four
 * bits. */
#ifndef MK_MAXFLOW_TILES_H
#define MK_MAXFLOW_TILES_H

#ifdef __CUDACC__
#define MK_PR_FN static __host__ __device__ __forceinline__
#else
#define MK_PR_FN static inline
#endif


/* The offset of tiling o (0 or 1): its tiles start at -offset. */
MK_PR_FN int mk_pr_offset(int o, int T)
{
    return o ? T / 2 : 0;
}

/* Tiles of tiling o along a side of n pixels. */
MK_PR_FN int mk_pr_ntiles(int n, int o, int T)
{
    return (n + mk_pr_offset(o, T) + T - 1) / T;
}

/* The tile column (or row) of tiling o holding coordinate v (floor division; v >= -T - offset, which covers the ring
 * of every tile). */
MK_PR_FN int mk_pr_tile_of(int v, int o, int T)
{
    return (v + mk_pr_offset(o, T) + T) / T - 1;
}

/* The first pixel coordinate of tile column (or row) c of tiling o (negative for tiling 1's first tile). */
MK_PR_FN int mk_pr_origin(int c, int o, int T)
{
    return c * T - mk_pr_offset(o, T);
}

/* For tile column (or row) c of tiling o: the first tile column of the other tiling that overlaps its extended
 * region. That region's coordinates [origin - 1, origin + T] lie in columns first and first + 1. */
MK_PR_FN int mk_pr_next_first(int c, int o, int T)
{
    return mk_pr_tile_of(mk_pr_origin(c, o, T) - 1, !o, T);
}

/* The bit (0..3) of the other tiling's tile holding pixel (x, y) of the extended region of tile (cx, cy) of
 * tiling o: bit 0 = column, bit 1 = row, relative to mk_pr_next_first. */
MK_PR_FN unsigned mk_pr_next_bit(int x, int y, int cx, int cy, int o, int T)
{
    int dc = mk_pr_tile_of(x, !o, T) - mk_pr_next_first(cx, o, T);
    int dr = mk_pr_tile_of(y, !o, T) - mk_pr_next_first(cy, o, T);
    return 1u << (dc + 2 * dr);
}

#endif
