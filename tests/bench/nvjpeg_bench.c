/* nvjpeg_bench: is nvJPEG (CUDA Toolkit) worth it for maskd's MJPEG frames? Decodes the JPEG frames of a
 * directory (DIR/frame0000.jpg, frame0001.jpg, ... as `masktool bench pipeline --dump-jpeg DIR` writes them) to
 * interleaved RGB in device memory with each nvJPEG backend the library offers, and prints JSON:
 *   latency_us     one frame at a time, each decode synchronised (the time a frame waits for its pixels),
 *                  median and p99 over the runs after a warm-up;
 *   fps_batched    the hardware decoder fed batches of B frames (B = 8, 32), frames per second;
 *   max_abs_diff   the largest difference of any output byte from the first backend's output of the same frame
 *                  (the backends must agree to within the IDCT's rounding).
 * Not part of the build: the development and CI machines have no libnvjpeg. Build it where CUDA has it:
 *   cc -std=c11 -O2 -Wall -Wextra -I/usr/local/cuda/include tests/bench/nvjpeg_bench.c \
 *      -L/usr/local/cuda/lib64 -lnvjpeg -lcudart -o nvjpeg_bench
 * and run `nvjpeg_bench DIR [RUNS]`. The CPU side of the comparison is the decode pool's rate that
 * `masktool bench pipeline` reports ("decode"). */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_FRAMES = 512, WARMUP = 20 };

typedef struct {
    unsigned char *data[MAX_FRAMES];
    size_t len[MAX_FRAMES];
    int n, w, h;
} frames_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define NVJ(call)                                                                                                \
    do {                                                                                                         \
        nvjpegStatus_t st_ = (call);                                                                             \
        if (st_ != NVJPEG_STATUS_SUCCESS) {                                                                      \
            snprintf(err, errlen, "%s: nvJPEG status %d", #call, (int)st_);                                      \
            goto done;                                                                                           \
        }                                                                                                        \
    } while (0)
#define CU(call)                                                                                                 \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) {                                                                                 \
            snprintf(err, errlen, "%s: %s", #call, cudaGetErrorString(e_));                                      \
            goto done;                                                                                           \
        }                                                                                                        \
    } while (0)

static int load(const char *dir, frames_t *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < MAX_FRAMES; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/frame%04d.jpg", dir, i);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            break;
        fseek(fp, 0, SEEK_END);
        long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        f->data[i] = n > 0 ? malloc((size_t)n) : NULL;
        if (!f->data[i] || fread(f->data[i], 1, (size_t)n, fp) != (size_t)n) {
            fclose(fp);
            fprintf(stderr, "nvjpeg_bench: cannot read %s\n", path);
            return -1;
        }
        fclose(fp);
        f->len[i] = (size_t)n;
        f->n = i + 1;
    }
    if (f->n == 0) {
        fprintf(stderr, "nvjpeg_bench: no %s/frame0000.jpg\n", dir);
        return -1;
    }
    return 0;
}

typedef struct {
    const char *name;
    nvjpegBackend_t backend;
    int batched; /* the hardware backend decodes through the batched API only */
} backend_t;

/* One backend: latency (one frame at a time), the batched rate (hardware), and the difference from ref (frame 0
 * decoded by the first backend; NULL: this is the first, keep its output there). */
static int run_backend(const frames_t *f, const backend_t *b, int runs, uint8_t *ref, char *err, size_t errlen)
{
    nvjpegHandle_t h = NULL;
    nvjpegJpegState_t st = NULL;
    cudaStream_t s = NULL;
    unsigned char *out = NULL;
    double *lat = NULL;
    uint8_t *host = NULL;
    const int maxb = 32;
    const size_t plane = (size_t)f->w * f->h * 3;
    int rc = -1, diff = -1;
    double fps[2] = {0, 0};
    err[0] = 0;
    NVJ(nvjpegCreateEx(b->backend, NULL, NULL, NVJPEG_FLAGS_DEFAULT, &h));
    NVJ(nvjpegJpegStateCreate(h, &st));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&out, plane * maxb));
    nvjpegImage_t img[32];
    memset(img, 0, sizeof img);
    for (int i = 0; i < maxb; i++) {
        img[i].channel[0] = out + plane * (size_t)i;
        img[i].pitch[0] = (size_t)f->w * 3;
    }
    if (!(lat = malloc(sizeof *lat * (size_t)runs)) || !(host = malloc(plane))) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (b->batched)
        NVJ(nvjpegDecodeBatchedInitialize(h, st, 1, 1, NVJPEG_OUTPUT_RGBI));
    for (int i = -WARMUP; i < runs; i++) {
        int k = (i + WARMUP) % f->n;
        double t0 = now_us();
        if (b->batched) {
            const unsigned char *d[1] = {f->data[k]};
            NVJ(nvjpegDecodeBatched(h, st, d, &f->len[k], img, s));
        } else {
            NVJ(nvjpegDecode(h, st, f->data[k], f->len[k], NVJPEG_OUTPUT_RGBI, img, s));
        }
        CU(cudaStreamSynchronize(s));
        if (i >= 0)
            lat[i] = now_us() - t0;
    }
    /* frame 0 against the reference */
    if (b->batched) {
        const unsigned char *d[1] = {f->data[0]};
        NVJ(nvjpegDecodeBatched(h, st, d, &f->len[0], img, s));
    } else {
        NVJ(nvjpegDecode(h, st, f->data[0], f->len[0], NVJPEG_OUTPUT_RGBI, img, s));
    }
    CU(cudaStreamSynchronize(s));
    CU(cudaMemcpy(host, out, plane, cudaMemcpyDeviceToHost));
    if (ref[plane]) { /* the flag byte after the plane: a reference is there */
        diff = 0;
        for (size_t i = 0; i < plane; i++) {
            int d = abs((int)host[i] - (int)ref[i]);
            diff = d > diff ? d : diff;
        }
    } else {
        memcpy(ref, host, plane);
        ref[plane] = 1;
        diff = 0;
    }
    if (b->batched) {
        const int sizes[2] = {8, 32};
        for (int j = 0; j < 2; j++) {
            int bs = sizes[j], rounds = runs / 4 > 10 ? runs / 4 : 10;
            nvjpegJpegStateDestroy(st);
            st = NULL;
            NVJ(nvjpegJpegStateCreate(h, &st));
            NVJ(nvjpegDecodeBatchedInitialize(h, st, bs, 1, NVJPEG_OUTPUT_RGBI));
            const unsigned char *d[32];
            size_t l[32];
            double t0 = 0;
            for (int r = -2; r < rounds; r++) {
                if (r == 0)
                    t0 = now_us();
                for (int i = 0; i < bs; i++) {
                    int k = (r * bs + i + 2 * bs) % f->n;
                    d[i] = f->data[k];
                    l[i] = f->len[k];
                }
                NVJ(nvjpegDecodeBatched(h, st, d, l, img, s));
                CU(cudaStreamSynchronize(s));
            }
            fps[j] = (double)bs * rounds / ((now_us() - t0) / 1e6);
        }
    }
    qsort(lat, (size_t)runs, sizeof *lat, cmp_double);
    printf("    {\"backend\": \"%s\", \"latency_us\": {\"median\": %.1f, \"p99\": %.1f, \"min\": %.1f}, "
           "\"fps_one_at_a_time\": %.1f, \"fps_batched\": {\"8\": %.1f, \"32\": %.1f}, \"max_abs_diff\": %d}",
           b->name, lat[(runs - 1) / 2], lat[(runs * 99) / 100 < runs ? (runs * 99) / 100 : runs - 1], lat[0],
           1e6 / lat[(runs - 1) / 2], fps[0], fps[1], diff);
    rc = 0;
done:
    if (st)
        nvjpegJpegStateDestroy(st);
    if (h)
        nvjpegDestroy(h);
    if (out)
        cudaFree(out);
    if (s)
        cudaStreamDestroy(s);
    free(lat);
    free(host);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nvjpeg_bench DIR [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 200;
    if (runs < 10)
        runs = 10;
    frames_t f;
    if (load(argv[1], &f))
        return 1;
    char err[256] = "";
    int nc = 0;
    nvjpegChromaSubsampling_t sub;
    int ws[NVJPEG_MAX_COMPONENT], hs[NVJPEG_MAX_COMPONENT];
    nvjpegHandle_t h;
    if (nvjpegCreateSimple(&h) != NVJPEG_STATUS_SUCCESS ||
        nvjpegGetImageInfo(h, f.data[0], f.len[0], &nc, &sub, ws, hs) != NVJPEG_STATUS_SUCCESS) {
        fprintf(stderr, "nvjpeg_bench: nvJPEG cannot read %s/frame0000.jpg\n", argv[1]);
        return 1;
    }
    nvjpegDestroy(h);
    f.w = ws[0];
    f.h = hs[0];
    size_t bytes = 0;
    for (int i = 0; i < f.n; i++)
        bytes += f.len[i];
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "nvjpeg_bench: no CUDA device\n");
        return 1;
    }
    uint8_t *ref = calloc((size_t)f.w * f.h * 3 + 1, 1);
    if (!ref)
        return 1;
    printf("{\n  \"tool\": \"nvjpeg_bench\", \"device\": \"%s\", \"frames\": %d, \"size\": \"%dx%d\", "
           "\"components\": %d, \"subsampling\": %d, \"mean_bytes\": %.0f, \"runs\": %d,\n  \"results\": [\n",
           prop.name, f.n, f.w, f.h, nc, (int)sub, (double)bytes / f.n, runs);
    const backend_t be[] = {{"hybrid (CPU Huffman, GPU IDCT)", NVJPEG_BACKEND_HYBRID, 0},
                            {"gpu_hybrid (GPU Huffman)", NVJPEG_BACKEND_GPU_HYBRID, 0},
                            {"hardware (batched API)", NVJPEG_BACKEND_HARDWARE, 1}};
    int first = 1, failed = 0;
    for (size_t i = 0; i < sizeof be / sizeof be[0]; i++) {
        if (!first)
            printf(",\n");
        if (run_backend(&f, &be[i], runs, ref, err, sizeof err)) {
            printf("    {\"backend\": \"%s\", \"error\": \"%s\"}", be[i].name, err);
            failed++;
        }
        first = 0;
    }
    printf("\n  ]\n}\n");
    free(ref);
    for (int i = 0; i < f.n; i++)
        free(f.data[i]);
    return failed == (int)(sizeof be / sizeof be[0]);
}
