/* nvjpeg_abi_check: checks at compile time that our declarations of nvJPEG (kernels/cuda/nvjpeg_api.h, used by
 * kernels/cuda/jpeg_gpu_cuda.cu through dlopen/dlsym) equal the real <nvjpeg.h> of the CUDA toolkit: every
 * constant, the layout of nvjpegImage_t, and each function's parameter list — MK_NVJ_FUNCS expanded with the real
 * types in place of ours, each function assigned to a pointer of that type (a mismatch is an incompatible pointer
 * type: an error with -Werror, and by default since GCC 14). Run, it prints the library's version.
 *
 * Not part of the build: the development and CI machines have no nvjpeg.h. Build it where CUDA has it (from the
 * repository root):
 *   cc -std=c11 -Wall -Wextra -Werror -I/usr/local/cuda/include -Ikernels/cuda tests/bench/nvjpeg_abi_check.c \
 *      -L/usr/local/cuda/lib64 -lnvjpeg -o nvjpeg_abi_check
 *   LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./nvjpeg_abi_check */
#include <nvjpeg.h>

/* our parameter types, as the real ones */
#define MK_NVJ_T_STATUS nvjpegStatus_t
#define MK_NVJ_T_BACKEND nvjpegBackend_t
#define MK_NVJ_T_OUTPUT nvjpegOutputFormat_t
#define MK_NVJ_T_SUBSAMPLING nvjpegChromaSubsampling_t
#define MK_NVJ_T_PROPERTY libraryPropertyType
#define MK_NVJ_T_HANDLE nvjpegHandle_t
#define MK_NVJ_T_STATE nvjpegJpegState_t
#define MK_NVJ_T_DEV_ALLOCATOR nvjpegDevAllocator_t
#define MK_NVJ_T_PINNED_ALLOCATOR nvjpegPinnedAllocator_t
#define MK_NVJ_T_IMAGE nvjpegImage_t
#include "nvjpeg_api.h"

#include <stddef.h>
#include <stdio.h>

#define SAME(ours, real) _Static_assert((long long)(ours) == (long long)(real), #ours " != " #real)

SAME(MK_NVJ_STATUS_SUCCESS, NVJPEG_STATUS_SUCCESS);
SAME(MK_NVJ_STATUS_NOT_INITIALIZED, NVJPEG_STATUS_NOT_INITIALIZED);
SAME(MK_NVJ_STATUS_INVALID_PARAMETER, NVJPEG_STATUS_INVALID_PARAMETER);
SAME(MK_NVJ_STATUS_BAD_JPEG, NVJPEG_STATUS_BAD_JPEG);
SAME(MK_NVJ_STATUS_JPEG_NOT_SUPPORTED, NVJPEG_STATUS_JPEG_NOT_SUPPORTED);
SAME(MK_NVJ_STATUS_ALLOCATOR_FAILURE, NVJPEG_STATUS_ALLOCATOR_FAILURE);
SAME(MK_NVJ_STATUS_EXECUTION_FAILED, NVJPEG_STATUS_EXECUTION_FAILED);
SAME(MK_NVJ_STATUS_ARCH_MISMATCH, NVJPEG_STATUS_ARCH_MISMATCH);
SAME(MK_NVJ_STATUS_INTERNAL_ERROR, NVJPEG_STATUS_INTERNAL_ERROR);
SAME(MK_NVJ_STATUS_IMPLEMENTATION_NOT_SUPPORTED, NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED);
SAME(MK_NVJ_STATUS_INCOMPLETE_BITSTREAM, NVJPEG_STATUS_INCOMPLETE_BITSTREAM);

SAME(MK_NVJ_BACKEND_DEFAULT, NVJPEG_BACKEND_DEFAULT);
SAME(MK_NVJ_BACKEND_HYBRID, NVJPEG_BACKEND_HYBRID);
SAME(MK_NVJ_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_GPU_HYBRID);
SAME(MK_NVJ_BACKEND_HARDWARE, NVJPEG_BACKEND_HARDWARE);

SAME(MK_NVJ_OUTPUT_UNCHANGED, NVJPEG_OUTPUT_UNCHANGED);
SAME(MK_NVJ_OUTPUT_YUV, NVJPEG_OUTPUT_YUV);
SAME(MK_NVJ_OUTPUT_Y, NVJPEG_OUTPUT_Y);
SAME(MK_NVJ_OUTPUT_RGB, NVJPEG_OUTPUT_RGB);
SAME(MK_NVJ_OUTPUT_BGR, NVJPEG_OUTPUT_BGR);
SAME(MK_NVJ_OUTPUT_RGBI, NVJPEG_OUTPUT_RGBI);
SAME(MK_NVJ_OUTPUT_BGRI, NVJPEG_OUTPUT_BGRI);

SAME(MK_NVJ_FLAGS_DEFAULT, NVJPEG_FLAGS_DEFAULT);
SAME(MK_NVJ_MAX_COMPONENT, NVJPEG_MAX_COMPONENT);
SAME(MK_NVJ_MAJOR_VERSION, MAJOR_VERSION);
SAME(MK_NVJ_MINOR_VERSION, MINOR_VERSION);
SAME(MK_NVJ_PATCH_LEVEL, PATCH_LEVEL);

/* the enums travel as int in our function pointer types */
_Static_assert(sizeof(nvjpegStatus_t) == sizeof(int), "nvjpegStatus_t is not int-sized");
_Static_assert(sizeof(nvjpegBackend_t) == sizeof(int), "nvjpegBackend_t is not int-sized");
_Static_assert(sizeof(nvjpegOutputFormat_t) == sizeof(int), "nvjpegOutputFormat_t is not int-sized");
_Static_assert(sizeof(nvjpegChromaSubsampling_t) == sizeof(int), "nvjpegChromaSubsampling_t is not int-sized");
_Static_assert(sizeof(libraryPropertyType) == sizeof(int), "libraryPropertyType is not int-sized");
/* our handles are pointers to the same incomplete structs */
_Static_assert(__builtin_types_compatible_p(nvjpegHandle_t, struct nvjpegHandle *), "nvjpegHandle_t");
_Static_assert(__builtin_types_compatible_p(nvjpegJpegState_t, struct nvjpegJpegState *), "nvjpegJpegState_t");

/* nvjpegImage_t */
_Static_assert(sizeof(mk_nvj_image_t) == sizeof(nvjpegImage_t), "sizeof nvjpegImage_t");
_Static_assert(offsetof(mk_nvj_image_t, channel) == offsetof(nvjpegImage_t, channel), "nvjpegImage_t.channel");
_Static_assert(offsetof(mk_nvj_image_t, pitch) == offsetof(nvjpegImage_t, pitch), "nvjpegImage_t.pitch");
_Static_assert(sizeof(((mk_nvj_image_t *)0)->channel) == sizeof(((nvjpegImage_t *)0)->channel), "channel[]");
_Static_assert(sizeof(((mk_nvj_image_t *)0)->pitch) == sizeof(((nvjpegImage_t *)0)->pitch), "pitch[]");
_Static_assert(__builtin_types_compatible_p(__typeof__(((nvjpegImage_t *)0)->channel[0]), unsigned char *),
               "channel[0] is unsigned char *");
_Static_assert(__builtin_types_compatible_p(__typeof__(((nvjpegImage_t *)0)->pitch[0]), size_t), "pitch[0] is size_t");

/* the functions: our parameter lists with the real types */
#define CHECK_FN(name, params) static nvjpegStatus_t(*const check_##name) params = name;
MK_NVJ_FUNCS(CHECK_FN)

int main(void)
{
    int v[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++)
        check_nvjpegGetProperty((libraryPropertyType)i, &v[i]);
    /* the other checks exist at compile time; referencing them keeps the compiler quiet */
    int n = (check_nvjpegCreateEx != 0) + (check_nvjpegDestroy != 0) + (check_nvjpegJpegStateCreate != 0) +
            (check_nvjpegJpegStateDestroy != 0) + (check_nvjpegGetImageInfo != 0) + (check_nvjpegDecode != 0) +
            (check_nvjpegDecodeBatchedInitialize != 0) + (check_nvjpegDecodeBatched != 0);
    printf("nvjpeg_abi_check: OK: kernels/cuda/nvjpeg_api.h matches nvjpeg.h (%d functions checked, header "
           "CUDA %d, libnvjpeg %d.%d.%d)\n",
           n + 1, CUDART_VERSION, v[0], v[1], v[2]);
    return 0;
}
