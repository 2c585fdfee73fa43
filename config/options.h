/* options: the declarative table of maskd's configuration options (name, type, default, range or enum values,
 * live or restart-only, documentation) and the per-option value functions it drives: parsing text ("--set",
 * maskctl) and JSON (config files, the control socket), printing, comparing, describing.
 *
 * Every option is one field of mk_config_t (config.h) at a fixed offset; the table is the only place that knows
 * names, types and ranges, so the config file loader, `--set`, `--print-config`, the control socket's
 * get/set/list, the Markdown documentation and the round-trip test all follow from it.
 *
 * Value syntax (text form; JSON form in brackets):
 *   bool    true|false|yes|no|on|off|1|0                        [true / false]
 *   int     decimal integer within [min, max]                   [an integral number]
 *           MK_OPT_OCTAL: an octal string "0640" within min..max [the same string]
 *   double  decimal number within [min, max]                    [a number]
 *   string  any text of at most MK_CFG_STR_MAX - 1 bytes, checked by the option's `check` when it has one
 *   enum    one of the option's value names                     [a string]
 *   size    "WxH", each within [min, max]                       [a string]
 *   rect    "x,y,w,h": x, y within 0..max, w, h within min..max [a string]
 * Error messages name the key first: "grabcut.iterations: expected integer 1..20, got \"x\"".
 *
 * Thread rules: the table is constant; every function here is reentrant. Hooks objects belong to their creator. */
#ifndef MK_OPTIONS_H
#define MK_OPTIONS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_config mk_config_t;
struct cJSON;

typedef enum {
    MK_OPT_BOOL = 0,   /* int field, 0 or 1 */
    MK_OPT_INT = 1,    /* int field */
    MK_OPT_DOUBLE = 2, /* double field */
    MK_OPT_STRING = 3, /* char[MK_CFG_STR_MAX] field */
    MK_OPT_ENUM = 4,   /* int field: the index into `values` */
    MK_OPT_SIZE = 5,   /* mk_cfg_size_t field */
    MK_OPT_RECT = 6,   /* mk_cfg_rect_t field */
} mk_opt_type_t;

enum {
    MK_OPT_LIVE = 1u << 0,  /* may change while maskd runs (control socket `set`, reload); else restart-only */
    MK_OPT_OCTAL = 1u << 1, /* an int written as an octal string ("0660"): file modes */
};

/* The table has at most this many options (checked at compile time). */
#define MK_OPT_MAX 128

typedef struct mk_opt {
    const char *name;           /* dotted, lower case: "grabcut.iterations" */
    mk_opt_type_t type;
    size_t offset;              /* of the field in mk_config_t */
    const char *def;            /* the default in the text syntax */
    double min, max;            /* int, double: the range; size, rect: the range of each dimension */
    const char *const *values;  /* enum: the names, NULL-terminated */
    unsigned flags;             /* MK_OPT_* */
    /* string: a syntax check beyond the length limit (NULL: any text): 0 or MK_EINVAL. Whatever `s` is, it writes
     * a description of what it accepts into `what`. */
    int (*check)(const char *s, char *what, size_t n);
    const char *doc;            /* one sentence or two, for `list`, --print-config's docs and the Markdown table */
} mk_opt_t;

/* The table, in documentation order. */
int mk_options_count(void);
const mk_opt_t *mk_options_at(int i);
/* The option named exactly `name`, or NULL. */
const mk_opt_t *mk_options_find(const char *name);
/* The index of `o` in the table. */
int mk_options_index(const mk_opt_t *o);
/* 1 when `name` is a section prefix of some option ("grabcut" for grabcut.*), else 0. */
int mk_options_is_section(const char *name);
/* The nearest option name to a misspelled one (edit distance at most 3), or NULL. */
const char *mk_options_suggest(const char *name);

const char *mk_opt_type_name(mk_opt_type_t t);
/* What a valid value looks like: "integer 1..20", "one of auto|cpu|cuda". Returns buf. */
const char *mk_opt_expected(const mk_opt_t *o, char *buf, size_t n);

/* Parse a value and store it into cfg's field; on failure cfg is unchanged, MK_EINVAL or MK_ERANGE is returned
 * and `err` (may be NULL) receives "key: expected ..., got ...". */
int mk_opt_parse_text(const mk_opt_t *o, const char *text, mk_config_t *cfg, char *err, size_t n);
int mk_opt_parse_json(const mk_opt_t *o, const struct cJSON *v, mk_config_t *cfg, char *err, size_t n);
/* The field's value as text that mk_opt_parse_text reads back to an equal value (doubles round-trip exactly).
 * Returns the length written (snprintf-like). */
int mk_opt_format(const mk_opt_t *o, const mk_config_t *cfg, char *buf, size_t n);
/* The field's value as a new JSON item that mk_opt_parse_json reads back to an equal value; NULL on ENOMEM. */
struct cJSON *mk_opt_to_json(const mk_opt_t *o, const mk_config_t *cfg);
int mk_opt_equal(const mk_opt_t *o, const mk_config_t *a, const mk_config_t *b);
void mk_opt_copy(const mk_opt_t *o, mk_config_t *dst, const mk_config_t *src);
/* {"name", "type", "default", "min"/"max" or "values", "live", "doc", "value" (cfg's, when cfg != NULL)}. */
struct cJSON *mk_opt_describe(const mk_opt_t *o, const mk_config_t *cfg);

/* The whole table as JSON (an array of mk_opt_describe objects) and as a Markdown table for the documentation
 * (malloc'd, NULL on ENOMEM). */
struct cJSON *mk_options_describe(const mk_config_t *cfg);
char *mk_options_markdown(void);

/* Apply hooks: the slot per option that the daemon fills with the function that makes a changed value take
 * effect. mk_config_txn_commit() calls the hook of every option whose value it changed, after the whole
 * transaction is in the configuration, on the committing thread. */
typedef void (*mk_opt_apply_fn)(void *user, const mk_opt_t *opt, const mk_config_t *cfg);
typedef struct mk_opt_hooks mk_opt_hooks_t;

mk_opt_hooks_t *mk_opt_hooks_new(void);
/* Set the hook of every option matching `pattern`: a name, a section ("grabcut.*") or "*". MK_EINVAL when the
 * pattern matches no option. */
int mk_opt_hooks_set(mk_opt_hooks_t *h, const char *pattern, mk_opt_apply_fn fn, void *user);
/* Calls option i's hook if it has one. */
void mk_opt_hooks_call(const mk_opt_hooks_t *h, int i, const mk_config_t *cfg);
void mk_opt_hooks_free(mk_opt_hooks_t *h);

#ifdef __cplusplus
}
#endif
#endif
