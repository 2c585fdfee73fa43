/* masktool: shared declarations of the offline tool's subcommands. */
#ifndef MASKTOOL_H
#define MASKTOOL_H

#include "ctx.h"
#include "image.h"

#include <cjson/cJSON.h>

/* Parses "WxH" into positive ints; 0 or an error message on stderr and -1. */
int mt_parse_size(const char *s, int *w, int *h);
/* Creates a context of the named backend ("auto" when NULL), printing the error on failure. */
mk_ctx_t *mt_ctx(const char *backend);
/* A real test photo (MASKD_TEST_DATA or ../shared/data images/person.jpg) or, without the data, a generated
 * scene; then mirror-tiled to w x h. `format` is GRAY, RGB or BGR. */
int mt_source_image(const char *path, mk_format_t format, int w, int h, mk_image_t *out, char *what, size_t what_len);

/* Prints a JSON document to stdout (indented or on one line) and deletes it. */
void mt_print_json(cJSON *doc, int pretty);

int mt_bench(int argc, char **argv);
int mt_bus_bench(int argc, char **argv);
/* `masktool bench detect`: argv[0] is "detect" (clients/masktool_detect_bench.c). */
int mt_bench_detect(int argc, char **argv);
int mt_forward(int argc, char **argv);

#endif
