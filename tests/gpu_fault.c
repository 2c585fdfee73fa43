/* gpu_fault: a test-only LD_PRELOAD library that breaks the GPU context of the process it is loaded into, to test
 * what maskd does when a CUDA call fails with a sticky error (tests/test_maskd.py, group gpulost).
 *
 * MASKD_TEST_GPU_FAULT_FILE=PATH: once PATH exists (looked for every 20 ms), a thread of this library launches,
 * through the driver API in the device's primary context (the one the CUDA runtime of maskd uses), a kernel that
 * stores to address 8. The kernel faults with CUDA_ERROR_ILLEGAL_ADDRESS, which leaves the context unusable: every later
 * CUDA call of the process fails the same way, as after a real kernel fault. Nothing of maskd is changed; without
 * the variable the library does nothing. gpu_fault_now() makes the fault at once (test_gpu_lost loads the library
 * with dlopen and calls it). The driver is opened with dlopen, so building this needs no CUDA. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_current_fn)(void *);
typedef int (*load_data_fn)(void **, const void *);
typedef int (*get_function_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);
typedef int (*sync_fn)(void);

static const char ptx[] = ".version 7.0\n"
                          ".target sm_50\n"
                          ".address_size 64\n"
                          ".visible .entry fault()\n"
                          "{\n"
                          "    .reg .b64 %rd<2>;\n"
                          "    .reg .b32 %r<2>;\n"
                          "    mov.u64 %rd1, 8;\n"
                          "    mov.u32 %r1, 1;\n"
                          "    st.global.u32 [%rd1], %r1;\n"
                          "    ret;\n"
                          "}\n";

static const char *trigger;

/* Makes the fault now, on the calling thread; the driver's result of the faulting kernel (700: illegal address), or
 * -1 when there is no driver or the kernel could not be launched. Also for tests that load this library with
 * dlopen and call it themselves. */
int gpu_fault_now(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "gpu_fault: no CUDA driver: %s\n", dlerror());
        return -1;
    }
    init_fn init = (init_fn)dlsym(lib, "cuInit");
    device_get_fn device_get = (device_get_fn)dlsym(lib, "cuDeviceGet");
    retain_fn retain = (retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
    set_current_fn set_current = (set_current_fn)dlsym(lib, "cuCtxSetCurrent");
    load_data_fn load_data = (load_data_fn)dlsym(lib, "cuModuleLoadData");
    get_function_fn get_function = (get_function_fn)dlsym(lib, "cuModuleGetFunction");
    launch_fn launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
    sync_fn sync = (sync_fn)dlsym(lib, "cuCtxSynchronize");
    if (!init || !device_get || !retain || !set_current || !load_data || !get_function || !launch || !sync) {
        fprintf(stderr, "gpu_fault: the CUDA driver lacks a function\n");
        return -1;
    }
    int dev = 0, rc;
    void *ctx = NULL, *mod = NULL, *fn = NULL;
    if ((rc = init(0)) || (rc = device_get(&dev, 0)) || (rc = retain(&ctx, dev)) || (rc = set_current(ctx)) ||
        (rc = load_data(&mod, ptx)) || (rc = get_function(&fn, mod, "fault")) ||
        (rc = launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))) {
        fprintf(stderr, "gpu_fault: could not launch the faulting kernel: CUresult %d\n", rc);
        return -1;
    }
    rc = sync();
    fprintf(stderr, "gpu_fault: the faulting kernel ended with CUresult %d (700: illegal address)\n", rc);
    return rc;
}

static void *fault_main(void *arg)
{
    (void)arg;
    while (access(trigger, F_OK) != 0) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    gpu_fault_now();
    return NULL;
}

__attribute__((constructor)) static void gpu_fault_init(void)
{
    trigger = getenv("MASKD_TEST_GPU_FAULT_FILE");
    if (!trigger || !*trigger)
        return;
    /* the thread takes no signal: they stay for the threads of the process (maskd waits for them with sigwait) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, fault_main, NULL) == 0)
        pthread_detach(t);
    else
        fprintf(stderr, "gpu_fault: no thread\n");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
