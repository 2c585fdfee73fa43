/* maskbus_pattern: synthetic frames whose every byte follows from the frame number, so that a reader can prove
 * that what it read is one whole frame (no torn read). Used by tests, `masktool bus-bench` and the Python test. */
#ifndef MASKBUS_PATTERN_H
#define MASKBUS_PATTERN_H

#include <stdint.h>

#include "maskbus.h"

/* A frame of width x height with the given planes, owned by the caller (maskbus_pattern_free). */
typedef struct {
    uint32_t width, height, planes;
    uint8_t *data[MASKBUS_MAX_PLANES];
    maskbus_detection_t det[2];
} maskbus_pattern_t;

int maskbus_pattern_alloc(maskbus_pattern_t *p, uint32_t width, uint32_t height, uint32_t planes);
void maskbus_pattern_free(maskbus_pattern_t *p);

/* Fill p with frame number seq and point in at it (frame_seq = seq, two detections derived from seq). */
void maskbus_pattern_fill(maskbus_pattern_t *p, uint64_t seq, maskbus_frame_in_t *in);

/* 1 when the frame read is exactly what maskbus_pattern_fill wrote for f->frame_seq at f's geometry. */
int maskbus_pattern_check(const maskbus_frame_t *f);

/* The value of byte x of row y of plane i of frame seq (the definition both sides share). */
static inline uint8_t maskbus_pattern_byte(uint64_t seq, unsigned plane, uint32_t y, uint32_t x)
{
    return (uint8_t)(seq * 97u + plane * 61u + y * 13u + x);
}

#endif
