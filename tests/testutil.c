/* testutil: implementation of the shared test helpers. */
#include "testutil.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "imageio.h"

static int is_dir(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *tu_data_dir(void)
{
    static char buf[4096];
    const char *env = getenv("MASKD_TEST_DATA");
    if (env && is_dir(env))
        return env;
    const char *root = getenv("MASKD_SOURCE_ROOT");
    snprintf(buf, sizeof buf, "%s/../shared/data", root ? root : ".");
    return is_dir(buf) ? buf : NULL;
}

const char *tu_data_path(char *buf, size_t n, const char *rel)
{
    const char *d = tu_data_dir();
    struct stat st;
    if (!d) {
        print_message("shared test data not found ($MASKD_TEST_DATA or ../shared/data): skipping\n");
        return NULL;
    }
    snprintf(buf, n, "%s/%s", d, rel);
    if (stat(buf, &st) != 0) {
        print_message("%s absent: skipping\n", buf);
        return NULL;
    }
    return buf;
}

const char *tu_test_data(char *buf, size_t n, const char *rel)
{
    const char *root = getenv("MASKD_SOURCE_ROOT");
    snprintf(buf, n, "%s/tests/data/%s", root ? root : ".", rel);
    return buf;
}

uint64_t tu_rand(tu_rng_t *r)
{
    uint64_t x = r->s ? r->s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

int tu_rand_int(tu_rng_t *r, int lo, int hi)
{
    return lo + (int)(tu_rand(r) % (uint64_t)(hi - lo + 1));
}

char *tu_mutate(tu_rng_t *r, const char *text, size_t len, const char *const *tokens, int ntokens, size_t *out_len)
{
    static const char syntax[] = "{}[]\":,=\\\n\r\t #;-+.0e9";
    size_t maxtok = 0, n = len;
    for (int e = 0; e < ntokens; e++)
        maxtok = strlen(tokens[e]) > maxtok ? strlen(tokens[e]) : maxtok;
    const int edits = tu_rand_int(r, 1, 4);
    const size_t cap = len + (size_t)edits * (maxtok + 16); /* an edit adds a token or at most 16 bytes */
    char *b = malloc(cap + 1);
    assert_non_null(b);
    memcpy(b, text, len);
    for (int e = 0; e < edits; e++) {
        size_t at = n ? (size_t)(tu_rand(r) % n) : 0, span = n - at ? 1 + (size_t)(tu_rand(r) % (n - at)) : 0;
        span = span > 16 ? 1 + span % 16 : span;
        switch (tu_rand_int(r, 0, 6)) {
        case 0: /* a random byte replaced */
            if (n)
                b[at] = (char)(tu_rand(r) >> 56);
            break;
        case 1: /* a syntax byte replaced */
            if (n)
                b[at] = syntax[tu_rand(r) % (sizeof syntax - 1)];
            break;
        case 2: /* a syntax byte inserted */
            memmove(b + at + 1, b + at, n - at);
            b[at] = syntax[tu_rand(r) % (sizeof syntax - 1)];
            n++;
            break;
        case 3: /* a span deleted */
            memmove(b + at, b + at + span, n - at - span);
            n -= span;
            break;
        case 4: /* a span repeated */
            memmove(b + at + span, b + at, n - at);
            n += span;
            break;
        case 5: /* a token inserted */
            if (ntokens) {
                const char *t = tokens[tu_rand(r) % (uint64_t)ntokens];
                size_t tl = strlen(t);
                memmove(b + at + tl, b + at, n - at);
                memcpy(b + at, t, tl);
                n += tl;
            }
            break;
        default: /* cut short */
            n = at;
            break;
        }
    }
    b[n] = '\0';
    *out_len = n;
    return b;
}

void tu_fill_random(mk_image_t *img, tu_rng_t *r)
{
    size_t row = mk_image_row_bytes(img), rows = mk_image_rows(img);
    for (size_t y = 0; y < rows; y++) {
        unsigned char *p = (unsigned char *)img->data + y * img->pitch;
        for (size_t x = 0; x < row; x++)
            p[x] = (unsigned char)(tu_rand(r) >> 56);
    }
}

void tu_guarded_alloc(tu_guarded_t *g, mk_image_t desc, size_t extra_pitch, unsigned char sentinel)
{
    memset(g, 0, sizeof *g);
    g->img = desc;
    g->img.pitch = mk_image_row_bytes(&desc) + extra_pitch;
    g->img.mem = MK_MEM_HOST;
    g->pad_rows_bytes = 2 * g->img.pitch;
    g->total = mk_image_bytes(&g->img) + 2 * g->pad_rows_bytes;
    g->base = malloc(g->total);
    assert_non_null(g->base);
    memset(g->base, sentinel, g->total);
    g->img.data = g->base + g->pad_rows_bytes;
    g->sentinel = sentinel;
}

int tu_guard_ok(const tu_guarded_t *g)
{
    size_t row = mk_image_row_bytes(&g->img), rows = mk_image_rows(&g->img);
    for (size_t i = 0; i < g->pad_rows_bytes; i++)
        if (g->base[i] != g->sentinel || g->base[g->total - 1 - i] != g->sentinel)
            return 0;
    for (size_t y = 0; y < rows; y++) {
        const unsigned char *p = (const unsigned char *)g->img.data + y * g->img.pitch;
        for (size_t x = row; x < g->img.pitch; x++)
            if (p[x] != g->sentinel)
                return 0;
    }
    return 1;
}

void tu_guarded_free(tu_guarded_t *g)
{
    free(g->base);
    memset(g, 0, sizeof *g);
}

mk_image_t tu_to_ctx(mk_ctx_t *ctx, const mk_image_t *host, size_t extra_pitch)
{
    mk_image_t d = *host;
    d.data = NULL;
    d.owned = 0;
    d.pitch = mk_image_row_bytes(host) + extra_pitch;
    TU_OK(mk_image_alloc(ctx, &d, mk_ctx_mem(ctx)));
    TU_OK(mk_image_upload(ctx, &d, host));
    return d;
}

mk_image_t tu_to_host(mk_ctx_t *ctx, const mk_image_t *img)
{
    mk_image_t h = *img;
    h.data = NULL;
    h.owned = 0;
    h.pitch = 0;
    TU_OK(mk_image_alloc(NULL, &h, MK_MEM_HOST));
    TU_OK(mk_image_download(ctx, &h, img));
    TU_OK(mk_ctx_sync(ctx));
    return h;
}

const char *tu_mkdtemp(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "/tmp/%s.XXXXXX", name);
    if (!mkdtemp(buf))
        fail_msg("cannot create %s", buf);
    return buf;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void tu_rmtree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int jpg_entry(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 4 && !strcmp(e->d_name + n - 4, ".jpg");
}

tu_blob_t *tu_otb_frames(int *n)
{
    char dir[4096];
    struct dirent **list;
    *n = 0;
    if (!tu_data_path(dir, sizeof dir, "video/otb_man/frames"))
        return NULL;
    int count = scandir(dir, &list, jpg_entry, alphasort);
    if (count <= 0) {
        fail_msg("%s: no JPEG files", dir);
        return NULL;
    }
    tu_blob_t *b = calloc((size_t)count, sizeof *b);
    assert_non_null(b);
    for (int i = 0; i < count; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        void *data;
        TU_OK(mk_file_read(path, &data, &b[i].len));
        b[i].data = data;
        free(list[i]);
    }
    free(list);
    *n = count;
    return b;
}

void tu_blobs_free(tu_blob_t *b, int n)
{
    for (int i = 0; b && i < n; i++)
        free(b[i].data);
    free(b);
}

mk_ctx_t *tu_cuda_ctx(char *why, size_t n)
{
    mk_ctx_t *ctx = NULL;
    if (mk_cuda_device_count(why, n) <= 0)
        return NULL;
    if (mk_ctx_create(MK_BACKEND_CUDA, &ctx) != 0) {
        snprintf(why, n, "%s", mk_err_msg());
        return NULL;
    }
    return ctx;
}

void tu_dev_guard_alloc(mk_ctx_t *gpu, tu_dev_guard_t *g, mk_image_t desc, size_t extra_pitch, uint8_t poison)
{
    size_t pitch = mk_image_row_bytes(&desc) + extra_pitch;
    g->whole = mk_image_desc((int)pitch, (int)mk_image_rows(&desc) + 4, MK_FMT_GRAY, MK_U8);
    g->whole.pitch = pitch;
    TU_OK(mk_image_alloc(gpu, &g->whole, mk_ctx_mem(gpu)));
    TU_OK(mk_image_memset(gpu, &g->whole, poison));
    g->img = desc;
    g->img.pitch = pitch;
    g->img.mem = mk_ctx_mem(gpu);
    g->img.data = (char *)g->whole.data + 2 * pitch;
    g->img.owned = 0;
}

mk_image_t tu_dev_guard_check(mk_ctx_t *gpu, tu_dev_guard_t *g, uint8_t poison, const char *what)
{
    mk_image_t whole = tu_to_host(gpu, &g->whole);
    size_t row = mk_image_row_bytes(&g->img), rows = mk_image_rows(&g->img), pitch = g->img.pitch;
    for (size_t y = 0; y < rows + 4; y++) {
        const uint8_t *p = (const uint8_t *)whole.data + y * whole.pitch;
        size_t from = (y < 2 || y >= rows + 2) ? 0 : row;
        for (size_t x = from; x < pitch; x++)
            if (p[x] != poison)
                fail_msg("%s: guard byte (%zu, %zu) overwritten", what, x, y);
    }
    mk_image_t out = g->img;
    out.mem = MK_MEM_HOST;
    out.data = NULL;
    out.owned = 0;
    out.pitch = 0;
    TU_OK(mk_image_alloc(NULL, &out, MK_MEM_HOST));
    for (size_t y = 0; y < rows; y++)
        memcpy((char *)out.data + y * out.pitch, (const char *)whole.data + (y + 2) * whole.pitch, row);
    mk_image_free(NULL, &whole);
    return out;
}

void tu_dev_guard_free(mk_ctx_t *gpu, tu_dev_guard_t *g)
{
    mk_image_free(gpu, &g->whole);
}

uint64_t tu_fnv1a(const mk_image_t *img)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t row = mk_image_row_bytes(img), rows = mk_image_rows(img);
    for (size_t y = 0; y < rows; y++) {
        const unsigned char *p = (const unsigned char *)img->data + y * img->pitch;
        for (size_t x = 0; x < row; x++)
            h = (h ^ p[x]) * 0x100000001b3ull;
    }
    return h;
}

cJSON *tu_load_json(const char *path)
{
    void *buf = NULL;
    size_t len = 0;
    if (mk_file_read(path, &buf, &len))
        fail_msg("%s", mk_err_msg());
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!j)
        fail_msg("%s: invalid JSON", path);
    return j;
}

cJSON *tu_opencv_refs(void)
{
    char path[4096];
    return tu_load_json(tu_test_data(path, sizeof path, "opencv/refs.json"));
}

mk_image_t tu_random_image(uint64_t seed, int w, int h, mk_format_t format)
{
    tu_rng_t r = {seed};
    mk_image_t img = mk_image_desc(w, h, format, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    tu_fill_random(&img, &r);
    return img;
}

/* The synthetic Otsu inputs of tests/data/gen_opencv_refs.py (otsu_image), generated identically. */
mk_image_t tu_otsu_image(int k)
{
    tu_rng_t r = {(uint64_t)k * 2654435761ull + 1};
    int w = tu_rand_int(&r, 1, 97), h = tu_rand_int(&r, 1, 61), kind = k % 7;
    int vals[6], nv = 0, a = 0, b = 0, c1 = 0, c2 = 0;
    if (kind == 1) {
        nv = tu_rand_int(&r, 2, 6);
        for (int i = 0; i < nv; i++)
            vals[i] = tu_rand_int(&r, 0, 255);
    }
    if (kind == 2 || kind == 5)
        a = tu_rand_int(&r, 0, 255);
    if (kind == 4)
        a = tu_rand_int(&r, 0, 250);
    if (kind == 2)
        b = tu_rand_int(&r, 0, 255);
    if (kind == 3) {
        c1 = tu_rand_int(&r, 20, 100);
        c2 = tu_rand_int(&r, 140, 230);
    }
    mk_image_t img = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int i = 0; i < w * h; i++) {
        int v;
        switch (kind) {
        case 0: v = (int)(tu_rand(&r) >> 56); break;
        case 1: v = vals[tu_rand_int(&r, 0, nv - 1)]; break;
        case 2: v = (tu_rand(&r) >> 63) ? a : b; break;
        case 3: {
            int c = (tu_rand(&r) >> 63) ? c1 : c2;
            int d1 = tu_rand_int(&r, -20, 20);
            int d2 = tu_rand_int(&r, -20, 20);
            v = c + d1 + d2;
            v = v < 0 ? 0 : v > 255 ? 255 : v;
            break;
        }
        case 4: v = a + tu_rand_int(&r, 0, 5); break;
        case 5: v = a; break;
        default: v = tu_rand_int(&r, 0, 3) * 85; break;
        }
        ((uint8_t *)mk_image_row(&img, 0, i / w))[i % w] = (uint8_t)v;
    }
    return img;
}

mk_image_t tu_otsu_big(cJSON *c)
{
    cJSON *s = cJSON_GetObjectItem(c, "size");
    int w = cJSON_GetArrayItem(s, 0)->valueint, h = cJSON_GetArrayItem(s, 1)->valueint;
    int fill = cJSON_GetObjectItem(c, "fill")->valueint;
    mk_image_t img = mk_image_desc(w, h, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &img, MK_MEM_HOST));
    for (int y = 0; y < h; y++)
        memset(mk_image_row(&img, 0, y), fill, (size_t)w);
    ((uint8_t *)img.data)[0] = (uint8_t)cJSON_GetObjectItem(c, "first")->valueint;
    ((uint8_t *)mk_image_row(&img, 0, h - 1))[w - 1] = (uint8_t)cJSON_GetObjectItem(c, "last")->valueint;
    memset(mk_image_row(&img, 0, h / 2), (fill + 60) % 256, (size_t)(w / 3));
    return img;
}

/* One channel of a lossless real image (BMP/PNG of the shared data), as the generator took it. */
mk_image_t tu_real_channel(const char *path, int channel)
{
    mk_image_t bgr = {0};
    TU_OK(mk_imageio_load(path, MK_FMT_BGR, &bgr));
    mk_image_t g = mk_image_desc(bgr.width, bgr.height, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(NULL, &g, MK_MEM_HOST));
    for (int y = 0; y < bgr.height; y++) {
        const uint8_t *s = mk_image_row(&bgr, 0, y);
        uint8_t *d = mk_image_row(&g, 0, y);
        for (int x = 0; x < bgr.width; x++)
            d[x] = s[3 * x + channel];
    }
    mk_image_free(NULL, &bgr);
    return g;
}


mk_ctx_t *tu_cpu;

int tu_setup_cpu(void **state)
{
    (void)state;
    return mk_ctx_create(MK_BACKEND_CPU, &tu_cpu);
}

int tu_teardown_cpu(void **state)
{
    (void)state;
    mk_ctx_destroy(tu_cpu);
    tu_cpu = NULL;
    return 0;
}

void tu_json_size(const cJSON *arr, int *w, int *h)
{
    assert_true(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 2);
    *w = cJSON_GetArrayItem(arr, 0)->valueint;
    *h = cJSON_GetArrayItem(arr, 1)->valueint;
}

int tu_cuda_main(const char *what, mk_ctx_t **cpu, mk_ctx_t **gpu)
{
    char why[256] = "";
    *gpu = tu_cuda_ctx(why, sizeof why);
    if (!*gpu) {
        printf("SKIP: %s need a GPU: %s\n", what, why);
        return TU_SKIP_CODE;
    }
    if (mk_ctx_create(MK_BACKEND_CPU, cpu))
        return 1;
    printf("CUDA device: %s\n", mk_ctx_device_name(*gpu));
    return 0;
}
