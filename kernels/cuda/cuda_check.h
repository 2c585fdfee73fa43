/* cuda_check: status checks for CUDA and cuDNN calls that name the statement, file and line (CUDA files only). */
#ifndef MK_CUDA_CHECK_H
#define MK_CUDA_CHECK_H

#include "errors.h"
#include "log.h"

#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>

/* Records (once per process) an error after which the process's CUDA context is unusable; 1 when `e` is one
 * (kernels/cuda/ctx_cuda.cu; mk_gpu_lost() reports it). */
extern "C" int mk_cuda_note_error(cudaError_t e, const char *where);

static inline int mk_cuda_check_(cudaError_t e, const char *stmt, const char *file, int line)
{
    if (e == cudaSuccess)
        return 0;
    char where[256];
    snprintf(where, sizeof where, "%s failed at %s:%d", stmt, file, line);
    int lost = mk_cuda_note_error(e, where);
    return mk_err_set(e == cudaErrorMemoryAllocation ? MK_ENOMEM : MK_ECUDA, "%s: %s (%s)%s", where,
                      cudaGetErrorName(e), cudaGetErrorString(e),
                      lost ? "; the GPU context of this process is lost (only a new process can use the GPU)" : "");
}

static inline int mk_cudnn_check_(cudnnStatus_t s, const char *stmt, const char *file, int line)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    return mk_err_set(MK_ECUDNN, "%s failed at %s:%d: %s", stmt, file, line, cudnnGetErrorString(s));
}

extern "C" int mk_cuda_lost(char *why, size_t why_len);

/* After a teardown call (a free, a destroy) that returned rc: a warning when it failed, only a debug line once the
 * GPU context is lost (that was reported when it happened, and every such call fails from then on). */
static inline void mk_cuda_teardown_check(int rc)
{
    if (rc && mk_cuda_lost(NULL, 0))
        MK_DEBUG("%s", mk_err_msg());
    else if (rc)
        MK_WARN("%s", mk_err_msg());
}

/* Evaluate to 0 or a negative code (message set): `if ((rc = MK_CUDA_CHECK(cudaMalloc(&p, n)))) goto fail;` */
#define MK_CUDA_CHECK(stmt) mk_cuda_check_((stmt), #stmt, __FILE__, __LINE__)
#define MK_CUDNN_CHECK(stmt) mk_cudnn_check_((stmt), #stmt, __FILE__, __LINE__)
/* After a kernel launch: reports a bad configuration or a missing kernel image. */
#define MK_CUDA_LAUNCH_CHECK(kernel) mk_cuda_check_(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__)

#define MK_STREAM(ctx) ((cudaStream_t)(ctx)->stream)

#endif
