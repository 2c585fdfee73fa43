/* control: maskd's control socket server — a Unix stream socket speaking the protocol of ipc/ctlproto.h, with
 * the commands get, set, list, stats, subscribe, unsubscribe, reload, version and help, dispatched to the daemon
 * through mk_control_ops_t.
 *
 * Commands (args in brackets; "KEYS" is a key, a section ("grabcut" or "grabcut.*"), "*", or an array of these;
 * absent means every option):
 *   get [KEYS]             {"grabcut.iterations": 5, ...}
 *   set {"key": value,...} the keys validated together against the option table (nested sections or dotted
 *                          keys); any error: nothing is applied and every bad key is reported (class of the
 *                          first; "errors" lists each). Valid: queued for the pipeline, applied at its next frame
 *                          boundary, and answered after that with {"applied": {...}, "changed": N}; "busy" when
 *                          the pipeline takes none within control.set_timeout_ms (then nothing is applied).
 *                          Restart-only keys are refused (restart-required) unless set to their current value.
 *   list [KEYS]            the option table: name, type, default, range or values, live, doc, current value
 *   stats                  whatever ops.stats returns
 *   subscribe [EVENTS]     EVENTS: a name or an array of "stats", "detections", "state"; absent: all.
 *   unsubscribe [EVENTS]   → {"events": [the subscriptions now]}
 *   reload                 ops.reload (re-read the config file)
 *   version                {"version": ..., "protocol": 1}
 *   help                   the commands with their arguments
 *
 * Limits: at most max_clients connections (one more gets a "busy" error line and is closed); request lines of at
 * most max_line bytes (a longer line gets a "parse" error and the connection resynchronises at the next newline:
 * it stays open); at most max_output bytes of replies and events waiting for a client, beyond which the client
 * is disconnected (a subscriber that does not read cannot hold memory or slow anything down). A client's
 * requests are answered in order: after a `set`, its further requests wait until the set is answered. Peer
 * credentials (SO_PEERCRED) of each client are logged.
 *
 * Threading contract:
 *  - The server runs on its own thread (started by mk_control_start), which does all socket I/O with poll().
 *  - ops.get_config, ops.stats and ops.reload are called on that thread; they must not call mk_control_stop or
 *    mk_control_destroy (mk_control_publish is fine).
 *  - ops.set_config is called on the thread that calls mk_control_apply_pending(): the pipeline, at a frame
 *    boundary. A transaction there is already validated; set_config commits it (mk_config_txn_commit into the
 *    daemon's configuration, hooks included) and returns what commit returned.
 *    The daemon must call mk_control_apply_pending() also while it has no frames (idle, source lost), e.g. from
 *    its wait loop, or sets time out with "busy". mk_control_pending() is a lock-free check.
 *  - mk_control_publish() may be called from any thread at any time between create and destroy; it never waits
 *    for a client (it copies the event into the subscribers' output buffers under a short lock and wakes the
 *    server thread).
 *  - mk_control_stop() and mk_control_destroy() are called by the owner, not concurrently with each other;
 *    destroy only after the pipeline has stopped calling mk_control_apply_pending(). */
#ifndef MK_CONTROL_H
#define MK_CONTROL_H

#include "config.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef struct mk_control mk_control_t;

typedef struct {
    /* Copies the configuration in force into *out. Required. */
    int (*get_config)(void *user, mk_config_t *out);
    /* Commits a validated transaction (see the threading contract). Returns the number of options changed, or a
     * negative MK_E* code with mk_err_set() and nothing applied: MK_EINVAL and MK_ERANGE (a value the daemon
     * cannot take, e.g. a class its detector lacks) reach the client as "bad-value", the rest as "internal".
     * Required. */
    int (*set_config)(void *user, const mk_config_txn_t *txn);
    /* A new JSON object of statistics, or NULL with mk_err_set(). Optional. */
    struct cJSON *(*stats)(void *user);
    /* Re-reads the config file. 0 (with *result, may stay NULL, taken over) or a negative MK_E* code with
     * mk_err_set(): MK_EINVAL, MK_ERANGE, MK_EFORMAT and MK_EIO reach the client as "bad-value", the rest as
     * "internal". Optional. */
    int (*reload)(void *user, struct cJSON **result);
} mk_control_ops_t;

typedef struct {
    const char *path;     /* socket path (copied); normally RUNTIME_DIR/control.sock (config/paths.h) */
    unsigned mode;        /* permission bits of the socket, 0660 */
    int max_clients;      /* control.max_clients */
    size_t max_line;      /* control.max_line_bytes */
    size_t max_output;    /* control.max_output_bytes */
    int set_timeout_ms;   /* control.set_timeout_ms */
    const char *version;  /* reported in the greeting and by `version` (copied) */
} mk_control_opts_t;

/* Limits from cfg's control.* options (cfg NULL: the defaults), mode 0660, no path, version "". */
void mk_control_opts_from_config(mk_control_opts_t *o, const mk_config_t *cfg);

/* The server object, not yet listening. ops and user are kept (ops copied). */
int mk_control_create(const mk_control_opts_t *opts, const mk_control_ops_t *ops, void *user, mk_control_t **out);
/* Binds the socket (a stale socket file left by a dead daemon is replaced; a live one is MK_ESTATE; any other
 * file there is MK_EIO), sets its mode, listens and starts the server thread. */
int mk_control_start(mk_control_t *s);
/* Stops the thread, disconnects every client, removes the socket file. Safe on a server never started and
 * twice. Sets still waiting are answered "busy" (not applied). */
void mk_control_stop(mk_control_t *s);
/* Stops if needed and frees. Safe on NULL. */
void mk_control_destroy(mk_control_t *s);

/* Sends event `event` ("stats", "detections" or "state") with `data` (borrowed; may be NULL) to its
 * subscribers. Returns how many clients it was queued for (0 when nobody subscribed: then it costs one atomic
 * load), or MK_EINVAL for an unknown event. Never blocks on clients. */
int mk_control_publish(mk_control_t *s, const char *event, const struct cJSON *data);

/* Frame boundary: applies every validated set waiting (ops.set_config, in arrival order) and has them answered.
 * Returns how many were applied (0 almost always: one atomic load when none waits). */
int mk_control_apply_pending(mk_control_t *s);
/* Number of sets waiting for mk_control_apply_pending (lock-free). */
int mk_control_pending(mk_control_t *s);

/* The server's own counters: {"clients", "subscribers", "connections", "refused", "dropped_slow",
 * "requests", "errors", "sets_applied", "sets_timed_out"}. NULL on ENOMEM. */
struct cJSON *mk_control_stats(mk_control_t *s);

#ifdef __cplusplus
}
#endif
#endif
