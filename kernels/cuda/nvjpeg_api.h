/* nvjpeg_api: our own declarations of the part of nvJPEG (CUDA Toolkit) that kernels/cuda/jpeg_gpu_cuda.cu uses,
 * so that the CUDA code compiles where the toolkit has no nvjpeg.h and no libnvjpeg (the development and CI
 * machines): libnvjpeg is opened at run time (dlopen) and these functions are looked up by name (dlsym).
 *
 * They mirror nvjpeg.h of CUDA 13 (the values and layouts are those of nvJPEG's documented API, unchanged since
 * CUDA 11). tests/bench/nvjpeg_abi_check.c includes the real <nvjpeg.h> beside this file and checks every constant,
 * the layout of nvjpegImage_t and each function's parameter list (MK_NVJ_FUNCS with the real types) at compile
 * time; it is built on the GPU machine only, like tests/bench/nvjpeg_bench.c. Change both together.
 *
 * C and C++ (nvcc); no nvJPEG header needed. */
#ifndef MK_NVJPEG_API_H
#define MK_NVJPEG_API_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* nvjpegStatus_t */
enum {
    MK_NVJ_STATUS_SUCCESS = 0,
    MK_NVJ_STATUS_NOT_INITIALIZED = 1,
    MK_NVJ_STATUS_INVALID_PARAMETER = 2,
    MK_NVJ_STATUS_BAD_JPEG = 3,
    MK_NVJ_STATUS_JPEG_NOT_SUPPORTED = 4,
    MK_NVJ_STATUS_ALLOCATOR_FAILURE = 5,
    MK_NVJ_STATUS_EXECUTION_FAILED = 6,
    MK_NVJ_STATUS_ARCH_MISMATCH = 7,
    MK_NVJ_STATUS_INTERNAL_ERROR = 8,
    MK_NVJ_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
    MK_NVJ_STATUS_INCOMPLETE_BITSTREAM = 10,
};

/* nvjpegBackend_t */
enum {
    MK_NVJ_BACKEND_DEFAULT = 0,
    MK_NVJ_BACKEND_HYBRID = 1,     /* Huffman decoding on the CPU (the calling thread), the rest on the GPU */
    MK_NVJ_BACKEND_GPU_HYBRID = 2, /* Huffman decoding on the GPU too */
    MK_NVJ_BACKEND_HARDWARE = 3,   /* the GPU's JPEG engine (A100, H100, ...); batched API only */
};

/* nvjpegOutputFormat_t */
enum {
    MK_NVJ_OUTPUT_UNCHANGED = 0,
    MK_NVJ_OUTPUT_YUV = 1,
    MK_NVJ_OUTPUT_Y = 2,
    MK_NVJ_OUTPUT_RGB = 3,  /* planar */
    MK_NVJ_OUTPUT_BGR = 4,  /* planar */
    MK_NVJ_OUTPUT_RGBI = 5, /* interleaved, in channel[0] */
    MK_NVJ_OUTPUT_BGRI = 6, /* interleaved, in channel[0] */
};

/* NVJPEG_FLAGS_DEFAULT, NVJPEG_MAX_COMPONENT */
#define MK_NVJ_FLAGS_DEFAULT 0u
#define MK_NVJ_MAX_COMPONENT 4

/* libraryPropertyType (library_types.h), for nvjpegGetProperty */
enum { MK_NVJ_MAJOR_VERSION = 0, MK_NVJ_MINOR_VERSION = 1, MK_NVJ_PATCH_LEVEL = 2 };

/* nvjpegImage_t */
typedef struct {
    unsigned char *channel[MK_NVJ_MAX_COMPONENT];
    size_t pitch[MK_NVJ_MAX_COMPONENT];
} mk_nvj_image_t;

/* The types in the functions' parameter lists. nvjpeg.h declares the handles as pointers to the incomplete structs
 * nvjpegHandle and nvjpegJpegState; the enums travel as int (the same size, checked by the ABI check).
 * nvjpeg_abi_check.c defines these names as the real types before including this file. */
#ifndef MK_NVJ_T_STATUS
#define MK_NVJ_T_STATUS int
#define MK_NVJ_T_BACKEND int
#define MK_NVJ_T_OUTPUT int
#define MK_NVJ_T_SUBSAMPLING int
#define MK_NVJ_T_PROPERTY int
#define MK_NVJ_T_HANDLE struct nvjpegHandle *
#define MK_NVJ_T_STATE struct nvjpegJpegState *
#define MK_NVJ_T_DEV_ALLOCATOR void
#define MK_NVJ_T_PINNED_ALLOCATOR void
#define MK_NVJ_T_IMAGE mk_nvj_image_t
#endif

/* X(name, parameter list) for each function used; all return nvjpegStatus_t (MK_NVJ_T_STATUS). */
#define MK_NVJ_FUNCS(X)                                                                                        \
    X(nvjpegGetProperty, (MK_NVJ_T_PROPERTY type, int *value))                                                 \
    X(nvjpegCreateEx, (MK_NVJ_T_BACKEND backend, MK_NVJ_T_DEV_ALLOCATOR *dev_allocator,                        \
                       MK_NVJ_T_PINNED_ALLOCATOR *pinned_allocator, unsigned int flags, MK_NVJ_T_HANDLE *handle)) \
    X(nvjpegDestroy, (MK_NVJ_T_HANDLE handle))                                                                 \
    X(nvjpegJpegStateCreate, (MK_NVJ_T_HANDLE handle, MK_NVJ_T_STATE *jpeg_handle))                            \
    X(nvjpegJpegStateDestroy, (MK_NVJ_T_STATE jpeg_handle))                                                    \
    X(nvjpegGetImageInfo, (MK_NVJ_T_HANDLE handle, const unsigned char *data, size_t length, int *nComponents, \
                           MK_NVJ_T_SUBSAMPLING *subsampling, int *widths, int *heights))                      \
    X(nvjpegDecode, (MK_NVJ_T_HANDLE handle, MK_NVJ_T_STATE jpeg_handle, const unsigned char *data,            \
                     size_t length, MK_NVJ_T_OUTPUT output_format, MK_NVJ_T_IMAGE *destination,                \
                     cudaStream_t stream))                                                                     \
    X(nvjpegDecodeBatchedInitialize, (MK_NVJ_T_HANDLE handle, MK_NVJ_T_STATE jpeg_handle, int batch_size,      \
                                      int max_cpu_threads, MK_NVJ_T_OUTPUT output_format))                     \
    X(nvjpegDecodeBatched, (MK_NVJ_T_HANDLE handle, MK_NVJ_T_STATE jpeg_handle,                                \
                            const unsigned char *const *data, const size_t *lengths,                           \
                            MK_NVJ_T_IMAGE *destinations, cudaStream_t stream))

#endif
