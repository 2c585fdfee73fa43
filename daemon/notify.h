/* notify: the systemd service notification protocol (sd_notify(3)) spoken directly: one datagram per message to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a path, or '@' for the abstract namespace), no libsystemd.
 *
 * maskd sends READY=1 after the first published mask (or, with a STATUS= saying why, as soon as the pipeline knows
 * that one is not coming soon: the source is absent or lost, a file ended, the first frames all failed), STATUS=...
 * once a second, WATCHDOG=1 from its processing loop when $WATCHDOG_USEC is set (and $WATCHDOG_PID, if set, is
 * this process), STOPPING=1 on shutdown. Without
 * $NOTIFY_SOCKET every call is a cheap no-op. READY=1 and STOPPING=1 wait while the receiver's queue is full, but
 * at most MK_NOTIFY_WAIT_MS (then the send fails with MK_EIO: a stuck receiver never holds up a shutdown); the
 * periodic WATCHDOG=1 and STATUS= (mk_notify_sendf_nowait) are dropped at once instead.
 *
 * Thread rules: every function may be called from any thread (one sendto(2) per message; the watchdog's rate
 * limit is an atomic). */
#ifndef MK_NOTIFY_H
#define MK_NOTIFY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_notify mk_notify_t;

/* How long a waiting send (mk_notify_send, mk_notify_sendf) waits for room in the receiver's queue. */
#define MK_NOTIFY_WAIT_MS 500

/* Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID. Always gives an object (a disabled one when the
 * variables are absent); MK_EINVAL (with a message; the object is disabled) for a malformed socket name, MK_EIO
 * when no socket could be made, MK_ENOMEM. With `unset_env`, the variables are removed from the environment so
 * that child processes do not inherit them. */
int mk_notify_open(int unset_env, mk_notify_t **out);
void mk_notify_close(mk_notify_t *n);

/* 1 when notifications go somewhere. */
int mk_notify_enabled(const mk_notify_t *n);
/* The watchdog period systemd asked for (0: none). */
uint64_t mk_notify_watchdog_usec(const mk_notify_t *n);

/* Sends `msg` (newline-separated assignments, e.g. "READY=1\nSTATUS=running"). 0, or MK_EIO (message set). */
int mk_notify_send(mk_notify_t *n, const char *msg);
/* printf form of mk_notify_send (at most 1023 bytes). */
int mk_notify_sendf(mk_notify_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As mk_notify_sendf, but never waits: when the receiver's queue is full (systemd busy, a test that does not
 * read) the message is dropped and 1 returned (0: sent, or no socket). For periodic messages that the next one
 * replaces (STATUS=), and for retries, so that the processing loop never blocks on its notifications. */
int mk_notify_sendf_nowait(mk_notify_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* WATCHDOG=1, at most once per a third of the watchdog period (call it as often as convenient), never waiting:
 * with the receiver's queue full the ping is dropped and due again at the next call. Returns 1 when a ping was
 * sent, 0 when none was due or sent, or the watchdog is off, MK_EIO on failure. */
int mk_notify_watchdog(mk_notify_t *n);

#ifdef __cplusplus
}
#endif
#endif
