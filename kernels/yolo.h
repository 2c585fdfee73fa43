/* yolo: one [yolo] layer's raw output and everything decoding it needs (anchors, grid, scale_x_y, network size).
 *
 * The network (darknet.h, mk_net_yolo_output) fills this descriptor; decode + NMS consumes it. `data` is the layer's
 * output exactly as Darknet lays it out, float32, in the memory of the network's context (host for CPU, device for
 * CUDA): for each of the n anchors a block of (4 + 1 + classes) planes of h rows of w values,
 *   data[((a * (5 + classes) + e) * h + y) * w + x]
 * with entry e = 0: x, 1: y (logistic, then scale_x_y applied as Darknet's forward_yolo_layer does:
 * v * scale_x_y - (scale_x_y - 1) / 2, so decode must NOT apply it again), 2: w, 3: h (raw: the box size is
 * anchor * exp(v)), 4: objectness, 5..: class scores (both logistic). The box centre of cell (x, y) in network
 * pixels is ((x + data_x) / w * net_w, (y + data_y) / h * net_h), its size
 * (anchors[2a] * exp(data_w), anchors[2a+1] * exp(data_h)) — Darknet's get_yolo_box. */
#ifndef MK_YOLO_H
#define MK_YOLO_H

#ifdef __cplusplus
extern "C" {
#endif

/* Most anchors one [yolo] layer may use (its mask= entries). */
#define MK_YOLO_MAX_ANCHORS 16

typedef struct {
    int w, h;        /* grid size (cells) */
    int n;           /* anchors of this layer (mask entries), 1..MK_YOLO_MAX_ANCHORS */
    int classes;
    float anchors[2 * MK_YOLO_MAX_ANCHORS]; /* (w, h) of anchor a at [2a], [2a+1], in network-input pixels */
    float scale_x_y; /* already applied to data (see above); for information */
    int net_w, net_h; /* network input size the anchors refer to */
    const float *data; /* n * (5 + classes) * h * w floats, Darknet's layout, in the context's memory */
} mk_yolo_layer_t;

#ifdef __cplusplus
}
#endif
#endif
