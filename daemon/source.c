/* source: spec parsing, the held-frame bookkeeping, real-time pacing and the reopen backoff shared by every
 * backend. */
#include "source_internal.h"

#include "config.h"
#include "errors.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/videodev2.h>

#define TESTPATTERN_W 640
#define TESTPATTERN_H 480
#define TESTPATTERN_FPS 30.0
#define FPS_MAX 1000.0

int64_t mk_source_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void mk_source_sleep_until(int64_t t_ns)
{
    struct timespec ts = {.tv_sec = t_ns / 1000000000, .tv_nsec = t_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

int64_t mk_source_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? INT64_MAX : mk_source_now_ns() + (int64_t)timeout_ms * 1000000;
}

int mk_source_ms_left(int64_t deadline_ns)
{
    if (deadline_ns == INT64_MAX)
        return -1;
    int64_t left = deadline_ns - mk_source_now_ns();
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > INT_MAX ? INT_MAX : (int)left;
}

void mk_source_config_init(mk_source_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->pixfmt = MK_PIXFMT_AUTO;
    cfg->realtime = 1;
    cfg->buffers = 4;
    cfg->lost_ms = 3000;
    cfg->backoff_min_ms = 100;
    cfg->backoff_max_ms = 2000;
}

const char *mk_source_status_name(int status)
{
    switch (status) {
    case MK_SOURCE_FRAME: return "frame";
    case MK_SOURCE_TIMEOUT: return "timeout";
    case MK_SOURCE_EOS: return "eos";
    case MK_SOURCE_LOST: return "lost";
    }
    return mk_err_name(status);
}

static int check_config(const mk_source_config_t *c)
{
    if (c->width < 0 || c->height < 0 || c->width > MK_IMAGE_MAX_DIM || c->height > MK_IMAGE_MAX_DIM ||
        (c->width == 0) != (c->height == 0))
        return mk_err_set(MK_ERANGE, "source size %dx%d: both 0 or both in 1..%d", c->width, c->height,
                          MK_IMAGE_MAX_DIM);
    if (!(c->fps >= 0 && c->fps <= FPS_MAX))
        return mk_err_set(MK_ERANGE, "source fps %g outside 0..%g", c->fps, FPS_MAX);
    if ((unsigned)c->pixfmt > MK_PIXFMT_YUYV)
        return mk_err_set(MK_EINVAL, "unknown source pixel format preference %d", (int)c->pixfmt);
    if (c->buffers < 1 || c->buffers > 32)
        return mk_err_set(MK_ERANGE, "source buffers %d outside 1..32", c->buffers);
    if (c->lost_ms < 1)
        return mk_err_set(MK_ERANGE, "source lost_ms %d must be positive", c->lost_ms);
    if (c->backoff_min_ms < 1 || c->backoff_max_ms < c->backoff_min_ms)
        return mk_err_set(MK_ERANGE, "source backoff %d..%d ms: need 1 <= min <= max", c->backoff_min_ms,
                          c->backoff_max_ms);
    return 0;
}

/* "WxH", "WxH@FPS" or "@FPS" after "testpattern:". */
static int parse_testpattern(const char *arg, int *w, int *h, double *fps)
{
    const char *p = arg;
    char *end;
    if (*p != '@') {
        long lw = strtol(p, &end, 10);
        if (end == p || (*end != 'x' && *end != 'X'))
            goto bad;
        p = end + 1;
        long lh = strtol(p, &end, 10);
        if (end == p)
            goto bad;
        if (lw < 16 || lh < 16 || lw > MK_IMAGE_MAX_DIM || lh > MK_IMAGE_MAX_DIM)
            return mk_err_set(MK_ERANGE, "testpattern size %ldx%ld outside 16..%d", lw, lh, MK_IMAGE_MAX_DIM);
        *w = (int)lw;
        *h = (int)lh;
        p = end;
    }
    if (*p == '@') {
        double f = strtod(p + 1, &end);
        if (end == p + 1 || *end)
            goto bad;
        if (!(f > 0 && f <= FPS_MAX))
            return mk_err_set(MK_ERANGE, "testpattern fps %g outside (0, %g]", f, FPS_MAX);
        *fps = f;
        p = end;
    }
    if (*p)
        goto bad;
    return 0;
bad:
    return mk_err_set(MK_EINVAL, "bad test pattern spec 'testpattern:%s' (testpattern[:WxH[@FPS]])", arg);
}

int mk_source_open(const char *spec, const mk_source_config_t *cfg, mk_source_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_source_open: NULL output");
    *out = NULL;
    if (!spec)
        return mk_err_set(MK_EINVAL, "mk_source_open: NULL spec");
    mk_source_config_t defaults;
    mk_source_config_init(&defaults);
    int rc = check_config(cfg ? cfg : &defaults);
    if (rc)
        return rc;
    mk_source_t *s = calloc(1, sizeof *s);
    if (!s)
        return mk_err_set(MK_ENOMEM, "source: out of memory");
    s->cfg = cfg ? *cfg : defaults;
    if (!s->cfg.sys)
        s->cfg.sys = mk_v4l2_sys_default();
    s->state = MK_SOURCE_STATE_OPEN;
    s->backoff_ms = s->cfg.backoff_min_ms;
    s->info.frames = -1;

    if (!strncmp(spec, "testpattern", 11) && (spec[11] == '\0' || spec[11] == ':')) {
        int w = s->cfg.width ? s->cfg.width : TESTPATTERN_W, h = s->cfg.height ? s->cfg.height : TESTPATTERN_H;
        double fps = s->cfg.fps > 0 ? s->cfg.fps : TESTPATTERN_FPS;
        rc = spec[11] == ':' ? parse_testpattern(spec + 12, &w, &h, &fps) : 0;
        if (!rc)
            rc = mk_source_testpattern_open(s, w, h, fps);
    } else if (!strncmp(spec, "v4l2:", 5) && spec[5]) {
        rc = mk_source_v4l2_open(s, spec + 5);
    } else if (!strncmp(spec, "file:", 5) && spec[5]) {
        rc = mk_source_file_open(s, spec + 5);
    } else {
        rc = mk_err_set(MK_EINVAL, "unknown source '%s' (testpattern[:WxH[@FPS]], v4l2:/dev/videoN, file:PATH)", spec);
    }
    if (rc) {
        if (s->ops && s->impl)
            s->ops->close(s);
        free(s);
        return rc;
    }
    if (!s->cfg.realtime)
        s->pace_fps = 0;
    if (s->state == MK_SOURCE_STATE_LOST) {
        MK_INFO("source %s: waiting for the device", spec);
        *out = s;
        return 0;
    }
    MK_INFO("source %s: %s%s%s %dx%d%s, %.3g fps%s", spec, s->info.kind, s->info.card[0] ? " " : "", s->info.card,
            s->info.width, s->info.height,
            s->info.frame_kind == MK_FRAME_MJPEG ? " MJPEG" : s->info.raw_format == MK_FMT_YUYV ? " YUYV" : " RGB",
            s->info.fps, s->pace_fps > 0 ? " (paced)" : "");
    *out = s;
    return 0;
}

void mk_source_close(mk_source_t *src)
{
    if (!src)
        return;
    if (src->ops && src->impl)
        src->ops->close(src);
    free(src);
}

void mk_source_mark_lost(mk_source_t *s, const char *why)
{
    if (s->state == MK_SOURCE_STATE_LOST)
        return;
    s->state = MK_SOURCE_STATE_LOST;
    s->stats.lost++;
    s->backoff_ms = s->cfg.backoff_min_ms;
    s->next_try_ns = mk_source_now_ns() + (int64_t)s->backoff_ms * 1000000;
    s->tries_since_lost = 0;
    MK_WARN("source %s %s lost: %s", s->info.kind, s->info.path, why);
}

int mk_source_next(mk_source_t *src, int timeout_ms, mk_frame_t *frame)
{
    if (!src || !frame)
        return mk_err_set(MK_EINVAL, "mk_source_next: NULL argument");
    memset(frame, 0, sizeof *frame);
    frame->slot_ = -1;
    if (src->state == MK_SOURCE_STATE_LOST)
        return MK_SOURCE_LOST;
    if (src->state == MK_SOURCE_STATE_EOS)
        return MK_SOURCE_EOS;
    if (src->held >= src->max_held)
        return mk_err_set(MK_ESTATE, "source %s: %d frames held (the most): release one first", src->info.kind,
                          src->held);
    int64_t deadline = mk_source_deadline(timeout_ms);
    if (src->pace_fps > 0 && src->next_due_ns) {
        if (src->next_due_ns > deadline) {
            mk_source_sleep_until(deadline);
            src->stats.timeouts++;
            return MK_SOURCE_TIMEOUT;
        }
        mk_source_sleep_until(src->next_due_ns);
    }
    int rc = src->ops->next(src, mk_source_ms_left(deadline), frame);
    switch (rc) {
    case MK_SOURCE_FRAME: break;
    case MK_SOURCE_TIMEOUT: src->stats.timeouts++; return rc;
    case MK_SOURCE_EOS: src->state = MK_SOURCE_STATE_EOS; return rc;
    case MK_SOURCE_LOST: mk_source_mark_lost(src, mk_err_msg()); return rc;
    default: return rc < 0 ? rc : mk_err_set(MK_ESTATE, "source %s: unknown status %d", src->info.kind, rc);
    }
    int slot = frame->slot_;
    if (slot < 0 || slot >= MK_SOURCE_MAX_SLOTS || (src->held_mask >> slot & 1))
        return mk_err_set(MK_ESTATE, "source %s: backend handed out slot %d twice", src->info.kind, slot);
    src->held_mask |= 1ull << slot;
    src->held++;
    int64_t now = mk_source_now_ns();
    frame->seq = src->seq++;
    frame->flags |= src->pending_flags;
    src->pending_flags = 0;
    if (!frame->capture_ns)
        frame->capture_ns = now;
    src->stats.frames++;
    if (src->pace_fps > 0) {
        int64_t period = (int64_t)(1e9 / src->pace_fps);
        int64_t due = (src->next_due_ns ? src->next_due_ns : now) + period;
        src->next_due_ns = due < now ? now + period : due; /* fallen behind: restart the schedule, no burst */
    }
    return MK_SOURCE_FRAME;
}

int mk_source_release(mk_source_t *src, mk_frame_t *frame)
{
    if (!src || !frame)
        return mk_err_set(MK_EINVAL, "mk_source_release: NULL argument");
    int slot = frame->slot_;
    if (slot < 0 || slot >= MK_SOURCE_MAX_SLOTS || !(src->held_mask >> slot & 1))
        return mk_err_set(MK_EINVAL, "mk_source_release: frame %llu is not held from this source",
                          (unsigned long long)frame->seq);
    src->held_mask &= ~(1ull << slot);
    src->held--;
    frame->slot_ = -1;
    frame->data = NULL;
    frame->image.data = NULL;
    int rc = src->ops->release(src, slot);
    if (rc == MK_SOURCE_LOST && src->state == MK_SOURCE_STATE_OPEN)
        mk_source_mark_lost(src, mk_err_msg());
    return rc;
}

int mk_source_reopen(mk_source_t *src, int timeout_ms)
{
    if (!src)
        return mk_err_set(MK_EINVAL, "mk_source_reopen: NULL source");
    if (src->state == MK_SOURCE_STATE_OPEN)
        return 0;
    if (src->state == MK_SOURCE_STATE_EOS)
        return mk_err_set(MK_ESTATE, "source %s ended: nothing to reopen", src->info.kind);
    if (src->held)
        return mk_err_set(MK_ESTATE, "source %s: release the %d frames still held before reopening", src->info.kind,
                          src->held);
    int64_t deadline = mk_source_deadline(timeout_ms);
    if (src->next_try_ns > deadline) {
        mk_source_sleep_until(deadline);
        return MK_SOURCE_LOST;
    }
    mk_source_sleep_until(src->next_try_ns);
    src->stats.reopen_tries++;
    src->tries_since_lost++;
    int rc = src->ops->reopen(src);
    if (rc) {
        src->backoff_ms = src->backoff_ms > src->cfg.backoff_max_ms / 2 ? src->cfg.backoff_max_ms : 2 * src->backoff_ms;
        src->next_try_ns = mk_source_now_ns() + (int64_t)src->backoff_ms * 1000000;
        MK_LOG_RL(10000, MK_LOG_WARN, "source %s %s: reopen failed (next try in %d ms): %s", src->info.kind,
                  src->info.path, src->backoff_ms, mk_err_msg());
        return MK_SOURCE_LOST;
    }
    src->state = MK_SOURCE_STATE_OPEN;
    src->pending_flags |= MK_FRAME_F_REOPENED;
    src->next_due_ns = 0;
    src->backoff_ms = src->cfg.backoff_min_ms;
    src->stats.reopens++;
    MK_INFO("source %s %s is back (attempt %d)", src->info.kind, src->info.path, src->tries_since_lost);
    return 0;
}

mk_source_state_t mk_source_state(const mk_source_t *src)
{
    return src ? src->state : MK_SOURCE_STATE_LOST;
}

int mk_source_max_held(const mk_source_t *src)
{
    return src ? src->max_held : 0;
}

void mk_source_info(const mk_source_t *src, mk_source_info_t *info)
{
    if (src && info)
        *info = src->info;
}

void mk_source_stats(const mk_source_t *src, mk_source_stats_t *st)
{
    if (src && st)
        *st = src->stats;
}

void mk_source_control_name(const char *in, char *out, size_t n)
{
    size_t o = 0;
    int gap = 0;
    for (; *in && o + 1 < n; in++) {
        unsigned char c = (unsigned char)*in;
        if (isalnum(c)) {
            if (gap && o)
                out[o++] = '_';
            if (o + 1 < n)
                out[o++] = (char)tolower(c);
            gap = 0;
        } else {
            gap = 1;
        }
    }
    out[o] = '\0';
}

int mk_source_set_control(mk_source_t *src, const char *name, int64_t value)
{
    if (!src || !name)
        return mk_err_set(MK_EINVAL, "mk_source_set_control: NULL argument");
    if (!src->ops->set_control)
        return mk_err_set(MK_EUNSUPPORTED, "source %s has no controls (controls need a V4L2 camera)",
                          src->info.kind);
    return src->ops->set_control(src, name, value);
}

int mk_source_get_control(mk_source_t *src, const char *name, int64_t *value)
{
    if (!src || !name || !value)
        return mk_err_set(MK_EINVAL, "mk_source_get_control: NULL argument");
    if (!src->ops->get_control)
        return mk_err_set(MK_EUNSUPPORTED, "source %s has no controls (controls need a V4L2 camera)",
                          src->info.kind);
    return src->ops->get_control(src, name, value);
}

int mk_source_controls(const mk_source_t *src, const mk_source_control_t **list)
{
    if (!src || !list)
        return mk_err_set(MK_EINVAL, "mk_source_controls: NULL argument");
    *list = NULL;
    if (!src->ops->controls)
        return 0;
    return src->ops->controls(src, list);
}

/* 1 when `list` has a control whose normalised name is `norm`. */
static int names_control(const mk_cfg_control_t *list, int n, const char *norm)
{
    for (int i = 0; i < n; i++) {
        char c[sizeof list[i].name];
        mk_source_control_name(list[i].name, c, sizeof c);
        if (!strcmp(c, norm))
            return 1;
    }
    return 0;
}

static void result(mk_source_control_result_t *r, const char *name, int64_t value, int reset, int rc)
{
    snprintf(r->name, sizeof r->name, "%.*s", (int)sizeof r->name - 1, name);
    r->value = value;
    r->reset = reset;
    r->rc = rc;
    snprintf(r->error, sizeof r->error, "%s", rc ? mk_err_msg() : "");
}

_Static_assert(MK_SOURCE_APPLY_MAX >= 2 * MK_CFG_CONTROLS_MAX, "a list's controls and the previous list's");

int mk_source_apply_controls(mk_source_t *src, const char *list, const char *previous,
                             mk_source_control_result_t *res)
{
    if (!src || !list || !res)
        return mk_err_set(MK_EINVAL, "mk_source_apply_controls: NULL argument");
    mk_cfg_control_t want[MK_CFG_CONTROLS_MAX], prev[MK_CFG_CONTROLS_MAX];
    char err[256];
    int nwant = mk_cfg_controls_parse(list, want, err, sizeof err);
    if (nwant < 0)
        return mk_err_set(MK_EINVAL, "source controls \"%s\": %s", list, err);
    int nprev = previous ? mk_cfg_controls_parse(previous, prev, NULL, 0) : 0;
    if (nprev < 0)
        nprev = 0;
    int n = 0;
    /* Back to their defaults first, so that the list's values come last. */
    const mk_source_control_t *dev;
    int ndev = mk_source_controls(src, &dev);
    for (int i = 0; i < nprev; i++) {
        char norm[sizeof prev[i].name];
        mk_source_control_name(prev[i].name, norm, sizeof norm);
        if (names_control(want, nwant, norm) || names_control(prev, i, norm))
            continue;
        for (int k = 0; k < ndev; k++)
            if (!strcmp(dev[k].name, norm) && dev[k].type != V4L2_CTRL_TYPE_BUTTON &&
                !(dev[k].flags & V4L2_CTRL_FLAG_READ_ONLY)) {
                int rc = mk_source_set_control(src, dev[k].name, dev[k].def);
                result(&res[n++], dev[k].name, dev[k].def, 1, rc);
                break;
            }
    }
    for (int i = 0; i < nwant; i++) {
        int rc = mk_source_set_control(src, want[i].name, want[i].value);
        result(&res[n++], want[i].name, want[i].value, 0, rc);
    }
    return n;
}
