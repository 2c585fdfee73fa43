/* ctx: context lifecycle, backend choice and the scratch pool. */
#include "ctx.h"

#include "backend.h"
#include "errors.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The memory a scratch slot lives in (see ctx_internal.h). */
static mk_mem_t slot_mem(const mk_ctx_t *ctx, mk_scratch_slot_t slot)
{
    if (slot == MK_SCRATCH_YOLO_HOST || slot == MK_SCRATCH_GRABCUT_HOST)
        return ctx->backend == MK_BACKEND_CUDA ? MK_MEM_PINNED : MK_MEM_HOST;
    return mk_ctx_mem(ctx);
}

static int ctx_alloc(mk_ctx_t *ctx, mk_mem_t mem, size_t bytes, void **p)
{
#ifdef MK_HAVE_CUDA
    if (mem != MK_MEM_HOST)
        return mk_cuda_alloc(ctx, bytes, mem, p);
#endif
    (void)ctx;
    (void)mem;
    if (!(*p = malloc(bytes)))
        return mk_err_set(MK_ENOMEM, "cannot allocate %zu bytes of scratch", bytes);
    return 0;
}

static void ctx_free(mk_ctx_t *ctx, mk_mem_t mem, void *p)
{
#ifdef MK_HAVE_CUDA
    if (mem != MK_MEM_HOST) {
        mk_cuda_free(ctx, p, mem);
        return;
    }
#endif
    (void)ctx;
    (void)mem;
    free(p);
}

static int ctx_zero(mk_ctx_t *ctx, mk_mem_t mem, void *p, size_t bytes)
{
#ifdef MK_HAVE_CUDA
    if (mem == MK_MEM_DEVICE)
        return mk_cuda_memset2d(ctx, p, bytes, 0, bytes, 1);
#endif
    (void)ctx;
    (void)mem;
    memset(p, 0, bytes);
    return 0;
}

const char *mk_backend_name(mk_backend_t b)
{
    switch (b) {
    case MK_BACKEND_AUTO: return "auto";
    case MK_BACKEND_CPU: return "cpu";
    case MK_BACKEND_CUDA: return "cuda";
    }
    return "?";
}

int mk_backend_parse(const char *s, mk_backend_t *out)
{
    static const mk_backend_t all[] = {MK_BACKEND_AUTO, MK_BACKEND_CPU, MK_BACKEND_CUDA};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (!strcasecmp(s, mk_backend_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return mk_err_set(MK_EINVAL, "unknown backend '%s' (auto|cpu|cuda)", s ? s : "(null)");
}

int mk_cuda_compiled(void)
{
#ifdef MK_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int mk_cuda_device_count(char *why, size_t why_len)
{
#ifdef MK_HAVE_CUDA
    return mk_cuda_probe(why, why_len);
#else
    if (why && why_len)
        snprintf(why, why_len, "this build has no CUDA backend (meson option cuda=disabled or nvcc/cuDNN not found)");
    return 0;
#endif
}

int mk_gpu_lost(char *why, size_t why_len)
{
#ifdef MK_HAVE_CUDA
    return mk_cuda_lost(why, why_len);
#else
    (void)why;
    (void)why_len;
    return 0;
#endif
}

int mk_ctx_create(mk_backend_t backend, mk_ctx_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_ctx_create: NULL output");
    *out = NULL;
    if ((unsigned)backend > MK_BACKEND_CUDA)
        return mk_err_set(MK_EINVAL, "mk_ctx_create: unknown backend %d", (int)backend);
    if (backend != MK_BACKEND_CPU) {
        char why[256] = "";
        int n = mk_cuda_device_count(why, sizeof why);
        if (n <= 0) {
            if (backend == MK_BACKEND_CUDA)
                return mk_err_set(MK_ENODEV, "CUDA backend unavailable: %s", why);
            MK_DEBUG("auto backend: using the CPU (%s)", why);
            backend = MK_BACKEND_CPU;
        } else {
            backend = MK_BACKEND_CUDA;
        }
    }
    mk_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return mk_err_set(MK_ENOMEM, "cannot allocate a context");
    ctx->backend = backend;
    if (backend == MK_BACKEND_CUDA) {
#ifdef MK_HAVE_CUDA
        int rc = mk_cuda_ctx_init(ctx);
        if (rc) {
            mk_ctx_destroy(ctx);
            return rc;
        }
#endif
    } else {
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU");
    }
    MK_DEBUG("context on %s (%s)", mk_backend_name(ctx->backend), ctx->device_name);
    *out = ctx;
    return 0;
}

void mk_ctx_destroy(mk_ctx_t *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; i < MK_SCRATCH_COUNT; i++)
        if (ctx->scratch[i].ptr)
            ctx_free(ctx, slot_mem(ctx, (mk_scratch_slot_t)i), ctx->scratch[i].ptr);
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        mk_cuda_ctx_fini(ctx);
#endif
    free(ctx);
}

mk_backend_t mk_ctx_backend(const mk_ctx_t *ctx)
{
    return ctx->backend;
}

mk_mem_t mk_ctx_mem(const mk_ctx_t *ctx)
{
    return ctx->backend == MK_BACKEND_CUDA ? MK_MEM_DEVICE : MK_MEM_HOST;
}

const char *mk_ctx_device_name(const mk_ctx_t *ctx)
{
    return ctx->device_name;
}

void *mk_ctx_stream(const mk_ctx_t *ctx)
{
    return ctx->stream;
}

int mk_ctx_sync(mk_ctx_t *ctx)
{
    if (!ctx)
        return mk_err_set(MK_EINVAL, "mk_ctx_sync: NULL context");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_cuda_sync(ctx);
#endif
    return 0;
}

int mk_ctx_wait(mk_ctx_t *waiter, mk_ctx_t *signaller)
{
    if (!waiter || !signaller)
        return mk_err_set(MK_EINVAL, "mk_ctx_wait: NULL context");
    if (waiter->backend != signaller->backend)
        return mk_err_set(MK_EINVAL, "mk_ctx_wait: a %s context cannot wait for a %s one",
                          mk_backend_name(waiter->backend), mk_backend_name(signaller->backend));
#ifdef MK_HAVE_CUDA
    if (waiter->backend == MK_BACKEND_CUDA && waiter != signaller)
        return mk_cuda_wait(waiter, signaller);
#endif
    return 0;
}

int mk_ctx_scratch(mk_ctx_t *ctx, mk_scratch_slot_t slot, size_t bytes, void **ptr, int *fresh)
{
    if ((unsigned)slot >= MK_SCRATCH_COUNT)
        return mk_err_set(MK_EINVAL, "scratch slot %d out of range", (int)slot);
    int rc, zero = ctx->scratch[slot].dirty;
    mk_mem_t mem = slot_mem(ctx, slot);
    if (ctx->scratch[slot].bytes < bytes) {
        if (ctx->scratch[slot].ptr)
            ctx_free(ctx, mem, ctx->scratch[slot].ptr);
        ctx->scratch[slot].ptr = NULL;
        ctx->scratch[slot].bytes = 0;
        if ((rc = ctx_alloc(ctx, mem, bytes, &ctx->scratch[slot].ptr)))
            return rc;
        ctx->scratch[slot].bytes = bytes;
        zero = 1;
    }
    if (zero) {
        if ((rc = ctx_zero(ctx, mem, ctx->scratch[slot].ptr, ctx->scratch[slot].bytes)))
            return rc;
        ctx->scratch[slot].dirty = 0;
        ctx->scratch[slot].tag = 0;
    }
    if (fresh)
        *fresh = zero;
    *ptr = ctx->scratch[slot].ptr;
    return 0;
}

void mk_ctx_scratch_dirty(mk_ctx_t *ctx, mk_scratch_slot_t slot)
{
    if ((unsigned)slot < MK_SCRATCH_COUNT)
        ctx->scratch[slot].dirty = 1;
}

int mk_ctx_time_us(mk_ctx_t *ctx, int (*fn)(void *arg), void *arg, double *us)
{
    if (!ctx || !fn || !us)
        return mk_err_set(MK_EINVAL, "mk_ctx_time_us: NULL argument");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_cuda_time_us(ctx, fn, arg, us);
#endif
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = fn(arg);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *us = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    return rc;
}

int mk_ctx_device_memory(mk_ctx_t *ctx, size_t *free_bytes, size_t *total_bytes)
{
    if (!ctx || !free_bytes || !total_bytes)
        return mk_err_set(MK_EINVAL, "mk_ctx_device_memory: NULL argument");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_cuda_device_memory(ctx, free_bytes, total_bytes);
#endif
    return mk_err_set(MK_EUNSUPPORTED, "device memory exists on the CUDA backend only");
}

int mk_ctx_copy_gbps(mk_ctx_t *ctx, size_t bytes, int reps, double *gbps)
{
    if (!ctx || !gbps || bytes == 0 || reps < 1)
        return mk_err_set(MK_EINVAL, "mk_ctx_copy_gbps: bad argument");
#ifdef MK_HAVE_CUDA
    if (ctx->backend == MK_BACKEND_CUDA)
        return mk_cuda_copy_gbps(ctx, bytes, reps, gbps);
#endif
    return mk_err_set(MK_EUNSUPPORTED, "copy bandwidth is measured on the CUDA backend only");
}
