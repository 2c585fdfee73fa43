/* ctlproto: the framing of maskd's control protocol, shared by the server (daemon/control.c) and its clients
 * (maskctl, tests).
 *
 * Transport: a Unix stream socket; each message is one line of JSON (UTF-8, no raw newline inside: JSON escapes
 * them) ended by '\n'; a trailing '\r' is ignored, and so are empty lines. A line is at most max_line bytes without
 * its newline (control.max_line_bytes).
 *
 *   server greeting, once on connect:
 *     {"maskd": {"version": "0.1.0", "protocol": 1, "capabilities": ["get", "set", ...], "events": [...]}}
 *   request:   {"id": ID, "cmd": "get", "args": ...}      id optional: a number, a string or null, echoed back;
 *                                                         args optional, its form depends on the command
 *   replies:   {"id": ID, "ok": true, "result": ...}
 *              {"id": ID, "ok": false, "error": {"class": "bad-value", "desc": "...",
 *                                                "errors": [{"key": ..., "class": ..., "desc": ...}, ...]}}
 *              ("errors" only when several keys were at fault; id is null when the request had none or could not
 *              be parsed)
 *   events:    {"event": "stats", "data": {...}}          only to clients that subscribed to them
 * A client refused for lack of room gets one error reply of class "busy" (id null) instead of the greeting.
 *
 * Thread rules: everything here is reentrant; a line buffer belongs to one thread at a time. */
#ifndef MK_CTLPROTO_H
#define MK_CTLPROTO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

#define MK_CTL_PROTOCOL 1

typedef enum {
    MK_CTL_EPARSE = 0,       /* "parse": not JSON, not a request object, or a line too long */
    MK_CTL_EUNKNOWN_CMD = 1, /* "unknown-command" */
    MK_CTL_EBAD_ARGS = 2,    /* "bad-args": args of the wrong shape for the command */
    MK_CTL_EUNKNOWN_KEY = 3, /* "unknown-key": no such option */
    MK_CTL_EBAD_VALUE = 4,   /* "bad-value": wrong type, out of range, malformed */
    MK_CTL_ERESTART = 5,     /* "restart-required": a restart-only option */
    MK_CTL_EBUSY = 6,        /* "busy": too many clients, or the pipeline did not take a change in time */
    MK_CTL_EINTERNAL = 7,    /* "internal": the daemon failed to do something valid */
    MK_CTL_ECLASSES = 8
} mk_ctl_eclass_t;

/* "bad-value" etc.; "internal" for an unknown class. */
const char *mk_ctl_eclass_name(mk_ctl_eclass_t c);
/* The class named s, or -1. */
int mk_ctl_eclass_parse(const char *s);

/* ---- line framing ------------------------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t cap;      /* max_line + 1: room for a longest line and its newline */
    size_t start;    /* first byte not yet returned */
    size_t len;      /* bytes held */
    int discarding;  /* skipping the rest of an oversize line up to its newline */
} mk_ctl_linebuf_t;

enum {
    MK_CTL_NEED_MORE = 0, /* no complete line held */
    MK_CTL_LINE = 1,      /* a line was returned */
    MK_CTL_OVERSIZE = 2,  /* a line exceeded max_line: it is skipped up to its newline (reported once) */
};

int mk_ctl_linebuf_init(mk_ctl_linebuf_t *lb, size_t max_line);
void mk_ctl_linebuf_free(mk_ctl_linebuf_t *lb);
/* Where to read next and how much fits (never 0: held lines are moved to the front first). */
char *mk_ctl_linebuf_space(mk_ctl_linebuf_t *lb, size_t *avail);
/* n bytes were read into the space. */
void mk_ctl_linebuf_commit(mk_ctl_linebuf_t *lb, size_t n);
/* The next line (NUL-terminated in place, without its newline; valid until the next call on lb), or another
 * MK_CTL_* result. */
int mk_ctl_linebuf_next(mk_ctl_linebuf_t *lb, char **line, size_t *len);

/* ---- requests ------------------------------------------------------------------------------------------------ */

typedef struct {
    struct cJSON *root;       /* the parsed line (owned) */
    const struct cJSON *id;   /* NULL when absent */
    const char *cmd;
    const struct cJSON *args; /* NULL when absent */
} mk_ctl_request_t;

/* Parses one request line: len bytes followed by a NUL (as mk_ctl_linebuf_next returns it); anything after the
 * JSON value other than white space is an error. On failure returns MK_EFORMAT with `err` describing it; req->id is still set when
 * the line was an object with a valid id (so that the error reply can echo it). Free with mk_ctl_request_free
 * either way. */
int mk_ctl_request_parse(const char *line, size_t len, mk_ctl_request_t *req, char *err, size_t n);
void mk_ctl_request_free(mk_ctl_request_t *req);

/* ---- messages: each returns a malloc'd line ending in '\n' (NULL on ENOMEM) ---------------------------------- */

/* result is taken over (NULL: JSON null). */
char *mk_ctl_reply_ok(const struct cJSON *id, struct cJSON *result);
/* errors (taken over, may be NULL): the array of per-key errors. */
char *mk_ctl_reply_error(const struct cJSON *id, mk_ctl_eclass_t cls, const char *desc, struct cJSON *errors);
char *mk_ctl_greeting(const char *version, const char *const *capabilities, const char *const *events);
char *mk_ctl_event(const char *event, const struct cJSON *data);
/* A request line; args taken over (may be NULL), id may be NULL. */
char *mk_ctl_request(const struct cJSON *id, const char *cmd, struct cJSON *args);

/* ---- client side --------------------------------------------------------------------------------------------- */

/* Connects to the server at `path`: a blocking socket (close-on-exec), or a negative MK_E* code with a message. */
int mk_ctl_connect(const char *path);
/* Reads one line within timeout_ms (-1: no limit): MK_CTL_LINE, MK_CTL_OVERSIZE, MK_CTL_NEED_MORE when a signal
 * interrupted the wait (call again to go on), MK_EIO (closed by the server, or an error; message set) or
 * MK_ERANGE (timeout). */
int mk_ctl_read_line(int fd, mk_ctl_linebuf_t *lb, int timeout_ms, char **line, size_t *len);
/* Writes all of `s` (MSG_NOSIGNAL). 0 or MK_EIO. */
int mk_ctl_write_all(int fd, const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
