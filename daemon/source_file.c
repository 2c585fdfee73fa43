/* source_file: frames from files — a directory of JPEGs, an MJPEG AVI (RIFF idx1 index or a scan of the movi
 * list), a raw MJPEG stream split on its markers (mjpeg.h), a Y4M file repacked to YUYV — with loop and the
 * generic layer's pacing. */
#include "source_internal.h"

#include "errors.h"
#include "log.h"
#include "mjpeg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_FPS 30.0
#define FRAME_MAX ((size_t)32 << 20) /* larger JPEG frames are taken for corrupt */
#define READ_CHUNK ((size_t)1 << 20)
#define HDRL_MAX ((uint32_t)1 << 20)
#define IDX_MAX ((uint32_t)1 << 26) /* idx1 bytes read at most (4M entries) */
#define Y4M_LINE_MAX 1024

typedef unsigned char u8;

typedef enum { K_DIR, K_AVI, K_MJPEG, K_Y4M } file_kind_t;
typedef enum { Y4M_420, Y4M_422, Y4M_444, Y4M_MONO } y4m_chroma_t;

typedef struct {
    u8 *data; /* MJPEG bytes */
    size_t cap, len;
    mk_image_t img; /* Y4M: the YUYV frame */
} slot_t;

typedef struct {
    uint64_t off; /* file offset of the frame's bytes */
    uint32_t size;
} avi_frame_t;

typedef struct {
    file_kind_t kind;
    char path[PATH_MAX];
    int nslots;
    slot_t slots[32];
    long long pos;            /* next frame of this pass (directory, AVI) */
    long long pass_frames;    /* frames delivered in this pass */
    /* directory */
    char **names;
    int nnames;
    /* AVI and raw stream */
    int fd;
    avi_frame_t *frames;
    size_t nframes;
    u8 *rbuf;
    size_t rcap, rlen, rpos;
    int eof;
    /* Y4M */
    FILE *y4m;
    int width, height;
    y4m_chroma_t chroma;
    size_t frame_bytes;
    off_t data_start;
    u8 *planes;
} file_source_t;

static uint32_t le32(const u8 *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int free_slot(const mk_source_t *s, const file_source_t *f)
{
    for (int i = 0; i < f->nslots; i++)
        if (!(s->held_mask >> i & 1))
            return i;
    return -1;
}

static int slot_reserve(slot_t *sl, size_t n)
{
    if (sl->cap >= n)
        return 0;
    u8 *d = realloc(sl->data, n);
    if (!d)
        return mk_err_set(MK_ENOMEM, "cannot allocate a %zu-byte frame buffer", n);
    sl->data = d;
    sl->cap = n;
    return 0;
}

/* pread until n bytes or end of file; returns the bytes read or -1. */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (u8 *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- directory of JPEGs ---------------------------------------------------------------------------------- */

static int is_jpeg_name(const struct dirent *e)
{
    const char *dot = strrchr(e->d_name, '.');
    return e->d_name[0] != '.' && dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static const char *file_type(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* Opens a regular file for reading, never waiting: O_NONBLOCK, because an open() of a FIFO without a writer
 * blocks until one comes (a pipeline thread stuck there would never see a stop request). Anything but a regular
 * file is refused with MK_EUNSUPPORTED ("PATH is a FIFO: NEED"). Returns the descriptor (blocking reads again),
 * or a negative code with a message; *st receives the file's status. */
static int open_regular(const char *path, const char *need, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mk_err_set(MK_EIO, "cannot open %s: %s", path, strerror(errno));
    int rc = 0;
    if (fstat(fd, st) != 0)
        rc = mk_err_set(MK_EIO, "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(st->st_mode))
        rc = mk_err_set(MK_EUNSUPPORTED, "%s is %s: %s", path, file_type(st->st_mode), need);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = mk_err_set(MK_EIO, "%s: fcntl: %s", path, strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

static int read_whole(const char *path, slot_t *sl)
{
    struct stat st;
    int fd = open_regular(path, "a regular file is needed", &st);
    if (fd < 0)
        return fd;
    int rc = 0;
    if ((size_t)st.st_size > FRAME_MAX) {
        rc = mk_err_set(MK_EFORMAT, "%s: %lld bytes is too large for a frame", path, (long long)st.st_size);
    } else if (!(rc = slot_reserve(sl, (size_t)st.st_size + 1))) {
        ssize_t n = pread_full(fd, sl->data, (size_t)st.st_size, 0);
        if (n != (ssize_t)st.st_size)
            rc = mk_err_set(MK_EIO, "cannot read %s: %s", path, n < 0 ? strerror(errno) : "short read");
        sl->len = (size_t)st.st_size;
    }
    close(fd);
    return rc;
}

static int dir_read(mk_source_t *s, file_source_t *f, slot_t *sl)
{
    while (f->pos < f->nnames) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", f->path, f->names[f->pos++]);
        int rc = read_whole(path, sl);
        if (rc == MK_ENOMEM)
            return rc;
        if (!rc && !sl->len) /* emptied (truncated to nothing): a corrupt frame, not one for the decoder to refuse */
            rc = mk_err_set(MK_EFORMAT, "%s is empty", path);
        if (!rc)
            return MK_SOURCE_FRAME;
        s->stats.corrupt++;
        MK_LOG_RL(5000, MK_LOG_WARN, "skipping %s", mk_err_msg());
    }
    return MK_SOURCE_EOS;
}

static int dir_open(file_source_t *f)
{
    struct dirent **list = NULL;
    int n = scandir(f->path, &list, is_jpeg_name, versionsort);
    if (n < 0)
        return mk_err_set(MK_EIO, "cannot list %s: %s", f->path, strerror(errno));
    f->names = calloc((size_t)(n ? n : 1), sizeof *f->names);
    int rc = f->names ? 0 : mk_err_set(MK_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!rc && !(f->names[i] = strdup(list[i]->d_name)))
            rc = mk_err_set(MK_ENOMEM, "out of memory");
        if (!rc)
            f->nnames = i + 1;
        free(list[i]);
    }
    free(list);
    if (!rc && n == 0)
        rc = mk_err_set(MK_EFORMAT, "%s holds no *.jpg or *.jpeg files", f->path);
    return rc;
}

/* ---- MJPEG AVI ------------------------------------------------------------------------------------------- */

typedef struct {
    int stream;            /* the video stream's number (its strl's position) */
    uint32_t usec_per_frame, rate, scale;
    int width, height;
    char fourcc[5];
    uint64_t movi, movi_end; /* offset of the 'movi' fourcc and the end of the list */
    uint64_t idx1, idx1_size;
} avi_hdr_t;

static int fourcc_is(const u8 *p, const char *s)
{
    return memcmp(p, s, 4) == 0;
}

/* hdrl: avih and, per stream, LIST strl with strh (type, rate) and strf (BITMAPINFOHEADER). */
static void parse_hdrl(const u8 *d, size_t n, avi_hdr_t *h)
{
    int strl = 0;
    size_t p = 0;
    while (p + 8 <= n) {
        uint32_t sz = le32(d + p + 4);
        if (sz > n - p - 8)
            sz = (uint32_t)(n - p - 8);
        const u8 *c = d + p + 8;
        if (fourcc_is(d + p, "avih") && sz >= 40) {
            h->usec_per_frame = le32(c);
            if (!h->width) {
                h->width = (int)le32(c + 32);
                h->height = (int)le32(c + 36);
            }
        } else if (fourcc_is(d + p, "LIST") && sz >= 4 && fourcc_is(c, "strl")) {
            const u8 *strh = NULL, *strf = NULL;
            uint32_t strh_sz = 0, strf_sz = 0;
            for (size_t q = 4; q + 8 <= sz;) {
                uint32_t csz = le32(c + q + 4);
                if (csz > sz - q - 8)
                    break;
                if (fourcc_is(c + q, "strh"))
                    strh = c + q + 8, strh_sz = csz;
                else if (fourcc_is(c + q, "strf"))
                    strf = c + q + 8, strf_sz = csz;
                q += 8 + csz + (csz & 1);
            }
            if (h->stream < 0 && strh && strh_sz >= 36 && fourcc_is(strh, "vids")) {
                h->stream = strl;
                h->scale = le32(strh + 20);
                h->rate = le32(strh + 24);
                memcpy(h->fourcc, strh + 4, 4);
                if (strf && strf_sz >= 20) {
                    h->width = (int)le32(strf + 4);
                    int32_t bh = (int32_t)le32(strf + 8);
                    h->height = bh < 0 ? -bh : bh;
                    memcpy(h->fourcc, strf + 16, 4);
                }
            }
            strl++;
        }
        p += 8 + (size_t)sz + (sz & 1);
    }
}

static int mjpeg_fourcc(const char *cc)
{
    return !strncasecmp(cc, "MJPG", 4) || !strncasecmp(cc, "JPEG", 4) || !strncasecmp(cc, "AVRN", 4);
}

static int add_frame(file_source_t *f, size_t *cap, uint64_t off, uint32_t size)
{
    if (f->nframes == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        avi_frame_t *n = realloc(f->frames, nc * sizeof *n);
        if (!n)
            return mk_err_set(MK_ENOMEM, "out of memory for the AVI index");
        f->frames = n;
        *cap = nc;
    }
    f->frames[f->nframes++] = (avi_frame_t){off, size};
    return 0;
}

static int is_video_chunk(const u8 *id, int stream)
{
    return id[0] == '0' + stream / 10 && id[1] == '0' + stream % 10 && id[2] == 'd' && (id[3] == 'c' || id[3] == 'b');
}

/* The index from idx1 (offsets relative to the 'movi' fourcc, or absolute: the first entry decides). */
static int index_from_idx1(file_source_t *f, const avi_hdr_t *h, uint64_t file_size, size_t *cap)
{
    if (!h->idx1 || h->idx1_size < 16)
        return 0;
    uint32_t n = h->idx1_size > IDX_MAX ? IDX_MAX : (uint32_t)h->idx1_size;
    u8 *d = malloc(n);
    if (!d)
        return mk_err_set(MK_ENOMEM, "out of memory for the AVI index");
    int rc = 0;
    if (pread_full(f->fd, d, n, h->idx1) != (ssize_t)n) {
        free(d);
        return 0; /* unreadable index: scan instead */
    }
    uint64_t base = UINT64_MAX;
    for (uint32_t i = 0; i + 16 <= n && !rc; i += 16) {
        const u8 *e = d + i;
        if (!is_video_chunk(e, h->stream))
            continue;
        uint64_t off = le32(e + 8);
        uint32_t size = le32(e + 12);
        if (base == UINT64_MAX) {
            u8 id[4];
            if (pread_full(f->fd, id, 4, h->movi + off) == 4 && !memcmp(id, e, 4))
                base = h->movi;
            else if (pread_full(f->fd, id, 4, off) == 4 && !memcmp(id, e, 4))
                base = 0;
            else
                break;
        }
        if (size == 0) /* a dropped-frame placeholder */
            continue;
        if (base + off + 8 + size > file_size)
            break; /* the file is cut short here */
        rc = add_frame(f, cap, base + off + 8, size);
    }
    free(d);
    return rc;
}

/* The index from the chunks of the movi list (descending into LIST rec). */
static int index_from_movi(file_source_t *f, const avi_hdr_t *h, uint64_t file_size, size_t *cap)
{
    uint64_t end = h->movi_end < file_size ? h->movi_end : file_size;
    uint64_t p = h->movi + 4;
    int rc = 0;
    while (p + 8 <= end && !rc) {
        u8 c[12];
        if (pread_full(f->fd, c, 12, p) < 8)
            break;
        uint32_t sz = le32(c + 4);
        if (fourcc_is(c, "LIST") && fourcc_is(c + 8, "rec ")) {
            p += 12;
            continue;
        }
        if (is_video_chunk(c, h->stream) && sz > 0) {
            if (p + 8 + sz > end)
                break;
            rc = add_frame(f, cap, p + 8, sz);
        }
        p += 8 + (uint64_t)sz + (sz & 1);
    }
    return rc;
}

static int avi_open(file_source_t *f, mk_source_t *s, double *fps)
{
    struct stat st;
    u8 hdr[12];
    if (fstat(f->fd, &st) != 0 || pread_full(f->fd, hdr, 12, 0) != 12)
        return mk_err_set(MK_EIO, "cannot read %s", f->path);
    uint64_t file_size = (uint64_t)st.st_size;
    uint64_t riff_end = 8 + (uint64_t)le32(hdr + 4);
    if (riff_end > file_size)
        riff_end = file_size;
    avi_hdr_t h = {.stream = -1};
    uint64_t p = 12;
    while (p + 8 <= riff_end) {
        u8 c[12];
        if (pread_full(f->fd, c, 12, p) < 8)
            break;
        uint32_t sz = le32(c + 4);
        if (fourcc_is(c, "LIST") && fourcc_is(c + 8, "hdrl") && sz >= 4 && sz <= HDRL_MAX) {
            u8 *d = malloc(sz - 4);
            if (!d)
                return mk_err_set(MK_ENOMEM, "out of memory");
            if (pread_full(f->fd, d, sz - 4, p + 12) == (ssize_t)(sz - 4))
                parse_hdrl(d, sz - 4, &h);
            free(d);
        } else if (fourcc_is(c, "LIST") && fourcc_is(c + 8, "movi")) {
            h.movi = p + 8;
            h.movi_end = p + 8 + (uint64_t)sz;
        } else if (fourcc_is(c, "idx1")) {
            h.idx1 = p + 8;
            h.idx1_size = sz;
        }
        p += 8 + (uint64_t)sz + (sz & 1);
    }
    if (h.stream < 0)
        return mk_err_set(MK_EFORMAT, "%s: AVI without a video stream", f->path);
    if (!mjpeg_fourcc(h.fourcc))
        return mk_err_set(MK_EUNSUPPORTED, "%s: the AVI video is '%.4s', not MJPEG", f->path, h.fourcc);
    if (!h.movi)
        return mk_err_set(MK_EFORMAT, "%s: AVI without a movi list", f->path);
    size_t cap = 0;
    int rc = index_from_idx1(f, &h, file_size, &cap);
    if (!rc && f->nframes == 0) {
        if (h.idx1)
            MK_WARN("%s: idx1 index unusable, scanning the movi list", f->path);
        rc = index_from_movi(f, &h, file_size, &cap);
    }
    if (rc)
        return rc;
    if (f->nframes == 0)
        return mk_err_set(MK_EFORMAT, "%s: AVI without video frames", f->path);
    if (h.rate && h.scale)
        *fps = (double)h.rate / h.scale;
    else if (h.usec_per_frame)
        *fps = 1e6 / h.usec_per_frame;
    s->info.width = h.width;
    s->info.height = h.height;
    s->info.frames = (long long)f->nframes;
    return 0;
}

static int avi_read(mk_source_t *s, file_source_t *f, slot_t *sl)
{
    while ((size_t)f->pos < f->nframes) {
        const avi_frame_t *e = &f->frames[f->pos++];
        int rc = slot_reserve(sl, e->size);
        if (rc)
            return rc;
        if (pread_full(f->fd, sl->data, e->size, e->off) == (ssize_t)e->size) {
            sl->len = e->size;
            return MK_SOURCE_FRAME;
        }
        s->stats.corrupt++;
        MK_LOG_RL(5000, MK_LOG_WARN, "%s: cannot read frame %lld", f->path, f->pos - 1);
    }
    return MK_SOURCE_EOS;
}

/* ---- raw MJPEG stream ------------------------------------------------------------------------------------ */

static int stream_read(mk_source_t *s, file_source_t *f, slot_t *sl)
{
    for (;;) {
        mk_mjpeg_span_t sp;
        size_t avail = f->rlen - f->rpos;
        int r = mk_mjpeg_split(f->rbuf + f->rpos, avail, f->eof, &sp);
        if (r == MK_MJPEG_FRAME) {
            size_t n = sp.end - sp.start;
            int rc = slot_reserve(sl, n);
            if (rc)
                return rc;
            memcpy(sl->data, f->rbuf + f->rpos + sp.start, n);
            sl->len = n;
            s->stats.skipped_bytes += sp.start;
            f->rpos += sp.end;
            return MK_SOURCE_FRAME;
        }
        s->stats.skipped_bytes += sp.start;
        f->rpos += sp.start;
        if (r == MK_MJPEG_NONE)
            return MK_SOURCE_EOS;
        if (f->rlen - f->rpos > FRAME_MAX) {
            /* No end in sight: drop this SOI and look for the next frame. */
            s->stats.corrupt++;
            MK_LOG_RL(5000, MK_LOG_WARN, "%s: a frame longer than %zu bytes: skipped", f->path, FRAME_MAX);
            f->rpos += 2;
            continue;
        }
        if (f->rpos > 0) {
            memmove(f->rbuf, f->rbuf + f->rpos, f->rlen - f->rpos);
            f->rlen -= f->rpos;
            f->rpos = 0;
        }
        if (f->rcap - f->rlen < READ_CHUNK) {
            u8 *nb = realloc(f->rbuf, f->rlen + READ_CHUNK);
            if (!nb)
                return mk_err_set(MK_ENOMEM, "out of memory for the stream buffer");
            f->rbuf = nb;
            f->rcap = f->rlen + READ_CHUNK;
        }
        ssize_t got = read(f->fd, f->rbuf + f->rlen, f->rcap - f->rlen);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return mk_err_set(MK_EIO, "cannot read %s: %s", f->path, strerror(errno));
        if (got == 0)
            f->eof = 1;
        f->rlen += (size_t)got;
    }
}

/* ---- Y4M ------------------------------------------------------------------------------------------------- */

/* Reads one line (without its '\n') of at most Y4M_LINE_MAX bytes; 0 at a clean end of file. */
static int y4m_line(FILE *fp, char *buf, size_t n)
{
    size_t i = 0;
    int c;
    while ((c = getc(fp)) != EOF && c != '\n') {
        if (i + 1 >= n)
            return MK_EFORMAT;
        buf[i++] = (char)c;
    }
    buf[i] = '\0';
    if (c == EOF)
        return i ? MK_EFORMAT : 0;
    return 1;
}

static int y4m_open(file_source_t *f, mk_source_t *s, double *fps)
{
    char line[Y4M_LINE_MAX];
    if (y4m_line(f->y4m, line, sizeof line) != 1 || strncmp(line, "YUV4MPEG2 ", 10))
        return mk_err_set(MK_EFORMAT, "%s: bad Y4M header", f->path);
    const char *cs = "420jpeg";
    char csbuf[32] = "";
    long fn = 0, fd = 0;
    for (char *save = NULL, *tok = strtok_r(line + 10, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *end;
        switch (tok[0]) {
        case 'W': f->width = (int)strtol(tok + 1, &end, 10); break;
        case 'H': f->height = (int)strtol(tok + 1, &end, 10); break;
        case 'F':
            fn = strtol(tok + 1, &end, 10);
            fd = *end == ':' ? strtol(end + 1, &end, 10) : 0;
            break;
        case 'C':
            snprintf(csbuf, sizeof csbuf, "%s", tok + 1);
            cs = csbuf;
            break;
        default: break; /* I (interlacing), A (aspect), X (extensions): not needed */
        }
    }
    if (f->width < 1 || f->height < 1 || f->width > MK_IMAGE_MAX_DIM || f->height > MK_IMAGE_MAX_DIM)
        return mk_err_set(MK_EFORMAT, "%s: Y4M size %dx%d outside 1..%d", f->path, f->width, f->height,
                          MK_IMAGE_MAX_DIM);
    if (!strcmp(cs, "420jpeg") || !strcmp(cs, "420paldv") || !strcmp(cs, "420mpeg2") || !strcmp(cs, "420"))
        f->chroma = Y4M_420;
    else if (!strcmp(cs, "422"))
        f->chroma = Y4M_422;
    else if (!strcmp(cs, "444"))
        f->chroma = Y4M_444;
    else if (!strcmp(cs, "mono"))
        f->chroma = Y4M_MONO;
    else
        return mk_err_set(MK_EUNSUPPORTED, "%s: Y4M colour space C%s (8-bit 420*, 422, 444, mono only)", f->path,
                          cs);
    if (f->width % 2)
        return mk_err_set(MK_EUNSUPPORTED, "%s: Y4M width %d is odd: YUYV needs pixel pairs", f->path, f->width);
    size_t w = (size_t)f->width, h = (size_t)f->height, cw = (w + 1) / 2, ch = (h + 1) / 2;
    size_t chroma = f->chroma == Y4M_420 ? cw * ch : f->chroma == Y4M_422 ? cw * h : f->chroma == Y4M_444 ? w * h : 0;
    f->frame_bytes = w * h + 2 * chroma;
    f->data_start = ftello(f->y4m);
    if (!(f->planes = malloc(f->frame_bytes)))
        return mk_err_set(MK_ENOMEM, "out of memory");
    if (fn > 0 && fd > 0)
        *fps = (double)fn / (double)fd;
    s->info.width = f->width;
    s->info.height = f->height;
    for (int i = 0; i < f->nslots; i++) {
        f->slots[i].img = mk_image_desc(f->width, f->height, MK_FMT_YUYV, MK_U8);
        int rc = mk_image_alloc(NULL, &f->slots[i].img, MK_MEM_HOST);
        if (rc)
            return rc;
    }
    return 0;
}

static void y4m_repack(const file_source_t *f, mk_image_t *img)
{
    const size_t w = (size_t)f->width, h = (size_t)f->height;
    const size_t cw = f->chroma == Y4M_444 ? w : w / 2;
    const size_t ch = f->chroma == Y4M_420 ? (h + 1) / 2 : h;
    const u8 *yp = f->planes, *up = yp + w * h, *vp = up + cw * ch;
    for (size_t y = 0; y < h; y++) {
        const u8 *yr = yp + y * w;
        size_t cy = f->chroma == Y4M_420 ? y / 2 : y;
        const u8 *ur = up + cy * cw, *vr = vp + cy * cw;
        u8 *d = mk_image_row(img, 0, (int)y);
        for (size_t x = 0; x < w; x += 2, d += 4) {
            size_t cx = f->chroma == Y4M_444 ? x : x / 2;
            d[0] = yr[x];
            d[2] = yr[x + 1];
            if (f->chroma == Y4M_MONO) {
                d[1] = d[3] = 128;
            } else {
                d[1] = ur[cx];
                d[3] = vr[cx];
            }
        }
    }
}

static int y4m_read(mk_source_t *s, file_source_t *f, slot_t *sl)
{
    char line[Y4M_LINE_MAX];
    int r = y4m_line(f->y4m, line, sizeof line);
    if (r == 0)
        return MK_SOURCE_EOS;
    if (r < 0 || strncmp(line, "FRAME", 5) || (line[5] && line[5] != ' ')) {
        s->stats.corrupt++;
        MK_LOG_RL(5000, MK_LOG_WARN, "%s: bad Y4M frame header after frame %lld: the rest is skipped", f->path,
                  f->pass_frames);
        return MK_SOURCE_EOS;
    }
    if (fread(f->planes, 1, f->frame_bytes, f->y4m) != f->frame_bytes) {
        if (ferror(f->y4m))
            return mk_err_set(MK_EIO, "cannot read %s: %s", f->path, strerror(errno));
        s->stats.corrupt++;
        MK_LOG_RL(5000, MK_LOG_WARN, "%s: the last Y4M frame is truncated: skipped", f->path);
        return MK_SOURCE_EOS;
    }
    y4m_repack(f, &sl->img);
    return MK_SOURCE_FRAME;
}

/* ---- backend --------------------------------------------------------------------------------------------- */

static int rewind_source(file_source_t *f)
{
    f->pos = 0;
    f->pass_frames = 0;
    if (f->kind == K_MJPEG) {
        if (lseek(f->fd, 0, SEEK_SET) < 0)
            return mk_err_set(MK_EIO, "cannot rewind %s: %s", f->path, strerror(errno));
        f->rlen = f->rpos = 0;
        f->eof = 0;
    } else if (f->kind == K_Y4M) {
        if (fseeko(f->y4m, f->data_start, SEEK_SET) != 0)
            return mk_err_set(MK_EIO, "cannot rewind %s: %s", f->path, strerror(errno));
    }
    return 0;
}

static int file_next(mk_source_t *s, int timeout_ms, mk_frame_t *fr)
{
    (void)timeout_ms;
    file_source_t *f = s->impl;
    int slot = free_slot(s, f);
    if (slot < 0)
        return mk_err_set(MK_ESTATE, "%s: every slot is held", f->path);
    slot_t *sl = &f->slots[slot];
    for (;;) {
        int rc;
        switch (f->kind) {
        case K_DIR: rc = dir_read(s, f, sl); break;
        case K_AVI: rc = avi_read(s, f, sl); break;
        case K_MJPEG: rc = stream_read(s, f, sl); break;
        default: rc = y4m_read(s, f, sl); break;
        }
        if (rc < 0)
            return rc;
        if (rc == MK_SOURCE_FRAME)
            break;
        /* End of this pass. */
        if (!s->cfg.loop || f->pass_frames == 0)
            return MK_SOURCE_EOS;
        if ((rc = rewind_source(f)))
            return rc;
        s->stats.loops++;
        s->pending_flags |= MK_FRAME_F_LOOPED;
    }
    f->pass_frames++;
    fr->slot_ = slot;
    if (f->kind == K_DIR)
        fr->name = f->names[f->pos - 1];
    if (f->kind == K_Y4M) {
        fr->kind = MK_FRAME_RAW;
        fr->image = sl->img;
        fr->image.owned = 0;
        fr->width = f->width;
        fr->height = f->height;
    } else {
        fr->kind = MK_FRAME_MJPEG;
        fr->data = sl->data;
        fr->len = sl->len;
        if (mk_mjpeg_size(sl->data, sl->len, &fr->width, &fr->height) != 0)
            fr->width = fr->height = 0;
    }
    return MK_SOURCE_FRAME;
}

static int file_release(mk_source_t *s, int slot)
{
    (void)s, (void)slot;
    return 0;
}

static int file_reopen(mk_source_t *s)
{
    (void)s;
    return 0;
}

static void file_close(mk_source_t *s)
{
    file_source_t *f = s->impl;
    for (int i = 0; i < f->nnames; i++)
        free(f->names[i]);
    free(f->names);
    for (int i = 0; i < 32; i++) {
        free(f->slots[i].data);
        mk_image_free(NULL, &f->slots[i].img);
    }
    if (f->fd >= 0)
        close(f->fd);
    if (f->y4m)
        fclose(f->y4m);
    free(f->frames);
    free(f->rbuf);
    free(f->planes);
    free(f);
    s->impl = NULL;
}

static const mk_source_ops_t file_ops = {
    .next = file_next,
    .release = file_release,
    .reopen = file_reopen,
    .close = file_close,
};

int mk_source_file_open(mk_source_t *s, const char *path)
{
    file_source_t *f = calloc(1, sizeof *f);
    if (!f)
        return mk_err_set(MK_ENOMEM, "file source: out of memory");
    f->fd = -1;
    f->nslots = s->cfg.buffers;
    s->ops = &file_ops;
    s->impl = f;
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(s->info.path, sizeof s->info.path, "%s", path);
    double fps = 0;
    int rc = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = mk_err_set(MK_EIO, "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        f->kind = K_DIR;
        s->info.kind = "jpeg-dir";
        if (!(rc = dir_open(f))) {
            /* The size from the first JPEG that has one. */
            slot_t probe = {0};
            for (int i = 0; i < f->nnames && !s->info.width; i++) {
                char p[PATH_MAX + 256];
                snprintf(p, sizeof p, "%s/%s", path, f->names[i]);
                if (!read_whole(p, &probe))
                    mk_mjpeg_size(probe.data, probe.len, &s->info.width, &s->info.height);
            }
            free(probe.data);
            s->info.frames = f->nnames;
        }
    } else {
        u8 magic[12] = {0};
        f->fd = open_regular(path, "a regular file or a directory is needed", &st);
        if (f->fd < 0) {
            rc = f->fd;
            f->fd = -1;
        } else if (pread_full(f->fd, magic, sizeof magic, 0) < 3) {
            rc = mk_err_set(MK_EFORMAT, "%s is too short for a video file", path);
        } else if (!memcmp(magic, "RIFF", 4) && !memcmp(magic + 8, "AVI ", 4)) {
            f->kind = K_AVI;
            s->info.kind = "avi";
            rc = avi_open(f, s, &fps);
        } else if (!memcmp(magic, "YUV4MPEG2 ", 10)) {
            f->kind = K_Y4M;
            s->info.kind = "y4m";
            if (!(f->y4m = fdopen(f->fd, "rb"))) {
                rc = mk_err_set(MK_EIO, "cannot open %s: %s", path, strerror(errno));
            } else {
                f->fd = -1; /* the stream owns it */
                rc = y4m_open(f, s, &fps);
            }
        } else if (magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF) {
            f->kind = K_MJPEG;
            s->info.kind = "mjpeg";
        } else {
            rc = mk_err_set(MK_EUNSUPPORTED, "%s: not a JPEG directory, MJPEG AVI, MJPEG stream or Y4M file", path);
        }
    }
    if (rc) {
        file_close(s);
        return rc;
    }
    s->max_held = f->nslots;
    s->pace_fps = s->cfg.fps > 0 ? s->cfg.fps : fps > 0 ? fps : DEFAULT_FPS;
    s->info.frame_kind = f->kind == K_Y4M ? MK_FRAME_RAW : MK_FRAME_MJPEG;
    s->info.raw_format = MK_FMT_YUYV;
    s->info.fps = s->pace_fps;
    s->info.buffers = f->nslots;
    return 0;
}
