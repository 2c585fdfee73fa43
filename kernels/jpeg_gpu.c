/* jpeg_gpu: argument checks, the backend choice with its probe image, and the stubs of builds without CUDA. */
#include "jpeg_gpu.h"

#include "backend.h"
#include "ctx.h"
#include "errors.h"
#include "imageio.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mk_jpeg_gpu_backend_name(mk_jpeg_gpu_backend_t b)
{
    switch (b) {
    case MK_JPEG_GPU_AUTO: return "nvjpeg";
    case MK_JPEG_GPU_HARDWARE: return "nvjpeg-hardware";
    case MK_JPEG_GPU_HYBRID: return "nvjpeg-hybrid";
    case MK_JPEG_GPU_GPU_HYBRID: return "nvjpeg-gpu-hybrid";
    }
    return "nvjpeg-?";
}

#ifdef MK_HAVE_CUDA

int mk_jpeg_gpu_available(char *why, size_t why_len)
{
    char dev[256] = "";
    if (mk_jpeg_gpu_load_cuda()) {
        if (why && why_len)
            snprintf(why, why_len, "%s", mk_err_msg());
        return 0;
    }
    if (mk_cuda_device_count(dev, sizeof dev) <= 0) {
        if (why && why_len)
            snprintf(why, why_len, "nvJPEG unavailable: no usable CUDA device: %s", dev);
        return 0;
    }
    return 1;
}

const char *mk_jpeg_gpu_library(void)
{
    return mk_jpeg_gpu_library_cuda();
}

/* The probe: 320 x 240 RGB (a camera's smallest frame) with R a horizontal ramp, B a vertical one and G between
 * them — smooth, so that nvJPEG's and libjpeg-turbo's different IDCT and chroma upsampling stay within a few
 * levels, and different in R and B, so that swapped channels show — JPEG-encoded (quality 90, 4:2:0) and decoded
 * by TurboJPEG as the reference. */
enum { PROBE_W = 320, PROBE_H = 240 };

static int make_probe(void **jpeg, size_t *len, mk_image_t *ref)
{
    mk_image_t img = mk_image_desc(PROBE_W, PROBE_H, MK_FMT_RGB, MK_U8);
    int rc = mk_image_alloc(NULL, &img, MK_MEM_HOST);
    if (rc)
        return rc;
    for (int y = 0; y < PROBE_H; y++) {
        uint8_t *row = mk_image_row(&img, 0, y);
        for (int x = 0; x < PROBE_W; x++) {
            row[3 * x] = (uint8_t)(16 + x * 220 / (PROBE_W - 1));
            row[3 * x + 2] = (uint8_t)(230 - y * 200 / (PROBE_H - 1));
            row[3 * x + 1] = (uint8_t)((row[3 * x] + row[3 * x + 2]) / 2);
        }
    }
    *jpeg = NULL;
    if (!(rc = mk_imageio_encode(&img, MK_FILE_JPEG, 90, jpeg, len)))
        rc = mk_imageio_decode(*jpeg, *len, MK_FMT_RGB, ref, "nvJPEG probe image");
    mk_image_free(NULL, &img);
    if (rc) {
        free(*jpeg);
        *jpeg = NULL;
    }
    return rc;
}

/* Decodes the probe in `format` and compares it with TurboJPEG's RGB. */
static int probe_check(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, const mk_image_t *ref, mk_format_t format)
{
    mk_image_t out = mk_image_desc(PROBE_W, PROBE_H, format, MK_U8);
    int rc = mk_image_alloc(NULL, &out, MK_MEM_HOST);
    if (rc)
        return rc;
    if ((rc = mk_jpeg_gpu_decode_cuda(g, jpeg, len, &out))) {
        mk_image_free(NULL, &out);
        return mk_err_wrap(rc, "the probe image in %s order", mk_format_name(format));
    }
    int bgr = format == MK_FMT_BGR, maxd = 0;
    double sum = 0;
    for (int y = 0; y < PROBE_H; y++) {
        const uint8_t *a = mk_image_row(&out, 0, y), *b = mk_image_row(ref, 0, y);
        for (int x = 0; x < PROBE_W; x++)
            for (int c = 0; c < 3; c++) {
                int d = abs((int)a[3 * x + (bgr ? 2 - c : c)] - (int)b[3 * x + c]);
                sum += d;
                maxd = d > maxd ? d : maxd;
            }
    }
    mk_image_free(NULL, &out);
    double mean = sum / (PROBE_W * PROBE_H * 3);
    if (mean > 6.0 || maxd > 48)
        return mk_err_set(MK_EUNSUPPORTED,
                          "the probe image decodes wrongly in %s order (mean difference %.2f, max %d from "
                          "TurboJPEG's): nvJPEG and kernels/cuda/nvjpeg_api.h disagree?",
                          mk_format_name(format), mean, maxd);
    return 0;
}

int mk_jpeg_gpu_create(mk_jpeg_gpu_backend_t backend, mk_jpeg_gpu_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_jpeg_gpu_create: NULL output");
    *out = NULL;
    if ((unsigned)backend > MK_JPEG_GPU_GPU_HYBRID)
        return mk_err_set(MK_EINVAL, "mk_jpeg_gpu_create: unknown backend %d", (int)backend);
    int rc = mk_jpeg_gpu_load_cuda();
    if (rc)
        return rc;
    char dev[256] = "";
    if (mk_cuda_device_count(dev, sizeof dev) <= 0)
        return mk_err_set(MK_ENODEV, "nvJPEG unavailable: no usable CUDA device: %s", dev);
    void *jpeg;
    size_t len;
    mk_image_t ref = {0};
    if ((rc = make_probe(&jpeg, &len, &ref)))
        return mk_err_wrap(rc, "nvJPEG probe image");
    const mk_jpeg_gpu_backend_t all[] = {MK_JPEG_GPU_HARDWARE, MK_JPEG_GPU_HYBRID, MK_JPEG_GPU_GPU_HYBRID};
    const mk_jpeg_gpu_backend_t *order = backend == MK_JPEG_GPU_AUTO ? all : &backend;
    int n = backend == MK_JPEG_GPU_AUTO ? 3 : 1;
    char tried[1200] = "";
    size_t used = 0;
    mk_jpeg_gpu_t *g = NULL;
    for (int i = 0; i < n; i++) {
        if (!(rc = mk_jpeg_gpu_open_cuda(order[i], &g)) && !(rc = probe_check(g, jpeg, len, &ref, MK_FMT_RGB)))
            rc = probe_check(g, jpeg, len, &ref, MK_FMT_BGR);
        if (!rc)
            break;
        mk_jpeg_gpu_close_cuda(g);
        g = NULL;
        if (used < sizeof tried)
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s: %s", i ? "; " : "",
                                     mk_jpeg_gpu_backend_name(order[i]), mk_err_msg());
    }
    free(jpeg);
    mk_image_free(NULL, &ref);
    if (!g)
        return n == 1 ? mk_err_set(rc, "nvJPEG: %s", tried)
                      : mk_err_set(MK_EUNSUPPORTED, "nvJPEG: no backend works (%s)", tried);
    if (tried[0])
        MK_LOG_RL(60000, MK_LOG_INFO, "nvJPEG: %s backend in use; unusable: %s",
                  mk_jpeg_gpu_backend_name(mk_jpeg_gpu_backend_cuda(g)), tried);
    *out = g;
    return 0;
}

void mk_jpeg_gpu_destroy(mk_jpeg_gpu_t *g)
{
    mk_jpeg_gpu_close_cuda(g);
}

mk_jpeg_gpu_backend_t mk_jpeg_gpu_backend(const mk_jpeg_gpu_t *g)
{
    return g ? mk_jpeg_gpu_backend_cuda(g) : MK_JPEG_GPU_AUTO;
}

int mk_jpeg_gpu_decode(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, mk_image_t *dst)
{
    if (!g || !jpeg || !len || !dst)
        return mk_err_set(MK_EINVAL, "mk_jpeg_gpu_decode: NULL or empty argument");
    int rc = mk_image_check(dst, "nvJPEG output");
    if (rc)
        return rc;
    if (dst->mem == MK_MEM_DEVICE || dst->dtype != MK_U8 || (dst->format != MK_FMT_RGB && dst->format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "nvJPEG output must be host u8 rgb or bgr, not %s %s in %s memory",
                          mk_dtype_name(dst->dtype), mk_format_name(dst->format), mk_mem_name(dst->mem));
    return mk_jpeg_gpu_decode_cuda(g, jpeg, len, dst);
}

#else /* no CUDA backend: nothing opens */

static int no_cuda(char *why, size_t why_len)
{
    char b[256] = "";
    mk_cuda_device_count(b, sizeof b); /* says why there is no CUDA */
    if (why && why_len)
        snprintf(why, why_len, "nvJPEG unavailable: %s", b);
    return 0;
}

int mk_jpeg_gpu_available(char *why, size_t why_len)
{
    return no_cuda(why, why_len);
}

const char *mk_jpeg_gpu_library(void)
{
    return "";
}

int mk_jpeg_gpu_create(mk_jpeg_gpu_backend_t backend, mk_jpeg_gpu_t **out)
{
    (void)backend;
    if (out)
        *out = NULL;
    char why[300];
    no_cuda(why, sizeof why);
    return mk_err_set(MK_EUNSUPPORTED, "%s", why);
}

void mk_jpeg_gpu_destroy(mk_jpeg_gpu_t *g)
{
    (void)g;
}

mk_jpeg_gpu_backend_t mk_jpeg_gpu_backend(const mk_jpeg_gpu_t *g)
{
    (void)g;
    return MK_JPEG_GPU_AUTO;
}

int mk_jpeg_gpu_decode(mk_jpeg_gpu_t *g, const void *jpeg, size_t len, mk_image_t *dst)
{
    (void)g;
    (void)jpeg;
    (void)len;
    (void)dst;
    char why[300];
    no_cuda(why, sizeof why);
    return mk_err_set(MK_EUNSUPPORTED, "%s", why);
}

#endif
