/* pipeline: the capture, decode-feeder and process threads of maskd, their queues, statistics and states. */
#include "pipeline.h"

#include "cut.h"
#include "decode.h"
#include "errors.h"
#include "log.h"
#include "maskbus.h"
#include "queue.h"
#include "segment.h"
#include "select.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(MK_CFG_DECODER_AUTO == (int)MK_DECODER_AUTO && MK_CFG_DECODER_CPU == (int)MK_DECODER_CPU &&
                   MK_CFG_DECODER_NVJPEG == (int)MK_DECODER_NVJPEG,
               "pipeline.decoder's values are mk_decoder_t");

/* The longest the process thread waits for a frame before it runs its housekeeping (less when the bus heartbeat
 * needs it: tick_ms). */
#define TICK_MS 50
/* Bus readers are counted this often. */
#define READERS_NS 100000000ull
/* Latency percentiles are taken over this many frames. */
#define LAT_WINDOW 1024
/* While frames are in flight and the engine could take another, the process thread looks for a new frame this
 * often (it cannot wait on the decode pool and the engine at once). */
#define POLL_MS 1
/* Failed frames (corrupt at the source or the decoder, processing errors) after which READY=1 goes out although
 * no mask was published yet. */
#define READY_AFTER_FAILURES 10

/* A frame copied out of the source (the source's buffer goes back at once). */
typedef struct {
    mk_frame_t f;
    uint8_t *data;
    size_t cap;
} capbuf_t;

/* Counters of one kind of event, for rates over the stats period. */
typedef struct {
    atomic_uint_fast64_t n;
    uint64_t at_tick; /* n at the previous snapshot (process thread) */
} counter_t;

typedef struct {
    double fps_capture, fps_decode, fps_detect, fps_process, fps_publish, dets_per_s;
    double lat_p50, lat_p90, lat_p99, lat_max;
    int lat_samples;
    double ms_detect, ms_cut, ms_publish, ms_process;
} snapshot_t;

struct mk_pipeline {
    char instance[80];
    mk_notify_t *notify;
    const mk_v4l2_sys_t *v4l2_sys;
    mk_control_t *control;
    uint64_t start_ns;

    /* configuration: written by the process thread under cfg_mu; `boot` is the configuration at creation, whose
     * restart-only options (source.*) the capture thread reads */
    pthread_mutex_t cfg_mu;
    mk_config_t cfg, boot;
    mk_opt_hooks_t *hooks;
    atomic_uint_fast64_t config_changes;

    /* hand-over of a configuration from another thread (mk_pipeline_apply) */
    pthread_mutex_t apply_mu;
    pthread_cond_t apply_cv;
    const mk_config_txn_t *apply_txn;
    int apply_taken, apply_done, apply_rc;
    char apply_msg[512]; /* the commit's error message (messages are per thread) */

    /* compute: the segmentation engine (pipeline.inflight frames at once) */
    mk_segment_t *seg;
    char model_status[600];

    /* stages */
    mk_decode_t *dec;
    mk_queue_t *capq, *freeq;
    capbuf_t *bufs;
    int nbufs;
    maskbus_writer_t *bus;
    char bus_name[96];

    /* threads */
    pthread_t th_capture, th_feed, th_process;
    int started;
    atomic_int stop;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle_cv;
    int want_idle; /* under idle_mu */

    /* state */
    pthread_mutex_t state_mu;
    mk_pipe_state_t state;
    char state_reason[300];
    atomic_int ready_sent; /* READY=1: 0 not yet, 1 went out (from the process or the capture thread), 2 failed */
    atomic_int failed;     /* the GPU context is lost: failed_why says why (set once, by the process thread) */
    char failed_why[512];

    /* source facts (capture thread writes under stats_mu) */
    char src_kind[16], src_path[256], src_card[64];
    int src_w, src_h, src_open;
    double src_fps;
    mk_source_stats_t src_total; /* of closed sources, summed */
    mk_source_stats_t src_cur;   /* of the open source */
    uint64_t src_lost_events;
    /* source.controls: the commit's hook counts changes in ctrl_gen; the capture thread applies the list at its
     * next frame boundary and describes the outcome and the device's controls in src_controls (stats
     * "source.controls", replaced under stats_mu) */
    atomic_uint ctrl_gen;
    cJSON *src_controls;

    /* counters */
    counter_t captured, decoded, det_runs, dets, processed, published;
    atomic_uint_fast64_t cap_dropped, proc_dropped, no_person, held, errors;

    /* process thread state */
    mk_decoded_t ready[16];
    int nready;
    uint64_t last_readers_ns, last_reader_seen_ns, last_publish_ns, last_tick_ns;
    atomic_uint readers_live, readers_stalled;
    double sum_detect, sum_cut, sum_publish, sum_process;
    uint64_t n_detect, n_cut, n_publish, n_process;
    uint64_t lat_ns[LAT_WINDOW];
    uint64_t lat_count;

    /* statistics (under stats_mu) */
    pthread_mutex_t stats_mu;
    snapshot_t snap;
    mk_box_t target;
    uint32_t target_track;
    mk_select_result_t target_from;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *mk_pipe_state_name(mk_pipe_state_t s)
{
    static const char *const names[] = {"starting", "running", "idle", "source-lost", "ended", "stopping"};
    return (unsigned)s <= MK_PIPE_STOPPING ? names[s] : "?";
}

/* ---- states and events ---------------------------------------------------------------------------------- */

static void publish_event(mk_pipeline_t *p, const char *event, cJSON *data)
{
    if (p->control && data)
        mk_control_publish(p->control, event, data);
    cJSON_Delete(data);
}

static void set_state(mk_pipeline_t *p, mk_pipe_state_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_state(mk_pipeline_t *p, mk_pipe_state_t st, const char *fmt, ...)
{
    char reason[300] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(reason, sizeof reason, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&p->state_mu);
    mk_pipe_state_t prev = p->state;
    int changed = prev != st && prev != MK_PIPE_STOPPING;
    if (changed) {
        p->state = st;
        snprintf(p->state_reason, sizeof p->state_reason, "%s", reason);
    }
    pthread_mutex_unlock(&p->state_mu);
    if (!changed)
        return;
    MK_LOG(st == MK_PIPE_SOURCE_LOST ? MK_LOG_WARN : MK_LOG_INFO, "state %s -> %s%s%s", mk_pipe_state_name(prev),
           mk_pipe_state_name(st), reason[0] ? ": " : "", reason);
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "state", mk_pipe_state_name(st));
    cJSON_AddStringToObject(ev, "previous", mk_pipe_state_name(prev));
    cJSON_AddStringToObject(ev, "reason", reason);
    publish_event(p, "state", ev);
}

mk_pipe_state_t mk_pipeline_state(mk_pipeline_t *p)
{
    pthread_mutex_lock(&p->state_mu);
    mk_pipe_state_t s = p->state;
    pthread_mutex_unlock(&p->state_mu);
    return s;
}

uint64_t mk_pipeline_published(mk_pipeline_t *p)
{
    return atomic_load(&p->published.n);
}

/* READY=1 with a STATUS= saying why, unless it went out already: normally after the first published mask, earlier
 * when the pipeline knows that a mask is not coming soon (the source is lost or absent, a file ended, the first
 * frames all failed), so that systemd's start does not time out on a daemon that is up. Any thread. */
static void ready_once(mk_pipeline_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ready_once(mk_pipeline_t *p, const char *fmt, ...)
{
    /* ready_sent: 0 never tried, 1 sent (or being sent), 2 a send that failed (the receiver's queue stayed full for
     * MK_NOTIFY_WAIT_MS): the later occasions try again without waiting, so that no frame waits for it twice */
    int st = p->notify ? atomic_load(&p->ready_sent) : 1;
    if (st == 1 || !atomic_compare_exchange_strong(&p->ready_sent, &st, 1))
        return;
    char status[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(status, sizeof status, fmt, ap);
    va_end(ap);
    int rc = st == 0 ? mk_notify_sendf(p->notify, "READY=1\nSTATUS=%s", status)
                     : mk_notify_sendf_nowait(p->notify, "READY=1\nSTATUS=%s", status);
    if (rc) {
        if (st == 0)
            MK_WARN("%s; READY=1 is sent again at the next occasion", mk_err_msg());
        atomic_store(&p->ready_sent, 2);
    }
}

/* ---- configuration ------------------------------------------------------------------------------------------ */

/* Apply hook of every option (process thread, under cfg_mu, after the whole change is in p->cfg). */
static void on_change(void *user, const mk_opt_t *o, const mk_config_t *cfg)
{
    mk_pipeline_t *p = user;
    char v[256];
    mk_opt_format(o, cfg, v, sizeof v);
    MK_INFO("config: %s = %s", o->name, v);
    if (!strcmp(o->name, "log.level") && !getenv("MASKD_LOG")) {
        mk_log_set_level((mk_log_level_t)cfg->log.level);
    } else if (!strcmp(o->name, "source.controls")) {
        atomic_fetch_add(&p->ctrl_gen, 1);
    }
}

void mk_pipeline_get_config(mk_pipeline_t *p, mk_config_t *out)
{
    pthread_mutex_lock(&p->cfg_mu);
    *out = p->cfg;
    pthread_mutex_unlock(&p->cfg_mu);
}

int mk_pipeline_commit(mk_pipeline_t *p, const mk_config_txn_t *txn)
{
    /* detect.classes may name the loaded detector's classes, which the option table cannot check: they are
     * resolved here, and a change that does not resolve refuses the whole transaction before anything is applied
     * (rather than being acknowledged and left out of force by the hook). */
    if (mk_config_txn_touched(txn, mk_options_index(mk_options_find("detect.classes")))) {
        int n = 0;
        const mk_detector_t *det = mk_segment_detector(p->seg);
        const char *const *names = det ? mk_detector_names(det, &n) : NULL;
        mk_class_set_t classes;
        int rc = mk_select_classes(mk_config_txn_config(txn)->detect.classes, names, n, &classes);
        if (rc)
            return rc;
    }
    pthread_mutex_lock(&p->cfg_mu);
    int rc = mk_config_txn_commit(txn, &p->cfg, p->hooks);
    pthread_mutex_unlock(&p->cfg_mu);
    if (rc > 0) {
        atomic_fetch_add(&p->config_changes, (uint64_t)rc);
        /* the frames submitted from now on segment with it (a new cut.method once the ones in flight are done) */
        int src = mk_segment_set_config(p->seg, &p->cfg);
        if (src)
            MK_WARN("segmentation keeps its configuration: %s", mk_err_msg());
    }
    return rc;
}

int mk_pipeline_apply(mk_pipeline_t *p, const mk_config_txn_t *txn, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->apply_mu);
    int timed_out = 0;
    while (p->apply_txn && !timed_out) /* another hand-over is under way */
        timed_out = pthread_cond_timedwait(&p->apply_cv, &p->apply_mu, &dl) == ETIMEDOUT;
    if (timed_out) {
        pthread_mutex_unlock(&p->apply_mu);
        return mk_err_set(MK_ESTATE, "busy: another configuration change is being applied");
    }
    p->apply_txn = txn;
    p->apply_taken = p->apply_done = 0;
    while (!p->apply_done && !timed_out && !atomic_load(&p->stop))
        timed_out = pthread_cond_timedwait(&p->apply_cv, &p->apply_mu, &dl) == ETIMEDOUT;
    while (!p->apply_done && p->apply_taken) /* being committed now: that is quick */
        pthread_cond_wait(&p->apply_cv, &p->apply_mu);
    int rc;
    if (!p->apply_done)
        rc = mk_err_set(MK_ESTATE, "busy: the pipeline did not reach a frame boundary in %d ms", timeout_ms);
    else if (p->apply_rc < 0) /* the commit's message, on this thread */
        rc = mk_err_set(p->apply_rc, "%s", p->apply_msg);
    else
        rc = p->apply_rc;
    p->apply_txn = NULL;
    pthread_cond_broadcast(&p->apply_cv);
    pthread_mutex_unlock(&p->apply_mu);
    return rc;
}

/* Process thread: commits a configuration handed over by mk_pipeline_apply. */
static void take_apply(mk_pipeline_t *p)
{
    pthread_mutex_lock(&p->apply_mu);
    const mk_config_txn_t *t = p->apply_txn && !p->apply_taken && !p->apply_done ? p->apply_txn : NULL;
    if (t)
        p->apply_taken = 1;
    pthread_mutex_unlock(&p->apply_mu);
    if (!t)
        return;
    mk_err_clear();
    int rc = mk_pipeline_commit(p, t);
    pthread_mutex_lock(&p->apply_mu);
    p->apply_rc = rc;
    if (rc < 0)
        snprintf(p->apply_msg, sizeof p->apply_msg, "%s", mk_err_msg()[0] ? mk_err_msg() : mk_err_str(rc));
    p->apply_done = 1;
    p->apply_taken = 0;
    pthread_cond_broadcast(&p->apply_cv);
    pthread_mutex_unlock(&p->apply_mu);
}

/* ---- capture thread ------------------------------------------------------------------------------------------ */

static void source_config(const mk_config_t *cfg, mk_source_config_t *sc)
{
    mk_source_config_init(sc);
    sc->width = cfg->source.size.w;
    sc->height = cfg->source.size.h;
    sc->fps = cfg->source.fps;
    sc->pixfmt = cfg->source.format == MK_CFG_FORMAT_MJPEG  ? MK_PIXFMT_MJPEG
                 : cfg->source.format == MK_CFG_FORMAT_YUYV ? MK_PIXFMT_YUYV
                                                            : MK_PIXFMT_AUTO;
    sc->loop = cfg->source.loop;
    sc->realtime = cfg->source.realtime;
    sc->lost_ms = cfg->source.timeout_ms;
    sc->backoff_max_ms = cfg->source.retry_max_ms;
    sc->wait_for_device = 1;
}

/* 1 when a file: spec names an MJPEG AVI or a Y4M file: those carry their own frame rate, which source.fps
 * (meant for JPEG directories and raw streams) does not override. Regular files only, opened without waiting (an
 * open() of a FIFO blocks until a writer comes; the source then refuses it). */
static int file_has_rate(const char *spec)
{
    if (strncmp(spec, "file:", 5))
        return 0;
    int fd = open(spec + 5, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    unsigned char h[12] = {0};
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, h, sizeof h, 0) : 0;
    close(fd);
    return (n == 12 && !memcmp(h, "RIFF", 4) && !memcmp(h + 8, "AVI ", 4)) || (n >= 9 && !memcmp(h, "YUV4MPEG2", 9));
}

static int open_source(mk_pipeline_t *p, mk_source_t **out)
{
    mk_source_config_t sc;
    source_config(&p->boot, &sc);
    sc.sys = p->v4l2_sys;
    if (file_has_rate(p->boot.source.spec))
        sc.fps = 0;
    int rc = mk_source_open(p->boot.source.spec, &sc, out);
    if (rc)
        return rc;
    mk_source_info_t info;
    mk_source_info(*out, &info);
    pthread_mutex_lock(&p->stats_mu);
    snprintf(p->src_kind, sizeof p->src_kind, "%s", info.kind);
    snprintf(p->src_path, sizeof p->src_path, "%s", info.path);
    snprintf(p->src_card, sizeof p->src_card, "%s", info.card);
    p->src_w = info.width;
    p->src_h = info.height;
    p->src_fps = info.fps;
    p->src_open = 1;
    memset(&p->src_cur, 0, sizeof p->src_cur);
    pthread_mutex_unlock(&p->stats_mu);
    return 0;
}

static void close_source(mk_pipeline_t *p, mk_source_t **src)
{
    if (!*src)
        return;
    mk_source_stats_t st;
    mk_source_stats(*src, &st);
    mk_source_close(*src);
    *src = NULL;
    pthread_mutex_lock(&p->stats_mu);
    uint64_t *t = (uint64_t *)&p->src_total;
    const uint64_t *c = (const uint64_t *)&st;
    for (size_t i = 0; i < sizeof st / sizeof(uint64_t); i++)
        t[i] += c[i];
    memset(&p->src_cur, 0, sizeof p->src_cur);
    p->src_open = 0;
    pthread_mutex_unlock(&p->stats_mu);
}

static void note_source_stats(mk_pipeline_t *p, mk_source_t *src)
{
    pthread_mutex_lock(&p->stats_mu);
    mk_source_stats(src, &p->src_cur);
    pthread_mutex_unlock(&p->stats_mu);
}

static void note_lost(mk_pipeline_t *p, const char *why)
{
    if (mk_pipeline_state(p) != MK_PIPE_SOURCE_LOST) {
        pthread_mutex_lock(&p->stats_mu);
        p->src_lost_events++;
        pthread_mutex_unlock(&p->stats_mu);
    }
    set_state(p, MK_PIPE_SOURCE_LOST, "%s", why);
    /* Before the first mask, systemd is told that maskd is up and waiting for its source, so that a camera
     * that is absent at boot does not fail the unit. */
    ready_once(p, "waiting for the source: %.200s", why);
}

/* The stats object "source.controls" with nothing in it yet. */
static cJSON *controls_stats(void)
{
    cJSON *c = cJSON_CreateObject();
    if (c && (!cJSON_AddObjectToObject(c, "applied") || !cJSON_AddArrayToObject(c, "errors") ||
              !cJSON_AddArrayToObject(c, "available"))) {
        cJSON_Delete(c);
        return NULL;
    }
    return c;
}

/* Capture thread: applies source.controls to the open source after a change of the option or a fresh open; logs
 * each control applied or refused (on a source without controls once per list: they need a V4L2 camera);
 * describes the outcome and the device's controls (range, default, current value) for stats. `prev` holds the
 * list applied before and receives this one. Returns 1 when the device vanished meanwhile (apply again once it is
 * back), else 0. */
static int apply_controls(mk_pipeline_t *p, mk_source_t *src, char *prev, size_t prev_size)
{
    char list[MK_CFG_STR_MAX];
    pthread_mutex_lock(&p->cfg_mu);
    snprintf(list, sizeof list, "%s", p->cfg.source.controls);
    pthread_mutex_unlock(&p->cfg_mu);
    mk_source_control_result_t r[MK_SOURCE_APPLY_MAX];
    int n = mk_source_apply_controls(src, list, prev, r);
    if (n < 0) { /* the option's check makes this impossible */
        MK_ERROR("source.controls: %s", mk_err_msg());
        n = 0;
    }
    int new_list = strcmp(list, prev) != 0, vanished = 0;
    snprintf(prev, prev_size, "%s", list);
    cJSON *c = controls_stats();
    cJSON *applied = cJSON_GetObjectItem(c, "applied"), *errors = cJSON_GetObjectItem(c, "errors");
    cJSON *avail = cJSON_GetObjectItem(c, "available");
    for (int i = 0; i < n; i++) {
        const mk_source_control_result_t *x = &r[i];
        vanished |= x->rc == MK_ENODEV;
        if (x->rc == MK_EUNSUPPORTED) {
            if (new_list && i == 0)
                MK_WARN("source.controls: %s: not applied", x->error);
        } else if (x->rc) {
            MK_WARN("source.controls: %s", x->error);
        } else {
            MK_INFO("source.controls: %s = %lld%s", x->name, (long long)x->value,
                    x->reset ? " (its default: no longer in the list)" : "");
        }
        if (x->rc && errors) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "control", x->name);
            cJSON_AddNumberToObject(e, "value", (double)x->value);
            cJSON_AddStringToObject(e, "error", x->error);
            cJSON_AddItemToArray(errors, e);
        } else if (!x->reset) {
            cJSON_AddNumberToObject(applied, x->name, (double)x->value);
        }
    }
    const mk_source_control_t *dev;
    int ndev = mk_source_controls(src, &dev);
    for (int k = 0; avail && k < ndev; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", dev[k].name);
        cJSON_AddNumberToObject(o, "min", (double)dev[k].min);
        cJSON_AddNumberToObject(o, "max", (double)dev[k].max);
        cJSON_AddNumberToObject(o, "step", (double)dev[k].step);
        cJSON_AddNumberToObject(o, "default", (double)dev[k].def);
        int64_t cur;
        if (mk_source_get_control(src, dev[k].name, &cur) == 0)
            cJSON_AddNumberToObject(o, "current", (double)cur);
        cJSON_AddItemToArray(avail, o);
    }
    pthread_mutex_lock(&p->stats_mu);
    cJSON_Delete(p->src_controls);
    p->src_controls = c;
    pthread_mutex_unlock(&p->stats_mu);
    return vanished;
}

/* Sleeps up to ms, returning early on stop or a change of the idle request. */
static void capture_wait(mk_pipeline_t *p, int ms, int idle_now)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->idle_mu);
    while (!atomic_load(&p->stop) && p->want_idle == idle_now)
        if (pthread_cond_timedwait(&p->idle_cv, &p->idle_mu, &dl) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&p->idle_mu);
}

static int want_idle(mk_pipeline_t *p)
{
    pthread_mutex_lock(&p->idle_mu);
    int w = p->want_idle;
    pthread_mutex_unlock(&p->idle_mu);
    return w;
}

/* Copies a source frame into a capture buffer. */
static int copy_frame(capbuf_t *b, const mk_frame_t *f)
{
    size_t need = f->len;
    size_t row = 0;
    if (f->kind == MK_FRAME_RAW) {
        row = mk_image_row_bytes(&f->image);
        need = row * (size_t)f->image.height;
    }
    if (need > b->cap) {
        uint8_t *n = realloc(b->data, need);
        if (!n)
            return mk_err_set(MK_ENOMEM, "capture: cannot hold a %zu-byte frame", need);
        b->data = n;
        b->cap = need;
    }
    b->f = *f;
    if (f->kind == MK_FRAME_RAW) {
        for (int y = 0; y < f->image.height; y++)
            memcpy(b->data + (size_t)y * row, mk_image_row(&f->image, 0, y), row);
        b->f.image.data = b->data;
        b->f.image.pitch = row;
        b->f.image.owned = 0;
    } else {
        memcpy(b->data, f->data, f->len);
        b->f.data = b->data;
    }
    return 0;
}

/* The next wait before opening the source afresh: 100 ms, doubling up to source.retry_max_ms. */
static int next_backoff(const mk_pipeline_t *p, int backoff_ms)
{
    backoff_ms = backoff_ms ? backoff_ms * 2 : 100;
    return backoff_ms > p->boot.source.retry_max_ms ? p->boot.source.retry_max_ms : backoff_ms;
}

/* The backoff between fresh opens is reset by a delivered frame, not by an open that succeeds: a source that opens
 * but yields nothing (a looping file without a readable frame) is retried no faster than one that cannot open. */
static void *capture_main(void *arg)
{
    mk_pipeline_t *p = arg;
    mk_source_t *src = NULL;
    int backoff_ms = 0;
    char ctrl_prev[MK_CFG_STR_MAX] = ""; /* source.controls as last applied */
    unsigned ctrl_done = 0;              /* the ctrl_gen applied */
    int ctrl_due = 0;                    /* the source (opened afresh, or back) needs its controls */
    while (!atomic_load(&p->stop)) {
        if (want_idle(p)) {
            close_source(p, &src);
            set_state(p, MK_PIPE_IDLE, "no bus reader: source closed");
            capture_wait(p, 200, 1);
            continue;
        }
        if (!src) {
            if (open_source(p, &src)) {
                char why[400];
                snprintf(why, sizeof why, "%s", mk_err_msg());
                note_lost(p, why);
                backoff_ms = next_backoff(p, backoff_ms);
                MK_LOG_RL(10000, MK_LOG_WARN, "cannot open the source (%s); retrying every %d ms", why, backoff_ms);
                capture_wait(p, backoff_ms, 0);
                continue;
            }
            ctrl_due = 1;
        }
        unsigned gen = atomic_load(&p->ctrl_gen);
        if ((ctrl_due || gen != ctrl_done) && mk_source_state(src) == MK_SOURCE_STATE_OPEN) {
            ctrl_due = apply_controls(p, src, ctrl_prev, sizeof ctrl_prev);
            ctrl_done = gen;
        }
        mk_frame_t f;
        int rc = mk_source_next(src, 100, &f);
        if (rc == MK_SOURCE_FRAME) {
            backoff_ms = 0;
            void *item = NULL, *dropped = NULL;
            if (mk_queue_pop(p->freeq, 0, &item) != MK_QUEUE_ITEM) {
                /* Cannot happen (there is a buffer for every place a frame can be); drop the frame. */
                atomic_fetch_add(&p->cap_dropped, 1);
            } else if (copy_frame(item, &f)) {
                MK_LOG_RL(5000, MK_LOG_ERROR, "%s", mk_err_msg());
                mk_queue_push(p->freeq, item, &dropped);
            } else {
                mk_queue_push(p->capq, item, &dropped);
                atomic_fetch_add(&p->captured.n, 1);
                if (dropped) {
                    atomic_fetch_add(&p->cap_dropped, 1);
                    void *none;
                    mk_queue_push(p->freeq, dropped, &none);
                }
            }
            int lost = mk_source_release(src, &f) == MK_SOURCE_LOST;
            note_source_stats(p, src);
            mk_pipe_state_t st = mk_pipeline_state(p);
            if (st != MK_PIPE_RUNNING && !lost)
                set_state(p, MK_PIPE_RUNNING, "%s delivers frames", p->boot.source.spec);
            if (!lost)
                continue;
            rc = MK_SOURCE_LOST;
        }
        if (rc == MK_SOURCE_TIMEOUT)
            continue;
        if (rc == MK_SOURCE_LOST) {
            char why[400];
            snprintf(why, sizeof why, "%s", mk_err_msg()[0] ? mk_err_msg() : "the device vanished");
            note_lost(p, why);
            while (!atomic_load(&p->stop) && !want_idle(p)) {
                int r = mk_source_reopen(src, 100);
                if (r == MK_SOURCE_FRAME)
                    break;
                if (r < 0) { /* cannot be reopened in place: open it afresh */
                    MK_WARN("reopening the source: %s", mk_err_msg());
                    close_source(p, &src);
                    break;
                }
            }
            if (src)
                note_source_stats(p, src);
            continue;
        }
        if (rc == MK_SOURCE_EOS && !p->boot.source.loop) {
            close_source(p, &src);
            set_state(p, MK_PIPE_ENDED, "%s ended (source.loop is off)", p->boot.source.spec);
            ready_once(p, "ended: %.300s ended (source.loop is off)", p->boot.source.spec);
            while (!atomic_load(&p->stop))
                capture_wait(p, 1000, want_idle(p));
            break;
        }
        /* An error, or a looping file that has no frame left (deleted, emptied): lost; open it afresh. */
        char why[400];
        snprintf(why, sizeof why, "%s",
                 rc == MK_SOURCE_EOS ? "the file has no readable frame left" : mk_err_msg());
        close_source(p, &src);
        note_lost(p, why);
        backoff_ms = next_backoff(p, backoff_ms);
        MK_LOG_RL(10000, MK_LOG_WARN, "source: %s; opening it again in %d ms", why, backoff_ms);
        capture_wait(p, backoff_ms, 0);
    }
    close_source(p, &src);
    mk_queue_close(p->capq);
    return NULL;
}

/* ---- decode feeder --------------------------------------------------------------------------------------- */

static void *feed_main(void *arg)
{
    mk_pipeline_t *p = arg;
    while (!atomic_load(&p->stop)) {
        void *item, *none;
        int rc = mk_queue_pop(p->capq, 100, &item);
        if (rc == MK_QUEUE_CLOSED)
            break;
        if (rc != MK_QUEUE_ITEM)
            continue;
        capbuf_t *b = item;
        do
            rc = mk_decode_submit(p->dec, &b->f, 100);
        while (rc == MK_DECODE_AGAIN && !atomic_load(&p->stop));
        if (rc < 0)
            MK_LOG_RL(5000, MK_LOG_ERROR, "decode: %s", mk_err_msg());
        mk_queue_push(p->freeq, b, &none);
    }
    return NULL;
}

/* ---- process thread ------------------------------------------------------------------------------------------ */

/* Refreshes the bus heartbeat when nothing was published for half its period. Readers take a writer whose
 * heartbeat is older than twice the period for dead, so this runs at every frame boundary, at least every half
 * period while no frame comes (tick_ms) and after the detector, the stage that may take long. */
static void heartbeat(mk_pipeline_t *p)
{
    uint64_t now = now_ns();
    if (now - p->last_publish_ns > (uint64_t)p->cfg.bus.heartbeat_ms * 500000u) {
        maskbus_writer_heartbeat(p->bus);
        p->last_publish_ns = now;
    }
}

/* The longest the process thread may wait for a frame: TICK_MS, or half the heartbeat period when that is less. */
static int tick_ms(const mk_pipeline_t *p)
{
    int half = p->cfg.bus.heartbeat_ms / 2;
    return half < 1 ? 1 : half < TICK_MS ? half : TICK_MS;
}

/* The "detections" event of a frame the detector ran on. */
static void detections_event(mk_pipeline_t *p, const mk_segment_result_t *r)
{
    if (!p->control)
        return;
    cJSON *ev = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(ev, "detections");
    cJSON_AddNumberToObject(ev, "frame", (double)r->index);
    for (int i = 0; i < r->ndets; i++) {
        const mk_detection_t *d = &r->dets[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "class", d->class_id);
        cJSON_AddNumberToObject(o, "score", round(d->prob * 1e4) / 1e4);
        cJSON_AddNumberToObject(o, "x", round(d->x * 10) / 10);
        cJSON_AddNumberToObject(o, "y", round(d->y * 10) / 10);
        cJSON_AddNumberToObject(o, "w", round(d->w * 10) / 10);
        cJSON_AddNumberToObject(o, "h", round(d->h * 10) / 10);
        cJSON_AddItemToArray(arr, o);
    }
    publish_event(p, "detections", ev);
}

/* The detector's part of a segmented frame: counters, the event, a detector switched off. */
static void note_detection(mk_pipeline_t *p, const mk_segment_result_t *r)
{
    if (r->detector_off) {
        pthread_mutex_lock(&p->stats_mu);
        snprintf(p->model_status, sizeof p->model_status, "failed: %s", r->det_err);
        pthread_mutex_unlock(&p->stats_mu);
    }
    if (!r->detected)
        return;
    if (r->det_rc)
        atomic_fetch_add(&p->errors, 1);
    p->sum_detect += r->ms.detect;
    p->n_detect++;
    atomic_fetch_add(&p->det_runs.n, 1);
    atomic_fetch_add(&p->dets.n, (uint64_t)r->ndets);
    detections_event(p, r);
}

/* Publishes a segmented frame on the bus. */
static int publish_frame(mk_pipeline_t *p, const mk_segment_result_t *r)
{
    uint64_t t_pub = now_ns();
    maskbus_frame_in_t fr;
    maskbus_detection_t bd[MASKBUS_MAX_DETECTIONS];
    mk_segment_bus_frame(r, &fr, bd);
    if (maskbus_writer_publish(p->bus, &fr) < 0)
        return mk_err_set(MK_EIO, "publishing on the bus: %s", maskbus_writer_error(p->bus));
    uint64_t done = now_ns();
    double pub_ms = (double)(done - t_pub) / 1e6;
    p->last_publish_ns = done;
    p->sum_publish += r->ms.download + pub_ms;
    p->n_publish++;
    p->sum_process += r->ms.total + pub_ms;
    p->n_process++;
    p->lat_ns[p->lat_count++ % LAT_WINDOW] = done - (uint64_t)r->capture_ns;
    atomic_fetch_add(&p->published.n, 1);
    return 0;
}

/* After a failed frame: when the failure left the process's GPU context unusable (mk_gpu_lost), no later frame
 * can succeed in this process, so the pipeline fails for good (once): the reason is logged and sent as STATUS=,
 * and SIGTERM goes to the process, whose main thread stops the pipeline and exits with a failure status, so that
 * the service manager (Restart=on-failure) starts a fresh process with a new context. */
static void check_gpu_lost(mk_pipeline_t *p)
{
    char why[400];
    if (atomic_load(&p->failed) || !mk_gpu_lost(why, sizeof why))
        return;
    snprintf(p->failed_why, sizeof p->failed_why, "the GPU context was lost: %s", why);
    atomic_store(&p->failed, 1);
    MK_ERROR("%s; no frame can be processed in this process any more: exiting with a failure status (systemd "
             "restarts maskd)",
             p->failed_why);
    mk_notify_sendf(p->notify, "STATUS=failed: %.900s", p->failed_why);
    kill(getpid(), SIGTERM);
}

int mk_pipeline_failed(mk_pipeline_t *p, char *why, size_t why_len)
{
    if (!p || !atomic_load(&p->failed))
        return 0;
    if (why && why_len)
        snprintf(why, why_len, "%s", p->failed_why);
    return 1;
}

/* A segmented frame: its counters, then the bus. */
static void finish_frame(mk_pipeline_t *p, mk_segment_result_t *r)
{
    note_detection(p, r);
    atomic_fetch_add(&p->processed.n, 1);
    int rc = r->rc;
    if (!rc) {
        if (r->flags & MASKBUS_FLAG_NO_PERSON)
            atomic_fetch_add(&p->no_person, 1);
        else if (r->select == MK_SELECT_HELD)
            atomic_fetch_add(&p->held, 1);
        p->sum_cut += r->ms.cut + r->ms.guided;
        p->n_cut++;
        rc = publish_frame(p, r);
    } else {
        mk_err_set(rc, "%s", r->err);
    }
    if (rc) {
        atomic_fetch_add(&p->errors, 1);
        MK_LOG_RL(5000, MK_LOG_ERROR, "frame %llu: %s", (unsigned long long)r->seq, mk_err_msg());
        check_gpu_lost(p);
    } else {
        pthread_mutex_lock(&p->stats_mu);
        p->target = r->box;
        p->target_track = r->track;
        p->target_from = r->select;
        pthread_mutex_unlock(&p->stats_mu);
        ready_once(p, "running: first mask published (%dx%d)", r->width, r->height);
    }
    mk_decoded_t d = r->decoded;
    mk_segment_release(p->seg, r);
    mk_decode_release(p->dec, &d);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double rate(counter_t *c, double dt)
{
    uint64_t n = atomic_load(&c->n);
    double r = dt > 0 ? (double)(n - c->at_tick) / dt : 0;
    c->at_tick = n;
    return r;
}

/* Once per stats period: the snapshot, the "stats" event and STATUS=. */
static void stats_tick(mk_pipeline_t *p, uint64_t now)
{
    double dt = (double)(now - p->last_tick_ns) / 1e9;
    p->last_tick_ns = now;
    mk_decode_stats_t ds;
    mk_decode_stats(p->dec, &ds);
    atomic_store(&p->decoded.n, ds.decoded + ds.passed);
    snapshot_t s;
    memset(&s, 0, sizeof s);
    s.fps_capture = rate(&p->captured, dt);
    s.fps_decode = rate(&p->decoded, dt);
    s.fps_detect = rate(&p->det_runs, dt);
    s.dets_per_s = rate(&p->dets, dt);
    s.fps_process = rate(&p->processed, dt);
    s.fps_publish = rate(&p->published, dt);
    int n = p->lat_count < LAT_WINDOW ? (int)p->lat_count : LAT_WINDOW;
    if (n > 0) {
        uint64_t sorted[LAT_WINDOW];
        memcpy(sorted, p->lat_ns, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_u64);
        s.lat_p50 = (double)sorted[(n - 1) * 50 / 100] / 1e6;
        s.lat_p90 = (double)sorted[(n - 1) * 90 / 100] / 1e6;
        s.lat_p99 = (double)sorted[(n - 1) * 99 / 100] / 1e6;
        s.lat_max = (double)sorted[n - 1] / 1e6;
    }
    s.lat_samples = n;
    s.ms_detect = p->n_detect ? p->sum_detect / (double)p->n_detect : 0;
    s.ms_cut = p->n_cut ? p->sum_cut / (double)p->n_cut : 0;
    s.ms_publish = p->n_publish ? p->sum_publish / (double)p->n_publish : 0;
    s.ms_process = p->n_process ? p->sum_process / (double)p->n_process : 0;
    p->sum_detect = p->sum_cut = p->sum_publish = p->sum_process = 0;
    p->n_detect = p->n_cut = p->n_publish = p->n_process = 0;
    pthread_mutex_lock(&p->stats_mu);
    p->snap = s;
    pthread_mutex_unlock(&p->stats_mu);

    if (p->control)
        publish_event(p, "stats", mk_pipeline_stats(p));
    if (p->notify) {
        unsigned live = atomic_load(&p->readers_live), stalled = atomic_load(&p->readers_stalled);
        mk_notify_sendf_nowait(p->notify, "STATUS=%s: %.1f fps, %u reader%s (%u stalled), latency p50 %.1f ms",
                               mk_pipe_state_name(mk_pipeline_state(p)), s.fps_publish, live, live == 1 ? "" : "s",
                               stalled, s.lat_p50);
    }
}

/* READY=1 when the first READY_AFTER_FAILURES frames all failed: without a published mask every failure so far is
 * one of an unbroken run from the start. */
static void ready_if_failing(mk_pipeline_t *p)
{
    if (!p->notify || atomic_load(&p->ready_sent) == 1)
        return;
    mk_decode_stats_t ds;
    mk_decode_stats(p->dec, &ds);
    pthread_mutex_lock(&p->stats_mu);
    uint64_t src = p->src_total.corrupt + p->src_cur.corrupt;
    pthread_mutex_unlock(&p->stats_mu);
    uint64_t errors = atomic_load(&p->errors), failed = src + ds.corrupt + errors;
    if (failed >= READY_AFTER_FAILURES)
        ready_once(p,
                   "no mask yet: the first %llu frames failed (%llu corrupt at the source, %llu at the decoder, %llu "
                   "processing errors); still trying",
                   (unsigned long long)failed, (unsigned long long)src, (unsigned long long)ds.corrupt,
                   (unsigned long long)errors);
}

/* The housekeeping of a frame boundary. */
static void boundary(mk_pipeline_t *p)
{
    if (p->control)
        mk_control_apply_pending(p->control);
    /* the source's state on the bus too, so that readers know why frames stop (only this thread touches the bus) */
    static const uint32_t bus_state[] = {
        [MK_PIPE_STARTING] = MASKBUS_SOURCE_UNKNOWN, [MK_PIPE_RUNNING] = MASKBUS_SOURCE_STREAMING,
        [MK_PIPE_IDLE] = MASKBUS_SOURCE_IDLE,        [MK_PIPE_SOURCE_LOST] = MASKBUS_SOURCE_LOST,
        [MK_PIPE_ENDED] = MASKBUS_SOURCE_ENDED,      [MK_PIPE_STOPPING] = MASKBUS_SOURCE_UNKNOWN};
    mk_pipe_state_t now_state = mk_pipeline_state(p);
    if ((unsigned)now_state < sizeof bus_state / sizeof bus_state[0] && now_state != MK_PIPE_STOPPING)
        maskbus_writer_set_source_state(p->bus, bus_state[now_state]);
    take_apply(p);
    ready_if_failing(p);
    mk_notify_watchdog(p->notify);
    heartbeat(p);
    uint64_t now = now_ns();
    const mk_config_t *cfg = &p->cfg;
    if (now - p->last_readers_ns >= READERS_NS) {
        p->last_readers_ns = now;
        unsigned live = 0, stalled = 0;
        if (maskbus_writer_readers(p->bus, &live, &stalled) == MASKBUS_OK) {
            atomic_store(&p->readers_live, live);
            atomic_store(&p->readers_stalled, stalled);
        }
        if (live)
            p->last_reader_seen_ns = now;
        pthread_mutex_lock(&p->idle_mu);
        int was = p->want_idle;
        if (!cfg->idle.enable || live)
            p->want_idle = 0;
        else if (now - p->last_reader_seen_ns >= (uint64_t)cfg->idle.timeout_s * 1000000000u)
            p->want_idle = 1;
        if (was != p->want_idle) {
            MK_INFO("%s", p->want_idle ? "no bus reader: going idle" : "a bus reader attached: resuming capture");
            pthread_cond_broadcast(&p->idle_cv);
        }
        pthread_mutex_unlock(&p->idle_mu);
    }
    if (now - p->last_tick_ns >= (uint64_t)cfg->control.stats_period_ms * 1000000u)
        stats_tick(p, now);
}

/* The next frame to process, keeping at most queue_depth ready ones (older ones are dropped). 1 when *out was
 * filled. */
static int next_frame(mk_pipeline_t *p, int wait_ms, mk_decoded_t *out)
{
    int depth = p->cfg.pipeline.queue_depth;
    mk_decoded_t d;
    for (;;) {
        int rc = mk_decode_next(p->dec, p->nready ? 0 : wait_ms, &d);
        if (rc != MK_DECODE_OK)
            break;
        if (p->nready == depth) {
            mk_decode_release(p->dec, &p->ready[0]);
            memmove(&p->ready[0], &p->ready[1], (size_t)(depth - 1) * sizeof p->ready[0]);
            p->nready--;
            atomic_fetch_add(&p->proc_dropped, 1);
        }
        p->ready[p->nready++] = d;
        wait_ms = 0;
    }
    if (!p->nready)
        return 0;
    *out = p->ready[0];
    memmove(&p->ready[0], &p->ready[1], (size_t)(p->nready - 1) * sizeof p->ready[0]);
    p->nready--;
    return 1;
}

/* Collects the next segmented frame (waiting up to wait_ms) and finishes it. 1 when one was finished. */
static int collect(mk_pipeline_t *p, int wait_ms)
{
    mk_segment_result_t *r;
    if (mk_segment_collect(p->seg, wait_ms, &r) != MK_SEGMENT_OK)
        return 0;
    finish_frame(p, r);
    heartbeat(p);
    return 1;
}

static void *process_main(void *arg)
{
    mk_pipeline_t *p = arg;
    while (!atomic_load(&p->stop)) {
        boundary(p);
        int pending = mk_segment_pending(p->seg), room = pending < mk_segment_depth(p->seg);
        mk_decoded_t d;
        if (room && next_frame(p, pending ? 0 : tick_ms(p), &d)) {
            /* a slot is free (room), so this does not wait */
            int rc = mk_segment_submit_decoded(p->seg, &d, 0);
            if (rc != MK_SEGMENT_OK) {
                atomic_fetch_add(&p->processed.n, 1);
                atomic_fetch_add(&p->errors, 1);
                MK_LOG_RL(5000, MK_LOG_ERROR, "frame %llu: %s", (unsigned long long)d.seq,
                          rc < 0 ? mk_err_msg() : "no free segmentation slot");
                mk_decode_release(p->dec, &d);
                check_gpu_lost(p);
            }
            continue;
        }
        if (pending)
            collect(p, room ? POLL_MS : tick_ms(p));
    }
    /* the frames in flight are finished and published */
    while (collect(p, -1))
        ;
    while (p->nready)
        mk_decode_release(p->dec, &p->ready[--p->nready]);
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------------------------------------- */

static int bus_gid(const char *group, gid_t *gid)
{
    *gid = (gid_t)-1;
    if (!group[0])
        return 0;
    if (strspn(group, "0123456789") == strlen(group)) {
        *gid = (gid_t)strtoul(group, NULL, 10);
        return 0;
    }
    char buf[4096];
    struct group gr, *res = NULL;
    int e = getgrnam_r(group, &gr, buf, sizeof buf, &res);
    if (e || !res)
        return mk_err_set(MK_EINVAL, "bus.group: no group '%s'%s%s", group, e ? ": " : "", e ? strerror(e) : "");
    *gid = res->gr_gid;
    return 0;
}

static int open_bus(mk_pipeline_t *p)
{
    const mk_config_t *cfg = &p->cfg;
    maskbus_writer_opts_t o;
    maskbus_writer_opts_default(&o);
    o.max_width = (uint32_t)cfg->source.size.w;
    o.max_height = (uint32_t)cfg->source.size.h;
    o.planes = 1u << MASKBUS_PLANE_MASK;
    if (cfg->mask.alpha)
        o.planes |= 1u << MASKBUS_PLANE_ALPHA;
    if (cfg->bus.frame)
        o.planes |= 1u << MASKBUS_PLANE_FRAME;
    o.slots = (uint32_t)cfg->bus.slots;
    if (o.slots > MASKBUS_MAX_SLOTS) {
        MK_WARN("bus.slots %u: the bus holds at most %u slots; using %u", o.slots, MASKBUS_MAX_SLOTS,
                MASKBUS_MAX_SLOTS);
        o.slots = MASKBUS_MAX_SLOTS;
    }
    o.mode = (uint32_t)cfg->bus.mode;
    o.heartbeat_period_ns = (uint64_t)cfg->bus.heartbeat_ms * 1000000u;
    int rc = bus_gid(cfg->bus.group, &o.gid);
    if (rc)
        return rc;
    char err[256];
    if ((rc = maskbus_writer_open(p->instance, &o, &p->bus, err, sizeof err)) != MASKBUS_OK)
        return mk_err_set(MK_EIO, "frame bus %s: %s", p->bus_name, err);
    return 0;
}

int mk_pipeline_create(const mk_pipeline_opts_t *opts, const mk_config_t *cfg, mk_pipeline_t **out)
{
    *out = NULL;
    mk_pipeline_t *p = calloc(1, sizeof *p);
    if (!p)
        return mk_err_set(MK_ENOMEM, "out of memory");
    snprintf(p->instance, sizeof p->instance, "%s", opts->instance);
    p->notify = opts->notify;
    p->v4l2_sys = opts->v4l2_sys;
    p->cfg = *cfg;
    p->boot = *cfg;
    p->start_ns = now_ns();
    p->state = MK_PIPE_STARTING;
    pthread_mutex_init(&p->cfg_mu, NULL);
    pthread_mutex_init(&p->apply_mu, NULL);
    pthread_mutex_init(&p->idle_mu, NULL);
    pthread_mutex_init(&p->state_mu, NULL);
    pthread_mutex_init(&p->stats_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->apply_cv, &ca);
    pthread_cond_init(&p->idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(p->bus_name, sizeof p->bus_name, "%s%s", MASKBUS_NAME_PREFIX, p->instance);

    int rc = 0;
    if (!(p->hooks = mk_opt_hooks_new()) || mk_opt_hooks_set(p->hooks, "*", on_change, p))
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc)
        rc = mk_segment_create(cfg, &p->seg);
    if (!rc) {
        const mk_detector_t *det = mk_segment_detector(p->seg);
        if (det) {
            int nw, nh, classes;
            mk_detector_info(det, &nw, &nh, &classes);
            snprintf(p->model_status, sizeof p->model_status, "loaded: %dx%d input, %d classes, %.2f BFLOPs", nw,
                     nh, classes, mk_detector_flops(det) / 1e9);
        } else {
            snprintf(p->model_status, sizeof p->model_status,
                     "none: no detect.cfg/detect.weights configured, segmenting select.fallback");
        }
    }
    if (!rc && !(p->src_controls = controls_stats()))
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    mk_decode_config_t dc;
    mk_decode_config_init(&dc);
    dc.threads = cfg->pipeline.decode_threads;
    dc.depth = 2 * dc.threads + cfg->pipeline.queue_depth + cfg->pipeline.inflight + 2;
    dc.pinned = p->seg && mk_segment_backend(p->seg) == MK_BACKEND_CUDA; /* uploads at DMA speed */
    dc.decoder = mk_decoder_for_backend((mk_decoder_t)cfg->pipeline.decoder,
                                        p->seg ? mk_segment_backend(p->seg) : MK_BACKEND_CPU);
    if (dc.depth > 64)
        dc.depth = 64;
    if (!rc)
        rc = mk_decode_create(&dc, &p->dec);
    if (!rc && !(p->bufs = calloc((size_t)cfg->pipeline.queue_depth + 2, sizeof *p->bufs)))
        rc = mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc)
        p->nbufs = cfg->pipeline.queue_depth + 2;
    if (!rc && !(rc = mk_queue_create(cfg->pipeline.queue_depth, &p->capq)))
        rc = mk_queue_create(p->nbufs, &p->freeq);
    for (int i = 0; !rc && i < p->nbufs; i++) {
        void *none;
        rc = mk_queue_push(p->freeq, &p->bufs[i], &none);
    }
    if (!rc)
        rc = open_bus(p);
    if (rc) {
        mk_pipeline_destroy(p);
        return rc;
    }
    MK_INFO("backend %s (%s); model %s; cut %s; %d frame%s in flight; MJPEG decoder %s (pipeline.decoder %s); "
            "bus %s",
            mk_backend_name(mk_segment_backend(p->seg)), mk_segment_device_name(p->seg), p->model_status,
            mk_segment_cut_name(p->seg), mk_segment_depth(p->seg), mk_segment_depth(p->seg) == 1 ? "" : "s",
            mk_decode_decoder(p->dec), mk_decoder_name((mk_decoder_t)cfg->pipeline.decoder), p->bus_name);
    *out = p;
    return 0;
}

void mk_pipeline_set_control(mk_pipeline_t *p, mk_control_t *control)
{
    p->control = control;
}

int mk_pipeline_start(mk_pipeline_t *p)
{
    uint64_t now = now_ns();
    p->last_tick_ns = p->last_reader_seen_ns = p->last_publish_ns = now;
    if (pthread_create(&p->th_process, NULL, process_main, p))
        return mk_err_set(MK_ENOMEM, "cannot start the process thread");
    if (pthread_create(&p->th_feed, NULL, feed_main, p)) {
        atomic_store(&p->stop, 1);
        pthread_join(p->th_process, NULL);
        return mk_err_set(MK_ENOMEM, "cannot start the decode feeder thread");
    }
    if (pthread_create(&p->th_capture, NULL, capture_main, p)) {
        atomic_store(&p->stop, 1);
        mk_queue_close(p->capq);
        pthread_join(p->th_feed, NULL);
        pthread_join(p->th_process, NULL);
        return mk_err_set(MK_ENOMEM, "cannot start the capture thread");
    }
    p->started = 1;
    return 0;
}

void mk_pipeline_stop(mk_pipeline_t *p)
{
    if (!p || !p->started)
        return;
    set_state(p, MK_PIPE_STOPPING, NULL);
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->idle_mu);
    pthread_cond_broadcast(&p->idle_cv);
    pthread_mutex_unlock(&p->idle_mu);
    pthread_join(p->th_capture, NULL);
    mk_queue_close(p->capq);
    pthread_join(p->th_feed, NULL);
    pthread_join(p->th_process, NULL);
    p->started = 0;
    pthread_mutex_lock(&p->apply_mu); /* a configuration waiting for the process thread waits no longer */
    pthread_cond_broadcast(&p->apply_cv);
    pthread_mutex_unlock(&p->apply_mu);
}

void mk_pipeline_destroy(mk_pipeline_t *p)
{
    if (!p)
        return;
    mk_pipeline_stop(p);
    maskbus_writer_close(p->bus, 0);
    mk_segment_destroy(p->seg);
    mk_decode_destroy(p->dec);
    for (int i = 0; i < p->nbufs; i++)
        free(p->bufs[i].data);
    free(p->bufs);
    mk_queue_destroy(p->capq);
    mk_queue_destroy(p->freeq);
    mk_opt_hooks_free(p->hooks);
    cJSON_Delete(p->src_controls);
    pthread_mutex_destroy(&p->cfg_mu);
    pthread_mutex_destroy(&p->apply_mu);
    pthread_mutex_destroy(&p->idle_mu);
    pthread_mutex_destroy(&p->state_mu);
    pthread_mutex_destroy(&p->stats_mu);
    pthread_cond_destroy(&p->apply_cv);
    pthread_cond_destroy(&p->idle_cv);
    free(p);
}

/* ---- statistics ------------------------------------------------------------------------------------------- */

static double r2(double v)
{
    return round(v * 100) / 100;
}

cJSON *mk_pipeline_stats(mk_pipeline_t *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    mk_decode_stats_t ds;
    mk_decode_stats(p->dec, &ds);
    pthread_mutex_lock(&p->state_mu);
    cJSON_AddStringToObject(o, "state", mk_pipe_state_name(p->state));
    cJSON_AddStringToObject(o, "state_reason", p->state_reason);
    pthread_mutex_unlock(&p->state_mu);
    cJSON_AddNumberToObject(o, "uptime_s", r2((double)(now_ns() - p->start_ns) / 1e9));
    cJSON_AddStringToObject(o, "instance", p->instance);
    cJSON_AddStringToObject(o, "bus", p->bus_name);
    cJSON_AddStringToObject(o, "backend", mk_backend_name(mk_segment_backend(p->seg)));
    cJSON_AddStringToObject(o, "device", mk_segment_device_name(p->seg));
    cJSON_AddStringToObject(o, "decoder", mk_decode_decoder(p->dec));

    pthread_mutex_lock(&p->cfg_mu);
    char spec[MK_CFG_STR_MAX], mcfg[MK_CFG_STR_MAX], mweights[MK_CFG_STR_MAX];
    snprintf(spec, sizeof spec, "%s", p->cfg.source.spec);
    snprintf(mcfg, sizeof mcfg, "%s", p->cfg.detect.cfg);
    snprintf(mweights, sizeof mweights, "%s", p->cfg.detect.weights);
    int cut_method = p->cfg.cut.method;
    pthread_mutex_unlock(&p->cfg_mu);

    pthread_mutex_lock(&p->stats_mu);
    snapshot_t s = p->snap;
    cJSON *src = cJSON_AddObjectToObject(o, "source");
    cJSON_AddStringToObject(src, "spec", spec);
    cJSON_AddStringToObject(src, "kind", p->src_kind);
    if (p->src_card[0])
        cJSON_AddStringToObject(src, "card", p->src_card);
    cJSON_AddNumberToObject(src, "width", p->src_w);
    cJSON_AddNumberToObject(src, "height", p->src_h);
    cJSON_AddNumberToObject(src, "fps", r2(p->src_fps));
    cJSON_AddBoolToObject(src, "open", p->src_open);
    cJSON_AddNumberToObject(src, "lost", (double)p->src_lost_events);
    cJSON_AddNumberToObject(src, "reopens", (double)(p->src_total.reopens + p->src_cur.reopens));
    cJSON_AddNumberToObject(src, "loops", (double)(p->src_total.loops + p->src_cur.loops));
    cJSON_AddItemToObject(src, "controls", cJSON_Duplicate(p->src_controls, 1));
    uint64_t src_corrupt = p->src_total.corrupt + p->src_cur.corrupt;
    uint64_t drv_dropped = p->src_total.dropped + p->src_cur.dropped;

    cJSON *model = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(model, "status", p->model_status);
    cJSON_AddStringToObject(model, "cfg", mcfg);
    cJSON_AddStringToObject(model, "weights", mweights);
    cJSON_AddStringToObject(o, "cut", mk_cut_method_name(cut_method));

    cJSON *t = cJSON_AddObjectToObject(o, "target");
    cJSON_AddStringToObject(t, "from", mk_select_result_name(p->target_from));
    cJSON_AddNumberToObject(t, "x", r2(p->target.x));
    cJSON_AddNumberToObject(t, "y", r2(p->target.y));
    cJSON_AddNumberToObject(t, "w", r2(p->target.w));
    cJSON_AddNumberToObject(t, "h", r2(p->target.h));
    cJSON_AddNumberToObject(t, "track", p->target_track);
    pthread_mutex_unlock(&p->stats_mu);

    cJSON *fps = cJSON_AddObjectToObject(o, "fps");
    cJSON_AddNumberToObject(fps, "capture", r2(s.fps_capture));
    cJSON_AddNumberToObject(fps, "decode", r2(s.fps_decode));
    cJSON_AddNumberToObject(fps, "detect", r2(s.fps_detect));
    cJSON_AddNumberToObject(fps, "process", r2(s.fps_process));
    cJSON_AddNumberToObject(fps, "publish", r2(s.fps_publish));
    cJSON_AddNumberToObject(o, "detections_per_s", r2(s.dets_per_s));

    cJSON *lat = cJSON_AddObjectToObject(o, "latency_ms");
    cJSON_AddNumberToObject(lat, "p50", r2(s.lat_p50));
    cJSON_AddNumberToObject(lat, "p90", r2(s.lat_p90));
    cJSON_AddNumberToObject(lat, "p99", r2(s.lat_p99));
    cJSON_AddNumberToObject(lat, "max", r2(s.lat_max));
    cJSON_AddNumberToObject(lat, "frames", s.lat_samples);

    cJSON *st = cJSON_AddObjectToObject(o, "stage_ms");
    cJSON_AddNumberToObject(st, "detect", r2(s.ms_detect));
    cJSON_AddNumberToObject(st, "cut", r2(s.ms_cut));
    cJSON_AddNumberToObject(st, "publish", r2(s.ms_publish));
    cJSON_AddNumberToObject(st, "process", r2(s.ms_process));

    uint64_t capd = atomic_load(&p->cap_dropped), procd = atomic_load(&p->proc_dropped);
    cJSON *fr = cJSON_AddObjectToObject(o, "frames");
    cJSON_AddNumberToObject(fr, "captured", (double)atomic_load(&p->captured.n));
    cJSON_AddNumberToObject(fr, "decoded", (double)(ds.decoded + ds.passed));
    cJSON_AddNumberToObject(fr, "processed", (double)atomic_load(&p->processed.n));
    cJSON_AddNumberToObject(fr, "published", (double)atomic_load(&p->published.n));
    cJSON_AddNumberToObject(fr, "dropped", (double)(capd + procd));
    cJSON_AddNumberToObject(fr, "dropped_capture", (double)capd);
    cJSON_AddNumberToObject(fr, "dropped_process", (double)procd);
    cJSON_AddNumberToObject(fr, "dropped_driver", (double)drv_dropped);
    cJSON_AddNumberToObject(fr, "corrupt", (double)(ds.corrupt + src_corrupt));
    cJSON_AddNumberToObject(fr, "corrupt_decode", (double)ds.corrupt);
    cJSON_AddNumberToObject(fr, "gpu_decoded", (double)ds.gpu_decoded);
    cJSON_AddNumberToObject(fr, "gpu_fallbacks", (double)ds.gpu_fallbacks);
    cJSON_AddNumberToObject(fr, "corrupt_source", (double)src_corrupt);
    cJSON_AddNumberToObject(fr, "no_person", (double)atomic_load(&p->no_person));
    cJSON_AddNumberToObject(fr, "held", (double)atomic_load(&p->held));
    cJSON_AddNumberToObject(fr, "detector_runs", (double)atomic_load(&p->det_runs.n));
    cJSON_AddNumberToObject(fr, "errors", (double)atomic_load(&p->errors));

    cJSON *rd = cJSON_AddObjectToObject(o, "readers");
    cJSON_AddNumberToObject(rd, "live", atomic_load(&p->readers_live));
    cJSON_AddNumberToObject(rd, "stalled", atomic_load(&p->readers_stalled));
    cJSON_AddNumberToObject(o, "config_changes", (double)atomic_load(&p->config_changes));
    return o;
}
