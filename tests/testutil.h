/* testutil: helpers shared by the cmocka tests: test data lookup, random images, guard bands, device skips. */
#ifndef MK_TESTUTIL_H
#define MK_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctx.h"
#include "errors.h"
#include "image.h"

/* The exit code meson reads as "skipped". */
#define TU_SKIP_CODE 77

/* The shared data folder ($MASKD_TEST_DATA, else $MASKD_SOURCE_ROOT/../shared/data), or NULL if absent. */
const char *tu_data_dir(void);
/* tu_data_dir()/rel into buf; NULL (and a skip() in the calling test) if the data or the file is absent. */
const char *tu_data_path(char *buf, size_t n, const char *rel);
/* $MASKD_SOURCE_ROOT/tests/data/rel into buf. */
const char *tu_test_data(char *buf, size_t n, const char *rel);

/* xorshift64* generator: deterministic, seeded. */
typedef struct {
    uint64_t s;
} tu_rng_t;
uint64_t tu_rand(tu_rng_t *r);
/* Uniform integer in [lo, hi]. */
int tu_rand_int(tu_rng_t *r, int lo, int hi);

/* A mutation of `len` bytes of text for robustness tests: 1 to 4 edits, each one of: a byte replaced (by a random
 * byte or one of JSON's and INI's syntax bytes), a byte inserted, a span deleted, a span repeated, one of the
 * `ntokens` tokens inserted, the text cut short. Returns a malloc'd buffer with its length in *out_len and a NUL
 * after it; a random byte may put NULs inside it too. */
char *tu_mutate(tu_rng_t *r, const char *text, size_t len, const char *const *tokens, int ntokens, size_t *out_len);

/* Fills the rows of a host u8 image with random bytes (the pitch padding keeps what it had). */
void tu_fill_random(mk_image_t *img, tu_rng_t *r);

/* Host image with a guard band: `pad` extra bytes at the end of each row and `pad` rows before and after, all set
 * to a sentinel byte. tu_guard_ok() says whether the band is intact. */
typedef struct {
    mk_image_t img;
    unsigned char *base;
    size_t total, pad_rows_bytes;
    unsigned char sentinel;
} tu_guarded_t;
void tu_guarded_alloc(tu_guarded_t *g, mk_image_t desc, size_t extra_pitch, unsigned char sentinel);
int tu_guard_ok(const tu_guarded_t *g);
void tu_guarded_free(tu_guarded_t *g);

/* Copies a host image to a new image in ctx's memory with an extra pitch, and back. */
mk_image_t tu_to_ctx(mk_ctx_t *ctx, const mk_image_t *host, size_t extra_pitch);
/* Downloads img into host image `host` (allocated here, same descriptor, tight pitch). */
mk_image_t tu_to_host(mk_ctx_t *ctx, const mk_image_t *img);

/* Fails the test with the error message if rc != 0. */
#define TU_OK(expr)                                                                                            \
    do {                                                                                                       \
        int tu_rc_ = (expr);                                                                                   \
        if (tu_rc_ != 0)                                                                                       \
            fail_msg("%s -> %s: %s", #expr, mk_err_name(tu_rc_), mk_err_msg());                                \
    } while (0)

/* FNV-1a 64 over the pixel bytes of a host image, row by row (pitch padding excluded), as the reference generator
 * tests/data/gen_opencv_refs.py hashes numpy arrays. */
uint64_t tu_fnv1a(const mk_image_t *img);
/* Parses a JSON file (cJSON *, caller deletes); fails the test if unreadable. */
struct cJSON *tu_load_json(const char *path);
/* Loads tests/data/opencv/refs.json. */
struct cJSON *tu_opencv_refs(void);
/* A w x h host image of `format` (u8) filled from xorshift64* seeded with `seed`, byte after byte in row order:
 * the generator the reference script uses for synthetic inputs. */
mk_image_t tu_random_image(uint64_t seed, int w, int h, mk_format_t format);

/* Synthetic Otsu input number k (seven kinds: random, few values, two values, bimodal, narrow, constant, sparse),
 * as otsu_image() of the reference generator. */
mk_image_t tu_otsu_image(int k);
/* A large mostly-constant image of refs.json's "otsu_big" entry `c`. */
mk_image_t tu_otsu_big(struct cJSON *c);
/* Channel 0..2 (B, G, R) of a colour image file as a gray image. */
mk_image_t tu_real_channel(const char *path, int channel);

/* A CPU context for a whole cmocka group: tu_cpu, created by tu_setup_cpu and destroyed by tu_teardown_cpu. */
extern mk_ctx_t *tu_cpu;
int tu_setup_cpu(void **state);
int tu_teardown_cpu(void **state);
/* Width and height from a JSON array [w, h]. */
void tu_json_size(const struct cJSON *arr, int *w, int *h);

/* A new empty directory /tmp/NAME.XXXXXX (its path in buf) and the removal of a directory tree. */
const char *tu_mkdtemp(char *buf, size_t n, const char *name);
void tu_rmtree(const char *dir);

/* A file's bytes. */
typedef struct {
    unsigned char *data;
    size_t len;
} tu_blob_t;
/* The JPEG files of the shared data's video/otb_man/frames in name order, read whole (*n of them); NULL when the
 * data is absent (the caller skips). Free with tu_blobs_free. */
tu_blob_t *tu_otb_frames(int *n);
void tu_blobs_free(tu_blob_t *b, int n);

/* A CUDA context, or NULL with the reason in `why` (no GPU, CUDA not built). */
mk_ctx_t *tu_cuda_ctx(char *why, size_t n);
/* The start of a CUDA test program: a CUDA context in *gpu and a CPU context in *cpu, printing the device. Returns
 * 0, or the exit code main() should return: TU_SKIP_CODE (with a SKIP line saying `what` needs a GPU and why) or
 * 1. */
int tu_cuda_main(const char *what, mk_ctx_t **cpu, mk_ctx_t **gpu);

/* An image in the context's memory inside a larger allocation poisoned with one byte: 2 guard rows before and
 * after, and the pitch padding. tu_dev_guard_check() downloads it, fails the test if a guard byte changed, and
 * returns the image part as a new host image. */
typedef struct {
    mk_image_t img, whole;
} tu_dev_guard_t;
void tu_dev_guard_alloc(mk_ctx_t *gpu, tu_dev_guard_t *g, mk_image_t desc, size_t extra_pitch, uint8_t poison);
mk_image_t tu_dev_guard_check(mk_ctx_t *gpu, tu_dev_guard_t *g, uint8_t poison, const char *what);
void tu_dev_guard_free(mk_ctx_t *gpu, tu_dev_guard_t *g);

#endif
