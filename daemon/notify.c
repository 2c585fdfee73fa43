/* notify: sd_notify spoken over a datagram socket, with the watchdog's rate limit. */
#include "notify.h"

#include "errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct mk_notify {
    int fd;
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec;
    atomic_uint_fast64_t last_ping_ns;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A decimal number without sign or garbage; 0 when malformed. */
static uint64_t parse_u64(const char *s)
{
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 19)
        return 0;
    return strtoull(s, NULL, 10);
}

int mk_notify_open(int unset_env, mk_notify_t **out)
{
    mk_notify_t *n = calloc(1, sizeof *n);
    *out = n;
    if (!n)
        return mk_err_set(MK_ENOMEM, "notify: out of memory");
    n->fd = -1;
    const char *sock = getenv("NOTIFY_SOCKET");
    const char *wd = getenv("WATCHDOG_USEC"), *wd_pid = getenv("WATCHDOG_PID");
    int rc = 0;
    if (wd && (!wd_pid || parse_u64(wd_pid) == (uint64_t)getpid()))
        n->watchdog_usec = parse_u64(wd);
    if (sock && *sock) {
        size_t len = strlen(sock);
        if ((sock[0] != '/' && sock[0] != '@') || len < 2 || len >= sizeof n->addr.sun_path) {
            rc = mk_err_set(MK_EINVAL, "NOTIFY_SOCKET '%s' is neither an absolute path nor '@' and a name", sock);
        } else {
            n->addr.sun_family = AF_UNIX;
            memcpy(n->addr.sun_path, sock, len);
            if (sock[0] == '@')
                n->addr.sun_path[0] = '\0'; /* the abstract namespace; the name is not NUL-terminated */
            n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (sock[0] == '/'));
            n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            /* a waiting send gives up after MK_NOTIFY_WAIT_MS (the kernel honours SO_SNDTIMEO while it waits for
             * room in an AF_UNIX datagram receiver's queue) */
            const struct timeval tv = {MK_NOTIFY_WAIT_MS / 1000, (MK_NOTIFY_WAIT_MS % 1000) * 1000};
            if (n->fd < 0)
                rc = mk_err_set(MK_EIO, "notify socket: %s", strerror(errno));
            else if (setsockopt(n->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv)) {
                rc = mk_err_set(MK_EIO, "notify socket: SO_SNDTIMEO: %s", strerror(errno));
                close(n->fd);
                n->fd = -1;
            }
        }
    }
    if (rc)
        n->watchdog_usec = 0;
    if (unset_env) {
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
    }
    return rc;
}

void mk_notify_close(mk_notify_t *n)
{
    if (!n)
        return;
    if (n->fd >= 0)
        close(n->fd);
    free(n);
}

int mk_notify_enabled(const mk_notify_t *n)
{
    return n && n->fd >= 0;
}

uint64_t mk_notify_watchdog_usec(const mk_notify_t *n)
{
    return n && n->fd >= 0 ? n->watchdog_usec : 0;
}

/* One datagram. With `nowait`, a full receive queue drops the message: 1 then. */
static int send_msg(mk_notify_t *n, const char *msg, int nowait)
{
    if (!n || n->fd < 0 || !msg)
        return 0;
    ssize_t r;
    do
        r = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | (nowait ? MSG_DONTWAIT : 0),
                   (const struct sockaddr *)&n->addr, n->addr_len);
    while (r < 0 && errno == EINTR);
    if (r < 0 && nowait && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 1;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const int first = (int)strcspn(msg, "\n"); /* the message's first assignment names it */
        return mk_err_set(MK_EIO, "sd_notify: the receiver's queue stayed full for %d ms: %.*s not sent",
                          MK_NOTIFY_WAIT_MS, first < 40 ? first : 40, msg);
    }
    if (r < 0)
        return mk_err_set(MK_EIO, "sd_notify: %s", strerror(errno));
    return 0;
}

int mk_notify_send(mk_notify_t *n, const char *msg)
{
    return send_msg(n, msg, 0);
}

static int vsendf(mk_notify_t *n, int nowait, const char *fmt, va_list ap)
{
    if (!n || n->fd < 0)
        return 0;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return send_msg(n, buf, nowait);
}

int mk_notify_sendf(mk_notify_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vsendf(n, 0, fmt, ap);
    va_end(ap);
    return rc;
}

int mk_notify_sendf_nowait(mk_notify_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vsendf(n, 1, fmt, ap);
    va_end(ap);
    return rc;
}

int mk_notify_watchdog(mk_notify_t *n)
{
    if (!n || n->fd < 0 || !n->watchdog_usec)
        return 0;
    uint64_t now = now_ns(), last = atomic_load(&n->last_ping_ns);
    if (last && now - last < n->watchdog_usec * 1000u / 3)
        return 0;
    if (!atomic_compare_exchange_strong(&n->last_ping_ns, &last, now))
        return 0; /* another thread pinged just now */
    int rc = send_msg(n, "WATCHDOG=1", 1);
    if (rc > 0) { /* dropped (the receiver is behind): due again at the next call */
        atomic_compare_exchange_strong(&n->last_ping_ns, &now, last);
        return 0;
    }
    return rc ? rc : 1;
}
