/* test_maskbus: the frame bus — ABI layout, readers in separate processes (order, stalls, torn reads), writer death
 * and restart, geometry changes (also growing under waiting readers), and every way of opening a bad object. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "maskbus.h"
#include "maskbus_pattern.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------------------------------------ */

static char inst[64];

static const char *bus(const char *tag)
{
    snprintf(inst, sizeof(inst), "test-%d-%s", (int)getpid(), tag);
    maskbus_unlink(inst);
    return inst;
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static maskbus_writer_t *open_writer(const char *name, uint32_t w, uint32_t h, uint32_t planes, uint64_t period_ms)
{
    maskbus_writer_opts_t o;
    maskbus_writer_opts_default(&o);
    o.max_width = w;
    o.max_height = h;
    o.planes = planes;
    o.heartbeat_period_ns = period_ms * 1000000ull;
    maskbus_writer_t *wr = NULL;
    char err[256] = "";
    int rc = maskbus_writer_open(name, &o, &wr, err, sizeof(err));
    if (rc != MASKBUS_OK)
        fail_msg("writer_open(%s): %s: %s", name, maskbus_strerror(rc), err);
    return wr;
}

static maskbus_reader_t *open_reader(const char *name, int in_place)
{
    maskbus_reader_opts_t o = {.in_place = in_place};
    maskbus_reader_t *r = NULL;
    char err[256] = "";
    int rc = maskbus_reader_open(name, &o, &r, err, sizeof(err));
    if (rc != MASKBUS_OK)
        fail_msg("reader_open(%s): %s: %s", name, maskbus_strerror(rc), err);
    return r;
}

static void publish_pattern(maskbus_writer_t *w, maskbus_pattern_t *p, uint64_t seq)
{
    maskbus_frame_in_t in;
    maskbus_pattern_fill(p, seq, &in);
    int rc = maskbus_writer_publish(w, &in);
    if (rc != MASKBUS_OK)
        fail_msg("publish %llu: %s: %s", (unsigned long long)seq, maskbus_strerror(rc), maskbus_writer_error(w));
}

/* What a reader process reports back through a pipe. */
typedef struct {
    int open_rc;
    uint64_t frames, missed, out_of_order, bad_content, torn_discarded, torn_retries, last_seq, last_frame_seq;
    uint64_t gone, restarted, errors;
    int last_rc;
} reader_report_t;

typedef struct {
    const char *name;
    uint64_t until_seq; /* stop after reading frame_seq >= this */
    int in_place;
    int timeout_ms;     /* per next() call; a timeout ends the loop */
} reader_job_t;

static void reader_loop(const reader_job_t *job, reader_report_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    maskbus_reader_opts_t o = {.in_place = job->in_place};
    maskbus_reader_t *r = NULL;
    rep->open_rc = maskbus_reader_open(job->name, &o, &r, NULL, 0);
    if (rep->open_rc != MASKBUS_OK)
        return;
    maskbus_frame_t f;
    uint64_t prev = 0;
    for (;;) {
        int rc = maskbus_reader_next(r, job->timeout_ms, &f);
        rep->last_rc = rc;
        if (rc == MASKBUS_WRITER_GONE) {
            rep->gone++;
            continue;
        }
        if (rc == MASKBUS_WRITER_RESTARTED) {
            rep->restarted++;
            continue;
        }
        if (rc == MASKBUS_SOURCE_CHANGED)
            continue;
        if (rc != MASKBUS_FRAME) {
            if (rc < 0)
                rep->errors++;
            break;
        }
        int ok = maskbus_pattern_check(&f);
        if (job->in_place && maskbus_reader_check(r, &f) != MASKBUS_OK) {
            rep->torn_discarded++; /* the seqlock said so: legitimately discarded */
        } else if (!ok) {
            rep->bad_content++; /* the seqlock said consistent but the bytes are not one frame: a torn read */
        }
        rep->frames++;
        rep->missed += f.missed;
        if (f.publish_seq <= prev)
            rep->out_of_order++;
        prev = f.publish_seq;
        rep->last_seq = f.publish_seq;
        rep->last_frame_seq = f.frame_seq;
        if (f.frame_seq >= job->until_seq)
            break;
    }
    maskbus_status_t st;
    maskbus_reader_status(r, &st);
    rep->torn_retries = st.torn_retries;
    maskbus_reader_close(r);
}

typedef struct {
    pid_t pid;
    int fd;
} child_t;

static child_t spawn_reader(const reader_job_t *job)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        reader_report_t rep;
        reader_loop(job, &rep);
        ssize_t n = write(p[1], &rep, sizeof(rep));
        _exit(n == (ssize_t)sizeof(rep) ? 0 : 1);
    }
    close(p[1]);
    return (child_t){pid, p[0]};
}

static reader_report_t join_reader(child_t c)
{
    reader_report_t rep;
    memset(&rep, 0, sizeof(rep));
    ssize_t n = read(c.fd, &rep, sizeof(rep));
    close(c.fd);
    int status = 0;
    waitpid(c.pid, &status, 0);
    if (n != (ssize_t)sizeof(rep) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("reader process %d failed (status 0x%x, %zd bytes of report)", (int)c.pid, status, n);
    return rep;
}

/* Wait until the writer sees `n` live registered readers. */
static void wait_readers(maskbus_writer_t *w, unsigned n)
{
    unsigned live = 0;
    for (int i = 0; i < 2000 && live < n; i++) {
        maskbus_writer_readers(w, &live, NULL);
        if (live < n)
            sleep_ms(1);
    }
    assert_int_equal(live, n);
}

/* Wait (up to 2 s) until n registered readers have read frame `seq`, looking at the reader table as the ABI lays it
 * out. */
static void wait_readers_at(const char *name, unsigned n, uint64_t seq)
{
    char path[128];
    maskbus_object_name(name, path, sizeof(path));
    strncat(path, MASKBUS_READERS_SUFFIX, sizeof(path) - strlen(path) - 1);
    int fd = shm_open(path, O_RDONLY, 0);
    assert_true(fd >= 0);
    const maskbus_readers_t *t = mmap(NULL, sizeof(*t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(t != MAP_FAILED);
    unsigned done = 0;
    for (int i = 0; i < 2000 && done < n; i++) {
        done = 0;
        for (unsigned k = 0; k < MASKBUS_MAX_READERS; k++)
            done += __atomic_load_n(&t->reader[k].pid, __ATOMIC_ACQUIRE) != 0 &&
                    __atomic_load_n(&t->reader[k].last_seq, __ATOMIC_ACQUIRE) >= seq;
        if (done < n)
            sleep_ms(1);
    }
    munmap((void *)t, sizeof(*t));
    assert_int_equal(done, n);
}

/* Start n reader processes (reader `in_place_one` reads in place, the others copy) and wait until they registered. */
static void spawn_readers(maskbus_writer_t *w, reader_job_t job, int n, int in_place_one, child_t *c)
{
    for (int i = 0; i < n; i++) {
        job.in_place = i == in_place_one;
        c[i] = spawn_reader(&job);
    }
    wait_readers(w, (unsigned)n);
}

/* What every reader of a healthy run reports: opened, read to `last`, in order, no torn frame, no error. */
static void assert_clean_report(const reader_report_t *rep, uint64_t last)
{
    assert_int_equal(rep->open_rc, MASKBUS_OK);
    assert_int_equal(rep->bad_content, 0);
    assert_int_equal(rep->out_of_order, 0);
    if (rep->errors)
        fail_msg("a reader ended on error %d (%s) after %llu frames", rep->last_rc, maskbus_strerror(rep->last_rc),
                 (unsigned long long)rep->frames);
    assert_int_equal(rep->last_frame_seq, last);
}

/* ---- ABI -------------------------------------------------------------------------------------------------- */

static void test_abi_layout(void **state)
{
    (void)state;
    assert_int_equal(sizeof(maskbus_header_t), 256);
    assert_int_equal(offsetof(maskbus_header_t, abi_version), 8);
    assert_int_equal(offsetof(maskbus_header_t, slot_count), 20);
    assert_int_equal(offsetof(maskbus_header_t, slot_size), 32);
    assert_int_equal(offsetof(maskbus_header_t, writer_pid), 52);
    assert_int_equal(offsetof(maskbus_header_t, writer_epoch), 56);
    assert_int_equal(offsetof(maskbus_header_t, heartbeat_ns), 64);
    assert_int_equal(offsetof(maskbus_header_t, futex), 80);
    assert_int_equal(offsetof(maskbus_header_t, publish_count), 88);
    assert_int_equal(offsetof(maskbus_slot_t, publish_seq), 8);
    assert_int_equal(offsetof(maskbus_slot_t, publish_ns), 32);
    assert_int_equal(offsetof(maskbus_slot_t, planes), 56);
    assert_int_equal(offsetof(maskbus_slot_t, plane), 128);
    assert_int_equal(offsetof(maskbus_slot_t, detections), 256);
    assert_int_equal(sizeof(maskbus_slot_t), 1280);
    assert_int_equal(offsetof(maskbus_detection_t, w), 16);
    assert_int_equal(offsetof(maskbus_plane_t, offset), 16);
    /* 1280x720 mask: header 1280 + 921600 bytes → 922880, rounded to 4 KiB = 925696 */
    assert_int_equal(maskbus_slot_size(1280, 720, 1), 925696);
    assert_int_equal(maskbus_slot_size(1, 1, 0) % MASKBUS_SLOT_ALIGN, 0);
    /* mask + frame: 1280 + 64 (mask 64x1 aligned) + 192 (RGB) */
    assert_int_equal(maskbus_slot_size(64, 1, 1 | 4), 4096);
}

static void test_names(void **state)
{
    (void)state;
    char name[128];
    assert_int_equal(maskbus_object_name("video0", name, sizeof(name)), MASKBUS_OK);
    assert_string_equal(name, "/maskd.video0");
    assert_int_equal(maskbus_object_name("cam@usb-1.2_x", name, sizeof(name)), MASKBUS_OK);
    const char *bad[] = {"", ".hidden", "a/b", "sp ace", "x\n", "0123456789012345678901234567890123456789012345678901234567890123456789"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(maskbus_object_name(bad[i], name, sizeof(name)), MASKBUS_EINVAL);
    char err[256] = "";
    maskbus_reader_t *r = (maskbus_reader_t *)&err;
    assert_int_equal(maskbus_reader_open("a/b", NULL, &r, err, sizeof(err)), MASKBUS_EINVAL);
    assert_null(r);
    assert_non_null(strstr(err, "a/b"));
}

/* ---- opening bad objects ---------------------------------------------------------------------------------- */

static int make_raw(const char *instance, const void *data, size_t len, size_t file_size)
{
    char name[128];
    maskbus_object_name(instance, name, sizeof(name));
    int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)file_size), 0);
    if (len)
        assert_int_equal(pwrite(fd, data, len, 0), (ssize_t)len);
    close(fd);
    return 0;
}

static int reader_open_err(const char *name, char *err, size_t len)
{
    maskbus_reader_t *r = NULL;
    err[0] = 0;
    int rc = maskbus_reader_open(name, NULL, &r, err, len);
    assert_null(r);
    return rc;
}

static void test_open_errors(void **state)
{
    (void)state;
    char err[256];
    const char *name = bus("missing");
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_ENOENT);
    assert_non_null(strstr(err, "no bus"));

    /* wrong magic: readers refuse, and a writer refuses to overwrite a foreign object */
    name = bus("magic");
    char junk[512];
    memset(junk, 'x', sizeof(junk));
    make_raw(name, junk, sizeof(junk), sizeof(junk));
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_EFORMAT);
    assert_non_null(strstr(err, "magic"));
    maskbus_writer_t *w = NULL;
    assert_int_equal(maskbus_writer_open(name, NULL, &w, err, sizeof(err)), MASKBUS_EFORMAT);
    assert_null(w);
    assert_non_null(strstr(err, "not a maskbus object"));
    maskbus_unlink(name);

    /* a newer ABI */
    name = bus("newer");
    w = open_writer(name, 64, 64, 1, 100);
    maskbus_writer_close(w, 0);
    char path[160];
    snprintf(path, sizeof(path), "/maskd.%s", name);
    int fd = shm_open(path, O_RDWR, 0);
    assert_true(fd >= 0);
    uint32_t v = MASKBUS_ABI_VERSION + 1;
    assert_int_equal(pwrite(fd, &v, 4, offsetof(maskbus_header_t, abi_version)), 4);
    close(fd);
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_EVERSION);
    assert_non_null(strstr(err, "version"));
    assert_int_equal(maskbus_writer_open(name, NULL, &w, err, sizeof(err)), MASKBUS_EVERSION);
    maskbus_unlink(name);

    /* truncated: smaller than the header, and smaller than the header says; no SIGBUS */
    name = bus("trunc");
    w = open_writer(name, 64, 64, 1, 100);
    maskbus_writer_close(w, 0);
    snprintf(path, sizeof(path), "/maskd.%s", name);
    fd = shm_open(path, O_RDWR, 0);
    assert_true(fd >= 0);
    struct stat st;
    fstat(fd, &st);
    assert_int_equal(ftruncate(fd, st.st_size - 4096), 0);
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_ETRUNC);
    assert_non_null(strstr(err, "truncated"));
    assert_int_equal(ftruncate(fd, 100), 0);
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_ETRUNC);
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_EFORMAT);
    close(fd);

    /* an inconsistent header (slot count out of range) */
    maskbus_unlink(name);
    w = open_writer(name, 64, 64, 1, 100);
    maskbus_writer_close(w, 0);
    fd = shm_open(path, O_RDWR, 0);
    uint32_t slots = 1000;
    assert_int_equal(pwrite(fd, &slots, 4, offsetof(maskbus_header_t, slot_count)), 4);
    close(fd);
    assert_int_equal(reader_open_err(name, err, sizeof(err)), MASKBUS_EFORMAT);
    assert_non_null(strstr(err, "inconsistent"));
    maskbus_unlink(name);

    /* bad writer options and bad frames */
    maskbus_writer_opts_t o;
    maskbus_writer_opts_default(&o);
    o.max_width = 0;
    assert_int_equal(maskbus_writer_open(bus("opts"), &o, &w, err, sizeof(err)), MASKBUS_EINVAL);
    assert_non_null(strstr(err, "bad bus options"));
    maskbus_writer_opts_default(&o);
    o.slots = 2;
    assert_int_equal(maskbus_writer_open(bus("opts"), &o, &w, err, sizeof(err)), MASKBUS_EINVAL);
    w = open_writer(bus("frames"), 32, 32, 1, 100);
    uint8_t px[64 * 64] = {0};
    maskbus_frame_in_t in = {.width = 0, .height = 4, .data = {px}};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_EINVAL);
    in = (maskbus_frame_in_t){.width = 8, .height = 4};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_EINVAL);
    in = (maskbus_frame_in_t){.width = 8, .height = 4, .data = {px}, .stride = {4}};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_EINVAL);
    assert_non_null(strstr(maskbus_writer_error(w), "stride"));
    in = (maskbus_frame_in_t){.width = 20000, .height = 4, .data = {px}};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_EINVAL);
    in = (maskbus_frame_in_t){.width = 8, .height = 4, .data = {px}, .ndetections = 3};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_EINVAL);
    assert_int_equal(maskbus_writer_publish(w, NULL), MASKBUS_EINVAL);
    maskbus_writer_close(w, 1);
}

static void test_second_writer_and_permissions(void **state)
{
    (void)state;
    const char *name = bus("perm");
    maskbus_writer_t *w = open_writer(name, 64, 64, 1, 100);
    char err[256] = "";
    maskbus_writer_t *w2 = NULL;
    assert_int_equal(maskbus_writer_open(name, NULL, &w2, err, sizeof(err)), MASKBUS_EBUSY);
    assert_null(w2);
    char pidtxt[32];
    snprintf(pidtxt, sizeof(pidtxt), "pid %d", (int)getpid());
    assert_non_null(strstr(err, pidtxt));
    struct stat st;
    char path[200];
    snprintf(path, sizeof(path), "/dev/shm/maskd.%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    snprintf(path, sizeof(path), "/dev/shm/maskd.%s.readers", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0660);
    maskbus_writer_close(w, 1);

    maskbus_writer_opts_t o;
    maskbus_writer_opts_default(&o);
    o.mode = 0600;
    name = bus("perm2");
    assert_int_equal(maskbus_writer_open(name, &o, &w, err, sizeof(err)), MASKBUS_OK);
    snprintf(path, sizeof(path), "/dev/shm/maskd.%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    maskbus_writer_close(w, 1);
}

/* ---- readers see every frame in order at a low rate --------------------------------------------------------- */

static void test_readers_in_order(void **state)
{
    (void)state;
    const char *name = bus("order");
    maskbus_writer_t *w = open_writer(name, 160, 120, 1 | 4, 100);
    maskbus_pattern_t p;
    assert_int_equal(maskbus_pattern_alloc(&p, 160, 120, 1 | 4), 0);
    /* one frame is already there when the readers open: they get it first */
    publish_pattern(w, &p, 1);
    enum { NREADERS = 3, FRAMES = 100 };
    reader_job_t job = {.name = name, .until_seq = FRAMES, .timeout_ms = 2000};
    child_t c[NREADERS];
    spawn_readers(w, job, NREADERS, 2, c);
    sleep_ms(20); /* let them read frame 1 */
    for (uint64_t s = 2; s <= FRAMES; s++) {
        /* a low rate: the next frame only once every reader has read this one (the reader table says so), so that
         * no reader can miss a frame however loaded the machine is; 2 s at most per frame */
        wait_readers_at(name, NREADERS, s - 1);
        publish_pattern(w, &p, s);
    }
    for (int i = 0; i < NREADERS; i++) {
        reader_report_t rep = join_reader(c[i]);
        assert_clean_report(&rep, FRAMES);
        assert_int_equal(rep.frames, FRAMES);
        assert_int_equal(rep.missed, 0);
        assert_int_equal(rep.torn_discarded, 0);
    }
    unsigned live = 99;
    maskbus_writer_readers(w, &live, NULL);
    assert_int_equal(live, 0); /* they closed and unregistered */
    maskbus_pattern_free(&p);
    maskbus_writer_close(w, 1);
}

/* ---- a stopped reader costs the writer nothing ------------------------------------------------------------ */

static void test_stopped_reader(void **state)
{
    (void)state;
    const char *name = bus("stop");
    maskbus_writer_t *w = open_writer(name, 320, 240, 1, 10);
    maskbus_pattern_t p;
    assert_int_equal(maskbus_pattern_alloc(&p, 320, 240, 1), 0);
    enum { FRAMES = 10000 };
    reader_job_t job = {.name = name, .until_seq = FRAMES + 1, .timeout_ms = 5000};
    child_t c = spawn_reader(&job);
    wait_readers(w, 1);
    publish_pattern(w, &p, 1);
    sleep_ms(20);
    assert_int_equal(kill(c.pid, SIGSTOP), 0);
    int st;
    assert_int_equal(waitpid(c.pid, &st, WUNTRACED), c.pid);
    assert_true(WIFSTOPPED(st));
    /* every publish returns at once although the reader holds nothing and reads nothing */
    for (uint64_t s = 2; s <= FRAMES; s++)
        publish_pattern(w, &p, s);
    sleep_ms(60); /* > 4 heartbeat periods: the writer now calls the reader stalled */
    maskbus_writer_heartbeat(w);
    unsigned live = 9, stalled = 9;
    maskbus_writer_readers(w, &live, &stalled);
    assert_int_equal(live, 0);
    assert_int_equal(stalled, 1);
    assert_int_equal(kill(c.pid, SIGCONT), 0);
    sleep_ms(50);
    publish_pattern(w, &p, FRAMES + 1);
    reader_report_t rep = join_reader(c);
    /* it resumed with the newest frame, counted what it missed, and never saw a torn frame */
    assert_int_equal(rep.bad_content, 0);
    assert_int_equal(rep.last_frame_seq, FRAMES + 1);
    assert_true(rep.frames >= 2 && rep.frames <= 4);
    assert_int_equal(rep.missed + rep.frames, FRAMES + 1);
    maskbus_pattern_free(&p);
    maskbus_writer_close(w, 1);
}

/* ---- torn reads: none, over 100,000 frames, through geometry changes ----------------------------------------- */

static void test_stress_no_torn_reads(void **state)
{
    (void)state;
    const char *name = bus("stress");
    /* sized for the smallest geometry, so the larger ones force the object to grow while readers read */
    maskbus_writer_t *w = open_writer(name, 64, 48, 1 | 4, 50);
    static const uint32_t sizes[][2] = {{64, 48}, {160, 120}, {96, 200}, {320, 240}, {160, 120}};
    maskbus_pattern_t p[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(maskbus_pattern_alloc(&p[i], sizes[i][0], sizes[i][1], 1 | 4), 0);
    enum { FRAMES = 100000, NREADERS = 2 };
    reader_job_t job = {.name = name, .until_seq = FRAMES, .timeout_ms = 3000};
    child_t c[NREADERS];
    spawn_readers(w, job, NREADERS, 1, c);
    for (uint64_t s = 1; s <= FRAMES; s++)
        publish_pattern(w, &p[(s / 5000) % 5], s);
    for (int i = 0; i < NREADERS; i++) {
        reader_report_t rep = join_reader(c[i]);
        print_message("reader %d (%s): %llu frames read, %llu missed, %llu torn retries, %llu discarded by check, "
                      "%llu bad\n", i, i ? "in place" : "copy", (unsigned long long)rep.frames,
                      (unsigned long long)rep.missed, (unsigned long long)rep.torn_retries,
                      (unsigned long long)rep.torn_discarded, (unsigned long long)rep.bad_content);
        assert_clean_report(&rep, FRAMES);
        assert_int_equal(rep.frames + rep.missed, FRAMES);
        assert_true(rep.frames > 100);
    }
    for (int i = 0; i < 5; i++)
        maskbus_pattern_free(&p[i]);
    maskbus_writer_close(w, 1);
}

/* ---- geometry: readers see each new size, never garbage ------------------------------------------------------ */

static void test_geometry_change(void **state)
{
    (void)state;
    const char *name = bus("geom");
    maskbus_writer_t *w = open_writer(name, 320, 240, 1, 100);
    maskbus_reader_t *r = open_reader(name, 0);
    static const uint32_t sizes[][2] = {{320, 240}, {1920, 1080}, {640, 480}, {1, 1}, {4000, 3000}};
    maskbus_frame_t f;
    for (uint64_t i = 0; i < 5; i++) {
        maskbus_pattern_t p;
        assert_int_equal(maskbus_pattern_alloc(&p, sizes[i][0], sizes[i][1], 1 | 8), 0);
        publish_pattern(w, &p, 100 + i);
        assert_int_equal(maskbus_reader_next(r, 1000, &f), MASKBUS_FRAME);
        assert_int_equal(f.width, sizes[i][0]);
        assert_int_equal(f.height, sizes[i][1]);
        assert_int_equal(f.planes, 1 | 8);
        assert_int_equal(f.plane[MASKBUS_PLANE_DISP].format, MASKBUS_FMT_GRAY16);
        assert_int_equal(f.plane[MASKBUS_PLANE_DISP].stride, sizes[i][0] * 2);
        assert_int_equal(f.frame_seq, 100 + i);
        assert_int_equal(f.missed, 0);
        assert_true(maskbus_pattern_check(&f));
        maskbus_pattern_free(&p);
    }
    maskbus_status_t st;
    maskbus_reader_status(r, &st);
    assert_true(st.remaps >= 2); /* 1080p and 4000x3000 grew the object */
    /* a strided source is packed on the way in */
    uint8_t src[4 * 16];
    for (int i = 0; i < 64; i++)
        src[i] = (uint8_t)i;
    maskbus_frame_in_t in = {.width = 3, .height = 4, .data = {src}, .stride = {16}, .frame_seq = 7};
    assert_int_equal(maskbus_writer_publish(w, &in), MASKBUS_OK);
    assert_int_equal(maskbus_reader_next(r, 1000, &f), MASKBUS_FRAME);
    assert_int_equal(f.plane[0].stride, 3);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 3; x++)
            assert_int_equal(f.data[0][y * 3 + x], y * 16 + x);
    /* nothing new: a timeout, quickly */
    uint64_t t0 = maskbus_now_ns();
    assert_int_equal(maskbus_reader_next(r, 30, &f), MASKBUS_TIMEOUT);
    uint64_t dt = maskbus_now_ns() - t0;
    assert_true(dt >= 29000000ull && dt < 1000000000ull);
    maskbus_reader_close(r);
    maskbus_writer_close(w, 1);
}

/* The object grows with every frame (each one wider than the last, large enough that copying it takes a while)
 * while readers in other processes fall behind: a reader that finds the object grown maps it anew and may then
 * find the newest slot emptied by the new layout (nothing to read yet); it must not touch the old mapping again (a
 * crash). */
static void test_growth_under_readers(void **state)
{
    (void)state;
    const char *name = bus("grow");
    maskbus_writer_t *w = open_writer(name, 64, 240, 1 | 4, 50);
    enum { FRAMES = 400, NREADERS = 2 };
    reader_job_t job = {.name = name, .until_seq = FRAMES, .timeout_ms = 3000};
    child_t c[NREADERS];
    spawn_readers(w, job, NREADERS, 1, c);
    for (uint64_t s = 1; s <= FRAMES; s++) {
        maskbus_pattern_t p;
        assert_int_equal(maskbus_pattern_alloc(&p, 64 + 4 * (uint32_t)s, 240, 1 | 4), 0);
        publish_pattern(w, &p, s);
        maskbus_pattern_free(&p);
    }
    for (int i = 0; i < NREADERS; i++) {
        reader_report_t rep = join_reader(c[i]);
        assert_clean_report(&rep, FRAMES);
    }
    maskbus_writer_close(w, 1);
}

/* ---- writer death and restart ------------------------------------------------------------------------------ */

/* A writer process: publishes a frame every 5 ms until killed, or `frames` frames then closes cleanly. */
static pid_t spawn_writer(const char *name, uint64_t first_seq, int frames, uint64_t period_ms)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        maskbus_writer_opts_t o;
        maskbus_writer_opts_default(&o);
        o.max_width = 64;
        o.max_height = 64;
        o.heartbeat_period_ns = period_ms * 1000000ull;
        maskbus_writer_t *w = NULL;
        int rc = maskbus_writer_open(name, &o, &w, NULL, 0);
        char ok = rc == MASKBUS_OK ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1 || rc != MASKBUS_OK)
            _exit(1);
        close(p[1]);
        maskbus_pattern_t pat;
        maskbus_pattern_alloc(&pat, 64, 64, 1);
        for (int i = 0; frames < 0 || i < frames; i++) {
            maskbus_frame_in_t in;
            maskbus_pattern_fill(&pat, first_seq + (uint64_t)i, &in);
            maskbus_writer_publish(w, &in);
            sleep_ms(5);
        }
        maskbus_writer_close(w, 0);
        _exit(0);
    }
    close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 'y');
    return pid;
}

static int next_event(maskbus_reader_t *r, int timeout_ms, maskbus_frame_t *f, int want)
{
    uint64_t end = maskbus_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        int rc = maskbus_reader_next(r, timeout_ms, f);
        if (rc == want || rc < 0 || maskbus_now_ns() > end)
            return rc;
        if (rc == MASKBUS_FRAME && want != MASKBUS_FRAME && !maskbus_pattern_check(f))
            return -100;
    }
}

static void test_writer_death_and_restart(void **state)
{
    (void)state;
    const char *name = bus("death");
    const uint64_t period_ms = 200; /* long enough that a loaded machine's scheduling delays stay well inside it */
    pid_t wp = spawn_writer(name, 1, -1, period_ms);
    maskbus_reader_t *r = open_reader(name, 0);
    maskbus_frame_t f;
    assert_int_equal(next_event(r, 1000, &f, MASKBUS_FRAME), MASKBUS_FRAME);
    assert_true(maskbus_pattern_check(&f));
    uint64_t epoch1 = f.writer_epoch;
    assert_int_equal(kill(wp, SIGKILL), 0);
    uint64_t t_kill = maskbus_now_ns();
    waitpid(wp, NULL, 0);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_GONE), MASKBUS_WRITER_GONE);
    uint64_t detect_ms = (maskbus_now_ns() - t_kill) / 1000000ull;
    print_message("writer SIGKILL detected after %llu ms (heartbeat period %llu ms)\n",
                  (unsigned long long)detect_ms, (unsigned long long)period_ms);
    assert_true(detect_ms <= 2 * period_ms);
    maskbus_status_t st;
    maskbus_reader_status(r, &st);
    assert_false(st.writer_alive);
    /* reported once: what follows is the dead writer's last frames (if any) and then quiet timeouts */
    int rc = MASKBUS_FRAME;
    for (int i = 0; i < 5 && rc == MASKBUS_FRAME; i++)
        rc = maskbus_reader_next(r, 30, &f);
    assert_int_equal(rc, MASKBUS_TIMEOUT);

    /* a new writer reattaches: the same reader continues without reopening */
    wp = spawn_writer(name, 1000, -1, period_ms);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_RESTARTED), MASKBUS_WRITER_RESTARTED);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_FRAME), MASKBUS_FRAME);
    assert_true(f.frame_seq >= 1000);
    assert_true(f.writer_epoch != epoch1);
    assert_true(maskbus_pattern_check(&f));
    kill(wp, SIGKILL);
    waitpid(wp, NULL, 0);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_GONE), MASKBUS_WRITER_GONE);

    /* a clean close is reported too */
    wp = spawn_writer(name, 5000, 10, period_ms);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_RESTARTED), MASKBUS_WRITER_RESTARTED);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_GONE), MASKBUS_WRITER_GONE);
    assert_true(f.frame_seq >= 5000);
    waitpid(wp, NULL, 0);

    /* the objects removed and created anew (another inode): the reader follows the name */
    maskbus_unlink(name);
    wp = spawn_writer(name, 9000, -1, period_ms);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_WRITER_RESTARTED), MASKBUS_WRITER_RESTARTED);
    assert_int_equal(next_event(r, 2000, &f, MASKBUS_FRAME), MASKBUS_FRAME);
    assert_true(f.frame_seq >= 9000);
    assert_true(maskbus_pattern_check(&f));
    maskbus_reader_status(r, &st);
    assert_true(st.writer_alive);
    assert_int_equal(st.writer_pid, wp);
    kill(wp, SIGKILL);
    waitpid(wp, NULL, 0);
    maskbus_reader_close(r);

    /* a reader that opens a bus whose writer is gone gets no stale frame: it is told the writer is gone */
    sleep_ms(2.5 * period_ms);
    r = open_reader(name, 0);
    assert_int_equal(maskbus_reader_next(r, 100, &f), MASKBUS_WRITER_GONE);
    assert_int_equal(maskbus_reader_next(r, 30, &f), MASKBUS_TIMEOUT);
    maskbus_reader_close(r);
    maskbus_unlink(name);
}

/* A reader that dies holding its table entry: the writer frees it. */
static void test_dead_reader_entry(void **state)
{
    (void)state;
    const char *name = bus("deadreader");
    maskbus_writer_t *w = open_writer(name, 16, 16, 1, 100);
    reader_job_t job = {.name = name, .until_seq = UINT64_MAX, .timeout_ms = 10000};
    child_t c = spawn_reader(&job);
    wait_readers(w, 1);
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    close(c.fd);
    unsigned live = 9, stalled = 9;
    maskbus_writer_readers(w, &live, &stalled);
    assert_int_equal(live + stalled, 0);
    /* its entry is reusable: a new reader registers */
    maskbus_reader_t *r = open_reader(name, 0);
    maskbus_writer_readers(w, &live, NULL);
    assert_int_equal(live, 1);
    maskbus_reader_close(r);
    maskbus_writer_close(w, 1);
}

/* The writer's source state reaches readers once per change, before the frames that follow it. */
static void test_source_state(void **state)
{
    (void)state;
    const char *name = bus("source");
    maskbus_writer_t *w = open_writer(name, 32, 32, 1, 100);
    maskbus_reader_t *r = open_reader(name, 0);
    maskbus_frame_t f;
    maskbus_status_t st;
    assert_int_equal(maskbus_reader_next(r, 20, &f), MASKBUS_TIMEOUT);
    assert_int_equal(maskbus_writer_set_source_state(w, MASKBUS_SOURCE_LOST), MASKBUS_OK);
    assert_int_equal(maskbus_reader_next(r, 100, &f), MASKBUS_SOURCE_CHANGED);
    maskbus_reader_status(r, &st);
    assert_int_equal(st.source_state, MASKBUS_SOURCE_LOST);
    assert_string_equal(maskbus_source_state_name(st.source_state), "lost");
    assert_int_equal(maskbus_writer_set_source_state(w, MASKBUS_SOURCE_LOST), MASKBUS_OK); /* no change, no event */
    assert_int_equal(maskbus_reader_next(r, 20, &f), MASKBUS_TIMEOUT);
    maskbus_pattern_t p;
    assert_int_equal(maskbus_pattern_alloc(&p, 32, 32, 1), 0);
    assert_int_equal(maskbus_writer_set_source_state(w, MASKBUS_SOURCE_STREAMING), MASKBUS_OK);
    publish_pattern(w, &p, 1);
    assert_int_equal(maskbus_reader_next(r, 100, &f), MASKBUS_SOURCE_CHANGED);
    maskbus_reader_status(r, &st);
    assert_int_equal(st.source_state, MASKBUS_SOURCE_STREAMING);
    assert_int_equal(maskbus_reader_next(r, 100, &f), MASKBUS_FRAME);
    assert_int_equal(f.frame_seq, 1);
    assert_int_equal(maskbus_writer_set_source_state(w, 99), MASKBUS_EINVAL);
    maskbus_pattern_free(&p);
    maskbus_reader_close(r);
    maskbus_writer_close(w, 1);
}

/* ---- a corrupted object ---------------------------------------------------------------------------------- */

/* Random bytes of a live bus's header, reader table and slot headers overwritten (the writer open and idle), one
 * object at a time: a reader opens it or refuses it with a message; next() (timeout 0), check() and status()
 * return without a crash or a hang, and every byte of a frame's planes can be read (in place: the mapping itself).
 * With the original bytes back, a reader reads the writer's frame again. */
static void test_corrupted_object(void **state)
{
    (void)state;
    const char *name = bus("corrupt");
    maskbus_writer_t *w = open_writer(name, 64, 48, 1 | 4, 60000);
    maskbus_pattern_t pat;
    assert_int_equal(maskbus_pattern_alloc(&pat, 64, 48, 1 | 4), 0);
    for (uint64_t seq = 1; seq <= 3; seq++)
        publish_pattern(w, &pat, seq);
    char path[160];
    snprintf(path, sizeof(path), "/maskd.%s", name);
    int fd = shm_open(path, O_RDWR, 0);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    const size_t size = (size_t)st.st_size;
    uint8_t *orig = malloc(size), *buf = malloc(size);
    assert_non_null(orig);
    assert_non_null(buf);
    assert_int_equal(pread(fd, orig, size, 0), (ssize_t)size);
    maskbus_header_t h;
    memcpy(&h, orig, sizeof(h));
    /* the bytes a reader interprets: up to the last slot's header */
    size_t meta = (size_t)h.slots_offset + (size_t)(h.slot_count - 1) * (size_t)h.slot_size + sizeof(maskbus_slot_t);
    assert_true(meta <= size);
    static const uint32_t words[] = {0, 1, 0x7fffffffu, 0xffffffffu, 0x80000000u, 4096, 65536};
    tu_rng_t r = {20261208};
    int refused = 0, frames = 0, statuses = 0;
    alarm(240); /* a hang fails the test (SIGALRM) */
    for (int i = 0; i < 3000; i++) {
        memcpy(buf, orig, size);
        int edits = tu_rand_int(&r, 1, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(tu_rand(&r) % (i % 3 ? sizeof(maskbus_header_t) : meta)) & ~(size_t)3;
            if (tu_rand(&r) & 1)
                buf[at + (tu_rand(&r) & 3)] = (uint8_t)(tu_rand(&r) >> 56);
            else
                memcpy(buf + at, &words[tu_rand(&r) % (sizeof(words) / sizeof(words[0]))], 4);
        }
        assert_int_equal(pwrite(fd, buf, size, 0), (ssize_t)size);
        maskbus_reader_opts_t o = {.in_place = i & 1, .no_spin = 1};
        maskbus_reader_t *rd = NULL;
        char err[256] = "";
        int rc = maskbus_reader_open(name, &o, &rd, err, sizeof(err));
        if (rc != MASKBUS_OK) {
            assert_null(rd);
            if (!err[0])
                fail_msg("mutation %d: refused (%s) without a message", i, maskbus_strerror(rc));
            refused++;
            continue;
        }
        maskbus_frame_t f;
        rc = maskbus_reader_next(rd, 0, &f);
        if (rc == MASKBUS_FRAME) {
            unsigned sum = 0;
            for (unsigned k = 0; k < MASKBUS_MAX_PLANES; k++)
                if (f.data[k])
                    for (uint32_t y = 0; y < f.plane[k].height; y++)
                        for (uint32_t x = 0; x < f.plane[k].stride; x++)
                            sum += f.data[k][(size_t)y * f.plane[k].stride + x];
            (void)sum;
            if (o.in_place)
                rc = maskbus_reader_check(rd, &f);
            frames++;
        } else if (rc < 0 && !maskbus_reader_error(rd)[0]) {
            fail_msg("mutation %d: next failed (%s) without a message", i, maskbus_strerror(rc));
        }
        maskbus_status_t s;
        statuses += maskbus_reader_status(rd, &s) == MASKBUS_OK;
        maskbus_reader_close(rd);
    }
    alarm(0);
    print_message("corrupted objects: %d refused, %d opened with a frame read, %d statuses\n", refused, frames,
                  statuses);
    assert_true(refused > 0 && frames > 0);
    /* restored: the frame again */
    assert_int_equal(pwrite(fd, orig, size, 0), (ssize_t)size);
    close(fd);
    maskbus_reader_t *rd = open_reader(name, 0);
    maskbus_frame_t f;
    assert_int_equal(maskbus_reader_next(rd, 1000, &f), MASKBUS_FRAME);
    assert_int_equal(f.frame_seq, 3);
    assert_true(maskbus_pattern_check(&f));
    maskbus_reader_close(rd);
    free(orig);
    free(buf);
    maskbus_pattern_free(&pat);
    maskbus_writer_close(w, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abi_layout),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_second_writer_and_permissions),
        cmocka_unit_test(test_readers_in_order),
        cmocka_unit_test(test_stopped_reader),
        cmocka_unit_test(test_geometry_change),
        cmocka_unit_test(test_growth_under_readers),
        cmocka_unit_test(test_writer_death_and_restart),
        cmocka_unit_test(test_dead_reader_entry),
        cmocka_unit_test(test_source_state),
        cmocka_unit_test(test_corrupted_object),
        cmocka_unit_test(test_stress_no_torn_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
