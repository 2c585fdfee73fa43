/* composite_cpu: the reference blend (pixel by pixel) and blur (line by line: three box passes along the rows, then
 * three along the columns, through one temporary image). */
#include "backend.h"
#include "composite_px.h"
#include "errors.h"

int mk_composite_cpu(mk_ctx_t *ctx, const mk_image_t *frame, const mk_image_t *alpha, const mk_image_t *bg,
                     mk_image_t *out)
{
    (void)ctx;
    for (int y = 0; y < frame->height; y++) {
        const uint8_t *f = mk_image_row(frame, 0, y), *a = mk_image_row(alpha, 0, y), *b = mk_image_row(bg, 0, y);
        uint8_t *o = mk_image_row(out, 0, y);
        for (int x = 0; x < frame->width; x++)
            for (int c = 0; c < 3; c++)
                o[3 * x + c] = mk_px_blend(f[3 * x + c], b[3 * x + c], a[x]);
    }
    return 0;
}

/* One box pass along every row (each channel a line of `width` samples). */
static void rows_pass(const mk_image_t *src, mk_image_t *dst, int r)
{
    int C = src->channels;
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = mk_image_row(src, 0, y);
        uint8_t *d = mk_image_row(dst, 0, y);
        for (int c = 0; c < C; c++)
            mk_px_box_line(s + c, C, d + c, C, src->width, r);
    }
}

/* One box pass along every column (each byte of a row starts a line of `height` samples). */
static void columns_pass(const mk_image_t *src, mk_image_t *dst, int r)
{
    const uint8_t *s = src->data;
    uint8_t *d = dst->data;
    for (size_t x = 0; x < mk_image_row_bytes(src); x++)
        mk_px_box_line(s + x, (ptrdiff_t)src->pitch, d + x, (ptrdiff_t)dst->pitch, src->height, r);
}

int mk_blur_cpu(mk_ctx_t *ctx, const mk_image_t *src, mk_image_t *dst, int r)
{
    (void)ctx;
    mk_image_t tmp = mk_image_desc(src->width, src->height, src->format, MK_U8);
    int rc = mk_image_alloc(NULL, &tmp, MK_MEM_HOST);
    if (rc)
        return mk_err_wrap(rc, "blur");
    /* src -> tmp -> dst -> tmp along the rows, tmp -> dst -> tmp -> dst along the columns. */
    rows_pass(src, &tmp, r);
    rows_pass(&tmp, dst, r);
    rows_pass(dst, &tmp, r);
    columns_pass(&tmp, dst, r);
    columns_pass(dst, &tmp, r);
    columns_pass(&tmp, dst, r);
    mk_image_free(NULL, &tmp);
    return 0;
}
