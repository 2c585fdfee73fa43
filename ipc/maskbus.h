/* maskbus: the writer and reader API of the maskd frame bus (libmaskbus). The shared-memory layout it implements is
 * ipc/maskbus_abi.h.
 *
 * Threads: a writer or reader handle belongs to one thread at a time (no internal locking). Any number of reader
 * processes may attach to one bus; one writer at a time (a second writer gets MASKBUS_EBUSY). Nothing here calls
 * exit(), raises signals or installs handlers; every failure returns a negative MASKBUS_E* code and leaves a
 * message readable with maskbus_writer_error() / maskbus_reader_error().
 * The writer never waits for readers; readers sleep on a futex until a frame arrives. */
#ifndef MASKBUS_H
#define MASKBUS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "maskbus_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Results. Positive values are events of maskbus_reader_next(), negative ones errors. */
enum {
    MASKBUS_OK = 0,
    MASKBUS_FRAME = 1,            /* a new frame was read */
    MASKBUS_TIMEOUT = 2,          /* no new frame within the timeout; the writer lives */
    MASKBUS_WRITER_GONE = 3,      /* the writer died or closed the bus; keep calling to wait for a new one */
    MASKBUS_WRITER_RESTARTED = 4, /* a new writer attached (epoch changed); the next call returns its frames */
    MASKBUS_EINVAL = -1,          /* bad argument */
    MASKBUS_ENOENT = -2,          /* no bus of that name */
    MASKBUS_EACCES = -3,          /* permission denied */
    MASKBUS_EFORMAT = -4,         /* not a maskbus object (magic), or its header is inconsistent */
    MASKBUS_EVERSION = -5,        /* the object uses a newer ABI than this library */
    MASKBUS_ETRUNC = -6,          /* the object is smaller than its header says */
    MASKBUS_EBUSY = -7,           /* another live writer holds the bus */
    MASKBUS_ERANGE = -8,          /* a frame does not fit, or a size is out of range */
    MASKBUS_ESYS = -9,            /* a system call failed (errno text in the message) */
    MASKBUS_ETORN = -10,          /* maskbus_reader_check: the slot was overwritten while it was read */
    MASKBUS_EAGAIN = -11,         /* the writer kept overwriting the slot being read; try again */
};

const char *maskbus_strerror(int code);

/* Bus object names from an instance name: "video0" → "/maskd.video0". Instance names are 1..64 characters of
 * [A-Za-z0-9_.@-], not starting with '.'. Returns MASKBUS_OK or MASKBUS_EINVAL. */
int maskbus_object_name(const char *instance, char *name, size_t len);

/* Bytes per slot for frames up to width x height with the given planes (bit mask over MASKBUS_PLANE_*). */
uint64_t maskbus_slot_size(uint32_t width, uint32_t height, uint32_t planes);

/* --------------------------------------------------------------------------------------------------------------
 * Writer
 */
typedef struct maskbus_writer maskbus_writer_t;

typedef struct maskbus_writer_opts {
    uint32_t max_width, max_height; /* largest frame expected; larger frames grow the object later */
    uint32_t planes;                /* planes to size slots for (bits of MASKBUS_PLANE_*); 0 = mask only */
    uint32_t slots;                 /* 0 = 4 */
    uint32_t mode;                  /* permission bits of the frame object; 0 = 0640 */
    gid_t gid;                      /* group of both objects; (gid_t)-1 = leave the creator's */
    uint64_t heartbeat_period_ns;   /* 0 = 100 ms */
} maskbus_writer_opts_t;

void maskbus_writer_opts_default(maskbus_writer_opts_t *opts);

/* Create /maskd.INSTANCE, or reattach to it when it exists (a restart): existing readers keep their mappings and
 * see a new epoch. *out is NULL on failure; err (may be NULL) receives the message. */
int maskbus_writer_open(const char *instance, const maskbus_writer_opts_t *opts, maskbus_writer_t **out,
                        char *err, size_t err_len);

/* One frame to publish. Planes not present have data == NULL. */
typedef struct maskbus_frame_in {
    uint64_t frame_seq;
    uint64_t capture_ns;
    uint32_t width, height; /* frame size; every present plane has these dimensions */
    uint32_t flags;         /* MASKBUS_FLAG_* */
    const void *data[MASKBUS_MAX_PLANES];
    size_t stride[MASKBUS_MAX_PLANES]; /* bytes per row of data[i]; 0 = tightly packed */
    uint32_t ndetections;              /* at most MASKBUS_MAX_DETECTIONS; more are dropped and counted */
    const maskbus_detection_t *detections;
} maskbus_frame_in_t;

/* Copy one frame into the next slot and wake the readers. Never blocks on readers. Grows the objects when the frame
 * does not fit the current slot size. Also refreshes the heartbeat. */
int maskbus_writer_publish(maskbus_writer_t *w, const maskbus_frame_in_t *frame);

/* Refresh the heartbeat; call at least every heartbeat period when no frames are published. */
int maskbus_writer_heartbeat(maskbus_writer_t *w);

/* Registered readers: live (woke within the last 4 heartbeat periods), stalled (registered, process exists, silent
 * longer). Dead readers' entries are freed on the way. Either pointer may be NULL. */
int maskbus_writer_readers(maskbus_writer_t *w, unsigned *live, unsigned *stalled);

uint64_t maskbus_writer_epoch(const maskbus_writer_t *w);
const char *maskbus_writer_error(const maskbus_writer_t *w);

/* Detach: marks the bus closed (readers see MASKBUS_WRITER_GONE), keeps the objects so that a restart reattaches.
 * With unlink != 0 the objects are removed as well. Safe on NULL. */
void maskbus_writer_close(maskbus_writer_t *w, int unlink);

/* Remove a bus's objects (for tests and tools). */
int maskbus_unlink(const char *instance);

/* --------------------------------------------------------------------------------------------------------------
 * Reader
 */
typedef struct maskbus_reader maskbus_reader_t;

/* A frame as read. Plane pointers point into memory owned by the reader (copy mode, valid until the next
 * maskbus_reader_next) or into the shared slot (in-place mode, valid until maskbus_reader_check fails). */
typedef struct maskbus_frame {
    uint64_t publish_seq, frame_seq;
    uint64_t capture_ns, publish_ns;
    uint64_t wake_ns;      /* when the reader saw that the frame was there (woke up, or found it on entry) */
    uint64_t read_ns;      /* when the reader had read it consistently */
    uint64_t writer_epoch;
    uint64_t missed;       /* frames published since the previous one returned that this reader skipped */
    uint32_t width, height, planes, flags;
    uint32_t ndetections;
    maskbus_detection_t detections[MASKBUS_MAX_DETECTIONS];
    maskbus_plane_t plane[MASKBUS_MAX_PLANES];     /* geometry; offset is meaningless here */
    const uint8_t *data[MASKBUS_MAX_PLANES];        /* NULL for absent planes */
    uint32_t slot;                                  /* in-place mode: the slot read */
    uint64_t gen;                                   /* in-place mode: its generation when read */
    uint32_t layout_gen;                            /* in-place mode: the layout generation when read */
} maskbus_frame_t;

typedef struct maskbus_reader_opts {
    int in_place;    /* 0: next() copies planes out (safe to keep); 1: pointers into the slot + check() */
    int no_register; /* 1: do not take an entry in the reader table (e.g. no write access to it) */
} maskbus_reader_opts_t;

/* Open an existing bus. Validates the object (size before mapping, magic, ABI version, header consistency). */
int maskbus_reader_open(const char *instance, const maskbus_reader_opts_t *opts, maskbus_reader_t **out,
                        char *err, size_t err_len);

/* Wait up to timeout_ms (-1 = forever) for a frame newer than the last one returned and read the newest.
 * Returns MASKBUS_FRAME (frame filled), MASKBUS_TIMEOUT, MASKBUS_WRITER_GONE (reported once per death; the reader
 * keeps watching the name, and picks up a restarted writer by itself), MASKBUS_WRITER_RESTARTED (reported once per
 * new epoch), or a negative error. A frame already published when the reader opened counts as new, unless the
 * writer was dead or closed then (its last frame is stale; the first call reports MASKBUS_WRITER_GONE). */
int maskbus_reader_next(maskbus_reader_t *r, int timeout_ms, maskbus_frame_t *frame);

/* In-place mode: after using frame's plane pointers, MASKBUS_OK if the slot was not overwritten meanwhile
 * (what was read is consistent), MASKBUS_ETORN if it was (discard what was read). */
int maskbus_reader_check(maskbus_reader_t *r, const maskbus_frame_t *frame);

/* Writer state as this reader sees it. */
typedef struct maskbus_status {
    int writer_alive;
    int32_t writer_pid;
    uint64_t writer_epoch;
    uint64_t heartbeat_age_ns;
    uint64_t publish_count;
    uint64_t torn_retries; /* reads this reader had to repeat because the writer overwrote the slot */
    uint64_t remaps;       /* times the reader followed a grown object */
} maskbus_status_t;

int maskbus_reader_status(maskbus_reader_t *r, maskbus_status_t *st);
const char *maskbus_reader_error(const maskbus_reader_t *r);
void maskbus_reader_close(maskbus_reader_t *r);

/* sizeof(maskbus_frame_t) and sizeof(maskbus_reader_opts_t) of the library, for bindings (Python's ctypes) to check
 * their mirror of these structs. */
size_t maskbus_frame_size(void);
size_t maskbus_reader_opts_size(void);

/* CLOCK_MONOTONIC in nanoseconds, the bus's clock. */
uint64_t maskbus_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
