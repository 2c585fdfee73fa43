/* maskbus_abi: the shared-memory layout of the maskd frame bus, version 1. This header is the ABI: a reader in any
 * language that follows it interoperates with maskd. It has no dependencies beyond <stdint.h>; include it unchanged.
 *
 * Two POSIX shared-memory objects per bus instance INST:
 *
 *   /maskd.INST          the frames: one maskbus_header_t, then slot_count slots of slot_size bytes each. Created
 *                        by the writer with mode 0640 by default, so that readers in the daemon's group open it
 *                        read-only. Only the writer ever stores into it.
 *   /maskd.INST.readers  the reader table: one maskbus_readers_t. Group-writable (the frame object's mode with the
 *                        group-write bit added), so that readers can register themselves without being able to
 *                        touch the frames.
 *
 * All fields are little-endian, fixed width and naturally aligned; the layout is fixed by the _Static_asserts at the
 * end. Sizes and offsets are in bytes, times are CLOCK_MONOTONIC nanoseconds of the machine.
 *
 * Protocol (the writer never waits for a reader):
 *  - Publishing: the writer picks the slot after latest_slot, makes its gen odd, writes the slot header and planes,
 *    makes gen even again (release), then stores latest_slot, increments publish_count (release), increments futex
 *    and wakes every futex waiter (FUTEX_WAKE on a shared mapping).
 *  - Reading (a seqlock per slot): load layout_gen (must be even) and latest_slot, load the slot's gen (acquire; odd
 *    = being written: retry), copy what is needed, then load gen and layout_gen again (after an acquire fence): if
 *    either changed, the copy may be torn and must be discarded. A reader that falls behind simply reads the newest
 *    slot; publish_seq tells it how many frames it missed.
 *  - Waiting: remember futex, check publish_count, then FUTEX_WAIT on futex with the remembered value. Wake at least
 *    every heartbeat_period_ns / 4 to check that the writer lives.
 *  - Liveness: the writer refreshes heartbeat_ns at least every heartbeat_period_ns. A writer is dead when
 *    heartbeat_ns is older than 2 periods, or when writer_pid no longer exists and heartbeat_ns is older than one
 *    period. A writer that restarts reattaches to the same objects and chooses a new writer_epoch; readers notice the
 *    change and carry on. A clean shutdown sets state to MASKBUS_STATE_CLOSED and writer_pid to 0.
 *  - Geometry: each slot describes its own planes, so frames of a new size need no layout change as long as they fit
 *    in slot_size. When they do not, the writer makes layout_gen odd, grows the object (never shrinks it), rewrites
 *    slot_size and total_size, and makes layout_gen even. Readers remap when total_size exceeds their mapping.
 *    Readers must bounds-check every offset against their mapping before touching memory.
 */
#ifndef MASKBUS_ABI_H
#define MASKBUS_ABI_H

#include <stdint.h>

#define MASKBUS_MAGIC "MASKBUS" /* 8 bytes with the terminating NUL */
#define MASKBUS_READERS_MAGIC "MASKRDR"
#define MASKBUS_ABI_VERSION 1u

#define MASKBUS_NAME_PREFIX "/maskd."    /* the frame object is MASKBUS_NAME_PREFIX + instance */
#define MASKBUS_READERS_SUFFIX ".readers" /* the reader table object adds this */

#define MASKBUS_MIN_SLOTS 3u
#define MASKBUS_MAX_SLOTS 16u
#define MASKBUS_MAX_READERS 64u
#define MASKBUS_MAX_DETECTIONS 32u
#define MASKBUS_MAX_PLANES 4u
#define MASKBUS_SLOT_ALIGN 4096u /* slot_size and the header region are multiples of this */
#define MASKBUS_PLANE_ALIGN 64u  /* every plane starts on this boundary inside its slot */

/* Planes, by index into maskbus_slot_t.plane; bit (1 << index) in maskbus_slot_t.planes says it is present. */
enum {
    MASKBUS_PLANE_MASK = 0,  /* the person mask, u8, 0 = background, 255 = person (soft values in between) */
    MASKBUS_PLANE_ALPHA = 1, /* alpha matte, u8 */
    MASKBUS_PLANE_FRAME = 2, /* the camera frame the mask belongs to, RGB24 */
    MASKBUS_PLANE_DISP = 3,  /* disparity, u16 (stereo sources) */
};

/* maskbus_plane_t.format */
enum {
    MASKBUS_FMT_NONE = 0,
    MASKBUS_FMT_GRAY8 = 1, /* 1 byte per pixel */
    MASKBUS_FMT_RGB24 = 2, /* 3 bytes per pixel, R G B */
    MASKBUS_FMT_GRAY16 = 3 /* 2 bytes per pixel, little-endian */
};

/* maskbus_header_t.state */
enum { MASKBUS_STATE_EMPTY = 0, MASKBUS_STATE_RUNNING = 1, MASKBUS_STATE_CLOSED = 2 };

/* maskbus_slot_t.flags */
enum {
    MASKBUS_FLAG_KEYFRAME = 1u << 0,  /* the mask came from a full segmentation, not a tracked update */
    MASKBUS_FLAG_NO_PERSON = 1u << 1, /* nothing detected: the mask is all background */
    MASKBUS_FLAG_STALE = 1u << 2      /* the frame repeats the previous mask (processing fell behind) */
};

/* The frame object's header, at offset 0. 256 bytes. */
typedef struct maskbus_header {
    char magic[8];                /*   0  MASKBUS_MAGIC, NUL-terminated */
    uint32_t abi_version;         /*   8  MASKBUS_ABI_VERSION; readers refuse a larger one */
    uint32_t header_size;         /*  12  sizeof(maskbus_header_t) */
    uint32_t slot_header_size;    /*  16  sizeof(maskbus_slot_t) */
    uint32_t slot_count;          /*  20  MASKBUS_MIN_SLOTS .. MASKBUS_MAX_SLOTS */
    uint64_t slots_offset;        /*  24  offset of slot 0 (a multiple of MASKBUS_SLOT_ALIGN) */
    uint64_t slot_size;           /*  32  bytes per slot, header and planes (a multiple of MASKBUS_SLOT_ALIGN) */
    uint64_t total_size;          /*  40  slots_offset + slot_count * slot_size: the object's size */
    uint32_t layout_gen;          /*  48  seqlock over slot_size and total_size: odd while the writer resizes */
    int32_t writer_pid;           /*  52  the writer's process id (in its pid namespace); 0 when none */
    uint64_t writer_epoch;        /*  56  new random value on every writer start; never 0 while a writer runs */
    uint64_t heartbeat_ns;        /*  64  the writer's last sign of life */
    uint64_t heartbeat_period_ns; /*  72  the writer refreshes heartbeat_ns at least this often */
    uint32_t futex;               /*  80  incremented on every publish and state change; FUTEX_WAIT on it */
    uint32_t state;               /*  84  MASKBUS_STATE_* */
    uint64_t publish_count;       /*  88  frames published since the object was created (kept over restarts) */
    uint32_t latest_slot;         /*  96  the slot holding frame number publish_count (valid when that is > 0) */
    uint32_t max_width;           /* 100  the geometry slot_size was sized for (informative) */
    uint32_t max_height;          /* 104 */
    uint32_t max_planes;          /* 108  plane bits slot_size was sized for (informative) */
    uint64_t create_ns;           /* 112  when the object was created */
    uint64_t start_ns;            /* 120  when the current writer attached */
    uint8_t reserved[128];        /* 128  zero */
} maskbus_header_t;

/* One plane of a slot. 32 bytes. */
typedef struct maskbus_plane {
    uint32_t format; /*  0  MASKBUS_FMT_* (NONE when absent) */
    uint32_t width;  /*  4  pixels */
    uint32_t height; /*  8  rows */
    uint32_t stride; /* 12  bytes per row, >= width * bytes per pixel */
    uint64_t offset; /* 16  from the start of the slot, a multiple of MASKBUS_PLANE_ALIGN */
    uint64_t size;   /* 24  stride * height */
} maskbus_plane_t;

/* One detection, in source-frame pixels. 32 bytes. */
typedef struct maskbus_detection {
    int32_t class_id; /*  0  the detector's class index */
    float score;      /*  4  class probability, 0..1 */
    float x, y;       /*  8  top-left corner */
    float w, h;       /* 16  size */
    uint32_t track_id; /* 24  stable across frames for the same object, 0 when not tracked */
    uint32_t flags;    /* 28  bit 0: this box was cut out into the mask */
} maskbus_detection_t;

/* A slot's header, at the start of each slot; the planes follow inside the slot. 1280 bytes. */
typedef struct maskbus_slot {
    uint64_t gen;          /*    0  seqlock generation: odd while the writer fills the slot */
    uint64_t publish_seq;  /*    8  the value publish_count took when this slot was published (1, 2, ...) */
    uint64_t frame_seq;    /*   16  the source's frame number */
    uint64_t capture_ns;   /*   24  when the frame was captured (the driver's timestamp when it has one) */
    uint64_t publish_ns;   /*   32  when the writer published the slot */
    uint64_t writer_epoch; /*   40  the epoch of the writer that published it */
    uint32_t width;        /*   48  frame size in pixels */
    uint32_t height;       /*   52 */
    uint32_t planes;       /*   56  bit i set = plane[i] present */
    uint32_t flags;        /*   60  MASKBUS_FLAG_* */
    uint32_t ndetections;  /*   64  entries used in detections[] */
    uint32_t reserved0;    /*   68 */
    uint8_t reserved1[56]; /*   72  zero */
    maskbus_plane_t plane[MASKBUS_MAX_PLANES];                 /*  128 */
    maskbus_detection_t detections[MASKBUS_MAX_DETECTIONS];    /*  256 */
} maskbus_slot_t;

/* One registered reader. 32 bytes. */
typedef struct maskbus_reader_entry {
    int32_t pid;           /*  0  0 = free; a reader claims an entry by compare-and-swap from 0 or a dead pid */
    uint32_t flags;        /*  4  bit 0: reads in place (may hold a slot longer) */
    uint64_t last_seen_ns; /*  8  refreshed by the reader every time it wakes */
    uint64_t last_seq;     /* 16  publish_seq of the last frame it read */
    uint64_t missed;       /* 24  frames it skipped in total */
} maskbus_reader_entry_t;

/* The reader-table object. */
typedef struct maskbus_readers {
    char magic[8];          /*  0  MASKBUS_READERS_MAGIC */
    uint32_t abi_version;   /*  8 */
    uint32_t max_readers;   /* 12  MASKBUS_MAX_READERS */
    uint8_t reserved[48];   /* 16 */
    maskbus_reader_entry_t reader[MASKBUS_MAX_READERS]; /* 64 */
} maskbus_readers_t;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(maskbus_header_t) == 256, "maskbus header size");
_Static_assert(__builtin_offsetof(maskbus_header_t, layout_gen) == 48, "layout_gen offset");
_Static_assert(__builtin_offsetof(maskbus_header_t, futex) == 80, "futex offset");
_Static_assert(__builtin_offsetof(maskbus_header_t, publish_count) == 88, "publish_count offset");
_Static_assert(__builtin_offsetof(maskbus_header_t, latest_slot) == 96, "latest_slot offset");
_Static_assert(__builtin_offsetof(maskbus_header_t, reserved) == 128, "header reserved offset");
_Static_assert(sizeof(maskbus_plane_t) == 32, "plane size");
_Static_assert(sizeof(maskbus_detection_t) == 32, "detection size");
_Static_assert(__builtin_offsetof(maskbus_slot_t, plane) == 128, "slot plane offset");
_Static_assert(__builtin_offsetof(maskbus_slot_t, detections) == 256, "slot detections offset");
_Static_assert(sizeof(maskbus_slot_t) == 1280, "slot header size");
_Static_assert(sizeof(maskbus_reader_entry_t) == 32, "reader entry size");
_Static_assert(__builtin_offsetof(maskbus_readers_t, reader) == 64, "reader table offset");
_Static_assert(sizeof(maskbus_readers_t) == 64 + 32 * MASKBUS_MAX_READERS, "reader table size");
#endif

#endif
