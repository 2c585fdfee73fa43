/* log: formatting, level control and rate limiting of log lines. */
#include "log.h"

#include "errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int level = -1; /* -1: not yet read from $MASKD_LOG */
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
static const char syslog_prio[] = {'3', '4', '6', '7', '7'};

const char *mk_log_level_name(mk_log_level_t l)
{
    return (unsigned)l <= MK_LOG_TRACE ? names[l] : "?";
}

int mk_log_parse_level(const char *s, mk_log_level_t *out)
{
    if (!s)
        return mk_err_set(MK_EINVAL, "log level missing");
    for (int i = 0; i <= MK_LOG_TRACE; i++)
        if (!strcasecmp(s, names[i]) || (s[0] == '0' + i && s[1] == '\0')) {
            *out = (mk_log_level_t)i;
            return 0;
        }
    if (!strcasecmp(s, "warning")) {
        *out = MK_LOG_WARN;
        return 0;
    }
    return mk_err_set(MK_EINVAL, "unknown log level '%s' (error|warn|info|debug|trace)", s);
}

void mk_log_set_level(mk_log_level_t l)
{
    atomic_store(&level, (int)l);
}

mk_log_level_t mk_log_get_level(void)
{
    int l = atomic_load(&level);
    if (l < 0) {
        mk_log_level_t parsed = MK_LOG_INFO;
        const char *env = getenv("MASKD_LOG");
        if (env && mk_log_parse_level(env, &parsed) != 0)
            parsed = MK_LOG_INFO;
        int expected = -1;
        atomic_compare_exchange_strong(&level, &expected, (int)parsed);
        l = atomic_load(&level);
    }
    return (mk_log_level_t)l;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "kernels/letterbox.c" -> "letterbox" */
static void file_prefix(const char *file, char *out, size_t n)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strcspn(base, ".");
    if (len >= n)
        len = n - 1;
    memcpy(out, base, len);
    out[len] = '\0';
}

static void vwrite_line(mk_log_level_t l, const char *file, int errnum, unsigned suppressed, const char *fmt,
                        va_list ap)
{
    char line[1024], prefix[48];
    size_t pos = 0;
    file_prefix(file, prefix, sizeof prefix);
    if (getenv("JOURNAL_STREAM")) {
        pos += (size_t)snprintf(line, sizeof line, "<%c>%s: ", syslog_prio[l], prefix);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        pos += strftime(line, sizeof line, "%H:%M:%S", &tm);
        pos += (size_t)snprintf(line + pos, sizeof line - pos, ".%03ld %-5s %s: ", ts.tv_nsec / 1000000,
                                names[l], prefix);
    }
    if (pos < sizeof line) {
        int n = vsnprintf(line + pos, sizeof line - pos, fmt, ap);
        pos = n < 0 ? pos : pos + (size_t)n;
    }
    if (errnum && pos < sizeof line) {
        char buf[128];
        pos += (size_t)snprintf(line + pos, sizeof line - pos, ": %s", strerror_r(errnum, buf, sizeof buf));
    }
    if (suppressed && pos < sizeof line)
        pos += (size_t)snprintf(line + pos, sizeof line - pos, " (%u similar messages suppressed)", suppressed);
    if (pos > sizeof line - 2)
        pos = sizeof line - 2;
    line[pos++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, pos);
    (void)w;
}

void mk_log_write(mk_log_level_t l, const char *file, int errnum, const char *fmt, ...)
{
    if ((unsigned)l > MK_LOG_TRACE)
        l = MK_LOG_ERROR;
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vwrite_line(l, file, errnum, 0, fmt, ap);
    va_end(ap);
    errno = saved;
}

void mk_log_write_rl(mk_log_rl_t *rl, int interval_ms, mk_log_level_t l, const char *file, int errnum,
                     const char *fmt, ...)
{
    if ((unsigned)l > MK_LOG_TRACE)
        l = MK_LOG_ERROR;
    int saved = errno;
    int64_t t = now_ns();
    unsigned suppressed = 0;
    int emit;
    pthread_mutex_lock(&rl_lock);
    emit = t >= rl->next_ns;
    if (emit) {
        suppressed = rl->suppressed;
        rl->suppressed = 0;
        rl->next_ns = t + (int64_t)interval_ms * 1000000;
    } else {
        rl->suppressed++;
    }
    pthread_mutex_unlock(&rl_lock);
    if (emit) {
        va_list ap;
        va_start(ap, fmt);
        vwrite_line(l, file, errnum, suppressed, fmt, ap);
        va_end(ap);
    }
    errno = saved;
}
