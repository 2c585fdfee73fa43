/* maskbus: the frame bus writer and reader (libmaskbus), implementing the protocol of maskbus_abi.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "maskbus.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the maskbus ABI is little-endian");

#define MAX_DIM 16384u
#define NAME_MAX_LEN 80 /* "/maskd." + 64 characters + NUL fits */
#define RNAME_MAX_LEN (NAME_MAX_LEN + 16)
#define READ_ATTEMPTS 64
#define DEFAULT_SLOTS 4u
#define DEFAULT_MODE 0640u
#define DEFAULT_PERIOD_NS 100000000ull
#define SPIN_NS 2000000ull /* longest a reader spins for a publish in progress */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Shared-memory accessors: every field another process may store to concurrently goes through these. */
#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static const uint32_t plane_format[MASKBUS_MAX_PLANES] = {MASKBUS_FMT_GRAY8, MASKBUS_FMT_GRAY8, MASKBUS_FMT_RGB24,
                                                          MASKBUS_FMT_GRAY16};
static const uint32_t plane_bpp[MASKBUS_MAX_PLANES] = {1, 1, 3, 2};

const char *maskbus_strerror(int code)
{
    switch (code) {
    case MASKBUS_OK: return "ok";
    case MASKBUS_FRAME: return "frame";
    case MASKBUS_TIMEOUT: return "timeout";
    case MASKBUS_WRITER_GONE: return "writer gone";
    case MASKBUS_WRITER_RESTARTED: return "writer restarted";
    case MASKBUS_SOURCE_CHANGED: return "source state changed";
    case MASKBUS_EINVAL: return "invalid argument";
    case MASKBUS_ENOENT: return "no such bus";
    case MASKBUS_EACCES: return "permission denied";
    case MASKBUS_EFORMAT: return "not a maskbus object";
    case MASKBUS_EVERSION: return "newer bus ABI";
    case MASKBUS_ETRUNC: return "truncated bus object";
    case MASKBUS_EBUSY: return "bus has a live writer";
    case MASKBUS_ERANGE: return "out of range";
    case MASKBUS_ESYS: return "system error";
    case MASKBUS_ETORN: return "torn read";
    case MASKBUS_EAGAIN: return "slot kept changing";
    default: return "unknown maskbus code";
    }
}

size_t maskbus_frame_size(void)
{
    return sizeof(maskbus_frame_t);
}

size_t maskbus_reader_opts_size(void)
{
    return sizeof(maskbus_reader_opts_t);
}

uint64_t maskbus_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_err(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static int sys_code(int e)
{
    if (e == ENOENT)
        return MASKBUS_ENOENT;
    if (e == EACCES || e == EPERM)
        return MASKBUS_EACCES;
    return MASKBUS_ESYS;
}

int maskbus_object_name(const char *instance, char *name, size_t len)
{
    if (!instance || !name)
        return MASKBUS_EINVAL;
    size_t n = strlen(instance);
    if (n == 0 || n > 64 || instance[0] == '.')
        return MASKBUS_EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = instance[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '.' || c == '@' || c == '-';
        if (!ok)
            return MASKBUS_EINVAL;
    }
    if ((size_t)snprintf(name, len, "%s%s", MASKBUS_NAME_PREFIX, instance) >= len)
        return MASKBUS_EINVAL;
    return MASKBUS_OK;
}

static int object_names(const char *instance, char *frames, char *readers, char *err, size_t err_len)
{
    if (maskbus_object_name(instance, frames, NAME_MAX_LEN) != MASKBUS_OK) {
        set_err(err, err_len, "invalid bus instance name '%s' (1-64 characters of A-Z a-z 0-9 _ . @ -, not "
                              "starting with '.')", instance ? instance : "(null)");
        return MASKBUS_EINVAL;
    }
    snprintf(readers, RNAME_MAX_LEN, "%s%s", frames, MASKBUS_READERS_SUFFIX);
    return MASKBUS_OK;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Plane layout of a frame inside a slot: offsets after the slot header, each aligned. Returns the bytes used. */
static uint64_t layout_planes(uint32_t width, uint32_t height, uint32_t planes, maskbus_plane_t plane[])
{
    uint64_t off = round_up(sizeof(maskbus_slot_t), MASKBUS_PLANE_ALIGN);
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        maskbus_plane_t p = {0};
        if (planes & (1u << i)) {
            p.format = plane_format[i];
            p.width = width;
            p.height = height;
            p.stride = width * plane_bpp[i];
            p.offset = off;
            p.size = (uint64_t)p.stride * height;
            off = round_up(off + p.size, MASKBUS_PLANE_ALIGN);
        }
        if (plane)
            plane[i] = p;
    }
    return off;
}

uint64_t maskbus_slot_size(uint32_t width, uint32_t height, uint32_t planes)
{
    if (planes == 0)
        planes = 1u << MASKBUS_PLANE_MASK;
    return round_up(layout_planes(width, height, planes, NULL), MASKBUS_SLOT_ALIGN);
}

static int futex_wake_all(uint32_t *addr)
{
    return (int)syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int futex_wait(const uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    return (int)syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static int pid_exists(int32_t pid)
{
    if (pid <= 0)
        return 0;
    return kill(pid, 0) == 0 || errno != ESRCH;
}

/* The liveness rule of maskbus_abi.h. */
static int writer_alive(const maskbus_header_t *h, uint64_t now, uint64_t *age_out)
{
    uint32_t state = LOAD_ACQ(&h->state);
    int32_t pid = LOAD_RLX(&h->writer_pid);
    uint64_t hb = LOAD_RLX(&h->heartbeat_ns);
    uint64_t period = LOAD_RLX(&h->heartbeat_period_ns);
    uint64_t age = now > hb ? now - hb : 0;
    if (age_out)
        *age_out = age;
    if (state != MASKBUS_STATE_RUNNING || pid <= 0)
        return 0;
    if (age > 2 * period)
        return 0;
    if (age > period && !pid_exists(pid))
        return 0;
    return 1;
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Writer */

struct maskbus_writer {
    char name[NAME_MAX_LEN], rname[RNAME_MAX_LEN];
    int fd, rfd;
    maskbus_header_t *hdr;
    size_t mapped;
    maskbus_readers_t *readers;
    uint64_t epoch;
    uint64_t period_ns;
    uint32_t planes;
    char err[256];
};

void maskbus_writer_opts_default(maskbus_writer_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->max_width = 1280;
    opts->max_height = 720;
    opts->planes = 1u << MASKBUS_PLANE_MASK;
    opts->slots = DEFAULT_SLOTS;
    opts->mode = DEFAULT_MODE;
    opts->gid = (gid_t)-1;
    opts->heartbeat_period_ns = DEFAULT_PERIOD_NS;
}

static uint64_t new_epoch(uint64_t old)
{
    uint64_t e = 0;
    for (int i = 0; i < 4 && (e == 0 || e == old); i++) {
        if (getrandom(&e, sizeof(e), GRND_NONBLOCK) != (ssize_t)sizeof(e))
            e = maskbus_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)i;
    }
    return e ? e : 1;
}

/* Open or create a shm object for writing; *created says which. The permission bits are set with fchmod so that
 * the umask does not interfere. */
static int open_rw(const char *name, uint32_t mode, gid_t gid, int *created, int *fd_out, char *err, size_t err_len)
{
    *created = 0;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0)
        *created = 1;
    else if (errno == EEXIST)
        fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        int e = errno;
        set_err(err, err_len, "shm_open %s: %s", name, strerror(e));
        return sys_code(e);
    }
    if (*created) {
        if (fchmod(fd, mode) != 0 || (gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) != 0)) {
            int e = errno;
            set_err(err, err_len, "setting mode %04o / group %ld of %s: %s", mode, (long)gid, name, strerror(e));
            close(fd);
            shm_unlink(name);
            return sys_code(e);
        }
    }
    *fd_out = fd;
    return MASKBUS_OK;
}

/* Make the object at least size bytes; never shrink it (a reader may map more). */
static int grow_object(int fd, const char *name, uint64_t size, char *err, size_t err_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, err_len, "fstat %s: %s", name, strerror(errno));
        return MASKBUS_ESYS;
    }
    if ((uint64_t)st.st_size >= size)
        return MASKBUS_OK;
    if (ftruncate(fd, (off_t)size) != 0) {
        set_err(err, err_len, "growing %s to %llu bytes: %s", name, (unsigned long long)size, strerror(errno));
        return MASKBUS_ESYS;
    }
    return MASKBUS_OK;
}

static int writer_map(maskbus_writer_t *w, size_t size)
{
    if (w->hdr)
        munmap(w->hdr, w->mapped);
    w->hdr = NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
    if (p == MAP_FAILED) {
        set_err(w->err, sizeof(w->err), "mmap %s (%zu bytes): %s", w->name, size, strerror(errno));
        return MASKBUS_ESYS;
    }
    w->hdr = p;
    w->mapped = size;
    return MASKBUS_OK;
}

static maskbus_slot_t *slot_at(maskbus_header_t *h, uint64_t slots_offset, uint64_t slot_size, uint32_t i)
{
    return (maskbus_slot_t *)((uint8_t *)h + slots_offset + (uint64_t)i * slot_size);
}

/* Give the frame object a new slot size (only ever larger), inside the layout seqlock. Readers that were reading
 * see layout_gen change and discard what they read. */
static int writer_relayout(maskbus_writer_t *w, uint32_t slots, uint64_t slot_size, uint32_t width, uint32_t height,
                           uint32_t planes)
{
    maskbus_header_t *h = w->hdr;
    uint64_t slots_offset = round_up(sizeof(maskbus_header_t), MASKBUS_SLOT_ALIGN);
    uint64_t total = slots_offset + (uint64_t)slots * slot_size;
    if (total > (uint64_t)SIZE_MAX / 2) {
        set_err(w->err, sizeof(w->err), "bus of %u slots of %llu bytes is too large", slots,
                (unsigned long long)slot_size);
        return MASKBUS_ERANGE;
    }
    uint32_t lg = LOAD_RLX(&h->layout_gen);
    STORE_RLX(&h->layout_gen, lg | 1u);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (total > w->mapped) {
        int rc = grow_object(w->fd, w->name, total, w->err, sizeof(w->err));
        if (rc != MASKBUS_OK) {
            STORE_REL(&h->layout_gen, (lg | 1u) + 1u);
            return rc;
        }
        rc = writer_map(w, (size_t)total);
        if (rc != MASKBUS_OK)
            return rc; /* the object stays odd: readers treat it as being resized and the writer is unusable */
        h = w->hdr;
    }
    h->slot_count = slots;
    h->slots_offset = slots_offset;
    h->slot_size = slot_size;
    h->total_size = total;
    h->max_width = width;
    h->max_height = height;
    h->max_planes = planes;
    for (uint32_t i = 0; i < slots; i++) {
        maskbus_slot_t *s = slot_at(h, slots_offset, slot_size, i);
        uint64_t g = LOAD_RLX(&s->gen);
        /* a fresh slot area may hold anything (zero, or a slot of the old layout): keep gen moving forward */
        STORE_RLX(&s->gen, (g | 1u) + 1u);
        s->publish_seq = 0;
        s->planes = 0;
        s->ndetections = 0;
    }
    STORE_RLX(&h->latest_slot, 0);
    STORE_REL(&h->layout_gen, (lg | 1u) + 1u);
    return MASKBUS_OK;
}

static int writer_open_readers(maskbus_writer_t *w, uint32_t mode, gid_t gid, char *err, size_t err_len)
{
    /* who may read the frames may register as a reader: add write to each class that has read */
    uint32_t rmode = mode | ((mode & 0040) ? 0020 : 0) | ((mode & 0004) ? 0002 : 0) | 0600;
    int created;
    int rc = open_rw(w->rname, rmode, gid, &created, &w->rfd, err, err_len);
    if (rc != MASKBUS_OK)
        return rc;
    struct stat st;
    if (fstat(w->rfd, &st) != 0) {
        set_err(err, err_len, "fstat %s: %s", w->rname, strerror(errno));
        return MASKBUS_ESYS;
    }
    int fresh = st.st_size < (off_t)sizeof(maskbus_readers_t);
    if (fresh && ftruncate(w->rfd, sizeof(maskbus_readers_t)) != 0) {
        set_err(err, err_len, "ftruncate %s: %s", w->rname, strerror(errno));
        return MASKBUS_ESYS;
    }
    void *p = mmap(NULL, sizeof(maskbus_readers_t), PROT_READ | PROT_WRITE, MAP_SHARED, w->rfd, 0);
    if (p == MAP_FAILED) {
        set_err(err, err_len, "mmap %s: %s", w->rname, strerror(errno));
        return MASKBUS_ESYS;
    }
    w->readers = p;
    if (fresh || memcmp(w->readers->magic, MASKBUS_READERS_MAGIC, 8) != 0 ||
        w->readers->abi_version != MASKBUS_ABI_VERSION) {
        memset(w->readers, 0, sizeof(*w->readers));
        memcpy(w->readers->magic, MASKBUS_READERS_MAGIC, 8);
        w->readers->abi_version = MASKBUS_ABI_VERSION;
        w->readers->max_readers = MASKBUS_MAX_READERS;
    }
    return MASKBUS_OK;
}

int maskbus_writer_open(const char *instance, const maskbus_writer_opts_t *opts_in, maskbus_writer_t **out,
                        char *err, size_t err_len)
{
    if (!out) {
        set_err(err, err_len, "maskbus_writer_open: out is NULL");
        return MASKBUS_EINVAL;
    }
    *out = NULL;
    maskbus_writer_opts_t opts;
    maskbus_writer_opts_default(&opts);
    if (opts_in) {
        opts = *opts_in;
        if (opts.planes == 0)
            opts.planes = 1u << MASKBUS_PLANE_MASK;
        if (opts.slots == 0)
            opts.slots = DEFAULT_SLOTS;
        if (opts.mode == 0)
            opts.mode = DEFAULT_MODE;
        if (opts.heartbeat_period_ns == 0)
            opts.heartbeat_period_ns = DEFAULT_PERIOD_NS;
    }
    if (opts.max_width == 0 || opts.max_height == 0 || opts.max_width > MAX_DIM || opts.max_height > MAX_DIM ||
        opts.slots < MASKBUS_MIN_SLOTS || opts.slots > MASKBUS_MAX_SLOTS || (opts.planes >> MASKBUS_MAX_PLANES) ||
        (opts.mode & ~0777u) || opts.heartbeat_period_ns < 1000000ull ||
        opts.heartbeat_period_ns > 60000000000ull) {
        set_err(err, err_len,
                "bad bus options: size %ux%u (1..%u), slots %u (%u..%u), planes 0x%x, mode %04o, heartbeat %llu ns "
                "(1 ms..60 s)",
                opts.max_width, opts.max_height, MAX_DIM, opts.slots, MASKBUS_MIN_SLOTS, MASKBUS_MAX_SLOTS,
                opts.planes, opts.mode, (unsigned long long)opts.heartbeat_period_ns);
        return MASKBUS_EINVAL;
    }
    maskbus_writer_t *w = calloc(1, sizeof(*w));
    if (!w) {
        set_err(err, err_len, "out of memory");
        return MASKBUS_ESYS;
    }
    w->fd = w->rfd = -1;
    w->period_ns = opts.heartbeat_period_ns;
    w->planes = opts.planes;
    int rc = object_names(instance, w->name, w->rname, err, err_len);
    if (rc != MASKBUS_OK)
        goto fail;
    int created;
    rc = open_rw(w->name, opts.mode, opts.gid, &created, &w->fd, err, err_len);
    if (rc != MASKBUS_OK)
        goto fail;
    if (flock(w->fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK) {
            maskbus_header_t peek = {0};
            if (pread(w->fd, &peek, sizeof(peek), 0) != (ssize_t)sizeof(peek))
                peek.writer_pid = 0;
            set_err(err, err_len, "bus %s already has a writer (pid %d)", w->name, (int)peek.writer_pid);
            rc = MASKBUS_EBUSY;
        } else {
            set_err(err, err_len, "flock %s: %s", w->name, strerror(e));
            rc = MASKBUS_ESYS;
        }
        goto fail;
    }
    struct stat st;
    if (fstat(w->fd, &st) != 0) {
        set_err(err, err_len, "fstat %s: %s", w->name, strerror(errno));
        rc = MASKBUS_ESYS;
        goto fail;
    }
    uint64_t need_slot = maskbus_slot_size(opts.max_width, opts.max_height, opts.planes);
    int reattach = 0;
    if (!created && st.st_size >= (off_t)sizeof(maskbus_header_t)) {
        maskbus_header_t peek;
        if (pread(w->fd, &peek, sizeof(peek), 0) != (ssize_t)sizeof(peek)) {
            set_err(err, err_len, "reading the header of %s: %s", w->name, strerror(errno));
            rc = MASKBUS_ESYS;
            goto fail;
        }
        if (memcmp(peek.magic, MASKBUS_MAGIC, 8) == 0) {
            if (peek.abi_version > MASKBUS_ABI_VERSION) {
                set_err(err, err_len, "bus %s uses ABI version %u, newer than this writer's %u", w->name,
                        peek.abi_version, MASKBUS_ABI_VERSION);
                rc = MASKBUS_EVERSION;
                goto fail;
            }
            reattach = peek.abi_version == MASKBUS_ABI_VERSION && peek.header_size == sizeof(maskbus_header_t) &&
                       peek.slot_header_size == sizeof(maskbus_slot_t) &&
                       peek.total_size <= (uint64_t)st.st_size && peek.slot_count >= MASKBUS_MIN_SLOTS &&
                       peek.slot_count <= MASKBUS_MAX_SLOTS &&
                       peek.total_size == peek.slots_offset + (uint64_t)peek.slot_count * peek.slot_size;
        } else if (peek.magic[0] != 0) {
            set_err(err, err_len, "%s exists and is not a maskbus object; not overwriting it", w->name);
            rc = MASKBUS_EFORMAT;
            goto fail;
        }
    }
    if (!reattach)
        rc = grow_object(w->fd, w->name, sizeof(maskbus_header_t), w->err, sizeof(w->err));
    if (rc == MASKBUS_OK)
        rc = writer_map(w, reattach ? (size_t)st.st_size : sizeof(maskbus_header_t));
    if (rc != MASKBUS_OK) {
        set_err(err, err_len, "%s", w->err);
        goto fail;
    }
    maskbus_header_t *h = w->hdr;
    uint64_t now = maskbus_now_ns();
    if (!reattach) {
        /* a new object, or one of an older layout: build the header; the magic goes in last */
        memset(h, 0, sizeof(*h));
        h->abi_version = MASKBUS_ABI_VERSION;
        h->header_size = sizeof(maskbus_header_t);
        h->slot_header_size = sizeof(maskbus_slot_t);
        h->create_ns = now;
        h->layout_gen = 0;
        rc = writer_relayout(w, opts.slots, need_slot, opts.max_width, opts.max_height, opts.planes);
        if (rc != MASKBUS_OK) {
            set_err(err, err_len, "%s", w->err);
            goto fail;
        }
        h = w->hdr;
    } else {
        if (h->slot_size < need_slot || h->slot_count != opts.slots) {
            uint64_t slot_size = h->slot_size > need_slot ? h->slot_size : need_slot;
            rc = writer_relayout(w, opts.slots, slot_size, opts.max_width, opts.max_height, opts.planes);
            if (rc != MASKBUS_OK) {
                set_err(err, err_len, "%s", w->err);
                goto fail;
            }
            h = w->hdr;
        } else {
            /* a slot left odd by a writer that died while filling it is not the latest: make it even, empty */
            for (uint32_t i = 0; i < h->slot_count; i++) {
                maskbus_slot_t *s = slot_at(h, h->slots_offset, h->slot_size, i);
                uint64_t g = LOAD_RLX(&s->gen);
                if (g & 1u) {
                    s->publish_seq = 0;
                    STORE_REL(&s->gen, g + 1u);
                }
            }
        }
    }
    rc = writer_open_readers(w, opts.mode, opts.gid, err, err_len);
    if (rc != MASKBUS_OK)
        goto fail;
    w->epoch = new_epoch(LOAD_RLX(&h->writer_epoch));
    STORE_RLX(&h->heartbeat_period_ns, w->period_ns);
    STORE_RLX(&h->heartbeat_ns, now);
    STORE_RLX(&h->start_ns, now);
    STORE_RLX(&h->source_state, (uint32_t)MASKBUS_SOURCE_UNKNOWN);
    STORE_RLX(&h->writer_pid, (int32_t)getpid());
    STORE_RLX(&h->writer_epoch, w->epoch);
    STORE_REL(&h->state, (uint32_t)MASKBUS_STATE_RUNNING);
    if (!reattach) {
        __atomic_thread_fence(__ATOMIC_RELEASE);
        memcpy(h->magic, MASKBUS_MAGIC, 8);
    }
    __atomic_add_fetch(&h->futex, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&h->futex);
    *out = w;
    return MASKBUS_OK;
fail:
    maskbus_writer_close(w, 0);
    return rc;
}

const char *maskbus_source_state_name(uint32_t state)
{
    static const char *const names[] = {"unknown", "streaming", "lost", "idle", "ended"};
    return state < sizeof names / sizeof names[0] ? names[state] : "unknown";
}

int maskbus_writer_set_source_state(maskbus_writer_t *w, uint32_t state)
{
    if (!w || !w->hdr || state > MASKBUS_SOURCE_ENDED) {
        if (w)
            set_err(w->err, sizeof(w->err), "source state %u is not a MASKBUS_SOURCE_* value", state);
        return MASKBUS_EINVAL;
    }
    maskbus_header_t *h = w->hdr;
    if (LOAD_RLX(&h->source_state) == state)
        return MASKBUS_OK;
    STORE_REL(&h->source_state, state);
    STORE_REL(&h->heartbeat_ns, maskbus_now_ns());
    __atomic_add_fetch(&h->futex, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&h->futex);
    return MASKBUS_OK;
}

int maskbus_writer_heartbeat(maskbus_writer_t *w)
{
    if (!w || !w->hdr)
        return MASKBUS_EINVAL;
    STORE_REL(&w->hdr->heartbeat_ns, maskbus_now_ns());
    return MASKBUS_OK;
}

static void copy_plane(uint8_t *dst, size_t dstride, const uint8_t *src, size_t sstride, size_t row, uint32_t rows)
{
    if (dstride == sstride) {
        memcpy(dst, src, row * rows + (dstride - row) * (rows - 1));
        return;
    }
    for (uint32_t y = 0; y < rows; y++)
        memcpy(dst + (size_t)y * dstride, src + (size_t)y * sstride, row);
}

int maskbus_writer_publish(maskbus_writer_t *w, const maskbus_frame_in_t *f)
{
    if (!w || !w->hdr || !f) {
        if (w)
            set_err(w->err, sizeof(w->err), "publish: NULL frame");
        return MASKBUS_EINVAL;
    }
    uint32_t planes = 0;
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++)
        if (f->data[i])
            planes |= 1u << i;
    if (planes == 0 || f->width == 0 || f->height == 0 || f->width > MAX_DIM || f->height > MAX_DIM) {
        set_err(w->err, sizeof(w->err), "publish: frame %ux%u with plane set 0x%x (need 1..%u pixels, a plane)",
                f->width, f->height, planes, MAX_DIM);
        return MASKBUS_EINVAL;
    }
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        if (f->data[i] && f->stride[i] && f->stride[i] < (size_t)f->width * plane_bpp[i]) {
            set_err(w->err, sizeof(w->err), "publish: plane %u stride %zu is less than a row (%u bytes)", i,
                    f->stride[i], f->width * plane_bpp[i]);
            return MASKBUS_EINVAL;
        }
    }
    if (f->ndetections && !f->detections) {
        set_err(w->err, sizeof(w->err), "publish: %u detections but no array", f->ndetections);
        return MASKBUS_EINVAL;
    }
    maskbus_plane_t layout[MASKBUS_MAX_PLANES];
    uint64_t need = layout_planes(f->width, f->height, planes, layout);
    maskbus_header_t *h = w->hdr;
    if (need > h->slot_size) {
        uint32_t mw = f->width > h->max_width ? f->width : h->max_width;
        uint32_t mh = f->height > h->max_height ? f->height : h->max_height;
        uint64_t grown = maskbus_slot_size(mw, mh, h->max_planes | planes);
        if (grown < round_up(need, MASKBUS_SLOT_ALIGN))
            grown = round_up(need, MASKBUS_SLOT_ALIGN);
        int rc = writer_relayout(w, h->slot_count, grown, mw, mh, h->max_planes | planes);
        if (rc != MASKBUS_OK)
            return rc;
        h = w->hdr;
    }
    uint64_t count = LOAD_RLX(&h->publish_count);
    uint32_t idx = count == 0 ? 0 : (LOAD_RLX(&h->latest_slot) + 1u) % h->slot_count;
    maskbus_slot_t *s = slot_at(h, h->slots_offset, h->slot_size, idx);
    uint64_t g = LOAD_RLX(&s->gen);
    STORE_RLX(&s->gen, g + 1u);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    /* early wake: sleeping readers take their wake-up latency while the slot is being filled */
    STORE_REL(&h->publishing, idx + 1u);
    __atomic_add_fetch(&h->futex, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&h->futex);
    uint8_t *base = (uint8_t *)s;
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
        if (!f->data[i])
            continue;
        size_t row = (size_t)f->width * plane_bpp[i];
        copy_plane(base + layout[i].offset, layout[i].stride, f->data[i], f->stride[i] ? f->stride[i] : row, row,
                   f->height);
    }
    uint32_t nd = f->ndetections > MASKBUS_MAX_DETECTIONS ? MASKBUS_MAX_DETECTIONS : f->ndetections;
    if (nd)
        memcpy(s->detections, f->detections, nd * sizeof(maskbus_detection_t));
    memcpy(s->plane, layout, sizeof(layout));
    s->ndetections = nd;
    s->planes = planes;
    s->width = f->width;
    s->height = f->height;
    s->flags = f->flags;
    s->frame_seq = f->frame_seq;
    s->capture_ns = f->capture_ns;
    s->writer_epoch = w->epoch;
    s->publish_seq = count + 1;
    uint64_t now = maskbus_now_ns();
    s->publish_ns = now;
    STORE_REL(&s->gen, g + 2u);
    STORE_RLX(&h->latest_slot, idx);
    STORE_RLX(&h->heartbeat_ns, now);
    STORE_REL(&h->publish_count, count + 1);
    STORE_REL(&h->publishing, 0u);
    __atomic_add_fetch(&h->futex, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&h->futex);
    return MASKBUS_OK;
}

int maskbus_writer_readers(maskbus_writer_t *w, unsigned *live, unsigned *stalled)
{
    if (!w || !w->readers)
        return MASKBUS_EINVAL;
    unsigned nl = 0, ns = 0;
    uint64_t now = maskbus_now_ns();
    for (unsigned i = 0; i < MASKBUS_MAX_READERS; i++) {
        maskbus_reader_entry_t *e = &w->readers->reader[i];
        int32_t pid = LOAD_ACQ(&e->pid);
        if (pid == 0)
            continue;
        if (!pid_exists(pid)) {
            __atomic_compare_exchange_n(&e->pid, &pid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
            continue;
        }
        uint64_t seen = LOAD_RLX(&e->last_seen_ns);
        if (now < seen || now - seen <= 4 * w->period_ns)
            nl++;
        else
            ns++;
    }
    if (live)
        *live = nl;
    if (stalled)
        *stalled = ns;
    return MASKBUS_OK;
}

uint64_t maskbus_writer_epoch(const maskbus_writer_t *w)
{
    return w ? w->epoch : 0;
}

const char *maskbus_writer_error(const maskbus_writer_t *w)
{
    return w ? w->err : "no writer";
}

void maskbus_writer_close(maskbus_writer_t *w, int unlink_objects)
{
    if (!w)
        return;
    if (w->hdr && w->epoch) {
        maskbus_header_t *h = w->hdr;
        STORE_RLX(&h->writer_pid, 0);
        STORE_REL(&h->state, (uint32_t)MASKBUS_STATE_CLOSED);
        __atomic_add_fetch(&h->futex, 1u, __ATOMIC_RELEASE);
        futex_wake_all(&h->futex);
    }
    if (unlink_objects && w->epoch) {
        shm_unlink(w->name);
        shm_unlink(w->rname);
    }
    if (w->hdr)
        munmap(w->hdr, w->mapped);
    if (w->readers)
        munmap(w->readers, sizeof(maskbus_readers_t));
    if (w->rfd >= 0)
        close(w->rfd);
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

int maskbus_unlink(const char *instance)
{
    char name[NAME_MAX_LEN], rname[RNAME_MAX_LEN];
    int rc = object_names(instance, name, rname, NULL, 0);
    if (rc != MASKBUS_OK)
        return rc;
    int a = shm_unlink(name), ea = errno;
    shm_unlink(rname);
    return a == 0 ? MASKBUS_OK : sys_code(ea);
}

/* ------------------------------------------------------------------------------------------------------------ */
/* Reader */

struct maskbus_reader {
    char name[NAME_MAX_LEN], rname[RNAME_MAX_LEN];
    int fd;
    dev_t dev;
    ino_t ino;
    const maskbus_header_t *hdr;
    size_t mapped;
    maskbus_readers_t *readers;
    maskbus_reader_entry_t *entry;
    maskbus_reader_opts_t opts;
    uint64_t epoch;         /* the writer epoch this reader follows */
    uint64_t last_seq;      /* publish_seq of the last frame returned */
    uint64_t open_count;    /* publish_count when the reader attached: frames after it count as missed */
    uint32_t source_state;  /* the writer's source state last reported to the caller */
    int gone_reported;      /* WRITER_GONE already returned for the current writer */
    uint64_t torn_retries;
    uint64_t remaps;
    uint64_t spins;
    uint8_t *buf[MASKBUS_MAX_PLANES];
    size_t buf_size[MASKBUS_MAX_PLANES];
    char err[256];
};

/* Validate an open frame object and map it; on success the reader holds the new mapping. */
static int reader_attach(maskbus_reader_t *r, int fd, char *err, size_t err_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, err_len, "fstat %s: %s", r->name, strerror(errno));
        return MASKBUS_ESYS;
    }
    if (st.st_size < (off_t)sizeof(maskbus_header_t)) {
        set_err(err, err_len, "%s is %lld bytes, smaller than the %zu-byte bus header (not created yet, or "
                              "truncated)", r->name, (long long)st.st_size, sizeof(maskbus_header_t));
        return st.st_size == 0 ? MASKBUS_EFORMAT : MASKBUS_ETRUNC;
    }
    maskbus_header_t peek;
    if (pread(fd, &peek, sizeof(peek), 0) != (ssize_t)sizeof(peek)) {
        set_err(err, err_len, "reading the header of %s: %s", r->name, strerror(errno));
        return MASKBUS_ESYS;
    }
    if (memcmp(peek.magic, MASKBUS_MAGIC, 8) != 0) {
        set_err(err, err_len, "%s is not a maskbus object (bad magic; a writer still starting?)", r->name);
        return MASKBUS_EFORMAT;
    }
    if (peek.abi_version > MASKBUS_ABI_VERSION) {
        set_err(err, err_len, "%s uses bus ABI version %u; this library reads version %u: update libmaskbus",
                r->name, peek.abi_version, MASKBUS_ABI_VERSION);
        return MASKBUS_EVERSION;
    }
    if (peek.abi_version != MASKBUS_ABI_VERSION || peek.header_size != sizeof(maskbus_header_t) ||
        peek.slot_header_size != sizeof(maskbus_slot_t) || peek.slot_count < MASKBUS_MIN_SLOTS ||
        peek.slot_count > MASKBUS_MAX_SLOTS || peek.slots_offset < sizeof(maskbus_header_t) ||
        peek.slot_size < sizeof(maskbus_slot_t) || peek.slot_size > (1ull << 40) ||
        peek.total_size != peek.slots_offset + (uint64_t)peek.slot_count * peek.slot_size) {
        set_err(err, err_len, "%s has an inconsistent header (version %u, %u slots of %llu bytes, total %llu)",
                r->name, peek.abi_version, peek.slot_count, (unsigned long long)peek.slot_size,
                (unsigned long long)peek.total_size);
        return MASKBUS_EFORMAT;
    }
    if ((uint64_t)st.st_size < peek.total_size) {
        set_err(err, err_len, "%s is %lld bytes but its header says %llu: truncated", r->name,
                (long long)st.st_size, (unsigned long long)peek.total_size);
        return MASKBUS_ETRUNC;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        set_err(err, err_len, "mmap %s: %s", r->name, strerror(errno));
        return MASKBUS_ESYS;
    }
    if (r->hdr)
        munmap((void *)r->hdr, r->mapped);
    if (r->fd >= 0 && r->fd != fd)
        close(r->fd);
    r->fd = fd;
    r->hdr = p;
    r->mapped = (size_t)st.st_size;
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    return MASKBUS_OK;
}

static void reader_register(maskbus_reader_t *r)
{
    if (r->opts.no_register)
        return;
    int fd = shm_open(r->rname, O_RDWR, 0);
    if (fd < 0)
        return; /* no write access to the table: read unregistered */
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(maskbus_readers_t))
        p = mmap(NULL, sizeof(maskbus_readers_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    maskbus_readers_t *t = p;
    if (memcmp(t->magic, MASKBUS_READERS_MAGIC, 8) != 0) {
        munmap(p, sizeof(*t));
        return;
    }
    int32_t me = (int32_t)getpid();
    for (unsigned i = 0; i < MASKBUS_MAX_READERS; i++) {
        maskbus_reader_entry_t *e = &t->reader[i];
        int32_t pid = LOAD_ACQ(&e->pid);
        if (pid != 0 && pid_exists(pid))
            continue;
        STORE_RLX(&e->last_seen_ns, maskbus_now_ns());
        if (__atomic_compare_exchange_n(&e->pid, &pid, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            STORE_RLX(&e->flags, r->opts.in_place ? 1u : 0u);
            STORE_RLX(&e->last_seq, 0);
            STORE_RLX(&e->missed, 0);
            r->readers = t;
            r->entry = e;
            return;
        }
    }
    munmap(p, sizeof(*t));
}

static void reader_unregister(maskbus_reader_t *r)
{
    if (r->entry) {
        int32_t me = (int32_t)getpid();
        __atomic_compare_exchange_n(&r->entry->pid, &me, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    if (r->readers)
        munmap(r->readers, sizeof(maskbus_readers_t));
    r->readers = NULL;
    r->entry = NULL;
}

int maskbus_reader_open(const char *instance, const maskbus_reader_opts_t *opts, maskbus_reader_t **out,
                        char *err, size_t err_len)
{
    if (!out) {
        set_err(err, err_len, "maskbus_reader_open: out is NULL");
        return MASKBUS_EINVAL;
    }
    *out = NULL;
    maskbus_reader_t *r = calloc(1, sizeof(*r));
    if (!r) {
        set_err(err, err_len, "out of memory");
        return MASKBUS_ESYS;
    }
    r->fd = -1;
    if (opts)
        r->opts = *opts;
    int rc = object_names(instance, r->name, r->rname, err, err_len);
    if (rc != MASKBUS_OK)
        goto fail;
    int fd = shm_open(r->name, O_RDONLY, 0);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            set_err(err, err_len, "no bus %s (is maskd running for instance '%s'?)", r->name, instance);
        else
            set_err(err, err_len, "opening bus %s: %s", r->name, strerror(e));
        rc = sys_code(e);
        goto fail;
    }
    rc = reader_attach(r, fd, err, err_len);
    if (rc != MASKBUS_OK) {
        close(fd);
        goto fail;
    }
    r->epoch = LOAD_ACQ(&r->hdr->writer_epoch);
    r->open_count = LOAD_ACQ(&r->hdr->publish_count);
    r->source_state = LOAD_ACQ(&r->hdr->source_state);
    if (!writer_alive(r->hdr, maskbus_now_ns(), NULL))
        r->last_seq = r->open_count; /* a dead writer's last frame is stale: not delivered */
    reader_register(r);
    *out = r;
    return MASKBUS_OK;
fail:
    maskbus_reader_close(r);
    return rc;
}

/* Follow a grown object: remap when the header's total size exceeds the mapping. */
static int reader_follow_size(maskbus_reader_t *r)
{
    uint32_t lg = LOAD_ACQ(&r->hdr->layout_gen);
    if (lg & 1u)
        return MASKBUS_EAGAIN;
    uint64_t total = LOAD_RLX(&r->hdr->total_size);
    if (total <= r->mapped)
        return MASKBUS_OK;
    int fd = dup(r->fd);
    if (fd < 0) {
        set_err(r->err, sizeof(r->err), "dup: %s", strerror(errno));
        return MASKBUS_ESYS;
    }
    int rc = reader_attach(r, fd, r->err, sizeof(r->err));
    if (rc != MASKBUS_OK) {
        close(fd);
        /* the writer may have grown the object again between our look at layout_gen and reader_attach's fstat
         * and pread: a header read mid-change, or a total size newer than the size fstat saw. The old mapping
         * still shows the live header; when its layout moved on, this was a race, not a bad object. */
        if ((rc == MASKBUS_EFORMAT || rc == MASKBUS_ETRUNC) && LOAD_ACQ(&r->hdr->layout_gen) != lg)
            return MASKBUS_EAGAIN;
        return rc;
    }
    r->remaps++;
    return MASKBUS_OK;
}

/* When the writer is gone, the name may now point at a new object (the old one was removed and recreated).
 * Switch to it when it is a valid bus. */
static void reader_follow_name(maskbus_reader_t *r)
{
    int fd = shm_open(r->name, O_RDONLY, 0);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_dev == r->dev && st.st_ino == r->ino)) {
        close(fd);
        return;
    }
    char tmp[8];
    if (reader_attach(r, fd, tmp, sizeof(tmp)) != MASKBUS_OK) {
        close(fd);
        return;
    }
    r->remaps++;
    r->last_seq = 0;
    r->open_count = LOAD_ACQ(&r->hdr->publish_count);
    reader_unregister(r);
    reader_register(r);
}

static int ensure_buf(maskbus_reader_t *r, unsigned i, size_t size)
{
    if (r->buf_size[i] >= size)
        return MASKBUS_OK;
    uint8_t *p = realloc(r->buf[i], size);
    if (!p) {
        set_err(r->err, sizeof(r->err), "out of memory for a %zu-byte plane", size);
        return MASKBUS_ESYS;
    }
    r->buf[i] = p;
    r->buf_size[i] = size;
    return MASKBUS_OK;
}

/* Read the newest slot consistently. MASKBUS_FRAME when it holds a frame newer than last_seq, MASKBUS_TIMEOUT
 * when it does not (nothing new), MASKBUS_EAGAIN when the writer kept overwriting it. */
static int reader_read_latest(maskbus_reader_t *r, maskbus_frame_t *f)
{
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        if (attempt)
            r->torn_retries++;
        int rc = reader_follow_size(r);
        if (rc == MASKBUS_EAGAIN) {
            sched_yield();
            continue;
        }
        if (rc != MASKBUS_OK)
            return rc;
        const maskbus_header_t *h = r->hdr;
        uint32_t l1 = LOAD_ACQ(&h->layout_gen);
        if (l1 & 1u)
            continue;
        uint32_t count = LOAD_RLX(&h->slot_count);
        uint64_t soff = LOAD_RLX(&h->slots_offset), ssize = LOAD_RLX(&h->slot_size);
        uint32_t idx = LOAD_RLX(&h->latest_slot);
        if (count < MASKBUS_MIN_SLOTS || count > MASKBUS_MAX_SLOTS || idx >= count ||
            ssize < sizeof(maskbus_slot_t) || soff + (uint64_t)count * ssize > r->mapped)
            continue; /* a layout change in progress; l1/l2 settle it */
        const maskbus_slot_t *s = (const maskbus_slot_t *)((const uint8_t *)h + soff + (uint64_t)idx * ssize);
        uint64_t g1 = LOAD_ACQ(&s->gen);
        if (g1 & 1u)
            continue;
        maskbus_slot_t meta;
        memcpy(&meta, s, sizeof(meta));
        /* the moment this reader knows of the frame: its header was published (gen even) before this */
        uint64_t wake = maskbus_now_ns();
        int valid = meta.publish_seq != 0;
        for (unsigned i = 0; valid && i < MASKBUS_MAX_PLANES; i++) {
            const maskbus_plane_t *p = &meta.plane[i];
            if (!(meta.planes & (1u << i)))
                continue;
            valid = p->format == plane_format[i] && p->width == meta.width && p->height == meta.height &&
                    p->stride >= p->width * plane_bpp[i] && p->size == (uint64_t)p->stride * p->height &&
                    p->offset >= sizeof(maskbus_slot_t) && p->offset <= ssize && p->size <= ssize - p->offset;
        }
        valid = valid && meta.ndetections <= MASKBUS_MAX_DETECTIONS && meta.planes != 0 &&
                !(meta.planes >> MASKBUS_MAX_PLANES);
        int newer = valid && meta.publish_seq > r->last_seq;
        if (newer && !r->opts.in_place) {
            for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
                if (!(meta.planes & (1u << i)))
                    continue;
                rc = ensure_buf(r, i, meta.plane[i].size);
                if (rc != MASKBUS_OK)
                    return rc;
                memcpy(r->buf[i], (const uint8_t *)s + meta.plane[i].offset, meta.plane[i].size);
            }
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t g2 = LOAD_RLX(&s->gen);
        uint32_t l2 = LOAD_RLX(&h->layout_gen);
        if (g1 != g2 || l1 != l2)
            continue;
        if (!valid && meta.publish_seq != 0) {
            set_err(r->err, sizeof(r->err), "slot %u of %s has an inconsistent plane table", idx, r->name);
            return MASKBUS_EFORMAT;
        }
        if (!newer)
            return MASKBUS_TIMEOUT;
        memset(f, 0, sizeof(*f));
        f->publish_seq = meta.publish_seq;
        f->frame_seq = meta.frame_seq;
        f->capture_ns = meta.capture_ns;
        f->publish_ns = meta.publish_ns;
        f->wake_ns = wake;
        f->writer_epoch = meta.writer_epoch;
        uint64_t base = r->last_seq ? r->last_seq : (r->open_count ? r->open_count - 1 : 0);
        f->missed = meta.publish_seq > base ? meta.publish_seq - base - 1 : 0;
        f->width = meta.width;
        f->height = meta.height;
        f->planes = meta.planes;
        f->flags = meta.flags;
        f->ndetections = meta.ndetections;
        memcpy(f->detections, meta.detections, meta.ndetections * sizeof(maskbus_detection_t));
        memcpy(f->plane, meta.plane, sizeof(meta.plane));
        for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++) {
            if (meta.planes & (1u << i))
                f->data[i] = r->opts.in_place ? (const uint8_t *)s + meta.plane[i].offset : r->buf[i];
        }
        f->slot = idx;
        f->gen = g1;
        f->layout_gen = l1;
        f->read_ns = maskbus_now_ns();
        r->last_seq = meta.publish_seq;
        if (r->entry) {
            STORE_RLX(&r->entry->last_seq, meta.publish_seq);
            STORE_RLX(&r->entry->missed, LOAD_RLX(&r->entry->missed) + f->missed);
        }
        return MASKBUS_FRAME;
    }
    set_err(r->err, sizeof(r->err), "the newest slot of %s changed during %d consecutive reads", r->name,
            READ_ATTEMPTS);
    return MASKBUS_EAGAIN;
}

int maskbus_reader_next(maskbus_reader_t *r, int timeout_ms, maskbus_frame_t *f)
{
    if (!r || !r->hdr || !f)
        return MASKBUS_EINVAL;
    uint64_t start = maskbus_now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        const maskbus_header_t *h = r->hdr;
        uint64_t now = maskbus_now_ns();
        if (r->entry)
            STORE_RLX(&r->entry->last_seen_ns, now);
        uint32_t fw = LOAD_ACQ(&h->futex);
        uint64_t epoch = LOAD_ACQ(&h->writer_epoch);
        int alive = writer_alive(h, now, NULL);
        if (alive && epoch != r->epoch) {
            r->epoch = epoch;
            r->gone_reported = 0;
            return MASKBUS_WRITER_RESTARTED;
        }
        uint32_t src = LOAD_ACQ(&h->source_state);
        if (alive && src != r->source_state) {
            r->source_state = src;
            return MASKBUS_SOURCE_CHANGED;
        }
        /* frames first: what a writer published before it died is still delivered, then its death */
        uint64_t pc = LOAD_ACQ(&h->publish_count);
        if (pc > r->last_seq) {
            int rc = reader_read_latest(r, f);
            if (rc == MASKBUS_EAGAIN) {
                /* the writer lapped this reader during every attempt (a loaded machine): try again until the
                 * deadline rather than give up on a frame that is there */
                if (maskbus_now_ns() >= deadline)
                    return rc;
                sched_yield();
                continue;
            }
            if (rc != MASKBUS_TIMEOUT)
                return rc;
            if (r->hdr != h)
                continue; /* the object grew and was mapped anew: h points into the old mapping, now unmapped */
        }
        if (!alive && !r->gone_reported && r->epoch != 0) {
            r->gone_reported = 1;
            return MASKBUS_WRITER_GONE;
        }
        if (!alive) {
            uint64_t remaps = r->remaps;
            reader_follow_name(r);
            if (r->remaps != remaps) {
                if (!r->epoch) /* never had a writer: a later one is a start, not a restart */
                    r->epoch = writer_alive(r->hdr, now, NULL) ? LOAD_ACQ(&r->hdr->writer_epoch) : 0;
                continue;
            }
        }
        now = maskbus_now_ns();
        if (now >= deadline)
            return MASKBUS_TIMEOUT;
        if (!r->opts.no_spin && LOAD_ACQ(&h->publishing) != 0 && alive) {
            /* woken early by a publish in progress: wait for it on the CPU (bounded), not in the kernel */
            uint64_t end = now + SPIN_NS < deadline ? now + SPIN_NS : deadline;
            for (unsigned i = 1; LOAD_ACQ(&h->publish_count) == pc && LOAD_ACQ(&h->publishing) != 0; i++) {
                if (i % 64 == 0) {
                    if (maskbus_now_ns() >= end)
                        break;
                    sched_yield();
                } else {
                    cpu_relax();
                }
            }
            r->spins++;
            if (LOAD_ACQ(&h->publish_count) != pc)
                continue;
        }
        uint64_t period = LOAD_RLX(&h->heartbeat_period_ns);
        uint64_t check = period / 4;
        if (check < 1000000ull)
            check = 1000000ull;
        if (check > 1000000000ull)
            check = 1000000000ull;
        uint64_t wait = deadline - now < check ? deadline - now : check;
        if (futex_wait(&h->futex, fw, wait) != 0 && errno != EAGAIN && errno != ETIMEDOUT && errno != EINTR) {
            set_err(r->err, sizeof(r->err), "futex wait on %s: %s", r->name, strerror(errno));
            return MASKBUS_ESYS;
        }
    }
}

int maskbus_reader_check(maskbus_reader_t *r, const maskbus_frame_t *f)
{
    if (!r || !r->hdr || !f)
        return MASKBUS_EINVAL;
    const maskbus_header_t *h = r->hdr;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t soff = LOAD_RLX(&h->slots_offset), ssize = LOAD_RLX(&h->slot_size);
    uint32_t count = LOAD_RLX(&h->slot_count);
    if (LOAD_RLX(&h->layout_gen) != f->layout_gen || f->slot >= count ||
        soff + (uint64_t)count * ssize > r->mapped)
        return MASKBUS_ETORN;
    const maskbus_slot_t *s = (const maskbus_slot_t *)((const uint8_t *)h + soff + (uint64_t)f->slot * ssize);
    if (LOAD_RLX(&s->gen) != f->gen || LOAD_RLX(&s->publish_seq) != f->publish_seq)
        return MASKBUS_ETORN;
    return MASKBUS_OK;
}

int maskbus_reader_status(maskbus_reader_t *r, maskbus_status_t *st)
{
    if (!r || !r->hdr || !st)
        return MASKBUS_EINVAL;
    const maskbus_header_t *h = r->hdr;
    memset(st, 0, sizeof(*st));
    st->writer_alive = writer_alive(h, maskbus_now_ns(), &st->heartbeat_age_ns);
    st->writer_pid = LOAD_RLX(&h->writer_pid);
    st->writer_epoch = LOAD_RLX(&h->writer_epoch);
    st->publish_count = LOAD_ACQ(&h->publish_count);
    st->torn_retries = r->torn_retries;
    st->remaps = r->remaps;
    st->source_state = LOAD_ACQ(&h->source_state);
    return MASKBUS_OK;
}

const char *maskbus_reader_error(const maskbus_reader_t *r)
{
    return r ? r->err : "no reader";
}

void maskbus_reader_close(maskbus_reader_t *r)
{
    if (!r)
        return;
    reader_unregister(r);
    if (r->hdr)
        munmap((void *)r->hdr, r->mapped);
    if (r->fd >= 0)
        close(r->fd);
    for (unsigned i = 0; i < MASKBUS_MAX_PLANES; i++)
        free(r->buf[i]);
    free(r);
}
