/* imageio: JPEG/PNG/BMP/PNM decoding and encoding to host u8 images, whole-file reads and atomic file writes. */
#include "imageio.h"

#include "errors.h"

#include <png.h>
#include <turbojpeg.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_READ_MAX ((size_t)1 << 30)
#define SAVE_JPEG_QUALITY 95

/* TurboJPEG takes buffer sizes as unsigned long. */
_Static_assert(sizeof(unsigned long) >= sizeof(size_t), "unsigned long narrower than size_t");

typedef unsigned char u8;

/* Byte offsets of R, G and B in a source pixel of n bytes (all 0 for gray); other bytes (alpha) are ignored. */
typedef struct {
    int n, r, g, b;
} layout_t;

static const layout_t L_GRAY = {1, 0, 0, 0};
static const layout_t L_GA = {2, 0, 0, 0};
static const layout_t L_RGB = {3, 0, 1, 2};
static const layout_t L_BGR = {3, 2, 1, 0};
static const layout_t L_RGBA = {4, 0, 1, 2};
static const layout_t L_BGRA = {4, 2, 1, 0};

static const char *nm(const char *name)
{
    return name ? name : "(buffer)";
}

static int want_ok(mk_format_t f)
{
    return f == MK_FMT_GRAY || f == MK_FMT_RGB || f == MK_FMT_BGR;
}

static uint32_t le16(const u8 *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const u8 *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t be32(const u8 *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_le16(u8 *p, uint32_t v)
{
    p[0] = (u8)v;
    p[1] = (u8)(v >> 8);
}

static void put_le32(u8 *p, uint32_t v)
{
    p[0] = (u8)v;
    p[1] = (u8)(v >> 8);
    p[2] = (u8)(v >> 16);
    p[3] = (u8)(v >> 24);
}

static u8 luma(unsigned r, unsigned g, unsigned b)
{
    return (u8)((299 * r + 587 * g + 114 * b + 500) / 1000);
}

/* Converts one row of `width` source pixels to `want` (GRAY, RGB or BGR). */
static void convert_row(const u8 *s, layout_t l, u8 *d, mk_format_t want, int width)
{
    int gray = l.r == l.g && l.g == l.b;
    for (int x = 0; x < width; x++, s += l.n) {
        u8 r = s[l.r], g = s[l.g], b = s[l.b];
        if (want == MK_FMT_GRAY) {
            *d++ = gray ? r : luma(r, g, b);
        } else if (want == MK_FMT_RGB) {
            d[0] = r, d[1] = g, d[2] = b;
            d += 3;
        } else {
            d[0] = b, d[1] = g, d[2] = r;
            d += 3;
        }
    }
}

static int check_dims(const char *name, const char *what, long long w, long long h)
{
    if (w < 1 || h < 1 || w > MK_IMAGE_MAX_DIM || h > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "%s: %s image size %lldx%lld outside 1..%d", name, what, w, h,
                          MK_IMAGE_MAX_DIM);
    return 0;
}

/* Allocates the output image; on failure *out is zeroed. */
static int new_image(mk_image_t *out, int w, int h, mk_format_t want, const char *name)
{
    *out = mk_image_desc(w, h, want, MK_U8);
    int rc = mk_image_alloc(NULL, out, MK_MEM_HOST);
    if (rc) {
        memset(out, 0, sizeof *out);
        return mk_err_wrap(rc, "%s", name);
    }
    return 0;
}

/* ---- JPEG ------------------------------------------------------------------------------------------------ */

static int decode_jpeg(const u8 *data, size_t len, mk_format_t want, mk_image_t *out, const char *name)
{
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return mk_err_set(MK_ENOMEM, "%s: cannot create a JPEG decoder: %s", name, tjGetErrorStr2(NULL));
    int rc = 0, w = 0, h = 0, subsamp = 0, cs = 0;
    if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &cs) != 0) {
        rc = mk_err_set(MK_EFORMAT, "%s: bad JPEG header: %s", name, tjGetErrorStr2(tj));
        goto done;
    }
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        rc = mk_err_set(MK_EUNSUPPORTED, "%s: CMYK/YCCK JPEG is not supported", name);
        goto done;
    }
    if ((rc = check_dims(name, "JPEG", w, h)) || (rc = new_image(out, w, h, want, name)))
        goto done;
    int pf = want == MK_FMT_GRAY ? TJPF_GRAY : want == MK_FMT_RGB ? TJPF_RGB : TJPF_BGR;
    /* Default flags: accurate integer DCT and fancy upsampling. A warning (truncated or corrupt entropy data)
     * is an error; LIMITSCANS rejects progressive files with absurd scan counts (a CPU-exhaustion attack). */
    if (tjDecompress2(tj, data, (unsigned long)len, out->data, w, (int)out->pitch, h, pf,
                      TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0) {
        rc = mk_err_set(MK_EFORMAT, "%s: corrupt or truncated JPEG: %s", name, tjGetErrorStr2(tj));
        mk_image_free(NULL, out);
    }
done:
    tjDestroy(tj);
    return rc;
}

static int encode_jpeg(const mk_image_t *img, int quality, void **data, size_t *len)
{
    if (quality < 1 || quality > 100)
        return mk_err_set(MK_ERANGE, "JPEG quality %d outside 1..100", quality);
    if (img->pitch > INT_MAX)
        return mk_err_set(MK_ERANGE, "JPEG encode: pitch %zu too large", img->pitch);
    int gray = img->format == MK_FMT_GRAY;
    int subsamp = gray ? TJSAMP_GRAY : TJSAMP_420;
    int pf = gray ? TJPF_GRAY : img->format == MK_FMT_RGB ? TJPF_RGB : TJPF_BGR;
    unsigned long cap = tjBufSize(img->width, img->height, subsamp);
    if (cap == (unsigned long)-1)
        return mk_err_set(MK_ERANGE, "JPEG encode: %dx%d too large: %s", img->width, img->height,
                          tjGetErrorStr2(NULL));
    /* A malloc'd buffer of the worst-case size with NOREALLOC: the result is ours to free() and realloc(). */
    u8 *buf = malloc(cap);
    if (!buf)
        return mk_err_set(MK_ENOMEM, "JPEG encode: cannot allocate %lu bytes", cap);
    tjhandle tj = tjInitCompress();
    if (!tj) {
        free(buf);
        return mk_err_set(MK_ENOMEM, "cannot create a JPEG encoder: %s", tjGetErrorStr2(NULL));
    }
    unsigned long size = cap;
    if (tjCompress2(tj, (const u8 *)img->data, img->width, (int)img->pitch, img->height, pf, &buf, &size, subsamp,
                    quality, TJFLAG_NOREALLOC) != 0) {
        int rc = mk_err_set(MK_EIO, "JPEG encode failed: %s", tjGetErrorStr2(tj));
        tjDestroy(tj);
        free(buf);
        return rc;
    }
    tjDestroy(tj);
    u8 *shrunk = realloc(buf, size ? size : 1);
    *data = shrunk ? shrunk : buf;
    *len = size;
    return 0;
}

/* ---- PNG ------------------------------------------------------------------------------------------------- */

/* Walks the chunk list up to IEND so that a truncated file is always an error, whatever libpng reads. */
static int png_chunks_ok(const u8 *d, size_t len, const char *name)
{
    size_t off = 8;
    for (;;) {
        if (len - off < 12)
            return mk_err_set(MK_EFORMAT, "%s: truncated PNG: %zu bytes left at offset %zu and no IEND chunk", name,
                              len - off, off);
        uint32_t n = be32(d + off);
        char type[5];
        for (int i = 0; i < 4; i++) {
            u8 c = d[off + 4 + i];
            type[i] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? (char)c : '?';
        }
        type[4] = '\0';
        if (n > 0x7fffffffu)
            return mk_err_set(MK_EFORMAT, "%s: PNG chunk '%s' at offset %zu has bad length %u", name, type, off, n);
        if (len - off - 12 < n)
            return mk_err_set(MK_EFORMAT, "%s: truncated PNG: chunk '%s' at offset %zu needs %zu bytes, %zu left",
                              name, type, off, (size_t)n + 12, len - off);
        if (memcmp(type, "IEND", 4) == 0)
            return 0;
        off += 12 + (size_t)n;
    }
}

static int decode_png(const u8 *data, size_t len, mk_format_t want, mk_image_t *out, const char *name)
{
    int rc = png_chunks_ok(data, len, name);
    if (rc)
        return rc;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, data, len)) {
        rc = mk_err_set(MK_EFORMAT, "%s: bad PNG: %s", name, im.message);
        png_image_free(&im);
        return rc;
    }
    if ((rc = check_dims(name, "PNG", im.width, im.height))) {
        png_image_free(&im);
        return rc;
    }
    int w = (int)im.width, h = (int)im.height;
    int colour = (im.format & PNG_FORMAT_FLAG_COLOR) != 0, alpha = (im.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    /* Colour is never asked of libpng as gray (it converts through linear light); alpha is dropped, not
     * composited. 8-bit sRGB data read as 8-bit sRGB formats comes out unchanged, and so does 16-bit data without
     * gamma information, scaled (libpng would otherwise take it for linear light). */
    im.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    layout_t lay = colour ? (alpha ? L_RGBA : L_RGB) : (alpha ? L_GA : L_GRAY);
    im.format = colour ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB) : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
    int direct = !alpha && ((colour && want != MK_FMT_GRAY) || (!colour && want == MK_FMT_GRAY));
    if (direct && want == MK_FMT_BGR)
        im.format = PNG_FORMAT_BGR;
    if ((rc = new_image(out, w, h, want, name))) {
        png_image_free(&im);
        return rc;
    }
    if (direct) {
        if (!png_image_finish_read(&im, NULL, out->data, (png_int_32)out->pitch, NULL)) {
            rc = mk_err_set(MK_EFORMAT, "%s: corrupt PNG: %s", name, im.message);
            goto fail;
        }
        return 0;
    }
    size_t stride = (size_t)w * (size_t)lay.n;
    u8 *tmp = malloc(stride * (size_t)h);
    if (!tmp) {
        rc = mk_err_set(MK_ENOMEM, "%s: cannot allocate %zu bytes to decode a PNG", name, stride * (size_t)h);
        goto fail;
    }
    if (!png_image_finish_read(&im, NULL, tmp, (png_int_32)stride, NULL)) {
        rc = mk_err_set(MK_EFORMAT, "%s: corrupt PNG: %s", name, im.message);
        free(tmp);
        goto fail;
    }
    for (int y = 0; y < h; y++)
        convert_row(tmp + (size_t)y * stride, lay, mk_image_row(out, 0, y), want, w);
    free(tmp);
    return 0;
fail:
    png_image_free(&im);
    mk_image_free(NULL, out);
    return rc;
}

static void png_desc(png_image *im, int width, int height, png_uint_32 format)
{
    memset(im, 0, sizeof *im);
    im->version = PNG_IMAGE_VERSION;
    im->width = (png_uint_32)width;
    im->height = (png_uint_32)height;
    im->format = format;
}

/* Encodes width x height pixels of libpng's `format` at `pixels` (rows `pitch` bytes apart). */
static int encode_png_pixels(const void *pixels, size_t pitch, int width, int height, png_uint_32 format,
                             void **data, size_t *len)
{
    if (pitch > INT32_MAX)
        return mk_err_set(MK_ERANGE, "PNG encode: pitch %zu too large", pitch);
    png_image im;
    png_alloc_size_t size = 0;
    png_desc(&im, width, height, format);
    if (!png_image_write_to_memory(&im, NULL, &size, 0, pixels, (png_int_32)pitch, NULL) || size == 0) {
        int rc = mk_err_set(MK_EIO, "PNG encode failed: %s", im.message);
        png_image_free(&im);
        return rc;
    }
    u8 *buf = malloc(size);
    if (!buf)
        return mk_err_set(MK_ENOMEM, "PNG encode: cannot allocate %zu bytes", (size_t)size);
    png_desc(&im, width, height, format);
    if (!png_image_write_to_memory(&im, buf, &size, 0, pixels, (png_int_32)pitch, NULL)) {
        int rc = mk_err_set(MK_EIO, "PNG encode failed: %s", im.message);
        png_image_free(&im);
        free(buf);
        return rc;
    }
    *data = buf;
    *len = size;
    return 0;
}

static int encode_png(const mk_image_t *img, void **data, size_t *len)
{
    png_uint_32 format = img->format == MK_FMT_GRAY ? PNG_FORMAT_GRAY
                       : img->format == MK_FMT_RGB  ? PNG_FORMAT_RGB
                                                    : PNG_FORMAT_BGR;
    return encode_png_pixels(img->data, img->pitch, img->width, img->height, format, data, len);
}

/* ---- BMP ------------------------------------------------------------------------------------------------- */

enum { BMP_FILE_HDR = 14, BMP_INFO_HDR = 40 };

static int decode_bmp(const u8 *d, size_t len, mk_format_t want, mk_image_t *out, const char *name)
{
    if (len < BMP_FILE_HDR + 4)
        return mk_err_set(MK_EFORMAT, "%s: truncated BMP: %zu bytes, less than its headers", name, len);
    uint32_t off_bits = le32(d + 10), hsize = le32(d + 14);
    if (hsize == 12 || hsize == 16 || hsize == 64)
        return mk_err_set(MK_EUNSUPPORTED, "%s: OS/2 BMP (%u-byte header) is not supported", name, hsize);
    if (hsize != 40 && hsize != 52 && hsize != 56 && hsize != 108 && hsize != 124)
        return mk_err_set(MK_EFORMAT, "%s: bad BMP info header size %u", name, hsize);
    if (len < BMP_FILE_HDR + (size_t)hsize)
        return mk_err_set(MK_EFORMAT, "%s: truncated BMP: %zu bytes, its headers need %u", name, len,
                          BMP_FILE_HDR + hsize);
    long long w = (int32_t)le32(d + 18), h = (int32_t)le32(d + 22);
    uint32_t planes = le16(d + 26), bpp = le16(d + 28), comp = le32(d + 30), clr_used = le32(d + 46);
    if (planes != 1)
        return mk_err_set(MK_EFORMAT, "%s: BMP has %u planes (must be 1)", name, planes);
    if (comp == 1 || comp == 2)
        return mk_err_set(MK_EUNSUPPORTED, "%s: RLE-compressed BMP (RLE%d) is not supported", name,
                          comp == 1 ? 8 : 4);
    if (comp == 4 || comp == 5)
        return mk_err_set(MK_EUNSUPPORTED, "%s: BMP with embedded %s data is not supported", name,
                          comp == 4 ? "JPEG" : "PNG");
    int bitfields = comp == 3 || comp == 6;
    if (comp != 0 && !bitfields)
        return mk_err_set(MK_EFORMAT, "%s: unknown BMP compression %u", name, comp);
    if (bpp == 16)
        return mk_err_set(MK_EUNSUPPORTED, "%s: 16-bit BMP is not supported", name);
    if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32)
        return mk_err_set(MK_EFORMAT, "%s: bad BMP bit depth %u", name, bpp);
    size_t hdr_end = BMP_FILE_HDR + (size_t)hsize;
    if (bitfields) {
        if (bpp != 32)
            return mk_err_set(MK_EUNSUPPORTED, "%s: %u-bit BMP with bit fields is not supported", name, bpp);
        /* The masks follow a 40-byte header, or are its first fields beyond 40 bytes. */
        if (hsize == BMP_INFO_HDR)
            hdr_end += comp == 6 ? 16 : 12;
        if (len < BMP_FILE_HDR + BMP_INFO_HDR + 12)
            return mk_err_set(MK_EFORMAT, "%s: truncated BMP: no bit field masks", name);
        const u8 *m = d + BMP_FILE_HDR + BMP_INFO_HDR;
        if (le32(m) != 0x00ff0000u || le32(m + 4) != 0x0000ff00u || le32(m + 8) != 0x000000ffu)
            return mk_err_set(MK_EUNSUPPORTED, "%s: BMP bit field masks %08x/%08x/%08x are not supported", name,
                              le32(m), le32(m + 4), le32(m + 8));
    }
    int topdown = h < 0;
    if (topdown)
        h = -h;
    int rc = check_dims(name, "BMP", w, h);
    if (rc)
        return rc;

    uint32_t ncolours = 0;
    const u8 *pal = NULL;
    if (bpp <= 8) {
        uint32_t max = 1u << bpp;
        ncolours = clr_used ? clr_used : max;
        if (ncolours > max)
            return mk_err_set(MK_EFORMAT, "%s: BMP palette of %u colours for %u-bit pixels", name, ncolours, bpp);
        pal = d + hdr_end;
        hdr_end += 4 * (size_t)ncolours;
    }
    if (hdr_end > len)
        return mk_err_set(MK_EFORMAT, "%s: truncated BMP: headers and palette need %zu bytes, file has %zu", name,
                          hdr_end, len);
    if (off_bits < hdr_end)
        return mk_err_set(MK_EFORMAT, "%s: BMP pixel data offset %u inside the headers and palette (%zu bytes)",
                          name, off_bits, hdr_end);
    size_t stride = ((size_t)w * bpp + 31) / 32 * 4;
    if (off_bits > len || (len - off_bits) / stride < (size_t)h)
        return mk_err_set(MK_EFORMAT, "%s: truncated BMP: %lldx%lld %u-bit pixels need %zu bytes at offset %u, file "
                          "has %zu", name, w, h, bpp, stride * (size_t)h, off_bits, len);

    /* Palette entries (B, G, R, reserved) converted to the output format; gray palettes stay exact. */
    u8 lut[256][3];
    int nc = want == MK_FMT_GRAY ? 1 : 3;
    for (uint32_t i = 0; i < ncolours; i++)
        convert_row(pal + 4 * i, L_BGRA, lut[i], want, 1);

    if ((rc = new_image(out, (int)w, (int)h, want, name)))
        return rc;
    for (int y = 0; y < (int)h; y++) {
        const u8 *s = d + off_bits + (size_t)(topdown ? y : (int)h - 1 - y) * stride;
        u8 *o = mk_image_row(out, 0, y);
        if (bpp == 24 || bpp == 32) {
            convert_row(s, bpp == 24 ? L_BGR : L_BGRA, o, want, (int)w);
            continue;
        }
        unsigned mask = (1u << bpp) - 1;
        for (int x = 0; x < (int)w; x++) {
            size_t bit = (size_t)x * bpp;
            unsigned idx = (s[bit / 8] >> (8 - bpp - bit % 8)) & mask;
            if (idx >= ncolours) {
                mk_image_free(NULL, out);
                return mk_err_set(MK_EFORMAT, "%s: BMP pixel (%d, %d) has palette index %u, the palette has %u "
                                  "colours", name, x, y, idx, ncolours);
            }
            memcpy(o + (size_t)x * nc, lut[idx], (size_t)nc);
        }
    }
    return 0;
}

static int encode_bmp(const mk_image_t *img, void **data, size_t *len)
{
    int gray = img->format == MK_FMT_GRAY;
    uint32_t bpp = gray ? 8 : 24;
    size_t palette = gray ? 256 * 4 : 0;
    size_t off = BMP_FILE_HDR + BMP_INFO_HDR + palette;
    size_t stride = ((size_t)img->width * bpp + 31) / 32 * 4;
    size_t pixels = stride * (size_t)img->height;
    size_t total = off + pixels;
    if (pixels / stride != (size_t)img->height || total > UINT32_MAX)
        return mk_err_set(MK_ERANGE, "BMP encode: %dx%d is too large for a BMP file", img->width, img->height);
    u8 *b = calloc(1, total);
    if (!b)
        return mk_err_set(MK_ENOMEM, "BMP encode: cannot allocate %zu bytes", total);
    b[0] = 'B', b[1] = 'M';
    put_le32(b + 2, (uint32_t)total);
    put_le32(b + 10, (uint32_t)off);
    u8 *ih = b + BMP_FILE_HDR;
    put_le32(ih, BMP_INFO_HDR);
    put_le32(ih + 4, (uint32_t)img->width);
    put_le32(ih + 8, (uint32_t)img->height); /* positive: bottom-up */
    put_le16(ih + 12, 1);
    put_le16(ih + 14, bpp);
    put_le32(ih + 20, (uint32_t)pixels);
    put_le32(ih + 24, 2835); /* 72 dpi */
    put_le32(ih + 28, 2835);
    if (gray) {
        put_le32(ih + 32, 256);
        for (int i = 0; i < 256; i++) {
            u8 *p = b + BMP_FILE_HDR + BMP_INFO_HDR + 4 * i;
            p[0] = p[1] = p[2] = (u8)i;
        }
    }
    for (int y = 0; y < img->height; y++) {
        const u8 *s = mk_image_row(img, 0, y);
        u8 *o = b + off + (size_t)(img->height - 1 - y) * stride;
        if (gray)
            memcpy(o, s, (size_t)img->width);
        else
            convert_row(s, img->format == MK_FMT_RGB ? L_RGB : L_BGR, o, MK_FMT_BGR, img->width);
    }
    *data = b;
    *len = total;
    return 0;
}

/* ---- PNM ------------------------------------------------------------------------------------------------- */

static int pnm_space(u8 c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Reads the decimal header field `what` at *pos (skipping whitespace and comments); values above 10^8 are
 * capped (they are out of every range checked later). */
static int pnm_field(const u8 *d, size_t len, size_t *pos, unsigned long *v, const char *what, const char *name)
{
    size_t p = *pos;
    for (;;) {
        if (p >= len)
            return mk_err_set(MK_EFORMAT, "%s: truncated PNM header (no %s)", name, what);
        if (d[p] == '#') {
            while (p < len && d[p] != '\n' && d[p] != '\r')
                p++;
        } else if (pnm_space(d[p])) {
            p++;
        } else {
            break;
        }
    }
    if (d[p] < '0' || d[p] > '9')
        return mk_err_set(MK_EFORMAT, "%s: bad PNM header: %s is not a number (offset %zu)", name, what, p);
    unsigned long x = 0;
    for (; p < len && d[p] >= '0' && d[p] <= '9'; p++)
        x = x > 100000000ul ? x : x * 10 + (unsigned long)(d[p] - '0');
    if (p >= len)
        return mk_err_set(MK_EFORMAT, "%s: truncated PNM header (after %s)", name, what);
    if (!pnm_space(d[p]) && d[p] != '#')
        return mk_err_set(MK_EFORMAT, "%s: bad PNM header: junk after %s (offset %zu)", name, what, p);
    *v = x;
    *pos = p;
    return 0;
}

static int decode_pnm(const u8 *d, size_t len, mk_format_t want, mk_image_t *out, const char *name)
{
    if (len < 3 || d[0] != 'P' || d[1] < '1' || d[1] > '7')
        return mk_err_set(MK_EFORMAT, "%s: not a PNM file", name);
    if (d[1] != '5' && d[1] != '6')
        return mk_err_set(MK_EUNSUPPORTED, "%s: PNM type P%c is not supported (only binary P5 and P6)", name, d[1]);
    if (!pnm_space(d[2]) && d[2] != '#')
        return mk_err_set(MK_EFORMAT, "%s: bad PNM header: junk after P%c", name, d[1]);
    size_t pos = 2;
    unsigned long w, h, maxval;
    int rc;
    if ((rc = pnm_field(d, len, &pos, &w, "width", name)) || (rc = pnm_field(d, len, &pos, &h, "height", name)) ||
        (rc = pnm_field(d, len, &pos, &maxval, "maxval", name)))
        return rc;
    if (d[pos] == '#')
        return mk_err_set(MK_EFORMAT, "%s: bad PNM header: comment instead of whitespace after maxval", name);
    pos++; /* exactly one whitespace byte ends the header */
    if ((rc = check_dims(name, "PNM", (long long)w, (long long)h)))
        return rc;
    if (maxval == 0 || maxval > 65535)
        return mk_err_set(MK_EFORMAT, "%s: bad PNM maxval %lu", name, maxval);
    if (maxval > 255)
        return mk_err_set(MK_EUNSUPPORTED, "%s: 16-bit PNM (maxval %lu) is not supported", name, maxval);
    layout_t lay = d[1] == '5' ? L_GRAY : L_RGB;
    size_t row = (size_t)w * (size_t)lay.n;
    if ((len - pos) / row < h)
        return mk_err_set(MK_EFORMAT, "%s: truncated PNM: %lux%lu pixels need %zu bytes, %zu present", name, w, h,
                          row * h, len - pos);
    u8 *scaled = NULL;
    u8 lut[256];
    if (maxval < 255) {
        if (!(scaled = malloc(row)))
            return mk_err_set(MK_ENOMEM, "%s: cannot allocate %zu bytes", name, row);
        for (unsigned v = 0; v <= maxval; v++)
            lut[v] = (u8)((v * 255 + maxval / 2) / maxval);
    }
    if ((rc = new_image(out, (int)w, (int)h, want, name))) {
        free(scaled);
        return rc;
    }
    for (size_t y = 0; y < h; y++) {
        const u8 *s = d + pos + y * row;
        if (scaled) {
            for (size_t i = 0; i < row; i++) {
                if (s[i] > maxval) {
                    rc = mk_err_set(MK_EFORMAT, "%s: PNM sample %u at pixel (%zu, %zu) exceeds maxval %lu", name,
                                    s[i], i / (size_t)lay.n, y, maxval);
                    free(scaled);
                    mk_image_free(NULL, out);
                    return rc;
                }
                scaled[i] = lut[s[i]];
            }
            s = scaled;
        }
        convert_row(s, lay, mk_image_row(out, 0, (int)y), want, (int)w);
    }
    free(scaled);
    return 0;
}

static int encode_pnm(const mk_image_t *img, void **data, size_t *len)
{
    int gray = img->format == MK_FMT_GRAY;
    char hdr[64];
    int n = snprintf(hdr, sizeof hdr, "P%c\n%d %d\n255\n", gray ? '5' : '6', img->width, img->height);
    size_t row = mk_image_row_bytes(img);
    size_t total = (size_t)n + row * (size_t)img->height;
    u8 *b = malloc(total);
    if (!b)
        return mk_err_set(MK_ENOMEM, "PNM encode: cannot allocate %zu bytes", total);
    memcpy(b, hdr, (size_t)n);
    for (int y = 0; y < img->height; y++) {
        const u8 *s = mk_image_row(img, 0, y);
        u8 *o = b + n + (size_t)y * row;
        if (img->format == MK_FMT_BGR)
            convert_row(s, L_BGR, o, MK_FMT_RGB, img->width);
        else
            memcpy(o, s, row);
    }
    *data = b;
    *len = total;
    return 0;
}

/* ---- public ---------------------------------------------------------------------------------------------- */

mk_file_format_t mk_imageio_sniff(const void *data, size_t len)
{
    const u8 *d = data;
    static const u8 png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (!d)
        return MK_FILE_UNKNOWN;
    if (len >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
        return MK_FILE_JPEG;
    if (len >= 8 && memcmp(d, png_sig, 8) == 0)
        return MK_FILE_PNG;
    if (len >= 2 && d[0] == 'B' && d[1] == 'M')
        return MK_FILE_BMP;
    if (len >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7')
        return MK_FILE_PNM;
    return MK_FILE_UNKNOWN;
}

mk_file_format_t mk_imageio_format_from_path(const char *path)
{
    if (!path)
        return MK_FILE_UNKNOWN;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base)
        return MK_FILE_UNKNOWN;
    static const struct {
        const char *ext;
        mk_file_format_t fmt;
    } exts[] = {
        {"jpg", MK_FILE_JPEG}, {"jpeg", MK_FILE_JPEG}, {"png", MK_FILE_PNG}, {"bmp", MK_FILE_BMP},
        {"pgm", MK_FILE_PNM},  {"ppm", MK_FILE_PNM},   {"pnm", MK_FILE_PNM},
    };
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot + 1, exts[i].ext) == 0)
            return exts[i].fmt;
    return MK_FILE_UNKNOWN;
}

int mk_imageio_decode(const void *data, size_t len, mk_format_t want, mk_image_t *out, const char *name)
{
    name = nm(name);
    if (!out)
        return mk_err_set(MK_EINVAL, "%s: decode: NULL output image", name);
    memset(out, 0, sizeof *out);
    if (!data)
        return mk_err_set(MK_EINVAL, "%s: decode: NULL data", name);
    if (!want_ok(want))
        return mk_err_set(MK_EINVAL, "%s: decode: cannot decode to %s (only gray, rgb, bgr)", name,
                          mk_format_name(want));
    if (len == 0)
        return mk_err_set(MK_EFORMAT, "%s: empty file", name);
    const u8 *d = data;
    switch (mk_imageio_sniff(data, len)) {
    case MK_FILE_JPEG: return decode_jpeg(d, len, want, out, name);
    case MK_FILE_PNG: return decode_png(d, len, want, out, name);
    case MK_FILE_BMP: return decode_bmp(d, len, want, out, name);
    case MK_FILE_PNM: return decode_pnm(d, len, want, out, name);
    case MK_FILE_UNKNOWN: break;
    }
    u8 m[4] = {0};
    memcpy(m, d, len < 4 ? len : 4);
    return mk_err_set(MK_EFORMAT, "%s: unknown image format (first bytes %02x %02x %02x %02x; expected JPEG, PNG, "
                      "BMP or PNM)", name, m[0], m[1], m[2], m[3]);
}

int mk_imageio_load(const char *path, mk_format_t want, mk_image_t *out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "load: NULL output image");
    memset(out, 0, sizeof *out);
    if (!path)
        return mk_err_set(MK_EINVAL, "load: NULL path");
    if (!want_ok(want))
        return mk_err_set(MK_EINVAL, "%s: cannot decode to %s (only gray, rgb, bgr)", path, mk_format_name(want));
    void *data = NULL;
    size_t len = 0;
    int rc = mk_file_read(path, &data, &len);
    if (rc)
        return rc;
    rc = mk_imageio_decode(data, len, want, out, path);
    free(data);
    return rc;
}

int mk_imageio_encode(const mk_image_t *img, mk_file_format_t fmt, int quality, void **data, size_t *len)
{
    if (!data || !len)
        return mk_err_set(MK_EINVAL, "encode: NULL output buffer or length");
    *data = NULL;
    *len = 0;
    int rc = mk_image_check(img, "encode");
    if (rc)
        return rc;
    if (img->dtype != MK_U8 || !want_ok(img->format))
        return mk_err_set(MK_EINVAL, "encode: %s %s image (only u8 gray, rgb or bgr can be encoded)",
                          mk_dtype_name(img->dtype), mk_format_name(img->format));
    if (img->mem != MK_MEM_HOST && img->mem != MK_MEM_PINNED)
        return mk_err_set(MK_EINVAL, "encode: image in %s memory (host memory needed)", mk_mem_name(img->mem));
    switch (fmt) {
    case MK_FILE_JPEG: return encode_jpeg(img, quality, data, len);
    case MK_FILE_PNG: return encode_png(img, data, len);
    case MK_FILE_BMP: return encode_bmp(img, data, len);
    case MK_FILE_PNM: return encode_pnm(img, data, len);
    case MK_FILE_UNKNOWN: break;
    }
    return mk_err_set(MK_EINVAL, "encode: unknown file format %d", (int)fmt);
}

int mk_imageio_save(const char *path, const mk_image_t *img)
{
    if (!path)
        return mk_err_set(MK_EINVAL, "save: NULL path");
    mk_file_format_t fmt = mk_imageio_format_from_path(path);
    if (fmt == MK_FILE_UNKNOWN)
        return mk_err_set(MK_EINVAL, "%s: cannot tell the image format from the extension (.jpg, .jpeg, .png, "
                          ".bmp, .pgm, .ppm, .pnm)", path);
    void *data = NULL;
    size_t len = 0;
    int rc = mk_imageio_encode(img, fmt, SAVE_JPEG_QUALITY, &data, &len);
    if (rc)
        return mk_err_wrap(rc, "%s", path);
    rc = mk_file_write(path, data, len);
    free(data);
    return rc;
}

int mk_imageio_save_rgba(const char *path, const mk_image_t *rgb, const mk_image_t *alpha)
{
    int rc;
    if (!path)
        return mk_err_set(MK_EINVAL, "save: NULL path");
    if ((rc = mk_image_check(rgb, "RGBA colours")) || (rc = mk_image_check(alpha, "RGBA alpha")))
        return rc;
    if (rgb->dtype != MK_U8 || (rgb->format != MK_FMT_RGB && rgb->format != MK_FMT_BGR) || alpha->dtype != MK_U8 ||
        alpha->format != MK_FMT_GRAY)
        return mk_err_set(MK_EINVAL, "%s: RGBA needs u8 rgb or bgr colours and a u8 gray alpha (%s %s, %s %s)", path,
                          mk_dtype_name(rgb->dtype), mk_format_name(rgb->format), mk_dtype_name(alpha->dtype),
                          mk_format_name(alpha->format));
    if (rgb->width != alpha->width || rgb->height != alpha->height)
        return mk_err_set(MK_EINVAL, "%s: colours %dx%d and alpha %dx%d differ", path, rgb->width, rgb->height,
                          alpha->width, alpha->height);
    if (rgb->mem == MK_MEM_DEVICE || alpha->mem == MK_MEM_DEVICE)
        return mk_err_set(MK_EINVAL, "%s: RGBA images must be in host memory", path);
    if (mk_imageio_format_from_path(path) != MK_FILE_PNG)
        return mk_err_set(MK_EINVAL, "%s: an image with alpha is written as PNG only (.png)", path);
    size_t pitch = (size_t)rgb->width * 4;
    u8 *px = malloc(pitch * (size_t)rgb->height);
    if (!px)
        return mk_err_set(MK_ENOMEM, "%s: cannot allocate the RGBA image", path);
    int bgr = rgb->format == MK_FMT_BGR;
    for (int y = 0; y < rgb->height; y++) {
        const u8 *s = mk_image_row(rgb, 0, y), *a = mk_image_row(alpha, 0, y);
        u8 *d = px + (size_t)y * pitch;
        for (int x = 0; x < rgb->width; x++, s += 3, d += 4) {
            d[0] = s[bgr ? 2 : 0];
            d[1] = s[1];
            d[2] = s[bgr ? 0 : 2];
            d[3] = a[x];
        }
    }
    void *data = NULL;
    size_t len = 0;
    rc = encode_png_pixels(px, pitch, rgb->width, rgb->height, PNG_FORMAT_RGBA, &data, &len);
    free(px);
    if (rc)
        return mk_err_wrap(rc, "%s", path);
    rc = mk_file_write(path, data, len);
    free(data);
    return rc;
}

int mk_file_read(const char *path, void **data, size_t *len)
{
    if (!data || !len)
        return mk_err_set(MK_EINVAL, "%s: read: NULL output buffer or length", path ? path : "(null)");
    *data = NULL;
    *len = 0;
    if (!path)
        return mk_err_set(MK_EINVAL, "read: NULL path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mk_err_set(MK_EIO, "cannot open %s: %s", path, strerror(errno));
    int rc = 0;
    u8 *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = mk_err_set(MK_EIO, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = mk_err_set(MK_EIO, "cannot read %s: %s", path, strerror(EISDIR));
        goto fail;
    }
    size_t cap = 65536;
    if (S_ISREG(st.st_mode)) {
        if ((unsigned long long)st.st_size > FILE_READ_MAX) {
            rc = mk_err_set(MK_ERANGE, "%s: %lld bytes, more than the %zu-byte limit", path, (long long)st.st_size,
                            FILE_READ_MAX);
            goto fail;
        }
        cap = (size_t)st.st_size + 1; /* one spare byte sees EOF (or growth) without a reallocation */
    }
    if (!(buf = malloc(cap))) {
        rc = mk_err_set(MK_ENOMEM, "%s: cannot allocate %zu bytes", path, cap);
        goto fail;
    }
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            if (n > FILE_READ_MAX) {
                rc = mk_err_set(MK_ERANGE, "%s: more than the %zu-byte limit", path, FILE_READ_MAX);
                goto fail;
            }
            size_t ncap = cap > FILE_READ_MAX / 2 ? FILE_READ_MAX + 1 : cap * 2;
            u8 *nb = realloc(buf, ncap);
            if (!nb) {
                rc = mk_err_set(MK_ENOMEM, "%s: cannot allocate %zu bytes", path, ncap);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = mk_err_set(MK_EIO, "cannot read %s: %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    close(fd);
    return rc;
}

int mk_file_write(const char *path, const void *data, size_t len)
{
    if (!path || !*path)
        return mk_err_set(MK_EINVAL, "write: NULL or empty path");
    if (!data && len)
        return mk_err_set(MK_EINVAL, "%s: write: NULL data", path);
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return mk_err_set(MK_ENOMEM, "%s: cannot allocate a temporary name", path);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        rc = mk_err_set(MK_EIO, "cannot write %s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    const u8 *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = mk_err_set(MK_EIO, "cannot write %s: %s", tmp, strerror(errno));
            goto fail;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0) {
        rc = mk_err_set(MK_EIO, "cannot write %s: fsync: %s", tmp, strerror(errno));
        goto fail;
    }
    int c = close(fd);
    fd = -1;
    if (c != 0) {
        rc = mk_err_set(MK_EIO, "cannot write %s: close: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        rc = mk_err_set(MK_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto fail;
    }
    free(tmp);
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    return rc;
}
