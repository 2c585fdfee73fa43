/* maskcat: read masks from a maskd frame bus and write them out (PNG/PGM files, or a Y4M stream for ffmpeg), with
 * one JSON line of metadata per frame. */
#include <errno.h>
#include <getopt.h>
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "maskbus.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: maskcat --bus INSTANCE [options]\n"
            "Reads the masks maskd publishes on the frame bus /maskd.INSTANCE and prints one JSON line of metadata\n"
            "per frame (sequence numbers, timestamps, publish-to-read latency, missed frames, detections).\n"
            "\n"
            "  --bus INSTANCE    the bus to read (maskd's instance name, e.g. video0)\n"
            "  --count N         stop after N frames (default: run until interrupted)\n"
            "  --timeout S       give up when no frame arrives for S seconds (exit code 3)\n"
            "  --wait            wait for the bus to appear instead of failing when it does not exist yet\n"
            "  --plane P         mask (default), alpha, frame (RGB) or disp (16-bit disparity)\n"
            "  --out DIR         write each frame as DIR/P-SEQUENCE.png (or .pgm/.ppm with --format pnm)\n"
            "  --format F        png (default) or pnm\n"
            "  --y4m             write a Y4M stream of the plane to stdout (mask/alpha: mono; frame: 4:4:4);\n"
            "                    the JSON lines go to stderr then. Pipe it: maskcat --bus video0 --y4m | ffmpeg -i - ...\n"
            "  --fps N           frame rate written in the Y4M header (default 30)\n"
            "  --quiet           no JSON lines\n"
            "  -h, --help        this text\n"
            "Exit codes: 0 done, 1 error, 2 bad usage, 3 timeout.\n");
}

static int plane_index(const char *s)
{
    static const char *names[MASKBUS_MAX_PLANES] = {"mask", "alpha", "frame", "disp"};
    for (int i = 0; i < (int)MASKBUS_MAX_PLANES; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static const char *plane_name(int i)
{
    static const char *names[MASKBUS_MAX_PLANES] = {"mask", "alpha", "frame", "disp"};
    return names[i];
}

static int write_png(const char *path, const maskbus_plane_t *pl, const uint8_t *data)
{
    png_image img;
    memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
    img.width = pl->width;
    img.height = pl->height;
    img.format = pl->format == MASKBUS_FMT_RGB24 ? PNG_FORMAT_RGB
                 : pl->format == MASKBUS_FMT_GRAY16 ? PNG_FORMAT_LINEAR_Y
                                                    : PNG_FORMAT_GRAY;
    int stride = (int)(pl->format == MASKBUS_FMT_GRAY16 ? pl->stride / 2 : pl->stride);
    if (!png_image_write_to_file(&img, path, 0, data, stride, NULL)) {
        fprintf(stderr, "maskcat: writing %s: %s\n", path, img.message);
        png_image_free(&img);
        return -1;
    }
    return 0;
}

static int write_pnm(const char *path, const maskbus_plane_t *pl, const uint8_t *data)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "maskcat: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rgb = pl->format == MASKBUS_FMT_RGB24, wide = pl->format == MASKBUS_FMT_GRAY16;
    fprintf(f, "P%c\n%u %u\n%u\n", rgb ? '6' : '5', pl->width, pl->height, wide ? 65535u : 255u);
    size_t row = (size_t)pl->width * (rgb ? 3 : wide ? 2 : 1);
    uint8_t *tmp = wide ? malloc(row) : NULL;
    int ok = !wide || tmp;
    for (uint32_t y = 0; ok && y < pl->height; y++) {
        const uint8_t *src = data + (size_t)y * pl->stride;
        if (wide) { /* PNM stores 16-bit samples big-endian */
            for (size_t x = 0; x < row; x += 2) {
                tmp[x] = src[x + 1];
                tmp[x + 1] = src[x];
            }
            src = tmp;
        }
        ok = fwrite(src, 1, row, f) == row;
    }
    free(tmp);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "maskcat: writing %s failed\n", path);
        return -1;
    }
    return 0;
}

/* Y4M: mono for 8-bit gray planes; RGB converted to BT.601 full-range YUV 4:4:4. */
static int write_y4m(const maskbus_frame_t *f, int plane, unsigned fps, int *header_done, uint32_t *hw,
                     uint32_t *hh, uint8_t **buf)
{
    const maskbus_plane_t *pl = &f->plane[plane];
    if (*header_done && (pl->width != *hw || pl->height != *hh)) {
        fprintf(stderr, "maskcat: the frame size changed from %ux%u to %ux%u; a Y4M stream cannot change size\n",
                *hw, *hh, pl->width, pl->height);
        return -1;
    }
    int rgb = pl->format == MASKBUS_FMT_RGB24;
    if (!*header_done) {
        printf("YUV4MPEG2 W%u H%u F%u:1 Ip A1:1 %s XCOLORRANGE=FULL\n", pl->width, pl->height, fps,
               rgb ? "C444" : "Cmono");
        *header_done = 1;
        *hw = pl->width;
        *hh = pl->height;
    }
    printf("FRAME\n");
    const uint8_t *d = f->data[plane];
    if (!rgb) {
        for (uint32_t y = 0; y < pl->height; y++)
            if (fwrite(d + (size_t)y * pl->stride, 1, pl->width, stdout) != pl->width)
                return -1;
    } else {
        size_t n = (size_t)pl->width * pl->height;
        if (!*buf && !(*buf = malloc(3 * n)))
            return -1;
        uint8_t *Y = *buf, *U = Y + n, *V = U + n;
        for (uint32_t y = 0; y < pl->height; y++) {
            const uint8_t *s = d + (size_t)y * pl->stride;
            for (uint32_t x = 0; x < pl->width; x++, s += 3) {
                size_t i = (size_t)y * pl->width + x;
                int r = s[0], g = s[1], b = s[2];
                Y[i] = (uint8_t)((77 * r + 150 * g + 29 * b + 128) >> 8);
                int u = ((-43 * r - 85 * g + 128 * b + 128) >> 8) + 128;
                int v = ((128 * r - 107 * g - 21 * b + 128) >> 8) + 128;
                U[i] = (uint8_t)(u < 0 ? 0 : u > 255 ? 255 : u);
                V[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
        if (fwrite(*buf, 1, 3 * n, stdout) != 3 * n)
            return -1;
    }
    return fflush(stdout) == 0 ? 0 : -1;
}

static void print_meta(FILE *out, const maskbus_frame_t *f)
{
    fprintf(out,
            "{\"seq\":%llu,\"frame_seq\":%llu,\"capture_ns\":%llu,\"publish_ns\":%llu,\"latency_us\":%.1f,"
            "\"read_us\":%.1f,\"missed\":%llu,\"width\":%u,\"height\":%u,\"planes\":%u,\"flags\":%u,"
            "\"detections\":[",
            (unsigned long long)f->publish_seq, (unsigned long long)f->frame_seq, (unsigned long long)f->capture_ns,
            (unsigned long long)f->publish_ns, (double)(int64_t)(f->wake_ns - f->publish_ns) / 1e3,
            (double)(int64_t)(f->read_ns - f->publish_ns) / 1e3, (unsigned long long)f->missed, f->width,
            f->height, f->planes, f->flags);
    for (uint32_t i = 0; i < f->ndetections; i++) {
        const maskbus_detection_t *d = &f->detections[i];
        fprintf(out, "%s{\"class\":%d,\"score\":%.4f,\"x\":%.1f,\"y\":%.1f,\"w\":%.1f,\"h\":%.1f,\"track\":%u}",
                i ? "," : "", d->class_id, d->score, d->x, d->y, d->w, d->h, d->track_id);
    }
    fprintf(out, "]}\n");
    fflush(out);
}

int main(int argc, char **argv)
{
    const char *instance = NULL, *outdir = NULL;
    long count = -1;
    double timeout_s = -1;
    int plane = MASKBUS_PLANE_MASK, pnm = 0, y4m = 0, quiet = 0, wait_bus = 0;
    unsigned fps = 30;
    static const struct option longopts[] = {
        {"bus", required_argument, 0, 'b'},    {"count", required_argument, 0, 'n'},
        {"timeout", required_argument, 0, 't'}, {"plane", required_argument, 0, 'p'},
        {"out", required_argument, 0, 'o'},    {"format", required_argument, 0, 'f'},
        {"y4m", no_argument, 0, 'y'},          {"fps", required_argument, 0, 'r'},
        {"quiet", no_argument, 0, 'q'},        {"wait", no_argument, 0, 'w'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': instance = optarg; break;
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end || count <= 0) {
                fprintf(stderr, "maskcat: --count needs a positive integer, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 't':
            timeout_s = strtod(optarg, &end);
            if (*end || !(timeout_s > 0) || timeout_s > 86400) {
                fprintf(stderr, "maskcat: --timeout needs seconds in (0, 86400], not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'p':
            plane = plane_index(optarg);
            if (plane < 0) {
                fprintf(stderr, "maskcat: unknown plane '%s' (mask, alpha, frame, disp)\n", optarg);
                return 2;
            }
            break;
        case 'o': outdir = optarg; break;
        case 'f':
            if (strcmp(optarg, "png") != 0 && strcmp(optarg, "pnm") != 0) {
                fprintf(stderr, "maskcat: unknown format '%s' (png, pnm)\n", optarg);
                return 2;
            }
            pnm = strcmp(optarg, "pnm") == 0;
            break;
        case 'y': y4m = 1; break;
        case 'r': {
            long v = strtol(optarg, &end, 10);
            if (*end || v <= 0 || v > 1000) {
                fprintf(stderr, "maskcat: --fps needs 1..1000, not '%s'\n", optarg);
                return 2;
            }
            fps = (unsigned)v;
            break;
        }
        case 'q': quiet = 1; break;
        case 'w': wait_bus = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!instance || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (y4m && plane == MASKBUS_PLANE_DISP) {
        fprintf(stderr, "maskcat: --y4m writes 8-bit planes only (mask, alpha, frame)\n");
        return 2;
    }
    if (y4m && isatty(STDOUT_FILENO)) {
        fprintf(stderr, "maskcat: --y4m writes video to stdout; pipe it into a program (e.g. ffmpeg -i -)\n");
        return 2;
    }
    if (outdir) {
        struct stat st;
        if (stat(outdir, &st) != 0 && mkdir(outdir, 0755) != 0) {
            fprintf(stderr, "maskcat: cannot create %s: %s\n", outdir, strerror(errno));
            return 1;
        }
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    FILE *meta = y4m ? stderr : stdout;

    maskbus_reader_t *r = NULL;
    char err[256];
    int rc;
    uint64_t start = maskbus_now_ns();
    for (;;) {
        rc = maskbus_reader_open(instance, NULL, &r, err, sizeof(err));
        if (rc == MASKBUS_OK)
            break;
        int retry = wait_bus && (rc == MASKBUS_ENOENT || rc == MASKBUS_EFORMAT);
        if (!retry || stop || (timeout_s > 0 && (double)(maskbus_now_ns() - start) / 1e9 > timeout_s)) {
            fprintf(stderr, "maskcat: %s\n", err);
            return retry ? 3 : 1;
        }
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    int timeout_ms = timeout_s > 0 ? (int)(timeout_s * 1000) : 250;
    int exit_code = 0, header_done = 0, warned_plane = 0;
    uint32_t hw = 0, hh = 0;
    uint8_t *yuv = NULL;
    long got = 0;
    uint64_t last_frame = maskbus_now_ns();
    maskbus_frame_t f;
    while (!stop && (count < 0 || got < count)) {
        rc = maskbus_reader_next(r, timeout_ms, &f);
        if (rc == MASKBUS_TIMEOUT) {
            if (timeout_s > 0 && (double)(maskbus_now_ns() - last_frame) / 1e9 >= timeout_s) {
                fprintf(stderr, "maskcat: no frame for %.1f s\n", timeout_s);
                exit_code = 3;
                break;
            }
            continue;
        }
        if (rc == MASKBUS_WRITER_GONE || rc == MASKBUS_WRITER_RESTARTED) {
            maskbus_status_t st;
            maskbus_reader_status(r, &st);
            if (!quiet)
                fprintf(meta, "{\"event\":\"%s\",\"writer_pid\":%d,\"epoch\":%llu}\n",
                        rc == MASKBUS_WRITER_GONE ? "writer_gone" : "writer_restarted", (int)st.writer_pid,
                        (unsigned long long)st.writer_epoch);
            fflush(meta);
            continue;
        }
        if (rc != MASKBUS_FRAME) {
            fprintf(stderr, "maskcat: %s: %s\n", maskbus_strerror(rc), maskbus_reader_error(r));
            exit_code = 1;
            break;
        }
        last_frame = maskbus_now_ns();
        got++;
        if (!quiet)
            print_meta(meta, &f);
        if (!(f.planes & (1u << plane))) {
            if ((outdir || y4m) && !warned_plane) {
                fprintf(stderr, "maskcat: frame %llu has no %s plane (planes 0x%x); skipping such frames\n",
                        (unsigned long long)f.publish_seq, plane_name(plane), f.planes);
                warned_plane = 1;
            }
            continue;
        }
        if (outdir) {
            char path[4096];
            const char *ext = !pnm ? "png" : f.plane[plane].format == MASKBUS_FMT_RGB24 ? "ppm" : "pgm";
            snprintf(path, sizeof(path), "%s/%s-%08llu.%s", outdir, plane_name(plane),
                     (unsigned long long)f.frame_seq, ext);
            if ((pnm ? write_pnm : write_png)(path, &f.plane[plane], f.data[plane]) != 0) {
                exit_code = 1;
                break;
            }
        }
        if (y4m && write_y4m(&f, plane, fps, &header_done, &hw, &hh, &yuv) != 0) {
            if (errno != EPIPE)
                exit_code = 1;
            break;
        }
    }
    free(yuv);
    maskbus_reader_close(r);
    return exit_code;
}
