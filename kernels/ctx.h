/* ctx: the compute context every op runs in (backend, CUDA stream, scratch pool).
 *
 * Thread rules: a context is used by one thread at a time; the ops called on it are ordered on its one stream.
 * Different threads use different contexts. */
#ifndef MK_CTX_H
#define MK_CTX_H

#include "image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_BACKEND_AUTO = 0, /* CUDA when compiled in and a usable device exists, else CPU */
    MK_BACKEND_CPU = 1,
    MK_BACKEND_CUDA = 2,
} mk_backend_t;

/* Creates a context; MK_BACKEND_CUDA without a usable device fails with MK_ENODEV and a message saying why. */
int mk_ctx_create(mk_backend_t backend, mk_ctx_t **out);
/* Waits for outstanding work and frees everything the context holds; NULL is a no-op. */
void mk_ctx_destroy(mk_ctx_t *ctx);

mk_backend_t mk_ctx_backend(const mk_ctx_t *ctx);
/* Where op inputs and outputs live for this context: MK_MEM_DEVICE for CUDA, MK_MEM_HOST for CPU. */
mk_mem_t mk_ctx_mem(const mk_ctx_t *ctx);
/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or "CPU". */
const char *mk_ctx_device_name(const mk_ctx_t *ctx);
/* The cudaStream_t of a CUDA context (NULL for CPU). */
void *mk_ctx_stream(const mk_ctx_t *ctx);
/* Waits until all work queued on the context has finished; reports asynchronous CUDA errors. */
int mk_ctx_sync(mk_ctx_t *ctx);
/* Orders two contexts without blocking the host: the work queued on `waiter` from now on starts only after the
 * work queued on `signaller` so far has finished (CUDA: an event recorded on the signaller's stream that the
 * waiter's stream waits for). A no-op on the CPU backend, whose ops finish before they return. Both contexts of
 * the same backend; each must not be in use by another thread during the call. Device memory is shared by all
 * CUDA contexts of the process, so a pointer made on one may be read on the other once ordered so. */
int mk_ctx_wait(mk_ctx_t *waiter, mk_ctx_t *signaller);

/* Runs fn(arg) and measures it: on CUDA with events around it on the context's stream (the device time from the
 * first to the last queued operation, host launch gaps included), on the CPU with CLOCK_MONOTONIC. Synchronises.
 * A non-zero return of fn is passed on. */
int mk_ctx_time_us(mk_ctx_t *ctx, int (*fn)(void *arg), void *arg, double *us);
/* Device-to-device copy bandwidth (bytes read + written per second / 1e9, median of `reps` copies of `bytes`), the
 * measured ceiling for memory-bound ops; MK_EUNSUPPORTED on the CPU backend. */
int mk_ctx_copy_gbps(mk_ctx_t *ctx, size_t bytes, int reps, double *gbps);
/* Free and total memory of the context's device (all processes' use counted, as cudaMemGetInfo sees it);
 * MK_EUNSUPPORTED on the CPU backend. */
int mk_ctx_device_memory(mk_ctx_t *ctx, size_t *free_bytes, size_t *total_bytes);

const char *mk_backend_name(mk_backend_t b);
/* "auto" | "cpu" | "cuda". */
int mk_backend_parse(const char *s, mk_backend_t *out);

/* 1 when the CUDA backend was compiled in. */
int mk_cuda_compiled(void);
/* The number of usable CUDA devices (0 without the CUDA backend, driver or GPU); `why` (may be NULL) receives the
 * reason when it is 0. */
int mk_cuda_device_count(char *why, size_t why_len);
/* 1 when a CUDA call of this process has failed with an error that leaves its GPU context unusable (a kernel's
 * illegal address or instruction, a trap, a launch failure or timeout, an uncorrectable ECC or NVLink error):
 * every later CUDA call fails the same way, and only a new process can use the GPU again. `why` (may be NULL)
 * receives the first such failure. 0 without the CUDA backend. Thread-safe. */
int mk_gpu_lost(char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
