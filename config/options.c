/* options: the option table of maskd and the typed parsing, printing and description of option values. */
#include "options.h"

#include "config.h"
#include "darknet.h"
#include "errors.h"
#include "image.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- syntax checks of string options ----------------------------------------------------------------------- */

static int check_spec(const char *s, char *what, size_t n)
{
    snprintf(what, n, "testpattern, v4l2:DEVICE or file:PATH");
    if (!strcmp(s, "testpattern"))
        return 0;
    if (!strncmp(s, "v4l2:", 5) && s[5])
        return 0;
    if (!strncmp(s, "file:", 5) && s[5])
        return 0;
    return MK_EINVAL;
}

/* Comma-separated class indices or names: no empty items, no control characters. */
static int check_classes(const char *s, char *what, size_t n)
{
    snprintf(what, n, "comma-separated class indices or names (empty: every class)");
    if (!*s)
        return 0;
    const char *item = s;
    for (const char *p = s;; p++) {
        if (*p == ',' || *p == '\0') {
            const char *a = item, *b = p;
            while (a < b && *a == ' ')
                a++;
            while (b > a && b[-1] == ' ')
                b--;
            if (a == b)
                return MK_EINVAL;
            if (!*p)
                return 0;
            item = p + 1;
        } else if (iscntrl((unsigned char)*p)) {
            return MK_EINVAL;
        }
    }
}

static const char *skip_spaces(const char *p)
{
    while (*p == ' ')
        p++;
    return p;
}

static int controls_fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int controls_fail(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return MK_EINVAL;
}

int mk_cfg_controls_parse(const char *s, mk_cfg_control_t *out, char *err, size_t n)
{
    mk_cfg_control_t seen[MK_CFG_CONTROLS_MAX];
    if (!out)
        out = seen;
    int count = 0;
    if (!*s)
        return 0;
    for (const char *p = s;;) {
        int item = count + 1;
        const char *name = p = skip_spaces(p);
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        int len = (int)(p - name);
        if (!len)
            return controls_fail(err, n, "item %d: a control name (letters, digits, '_') expected", item);
        if (len >= MK_CFG_CONTROL_NAME_MAX)
            return controls_fail(err, n, "item %d: the name is longer than %d characters", item,
                                 MK_CFG_CONTROL_NAME_MAX - 1);
        if (count == MK_CFG_CONTROLS_MAX)
            return controls_fail(err, n, "more than %d controls", MK_CFG_CONTROLS_MAX);
        mk_cfg_control_t *c = &out[count];
        memcpy(c->name, name, (size_t)len);
        c->name[len] = '\0';
        p = skip_spaces(p);
        if (*p != '=')
            return controls_fail(err, n, "item %d (%s): '=' and a value expected", item, c->name);
        p = skip_spaces(p + 1);
        int neg = *p == '-';
        p += neg;
        const char *digits_at = p;
        long long v = 0;
        for (; *p >= '0' && *p <= '9'; p++)
            if ((v = v * 10 + (*p - '0')) > 2147483648LL)
                return controls_fail(err, n, "item %d (%s): the value is outside the 32-bit range", item, c->name);
        if (p == digits_at)
            return controls_fail(err, n, "item %d (%s): the value is not an integer", item, c->name);
        c->value = neg ? -v : v;
        if (c->value > 2147483647LL)
            return controls_fail(err, n, "item %d (%s): the value is outside the 32-bit range", item, c->name);
        for (int i = 0; i < count; i++)
            if (!strcasecmp(out[i].name, c->name))
                return controls_fail(err, n, "control %s given twice", c->name);
        count++;
        p = skip_spaces(p);
        if (!*p)
            return count;
        if (*p != ',')
            return controls_fail(err, n, "item %d (%s): ',' or the end expected after the value", item, c->name);
        p++;
    }
}

static int check_controls(const char *s, char *what, size_t n)
{
    snprintf(what, n, "comma-separated V4L2 controls name=value with integer values (empty: none)");
    return mk_cfg_controls_parse(s, NULL, NULL, 0) < 0 ? MK_EINVAL : 0;
}

/* A group name as useradd accepts it ([a-z_][a-z0-9_-]*, optionally ending in $), or a number. */
static int check_group(const char *s, char *what, size_t n)
{
    snprintf(what, n, "a group name or number (empty: the daemon's group)");
    if (!*s)
        return 0;
    size_t len = strlen(s), digits = strspn(s, "0123456789");
    if (digits == len)
        return len <= 10 ? 0 : MK_EINVAL;
    if (len > 32 || !(islower((unsigned char)s[0]) || s[0] == '_'))
        return MK_EINVAL;
    for (size_t i = 1; i < len; i++) {
        char c = s[i];
        if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '_' || c == '-' ||
              (c == '$' && i == len - 1)))
            return MK_EINVAL;
    }
    return 0;
}

/* ---- the table ----------------------------------------------------------------------------------------------- */

static const char *const v_backend[] = {"auto", "cpu", "cuda", NULL};
static const char *const v_format[] = {"auto", "mjpeg", "yuyv", NULL};
static const char *const v_letterbox[] = {"warp", "darknet", NULL};
static const char *const v_cudnn[] = {"auto", "on", "off", NULL};
_Static_assert(MK_NET_CUDNN_AUTO == 0 && MK_NET_CUDNN_ON == 1 && MK_NET_CUDNN_OFF == 2, "v_cudnn follows MK_NET_CUDNN_*");
static const char *const v_cut[] = {"box", "ellipse", "grabcut", NULL};
static const char *const v_keyframe[] = {"always", "interval", "adaptive", NULL};
static const char *const v_thresh[] = {"none", "fixed", "otsu", NULL};
static const char *const v_level[] = {"error", "warn", "info", "debug", "trace", NULL};
static const char *const v_decoder[] = {"auto", "cpu", "nvjpeg", NULL};
_Static_assert(MK_CFG_DECODER_AUTO == 0 && MK_CFG_DECODER_CPU == 1 && MK_CFG_DECODER_NVJPEG == 2,
               "v_decoder follows MK_CFG_DECODER_*");

#define F(field) offsetof(mk_config_t, field)
#define DIM MK_IMAGE_MAX_DIM
#define LIVE MK_OPT_LIVE
#define BOOL(name, field, def, flags, doc) {name, MK_OPT_BOOL, F(field), def, 0, 1, NULL, flags, NULL, doc}
#define INT(name, field, def, lo, hi, flags, doc) {name, MK_OPT_INT, F(field), def, lo, hi, NULL, flags, NULL, doc}
#define DBL(name, field, def, lo, hi, flags, doc) {name, MK_OPT_DOUBLE, F(field), def, lo, hi, NULL, flags, NULL, doc}
#define STR(name, field, def, check, flags, doc) {name, MK_OPT_STRING, F(field), def, 0, 0, NULL, flags, check, doc}
#define ENUM(name, field, def, values, flags, doc)                                                             \
    {name, MK_OPT_ENUM, F(field), def, 0, 0, values, flags, NULL, doc}

static const mk_opt_t table[] = {
    STR("source.spec", source.spec, "testpattern", check_spec, 0,
        "Where frames come from: `testpattern` (built in, needs no camera), `v4l2:/dev/videoN` (a camera) or "
        "`file:PATH` (a directory of JPEGs, an MJPEG AVI, a raw MJPEG stream or a Y4M file)."),
    {"source.size", MK_OPT_SIZE, F(source.size), "640x480", 16, DIM, NULL, 0, NULL,
     "Frame size asked of a camera (the nearest it offers is taken) and the test pattern's size; files keep "
     "their own."},
    INT("source.fps", source.fps, "30", 1, 240, 0,
        "Frame rate asked of a camera, of the test pattern, and of file sources that carry none (JPEG "
        "directories, raw MJPEG)."),
    ENUM("source.format", source.format, "auto", v_format, 0,
         "Camera pixel format: `auto` takes MJPEG when offered (less USB bandwidth), else YUYV."),
    BOOL("source.loop", source.loop, "true", 0, "File sources: start again at the end instead of stopping."),
    BOOL("source.realtime", source.realtime, "true", 0,
         "File sources: deliver frames at their frame rate (false: as fast as the pipeline takes them)."),
    INT("source.timeout_ms", source.timeout_ms, "2000", 100, 60000, 0,
        "A camera that delivers no frame for this long is lost (state `source-lost`) and reopened with "
        "backoff."),
    INT("source.retry_max_ms", source.retry_max_ms, "5000", 100, 600000, 0,
        "Longest wait between attempts to reopen a lost camera (the wait doubles from 100 ms up to this)."),
    STR("source.controls", source.controls, "", check_controls, LIVE,
        "Camera (V4L2) controls, as `name=value` pairs separated by commas, e.g. "
        "`exposure_time_absolute=150,brightness=128` (names as `maskctl stats` lists them under "
        "`source.controls.available`); applied at the next frame after a change and again whenever the camera is "
        "reopened; controls dropped from the list go back to their defaults. A control the camera refuses is "
        "logged and shown in `stats`; other sources have no controls."),
    ENUM("backend", backend, "auto", v_backend, 0,
         "Compute backend: `auto` uses CUDA when it is built in and a GPU is usable, else the CPU."),
    STR("detect.cfg", detect.cfg, "", NULL, 0,
        "Darknet `.cfg` of the person detector; empty: no detector, `select.fallback` is segmented."),
    STR("detect.weights", detect.weights, "", NULL, 0, "Darknet `.weights` matching `detect.cfg`."),
    STR("detect.names", detect.names, "", NULL, 0,
        "Class names, one per line, for `detect.classes` given by name; empty: classes are numbers."),
    DBL("detect.thresh", detect.thresh, "0.25", 0, 0.99, LIVE,
        "Score (objectness times class probability) a box must exceed to be kept, as Darknet's `-thresh`."),
    DBL("detect.nms", detect.nms, "0.45", 0, 1, LIVE,
        "Overlap (IoU) above which the weaker of two boxes of one class is suppressed; 0 turns NMS off."),
    STR("detect.classes", detect.classes, "0", check_classes, LIVE,
        "Classes that count as a person: comma-separated indices or names from `detect.names`; empty: every "
        "class."),
    ENUM("detect.letterbox", detect.letterbox, "darknet", v_letterbox, LIVE,
         "Network input: `darknet` (Darknet's letterbox_image, as the weights were trained) or `warp` (one "
         "affine warp, padding 114)."),
    BOOL("detect.fp16", detect.fp16, "true", 0,
         "Run the network in half precision on the CUDA backend (our FP16 kernels, without cuDNN; see "
         "`detect.cudnn`); the CPU backend always runs it in single precision."),
    ENUM("detect.cudnn", detect.cudnn, "auto", v_cudnn, 0,
         "Which convolutions may use cuDNN (CUDA backend): `auto` only those our own kernels do not cover (in FP16 "
         "our kernels cover Yolo-Fastest and the tiny YOLOs, so cuDNN is not loaded: about 570 MB less host "
         "memory; FP32 networks use cuDNN), `on` each timed against ours and the faster kept, `off` never (FP32 then runs on a "
         "slow direct kernel)."),
    INT("detect.every_n", detect.every_n, "1", 1, 100, LIVE,
        "Run the detector on every n-th frame; the frames between reuse its boxes."),
    DBL("select.min_score", select.min_score, "0.3", 0, 1, LIVE, "Lowest score of a box chosen as the target."),
    BOOL("select.prefer_previous", select.prefer_previous, "true", LIVE,
         "Prefer the box overlapping the previous target most over the best-scoring one (stay on one person)."),
    DBL("select.margin", select.margin, "0.1", 0, 1, LIVE,
        "Margin added on each side of the chosen box, as a fraction of its width and height, so that GrabCut "
        "sees background around the person."),
    INT("select.hold_frames", select.hold_frames, "15", 0, 100000, LIVE,
        "With nothing detected, keep publishing the last mask for this many frames, then an empty mask "
        "flagged no-person."),
    {"select.fallback", MK_OPT_RECT, F(select.fallback), "0,0,0,0", 0, DIM, NULL, LIVE, NULL,
     "The box segmented without a detector, in frame pixels; w or h 0: centred, half the frame's width and "
     "80% of its height."},
    ENUM("cut.method", cut.method, "box", v_cut, LIVE,
         "How the person is cut out of the chosen box: `grabcut` (GrabCut inside the box, on the region reduced "
         "to `grabcut.roi_max_side`), `box` (a rounded box) or `ellipse` (the ellipse "
         "inscribed in the box); the guided filter then refines the cut to full resolution so that its edges "
         "follow the image."),
    INT("grabcut.iterations", grabcut.iterations, "5", 1, 20, LIVE,
        "GrabCut iterations (GMM estimation and min-cut) of a keyframe."),
    INT("grabcut.roi_max_side", grabcut.roi_max_side, "320", 32, 4096, LIVE,
        "GrabCut runs on the box scaled down to at most this many pixels on its longer side; the guided "
        "filter restores full resolution."),
    ENUM("grabcut.keyframe", grabcut.keyframe, "adaptive", v_keyframe, LIVE,
         "When a full segmentation from the box (a keyframe) replaces updating the previous one: `always`, "
         "every `grabcut.keyframe_interval` frames (`interval`), or `adaptive`: also when the box moved "
         "(overlap with the keyframe's box below `grabcut.keyframe_iou`)."),
    INT("grabcut.keyframe_interval", grabcut.keyframe_interval, "30", 1, 10000, LIVE,
        "Frames between keyframes (`interval` and `adaptive`)."),
    DBL("grabcut.keyframe_iou", grabcut.keyframe_iou, "0.7", 0, 1, LIVE,
        "`adaptive`: a box overlapping the keyframe's by less than this (IoU) makes a new keyframe."),
    BOOL("grabcut.warm_start", grabcut.warm_start, "true", LIVE,
         "Start each frame's max-flow from the previous frame's flow when the working size is unchanged "
         "(dynamic graph cuts; CUDA backend). The mask is the same either way; only the time changes."),
    INT("grabcut.key_iterations", grabcut.key_iterations, "1", 0, 20, LIVE,
        "Iterations a keyframe runs on its own frame; the rest of `grabcut.iterations` run one per following "
        "frame (the fixed-model cut, then one learning step whose model the next frame uses), so that a "
        "keyframe costs about this many iterations' time. 0: all of them on the keyframe (always so with "
        "`grabcut.keyframe` `always`)."),
    BOOL("grabcut.reseed", grabcut.reseed, "false", LIVE,
         "Iterations after a keyframe's first (and each refining frame's learning step) learn the colour models "
         "from a new k-means of the current labels instead of OpenCV's assignment to the earlier components. On "
         "the 33 benchmark images at 1/4 resolution it raises the mean IoU from 0.805 to 0.823; it costs a k-means "
         "per iteration."),
    INT("guided.radius", guided.radius, "8", 1, 128, LIVE, "Guided filter window radius, in frame pixels."),
    DBL("guided.eps", guided.eps, "1e-4", 0, 1, LIVE,
        "Guided filter regularisation (guide scaled to [0,1]); larger values smooth across weaker edges."),
    INT("guided.scale", guided.scale, "4", 1, 16, LIVE,
        "Fast guided filter: coefficients computed at 1/scale resolution (1: the plain guided filter). With "
        "`cut.method` grabcut the scale is GrabCut's working reduction instead (`grabcut.roi_max_side`)."),
    ENUM("mask.threshold", mask.threshold, "none", v_thresh, LIVE,
         "Binarise the published mask: `none` (soft edges), `fixed` (at `mask.value`) or `otsu` (Otsu's "
         "threshold of the box)."),
    DBL("mask.value", mask.value, "0.5", 0, 1, LIVE, "`fixed`: the threshold on the soft mask (0..1)."),
    DBL("mask.feather", mask.feather, "0", 0, 1, LIVE,
        "`fixed`: width of a linear ramp around `mask.value` instead of a hard edge (0: hard)."),
    BOOL("mask.alpha", mask.alpha, "false", LIVE, "Also publish the soft alpha matte plane on the bus."),
    INT("bus.slots", bus.slots, "4", 3, 64, 0, "Frame slots of the bus (readers get the newest; at least 3)."),
    INT("bus.mode", bus.mode, "0640", 0, 0777, MK_OPT_OCTAL,
        "Permission bits of the frame object `/dev/shm/maskd.INSTANCE`; readers in its group read it."),
    STR("bus.group", bus.group, "", check_group, 0,
        "Group owning the bus objects (a name or number); empty: the daemon's group."),
    BOOL("bus.frame", bus.frame, "false", LIVE, "Also publish the camera frame (RGB) with each mask."),
    INT("bus.heartbeat_ms", bus.heartbeat_ms, "100", 10, 10000, 0,
        "Heartbeat period by which readers tell a live daemon from a dead one."),
    INT("pipeline.queue_depth", pipeline.queue_depth, "2", 1, 16, 0,
        "Frames each stage's input queue holds; when it is full the oldest is dropped (latency first)."),
    INT("pipeline.decode_threads", pipeline.decode_threads, "2", 1, 16, 0, "MJPEG decoding threads."),
    ENUM("pipeline.decoder", pipeline.decoder, "cpu", v_decoder, 0,
         "MJPEG decoder: `cpu` (libjpeg-turbo on `pipeline.decode_threads` threads), `nvjpeg` (the GPU's JPEG "
         "engine where it has one, else nvJPEG's hybrid decoder, on one thread whatever `pipeline.decode_threads`: "
         "more contend for the engine; needs libnvjpeg of the CUDA toolkit, opened at start) or `auto`: nvJPEG "
         "when `backend` is CUDA and nvJPEG opens, else the CPU. On an H100 at 1280x720 nvJPEG decodes ~1450 "
         "frames/s (0.5 ms each) where four CPU threads decode ~440 (4.6 ms each on one thread), but it adds "
         "17-30 MB of host memory, which is why it is not the default. Without nvJPEG the CPU decodes (a warning "
         "when `nvjpeg` was asked for); frames nvJPEG fails on are decoded on the CPU. `maskctl stats` shows the "
         "decoder in use."),
    INT("pipeline.inflight", pipeline.inflight, "2", 1, 4, 0,
        "Frames segmented at once, each on its own stream and thread (CUDA: one frame's upload, detection and "
        "download overlap another's GrabCut; CPU: frames on several cores). The masks are the same at every "
        "depth; more in flight raises throughput, not the latency of a frame. On the CPU backend of a machine with "
        "few cores 1 is better (the CPU ops already use every core)."),
    BOOL("idle.enable", idle.enable, "true", LIVE,
         "Stop capturing (camera LED off) while no bus reader has been attached for `idle.timeout_s`; resume "
         "when one attaches."),
    INT("idle.timeout_s", idle.timeout_s, "10", 1, 86400, LIVE, "Seconds without readers before idling."),
    INT("control.max_clients", control.max_clients, "64", 1, 1024, 0,
        "Control socket clients at once; one more gets a `busy` error and is disconnected."),
    INT("control.max_line_bytes", control.max_line_bytes, "65536", 1024, 16777216, 0,
        "Longest request line; a longer one gets a `parse` error and is skipped up to its newline."),
    INT("control.max_output_bytes", control.max_output_bytes, "1048576", 65536, 268435456, 0,
        "Replies and events a client may leave unread, in bytes; a client beyond it (a subscriber that does "
        "not read) is disconnected."),
    INT("control.set_timeout_ms", control.set_timeout_ms, "2000", 10, 60000, 0,
        "How long a `set` waits for the pipeline's next frame boundary before it fails with `busy`."),
    INT("control.stats_period_ms", control.stats_period_ms, "1000", 100, 60000, LIVE,
        "Period of the `stats` event sent to subscribers."),
    ENUM("log.level", log.level, "info", v_level, LIVE, "Log level: error, warn, info, debug or trace."),
};

_Static_assert(sizeof table / sizeof table[0] <= MK_OPT_MAX, "raise MK_OPT_MAX");

int mk_options_count(void)
{
    return (int)(sizeof table / sizeof table[0]);
}

const mk_opt_t *mk_options_at(int i)
{
    return i >= 0 && i < mk_options_count() ? &table[i] : NULL;
}

const mk_opt_t *mk_options_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < mk_options_count(); i++)
        if (!strcmp(table[i].name, name))
            return &table[i];
    return NULL;
}

int mk_options_index(const mk_opt_t *o)
{
    return (int)(o - table);
}

int mk_options_is_section(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; n && i < mk_options_count(); i++)
        if (!strncmp(table[i].name, name, n) && table[i].name[n] == '.')
            return 1;
    return 0;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (lb >= sizeof row / sizeof row[0] || la >= 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *mk_options_suggest(const char *name)
{
    const char *best = NULL, *suffix = NULL;
    size_t best_d = 4, n = strlen(name);
    int suffixes = 0;
    for (int i = 0; i < mk_options_count(); i++) {
        const char *o = table[i].name;
        size_t lo = strlen(o);
        if (lo > n + 1 && o[lo - n - 1] == '.' && !strcmp(o + lo - n, name)) {
            suffix = o;
            suffixes++;
        }
        size_t d = edit_distance(name, o);
        if (d < best_d) {
            best_d = d;
            best = o;
        }
    }
    return best ? best : suffixes == 1 ? suffix : NULL;
}

const char *mk_opt_type_name(mk_opt_type_t t)
{
    static const char *const names[] = {"bool", "int", "double", "string", "enum", "size", "rect"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- values ------------------------------------------------------------------------------------------------ */

static void *field(const mk_opt_t *o, mk_config_t *cfg)
{
    return (char *)cfg + o->offset;
}

static const void *cfield(const mk_opt_t *o, const mk_config_t *cfg)
{
    return (const char *)cfg + o->offset;
}

/* The range part of the expectation: "1..20", "auto|cpu|cuda". `sep` separates enum names. */
static void range_text(const mk_opt_t *o, char *buf, size_t n, const char *sep)
{
    buf[0] = '\0';
    switch (o->type) {
    case MK_OPT_INT:
        if (o->flags & MK_OPT_OCTAL)
            snprintf(buf, n, "%04o..%04o", (unsigned)o->min, (unsigned)o->max);
        else
            snprintf(buf, n, "%.0f..%.0f", o->min, o->max);
        break;
    case MK_OPT_DOUBLE:
        snprintf(buf, n, "%g..%g", o->min, o->max);
        break;
    case MK_OPT_ENUM: {
        size_t pos = 0;
        for (int i = 0; o->values[i] && pos < n; i++)
            pos += (size_t)snprintf(buf + pos, n - pos, "%s%s", i ? sep : "", o->values[i]);
        break;
    }
    case MK_OPT_SIZE:
        snprintf(buf, n, "W and H in %.0f..%.0f", o->min, o->max);
        break;
    case MK_OPT_RECT:
        snprintf(buf, n, "x, y in 0..%.0f, w, h in %.0f..%.0f", o->max, o->min, o->max);
        break;
    case MK_OPT_STRING:
        if (o->check)
            o->check("", buf, n);
        else
            snprintf(buf, n, "at most %d bytes", MK_CFG_STR_MAX - 1);
        break;
    case MK_OPT_BOOL:
        snprintf(buf, n, "true or false");
        break;
    }
}

const char *mk_opt_expected(const mk_opt_t *o, char *buf, size_t n)
{
    char range[256];
    range_text(o, range, sizeof range, "|");
    switch (o->type) {
    case MK_OPT_BOOL:
        snprintf(buf, n, "true or false");
        break;
    case MK_OPT_INT:
        snprintf(buf, n, "%s %s", o->flags & MK_OPT_OCTAL ? "octal mode string" : "integer", range);
        break;
    case MK_OPT_DOUBLE:
        snprintf(buf, n, "number %s", range);
        break;
    case MK_OPT_ENUM:
        snprintf(buf, n, "one of %s", range);
        break;
    case MK_OPT_SIZE:
        snprintf(buf, n, "size \"WxH\" with %s", range);
        break;
    case MK_OPT_RECT:
        snprintf(buf, n, "rectangle \"x,y,w,h\" with %s", range);
        break;
    case MK_OPT_STRING:
        snprintf(buf, n, "%s%s", o->check ? "" : "string of ", range);
        break;
    }
    return buf;
}

/* `s` as a JSON string literal, cut at 60 bytes. */
static void quote(const char *s, char *out, size_t n)
{
    size_t pos = 0, len = strlen(s);
    int cut = len > 60;
    if (n < 8)
        return;
    out[pos++] = '"';
    for (size_t i = 0; i < (cut ? 60 : len) && pos + 8 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            pos += (size_t)snprintf(out + pos, n - pos, "\\%c", c);
        else if (c < 0x20)
            pos += (size_t)snprintf(out + pos, n - pos, "\\u%04x", c);
        else
            out[pos++] = (char)c;
    }
    snprintf(out + pos, n - pos, "%s\"", cut ? "..." : "");
}

static int fail(int code, const mk_opt_t *o, const char *got, char *err, size_t n)
{
    char what[320];
    if (err && n)
        snprintf(err, n, "%s: expected %s, got %s", o->name, mk_opt_expected(o, what, sizeof what), got);
    return code;
}

static int fail_text(int code, const mk_opt_t *o, const char *text, char *err, size_t n)
{
    char got[80];
    quote(text, got, sizeof got);
    return fail(code, o, got, err, n);
}

/* Unsigned decimal digits only (no sign, no spaces); NULL when there are none or the value exceeds max. */
static const char *digits(const char *s, long max, long *out)
{
    long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > max)
            return NULL;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

typedef union {
    int i;
    double d;
    mk_cfg_size_t size;
    mk_cfg_rect_t rect;
} value_t;

/* Parses text into v (not for strings). 0, MK_EINVAL (syntax) or MK_ERANGE. */
static int parse_value(const mk_opt_t *o, const char *s, value_t *v)
{
    switch (o->type) {
    case MK_OPT_BOOL: {
        static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
        for (int i = 0; i < 4; i++) {
            if (!strcmp(s, yes[i])) {
                v->i = 1;
                return 0;
            }
            if (!strcmp(s, no[i])) {
                v->i = 0;
                return 0;
            }
        }
        return MK_EINVAL;
    }
    case MK_OPT_INT: {
        long x;
        const char *end;
        if (o->flags & MK_OPT_OCTAL) {
            size_t len = strlen(s);
            if (len < 1 || len > 4 || strspn(s, "01234567") != len)
                return MK_EINVAL;
            x = strtol(s, NULL, 8);
        } else {
            int neg = s[0] == '-';
            if (!(end = digits(s + neg, 1L << 40, &x)) || *end)
                return MK_EINVAL;
            x = neg ? -x : x;
        }
        if (x < o->min || x > o->max)
            return MK_ERANGE;
        v->i = (int)x;
        return 0;
    }
    case MK_OPT_DOUBLE: {
        char *end;
        if (!*s || strspn(s, "0123456789.eE+-") != strlen(s))
            return MK_EINVAL;
        errno = 0;
        double d = strtod(s, &end);
        if (*end || !isfinite(d) || errno == ERANGE)
            return MK_EINVAL;
        if (d < o->min || d > o->max)
            return MK_ERANGE;
        v->d = d;
        return 0;
    }
    case MK_OPT_ENUM:
        for (int i = 0; o->values[i]; i++)
            if (!strcmp(s, o->values[i])) {
                v->i = i;
                return 0;
            }
        return MK_EINVAL;
    case MK_OPT_SIZE: {
        long w, h;
        const char *p = digits(s, 1L << 40, &w);
        if (!p || (*p != 'x' && *p != 'X') || !(p = digits(p + 1, 1L << 40, &h)) || *p)
            return MK_EINVAL;
        if (w < o->min || w > o->max || h < o->min || h > o->max)
            return MK_ERANGE;
        v->size.w = (int)w;
        v->size.h = (int)h;
        return 0;
    }
    case MK_OPT_RECT: {
        long r[4];
        const char *p = s;
        for (int i = 0; i < 4; i++) {
            if (!(p = digits(p, 1L << 40, &r[i])) || *p != (i < 3 ? ',' : '\0'))
                return MK_EINVAL;
            p++;
        }
        for (int i = 0; i < 4; i++)
            if (r[i] > o->max || (i >= 2 && r[i] < o->min))
                return MK_ERANGE;
        v->rect = (mk_cfg_rect_t){(int)r[0], (int)r[1], (int)r[2], (int)r[3]};
        return 0;
    }
    case MK_OPT_STRING:
        break;
    }
    return MK_EINVAL;
}

static void store(const mk_opt_t *o, mk_config_t *cfg, const value_t *v)
{
    void *f = field(o, cfg);
    switch (o->type) {
    case MK_OPT_BOOL:
    case MK_OPT_INT:
    case MK_OPT_ENUM:
        *(int *)f = v->i;
        break;
    case MK_OPT_DOUBLE:
        *(double *)f = v->d;
        break;
    case MK_OPT_SIZE:
        *(mk_cfg_size_t *)f = v->size;
        break;
    case MK_OPT_RECT:
        *(mk_cfg_rect_t *)f = v->rect;
        break;
    case MK_OPT_STRING:
        break;
    }
}

static int parse_string(const mk_opt_t *o, const char *s, mk_config_t *cfg, const char *got, char *err,
                        size_t n)
{
    char what[256];
    if (strlen(s) >= MK_CFG_STR_MAX || (o->check && o->check(s, what, sizeof what)))
        return got ? fail(MK_EINVAL, o, got, err, n) : fail_text(MK_EINVAL, o, s, err, n);
    memcpy(field(o, cfg), s, strlen(s) + 1);
    return 0;
}

int mk_opt_parse_text(const mk_opt_t *o, const char *text, mk_config_t *cfg, char *err, size_t n)
{
    if (!o || !text || !cfg)
        return mk_err_set(MK_EINVAL, "mk_opt_parse_text: NULL argument");
    if (o->type == MK_OPT_STRING)
        return parse_string(o, text, cfg, NULL, err, n);
    value_t v;
    int rc = parse_value(o, text, &v);
    if (rc)
        return fail_text(rc, o, text, err, n);
    store(o, cfg, &v);
    return 0;
}

int mk_opt_parse_json(const mk_opt_t *o, const cJSON *j, mk_config_t *cfg, char *err, size_t n)
{
    if (!o || !j || !cfg)
        return mk_err_set(MK_EINVAL, "mk_opt_parse_json: NULL argument");
    char got[80];
    char *printed = cJSON_PrintUnformatted(j);
    if (!printed)
        return mk_err_set(MK_ENOMEM, "out of memory");
    size_t plen = strlen(printed);
    if (plen > 60)
        snprintf(got, sizeof got, "%.60s...", printed);
    else
        snprintf(got, sizeof got, "%s", printed);
    free(printed);

    value_t v;
    int rc = 0;
    int wants_string = o->type == MK_OPT_STRING || o->type == MK_OPT_ENUM || o->type == MK_OPT_SIZE ||
                       o->type == MK_OPT_RECT || (o->type == MK_OPT_INT && (o->flags & MK_OPT_OCTAL));
    if (wants_string) {
        if (!cJSON_IsString(j))
            return fail(MK_EINVAL, o, got, err, n);
        if (o->type == MK_OPT_STRING)
            return parse_string(o, j->valuestring, cfg, got, err, n);
        rc = parse_value(o, j->valuestring, &v);
    } else if (o->type == MK_OPT_BOOL) {
        if (!cJSON_IsBool(j))
            return fail(MK_EINVAL, o, got, err, n);
        v.i = cJSON_IsTrue(j);
    } else {
        if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
            return fail(MK_EINVAL, o, got, err, n);
        double d = j->valuedouble;
        if (o->type == MK_OPT_INT) {
            if (d != floor(d))
                return fail(MK_EINVAL, o, got, err, n);
            if (d < o->min || d > o->max)
                rc = MK_ERANGE;
            else
                v.i = (int)d;
        } else if (d < o->min || d > o->max) {
            rc = MK_ERANGE;
        } else {
            v.d = d;
        }
    }
    if (rc)
        return fail(rc, o, got, err, n);
    store(o, cfg, &v);
    return 0;
}

/* The shortest %g form that reads back to d exactly. */
static int format_double(double d, char *buf, size_t n)
{
    int len = 0;
    for (int prec = 1; prec <= 17; prec++) {
        len = snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return len;
}

int mk_opt_format(const mk_opt_t *o, const mk_config_t *cfg, char *buf, size_t n)
{
    const void *f = cfield(o, cfg);
    switch (o->type) {
    case MK_OPT_BOOL:
        return snprintf(buf, n, "%s", *(const int *)f ? "true" : "false");
    case MK_OPT_INT:
        return snprintf(buf, n, o->flags & MK_OPT_OCTAL ? "%04o" : "%d", *(const int *)f);
    case MK_OPT_DOUBLE:
        return format_double(*(const double *)f, buf, n);
    case MK_OPT_STRING:
        return snprintf(buf, n, "%s", (const char *)f);
    case MK_OPT_ENUM: {
        int i = *(const int *)f;
        int count = 0;
        while (o->values[count])
            count++;
        return snprintf(buf, n, "%s", i >= 0 && i < count ? o->values[i] : "?");
    }
    case MK_OPT_SIZE: {
        const mk_cfg_size_t *s = f;
        return snprintf(buf, n, "%dx%d", s->w, s->h);
    }
    case MK_OPT_RECT: {
        const mk_cfg_rect_t *r = f;
        return snprintf(buf, n, "%d,%d,%d,%d", r->x, r->y, r->w, r->h);
    }
    }
    return snprintf(buf, n, "?");
}

cJSON *mk_opt_to_json(const mk_opt_t *o, const mk_config_t *cfg)
{
    const void *f = cfield(o, cfg);
    switch (o->type) {
    case MK_OPT_BOOL:
        return cJSON_CreateBool(*(const int *)f);
    case MK_OPT_INT:
        if (!(o->flags & MK_OPT_OCTAL))
            return cJSON_CreateNumber(*(const int *)f);
        break;
    case MK_OPT_DOUBLE:
        return cJSON_CreateNumber(*(const double *)f);
    default:
        break;
    }
    char buf[MK_CFG_STR_MAX];
    mk_opt_format(o, cfg, buf, sizeof buf);
    return cJSON_CreateString(buf);
}

int mk_opt_equal(const mk_opt_t *o, const mk_config_t *a, const mk_config_t *b)
{
    const void *fa = cfield(o, a), *fb = cfield(o, b);
    switch (o->type) {
    case MK_OPT_BOOL:
    case MK_OPT_INT:
    case MK_OPT_ENUM:
        return *(const int *)fa == *(const int *)fb;
    case MK_OPT_DOUBLE:
        return *(const double *)fa == *(const double *)fb;
    case MK_OPT_STRING:
        return !strcmp(fa, fb);
    case MK_OPT_SIZE:
        return !memcmp(fa, fb, sizeof(mk_cfg_size_t));
    case MK_OPT_RECT:
        return !memcmp(fa, fb, sizeof(mk_cfg_rect_t));
    }
    return 0;
}

void mk_opt_copy(const mk_opt_t *o, mk_config_t *dst, const mk_config_t *src)
{
    size_t size = 0;
    switch (o->type) {
    case MK_OPT_BOOL:
    case MK_OPT_INT:
    case MK_OPT_ENUM:
        size = sizeof(int);
        break;
    case MK_OPT_DOUBLE:
        size = sizeof(double);
        break;
    case MK_OPT_STRING:
        size = strlen(cfield(o, src)) + 1;
        break;
    case MK_OPT_SIZE:
        size = sizeof(mk_cfg_size_t);
        break;
    case MK_OPT_RECT:
        size = sizeof(mk_cfg_rect_t);
        break;
    }
    memcpy(field(o, dst), cfield(o, src), size);
}

/* ---- descriptions ---------------------------------------------------------------------------------------- */

cJSON *mk_opt_describe(const mk_opt_t *o, const mk_config_t *cfg)
{
    mk_config_t *def = malloc(sizeof *def);
    cJSON *d = cJSON_CreateObject();
    char buf[320];
    if (!def || !d)
        goto fail;
    mk_config_defaults(def);
    cJSON_AddStringToObject(d, "name", o->name);
    cJSON_AddStringToObject(d, "type", mk_opt_type_name(o->type));
    cJSON_AddItemToObject(d, "default", mk_opt_to_json(o, def));
    if ((o->type == MK_OPT_INT && !(o->flags & MK_OPT_OCTAL)) || o->type == MK_OPT_DOUBLE) {
        cJSON_AddNumberToObject(d, "min", o->min);
        cJSON_AddNumberToObject(d, "max", o->max);
    }
    if (o->type == MK_OPT_ENUM) {
        cJSON *vals = cJSON_AddArrayToObject(d, "values");
        for (int i = 0; vals && o->values[i]; i++)
            cJSON_AddItemToArray(vals, cJSON_CreateString(o->values[i]));
    }
    cJSON_AddStringToObject(d, "expected", mk_opt_expected(o, buf, sizeof buf));
    cJSON_AddBoolToObject(d, "live", (o->flags & MK_OPT_LIVE) != 0);
    cJSON_AddStringToObject(d, "doc", o->doc);
    if (cfg)
        cJSON_AddItemToObject(d, "value", mk_opt_to_json(o, cfg));
    free(def);
    return d;
fail:
    free(def);
    cJSON_Delete(d);
    return NULL;
}

cJSON *mk_options_describe(const mk_config_t *cfg)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < mk_options_count(); i++) {
        cJSON *d = mk_opt_describe(&table[i], cfg);
        if (!d) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, d);
    }
    return arr;
}

/* A growing string for the Markdown table. */
typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (int attempt = 0; attempt < 2 && !b->failed; attempt++) {
        va_start(ap, fmt);
        int need = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (need < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->len + (size_t)need < b->cap) {
            b->len += (size_t)need;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)need;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

char *mk_options_markdown(void)
{
    mk_config_t *def = malloc(sizeof *def);
    sbuf_t b = {0};
    if (!def)
        return NULL;
    mk_config_defaults(def);
    sb_add(&b, "| option | type | default | values | changes | description |\n");
    sb_add(&b, "|---|---|---|---|---|---|\n");
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = &table[i];
        char value[MK_CFG_STR_MAX], range[320];
        mk_opt_format(o, def, value, sizeof value);
        range_text(o, range, sizeof range, ", ");
        sb_add(&b, "| `%s` | %s | %s%s%s | %s | %s | %s |\n", o->name, mk_opt_type_name(o->type),
               value[0] ? "`" : "", value[0] ? value : "(empty)", value[0] ? "`" : "",
               o->type == MK_OPT_BOOL ? "" : range, o->flags & MK_OPT_LIVE ? "live" : "restart", o->doc);
    }
    free(def);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- hooks --------------------------------------------------------------------------------------------------- */

struct mk_opt_hooks {
    struct {
        mk_opt_apply_fn fn;
        void *user;
    } slot[MK_OPT_MAX];
};

mk_opt_hooks_t *mk_opt_hooks_new(void)
{
    return calloc(1, sizeof(mk_opt_hooks_t));
}

static int pattern_match(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (!strcmp(pattern, "*"))
        return 1;
    if (n >= 2 && pattern[n - 1] == '*' && pattern[n - 2] == '.')
        return !strncmp(pattern, name, n - 1);
    return !strcmp(pattern, name);
}

int mk_opt_hooks_set(mk_opt_hooks_t *h, const char *pattern, mk_opt_apply_fn fn, void *user)
{
    if (!h || !pattern)
        return mk_err_set(MK_EINVAL, "mk_opt_hooks_set: NULL argument");
    int matched = 0;
    for (int i = 0; i < mk_options_count(); i++)
        if (pattern_match(pattern, table[i].name)) {
            h->slot[i].fn = fn;
            h->slot[i].user = user;
            matched++;
        }
    return matched ? 0 : mk_err_set(MK_EINVAL, "no option matches '%s'", pattern);
}

void mk_opt_hooks_call(const mk_opt_hooks_t *h, int i, const mk_config_t *cfg)
{
    if (h && i >= 0 && i < mk_options_count() && h->slot[i].fn)
        h->slot[i].fn(h->slot[i].user, &table[i], cfg);
}

void mk_opt_hooks_free(mk_opt_hooks_t *h)
{
    free(h);
}
