/* cut: the cut interface and its shape methods (box, ellipse). */
#include "cut.h"

#include "errors.h"
#include "shape.h"

#include <stdlib.h>

/* The box cut's corner radii, as a fraction of the box's half sides. */
#define BOX_ROUND 0.4f

typedef struct {
    const char *name;
    int (*run)(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
               mk_image_t *lowres);
} cut_ops_t;

struct mk_cut {
    mk_ctx_t *ctx;
    int method;
    const cut_ops_t *ops;
};

/* The box in low-resolution pixels, as a rounded rectangle. */
static int shape_run(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
                     mk_image_t *lowres)
{
    (void)cfg;
    float sx = (float)lowres->width / (float)roi->width, sy = (float)lowres->height / (float)roi->height;
    float round = c->method == MK_CFG_CUT_ELLIPSE ? 1.0f : BOX_ROUND;
    mk_rbox_t b = mk_rbox_make(box->x * sx, box->y * sy, box->w * sx, box->h * sy, round, round);
    return mk_shape_fill(c->ctx, lowres, &b);
}

static const cut_ops_t methods[] = {
    [MK_CFG_CUT_BOX] = {"box", shape_run},
    [MK_CFG_CUT_ELLIPSE] = {"ellipse", shape_run},
};

int mk_cut_create(mk_ctx_t *ctx, int method, mk_cut_t **out)
{
    *out = NULL;
    if (method < 0 || method >= (int)(sizeof methods / sizeof methods[0]) || !methods[method].run)
        return mk_err_set(MK_EINVAL, "unknown cut method %d", method);
    mk_cut_t *c = calloc(1, sizeof *c);
    if (!c)
        return mk_err_set(MK_ENOMEM, "out of memory");
    c->ctx = ctx;
    c->method = method;
    c->ops = &methods[method];
    *out = c;
    return 0;
}

void mk_cut_destroy(mk_cut_t *c)
{
    free(c);
}

int mk_cut_method(const mk_cut_t *c)
{
    return c->method;
}

const char *mk_cut_name(const mk_cut_t *c)
{
    return c->ops->name;
}

int mk_cut_run(mk_cut_t *c, const mk_image_t *roi, const mk_box_t *box, const mk_config_t *cfg,
               mk_image_t *lowres)
{
    if (!c || !roi || !box || !cfg || !lowres)
        return mk_err_set(MK_EINVAL, "mk_cut_run: NULL argument");
    if (roi->width < 1 || roi->height < 1 || lowres->width < 1 || lowres->height < 1)
        return mk_err_set(MK_EINVAL, "cut: empty region (%dx%d) or mask (%dx%d)", roi->width, roi->height,
                          lowres->width, lowres->height);
    return c->ops->run(c, roi, box, cfg, lowres);
}
