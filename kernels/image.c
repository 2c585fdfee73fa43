/* image: descriptors, validation, allocation and copies. */
#include "image.h"

#include "backend.h"
#include "errors.h"

#include <stdlib.h>
#include <string.h>

size_t mk_dtype_size(mk_dtype_t t)
{
    switch (t) {
    case MK_U8: return 1;
    case MK_U16: return 2;
    case MK_F32: return 4;
    }
    return 0;
}

const char *mk_dtype_name(mk_dtype_t t)
{
    switch (t) {
    case MK_U8: return "u8";
    case MK_U16: return "u16";
    case MK_F32: return "f32";
    }
    return "?";
}

const char *mk_format_name(mk_format_t f)
{
    switch (f) {
    case MK_FMT_GRAY: return "gray";
    case MK_FMT_RGB: return "rgb";
    case MK_FMT_BGR: return "bgr";
    case MK_FMT_YUYV: return "yuyv";
    case MK_FMT_PLANAR: return "planar";
    }
    return "?";
}

const char *mk_mem_name(mk_mem_t m)
{
    switch (m) {
    case MK_MEM_HOST: return "host";
    case MK_MEM_DEVICE: return "device";
    case MK_MEM_PINNED: return "pinned";
    }
    return "?";
}

static int format_channels(mk_format_t f)
{
    switch (f) {
    case MK_FMT_GRAY: return 1;
    case MK_FMT_RGB:
    case MK_FMT_BGR: return 3;
    case MK_FMT_YUYV: return 2;
    case MK_FMT_PLANAR: return 0;
    }
    return -1;
}

mk_image_t mk_image_desc(int width, int height, mk_format_t format, mk_dtype_t dtype)
{
    mk_image_t img = {0};
    img.width = width;
    img.height = height;
    img.channels = format_channels(format);
    img.dtype = dtype;
    img.format = format;
    return img;
}

mk_image_t mk_image_desc_planar(int width, int height, int channels, mk_dtype_t dtype)
{
    mk_image_t img = mk_image_desc(width, height, MK_FMT_PLANAR, dtype);
    img.channels = channels;
    return img;
}

size_t mk_image_row_bytes(const mk_image_t *img)
{
    size_t per_pixel = img->format == MK_FMT_PLANAR ? 1 : (size_t)img->channels;
    return (size_t)img->width * per_pixel * mk_dtype_size(img->dtype);
}

size_t mk_image_rows(const mk_image_t *img)
{
    return (size_t)img->height * (img->format == MK_FMT_PLANAR ? (size_t)img->channels : 1);
}

size_t mk_image_bytes(const mk_image_t *img)
{
    return img->pitch * mk_image_rows(img);
}

static int check_geometry(const mk_image_t *img, const char *what)
{
    if (img->width <= 0 || img->height <= 0 || img->width > MK_IMAGE_MAX_DIM || img->height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "%s: size %dx%d outside 1..%d", what, img->width, img->height,
                          MK_IMAGE_MAX_DIM);
    if ((unsigned)img->format > MK_FMT_PLANAR)
        return mk_err_set(MK_EINVAL, "%s: unknown pixel format %d", what, (int)img->format);
    if (mk_dtype_size(img->dtype) == 0)
        return mk_err_set(MK_EINVAL, "%s: unknown element type %d", what, (int)img->dtype);
    if (img->format == MK_FMT_PLANAR) {
        if (img->channels < 1 || img->channels > 64)
            return mk_err_set(MK_ERANGE, "%s: planar image with %d planes (1..64)", what, img->channels);
    } else if (img->channels != format_channels(img->format)) {
        return mk_err_set(MK_EINVAL, "%s: format %s has %d channels, descriptor says %d", what,
                          mk_format_name(img->format), format_channels(img->format), img->channels);
    }
    if (img->format == MK_FMT_YUYV) {
        if (img->dtype != MK_U8)
            return mk_err_set(MK_EINVAL, "%s: yuyv must be u8", what);
        if (img->width % 2)
            return mk_err_set(MK_EINVAL, "%s: yuyv width %d is odd", what, img->width);
    }
    if ((unsigned)img->mem > MK_MEM_PINNED)
        return mk_err_set(MK_EINVAL, "%s: unknown memory space %d", what, (int)img->mem);
    return 0;
}

int mk_image_check(const mk_image_t *img, const char *what)
{
    if (!img)
        return mk_err_set(MK_EINVAL, "%s: NULL image", what);
    int rc = check_geometry(img, what);
    if (rc)
        return rc;
    size_t row = mk_image_row_bytes(img);
    if (img->pitch < row)
        return mk_err_set(MK_EINVAL, "%s: pitch %zu is less than the %zu bytes of a row", what, img->pitch, row);
    if (img->pitch % mk_dtype_size(img->dtype))
        return mk_err_set(MK_EINVAL, "%s: pitch %zu is not a multiple of the %zu-byte element", what, img->pitch,
                          mk_dtype_size(img->dtype));
    if (!img->data)
        return mk_err_set(MK_EINVAL, "%s: no pixel data", what);
    if ((uintptr_t)img->data % mk_dtype_size(img->dtype))
        return mk_err_set(MK_EINVAL, "%s: data not aligned to its %s elements", what, mk_dtype_name(img->dtype));
    return 0;
}

int mk_image_overlap(const mk_image_t *a, const mk_image_t *b)
{
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    uintptr_t a1 = a0 + (mk_image_rows(a) - 1) * a->pitch + mk_image_row_bytes(a);
    uintptr_t b1 = b0 + (mk_image_rows(b) - 1) * b->pitch + mk_image_row_bytes(b);
    return a0 < b1 && b0 < a1;
}

int mk_image_alloc(mk_ctx_t *ctx, mk_image_t *img, mk_mem_t mem)
{
    if (!img)
        return mk_err_set(MK_EINVAL, "mk_image_alloc: NULL image");
    img->mem = mem;
    img->data = NULL;
    img->owned = 0;
    int rc = check_geometry(img, "mk_image_alloc");
    if (rc)
        return rc;
    size_t row = mk_image_row_bytes(img);
    if (img->pitch == 0) {
        size_t align = mem == MK_MEM_DEVICE ? 256 : 64;
        img->pitch = (row + align - 1) / align * align;
    } else if (img->pitch < row || img->pitch % mk_dtype_size(img->dtype)) {
        return mk_err_set(MK_EINVAL, "mk_image_alloc: pitch %zu invalid for rows of %zu bytes", img->pitch, row);
    }
    size_t bytes = mk_image_bytes(img);
    if (mem == MK_MEM_HOST || (mem == MK_MEM_PINNED && (!ctx || ctx->backend != MK_BACKEND_CUDA))) {
        img->data = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!img->data)
            return mk_err_set(MK_ENOMEM, "cannot allocate %zu bytes of host memory", bytes);
        img->mem = MK_MEM_HOST;
    } else {
        if (!ctx || ctx->backend != MK_BACKEND_CUDA)
            return mk_err_set(MK_EINVAL, "%s memory needs a CUDA context", mk_mem_name(mem));
#ifdef MK_HAVE_CUDA
        rc = mk_cuda_alloc(ctx, bytes, mem, &img->data);
        if (rc)
            return rc;
#else
        return mk_err_set(MK_ENODEV, "built without CUDA");
#endif
    }
    img->owned = 1;
    return 0;
}

void mk_image_free(mk_ctx_t *ctx, mk_image_t *img)
{
    if (!img)
        return;
    if (img->owned && img->data) {
        if (img->mem == MK_MEM_HOST) {
            free(img->data);
        } else {
#ifdef MK_HAVE_CUDA
            mk_cuda_free(ctx, img->data, img->mem);
#else
            (void)ctx;
#endif
        }
    }
    memset(img, 0, sizeof *img);
}

int mk_image_copy(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src)
{
    int rc;
    if ((rc = mk_image_check(src, "copy source")) || (rc = mk_image_check(dst, "copy destination")))
        return rc;
    if (src->width != dst->width || src->height != dst->height || src->channels != dst->channels ||
        src->dtype != dst->dtype || src->format != dst->format)
        return mk_err_set(MK_EINVAL, "copy: %dx%d %s %s to %dx%d %s %s", src->width, src->height,
                          mk_format_name(src->format), mk_dtype_name(src->dtype), dst->width, dst->height,
                          mk_format_name(dst->format), mk_dtype_name(dst->dtype));
    size_t row = mk_image_row_bytes(src), rows = mk_image_rows(src);
    if (src->mem == MK_MEM_DEVICE || dst->mem == MK_MEM_DEVICE) {
        if (!ctx || ctx->backend != MK_BACKEND_CUDA)
            return mk_err_set(MK_EINVAL, "copy of device memory needs a CUDA context");
#ifdef MK_HAVE_CUDA
        return mk_cuda_copy2d(ctx, dst->data, dst->pitch, src->data, src->pitch, row, rows);
#endif
    }
    for (size_t y = 0; y < rows; y++)
        memmove((char *)dst->data + y * dst->pitch, (const char *)src->data + y * src->pitch, row);
    return 0;
}

static int is_host(mk_mem_t m)
{
    return m == MK_MEM_HOST || m == MK_MEM_PINNED;
}

int mk_image_upload(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src)
{
    if (!ctx || !dst || !src)
        return mk_err_set(MK_EINVAL, "upload: NULL argument");
    if (!is_host(src->mem) || dst->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "upload goes from host memory to %s memory, not from %s to %s",
                          mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem), mk_mem_name(dst->mem));
    return mk_image_copy(ctx, dst, src);
}

int mk_image_download(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src)
{
    if (!ctx || !dst || !src)
        return mk_err_set(MK_EINVAL, "download: NULL argument");
    if (!is_host(dst->mem) || src->mem != mk_ctx_mem(ctx))
        return mk_err_set(MK_EINVAL, "download goes from %s memory to host memory, not from %s to %s",
                          mk_mem_name(mk_ctx_mem(ctx)), mk_mem_name(src->mem), mk_mem_name(dst->mem));
    return mk_image_copy(ctx, dst, src);
}

int mk_image_memset(mk_ctx_t *ctx, mk_image_t *img, int value)
{
    int rc = mk_image_check(img, "memset");
    if (rc)
        return rc;
    size_t row = mk_image_row_bytes(img), rows = mk_image_rows(img);
    if (img->mem == MK_MEM_DEVICE) {
        if (!ctx || ctx->backend != MK_BACKEND_CUDA)
            return mk_err_set(MK_EINVAL, "memset of device memory needs a CUDA context");
#ifdef MK_HAVE_CUDA
        return mk_cuda_memset2d(ctx, img->data, img->pitch, value, row, rows);
#endif
    }
    for (size_t y = 0; y < rows; y++)
        memset((char *)img->data + y * img->pitch, value, row);
    return 0;
}
