/* test_config: the option table, value syntax (text and JSON), config files (nested, dotted, errors naming the
 * key), round trips over every key, transactions (atomicity, restart-only keys, hooks), the Markdown table, the
 * shipped default file and the instance paths. */
#include "testutil.h"

#include "config.h"
#include "paths.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/mk-config-XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const mk_opt_t *opt(const char *name)
{
    const mk_opt_t *o = mk_options_find(name);
    if (!o)
        fail_msg("no option %s", name);
    return o;
}

static void test_table(void **state)
{
    (void)state;
    mk_config_t def;
    mk_config_defaults(&def);
    int n = mk_options_count();
    assert_true(n >= 40 && n <= MK_OPT_MAX);
    for (int i = 0; i < n; i++) {
        const mk_opt_t *o = mk_options_at(i);
        assert_int_equal(mk_options_index(o), i);
        assert_ptr_equal(mk_options_find(o->name), o);
        assert_true(strspn(o->name, "abcdefghijklmnopqrstuvwxyz0123456789_.") == strlen(o->name));
        assert_true(o->doc && strlen(o->doc) > 10);
        assert_null(strchr(o->doc, '|')); /* the Markdown table */
        assert_true(o->offset < sizeof(mk_config_t));
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(mk_options_at(j)->name, o->name);
            assert_true(mk_options_at(j)->offset != o->offset);
        }
        /* The default is valid in both syntaxes, and it is what mk_config_defaults set. */
        mk_config_t c;
        memset(&c, 0x5a, sizeof c);
        char err[640];
        if (mk_opt_parse_text(o, o->def, &c, err, sizeof err))
            fail_msg("default of %s: %s", o->name, err);
        assert_true(mk_opt_equal(o, &c, &def));
        cJSON *j = mk_opt_to_json(o, &def);
        memset(&c, 0x5a, sizeof c);
        assert_int_equal(mk_opt_parse_json(o, j, &c, err, sizeof err), 0);
        assert_true(mk_opt_equal(o, &c, &def));
        cJSON_Delete(j);
        if (o->type == MK_OPT_INT || o->type == MK_OPT_DOUBLE || o->type == MK_OPT_SIZE)
            assert_true(o->min <= o->max);
        if (o->type == MK_OPT_ENUM)
            assert_non_null(o->values[0]);
        else
            assert_null(o->values);
    }
    assert_null(mk_options_find("grabcut"));
    assert_null(mk_options_find(NULL));
    assert_true(mk_options_is_section("grabcut"));
    assert_false(mk_options_is_section("grab"));
    assert_false(mk_options_is_section("grabcut.iterations"));
    assert_string_equal(mk_options_suggest("grabcut.iteration"), "grabcut.iterations");
    assert_string_equal(mk_options_suggest("iterations"), "grabcut.iterations");
    assert_null(mk_options_suggest("completely.unrelated.name"));
    /* The option groups are all there, and the limits the control tests rely on. */
    static const char *const required[] = {
        "source.spec", "source.size", "source.fps", "source.format", "source.loop", "source.realtime", "backend",
        "detect.cfg", "detect.weights", "detect.names", "detect.thresh", "detect.nms", "detect.classes",
        "detect.letterbox", "detect.fp16", "detect.every_n", "select.min_score", "select.prefer_previous",
        "select.margin", "select.hold_frames", "select.fallback", "cut.method", "grabcut.iterations",
        "grabcut.roi_max_side", "grabcut.keyframe", "guided.radius", "guided.eps", "guided.scale",
        "mask.threshold", "mask.value", "mask.feather", "mask.alpha", "bus.slots", "bus.mode", "bus.group",
        "bus.frame", "pipeline.queue_depth", "pipeline.decode_threads", "pipeline.decoder", "idle.enable",
        "idle.timeout_s", "control.max_clients", "control.max_line_bytes", "log.level", "source.controls"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        assert_non_null(mk_options_find(required[i]));
    assert_int_equal(def.control.max_clients, 64);
    assert_int_equal(def.grabcut.iterations, 5);
    assert_int_equal(def.bus.mode, 0640);
    assert_string_equal(def.source.spec, "testpattern");
    assert_int_equal(def.log.level, 2); /* MK_LOG_INFO */
    assert_false(opt("source.size")->flags & MK_OPT_LIVE);
    assert_true(opt("source.controls")->flags & MK_OPT_LIVE);
    assert_string_equal(def.source.controls, "");
    assert_true(opt("grabcut.iterations")->flags & MK_OPT_LIVE);
    /* The MJPEG decoder is chosen when the decode pool starts, as its threads are. */
    assert_int_equal(def.pipeline.decoder, MK_CFG_DECODER_CPU); /* nvJPEG costs ~45 MB of host memory */
    assert_false(opt("pipeline.decoder")->flags & MK_OPT_LIVE);
    assert_false(opt("pipeline.decode_threads")->flags & MK_OPT_LIVE);
}

/* ---- values ------------------------------------------------------------------------------------------------ */

typedef struct {
    const char *key, *input;
    const char *expected; /* the value printed back (text form); NULL: input */
    int fail;             /* 0, MK_EINVAL or MK_ERANGE */
} value_case_t;

static const value_case_t text_cases[] = {
    {"grabcut.iterations", "5", NULL, 0},
    {"grabcut.iterations", "1", NULL, 0},
    {"grabcut.iterations", "20", NULL, 0},
    {"grabcut.iterations", "0", NULL, MK_ERANGE},
    {"grabcut.iterations", "21", NULL, MK_ERANGE},
    {"grabcut.iterations", "-1", NULL, MK_ERANGE},
    {"grabcut.iterations", "x", NULL, MK_EINVAL},
    {"grabcut.iterations", "", NULL, MK_EINVAL},
    {"grabcut.iterations", " 5", NULL, MK_EINVAL},
    {"grabcut.iterations", "5 ", NULL, MK_EINVAL},
    {"grabcut.iterations", "+5", NULL, MK_EINVAL},
    {"grabcut.iterations", "5.0", NULL, MK_EINVAL},
    {"grabcut.iterations", "0x5", NULL, MK_EINVAL},
    {"grabcut.iterations", "99999999999999999999999", NULL, MK_EINVAL},
    {"select.hold_frames", "0", NULL, 0},
    {"source.loop", "true", NULL, 0},
    {"source.loop", "false", NULL, 0},
    {"source.loop", "yes", "true", 0},
    {"source.loop", "on", "true", 0},
    {"source.loop", "1", "true", 0},
    {"source.loop", "no", "false", 0},
    {"source.loop", "off", "false", 0},
    {"source.loop", "0", "false", 0},
    {"source.loop", "True", NULL, MK_EINVAL},
    {"source.loop", "2", NULL, MK_EINVAL},
    {"source.loop", "", NULL, MK_EINVAL},
    {"detect.thresh", "0.25", NULL, 0},
    {"detect.thresh", "0", NULL, 0},
    {"detect.thresh", "0.99", NULL, 0},
    {"detect.thresh", "1", NULL, MK_ERANGE},
    {"detect.thresh", ".5", "0.5", 0},
    {"detect.thresh", "2.5e-1", "0.25", 0},
    {"detect.thresh", "1.5", NULL, MK_ERANGE},
    {"detect.thresh", "-0.1", NULL, MK_ERANGE},
    {"detect.thresh", "nan", NULL, MK_EINVAL},
    {"detect.thresh", "inf", NULL, MK_EINVAL},
    {"detect.thresh", "0x1p-2", NULL, MK_EINVAL},
    {"detect.thresh", "0.5x", NULL, MK_EINVAL},
    {"detect.thresh", "", NULL, MK_EINVAL},
    {"guided.eps", "1e-4", "0.0001", 0},
    {"guided.eps", "0.1", NULL, 0},
    {"guided.eps", "1e-300", NULL, 0},
    {"guided.eps", "1e999", NULL, MK_EINVAL},
    {"backend", "cpu", NULL, 0},
    {"backend", "cuda", NULL, 0},
    {"backend", "CPU", NULL, MK_EINVAL},
    {"backend", "gpu", NULL, MK_EINVAL},
    {"backend", "", NULL, MK_EINVAL},
    {"pipeline.decoder", "auto", NULL, 0},
    {"pipeline.decoder", "cpu", NULL, 0},
    {"pipeline.decoder", "nvjpeg", NULL, 0},
    {"pipeline.decoder", "NVJPEG", NULL, MK_EINVAL},
    {"pipeline.decoder", "gpu", NULL, MK_EINVAL},
    {"pipeline.decoder", "cuda", NULL, MK_EINVAL},
    {"pipeline.decoder", "nvjpeg ", NULL, MK_EINVAL},
    {"pipeline.decoder", "", NULL, MK_EINVAL},
    {"log.level", "trace", NULL, 0},
    {"mask.threshold", "otsu", NULL, 0},
    {"source.size", "640x480", NULL, 0},
    {"source.size", "1280X720", "1280x720", 0},
    {"source.size", "16x16", NULL, 0},
    {"source.size", "16384x16384", NULL, 0},
    {"source.size", "15x480", NULL, MK_ERANGE},
    {"source.size", "16385x16", NULL, MK_ERANGE},
    {"source.size", "640x", NULL, MK_EINVAL},
    {"source.size", "x480", NULL, MK_EINVAL},
    {"source.size", "640x480x3", NULL, MK_EINVAL},
    {"source.size", "640*480", NULL, MK_EINVAL},
    {"source.size", " 640x480", NULL, MK_EINVAL},
    {"source.size", "-640x480", NULL, MK_EINVAL},
    {"select.fallback", "10,20,300,400", NULL, 0},
    {"select.fallback", "0,0,0,0", NULL, 0},
    {"select.fallback", "10,20,300", NULL, MK_EINVAL},
    {"select.fallback", "1,2,3,4,5", NULL, MK_EINVAL},
    {"select.fallback", "-1,0,5,5", NULL, MK_EINVAL},
    {"select.fallback", "1, 2,3,4", NULL, MK_EINVAL},
    {"select.fallback", "0,0,16385,5", NULL, MK_ERANGE},
    {"bus.mode", "0640", NULL, 0},
    {"bus.mode", "660", "0660", 0},
    {"bus.mode", "0", "0000", 0},
    {"bus.mode", "0800", NULL, MK_EINVAL},
    {"bus.mode", "1777", NULL, MK_ERANGE},
    {"bus.mode", "01777", NULL, MK_EINVAL},
    {"bus.mode", "00660", NULL, MK_EINVAL},
    {"bus.mode", "rw", NULL, MK_EINVAL},
    {"source.spec", "testpattern", NULL, 0},
    {"source.spec", "v4l2:/dev/video0", NULL, 0},
    {"source.spec", "file:/data/clip.avi", NULL, 0},
    {"source.spec", "v4l2:", NULL, MK_EINVAL},
    {"source.spec", "file:", NULL, MK_EINVAL},
    {"source.spec", "camera", NULL, MK_EINVAL},
    {"source.spec", "", NULL, MK_EINVAL},
    {"detect.classes", "0", NULL, 0},
    {"detect.classes", "", NULL, 0},
    {"detect.classes", "person, 1,traffic light", NULL, 0},
    {"detect.classes", "0,,1", NULL, MK_EINVAL},
    {"detect.classes", ",0", NULL, MK_EINVAL},
    {"detect.classes", "0,", NULL, MK_EINVAL},
    {"detect.classes", " ", NULL, MK_EINVAL},
    {"detect.classes", "a\tb", NULL, MK_EINVAL},
    {"bus.group", "video", NULL, 0},
    {"bus.group", "44", NULL, 0},
    {"bus.group", "", NULL, 0},
    {"bus.group", "_maskd-users", NULL, 0},
    {"bus.group", "Video", NULL, MK_EINVAL},
    {"bus.group", "a b", NULL, MK_EINVAL},
    {"bus.group", "9lives", NULL, MK_EINVAL},
    {"detect.cfg", "/usr/share/maskd/yolo \"fastest\".cfg", NULL, 0},
    {"detect.cfg", "", NULL, 0},
    {"source.controls", "", NULL, 0},
    {"source.controls", "brightness=128", NULL, 0},
    {"source.controls", "exposure_absolute=150, brightness=-64", NULL, 0},
    {"source.controls", "exposure_absolute=150,", NULL, MK_EINVAL},
    {"source.controls", "brightness", NULL, MK_EINVAL},
    {"source.controls", "brightness=", NULL, MK_EINVAL},
    {"source.controls", "brightness=1.5", NULL, MK_EINVAL},
    {"source.controls", "brightness=0x10", NULL, MK_EINVAL},
    {"source.controls", "brightness=2147483648", NULL, MK_EINVAL},
    {"source.controls", "bright ness=1", NULL, MK_EINVAL},
    {"source.controls", "brightness=1,Brightness=2", NULL, MK_EINVAL},
    {"source.controls", " ", NULL, MK_EINVAL},
};

static void test_values_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof text_cases / sizeof text_cases[0]; i++) {
        const value_case_t *tc = &text_cases[i];
        const mk_opt_t *o = opt(tc->key);
        mk_config_t c, before;
        mk_config_defaults(&c);
        before = c;
        char err[640] = "", out[MK_CFG_STR_MAX];
        int rc = mk_opt_parse_text(o, tc->input, &c, err, sizeof err);
        if (rc != tc->fail)
            fail_msg("case %zu: %s = '%s': got %d (%s), expected %d", i, tc->key, tc->input, rc, err, tc->fail);
        if (rc) {
            assert_true(mk_config_equal(&c, &before)); /* unchanged on failure */
            /* "key: expected ..., got "input"" */
            assert_true(strncmp(err, tc->key, strlen(tc->key)) == 0 && err[strlen(tc->key)] == ':');
            assert_non_null(strstr(err, ": expected "));
            assert_non_null(strstr(err, ", got \""));
            continue;
        }
        mk_opt_format(o, &c, out, sizeof out);
        assert_string_equal(out, tc->expected ? tc->expected : tc->input);
    }
    /* The wording of an error. */
    mk_config_t c;
    mk_config_defaults(&c);
    char err[640];
    assert_int_equal(mk_opt_parse_text(opt("grabcut.iterations"), "x", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "grabcut.iterations: expected integer 1..20, got \"x\"");
    assert_int_equal(mk_opt_parse_text(opt("backend"), "gpu", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "backend: expected one of auto|cpu|cuda, got \"gpu\"");
    assert_int_equal(mk_opt_parse_text(opt("pipeline.decoder"), "gpu", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "pipeline.decoder: expected one of auto|cpu|nvjpeg, got \"gpu\"");
    assert_int_equal(mk_opt_parse_text(opt("source.spec"), "cam", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "source.spec: expected testpattern, v4l2:DEVICE or file:PATH, got \"cam\"");
    assert_int_equal(mk_opt_parse_text(opt("bus.mode"), "9", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "bus.mode: expected octal mode string 0000..0777, got \"9\"");
    assert_int_equal(mk_opt_parse_text(opt("source.controls"), "exposure=fast", &c, err, sizeof err), MK_EINVAL);
    assert_string_equal(err, "source.controls: expected comma-separated V4L2 controls name=value with integer "
                             "values (empty: none), got \"exposure=fast\"");
    /* Length limit of string fields: 1023 bytes fit, 1024 do not. */
    char long_path[MK_CFG_STR_MAX + 1];
    memset(long_path, 'a', sizeof long_path);
    long_path[MK_CFG_STR_MAX - 1] = '\0';
    assert_int_equal(mk_opt_parse_text(opt("detect.cfg"), long_path, &c, NULL, 0), 0);
    assert_int_equal(strlen(c.detect.cfg), MK_CFG_STR_MAX - 1);
    long_path[MK_CFG_STR_MAX - 1] = 'a';
    long_path[MK_CFG_STR_MAX] = '\0';
    assert_int_equal(mk_opt_parse_text(opt("detect.weights"), long_path, &c, err, sizeof err), MK_EINVAL);
    assert_non_null(strstr(err, "detect.weights: expected string of at most 1023 bytes, got \"aaaa"));
    assert_string_equal(c.detect.weights, "");
}

static const value_case_t json_cases[] = {
    {"grabcut.iterations", "5", NULL, 0},
    {"grabcut.iterations", "5.5", NULL, MK_EINVAL},
    {"grabcut.iterations", "\"5\"", NULL, MK_EINVAL},
    {"grabcut.iterations", "21", NULL, MK_ERANGE},
    {"grabcut.iterations", "1e1", "10", 0},
    {"grabcut.iterations", "true", NULL, MK_EINVAL},
    {"grabcut.iterations", "null", NULL, MK_EINVAL},
    {"grabcut.iterations", "[5]", NULL, MK_EINVAL},
    {"grabcut.iterations", "{\"v\": 5}", NULL, MK_EINVAL},
    {"source.loop", "false", NULL, 0},
    {"source.loop", "1", NULL, MK_EINVAL},
    {"source.loop", "\"true\"", NULL, MK_EINVAL},
    {"detect.thresh", "0.5", NULL, 0},
    {"detect.thresh", "0.99", NULL, 0},
    {"detect.thresh", "1", NULL, MK_ERANGE},
    {"detect.thresh", "\"0.5\"", NULL, MK_EINVAL},
    {"detect.thresh", "2", NULL, MK_ERANGE},
    {"detect.thresh", "1e999", NULL, MK_EINVAL},
    {"backend", "\"cpu\"", "cpu", 0},
    {"backend", "1", NULL, MK_EINVAL},
    {"pipeline.decoder", "\"nvjpeg\"", "nvjpeg", 0},
    {"pipeline.decoder", "2", NULL, MK_EINVAL},
    {"pipeline.decoder", "\"hardware\"", NULL, MK_EINVAL},
    {"source.size", "\"1280x720\"", "1280x720", 0},
    {"source.size", "[1280, 720]", NULL, MK_EINVAL},
    {"source.size", "\"8x8\"", NULL, MK_ERANGE},
    {"select.fallback", "\"1,2,3,4\"", "1,2,3,4", 0},
    {"bus.mode", "\"0660\"", "0660", 0},
    {"bus.mode", "432", NULL, MK_EINVAL},
    {"detect.cfg", "\"/m/a.cfg\"", "/m/a.cfg", 0},
    {"detect.cfg", "null", NULL, MK_EINVAL},
    {"detect.cfg", "5", NULL, MK_EINVAL},
    {"detect.classes", "\"0,1\"", "0,1", 0},
    {"detect.classes", "0", NULL, MK_EINVAL},
    {"source.spec", "\"camera\"", NULL, MK_EINVAL},
    {"source.controls", "\"brightness=1, zoom_absolute=2\"", "brightness=1, zoom_absolute=2", 0},
    {"source.controls", "\"brightness\"", NULL, MK_EINVAL},
    {"source.controls", "{\"brightness\": 1}", NULL, MK_EINVAL},
};

static void test_values_json(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof json_cases / sizeof json_cases[0]; i++) {
        const value_case_t *tc = &json_cases[i];
        const mk_opt_t *o = opt(tc->key);
        cJSON *j = cJSON_Parse(tc->input);
        assert_non_null(j);
        mk_config_t c, before;
        mk_config_defaults(&c);
        before = c;
        char err[640] = "", out[MK_CFG_STR_MAX];
        int rc = mk_opt_parse_json(o, j, &c, err, sizeof err);
        cJSON_Delete(j);
        if (rc != tc->fail)
            fail_msg("case %zu: %s = %s: got %d (%s), expected %d", i, tc->key, tc->input, rc, err, tc->fail);
        if (rc) {
            assert_true(mk_config_equal(&c, &before));
            assert_true(strncmp(err, tc->key, strlen(tc->key)) == 0);
            assert_non_null(strstr(err, ", got "));
            continue;
        }
        mk_opt_format(o, &c, out, sizeof out);
        assert_string_equal(out, tc->expected ? tc->expected : tc->input);
    }
    mk_config_t c;
    mk_config_defaults(&c);
    cJSON *x = cJSON_CreateString("x");
    TU_OK(mk_config_set_text(&c, "grabcut.iterations", "7"));
    assert_int_equal(mk_config_set_json(&c, "grabcut.iterations", x), MK_EINVAL);
    assert_string_equal(mk_err_msg(), "grabcut.iterations: expected integer 1..20, got \"x\"");
    assert_int_equal(c.grabcut.iterations, 7);
    assert_int_equal(mk_config_set_json(&c, "grabcut.iteration", x), MK_EINVAL);
    assert_string_equal(mk_err_msg(), "grabcut.iteration: unknown key (did you mean grabcut.iterations?)");
    cJSON_Delete(x);
    cJSON *v = NULL;
    TU_OK(mk_config_get_json(&c, "grabcut.iterations", &v));
    assert_true(cJSON_IsNumber(v) && v->valueint == 7);
    cJSON_Delete(v);
    char buf[64];
    TU_OK(mk_config_get_text(&c, "bus.mode", buf, sizeof buf));
    assert_string_equal(buf, "0640");
    assert_int_equal(mk_config_get_text(&c, "nope", buf, sizeof buf), MK_EINVAL);
}

/* source.controls: the parsed list, and where a bad one goes wrong. */
typedef struct {
    const char *input;
    int count;                /* or MK_EINVAL */
    const char *names[3];
    long long values[3];
    const char *err;          /* a part of the message */
} controls_case_t;

static const controls_case_t controls_cases[] = {
    {"", 0, {NULL}, {0}, NULL},
    {"brightness=128", 1, {"brightness"}, {128}, NULL},
    {" exposure_time_absolute = 150 ,Brightness=-64,auto_exposure=1 ", 3,
     {"exposure_time_absolute", "Brightness", "auto_exposure"}, {150, -64, 1}, NULL},
    {"gain=2147483647,zoom=-2147483648", 2, {"gain", "zoom"}, {2147483647LL, -2147483648LL}, NULL},
    {"gain=2147483648", MK_EINVAL, {NULL}, {0}, "item 1 (gain): the value is outside the 32-bit range"},
    {"gain=-2147483649", MK_EINVAL, {NULL}, {0}, "item 1 (gain): the value is outside the 32-bit range"},
    {"gain=99999999999999999999999", MK_EINVAL, {NULL}, {0}, "outside the 32-bit range"},
    {"a=1,,b=2", MK_EINVAL, {NULL}, {0}, "item 2: a control name"},
    {"a=1,", MK_EINVAL, {NULL}, {0}, "item 2: a control name"},
    {"a=1;b=2", MK_EINVAL, {NULL}, {0}, "item 1 (a): ',' or the end expected"},
    {"a 1", MK_EINVAL, {NULL}, {0}, "item 1 (a): '=' and a value expected"},
    {"a=+1", MK_EINVAL, {NULL}, {0}, "item 1 (a): the value is not an integer"},
    {"a=1 2", MK_EINVAL, {NULL}, {0}, "',' or the end expected"},
    {"gain=1,GAIN=2", MK_EINVAL, {NULL}, {0}, "control GAIN given twice"},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1", MK_EINVAL, {NULL}, {0}, "longer than 39 characters"},
};

static void test_controls_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof controls_cases / sizeof controls_cases[0]; i++) {
        const controls_case_t *tc = &controls_cases[i];
        mk_cfg_control_t out[MK_CFG_CONTROLS_MAX];
        char err[256] = "";
        int n = mk_cfg_controls_parse(tc->input, out, err, sizeof err);
        if (n != tc->count)
            fail_msg("case %zu '%s': %d (%s), expected %d", i, tc->input, n, err, tc->count);
        assert_int_equal(mk_cfg_controls_parse(tc->input, NULL, NULL, 0), tc->count);
        if (n < 0) {
            if (!strstr(err, tc->err))
                fail_msg("case %zu '%s': message '%s' lacks '%s'", i, tc->input, err, tc->err);
            continue;
        }
        for (int k = 0; k < n; k++) {
            assert_string_equal(out[k].name, tc->names[k]);
            assert_int_equal(out[k].value, tc->values[k]);
        }
    }
    /* At most MK_CFG_CONTROLS_MAX controls. */
    char list[2048] = "";
    for (int i = 0; i <= MK_CFG_CONTROLS_MAX; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%sc%d=%d", i ? "," : "", i, i);
        mk_cfg_control_t out[MK_CFG_CONTROLS_MAX];
        char err[256] = "";
        int n = mk_cfg_controls_parse(list, out, err, sizeof err);
        if (i < MK_CFG_CONTROLS_MAX) {
            assert_int_equal(n, i + 1);
            assert_int_equal(out[i].value, i);
        } else {
            assert_int_equal(n, MK_EINVAL);
            assert_non_null(strstr(err, "more than 32 controls"));
        }
    }
}

/* ---- round trips over every key ------------------------------------------------------------------------------ */

/* A configuration where every option differs from its default, with awkward values (many-digit doubles, quotes
 * and non-ASCII in strings, extremes of ranges). */
static void all_changed(mk_config_t *c)
{
    mk_config_t def;
    mk_config_defaults(&def);
    mk_config_defaults(c);
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        char v[MK_CFG_STR_MAX];
        switch (o->type) {
        case MK_OPT_BOOL:
            snprintf(v, sizeof v, "%s", *(const int *)((const char *)&def + o->offset) ? "false" : "true");
            break;
        case MK_OPT_INT:
            snprintf(v, sizeof v, (o->flags & MK_OPT_OCTAL) ? "%o" : "%d",
                     (int)(*(const int *)((const char *)&def + o->offset) == (int)o->max ? o->min : o->max));
            break;
        case MK_OPT_DOUBLE:
            snprintf(v, sizeof v, "%.17g", o->min + (o->max - o->min) / 3.0);
            break;
        case MK_OPT_ENUM: {
            int last = 0;
            while (o->values[last + 1])
                last++;
            snprintf(v, sizeof v, "%s",
                     o->values[*(const int *)((const char *)&def + o->offset) == last ? 0 : last]);
            break;
        }
        case MK_OPT_SIZE:
            snprintf(v, sizeof v, "%.0fx%.0f", o->max, o->min);
            break;
        case MK_OPT_RECT:
            snprintf(v, sizeof v, "1,2,%.0f,%.0f", o->max, o->min + 1);
            break;
        case MK_OPT_STRING:
            if (!strcmp(o->name, "source.spec"))
                snprintf(v, sizeof v, "file:/tmp/clip \"%s\".avi", o->name);
            else if (!strcmp(o->name, "detect.classes"))
                snprintf(v, sizeof v, "person,1,traffic light");
            else if (!strcmp(o->name, "bus.group"))
                snprintf(v, sizeof v, "video");
            else if (!strcmp(o->name, "source.controls"))
                snprintf(v, sizeof v, "brightness=-5, exposure_time_absolute=150");
            else
                snprintf(v, sizeof v, "/opt/m\xc3\xa4sk/\"%s\"\\x.bin", o->name);
            break;
        }
        char err[640];
        if (mk_opt_parse_text(o, v, c, err, sizeof err))
            fail_msg("%s", err);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    mk_config_t c, def, back;
    all_changed(&c);
    mk_config_defaults(&def);
    assert_int_equal(mk_config_diff(&c, &def, NULL, 0), mk_options_count());
    int idx[MK_OPT_MAX];
    assert_int_equal(mk_config_diff(&c, &def, idx, 3), mk_options_count());
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[2], 2);

    /* Text: format, parse back, per key. */
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        char text[MK_CFG_STR_MAX];
        back = def;
        mk_opt_format(o, &c, text, sizeof text);
        TU_OK(mk_opt_parse_text(o, text, &back, NULL, 0));
        if (!mk_opt_equal(o, &back, &c))
            fail_msg("%s: text round trip of '%s'", o->name, text);
    }
    /* JSON, nested and flat: print, parse the text, load over the defaults. */
    for (int flat = 0; flat < 2; flat++) {
        char *s = mk_config_print(&c, flat ? MK_CFG_JSON_FLAT : 0);
        assert_non_null(s);
        cJSON *j = cJSON_Parse(s);
        assert_non_null(j);
        assert_int_equal(cJSON_GetArraySize(j), flat ? mk_options_count() : 13); /* 12 sections + backend */
        mk_config_txn_t *t = mk_config_txn_new(&def, MK_CFG_TXN_WHOLE);
        TU_OK(mk_config_txn_load_json(t, j));
        assert_int_equal(mk_config_txn_nerrors(t), 0);
        back = def;
        assert_int_equal(mk_config_txn_commit(t, &back, NULL), mk_options_count());
        assert_true(mk_config_equal(&back, &c));
        for (int i = 0; i < mk_options_count(); i++)
            assert_true(mk_config_txn_touched(t, i));
        mk_config_txn_free(t);
        cJSON_Delete(j);
        free(s);
    }
    /* Through a file, as --check-config and a reload read it. */
    char path[512];
    snprintf(path, sizeof path, "%s/all.json", tmpdir);
    char *s = mk_config_print(&c, 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
    free(s);
    TU_OK(mk_config_check_file(path, stderr));
    mk_config_txn_t *t = mk_config_txn_new(&def, MK_CFG_TXN_WHOLE);
    TU_OK(mk_config_txn_load_file(t, path));
    back = def;
    assert_true(mk_config_txn_commit(t, &back, NULL) > 0);
    assert_true(mk_config_equal(&back, &c));
    mk_config_txn_free(t);
    /* Only what differs from the defaults: everything here, nothing for the defaults. */
    cJSON *changed = mk_config_to_json(&c, MK_CFG_JSON_CHANGED | MK_CFG_JSON_FLAT);
    assert_int_equal(cJSON_GetArraySize(changed), mk_options_count());
    cJSON_Delete(changed);
    changed = mk_config_to_json(&def, MK_CFG_JSON_CHANGED);
    assert_int_equal(cJSON_GetArraySize(changed), 0);
    cJSON_Delete(changed);
    s = mk_config_print(&def, MK_CFG_JSON_CHANGED);
    assert_string_equal(s, "{\n}\n");
    free(s);
}

/* ---- files ----------------------------------------------------------------------------------------------- */

typedef struct {
    const char *content;
    const char *key, *value; /* when valid: one key and its value after loading */
    int nerrors;
    const char *errors[4]; /* expected messages, exactly, in order (NULL: not checked) */
} file_case_t;

static const file_case_t file_cases[] = {
    {"{\"grabcut\": {\"iterations\": 7}}", "grabcut.iterations", "7", 0, {NULL}},
    {"{\"grabcut.iterations\": 7}", "grabcut.iterations", "7", 0, {NULL}},
    {"{\"grabcut\": {\"iterations\": 7}, \"mask.threshold\": \"otsu\", \"backend\": \"cpu\"}",
     "mask.threshold", "otsu", 0, {NULL}},
    {"{\"source\": {\"size\": \"1280x720\", \"spec\": \"v4l2:/dev/video2\"}}", "source.size", "1280x720", 0,
     {NULL}},
    {"{\"log\": {\"level\": \"debug\"}}", "log.level", "debug", 0, {NULL}},
    {"{}", "grabcut.iterations", "5", 0, {NULL}},
    {"  {\"bus\": {\"mode\": \"0660\"}}\n\n", "bus.mode", "0660", 0, {NULL}},
    {"{\"grabcut\": {\"iterations\": \"x\"}}", NULL, NULL, 1, {"grabcut.iterations: expected integer 1..20, got \"x\""}},
    {"{\"grabcut\": {\"iterations\": 7}, \"grabcut.iterations\": 8}", NULL, NULL, 1,
     {"grabcut.iterations: given more than once"}},
    {"{\"grabcut.iterations\": 7, \"grabcut.iterations\": 7}", NULL, NULL, 1, {"grabcut.iterations: given more than once"}},
    {"{\"grabcut\": {\"iteration\": 5}}", NULL, NULL, 1,
     {"grabcut.iteration: unknown key (did you mean grabcut.iterations?)"}},
    {"{\"iterations\": 5}", NULL, NULL, 1, {"iterations: unknown key (did you mean grabcut.iterations?)"}},
    {"{\"frobnicate\": {\"widgets\": 5}}", NULL, NULL, 1, {"frobnicate: unknown key"}},
    {"{\"grabcut\": 5}", NULL, NULL, 1, {"grabcut: expected an object (the section of grabcut.*)"}},
    {"{\"grabcut\": {\"iterations\": {\"value\": 5}}}", NULL, NULL, 1,
     {"grabcut.iterations: expected integer 1..20, got {\"value\":5}"}},
    {"{\"detect.cfg\": null}", NULL, NULL, 1, {"detect.cfg: expected string of at most 1023 bytes, got null"}},
    {"[1, 2]", NULL, NULL, 1, {"expected a JSON object of options"}},
    {"\"grabcut.iterations\"", NULL, NULL, 1, {"expected a JSON object of options"}},
    {"", NULL, NULL, 1, {"1:1: invalid JSON (empty file)"}},
    {"{\"grabcut\": {\"iterations\": 5,}}", NULL, NULL, 1, {NULL}},
    {"{\n  \"grabcut\": {\n    \"iterations\": 5\n  }\n  \"mask.value\": 0.3\n}\n", NULL, NULL, 1, {"5:3: invalid JSON"}},
    {"{\"grabcut.iterations\": 5} trailing", NULL, NULL, 1, {NULL}},
    /* Every bad key is reported, in file order. */
    {"{\"a\": 1, \"grabcut\": {\"iterations\": 0, \"keyframe\": \"sometimes\"}, \"mask.threshold\": \"hard\"}", NULL, NULL, 4,
     {"a: unknown key", "grabcut.iterations: expected integer 1..20, got 0",
      "grabcut.keyframe: expected one of always|interval|adaptive, got \"sometimes\"",
      "mask.threshold: expected one of none|fixed|otsu, got \"hard\""}},
};

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void test_files(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/case.json", tmpdir);
    mk_config_t def;
    mk_config_defaults(&def);
    for (size_t i = 0; i < sizeof file_cases / sizeof file_cases[0]; i++) {
        const file_case_t *fc = &file_cases[i];
        write_file(path, fc->content);
        mk_config_txn_t *t = mk_config_txn_new(&def, MK_CFG_TXN_WHOLE);
        int rc = mk_config_txn_load_file(t, path);
        if ((int)mk_config_txn_nerrors(t) != fc->nerrors)
            fail_msg("case %zu (%s): %zu errors, expected %d (first: %s)", i, fc->content, mk_config_txn_nerrors(t),
                     fc->nerrors, mk_config_txn_nerrors(t) ? mk_config_txn_error(t, 0)->msg : "-");
        assert_int_equal(rc != 0, fc->nerrors != 0);
        for (int e = 0; e < fc->nerrors; e++)
            if (fc->errors[e])
                assert_string_equal(mk_config_txn_error(t, (size_t)e)->msg, fc->errors[e]);
        mk_config_t c = def;
        c.grabcut.iterations = 3; /* not from the file: a valid whole-file commit resets it */
        int committed = mk_config_txn_commit(t, &c, NULL);
        if (fc->nerrors) {
            assert_int_equal(committed, MK_EINVAL);
            assert_int_equal(c.grabcut.iterations, 3);
            assert_int_equal(mk_config_check_file(path, NULL), MK_EINVAL);
        } else {
            char v[MK_CFG_STR_MAX];
            TU_OK(mk_config_get_text(&c, fc->key, v, sizeof v));
            assert_string_equal(v, fc->value);
            TU_OK(mk_config_check_file(path, NULL));
        }
        mk_config_txn_free(t);
    }
    /* The key paths and kinds of a file with several errors. */
    write_file(path, file_cases[sizeof file_cases / sizeof file_cases[0] - 1].content);
    mk_config_txn_t *t = mk_config_txn_new(&def, 0);
    mk_config_txn_load_file(t, path);
    assert_string_equal(mk_config_txn_error(t, 0)->key, "a");
    assert_int_equal(mk_config_txn_error(t, 0)->kind, MK_CFG_EUNKNOWN);
    assert_string_equal(mk_config_txn_error(t, 2)->key, "grabcut.keyframe");
    assert_int_equal(mk_config_txn_error(t, 2)->kind, MK_CFG_EVALUE);
    assert_int_equal(mk_config_txn_error(t, 1)->code, MK_ERANGE);
    mk_config_txn_free(t);
    /* --check-config: one line per error, naming the file and the key. */
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%s/check.txt", tmpdir);
    FILE *msgs = fopen(out_path, "w+");
    assert_int_equal(mk_config_check_file(path, msgs), MK_EINVAL);
    rewind(msgs);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, msgs)) {
        assert_true(strncmp(line, path, strlen(path)) == 0 && line[strlen(path)] == ':');
        lines++;
    }
    fclose(msgs);
    assert_int_equal(lines, 4);
    /* A missing file. */
    snprintf(path, sizeof path, "%s/none.json", tmpdir);
    assert_int_equal(mk_config_check_file(path, NULL), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "cannot open: No such file or directory"));
}

/* ---- transactions ---------------------------------------------------------------------------------------- */

typedef struct {
    int calls;
    char names[8][64];
} hook_log_t;

static void record_hook(void *user, const mk_opt_t *o, const mk_config_t *cfg)
{
    hook_log_t *log = user;
    assert_non_null(cfg);
    if (log->calls < 8)
        snprintf(log->names[log->calls], sizeof log->names[0], "%s", o->name);
    log->calls++;
}

static void test_transactions(void **state)
{
    (void)state;
    mk_config_t live, before;
    mk_config_defaults(&live);
    before = live;

    /* Live: one bad key among several: nothing applied, every error named. */
    mk_config_txn_t *t = mk_config_txn_new(&live, MK_CFG_TXN_LIVE);
    TU_OK(mk_config_txn_set(t, "grabcut.iterations", "8"));
    assert_int_equal(mk_config_txn_set(t, "guided.radius", "0"), MK_ERANGE);
    assert_int_equal(mk_config_txn_set(t, "source.size", "1280x720"), MK_ESTATE);
    assert_int_equal(mk_config_txn_set(t, "no.such", "1"), MK_EINVAL);
    TU_OK(mk_config_txn_set(t, "source.fps", "30")); /* restart-only, but unchanged: accepted */
    assert_int_equal(mk_config_txn_nerrors(t), 3);
    assert_string_equal(mk_config_txn_error(t, 0)->key, "guided.radius");
    assert_int_equal(mk_config_txn_error(t, 1)->kind, MK_CFG_ERESTART);
    assert_non_null(strstr(mk_config_txn_error(t, 1)->msg, "source.size: takes effect only at a restart"));
    assert_int_equal(mk_config_txn_error(t, 2)->kind, MK_CFG_EUNKNOWN);
    assert_int_equal(mk_config_txn_commit(t, &live, NULL), MK_EINVAL);
    assert_true(mk_config_equal(&live, &before));
    assert_int_equal(mk_config_txn_config(t)->source.size.w, 640); /* the refused value is not kept */
    mk_config_txn_free(t);

    /* Hooks run for the options whose values changed, after everything is in place. */
    mk_opt_hooks_t *hooks = mk_opt_hooks_new();
    hook_log_t grab = {0}, all = {0};
    TU_OK(mk_opt_hooks_set(hooks, "*", record_hook, &all));
    TU_OK(mk_opt_hooks_set(hooks, "grabcut.*", record_hook, &grab));
    assert_int_equal(mk_opt_hooks_set(hooks, "nothing.*", record_hook, &grab), MK_EINVAL);
    t = mk_config_txn_new(&live, MK_CFG_TXN_LIVE);
    TU_OK(mk_config_txn_set(t, "grabcut.iterations", "8"));
    TU_OK(mk_config_txn_set(t, "mask.threshold", "otsu"));
    TU_OK(mk_config_txn_set(t, "detect.thresh", "0.25")); /* its current value: no hook */
    cJSON *j = mk_config_txn_to_json(t);
    assert_int_equal(cJSON_GetArraySize(j), 3);
    assert_int_equal(cJSON_GetObjectItem(j, "grabcut.iterations")->valueint, 8);
    cJSON_Delete(j);
    assert_int_equal(mk_config_txn_commit(t, &live, hooks), 2);
    mk_config_txn_free(t);
    assert_int_equal(live.grabcut.iterations, 8);
    assert_int_equal(live.mask.threshold, MK_CFG_THRESH_OTSU);
    assert_int_equal(grab.calls, 1);
    assert_string_equal(grab.names[0], "grabcut.iterations");
    assert_int_equal(all.calls, 1);
    assert_string_equal(all.names[0], "mask.threshold");

    /* Two transactions validated against the same base commit only their own keys (no lost update). */
    mk_config_txn_t *a = mk_config_txn_new(&live, MK_CFG_TXN_LIVE), *b = mk_config_txn_new(&live, MK_CFG_TXN_LIVE);
    TU_OK(mk_config_txn_set(a, "guided.radius", "4"));
    TU_OK(mk_config_txn_set(b, "guided.scale", "2"));
    assert_int_equal(mk_config_txn_commit(a, &live, NULL), 1);
    assert_int_equal(mk_config_txn_commit(b, &live, NULL), 1);
    assert_int_equal(live.guided.radius, 4);
    assert_int_equal(live.guided.scale, 2);
    mk_config_txn_free(a);
    mk_config_txn_free(b);

    /* Whole: a file loaded over the defaults replaces everything (keys it leaves out return to defaults). */
    mk_config_t def;
    mk_config_defaults(&def);
    t = mk_config_txn_new(&def, MK_CFG_TXN_WHOLE);
    TU_OK(mk_config_txn_set(t, "grabcut.iterations", "9"));
    assert_int_equal(mk_config_txn_commit(t, &live, NULL), 4); /* iterations, threshold, radius, scale */
    mk_config_txn_free(t);
    assert_int_equal(live.grabcut.iterations, 9);
    assert_int_equal(live.mask.threshold, MK_CFG_THRESH_NONE);
    assert_int_equal(live.guided.radius, 8);

    /* --set syntax. */
    t = mk_config_txn_new(&def, 0);
    TU_OK(mk_config_txn_set_arg(t, "grabcut.iterations=7"));
    TU_OK(mk_config_txn_set_arg(t, "detect.classes="));
    TU_OK(mk_config_txn_set_arg(t, "detect.cfg=/m/a=b.cfg"));
    assert_int_equal(mk_config_txn_set_arg(t, "grabcut.keyframe"), MK_EINVAL);
    assert_string_equal(mk_config_txn_error(t, 0)->msg, "expected KEY=VALUE, got \"grabcut.keyframe\"");
    assert_int_equal(mk_config_txn_set_arg(t, "=5"), MK_EINVAL);
    assert_int_equal(mk_config_txn_set_arg(t, "guided.radius="), MK_EINVAL);
    assert_int_equal(mk_config_txn_set_arg(t, "grabcut.iterations=8"), MK_EINVAL); /* given twice */
    assert_int_equal(mk_config_txn_nerrors(t), 4);
    assert_string_equal(mk_config_txn_config(t)->detect.cfg, "/m/a=b.cfg");
    assert_string_equal(mk_config_txn_config(t)->detect.classes, "");
    assert_int_equal(mk_config_txn_config(t)->grabcut.iterations, 7);
    mk_config_txn_free(t);
    mk_opt_hooks_free(hooks);
    assert_null(mk_config_txn_new(NULL, 0));
}

static void test_markdown_and_list(void **state)
{
    (void)state;
    char *md = mk_options_markdown();
    assert_non_null(md);
    int lines = 0;
    for (const char *p = md; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, mk_options_count() + 2);
    const char *head = "| option | type | default | values | changes | description |\n|---|---|---|---|---|---|\n";
    assert_true(strncmp(md, head, strlen(head)) == 0);
    for (int i = 0; i < mk_options_count(); i++) {
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | %s | ", mk_options_at(i)->name, mk_opt_type_name(mk_options_at(i)->type));
        assert_non_null(strstr(md, row));
    }
    assert_non_null(strstr(md, "| `grabcut.iterations` | int | `5` | 1..20 | live | "));
    assert_non_null(strstr(md, "| `backend` | enum | `auto` | auto, cpu, cuda | restart | "));
    free(md);

    mk_config_t c;
    mk_config_defaults(&c);
    c.grabcut.iterations = 12;
    cJSON *list = mk_options_describe(&c);
    assert_int_equal(cJSON_GetArraySize(list), mk_options_count());
    const cJSON *d = NULL, *it;
    cJSON_ArrayForEach(it, list) if (!strcmp(cJSON_GetObjectItem(it, "name")->valuestring, "grabcut.iterations")) d = it;
    assert_non_null(d);
    assert_string_equal(cJSON_GetObjectItem(d, "type")->valuestring, "int");
    assert_int_equal(cJSON_GetObjectItem(d, "default")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(d, "value")->valueint, 12);
    assert_int_equal(cJSON_GetObjectItem(d, "min")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(d, "max")->valueint, 20);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(d, "live")));
    assert_string_equal(cJSON_GetObjectItem(d, "expected")->valuestring, "integer 1..20");
    cJSON_Delete(list);
    cJSON *e = mk_opt_describe(opt("backend"), NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "values")), 3);
    assert_null(cJSON_GetObjectItem(e, "value"));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(e, "live")));
    cJSON_Delete(e);
}

/* Reads a whole source file (malloc'd). */
static char *read_source(const char *rel)
{
    char path[1024];
    const char *root = getenv("MASKD_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* With $MASKD_WRITE_DOCS=1 the generated files are rewritten instead of compared. */
static int write_docs(const char *rel, const char *content)
{
    const char *w = getenv("MASKD_WRITE_DOCS");
    if (!w || strcmp(w, "1"))
        return 0;
    char path[1024];
    const char *root = getenv("MASKD_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    write_file(path, content);
    print_message("rewrote %s\n", path);
    return 1;
}

/* config/maskd.json, installed as /etc/maskd/maskd.json: valid, every option, the defaults. */
static void test_default_file(void **state)
{
    (void)state;
    mk_config_t def, c;
    mk_config_defaults(&def);
    char *printed = mk_config_print(&def, 0);
    write_docs("config/maskd.json", printed);
    char path[1024];
    const char *root = getenv("MASKD_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/config/maskd.json", root ? root : ".");
    TU_OK(mk_config_check_file(path, stderr));
    c = def;
    c.grabcut.iterations = 19;
    mk_config_txn_t *t = mk_config_txn_new(&def, 0);
    TU_OK(mk_config_txn_load_file(t, path));
    for (int i = 0; i < mk_options_count(); i++)
        if (!mk_config_txn_touched(t, i))
            fail_msg("config/maskd.json lacks %s", mk_options_at(i)->name);
    assert_int_equal(mk_config_txn_commit(t, &c, NULL), 1);
    assert_true(mk_config_equal(&c, &def));
    mk_config_txn_free(t);
    /* Exactly what printing the defaults gives. */
    char *file = read_source("config/maskd.json");
    if (strcmp(file, printed))
        fail_msg("config/maskd.json differs from the defaults' print: MASKD_WRITE_DOCS=1 meson test -C build config");
    free(file);
    free(printed);
}

/* Random mutations of config/maskd.json loaded as a file, and of --set arguments: every error names its key
 * (or is a file-level error), a load with errors commits nothing, one without commits; never a crash (the CI's
 * sanitizer build runs this too). */
static void test_mutations(void **state)
{
    (void)state;
    static const char *const tokens[] = {"{", "}", "[", "]", "\"", ":", ",", "null", "true", "-1", "1e999",
                                         "9223372036854775808", "\"grabcut\": {", "\"iterations\": ",
                                         "\"source.spec\": ", "\"\\u0000\"", "\"\\ud800\"", "0.5", "\"x\""};
    static const char *const sets[] = {"grabcut.iterations=5", "guided.radius=8", "source.spec=testpattern",
                                       "detect.thresh=0.25", "mask.threshold=otsu", "backend=cpu"};
    char *file = read_source("config/maskd.json"), path[512];
    snprintf(path, sizeof path, "%s/mutated.json", tmpdir);
    mk_config_t def;
    mk_config_defaults(&def);
    tu_rng_t rng = {4242};
    int clean = 0, errors = 0;
    for (int i = 0; i < 1500; i++) {
        size_t n;
        char *m = tu_mutate(&rng, file, strlen(file), tokens, (int)(sizeof tokens / sizeof tokens[0]), &n);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(m, 1, n, f), n);
        fclose(f);
        mk_config_txn_t *t = mk_config_txn_new(&def, MK_CFG_TXN_WHOLE);
        assert_non_null(t);
        int rc = mk_config_txn_load_file(t, path);
        size_t ne = mk_config_txn_nerrors(t);
        assert_int_equal(rc != 0, ne != 0);
        for (size_t e = 0; e < ne; e++) {
            const mk_config_error_t *err = mk_config_txn_error(t, e);
            if (!err->msg[0] || (err->key[0] && strncmp(err->msg, err->key, strlen(err->key))))
                fail_msg("mutation %d, error %zu: key '%s', message '%s'", i, e, err->key, err->msg);
        }
        mk_config_t c = def;
        c.grabcut.iterations = 3;
        int committed = mk_config_txn_commit(t, &c, NULL);
        if (ne) {
            assert_int_equal(committed, MK_EINVAL);
            assert_int_equal(c.grabcut.iterations, 3);
            errors++;
        } else {
            assert_true(committed >= 0);
            clean++;
        }
        mk_config_txn_free(t);
        free(m);
        /* a --set argument */
        const char *seed = sets[i % (int)(sizeof sets / sizeof sets[0])];
        m = tu_mutate(&rng, seed, strlen(seed), tokens, (int)(sizeof tokens / sizeof tokens[0]), &n);
        t = mk_config_txn_new(&def, 0);
        assert_non_null(t);
        rc = mk_config_txn_set_arg(t, m);
        assert_int_equal(rc != 0, mk_config_txn_nerrors(t) != 0);
        if (rc && !mk_config_txn_error(t, 0)->msg[0])
            fail_msg("--set '%s': an error without a message", m);
        mk_config_txn_free(t);
        free(m);
    }
    print_message("mutated files: %d loaded, %d refused\n", clean, errors);
    assert_true(clean > 0 && errors > 0);
    free(file);
}

/* config/README.md's option reference is mk_options_markdown()'s table. */
static void test_docs(void **state)
{
    (void)state;
    static const char begin[] = "<!-- options:begin (generated by mk_options_markdown) -->\n", end[] = "<!-- options:end -->";
    char *readme = read_source("config/README.md"), *md = mk_options_markdown();
    char *a = strstr(readme, begin), *b = a ? strstr(a, end) : NULL;
    assert_non_null(a);
    assert_non_null(b);
    a += strlen(begin);
    size_t n = (size_t)(b - a);
    if (n != strlen(md) || strncmp(a, md, n)) {
        size_t len = strlen(readme) - n + strlen(md) + 1;
        char *fresh = malloc(len);
        snprintf(fresh, len, "%.*s%s%s", (int)(a - readme), readme, md, b);
        if (!write_docs("config/README.md", fresh))
            fail_msg("config/README.md's option table is out of date: MASKD_WRITE_DOCS=1 meson test -C build config");
        free(fresh);
    }
    free(md);
    free(readme);
}

/* ---- paths ----------------------------------------------------------------------------------------------- */

static void make_socket(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    close(fd); /* the file stays */
}

static void test_paths(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int ok;
    } names[] = {{"video0", 1}, {"default", 1}, {"cam_1.left@usb-2", 1}, {"", 0}, {".hidden", 0},
                 {"a/b", 0},    {"a b", 0},     {"x\n", 0}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(mk_paths_instance_check(names[i].name) == 0, names[i].ok);
    char long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    assert_int_equal(mk_paths_instance_check(long_name), MK_EINVAL);
    assert_int_equal(mk_paths_instance_check(NULL), MK_EINVAL);

    char run[256], out[4096], want[4096];
    snprintf(run, sizeof run, "%s/run", tmpdir);
    unsetenv("RUNTIME_DIRECTORY");
    unsetenv("XDG_RUNTIME_DIR");
    /* The daemon: RUN/INSTANCE, created. */
    TU_OK(mk_paths_runtime_dir_at(run, "cam0", out, sizeof out));
    snprintf(want, sizeof want, "%s/cam0", run);
    assert_string_equal(out, want);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(mk_paths_runtime_dir_at(run, "../x", out, sizeof out), MK_EINVAL);
    /* systemd's RuntimeDirectory= wins (its first entry). */
    char rt[1024];
    snprintf(rt, sizeof rt, "%s/systemd-rt", tmpdir);
    snprintf(want, sizeof want, "%s:/run/other", rt);
    setenv("RUNTIME_DIRECTORY", want, 1);
    TU_OK(mk_paths_runtime_dir_at(run, "cam0", out, sizeof out));
    assert_string_equal(out, rt);
    assert_int_equal(stat(rt, &st), 0);
    unsetenv("RUNTIME_DIRECTORY");
    /* An unusable RUN (a file in the way): root gets an error naming it; anyone else falls back to
     * $XDG_RUNTIME_DIR/maskd/INSTANCE. */
    char blocked[256], xdg[256];
    snprintf(blocked, sizeof blocked, "%s/blocked", tmpdir);
    write_file(blocked, "not a directory");
    snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
    mkdir(xdg, 0700);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    int rc = mk_paths_runtime_dir_at(blocked, "cam0", out, sizeof out);
    if (geteuid() == 0) {
        assert_int_equal(rc, MK_EIO);
        assert_non_null(strstr(mk_err_msg(), blocked));
    } else {
        TU_OK(rc);
        snprintf(want, sizeof want, "%s/maskd/cam0", xdg);
        assert_string_equal(out, want);
    }

    /* Clients: the first candidate that is a socket. */
    snprintf(want, sizeof want, "%s/maskd/cam1/control.sock", xdg);
    assert_int_equal(mk_paths_control_socket_at(run, "cam1", out, sizeof out), MK_EIO);
    snprintf(rt, sizeof rt, "%s/cam1/control.sock", run);
    assert_string_equal(out, rt); /* the first candidate, for the message */
    assert_non_null(strstr(mk_err_msg(), want));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/maskd", xdg);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/maskd/cam1", xdg);
    mkdir(dir, 0755);
    make_socket(want);
    TU_OK(mk_paths_control_socket_at(run, "cam1", out, sizeof out));
    assert_string_equal(out, want);
    snprintf(dir, sizeof dir, "%s/cam1", run);
    mkdir(dir, 0755);
    make_socket(rt);
    TU_OK(mk_paths_control_socket_at(run, "cam1", out, sizeof out));
    assert_string_equal(out, rt);
    /* No instance named: $RUNTIME_DIRECTORY's socket first, then instance "default". */
    snprintf(rt, sizeof rt, "%s/systemd-rt/control.sock", tmpdir);
    make_socket(rt);
    snprintf(want, sizeof want, "%s/systemd-rt", tmpdir);
    setenv("RUNTIME_DIRECTORY", want, 1);
    TU_OK(mk_paths_control_socket_at(run, NULL, out, sizeof out));
    assert_string_equal(out, rt);
    TU_OK(mk_paths_control_socket_at(run, "cam1", out, sizeof out)); /* a named instance ignores it */
    assert_string_not_equal(out, rt);
    unsetenv("RUNTIME_DIRECTORY");
    assert_int_equal(mk_paths_control_socket_at(run, NULL, out, sizeof out), MK_EIO);
    assert_non_null(strstr(out, "/" MK_DEFAULT_INSTANCE "/control.sock"));
    unsetenv("XDG_RUNTIME_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),          cmocka_unit_test(test_values_text),
        cmocka_unit_test(test_values_json),    cmocka_unit_test(test_controls_parse),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_files),          cmocka_unit_test(test_transactions),
        cmocka_unit_test(test_markdown_and_list), cmocka_unit_test(test_default_file),
        cmocka_unit_test(test_docs),           cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
