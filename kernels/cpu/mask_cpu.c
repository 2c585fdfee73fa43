/* mask_cpu: the reference mask products, and the paste helpers the CPU guided filter writes through. */
#include "backend.h"
#include "mask_cpu.h"
#include "mask_px.h"

#include <string.h>

void mk_mask_put_cpu(mk_image_t *dst, const mk_mask_t *m, int x, int y, float q)
{
    if (m->mode == MK_MASK_SOFT)
        ((float *)mk_image_row(dst, 0, y + m->y))[x + m->x] = q;
    else
        ((uint8_t *)mk_image_row(dst, 0, y + m->y))[x + m->x] = mk_px_mask_u8(q, m->mode, m->thresh, m->feather);
}

void mk_mask_clear_outside_cpu(mk_image_t *dst, const mk_mask_t *m, int w, int h)
{
    size_t es = mk_dtype_size(dst->dtype);
    for (int y = 0; y < dst->height; y++) {
        char *row = mk_image_row(dst, 0, y);
        if (y < m->y || y >= m->y + h) {
            memset(row, 0, (size_t)dst->width * es);
            continue;
        }
        memset(row, 0, (size_t)m->x * es);
        memset(row + (size_t)(m->x + w) * es, 0, (size_t)(dst->width - m->x - w) * es);
    }
}

int mk_mask_compose_cpu(mk_ctx_t *ctx, const mk_image_t *soft, mk_image_t *dst, const mk_mask_t *m)
{
    (void)ctx;
    for (int y = 0; y < soft->height; y++) {
        const float *s = mk_image_row(soft, 0, y);
        for (int x = 0; x < soft->width; x++)
            mk_mask_put_cpu(dst, m, x, y, s[x]);
    }
    mk_mask_clear_outside_cpu(dst, m, soft->width, soft->height);
    return 0;
}
