#!/usr/bin/env python3
"""masktool segment end to end (CPU backend): a PNG scene and a Y4M written here (no data needed), then with the
shared data ($MASKD_TEST_DATA, else ../shared/data beside the source root) a JPEG directory with a corrupt and an
empty file, the same frames as a raw MJPEG stream, the otb_man AVI, a photo, and with its Yolo-Fastest body
detector the engine's masks compared across inputs and frames in flight, and an interrupted run. Checks the files
written (names, sizes, kinds), the masks' shape without a detector (select.fallback's centred box), the composite
pixel by pixel against the frame, the background and the alpha matte, segment.json, and the errors of bad
arguments (exit 1 with a message). `test_segment_tool.py cuda` runs the PNG and Y4M checks on the CUDA backend
(exit 77 without a GPU). Pure Python: PNG, Y4M and MJPEG are read and written here. Needs MASKTOOL."""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testutil import check, data_dir, finish  # noqa: E402

MASKTOOL = os.environ["MASKTOOL"]
BACKEND = sys.argv[1] if len(sys.argv) > 1 else "cpu"
SKIP = 77


# ---- PNG, Y4M, JPEG headers -----------------------------------------------------------------------------------

def png_write(path, w, h, channels, pixels):
    """8-bit PNG of `channels` 1 (gray), 3 (RGB) or 4 (RGBA); pixels: bytes, rows of w * channels."""
    ctype = {1: 0, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\0" + pixels[y * w * channels:(y + 1) * w * channels] for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def png_read(path):
    """(w, h, channels, pixels) of an 8-bit non-interlaced gray, RGB or RGBA PNG."""
    with open(path, "rb") as f:
        d = f.read()
    assert d[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(d):
        n, t = struct.unpack(">I4s", d[pos:pos + 8])
        body = d[pos + 8:pos + 8 + n]
        if t == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and ctype in (0, 2, 6), (path, depth, ctype)
        elif t == b"IDAT":
            idat += body
        pos += 12 + n
    ch = {0: 1, 2: 3, 6: 4}[ctype]
    raw, stride = zlib.decompress(idat), w * ch
    out, prev = bytearray(), bytearray(stride)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        prev = line
    return w, h, ch, bytes(out)


def jpeg_size(path):
    with open(path, "rb") as f:
        d = f.read()
    pos = 2
    while pos + 9 < len(d):
        marker, n = d[pos + 1], struct.unpack(">H", d[pos + 2:pos + 4])[0]
        if 0xc0 <= marker <= 0xcf and marker not in (0xc4, 0xc8, 0xcc):
            h, w = struct.unpack(">HH", d[pos + 5:pos + 9])
            return w, h
        pos += 2 + n
    return None


def scene(w, h, seed):
    """An RGB scene: a gradient room and a darker upright figure in the middle."""
    px = bytearray()
    for y in range(h):
        for x in range(w):
            inside = abs(x - w // 2) < w // 8 and h // 6 < y < h - 2
            r, g, b = ((40, 50, 70) if inside else (120 + (x * 90) // w, 110 + (y * 60) // h, 90 + seed * 20))
            n = ((x * 7 + y * 13 + seed * 31) % 9) - 4
            px += bytes((max(0, min(255, r + n)), max(0, min(255, g + n)), max(0, min(255, b + n))))
    return bytes(px)


def y4m_write(path, w, h, frames):
    """4:2:0 Y4M of RGB frames (BT.601 limited range, chroma of the top-left pixel of each 2x2 block)."""
    with open(path, "wb") as f:
        f.write(b"YUV4MPEG2 W%d H%d F25:1 Ip A1:1 C420jpeg\n" % (w, h))
        for px in frames:
            ys, us, vs = bytearray(), bytearray(), bytearray()
            for y in range(h):
                for x in range(w):
                    r, g, b = px[(y * w + x) * 3:(y * w + x) * 3 + 3]
                    ys.append(max(16, min(235, int(16 + 0.257 * r + 0.504 * g + 0.098 * b + 0.5))))
                    if x % 2 == 0 and y % 2 == 0:
                        us.append(max(16, min(240, int(128 - 0.148 * r - 0.291 * g + 0.439 * b + 0.5))))
                        vs.append(max(16, min(240, int(128 + 0.439 * r - 0.368 * g - 0.071 * b + 0.5))))
            f.write(b"FRAME\n" + ys + us + vs)


# ---- running the tool -----------------------------------------------------------------------------------------

def run(args, timeout=300):
    p = subprocess.run([MASKTOOL, "segment"] + args + ["--backend", BACKEND], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stderr


def report(outdir):
    with open(os.path.join(outdir, "segment.json")) as f:
        return json.load(f)


def ok_run(args, what, timeout=300):
    rc, err = run(args, timeout)
    check(rc == 0, "%s: exit %d: %s" % (what, rc, err[-500:]))
    return err


def masks_of(outdir):
    return {n[:-4]: png_read(os.path.join(outdir, n)) for n in sorted(os.listdir(outdir)) if n.endswith(".png")}


# ---- without data ------------------------------------------------------------------------------------------------

def test_png_scene(tmp):
    w, h = 96, 64
    src, bgp = os.path.join(tmp, "scene.png"), os.path.join(tmp, "bg.png")
    frame = scene(w, h, 0)
    png_write(src, w, h, 3, frame)
    bg = bytes(((x * 5) & 255 if c == 0 else (y * 3) & 255 if c == 1 else 200)
               for y in range(h) for x in range(w) for c in range(3))
    png_write(bgp, w, h, 3, bg)

    out = os.path.join(tmp, "mask")
    err = ok_run([src, "-o", out], "png mask")
    check("1/1" in err, "progress line names 1/1 frames: %r" % err)
    mw, mh, mc, mask = png_read(os.path.join(out, "scene.png"))
    check((mw, mh, mc) == (w, h, 1), "mask is %dx%d gray, not %dx%dx%d" % (w, h, mw, mh, mc))
    # No detector: select.fallback's centred box (half the width, 80% of the height), refined to the edges.
    check(mask[(h // 2) * w + w // 2] >= 128, "the centre of the fallback box is in the mask")
    for x, y in ((0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1), (2, h // 2), (w - 3, h // 2)):
        check(mask[y * w + x] == 0, "(%d,%d) far outside the fallback box is 0, not %d" % (x, y, mask[y * w + x]))
    rep = report(out)
    check(rep["kind"] == "image" and rep["product"] == "mask" and rep["backend"] == BACKEND, "report header %r" % rep)
    fr = rep["frames"]
    check(len(fr) == 1 and fr[0]["name"] == "scene" and fr[0]["file"] == "scene.png" and fr[0]["width"] == w and
          fr[0]["height"] == h and fr[0]["select"] == "fallback" and "keyframe" in fr[0]["flags"],
          "report frame %r" % fr)
    check(rep["totals"]["written"] == 1 and rep["totals"]["corrupt"] == 0 and not rep["interrupted"],
          "report totals %r" % rep["totals"])

    out = os.path.join(tmp, "alpha")
    ok_run([src, "-o", out, "--alpha", "--quiet"], "png alpha")
    aw, ah, ac, rgba = png_read(os.path.join(out, "scene.png"))
    check((aw, ah, ac) == (w, h, 4), "alpha output is %dx%d RGBA" % (w, h))
    check(bytes(rgba[i] for i in range(len(rgba)) if i % 4 != 3) == frame, "the RGBA colours are the frame's")
    alpha = bytes(rgba[3::4])
    check(alpha == mask, "the alpha matte is the mask (mask.threshold none)")

    out = os.path.join(tmp, "comp")
    ok_run([src, "-o", out, "--composite", bgp, "--quiet"], "png composite")
    cw, chh, cc, comp = png_read(os.path.join(out, "scene.png"))  # PNG in, PNG out
    check((cw, chh, cc) == (w, h, 3), "composite is %dx%d RGB" % (w, h))
    bad = [i for i in range(w * h * 3)
           if comp[i] != (frame[i] * alpha[i // 3] + bg[i] * (255 - alpha[i // 3]) + 127) // 255]
    check(not bad, "composite = (f a + b (255 - a) + 127) / 255 everywhere (%d bytes differ)" % len(bad))
    check(any(a == 255 for a in alpha) and any(a == 0 for a in alpha), "the matte has both 0 and 255")

    # A background of another shape covers the frame: the frame where the matte is 255.
    wide = os.path.join(tmp, "wide.png")
    png_write(wide, 250, 40, 3, bytes((x + y) & 255 for y in range(40) for x in range(250) for _ in range(3)))
    out = os.path.join(tmp, "cover")
    ok_run([src, "-o", out, "--composite", wide, "--quiet"], "png composite, wide background")
    _, _, _, comp = png_read(os.path.join(out, "scene.png"))
    check(all(comp[3 * i:3 * i + 3] == frame[3 * i:3 * i + 3] for i in range(w * h) if alpha[i] == 255),
          "covered composite: the frame where the matte is 255")

    out = os.path.join(tmp, "blur")
    ok_run([src, "-o", out, "--blur", "6", "--quiet"], "png blur")
    _, _, _, comp = png_read(os.path.join(out, "scene.png"))
    check(all(comp[3 * i:3 * i + 3] == frame[3 * i:3 * i + 3] for i in range(w * h) if alpha[i] == 255),
          "blur composite: the frame where the matte is 255")
    diff = sum(abs(comp[i] - frame[i]) for i in range(w * h * 3) if alpha[i // 3] == 0)
    check(diff > 0, "blur composite: the background is blurred where the matte is 0")


def test_y4m(tmp):
    w, h = 64, 48
    path = os.path.join(tmp, "clip.y4m")
    y4m_write(path, w, h, [scene(w, h, k) for k in range(3)])
    out = os.path.join(tmp, "y4m")
    ok_run([path, "-o", out, "--inflight", "2"], "y4m")
    m = masks_of(out)
    check(sorted(m) == ["000000", "000001", "000002"], "y4m masks named by frame number: %r" % sorted(m))
    check(all(v[:3] == (w, h, 1) for v in m.values()), "y4m masks are %dx%d gray" % (w, h))
    rep = report(out)
    check(rep["kind"] == "y4m" and len(rep["frames"]) == 3 and rep["inflight"] == 2, "y4m report %r" % rep["kind"])
    out = os.path.join(tmp, "y4m-blur")
    ok_run([path, "-o", out, "--blur", "2", "--quiet"], "y4m blur")
    names = sorted(os.listdir(out))
    check(names == ["000000.jpg", "000001.jpg", "000002.jpg", "segment.json"], "y4m composites: %r" % names)
    check(all(jpeg_size(os.path.join(out, n)) == (w, h) for n in names[:3]), "y4m composites are %dx%d" % (w, h))


def test_bad_arguments(tmp):
    src = os.path.join(tmp, "scene.png")
    png_write(src, 8, 8, 3, scene(8, 8, 1))
    notimg = os.path.join(tmp, "notes.txt")
    with open(notimg, "w") as f:
        f.write("not an image\n")
    cases = [
        ([os.path.join(tmp, "missing.jpg"), "-o", os.path.join(tmp, "o1")], "missing.jpg"),
        ([src, "-o", os.path.join(notimg, "sub")], "output directory"),
        ([src, "-o", os.path.join(tmp, "o2"), "--composite", notimg], "background"),
        ([src, "-o", os.path.join(tmp, "o3"), "--composite", os.path.join(tmp, "nobg.jpg")], "background"),
        ([src, "-o", os.path.join(tmp, "o4"), "--alpha", "--blur", "3"], "exclude"),
        ([src, "-o", os.path.join(tmp, "o5"), "--blur", "-3"], "--blur"),
        ([src, "-o", os.path.join(tmp, "o6"), "--blur", "x"], "--blur"),
        ([src], "-o OUTDIR"),
        (["-o", os.path.join(tmp, "o7")], "INPUT"),
        ([src, src, "-o", os.path.join(tmp, "o8")], "INPUT"),
        ([src, "-o", os.path.join(tmp, "o9"), "--set", "bogus.key=1"], "bogus.key"),
        ([src, "-o", os.path.join(tmp, "o10"), "--set", "guided.radius=100000"], "guided.radius"),
        ([src, "-o", os.path.join(tmp, "o11"), "--set", "noequals"], "KEY=VALUE"),
        ([src, "-o", os.path.join(tmp, "o12"), "--config", os.path.join(tmp, "none.json")], "none.json"),
        ([src, "-o", os.path.join(tmp, "o13"), "--inflight", "99"], "pipeline.inflight"),
        ([notimg, "-o", os.path.join(tmp, "o14")], "notes.txt"),
        ([src, "-o", os.path.join(tmp, "o15"), "--no-such-option"], "--help"),
    ]
    for args, word in cases:
        rc, err = run(args, 60)
        check(rc == 1 and word in err and "Traceback" not in err and "Segmentation" not in err,
              "%r: exit %d (want 1), message %r should name %r" % (args, rc, err.strip()[-300:], word))
    rc = subprocess.run([MASKTOOL, "segment", "--help"], capture_output=True, text=True).returncode
    check(rc == 0, "--help exits 0")


# ---- with the shared data -------------------------------------------------------------------------------------------

def model_args(data):
    m = os.path.join(data, "models", "yolo-fastest-1.1-body")
    cfg, weights = os.path.join(m, "yolo-fastest-1.1_body.cfg"), os.path.join(m, "yolo-fastest-1.1_body.weights")
    if not (os.path.exists(cfg) and os.path.exists(weights)):
        return None
    return ["--set", "detect.cfg=" + cfg, "--set", "detect.weights=" + weights]


def test_jpeg_dir(tmp, data):
    frames = os.path.join(data, "video", "otb_man", "frames")
    names = sorted(os.listdir(frames))[:12]
    d = os.path.join(tmp, "frames")
    os.mkdir(d)
    for n in names:
        shutil.copy(os.path.join(frames, n), d)
    stems = [n.rsplit(".", 1)[0] for n in names]
    # A truncated JPEG (the decoder refuses it) and an empty file (the source skips it).
    with open(os.path.join(frames, names[5]), "rb") as f:
        whole = f.read()
    with open(os.path.join(d, names[5]), "wb") as f:
        f.write(whole[:len(whole) // 2])
    open(os.path.join(d, "9999.jpg"), "w").close()
    out = os.path.join(tmp, "dir")
    err = ok_run([d, "-o", out], "jpeg dir with corrupt files")
    m = masks_of(out)
    want = [s for i, s in enumerate(stems) if i != 5]
    check(sorted(m) == want, "masks named by file: %r, want %r" % (sorted(m), want))
    check(all(v[:3] == (241, 193, 1) for v in m.values()), "jpeg dir masks are 241x193 gray")
    rep = report(out)
    check(rep["kind"] == "jpeg-dir", "jpeg dir kind %r" % rep["kind"])
    check(rep["totals"]["corrupt"] == 2 and rep["totals"]["corrupt_frames"] == [stems[5]] and
          rep["totals"]["written"] == 11 and rep["totals"]["failed"] == 0, "corrupt counted: %r" % rep["totals"])
    check([f["name"] for f in rep["frames"]] == want, "report frames in order")
    check(stems[5] in err and "corrupt" in err, "the corrupt frame is reported on stderr: %r" % err[-400:])


def test_engine_masks(tmp, data):
    """With the detector: the directory, the same JPEGs as a raw MJPEG stream, one and two frames in flight, and
    the first frame alone give the same masks."""
    margs = model_args(data)
    if not margs:
        print("no Yolo-Fastest body model: engine comparisons skipped")
        return
    frames = os.path.join(data, "video", "otb_man", "frames")
    names = sorted(os.listdir(frames))[:10]
    d = os.path.join(tmp, "frames10")
    os.mkdir(d)
    stream = os.path.join(tmp, "clip.mjpeg")
    with open(stream, "wb") as s:
        for n in names:
            shutil.copy(os.path.join(frames, n), d)
            with open(os.path.join(frames, n), "rb") as f:
                s.write(f.read())
    ok_run([d, "-o", os.path.join(tmp, "e-dir"), "--inflight", "2", "--quiet"] + margs, "dir, detector")
    ok_run([stream, "-o", os.path.join(tmp, "e-mjpeg"), "--inflight", "1", "--quiet"] + margs, "mjpeg, detector")
    ok_run([os.path.join(d, names[0]), "-o", os.path.join(tmp, "e-one"), "--quiet"] + margs, "one frame, detector")
    a, b = masks_of(os.path.join(tmp, "e-dir")), masks_of(os.path.join(tmp, "e-mjpeg"))
    c = masks_of(os.path.join(tmp, "e-one"))
    stems = [n.rsplit(".", 1)[0] for n in names]
    check(sorted(b) == ["%06d" % i for i in range(len(names))], "mjpeg stream masks by frame number")
    for i, s in enumerate(stems):
        check(a.get(s) == b.get("%06d" % i), "frame %s: same mask from the directory (2 in flight) and the stream "
              "(1 in flight)" % s)
    check(c.get(stems[0]) == a.get(stems[0]), "the first frame alone gives the directory's first mask")
    rep = report(os.path.join(tmp, "e-dir"))
    check(all(f["select"] == "detected" and f["detections"] and f["box"] for f in rep["frames"]),
          "the man is detected in every frame")
    check(rep["detector"].endswith("yolo-fastest-1.1_body.cfg"), "report names the detector")
    # The mask covers the chosen box's middle and nothing far outside it.
    f0 = rep["frames"][0]
    w, h, _, m0 = a[stems[0]]
    bx, by, bw, bh = (f0["box"][k] for k in ("x", "y", "w", "h"))
    cx, cy = int(bx + bw / 2), int(by + bh / 2)
    check(m0[cy * w + cx] >= 128, "the box's centre is in the mask")
    outside = sum(1 for y in range(h) for x in range(w) if m0[y * w + x] and
                  (x < bx - bw or x > bx + 2 * bw or y < by - bh or y > by + 2 * bh))
    check(outside == 0, "nothing masked far outside the box (%d pixels)" % outside)
    # GrabCut: a directory's images each learn their colours; a video's frames, whose box jitters by a few
    # pixels, keep the first frame's model (adaptive keyframes compare boxes in frame pixels)
    gc = ["--set", "cut.method=grabcut", "--quiet"] + margs
    ok_run([d, "-o", os.path.join(tmp, "g-dir")] + gc, "dir, grabcut")
    # (all of a keyframe's iterations on its own frame, as each image of a directory has them: by default a
    # video's keyframe spreads them over the frames after it, grabcut.key_iterations)
    ok_run([stream, "-o", os.path.join(tmp, "g-mjpeg")] + gc + ["--set", "grabcut.key_iterations=0"],
           "mjpeg, grabcut")
    kd = [("grabcut_keyframe" in f["flags"]) for f in report(os.path.join(tmp, "g-dir"))["frames"]]
    ks = [("grabcut_keyframe" in f["flags"]) for f in report(os.path.join(tmp, "g-mjpeg"))["frames"]]
    check(len(kd) == len(names) and all(kd), "every image of a directory is a GrabCut keyframe: %r" % kd)
    check(len(ks) == len(names) and ks[0] and sum(ks) <= 2,
          "the video's first frame is a GrabCut keyframe and few others are: %r" % ks)
    a = masks_of(os.path.join(tmp, "g-dir"))
    check(a.get(stems[0]) == masks_of(os.path.join(tmp, "g-mjpeg")).get("000000"),
          "the first frame's GrabCut mask is the same from the directory and the stream")


def test_avi(tmp, data):
    avi = os.path.join(data, "video", "otb_man", "man_mjpeg.avi")
    out = os.path.join(tmp, "avi")
    ok_run([avi, "-o", out, "--inflight", "1"], "avi")
    names = sorted(os.listdir(out))
    check(names == ["%06d.png" % i for i in range(134)] + ["segment.json"], "134 masks from the AVI")
    check(png_read(os.path.join(out, "000133.png"))[:3] == (241, 193, 1), "avi masks are 241x193 gray")
    rep = report(out)
    check(rep["kind"] == "avi" and rep["totals"]["written"] == 134 and rep["totals"]["fps"] > 0, "avi report")


def test_photo(tmp, data):
    photo = os.path.join(data, "images", "person.jpg")
    bg = os.path.join(data, "images", "horses.jpg")
    out = os.path.join(tmp, "photo")
    ok_run([photo, "-o", out, "--composite", bg, "--quiet"], "photo composite")
    check(jpeg_size(os.path.join(out, "person.jpg")) == (640, 424), "composite of a JPEG is a JPEG of its size")


def test_interrupt(tmp, data):
    margs = model_args(data)
    if not margs:
        return
    avi = os.path.join(data, "video", "otb_man", "man_mjpeg.avi")
    out = os.path.join(tmp, "sigint")
    p = subprocess.Popen([MASKTOOL, "segment", avi, "-o", out, "--backend", BACKEND] + margs,
                         stderr=subprocess.PIPE, text=True)
    end = time.time() + 60
    while time.time() < end and len([n for n in os.listdir(out) if n.endswith(".png")] if os.path.isdir(out)
                                    else []) < 3:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 130, "SIGINT: exit %d (want 130): %s" % (p.returncode, err[-300:]))
    rep = report(out)
    pngs = [n for n in os.listdir(out) if n.endswith(".png")]
    check(rep["interrupted"] and len(rep["frames"]) == len(pngs) < 134,
          "interrupted report: %d frames, %d files" % (len(rep["frames"]), len(pngs)))


def main():
    tmp = tempfile.mkdtemp(prefix="mk-segtool.")
    try:
        if BACKEND == "cuda":
            src = os.path.join(tmp, "probe.png")
            png_write(src, 8, 8, 3, scene(8, 8, 0))
            rc, err = run([src, "-o", os.path.join(tmp, "probe")], 60)
            if rc == 1 and "unavailable" in err:
                print("SKIP: the CUDA backend is unavailable:", err.strip())
                return SKIP
            test_png_scene(tmp)
            test_y4m(tmp)
            return finish()
        test_png_scene(tmp)
        test_y4m(tmp)
        test_bad_arguments(tmp)
        data = data_dir()
        if data and os.path.isdir(os.path.join(data, "video", "otb_man", "frames")):
            test_jpeg_dir(tmp, data)
            test_avi(tmp, data)
            test_photo(tmp, data)
            test_engine_masks(tmp, data)
            test_interrupt(tmp, data)
        else:
            print("shared data absent: JPEG directory, AVI and detector checks skipped")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
