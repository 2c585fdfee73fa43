/* maskbus_pattern: synthetic self-checking frames for the bus tests and benchmark. */
#include "maskbus_pattern.h"

#include <stdlib.h>
#include <string.h>

/* ramp[k] = k mod 256: row y of plane i of frame seq is ramp + (start mod 256), a single memcpy or memcmp. */
#define RAMP_LEN (256u + 16384u * 3u)
static uint8_t ramp[RAMP_LEN];

static void ramp_init(void)
{
    if (ramp[255] == 255)
        return;
    for (uint32_t k = 0; k < RAMP_LEN; k++)
        ramp[k] = (uint8_t)k;
}

static const uint32_t bpp[MASKBUS_MAX_PLANES] = {1, 1, 3, 2};

int maskbus_pattern_alloc(maskbus_pattern_t *p, uint32_t width, uint32_t height, uint32_t planes)
{
    memset(p, 0, sizeof(*p));
    if (width == 0 || height == 0 || width > 16384 || height > 16384)
        return MASKBUS_EINVAL;
    ramp_init();
    p->width = width;
    p->height = height;
    p->planes = planes ? planes : 1u;
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        if (!(p->planes & (1u << i)))
            continue;
        p->data[i] = malloc((size_t)width * bpp[i] * height);
        if (!p->data[i]) {
            maskbus_pattern_free(p);
            return MASKBUS_ESYS;
        }
    }
    return MASKBUS_OK;
}

void maskbus_pattern_free(maskbus_pattern_t *p)
{
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++)
        free(p->data[i]);
    memset(p, 0, sizeof(*p));
}

static void pattern_dets(uint64_t seq, maskbus_detection_t det[2])
{
    for (unsigned k = 0; k < 2; k++) {
        det[k] = (maskbus_detection_t){.class_id = (int32_t)((seq + k) & 0x7fffffff),
                                       .score = (float)((seq + k) % 1000) / 1000.0f,
                                       .x = (float)(seq % 640),
                                       .y = (float)(seq % 480),
                                       .w = 10.0f + (float)k,
                                       .h = 20.0f + (float)k,
                                       .track_id = (uint32_t)seq};
    }
}

void maskbus_pattern_fill(maskbus_pattern_t *p, uint64_t seq, maskbus_frame_in_t *in)
{
    memset(in, 0, sizeof(*in));
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        if (!p->data[i])
            continue;
        size_t row = (size_t)p->width * bpp[i];
        for (uint32_t y = 0; y < p->height; y++)
            memcpy(p->data[i] + (size_t)y * row, ramp + maskbus_pattern_byte(seq, i, y, 0), row);
        in->data[i] = p->data[i];
    }
    pattern_dets(seq, p->det);
    in->frame_seq = seq;
    in->width = p->width;
    in->height = p->height;
    in->ndetections = 2;
    in->detections = p->det;
}

int maskbus_pattern_check(const maskbus_frame_t *f)
{
    ramp_init();
    uint64_t seq = f->frame_seq;
    maskbus_detection_t det[2];
    pattern_dets(seq, det);
    if (f->ndetections != 2 || memcmp(det, f->detections, sizeof(det)) != 0)
        return 0;
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        if (!(f->planes & (1u << i)))
            continue;
        const maskbus_plane_t *pl = &f->plane[i];
        size_t row = (size_t)f->width * bpp[i];
        if (!f->data[i] || pl->width != f->width || pl->height != f->height || pl->stride < row)
            return 0;
        for (uint32_t y = 0; y < f->height; y++)
            if (memcmp(f->data[i] + (size_t)y * pl->stride, ramp + maskbus_pattern_byte(seq, i, y, 0), row) != 0)
                return 0;
    }
    return 1;
}
