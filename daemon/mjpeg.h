/* mjpeg: JPEG marker-level helpers for Motion-JPEG — finding frames in a raw stream of concatenated JPEGs, reading
 * the frame size, and inserting the standard Huffman tables into frames that omit them (webcams and AVI MJPEG
 * leave out DHT when the tables are the standard ones of JPEG Annex K.3).
 *
 * Nothing here decodes pixels or reads past the given buffer; malformed data is reported, never trusted. */
#ifndef MK_MJPEG_H
#define MK_MJPEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mk_mjpeg_split results. */
enum {
    MK_MJPEG_FRAME = 0, /* a frame: [start, end) */
    MK_MJPEG_MORE = 1,  /* the frame continues past the buffer (or no SOI yet): read more; `start` is where the
                           next frame begins (bytes before it are garbage and may be dropped) */
    MK_MJPEG_NONE = 2,  /* at end of input: no frame left (start = len: all the rest is garbage) */
};

typedef struct {
    size_t start, end; /* the frame's bytes: SOI up to and including EOI (or up to where it was cut short) */
    int complete;      /* 1: ended with EOI after a structurally valid frame; 0: cut short (by the next SOI, by
                          malformed markers or by the end of the input) — a decoder will reject it */
} mk_mjpeg_span_t;

/* Finds the first frame in buf[0, len): skips bytes before an SOI (FF D8 FF), then follows the marker segments
 * and entropy-coded data (stuffed FF 00, RSTn, fill bytes) to the EOI, so that EOI bytes inside an APPn segment (an
 * EXIF thumbnail) do not end the frame. A frame that is cut short ends where the next SOI begins. `at_eof` says
 * that no more data will come: a frame running to the end of the buffer is then returned as incomplete. */
int mk_mjpeg_split(const uint8_t *buf, size_t len, int at_eof, mk_mjpeg_span_t *span);

/* 1 if the frame defines a Huffman table (DHT) before its first SOS, 0 if not; MK_EFORMAT if the header is
 * malformed (no SOI, a segment running past the buffer, no SOS). */
int mk_mjpeg_has_dht(const uint8_t *jpeg, size_t len);

/* Copies `jpeg` to *out with the four standard Huffman tables (one DHT segment, 420 bytes with its marker)
 * inserted just before the first SOS. *out is a malloc'd buffer of *cap bytes, grown (realloc) as needed; *out_len
 * receives the new length. MK_EFORMAT for a malformed header, MK_ENOMEM. */
int mk_mjpeg_add_dht(const uint8_t *jpeg, size_t len, uint8_t **out, size_t *cap, size_t *out_len);

/* The standard DHT segment (FF C4, length, DC/AC luminance and chrominance tables of Annex K.3). */
const uint8_t *mk_mjpeg_std_dht(size_t *len);

/* Width and height from the frame's SOFn header; MK_EFORMAT if there is none before SOS. */
int mk_mjpeg_size(const uint8_t *jpeg, size_t len, int *width, int *height);

#ifdef __cplusplus
}
#endif
#endif
