/* test_detect: the whole detector — TurboJPEG decode, Darknet letterbox, forward pass, decode + NMS — against the
 * detections Darknet printed for the reference images (reference/darknet/MODEL/NAME.json), on the CPU and, in the
 * cuda suite (argument "cuda"), on the GPU in FP32. */
#include "masktool_detect.h"
#include "testutil.h"
#include "yolo_testutil.h"

#include "darknet.h"
#include "imageio.h"

#include <unistd.h>

static mk_ctx_t *ctx;

/* The weights Darknet used for each reference model (relative to the data folder). */
static const char *weights_of(const char *model)
{
    static const struct {
        const char *model, *weights;
    } w[] = {
        {"yolo-fastest-1.1-body", "models/yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights"},
        {"yolo-fastest-1.1-coco", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1.weights"},
        {"yolo-fastest-1.1-xl", "models/yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.weights"},
        {"yolov3-tiny-random", "reference/darknet/random-weights/yolov3-tiny-random.weights"},
        {"yolov4-tiny-random", "reference/darknet/random-weights/yolov4-tiny-random.weights"},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (!strncmp(model, w[i].model, strlen(w[i].model)) && model[strlen(w[i].model)] == '/')
            return w[i].weights;
    return NULL;
}

typedef struct {
    ty_ref_stats_t st;
    int skipped;
    char loaded[512];
    mk_net_t *net;
} run_t;

static void check_image(const ty_ref_t *ref, void *arg)
{
    run_t *run = arg;
    char model[sizeof ref->name], path[4600], cfg[4600];
    snprintf(model, sizeof model, "%s", ref->name);
    *strchr(model, '/') = '\0';
    const char *w = weights_of(ref->name);
    assert_non_null(w);
    snprintf(path, sizeof path, "%s/%s", tu_data_dir(), w);
    if (access(path, R_OK)) {
        run->skipped++;
        return;
    }
    if (strcmp(run->loaded, model)) {
        mk_net_destroy(run->net);
        run->net = NULL;
        for (size_t m = 0; m < sizeof ty_models / sizeof ty_models[0]; m++)
            if (!strcmp(ty_models[m].model, model))
                snprintf(cfg, sizeof cfg, "%s/%s", tu_data_dir(), ty_models[m].cfg);
        TU_OK(mk_net_load(ctx, cfg, path, NULL, &run->net));
        snprintf(run->loaded, sizeof run->loaded, "%s", model);
    }
    /* the photo: images/ or grabcut/images/, as the JPEG TurboJPEG decodes (Darknet got that decode as a PNG) */
    const char *photo = cJSON_GetObjectItem(ref->json, "image")->valuestring;
    char stem[256];
    snprintf(stem, sizeof stem, "%s", photo);
    *strrchr(stem, '.') = '\0';
    snprintf(path, sizeof path, "%s/images/%s.jpg", tu_data_dir(), stem);
    if (access(path, R_OK))
        snprintf(path, sizeof path, "%s/grabcut/images/%s.jpg", tu_data_dir(), stem);
    mk_image_t rgb = {0};
    TU_OK(mk_imageio_load(path, MK_FMT_RGB, &rgb));
    cJSON *doc = NULL;
    TU_OK(mt_detect_image(ctx, run->net, &rgb, MK_LETTERBOX_DARKNET, &ref->p, path, NULL, &doc));
    cJSON *dets = cJSON_GetObjectItem(doc, "detections"), *e;
    int n = cJSON_GetArraySize(dets), i = 0;
    mk_detection_t *out = calloc((size_t)n + 1, sizeof *out);
    assert_non_null(out);
    cJSON_ArrayForEach(e, dets)
    {
        out[i].class_id = cJSON_GetObjectItem(e, "class")->valueint;
        out[i].prob = (float)cJSON_GetObjectItem(e, "prob")->valuedouble;
        out[i].objectness = (float)cJSON_GetObjectItem(e, "objectness")->valuedouble;
        out[i].x = (float)cJSON_GetObjectItem(e, "x")->valuedouble;
        out[i].y = (float)cJSON_GetObjectItem(e, "y")->valuedouble;
        out[i].w = (float)cJSON_GetObjectItem(e, "w")->valuedouble;
        out[i].h = (float)cJSON_GetObjectItem(e, "h")->valuedouble;
        i++;
    }
    ty_match_reference(ref, out, n, &run->st);
    free(out);
    cJSON_Delete(doc);
    mk_image_free(NULL, &rgb);
}

static void test_detect_reference(void **state)
{
    (void)state;
    run_t run = {.st = {0, 0, 1, 0}};
    int count = ty_for_each_reference(check_image, &run);
    mk_net_destroy(run.net);
    if (!count || run.st.images == 0)
        skip();
    print_message("detect (%s) vs Darknet: %d images, %d boxes, worst IoU %.6f, worst |prob diff| %.3g; %d images "
                  "skipped (weights absent)\n", mk_backend_name(mk_ctx_backend(ctx)), run.st.images, run.st.boxes,
                  run.st.worst_iou, run.st.worst_prob, run.skipped);
    assert_int_equal(run.st.images + run.skipped, 22);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        mk_ctx_t *cpu = NULL;
        int start = tu_cuda_main("CUDA detection tests", &cpu, &ctx);
        if (start)
            return start;
        mk_ctx_destroy(cpu);
    } else if (mk_ctx_create(MK_BACKEND_CPU, &ctx)) {
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_detect_reference)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mk_ctx_destroy(ctx);
    return rc;
}
