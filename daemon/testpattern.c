/* testpattern: the synthetic room and the moving figure, rendered from geometric primitives (ellipses, capsules,
 * a rounded torso) whose inside tests drive both the colours and the mask. */
#include "testpattern.h"

#include "errors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PRIMS 16
#define TWO_PI 6.283185307179586

typedef unsigned char u8;

typedef enum { P_ELLIPSE, P_CAPSULE, P_TORSO } prim_type_t;
typedef enum { C_SKIN, C_SHIRT, C_HAIR, C_EYE } prim_colour_t;

/* One primitive in pixel coordinates (pixel (x, y) is the point (x + 0.5, y + 0.5)). */
typedef struct {
    prim_type_t type;
    prim_colour_t colour;
    double ax, ay; /* ellipse and torso: centre / top centre; capsule: one end */
    double bx, by; /* ellipse: semi-axes; capsule: the other end */
    double r;      /* capsule: radius; torso: half-width */
    double rc;     /* torso: radius of the rounded shoulders */
    double cut;    /* ellipse: only points above this y (the hair cap); HUGE_VAL for all */
    int x0, y0, x1, y1; /* pixel bounding box, inclusive, clipped to the frame; empty when x0 > x1 or y0 > y1 */
} prim_t;

typedef struct {
    prim_t p[MAX_PRIMS];
    int n;
    double stripe_y0, stripe_h; /* shirt stripes move with the figure */
} pose_t;

struct mk_testpattern {
    int w, h;
    double fps;
    mk_image_t bg;
};

static uint32_t hash2(uint32_t a, uint32_t b)
{
    uint32_t x = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    x *= 0x297a2d39u;
    x ^= x >> 15;
    return x;
}

static u8 sat(int v)
{
    return (u8)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void put(u8 *p, int r, int g, int b, int noise)
{
    p[0] = sat(r + noise);
    p[1] = sat(g + noise);
    p[2] = sat(b + noise);
}

/* ---- background ------------------------------------------------------------------------------------------ */

static void bg_pixel(const struct mk_testpattern *tp, int x, int y, u8 *p)
{
    const int w = tp->w, h = tp->h;
    int noise = (int)(hash2((uint32_t)x, (uint32_t)y) & 7) - 3;
    /* Window: upper left, dark frame, sky gradient, a cross bar. */
    int wx0 = w * 6 / 100, wx1 = w * 26 / 100, wy0 = h * 10 / 100, wy1 = h * 44 / 100, ft = h / 80 > 2 ? h / 80 : 2;
    if (x >= wx0 && x < wx1 && y >= wy0 && y < wy1) {
        int mx = (wx0 + wx1) / 2, my = (wy0 + wy1) / 2;
        if (x < wx0 + ft || x >= wx1 - ft || y < wy0 + ft || y >= wy1 - ft || abs(x - mx) < ft / 2 + 1 ||
            abs(y - my) < ft / 2 + 1)
            put(p, 70, 58, 48, noise);
        else
            put(p, 150 + 60 * (y - wy0) / (wy1 - wy0), 188, 224, noise);
        return;
    }
    /* Bookshelf: right, a wooden case with four shelves of books of varied colours and heights. */
    int sx0 = w * 76 / 100, sx1 = w * 95 / 100, sy0 = h * 22 / 100, sy1 = h * 80 / 100;
    if (x >= sx0 && x < sx1 && y >= sy0 && y < sy1) {
        int shelf_h = (sy1 - sy0) / 4 > 4 ? (sy1 - sy0) / 4 : 4, shelf = (y - sy0) / shelf_h;
        int in_y = (y - sy0) % shelf_h, book_w = w / 90 > 2 ? w / 90 : 2, book = (x - sx0) / book_w;
        uint32_t hb = hash2((uint32_t)book, (uint32_t)shelf + 101);
        if (x < sx0 + ft || x >= sx1 - ft || in_y < ft) {
            put(p, 108, 78, 52, noise);
        } else if (in_y >= ft + (int)(hb % (unsigned)(shelf_h / 3 + 1))) {
            static const u8 palette[6][3] = {{150, 40, 40}, {40, 110, 60}, {200, 170, 60},
                                             {60, 60, 120}, {120, 60, 110}, {210, 210, 200}};
            const u8 *c = palette[(hb >> 8) % 6];
            put(p, c[0], c[1], c[2], (x - sx0) % book_w == 0 ? noise - 30 : noise);
        } else {
            put(p, 52, 40, 30, noise);
        }
        return;
    }
    /* Wooden floor at the bottom. */
    int fy = h * 80 / 100;
    if (y >= fy) {
        int ph = h / 30 > 3 ? h / 30 : 3, row = (y - fy) / ph;
        if ((y - fy) % ph == 0) {
            put(p, 96, 70, 46, noise);
        } else {
            int v = (int)(hash2((uint32_t)row, (uint32_t)(x / (w / 4 + 1)) + 7) % 21) - 10;
            put(p, 156 + v, 112 + v, 72 + v, (x * 3 + y) % 11 == 0 ? noise - 8 : noise);
        }
        return;
    }
    /* Painted brick wall: staggered rows, light mortar, each brick a little different. */
    int bh = h / 24 > 4 ? h / 24 : 4, bw = 2 * bh + bh / 2, row = y / bh, off = (row & 1) * (bw / 2);
    if (y % bh == 0 || (x + off) % bw == 0) {
        put(p, 200, 198, 188, noise);
        return;
    }
    int v = (int)(hash2((uint32_t)row + 13, (uint32_t)((x + off) / bw)) % 29) - 14;
    put(p, 150 + v, 160 + v, 150 + v, noise);
}

/* ---- the figure ------------------------------------------------------------------------------------------ */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Pixels whose centres can lie in [lo, hi]. */
static void span(double lo, double hi, int n, int *a, int *b)
{
    double a0 = ceil(lo - 0.5), b0 = floor(hi - 0.5);
    *a = a0 < 0 ? 0 : a0 > n ? n : (int)a0;
    *b = b0 < -1 ? -1 : b0 > n - 1 ? n - 1 : (int)b0;
}

static void add_prim(pose_t *ps, const struct mk_testpattern *tp, prim_t p)
{
    double x0, x1, y0, y1;
    switch (p.type) {
    case P_ELLIPSE:
        x0 = p.ax - p.bx, x1 = p.ax + p.bx, y0 = p.ay - p.by, y1 = fmin(p.ay + p.by, p.cut);
        break;
    case P_CAPSULE:
        x0 = fmin(p.ax, p.bx) - p.r, x1 = fmax(p.ax, p.bx) + p.r;
        y0 = fmin(p.ay, p.by) - p.r, y1 = fmax(p.ay, p.by) + p.r;
        break;
    default: /* P_TORSO: down to the bottom of the frame */
        x0 = p.ax - p.r, x1 = p.ax + p.r, y0 = p.ay, y1 = tp->h;
        break;
    }
    span(x0, x1, tp->w, &p.x0, &p.x1);
    span(y0, y1, tp->h, &p.y0, &p.y1);
    ps->p[ps->n++] = p;
}

static int inside(const prim_t *p, double x, double y)
{
    switch (p->type) {
    case P_ELLIPSE: {
        double dx = (x - p->ax) / p->bx, dy = (y - p->ay) / p->by;
        return y < p->cut && dx * dx + dy * dy <= 1.0;
    }
    case P_CAPSULE: {
        double vx = p->bx - p->ax, vy = p->by - p->ay, wx = x - p->ax, wy = y - p->ay;
        double len2 = vx * vx + vy * vy, t = len2 > 0 ? (wx * vx + wy * vy) / len2 : 0;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        double dx = wx - t * vx, dy = wy - t * vy;
        return dx * dx + dy * dy <= p->r * p->r;
    }
    default: {
        double ax = fabs(x - p->ax);
        if (y < p->ay || ax > p->r)
            return 0;
        if (y >= p->ay + p->rc || ax <= p->r - p->rc)
            return 1;
        double dx = ax - (p->r - p->rc), dy = y - (p->ay + p->rc);
        return dx * dx + dy * dy <= p->rc * p->rc;
    }
    }
}

/* The figure at time seq / fps. Sizes are fractions of the frame height. */
static void pose_at(const struct mk_testpattern *tp, uint64_t seq, pose_t *ps)
{
    double u = tp->h, t = (double)seq / tp->fps;
    double bob = 0.012 * u * sin(TWO_PI * t / 1.1);
    double cx = tp->w / 2.0 + 0.2 * tp->w * sin(TWO_PI * t / 7.0);
    double sy = 0.40 * u + bob;
    double hcx = cx + 0.012 * u * sin(TWO_PI * t / 2.3), hcy = 0.265 * u + bob;
    ps->n = 0;
    ps->stripe_y0 = sy;
    ps->stripe_h = 0.045 * u;
    add_prim(ps, tp, (prim_t){.type = P_TORSO, .colour = C_SHIRT, .ax = cx, .ay = sy, .r = 0.165 * u, .rc = 0.06 * u});
    for (int side = -1; side <= 1; side += 2) {
        double phase = side < 0 ? 0 : TWO_PI / 2;
        double shx = cx + side * 0.125 * u, shy = sy + 0.05 * u;
        double a1 = 0.22 + 0.16 * sin(TWO_PI * t / 1.7 + phase);
        double a2 = a1 + 0.3 + 1.2 * (0.5 + 0.5 * sin(TWO_PI * t / 2.9 + phase));
        double ex = shx + side * 0.18 * u * sin(a1), ey = shy + 0.18 * u * cos(a1);
        double hx = ex + side * 0.16 * u * sin(a2), hy = ey + 0.16 * u * cos(a2);
        add_prim(ps, tp, (prim_t){.type = P_CAPSULE, .colour = C_SHIRT, .ax = shx, .ay = shy, .bx = ex, .by = ey,
                                  .r = 0.042 * u});
        add_prim(ps, tp, (prim_t){.type = P_CAPSULE, .colour = C_SKIN, .ax = ex, .ay = ey, .bx = hx, .by = hy,
                                  .r = 0.032 * u});
        add_prim(ps, tp, (prim_t){.type = P_ELLIPSE, .colour = C_SKIN, .ax = hx, .ay = hy, .bx = 0.036 * u,
                                  .by = 0.036 * u, .cut = HUGE_VAL});
    }
    add_prim(ps, tp, (prim_t){.type = P_CAPSULE, .colour = C_SKIN, .ax = cx, .ay = hcy + 0.06 * u, .bx = cx,
                              .by = sy + 0.02 * u, .r = 0.032 * u});
    add_prim(ps, tp, (prim_t){.type = P_ELLIPSE, .colour = C_SKIN, .ax = hcx, .ay = hcy, .bx = 0.072 * u,
                              .by = 0.092 * u, .cut = HUGE_VAL});
    add_prim(ps, tp, (prim_t){.type = P_ELLIPSE, .colour = C_HAIR, .ax = hcx, .ay = hcy - 0.004 * u,
                              .bx = 0.077 * u, .by = 0.098 * u, .cut = hcy - 0.035 * u});
    for (int side = -1; side <= 1; side += 2)
        add_prim(ps, tp, (prim_t){.type = P_ELLIPSE, .colour = C_EYE, .ax = hcx + side * 0.027 * u,
                                  .ay = hcy + 0.005 * u, .bx = 0.009 * u, .by = 0.007 * u, .cut = HUGE_VAL});
}

static void prim_colour(const pose_t *ps, const prim_t *p, int x, int y, u8 *out)
{
    int noise = (int)(hash2((uint32_t)x + 5000, (uint32_t)y) & 7) - 3;
    switch (p->colour) {
    case C_SKIN: put(out, 222, 170, 138, noise); break;
    case C_HAIR: put(out, 58, 38, 28, noise); break;
    case C_SHIRT:
        if ((long)floor((y + 0.5 - ps->stripe_y0) / ps->stripe_h) & 1)
            put(out, 34, 72, 138, noise);
        else
            put(out, 46, 92, 168, noise);
        break;
    default: put(out, 28, 24, 24, noise); break; /* C_EYE */
    }
}

/* ---- API ------------------------------------------------------------------------------------------------- */

int mk_testpattern_create(int width, int height, double fps, mk_testpattern_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_testpattern_create: NULL output");
    *out = NULL;
    if (width < 16 || height < 16 || width > MK_IMAGE_MAX_DIM || height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "test pattern size %dx%d outside 16..%d", width, height, MK_IMAGE_MAX_DIM);
    if (!(fps > 0 && fps <= 1000))
        return mk_err_set(MK_ERANGE, "test pattern fps %g outside (0, 1000]", fps);
    struct mk_testpattern *tp = calloc(1, sizeof *tp);
    if (!tp)
        return mk_err_set(MK_ENOMEM, "test pattern: out of memory");
    tp->w = width;
    tp->h = height;
    tp->fps = fps;
    tp->bg = mk_image_desc(width, height, MK_FMT_RGB, MK_U8);
    int rc = mk_image_alloc(NULL, &tp->bg, MK_MEM_HOST);
    if (rc) {
        free(tp);
        return mk_err_wrap(rc, "test pattern background");
    }
    for (int y = 0; y < height; y++) {
        u8 *row = mk_image_row(&tp->bg, 0, y);
        for (int x = 0; x < width; x++)
            bg_pixel(tp, x, y, row + 3 * x);
    }
    *out = tp;
    return 0;
}

void mk_testpattern_destroy(mk_testpattern_t *tp)
{
    if (!tp)
        return;
    mk_image_free(NULL, &tp->bg);
    free(tp);
}

static int check_out(const mk_testpattern_t *tp, const mk_image_t *img, int gray, const char *what)
{
    int rc;
    if (!tp)
        return mk_err_set(MK_EINVAL, "%s: NULL generator", what);
    if ((rc = mk_image_check(img, what)))
        return rc;
    if (img->mem == MK_MEM_DEVICE || img->dtype != MK_U8 ||
        (gray ? img->format != MK_FMT_GRAY : img->format != MK_FMT_RGB && img->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "%s must be a host u8 %s image, not %s %s in %s memory", what,
                          gray ? "gray" : "rgb or bgr", mk_dtype_name(img->dtype), mk_format_name(img->format),
                          mk_mem_name(img->mem));
    if (img->width != tp->w || img->height != tp->h)
        return mk_err_set(MK_EINVAL, "%s is %dx%d, the test pattern %dx%d", what, img->width, img->height, tp->w,
                          tp->h);
    return 0;
}

int mk_testpattern_frame(const mk_testpattern_t *tp, uint64_t seq, mk_image_t *img)
{
    int rc = check_out(tp, img, 0, "test pattern frame");
    if (rc)
        return rc;
    int bgr = img->format == MK_FMT_BGR;
    for (int y = 0; y < tp->h; y++) {
        const u8 *s = mk_image_row(&tp->bg, 0, y);
        u8 *d = mk_image_row(img, 0, y);
        if (!bgr) {
            memcpy(d, s, (size_t)tp->w * 3);
            continue;
        }
        for (int x = 0; x < tp->w; x++)
            d[3 * x] = s[3 * x + 2], d[3 * x + 1] = s[3 * x + 1], d[3 * x + 2] = s[3 * x];
    }
    pose_t ps;
    pose_at(tp, seq, &ps);
    for (int i = 0; i < ps.n; i++) {
        const prim_t *p = &ps.p[i];
        for (int y = p->y0; y <= p->y1; y++) {
            u8 *row = mk_image_row(img, 0, y);
            for (int x = p->x0; x <= p->x1; x++)
                if (inside(p, x + 0.5, y + 0.5)) {
                    u8 c[3];
                    prim_colour(&ps, p, x, y, c);
                    row[3 * x] = c[bgr ? 2 : 0];
                    row[3 * x + 1] = c[1];
                    row[3 * x + 2] = c[bgr ? 0 : 2];
                }
        }
    }
    return 0;
}

int mk_testpattern_mask(const mk_testpattern_t *tp, uint64_t seq, mk_image_t *mask)
{
    int rc = check_out(tp, mask, 1, "test pattern mask");
    if (rc)
        return rc;
    for (int y = 0; y < tp->h; y++)
        memset(mk_image_row(mask, 0, y), 0, (size_t)tp->w);
    pose_t ps;
    pose_at(tp, seq, &ps);
    for (int i = 0; i < ps.n; i++) {
        const prim_t *p = &ps.p[i];
        for (int y = p->y0; y <= p->y1; y++) {
            u8 *row = mk_image_row(mask, 0, y);
            for (int x = p->x0; x <= p->x1; x++)
                if (!row[x] && inside(p, x + 0.5, y + 0.5))
                    row[x] = 255;
        }
    }
    return 0;
}

void mk_testpattern_box(const mk_testpattern_t *tp, uint64_t seq, int box[4])
{
    pose_t ps;
    int x0 = tp->w, y0 = tp->h, x1 = -1, y1 = -1;
    pose_at(tp, seq, &ps);
    for (int i = 0; i < ps.n; i++) {
        const prim_t *p = &ps.p[i];
        if (p->x0 > p->x1 || p->y0 > p->y1)
            continue;
        x0 = p->x0 < x0 ? p->x0 : x0;
        y0 = p->y0 < y0 ? p->y0 : y0;
        x1 = p->x1 > x1 ? p->x1 : x1;
        y1 = p->y1 > y1 ? p->y1 : y1;
    }
    if (x1 < 0) {
        box[0] = box[1] = box[2] = box[3] = 0;
        return;
    }
    box[0] = clampi(x0, 0, tp->w - 1);
    box[1] = clampi(y0, 0, tp->h - 1);
    box[2] = x1 - box[0] + 1;
    box[3] = y1 - box[1] + 1;
}

const mk_image_t *mk_testpattern_background(const mk_testpattern_t *tp)
{
    return tp ? &tp->bg : NULL;
}
