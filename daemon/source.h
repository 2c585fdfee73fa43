/* source: where frames come from — a V4L2 camera, a file (JPEG directory, MJPEG AVI, raw MJPEG stream, Y4M) or the
 * built-in test pattern — behind one interface that the pipeline drives.
 *
 * Spec strings (mk_source_open):
 *   testpattern[:WxH[@FPS]]  the synthetic scene of testpattern.h (RGB24); WxH and FPS override the config,
 *                            default 640x480 at 30 fps
 *   v4l2:/dev/videoN         a V4L2 capture device (single-planar, mmap streaming); the config's size, fps and
 *                            format preference are negotiated to the nearest mode the driver offers (logged)
 *   file:PATH                PATH is a directory of JPEGs (*.jpg, *.jpeg, in version order of their names), an
 *                            MJPEG AVI (RIFF; idx1 index or a scan of the movi list), a raw MJPEG stream
 *                            (concatenated JPEGs) or a Y4M file; the kind is read from the content, not the name;
 *                            anything but a regular file or a directory (a FIFO, a device) is refused at once
 *                            (MK_EUNSUPPORTED), never opened for reading (a FIFO's open would wait for a writer)
 *
 * Frames. mk_source_next() hands out one frame, either compressed (MK_FRAME_MJPEG: the JPEG bytes, which may lack
 * Huffman tables: decode.h inserts them) or raw (MK_FRAME_RAW: a host mk_image_t in YUYV, RGB or BGR). A Y4M file is
 * delivered as YUYV: 4:2:0 chroma rows are repeated, 4:4:4 chroma is taken at the even columns (co-sited
 * subsampling), mono gets neutral chroma (128); no arithmetic on samples, so odd widths are refused.
 *
 * Ownership. The frame's bytes belong to the source and stay valid until mk_source_release(src, frame); a V4L2
 * frame *is* a driver buffer (mmap), given back to the driver (VIDIOC_QBUF) only on release, so hold frames
 * briefly: at most mk_source_max_held() at once (V4L2: buffers - 2, so that the driver always has two to fill);
 * asking for one more fails with MK_ESTATE. Every frame is released exactly once, also after MK_SOURCE_LOST, and all
 * of them before mk_source_reopen(); mk_source_close() invalidates frames still held.
 *
 * Time. capture_ns is CLOCK_MONOTONIC: a V4L2 buffer timestamp when the driver stamps it with the monotonic clock
 * (V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC, and it is plausible), otherwise the time of the dequeue or of the delivery.
 * Files and the test pattern are paced in real time at their rate (config fps, else the file's own rate — AVI
 * strh rate, Y4M F — else 30) unless `realtime` is off; a consumer that falls behind is not made up for with a
 * burst: the schedule restarts from now.
 *
 * Loss and recovery. A camera that vanishes (ENODEV, ENXIO, EIO, EPIPE, POLLERR/POLLHUP) or sends nothing for
 * `lost_ms` makes mk_source_next() return MK_SOURCE_LOST, and every later call too, until mk_source_reopen()
 * succeeds. mk_source_reopen() retries with exponential backoff (backoff_min_ms doubling up to backoff_max_ms),
 * waiting at most its timeout for the next attempt, so a pipeline loop can keep calling it (and stay responsive to
 * a stop request) until the camera returns; controls set with mk_source_set_control() are applied again.
 *
 * Return codes: mk_source_next() and mk_source_reopen() return 0 (MK_SOURCE_FRAME / reopened) or one of the
 * positive MK_SOURCE_* statuses below; a negative MK_E* code (errors.h, message in mk_err_msg()) means a real error
 * (bad argument, wrong state, I/O failure of a file).
 *
 * Thread rules: a source is driven by one thread at a time (open, next, release, reopen, controls, close); frames
 * may be read by other threads until they are released. The statistics are read with the same rule. */
#ifndef MK_SOURCE_H
#define MK_SOURCE_H

#include "image.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_source mk_source_t;

/* Statuses of mk_source_next() / mk_source_reopen() (errors are negative). */
enum {
    MK_SOURCE_FRAME = 0,   /* a frame was delivered (next) / the source is open again (reopen) */
    MK_SOURCE_TIMEOUT = 1, /* no frame within the timeout; call again */
    MK_SOURCE_EOS = 2,     /* a file ended and `loop` is off: no more frames */
    MK_SOURCE_LOST = 3,    /* the device vanished or stalled: release frames, call mk_source_reopen() */
};

typedef enum {
    MK_SOURCE_STATE_OPEN = 0,
    MK_SOURCE_STATE_LOST = 1,
    MK_SOURCE_STATE_EOS = 2,
} mk_source_state_t;

typedef enum {
    MK_FRAME_MJPEG = 0, /* data/len: one JPEG */
    MK_FRAME_RAW = 1,   /* image: host u8 YUYV, RGB or BGR */
} mk_frame_kind_t;

/* Frame flags. */
enum {
    MK_FRAME_F_LOOPED = 1u << 0,   /* first frame of a file's next pass (loop) */
    MK_FRAME_F_REOPENED = 1u << 1, /* first frame after mk_source_reopen() */
    MK_FRAME_F_GAP = 1u << 2,      /* the driver skipped frames just before this one (count in `dropped`) */
};

typedef struct {
    mk_frame_kind_t kind;
    uint64_t seq;        /* 0, 1, 2, ... per frame delivered by this source object, across loops and reopens */
    int64_t capture_ns;  /* CLOCK_MONOTONIC */
    uint32_t flags;      /* MK_FRAME_F_* */
    uint32_t dropped;    /* frames the driver skipped just before this one (V4L2 sequence gap) */
    int width, height;   /* MJPEG: the negotiated size or the JPEG's SOF size (0 if unreadable); RAW: the image's */
    const uint8_t *data; /* MJPEG: the JPEG bytes */
    size_t len;
    mk_image_t image;    /* RAW: the pixels (host memory, not owned: never mk_image_free it) */
    const char *name;    /* a JPEG directory: the file's name in it (valid while the source is open); else NULL */
    int slot_;           /* private: which buffer to give back */
} mk_frame_t;

typedef enum {
    MK_PIXFMT_AUTO = 0,  /* MJPEG unless YUYV reaches a nearer size or a higher fps (up to the one asked for) */
    MK_PIXFMT_MJPEG = 1, /* MJPEG if the device has it */
    MK_PIXFMT_YUYV = 2,  /* YUYV if the device has it */
} mk_pixfmt_pref_t;

/* The V4L2 system-call seam: every call the V4L2 source makes goes through these (same contracts as the system
 * calls: -1 and errno on failure), so that tests can put an emulated device behind them. `user` is passed to each. */
typedef struct {
    void *user;
    int (*open)(void *user, const char *path, int flags);
    int (*close)(void *user, int fd);
    int (*ioctl)(void *user, int fd, unsigned long request, void *arg);
    void *(*mmap)(void *user, size_t length, int prot, int flags, int fd, off_t offset);
    int (*munmap)(void *user, void *addr, size_t length);
    int (*poll)(void *user, struct pollfd *fds, nfds_t nfds, int timeout_ms);
} mk_v4l2_sys_t;

/* The real system calls. */
const mk_v4l2_sys_t *mk_v4l2_sys_default(void);

typedef struct {
    int width, height;         /* wanted size; 0x0: the source's own (test pattern 640x480, V4L2 the current) */
    double fps;                /* wanted rate (V4L2) / delivery rate (files, test pattern); 0: the source's own */
    mk_pixfmt_pref_t pixfmt;   /* V4L2 format preference */
    int loop;                  /* files: start again after the last frame (0) */
    int realtime;              /* files and test pattern: deliver at the rate (1) or as fast as asked (0) */
    int buffers;               /* V4L2 mmap buffers (4; at least 4 are asked for, at most 32) and the frames a file
                                  or the test pattern can have out at once */
    int lost_ms;               /* V4L2: no frame for this long -> MK_SOURCE_LOST (3000) */
    int backoff_min_ms;        /* reopen: delay before the first attempt (100) */
    int backoff_max_ms;        /* reopen: cap of the doubling delay (2000) */
    int wait_for_device;       /* V4L2: a device that is absent at open (no such node, ENODEV, ENXIO) gives an open
                                  source in the lost state, brought up by mk_source_reopen() (0: open fails) */
    const mk_v4l2_sys_t *sys;  /* V4L2 system calls (NULL: the real ones) */
} mk_source_config_t;

/* Fills in the defaults given in the comments above. */
void mk_source_config_init(mk_source_config_t *cfg);

typedef struct {
    const char *kind;       /* "v4l2", "testpattern", "jpeg-dir", "avi", "mjpeg", "y4m" */
    char path[256];         /* the device or file (empty for the test pattern) */
    char card[64];          /* V4L2: the card name (VIDIOC_QUERYCAP), else empty */
    char driver[32];
    mk_frame_kind_t frame_kind;
    mk_format_t raw_format; /* RAW frames: MK_FMT_YUYV, MK_FMT_RGB or MK_FMT_BGR */
    int width, height;      /* negotiated / file size (0 when a JPEG directory or stream does not say) */
    double fps;             /* the device's actual rate (0: unknown), or the file's / test pattern's rate */
    int buffers;            /* V4L2 buffers the driver gave, or frame slots */
    long long frames;       /* frames in the file (-1: unknown, e.g. a raw stream or a camera) */
} mk_source_info_t;

typedef struct {
    uint64_t frames;        /* delivered */
    uint64_t corrupt;       /* skipped by the source (driver error flag, short YUYV buffer, truncated Y4M frame,
                             * an unreadable or empty file in a JPEG directory) */
    uint64_t dropped;       /* skipped by the driver (V4L2 sequence gaps) */
    uint64_t timeouts;      /* MK_SOURCE_TIMEOUT returns */
    uint64_t lost;          /* times the source was lost */
    uint64_t reopen_tries;  /* reopen attempts (failed and successful) */
    uint64_t reopens;       /* successful reopens */
    uint64_t loops;         /* file passes restarted */
    uint64_t skipped_bytes; /* raw MJPEG stream: garbage bytes between frames */
} mk_source_stats_t;

/* A control of the device (V4L2 VIDIOC_QUERYCTRL), by its normalised name: lower case, runs of other characters
 * as one '_' ("Exposure Time, Absolute" -> "exposure_time_absolute"). */
typedef struct {
    char name[40];
    uint32_t id;
    int type;               /* V4L2_CTRL_TYPE_INTEGER, _BOOLEAN, _MENU, _INTEGER_MENU, _BUTTON */
    int64_t min, max, step, def;
    uint32_t flags;         /* V4L2_CTRL_FLAG_* */
} mk_source_control_t;

/* One control tried by mk_source_apply_controls(). */
typedef struct {
    char name[40];   /* as the list names it (a reset one: the device's name) */
    int64_t value;   /* the value set (a reset one: the device's default) */
    int reset;       /* 1: dropped from the list, set back to its default */
    int rc;          /* 0: applied; else the refusal's MK_E* code (as mk_source_set_control) */
    char error[256]; /* the refusal's message ("" when applied) */
} mk_source_control_result_t;

/* The most results mk_source_apply_controls() gives: a list's controls and those reset. */
#define MK_SOURCE_APPLY_MAX 64

/* Opens the source named by `spec` with `cfg` (NULL: defaults). */
int mk_source_open(const char *spec, const mk_source_config_t *cfg, mk_source_t **out);
/* Stops streaming, unmaps and frees everything; frames still held become invalid. NULL is a no-op. */
void mk_source_close(mk_source_t *src);

/* Waits up to timeout_ms (0: do not wait; < 0: wait indefinitely, not for V4L2 beyond lost_ms) for the next frame. */
int mk_source_next(mk_source_t *src, int timeout_ms, mk_frame_t *frame);
/* Gives the frame's buffer back (V4L2: queues it to the driver). Returns 0; MK_EINVAL for a frame not held from
 * this source; MK_SOURCE_LOST when the driver refused the buffer because the device is gone (the source is then
 * lost). */
int mk_source_release(mk_source_t *src, mk_frame_t *frame);
/* After MK_SOURCE_LOST: waits (at most timeout_ms) for the next attempt in the backoff schedule and makes it.
 * Returns 0 when the source is open again (also when it was not lost), MK_SOURCE_LOST when it is still lost (call
 * again), MK_ESTATE while frames are still held or after EOS. */
int mk_source_reopen(mk_source_t *src, int timeout_ms);

mk_source_state_t mk_source_state(const mk_source_t *src);
/* The most frames that may be held at once. */
int mk_source_max_held(const mk_source_t *src);
void mk_source_info(const mk_source_t *src, mk_source_info_t *info);
void mk_source_stats(const mk_source_t *src, mk_source_stats_t *st);

/* Device controls (V4L2 only; MK_EUNSUPPORTED elsewhere). set checks the range and step and type (MK_ERANGE,
 * MK_EINVAL for an unknown or read-only control or a value the driver refuses) and remembers the value for reopen;
 * get reads the current value from the device. `list` receives the device's controls (valid until the next
 * reopen or close); the return is their count. */
int mk_source_set_control(mk_source_t *src, const char *name, int64_t value);
int mk_source_get_control(mk_source_t *src, const char *name, int64_t *value);
int mk_source_controls(const mk_source_t *src, const mk_source_control_t **list);
/* Applies a control list in the syntax of the option source.controls (config.h: mk_cfg_controls_parse(), e.g.
 * "exposure_time_absolute=150,brightness=128"): each control with mk_source_set_control(), in order; one that is
 * refused (unknown, read-only, out of range, refused by the driver) does not stop the others. The controls that
 * `previous` (the list applied before; NULL or "": none) names and `list` does not are set back to the device's
 * defaults. On a source without controls every control of `list` is refused with MK_EUNSUPPORTED. Writes one
 * result per control tried to res (room for MK_SOURCE_APPLY_MAX) and returns their number; MK_EINVAL (nothing
 * tried) for a list that does not parse. */
int mk_source_apply_controls(mk_source_t *src, const char *list, const char *previous,
                             mk_source_control_result_t *res);

/* "frame", "timeout", "eos", "lost", or the error's name (MK_EINVAL ...): for log lines. */
const char *mk_source_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
