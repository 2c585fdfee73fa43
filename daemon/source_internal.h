/* source_internal: what the generic source layer (source.c) and the backends (source_v4l2.c, source_file.c,
 * source_testpattern.c) share: the backend operations and the source object's layout. */
#ifndef MK_SOURCE_INTERNAL_H
#define MK_SOURCE_INTERNAL_H

#include "source.h"

/* The most slots a backend may have (the held-frame bookkeeping is a 64-bit mask). */
#define MK_SOURCE_MAX_SLOTS 64

typedef struct {
    /* Delivers one frame within timeout_ms (< 0: no limit): fills every field of *f but seq (capture_ns 0 means
     * "now"). Returns MK_SOURCE_FRAME, _TIMEOUT, _EOS, _LOST or a negative error. Never hands out a held slot. */
    int (*next)(mk_source_t *s, int timeout_ms, mk_frame_t *f);
    /* Takes a slot back: 0, or MK_SOURCE_LOST when the device refused it. */
    int (*release)(mk_source_t *s, int slot);
    /* One reopen attempt after a loss (no frame is held): tears down what is left and opens again. 0 or < 0. */
    int (*reopen)(mk_source_t *s);
    /* Frees the backend's state; frames still held become invalid. */
    void (*close)(mk_source_t *s);
    /* Optional (NULL: MK_EUNSUPPORTED). */
    int (*set_control)(mk_source_t *s, const char *name, int64_t value);
    int (*get_control)(mk_source_t *s, const char *name, int64_t *value);
    int (*controls)(const mk_source_t *s, const mk_source_control_t **list);
} mk_source_ops_t;

struct mk_source {
    const mk_source_ops_t *ops; /* set by the backend's open */
    void *impl;                 /* the backend's state */
    mk_source_config_t cfg;
    mk_source_info_t info;      /* filled by the backend */
    mk_source_stats_t stats;    /* frames/timeouts/lost/reopens kept here; corrupt/dropped/loops by the backend */
    mk_source_state_t state;
    int max_held;               /* set by the backend (1..MK_SOURCE_MAX_SLOTS) */
    int held;
    uint64_t held_mask;
    uint64_t seq;
    uint32_t pending_flags;     /* OR'ed into the next frame's flags */
    double pace_fps;            /* > 0: deliver at this rate (set by the backend) */
    int64_t next_due_ns;        /* pacing: when the next frame is due (0: the next frame starts the schedule) */
    int backoff_ms;             /* reopen: the current delay */
    int64_t next_try_ns;        /* reopen: when the next attempt may be made */
    int tries_since_lost;       /* reopen attempts since the loss */
};

/* Backend constructors: set s->ops, s->impl, s->info, s->max_held and (paced sources) s->pace_fps. On failure
 * they leave s->impl NULL or freed and return a negative code with a message. */
int mk_source_v4l2_open(mk_source_t *s, const char *path);
int mk_source_file_open(mk_source_t *s, const char *path);
int mk_source_testpattern_open(mk_source_t *s, int width, int height, double fps);

/* A control name normalised as mk_source_control_t says ("Exposure Time, Absolute" -> "exposure_time_absolute"). */
void mk_source_control_name(const char *in, char *out, size_t n);

/* Puts an open source in the lost state (stats, backoff schedule, a log line saying why). */
void mk_source_mark_lost(mk_source_t *s, const char *why);

int64_t mk_source_now_ns(void);
/* Sleeps until CLOCK_MONOTONIC time t_ns (returns at once if it has passed). */
void mk_source_sleep_until(int64_t t_ns);
/* The deadline for a timeout from now (INT64_MAX for a negative timeout). */
int64_t mk_source_deadline(int timeout_ms);
/* Milliseconds left until a deadline (0 if passed, -1 for INT64_MAX), rounded up. */
int mk_source_ms_left(int64_t deadline_ns);

#endif
