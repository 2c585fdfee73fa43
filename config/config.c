/* config: defaults, get/set by name, JSON config files, printing and transactions over the option table. */
#include "config.h"

#include "errors.h"
#include "log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KEY_MAX = 128, FILE_MAX = 1 << 20 };

void mk_config_defaults(mk_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        mk_opt_parse_text(o, o->def, cfg, NULL, 0);
    }
}

int mk_config_equal(const mk_config_t *a, const mk_config_t *b)
{
    return mk_config_diff(a, b, NULL, 0) == 0;
}

int mk_config_diff(const mk_config_t *a, const mk_config_t *b, int *idx, int max)
{
    int count = 0;
    for (int i = 0; i < mk_options_count(); i++)
        if (!mk_opt_equal(mk_options_at(i), a, b)) {
            if (idx && count < max)
                idx[count] = i;
            count++;
        }
    return count;
}

static const mk_opt_t *find(const char *key)
{
    const mk_opt_t *o = mk_options_find(key);
    if (!o) {
        const char *near = key ? mk_options_suggest(key) : NULL;
        mk_err_set(MK_EINVAL, "%s: unknown key%s%s%s", key ? key : "(null)", near ? " (did you mean " : "",
                   near ? near : "", near ? "?)" : "");
    }
    return o;
}

int mk_config_get_json(const mk_config_t *cfg, const char *key, cJSON **out)
{
    const mk_opt_t *o = find(key);
    if (!o)
        return MK_EINVAL;
    *out = mk_opt_to_json(o, cfg);
    return *out ? 0 : mk_err_set(MK_ENOMEM, "out of memory");
}

int mk_config_get_text(const mk_config_t *cfg, const char *key, char *buf, size_t n)
{
    const mk_opt_t *o = find(key);
    if (!o)
        return MK_EINVAL;
    mk_opt_format(o, cfg, buf, n);
    return 0;
}

int mk_config_set_text(mk_config_t *cfg, const char *key, const char *text)
{
    char err[640];
    const mk_opt_t *o = find(key);
    if (!o)
        return MK_EINVAL;
    int rc = mk_opt_parse_text(o, text, cfg, err, sizeof err);
    return rc ? mk_err_set(rc, "%s", err) : 0;
}

int mk_config_set_json(mk_config_t *cfg, const char *key, const cJSON *v)
{
    char err[640];
    const mk_opt_t *o = find(key);
    if (!o)
        return MK_EINVAL;
    int rc = mk_opt_parse_json(o, v, cfg, err, sizeof err);
    return rc ? mk_err_set(rc, "%s", err) : 0;
}

/* Grows a print buffer to at least `need` bytes; frees it and returns NULL on failure. */
static char *grow(char *buf, size_t *cap, size_t need)
{
    size_t c = *cap;
    while (c < need)
        c *= 2;
    char *p = realloc(buf, c);
    if (!p) {
        free(buf);
        return NULL;
    }
    *cap = c;
    return p;
}

/* The object for the section path of `name` ("a.b.c" -> root["a"]["b"]), created as needed. */
static cJSON *section_of(cJSON *root, const char *name, const char **leaf)
{
    cJSON *obj = root;
    const char *p = name, *dot;
    while ((dot = strchr(p, '.'))) {
        char part[KEY_MAX];
        snprintf(part, sizeof part, "%.*s", (int)(dot - p), p);
        cJSON *next = cJSON_GetObjectItemCaseSensitive(obj, part);
        if (!next && !(next = cJSON_AddObjectToObject(obj, part)))
            return NULL;
        obj = next;
        p = dot + 1;
    }
    *leaf = p;
    return obj;
}

cJSON *mk_config_to_json(const mk_config_t *cfg, unsigned flags)
{
    mk_config_t *def = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    if (flags & MK_CFG_JSON_CHANGED) {
        if (!(def = malloc(sizeof *def)))
            goto fail;
        mk_config_defaults(def);
    }
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        if (def && mk_opt_equal(o, cfg, def))
            continue;
        const char *leaf = o->name;
        cJSON *obj = flags & MK_CFG_JSON_FLAT ? root : section_of(root, o->name, &leaf);
        cJSON *v = mk_opt_to_json(o, cfg);
        if (!obj || !v) {
            cJSON_Delete(v);
            goto fail;
        }
        cJSON_AddItemToObject(obj, leaf, v);
    }
    free(def);
    return root;
fail:
    free(def);
    cJSON_Delete(root);
    return NULL;
}

/* Appends `obj` indented by two spaces per level; 0 or MK_ENOMEM. */
static int print_object(const cJSON *obj, int depth, char **buf, size_t *len, size_t *cap)
{
    for (const cJSON *c = obj->child; c; c = c->next) {
        char *key = NULL, *value = NULL;
        cJSON *k = cJSON_CreateString(c->string);
        key = k ? cJSON_PrintUnformatted(k) : NULL;
        cJSON_Delete(k);
        if (!cJSON_IsObject(c))
            value = cJSON_PrintUnformatted(c);
        size_t need = (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 2 * (size_t)depth + 16;
        if (!key || (!value && !cJSON_IsObject(c)) || (*len + need > *cap && !(*buf = grow(*buf, cap, *len + need)))) {
            free(key);
            free(value);
            return MK_ENOMEM;
        }
        *len += (size_t)snprintf(*buf + *len, *cap - *len, "%*s%s: %s", 2 * depth, "", key, value ? value : "{\n");
        free(key);
        free(value);
        if (cJSON_IsObject(c)) {
            if (print_object(c, depth + 1, buf, len, cap))
                return MK_ENOMEM;
            need = 2 * (size_t)depth + 4;
            if (*len + need > *cap && !(*buf = grow(*buf, cap, *len + need)))
                return MK_ENOMEM;
            *len += (size_t)snprintf(*buf + *len, *cap - *len, "%*s}", 2 * depth, "");
        }
        *len += (size_t)snprintf(*buf + *len, *cap - *len, "%s\n", c->next ? "," : "");
    }
    return 0;
}

char *mk_config_print(const mk_config_t *cfg, unsigned flags)
{
    cJSON *j = mk_config_to_json(cfg, flags);
    size_t len = 0, cap = 4096;
    char *buf = j ? malloc(cap) : NULL;
    if (buf)
        len = (size_t)snprintf(buf, cap, "{\n");
    if (!buf || print_object(j, 1, &buf, &len, &cap) != 0 || (len + 3 > cap && !(buf = grow(buf, &cap, len + 3)))) {
        free(buf);
        cJSON_Delete(j);
        return NULL;
    }
    snprintf(buf + len, cap - len, "}\n");
    cJSON_Delete(j);
    return buf;
}

/* ---- transactions ---------------------------------------------------------------------------------------- */

enum { UNTOUCHED = 0, SET = 1, REJECTED = 2 };

struct mk_config_txn {
    mk_config_t base, cfg;
    unsigned flags;
    unsigned char state[MK_OPT_MAX];
    mk_config_error_t *errs;
    size_t nerrs, cap;
};

mk_config_txn_t *mk_config_txn_new(const mk_config_t *base, unsigned flags)
{
    if (!base) {
        mk_err_set(MK_EINVAL, "mk_config_txn_new: NULL base");
        return NULL;
    }
    mk_config_txn_t *t = calloc(1, sizeof *t);
    if (!t) {
        mk_err_set(MK_ENOMEM, "out of memory");
        return NULL;
    }
    t->base = *base;
    t->cfg = *base;
    t->flags = flags;
    return t;
}

void mk_config_txn_free(mk_config_txn_t *t)
{
    if (!t)
        return;
    free(t->errs);
    free(t);
}

static int add_error(mk_config_txn_t *t, mk_config_ekind_t kind, const char *key, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int add_error(mk_config_txn_t *t, mk_config_ekind_t kind, const char *key, int code, const char *fmt, ...)
{
    if (t->nerrs == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        mk_config_error_t *e = realloc(t->errs, cap * sizeof *e);
        if (!e)
            return mk_err_set(MK_ENOMEM, "out of memory");
        t->errs = e;
        t->cap = cap;
    }
    mk_config_error_t *e = &t->errs[t->nerrs++];
    e->kind = kind;
    e->code = code;
    snprintf(e->key, sizeof e->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return mk_err_set(code, "%s", e->msg);
}

static int unknown_key(mk_config_txn_t *t, const char *key)
{
    const char *near = mk_options_suggest(key);
    return add_error(t, MK_CFG_EUNKNOWN, key, MK_EINVAL, "%s: unknown key%s%s%s", key,
                     near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
}

/* Common part of the setters: duplicate check before, restart-only check after parsing into t->cfg. */
static int begin_set(mk_config_txn_t *t, const char *key, const mk_opt_t **out)
{
    const mk_opt_t *o = mk_options_find(key);
    if (!o)
        return unknown_key(t, key);
    int i = mk_options_index(o);
    if (t->state[i] != UNTOUCHED) {
        t->state[i] = REJECTED;
        return add_error(t, MK_CFG_EVALUE, key, MK_EINVAL, "%s: given more than once", key);
    }
    *out = o;
    return 0;
}

static int end_set(mk_config_txn_t *t, const mk_opt_t *o, int rc, const char *err)
{
    int i = mk_options_index(o);
    if (rc) {
        t->state[i] = REJECTED;
        return add_error(t, MK_CFG_EVALUE, o->name, rc, "%s", err);
    }
    if ((t->flags & MK_CFG_TXN_LIVE) && !(o->flags & MK_OPT_LIVE) && !mk_opt_equal(o, &t->cfg, &t->base)) {
        mk_opt_copy(o, &t->cfg, &t->base);
        t->state[i] = REJECTED;
        char now[MK_CFG_STR_MAX];
        mk_opt_format(o, &t->base, now, sizeof now);
        return add_error(t, MK_CFG_ERESTART, o->name, MK_ESTATE,
                         "%s: takes effect only at a restart (it is \"%.200s\"); change it in the config file and "
                         "restart maskd",
                         o->name, now);
    }
    t->state[i] = SET;
    return 0;
}

int mk_config_txn_set(mk_config_txn_t *t, const char *key, const char *text)
{
    const mk_opt_t *o = NULL;
    char err[640] = "";
    if (!t || !key || !text)
        return mk_err_set(MK_EINVAL, "mk_config_txn_set: NULL argument");
    int rc = begin_set(t, key, &o);
    if (rc)
        return rc;
    rc = mk_opt_parse_text(o, text, &t->cfg, err, sizeof err);
    return end_set(t, o, rc, err);
}

int mk_config_txn_set_json(mk_config_txn_t *t, const char *key, const cJSON *v)
{
    const mk_opt_t *o = NULL;
    char err[640] = "";
    if (!t || !key || !v)
        return mk_err_set(MK_EINVAL, "mk_config_txn_set_json: NULL argument");
    int rc = begin_set(t, key, &o);
    if (rc)
        return rc;
    rc = mk_opt_parse_json(o, v, &t->cfg, err, sizeof err);
    return end_set(t, o, rc, err);
}

int mk_config_txn_set_arg(mk_config_txn_t *t, const char *arg)
{
    if (!t || !arg)
        return mk_err_set(MK_EINVAL, "mk_config_txn_set_arg: NULL argument");
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || eq - arg >= KEY_MAX)
        return add_error(t, MK_CFG_EVALUE, "", MK_EINVAL, "expected KEY=VALUE, got \"%.200s\"", arg);
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%.*s", (int)(eq - arg), arg);
    return mk_config_txn_set(t, key, eq + 1);
}

static int load_object(mk_config_txn_t *t, const cJSON *obj, const char *prefix)
{
    int first = 0;
    for (const cJSON *c = obj->child; c; c = c->next) {
        char key[KEY_MAX * 2];
        int rc;
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", c->string ? c->string : "");
        if (strlen(key) >= KEY_MAX)
            rc = unknown_key(t, key);
        else if (mk_options_find(key))
            rc = mk_config_txn_set_json(t, key, c);
        else if (mk_options_is_section(key) && cJSON_IsObject(c))
            rc = load_object(t, c, key);
        else if (mk_options_is_section(key))
            rc = add_error(t, MK_CFG_EVALUE, key, MK_EINVAL, "%s: expected an object (the section of %s.*)", key,
                           key);
        else
            rc = unknown_key(t, key);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int mk_config_txn_load_json(mk_config_txn_t *t, const cJSON *obj)
{
    if (!t)
        return mk_err_set(MK_EINVAL, "mk_config_txn_load_json: NULL transaction");
    if (!cJSON_IsObject(obj))
        return add_error(t, MK_CFG_EFILE, "", MK_EINVAL, "expected a JSON object of options");
    return load_object(t, obj, "");
}

/* "LINE:COL" of position `at` in `text`. */
static void line_col(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int mk_config_txn_load_file(mk_config_txn_t *t, const char *path)
{
    if (!t || !path)
        return mk_err_set(MK_EINVAL, "mk_config_txn_load_file: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f)
        return add_error(t, MK_CFG_EFILE, "", MK_EIO, "cannot open: %s", strerror(errno));
    char *text = malloc(FILE_MAX + 1);
    size_t n = text ? fread(text, 1, FILE_MAX + 1, f) : 0;
    int rd_err = ferror(f);
    fclose(f);
    if (!text)
        return add_error(t, MK_CFG_EFILE, "", MK_ENOMEM, "out of memory");
    if (rd_err || n > FILE_MAX) {
        free(text);
        return add_error(t, MK_CFG_EFILE, "", rd_err ? MK_EIO : MK_ERANGE,
                         rd_err ? "read error" : "larger than %d bytes", FILE_MAX);
    }
    text[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n + 1, &end, 1); /* + 1: the terminator, which cJSON checks */
    if (!root) {
        int line, col;
        line_col(text, end ? end : text + n, &line, &col);
        int rc = add_error(t, MK_CFG_EFILE, "", MK_EFORMAT, "%d:%d: invalid JSON%s", line, col,
                           n == 0 ? " (empty file)" : "");
        free(text);
        return rc;
    }
    free(text);
    int rc = mk_config_txn_load_json(t, root);
    cJSON_Delete(root);
    return rc;
}

size_t mk_config_txn_nerrors(const mk_config_txn_t *t)
{
    return t ? t->nerrs : 0;
}

const mk_config_error_t *mk_config_txn_error(const mk_config_txn_t *t, size_t i)
{
    return t && i < t->nerrs ? &t->errs[i] : NULL;
}

const mk_config_t *mk_config_txn_config(const mk_config_txn_t *t)
{
    return t ? &t->cfg : NULL;
}

int mk_config_txn_touched(const mk_config_txn_t *t, int i)
{
    return t && i >= 0 && i < mk_options_count() && t->state[i] == SET;
}

cJSON *mk_config_txn_to_json(const mk_config_txn_t *t)
{
    cJSON *obj = cJSON_CreateObject();
    for (int i = 0; obj && i < mk_options_count(); i++) {
        if (t->state[i] != SET)
            continue;
        const mk_opt_t *o = mk_options_at(i);
        cJSON *v = mk_opt_to_json(o, &t->cfg);
        if (!v) {
            cJSON_Delete(obj);
            return NULL;
        }
        cJSON_AddItemToObject(obj, o->name, v);
    }
    return obj;
}

int mk_config_txn_commit(const mk_config_txn_t *t, mk_config_t *dst, const mk_opt_hooks_t *hooks)
{
    if (!t || !dst)
        return mk_err_set(MK_EINVAL, "mk_config_txn_commit: NULL argument");
    if (t->nerrs)
        return mk_err_set(MK_EINVAL, "%s%s", t->errs[0].msg, t->nerrs > 1 ? " (and more errors)" : "");
    unsigned char changed[MK_OPT_MAX] = {0};
    int count = 0;
    for (int i = 0; i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        if (!(t->flags & MK_CFG_TXN_WHOLE) && t->state[i] != SET)
            continue;
        if (!mk_opt_equal(o, dst, &t->cfg)) {
            mk_opt_copy(o, dst, &t->cfg);
            changed[i] = 1;
            count++;
        }
    }
    for (int i = 0; hooks && i < mk_options_count(); i++)
        if (changed[i])
            mk_opt_hooks_call(hooks, i, dst);
    return count;
}

int mk_config_check_file(const char *path, FILE *msgs)
{
    mk_config_t *def = malloc(sizeof *def);
    if (!def)
        return mk_err_set(MK_ENOMEM, "out of memory");
    mk_config_defaults(def);
    mk_config_txn_t *t = mk_config_txn_new(def, MK_CFG_TXN_WHOLE);
    free(def);
    if (!t)
        return MK_ENOMEM;
    mk_config_txn_load_file(t, path);
    int rc = 0;
    for (size_t i = 0; i < t->nerrs; i++) {
        if (msgs)
            fprintf(msgs, "%s: %s\n", path, t->errs[i].msg);
        if (!rc)
            rc = t->errs[i].code == MK_EIO ? MK_EIO : MK_EINVAL;
    }
    if (rc)
        mk_err_set(rc, "%s: %s%s", path, t->errs[0].msg, t->nerrs > 1 ? " (and more errors)" : "");
    mk_config_txn_free(t);
    return rc;
}

void mk_config_txn_log_errors(const mk_config_txn_t *t, int level, const char *prefix)
{
    for (size_t i = 0; i < t->nerrs; i++)
        MK_LOG((mk_log_level_t)level, "%s%s", prefix, t->errs[i].msg);
}

int mk_config_txn_failure(const mk_config_txn_t *t, const char *what)
{
    if (!t->nerrs)
        return mk_err_set(MK_EINVAL, "%s: failed", what);
    const mk_config_error_t *e = &t->errs[0];
    return mk_err_set(e->code ? e->code : MK_EINVAL, "%s: %s%s", what, e->msg,
                      t->nerrs > 1 ? " (and more errors: see the log)" : "");
}

int mk_config_build(const char *path, int path_required, char *const *sets, int nsets, int level, mk_config_t *out)
{
    mk_config_t *def = malloc(sizeof *def);
    if (!def)
        return mk_err_set(MK_ENOMEM, "out of memory");
    mk_config_defaults(def);
    mk_config_txn_t *file = mk_config_txn_new(def, MK_CFG_TXN_WHOLE), *ov = NULL;
    free(def);
    int rc = file ? 0 : mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc && path && (path_required || access(path, F_OK) == 0) && mk_config_txn_load_file(file, path) < 0) {
        mk_config_txn_log_errors(file, level, "");
        rc = mk_config_txn_failure(file, path);
    }
    if (!rc && !(ov = mk_config_txn_new(mk_config_txn_config(file), 0)))
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < nsets; i++)
        mk_config_txn_set_arg(ov, sets[i]);
    if (!rc && mk_config_txn_nerrors(ov)) {
        mk_config_txn_log_errors(ov, level, "command line: ");
        rc = mk_config_txn_failure(ov, "command line");
    }
    if (!rc)
        *out = *mk_config_txn_config(ov);
    mk_config_txn_free(file);
    mk_config_txn_free(ov);
    return rc;
}
