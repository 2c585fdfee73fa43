/* mjpeg: marker walking for frame splitting, SOF size and the standard Huffman table insertion. */
#include "mjpeg.h"

#include "errors.h"

#include <stdlib.h>
#include <string.h>

#define NOT_FOUND ((size_t)-1)

/* The Huffman tables of JPEG Annex K.3 (ITU-T T.81, tables K.3 to K.6) as one DHT segment: for each table the
 * class/id byte, the 16 code counts per length and the symbol values. */
static const uint8_t std_dht[] = {
    0xFF, 0xC4, 0x01, 0xA2,
    /* DC luminance */
    0x00, 0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
    /* AC luminance */
    0x10, 0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d,
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
    /* DC chrominance */
    0x01, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
    /* AC chrominance */
    0x11, 0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77,
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
    0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
    0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
    0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
    0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
    0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
    0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
    0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
};
_Static_assert(sizeof std_dht == 420, "the standard DHT segment is 420 bytes");

const uint8_t *mk_mjpeg_std_dht(size_t *len)
{
    if (len)
        *len = sizeof std_dht;
    return std_dht;
}

static int standalone(uint8_t m)
{
    return (m >= 0xD0 && m <= 0xD7) || m == 0x01;
}

/* ---- header ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t sos;  /* offset of the FF of the first SOS marker */
    int has_dht;
    int have_sof, width, height;
} header_t;

/* Walks the marker segments from SOI to the first SOS. */
static int parse_header(const uint8_t *d, size_t len, header_t *h)
{
    memset(h, 0, sizeof *h);
    if (!d || len < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return mk_err_set(MK_EFORMAT, "not a JPEG (no SOI marker)");
    size_t p = 2;
    for (;;) {
        if (p >= len)
            return mk_err_set(MK_EFORMAT, "JPEG header ends at byte %zu without an SOS marker", len);
        if (d[p] != 0xFF)
            return mk_err_set(MK_EFORMAT, "JPEG header: byte %zu is 0x%02x, not a marker", p, d[p]);
        while (p < len && d[p] == 0xFF)
            p++;
        if (p >= len)
            return mk_err_set(MK_EFORMAT, "JPEG header ends in fill bytes");
        uint8_t m = d[p];
        size_t mpos = p - 1;
        p++;
        if (standalone(m))
            continue;
        if (m == 0xD8 || m == 0xD9 || m == 0x00)
            return mk_err_set(MK_EFORMAT, "JPEG header: unexpected marker 0x%02x at byte %zu", m, mpos);
        if (len - p < 2)
            return mk_err_set(MK_EFORMAT, "JPEG header: segment 0x%02x at byte %zu is truncated", m, mpos);
        size_t seg = (size_t)d[p] << 8 | d[p + 1];
        if (seg < 2 || seg > len - p)
            return mk_err_set(MK_EFORMAT, "JPEG header: segment 0x%02x at byte %zu has bad length %zu", m, mpos, seg);
        if (m == 0xDA) {
            h->sos = mpos;
            return 0;
        }
        if (m == 0xC4)
            h->has_dht = 1;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && seg >= 7 && !h->have_sof) {
            h->have_sof = 1;
            h->height = d[p + 3] << 8 | d[p + 4];
            h->width = d[p + 5] << 8 | d[p + 6];
        }
        p += seg;
    }
}

int mk_mjpeg_has_dht(const uint8_t *jpeg, size_t len)
{
    header_t h;
    int rc = parse_header(jpeg, len, &h);
    return rc ? rc : h.has_dht;
}

int mk_mjpeg_size(const uint8_t *jpeg, size_t len, int *width, int *height)
{
    header_t h;
    int rc = parse_header(jpeg, len, &h);
    if (rc)
        return rc;
    if (!h.have_sof)
        return mk_err_set(MK_EFORMAT, "JPEG without an SOF header");
    *width = h.width;
    *height = h.height;
    return 0;
}

int mk_mjpeg_add_dht(const uint8_t *jpeg, size_t len, uint8_t **out, size_t *cap, size_t *out_len)
{
    if (!out || !cap || !out_len)
        return mk_err_set(MK_EINVAL, "mk_mjpeg_add_dht: NULL output");
    header_t h;
    int rc = parse_header(jpeg, len, &h);
    if (rc)
        return rc;
    size_t need = len + sizeof std_dht;
    if (*cap < need || !*out) {
        uint8_t *n = realloc(*out, need);
        if (!n)
            return mk_err_set(MK_ENOMEM, "cannot grow a JPEG buffer to %zu bytes", need);
        *out = n;
        *cap = need;
    }
    memcpy(*out, jpeg, h.sos);
    memcpy(*out + h.sos, std_dht, sizeof std_dht);
    memcpy(*out + h.sos + sizeof std_dht, jpeg + h.sos, len - h.sos);
    *out_len = need;
    return 0;
}

/* ---- stream splitting ------------------------------------------------------------------------------------ */

/* The offset of the next SOI (FF D8 FF) at or after `from`, or NOT_FOUND. */
static size_t find_soi(const uint8_t *b, size_t len, size_t from)
{
    while (from + 3 <= len) {
        const uint8_t *q = memchr(b + from, 0xFF, len - from - 2);
        if (!q)
            return NOT_FOUND;
        size_t i = (size_t)(q - b);
        if (b[i + 1] == 0xD8 && b[i + 2] == 0xFF)
            return i;
        from = i + 1;
    }
    return NOT_FOUND;
}

int mk_mjpeg_split(const uint8_t *buf, size_t len, int at_eof, mk_mjpeg_span_t *span)
{
    memset(span, 0, sizeof *span);
    size_t s = find_soi(buf, len, 0);
    if (s == NOT_FOUND) {
        /* Keep the last two bytes: they may be the start of an SOI still to come. */
        span->start = at_eof ? len : len > 2 ? len - 2 : 0;
        span->end = span->start;
        return at_eof ? MK_MJPEG_NONE : MK_MJPEG_MORE;
    }
    span->start = s;
    size_t p = s + 2, last_marker = s;
    int in_scan = 0;
    for (;;) {
        if (in_scan) {
            /* Entropy-coded data: FF 00 is a stuffed byte, FF D0..D7 a restart, FF FF fill; anything else a marker. */
            const uint8_t *q = p < len ? memchr(buf + p, 0xFF, len - p) : NULL;
            if (!q)
                goto more;
            p = (size_t)(q - buf);
            if (p + 1 >= len)
                goto more;
            uint8_t b = buf[p + 1];
            if (b == 0x00 || (b >= 0xD0 && b <= 0xD7)) {
                p += 2;
                continue;
            }
            if (b == 0xFF) {
                p++;
                continue;
            }
            in_scan = 0;
        }
        if (p >= len)
            goto more;
        if (buf[p] != 0xFF)
            goto broken;
        while (p < len && buf[p] == 0xFF)
            p++;
        if (p >= len)
            goto more;
        uint8_t m = buf[p];
        size_t mpos = p - 1;
        p++;
        if (m == 0xD9) {
            span->end = p;
            span->complete = 1;
            return MK_MJPEG_FRAME;
        }
        if (m == 0xD8) { /* the next frame begins: this one was cut short */
            span->end = mpos;
            return MK_MJPEG_FRAME;
        }
        if (m == 0x00)
            goto broken;
        last_marker = mpos;
        if (standalone(m))
            continue;
        if (len - p < 2)
            goto more;
        size_t seg = (size_t)buf[p] << 8 | buf[p + 1];
        if (seg < 2)
            goto broken;
        if (len - p < seg)
            goto more;
        p += seg;
        if (m == 0xDA)
            in_scan = 1;
    }
more:
    if (!at_eof)
        return MK_MJPEG_MORE;
    span->end = len;
    return MK_MJPEG_FRAME;
broken: {
    /* The structure is lost: the frame ends where the next SOI after the last sound marker begins. */
    size_t n = find_soi(buf, len, last_marker + 2);
    if (n == NOT_FOUND) {
        if (!at_eof)
            return MK_MJPEG_MORE;
        n = len;
    }
    span->end = n;
    return MK_MJPEG_FRAME;
}
}
