/* test_parity_guided: the guided filter, fast guided upsampling and mask products on the CUDA backend against the
 * CPU reference, on random and real inputs of many shapes (1-pixel lines, radii beyond the image, eps = 0, both
 * CUDA paths: strip kernels and summed-area tables), guides that are views into larger frames, pasted outputs,
 * pitch padding, guard bands around every device output and outputs poisoned twice.
 *
 * Tolerances: soft values within 1e-5 (the strip path sums the coefficients in another order than the reference;
 * the first pass and the large-radius path are exact and must agree bit for bit); u8 products bit for bit except
 * where the reference's soft value lies within 1e-5 of a rounding or threshold boundary; Otsu outputs bit for bit
 * against the host's Otsu of the device's own alpha. Exits 77 (skipped) without a GPU. */
#include "testutil.h"

#include "guided.h"
#include "imageio.h"
#include "mask.h"
#include "threshold.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;
static const uint8_t poisons[2] = {0xa5, 0x5a};

/* One call: guide (w x h, a view at (gx, gy) of a frame), source, parameters, product, output size. */
typedef struct {
    const mk_image_t *frame; /* host u8 gray/BGR frame holding the guide */
    int gx, gy, w, h;        /* the guide's rectangle in the frame */
    const mk_image_t *src;   /* host source at the working size */
    mk_guided_t g;
    mk_mask_t m;
    int dw, dh;              /* output size (>= the pasted rectangle) */
    size_t frame_extra, src_extra, dst_extra;
} case_t;

static mk_image_t view(const mk_image_t *frame, int x, int y, int w, int h)
{
    mk_image_t v = *frame;
    v.data = (uint8_t *)mk_image_row(frame, 0, y) + (size_t)x * frame->channels;
    v.width = w;
    v.height = h;
    v.owned = 0;
    return v;
}

static mk_image_t host_out(mk_mask_mode_t mode, int w, int h)
{
    mk_image_t o = mk_image_desc(w, h, MK_FMT_GRAY, mode == MK_MASK_SOFT ? MK_F32 : MK_U8);
    TU_OK(mk_image_alloc(NULL, &o, MK_MEM_HOST));
    return o;
}

/* Is soft value q within 1e-5 of a place where the u8 product of m changes (a threshold or a rounding midpoint)? */
static int near_boundary(float q, const mk_mask_t *m)
{
    const double tol = 1e-5;
    if (m->mode == MK_MASK_BINARY && m->feather <= 0)
        return fabs((double)q - m->thresh) <= tol;
    double scale = 255.0, v = q;
    if (m->mode == MK_MASK_BINARY) {
        scale /= m->feather;
        v = (v - m->thresh) / m->feather + 0.5;
    }
    v *= 255.0;
    return fabs(v - floor(v) - 0.5) <= tol * scale;
}

static void compare(const case_t *c, const mk_image_t *want, const mk_image_t *got, const mk_image_t *soft,
                    int exact, const char *what)
{
    long tolerated = 0;
    for (int y = 0; y < c->dh; y++)
        for (int x = 0; x < c->dw; x++) {
            int inside = x >= c->m.x && y >= c->m.y && x < c->m.x + c->w && y < c->m.y + c->h;
            if (c->m.mode == MK_MASK_SOFT) {
                float a = ((const float *)mk_image_row(want, 0, y))[x], b = ((const float *)mk_image_row(got, 0, y))[x];
                double d = fabs((double)a - b);
                if ((exact && memcmp(&a, &b, sizeof a)) || !(d <= 1e-5))
                    fail_msg("%s: soft (%d, %d) CPU %.9g CUDA %.9g", what, x, y, (double)a, (double)b);
                continue;
            }
            int a = ((const uint8_t *)mk_image_row(want, 0, y))[x], b = ((const uint8_t *)mk_image_row(got, 0, y))[x];
            if (a == b)
                continue;
            float q = inside ? ((const float *)mk_image_row(soft, 0, y - c->m.y))[x - c->m.x] : 0.0f;
            if (exact || !inside || !near_boundary(q, &c->m))
                fail_msg("%s: %s (%d, %d) CPU %d CUDA %d (soft %.9g)", what, mk_mask_mode_name(c->m.mode), x, y, a, b,
                         (double)q);
            tolerated++;
        }
    if (tolerated)
        print_message("%s: %ld u8 values differ at rounding boundaries\n", what, tolerated);
}

/* Runs one case on both backends (the device output poisoned twice, guarded) and compares. */
static void run_case(const case_t *c, const char *what)
{
    mk_image_t guide_h = view(c->frame, c->gx, c->gy, c->w, c->h);
    int exact = mk_guided_work_radius(&c->g) > MK_GUIDED_TILE_RADIUS;
    mk_image_t want = host_out(c->m.mode, c->dw, c->dh), soft = host_out(MK_MASK_SOFT, c->w, c->h);
    mk_mask_t sm = mk_mask_soft();
    TU_OK(mk_guided_upsample(cpu, &guide_h, c->src, &want, &c->g, &c->m));
    TU_OK(mk_guided_upsample(cpu, &guide_h, c->src, &soft, &c->g, &sm));
    mk_image_t frame_d = tu_to_ctx(gpu, c->frame, c->frame_extra), src_d = tu_to_ctx(gpu, c->src, c->src_extra);
    mk_image_t guide_d = view(&frame_d, c->gx, c->gy, c->w, c->h);
    mk_mask_t alpha_m = c->m;
    alpha_m.mode = MK_MASK_ALPHA;
    for (int k = 0; k < 2; k++) {
        tu_dev_guard_t g;
        tu_dev_guard_alloc(gpu, &g, mk_image_desc(c->dw, c->dh, MK_FMT_GRAY, c->m.mode ? MK_U8 : MK_F32),
                           c->dst_extra, poisons[k]);
        TU_OK(mk_guided_upsample(gpu, &guide_d, &src_d, &g.img, &c->g, &c->m));
        TU_OK(mk_ctx_sync(gpu));
        mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
        if (c->m.mode != MK_MASK_OTSU) {
            compare(c, &want, &got, &soft, exact, what);
        } else {
            /* Otsu of the device's own alpha, on the host: the device's binarisation must equal it exactly. */
            TU_OK(mk_guided_upsample(gpu, &guide_d, &src_d, &g.img, &c->g, &alpha_m));
            mk_image_t alpha = tu_dev_guard_check(gpu, &g, poisons[k], what);
            mk_image_t roi = view(&alpha, c->m.x, c->m.y, c->w, c->h);
            TU_OK(mk_threshold_otsu(cpu, &roi, &roi, 255, MK_THRESH_BINARY, NULL));
            compare(c, &alpha, &got, &soft, 1, what);
            mk_image_free(NULL, &alpha);
        }
        mk_image_free(NULL, &got);
        tu_dev_guard_free(gpu, &g);
    }
    mk_image_free(gpu, &frame_d);
    mk_image_free(gpu, &src_d);
    mk_image_free(NULL, &want);
    mk_image_free(NULL, &soft);
}

static mk_image_t random_source(tu_rng_t *r, int w, int h, int f32)
{
    mk_image_t s = mk_image_desc(w, h, MK_FMT_GRAY, f32 ? MK_F32 : MK_U8);
    TU_OK(mk_image_alloc(NULL, &s, MK_MEM_HOST));
    int cx = tu_rand_int(r, 0, w), cy = tu_rand_int(r, 0, h), rad = tu_rand_int(r, 1, w + h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            /* a disc (a mask-like source) with noise; f32 sources stray outside [0,1] and hold a NaN */
            int in = (x - cx) * (x - cx) + (y - cy) * (y - cy) < rad * rad;
            int n = tu_rand_int(r, -40, 40);
            if (f32)
                ((float *)mk_image_row(&s, 0, y))[x] = (x + y) % 97 == 5 ? NAN : (in ? 0.9f : 0.1f) + n / 150.0f;
            else
                ((uint8_t *)mk_image_row(&s, 0, y))[x] = (uint8_t)((in ? 220 : 30) + n);
        }
    return s;
}

static void test_random(void **state)
{
    (void)state;
    tu_rng_t r = {20260};
    int tiles = 0, sats = 0;
    for (int i = 0; i < 160; i++) {
        int C = tu_rand_int(&r, 0, 1) ? 3 : 1, s = i % 3 == 0 ? 1 : tu_rand_int(&r, 2, 5);
        int w = i < 6 ? (int[]){1, 1, 57, 2, 33, 1920}[i] : tu_rand_int(&r, 1, 260);
        int h = i < 6 ? (int[]){1, 61, 1, 2, 17, 8}[i] : tu_rand_int(&r, 1, 200);
        int wr = i % 5 == 4 ? tu_rand_int(&r, MK_GUIDED_TILE_RADIUS + 1, 90)
                            : tu_rand_int(&r, 0, MK_GUIDED_TILE_RADIUS);
        int radius = wr * s;
        double eps = i % 7 == 0 ? 0.0 : pow(10.0, -tu_rand_int(&r, 1, 6));
        mk_mask_mode_t mode = (mk_mask_mode_t)tu_rand_int(&r, 0, 3);
        int ox = tu_rand_int(&r, 0, 3) ? 0 : tu_rand_int(&r, 1, 30);
        int oy = tu_rand_int(&r, 0, 3) ? 0 : tu_rand_int(&r, 1, 9);
        int fx = tu_rand_int(&r, 0, 1) ? tu_rand_int(&r, 1, 20) : 0;
        int fy = tu_rand_int(&r, 0, 1) ? tu_rand_int(&r, 1, 9) : 0;
        mk_image_t frame = tu_random_image(tu_rand(&r), w + fx + tu_rand_int(&r, 0, 5), h + fy + tu_rand_int(&r, 0, 3),
                                           C == 3 ? MK_FMT_BGR : MK_FMT_GRAY);
        /* smooth the random frame a little so that windows hold structure as well as noise */
        for (int y = 0; y < frame.height; y++) {
            uint8_t *p = mk_image_row(&frame, 0, y);
            for (int x = (int)frame.channels; x < frame.width * frame.channels; x++)
                p[x] = (uint8_t)((p[x] + 3 * p[x - frame.channels]) / 4);
        }
        mk_image_t src = random_source(&r, (w + s - 1) / s, (h + s - 1) / s, tu_rand_int(&r, 0, 1));
        float thresh = (float)tu_rand_int(&r, 20, 80) / 100.0f;
        float feather = mode == MK_MASK_BINARY && tu_rand_int(&r, 0, 1) ? 0.1f : 0.0f;
        unsigned flags = tu_rand_int(&r, 0, 2) ? 0u : (unsigned)MK_GUIDED_OPENCV;
        int dw = w + ox + tu_rand_int(&r, 0, 7), dh = h + oy + tu_rand_int(&r, 0, 4);
        size_t frame_extra = (size_t)tu_rand_int(&r, 0, 40), src_extra = (size_t)(4 * tu_rand_int(&r, 0, 9));
        size_t dst_extra = (size_t)(4 * tu_rand_int(&r, 0, 9));
        case_t c = {&frame, fx, fy, w, h, &src, {radius, eps, s, flags}, {mode, thresh, feather, ox, oy}, dw, dh,
                    frame_extra, src_extra, dst_extra};
        char what[200];
        snprintf(what, sizeof what,
                 "random %d: C=%d %dx%d in %dx%d at (%d,%d), s=%d r=%d (work %d) eps=%g flags=%u %s %s -> %s %dx%d "
                 "at (%d,%d)",
                 i, C, w, h, frame.width, frame.height, fx, fy, s, radius, wr, eps, flags, mk_dtype_name(src.dtype),
                 mk_format_name(frame.format), mk_mask_mode_name(mode), dw, dh, ox, oy);
        run_case(&c, what);
        tiles += wr <= MK_GUIDED_TILE_RADIUS;
        sats += wr > MK_GUIDED_TILE_RADIUS;
        mk_image_free(NULL, &frame);
        mk_image_free(NULL, &src);
    }
    print_message("guided parity: 160 random cases (%d strip path, %d summed-area path)\n", tiles, sats);
}

/* The OpenCV reference images (full filter, both eps, OpenCV's guard where it applies) and their fast variant. */
static void test_real(void **state)
{
    (void)state;
    static const char *const names[] = {"65019", "flower", "llama", "person1"};
    char path[4096], rel[256];
    for (int i = 0; i < 4; i++) {
        snprintf(rel, sizeof rel, "reference/guided/%s.guide.png", names[i]);
        if (!tu_data_path(path, sizeof path, rel))
            return;
        mk_image_t frame = {0};
        TU_OK(mk_imageio_load(path, MK_FMT_BGR, &frame));
        int w = frame.width, h = frame.height;
        snprintf(rel, sizeof rel, "reference/guided/%s.src.f32", names[i]);
        void *buf = NULL;
        size_t len = 0;
        TU_OK(mk_file_read(tu_data_path(path, sizeof path, rel), &buf, &len));
        assert_int_equal(len, (size_t)w * h * sizeof(float));
        mk_image_t src = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
        src.pitch = (size_t)w * sizeof(float);
        src.data = buf;
        src.owned = 1;
        src.mem = MK_MEM_HOST;
        /* The low-resolution mask: the source's 4x4 block means, binarised at 0.5 (a GrabCut-like 0/255 mask). */
        mk_image_t low = mk_image_desc((w + 3) / 4, (h + 3) / 4, MK_FMT_GRAY, MK_U8);
        TU_OK(mk_image_alloc(NULL, &low, MK_MEM_HOST));
        for (int y = 0; y < low.height; y++)
            for (int x = 0; x < low.width; x++) {
                double sum = 0;
                int n = 0;
                for (int yy = 4 * y; yy < 4 * y + 4 && yy < h; yy++)
                    for (int xx = 4 * x; xx < 4 * x + 4 && xx < w; xx++, n++)
                        sum += ((const float *)mk_image_row(&src, 0, yy))[xx];
                ((uint8_t *)mk_image_row(&low, 0, y))[x] = sum / n > 0.5 ? 255 : 0;
            }
        for (int r = 4; r <= 8; r += 4) {
            char what[128];
            case_t c = {&frame, 0, 0, w, h, &src, {r, r == 4 ? 1e-2 : 1e-4, 1, MK_GUIDED_OPENCV}, mk_mask_soft(), w, h,
                        0, 0, 0};
            snprintf(what, sizeof what, "%s r=%d opencv-compat", names[i], r);
            run_case(&c, what);
            c.g.flags = 0;
            snprintf(what, sizeof what, "%s r=%d", names[i], r);
            run_case(&c, what);
            case_t f = {&frame, 0, 0, w, h, &low, {r * 2, 1e-3, 4, 0}, {MK_MASK_BINARY, 0.5f, 0.0f, 0, 0}, w, h,
                        0, 0, 0};
            snprintf(what, sizeof what, "%s fast s=4 r=%d binary", names[i], 2 * r);
            run_case(&f, what);
        }
        mk_image_free(NULL, &frame);
        mk_image_free(NULL, &src);
        mk_image_free(NULL, &low);
    }
}

/* The benchmark's cases at 1920x1080: colour guide, r = 8 full (f32 in and out), and the fast upsampling of a
 * 480x270 mask with binarisation; a grey guide of each too. */
static void test_bench_sizes(void **state)
{
    (void)state;
    tu_rng_t r = {1080};
    for (int C = 3; C >= 1; C -= 2) {
        mk_image_t frame = tu_random_image(C, 1920, 1080, C == 3 ? MK_FMT_BGR : MK_FMT_GRAY);
        for (int y = 0; y < 1080; y++) {
            uint8_t *p = mk_image_row(&frame, 0, y);
            for (int x = C; x < 1920 * C; x++)
                p[x] = (uint8_t)((p[x] + 7 * p[x - C]) / 8);
        }
        mk_image_t src = random_source(&r, 1920, 1080, 1), low = random_source(&r, 480, 270, 0);
        case_t full = {&frame, 0, 0, 1920, 1080, &src, {8, 1e-4, 1, 0}, mk_mask_soft(), 1920, 1080, 0, 0, 0};
        run_case(&full, C == 3 ? "1920x1080 colour r=8" : "1920x1080 grey r=8");
        case_t fast = {&frame, 0, 0, 1920, 1080, &low, {8, 1e-4, 4, 0}, {MK_MASK_BINARY, 0.5f, 0.0f, 0, 0}, 1920, 1080,
                       0, 0, 0};
        run_case(&fast, C == 3 ? "1920x1080 colour fast s=4" : "1920x1080 grey fast s=4");
        mk_image_free(NULL, &frame);
        mk_image_free(NULL, &src);
        mk_image_free(NULL, &low);
    }
}

/* Every working radius of the strip kernels (both parities of the window's far end, every shuffle distance), full
 * and fast (s = 2, 3), on a 301-pixel-wide guide (3 to 5 strips at s = 1: their seams and both image edges), with a
 * pasted soft output. */
static void test_radii(void **state)
{
    (void)state;
    tu_rng_t r = {77};
    mk_image_t frame = tu_random_image(31, 301, 45, MK_FMT_BGR), gray = tu_random_image(32, 301, 45, MK_FMT_GRAY);
    for (int s = 1; s <= 3; s++) {
        mk_image_t src = random_source(&r, (301 + s - 1) / s, (45 + s - 1) / s, s != 2);
        for (int wr = 0; wr <= MK_GUIDED_TILE_RADIUS; wr++) {
            char what[96];
            int radius = wr * s + (s == 3 && wr > 0 ? -1 : 0); /* round(radius / s) = wr */
            case_t c = {wr % 2 ? &frame : &gray, 0, 0, 301, 45, &src, {radius, 1e-3, s, 0},
                        {MK_MASK_SOFT, 0.5f, 0, 3, 1}, 306, 47, 0, 0, 0};
            snprintf(what, sizeof what, "radius sweep: s=%d r=%d (work %d) %s", s, radius, wr,
                     wr % 2 ? "colour" : "grey");
            assert_int_equal(mk_guided_work_radius(&c.g), wr);
            run_case(&c, what);
        }
        mk_image_free(NULL, &src);
    }
    mk_image_free(NULL, &frame);
    mk_image_free(NULL, &gray);
}

/* A mask-like source: background 0 with discs and rectangles of 1 (u8 255 / f32 1.0), so that most windows hold
 * one extreme value (the coefficient kernel's flat rows); soft: a few pixels in between (128 / 0.5), and in f32
 * values past 1 (clamped to 1) and NaNs (read as 0). */
static mk_image_t mask_source(tu_rng_t *r, int w, int h, int f32, int soft)
{
    mk_image_t s = mk_image_desc(w, h, MK_FMT_GRAY, f32 ? MK_F32 : MK_U8);
    TU_OK(mk_image_alloc(NULL, &s, MK_MEM_HOST));
    int shapes[6][4];
    for (int k = 0; k < 6; k++)
        for (int c = 0; c < 4; c++)
            shapes[k][c] = tu_rand_int(r, 0, c % 2 ? h : w);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int in = 0;
            for (int k = 0; k < 6; k++) {
                int dx = x - shapes[k][0], dy = y - shapes[k][1], rad = shapes[k][2] / 4 + 1;
                in ^= k % 2 ? dx * dx + dy * dy < rad * rad : (abs(dx) < rad && abs(dy) < shapes[k][3] / 3 + 1);
            }
            int odd = soft && tu_rand_int(r, 0, 999) == 0;
            if (f32) {
                float v = in ? (tu_rand_int(r, 0, 9) ? 1.0f : 1.5f) : (tu_rand_int(r, 0, 9) ? 0.0f : NAN);
                ((float *)mk_image_row(&s, 0, y))[x] = odd ? 0.5f : v;
            } else {
                ((uint8_t *)mk_image_row(&s, 0, y))[x] = (uint8_t)(odd ? 128 : in ? 255 : 0);
            }
        }
    return s;
}

/* Is the source constant over the (2 reach + 1)^2 window at (x, y) (reflected), with value v (0 or 1)? */
static int settled(const mk_image_t *s, int x, int y, int reach, float *v)
{
    int w = s->width, h = s->height, first = -1;
    for (int dy = -reach; dy <= reach; dy++)
        for (int dx = -reach; dx <= reach; dx++) {
            int xx = x + dx, yy = y + dy;
            xx = xx < 0 ? -xx - 1 : xx >= w ? 2 * w - 1 - xx : xx;
            yy = yy < 0 ? -yy - 1 : yy >= h ? 2 * h - 1 - yy : yy;
            if (xx < 0 || xx >= w || yy < 0 || yy >= h)
                return 0;
            int l;
            if (s->dtype == MK_F32) {
                float f = ((const float *)mk_image_row(s, 0, yy))[xx];
                l = f >= 1.0f ? 1 : f == 0.0f || f != f ? 0 : -1;
            } else {
                int u = ((const uint8_t *)mk_image_row(s, 0, yy))[xx];
                l = u == 255 ? 1 : u == 0 ? 0 : -1;
            }
            if (l < 0 || (first >= 0 && l != first))
                return 0;
            first = l;
        }
    *v = (float)first;
    return 1;
}

/* Mask sources, whose windows mostly hold one extreme value: the strip kernels' coefficient rows that skip the
 * solve (a = 0, b the source's mean) and those that solve, on every path (r = 8, the general narrow and wide
 * radii, the summed-area tables, the fast filter's strips), against the CPU; and where the source is settled over
 * two radii around a pixel, the CUDA output is that value (within 1e-6). */
static void test_masks(void **state)
{
    (void)state;
    tu_rng_t r = {5150};
    static const struct {
        int w, h, radius, s;
    } cases[] = {{1920, 1080, 8, 1}, {640, 360, 8, 1}, {301, 45, 3, 1},  {333, 97, 11, 1}, {260, 130, 20, 1},
                 {300, 200, 32, 1},  {200, 120, 40, 1}, {301, 77, 30, 2}, {299, 90, 36, 3}, {481, 321, 8, 4}};
    long checked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 4; k++) {
            int C = k % 2 ? 1 : 3, f32 = k >= 2, w = cases[i].w, h = cases[i].h, s = cases[i].s;
            mk_image_t frame = tu_random_image(tu_rand(&r), w, h, C == 3 ? MK_FMT_BGR : MK_FMT_GRAY);
            mk_image_t src = mask_source(&r, (w + s - 1) / s, (h + s - 1) / s, f32, i % 3 == 1);
            case_t c = {&frame, 0, 0, w, h, &src, {cases[i].radius, 1e-4, s, 0}, mk_mask_soft(), w, h, 0, 0, 0};
            char what[128];
            snprintf(what, sizeof what, "mask %dx%d C=%d r=%d s=%d %s%s", w, h, C, cases[i].radius, s,
                     f32 ? "f32" : "u8", i % 3 == 1 ? " with soft pixels" : "");
            run_case(&c, what);
            if (s == 1) {
                /* the device's output where the source is settled: exactly the mask's value, to float rounding */
                mk_image_t src_d = tu_to_ctx(gpu, &src, 0), frame_d = tu_to_ctx(gpu, &frame, 0);
                mk_image_t out = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32), host = out;
                TU_OK(mk_image_alloc(gpu, &out, MK_MEM_DEVICE));
                TU_OK(mk_image_alloc(NULL, &host, MK_MEM_HOST));
                TU_OK(mk_guided_upsample(gpu, &frame_d, &src_d, &out, &c.g, &c.m));
                TU_OK(mk_image_download(gpu, &host, &out));
                TU_OK(mk_ctx_sync(gpu));
                for (int y = 0; y < h; y += 3)
                    for (int x = 0; x < w; x += 3) {
                        float v;
                        if (!settled(&src, x, y, 2 * cases[i].radius, &v))
                            continue;
                        float q = ((const float *)mk_image_row(&host, 0, y))[x];
                        if (!(fabsf(q - v) <= 1e-6f))
                            fail_msg("%s: (%d, %d) settled at %g, CUDA %.9g", what, x, y, (double)v, (double)q);
                        checked++;
                    }
                mk_image_free(gpu, &out);
                mk_image_free(NULL, &host);
                mk_image_free(gpu, &src_d);
                mk_image_free(gpu, &frame_d);
            }
            mk_image_free(NULL, &frame);
            mk_image_free(NULL, &src);
        }
    assert_true(checked > 100000);
    print_message("guided parity: mask sources, %ld settled pixels equal the mask on the device\n", checked);
}

/* One context, calls of changing sizes and paths: the scratch grows and is reused without leaking state. */
static void test_repeated(void **state)
{
    (void)state;
    tu_rng_t r = {3};
    mk_image_t big = tu_random_image(11, 300, 200, MK_FMT_BGR), small = tu_random_image(12, 40, 30, MK_FMT_RGB);
    mk_image_t sb = random_source(&r, 75, 50, 0), ss = random_source(&r, 40, 30, 1);
    for (int i = 0; i < 6; i++) {
        case_t a = {&big, 0, 0, 300, 200, &sb, {i % 2 ? 8 : 200, 1e-3, 4, 0}, {MK_MASK_ALPHA, 0.5f, 0, 0, 0}, 300, 200,
                    0, 0, 0};
        case_t b = {&small, 0, 0, 40, 30, &ss, {i % 3 ? 5 : 45, 1e-2, 1, 0}, mk_mask_soft(), 40, 30, 0, 0, 0};
        run_case(&a, "repeated big");
        run_case(&b, "repeated small");
    }
    mk_image_free(NULL, &big);
    mk_image_free(NULL, &small);
    mk_image_free(NULL, &sb);
    mk_image_free(NULL, &ss);
}

/* The fast filter's widest reach: at s = 2, a block of output columns whose first column sits at x = 2 (mod 4) of the
 * result needs the most low-resolution columns (the result pasted at x = 126, so that the second block of 128 output
 * columns starts there), alpha and soft, repeated (a shared buffer too small would be overwritten by a race). */
static void test_up_reach(void **state)
{
    (void)state;
    tu_rng_t r = {126};
    mk_image_t frame = tu_random_image(21, 400, 70, MK_FMT_BGR);
    mk_image_t src = random_source(&r, 200, 35, 0);
    for (int i = 0; i < 4; i++) {
        int ox = 126 + (i >= 2 ? 128 : 0);
        case_t c = {&frame, 0, 0, 400, 70, &src, {8, 1e-4, 2, 0}, {i % 2 ? MK_MASK_ALPHA : MK_MASK_SOFT, 0.5f, 0, ox, 3},
                    ox + 400 + 3, 75, 0, 0, 0};
        run_case(&c, "widest reach s=2");
    }
    mk_image_free(NULL, &frame);
    mk_image_free(NULL, &src);
}

static void test_compose(void **state)
{
    (void)state;
    tu_rng_t r = {99};
    for (int i = 0; i < 40; i++) {
        int w = tu_rand_int(&r, 1, 300), h = tu_rand_int(&r, 1, 200);
        int ox = tu_rand_int(&r, 0, 20), oy = tu_rand_int(&r, 0, 9);
        int dw = w + ox + tu_rand_int(&r, 0, 9), dh = h + oy + tu_rand_int(&r, 0, 5);
        mk_image_t soft = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
        TU_OK(mk_image_alloc(NULL, &soft, MK_MEM_HOST));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                ((float *)mk_image_row(&soft, 0, y))[x] =
                    x % 61 == 3 ? NAN : (float)tu_rand_int(&r, -200, 1200) / 1000.0f;
        float thresh = (float)tu_rand_int(&r, 1, 99) / 100.0f;
        mk_mask_t m = {(mk_mask_mode_t)(i % 4), thresh, i % 8 == 2 ? 0.05f : 0.0f, ox, oy};
        mk_image_t want = mk_image_desc(dw, dh, MK_FMT_GRAY, m.mode ? MK_U8 : MK_F32);
        TU_OK(mk_image_alloc(NULL, &want, MK_MEM_HOST));
        TU_OK(mk_mask_compose(cpu, &soft, &want, &m));
        mk_image_t sd = tu_to_ctx(gpu, &soft, (size_t)(4 * tu_rand_int(&r, 0, 5)));
        for (int k = 0; k < 2; k++) {
            tu_dev_guard_t g;
            char what[96];
            snprintf(what, sizeof what, "compose %d: %dx%d %s at (%d,%d) of %dx%d", i, w, h, mk_mask_mode_name(m.mode),
                     ox, oy, dw, dh);
            tu_dev_guard_alloc(gpu, &g, mk_image_desc(dw, dh, MK_FMT_GRAY, want.dtype), 4 * (size_t)(i % 5),
                               poisons[k]);
            TU_OK(mk_mask_compose(gpu, &sd, &g.img, &m));
            mk_image_t got = tu_dev_guard_check(gpu, &g, poisons[k], what);
            for (int y = 0; y < dh; y++)
                if (memcmp(mk_image_row(&want, 0, y), mk_image_row(&got, 0, y), mk_image_row_bytes(&want)))
                    fail_msg("%s: row %d differs", what, y);
            mk_image_free(NULL, &got);
            tu_dev_guard_free(gpu, &g);
        }
        mk_image_free(gpu, &sd);
        mk_image_free(NULL, &soft);
        mk_image_free(NULL, &want);
    }
}

/* Host images on the CUDA backend are refused with a message, not dereferenced. */
static void test_cuda_bad_input(void **state)
{
    (void)state;
    mk_image_t g = tu_random_image(1, 8, 8, MK_FMT_BGR), s = tu_random_image(2, 8, 8, MK_FMT_GRAY);
    mk_image_t out = mk_image_desc(8, 8, MK_FMT_GRAY, MK_F32), soft = out;
    TU_OK(mk_image_alloc(gpu, &out, MK_MEM_DEVICE));
    TU_OK(mk_image_alloc(NULL, &soft, MK_MEM_HOST));
    assert_int_equal(mk_guided_filter(gpu, &g, &s, &out, 2, 1e-3, 0), MK_EINVAL);
    mk_mask_t m = mk_mask_soft();
    assert_int_equal(mk_mask_compose(gpu, &soft, &out, &m), MK_EINVAL);
    mk_image_free(gpu, &out);
    mk_image_free(NULL, &soft);
    mk_image_free(NULL, &g);
    mk_image_free(NULL, &s);
}

int main(void)
{
    int start = tu_cuda_main("CUDA guided parity tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),      cmocka_unit_test(test_real),    cmocka_unit_test(test_radii),
        cmocka_unit_test(test_bench_sizes), cmocka_unit_test(test_repeated), cmocka_unit_test(test_compose),
        cmocka_unit_test(test_cuda_bad_input), cmocka_unit_test(test_up_reach), cmocka_unit_test(test_masks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(gpu);
    return rc;
}
