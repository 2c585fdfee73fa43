/* ctlproto: line framing, request parsing and message building of the control protocol; a minimal client. */
#include "ctlproto.h"

#include "errors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *const class_names[MK_CTL_ECLASSES] = {
    "parse", "unknown-command", "bad-args", "unknown-key", "bad-value", "restart-required", "busy", "internal",
};

const char *mk_ctl_eclass_name(mk_ctl_eclass_t c)
{
    return (unsigned)c < MK_CTL_ECLASSES ? class_names[c] : "internal";
}

int mk_ctl_eclass_parse(const char *s)
{
    for (int i = 0; s && i < MK_CTL_ECLASSES; i++)
        if (!strcmp(s, class_names[i]))
            return i;
    return -1;
}

/* ---- line framing ---------------------------------------------------------------------------------------- */

int mk_ctl_linebuf_init(mk_ctl_linebuf_t *lb, size_t max_line)
{
    memset(lb, 0, sizeof *lb);
    if (max_line < 1)
        return mk_err_set(MK_EINVAL, "line buffer: max_line 0");
    if (!(lb->buf = malloc(max_line + 1)))
        return mk_err_set(MK_ENOMEM, "line buffer of %zu bytes: out of memory", max_line + 1);
    lb->cap = max_line + 1;
    return 0;
}

void mk_ctl_linebuf_free(mk_ctl_linebuf_t *lb)
{
    free(lb->buf);
    memset(lb, 0, sizeof *lb);
}

char *mk_ctl_linebuf_space(mk_ctl_linebuf_t *lb, size_t *avail)
{
    if (lb->start) {
        memmove(lb->buf, lb->buf + lb->start, lb->len - lb->start);
        lb->len -= lb->start;
        lb->start = 0;
    }
    *avail = lb->cap - lb->len;
    return lb->buf + lb->len;
}

void mk_ctl_linebuf_commit(mk_ctl_linebuf_t *lb, size_t n)
{
    lb->len += n;
}

int mk_ctl_linebuf_next(mk_ctl_linebuf_t *lb, char **line, size_t *len)
{
    for (;;) {
        char *head = lb->buf + lb->start;
        char *nl = memchr(head, '\n', lb->len - lb->start);
        if (lb->discarding) {
            if (!nl) {
                lb->start = lb->len = 0;
                return MK_CTL_NEED_MORE;
            }
            lb->start = (size_t)(nl - lb->buf) + 1;
            lb->discarding = 0;
            continue;
        }
        if (!nl) {
            if (lb->len - lb->start < lb->cap)
                return MK_CTL_NEED_MORE;
            lb->start = lb->len = 0;
            lb->discarding = 1;
            return MK_CTL_OVERSIZE;
        }
        size_t n = (size_t)(nl - head);
        lb->start = (size_t)(nl - lb->buf) + 1;
        *nl = '\0';
        if (n && head[n - 1] == '\r')
            head[--n] = '\0';
        if (!n)
            continue;
        *line = head;
        *len = n;
        return MK_CTL_LINE;
    }
}

/* ---- requests -------------------------------------------------------------------------------------------- */

int mk_ctl_request_parse(const char *line, size_t len, mk_ctl_request_t *req, char *err, size_t n)
{
    memset(req, 0, sizeof *req);
    const char *end = NULL;
    req->root = cJSON_ParseWithLengthOpts(line, len + 1, &end, 1); /* + 1: the terminator, which cJSON checks */
    if (!req->root) {
        snprintf(err, n, "invalid JSON at byte %zu", end && end >= line ? (size_t)(end - line) : (size_t)0);
        return MK_EFORMAT;
    }
    if (!cJSON_IsObject(req->root)) {
        snprintf(err, n, "a request is a JSON object {\"id\": ..., \"cmd\": ..., \"args\": ...}");
        return MK_EFORMAT;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(req->root, "id");
    if (id && !cJSON_IsNumber(id) && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
        snprintf(err, n, "\"id\" must be a number, a string or null");
        return MK_EFORMAT;
    }
    req->id = id;
    int seen[3] = {0, 0, 0};
    for (const cJSON *c = req->root->child; c; c = c->next) {
        static const char *const members[3] = {"id", "cmd", "args"};
        int k = 0;
        while (k < 3 && strcmp(c->string, members[k]))
            k++;
        if (k == 3) {
            snprintf(err, n, "unknown member \"%.64s\" (a request has id, cmd and args)", c->string);
            return MK_EFORMAT;
        }
        if (seen[k]++) {
            snprintf(err, n, "member \"%s\" given twice", members[k]);
            return MK_EFORMAT;
        }
    }
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req->root, "cmd");
    if (!cJSON_IsString(cmd) || !cmd->valuestring[0]) {
        snprintf(err, n, "missing \"cmd\" (a command name string)");
        return MK_EFORMAT;
    }
    req->cmd = cmd->valuestring;
    req->args = cJSON_GetObjectItemCaseSensitive(req->root, "args");
    return 0;
}

void mk_ctl_request_free(mk_ctl_request_t *req)
{
    cJSON_Delete(req->root);
    memset(req, 0, sizeof *req);
}

/* ---- messages -------------------------------------------------------------------------------------------- */

/* Prints obj as one line with its newline and deletes it. */
static char *line_of(cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *out = realloc(s, n + 2);
    if (!out) {
        free(s);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    return out;
}

static int add_id(cJSON *obj, const cJSON *id)
{
    cJSON *copy = id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull();
    return copy && cJSON_AddItemToObject(obj, "id", copy);
}

char *mk_ctl_reply_ok(const cJSON *id, cJSON *result)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj || !add_id(obj, id) || !cJSON_AddBoolToObject(obj, "ok", 1)) {
        cJSON_Delete(result);
        cJSON_Delete(obj);
        return NULL;
    }
    cJSON_AddItemToObject(obj, "result", result ? result : cJSON_CreateNull());
    return line_of(obj);
}

char *mk_ctl_reply_error(const cJSON *id, mk_ctl_eclass_t cls, const char *desc, cJSON *errors)
{
    cJSON *obj = cJSON_CreateObject(), *e = NULL;
    if (!obj || !add_id(obj, id) || !cJSON_AddBoolToObject(obj, "ok", 0) ||
        !(e = cJSON_AddObjectToObject(obj, "error"))) {
        cJSON_Delete(errors);
        cJSON_Delete(obj);
        return NULL;
    }
    cJSON_AddStringToObject(e, "class", mk_ctl_eclass_name(cls));
    cJSON_AddStringToObject(e, "desc", desc ? desc : "");
    if (errors)
        cJSON_AddItemToObject(e, "errors", errors);
    return line_of(obj);
}

static cJSON *string_array(const char *const *v)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && v && v[i]; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(v[i]));
    return arr;
}

char *mk_ctl_greeting(const char *version, const char *const *capabilities, const char *const *events)
{
    cJSON *obj = cJSON_CreateObject(), *m = obj ? cJSON_AddObjectToObject(obj, "maskd") : NULL;
    if (!m) {
        cJSON_Delete(obj);
        return NULL;
    }
    cJSON_AddStringToObject(m, "version", version ? version : "");
    cJSON_AddNumberToObject(m, "protocol", MK_CTL_PROTOCOL);
    cJSON_AddItemToObject(m, "capabilities", string_array(capabilities));
    cJSON_AddItemToObject(m, "events", string_array(events));
    return line_of(obj);
}

char *mk_ctl_event(const char *event, const cJSON *data)
{
    cJSON *name = cJSON_CreateString(event);
    char *ename = name ? cJSON_PrintUnformatted(name) : NULL;
    char *body = data ? cJSON_PrintUnformatted(data) : NULL;
    cJSON_Delete(name);
    char *out = NULL;
    if (ename && (body || !data)) {
        size_t n = strlen(ename) + (body ? strlen(body) : 4) + 32;
        if ((out = malloc(n)))
            snprintf(out, n, "{\"event\":%s,\"data\":%s}\n", ename, body ? body : "null");
    }
    free(ename);
    free(body);
    return out;
}

char *mk_ctl_request(const cJSON *id, const char *cmd, cJSON *args)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj || (id && !add_id(obj, id)) || !cJSON_AddStringToObject(obj, "cmd", cmd)) {
        cJSON_Delete(args);
        cJSON_Delete(obj);
        return NULL;
    }
    if (args)
        cJSON_AddItemToObject(obj, "args", args);
    return line_of(obj);
}

/* ---- client side ----------------------------------------------------------------------------------------- */

int mk_ctl_connect(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof addr.sun_path)
        return mk_err_set(MK_ERANGE, "socket path '%s' is longer than %zu bytes", path ? path : "(null)",
                          sizeof addr.sun_path - 1);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return mk_err_set(MK_EIO, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        return mk_err_set(MK_EIO, "connecting to %s: %s", path, strerror(e));
    }
    return fd;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mk_ctl_read_line(int fd, mk_ctl_linebuf_t *lb, int timeout_ms, char **line, size_t *len)
{
    long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        int r = mk_ctl_linebuf_next(lb, line, len);
        if (r != MK_CTL_NEED_MORE)
            return r;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int wait = deadline < 0 ? -1 : (int)(deadline - now_ms());
        if (deadline >= 0 && wait <= 0)
            return mk_err_set(MK_ERANGE, "no reply within %d ms", timeout_ms);
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno == EINTR)
            return MK_CTL_NEED_MORE;
        if (pr < 0)
            return mk_err_set(MK_EIO, "poll: %s", strerror(errno));
        if (pr == 0)
            continue;
        size_t avail;
        char *space = mk_ctl_linebuf_space(lb, &avail);
        ssize_t got = read(fd, space, avail);
        if (got < 0 && errno == EINTR)
            return MK_CTL_NEED_MORE;
        if (got < 0 && errno == EAGAIN)
            continue;
        if (got < 0 && errno == ECONNRESET) /* closed with data of ours unread: gone all the same */
            return mk_err_set(MK_EIO, "maskd closed the connection (reset)");
        if (got < 0)
            return mk_err_set(MK_EIO, "reading from maskd: %s", strerror(errno));
        if (got == 0)
            return mk_err_set(MK_EIO, "maskd closed the connection");
        mk_ctl_linebuf_commit(lb, (size_t)got);
    }
}

int mk_ctl_write_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t w = send(fd, s, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return mk_err_set(MK_EIO, "writing to maskd: %s", strerror(errno));
        s += w;
        len -= (size_t)w;
    }
    return 0;
}
