/* masktool: the offline tool — letterbox, threshold, decode, segment, info, demo and benchmarks of maskd's kernels. */
#include "masktool.h"

#include "errors.h"
#include "guided.h"
#include "imageio.h"
#include "letterbox.h"
#include "log.h"
#include "mask.h"
#include "threshold.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static void die_usage(const char *cmd, const char *msg)
{
    fprintf(stderr, "masktool %s: %s (see masktool %s --help)\n", cmd, msg, cmd);
    exit(2);
}

int mt_parse_size(const char *s, int *w, int *h)
{
    char *end;
    long a, b;
    errno = 0;
    a = strtol(s, &end, 10);
    if (errno || end == s || (*end != 'x' && *end != 'X'))
        goto bad;
    s = end + 1;
    b = strtol(s, &end, 10);
    if (errno || end == s || *end || a < 1 || b < 1 || a > MK_IMAGE_MAX_DIM || b > MK_IMAGE_MAX_DIM)
        goto bad;
    *w = (int)a;
    *h = (int)b;
    return 0;
bad:
    fprintf(stderr, "bad size '%s': expected WxH with 1..%d each\n", s, MK_IMAGE_MAX_DIM);
    return -1;
}

int mt_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

mk_ctx_t *mt_ctx(const char *backend)
{
    mk_backend_t b = MK_BACKEND_AUTO;
    mk_ctx_t *ctx = NULL;
    if (backend && mk_backend_parse(backend, &b)) {
        fprintf(stderr, "masktool: %s\n", mk_err_msg());
        return NULL;
    }
    if (mk_ctx_create(b, &ctx)) {
        fprintf(stderr, "masktool: %s\n", mk_err_msg());
        return NULL;
    }
    return ctx;
}

int mt_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double mt_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, mt_cmp_double);
    return v[n / 2];
}

void mt_print_json(cJSON *doc, int pretty)
{
    char *s = pretty ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    if (s)
        puts(s);
    free(s);
    cJSON_Delete(doc);
}

/* ---- source images -------------------------------------------------------------------------------------- */

/* A deterministic scene: a gradient sky, a ground, a disc and a box, plus mild noise. */
static int generated_scene(mk_format_t format, int w, int h, mk_image_t *out)
{
    mk_image_t img = mk_image_desc(w, h, MK_FMT_RGB, MK_U8);
    int rc = mk_image_alloc(NULL, &img, MK_MEM_HOST);
    if (rc)
        return rc;
    uint32_t seed = 12345;
    for (int y = 0; y < h; y++) {
        uint8_t *p = mk_image_row(&img, 0, y);
        for (int x = 0; x < w; x++, p += 3) {
            int r = 70 + 120 * y / h, g = 110 + 100 * y / h, b = 200 - 60 * y / h;
            if (y > h * 2 / 3) {
                r = 90;
                g = 140;
                b = 60;
            }
            int dx = x - w / 3, dy = y - h / 2, rad = h / 5;
            if (dx * dx + dy * dy < rad * rad) {
                r = 220;
                g = 180;
                b = 150;
            }
            if (x > w * 3 / 5 && x < w * 4 / 5 && y > h / 3 && y < h * 5 / 6) {
                r = 40;
                g = 50;
                b = 120;
            }
            seed = seed * 1664525u + 1013904223u;
            int n = (int)(seed >> 28) - 8;
            p[0] = (uint8_t)(r + n < 0 ? 0 : r + n > 255 ? 255 : r + n);
            p[1] = (uint8_t)(g + n < 0 ? 0 : g + n > 255 ? 255 : g + n);
            p[2] = (uint8_t)(b + n < 0 ? 0 : b + n > 255 ? 255 : b + n);
        }
    }
    if (format == MK_FMT_RGB) {
        *out = img;
        return 0;
    }
    mk_image_t conv = mk_image_desc(w, h, format, MK_U8);
    if ((rc = mk_image_alloc(NULL, &conv, MK_MEM_HOST))) {
        mk_image_free(NULL, &img);
        return rc;
    }
    for (int y = 0; y < h; y++) {
        const uint8_t *s = mk_image_row(&img, 0, y);
        uint8_t *d = mk_image_row(&conv, 0, y);
        for (int x = 0; x < w; x++, s += 3) {
            if (format == MK_FMT_GRAY) {
                d[x] = (uint8_t)((299 * s[0] + 587 * s[1] + 114 * s[2] + 500) / 1000);
            } else {
                d[3 * x] = s[2];
                d[3 * x + 1] = s[1];
                d[3 * x + 2] = s[0];
            }
        }
    }
    mk_image_free(NULL, &img);
    *out = conv;
    return 0;
}

/* Mirror-tiles src to w x h (reflecting at the edges), so that a photo fills any frame size with real content. */
static int mirror_tile(const mk_image_t *src, int w, int h, mk_image_t *out)
{
    mk_image_t img = mk_image_desc(w, h, src->format, MK_U8);
    int rc = mk_image_alloc(NULL, &img, MK_MEM_HOST);
    if (rc)
        return rc;
    size_t bpp = (size_t)src->channels;
    for (int y = 0; y < h; y++) {
        int sy = y % (2 * src->height);
        sy = sy < src->height ? sy : 2 * src->height - 1 - sy;
        const uint8_t *s = mk_image_row(src, 0, sy);
        uint8_t *d = mk_image_row(&img, 0, y);
        for (int x = 0; x < w; x++) {
            int sx = x % (2 * src->width);
            sx = sx < src->width ? sx : 2 * src->width - 1 - sx;
            memcpy(d + (size_t)x * bpp, s + (size_t)sx * bpp, bpp);
        }
    }
    *out = img;
    return 0;
}

int mt_source_image(const char *path, mk_format_t format, int w, int h, mk_image_t *out, char *what, size_t what_len)
{
    char buf[4096];
    mk_image_t photo = {0};
    int rc;
    if (!path) {
        const char *data = getenv("MASKD_TEST_DATA");
        struct stat st;
        snprintf(buf, sizeof buf, "%s/images/person.jpg", data ? data : "../shared/data");
        if (stat(buf, &st) == 0)
            path = buf;
    }
    if (path) {
        if ((rc = mk_imageio_load(path, format, &photo)))
            return rc;
        snprintf(what, what_len, "%s (%dx%d, mirror-tiled)", path, photo.width, photo.height);
        rc = mirror_tile(&photo, w, h, out);
        mk_image_free(NULL, &photo);
        return rc;
    }
    snprintf(what, what_len, "generated scene");
    return generated_scene(format, w, h, out);
}

/* ---- letterbox ------------------------------------------------------------------------------------------ */

static int write_f32_chw(const char *path, const mk_image_t *t)
{
    size_t plane = (size_t)t->width * t->height, n = plane * (size_t)t->channels;
    float *buf = malloc(n * sizeof(float));
    if (!buf)
        return mk_err_set(MK_ENOMEM, "out of memory");
    for (int c = 0; c < t->channels; c++)
        for (int y = 0; y < t->height; y++)
            memcpy(buf + c * plane + (size_t)y * t->width, mk_image_row(t, c, y), (size_t)t->width * sizeof(float));
    int rc = mk_file_write(path, buf, n * sizeof(float));
    free(buf);
    return rc;
}

static int write_tensor_png(const char *path, const mk_image_t *t)
{
    mk_image_t img = mk_image_desc(t->width, t->height, MK_FMT_RGB, MK_U8);
    int rc = mk_image_alloc(NULL, &img, MK_MEM_HOST);
    if (rc)
        return rc;
    for (int y = 0; y < t->height; y++) {
        uint8_t *d = mk_image_row(&img, 0, y);
        for (int c = 0; c < 3; c++) {
            const float *s = mk_image_row(t, c, y);
            for (int x = 0; x < t->width; x++) {
                float v = s[x] * 255.0f + 0.5f;
                d[3 * x + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    }
    rc = mk_imageio_save(path, &img);
    mk_image_free(NULL, &img);
    return rc;
}

static int has_ext(const char *path, const char *ext)
{
    size_t n = strlen(path), e = strlen(ext);
    return n > e && !strcasecmp(path + n - e, ext);
}

static void letterbox_help(void)
{
    puts("usage: masktool letterbox IN --size WxH [--mode warp|darknet] [--yuyv WxH] -o OUT.f32|OUT.png\n"
         "                          [--backend auto|cpu|cuda]\n"
         "\n"
         "Letterboxes an image to a network input: aspect kept, centred, float32 CHW RGB in [0,1].\n"
         "  IN              JPEG, PNG, BMP or PNM (or raw YUYV 4:2:2 with --yuyv WxH)\n"
         "  --size WxH      network input size, e.g. 416x416\n"
         "  --mode warp     the seed's affine warp, equal to cv2.warpAffine(INTER_LINEAR, pad 114) (default)\n"
         "  --mode darknet  Darknet's letterbox_image (bilinear resize_image, pad 0.5), bit-compatible\n"
         "  -o OUT.f32      raw float32 CHW (Darknet's network input layout); OUT.png for a picture of it\n"
         "Prints one JSON line: the plan (scaled size, padding) and the inverse transform net -> source.");
}

static int cmd_letterbox(int argc, char **argv)
{
    static const struct option opts[] = {{"size", required_argument, 0, 's'},   {"mode", required_argument, 0, 'm'},
                                         {"yuyv", required_argument, 0, 'y'},   {"output", required_argument, 0, 'o'},
                                         {"backend", required_argument, 0, 'b'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *out_path = NULL, *backend = NULL;
    int w = 0, h = 0, yw = 0, yh = 0, c;
    mk_letterbox_mode_t mode = MK_LETTERBOX_WARP;
    while ((c = getopt_long(argc, argv, "s:m:y:o:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (mt_parse_size(optarg, &w, &h))
                return 2;
            break;
        case 'm':
            if (mk_letterbox_mode_parse(optarg, &mode))
                die_usage("letterbox", mk_err_msg());
            break;
        case 'y':
            if (mt_parse_size(optarg, &yw, &yh))
                return 2;
            break;
        case 'o': out_path = optarg; break;
        case 'b': backend = optarg; break;
        case 'h': letterbox_help(); return 0;
        default: die_usage("letterbox", "unknown option");
        }
    }
    if (optind != argc - 1)
        die_usage("letterbox", "one input image expected");
    if (!w || !out_path)
        die_usage("letterbox", "--size and -o are required");
    if (!has_ext(out_path, ".f32") && !has_ext(out_path, ".png"))
        die_usage("letterbox", "output must end in .f32 or .png");

    mk_image_t src = {0}, dsrc = {0}, dst = mk_image_desc_planar(w, h, 3, MK_F32), host = {0};
    mk_letterbox_t lb;
    int rc;
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    if (yw) {
        void *buf = NULL;
        size_t len = 0;
        src = mk_image_desc(yw, yh, MK_FMT_YUYV, MK_U8);
        src.pitch = (size_t)yw * 2;
        if (!(rc = mk_file_read(argv[optind], &buf, &len))) {
            if (len != src.pitch * (size_t)yh)
                rc = mk_err_set(MK_EFORMAT, "%s: %zu bytes, a %dx%d YUYV frame has %zu", argv[optind], len, yw, yh,
                                src.pitch * (size_t)yh);
            src.data = buf;
            src.owned = 1;
        }
    } else {
        rc = mk_imageio_load(argv[optind], MK_FMT_BGR, &src);
    }
    if (!rc) {
        dsrc = src;
        dsrc.data = NULL;
        dsrc.owned = 0;
        dsrc.pitch = 0;
        host = dst;
    }
    if (rc || (rc = mk_image_alloc(ctx, &dsrc, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &dsrc, &src)) ||
        (rc = mk_image_alloc(ctx, &dst, mk_ctx_mem(ctx))) || (rc = mk_letterbox(ctx, &dsrc, &dst, mode, &lb)) ||
        (rc = mk_image_alloc(NULL, &host, MK_MEM_HOST)) || (rc = mk_image_download(ctx, &host, &dst)) ||
        (rc = mk_ctx_sync(ctx)) ||
        (rc = has_ext(out_path, ".f32") ? write_f32_chw(out_path, &host) : write_tensor_png(out_path, &host))) {
        fprintf(stderr, "masktool letterbox: %s\n", mk_err_msg());
    } else {
        printf("{\"backend\":\"%s\",\"mode\":\"%s\",\"src\":[%d,%d],\"net\":[%d,%d],\"scaled\":[%d,%d],"
               "\"pad\":[%d,%d],\"to_src\":{\"sx\":%.9g,\"tx\":%.9g,\"sy\":%.9g,\"ty\":%.9g},\"output\":\"%s\"}\n",
               mk_backend_name(mk_ctx_backend(ctx)), mk_letterbox_mode_name(mode), lb.src_w, lb.src_h, lb.dst_w,
               lb.dst_h, lb.new_w, lb.new_h, lb.pad_x, lb.pad_y, lb.sx, lb.tx, lb.sy, lb.ty, out_path);
    }
    mk_image_free(NULL, &src);
    mk_image_free(ctx, &dsrc);
    mk_image_free(ctx, &dst);
    mk_image_free(NULL, &host);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}

/* ---- threshold ------------------------------------------------------------------------------------------ */

static void threshold_help(void)
{
    puts("usage: masktool threshold IN (--otsu | --value N) [--mode M] [--maxval V] -o OUT.png\n"
         "                          [--backend auto|cpu|cuda]\n"
         "\n"
         "Binarises a gray image (colour input is converted to gray first) as cv::threshold does.\n"
         "  --otsu          Otsu's threshold, identical to cv::threshold(THRESH_OTSU)\n"
         "  --value N       a fixed threshold 0..255\n"
         "  --mode M        binary (default), binary-inv, trunc, tozero, tozero-inv\n"
         "  --maxval V      the value of set pixels (binary modes), default 255\n"
         "Prints one JSON line with the threshold used.");
}

static int cmd_threshold(int argc, char **argv)
{
    static const struct option opts[] = {{"otsu", no_argument, 0, 'O'},          {"value", required_argument, 0, 'v'},
                                         {"mode", required_argument, 0, 'm'},    {"maxval", required_argument, 0, 'x'},
                                         {"output", required_argument, 0, 'o'},  {"backend", required_argument, 0, 'b'},
                                         {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *out_path = NULL, *backend = NULL;
    int otsu = 0, value = -1, maxval = 255, c;
    mk_thresh_mode_t mode = MK_THRESH_BINARY;
    while ((c = getopt_long(argc, argv, "Ov:m:x:o:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'O': otsu = 1; break;
        case 'v':
            if (mt_parse_int(optarg, 0, 255, &value))
                die_usage("threshold", "--value must be 0..255");
            break;
        case 'm':
            if (mk_thresh_mode_parse(optarg, &mode))
                die_usage("threshold", mk_err_msg());
            break;
        case 'x':
            if (mt_parse_int(optarg, 0, 255, &maxval))
                die_usage("threshold", "--maxval must be 0..255");
            break;
        case 'o': out_path = optarg; break;
        case 'b': backend = optarg; break;
        case 'h': threshold_help(); return 0;
        default: die_usage("threshold", "unknown option");
        }
    }
    if (optind != argc - 1)
        die_usage("threshold", "one input image expected");
    if (otsu == (value >= 0))
        die_usage("threshold", "give exactly one of --otsu and --value N");
    if (!out_path)
        die_usage("threshold", "-o OUT is required");

    mk_image_t src = {0}, d = {0}, host = {0};
    int rc, t = value;
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    if (!(rc = mk_imageio_load(argv[optind], MK_FMT_GRAY, &src))) {
        d = src;
        d.data = NULL;
        d.owned = 0;
        d.pitch = 0;
        host = d;
    }
    if (rc || (rc = mk_image_alloc(ctx, &d, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &d, &src)) ||
        (rc = otsu ? mk_threshold_otsu(ctx, &d, &d, maxval, mode, &t) : mk_threshold(ctx, &d, &d, t, maxval, mode)) ||
        (rc = mk_image_alloc(NULL, &host, MK_MEM_HOST)) || (rc = mk_image_download(ctx, &host, &d)) ||
        (rc = mk_ctx_sync(ctx)) || (rc = mk_imageio_save(out_path, &host)))
        fprintf(stderr, "masktool threshold: %s\n", mk_err_msg());
    else
        printf("{\"backend\":\"%s\",\"threshold\":%d,\"otsu\":%s,\"mode\":\"%s\",\"maxval\":%d,\"output\":\"%s\"}\n",
               mk_backend_name(mk_ctx_backend(ctx)), t, otsu ? "true" : "false", mk_thresh_mode_name(mode), maxval,
               out_path);
    mk_image_free(NULL, &src);
    mk_image_free(ctx, &d);
    mk_image_free(NULL, &host);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}

/* ---- guided --------------------------------------------------------------------------------------------- */

static void guided_help(void)
{
    puts("usage: masktool guided --guide IMG --src SRC --radius R --eps E [--fast S] -o OUT\n"
         "                       [--gray] [--mask soft|alpha|binary|otsu] [--thresh T] [--feather F] [--opencv]\n"
         "                       [--backend auto|cpu|cuda]\n"
         "\n"
         "Guided filter (He, Sun, Tang) of SRC with the colour (or --gray) guide IMG; with --fast S the fast guided\n"
         "filter (He, Sun 2015): SRC is a low-resolution mask of ceil(w/S) x ceil(h/S) pixels, upsampled to the\n"
         "guide's w x h with sharp edges.\n"
         "  --guide IMG      JPEG, PNG, BMP or PNM, u8\n"
         "  --src SRC        SRC.f32: raw float32 rows (values in [0,1]); any image file: u8 gray (v / 255)\n"
         "  --radius R       box radius in guide pixels (at 1/S: round(R / S))\n"
         "  --eps E          regularisation for the guide scaled to [0,1] (e.g. 1e-4 sharp, 1e-2 smooth)\n"
         "  --opencv         reproduce OpenCV 4.x ximgproc's determinant guard (colour guide, eps < 1e-2)\n"
         "  --mask M         output product: soft (float, OUT.f32; the default for .f32), alpha (u8, the default\n"
         "                   for image outputs), binary (q > T, optionally feathered), otsu\n"
         "  --thresh T       binary threshold on q (default 0.5); --feather F: a linear ramp of width F around it\n"
         "  -o OUT           OUT.f32 (soft) or an image file (.png, .bmp, .pgm, .jpg)\n"
         "Prints one JSON line with the parameters and the time of the call on the backend.");
}

typedef struct {
    mk_ctx_t *ctx;
    const mk_image_t *guide, *src;
    mk_image_t *dst;
    mk_guided_t g;
    mk_mask_t m;
} guided_call_t;

static int guided_call(void *arg)
{
    guided_call_t *c = arg;
    return mk_guided_upsample(c->ctx, c->guide, c->src, c->dst, &c->g, &c->m);
}

/* A u8 image file as gray, or raw float32 rows of w x h. */
static int load_source(const char *path, int w, int h, mk_image_t *out)
{
    if (!has_ext(path, ".f32"))
        return mk_imageio_load(path, MK_FMT_GRAY, out);
    void *buf = NULL;
    size_t len = 0;
    int rc = mk_file_read(path, &buf, &len);
    if (rc)
        return rc;
    if (len != (size_t)w * h * sizeof(float)) {
        free(buf);
        return mk_err_set(MK_EFORMAT, "%s: %zu bytes; a %dx%d float32 source has %zu", path, len, w, h,
                          (size_t)w * h * sizeof(float));
    }
    *out = mk_image_desc(w, h, MK_FMT_GRAY, MK_F32);
    out->pitch = (size_t)w * sizeof(float);
    out->data = buf;
    out->owned = 1;
    return 0;
}

static int write_f32_gray(const char *path, const mk_image_t *img)
{
    size_t row = (size_t)img->width * sizeof(float);
    char *buf = malloc(row * (size_t)img->height);
    if (!buf)
        return mk_err_set(MK_ENOMEM, "out of memory");
    for (int y = 0; y < img->height; y++)
        memcpy(buf + (size_t)y * row, mk_image_row(img, 0, y), row);
    int rc = mk_file_write(path, buf, row * (size_t)img->height);
    free(buf);
    return rc;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int cmd_guided(int argc, char **argv)
{
    static const struct option opts[] = {
        {"guide", required_argument, 0, 'g'},  {"src", required_argument, 0, 's'},
        {"radius", required_argument, 0, 'r'}, {"eps", required_argument, 0, 'e'},
        {"fast", required_argument, 0, 'f'},   {"output", required_argument, 0, 'o'},
        {"gray", no_argument, 0, 'G'},         {"mask", required_argument, 0, 'm'},
        {"thresh", required_argument, 0, 't'}, {"feather", required_argument, 0, 'F'},
        {"opencv", no_argument, 0, 'O'},       {"backend", required_argument, 0, 'b'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *guide_path = NULL, *src_path = NULL, *out_path = NULL, *backend = NULL;
    mk_guided_t g = {-1, -1.0, 1, 0};
    mk_mask_t m = mk_mask_soft();
    int gray = 0, mode_given = 0, c;
    double v;
    while ((c = getopt_long(argc, argv, "g:s:r:e:f:o:Gm:t:F:Ob:h", opts, NULL)) != -1) {
        switch (c) {
        case 'g': guide_path = optarg; break;
        case 's': src_path = optarg; break;
        case 'r':
            if (mt_parse_int(optarg, 0, MK_GUIDED_MAX_RADIUS, &g.radius))
                die_usage("guided", "--radius must be 0..65535");
            break;
        case 'e':
            if (parse_double(optarg, 0.0, 1e30, &g.eps))
                die_usage("guided", "--eps must be a number >= 0");
            break;
        case 'f':
            if (mt_parse_int(optarg, 1, MK_GUIDED_MAX_SCALE, &g.scale))
                die_usage("guided", "--fast must be 1..64");
            break;
        case 'o': out_path = optarg; break;
        case 'G': gray = 1; break;
        case 'm':
            if (mk_mask_mode_parse(optarg, &m.mode))
                die_usage("guided", mk_err_msg());
            mode_given = 1;
            break;
        case 't':
            if (parse_double(optarg, -1e30, 1e30, &v))
                die_usage("guided", "--thresh must be a number");
            m.thresh = (float)v;
            break;
        case 'F':
            if (parse_double(optarg, 0.0, 1e30, &v))
                die_usage("guided", "--feather must be a number >= 0");
            m.feather = (float)v;
            break;
        case 'O': g.flags |= MK_GUIDED_OPENCV; break;
        case 'b': backend = optarg; break;
        case 'h': guided_help(); return 0;
        default: die_usage("guided", "unknown option");
        }
    }
    if (optind != argc)
        die_usage("guided", "unexpected argument");
    if (!guide_path || !src_path || !out_path || g.radius < 0 || g.eps < 0)
        die_usage("guided", "--guide, --src, --radius, --eps and -o are required");
    int f32_out = has_ext(out_path, ".f32");
    if (!mode_given)
        m.mode = f32_out ? MK_MASK_SOFT : MK_MASK_ALPHA;
    if (f32_out != (m.mode == MK_MASK_SOFT))
        die_usage("guided", "soft output goes to OUT.f32; alpha, binary and otsu to an image file");

    mk_image_t guide = {0}, src = {0}, dguide = {0}, dsrc = {0}, dst = {0}, host = {0};
    guided_call_t call = {0};
    double us = 0;
    int rc;
    mk_ctx_t *ctx = mt_ctx(backend);
    if (!ctx)
        return 1;
    if (!(rc = mk_imageio_load(guide_path, gray ? MK_FMT_GRAY : MK_FMT_BGR, &guide)))
        rc = load_source(src_path, (guide.width + g.scale - 1) / g.scale, (guide.height + g.scale - 1) / g.scale,
                         &src);
    if (!rc) {
        dguide = guide;
        dsrc = src;
        dguide.data = dsrc.data = NULL;
        dguide.owned = dsrc.owned = 0;
        dguide.pitch = dsrc.pitch = 0;
        dst = mk_image_desc(guide.width, guide.height, MK_FMT_GRAY, f32_out ? MK_F32 : MK_U8);
        host = dst;
        call = (guided_call_t){ctx, &dguide, &dsrc, &dst, g, m};
    }
    if (rc || (rc = mk_image_alloc(ctx, &dguide, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &dguide, &guide)) ||
        (rc = mk_image_alloc(ctx, &dsrc, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &dsrc, &src)) ||
        (rc = mk_image_alloc(ctx, &dst, mk_ctx_mem(ctx))) || (rc = mk_ctx_sync(ctx)) ||
        (rc = mk_ctx_time_us(ctx, guided_call, &call, &us)) || (rc = mk_image_alloc(NULL, &host, MK_MEM_HOST)) ||
        (rc = mk_image_download(ctx, &host, &dst)) || (rc = mk_ctx_sync(ctx)) ||
        (rc = f32_out ? write_f32_gray(out_path, &host) : mk_imageio_save(out_path, &host))) {
        fprintf(stderr, "masktool guided: %s\n", mk_err_msg());
    } else {
        printf("{\"backend\":\"%s\",\"guide\":[%d,%d,%d],\"src\":[%d,%d],\"src_type\":\"%s\",\"radius\":%d,"
               "\"work_radius\":%d,\"eps\":%g,\"scale\":%d,\"opencv\":%s,\"mask\":\"%s\",\"thresh\":%g,"
               "\"feather\":%g,\"time_us\":%.1f,\"output\":\"%s\"}\n",
               mk_backend_name(mk_ctx_backend(ctx)), guide.width, guide.height, guide.channels, src.width, src.height,
               mk_dtype_name(src.dtype), g.radius, mk_guided_work_radius(&g), g.eps, g.scale,
               g.flags & MK_GUIDED_OPENCV ? "true" : "false", mk_mask_mode_name(m.mode), (double)m.thresh,
               (double)m.feather, us, out_path);
    }
    mk_image_free(NULL, &guide);
    mk_image_free(NULL, &src);
    mk_image_free(ctx, &dguide);
    mk_image_free(ctx, &dsrc);
    mk_image_free(ctx, &dst);
    mk_image_free(NULL, &host);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}

/* ---- info and demo -------------------------------------------------------------------------------------- */

static int cmd_info(int argc, char **argv)
{
    (void)argv;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: masktool info\n\nPrints the backends this build has and the device AUTO would use, as JSON.");
        return 0;
    }
    char why[256] = "";
    int n = mk_cuda_device_count(why, sizeof why);
    mk_ctx_t *ctx = mt_ctx("auto");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", "0.1.0");
    cJSON_AddBoolToObject(o, "cuda_compiled", mk_cuda_compiled());
    cJSON_AddNumberToObject(o, "cuda_devices", n);
    if (n <= 0)
        cJSON_AddStringToObject(o, "cuda_unavailable", why);
    if (ctx) {
        cJSON_AddStringToObject(o, "auto_backend", mk_backend_name(mk_ctx_backend(ctx)));
        cJSON_AddStringToObject(o, "device", mk_ctx_device_name(ctx));
    }
    mt_print_json(o, 0);
    mk_ctx_destroy(ctx);
    return ctx ? 0 : 1;
}

static void demo_help(void)
{
    puts("usage: masktool demo [--out DIR] [--backend auto|cpu|cuda]\n"
         "\n"
         "Runs the kernels on a built-in generated 1280x720 scene (no camera or data needed): letterbox in both\n"
         "modes to 416x416, Otsu binarisation and the fast guided upsampling of a 1/4 mask, checks the backend\n"
         "against the CPU reference, writes the pictures to DIR (default ./masktool-demo) and prints a JSON\n"
         "summary.");
}

static int cmd_demo(int argc, char **argv)
{
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {"backend", required_argument, 0, 'b'},
                                         {"help", no_argument, 0, 'h'},      {0, 0, 0, 0}};
    const char *dir = "masktool-demo", *backend = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "o:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 'b': backend = optarg; break;
        case 'h': demo_help(); return 0;
        default: die_usage("demo", "unknown option");
        }
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "masktool demo: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    mk_ctx_t *ctx = mt_ctx(backend), *cpu = mt_ctx("cpu");
    if (!ctx || !cpu)
        return 1;
    mk_image_t scene = {0}, gray = {0};
    int rc = generated_scene(MK_FMT_BGR, 1280, 720, &scene);
    if (!rc)
        rc = generated_scene(MK_FMT_GRAY, 1280, 720, &gray);
    char path[4096];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "backend", mk_backend_name(mk_ctx_backend(ctx)));
    cJSON_AddStringToObject(o, "device", mk_ctx_device_name(ctx));
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    snprintf(path, sizeof path, "%s/scene.png", dir);
    if (!rc)
        rc = mk_imageio_save(path, &scene);
    for (int m = 0; m < 2 && !rc; m++) {
        mk_letterbox_mode_t mode = m ? MK_LETTERBOX_DARKNET : MK_LETTERBOX_WARP;
        mk_image_t out[2] = {mk_image_desc_planar(416, 416, 3, MK_F32), mk_image_desc_planar(416, 416, 3, MK_F32)};
        mk_image_t d = scene, dout = out[0];
        d.data = NULL;
        d.owned = 0;
        d.pitch = 0;
        double maxdiff = 0;
        if ((rc = mk_image_alloc(ctx, &d, mk_ctx_mem(ctx))) || (rc = mk_image_upload(ctx, &d, &scene)) ||
            (rc = mk_image_alloc(ctx, &dout, mk_ctx_mem(ctx))) || (rc = mk_letterbox(ctx, &d, &dout, mode, NULL)) ||
            (rc = mk_image_alloc(NULL, &out[0], MK_MEM_HOST)) || (rc = mk_image_download(ctx, &out[0], &dout)) ||
            (rc = mk_ctx_sync(ctx)) || (rc = mk_image_alloc(NULL, &out[1], MK_MEM_HOST)) ||
            (rc = mk_letterbox(cpu, &scene, &out[1], mode, NULL)))
            goto lb_done;
        for (int p = 0; p < 3; p++)
            for (int y = 0; y < 416; y++) {
                const float *a = mk_image_row(&out[0], p, y), *b = mk_image_row(&out[1], p, y);
                for (int x = 0; x < 416; x++)
                    maxdiff = fabs(a[x] - b[x]) > maxdiff ? fabs(a[x] - b[x]) : maxdiff;
            }
        snprintf(path, sizeof path, "%s/letterbox-%s.png", dir, mk_letterbox_mode_name(mode));
        if (!(rc = write_tensor_png(path, &out[0]))) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "op", "letterbox");
            cJSON_AddStringToObject(s, "mode", mk_letterbox_mode_name(mode));
            cJSON_AddStringToObject(s, "output", path);
            cJSON_AddNumberToObject(s, "max_diff_vs_cpu", maxdiff);
            cJSON_AddItemToArray(steps, s);
        }
    lb_done:
        mk_image_free(ctx, &d);
        mk_image_free(ctx, &dout);
        mk_image_free(NULL, &out[0]);
        mk_image_free(NULL, &out[1]);
    }
    if (!rc) {
        mk_image_t d = gray, ref = gray, host = gray;
        int t = -1, tref = -1;
        d.data = ref.data = host.data = NULL;
        d.owned = ref.owned = host.owned = 0;
        d.pitch = ref.pitch = host.pitch = 0;
        if (!(rc = mk_image_alloc(ctx, &d, mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &d, &gray)) &&
            !(rc = mk_threshold_otsu(ctx, &d, &d, 255, MK_THRESH_BINARY, &t)) &&
            !(rc = mk_image_alloc(NULL, &host, MK_MEM_HOST)) && !(rc = mk_image_download(ctx, &host, &d)) &&
            !(rc = mk_ctx_sync(ctx)) && !(rc = mk_image_alloc(NULL, &ref, MK_MEM_HOST)) &&
            !(rc = mk_threshold_otsu(cpu, &gray, &ref, 255, MK_THRESH_BINARY, &tref))) {
            long diff = 0;
            for (int y = 0; y < gray.height; y++)
                diff += memcmp(mk_image_row(&host, 0, y), mk_image_row(&ref, 0, y), (size_t)gray.width) != 0;
            snprintf(path, sizeof path, "%s/otsu.png", dir);
            if (!(rc = mk_imageio_save(path, &host))) {
                cJSON *s = cJSON_CreateObject();
                cJSON_AddStringToObject(s, "op", "otsu");
                cJSON_AddNumberToObject(s, "threshold", t);
                cJSON_AddNumberToObject(s, "cpu_threshold", tref);
                cJSON_AddNumberToObject(s, "rows_differing_from_cpu", (double)diff);
                cJSON_AddStringToObject(s, "output", path);
                cJSON_AddItemToArray(steps, s);
                if (t != tref || diff)
                    rc = mk_err_set(MK_ESTATE, "backend and CPU reference disagree");
            }
        }
        mk_image_free(ctx, &d);
        mk_image_free(NULL, &host);
        mk_image_free(NULL, &ref);
    }
    if (!rc) {
        /* Fast guided upsampling of a 1/4 mask (the gray scene > 128 in 4x4 blocks) with the colour scene as the
         * guide: the backend's soft output against the CPU reference's, and its alpha as a picture. */
        const int s = 4, lw = (scene.width + s - 1) / s, lh = (scene.height + s - 1) / s;
        mk_guided_t g = {8, 1e-3, s, 0};
        mk_mask_t am = mk_mask_soft();
        mk_image_t low = mk_image_desc(lw, lh, MK_FMT_GRAY, MK_U8), dlow = low, dscene = scene;
        mk_image_t soft = mk_image_desc(scene.width, scene.height, MK_FMT_GRAY, MK_F32), dsoft = soft, ref = soft;
        mk_image_t alpha = mk_image_desc(scene.width, scene.height, MK_FMT_GRAY, MK_U8);
        double maxdiff = 0;
        am.mode = MK_MASK_ALPHA;
        dscene.data = NULL;
        dscene.owned = 0;
        dscene.pitch = 0;
        if (!(rc = mk_image_alloc(NULL, &low, MK_MEM_HOST))) {
            for (int y = 0; y < lh; y++)
                for (int x = 0; x < lw; x++) {
                    int sum = 0, n = 0;
                    for (int yy = y * s; yy < y * s + s && yy < gray.height; yy++)
                        for (int xx = x * s; xx < x * s + s && xx < gray.width; xx++, n++)
                            sum += ((const uint8_t *)mk_image_row(&gray, 0, yy))[xx];
                    ((uint8_t *)mk_image_row(&low, 0, y))[x] = sum > 128 * n ? 255 : 0;
                }
            dlow = low;
            dlow.data = NULL;
            dlow.owned = 0;
            dlow.pitch = 0;
        }
        if (!rc && !(rc = mk_image_alloc(ctx, &dscene, mk_ctx_mem(ctx))) &&
            !(rc = mk_image_upload(ctx, &dscene, &scene)) && !(rc = mk_image_alloc(ctx, &dlow, mk_ctx_mem(ctx))) &&
            !(rc = mk_image_upload(ctx, &dlow, &low)) && !(rc = mk_image_alloc(ctx, &dsoft, mk_ctx_mem(ctx))) &&
            !(rc = mk_guided_upsample(ctx, &dscene, &dlow, &dsoft, &g, NULL)) &&
            !(rc = mk_image_alloc(NULL, &soft, MK_MEM_HOST)) && !(rc = mk_image_download(ctx, &soft, &dsoft)) &&
            !(rc = mk_ctx_sync(ctx)) && !(rc = mk_image_alloc(NULL, &ref, MK_MEM_HOST)) &&
            !(rc = mk_guided_upsample(cpu, &scene, &low, &ref, &g, NULL)) &&
            !(rc = mk_image_alloc(NULL, &alpha, MK_MEM_HOST)) && !(rc = mk_mask_compose(cpu, &soft, &alpha, &am))) {
            for (int y = 0; y < soft.height; y++) {
                const float *a = mk_image_row(&soft, 0, y), *b = mk_image_row(&ref, 0, y);
                for (int x = 0; x < soft.width; x++)
                    maxdiff = !(fabs(a[x] - b[x]) <= maxdiff) ? fabs(a[x] - b[x]) : maxdiff;
            }
            snprintf(path, sizeof path, "%s/guided-fast.png", dir);
            if (!(rc = mk_imageio_save(path, &alpha))) {
                cJSON *st = cJSON_CreateObject();
                cJSON_AddStringToObject(st, "op", "guided");
                cJSON_AddStringToObject(st, "variant", "fast upsampling of a 1/4 mask, colour guide");
                cJSON_AddNumberToObject(st, "radius", g.radius);
                cJSON_AddNumberToObject(st, "eps", g.eps);
                cJSON_AddNumberToObject(st, "scale", g.scale);
                cJSON_AddNumberToObject(st, "max_diff_vs_cpu", maxdiff);
                cJSON_AddStringToObject(st, "output", path);
                cJSON_AddItemToArray(steps, st);
                if (!(maxdiff <= 1e-5))
                    rc = mk_err_set(MK_ESTATE, "guided: backend and CPU reference differ by %g", maxdiff);
            }
        }
        mk_image_free(NULL, &low);
        mk_image_free(ctx, &dlow);
        mk_image_free(ctx, &dscene);
        mk_image_free(ctx, &dsoft);
        mk_image_free(NULL, &soft);
        mk_image_free(NULL, &ref);
        mk_image_free(NULL, &alpha);
    }
    if (rc)
        fprintf(stderr, "masktool demo: %s\n", mk_err_msg());
    mt_print_json(o, 1);
    mk_image_free(NULL, &scene);
    mk_image_free(NULL, &gray);
    mk_ctx_destroy(cpu);
    mk_ctx_destroy(ctx);
    return rc ? 1 : 0;
}

/* ---- main ----------------------------------------------------------------------------------------------- */

static const struct {
    const char *name, *summary;
    int (*fn)(int, char **);
} commands[] = {
    {"letterbox", "letterbox an image to a network input (float32 CHW)", cmd_letterbox},
    {"threshold", "binarise a gray image with a fixed or Otsu threshold", cmd_threshold},
    {"forward", "run a Darknet network on a raw input tensor, write the yolo outputs", mt_forward},
    {"detect", "find objects in images with a Darknet network (letterbox, forward, decode + NMS)", mt_detect},
    {"decode", "decode + NMS of dumped [yolo] outputs, print detections as JSON", mt_decode},
    {"guided", "guided filter / fast guided upsampling of a mask with an image as guide", cmd_guided},
    {"grabcut", "cut out the object in a rectangle of an image (GrabCut), write the mask", mt_grabcut},
    {"grabcut-score", "GrabCut accuracy on the 33-image benchmark vs ground truth and OpenCV", mt_grabcut_score},
    {"segment", "segment an image, a JPEG directory or a video like maskd: masks, cut-outs, composites", mt_segment},
    {"bench", "benchmark an op on real data, print JSON (letterbox|threshold|otsu|guided|yolo-decode|detect|"
              "grabcut|maxflow|pipeline|all)", mt_bench},
    {"bus-bench", "benchmark the frame bus with reader processes, print JSON (also a test writer)", mt_bus_bench},
    {"demo", "run the kernels on a built-in scene (no camera or data needed)", cmd_demo},
    {"info", "print the backends and devices this build can use", cmd_info},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: masktool COMMAND [options]   (masktool COMMAND --help for each)\n\n"
               "maskd's offline tool: runs the kernels of the daemon on files.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nEvery command takes --backend auto|cpu|cuda (auto: CUDA when a usable GPU is present).\n"
               "Environment: MASKD_LOG=error|warn|info|debug|trace, MASKD_TEST_DATA=shared data folder.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        puts("masktool 0.1.0");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "masktool: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
