/* source_v4l2: a V4L2 capture device — capabilities, mode negotiation (format, nearest size and frame interval),
 * mmap streaming, poll with timeout, loss detection, reopen and controls — with every system call made through
 * the mk_v4l2_sys_t seam. */
#include "source_internal.h"

#include "errors.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/videodev2.h>

#define MIN_BUFFERS 4
#define MAX_BUFFERS 32
#define MAX_CONTROLS 128
#define MAX_APPLIED 32
#define TS_PLAUSIBLE_NS 5000000000LL /* a driver timestamp older than this is not believed */

typedef struct {
    void *start;
    size_t length;
} vbuf_t;

typedef struct {
    uint32_t id;
    int32_t value;
} applied_t;

typedef struct {
    const mk_v4l2_sys_t *sys;
    char path[256];
    int fd;
    int streaming;
    vbuf_t bufs[MAX_BUFFERS];
    int nbufs;
    uint32_t pixfmt;
    int width, height;
    uint32_t bytesperline;
    double fps;
    int64_t last_frame_ns;
    uint32_t last_seq;
    int have_seq;
    mk_source_control_t ctrls[MAX_CONTROLS];
    int nctrls;
    applied_t applied[MAX_APPLIED];
    int napplied;
} v4l2_t;

/* ---- the real system calls ------------------------------------------------------------------------------- */

static int sys_open(void *u, const char *path, int flags)
{
    (void)u;
    return open(path, flags);
}

static int sys_close(void *u, int fd)
{
    (void)u;
    return close(fd);
}

static int sys_ioctl(void *u, int fd, unsigned long req, void *arg)
{
    (void)u;
    return ioctl(fd, req, arg);
}

static void *sys_mmap(void *u, size_t len, int prot, int flags, int fd, off_t off)
{
    (void)u;
    return mmap(NULL, len, prot, flags, fd, off);
}

static int sys_munmap(void *u, void *addr, size_t len)
{
    (void)u;
    return munmap(addr, len);
}

static int sys_poll(void *u, struct pollfd *fds, nfds_t n, int timeout_ms)
{
    (void)u;
    return poll(fds, n, timeout_ms);
}

static const mk_v4l2_sys_t real_sys = {NULL, sys_open, sys_close, sys_ioctl, sys_mmap, sys_munmap, sys_poll};

const mk_v4l2_sys_t *mk_v4l2_sys_default(void)
{
    return &real_sys;
}

/* ---- helpers --------------------------------------------------------------------------------------------- */

static int xioctl(v4l2_t *v, unsigned long req, void *arg)
{
    int r;
    do
        r = v->sys->ioctl(v->sys->user, v->fd, req, arg);
    while (r < 0 && errno == EINTR);
    return r;
}

/* Errors that mean the device is gone (unplugged, or the driver gave up on it). */
static int gone(int e)
{
    return e == ENODEV || e == ENXIO || e == EIO || e == EPIPE || e == ESHUTDOWN || e == EBADF;
}

static void fourcc_str(uint32_t f, char out[5])
{
    for (int i = 0; i < 4; i++) {
        char c = (char)(f >> (8 * i) & 0xff);
        out[i] = isprint((unsigned char)c) ? c : '?';
    }
    out[4] = '\0';
}

static int is_mjpeg(uint32_t f)
{
    return f == V4L2_PIX_FMT_MJPEG || f == V4L2_PIX_FMT_JPEG;
}

/* ---- negotiation ----------------------------------------------------------------------------------------- */

typedef struct {
    uint32_t fourcc;
    int w, h;
    uint32_t num, den; /* frame interval in seconds (0/0: the driver does not say) */
    double fps;
} vmode_t;

static int64_t size_dist(int w, int h, int W, int H)
{
    return (int64_t)abs(w - W) + abs(h - H);
}

static int snap(int want, uint32_t lo, uint32_t hi, uint32_t step)
{
    int64_t v = want < (int64_t)lo ? (int64_t)lo : want > (int64_t)hi ? (int64_t)hi : want;
    if (step > 1)
        v = lo + (v - lo + step / 2) / step * step;
    return (int)(v > hi ? v - step : v);
}

/* The supported size nearest to W x H (L1 distance; ties to the larger); W x H itself when the driver cannot
 * enumerate sizes. */
static void nearest_size(v4l2_t *v, uint32_t fourcc, int W, int H, int *w, int *h)
{
    struct v4l2_frmsizeenum fs;
    int64_t best = -1;
    *w = W;
    *h = H;
    for (uint32_t i = 0; i < 256; i++) {
        memset(&fs, 0, sizeof fs);
        fs.index = i;
        fs.pixel_format = fourcc;
        if (xioctl(v, VIDIOC_ENUM_FRAMESIZES, &fs) != 0)
            break;
        if (fs.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
            int cw = (int)fs.discrete.width, ch = (int)fs.discrete.height;
            int64_t d = size_dist(cw, ch, W, H);
            if (best < 0 || d < best || (d == best && (int64_t)cw * ch > (int64_t)*w * *h)) {
                best = d;
                *w = cw;
                *h = ch;
            }
        } else {
            *w = snap(W, fs.stepwise.min_width, fs.stepwise.max_width, fs.stepwise.step_width);
            *h = snap(H, fs.stepwise.min_height, fs.stepwise.max_height, fs.stepwise.step_height);
            return;
        }
    }
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A stepwise or continuous interval range: the bound when 1 / fps lies beyond it, else min + k * step (stepwise)
 * or 1 / fps itself (continuous), kept as an exact fraction. */
static void stepwise_interval(const struct v4l2_frmivalenum *fi, vmode_t *m, double fps)
{
    struct v4l2_fract lo = fi->stepwise.min, hi = fi->stepwise.max, st = fi->stepwise.step;
    if (!lo.numerator || !lo.denominator || !hi.numerator || !hi.denominator)
        return;
    double tmin = (double)lo.numerator / lo.denominator, tmax = (double)hi.numerator / hi.denominator;
    double t = fps > 0 ? 1.0 / fps : tmin;
    uint64_t num, den;
    if (t <= tmin) {
        num = lo.numerator, den = lo.denominator;
    } else if (t >= tmax) {
        num = hi.numerator, den = hi.denominator;
    } else if (fi->type == V4L2_FRMIVAL_TYPE_STEPWISE && st.numerator && st.denominator) {
        uint64_t k = (uint64_t)floor((t - tmin) / ((double)st.numerator / st.denominator) + 0.5);
        num = (uint64_t)lo.numerator * st.denominator + k * st.numerator * lo.denominator;
        den = (uint64_t)lo.denominator * st.denominator;
        if ((double)num / den > tmax)
            num = hi.numerator, den = hi.denominator;
    } else {
        num = 1000, den = (uint64_t)llround(fps * 1000);
    }
    uint64_t g = gcd64(num, den);
    num /= g, den /= g;
    while (num > UINT32_MAX || den > UINT32_MAX)
        num = (num + 1) / 2, den = (den + 1) / 2;
    m->num = (uint32_t)num;
    m->den = (uint32_t)den;
    m->fps = (double)m->den / m->num;
}

/* The supported frame interval nearest to 1 / fps (ties to the faster; fps 0: the fastest). */
static void nearest_interval(v4l2_t *v, vmode_t *m, double fps)
{
    struct v4l2_frmivalenum fi;
    m->num = m->den = 0;
    m->fps = 0;
    for (uint32_t i = 0; i < 256; i++) {
        memset(&fi, 0, sizeof fi);
        fi.index = i;
        fi.pixel_format = m->fourcc;
        fi.width = (uint32_t)m->w;
        fi.height = (uint32_t)m->h;
        if (xioctl(v, VIDIOC_ENUM_FRAMEINTERVALS, &fi) != 0)
            break;
        if (fi.type == V4L2_FRMIVAL_TYPE_DISCRETE) {
            if (!fi.discrete.numerator || !fi.discrete.denominator)
                continue;
            double f = (double)fi.discrete.denominator / fi.discrete.numerator;
            int better;
            if (!m->num) {
                better = 1;
            } else if (fps > 0) {
                double d = fabs(f - fps), bd = fabs(m->fps - fps);
                better = d < bd - 1e-9 || (fabs(d - bd) <= 1e-9 && f > m->fps);
            } else {
                better = f > m->fps;
            }
            if (better) {
                m->num = fi.discrete.numerator;
                m->den = fi.discrete.denominator;
                m->fps = f;
            }
        } else {
            stepwise_interval(&fi, m, fps);
            return;
        }
    }
}

/* Picks format, size and rate among the device's MJPEG and YUYV modes (see mk_pixfmt_pref_t). */
static int choose_mode(mk_source_t *s, v4l2_t *v, vmode_t *out)
{
    int W = s->cfg.width, H = s->cfg.height;
    if (!W) {
        struct v4l2_format cur = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
        if (xioctl(v, VIDIOC_G_FMT, &cur) == 0 && cur.fmt.pix.width && cur.fmt.pix.height) {
            W = (int)cur.fmt.pix.width;
            H = (int)cur.fmt.pix.height;
        } else {
            W = 640;
            H = 480;
        }
    }
    vmode_t cand[2] = {{0}};
    int have[2] = {0, 0}; /* 0: MJPEG, 1: YUYV */
    char listed[256] = "";
    for (uint32_t i = 0; i < 64; i++) {
        struct v4l2_fmtdesc fd = {.index = i, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
        if (xioctl(v, VIDIOC_ENUM_FMT, &fd) != 0)
            break;
        char cc[5];
        fourcc_str(fd.pixelformat, cc);
        size_t l = strlen(listed);
        snprintf(listed + l, sizeof listed - l, "%s%s", l ? " " : "", cc);
        int k = is_mjpeg(fd.pixelformat) ? 0 : fd.pixelformat == V4L2_PIX_FMT_YUYV ? 1 : -1;
        if (k < 0 || have[k])
            continue;
        have[k] = 1;
        cand[k].fourcc = fd.pixelformat;
        nearest_size(v, fd.pixelformat, W, H, &cand[k].w, &cand[k].h);
        nearest_interval(v, &cand[k], s->cfg.fps);
        MK_DEBUG("%s: %s nearest to %dx%d: %dx%d @ %.3g fps", v->path, cc, W, H, cand[k].w, cand[k].h, cand[k].fps);
    }
    if (!have[0] && !have[1])
        return mk_err_set(MK_EUNSUPPORTED, "%s offers neither MJPEG nor YUYV (it has: %s)", v->path,
                          listed[0] ? listed : "nothing");
    int pick;
    if (s->cfg.pixfmt == MK_PIXFMT_MJPEG && have[0])
        pick = 0;
    else if (s->cfg.pixfmt == MK_PIXFMT_YUYV && have[1])
        pick = 1;
    else if (!have[1])
        pick = 0;
    else if (!have[0])
        pick = 1;
    else {
        int64_t d0 = size_dist(cand[0].w, cand[0].h, W, H), d1 = size_dist(cand[1].w, cand[1].h, W, H);
        double want = s->cfg.fps;
        double f0 = want > 0 && cand[0].fps > want ? want : cand[0].fps;
        double f1 = want > 0 && cand[1].fps > want ? want : cand[1].fps;
        pick = d1 < d0 || (d1 == d0 && f1 > f0 + 1e-6) ? 1 : 0;
    }
    if (s->cfg.pixfmt != MK_PIXFMT_AUTO && pick != (s->cfg.pixfmt == MK_PIXFMT_YUYV))
        MK_WARN("%s has no %s: using %s", v->path, s->cfg.pixfmt == MK_PIXFMT_YUYV ? "YUYV" : "MJPEG",
                pick ? "YUYV" : "MJPEG");
    *out = cand[pick];
    return 0;
}

static int set_mode(mk_source_t *s, v4l2_t *v, const vmode_t *m)
{
    struct v4l2_format f = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
    f.fmt.pix.width = (uint32_t)m->w;
    f.fmt.pix.height = (uint32_t)m->h;
    f.fmt.pix.pixelformat = m->fourcc;
    f.fmt.pix.field = V4L2_FIELD_ANY;
    if (xioctl(v, VIDIOC_S_FMT, &f) != 0)
        return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: VIDIOC_S_FMT: %s", v->path, strerror(errno));
    char cc[5];
    fourcc_str(f.fmt.pix.pixelformat, cc);
    if (!is_mjpeg(f.fmt.pix.pixelformat) && f.fmt.pix.pixelformat != V4L2_PIX_FMT_YUYV)
        return mk_err_set(MK_EUNSUPPORTED, "%s: the driver switched to format %s", v->path, cc);
    if (f.fmt.pix.width < 1 || f.fmt.pix.height < 1 || f.fmt.pix.width > MK_IMAGE_MAX_DIM ||
        f.fmt.pix.height > MK_IMAGE_MAX_DIM || (f.fmt.pix.pixelformat == V4L2_PIX_FMT_YUYV && f.fmt.pix.width % 2))
        return mk_err_set(MK_EUNSUPPORTED, "%s: the driver set an unusable size %ux%u", v->path, f.fmt.pix.width,
                          f.fmt.pix.height);
    v->pixfmt = f.fmt.pix.pixelformat;
    v->width = (int)f.fmt.pix.width;
    v->height = (int)f.fmt.pix.height;
    v->bytesperline = f.fmt.pix.bytesperline;
    if (v->pixfmt == V4L2_PIX_FMT_YUYV && v->bytesperline < 2 * f.fmt.pix.width)
        v->bytesperline = 2 * f.fmt.pix.width;

    v->fps = 0;
    struct v4l2_streamparm p = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
    if (m->num && m->den) {
        p.parm.capture.timeperframe.numerator = m->num;
        p.parm.capture.timeperframe.denominator = m->den;
        if (xioctl(v, VIDIOC_S_PARM, &p) != 0) {
            MK_DEBUG("%s: VIDIOC_S_PARM: %s", v->path, strerror(errno));
            memset(&p, 0, sizeof p);
            p.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
            if (xioctl(v, VIDIOC_G_PARM, &p) != 0)
                memset(&p, 0, sizeof p);
        }
    } else if (xioctl(v, VIDIOC_G_PARM, &p) != 0) {
        memset(&p, 0, sizeof p);
    }
    if (p.parm.capture.timeperframe.numerator && p.parm.capture.timeperframe.denominator)
        v->fps = (double)p.parm.capture.timeperframe.denominator / p.parm.capture.timeperframe.numerator;
    else
        v->fps = m->fps;
    if ((s->cfg.width && (v->width != s->cfg.width || v->height != s->cfg.height)) ||
        (s->cfg.fps > 0 && fabs(v->fps - s->cfg.fps) > 0.01))
        MK_INFO("%s: %s %dx%d @ %.3g fps (asked for %dx%d @ %.3g fps: the nearest the device offers)", v->path, cc,
                v->width, v->height, v->fps, s->cfg.width, s->cfg.height, s->cfg.fps);
    return 0;
}

/* ---- controls -------------------------------------------------------------------------------------------- */

static void enum_controls(v4l2_t *v)
{
    struct v4l2_queryctrl q;
    memset(&q, 0, sizeof q);
    q.id = V4L2_CTRL_FLAG_NEXT_CTRL;
    v->nctrls = 0;
    while (v->nctrls < MAX_CONTROLS && xioctl(v, VIDIOC_QUERYCTRL, &q) == 0) {
        if (!(q.flags & V4L2_CTRL_FLAG_DISABLED) && q.type != V4L2_CTRL_TYPE_CTRL_CLASS) {
            mk_source_control_t *c = &v->ctrls[v->nctrls++];
            char name[sizeof q.name + 1];
            memcpy(name, q.name, sizeof q.name);
            name[sizeof q.name] = '\0';
            mk_source_control_name(name, c->name, sizeof c->name);
            c->id = q.id;
            c->type = (int)q.type;
            c->min = q.minimum;
            c->max = q.maximum;
            c->step = q.step;
            c->def = q.default_value;
            c->flags = q.flags;
        }
        q.id |= V4L2_CTRL_FLAG_NEXT_CTRL;
    }
}

static const mk_source_control_t *find_control(const v4l2_t *v, const char *name)
{
    char want[64];
    mk_source_control_name(name, want, sizeof want);
    for (int i = 0; i < v->nctrls; i++)
        if (!strcmp(v->ctrls[i].name, want))
            return &v->ctrls[i];
    return NULL;
}

static int apply_control(v4l2_t *v, uint32_t id, int32_t value, const char *name)
{
    struct v4l2_control c = {.id = id, .value = value};
    if (xioctl(v, VIDIOC_S_CTRL, &c) != 0)
        return mk_err_set(gone(errno) ? MK_ENODEV : MK_EINVAL, "%s: setting %s to %d failed: %s", v->path, name,
                          (int)value, strerror(errno));
    return 0;
}

/* ---- start / stop ---------------------------------------------------------------------------------------- */

static void stop(v4l2_t *v)
{
    if (v->fd < 0)
        return;
    if (v->streaming) {
        int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        xioctl(v, VIDIOC_STREAMOFF, &type);
        v->streaming = 0;
    }
    for (int i = 0; i < v->nbufs; i++)
        if (v->bufs[i].start)
            v->sys->munmap(v->sys->user, v->bufs[i].start, v->bufs[i].length);
    if (v->nbufs) {
        struct v4l2_requestbuffers rb = {.count = 0, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
        xioctl(v, VIDIOC_REQBUFS, &rb);
    }
    memset(v->bufs, 0, sizeof v->bufs);
    v->nbufs = 0;
    v->sys->close(v->sys->user, v->fd);
    v->fd = -1;
}

static int setup_buffers(mk_source_t *s, v4l2_t *v)
{
    int want = s->cfg.buffers < MIN_BUFFERS ? MIN_BUFFERS : s->cfg.buffers;
    struct v4l2_requestbuffers rb = {.count = (uint32_t)want, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE,
                                     .memory = V4L2_MEMORY_MMAP};
    if (xioctl(v, VIDIOC_REQBUFS, &rb) != 0)
        return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: VIDIOC_REQBUFS: %s", v->path, strerror(errno));
    if (rb.count < 2)
        return mk_err_set(MK_EUNSUPPORTED, "%s: the driver gave %u buffers (at least 2 needed)", v->path, rb.count);
    if (rb.count < MIN_BUFFERS)
        MK_WARN("%s: the driver gave only %u of %d buffers", v->path, rb.count, want);
    v->nbufs = rb.count > MAX_BUFFERS ? MAX_BUFFERS : (int)rb.count;
    for (int i = 0; i < v->nbufs; i++) {
        struct v4l2_buffer b = {.index = (uint32_t)i, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
        if (xioctl(v, VIDIOC_QUERYBUF, &b) != 0)
            return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: VIDIOC_QUERYBUF %d: %s", v->path, i,
                              strerror(errno));
        void *p = v->sys->mmap(v->sys->user, b.length, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, (off_t)b.m.offset);
        if (p == MAP_FAILED)
            return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: mmap of buffer %d: %s", v->path, i,
                              strerror(errno));
        v->bufs[i].start = p;
        v->bufs[i].length = b.length;
    }
    for (int i = 0; i < v->nbufs; i++) {
        struct v4l2_buffer b = {.index = (uint32_t)i, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
        if (xioctl(v, VIDIOC_QBUF, &b) != 0)
            return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: VIDIOC_QBUF %d: %s", v->path, i,
                              strerror(errno));
    }
    int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (xioctl(v, VIDIOC_STREAMON, &type) != 0)
        return mk_err_set(gone(errno) ? MK_ENODEV : MK_EIO, "%s: VIDIOC_STREAMON: %s", v->path, strerror(errno));
    v->streaming = 1;
    return 0;
}

/* Opens the device and starts streaming; on failure everything is undone. */
static int start(mk_source_t *s, v4l2_t *v)
{
    v->fd = v->sys->open(v->sys->user, v->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (v->fd < 0) {
        int e = errno;
        return mk_err_set(e == ENOENT || e == ENODEV || e == ENXIO ? MK_ENODEV : MK_EIO, "cannot open %s: %s",
                          v->path, strerror(e));
    }
    int rc = 0;
    struct v4l2_capability cap;
    memset(&cap, 0, sizeof cap);
    if (xioctl(v, VIDIOC_QUERYCAP, &cap) != 0) {
        rc = mk_err_set(gone(errno) ? MK_ENODEV : MK_EUNSUPPORTED, "%s: VIDIOC_QUERYCAP: %s (not a V4L2 device?)",
                        v->path, strerror(errno));
        goto fail;
    }
    uint32_t caps = cap.capabilities & V4L2_CAP_DEVICE_CAPS ? cap.device_caps : cap.capabilities;
    if (!(caps & V4L2_CAP_VIDEO_CAPTURE)) {
        rc = mk_err_set(MK_EUNSUPPORTED, "%s is not a single-planar video capture device%s", v->path,
                        caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE ? " (multi-planar devices are not supported)" : "");
        goto fail;
    }
    if (!(caps & V4L2_CAP_STREAMING)) {
        rc = mk_err_set(MK_EUNSUPPORTED, "%s cannot stream (no V4L2_CAP_STREAMING)", v->path);
        goto fail;
    }
    snprintf(s->info.card, sizeof s->info.card, "%.*s", (int)sizeof cap.card, (const char *)cap.card);
    snprintf(s->info.driver, sizeof s->info.driver, "%.*s", (int)sizeof cap.driver, (const char *)cap.driver);
    vmode_t m = {0};
    if ((rc = choose_mode(s, v, &m)) || (rc = set_mode(s, v, &m)) || (rc = setup_buffers(s, v)))
        goto fail;
    enum_controls(v);
    for (int i = 0; i < v->napplied; i++) {
        const applied_t *a = &v->applied[i];
        if (apply_control(v, a->id, a->value, "a control") != 0)
            MK_WARN("%s", mk_err_msg());
    }
    v->last_frame_ns = mk_source_now_ns();
    v->have_seq = 0;
    s->max_held = v->nbufs - 2 > 0 ? v->nbufs - 2 : 1;
    s->info.frame_kind = is_mjpeg(v->pixfmt) ? MK_FRAME_MJPEG : MK_FRAME_RAW;
    s->info.raw_format = MK_FMT_YUYV;
    s->info.width = v->width;
    s->info.height = v->height;
    s->info.fps = v->fps;
    s->info.buffers = v->nbufs;
    return 0;
fail:
    stop(v);
    return rc;
}

/* ---- backend --------------------------------------------------------------------------------------------- */

static int requeue(v4l2_t *v, int index)
{
    struct v4l2_buffer b = {.index = (uint32_t)index, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
    if (xioctl(v, VIDIOC_QBUF, &b) != 0) {
        mk_err_set(MK_ENODEV, "%s: VIDIOC_QBUF: %s", v->path, strerror(errno));
        return MK_SOURCE_LOST;
    }
    return 0;
}

static int64_t frame_time(const struct v4l2_buffer *b, int64_t now)
{
    if ((b->flags & V4L2_BUF_FLAG_TIMESTAMP_MASK) != V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)
        return now;
    int64_t t = (int64_t)b->timestamp.tv_sec * 1000000000 + (int64_t)b->timestamp.tv_usec * 1000;
    return t > 0 && t <= now && now - t < TS_PLAUSIBLE_NS ? t : now;
}

static int v4l2_next(mk_source_t *s, int timeout_ms, mk_frame_t *f)
{
    v4l2_t *v = s->impl;
    int64_t deadline = mk_source_deadline(timeout_ms);
    for (;;) {
        struct v4l2_buffer b = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
        if (xioctl(v, VIDIOC_DQBUF, &b) == 0) {
            int64_t now = mk_source_now_ns();
            if (b.index >= (uint32_t)v->nbufs) {
                mk_err_set(MK_EIO, "%s: the driver returned buffer %u of %d", v->path, b.index, v->nbufs);
                return MK_SOURCE_LOST;
            }
            v->last_frame_ns = now;
            uint32_t gap = v->have_seq && b.sequence > v->last_seq + 1 ? b.sequence - v->last_seq - 1 : 0;
            v->last_seq = b.sequence;
            v->have_seq = 1;
            if (gap) {
                f->dropped += gap;
                s->stats.dropped += gap;
            }
            size_t need = v->pixfmt == V4L2_PIX_FMT_YUYV ? (size_t)v->bytesperline * (size_t)v->height : 1;
            if ((b.flags & V4L2_BUF_FLAG_ERROR) || b.bytesused < need || b.bytesused > v->bufs[b.index].length) {
                s->stats.corrupt++;
                MK_LOG_RL(5000, MK_LOG_WARN, "%s: bad buffer (flags 0x%x, %u bytes): skipped", v->path, b.flags,
                          b.bytesused);
                if (requeue(v, (int)b.index))
                    return MK_SOURCE_LOST;
                continue;
            }
            if (f->dropped)
                f->flags |= MK_FRAME_F_GAP;
            f->capture_ns = frame_time(&b, now);
            f->width = v->width;
            f->height = v->height;
            f->slot_ = (int)b.index;
            if (is_mjpeg(v->pixfmt)) {
                f->kind = MK_FRAME_MJPEG;
                f->data = v->bufs[b.index].start;
                f->len = b.bytesused;
            } else {
                f->kind = MK_FRAME_RAW;
                f->image = mk_image_desc(v->width, v->height, MK_FMT_YUYV, MK_U8);
                f->image.pitch = v->bytesperline;
                f->image.mem = MK_MEM_HOST;
                f->image.data = v->bufs[b.index].start;
            }
            return MK_SOURCE_FRAME;
        }
        if (errno != EAGAIN) {
            mk_err_set(MK_ENODEV, "%s: VIDIOC_DQBUF: %s", v->path, strerror(errno));
            return MK_SOURCE_LOST;
        }
        int64_t lost_at = v->last_frame_ns + (int64_t)s->cfg.lost_ms * 1000000;
        int wait = mk_source_ms_left(deadline), lost_left = mk_source_ms_left(lost_at);
        if (lost_left == 0) {
            mk_err_set(MK_ENODEV, "%s: no frame for %d ms", v->path, s->cfg.lost_ms);
            return MK_SOURCE_LOST;
        }
        if (wait == 0)
            return MK_SOURCE_TIMEOUT;
        if (wait < 0 || lost_left < wait)
            wait = lost_left;
        struct pollfd pfd = {.fd = v->fd, .events = POLLIN};
        int r = v->sys->poll(v->sys->user, &pfd, 1, wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            mk_err_set(MK_ENODEV, "%s: poll: %s", v->path, strerror(errno));
            return MK_SOURCE_LOST;
        }
        if (r > 0 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))) {
            mk_err_set(MK_ENODEV, "%s: poll reports %s", v->path,
                       pfd.revents & POLLHUP ? "a hang-up" : pfd.revents & POLLNVAL ? "a closed descriptor" : "an error");
            return MK_SOURCE_LOST;
        }
    }
}

static int v4l2_release(mk_source_t *s, int slot)
{
    v4l2_t *v = s->impl;
    if (s->state != MK_SOURCE_STATE_OPEN || v->fd < 0 || slot >= v->nbufs)
        return 0; /* lost: the buffers go when the device is reopened or closed */
    return requeue(v, slot);
}

static int v4l2_reopen(mk_source_t *s)
{
    v4l2_t *v = s->impl;
    stop(v);
    return start(s, v);
}

static void v4l2_close(mk_source_t *s)
{
    v4l2_t *v = s->impl;
    stop(v);
    free(v);
    s->impl = NULL;
}

static int v4l2_set_control(mk_source_t *s, const char *name, int64_t value)
{
    v4l2_t *v = s->impl;
    const mk_source_control_t *c = find_control(v, name);
    if (!c)
        return mk_err_set(MK_EINVAL, "%s has no control '%s'", v->path, name);
    if (c->type != V4L2_CTRL_TYPE_INTEGER && c->type != V4L2_CTRL_TYPE_BOOLEAN && c->type != V4L2_CTRL_TYPE_MENU &&
        c->type != V4L2_CTRL_TYPE_INTEGER_MENU && c->type != V4L2_CTRL_TYPE_BUTTON)
        return mk_err_set(MK_EUNSUPPORTED, "%s: control %s has type %d (integer, boolean, menu or button only)",
                          v->path, c->name, c->type);
    if (c->flags & V4L2_CTRL_FLAG_READ_ONLY)
        return mk_err_set(MK_EINVAL, "%s: control %s is read-only", v->path, c->name);
    if (c->type != V4L2_CTRL_TYPE_BUTTON) {
        if (value < c->min || value > c->max)
            return mk_err_set(MK_ERANGE, "%s: %s = %lld outside %lld..%lld", v->path, c->name, (long long)value,
                              (long long)c->min, (long long)c->max);
        if (c->step > 1 && (value - c->min) % c->step)
            return mk_err_set(MK_ERANGE, "%s: %s = %lld is not %lld + a multiple of %lld", v->path, c->name,
                              (long long)value, (long long)c->min, (long long)c->step);
    }
    if (s->state == MK_SOURCE_STATE_OPEN) {
        int rc = apply_control(v, c->id, (int32_t)value, c->name);
        if (rc)
            return rc;
    }
    if (c->type == V4L2_CTRL_TYPE_BUTTON)
        return 0;
    int i = 0;
    while (i < v->napplied && v->applied[i].id != c->id)
        i++;
    if (i == MAX_APPLIED)
        return mk_err_set(MK_ERANGE, "%s: more than %d controls set", v->path, MAX_APPLIED);
    v->applied[i] = (applied_t){c->id, (int32_t)value};
    if (i == v->napplied)
        v->napplied++;
    return 0;
}

static int v4l2_get_control(mk_source_t *s, const char *name, int64_t *value)
{
    v4l2_t *v = s->impl;
    const mk_source_control_t *c = find_control(v, name);
    if (!c)
        return mk_err_set(MK_EINVAL, "%s has no control '%s'", v->path, name);
    if (s->state != MK_SOURCE_STATE_OPEN)
        return mk_err_set(MK_ESTATE, "%s is lost: control %s cannot be read", v->path, c->name);
    struct v4l2_control ctl = {.id = c->id};
    if (xioctl(v, VIDIOC_G_CTRL, &ctl) != 0)
        return mk_err_set(gone(errno) ? MK_ENODEV : MK_EINVAL, "%s: reading %s failed: %s", v->path, c->name,
                          strerror(errno));
    *value = ctl.value;
    return 0;
}

static int v4l2_controls(const mk_source_t *s, const mk_source_control_t **list)
{
    const v4l2_t *v = s->impl;
    *list = v->ctrls;
    return v->nctrls;
}

static const mk_source_ops_t v4l2_ops = {
    .next = v4l2_next,
    .release = v4l2_release,
    .reopen = v4l2_reopen,
    .close = v4l2_close,
    .set_control = v4l2_set_control,
    .get_control = v4l2_get_control,
    .controls = v4l2_controls,
};

int mk_source_v4l2_open(mk_source_t *s, const char *path)
{
    v4l2_t *v = calloc(1, sizeof *v);
    if (!v)
        return mk_err_set(MK_ENOMEM, "v4l2 source: out of memory");
    v->sys = s->cfg.sys;
    v->fd = -1;
    snprintf(v->path, sizeof v->path, "%s", path);
    s->ops = &v4l2_ops;
    s->impl = v;
    s->info.kind = "v4l2";
    snprintf(s->info.path, sizeof s->info.path, "%s", path);
    s->max_held = 1;
    int rc = start(s, v);
    if (rc == MK_ENODEV && s->cfg.wait_for_device) {
        mk_source_mark_lost(s, mk_err_msg());
        return 0;
    }
    if (rc)
        v4l2_close(s);
    return rc;
}
