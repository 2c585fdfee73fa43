/* config: maskd's configuration as a plain struct (one field per option of options.h), get/set by name, JSON
 * config files (nested or dotted keys), `--set key=value`, printing the effective configuration, checking a file,
 * and transactions that set several keys atomically (validate everything, then commit; every bad key reported).
 *
 * Config files are JSON objects. Keys are option names, given dotted or nested, mixed freely:
 *   {"grabcut": {"iterations": 5}, "mask.threshold": "otsu", "backend": "cpu"}
 * Values have the JSON type of options.h's syntax (numbers for int/double, strings for enum/size/rect/octal).
 * A file states changes from the defaults: keys it leaves out keep their defaults. Unknown keys, wrong types,
 * values out of range and keys given twice are errors naming the key path.
 *
 * Thread rules: an mk_config_t is plain data (copy it by assignment); functions on one object are not locked. A
 * transaction belongs to one thread at a time and may be handed to another (the control server validates on its
 * thread, the pipeline commits on its own). */
#ifndef MK_CONFIG_H
#define MK_CONFIG_H

#include "options.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Capacity of string fields, terminator included. */
#define MK_CFG_STR_MAX 1024

typedef struct {
    int w, h;
} mk_cfg_size_t;

typedef struct {
    int x, y, w, h;
} mk_cfg_rect_t;

/* Enum fields hold these indices (the order of the option's value names). */
enum { MK_CFG_BACKEND_AUTO = 0, MK_CFG_BACKEND_CPU = 1, MK_CFG_BACKEND_CUDA = 2 };       /* = mk_backend_t */
enum { MK_CFG_FORMAT_AUTO = 0, MK_CFG_FORMAT_MJPEG = 1, MK_CFG_FORMAT_YUYV = 2 };
enum { MK_CFG_LETTERBOX_WARP = 0, MK_CFG_LETTERBOX_DARKNET = 1 };                        /* = mk_letterbox_mode_t */
enum { MK_CFG_CUT_BOX = 0, MK_CFG_CUT_ELLIPSE = 1, MK_CFG_CUT_GRABCUT = 2 };
enum { MK_CFG_KEYFRAME_ALWAYS = 0, MK_CFG_KEYFRAME_INTERVAL = 1, MK_CFG_KEYFRAME_ADAPTIVE = 2 };
/* mask.threshold: the u8 mask product (kernels/mask.h) none = MK_MASK_ALPHA, fixed = MK_MASK_BINARY (mask.value,
 * mask.feather), otsu = MK_MASK_OTSU. */
enum { MK_CFG_THRESH_NONE = 0, MK_CFG_THRESH_FIXED = 1, MK_CFG_THRESH_OTSU = 2 };
enum { MK_CFG_DECODER_AUTO = 0, MK_CFG_DECODER_CPU = 1, MK_CFG_DECODER_NVJPEG = 2 };     /* = mk_decoder_t */
/* log.level: the index is the mk_log_level_t (error .. trace). */

struct mk_config {
    struct {
        char spec[MK_CFG_STR_MAX]; /* testpattern | v4l2:/dev/videoN | file:PATH */
        mk_cfg_size_t size;
        int fps;
        int format; /* MK_CFG_FORMAT_* */
        int loop, realtime;
        int timeout_ms, retry_max_ms;
        char controls[MK_CFG_STR_MAX]; /* mk_cfg_controls_parse() */
    } source;
    int backend; /* MK_CFG_BACKEND_* */
    struct {
        char cfg[MK_CFG_STR_MAX], weights[MK_CFG_STR_MAX], names[MK_CFG_STR_MAX];
        double thresh, nms;
        char classes[MK_CFG_STR_MAX];
        int letterbox; /* MK_CFG_LETTERBOX_* */
        int fp16;
        int cudnn; /* MK_NET_CUDNN_* */
        int every_n;
    } detect;
    struct {
        double min_score;
        int prefer_previous;
        double margin;
        int hold_frames;
        mk_cfg_rect_t fallback;
    } select;
    struct {
        int method; /* MK_CFG_CUT_* */
    } cut;
    struct {
        int iterations, roi_max_side;
        int keyframe; /* MK_CFG_KEYFRAME_* */
        int keyframe_interval;
        double keyframe_iou;
        int warm_start;
        int key_iterations;
        int reseed;
    } grabcut;
    struct {
        int radius;
        double eps;
        int scale;
    } guided;
    struct {
        int threshold; /* MK_CFG_THRESH_* */
        double value, feather;
        int alpha;
    } mask;
    struct {
        int slots;
        int mode; /* permission bits */
        char group[MK_CFG_STR_MAX];
        int frame;
        int heartbeat_ms;
    } bus;
    struct {
        int queue_depth, decode_threads, inflight;
        int decoder; /* MK_CFG_DECODER_* */
    } pipeline;
    struct {
        int enable, timeout_s;
    } idle;
    struct {
        int max_clients, max_line_bytes, max_output_bytes, set_timeout_ms, stats_period_ms;
    } control;
    struct {
        int level; /* mk_log_level_t */
    } log;
};

/* source.controls: device controls as "name=value" items separated by commas, e.g.
 * "exposure_time_absolute=150, brightness=128". Spaces around items, names and values are allowed; a name is
 * letters, digits and '_' (at most MK_CFG_CONTROL_NAME_MAX - 1 of them; source.h matches it against the device's
 * normalised control names), a value a decimal integer of 32 bits (V4L2 control values), no name twice (in any
 * case), at most MK_CFG_CONTROLS_MAX items; the empty string is no control. */
#define MK_CFG_CONTROLS_MAX 32
#define MK_CFG_CONTROL_NAME_MAX 40

typedef struct {
    char name[MK_CFG_CONTROL_NAME_MAX];
    long long value;
} mk_cfg_control_t;

/* Parses a source.controls value into out (MK_CFG_CONTROLS_MAX entries; NULL: only check it). Returns the number
 * of controls, or MK_EINVAL with what is wrong, and where, in err (may be NULL). */
int mk_cfg_controls_parse(const char *s, mk_cfg_control_t *out, char *err, size_t n);

/* Every option at its default. */
void mk_config_defaults(mk_config_t *cfg);
int mk_config_equal(const mk_config_t *a, const mk_config_t *b);
/* The indices of the options whose values differ (at most `max` written); returns how many differ. */
int mk_config_diff(const mk_config_t *a, const mk_config_t *b, int *idx, int max);

/* One option by name. get_json returns a new item (*out); set_* validate and leave cfg unchanged on failure,
 * returning MK_EINVAL (unknown key, wrong type) or MK_ERANGE with the message in mk_err_msg(). */
int mk_config_get_json(const mk_config_t *cfg, const char *key, struct cJSON **out);
int mk_config_get_text(const mk_config_t *cfg, const char *key, char *buf, size_t n);
int mk_config_set_text(mk_config_t *cfg, const char *key, const char *text);
int mk_config_set_json(mk_config_t *cfg, const char *key, const struct cJSON *v);

enum {
    MK_CFG_JSON_FLAT = 1u << 0,    /* dotted keys in one object instead of nested sections */
    MK_CFG_JSON_CHANGED = 1u << 1, /* only the options that differ from their defaults */
};
/* The configuration as JSON that a config file may contain (reads back to an equal configuration). */
struct cJSON *mk_config_to_json(const mk_config_t *cfg, unsigned flags);
/* The same, printed (indented, newline-terminated; malloc'd). */
char *mk_config_print(const mk_config_t *cfg, unsigned flags);

/* ---- errors ---------------------------------------------------------------------------------------------- */

typedef enum {
    MK_CFG_EUNKNOWN = 1, /* no such key */
    MK_CFG_EVALUE = 2,   /* wrong type, out of range, malformed, given twice */
    MK_CFG_ERESTART = 3, /* a restart-only key changed in a live transaction */
    MK_CFG_EFILE = 4,    /* the file could not be read or is not a JSON object */
} mk_config_ekind_t;

typedef struct {
    mk_config_ekind_t kind;
    int code;      /* the MK_E* code: MK_EINVAL, MK_ERANGE, MK_ESTATE (restart-only), MK_EIO, MK_EFORMAT */
    char key[128]; /* the key path ("" for file-level errors) */
    char msg[640]; /* the whole message, starting with the key: "grabcut.iterations: expected ..." */
} mk_config_error_t;

/* ---- transactions ---------------------------------------------------------------------------------------- */

typedef struct mk_config_txn mk_config_txn_t;

enum {
    /* Live: restart-only keys may only be "set" to the value they have in `base` (the configuration in force);
     * another value is an MK_CFG_ERESTART error. For the control socket. */
    MK_CFG_TXN_LIVE = 1u << 0,
    /* Whole: the result replaces every option on commit, not only the keys set (a config file loaded over the
     * defaults, for a reload). */
    MK_CFG_TXN_WHOLE = 1u << 1,
};

/* A transaction starting from a copy of `base`. NULL on ENOMEM. */
mk_config_txn_t *mk_config_txn_new(const mk_config_t *base, unsigned flags);
void mk_config_txn_free(mk_config_txn_t *t);

/* Each setter validates one key and records an error in the transaction on failure (so that every bad key is
 * reported); they return 0, or the negative code of the error they recorded. A key set twice in one
 * transaction is an error. */
int mk_config_txn_set(mk_config_txn_t *t, const char *key, const char *text);
int mk_config_txn_set_json(mk_config_txn_t *t, const char *key, const struct cJSON *v);
/* "key=value" (the --set syntax). */
int mk_config_txn_set_arg(mk_config_txn_t *t, const char *arg);
/* Every key of a JSON object, nested or dotted. */
int mk_config_txn_load_json(mk_config_txn_t *t, const struct cJSON *obj);
/* A config file: read, parse (JSON syntax errors give line and column), then as load_json. */
int mk_config_txn_load_file(mk_config_txn_t *t, const char *path);

size_t mk_config_txn_nerrors(const mk_config_txn_t *t);
const mk_config_error_t *mk_config_txn_error(const mk_config_txn_t *t, size_t i);
/* The candidate configuration: base with every valid set applied. */
const mk_config_t *mk_config_txn_config(const mk_config_txn_t *t);
/* Whether option i was set in this transaction. */
int mk_config_txn_touched(const mk_config_txn_t *t, int i);
/* The keys set, with their new values, flat: {"grabcut.iterations": 8}. */
struct cJSON *mk_config_txn_to_json(const mk_config_txn_t *t);

/* Commit: with errors recorded, returns MK_EINVAL and leaves dst untouched. Otherwise copies the keys set (every
 * key for MK_CFG_TXN_WHOLE) into dst, then calls the hooks (may be NULL) of the options whose values changed,
 * and returns how many changed. */
int mk_config_txn_commit(const mk_config_txn_t *t, mk_config_t *dst, const mk_opt_hooks_t *hooks);

/* Logs each error of t at `level` (an mk_log_level_t), each line starting with `prefix`. */
void mk_config_txn_log_errors(const mk_config_txn_t *t, int level, const char *prefix);
/* Sets the calling thread's message to "WHAT: the first error" (noting that there are more) and returns that
 * error's code. */
int mk_config_txn_failure(const mk_config_txn_t *t, const char *what);

/* The configuration a program runs with (maskd, masktool segment): the defaults, then the file `path` when it
 * exists (an error when it does not and `path_required`; NULL: no file), then each "key=value" of `sets` in order
 * (the --set syntax). Every error is logged at `level` (an mk_log_level_t); the first is returned with its
 * message, *out unchanged. */
int mk_config_build(const char *path, int path_required, char *const *sets, int nsets, int level, mk_config_t *out);

/* --check-config: loads `path` over the defaults and writes one line per error to `msgs` ("PATH: KEY: ...").
 * Returns 0 when the file is valid, else MK_EINVAL (or MK_EIO). */
int mk_config_check_file(const char *path, FILE *msgs);

#ifdef __cplusplus
}
#endif
#endif
