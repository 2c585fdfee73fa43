/* log: leveled logging to stderr with a per-file prefix, errno text on request and rate-limited repeats.
 *
 * Thread rules: every function here may be called from any thread; a line is written with one write(2), so
 * lines from different threads never interleave. Under systemd (JOURNAL_STREAM set) each line starts with the
 * syslog priority "<N>" so that journald keeps the level; on a terminal it starts with a timestamp. */
#ifndef MK_LOG_H
#define MK_LOG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MK_LOG_ERROR = 0,
    MK_LOG_WARN = 1,
    MK_LOG_INFO = 2,
    MK_LOG_DEBUG = 3,
    MK_LOG_TRACE = 4,
} mk_log_level_t;

/* Messages above this level are dropped. Defaults to MK_LOG_INFO, or to $MASKD_LOG (error|warn|info|debug|trace)
 * read at the first message. */
void mk_log_set_level(mk_log_level_t level);
mk_log_level_t mk_log_get_level(void);
/* Parses "error".."trace" (or "0".."4"); returns 0 or MK_EINVAL. */
int mk_log_parse_level(const char *s, mk_log_level_t *out);
/* The printable name of a level ("warn"). */
const char *mk_log_level_name(mk_log_level_t level);

/* One call site's rate-limit state: the MK_LOG_RL macro keeps one per call site. */
typedef struct {
    int64_t next_ns;     /* CLOCK_MONOTONIC time before which repeats are suppressed */
    unsigned suppressed; /* how many were suppressed since the last line written */
} mk_log_rl_t;

/* `file` is __FILE__ (its base name without extension becomes the prefix); `errnum` != 0 appends ": strerror". */
void mk_log_write(mk_log_level_t level, const char *file, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As mk_log_write, but at most one line per `interval_ms` through `rl`; the next line that passes says how many
 * were suppressed. */
void mk_log_write_rl(mk_log_rl_t *rl, int interval_ms, mk_log_level_t level, const char *file, int errnum,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#define MK_LOG(level, ...)                                                                                     \
    do {                                                                                                       \
        if ((level) <= mk_log_get_level())                                                                     \
            mk_log_write((level), __FILE__, 0, __VA_ARGS__);                                                   \
    } while (0)
/* Appends ": <strerror(errno)>" (errno read at the call). */
#define MK_LOG_ERRNO(level, ...)                                                                               \
    do {                                                                                                       \
        int mk_log_errno_ = errno;                                                                             \
        if ((level) <= mk_log_get_level())                                                                     \
            mk_log_write((level), __FILE__, mk_log_errno_, __VA_ARGS__);                                       \
    } while (0)
/* At most one line per interval_ms from this call site. */
#define MK_LOG_RL(interval_ms, level, ...)                                                                     \
    do {                                                                                                       \
        static mk_log_rl_t mk_log_rl_;                                                                         \
        if ((level) <= mk_log_get_level())                                                                     \
            mk_log_write_rl(&mk_log_rl_, (interval_ms), (level), __FILE__, 0, __VA_ARGS__);                    \
    } while (0)

#define MK_ERROR(...) MK_LOG(MK_LOG_ERROR, __VA_ARGS__)
#define MK_WARN(...) MK_LOG(MK_LOG_WARN, __VA_ARGS__)
#define MK_INFO(...) MK_LOG(MK_LOG_INFO, __VA_ARGS__)
#define MK_DEBUG(...) MK_LOG(MK_LOG_DEBUG, __VA_ARGS__)
#define MK_TRACE(...) MK_LOG(MK_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
