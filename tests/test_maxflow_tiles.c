/* test_maxflow_tiles: the tile geometry of the CUDA max-flow (kernels/cuda/maxflow_tiles.h), on the CPU. Both
 * tilings must cover every pixel exactly once with tiles that each hold a pixel of the grid, and every in-grid pixel
 * of a tile's extended region (the tile and its one-pixel ring) must lie in the tile of the other tiling that
 * mk_pr_next_bit names: the kernel wakes the next pass's tiles through those four bits only. */
#include "testutil.h"

#include "cuda/maxflow_tiles.h"

#include <stdio.h>

/* One axis of n pixels: coverage, and the other tiling's tile of every extended-region coordinate. */
static void check_axis(int n, int T)
{
    for (int o = 0; o < 2; o++) {
        int nt = mk_pr_ntiles(n, o, T), no = mk_pr_ntiles(n, !o, T);
        for (int c = 0; c < nt; c++) {
            int x0 = mk_pr_origin(c, o, T);
            if (x0 >= n || x0 + T <= 0)
                fail_msg("n %d tiling %d: tile %d [%d, %d) holds no pixel", n, o, c, x0, x0 + T);
            int first = mk_pr_next_first(c, o, T);
            for (int v = x0 - 1; v <= x0 + T; v++) {
                if (v < 0 || v >= n)
                    continue;
                int t = mk_pr_tile_of(v, !o, T);
                if (t < 0 || t >= no || t - first < 0 || t - first > 1)
                    fail_msg("n %d tiling %d tile %d: pixel %d is in tile %d of the other tiling, not %d or %d", n, o,
                             c, v, t, first, first + 1);
                if (v < mk_pr_origin(t, !o, T) || v >= mk_pr_origin(t, !o, T) + T)
                    fail_msg("n %d: tile_of(%d, %d) = %d does not hold it", n, v, !o, t);
            }
        }
        for (int v = 0; v < n; v++) {
            int c = mk_pr_tile_of(v, o, T);
            if (c < 0 || c >= nt || v < mk_pr_origin(c, o, T) || v >= mk_pr_origin(c, o, T) + T)
                fail_msg("n %d tiling %d: pixel %d put in tile %d of %d", n, o, v, c, nt);
        }
        for (int v = -T / 2 - 1; v < n + T; v++) {
            int q = v + mk_pr_offset(o, T), floor_div = q >= 0 ? q / T : -((-q + T - 1) / T);
            if (mk_pr_tile_of(v, o, T) != floor_div)
                fail_msg("tile_of(%d, %d) = %d, floor((%d + %d) / %d) = %d", v, o, mk_pr_tile_of(v, o, T), v,
                         mk_pr_offset(o, T), T, floor_div);
        }
    }
}

static void test_axes(void **state)
{
    (void)state;
    for (int T = 16; T <= 32; T += 16) {
        for (int n = 1; n <= 4200; n++)
            check_axis(n, T);
        check_axis(MK_IMAGE_MAX_DIM, T);
    }
}

/* Two dimensions: the bit names the tile holding the pixel, and tiles of one tiling never overlap. */
static void check_grid(int w, int h, int T)
{
    for (int o = 0; o < 2; o++) {
        int ntx = mk_pr_ntiles(w, o, T), nty = mk_pr_ntiles(h, o, T);
        for (int cy = 0; cy < nty; cy++)
            for (int cx = 0; cx < ntx; cx++) {
                int x0 = mk_pr_origin(cx, o, T), y0 = mk_pr_origin(cy, o, T);
                int fx = mk_pr_next_first(cx, o, T), fy = mk_pr_next_first(cy, o, T);
                for (int y = y0 - 1; y <= y0 + T; y++)
                    for (int x = x0 - 1; x <= x0 + T; x++) {
                        if (x < 0 || y < 0 || x >= w || y >= h)
                            continue;
                        unsigned bit = mk_pr_next_bit(x, y, cx, cy, o, T);
                        if (bit != 1 && bit != 2 && bit != 4 && bit != 8)
                            fail_msg("%dx%d tiling %d tile (%d, %d): bit %#x for (%d, %d)", w, h, o, cx, cy, bit, x, y);
                        int c = fx + (bit == 2 || bit == 8), r = fy + (bit >= 4);
                        if (c != mk_pr_tile_of(x, !o, T) || r != mk_pr_tile_of(y, !o, T))
                            fail_msg("%dx%d tiling %d tile (%d, %d): (%d, %d) is in (%d, %d), bit %#x says (%d, %d)", w,
                                     h, o, cx, cy, x, y, mk_pr_tile_of(x, !o, T), mk_pr_tile_of(y, !o, T), bit, c, r);
                    }
            }
    }
}

static void test_grids(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1}, {1, 77}, {77, 1}, {16, 16}, {17, 15}, {31, 33}, {32, 32}, {33, 31}, {48, 48},
                            {49, 47}, {64, 64}, {640, 480}, {416, 416}, {1920, 1080}};
    for (int T = 16; T <= 32; T += 16) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            check_grid(sizes[i][0], sizes[i][1], T);
        tu_rng_t r = {99};
        for (int i = 0; i < 40; i++)
            check_grid(tu_rand_int(&r, 1, 300), tu_rand_int(&r, 1, 300), T);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axes),
        cmocka_unit_test(test_grids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
