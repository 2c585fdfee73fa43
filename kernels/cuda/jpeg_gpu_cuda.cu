/* jpeg_gpu_cuda: nvJPEG opened at run time (dlopen; our declarations in nvjpeg_api.h) and the decoder object of
 * jpeg_gpu.h: an nvJPEG handle and decoding state, a stream and a pitched device buffer for the decoded pixels. */
#include "backend.h"
#include "cuda_check.h"
#include "log.h"
#include "nvjpeg_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA toolkit's library folder of the build (meson passes it): tried after the loader's search path. */
#ifndef MK_CUDA_LIBDIR
#define MK_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* ---- the library ------------------------------------------------------------------------------------------ */

#define MK_NVJ_TYPEDEF(name, params) typedef MK_NVJ_T_STATUS(*name##_fn) params;
MK_NVJ_FUNCS(MK_NVJ_TYPEDEF)
#undef MK_NVJ_TYPEDEF

namespace {

struct nvj_api {
#define MK_NVJ_MEMBER(name, params) name##_fn name;
    MK_NVJ_FUNCS(MK_NVJ_MEMBER)
#undef MK_NVJ_MEMBER
};

nvj_api api;
pthread_once_t load_once = PTHREAD_ONCE_INIT;
int load_rc;
char load_msg[900];
char library[256];

const char *status_name(int s)
{
    switch (s) {
    case MK_NVJ_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case MK_NVJ_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case MK_NVJ_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case MK_NVJ_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case MK_NVJ_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case MK_NVJ_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case MK_NVJ_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case MK_NVJ_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case MK_NVJ_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case MK_NVJ_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case MK_NVJ_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    }
    return "an unknown nvJPEG status";
}

/* The error code of a failed nvJPEG call, with the call's name and status in the message. */
int nvj_fail(int s, const char *call)
{
    int code;
    switch (s) {
    case MK_NVJ_STATUS_BAD_JPEG:
    case MK_NVJ_STATUS_INCOMPLETE_BITSTREAM: code = MK_EFORMAT; break;
    case MK_NVJ_STATUS_JPEG_NOT_SUPPORTED:
    case MK_NVJ_STATUS_ARCH_MISMATCH:
    case MK_NVJ_STATUS_IMPLEMENTATION_NOT_SUPPORTED: code = MK_EUNSUPPORTED; break;
    case MK_NVJ_STATUS_ALLOCATOR_FAILURE: code = MK_ENOMEM; break;
    case MK_NVJ_STATUS_INVALID_PARAMETER: code = MK_EINVAL; break;
    default: code = MK_ECUDA;
    }
    cudaGetLastError(); /* a runtime error nvJPEG left behind is reported here, not by this thread's next check */
    return mk_err_set(code, "%s failed: %s (%d)", call, status_name(s), s);
}

void load(void)
{
    const char *env = getenv("MASKD_NVJPEG_LIB");
    const char *const defaults[] = {"libnvjpeg.so.13", "libnvjpeg.so", MK_CUDA_LIBDIR "/libnvjpeg.so.13",
                                    MK_CUDA_LIBDIR "/libnvjpeg.so"};
    const char *only[1] = {env};
    const char *const *names = env && *env ? only : defaults;
    size_t n = env && *env ? 1 : sizeof defaults / sizeof defaults[0];
    void *h = NULL;
    /* the first failure, unless a later one found the file and failed otherwise (a missing dependency) */
    char err[400] = "";
    int err_found_file = 0;
    for (size_t i = 0; i < n && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = h ? NULL : dlerror();
        if (h) {
            snprintf(library, sizeof library, "%s", names[i]);
        } else {
            int found_file = e && !strstr(e, "No such file");
            if (!err[0] || (found_file && !err_found_file))
                snprintf(err, sizeof err, "%s", e ? e : names[i]);
            err_found_file |= found_file;
        }
    }
    if (!h) {
        load_rc = MK_EUNSUPPORTED;
        snprintf(load_msg, sizeof load_msg, "nvJPEG unavailable: cannot open libnvjpeg (%s%s)", err,
                 env && *env ? ", from $MASKD_NVJPEG_LIB" : ", also looked for in " MK_CUDA_LIBDIR);
        library[0] = '\0';
        return;
    }
    nvj_api a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define MK_NVJ_SYM(name, params)                                                                               \
    if (!(a.name = reinterpret_cast<name##_fn>(dlsym(h, #name))) && !missing && strcmp(#name, "nvjpegGetProperty")) \
        missing = #name;
    MK_NVJ_FUNCS(MK_NVJ_SYM)
#undef MK_NVJ_SYM
    if (missing) {
        load_rc = MK_EUNSUPPORTED;
        snprintf(load_msg, sizeof load_msg, "nvJPEG unavailable: %s has no %s", library, missing);
        library[0] = '\0';
        dlclose(h);
        return;
    }
    /* The library stays open for the life of the process (nvJPEG may keep threads and allocations). */
    api = a;
    int v[3] = {-1, -1, -1};
    if (api.nvjpegGetProperty)
        for (int i = 0; i < 3; i++)
            if (api.nvjpegGetProperty(MK_NVJ_MAJOR_VERSION + i, &v[i]) != MK_NVJ_STATUS_SUCCESS)
                v[i] = -1;
    size_t len = strlen(library);
    if (v[0] >= 0)
        snprintf(library + len, sizeof library - len, ", nvJPEG %d.%d.%d", v[0], v[1], v[2]);
    MK_DEBUG("opened %s", library);
}

} // namespace

extern "C" int mk_jpeg_gpu_load_cuda(void)
{
    pthread_once(&load_once, load);
    return load_rc ? mk_err_set(load_rc, "%s", load_msg) : 0;
}

extern "C" const char *mk_jpeg_gpu_library_cuda(void)
{
    pthread_once(&load_once, load);
    return library;
}

/* ---- decoders --------------------------------------------------------------------------------------------- */

struct mk_jpeg_gpu {
    mk_jpeg_gpu_backend_t backend;
    int device;
    struct nvjpegHandle *h;
    struct nvjpegJpegState *st; /* NULL after a failed reset: recreated by the next decode */
    cudaStream_t stream;
    unsigned char *buf; /* buf_w x buf_h interleaved 3-byte pixels, rows buf_pitch apart */
    size_t buf_pitch;
    int buf_w, buf_h;
    int batched_fmt; /* hardware: the output format the batched state is initialised for; -1 none */
};

namespace {

int nvj_backend(mk_jpeg_gpu_backend_t b)
{
    switch (b) {
    case MK_JPEG_GPU_HARDWARE: return MK_NVJ_BACKEND_HARDWARE;
    case MK_JPEG_GPU_HYBRID: return MK_NVJ_BACKEND_HYBRID;
    case MK_JPEG_GPU_GPU_HYBRID: return MK_NVJ_BACKEND_GPU_HYBRID;
    default: return -1;
    }
}

int state_create(mk_jpeg_gpu_t *g)
{
    int s = api.nvjpegJpegStateCreate(g->h, &g->st);
    if (s != MK_NVJ_STATUS_SUCCESS) {
        g->st = NULL;
        return nvj_fail(s, "nvjpegJpegStateCreate");
    }
    g->batched_fmt = -1;
    return 0;
}

/* After a failed decode: the stream drained and a fresh decoding state, so that a frame nvJPEG choked on leaves
 * nothing behind. The error message of the failure is kept. */
void reset(mk_jpeg_gpu_t *g)
{
    cudaStreamSynchronize(g->stream);
    cudaGetLastError();
    if (g->st)
        api.nvjpegJpegStateDestroy(g->st);
    g->st = NULL;
    g->batched_fmt = -1;
    char keep[512];
    snprintf(keep, sizeof keep, "%s", mk_err_msg());
    if (state_create(g))
        MK_LOG_RL(10000, MK_LOG_WARN, "nvJPEG: cannot renew the decoding state after a failure: %s", mk_err_msg());
    mk_err_set(MK_EFORMAT, "%s", keep);
}

} // namespace

extern "C" void mk_jpeg_gpu_close_cuda(mk_jpeg_gpu_t *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    if (g->st)
        api.nvjpegJpegStateDestroy(g->st);
    if (g->h)
        api.nvjpegDestroy(g->h);
    if (g->buf)
        cudaFree(g->buf);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    cudaGetLastError();
    free(g);
}

extern "C" int mk_jpeg_gpu_open_cuda(mk_jpeg_gpu_backend_t backend, mk_jpeg_gpu_t **out)
{
    *out = NULL;
    int rc = mk_jpeg_gpu_load_cuda();
    if (rc)
        return rc;
    int nb = nvj_backend(backend);
    if (nb < 0)
        return mk_err_set(MK_EINVAL, "nvJPEG: no backend %d", (int)backend);
    mk_jpeg_gpu_t *g = (mk_jpeg_gpu_t *)calloc(1, sizeof *g);
    if (!g)
        return mk_err_set(MK_ENOMEM, "nvJPEG: out of memory");
    g->backend = backend;
    g->device = 0; /* the device of every CUDA context (ctx_cuda.cu) */
    g->batched_fmt = -1;
    int s;
    if ((rc = MK_CUDA_CHECK(cudaSetDevice(g->device))))
        goto fail;
    if ((s = api.nvjpegCreateEx(nb, NULL, NULL, MK_NVJ_FLAGS_DEFAULT, &g->h)) != MK_NVJ_STATUS_SUCCESS) {
        g->h = NULL;
        rc = nvj_fail(s, "nvjpegCreateEx");
        goto fail;
    }
    if ((rc = state_create(g)) ||
        (rc = MK_CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking))))
        goto fail;
    if (backend == MK_JPEG_GPU_HARDWARE) {
        /* The hardware decoder takes batches only: batches of one frame, RGB until a frame asks for BGR. */
        if ((s = api.nvjpegDecodeBatchedInitialize(g->h, g->st, 1, 1, MK_NVJ_OUTPUT_RGBI)) !=
            MK_NVJ_STATUS_SUCCESS) {
            rc = nvj_fail(s, "nvjpegDecodeBatchedInitialize");
            goto fail;
        }
        g->batched_fmt = MK_NVJ_OUTPUT_RGBI;
    }
    *out = g;
    return 0;
fail:
    mk_jpeg_gpu_close_cuda(g);
    return rc;
}

extern "C" mk_jpeg_gpu_backend_t mk_jpeg_gpu_backend_cuda(const mk_jpeg_gpu_t *g)
{
    return g->backend;
}

extern "C" int mk_jpeg_gpu_decode_cuda(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, mk_image_t *dst)
{
    const unsigned char *data = (const unsigned char *)jpeg;
    int rc, s;
    if ((rc = MK_CUDA_CHECK(cudaSetDevice(g->device))))
        return rc;
    if (!g->st && (rc = state_create(g)))
        return rc;
    int nc = 0, sub = 0, ws[MK_NVJ_MAX_COMPONENT] = {0}, hs[MK_NVJ_MAX_COMPONENT] = {0};
    if ((s = api.nvjpegGetImageInfo(g->h, data, len, &nc, &sub, ws, hs)) != MK_NVJ_STATUS_SUCCESS)
        return nvj_fail(s, "nvjpegGetImageInfo");
    if (nc != 1 && nc != 3)
        return mk_err_set(MK_EUNSUPPORTED, "nvJPEG: a JPEG of %d components (gray and YCbCr only)", nc);
    if (ws[0] != dst->width || hs[0] != dst->height)
        return mk_err_set(MK_EFORMAT, "nvJPEG reads the JPEG as %dx%d, the output is %dx%d", ws[0], hs[0],
                          dst->width, dst->height);
    if (g->buf_w < dst->width || g->buf_h < dst->height) {
        int w = g->buf_w > dst->width ? g->buf_w : dst->width, h = g->buf_h > dst->height ? g->buf_h : dst->height;
        /* the stream is idle: every decode waits for its copy */
        if (g->buf)
            cudaFree(g->buf);
        g->buf = NULL;
        g->buf_w = g->buf_h = 0;
        if ((rc = MK_CUDA_CHECK(cudaMallocPitch((void **)&g->buf, &g->buf_pitch, (size_t)w * 3, (size_t)h))))
            return mk_err_wrap(rc, "nvJPEG output buffer of %dx%d", w, h);
        g->buf_w = w;
        g->buf_h = h;
    }
    mk_nvj_image_t img;
    memset(&img, 0, sizeof img);
    img.channel[0] = g->buf;
    img.pitch[0] = g->buf_pitch;
    int fmt = dst->format == MK_FMT_BGR ? MK_NVJ_OUTPUT_BGRI : MK_NVJ_OUTPUT_RGBI;
    if (g->backend == MK_JPEG_GPU_HARDWARE) {
        if (g->batched_fmt != fmt) {
            /* another output format: a fresh state rather than a second initialisation of the same one */
            if (g->batched_fmt >= 0) {
                api.nvjpegJpegStateDestroy(g->st);
                g->st = NULL;
                if ((rc = state_create(g)))
                    return rc;
            }
            if ((s = api.nvjpegDecodeBatchedInitialize(g->h, g->st, 1, 1, fmt)) != MK_NVJ_STATUS_SUCCESS)
                return nvj_fail(s, "nvjpegDecodeBatchedInitialize");
            g->batched_fmt = fmt;
        }
        const unsigned char *d[1] = {data};
        size_t l[1] = {len};
        s = api.nvjpegDecodeBatched(g->h, g->st, d, l, &img, g->stream);
        if (s != MK_NVJ_STATUS_SUCCESS) {
            rc = nvj_fail(s, "nvjpegDecodeBatched");
            reset(g);
            return rc;
        }
    } else {
        s = api.nvjpegDecode(g->h, g->st, data, len, fmt, &img, g->stream);
        if (s != MK_NVJ_STATUS_SUCCESS) {
            rc = nvj_fail(s, "nvjpegDecode");
            reset(g);
            return rc;
        }
    }
    if ((rc = MK_CUDA_CHECK(cudaMemcpy2DAsync(dst->data, dst->pitch, g->buf, g->buf_pitch, (size_t)dst->width * 3,
                                              (size_t)dst->height, cudaMemcpyDeviceToHost, g->stream))) ||
        (rc = MK_CUDA_CHECK(cudaStreamSynchronize(g->stream)))) {
        reset(g);
        return rc;
    }
    return 0;
}
