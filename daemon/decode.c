/* decode: the ordered decode pool — a ring of `depth` slots indexed by submission number; workers claim queued
 * slots in order, the consumer takes them in order, skipping failed ones. */
#include "decode.h"

#include "ctx.h"
#include "errors.h"
#include "jpeg_gpu.h"
#include "log.h"
#include "mjpeg.h"
#include "yuyv.h"

#include <turbojpeg.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 16
#define MAX_DEPTH 64

typedef enum { S_FREE, S_QUEUED, S_BUSY, S_DONE, S_FAILED, S_HELD } slot_state_t;

typedef struct {
    slot_state_t state;
    uint64_t subno; /* submission number of the frame in the slot */
    uint64_t seq;
    int64_t capture_ns;
    uint32_t flags, dropped;
    mk_frame_kind_t kind;
    uint8_t *in; /* MJPEG bytes */
    size_t in_cap, in_len;
    mk_image_t raw; /* YUYV to convert */
    mk_image_t out;
    int dht_added;
    int gpu, gpu_fallback; /* decoded by nvJPEG; handed from nvJPEG to TurboJPEG */
} dslot_t;

typedef struct {
    struct mk_decode *dec;
    pthread_t thread;
    int started;
    tjhandle tj;
    mk_jpeg_gpu_t *gpu; /* nvJPEG decoder, or NULL: TurboJPEG */
    mk_ctx_t *ctx;   /* CPU context for raw_to_rgb */
    uint8_t *scratch; /* a frame with Huffman tables inserted */
    size_t scratch_cap;
} worker_t;

struct mk_decode {
    mk_decode_config_t cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, out_cv, room_cv;
    dslot_t slots[MAX_DEPTH];
    uint64_t tail, work, head;
    int stopping, finished;
    worker_t workers[MAX_THREADS];
    mk_decode_stats_t st;
    mk_ctx_t *pin;   /* CUDA context for page-locked output images (cfg.pinned), or NULL */
    char decoder[32]; /* mk_decode_decoder() */
};

const char *mk_decoder_name(mk_decoder_t d)
{
    switch (d) {
    case MK_DECODER_AUTO: return "auto";
    case MK_DECODER_CPU: return "cpu";
    case MK_DECODER_NVJPEG: return "nvjpeg";
    }
    return "?";
}

mk_decoder_t mk_decoder_for_backend(mk_decoder_t want, mk_backend_t backend)
{
    return want == MK_DECODER_AUTO && backend != MK_BACKEND_CUDA ? MK_DECODER_CPU : want;
}

void mk_decode_config_init(mk_decode_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->threads = 2;
    cfg->format = MK_FMT_RGB;
    cfg->strict = 1;
    cfg->decoder = MK_DECODER_CPU;
}

static struct timespec abs_deadline(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* Waits on cv: forever for a negative timeout; returns ETIMEDOUT once the deadline has passed. */
static int wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int timeout_ms, const struct timespec *deadline)
{
    if (timeout_ms < 0)
        return pthread_cond_wait(cv, mu);
    if (timeout_ms == 0)
        return ETIMEDOUT;
    return pthread_cond_timedwait(cv, mu, deadline);
}

/* Makes `img` a host u8 image of w x h in `format` (keeping its buffer when the geometry is unchanged), page-locked
 * when `pin` is a CUDA context. */
static int ensure_image(mk_ctx_t *pin, mk_image_t *img, int w, int h, mk_format_t format)
{
    if (img->data && img->width == w && img->height == h && img->format == format)
        return 0;
    mk_image_free(pin, img);
    *img = mk_image_desc(w, h, format, MK_U8);
    if (pin && mk_image_alloc(pin, img, MK_MEM_PINNED) == 0)
        return 0;
    if (pin) /* page-locked memory is a limited resource: the frame still decodes, into plain memory */
        MK_LOG_RL(60000, MK_LOG_WARN, "decode pool: %s: this frame's buffer is plain host memory", mk_err_msg());
    *img = mk_image_desc(w, h, format, MK_U8);
    return mk_image_alloc(NULL, img, MK_MEM_HOST);
}

static int copy_image(mk_ctx_t *pin, mk_image_t *dst, const mk_image_t *src)
{
    int rc = ensure_image(pin, dst, src->width, src->height, src->format);
    if (rc)
        return rc;
    size_t row = mk_image_row_bytes(src);
    for (int y = 0; y < src->height; y++)
        memcpy(mk_image_row(dst, 0, y), mk_image_row(src, 0, y), row);
    return 0;
}

/* ---- workers --------------------------------------------------------------------------------------------- */

static int decode_jpeg(worker_t *w, dslot_t *s)
{
    const mk_decode_config_t *cfg = &w->dec->cfg;
    const uint8_t *data = s->in;
    size_t len = s->in_len;
    int has = mk_mjpeg_has_dht(data, len);
    if (has < 0)
        return has;
    if (!has) {
        int rc = mk_mjpeg_add_dht(data, len, &w->scratch, &w->scratch_cap, &len);
        if (rc)
            return rc;
        data = w->scratch;
        s->dht_added = 1;
    }
    int width, height, subsamp, cs;
    if (tjDecompressHeader3(w->tj, data, (unsigned long)len, &width, &height, &subsamp, &cs) != 0)
        return mk_err_set(MK_EFORMAT, "bad JPEG header: %s", tjGetErrorStr2(w->tj));
    if (cs == TJCS_CMYK || cs == TJCS_YCCK)
        return mk_err_set(MK_EUNSUPPORTED, "CMYK/YCCK JPEG");
    if (width < 1 || height < 1 || width > MK_IMAGE_MAX_DIM || height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_ERANGE, "JPEG size %dx%d outside 1..%d", width, height, MK_IMAGE_MAX_DIM);
    int rc = ensure_image(w->dec->pin, &s->out, width, height, cfg->format);
    if (rc)
        return rc;
    if (w->gpu) {
        /* nvJPEG decodes what it can read, cut-short frames included: those go to TurboJPEG's strict checks. */
        mk_mjpeg_span_t sp;
        if (mk_mjpeg_split(data, len, 1, &sp) == MK_MJPEG_FRAME && sp.start == 0 && sp.complete) {
            if (mk_jpeg_gpu_decode(w->gpu, data, len, &s->out) == 0) {
                s->gpu = 1;
                return 0;
            }
            MK_LOG_RL(5000, MK_LOG_WARN, "frame %llu: nvJPEG: %s; decoding it on the CPU",
                      (unsigned long long)s->seq, mk_err_msg());
        }
        s->gpu_fallback = 1;
    }
    int flags = TJFLAG_LIMITSCANS | (cfg->strict ? TJFLAG_STOPONWARNING : 0);
    if (tjDecompress2(w->tj, data, (unsigned long)len, s->out.data, width, (int)s->out.pitch, height,
                      cfg->format == MK_FMT_BGR ? TJPF_BGR : TJPF_RGB, flags) != 0 &&
        (cfg->strict || tjGetErrorCode(w->tj) != TJERR_WARNING))
        return mk_err_set(MK_EFORMAT, "corrupt or truncated JPEG: %s", tjGetErrorStr2(w->tj));
    return 0;
}

static int process(worker_t *w, dslot_t *s)
{
    if (s->kind == MK_FRAME_MJPEG)
        return decode_jpeg(w, s);
    int rc = ensure_image(w->dec->pin, &s->out, s->raw.width, s->raw.height, w->dec->cfg.format);
    if (rc)
        return rc;
    mk_image_t out = s->out; /* page-locked memory is host memory to the CPU conversion */
    out.mem = MK_MEM_HOST;
    out.owned = 0;
    return mk_yuyv_to_rgb(w->ctx, &s->raw, &out);
}

/* Moves `work` past slots that need no worker; returns the next queued slot or NULL. */
static dslot_t *claimable(struct mk_decode *d)
{
    while (d->work < d->tail) {
        dslot_t *s = &d->slots[d->work % (uint64_t)d->cfg.depth];
        if (s->subno == d->work && s->state == S_QUEUED)
            return s;
        d->work++;
    }
    return NULL;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    struct mk_decode *d = w->dec;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        dslot_t *s = NULL;
        while (!d->stopping && !(s = claimable(d)))
            pthread_cond_wait(&d->work_cv, &d->mu);
        if (d->stopping)
            break;
        d->work++;
        s->state = S_BUSY;
        s->dht_added = 0;
        s->gpu = s->gpu_fallback = 0;
        pthread_mutex_unlock(&d->mu);
        int rc = process(w, s);
        pthread_mutex_lock(&d->mu);
        if (rc) {
            s->state = S_FAILED;
            d->st.corrupt++;
            MK_LOG_RL(2000, MK_LOG_WARN, "frame %llu skipped: %s", (unsigned long long)s->seq, mk_err_msg());
        } else {
            s->state = S_DONE;
            if (s->kind == MK_FRAME_MJPEG) {
                d->st.decoded++;
                d->st.gpu_decoded += (uint64_t)s->gpu;
            } else {
                d->st.passed++;
            }
        }
        d->st.dht_added += (uint64_t)s->dht_added;
        d->st.gpu_fallbacks += (uint64_t)s->gpu_fallback;
        pthread_cond_broadcast(&d->out_cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- API ------------------------------------------------------------------------------------------------- */

/* cfg.decoder AUTO or NVJPEG: the pool runs one worker with an nvJPEG decoder, or none at all (then TurboJPEG on
 * cfg.threads workers, with one log line saying why: a warning when nvJPEG was asked for by name). One worker,
 * because more nvJPEG decoders contend for the GPU's JPEG engine and each holds ~27 MB of host memory: H100, 720p,
 * 1448 fps with one worker, 488 with two, 171 with four (NOTES.md, session 9). */
static void open_gpu_decoders(struct mk_decode *d)
{
    snprintf(d->decoder, sizeof d->decoder, "cpu");
    if (d->cfg.decoder == MK_DECODER_CPU)
        return;
    char why[600] = "";
    int ok = mk_jpeg_gpu_available(why, sizeof why), asked = d->cfg.threads;
    if (ok)
        d->cfg.threads = 1;
    for (int i = 0; ok && i < d->cfg.threads; i++)
        if (mk_jpeg_gpu_create(MK_JPEG_GPU_AUTO, &d->workers[i].gpu)) {
            snprintf(why, sizeof why, "%s", mk_err_msg());
            ok = 0;
        }
    if (!ok) {
        for (int i = 0; i < d->cfg.threads; i++) {
            mk_jpeg_gpu_destroy(d->workers[i].gpu);
            d->workers[i].gpu = NULL;
        }
        d->cfg.threads = asked;
        if (d->cfg.decoder == MK_DECODER_NVJPEG)
            MK_WARN("decode pool: decoding MJPEG on the CPU although nvJPEG was asked for: %s", why);
        else
            MK_INFO("decode pool: decoding MJPEG on the CPU: %s", why);
        return;
    }
    snprintf(d->decoder, sizeof d->decoder, "%s", mk_jpeg_gpu_backend_name(mk_jpeg_gpu_backend(d->workers[0].gpu)));
    MK_INFO("decode pool: MJPEG on the GPU with %s (%s), one worker (of %d asked: more contend for the GPU's JPEG "
            "engine)", d->decoder, mk_jpeg_gpu_library(), asked);
}

int mk_decode_create(const mk_decode_config_t *cfg, mk_decode_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_decode_create: NULL output");
    *out = NULL;
    mk_decode_config_t c;
    if (cfg)
        c = *cfg;
    else
        mk_decode_config_init(&c);
    if (c.threads < 1 || c.threads > MAX_THREADS)
        return mk_err_set(MK_ERANGE, "decode threads %d outside 1..%d", c.threads, MAX_THREADS);
    if (c.depth == 0)
        c.depth = 2 * c.threads + 2;
    if (c.depth < 1 || c.depth > MAX_DEPTH)
        return mk_err_set(MK_ERANGE, "decode depth %d outside 1..%d", c.depth, MAX_DEPTH);
    if (c.format != MK_FMT_RGB && c.format != MK_FMT_BGR)
        return mk_err_set(MK_EINVAL, "decode output must be rgb or bgr, not %s", mk_format_name(c.format));
    if ((unsigned)c.decoder > MK_DECODER_NVJPEG)
        return mk_err_set(MK_EINVAL, "decode: unknown decoder %d", (int)c.decoder);
    struct mk_decode *d = calloc(1, sizeof *d);
    if (!d)
        return mk_err_set(MK_ENOMEM, "decode pool: out of memory");
    d->cfg = c;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work_cv, &ca);
    pthread_cond_init(&d->out_cv, &ca);
    pthread_cond_init(&d->room_cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    if (c.pinned && mk_ctx_create(MK_BACKEND_CUDA, &d->pin)) {
        MK_INFO("decode pool: no page-locked output (%s): plain host memory", mk_err_msg());
        d->pin = NULL;
    }
    open_gpu_decoders(d); /* with nvJPEG: one worker (d->cfg.threads) */
    for (int i = 0; i < d->cfg.threads && !rc; i++) {
        worker_t *w = &d->workers[i];
        w->dec = d;
        if (!(w->tj = tjInitDecompress()))
            rc = mk_err_set(MK_ENOMEM, "cannot create a JPEG decoder: %s", tjGetErrorStr2(NULL));
        else if (c.raw_to_rgb)
            rc = mk_ctx_create(MK_BACKEND_CPU, &w->ctx);
    }
    for (int i = 0; i < d->cfg.threads && !rc; i++) {
        if (pthread_create(&d->workers[i].thread, NULL, worker_main, &d->workers[i]) != 0)
            rc = mk_err_set(MK_ENOMEM, "cannot start decode thread %d", i);
        else
            d->workers[i].started = 1;
    }
    if (rc) {
        mk_decode_destroy(d);
        return rc;
    }
    *out = d;
    return 0;
}

void mk_decode_destroy(mk_decode_t *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->stopping = 1;
    pthread_cond_broadcast(&d->work_cv);
    pthread_cond_broadcast(&d->out_cv);
    pthread_cond_broadcast(&d->room_cv);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < MAX_THREADS; i++) {
        worker_t *w = &d->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        if (w->tj)
            tjDestroy(w->tj);
        mk_jpeg_gpu_destroy(w->gpu);
        mk_ctx_destroy(w->ctx);
        free(w->scratch);
    }
    for (int i = 0; i < MAX_DEPTH; i++) {
        free(d->slots[i].in);
        mk_image_free(NULL, &d->slots[i].raw);
        mk_image_free(d->pin, &d->slots[i].out);
    }
    mk_ctx_destroy(d->pin);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work_cv);
    pthread_cond_destroy(&d->out_cv);
    pthread_cond_destroy(&d->room_cv);
    free(d);
}

static int check_frame(const mk_frame_t *f)
{
    if (f->kind == MK_FRAME_MJPEG) {
        if (!f->data || !f->len)
            return mk_err_set(MK_EINVAL, "decode: empty MJPEG frame %llu", (unsigned long long)f->seq);
        return 0;
    }
    if (f->kind != MK_FRAME_RAW)
        return mk_err_set(MK_EINVAL, "decode: unknown frame kind %d", (int)f->kind);
    int rc = mk_image_check(&f->image, "decode input");
    if (rc)
        return rc;
    if (f->image.mem == MK_MEM_DEVICE || f->image.dtype != MK_U8 ||
        (f->image.format != MK_FMT_YUYV && f->image.format != MK_FMT_RGB && f->image.format != MK_FMT_BGR))
        return mk_err_set(MK_EINVAL, "decode: raw frames must be host u8 yuyv, rgb or bgr, not %s %s in %s memory",
                          mk_dtype_name(f->image.dtype), mk_format_name(f->image.format),
                          mk_mem_name(f->image.mem));
    return 0;
}

int mk_decode_submit(mk_decode_t *d, const mk_frame_t *f, int timeout_ms)
{
    if (!d || !f)
        return mk_err_set(MK_EINVAL, "mk_decode_submit: NULL argument");
    int rc = check_frame(f);
    if (rc)
        return rc;
    struct timespec deadline = abs_deadline(timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&d->mu);
    dslot_t *s = &d->slots[d->tail % (uint64_t)d->cfg.depth];
    while (!d->finished && !d->stopping && s->state != S_FREE) {
        if (wait_until(&d->room_cv, &d->mu, timeout_ms, &deadline) == ETIMEDOUT) {
            d->st.rejected++;
            pthread_mutex_unlock(&d->mu);
            return MK_DECODE_AGAIN;
        }
    }
    if (d->finished || d->stopping) {
        pthread_mutex_unlock(&d->mu);
        return mk_err_set(MK_ESTATE, "decode: submit after finish");
    }
    pthread_mutex_unlock(&d->mu);

    /* A free slot belongs to the producer alone: fill it without the lock. */
    int pass = f->kind == MK_FRAME_RAW && !(d->cfg.raw_to_rgb && f->image.format == MK_FMT_YUYV);
    if (f->kind == MK_FRAME_MJPEG) {
        if (s->in_cap < f->len) {
            uint8_t *n = realloc(s->in, f->len);
            if (!n)
                return mk_err_set(MK_ENOMEM, "decode: cannot hold a %zu-byte frame", f->len);
            s->in = n;
            s->in_cap = f->len;
        }
        memcpy(s->in, f->data, f->len);
        s->in_len = f->len;
    } else if ((rc = copy_image(pass ? d->pin : NULL, pass ? &s->out : &s->raw, &f->image))) {
        return rc;
    }
    s->kind = f->kind;
    s->seq = f->seq;
    s->capture_ns = f->capture_ns;
    s->flags = f->flags;
    s->dropped = f->dropped;

    pthread_mutex_lock(&d->mu);
    s->subno = d->tail++;
    d->st.submitted++;
    if (pass) {
        s->state = S_DONE;
        d->st.passed++;
        pthread_cond_broadcast(&d->out_cv);
    } else {
        s->state = S_QUEUED;
        pthread_cond_signal(&d->work_cv);
    }
    pthread_mutex_unlock(&d->mu);
    return MK_DECODE_OK;
}

int mk_decode_next(mk_decode_t *d, int timeout_ms, mk_decoded_t *out)
{
    if (!d || !out)
        return mk_err_set(MK_EINVAL, "mk_decode_next: NULL argument");
    memset(out, 0, sizeof *out);
    out->slot_ = -1;
    struct timespec deadline = abs_deadline(timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        if (d->head < d->tail) {
            int idx = (int)(d->head % (uint64_t)d->cfg.depth);
            dslot_t *s = &d->slots[idx];
            if (s->state == S_DONE) {
                s->state = S_HELD;
                d->head++;
                out->seq = s->seq;
                out->capture_ns = s->capture_ns;
                out->flags = s->flags;
                out->dropped = s->dropped;
                out->image = s->out;
                out->image.owned = 0;
                out->slot_ = idx;
                pthread_mutex_unlock(&d->mu);
                return MK_DECODE_OK;
            }
            if (s->state == S_FAILED) {
                s->state = S_FREE;
                d->head++;
                pthread_cond_broadcast(&d->room_cv);
                continue;
            }
        } else if (d->finished) {
            pthread_mutex_unlock(&d->mu);
            return MK_DECODE_EOS;
        }
        if (d->stopping || wait_until(&d->out_cv, &d->mu, timeout_ms, &deadline) == ETIMEDOUT) {
            pthread_mutex_unlock(&d->mu);
            return MK_DECODE_AGAIN;
        }
    }
}

int mk_decode_release(mk_decode_t *d, mk_decoded_t *out)
{
    if (!d || !out)
        return mk_err_set(MK_EINVAL, "mk_decode_release: NULL argument");
    int idx = out->slot_;
    pthread_mutex_lock(&d->mu);
    if (idx < 0 || idx >= d->cfg.depth || d->slots[idx].state != S_HELD) {
        pthread_mutex_unlock(&d->mu);
        return mk_err_set(MK_EINVAL, "mk_decode_release: frame %llu is not a held output",
                          (unsigned long long)out->seq);
    }
    d->slots[idx].state = S_FREE;
    pthread_cond_broadcast(&d->room_cv);
    pthread_mutex_unlock(&d->mu);
    out->slot_ = -1;
    out->image.data = NULL;
    return 0;
}

void mk_decode_finish(mk_decode_t *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->finished = 1;
    pthread_cond_broadcast(&d->out_cv);
    pthread_cond_broadcast(&d->room_cv);
    pthread_mutex_unlock(&d->mu);
}

void mk_decode_stats(mk_decode_t *d, mk_decode_stats_t *st)
{
    if (!d || !st)
        return;
    pthread_mutex_lock(&d->mu);
    *st = d->st;
    pthread_mutex_unlock(&d->mu);
}

const char *mk_decode_decoder(const mk_decode_t *d)
{
    return d ? d->decoder : "cpu";
}
