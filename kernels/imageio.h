/* imageio: reading and writing image files for tools and tests — JPEG (TurboJPEG), PNG (libpng), BMP and PNM.
 *
 * Decoding takes the format from the data's magic bytes, never from the file name; encoding takes it from the
 * file name's extension. Malformed, truncated or unsupported data fails with MK_EFORMAT/MK_EUNSUPPORTED and a
 * message naming the file and the problem; nothing is ever read past the buffer. Images returned are host
 * (MK_MEM_HOST) u8 images owned by the caller (mk_image_free(NULL, img)). */
#ifndef MK_IMAGEIO_H
#define MK_IMAGEIO_H

#include "image.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_FILE_UNKNOWN = 0,
    MK_FILE_JPEG,
    MK_FILE_PNG,
    MK_FILE_BMP,
    MK_FILE_PNM, /* P5 (gray) and P6 (colour), maxval 1..255 */
} mk_file_format_t;

/* The format of encoded data from its first bytes (MK_FILE_UNKNOWN if none matches). */
mk_file_format_t mk_imageio_sniff(const void *data, size_t len);
/* The format an output path's extension asks for (.jpg/.jpeg, .png, .bmp, .pgm/.ppm/.pnm), or MK_FILE_UNKNOWN. */
mk_file_format_t mk_imageio_format_from_path(const char *path);

/* Decodes `data` into a new host image of format `want`: MK_FMT_GRAY, MK_FMT_RGB or MK_FMT_BGR (colour data
 * asked for as gray is converted with the BT.601 luma weights of each codec: TurboJPEG's own for JPEG; others
 * use (299 R + 587 G + 114 B + 500) / 1000; gray data asked for as colour is replicated). JPEG is decoded with
 * TurboJPEG's defaults (accurate integer DCT, fancy upsampling) and stops on warnings (a truncated JPEG is an
 * error). `name` is used in messages only (may be NULL). */
int mk_imageio_decode(const void *data, size_t len, mk_format_t want, mk_image_t *out, const char *name);
/* Reads a whole file and decodes it. */
int mk_imageio_load(const char *path, mk_format_t want, mk_image_t *out);

/* Encodes a host u8 image (GRAY, RGB or BGR; any pitch) to a new malloc'd buffer. quality is for JPEG (1..100). */
int mk_imageio_encode(const mk_image_t *img, mk_file_format_t fmt, int quality, void **data, size_t *len);
/* Encodes by the path's extension and writes the file atomically (temporary file + rename). */
int mk_imageio_save(const char *path, const mk_image_t *img);

/* Writes a PNG (the path must end in .png) with an alpha channel: the colours of `rgb` (u8 RGB or BGR) and the
 * u8 gray `alpha` of the same size, both in host memory; atomically, as mk_imageio_save. (Reading such a file
 * drops the alpha.) */
int mk_imageio_save_rgba(const char *path, const mk_image_t *rgb, const mk_image_t *alpha);

/* Reads a whole file into a new malloc'd buffer (limit: 1 GiB). */
int mk_file_read(const char *path, void **data, size_t *len);
/* Writes a buffer to a file atomically (path.tmp.PID then rename). */
int mk_file_write(const char *path, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
