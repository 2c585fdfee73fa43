/* source_testpattern: the test pattern as a source — frame N of the generator (testpattern.h) as frame N, RGB24,
 * rendered into one of `buffers` slots. */
#include "source_internal.h"

#include "errors.h"
#include "testpattern.h"

#include <stdlib.h>

typedef struct {
    mk_testpattern_t *tp;
    int nslots;
    mk_image_t slots[32];
} tp_source_t;

static int tp_next(mk_source_t *s, int timeout_ms, mk_frame_t *f)
{
    (void)timeout_ms;
    tp_source_t *t = s->impl;
    int slot = 0;
    while (slot < t->nslots && (s->held_mask >> slot & 1))
        slot++;
    if (slot == t->nslots)
        return mk_err_set(MK_ESTATE, "test pattern: every slot is held");
    int rc = mk_testpattern_frame(t->tp, s->seq, &t->slots[slot]);
    if (rc)
        return rc;
    f->kind = MK_FRAME_RAW;
    f->image = t->slots[slot];
    f->image.owned = 0;
    f->width = f->image.width;
    f->height = f->image.height;
    f->slot_ = slot;
    return MK_SOURCE_FRAME;
}

static int tp_release(mk_source_t *s, int slot)
{
    (void)s, (void)slot;
    return 0;
}

static int tp_reopen(mk_source_t *s)
{
    (void)s;
    return 0;
}

static void tp_close(mk_source_t *s)
{
    tp_source_t *t = s->impl;
    for (int i = 0; i < t->nslots; i++)
        mk_image_free(NULL, &t->slots[i]);
    mk_testpattern_destroy(t->tp);
    free(t);
    s->impl = NULL;
}

static const mk_source_ops_t tp_ops = {
    .next = tp_next,
    .release = tp_release,
    .reopen = tp_reopen,
    .close = tp_close,
};

int mk_source_testpattern_open(mk_source_t *s, int width, int height, double fps)
{
    tp_source_t *t = calloc(1, sizeof *t);
    if (!t)
        return mk_err_set(MK_ENOMEM, "test pattern: out of memory");
    s->ops = &tp_ops;
    s->impl = t;
    int rc = mk_testpattern_create(width, height, fps, &t->tp);
    t->nslots = s->cfg.buffers;
    for (int i = 0; !rc && i < t->nslots; i++) {
        t->slots[i] = mk_image_desc(width, height, MK_FMT_RGB, MK_U8);
        rc = mk_image_alloc(NULL, &t->slots[i], MK_MEM_HOST);
    }
    if (rc) {
        tp_close(s);
        return rc;
    }
    s->max_held = t->nslots;
    s->pace_fps = fps;
    s->info.kind = "testpattern";
    s->info.frame_kind = MK_FRAME_RAW;
    s->info.raw_format = MK_FMT_RGB;
    s->info.width = width;
    s->info.height = height;
    s->info.fps = fps;
    s->info.buffers = t->nslots;
    return 0;
}
