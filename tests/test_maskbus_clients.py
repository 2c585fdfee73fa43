#!/usr/bin/env python3
"""The frame bus's clients end to end: the Python binding (clients/python/maskbus.py) and maskcat, reading frames
that `masktool bus-bench --readers 0` publishes. Every byte read is checked against the pattern the writer uses
(ipc/maskbus_pattern.h). Needs MASKBUS_LIB, MASKTOOL, MASKCAT (meson sets them)."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import maskbus  # noqa: E402

MASKTOOL, MASKCAT = os.environ["MASKTOOL"], os.environ["MASKCAT"]
BPP = (1, 1, 3, 2)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def expected_row(seq, plane, y, nbytes):
    base = seq * 97 + plane * 61 + y * 13
    return bytes((base + x) & 0xFF for x in range(nbytes))


def raw_bytes(a):
    return a if isinstance(a, (bytes, bytearray)) else a.tobytes()


def pattern_ok(seq, plane, width, height, data):
    row = width * BPP[plane]
    return all(data[y * row:(y + 1) * row] == expected_row(seq, plane, y, row) for y in range(height))


def start_writer(name, frames, rate, size, planes):
    return subprocess.Popen([MASKTOOL, "bus-bench", "--readers", "0", "--bus", name, "--frames", str(frames),
                             "--rate", str(rate), "--size", size, "--planes", planes],
                            stdout=subprocess.DEVNULL)


def open_when_there(name, seconds=10):
    end = time.time() + seconds
    while True:
        try:
            return maskbus.Reader(name)
        except maskbus.MaskbusError as e:
            if time.time() > end:
                raise
            time.sleep(0.01)


def unlink(name):
    for suffix in ("", ".readers"):
        try:
            os.unlink("/dev/shm/maskd.%s%s" % (name, suffix))
        except FileNotFoundError:
            pass


def test_python_reader():
    name = "pytest-%d" % os.getpid()
    w = start_writer(name, 120, 200, "64x48", "mask,frame,disp")
    frames, events, last = 0, [], 0
    missed = 0
    first = None
    with open_when_there(name) as bus:
        while True:
            x = bus.next(timeout=5)
            check(x is not None, "python reader: a frame or event within 5 s")
            if x is None:
                break
            if isinstance(x, maskbus.Event):
                events.append(x.kind)
                if x.kind == "writer_gone":
                    break
                continue
            frames += 1
            first = first or x.frame_seq
            check(x.seq > last, "python reader: increasing sequence")
            last = x.seq
            missed += x.missed
            check((x.width, x.height) == (64, 48), "python reader: geometry")
            check(set(x.planes) == {"mask", "frame", "disp"}, "python reader: planes %s" % sorted(x.planes))
            for i, pname in enumerate(maskbus.PLANE_NAMES):
                if pname in x.planes:
                    check(pattern_ok(x.frame_seq, i, 64, 48, raw_bytes(x.planes[pname])),
                          "python reader: %s plane of frame %d" % (pname, x.frame_seq))
            if maskbus._np is not None:
                check(x.planes["mask"].shape == (48, 64), "numpy mask shape")
                check(x.planes["frame"].shape == (48, 64, 3), "numpy frame shape")
                check(x.planes["disp"].dtype == maskbus._np.uint16, "numpy disparity dtype")
            d = x.detections
            check(len(d) == 2 and d[0]["class_id"] == x.frame_seq and d[1]["class_id"] == x.frame_seq + 1
                  and d[0]["track_id"] == x.frame_seq and abs(d[1]["score"] - ((x.frame_seq + 1) % 1000) / 1000) < 1e-6,
                  "python reader: detections of frame %d" % x.frame_seq)
            check(x.latency_us >= 0, "python reader: latency is not negative")
        st = bus.status()
        check(not st["writer_alive"], "python reader: writer reported dead after close")
    w.wait()
    check(w.returncode == 0, "writer exit code")
    check(events == ["writer_gone"], "python reader: events %s" % events)
    check(last == 120, "python reader: last frame 120 read (got %d)" % last)
    check(frames + missed == 120 - first + 1, "python reader: frames + missed cover the run")
    check(frames > 10, "python reader: read %d frames" % frames)
    print("python reader: %d frames, %d missed" % (frames, missed))
    try:
        maskbus.Reader(name + "-none")
        check(False, "opening a missing bus raises")
    except maskbus.MaskbusError as e:
        check(e.code == -2 and "no bus" in str(e), "missing bus: %s" % e)
    unlink(name)


def test_maskcat_files():
    name = "pycat-%d" % os.getpid()
    with tempfile.TemporaryDirectory() as out:
        cat = subprocess.Popen([MASKCAT, "--bus", name, "--wait", "--timeout", "10", "--count", "10", "--out", out,
                                "--format", "pnm"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)
        w = start_writer(name, 400, 100, "40x30", "mask")
        lines = cat.communicate(timeout=30)[0].splitlines()
        check(cat.returncode == 0, "maskcat exit code %s" % cat.returncode)
        w.wait()
        metas = [json.loads(l) for l in lines]
        check(len(metas) == 10, "maskcat printed %d JSON lines" % len(metas))
        files = sorted(os.listdir(out))
        check(len(files) == 10, "maskcat wrote %d files" % len(files))
        for m in metas:
            path = os.path.join(out, "mask-%08d.pgm" % m["frame_seq"])
            check(os.path.exists(path), "maskcat file for frame %d" % m["frame_seq"])
            if not os.path.exists(path):
                continue
            data = open(path, "rb").read()
            header = b"P5\n40 30\n255\n"
            check(data.startswith(header), "PGM header")
            check(pattern_ok(m["frame_seq"], 0, 40, 30, data[len(header):]), "PGM pixels of %d" % m["frame_seq"])
            check(m["width"] == 40 and m["height"] == 30 and len(m["detections"]) == 2 and m["latency_us"] >= 0,
                  "maskcat metadata %s" % m)
    unlink(name)


def test_maskcat_y4m():
    name = "pyy4m-%d" % os.getpid()
    cat = subprocess.Popen([MASKCAT, "--bus", name, "--wait", "--timeout", "10", "--count", "5", "--y4m",
                            "--quiet"], stdout=subprocess.PIPE)
    time.sleep(0.2)
    w = start_writer(name, 300, 100, "16x8", "mask")
    data = cat.communicate(timeout=30)[0]
    w.wait()
    check(cat.returncode == 0, "maskcat --y4m exit code")
    head, _, rest = data.partition(b"\n")
    check(head.startswith(b"YUV4MPEG2 W16 H8 ") and b"Cmono" in head, "Y4M header %r" % head)
    chunks = rest.split(b"FRAME\n")[1:]
    check(len(chunks) == 5 and all(len(c) == 16 * 8 for c in chunks), "Y4M frames: %d" % len(chunks))
    # each frame is one whole pattern frame: find its sequence from the first byte and check the rest
    for c in chunks:
        seq = next((s for s in range(1, 301) if pattern_ok(s, 0, 16, 8, c)), None)
        check(seq is not None, "Y4M frame is a whole frame")
    unlink(name)


def test_maskcat_errors():
    r = subprocess.run([MASKCAT, "--bus", "no-such-bus-%d" % os.getpid(), "--count", "1"], capture_output=True,
                       text=True)
    check(r.returncode == 1 and "no bus" in r.stderr, "maskcat on a missing bus: %r" % r.stderr)
    r = subprocess.run([MASKCAT, "--bus", "x", "--plane", "nose"], capture_output=True, text=True)
    check(r.returncode == 2 and "unknown plane" in r.stderr, "maskcat bad plane")
    r = subprocess.run([MASKCAT, "--bus", "bad/name"], capture_output=True, text=True)
    check(r.returncode == 1 and "invalid bus instance name" in r.stderr, "maskcat bad name: %r" % r.stderr)


if __name__ == "__main__":
    test_python_reader()
    test_maskcat_files()
    test_maskcat_y4m()
    test_maskcat_errors()
    print("numpy:", maskbus._np is not None)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all passed")
