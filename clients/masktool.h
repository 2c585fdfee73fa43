/* masktool: shared declarations of the offline tool's subcommands. */
#ifndef MASKTOOL_H
#define MASKTOOL_H

#include "ctx.h"
#include "grabcut.h"
#include "image.h"

#include <cjson/cJSON.h>

/* Parses a whole decimal integer in lo..hi into *out; 0, or -1 (nothing printed) for anything else. */
int mt_parse_int(const char *s, int lo, int hi, int *out);
/* Parses "WxH" into positive ints; 0 or an error message on stderr and -1. */
int mt_parse_size(const char *s, int *w, int *h);
/* Creates a context of the named backend ("auto" when NULL), printing the error on failure. */
mk_ctx_t *mt_ctx(const char *backend);
/* A real test photo (MASKD_TEST_DATA or ../shared/data images/person.jpg) or, without the data, a generated
 * scene; then mirror-tiled to w x h. `format` is GRAY, RGB or BGR. */
int mt_source_image(const char *path, mk_format_t format, int w, int h, mk_image_t *out, char *what, size_t what_len);

/* qsort comparison of doubles, ascending. */
int mt_cmp_double(const void *a, const void *b);
/* The median of v[0..n) (n >= 1; sorted in place; the upper one of an even count). */
double mt_median(double *v, int n);

/* Prints a JSON document to stdout (indented or on one line) and deletes it. */
void mt_print_json(cJSON *doc, int pretty);

/* Times `once(arg)` on ctx, each call synchronised (µs): `warmup` calls, then `runs` calls into t[]; then `npipe`
 * calls of `pipelined(arg)`, which queues `per_pipe` calls back to back, into pipe[] as µs per call. */
int mt_time_op(mk_ctx_t *ctx, int (*once)(void *), int (*pipelined)(void *), void *arg, int warmup, int runs,
               double *t, double *pipe, int npipe, int per_pipe);

int mt_bench(int argc, char **argv);
int mt_detect(int argc, char **argv);
int mt_bus_bench(int argc, char **argv);
/* `masktool bench detect`: argv[0] is "detect" (clients/masktool_detect_bench.c). */
int mt_bench_detect(int argc, char **argv);
int mt_forward(int argc, char **argv);
/* GrabCut (clients/masktool_grabcut.c): `masktool grabcut`, `masktool grabcut-score`, and `masktool bench grabcut`
 * / `bench maxflow` (argv[0] is "grabcut" or "maxflow"; clients/masktool_grabcut_bench.c). */
int mt_grabcut(int argc, char **argv);
int mt_grabcut_score(int argc, char **argv);
int mt_bench_grabcut(int argc, char **argv);
/* "x1,y1,x2,y2" (0-based, inclusive) into ints; MK_EINVAL with a message. */
int mt_gc_parse_rect(const char *s, int *x1, int *y1, int *x2, int *y2);
/* The rectangle of the inclusive corners in a w x h image; one covering the whole image (no background) is shrunk
 * by one pixel at the right and the bottom, as the OpenCV reference masks were made: then 1, else 0. */
int mt_gc_rect(int x1, int y1, int x2, int y2, int w, int h, mk_rect_t *out);
/* GrabCut of a host image on ctx from rect (uploaded, run, downloaded): *mask receives a new host image, the binary
 * mask (0/255) or with `labels` the four labels; stats may be NULL. */
int mt_gc_run(mk_ctx_t *ctx, const mk_image_t *img, const mk_rect_t *rect, const mk_gc_params_t *p, int labels,
              mk_image_t *mask, mk_gc_stats_t *stats);
int mt_decode(int argc, char **argv);
/* `masktool segment` (clients/masktool_segment.c). */
int mt_segment(int argc, char **argv);
/* `masktool bench pipeline`: argv[0] is "pipeline" (clients/masktool_pipeline_bench.c). */
int mt_bench_pipeline(int argc, char **argv);

#endif
