/* test_source_v4l2: the V4L2 source against an emulated device behind the system-call seam — mode negotiation
 * (formats, discrete and stepwise sizes, frame intervals, preferences), mmap streaming (DQBUF/QBUF, buffer
 * timestamps, sequence gaps, error-flagged buffers, the held-frame limit), frame timeouts, the device vanishing
 * mid-stream, reopening with backoff, controls (one by one, as a source.controls list, and by the pipeline's capture
 * thread after a live change), and teardown. */
#include "testutil.h"

#include "config.h"
#include "pipeline.h"
#include "source.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/videodev2.h>

#define FAKE_FD 42
#define FAKE_MAX_BUFS 32
#define BUF_STRIDE 0x100000u /* mmap offset of buffer i is i * BUF_STRIDE */

/* ---- the emulated device --------------------------------------------------------------------------------- */

typedef struct {
    uint32_t fourcc;
    int w, h;
    int fps[4]; /* discrete rates, 0-terminated */
} fake_mode_t;

typedef struct {
    uint32_t id;
    const char *name;
    uint32_t type;
    int32_t min, max, step, def, value;
    uint32_t flags;
} fake_ctrl_t;

typedef struct {
    /* what the device offers */
    uint32_t caps;
    fake_mode_t modes[8];
    int nmodes;
    int stepwise;         /* one MJPEG format with stepwise sizes 160..1920/16 x 120..1080/8, continuous intervals */
    int give_buffers;     /* REQBUFS grants at most this many */
    uint32_t ts_flags;    /* V4L2_BUF_FLAG_TIMESTAMP_* of the buffers */
    /* behaviour */
    int present;          /* the device node exists */
    int produce;          /* frames arrive */
    int vanish_after;     /* the device disappears at this dequeue (-1: never) */
    int error_at;         /* this dequeue carries V4L2_BUF_FLAG_ERROR (-1: none) */
    int gap_at;           /* the driver skips a sequence number before this dequeue (-1: none) */
    /* state */
    int open, streaming;
    uint32_t fourcc;
    int w, h;
    uint32_t num, den;
    int nbufs;
    size_t buflen;
    uint8_t *mem[FAKE_MAX_BUFS];
    int mapped[FAKE_MAX_BUFS];
    int queue[FAKE_MAX_BUFS], qn;
    uint32_t seq;
    int dequeues;
    int64_t stamp_ns[FAKE_MAX_BUFS]; /* timestamp given to each buffer at its last dequeue */
    fake_ctrl_t ctrls[4];
    int nctrls;
    /* records */
    int opens, closes, s_fmt, s_parm, reqbufs_asked, mmaps, munmaps, qbufs, streamoffs, s_ctrls;
    pthread_t dq_thread, s_ctrl_thread; /* the threads of the last DQBUF and S_CTRL */
    int64_t open_ns[64];
} fake_t;

static fake_t F;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void fake_free_bufs(void)
{
    for (int i = 0; i < FAKE_MAX_BUFS; i++) {
        free(F.mem[i]);
        F.mem[i] = NULL;
    }
    F.nbufs = 0;
    F.qn = 0;
}

/* A webcam: MJPEG at three sizes (30 and 15 fps), YUYV at the same sizes but slower; four controls. */
static void fake_reset(void)
{
    fake_free_bufs();
    memset(&F, 0, sizeof F);
    F.caps = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING | V4L2_CAP_DEVICE_CAPS;
    const fake_mode_t modes[] = {
        {V4L2_PIX_FMT_MJPEG, 640, 480, {30, 15}},   {V4L2_PIX_FMT_MJPEG, 1280, 720, {30, 15}},
        {V4L2_PIX_FMT_MJPEG, 1920, 1080, {30, 15}}, {V4L2_PIX_FMT_YUYV, 640, 480, {30, 20, 10}},
        {V4L2_PIX_FMT_YUYV, 1280, 720, {10, 5}},    {V4L2_PIX_FMT_YUYV, 1920, 1080, {5}},
    };
    memcpy(F.modes, modes, sizeof modes);
    F.nmodes = 6;
    F.give_buffers = 8;
    F.ts_flags = V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
    F.present = 1;
    F.produce = 1;
    F.vanish_after = F.error_at = F.gap_at = -1;
    const fake_ctrl_t ctrls[] = {
        {V4L2_CID_BRIGHTNESS, "Brightness", V4L2_CTRL_TYPE_INTEGER, -64, 64, 1, 0, 0, 0},
        {V4L2_CID_EXPOSURE_AUTO, "Auto Exposure", V4L2_CTRL_TYPE_MENU, 0, 3, 1, 3, 3, 0},
        {V4L2_CID_EXPOSURE_ABSOLUTE, "Exposure Time, Absolute", V4L2_CTRL_TYPE_INTEGER, 2, 5000, 2, 156, 156, 0},
        {V4L2_CID_PAN_ABSOLUTE, "Pan, Absolute", V4L2_CTRL_TYPE_INTEGER, -36000, 36000, 3600, 0, 0,
         V4L2_CTRL_FLAG_READ_ONLY},
    };
    memcpy(F.ctrls, ctrls, sizeof ctrls);
    F.nctrls = 4;
    F.fourcc = modes[0].fourcc;
    F.w = modes[0].w;
    F.h = modes[0].h;
    F.num = 1;
    F.den = 30;
}

static int fail_errno(int e)
{
    errno = e;
    return -1;
}

static int fake_open(void *u, const char *path, int flags)
{
    (void)u, (void)path, (void)flags;
    if (F.opens < 64)
        F.open_ns[F.opens] = now_ns();
    F.opens++;
    if (!F.present)
        return fail_errno(ENOENT);
    assert_false(F.open);
    assert_true(flags & O_NONBLOCK);
    F.open = 1;
    return FAKE_FD;
}

static int fake_close(void *u, int fd)
{
    (void)u;
    assert_int_equal(fd, FAKE_FD);
    assert_true(F.open);
    for (int i = 0; i < F.nbufs; i++)
        assert_false(F.mapped[i]);
    fake_free_bufs(); /* closing the last descriptor frees the buffers */
    F.open = 0;
    F.streaming = 0;
    F.closes++;
    return 0;
}

static int mode_has(uint32_t fourcc, int w, int h)
{
    if (F.stepwise)
        return fourcc == V4L2_PIX_FMT_MJPEG && w >= 160 && w <= 1920 && (w - 160) % 16 == 0 && h >= 120 &&
               h <= 1080 && (h - 120) % 8 == 0;
    for (int i = 0; i < F.nmodes; i++)
        if (F.modes[i].fourcc == fourcc && F.modes[i].w == w && F.modes[i].h == h)
            return 1;
    return 0;
}

static size_t frame_bytes(void)
{
    return F.fourcc == V4L2_PIX_FMT_YUYV ? (size_t)F.w * 2 * (size_t)F.h : 65536;
}

static void fill_frame(int index, uint32_t seq, struct v4l2_buffer *b)
{
    uint8_t *m = F.mem[index];
    size_t n = frame_bytes();
    if (F.fourcc == V4L2_PIX_FMT_YUYV) {
        for (size_t i = 0; i < n; i += 4096)
            m[i] = (uint8_t)(seq + i / 4096);
    } else {
        n = 1000 + seq % 100;
        m[0] = 0xFF, m[1] = 0xD8;
        memcpy(m + 2, &seq, sizeof seq);
    }
    b->bytesused = (uint32_t)n;
}

static int fake_ioctl(void *u, int fd, unsigned long req, void *arg)
{
    (void)u;
    assert_int_equal(fd, FAKE_FD);
    if (!F.present)
        return fail_errno(ENODEV);
    switch (req) {
    case VIDIOC_QUERYCAP: {
        struct v4l2_capability *c = arg;
        memset(c, 0, sizeof *c);
        strcpy((char *)c->driver, "fakecam");
        strcpy((char *)c->card, "Emulated Camera");
        c->capabilities = F.caps | V4L2_CAP_DEVICE_CAPS;
        c->device_caps = F.caps & ~V4L2_CAP_DEVICE_CAPS;
        return 0;
    }
    case VIDIOC_ENUM_FMT: {
        struct v4l2_fmtdesc *d = arg;
        uint32_t seen[8];
        int n = 0;
        if (F.stepwise) {
            if (d->index > 0)
                return fail_errno(EINVAL);
            d->pixelformat = V4L2_PIX_FMT_MJPEG;
            return 0;
        }
        for (int i = 0; i < F.nmodes; i++) {
            int dup = 0;
            for (int k = 0; k < n; k++)
                dup |= seen[k] == F.modes[i].fourcc;
            if (dup)
                continue;
            if ((uint32_t)n == d->index) {
                d->pixelformat = F.modes[i].fourcc;
                return 0;
            }
            seen[n++] = F.modes[i].fourcc;
        }
        return fail_errno(EINVAL);
    }
    case VIDIOC_ENUM_FRAMESIZES: {
        struct v4l2_frmsizeenum *s = arg;
        if (F.stepwise) {
            if (s->index > 0 || s->pixel_format != V4L2_PIX_FMT_MJPEG)
                return fail_errno(EINVAL);
            s->type = V4L2_FRMSIZE_TYPE_STEPWISE;
            s->stepwise = (struct v4l2_frmsize_stepwise){160, 1920, 16, 120, 1080, 8};
            return 0;
        }
        uint32_t k = 0;
        for (int i = 0; i < F.nmodes; i++)
            if (F.modes[i].fourcc == s->pixel_format && k++ == s->index) {
                s->type = V4L2_FRMSIZE_TYPE_DISCRETE;
                s->discrete.width = (uint32_t)F.modes[i].w;
                s->discrete.height = (uint32_t)F.modes[i].h;
                return 0;
            }
        return fail_errno(EINVAL);
    }
    case VIDIOC_ENUM_FRAMEINTERVALS: {
        struct v4l2_frmivalenum *v = arg;
        if (!mode_has(v->pixel_format, (int)v->width, (int)v->height))
            return fail_errno(EINVAL);
        if (F.stepwise) {
            if (v->index > 0)
                return fail_errno(EINVAL);
            v->type = V4L2_FRMIVAL_TYPE_CONTINUOUS;
            v->stepwise.min = (struct v4l2_fract){1, 60};
            v->stepwise.max = (struct v4l2_fract){1, 1};
            v->stepwise.step = (struct v4l2_fract){1, 1000000};
            return 0;
        }
        for (int i = 0; i < F.nmodes; i++)
            if (F.modes[i].fourcc == v->pixel_format && F.modes[i].w == (int)v->width &&
                F.modes[i].h == (int)v->height) {
                for (uint32_t k = 0; k < 4 && F.modes[i].fps[k]; k++)
                    if (k == v->index) {
                        v->type = V4L2_FRMIVAL_TYPE_DISCRETE;
                        v->discrete = (struct v4l2_fract){1, (uint32_t)F.modes[i].fps[k]};
                        return 0;
                    }
            }
        return fail_errno(EINVAL);
    }
    case VIDIOC_G_FMT:
    case VIDIOC_S_FMT: {
        struct v4l2_format *f = arg;
        if (f->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
            return fail_errno(EINVAL);
        if (req == VIDIOC_S_FMT) {
            F.s_fmt++;
            if (F.nbufs)
                return fail_errno(EBUSY);
            if (mode_has(f->fmt.pix.pixelformat, (int)f->fmt.pix.width, (int)f->fmt.pix.height)) {
                F.fourcc = f->fmt.pix.pixelformat;
                F.w = (int)f->fmt.pix.width;
                F.h = (int)f->fmt.pix.height;
            }
        }
        memset(&f->fmt.pix, 0, sizeof f->fmt.pix);
        f->fmt.pix.pixelformat = F.fourcc;
        f->fmt.pix.width = (uint32_t)F.w;
        f->fmt.pix.height = (uint32_t)F.h;
        f->fmt.pix.field = V4L2_FIELD_NONE;
        f->fmt.pix.bytesperline = F.fourcc == V4L2_PIX_FMT_YUYV ? (uint32_t)F.w * 2 : 0;
        f->fmt.pix.sizeimage = (uint32_t)frame_bytes();
        return 0;
    }
    case VIDIOC_S_PARM:
    case VIDIOC_G_PARM: {
        struct v4l2_streamparm *p = arg;
        if (req == VIDIOC_S_PARM) {
            F.s_parm++;
            F.num = p->parm.capture.timeperframe.numerator;
            F.den = p->parm.capture.timeperframe.denominator;
        }
        memset(&p->parm, 0, sizeof p->parm);
        p->parm.capture.capability = V4L2_CAP_TIMEPERFRAME;
        p->parm.capture.timeperframe = (struct v4l2_fract){F.num, F.den};
        return 0;
    }
    case VIDIOC_REQBUFS: {
        struct v4l2_requestbuffers *r = arg;
        assert_int_equal(r->memory, V4L2_MEMORY_MMAP);
        if (r->count == 0) {
            for (int i = 0; i < F.nbufs; i++)
                assert_false(F.mapped[i]);
            fake_free_bufs();
            return 0;
        }
        F.reqbufs_asked = (int)r->count;
        fake_free_bufs();
        F.nbufs = (int)r->count < F.give_buffers ? (int)r->count : F.give_buffers;
        F.buflen = frame_bytes();
        for (int i = 0; i < F.nbufs; i++)
            assert_non_null(F.mem[i] = calloc(1, F.buflen));
        r->count = (uint32_t)F.nbufs;
        return 0;
    }
    case VIDIOC_QUERYBUF: {
        struct v4l2_buffer *b = arg;
        if (b->index >= (uint32_t)F.nbufs)
            return fail_errno(EINVAL);
        b->length = (uint32_t)F.buflen;
        b->m.offset = b->index * BUF_STRIDE;
        return 0;
    }
    case VIDIOC_QBUF: {
        struct v4l2_buffer *b = arg;
        F.qbufs++;
        if (b->index >= (uint32_t)F.nbufs)
            return fail_errno(EINVAL);
        for (int i = 0; i < F.qn; i++)
            if (F.queue[i] == (int)b->index)
                return fail_errno(EINVAL); /* queued twice */
        F.queue[F.qn++] = (int)b->index;
        return 0;
    }
    case VIDIOC_DQBUF: {
        struct v4l2_buffer *b = arg;
        if (F.vanish_after >= 0 && F.dequeues >= F.vanish_after) {
            F.present = 0;
            return fail_errno(ENODEV);
        }
        if (!F.streaming || !F.produce || F.qn == 0)
            return fail_errno(EAGAIN);
        F.dq_thread = pthread_self();
        int idx = F.queue[0];
        memmove(F.queue, F.queue + 1, (size_t)--F.qn * sizeof F.queue[0]);
        if (F.dequeues == F.gap_at)
            F.seq += 1;
        memset(b, 0, sizeof *b);
        b->index = (uint32_t)idx;
        b->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b->memory = V4L2_MEMORY_MMAP;
        b->sequence = F.seq;
        b->flags = F.ts_flags | (F.dequeues == F.error_at ? V4L2_BUF_FLAG_ERROR : 0);
        fill_frame(idx, F.seq, b);
        int64_t t = now_ns() - 2000000; /* captured 2 ms ago */
        t -= t % 1000;                  /* microsecond resolution, as a timeval */
        F.stamp_ns[idx] = t;
        b->timestamp.tv_sec = t / 1000000000;
        b->timestamp.tv_usec = (t % 1000000000) / 1000;
        F.seq++;
        F.dequeues++;
        return 0;
    }
    case VIDIOC_STREAMON: F.streaming = 1; return 0;
    case VIDIOC_STREAMOFF:
        F.streaming = 0;
        F.streamoffs++;
        F.qn = 0;
        return 0;
    case VIDIOC_QUERYCTRL: {
        struct v4l2_queryctrl *q = arg;
        uint32_t want = q->id & ~(uint32_t)V4L2_CTRL_FLAG_NEXT_CTRL;
        int next = (q->id & V4L2_CTRL_FLAG_NEXT_CTRL) != 0;
        const fake_ctrl_t *best = NULL;
        for (int i = 0; i < F.nctrls; i++)
            if (next ? F.ctrls[i].id > want && (!best || F.ctrls[i].id < best->id) : F.ctrls[i].id == want)
                best = &F.ctrls[i];
        if (!best)
            return fail_errno(EINVAL);
        memset(q, 0, sizeof *q);
        q->id = best->id;
        q->type = best->type;
        snprintf((char *)q->name, sizeof q->name, "%s", best->name);
        q->minimum = best->min;
        q->maximum = best->max;
        q->step = best->step;
        q->default_value = best->def;
        q->flags = best->flags;
        return 0;
    }
    case VIDIOC_S_CTRL:
    case VIDIOC_G_CTRL: {
        struct v4l2_control *c = arg;
        for (int i = 0; i < F.nctrls; i++)
            if (F.ctrls[i].id == c->id) {
                if (req == VIDIOC_G_CTRL) {
                    c->value = F.ctrls[i].value;
                    return 0;
                }
                F.s_ctrls++;
                F.s_ctrl_thread = pthread_self();
                if (c->value < F.ctrls[i].min || c->value > F.ctrls[i].max)
                    return fail_errno(ERANGE);
                F.ctrls[i].value = c->value;
                return 0;
            }
        return fail_errno(EINVAL);
    }
    }
    return fail_errno(ENOTTY);
}

static void *fake_mmap(void *u, size_t len, int prot, int flags, int fd, off_t off)
{
    (void)u, (void)prot;
    assert_int_equal(fd, FAKE_FD);
    assert_true(flags & MAP_SHARED);
    size_t i = (size_t)off / BUF_STRIDE;
    if (!F.present)
        return errno = ENODEV, MAP_FAILED;
    if ((size_t)off % BUF_STRIDE || i >= (size_t)F.nbufs || len != F.buflen || F.mapped[i])
        return errno = EINVAL, MAP_FAILED;
    F.mapped[i] = 1;
    F.mmaps++;
    return F.mem[i];
}

static int fake_munmap(void *u, void *addr, size_t len)
{
    (void)u;
    for (int i = 0; i < F.nbufs; i++)
        if (F.mem[i] == addr && F.mapped[i]) {
            assert_int_equal(len, F.buflen);
            F.mapped[i] = 0;
            F.munmaps++;
            return 0;
        }
    fail_msg("munmap of an address that is not mapped");
    return -1;
}

static int fake_poll(void *u, struct pollfd *fds, nfds_t n, int timeout_ms)
{
    (void)u;
    assert_int_equal(n, 1);
    assert_int_equal(fds[0].fd, FAKE_FD);
    fds[0].revents = 0;
    if (!F.present) {
        fds[0].revents = POLLERR;
        return 1;
    }
    if (F.streaming && F.produce && F.qn > 0) {
        fds[0].revents = POLLIN;
        return 1;
    }
    sleep_ms(timeout_ms < 0 ? 1000 : timeout_ms);
    return 0;
}

static const mk_v4l2_sys_t fake_sys = {NULL, fake_open, fake_close, fake_ioctl, fake_mmap, fake_munmap, fake_poll};

static int setup(void **state)
{
    (void)state;
    fake_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_free_bufs();
    return 0;
}

static mk_source_config_t config(int w, int h, double fps, mk_pixfmt_pref_t pref)
{
    mk_source_config_t c;
    mk_source_config_init(&c);
    c.width = w;
    c.height = h;
    c.fps = fps;
    c.pixfmt = pref;
    c.sys = &fake_sys;
    return c;
}

static mk_source_t *open_fake(const mk_source_config_t *c)
{
    mk_source_t *src = NULL;
    TU_OK(mk_source_open("v4l2:/dev/video7", c, &src));
    return src;
}

/* ---- negotiation ----------------------------------------------------------------------------------------- */

typedef struct {
    int w, h;
    double fps;
    mk_pixfmt_pref_t pref;
    uint32_t want_fourcc;
    int want_w, want_h;
    uint32_t want_den; /* frame interval 1/den */
} nego_case_t;

static void test_negotiation(void **state)
{
    (void)state;
    const nego_case_t cases[] = {
        {1280, 720, 30, MK_PIXFMT_AUTO, V4L2_PIX_FMT_MJPEG, 1280, 720, 30},   /* exact */
        {1000, 700, 25, MK_PIXFMT_AUTO, V4L2_PIX_FMT_MJPEG, 1280, 720, 30},   /* nearest size, nearest rate */
        {1280, 720, 14, MK_PIXFMT_AUTO, V4L2_PIX_FMT_MJPEG, 1280, 720, 15},   /* nearest rate below */
        {640, 480, 30, MK_PIXFMT_YUYV, V4L2_PIX_FMT_YUYV, 640, 480, 30},      /* preference */
        {640, 480, 22, MK_PIXFMT_YUYV, V4L2_PIX_FMT_YUYV, 640, 480, 20},
        {1920, 1080, 30, MK_PIXFMT_YUYV, V4L2_PIX_FMT_YUYV, 1920, 1080, 5},   /* preference over rate */
        {320, 240, 0, MK_PIXFMT_MJPEG, V4L2_PIX_FMT_MJPEG, 640, 480, 30},     /* fps 0: the fastest */
        {0, 0, 0, MK_PIXFMT_AUTO, V4L2_PIX_FMT_MJPEG, 640, 480, 30},          /* the current size */
        {4000, 3000, 60, MK_PIXFMT_AUTO, V4L2_PIX_FMT_MJPEG, 1920, 1080, 30}, /* beyond the largest */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const nego_case_t *k = &cases[i];
        fake_reset();
        mk_source_config_t c = config(k->w, k->h, k->fps, k->pref);
        mk_source_t *src = open_fake(&c);
        if (F.fourcc != k->want_fourcc || F.w != k->want_w || F.h != k->want_h || F.num != 1 || F.den != k->want_den)
            fail_msg("case %zu (%dx%d@%g pref %d): device set to %.4s %dx%d %u/%u, expected %.4s %dx%d 1/%u", i, k->w,
                     k->h, k->fps, (int)k->pref, (const char *)&F.fourcc, F.w, F.h, F.num, F.den,
                     (const char *)&k->want_fourcc, k->want_w, k->want_h, k->want_den);
        mk_source_info_t info;
        mk_source_info(src, &info);
        assert_string_equal(info.kind, "v4l2");
        assert_string_equal(info.card, "Emulated Camera");
        assert_int_equal(info.width, k->want_w);
        assert_int_equal(info.height, k->want_h);
        assert_true(info.fps == (double)k->want_den);
        assert_int_equal(info.frame_kind, k->want_fourcc == V4L2_PIX_FMT_YUYV ? MK_FRAME_RAW : MK_FRAME_MJPEG);
        assert_int_equal(F.s_fmt, 1);
        assert_int_equal(F.s_parm, 1);
        mk_source_close(src);
    }
}

/* YUYV wins in AUTO when it reaches a nearer size; a missing preferred format falls back to the other. */
static void test_negotiation_fallbacks(void **state)
{
    (void)state;
    F.nmodes = 2;
    F.modes[0] = (fake_mode_t){V4L2_PIX_FMT_MJPEG, 640, 480, {30}};
    F.modes[1] = (fake_mode_t){V4L2_PIX_FMT_YUYV, 1280, 720, {10}};
    mk_source_config_t c = config(1280, 720, 30, MK_PIXFMT_AUTO);
    mk_source_t *src = open_fake(&c);
    assert_int_equal(F.fourcc, V4L2_PIX_FMT_YUYV);
    assert_int_equal(F.w, 1280);
    assert_int_equal(F.den, 10);
    mk_source_close(src);

    /* Same sizes: the higher rate (up to the one asked for) wins, then MJPEG. */
    fake_reset();
    F.nmodes = 2;
    F.modes[0] = (fake_mode_t){V4L2_PIX_FMT_MJPEG, 640, 480, {15}};
    F.modes[1] = (fake_mode_t){V4L2_PIX_FMT_YUYV, 640, 480, {30}};
    c = config(640, 480, 30, MK_PIXFMT_AUTO);
    src = open_fake(&c);
    assert_int_equal(F.fourcc, V4L2_PIX_FMT_YUYV);
    mk_source_close(src);
    fake_reset();
    F.nmodes = 2;
    F.modes[0] = (fake_mode_t){V4L2_PIX_FMT_YUYV, 640, 480, {30}};
    F.modes[1] = (fake_mode_t){V4L2_PIX_FMT_MJPEG, 640, 480, {30}};
    src = open_fake(&c);
    assert_int_equal(F.fourcc, V4L2_PIX_FMT_MJPEG);
    mk_source_close(src);

    /* YUYV only, MJPEG preferred. */
    fake_reset();
    F.nmodes = 1;
    F.modes[0] = (fake_mode_t){V4L2_PIX_FMT_YUYV, 640, 480, {30}};
    c = config(640, 480, 30, MK_PIXFMT_MJPEG);
    src = open_fake(&c);
    assert_int_equal(F.fourcc, V4L2_PIX_FMT_YUYV);
    mk_source_close(src);
}

static void test_negotiation_stepwise(void **state)
{
    (void)state;
    F.stepwise = 1;
    mk_source_config_t c = config(1000, 700, 25, MK_PIXFMT_AUTO);
    mk_source_t *src = open_fake(&c);
    /* 160 + 16k nearest 1000 is 1008; 120 + 8k nearest 700 is 704; continuous intervals: exactly 1/25. */
    assert_int_equal(F.w, 1008);
    assert_int_equal(F.h, 704);
    assert_int_equal(F.num, 1);
    assert_int_equal(F.den, 25);
    mk_source_close(src);
    c = config(5000, 50, 200, MK_PIXFMT_AUTO);
    src = open_fake(&c);
    assert_int_equal(F.w, 1920);
    assert_int_equal(F.h, 120);
    assert_int_equal(F.den, 60);
    mk_source_close(src);
}

static void test_open_failures(void **state)
{
    (void)state;
    mk_source_t *src = NULL;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_AUTO);
    F.nmodes = 1;
    F.modes[0] = (fake_mode_t){V4L2_PIX_FMT_GREY, 640, 480, {30}};
    assert_int_equal(mk_source_open("v4l2:/dev/video7", &c, &src), MK_EUNSUPPORTED);
    assert_non_null(strstr(mk_err_msg(), "GREY"));
    assert_null(src);
    assert_false(F.open);

    fake_reset();
    F.caps = V4L2_CAP_VIDEO_OUTPUT | V4L2_CAP_STREAMING;
    assert_int_equal(mk_source_open("v4l2:/dev/video7", &c, &src), MK_EUNSUPPORTED);
    assert_false(F.open);

    fake_reset();
    F.give_buffers = 1;
    assert_int_equal(mk_source_open("v4l2:/dev/video7", &c, &src), MK_EUNSUPPORTED);
    assert_false(F.open);

    fake_reset();
    F.present = 0;
    assert_int_equal(mk_source_open("v4l2:/dev/video7", &c, &src), MK_ENODEV);
    assert_int_equal(F.opens, 1);

    /* Three buffers: accepted with a warning, one frame may be held. */
    fake_reset();
    F.give_buffers = 3;
    TU_OK(mk_source_open("v4l2:/dev/video7", &c, &src));
    assert_int_equal(mk_source_max_held(src), 1);
    mk_source_close(src);
    assert_int_equal(F.munmaps, 3);
}

/* ---- streaming ------------------------------------------------------------------------------------------- */

static void test_streaming_mjpeg(void **state)
{
    (void)state;
    mk_source_config_t c = config(1280, 720, 30, MK_PIXFMT_MJPEG);
    c.buffers = 2; /* at least 4 are asked for anyway */
    F.give_buffers = 6;
    F.gap_at = 5;
    F.error_at = 8;
    mk_source_t *src = open_fake(&c);
    assert_int_equal(F.reqbufs_asked, 4);
    assert_int_equal(F.nbufs, 4);
    assert_int_equal(F.mmaps, 4);
    assert_int_equal(F.qn, 4);
    assert_true(F.streaming);
    assert_int_equal(mk_source_max_held(src), 2);
    uint32_t dev_seq_expected = 0;
    for (int i = 0; i < 20; i++) {
        mk_frame_t f;
        int rc = mk_source_next(src, 1000, &f);
        assert_int_equal(rc, MK_SOURCE_FRAME);
        assert_int_equal(f.kind, MK_FRAME_MJPEG);
        assert_int_equal(f.seq, i); /* the error-flagged buffer is not counted */
        assert_int_equal(f.width, 1280);
        assert_int_equal(f.height, 720);
        int idx = -1;
        for (int k = 0; k < F.nbufs; k++)
            if (f.data == F.mem[k])
                idx = k;
        assert_true(idx >= 0);
        assert_int_equal(F.qn, F.nbufs - 1); /* the held buffer is out of the driver's queue */
        uint32_t dev_seq;
        memcpy(&dev_seq, f.data + 2, sizeof dev_seq);
        if (i == 5) {
            dev_seq_expected += 1;
            assert_true(f.flags & MK_FRAME_F_GAP);
            assert_int_equal(f.dropped, 1);
        } else {
            assert_false(f.flags & MK_FRAME_F_GAP);
            assert_int_equal(f.dropped, 0);
        }
        if (i == 8)
            dev_seq_expected++; /* dequeue 8 carried the error flag: skipped */
        assert_int_equal(dev_seq, dev_seq_expected);
        dev_seq_expected++;
        assert_int_equal(f.len, 1000 + dev_seq % 100);
        assert_int_equal(f.capture_ns, F.stamp_ns[idx]); /* the driver's monotonic timestamp */
        TU_OK(mk_source_release(src, &f));
        assert_int_equal(F.qn, F.nbufs);
        assert_int_equal(mk_source_release(src, &f), MK_EINVAL); /* twice */
    }
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.frames, 20);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.corrupt, 1);
    mk_source_close(src);
    assert_false(F.open);
    assert_int_equal(F.munmaps, 4);
    assert_int_equal(F.streamoffs, 1);
    assert_int_equal(F.nbufs, 0);
}

static void test_streaming_yuyv_held(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_YUYV);
    c.buffers = 6;
    F.ts_flags = V4L2_BUF_FLAG_TIMESTAMP_COPY; /* not monotonic: the dequeue time is used */
    mk_source_t *src = open_fake(&c);
    assert_int_equal(F.nbufs, 6);
    assert_int_equal(mk_source_max_held(src), 4);
    mk_frame_t f[5];
    for (int i = 0; i < 4; i++) {
        int64_t before = now_ns();
        assert_int_equal(mk_source_next(src, 1000, &f[i]), MK_SOURCE_FRAME);
        int64_t after = now_ns();
        assert_int_equal(f[i].kind, MK_FRAME_RAW);
        assert_int_equal(f[i].image.format, MK_FMT_YUYV);
        assert_int_equal(f[i].image.width, 640);
        assert_int_equal(f[i].image.height, 480);
        assert_int_equal(f[i].image.pitch, 1280);
        assert_int_equal(f[i].image.mem, MK_MEM_HOST);
        assert_int_equal(f[i].image.owned, 0);
        TU_OK(mk_image_check(&f[i].image, "frame"));
        const uint8_t *p = f[i].image.data;
        for (size_t k = 0; k < 640u * 2 * 480; k += 4096)
            assert_int_equal(p[k], (uint8_t)(i + k / 4096));
        assert_true(f[i].capture_ns >= before && f[i].capture_ns <= after);
    }
    assert_int_equal(F.qn, 2);
    assert_int_equal(mk_source_next(src, 1000, &f[4]), MK_ESTATE);
    /* Released out of order: each buffer goes back to the driver. */
    TU_OK(mk_source_release(src, &f[2]));
    TU_OK(mk_source_release(src, &f[0]));
    assert_int_equal(F.qn, 4);
    assert_int_equal(mk_source_next(src, 1000, &f[4]), MK_SOURCE_FRAME);
    assert_int_equal(f[4].seq, 4);
    TU_OK(mk_source_release(src, &f[4]));
    TU_OK(mk_source_release(src, &f[1]));
    TU_OK(mk_source_release(src, &f[3]));
    assert_int_equal(F.qn, 6);
    mk_source_close(src);
    assert_int_equal(F.munmaps, 6);
}

static void test_timeout_then_lost(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_MJPEG);
    c.lost_ms = 600;
    mk_source_t *src = open_fake(&c);
    mk_frame_t f;
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    TU_OK(mk_source_release(src, &f));
    F.produce = 0;
    int64_t t0 = now_ns();
    assert_int_equal(mk_source_next(src, 40, &f), MK_SOURCE_TIMEOUT);
    assert_true(now_ns() - t0 >= 35000000);
    assert_int_equal(mk_source_next(src, 0, &f), MK_SOURCE_TIMEOUT);
    /* Frames again: no harm done. */
    F.produce = 1;
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    TU_OK(mk_source_release(src, &f));
    /* A camera that stays silent for lost_ms is lost. */
    F.produce = 0;
    t0 = now_ns();
    int timeouts = 0, rc;
    while ((rc = mk_source_next(src, 50, &f)) == MK_SOURCE_TIMEOUT)
        timeouts++;
    assert_int_equal(rc, MK_SOURCE_LOST);
    assert_true(timeouts >= 3);
    assert_true(now_ns() - t0 >= 560000000);
    assert_int_equal(mk_source_state(src), MK_SOURCE_STATE_LOST);
    /* Reopening restarts the stream. */
    F.produce = 1;
    TU_OK(mk_source_reopen(src, 2000));
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    assert_true(f.flags & MK_FRAME_F_REOPENED);
    TU_OK(mk_source_release(src, &f));
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_true(st.timeouts >= 5);
    assert_int_equal(st.lost, 1);
    assert_int_equal(st.reopens, 1);
    mk_source_close(src);
}

/* ENODEV mid-stream, retries with a growing delay while the device is absent, then its return. */
static void test_vanish_and_return(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_MJPEG);
    c.backoff_min_ms = 10;
    c.backoff_max_ms = 40;
    F.vanish_after = 5;
    mk_source_t *src = open_fake(&c);
    TU_OK(mk_source_set_control(src, "exposure_time_absolute", 300));
    mk_frame_t f, held;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
        if (i < 4)
            TU_OK(mk_source_release(src, &f));
    }
    held = f;
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_LOST);
    assert_non_null(strstr(mk_err_msg(), "No such device"));
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_LOST);
    assert_int_equal(mk_source_state(src), MK_SOURCE_STATE_LOST);
    /* A frame still held must be released first; its buffer is not queued to the dead device. */
    assert_int_equal(mk_source_reopen(src, 1000), MK_ESTATE);
    int qbufs = F.qbufs;
    TU_OK(mk_source_release(src, &held));
    assert_int_equal(F.qbufs, qbufs);

    /* Absent: every attempt fails, each after a longer wait (10, 20, 40, 40 ms). */
    int opens0 = F.opens;
    for (int i = 0; i < 5; i++)
        assert_int_equal(mk_source_reopen(src, 1000), MK_SOURCE_LOST);
    assert_int_equal(F.opens - opens0, 5);
    assert_false(F.open); /* the dead descriptor was closed */
    assert_int_equal(F.munmaps, 4);
    const int64_t min_gap[] = {20, 40, 40, 40};
    for (int i = 0; i < 4; i++) {
        int64_t gap = F.open_ns[opens0 + i + 1] - F.open_ns[opens0 + i];
        if (gap < min_gap[i] * 1000000 - 1000000)
            fail_msg("attempt %d came %.1f ms after the previous one (backoff %lld ms)", i + 2, gap / 1e6,
                     (long long)min_gap[i]);
    }
    /* Not yet due: no attempt within a zero timeout. */
    assert_int_equal(mk_source_reopen(src, 0), MK_SOURCE_LOST);
    assert_int_equal(F.opens - opens0, 5);

    /* The device returns (with exposure reset by the replug): the next attempt succeeds. */
    F.present = 1;
    F.vanish_after = -1;
    F.ctrls[2].value = 156;
    int s_ctrls = F.s_ctrls;
    TU_OK(mk_source_reopen(src, 1000));
    assert_int_equal(mk_source_state(src), MK_SOURCE_STATE_OPEN);
    assert_int_equal(F.s_ctrls, s_ctrls + 1);
    assert_int_equal(F.ctrls[2].value, 300);
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    assert_int_equal(f.seq, 5);
    assert_true(f.flags & MK_FRAME_F_REOPENED);
    TU_OK(mk_source_release(src, &f));
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    assert_false(f.flags & MK_FRAME_F_REOPENED);
    TU_OK(mk_source_release(src, &f));
    mk_source_stats_t st;
    mk_source_stats(src, &st);
    assert_int_equal(st.lost, 1);
    assert_int_equal(st.reopen_tries, 6);
    assert_int_equal(st.reopens, 1);
    assert_int_equal(st.frames, 7);
    mk_source_close(src);
    assert_false(F.open);
}

/* With wait_for_device an absent camera gives a lost source that comes up by reopening. */
static void test_wait_for_device(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_AUTO);
    c.wait_for_device = 1;
    c.backoff_min_ms = 5;
    F.present = 0;
    mk_source_t *src = open_fake(&c);
    assert_int_equal(mk_source_state(src), MK_SOURCE_STATE_LOST);
    mk_frame_t f;
    assert_int_equal(mk_source_next(src, 10, &f), MK_SOURCE_LOST);
    assert_int_equal(mk_source_reopen(src, 1000), MK_SOURCE_LOST);
    F.present = 1;
    TU_OK(mk_source_reopen(src, 1000));
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_FRAME);
    assert_int_equal(f.seq, 0);
    TU_OK(mk_source_release(src, &f));
    mk_source_close(src);
}

/* ---- controls -------------------------------------------------------------------------------------------- */

static void test_controls(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_AUTO);
    mk_source_t *src = open_fake(&c);
    const mk_source_control_t *list;
    int n = mk_source_controls(src, &list);
    assert_int_equal(n, 4);
    const char *names[] = {"brightness", "auto_exposure", "exposure_time_absolute", "pan_absolute"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(list[i].name, names[i]);
    assert_int_equal(list[2].min, 2);
    assert_int_equal(list[2].max, 5000);
    assert_int_equal(list[2].def, 156);

    int64_t v;
    TU_OK(mk_source_set_control(src, "exposure_time_absolute", 300));
    assert_int_equal(F.ctrls[2].value, 300);
    TU_OK(mk_source_get_control(src, "exposure_time_absolute", &v));
    assert_int_equal(v, 300);
    TU_OK(mk_source_set_control(src, "Exposure Time, Absolute", 500)); /* the driver's own spelling */
    assert_int_equal(F.ctrls[2].value, 500);
    TU_OK(mk_source_set_control(src, "brightness", -64));
    assert_int_equal(F.ctrls[0].value, -64);
    TU_OK(mk_source_set_control(src, "auto_exposure", 1));
    int s_ctrls = F.s_ctrls;
    assert_int_equal(mk_source_set_control(src, "exposure_time_absolute", 0), MK_ERANGE);
    assert_int_equal(mk_source_set_control(src, "exposure_time_absolute", 5002), MK_ERANGE);
    assert_int_equal(mk_source_set_control(src, "exposure_time_absolute", 301), MK_ERANGE); /* off the step */
    assert_int_equal(mk_source_set_control(src, "brightness", 65), MK_ERANGE);
    assert_int_equal(mk_source_set_control(src, "zoom", 1), MK_EINVAL);
    assert_int_equal(mk_source_set_control(src, "pan_absolute", 0), MK_EINVAL); /* read-only */
    assert_int_equal(F.s_ctrls, s_ctrls);
    assert_int_equal(mk_source_get_control(src, "zoom", &v), MK_EINVAL);
    mk_source_close(src);

    /* Sources without controls say so. */
    assert_int_equal(mk_source_open("testpattern:64x48", NULL, &src), 0);
    assert_int_equal(mk_source_set_control(src, "exposure_time_absolute", 300), MK_EUNSUPPORTED);
    assert_int_equal(mk_source_controls(src, &list), 0);
    mk_source_close(src);
}

/* A control list as the option source.controls gives it: every control tried, the refused ones reported without
 * stopping the others; controls dropped from the list go back to their defaults; other sources refuse every one. */
static void test_apply_controls(void **state)
{
    (void)state;
    mk_source_config_t c = config(640, 480, 30, MK_PIXFMT_AUTO);
    mk_source_t *src = open_fake(&c);
    mk_source_control_result_t r[MK_SOURCE_APPLY_MAX];
    const char *list = "exposure_time_absolute=300, Brightness=10,zoom=1,pan_absolute=0,auto_exposure=9";
    assert_int_equal(mk_source_apply_controls(src, list, NULL, r), 5);
    assert_int_equal(F.ctrls[2].value, 300);
    assert_int_equal(F.ctrls[0].value, 10);
    assert_int_equal(F.ctrls[1].value, 3);
    const struct {
        const char *name;
        int64_t value;
        int rc;
        const char *error;
    } want[] = {
        {"exposure_time_absolute", 300, 0, ""},
        {"Brightness", 10, 0, ""},
        {"zoom", 1, MK_EINVAL, "/dev/video7 has no control 'zoom'"},
        {"pan_absolute", 0, MK_EINVAL, "/dev/video7: control pan_absolute is read-only"},
        {"auto_exposure", 9, MK_ERANGE, "/dev/video7: auto_exposure = 9 outside 0..3"},
    };
    for (int i = 0; i < 5; i++) {
        assert_string_equal(r[i].name, want[i].name);
        assert_int_equal(r[i].value, want[i].value);
        assert_int_equal(r[i].rc, want[i].rc);
        assert_string_equal(r[i].error, want[i].error);
        assert_false(r[i].reset);
    }

    /* A new list: the controls dropped from it that the device can take go back to their defaults first. */
    assert_int_equal(mk_source_apply_controls(src, "brightness=20", list, r), 3);
    assert_string_equal(r[0].name, "exposure_time_absolute");
    assert_true(r[0].reset && r[0].rc == 0 && r[0].value == 156);
    assert_string_equal(r[1].name, "auto_exposure");
    assert_true(r[1].reset && r[1].rc == 0 && r[1].value == 3);
    assert_string_equal(r[2].name, "brightness");
    assert_true(!r[2].reset && r[2].rc == 0 && r[2].value == 20);
    assert_int_equal(F.ctrls[2].value, 156);
    assert_int_equal(F.ctrls[0].value, 20);

    /* The values are remembered for a reopen; a list that does not parse tries nothing. */
    int s_ctrls = F.s_ctrls;
    assert_int_equal(mk_source_apply_controls(src, "brightness=1,", "brightness=20", r), MK_EINVAL);
    assert_non_null(strstr(mk_err_msg(), "item 2: a control name"));
    assert_int_equal(F.s_ctrls, s_ctrls);
    assert_int_equal(mk_source_apply_controls(src, "", "", r), 0);
    F.vanish_after = F.dequeues;
    mk_frame_t f;
    assert_int_equal(mk_source_next(src, 1000, &f), MK_SOURCE_LOST);
    F.present = 1;
    F.vanish_after = -1;
    F.ctrls[0].value = 0;
    TU_OK(mk_source_reopen(src, 2000));
    assert_int_equal(F.ctrls[0].value, 20);
    mk_source_close(src);

    /* Other sources: every control refused, saying that controls need a V4L2 camera. */
    TU_OK(mk_source_open("testpattern:64x48", NULL, &src));
    assert_int_equal(mk_source_apply_controls(src, "brightness=1,gain=2", NULL, r), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].rc, MK_EUNSUPPORTED);
        assert_non_null(strstr(r[i].error, "controls need a V4L2 camera"));
    }
    assert_string_equal(r[1].name, "gain");
    assert_int_equal(mk_source_apply_controls(src, "", "brightness=1", r), 0);
    mk_source_close(src);
}

/* stats "source.controls" of a running pipeline. */
static cJSON *pipeline_controls(mk_pipeline_t *p)
{
    cJSON *st = mk_pipeline_stats(p);
    assert_non_null(st);
    cJSON *c = cJSON_DetachItemFromObject(cJSON_GetObjectItem(st, "source"), "controls");
    cJSON_Delete(st);
    assert_non_null(c);
    return c;
}

static int applied(const cJSON *c, const char *name, int value)
{
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "applied"), name);
    return cJSON_IsNumber(v) && v->valueint == value;
}

static int current(const cJSON *c, const char *name)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(c, "available"))
        if (!strcmp(cJSON_GetObjectItem(o, "name")->valuestring, name))
            return cJSON_GetObjectItem(o, "current")->valueint;
    fail_msg("no control %s in source.controls.available", name);
    return 0;
}

/* The pipeline applies source.controls on its capture thread (the one that dequeues the frames): at the start,
 * and after a live change at its next frame; refused controls are reported in stats, dropped ones reset. */
static void test_pipeline_controls(void **state)
{
    (void)state;
    F.modes[F.nmodes++] = (fake_mode_t){V4L2_PIX_FMT_YUYV, 160, 120, {30}};
    mk_config_t cfg;
    mk_config_defaults(&cfg);
    TU_OK(mk_config_set_text(&cfg, "source.spec", "v4l2:/dev/video7"));
    TU_OK(mk_config_set_text(&cfg, "source.size", "160x120"));
    TU_OK(mk_config_set_text(&cfg, "source.format", "yuyv"));
    TU_OK(mk_config_set_text(&cfg, "source.controls", "brightness=10, zoom=1"));
    TU_OK(mk_config_set_text(&cfg, "backend", "cpu"));
    TU_OK(mk_config_set_text(&cfg, "idle.enable", "false"));
    char instance[64];
    snprintf(instance, sizeof instance, "tv4l2-%d", (int)getpid());
    mk_pipeline_opts_t opts = {instance, NULL, &fake_sys};
    mk_pipeline_t *p;
    TU_OK(mk_pipeline_create(&opts, &cfg, &p));
    TU_OK(mk_pipeline_start(p));

    cJSON *c = NULL;
    for (int i = 0; i < 500 && !(c && applied(c, "brightness", 10)); i++) {
        cJSON_Delete(c);
        sleep_ms(10);
        c = pipeline_controls(p);
    }
    assert_true(applied(c, "brightness", 10));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "applied")), 1);
    const cJSON *errors = cJSON_GetObjectItem(c, "errors");
    assert_int_equal(cJSON_GetArraySize(errors), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(errors, 0), "control")->valuestring, "zoom");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(errors, 0), "error")->valuestring,
                        "/dev/video7 has no control 'zoom'");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "available")), 4);
    assert_int_equal(current(c, "brightness"), 10);
    assert_int_equal(current(c, "exposure_time_absolute"), 156);
    cJSON_Delete(c);

    /* A live change, committed by the process thread: the capture thread applies it at its next frame. */
    mk_config_t now;
    mk_pipeline_get_config(p, &now);
    mk_config_txn_t *t = mk_config_txn_new(&now, MK_CFG_TXN_LIVE);
    TU_OK(mk_config_txn_set(t, "source.controls", "exposure_time_absolute=300"));
    assert_int_equal(mk_pipeline_apply(p, t, 2000), 1);
    mk_config_txn_free(t);
    c = NULL;
    for (int i = 0; i < 500 && !(c && applied(c, "exposure_time_absolute", 300)); i++) {
        cJSON_Delete(c);
        sleep_ms(10);
        c = pipeline_controls(p);
    }
    assert_true(applied(c, "exposure_time_absolute", 300));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "applied")), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "errors")), 0);
    assert_int_equal(current(c, "brightness"), 0); /* dropped from the list: back to its default */
    assert_int_equal(current(c, "exposure_time_absolute"), 300);
    cJSON_Delete(c);
    for (int i = 0; i < 500 && !mk_pipeline_published(p); i++)
        sleep_ms(10);
    assert_true(mk_pipeline_published(p) > 0); /* and masks came from the camera's frames */
    mk_pipeline_destroy(p);

    assert_int_equal(F.ctrls[0].value, 0);
    assert_int_equal(F.ctrls[2].value, 300);
    assert_true(pthread_equal(F.s_ctrl_thread, F.dq_thread));
    assert_false(pthread_equal(F.s_ctrl_thread, pthread_self()));
    char shm[128];
    snprintf(shm, sizeof shm, "/dev/shm/maskd.%s", instance);
    unlink(shm);
    snprintf(shm, sizeof shm, "/dev/shm/maskd.%s.readers", instance);
    unlink(shm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_negotiation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiation_fallbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiation_stepwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streaming_mjpeg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streaming_yuyv_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_then_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanish_and_return, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_for_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_controls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_controls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipeline_controls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
