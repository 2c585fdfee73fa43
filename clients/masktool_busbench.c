/* masktool bus-bench: publish self-checking synthetic frames on a frame bus at a given rate with N reader
 * processes, and report publish→wake latency, missed frames, torn reads and the writer's publish time with and
 * without a stopped reader, as JSON. With --readers 0 it is a plain test writer for other readers. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "maskbus.h"
#include "maskbus_pattern.h"
#include "masktool.h"

typedef struct {
    uint64_t frames, missed, torn_reads, torn_retries, errors, gone;
    uint64_t nlat;
} reader_summary_t;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static cJSON *stats_us(uint64_t *v, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)n);
    if (n == 0)
        return o;
    qsort(v, n, sizeof(*v), cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    cJSON_AddNumberToObject(o, "p50", (double)v[n / 2] / 1e3);
    cJSON_AddNumberToObject(o, "p90", (double)v[(size_t)((double)(n - 1) * 0.90)] / 1e3);
    cJSON_AddNumberToObject(o, "p99", (double)v[(size_t)((double)(n - 1) * 0.99)] / 1e3);
    cJSON_AddNumberToObject(o, "max", (double)v[n - 1] / 1e3);
    cJSON_AddNumberToObject(o, "mean", sum / (double)n / 1e3);
    return o;
}

/* The whole buffer through a pipe, in either direction, across short transfers and signals. */
static int pipe_all(int fd, void *p, size_t n, int writing)
{
    char *c = p;
    while (n) {
        ssize_t k = writing ? write(fd, c, n) : read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A reader process: reads until the writer closes the bus, verifies every frame, then sends its summary and its
 * publish→wake latencies (ns) through fd. */
static int reader_main(const char *instance, uint64_t max_frames, int fd)
{
    maskbus_reader_t *r = NULL;
    char err[256];
    if (maskbus_reader_open(instance, NULL, &r, err, sizeof(err)) != MASKBUS_OK) {
        fprintf(stderr, "bus-bench reader: %s\n", err);
        return 1;
    }
    uint64_t *lat = calloc(max_frames + 1, sizeof(uint64_t));
    reader_summary_t s = {0};
    if (!lat)
        return 1;
    for (;;) {
        maskbus_frame_t f;
        int rc = maskbus_reader_next(r, 5000, &f);
        if (rc == MASKBUS_WRITER_GONE) {
            s.gone++;
            break;
        }
        if (rc == MASKBUS_TIMEOUT || rc == MASKBUS_WRITER_RESTARTED)
            continue;
        if (rc != MASKBUS_FRAME) {
            s.errors++;
            fprintf(stderr, "bus-bench reader: %s: %s\n", maskbus_strerror(rc), maskbus_reader_error(r));
            break;
        }
        if (!maskbus_pattern_check(&f))
            s.torn_reads++;
        s.frames++;
        s.missed += f.missed;
        if (s.nlat <= max_frames)
            lat[s.nlat++] = f.wake_ns - f.publish_ns;
    }
    maskbus_status_t st;
    maskbus_reader_status(r, &st);
    s.torn_retries = st.torn_retries;
    maskbus_reader_close(r);
    int bad = pipe_all(fd, &s, sizeof(s), 1) || pipe_all(fd, lat, s.nlat * sizeof(uint64_t), 1);
    free(lat);
    return bad;
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void bb_usage(FILE *f)
{
    fprintf(f,
            "usage: masktool bus-bench [--readers N] [--frames M] [--size WxH] [--rate FPS] [--planes LIST]\n"
            "                          [--bus INSTANCE] [--no-stall]\n"
            "Publishes M self-checking synthetic frames of WxH on a frame bus at FPS frames per second (0: as fast\n"
            "as possible) while N reader processes read them, and prints JSON: publish->wake latency (p50/p99/max),\n"
            "frames missed per reader, torn reads (frames whose bytes are not one whole frame; must be 0), and the\n"
            "writer's publish time in two halves: all readers reading, then reader 0 stopped with SIGSTOP (a\n"
            "stopped reader must not change it).\n"
            "  --readers N    reader processes (default 2; 0 = only write, for external readers)\n"
            "  --frames M     frames to publish (default 600)\n"
            "  --size WxH     frame size (default 1280x720)\n"
            "  --rate FPS     publish rate (default 60; 0 = unthrottled)\n"
            "  --planes LIST  comma list of mask,alpha,frame,disp (default mask)\n"
            "  --bus NAME     bus instance (default bench-PID; removed afterwards unless given)\n"
            "  --no-stall     keep every reader running for the whole run\n");
}

int mt_bus_bench(int argc, char **argv)
{
    static const struct option opts[] = {{"readers", required_argument, 0, 'n'}, {"frames", required_argument, 0, 'm'},
                                         {"size", required_argument, 0, 's'},    {"rate", required_argument, 0, 'r'},
                                         {"planes", required_argument, 0, 'p'},  {"bus", required_argument, 0, 'b'},
                                         {"no-stall", no_argument, 0, 'S'},      {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    long readers = 2, frames = 600;
    double rate = 60;
    int w = 1280, h = 720, stall = 1;
    uint32_t planes = 1u << MASKBUS_PLANE_MASK;
    char instance[80] = "";
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            readers = strtol(optarg, &end, 10);
            if (*end || readers < 0 || readers > 32) {
                fprintf(stderr, "bus-bench: --readers needs 0..32\n");
                return 2;
            }
            break;
        case 'm':
            frames = strtol(optarg, &end, 10);
            if (*end || frames < 2 || frames > 10000000) {
                fprintf(stderr, "bus-bench: --frames needs 2..10000000\n");
                return 2;
            }
            break;
        case 's':
            if (mt_parse_size(optarg, &w, &h) != 0)
                return 2;
            break;
        case 'r':
            rate = strtod(optarg, &end);
            if (*end || rate < 0 || rate > 100000) {
                fprintf(stderr, "bus-bench: --rate needs 0..100000 frames per second\n");
                return 2;
            }
            break;
        case 'p': {
            planes = 0;
            char *list = strdup(optarg), *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int i = !strcmp(t, "mask") ? 0 : !strcmp(t, "alpha") ? 1 : !strcmp(t, "frame") ? 2
                      : !strcmp(t, "disp") ? 3 : -1;
                if (i < 0) {
                    fprintf(stderr, "bus-bench: unknown plane '%s' (mask, alpha, frame, disp)\n", t);
                    free(list);
                    return 2;
                }
                planes |= 1u << i;
            }
            free(list);
            if (!planes)
                return 2;
            break;
        }
        case 'b':
            snprintf(instance, sizeof(instance), "%s", optarg);
            break;
        case 'S': stall = 0; break;
        case 'h': bb_usage(stdout); return 0;
        default: bb_usage(stderr); return 2;
        }
    }
    int own_name = instance[0] == 0;
    if (own_name)
        snprintf(instance, sizeof(instance), "bench-%d", (int)getpid());
    maskbus_writer_opts_t wo;
    maskbus_writer_opts_default(&wo);
    wo.max_width = (uint32_t)w;
    wo.max_height = (uint32_t)h;
    wo.planes = planes;
    maskbus_writer_t *wr = NULL;
    char err[256];
    if (maskbus_writer_open(instance, &wo, &wr, err, sizeof(err)) != MASKBUS_OK) {
        fprintf(stderr, "bus-bench: %s\n", err);
        return 1;
    }
    maskbus_pattern_t pat;
    if (maskbus_pattern_alloc(&pat, (uint32_t)w, (uint32_t)h, planes) != MASKBUS_OK) {
        fprintf(stderr, "bus-bench: out of memory\n");
        maskbus_writer_close(wr, own_name);
        return 1;
    }
    pid_t pid[32];
    int fd[32];
    for (long i = 0; i < readers; i++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        fflush(NULL);
        pid[i] = fork();
        if (pid[i] == 0) {
            close(p[0]);
            _exit(reader_main(instance, (uint64_t)frames, p[1]));
        }
        close(p[1]);
        fd[i] = p[0];
    }
    /* wait for the readers to register */
    for (int t = 0; t < 5000; t++) {
        unsigned live = 0;
        maskbus_writer_readers(wr, &live, NULL);
        if (live >= (unsigned)readers)
            break;
        sleep_until(maskbus_now_ns() + 1000000);
    }
    uint64_t *pub = calloc((size_t)frames, sizeof(uint64_t));
    long half = stall && readers > 0 ? frames / 2 : frames;
    uint64_t period = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
    uint64_t t0 = maskbus_now_ns(), next = t0;
    int failed = 0;
    for (long s = 0; s < frames && pub; s++) {
        if (s == half && half < frames) {
            kill(pid[0], SIGSTOP);
            int st;
            waitpid(pid[0], &st, WUNTRACED);
        }
        maskbus_frame_in_t in;
        maskbus_pattern_fill(&pat, (uint64_t)s + 1, &in);
        in.capture_ns = maskbus_now_ns();
        if (period) {
            next += period;
            sleep_until(next);
        }
        uint64_t a = maskbus_now_ns();
        int rc = maskbus_writer_publish(wr, &in);
        pub[s] = maskbus_now_ns() - a;
        if (rc != MASKBUS_OK) {
            fprintf(stderr, "bus-bench: publish: %s\n", maskbus_writer_error(wr));
            failed = 1;
            break;
        }
    }
    uint64_t t1 = maskbus_now_ns();
    unsigned live = 0, stalled = 0;
    maskbus_writer_readers(wr, &live, &stalled);
    if (half < frames)
        kill(pid[0], SIGCONT);
    maskbus_writer_close(wr, 0);

    cJSON *doc = cJSON_CreateObject();
    struct utsname u;
    uname(&u);
    cJSON_AddStringToObject(doc, "op", "bus-bench");
    cJSON_AddStringToObject(doc, "kernel", u.release);
    cJSON_AddNumberToObject(doc, "cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    char sz[32];
    snprintf(sz, sizeof(sz), "%dx%d", w, h);
    cJSON_AddStringToObject(doc, "size", sz);
    cJSON_AddNumberToObject(doc, "planes", planes);
    cJSON_AddNumberToObject(doc, "frame_bytes", (double)(maskbus_slot_size((uint32_t)w, (uint32_t)h, planes)));
    cJSON_AddNumberToObject(doc, "rate_fps", rate);
    cJSON_AddNumberToObject(doc, "achieved_fps", (double)frames / ((double)(t1 - t0) / 1e9));
    cJSON_AddNumberToObject(doc, "frames", (double)frames);
    cJSON_AddNumberToObject(doc, "readers", (double)readers);
    cJSON_AddNumberToObject(doc, "readers_stalled_at_end", stalled);
    if (pub) {
        cJSON *ph = cJSON_AddArrayToObject(doc, "writer_publish_us");
        cJSON *a = stats_us(pub, (size_t)half);
        cJSON_AddStringToObject(a, "phase", "all readers reading");
        cJSON_AddItemToArray(ph, a);
        if (half < frames) {
            cJSON *b = stats_us(pub + half, (size_t)(frames - half));
            cJSON_AddStringToObject(b, "phase", "reader 0 stopped (SIGSTOP)");
            cJSON_AddItemToArray(ph, b);
            double p99a = cJSON_GetObjectItem(a, "p99")->valuedouble, p99b = cJSON_GetObjectItem(b, "p99")->valuedouble;
            cJSON_AddNumberToObject(doc, "writer_p99_ratio_stopped_vs_running", p99b / p99a);
        }
    }
    uint64_t *all = NULL;
    size_t nall = 0;
    uint64_t torn = 0;
    cJSON *per = cJSON_AddArrayToObject(doc, "per_reader");
    for (long i = 0; i < readers; i++) {
        reader_summary_t s;
        uint64_t *lat = NULL;
        int ok = pipe_all(fd[i], &s, sizeof(s), 0) == 0 && s.nlat <= (uint64_t)frames + 1 &&
                 (lat = malloc((s.nlat + 1) * sizeof(uint64_t))) &&
                 pipe_all(fd[i], lat, s.nlat * sizeof(uint64_t), 0) == 0;
        close(fd[i]);
        int st = 0;
        waitpid(pid[i], &st, 0);
        cJSON *o = cJSON_CreateObject();
        if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            cJSON_AddStringToObject(o, "error", "reader process failed");
            failed = 1;
        } else {
            cJSON_AddNumberToObject(o, "frames", (double)s.frames);
            cJSON_AddNumberToObject(o, "missed", (double)s.missed);
            cJSON_AddNumberToObject(o, "torn_reads", (double)s.torn_reads);
            cJSON_AddNumberToObject(o, "torn_retries", (double)s.torn_retries);
            cJSON_AddNumberToObject(o, "errors", (double)s.errors);
            cJSON_AddBoolToObject(o, "saw_writer_close", s.gone > 0);
            cJSON_AddBoolToObject(o, "stopped_half_way", i == 0 && half < frames);
            torn += s.torn_reads;
            failed |= s.torn_reads != 0 || s.errors != 0;
            /* latencies of the stopped reader are not wake latencies: leave it out of the pooled figure */
            uint64_t *grown = realloc(all, (nall + s.nlat + 1) * sizeof(uint64_t));
            if (grown) {
                all = grown;
                if (!(i == 0 && half < frames)) {
                    memcpy(all + nall, lat, s.nlat * sizeof(uint64_t));
                    nall += s.nlat;
                }
            }
            cJSON_AddItemToObject(o, "wake_latency_us", stats_us(lat, s.nlat));
        }
        free(lat);
        cJSON_AddItemToArray(per, o);
    }
    if (readers > 0)
        cJSON_AddItemToObject(doc, "wake_latency_us", stats_us(all, nall));
    cJSON_AddNumberToObject(doc, "torn_reads", (double)torn);
    free(all);
    free(pub);
    maskbus_pattern_free(&pat);
    if (own_name)
        maskbus_unlink(instance);
    mt_print_json(doc, 1);
    return failed;
}
