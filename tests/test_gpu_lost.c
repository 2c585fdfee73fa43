/* test_gpu_lost: after a fault in the process's GPU context (made by tests/gpu_fault.c, loaded with dlopen), the
 * next CUDA call fails with a message saying that the context is lost, mk_gpu_lost() reports the first such failure,
 * and the device probe and new CUDA contexts are refused for that reason (not "cannot run this build"); the CPU
 * backend still works. CUDA suite: skips without a GPU. The context stays broken, so this is a process of its own. */
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_ctx_t *cpu, *gpu;

static void test_lost(void **state)
{
    (void)state;
    char why[512] = "";
    assert_int_equal(mk_gpu_lost(why, sizeof why), 0);

    mk_image_t img = mk_image_desc(640, 480, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(gpu, &img, MK_MEM_DEVICE));
    TU_OK(mk_image_memset(gpu, &img, 7));
    TU_OK(mk_ctx_sync(gpu));

    const char *path = getenv("MASKD_GPU_FAULT_LIB");
    assert_non_null(path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("dlopen %s: %s", path, dlerror());
    int (*fault_now)(void) = (int (*)(void))dlsym(lib, "gpu_fault_now");
    assert_non_null(fault_now);
    assert_int_equal(fault_now(), 700); /* CUDA_ERROR_ILLEGAL_ADDRESS */

    /* the next call on the broken context fails and says so */
    int rc = mk_image_memset(gpu, &img, 9);
    if (!rc)
        rc = mk_ctx_sync(gpu);
    assert_int_equal(rc, MK_ECUDA);
    printf("after the fault: %s\n", mk_err_msg());
    assert_non_null(strstr(mk_err_msg(), "cudaErrorIllegalAddress"));
    assert_non_null(strstr(mk_err_msg(), "the GPU context of this process is lost"));

    assert_int_equal(mk_gpu_lost(why, sizeof why), 1);
    printf("mk_gpu_lost: %s\n", why);
    assert_non_null(strstr(why, "cudaErrorIllegalAddress"));

    /* the probe and new contexts give that reason */
    assert_int_equal(mk_cuda_device_count(why, sizeof why), 0);
    assert_non_null(strstr(why, "the GPU context of this process was lost"));
    assert_null(strstr(why, "cannot run this build"));
    mk_ctx_t *again = NULL;
    assert_int_equal(mk_ctx_create(MK_BACKEND_CUDA, &again), MK_ENODEV);
    assert_null(again);
    assert_non_null(strstr(mk_err_msg(), "was lost"));
    /* auto falls back to the CPU, which still works */
    TU_OK(mk_ctx_create(MK_BACKEND_AUTO, &again));
    assert_int_equal(mk_ctx_backend(again), MK_BACKEND_CPU);
    mk_image_t h = mk_image_desc(64, 48, MK_FMT_GRAY, MK_U8);
    TU_OK(mk_image_alloc(cpu, &h, MK_MEM_HOST));
    TU_OK(mk_image_memset(cpu, &h, 3));
    mk_image_free(cpu, &h);
    mk_ctx_destroy(again);
    mk_image_free(gpu, &img); /* frees what it can on a broken context, without crashing */
}

int main(void)
{
    int start = tu_cuda_main("the lost-context tests", &cpu, &gpu);
    if (start)
        return start;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lost)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(gpu); /* on a broken context: must not crash or hang */
    mk_ctx_destroy(cpu);
    return rc;
}
