/* darknet_cfg: Darknet .cfg text -> the layer list with every layer's parameters (shapes come later, in darknet.c).
 *
 * The format is Darknet's INI dialect: "[section]" lines, "key=value" lines (whitespace around keys, values and
 * list items ignored), full-line comments starting with '#' or ';', blank lines. Each supported section has a
 * table of keys: keys the port uses, keys that only matter for training (accepted and ignored, listed by name),
 * and keys Darknet knows but this port does not implement (an MK_EUNSUPPORTED error). Any other key is an
 * MK_EFORMAT error; so are duplicate keys, malformed numbers, values out of range and route/shortcut indices that
 * do not name an earlier layer. Every message starts with "file:line: ". */
#ifndef MK_DARKNET_CFG_H
#define MK_DARKNET_CFG_H

#include "darknet_internal.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[256];   /* the file name used in messages */
    int width, height, channels; /* [net]; width/height 0 when the cfg does not give them */
    int n_layers;
    /* Per layer: type, line, act, the type's parameters (conv: filters, size, stride, pad, groups,
     * batch_normalize; yolo: num, mask, meta.n/classes/anchors/scale_x_y, bias_x_y) and the referenced layers as
     * absolute indices of earlier layers (route.layers, shortcut.from; dropouts not yet resolved). `input` is the
     * previous layer (-1 for the first). Shapes, weights and outputs are zero. */
    mk_layer_t *layers;
} mk_darknet_cfg_t;

/* Parses cfg text (`len` bytes, need not be NUL-terminated). On failure `cfg` holds nothing to free. */
int mk_darknet_cfg_parse(const char *text, size_t len, const char *name, mk_darknet_cfg_t *cfg);
/* Reads and parses a cfg file. */
int mk_darknet_cfg_read(const char *path, mk_darknet_cfg_t *cfg);
void mk_darknet_cfg_free(mk_darknet_cfg_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
