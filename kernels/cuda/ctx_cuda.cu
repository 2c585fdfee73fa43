/* ctx_cuda: device discovery, the context's stream, allocations and copies for the CUDA backend. */
#include "backend.h"
#include "cuda_check.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static __global__ void probe_kernel(int *p)
{
    if (p)
        *p = 1;
}

/* Errors after which the CUDA context of the process is unusable ("sticky"): every later call fails the same way
 * and only a new process can use the GPU again (a fault or a trap in a kernel, a watchdog timeout, an uncorrectable
 * ECC or NVLink error). */
static int sticky_error(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContextIsDestroyed:
        return 1;
    default:
        return 0;
    }
}

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static int lost;
static char lost_why[384];

extern "C" int mk_cuda_note_error(cudaError_t e, const char *where)
{
    if (!sticky_error(e))
        return 0;
    pthread_mutex_lock(&lost_mu);
    if (!lost) {
        lost = 1;
        snprintf(lost_why, sizeof lost_why, "%s: %s (%s)", where, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    pthread_mutex_unlock(&lost_mu);
    return 1;
}

extern "C" int mk_cuda_lost(char *why, size_t why_len)
{
    pthread_mutex_lock(&lost_mu);
    int l = lost;
    if (l && why && why_len)
        snprintf(why, why_len, "%s", lost_why);
    pthread_mutex_unlock(&lost_mu);
    return l;
}

extern "C" int mk_cuda_probe(char *why, size_t why_len)
{
    char lw[384];
    if (mk_cuda_lost(lw, sizeof lw)) {
        if (why && why_len)
            snprintf(why, why_len, "the GPU context of this process was lost (%s)", lw);
        return 0;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (why && why_len)
            snprintf(why, why_len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        cudaGetLastError();
        return 0;
    }
    /* A device without a kernel image of this build is not usable. */
    cudaFuncAttributes attr;
    e = cudaFuncGetAttributes(&attr, probe_kernel);
    if (e != cudaSuccess) {
        cudaDeviceProp prop;
        int cc = cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.major * 10 + prop.minor : 0;
        int image = e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
                    e == cudaErrorUnsupportedPtxVersion || e == cudaErrorInvalidKernelImage;
        if (mk_cuda_note_error(e, "cudaFuncGetAttributes of the probe kernel")) {
            if (why && why_len)
                snprintf(why, why_len, "the GPU context of this process was lost (%s: %s)", cudaGetErrorName(e),
                         cudaGetErrorString(e));
        } else if (why && why_len) {
            if (image)
                snprintf(why, why_len, "device 0 (sm_%d) cannot run this build (compiled for %s): %s", cc,
                         MK_CUDA_ARCH_LIST, cudaGetErrorString(e));
            else
                snprintf(why, why_len, "device 0 (sm_%d): %s (%s)", cc, cudaGetErrorString(e), cudaGetErrorName(e));
        }
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int mk_cuda_ctx_init(mk_ctx_t *ctx)
{
    int rc;
    cudaDeviceProp prop;
    cudaStream_t s = NULL;
    ctx->device = 0;
    if ((rc = MK_CUDA_CHECK(cudaSetDevice(ctx->device))) ||
        (rc = MK_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx->device))) ||
        (rc = MK_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))))
        return rc;
    ctx->stream = s;
    ctx->sm_count = prop.multiProcessorCount;
    snprintf(ctx->device_name, sizeof ctx->device_name, "%.120s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount);
    size_t v = cudnnGetVersion();
    MK_DEBUG("CUDA device %d: %s; cuDNN %zu.%zu.%zu", ctx->device, ctx->device_name, v / 10000, v / 100 % 100,
             v % 100);
    return 0;
}

extern "C" void mk_cuda_ctx_fini(mk_ctx_t *ctx)
{
    if (ctx->stream) {
        mk_cuda_teardown_check(MK_CUDA_CHECK(cudaStreamSynchronize(MK_STREAM(ctx))));
        mk_cuda_teardown_check(MK_CUDA_CHECK(cudaStreamDestroy(MK_STREAM(ctx))));
        ctx->stream = NULL;
    }
}

extern "C" int mk_cuda_sync(mk_ctx_t *ctx)
{
    return MK_CUDA_CHECK(cudaStreamSynchronize(MK_STREAM(ctx)));
}

extern "C" int mk_cuda_wait(mk_ctx_t *waiter, mk_ctx_t *signaller)
{
    /* An event per call: destroying it right after the wait is queued is allowed (its resources go once the
     * wait is satisfied), and the contexts keep no extra state. */
    cudaEvent_t ev = NULL;
    int rc;
    if ((rc = MK_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming))))
        return rc;
    if (!(rc = MK_CUDA_CHECK(cudaEventRecord(ev, MK_STREAM(signaller)))))
        rc = MK_CUDA_CHECK(cudaStreamWaitEvent(MK_STREAM(waiter), ev, 0));
    int rd = MK_CUDA_CHECK(cudaEventDestroy(ev));
    return rc ? rc : rd;
}

extern "C" int mk_cuda_alloc(mk_ctx_t *ctx, size_t bytes, mk_mem_t mem, void **ptr)
{
    (void)ctx;
    *ptr = NULL;
    if (mem == MK_MEM_PINNED)
        return MK_CUDA_CHECK(cudaMallocHost(ptr, bytes));
    return MK_CUDA_CHECK(cudaMalloc(ptr, bytes));
}

extern "C" void mk_cuda_free(mk_ctx_t *ctx, void *ptr, mk_mem_t mem)
{
    /* Memory may still be in use by queued work: freeing waits for the device (cudaFree synchronizes). */
    (void)ctx;
    mk_cuda_teardown_check(mem == MK_MEM_PINNED ? MK_CUDA_CHECK(cudaFreeHost(ptr)) : MK_CUDA_CHECK(cudaFree(ptr)));
}

extern "C" int mk_cuda_device_memory(mk_ctx_t *ctx, size_t *free_bytes, size_t *total_bytes)
{
    (void)ctx;
    return MK_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

extern "C" int mk_cuda_copy2d(mk_ctx_t *ctx, void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width_bytes, size_t rows)
{
    return MK_CUDA_CHECK(
        cudaMemcpy2DAsync(dst, dpitch, src, spitch, width_bytes, rows, cudaMemcpyDefault, MK_STREAM(ctx)));
}

extern "C" int mk_cuda_memset2d(mk_ctx_t *ctx, void *ptr, size_t pitch, int value, size_t width_bytes,
                                size_t rows)
{
    return MK_CUDA_CHECK(cudaMemset2DAsync(ptr, pitch, value, width_bytes, rows, MK_STREAM(ctx)));
}

namespace {

struct event_pair {
    cudaEvent_t a = NULL, b = NULL;
    ~event_pair()
    {
        if (a)
            cudaEventDestroy(a);
        if (b)
            cudaEventDestroy(b);
    }
    int create()
    {
        int rc;
        if ((rc = MK_CUDA_CHECK(cudaEventCreate(&a))) || (rc = MK_CUDA_CHECK(cudaEventCreate(&b))))
            return rc;
        return 0;
    }
};

int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

} // namespace

extern "C" int mk_cuda_time_us(mk_ctx_t *ctx, int (*fn)(void *arg), void *arg, double *us)
{
    event_pair ev;
    float ms = 0;
    int rc;
    if ((rc = ev.create()) || (rc = MK_CUDA_CHECK(cudaEventRecord(ev.a, MK_STREAM(ctx)))))
        return rc;
    int frc = fn(arg);
    if ((rc = MK_CUDA_CHECK(cudaEventRecord(ev.b, MK_STREAM(ctx)))) ||
        (rc = MK_CUDA_CHECK(cudaEventSynchronize(ev.b))) || (rc = MK_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b))))
        return rc;
    *us = ms * 1000.0;
    return frc;
}

extern "C" int mk_cuda_copy_gbps(mk_ctx_t *ctx, size_t bytes, int reps, double *gbps)
{
    void *a = NULL, *b = NULL;
    double *t = (double *)calloc((size_t)reps, sizeof(double));
    event_pair ev;
    int rc = t ? 0 : mk_err_set(MK_ENOMEM, "copy benchmark: out of memory");
    if (!rc && !(rc = ev.create()) && !(rc = MK_CUDA_CHECK(cudaMalloc(&a, bytes))) &&
        !(rc = MK_CUDA_CHECK(cudaMalloc(&b, bytes))) && !(rc = MK_CUDA_CHECK(cudaMemsetAsync(a, 0x5a, bytes, MK_STREAM(ctx))))) {
        for (int i = -2; i < reps && !rc; i++) { /* two warm-up copies */
            float ms = 0;
            if (!(rc = MK_CUDA_CHECK(cudaEventRecord(ev.a, MK_STREAM(ctx)))) &&
                !(rc = MK_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, MK_STREAM(ctx)))) &&
                !(rc = MK_CUDA_CHECK(cudaEventRecord(ev.b, MK_STREAM(ctx)))) &&
                !(rc = MK_CUDA_CHECK(cudaEventSynchronize(ev.b))) &&
                !(rc = MK_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b))) && i >= 0)
                t[i] = ms;
        }
    }
    if (!rc) {
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        *gbps = 2.0 * (double)bytes / (t[reps / 2] * 1e-3) / 1e9;
    }
    if (a)
        cudaFree(a);
    if (b)
        cudaFree(b);
    free(t);
    return rc;
}
