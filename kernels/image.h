/* image: the image/tensor descriptor shared by every op, with allocation and host<->device copies.
 *
 * An mk_image_t is a plain descriptor (like a matrix header): geometry, element type, pixel format, memory space
 * and a data pointer. It owns its data only when mk_image_alloc() filled it in (`owned`); mk_image_free() is then
 * the one way to release it and is safe on a zeroed or wrapped descriptor. Copies run on the context's stream:
 * host memory handed to mk_image_upload/download must stay valid until mk_ctx_sync(). */
#ifndef MK_IMAGE_H
#define MK_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_ctx mk_ctx_t;

typedef enum {
    MK_U8 = 0,
    MK_U16 = 1,
    MK_F32 = 2,
} mk_dtype_t;

typedef enum {
    MK_FMT_GRAY = 0,   /* 1 channel */
    MK_FMT_RGB = 1,    /* 3 channels interleaved R, G, B */
    MK_FMT_BGR = 2,    /* 3 channels interleaved B, G, R */
    MK_FMT_YUYV = 3,   /* packed 4:2:2 (Y0 U Y1 V per 2 pixels), u8 only, even width; 2 bytes per pixel */
    MK_FMT_PLANAR = 4, /* `channels` planes of `height` rows each: a CHW tensor (RGB order for colour) */
} mk_format_t;

typedef enum {
    MK_MEM_HOST = 0,   /* pageable host memory */
    MK_MEM_DEVICE = 1, /* CUDA device memory */
    MK_MEM_PINNED = 2, /* page-locked host memory (CUDA builds; plain host memory otherwise) */
} mk_mem_t;

/* Largest width or height accepted anywhere (a 16K frame). */
#define MK_IMAGE_MAX_DIM 16384

typedef struct {
    int width, height;
    int channels;       /* elements per pixel (YUYV: 2); for PLANAR the number of planes */
    size_t pitch;       /* bytes from one row to the next; planar: row y of plane p is at (p*height + y)*pitch */
    mk_dtype_t dtype;
    mk_format_t format;
    mk_mem_t mem;
    void *data;
    int owned;          /* 1 when mk_image_alloc allocated `data` */
} mk_image_t;

size_t mk_dtype_size(mk_dtype_t t);
const char *mk_dtype_name(mk_dtype_t t);
const char *mk_format_name(mk_format_t f);
const char *mk_mem_name(mk_mem_t m);

/* A descriptor without data: interleaved formats take their channel count from the format. pitch is 0 (chosen
 * by mk_image_alloc) until set. */
mk_image_t mk_image_desc(int width, int height, mk_format_t format, mk_dtype_t dtype);
mk_image_t mk_image_desc_planar(int width, int height, int channels, mk_dtype_t dtype);

/* Bytes of pixel data in one row (width * channels * element size). */
size_t mk_image_row_bytes(const mk_image_t *img);
/* Rows in the allocation (height, times channels for planar). */
size_t mk_image_rows(const mk_image_t *img);
/* pitch * rows. */
size_t mk_image_bytes(const mk_image_t *img);
/* Address of element row `y` (of plane `plane` for planar images; 0 otherwise). */
static inline void *mk_image_row(const mk_image_t *img, int plane, int y)
{
    return (char *)img->data + ((size_t)plane * (size_t)img->height + (size_t)y) * img->pitch;
}

/* Checks that a descriptor is consistent (sizes within 1..MK_IMAGE_MAX_DIM, channels match the format, pitch at
 * least the row bytes and a multiple of the element size, data non-NULL). `what` names it in the message. */
int mk_image_check(const mk_image_t *img, const char *what);

/* 1 when the byte ranges of two checked images' pixel rows (first row start to last row end) intersect. */
int mk_image_overlap(const mk_image_t *a, const mk_image_t *b);

/* Allocates img->data in `mem` (pitch 0 becomes the row bytes rounded up to 256 for device memory, 64 for host);
 * a CUDA space needs a CUDA context (host allocations accept ctx == NULL). */
int mk_image_alloc(mk_ctx_t *ctx, mk_image_t *img, mk_mem_t mem);
/* Releases an owned allocation and zeroes the descriptor; a no-op on NULL or unowned descriptors. */
void mk_image_free(mk_ctx_t *ctx, mk_image_t *img);

/* Copies pixels between two images of the same geometry, element type and format, in any memory spaces
 * (asynchronous on the context's stream when a device is involved). */
int mk_image_copy(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src);
/* mk_image_copy with the direction checked: host (or pinned) src -> the context's memory, and back. */
int mk_image_upload(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src);
int mk_image_download(mk_ctx_t *ctx, mk_image_t *dst, const mk_image_t *src);
/* Sets every byte of the rows' pixel data (not the pitch padding) to `value`. */
int mk_image_memset(mk_ctx_t *ctx, mk_image_t *img, int value);

#ifdef __cplusplus
}
#endif
#endif
