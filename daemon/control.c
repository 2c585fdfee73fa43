/* control: the control socket server — accept, frame, dispatch, queue sets for the pipeline, fan out events. */
#include "control.h"

#include "ctlproto.h"
#include "errors.h"
#include "log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *const events[] = {"stats", "detections", "state", NULL};
enum { NEVENTS = 3, ALL_EVENTS = (1u << NEVENTS) - 1 };

typedef struct client {
    int fd;
    uint64_t serial;
    mk_ctl_linebuf_t in; /* the server thread's only */
    int eof;             /* the peer shut its writing side: answer what was read, then close */
    int waiting;         /* a set of this client waits for the pipeline: read no further requests */
    /* under the server's lock: */
    char *out;
    size_t out_head, out_len, out_cap;
    unsigned subs;   /* bits of events[] */
    const char *why; /* set when it must be closed: output over the cap, a socket error */
} client_t;

enum { QUEUED, TAKEN, DONE };

typedef struct {
    uint64_t connections, refused, dropped_slow, requests, errors, sets_applied, sets_timed_out;
} counters_t;

typedef struct pending {
    struct pending *next;
    mk_config_txn_t *txn;
    uint64_t client;
    cJSON *id;
    int64_t deadline_ms;
    int state, rc;
    char msg[512];
} pending_t;

struct mk_control {
    mk_control_opts_t opts;
    char *path, *version;
    mk_control_ops_t ops;
    void *user;
    int listen_fd, wake_fd, bound, started;
    pthread_t thread;
    atomic_int stop;
    atomic_int queued;               /* pending sets in state QUEUED */
    atomic_uint subscribers[NEVENTS]; /* clients subscribed to each event */
    pthread_mutex_t lock;
    client_t **clients; /* max_clients slots; changed by the server thread under the lock */
    int nclients;
    pending_t *pending; /* FIFO, under the lock */
    uint64_t next_serial;
    mk_config_t scratch; /* the server thread's copy of the configuration for get/set/list */
    counters_t count; /* under the lock */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(mk_control_t *s)
{
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is already non-zero, the thread wakes anyway */
}

void mk_control_opts_from_config(mk_control_opts_t *o, const mk_config_t *cfg)
{
    mk_config_t def;
    if (!cfg) {
        mk_config_defaults(&def);
        cfg = &def;
    }
    memset(o, 0, sizeof *o);
    o->mode = 0660;
    o->max_clients = cfg->control.max_clients;
    o->max_line = (size_t)cfg->control.max_line_bytes;
    o->max_output = (size_t)cfg->control.max_output_bytes;
    o->set_timeout_ms = cfg->control.set_timeout_ms;
    o->version = "";
}

int mk_control_create(const mk_control_opts_t *opts, const mk_control_ops_t *ops, void *user, mk_control_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_control_create: NULL out");
    *out = NULL;
    if (!opts || !ops || !ops->get_config || !ops->set_config)
        return mk_err_set(MK_EINVAL, "mk_control_create: options and ops.get_config/set_config are required");
    if (!opts->path || !opts->path[0] || strlen(opts->path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return mk_err_set(MK_EINVAL, "control socket path '%s': empty or longer than %zu bytes",
                          opts->path ? opts->path : "(null)", sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    if (opts->max_clients < 1 || opts->max_line < 16 || opts->max_output < 1024 || opts->set_timeout_ms < 1)
        return mk_err_set(MK_ERANGE, "control limits out of range (clients %d, line %zu, output %zu, timeout %d)",
                          opts->max_clients, opts->max_line, opts->max_output, opts->set_timeout_ms);
    mk_control_t *s = calloc(1, sizeof *s);
    if (!s)
        return mk_err_set(MK_ENOMEM, "out of memory");
    s->listen_fd = s->wake_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    s->opts = *opts;
    s->ops = *ops;
    s->user = user;
    s->path = strdup(opts->path);
    s->version = strdup(opts->version ? opts->version : "");
    s->clients = calloc((size_t)opts->max_clients, sizeof *s->clients);
    if (!s->path || !s->version || !s->clients) {
        mk_control_destroy(s);
        return mk_err_set(MK_ENOMEM, "out of memory");
    }
    s->opts.path = s->path;
    s->opts.version = s->version;
    *out = s;
    return 0;
}

/* ---- clients ------------------------------------------------------------------------------------------------- */

/* Queues n bytes for c. Under the lock. A client over its cap is marked to be dropped. */
static int out_append_locked(mk_control_t *s, client_t *c, const char *data, size_t n)
{
    if (c->why)
        return -1;
    size_t held = c->out_len - c->out_head;
    if (held + n > s->opts.max_output) {
        c->why = "output not read: over control.max_output_bytes";
        s->count.dropped_slow++;
        return -1;
    }
    if (c->out_head && c->out_len + n > c->out_cap) {
        memmove(c->out, c->out + c->out_head, held);
        c->out_head = 0;
        c->out_len = held;
    }
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) {
            c->why = "out of memory";
            return -1;
        }
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
    return 0;
}

/* Queues a line (taken over; NULL: out of memory, the client is dropped) for c. */
static void send_line(mk_control_t *s, client_t *c, char *line)
{
    pthread_mutex_lock(&s->lock);
    if (line)
        out_append_locked(s, c, line, strlen(line));
    else if (!c->why)
        c->why = "out of memory";
    pthread_mutex_unlock(&s->lock);
    free(line);
}

/* Writes what c has queued, as far as the socket takes it. */
static void flush(mk_control_t *s, client_t *c)
{
    pthread_mutex_lock(&s->lock);
    while (!c->why && c->out_head < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_head, c->out_len - c->out_head, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                c->why = "sending failed";
            break;
        }
        c->out_head += (size_t)w;
    }
    if (c->out_head == c->out_len)
        c->out_head = c->out_len = 0;
    pthread_mutex_unlock(&s->lock);
}

static int has_output(mk_control_t *s, client_t *c)
{
    pthread_mutex_lock(&s->lock);
    int r = c->out_len > c->out_head;
    pthread_mutex_unlock(&s->lock);
    return r;
}

static void set_subs_locked(mk_control_t *s, client_t *c, unsigned subs)
{
    for (int e = 0; e < NEVENTS; e++) {
        unsigned bit = 1u << e;
        if ((c->subs & bit) && !(subs & bit))
            atomic_fetch_sub(&s->subscribers[e], 1);
        if (!(c->subs & bit) && (subs & bit))
            atomic_fetch_add(&s->subscribers[e], 1);
    }
    c->subs = subs;
}

static void set_why(mk_control_t *s, client_t *c, const char *why)
{
    pthread_mutex_lock(&s->lock);
    if (!c->why)
        c->why = why;
    pthread_mutex_unlock(&s->lock);
}

static void close_client(mk_control_t *s, int slot, const char *why)
{
    client_t *c = s->clients[slot];
    pthread_mutex_lock(&s->lock);
    set_subs_locked(s, c, 0);
    s->clients[slot] = s->clients[--s->nclients];
    s->clients[s->nclients] = NULL;
    pthread_mutex_unlock(&s->lock);
    MK_INFO("client %llu disconnected (%s)", (unsigned long long)c->serial, why);
    close(c->fd);
    mk_ctl_linebuf_free(&c->in);
    free(c->out);
    free(c);
}

static void accept_clients(mk_control_t *s)
{
    static const char *const caps[] = {"get",     "set",    "list",    "stats", "subscribe",
                                       "unsubscribe", "reload", "version", "help",  NULL};
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                MK_LOG_ERRNO(MK_LOG_WARN, "accept on %s", s->path);
            return;
        }
        struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
            cred.pid = 0;
        if (s->nclients >= s->opts.max_clients) {
            char desc[96];
            snprintf(desc, sizeof desc, "too many clients (control.max_clients = %d)", s->opts.max_clients);
            char *line = mk_ctl_reply_error(NULL, MK_CTL_EBUSY, desc, NULL);
            if (line && send(fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                MK_LOG_ERRNO(MK_LOG_DEBUG, "refusing a client");
            free(line);
            close(fd);
            pthread_mutex_lock(&s->lock);
            s->count.refused++;
            pthread_mutex_unlock(&s->lock);
            MK_LOG_RL(1000, MK_LOG_WARN, "refused a client (pid %d, uid %d): %s", (int)cred.pid, (int)cred.uid,
                      desc);
            continue;
        }
        client_t *c = calloc(1, sizeof *c);
        if (!c || mk_ctl_linebuf_init(&c->in, s->opts.max_line) != 0) {
            MK_ERROR("client: out of memory");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->serial = ++s->next_serial;
        pthread_mutex_lock(&s->lock);
        s->clients[s->nclients++] = c;
        s->count.connections++;
        pthread_mutex_unlock(&s->lock);
        MK_INFO("client %llu connected: pid %d, uid %d, gid %d", (unsigned long long)c->serial, (int)cred.pid,
                (int)cred.uid, (int)cred.gid);
        send_line(s, c, mk_ctl_greeting(s->version, caps, events));
    }
}

/* ---- requests ---------------------------------------------------------------------------------------------- */

static void reply_ok(mk_control_t *s, client_t *c, const cJSON *id, cJSON *result)
{
    send_line(s, c, mk_ctl_reply_ok(id, result));
}

static void reply_err(mk_control_t *s, client_t *c, const cJSON *id, mk_ctl_eclass_t cls, cJSON *errors,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void reply_err(mk_control_t *s, client_t *c, const cJSON *id, mk_ctl_eclass_t cls, cJSON *errors,
                      const char *fmt, ...)
{
    char desc[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(desc, sizeof desc, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->lock);
    s->count.errors++;
    pthread_mutex_unlock(&s->lock);
    send_line(s, c, mk_ctl_reply_error(id, cls, desc, errors));
}

static mk_ctl_eclass_t class_of(mk_config_ekind_t k)
{
    switch (k) {
    case MK_CFG_EUNKNOWN:
        return MK_CTL_EUNKNOWN_KEY;
    case MK_CFG_EVALUE:
        return MK_CTL_EBAD_VALUE;
    case MK_CFG_ERESTART:
        return MK_CTL_ERESTART;
    case MK_CFG_EFILE:
        return MK_CTL_EBAD_ARGS;
    }
    return MK_CTL_EINTERNAL;
}

static int current_config(mk_control_t *s, client_t *c, const cJSON *id)
{
    int rc = s->ops.get_config(s->user, &s->scratch);
    if (rc)
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "reading the configuration: %s", mk_err_msg());
    return rc;
}

/* Marks the options a key selector picks: a name, "section", "section.*" or "*". 0 when it picks none. */
static int select_key(const char *key, unsigned char *picked)
{
    int n = 0;
    size_t len = strlen(key);
    int all = !strcmp(key, "*");
    int section = len > 2 && !strcmp(key + len - 2, ".*");
    for (int i = 0; i < mk_options_count(); i++) {
        const char *name = mk_options_at(i)->name;
        int hit = all || !strcmp(name, key) ||
                  (section && !strncmp(name, key, len - 1)) ||
                  (!strncmp(name, key, len) && name[len] == '.');
        if (hit) {
            picked[i] = 1;
            n++;
        }
    }
    return n;
}

/* Parses get/list args into picked[]. Replies with an error and returns nonzero on bad args or unknown keys. */
static int select_keys(mk_control_t *s, client_t *c, const cJSON *id, const cJSON *args, unsigned char *picked)
{
    memset(picked, 0, MK_OPT_MAX);
    if (!args || cJSON_IsNull(args)) {
        select_key("*", picked);
        return 0;
    }
    const cJSON *keys = args;
    if (cJSON_IsObject(args)) {
        keys = cJSON_GetObjectItemCaseSensitive(args, "keys");
        if (!keys || cJSON_GetArraySize(args) != 1) {
            reply_err(s, c, id, MK_CTL_EBAD_ARGS, NULL, "expected a key, an array of keys or {\"keys\": [...]}");
            return -1;
        }
    }
    cJSON *errors = cJSON_CreateArray();
    char desc[1024] = "";
    size_t pos = 0;
    int nbad = 0, shape = 0;
    if (cJSON_IsString(keys)) {
        if (!select_key(keys->valuestring, picked)) {
            nbad++;
            const char *near = mk_options_suggest(keys->valuestring);
            snprintf(desc, sizeof desc, "%.128s: unknown key%s%s%s", keys->valuestring, near ? " (did you mean " : "",
                     near ? near : "", near ? "?)" : "");
        }
    } else if (cJSON_IsArray(keys)) {
        const cJSON *k;
        cJSON_ArrayForEach(k, keys) {
            if (!cJSON_IsString(k)) {
                shape = 1;
                break;
            }
            if (!select_key(k->valuestring, picked)) {
                const char *near = mk_options_suggest(k->valuestring);
                char one[320];
                snprintf(one, sizeof one, "%.128s: unknown key%s%s%s", k->valuestring, near ? " (did you mean " : "",
                         near ? near : "", near ? "?)" : "");
                if (pos < sizeof desc)
                    pos += (size_t)snprintf(desc + pos, sizeof desc - pos, "%s%s", nbad ? "; " : "", one);
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "key", k->valuestring);
                cJSON_AddStringToObject(e, "class", mk_ctl_eclass_name(MK_CTL_EUNKNOWN_KEY));
                cJSON_AddStringToObject(e, "desc", one);
                cJSON_AddItemToArray(errors, e);
                nbad++;
            }
        }
    } else {
        shape = 1;
    }
    if (shape) {
        cJSON_Delete(errors);
        reply_err(s, c, id, MK_CTL_EBAD_ARGS, NULL, "expected a key, an array of keys or {\"keys\": [...]}");
        return -1;
    }
    if (nbad) {
        reply_err(s, c, id, MK_CTL_EUNKNOWN_KEY, nbad > 1 ? errors : NULL, "%s", desc);
        if (nbad <= 1)
            cJSON_Delete(errors);
        return -1;
    }
    cJSON_Delete(errors);
    return 0;
}

static void cmd_get(mk_control_t *s, client_t *c, const cJSON *id, const cJSON *args)
{
    unsigned char picked[MK_OPT_MAX];
    if (select_keys(s, c, id, args, picked) || current_config(s, c, id))
        return;
    cJSON *res = cJSON_CreateObject();
    for (int i = 0; res && i < mk_options_count(); i++)
        if (picked[i])
            cJSON_AddItemToObject(res, mk_options_at(i)->name, mk_opt_to_json(mk_options_at(i), &s->scratch));
    reply_ok(s, c, id, res);
}

static void cmd_list(mk_control_t *s, client_t *c, const cJSON *id, const cJSON *args)
{
    unsigned char picked[MK_OPT_MAX];
    if (select_keys(s, c, id, args, picked) || current_config(s, c, id))
        return;
    cJSON *res = cJSON_CreateArray();
    for (int i = 0; res && i < mk_options_count(); i++)
        if (picked[i])
            cJSON_AddItemToArray(res, mk_opt_describe(mk_options_at(i), &s->scratch));
    reply_ok(s, c, id, res);
}

static void cmd_set(mk_control_t *s, client_t *c, const cJSON *id, const cJSON *args)
{
    if (!cJSON_IsObject(args) || !args->child) {
        reply_err(s, c, id, MK_CTL_EBAD_ARGS, NULL, "set takes a non-empty object {\"key\": value, ...}");
        return;
    }
    if (current_config(s, c, id))
        return;
    mk_config_txn_t *txn = mk_config_txn_new(&s->scratch, MK_CFG_TXN_LIVE);
    if (!txn) {
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "%s", mk_err_msg());
        return;
    }
    mk_config_txn_load_json(txn, args);
    size_t nerr = mk_config_txn_nerrors(txn);
    if (nerr) {
        char desc[2048] = "";
        size_t pos = 0;
        cJSON *errors = nerr > 1 ? cJSON_CreateArray() : NULL;
        for (size_t i = 0; i < nerr; i++) {
            const mk_config_error_t *e = mk_config_txn_error(txn, i);
            if (pos < sizeof desc)
                pos += (size_t)snprintf(desc + pos, sizeof desc - pos, "%s%s", i ? "; " : "", e->msg);
            cJSON *o = errors ? cJSON_CreateObject() : NULL;
            if (o) {
                cJSON_AddStringToObject(o, "key", e->key);
                cJSON_AddStringToObject(o, "class", mk_ctl_eclass_name(class_of(e->kind)));
                cJSON_AddStringToObject(o, "desc", e->msg);
                cJSON_AddItemToArray(errors, o);
            }
        }
        reply_err(s, c, id, class_of(mk_config_txn_error(txn, 0)->kind), errors, "%s", desc);
        mk_config_txn_free(txn);
        return;
    }
    pending_t *p = calloc(1, sizeof *p);
    cJSON *idc = id ? cJSON_Duplicate(id, 1) : NULL;
    if (!p || (id && !idc)) {
        free(p);
        cJSON_Delete(idc);
        mk_config_txn_free(txn);
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "out of memory");
        return;
    }
    p->txn = txn;
    p->client = c->serial;
    p->id = idc;
    p->deadline_ms = now_ms() + s->opts.set_timeout_ms;
    p->state = QUEUED;
    pthread_mutex_lock(&s->lock);
    pending_t **tail = &s->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    atomic_fetch_add(&s->queued, 1);
    pthread_mutex_unlock(&s->lock);
    c->waiting = 1;
}

/* Event names from args (a name or an array of names; absent: all) into a bit set. */
static int parse_events(const cJSON *args, unsigned *bits, char *bad, size_t n)
{
    *bits = 0;
    if (!args || cJSON_IsNull(args)) {
        *bits = ALL_EVENTS;
        return 0;
    }
    const cJSON *list = args;
    if (cJSON_IsObject(args) && !(list = cJSON_GetObjectItemCaseSensitive(args, "events"))) {
        snprintf(bad, n, "expected an event name, an array of them or {\"events\": [...]}");
        return -1;
    }
    const cJSON *one = cJSON_IsString(list) ? list : NULL, *item;
    if (!one && !cJSON_IsArray(list)) {
        snprintf(bad, n, "expected an event name, an array of them or {\"events\": [...]}");
        return -1;
    }
    for (item = one ? one : list->child; item; item = one ? NULL : item->next) {
        int e = 0;
        while (cJSON_IsString(item) && e < NEVENTS && strcmp(item->valuestring, events[e]))
            e++;
        if (!cJSON_IsString(item) || e == NEVENTS) {
            char *p = cJSON_PrintUnformatted(item);
            snprintf(bad, n, "unknown event %.64s (stats, detections, state)", p ? p : "?");
            free(p);
            return -1;
        }
        *bits |= 1u << e;
    }
    return 0;
}

static cJSON *event_list(unsigned bits)
{
    cJSON *arr = cJSON_CreateArray();
    for (int e = 0; arr && e < NEVENTS; e++)
        if (bits & (1u << e))
            cJSON_AddItemToArray(arr, cJSON_CreateString(events[e]));
    return arr;
}

static void cmd_subscribe(mk_control_t *s, client_t *c, const cJSON *id, const cJSON *args, int on)
{
    unsigned bits;
    char bad[160];
    if (parse_events(args, &bits, bad, sizeof bad)) {
        reply_err(s, c, id, MK_CTL_EBAD_ARGS, NULL, "%s", bad);
        return;
    }
    pthread_mutex_lock(&s->lock);
    set_subs_locked(s, c, on ? c->subs | bits : c->subs & ~bits);
    unsigned now = c->subs;
    pthread_mutex_unlock(&s->lock);
    cJSON *res = cJSON_CreateObject();
    if (res)
        cJSON_AddItemToObject(res, "events", event_list(now));
    reply_ok(s, c, id, res);
}

static void cmd_stats(mk_control_t *s, client_t *c, const cJSON *id)
{
    if (!s->ops.stats) {
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "this daemon has no statistics");
        return;
    }
    cJSON *st = s->ops.stats(s->user);
    if (!st)
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "statistics: %s", mk_err_msg());
    else
        reply_ok(s, c, id, st);
}

static void cmd_reload(mk_control_t *s, client_t *c, const cJSON *id)
{
    if (!s->ops.reload) {
        reply_err(s, c, id, MK_CTL_EINTERNAL, NULL, "this daemon cannot reload");
        return;
    }
    cJSON *res = NULL;
    mk_err_clear();
    int rc = s->ops.reload(s->user, &res);
    if (rc) {
        cJSON_Delete(res);
        int value = rc == MK_EINVAL || rc == MK_ERANGE || rc == MK_EFORMAT || rc == MK_EIO;
        reply_err(s, c, id, value ? MK_CTL_EBAD_VALUE : MK_CTL_EINTERNAL, NULL, "reload failed: %s",
                  mk_err_msg()[0] ? mk_err_msg() : mk_err_str(rc));
        return;
    }
    if (!res && (res = cJSON_CreateObject()))
        cJSON_AddBoolToObject(res, "reloaded", 1);
    reply_ok(s, c, id, res);
}

static void cmd_version(mk_control_t *s, client_t *c, const cJSON *id)
{
    cJSON *res = cJSON_CreateObject();
    if (res) {
        cJSON_AddStringToObject(res, "version", s->version);
        cJSON_AddNumberToObject(res, "protocol", MK_CTL_PROTOCOL);
    }
    reply_ok(s, c, id, res);
}

static const struct {
    const char *name, *args, *doc;
} commands[] = {
    {"get", "[KEYS]", "values of options (KEYS: a key, a section, \"*\" or an array; absent: all)"},
    {"set", "{\"key\": value, ...}", "change live options atomically at the next frame boundary"},
    {"list", "[KEYS]", "the option table: types, ranges, defaults, live or restart-only, docs, values"},
    {"stats", "", "statistics of the pipeline"},
    {"subscribe", "[EVENTS]", "receive events: stats, detections, state (absent: all)"},
    {"unsubscribe", "[EVENTS]", "stop receiving events (absent: all)"},
    {"reload", "", "re-read the config file"},
    {"version", "", "daemon version and protocol version"},
    {"help", "", "this list"},
};

static void cmd_help(mk_control_t *s, client_t *c, const cJSON *id)
{
    cJSON *res = cJSON_CreateObject(), *arr = res ? cJSON_AddArrayToObject(res, "commands") : NULL;
    for (size_t i = 0; arr && i < sizeof commands / sizeof commands[0]; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", commands[i].name);
        cJSON_AddStringToObject(o, "args", commands[i].args);
        cJSON_AddStringToObject(o, "doc", commands[i].doc);
        cJSON_AddItemToArray(arr, o);
    }
    reply_ok(s, c, id, res);
}

static void handle_line(mk_control_t *s, client_t *c, const char *line, size_t len)
{
    mk_ctl_request_t req;
    char err[256];
    pthread_mutex_lock(&s->lock);
    s->count.requests++;
    pthread_mutex_unlock(&s->lock);
    if (mk_ctl_request_parse(line, len, &req, err, sizeof err)) {
        reply_err(s, c, req.id, MK_CTL_EPARSE, NULL, "%s", err);
        mk_ctl_request_free(&req);
        return;
    }
    const char *cmd = req.cmd;
    if (req.args && !cJSON_IsNull(req.args) &&
        (!strcmp(cmd, "stats") || !strcmp(cmd, "reload") || !strcmp(cmd, "version") || !strcmp(cmd, "help")))
        reply_err(s, c, req.id, MK_CTL_EBAD_ARGS, NULL, "%s takes no arguments", cmd);
    else if (!strcmp(cmd, "get"))
        cmd_get(s, c, req.id, req.args);
    else if (!strcmp(cmd, "set"))
        cmd_set(s, c, req.id, req.args);
    else if (!strcmp(cmd, "list"))
        cmd_list(s, c, req.id, req.args);
    else if (!strcmp(cmd, "subscribe"))
        cmd_subscribe(s, c, req.id, req.args, 1);
    else if (!strcmp(cmd, "unsubscribe"))
        cmd_subscribe(s, c, req.id, req.args, 0);
    else if (!strcmp(cmd, "stats"))
        cmd_stats(s, c, req.id);
    else if (!strcmp(cmd, "reload"))
        cmd_reload(s, c, req.id);
    else if (!strcmp(cmd, "version"))
        cmd_version(s, c, req.id);
    else if (!strcmp(cmd, "help"))
        cmd_help(s, c, req.id);
    else
        reply_err(s, c, req.id, MK_CTL_EUNKNOWN_CMD, NULL, "unknown command \"%.64s\" (help lists them)", cmd);
    mk_ctl_request_free(&req);
}

/* Answers every complete request c has sent, until one of them is a set that must wait. */
static void process_input(mk_control_t *s, client_t *c)
{
    while (!c->waiting) {
        char *line;
        size_t len;
        int r = mk_ctl_linebuf_next(&c->in, &line, &len);
        if (r == MK_CTL_NEED_MORE)
            return;
        if (r == MK_CTL_OVERSIZE) {
            pthread_mutex_lock(&s->lock);
            s->count.requests++;
            pthread_mutex_unlock(&s->lock);
            reply_err(s, c, NULL, MK_CTL_EPARSE, NULL, "request line longer than %zu bytes (skipped up to its newline)",
                      s->opts.max_line);
            continue;
        }
        handle_line(s, c, line, len);
    }
}

static void read_client(mk_control_t *s, client_t *c)
{
    size_t avail;
    char *space = mk_ctl_linebuf_space(&c->in, &avail);
    ssize_t got = recv(c->fd, space, avail, MSG_DONTWAIT);
    if (got > 0)
        mk_ctl_linebuf_commit(&c->in, (size_t)got);
    else if (got == 0)
        c->eof = 1;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        set_why(s, c, "receiving failed");
    process_input(s, c);
}

/* ---- sets: completion and timeouts --------------------------------------------------------------------------- */

static client_t *find_client(mk_control_t *s, uint64_t serial)
{
    for (int i = 0; i < s->nclients; i++)
        if (s->clients[i]->serial == serial)
            return s->clients[i];
    return NULL;
}

/* The earliest deadline of a set still waiting for the pipeline (ms), or -1. */
static int64_t next_deadline(mk_control_t *s)
{
    int64_t next = -1;
    pthread_mutex_lock(&s->lock);
    for (pending_t *p = s->pending; p; p = p->next)
        if (p->state == QUEUED && (next < 0 || p->deadline_ms < next))
            next = p->deadline_ms;
    pthread_mutex_unlock(&s->lock);
    return next;
}

/* Answers sets the pipeline applied and sets whose time ran out, then the requests that waited behind them. */
static void finish_sets(mk_control_t *s, int shutting_down)
{
    pending_t *done = NULL, **tail = &done;
    int64_t t = now_ms();
    pthread_mutex_lock(&s->lock);
    for (pending_t **pp = &s->pending; *pp;) {
        pending_t *p = *pp;
        int expired = p->state == QUEUED && (shutting_down || t >= p->deadline_ms);
        if (p->state == DONE || expired) {
            if (expired) {
                atomic_fetch_sub(&s->queued, 1);
                s->count.sets_timed_out++;
            } else if (p->rc >= 0) {
                s->count.sets_applied++;
            }
            *pp = p->next;
            p->next = NULL;
            *tail = p;
            tail = &p->next;
            continue;
        }
        pp = &p->next;
    }
    pthread_mutex_unlock(&s->lock);
    while (done) {
        pending_t *p = done;
        done = p->next;
        client_t *c = find_client(s, p->client);
        if (c) {
            c->waiting = 0;
            if (p->state == QUEUED && shutting_down)
                reply_err(s, c, p->id, MK_CTL_EBUSY, NULL, "maskd is shutting down; nothing was applied");
            else if (p->state == QUEUED)
                reply_err(s, c, p->id, MK_CTL_EBUSY, NULL,
                          "the pipeline reached no frame boundary within %d ms; nothing was applied",
                          s->opts.set_timeout_ms);
            else if (p->rc < 0)
                reply_err(s, c, p->id, p->rc == MK_EINVAL || p->rc == MK_ERANGE ? MK_CTL_EBAD_VALUE : MK_CTL_EINTERNAL,
                          NULL, "applying: %s", p->msg);
            else {
                cJSON *res = cJSON_CreateObject();
                if (res) {
                    cJSON_AddItemToObject(res, "applied", mk_config_txn_to_json(p->txn));
                    cJSON_AddNumberToObject(res, "changed", p->rc);
                }
                reply_ok(s, c, p->id, res);
            }
            if (!shutting_down)
                process_input(s, c);
        }
        mk_config_txn_free(p->txn);
        cJSON_Delete(p->id);
        free(p);
    }
}

int mk_control_apply_pending(mk_control_t *s)
{
    if (!s || atomic_load(&s->queued) == 0)
        return 0;
    pending_t *take[64];
    int n = 0;
    pthread_mutex_lock(&s->lock);
    for (pending_t *p = s->pending; p && n < 64; p = p->next)
        if (p->state == QUEUED) {
            p->state = TAKEN;
            take[n++] = p;
            atomic_fetch_sub(&s->queued, 1);
        }
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < n; i++) {
        mk_err_clear();
        take[i]->rc = s->ops.set_config(s->user, take[i]->txn);
        if (take[i]->rc < 0)
            snprintf(take[i]->msg, sizeof take[i]->msg, "%s", mk_err_msg()[0] ? mk_err_msg() : mk_err_str(take[i]->rc));
    }
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < n; i++)
        take[i]->state = DONE;
    pthread_mutex_unlock(&s->lock);
    if (n)
        wake(s);
    return n;
}

int mk_control_pending(mk_control_t *s)
{
    return s ? atomic_load(&s->queued) : 0;
}

/* ---- events -------------------------------------------------------------------------------------------------- */

int mk_control_publish(mk_control_t *s, const char *event, const cJSON *data)
{
    int e = 0;
    while (s && event && e < NEVENTS && strcmp(event, events[e]))
        e++;
    if (!s || !event || e == NEVENTS)
        return mk_err_set(MK_EINVAL, "unknown event '%s' (stats, detections, state)", event ? event : "(null)");
    if (atomic_load(&s->subscribers[e]) == 0)
        return 0;
    char *line = mk_ctl_event(event, data);
    if (!line)
        return mk_err_set(MK_ENOMEM, "out of memory");
    size_t len = strlen(line);
    int queued = 0, dropped = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->nclients; i++) {
        client_t *c = s->clients[i];
        if (!(c->subs & (1u << e)) || c->why)
            continue;
        if (out_append_locked(s, c, line, len) == 0)
            queued++;
        else
            dropped++;
    }
    pthread_mutex_unlock(&s->lock);
    free(line);
    if (queued || dropped)
        wake(s);
    return queued;
}

/* ---- the server thread --------------------------------------------------------------------------------------- */

static void *server_main(void *arg)
{
    mk_control_t *s = arg;
    size_t cap = (size_t)s->opts.max_clients + 2;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    client_t **polled = calloc(cap, sizeof *polled);
    if (!pfd || !polled) {
        MK_ERROR("control server: out of memory; the control socket is not served");
        free(pfd);
        free(polled);
        return NULL;
    }
    int64_t deadline = -1;
    while (!atomic_load(&s->stop)) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (int i = 0; i < s->nclients; i++) {
            client_t *c = s->clients[i];
            short ev = (c->waiting || c->eof) ? 0 : POLLIN;
            if (has_output(s, c))
                ev |= POLLOUT;
            polled[n] = c;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
        }
        int r = poll(pfd, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR) {
            MK_LOG_ERRNO(MK_LOG_ERROR, "control server: poll");
            break;
        }
        if (r > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t rd = read(s->wake_fd, &v, sizeof v);
            (void)rd;
        }
        if (atomic_load(&s->stop))
            break;
        if (r > 0 && (pfd[1].revents & POLLIN))
            accept_clients(s);
        for (int i = 2; r > 0 && i < n; i++) {
            client_t *c = polled[i];
            if (pfd[i].revents & (POLLERR | POLLNVAL))
                set_why(s, c, "socket error");
            else if (pfd[i].revents & POLLIN)
                read_client(s, c);
            else if (pfd[i].revents & POLLHUP)
                set_why(s, c, "hung up");
        }
        finish_sets(s, 0);
        deadline = next_deadline(s);
        for (int i = 0; i < s->nclients;) {
            client_t *c = s->clients[i];
            flush(s, c);
            pthread_mutex_lock(&s->lock);
            const char *why = c->why;
            int empty = c->out_len == c->out_head;
            pthread_mutex_unlock(&s->lock);
            if (why)
                close_client(s, i, why);
            else if (c->eof && !c->waiting && empty)
                close_client(s, i, "closed by the client");
            else
                i++;
        }
    }
    free(pfd);
    free(polled);
    return NULL;
}

int mk_control_start(mk_control_t *s)
{
    if (!s || s->started)
        return mk_err_set(MK_ESTATE, "control server: NULL or already started");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, s->path, strlen(s->path) + 1);
    struct stat st;
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return mk_err_set(MK_EIO, "%s exists and is not a socket", s->path);
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int alive = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0)
            close(probe);
        if (alive)
            return mk_err_set(MK_ESTATE, "%s: another server is listening there", s->path);
        if (unlink(s->path) != 0)
            return mk_err_set(MK_EIO, "removing the stale socket %s: %s", s->path, strerror(errno));
        MK_INFO("removed the stale socket %s", s->path);
    }
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0)
        return mk_err_set(MK_EIO, "socket: %s", strerror(errno));
    /* The socket inode's mode (less the umask) becomes the file's at bind: never wider than `mode`. */
    if (fchmod(s->listen_fd, s->opts.mode) != 0 ||
        bind(s->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        return mk_err_set(MK_EIO, "binding %s: %s", s->path, strerror(errno));
    s->bound = 1;
    if (chmod(s->path, s->opts.mode) != 0)
        return mk_err_set(MK_EIO, "chmod %s: %s", s->path, strerror(errno));
    if (listen(s->listen_fd, 128) != 0)
        return mk_err_set(MK_EIO, "listen on %s: %s", s->path, strerror(errno));
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wake_fd < 0)
        return mk_err_set(MK_EIO, "eventfd: %s", strerror(errno));
    int rc = pthread_create(&s->thread, NULL, server_main, s);
    if (rc)
        return mk_err_set(MK_EIO, "starting the control thread: %s", strerror(rc));
    s->started = 1;
    MK_INFO("control socket %s (mode %04o, at most %d clients)", s->path, s->opts.mode, s->opts.max_clients);
    return 0;
}

void mk_control_stop(mk_control_t *s)
{
    if (!s)
        return;
    if (s->started) {
        atomic_store(&s->stop, 1);
        wake(s);
        pthread_join(s->thread, NULL);
        s->started = 0;
        finish_sets(s, 1);
        for (int i = 0; i < s->nclients; i++)
            flush(s, s->clients[i]);
        while (s->nclients)
            close_client(s, s->nclients - 1, "shutting down");
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    if (s->bound && unlink(s->path) != 0 && errno != ENOENT)
        MK_LOG_ERRNO(MK_LOG_WARN, "removing %s", s->path);
    s->bound = 0;
}

void mk_control_destroy(mk_control_t *s)
{
    if (!s)
        return;
    mk_control_stop(s);
    while (s->pending) {
        pending_t *p = s->pending;
        s->pending = p->next;
        mk_config_txn_free(p->txn);
        cJSON_Delete(p->id);
        free(p);
    }
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    pthread_mutex_destroy(&s->lock);
    free(s->clients);
    free(s->path);
    free(s->version);
    free(s);
}

cJSON *mk_control_stats(mk_control_t *s)
{
    cJSON *o = s ? cJSON_CreateObject() : NULL;
    if (!o)
        return NULL;
    pthread_mutex_lock(&s->lock);
    int clients = s->nclients, subscribers = 0;
    for (int i = 0; i < s->nclients; i++)
        subscribers += s->clients[i]->subs != 0;
    counters_t k = s->count;
    pthread_mutex_unlock(&s->lock);
    cJSON_AddNumberToObject(o, "clients", clients);
    cJSON_AddNumberToObject(o, "subscribers", subscribers);
    cJSON_AddNumberToObject(o, "connections", (double)k.connections);
    cJSON_AddNumberToObject(o, "refused", (double)k.refused);
    cJSON_AddNumberToObject(o, "dropped_slow", (double)k.dropped_slow);
    cJSON_AddNumberToObject(o, "requests", (double)k.requests);
    cJSON_AddNumberToObject(o, "errors", (double)k.errors);
    cJSON_AddNumberToObject(o, "sets_applied", (double)k.sets_applied);
    cJSON_AddNumberToObject(o, "sets_timed_out", (double)k.sets_timed_out);
    return o;
}
