/* yolo_cfg: the [net] size and [yolo] sections of a Darknet cfg, and dumped [yolo] outputs. */
#include "yolo_cfg.h"

#include "errors.h"
#include "imageio.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One [yolo] section while it is read. */
typedef struct {
    int line;       /* of its header, for messages */
    int classes, num, nmask, nanchors, new_coords;
    int mask[MK_YOLO_MAX_ANCHORS];
    float anchors[2 * 64];
    float scale_x_y;
} yolo_sec_t;

/* Comma-separated numbers into out[0..max): their count, or -1 (bad number) / -2 (more than max). */
static int parse_list(const char *v, int as_int, void *out, int max)
{
    int n = 0;
    const char *s = v;
    for (;;) {
        char *end;
        errno = 0;
        if (as_int) {
            long x = strtol(s, &end, 10);
            if (end == s || errno || x < INT32_MIN || x > INT32_MAX)
                return -1;
            if (n >= max)
                return -2;
            ((int *)out)[n++] = (int)x;
        } else {
            float x = strtof(s, &end);
            if (end == s || errno || !isfinite(x))
                return -1;
            if (n >= max)
                return -2;
            ((float *)out)[n++] = x;
        }
        if (*end == '\0')
            return n;
        if (*end != ',' || end[1] == '\0')
            return -1;
        s = end + 1;
    }
}

static int parse_one(const char *v, int as_int, void *out)
{
    return parse_list(v, as_int, out, 1) == 1 ? 0 : -1;
}

static int finish_yolo(yolo_sec_t *y, const char *name, mt_yolo_cfg_t *cfg)
{
    if (cfg->nlayers >= MK_YOLO_MAX_LAYERS)
        return mk_err_set(MK_EFORMAT, "%s:%d: more than %d [yolo] sections", name, y->line, MK_YOLO_MAX_LAYERS);
    if (y->new_coords)
        return mk_err_set(MK_EUNSUPPORTED, "%s:%d: [yolo] new_coords=1 (scaled-YOLOv4 boxes) is not supported", name,
                          y->line);
    if (y->classes < 1 || y->num < 1)
        return mk_err_set(MK_EFORMAT, "%s:%d: [yolo] needs classes >= 1 and num >= 1 (classes=%d num=%d)", name,
                          y->line, y->classes, y->num);
    if (y->nanchors != 2 * y->num)
        return mk_err_set(MK_EFORMAT, "%s:%d: [yolo] num=%d needs %d anchor values, anchors= has %d", name, y->line,
                          y->num, 2 * y->num, y->nanchors);
    if (!y->nmask) {
        if (y->num > MK_YOLO_MAX_ANCHORS)
            return mk_err_set(MK_EFORMAT, "%s:%d: [yolo] without mask uses all %d anchors (at most %d)", name,
                              y->line, y->num, MK_YOLO_MAX_ANCHORS);
        for (int i = 0; i < y->num; i++)
            y->mask[i] = i;
        y->nmask = y->num;
    }
    mk_yolo_layer_t *l = &cfg->layers[cfg->nlayers++];
    memset(l, 0, sizeof *l);
    l->n = y->nmask;
    l->classes = y->classes;
    l->scale_x_y = y->scale_x_y;
    for (int i = 0; i < y->nmask; i++) {
        if (y->mask[i] < 0 || y->mask[i] >= y->num)
            return mk_err_set(MK_EFORMAT, "%s:%d: [yolo] mask entry %d is not an anchor (0..%d)", name, y->line,
                              y->mask[i], y->num - 1);
        l->anchors[2 * i] = y->anchors[2 * y->mask[i]];
        l->anchors[2 * i + 1] = y->anchors[2 * y->mask[i] + 1];
        if (!(l->anchors[2 * i] > 0 && l->anchors[2 * i + 1] > 0))
            return mk_err_set(MK_EFORMAT, "%s:%d: [yolo] anchor %d is not positive", name, y->line, y->mask[i]);
    }
    return 0;
}

static int yolo_key(yolo_sec_t *y, const char *key, const char *v)
{
    int n;
    if (!strcmp(key, "classes"))
        return parse_one(v, 1, &y->classes);
    if (!strcmp(key, "num"))
        return parse_one(v, 1, &y->num);
    if (!strcmp(key, "scale_x_y"))
        return parse_one(v, 0, &y->scale_x_y) || !(y->scale_x_y > 0) ? -1 : 0;
    if (!strcmp(key, "new_coords"))
        return parse_one(v, 1, &y->new_coords);
    if (!strcmp(key, "mask")) {
        n = parse_list(v, 1, y->mask, MK_YOLO_MAX_ANCHORS);
        y->nmask = n > 0 ? n : 0;
        return n > 0 ? 0 : n;
    }
    if (!strcmp(key, "anchors")) {
        n = parse_list(v, 0, y->anchors, (int)(sizeof y->anchors / sizeof y->anchors[0]));
        y->nanchors = n > 0 ? n : 0;
        return n > 0 ? 0 : n;
    }
    return 0; /* a training option */
}

int mt_yolo_cfg_parse(const char *text, const char *name, mt_yolo_cfg_t *out)
{
    enum { NONE, NET, YOLO, OTHER } sec = NONE;
    yolo_sec_t y;
    int rc = 0, lineno = 0;
    memset(out, 0, sizeof *out);
    memset(&y, 0, sizeof y);
    char *buf = malloc(strlen(text) + 1);
    if (!buf)
        return mk_err_set(MK_ENOMEM, "out of memory");
    const char *s = text;
    while (*s && !rc) {
        size_t len = strcspn(s, "\n"), k = 0;
        lineno++;
        for (size_t i = 0; i < len; i++) /* Darknet's strip(): every whitespace character goes */
            if (!isspace((unsigned char)s[i]))
                buf[k++] = s[i];
        buf[k] = '\0';
        s += len + (s[len] == '\n');
        if (!k || buf[0] == '#' || buf[0] == ';')
            continue;
        if (buf[0] == '[') {
            if (buf[k - 1] != ']') {
                rc = mk_err_set(MK_EFORMAT, "%s:%d: bad section header '%s'", name, lineno, buf);
                break;
            }
            if (sec == YOLO && (rc = finish_yolo(&y, name, out)))
                break;
            if (!strcmp(buf, "[net]") || !strcmp(buf, "[network]")) {
                sec = NET;
            } else if (!strcmp(buf, "[yolo]")) {
                sec = YOLO;
                memset(&y, 0, sizeof y);
                y.line = lineno;
                y.classes = 20;
                y.num = 1;
                y.scale_x_y = 1.0f;
            } else {
                sec = OTHER;
            }
            continue;
        }
        char *eq = strchr(buf, '=');
        if (!eq || eq == buf) {
            rc = mk_err_set(MK_EFORMAT, "%s:%d: expected key=value, got '%s'", name, lineno, buf);
            break;
        }
        *eq = '\0';
        const char *key = buf, *v = eq + 1;
        if (sec == NONE) {
            rc = mk_err_set(MK_EFORMAT, "%s:%d: '%s' before the first section", name, lineno, key);
        } else if (sec == NET && (!strcmp(key, "width") || !strcmp(key, "height"))) {
            int *dst = key[0] == 'w' ? &out->net_w : &out->net_h;
            if (parse_one(v, 1, dst) || *dst < 1 || *dst > MK_IMAGE_MAX_DIM)
                rc = mk_err_set(MK_EFORMAT, "%s:%d: %s=%s: expected 1..%d", name, lineno, key, v, MK_IMAGE_MAX_DIM);
        } else if (sec == YOLO) {
            int r = yolo_key(&y, key, v);
            if (r == -2)
                rc = mk_err_set(MK_EFORMAT, "%s:%d: %s= has too many values", name, lineno, key);
            else if (r)
                rc = mk_err_set(MK_EFORMAT, "%s:%d: %s=%s: bad number", name, lineno, key, v);
        }
    }
    if (!rc && sec == YOLO)
        rc = finish_yolo(&y, name, out);
    free(buf);
    if (rc)
        return rc;
    if (!out->net_w || !out->net_h)
        return mk_err_set(MK_EFORMAT, "%s: [net] has no width and height", name);
    if (!out->nlayers)
        return mk_err_set(MK_EFORMAT, "%s: no [yolo] section", name);
    for (int k = 0; k < out->nlayers; k++) {
        out->layers[k].net_w = out->net_w;
        out->layers[k].net_h = out->net_h;
    }
    return 0;
}

int mt_yolo_cfg_read(const char *path, mt_yolo_cfg_t *out)
{
    void *data = NULL;
    size_t len = 0;
    int rc = mk_file_read(path, &data, &len);
    if (rc)
        return rc;
    char *text = realloc(data, len + 1);
    if (!text) {
        free(data);
        return mk_err_set(MK_ENOMEM, "out of memory");
    }
    text[len] = '\0';
    if (strlen(text) != len)
        rc = mk_err_set(MK_EFORMAT, "%s: not a text file", path);
    else
        rc = mt_yolo_cfg_parse(text, path, out);
    free(text);
    return rc;
}

int mt_yolo_dump_load(const mt_yolo_cfg_t *cfg, const char *prefix, mk_yolo_layer_t *layers)
{
    char path[4096];
    int rc = 0, k;
    for (k = 0; k < cfg->nlayers && !rc; k++) {
        void *data = NULL;
        size_t len = 0;
        layers[k] = cfg->layers[k];
        snprintf(path, sizeof path, "%s.yolo%d.f32", prefix, k);
        if ((rc = mk_file_read(path, &data, &len)))
            break;
        layers[k].data = data;
        size_t per_cell = (size_t)layers[k].n * (size_t)(5 + layers[k].classes) * sizeof(float);
        size_t cells = len / per_cell;
        /* w / h = net_w / net_h: w = sqrt(cells * net_w / net_h), checked exactly. */
        long w = lround(sqrt((double)cells * cfg->net_w / cfg->net_h)), h = w > 0 ? (long)(cells / (size_t)w) : 0;
        if (len % per_cell || !cells || w < 1 || (size_t)(w * h) != cells || w * cfg->net_h != h * cfg->net_w ||
            w > MK_IMAGE_MAX_DIM || h > MK_IMAGE_MAX_DIM)
            rc = mk_err_set(MK_EFORMAT,
                            "%s: %zu bytes are not a grid of %d anchors x %d values per cell in the network's "
                            "aspect %dx%d",
                            path, len, layers[k].n, 5 + layers[k].classes, cfg->net_w, cfg->net_h);
        layers[k].w = (int)w;
        layers[k].h = (int)h;
    }
    if (rc)
        for (int i = 0; i < k; i++) {
            free((void *)layers[i].data);
            layers[i].data = NULL;
        }
    return rc;
}

int mt_yolo_layers_to_ctx(mk_ctx_t *ctx, const mk_yolo_layer_t *host, int nlayers, mk_image_t *imgs,
                          mk_yolo_layer_t *out)
{
    int rc = 0;
    for (int k = 0; k < nlayers; k++) {
        memset(&imgs[k], 0, sizeof imgs[k]);
        out[k] = host[k];
    }
    if (mk_ctx_mem(ctx) == MK_MEM_HOST)
        return 0;
    for (int k = 0; k < nlayers && !rc; k++) {
        /* One row per plane: Darknet's layout with a tight pitch. */
        mk_image_t h = mk_image_desc(host[k].w * host[k].h, host[k].n * (5 + host[k].classes), MK_FMT_GRAY, MK_F32);
        h.pitch = mk_image_row_bytes(&h);
        h.data = (void *)host[k].data;
        h.mem = MK_MEM_HOST;
        imgs[k] = h;
        imgs[k].data = NULL;
        if (!(rc = mk_image_alloc(ctx, &imgs[k], mk_ctx_mem(ctx))) && !(rc = mk_image_upload(ctx, &imgs[k], &h)))
            out[k].data = imgs[k].data;
    }
    if (rc)
        for (int k = 0; k < nlayers; k++)
            mk_image_free(ctx, &imgs[k]);
    return rc;
}
