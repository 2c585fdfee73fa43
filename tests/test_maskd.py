#!/usr/bin/env python3
"""maskd end to end: the real binary (CPU backend) on the test pattern and on the shared data's otb_man clip, read
through the frame bus (maskcat and the Python binding) and driven through the control socket (maskctl and raw
requests) and signals. One group of tests per run: `test_maskd.py GROUP` with GROUP one of cli, testpattern, y4m,
otb, control, signals, idle, lost, watchdog, systemd, gpulost (the CUDA backend). Needs MASKD, MASKCAT, MASKCTL, MASKBUS_LIB (meson sets them);
the otb and lost groups skip without the shared data ($MASKD_TEST_DATA, else ../shared/data beside the source
root)."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import maskbus  # noqa: E402
from testutil import check, data_dir, failures  # noqa: E402

MASKD, MASKCAT, MASKCTL = os.environ["MASKD"], os.environ["MASKCAT"], os.environ["MASKCTL"]
SKIP = 77
FLAG_KEYFRAME, FLAG_NO_PERSON = 1, 2


def otb():
    d = data_dir()
    p = d and os.path.join(d, "video", "otb_man")
    return p if p and os.path.isdir(os.path.join(p, "frames")) else None


def wait_for(cond, seconds, step=0.05):
    end = time.time() + seconds
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


class Maskd:
    """A maskd process with its own instance, runtime directory and log."""

    def __init__(self, tag, *args, config=None, env=None, backend="cpu"):
        self.instance = "t%d-%s" % (os.getpid(), tag)
        self.dir = tempfile.mkdtemp(prefix="maskd-test-")
        self.sock = os.path.join(self.dir, "control.sock")
        self.log_path = os.path.join(self.dir, "maskd.log")
        cmd = [MASKD, "--instance", self.instance, "--runtime-dir", self.dir, "--backend", backend]
        if config:
            cmd += ["--config", config]
        self.log = open(self.log_path, "w")
        full_env = dict(os.environ)
        full_env.pop("NOTIFY_SOCKET", None)
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd + list(args), stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        up = wait_for(lambda: os.path.exists(self.sock) or self.proc.poll() is not None, 20)
        if not up or self.proc.poll() is not None:
            raise RuntimeError("maskd did not come up:\n" + self.log_text())

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def ctl(self, *args):
        """maskctl --json: (exit code, the parsed reply or None, stderr)."""
        r = subprocess.run([MASKCTL, "--socket", self.sock, "--json", "--timeout", "20"] + list(args),
                           capture_output=True, text=True, timeout=60)
        line = r.stdout.strip().splitlines()
        return r.returncode, (json.loads(line[0]) if line else None), r.stderr

    def get(self, key):
        rc, reply, err = self.ctl("get", key)
        check(rc == 0, "maskctl get %s: %s" % (key, err))
        return reply["result"][key] if rc == 0 else None

    def stats(self):
        rc, reply, err = self.ctl("stats")
        check(rc == 0, "maskctl stats: %s" % err)
        return reply["result"] if rc == 0 else {}

    def wait_state(self, state, seconds):
        return wait_for(lambda: self.stats().get("state") == state, seconds, 0.2)

    def stop(self, sig=signal.SIGTERM):
        """Sends sig; (exit code, seconds until exit)."""
        t0 = time.time()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        return rc, time.time() - t0

    def close(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        for suffix in ("", ".readers"):
            try:
                os.unlink("/dev/shm/maskd.%s%s" % (self.instance, suffix))
            except FileNotFoundError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if failures:
            print("---- maskd log (%s) ----\n%s" % (self.instance, self.log_text()[-6000:]))
        self.close()


class Client:
    """A raw control connection: the greeting is read on connect."""

    def __init__(self, path, rcvbuf=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(20)
        self.s.connect(path)
        self.buf = b""
        self.greeting = self.read()

    def read(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed by maskd")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send_raw(self, data):
        self.s.sendall(data)

    def request(self, obj):
        self.send_raw((json.dumps(obj) + "\n").encode())
        while True:
            m = self.read()
            if "event" not in m:
                return m

    def close(self):
        self.s.close()


def maskcat(instance, count, timeout=20, extra=()):
    """maskcat --count: the JSON lines of the frames (events left out) and the exit code."""
    r = subprocess.run([MASKCAT, "--bus", instance, "--count", str(count), "--timeout", str(timeout)] + list(extra),
                       capture_output=True, text=True, timeout=timeout * 4 + 30)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return [l for l in lines if "event" not in l], r.returncode, r.stderr


def plane_rows(f, name):
    """A plane of a Python-binding frame as a list of row byte strings (with or without numpy)."""
    p = f.planes[name]
    if isinstance(p, (bytes, bytearray)):
        stride = len(p) // f.height
        bpp = 3 if name == "frame" else 1
        return [bytes(p[y * stride:y * stride + f.width * bpp]) for y in range(f.height)]
    return [bytes(p[y].tobytes()) for y in range(f.height)]


def read_frames(instance, n, timeout=20):
    frames = []
    with maskbus.Reader(instance) as r:
        end = time.time() + timeout
        while len(frames) < n and time.time() < end:
            x = r.next(timeout=2)
            if isinstance(x, maskbus.Frame):
                frames.append(x)
    return frames


def mask_bbox(rows, level=128):
    """Bounding box (x0, y0, x1, y1) of the pixels >= level, or None."""
    ys = [y for y, r in enumerate(rows) if max(r) >= level]
    if not ys:
        return None
    xs = [x for r in rows for x, v in enumerate(r) if v >= level]
    return min(xs), ys[0], max(xs) + 1, ys[-1] + 1


def check_stream(lines, n, width, height, what):
    check(len(lines) >= n, "%s: %d masks read, %d wanted" % (what, len(lines), n))
    seqs = [l["frame_seq"] for l in lines]
    check(all(b > a for a, b in zip(seqs, seqs[1:])), "%s: frame_seq increases (%s...)" % (what, seqs[:8]))
    pubs = [l["seq"] for l in lines]
    check(all(b > a for a, b in zip(pubs, pubs[1:])), "%s: bus sequence increases" % what)
    check(all(l["publish_ns"] >= l["capture_ns"] > 0 for l in lines), "%s: capture before publish" % what)
    check(all((l["width"], l["height"]) == (width, height) for l in lines), "%s: %dx%d masks" % (what, width, height))
    check(all(l["planes"] & 1 for l in lines), "%s: every frame has a mask plane" % what)


# ---- groups -------------------------------------------------------------------------------------------------


def group_testpattern():
    with Maskd("tp") as d:
        lines, rc, err = maskcat(d.instance, 60)
        check(rc == 0, "maskcat on the test pattern: exit %d %s" % (rc, err))
        check_stream(lines, 60, 640, 480, "test pattern")
        check(all(l["flags"] == FLAG_KEYFRAME and l["detections"] == [] for l in lines),
              "test pattern without weights: box-cut keyframes of the fallback rectangle, no detections")
        span = (lines[-1]["capture_ns"] - lines[0]["capture_ns"]) / 1e9
        frames = lines[-1]["frame_seq"] - lines[0]["frame_seq"]
        check(abs(span - frames / 30) < 0.25 * frames / 30 + 0.1, "test pattern paced at 30 fps: %d frames in %.2f s"
              % (frames, span))
        st = d.stats()
        check(st["state"] == "running" and st["backend"] == "cpu", "stats: running on the CPU (%s)" % st.get("state"))
        check(st["model"]["status"].startswith("none"), "stats say that no model is configured")
        # pipeline.decoder cpu (the default): TurboJPEG, nothing on the GPU
        check(st.get("decoder") == "cpu" and st["frames"].get("gpu_decoded") == 0
              and st["frames"].get("gpu_fallbacks") == 0, "stats: the CPU decoder (%s, %s)"
              % (st.get("decoder"), st["frames"]))
        check(st["target"]["from"] == "fallback" and st["target"]["w"] == 320 and st["target"]["h"] == 384,
              "stats: the default fallback rectangle (%s)" % st["target"])
        check(st["frames"]["published"] >= 60 and st["fps"]["publish"] > 15, "stats: frames and fps %s %s"
              % (st["frames"], st["fps"]))
        check(st["latency_ms"]["frames"] > 0 and 0 < st["latency_ms"]["p50"] <= st["latency_ms"]["p99"] < 1000,
              "stats: latency percentiles %s" % st["latency_ms"])

        # The default fallback: the soft mask (mask.threshold none) inside the box plus margin, zero outside.
        fr = read_frames(d.instance, 3)
        check(len(fr) == 3, "python reader: 3 frames")
        rows = plane_rows(fr[-1], "mask")
        values = set(b for r in rows for b in r)
        check(any(0 < v < 255 for v in values), "soft mask by default (values %d..%d)" % (min(values), max(values)))
        box = mask_bbox(rows)
        check(box is not None and box[0] >= 160 - 32 and box[2] <= 480 + 32 and box[1] >= 48 - 39
              and box[3] <= 432 + 39,
              "default mask inside the fallback box and its margin: %s" % (box,))
        check(rows[240][320] == 255 and rows[5][5] == 0, "default mask: 255 at the centre, 0 in the corner")

        # Live changes: visible in get, in stats and in the masks.
        rc, reply, err = d.ctl("set", "select.fallback=40,60,200,300", "mask.threshold=fixed", "bus.frame=true")
        check(rc == 0 and reply["result"]["changed"] == 3, "maskctl set: %s %s" % (reply, err))
        check(d.get("select.fallback") == "40,60,200,300" and d.get("mask.threshold") == "fixed", "maskctl get")
        st = wait_for(lambda: (lambda s: s if s["target"]["x"] == 40 else None)(d.stats()), 5)
        check(st and st["target"] == {"from": "fallback", "x": 40, "y": 60, "w": 200, "h": 300, "track": 0},
              "stats show the new fallback box: %s" % (st and st["target"]))
        check(st and st["config_changes"] >= 3, "stats count the configuration changes")
        time.sleep(0.3)
        fr = read_frames(d.instance, 3)
        check(len(fr) == 3 and "frame" in fr[-1].planes, "bus.frame: the RGB frame plane is published")
        rows = plane_rows(fr[-1], "mask")
        values = set(b for r in rows for b in r)
        check(values == {0, 255}, "mask.threshold=fixed: a binary mask (values %s)" % sorted(values)[:10])
        box = mask_bbox(rows)
        check(box is not None and box[0] >= 40 - 20 and box[2] <= 240 + 20 and box[1] >= 60 - 30 and box[3] <= 360 + 30
              and box[2] - box[0] > 100 and box[3] - box[1] > 150, "the mask follows the new box: %s" % (box,))
        frame_rows = plane_rows(fr[-1], "frame")
        check(len(frame_rows[0]) == 640 * 3 and len(set(frame_rows[100])) > 10, "the frame plane holds a picture")

        # Restart-only keys and bad values are refused; nothing changes.
        rc, reply, err = d.ctl("set", "source.fps=10")
        check(rc == 1 and reply["error"]["class"] == "restart-required", "restart-only key refused: %s" % reply)
        rc, reply, err = d.ctl("set", "guided.radius=0", "mask.value=0.7")
        check(rc == 1 and reply["error"]["class"] == "bad-value" and d.get("mask.value") == 0.5,
              "a bad value refuses the whole set: %s" % reply)
        rc, reply, err = d.ctl("set", "cut.method=ellipse")
        check(rc == 0 and d.stats()["cut"] == "ellipse", "cut.method=ellipse applied")

        # Camera controls on the test pattern: accepted (the option is live), logged and reported as not
        # applicable, the daemon goes on; a list that does not parse is refused naming the key.
        st = d.stats()
        check(st["source"]["controls"] == {"applied": {}, "errors": [], "available": []},
              "stats: no controls yet: %s" % st["source"].get("controls"))
        rc, reply, err = d.ctl("set", "source.controls=exposure_absolute=150, brightness=128")
        check(rc == 0 and reply["result"]["changed"] == 1, "source.controls set on the test pattern: %s %s"
              % (reply, err))
        check(d.get("source.controls") == "exposure_absolute=150, brightness=128", "source.controls get")
        check(wait_for(lambda: "controls need a V4L2 camera" in d.log_text(), 5),
              "source.controls on the test pattern is logged as not applicable")
        ctl = wait_for(lambda: (lambda c: c if c["errors"] else None)(d.stats()["source"]["controls"]), 5)
        check(ctl and ctl["applied"] == {} and [e["control"] for e in ctl["errors"]] == ["exposure_absolute",
                                                                                      "brightness"]
              and all("V4L2 camera" in e["error"] for e in ctl["errors"]) and ctl["errors"][1]["value"] == 128,
              "stats report the controls refused: %s" % ctl)
        rc, reply, err = d.ctl("set", "source.controls=brightness")
        check(rc == 1 and reply["error"]["class"] == "bad-value" and "source.controls" in reply["error"]["desc"],
              "a malformed control list is refused: %s" % reply)
        lines, rc, err = maskcat(d.instance, 5)
        check(d.alive() and rc == 0 and len(lines) == 5, "masks flow after source.controls")
        # Classes the detector does not have pass the option table but cannot take effect: the set is refused
        # whole (nothing applied), never acknowledged and ignored.
        for classes in ("5000", "person"):
            rc, reply, err = d.ctl("set", "detect.classes=" + classes, "mask.value=0.7")
            check(rc == 1 and reply["error"]["class"] == "bad-value" and "detect.classes" in reply["error"]["desc"],
                  "detect.classes=%s refused: %s" % (classes, reply))
            check(d.get("detect.classes") == "0" and d.get("mask.value") == 0.5,
                  "detect.classes=%s: nothing applied" % classes)

        # No target (the fallback box outside the frame): empty masks flagged no-person.
        rc, reply, err = d.ctl("set", "select.fallback=640,0,10,10")
        check(rc == 0, "fallback box outside the frame: %s" % err)
        time.sleep(0.3)
        n0 = d.stats()["frames"]["no_person"]
        lines, rc, err = maskcat(d.instance, 5)
        check(rc == 0 and len(lines) == 5 and all(l["flags"] == FLAG_NO_PERSON for l in lines),
              "no target: frames flagged no-person (%s)" % [l["flags"] for l in lines])
        fr = read_frames(d.instance, 1)
        check(len(fr) == 1 and max(max(r) for r in plane_rows(fr[0], "mask")) == 0, "no target: an empty mask")
        st = d.stats()
        check(st["target"] == {"from": "none", "x": 0, "y": 0, "w": 0, "h": 0, "track": 0}
              and st["frames"]["no_person"] > n0,
              "stats: no target, no-person frames counted (%s, %d)" % (st["target"], st["frames"]["no_person"]))
        check(d.alive(), "maskd alive after the control session")


def write_y4m(path, w, h, frames):
    """A 4:2:0 Y4M clip: a bright block (Y 200) moving over a dark background (Y 40), neutral chroma."""
    with open(path, "wb") as f:
        f.write(b"YUV4MPEG2 W%d H%d F25:1 Ip A1:1 C420jpeg\n" % (w, h))
        for i in range(frames):
            x0 = 40 + 4 * i
            row = bytes(200 if x0 <= x < x0 + 60 else 40 for x in range(w))
            f.write(b"FRAME\n" + b"".join(row if 30 <= y < 200 else bytes([40]) * w for y in range(h)))
            f.write(bytes([128]) * (2 * (w // 2) * (h // 2)))


def group_y4m():
    """A Y4M file: delivered as YUYV, converted to RGB by the process stage (kernels op) before the cut."""
    tmp = tempfile.mkdtemp(prefix="maskd-y4m-")
    try:
        clip = os.path.join(tmp, "clip.y4m")
        write_y4m(clip, 320, 240, 20)
        with Maskd("y4m", "--source", "file:" + clip, "--set", "bus.frame=true", "--set",
                   "source.controls=gain=3") as d:
            lines, rc, err = maskcat(d.instance, 50)
            check(d.log_text().count("controls need a V4L2 camera") == 1,
                  "source.controls from the start on a file source: logged once as not applicable")
            check(rc == 0, "maskcat on a Y4M clip: %s" % err)
            check_stream(lines, 50, 320, 240, "Y4M clip")
            fr = read_frames(d.instance, 2)
            if check(len(fr) == 2 and "frame" in fr[-1].planes, "Y4M: frames with the RGB plane"):
                f = fr[-1]
                rows = plane_rows(f, "frame")
                i = f.frame_seq % 20
                x_in, x_out = 40 + 4 * i + 30, 300
                # BT.601 limited range: Y 200 -> 214, Y 40 -> 28 on each channel (neutral chroma).
                inside, outside = rows[100][3 * x_in:3 * x_in + 3], rows[100][3 * x_out:3 * x_out + 3]
                check(inside == bytes([214] * 3) and outside == bytes([28] * 3),
                      "YUYV converted to RGB: %s inside, %s outside" % (list(inside), list(outside)))
                m = plane_rows(f, "mask")
                check(m[120][160] == 255 and m[5][5] == 0, "Y4M: the fallback box is cut")
            st = d.stats()
            check(st["source"]["kind"] == "y4m" and st["source"]["fps"] == 25, "Y4M source at its own rate: %s"
                  % st["source"])
    finally:
        shutil.rmtree(tmp)


def group_otb():
    o = otb()
    if not o:
        print("SKIP: no shared data (video/otb_man)")
        return SKIP
    frames_dir = os.path.join(o, "frames")
    for spec, what in (("file:" + frames_dir, "JPEG directory"), ("file:" + os.path.join(o, "man_mjpeg.avi"), "AVI")):
        with Maskd("otb", "--source", spec) as d:
            lines, rc, err = maskcat(d.instance, 55)
            check(rc == 0, "maskcat on otb_man %s: exit %d %s" % (what, rc, err))
            check_stream(lines, 50, 241, 193, "otb_man " + what)
            st = d.stats()
            check(st["source"]["kind"] == ("jpeg-dir" if what.startswith("JPEG") else "avi"), "source kind %s"
                  % st["source"]["kind"])
            check(st["frames"]["corrupt"] == 0, "otb_man %s: no corrupt frame" % what)
            if what == "AVI":
                check(st["source"]["fps"] == 25, "the AVI's own rate (25 fps) is used: %s" % st["source"]["fps"])

    # The real body detector on the AVI, when the model is there.
    model = os.path.join(data_dir(), "models", "yolo-fastest-1.1-body")
    cfg = os.path.join(model, "yolo-fastest-1.1_body.cfg")
    weights = os.path.join(model, "yolo-fastest-1.1_body.weights")
    if os.path.exists(weights):
        with Maskd("det", "--source", "file:" + os.path.join(o, "man_mjpeg.avi"), "--set", "detect.cfg=" + cfg,
                   "--set", "detect.weights=" + weights) as d:
            lines, rc, err = maskcat(d.instance, 50, timeout=30)
            check(rc == 0 and len(lines) == 50, "maskcat with the detector: %d masks, exit %d" % (len(lines), rc))
            found = [l for l in lines if l["detections"]]
            check(len(found) >= 45, "the man is detected in %d of 50 frames" % len(found))
            for l in found:
                chosen = [x for x in l["detections"] if x["track"] > 0]
                check(len(chosen) == 1 and chosen[0]["class"] == 0 and chosen[0]["score"] > 0.5
                      and l["flags"] == FLAG_KEYFRAME,
                      "frame %d: one chosen person box, a keyframe mask: %s" % (l["frame_seq"], l["detections"]))
                x = chosen[0]
                check(60 < x["x"] + x["w"] / 2 < 200 and x["h"] > 80,
                      "frame %d: the man's box %s" % (l["frame_seq"], x))
            sub = Client(d.sock)
            check(sub.request({"id": 1, "cmd": "subscribe", "args": "detections"})["ok"], "subscribe detections")
            ev = sub.read()
            dets = ev.get("data", {}).get("detections", [])
            check(ev.get("event") == "detections" and ev["data"]["frame"] >= 0 and any(x["class"] == 0 for x in dets),
                  "a detections event with the man: %s" % ev)
            sub.close()
            st = d.stats()
            check(st["model"]["status"].startswith("loaded") and st["frames"]["detector_runs"] >= 50
                  and st["target"]["from"] == "detected",
                  "stats with the detector: %s %s" % (st["model"], st["target"]))
            fr = read_frames(d.instance, 2)
            if check(len(fr) == 2 and fr[-1].detections, "python reader: frames with detections"):
                x = [y for y in fr[-1].detections if y["track_id"]][0]
                rows = plane_rows(fr[-1], "mask")
                cx, cy = int(x["x"] + x["w"] / 2), int(x["y"] + x["h"] / 2)
                check(rows[cy][cx] >= 200 and rows[2][2] == 0, "mask on the man (%d), not in the corner" % rows[cy][cx])

    # A truncated and a corrupted JPEG in the stream: counted, skipped, the daemon goes on.
    tmp = tempfile.mkdtemp(prefix="maskd-corrupt-")
    try:
        names = sorted(os.listdir(frames_dir))[:24]
        for n in names:
            shutil.copy(os.path.join(frames_dir, n), tmp)
        good = open(os.path.join(frames_dir, names[0]), "rb").read()
        with open(os.path.join(tmp, "0005a.jpg"), "wb") as f:
            f.write(good[:len(good) // 2])  # truncated
        bad = bytearray(good)
        for i in range(len(bad) // 3, len(bad) // 3 + 400):
            bad[i] = (bad[i] * 7 + 13) & 0xFF
        with open(os.path.join(tmp, "0012a.jpg"), "wb") as f:
            f.write(bytes(bad))  # garbage in the entropy-coded data
        open(os.path.join(tmp, "0018a.jpg"), "wb").close()  # truncated to nothing
        with Maskd("corrupt", "--source", "file:" + tmp) as d:
            lines, rc, err = maskcat(d.instance, 60)
            check_stream(lines, 60, 241, 193, "stream with corrupt JPEGs")
            st = d.stats()
            check(st["frames"]["corrupt"] >= 3 and st["frames"]["corrupt_decode"] >= 2
                  and st["frames"]["corrupt_source"] >= 1, "corrupt and empty JPEGs counted: %s" % st["frames"])
            check(d.alive() and st["state"] == "running", "maskd goes on after corrupt frames")
    finally:
        shutil.rmtree(tmp)


def group_control():
    with Maskd("ctl", "--set", "control.max_line_bytes=1024", "--set", "control.max_output_bytes=65536") as d:
        c = Client(d.sock)
        g = c.greeting.get("maskd", {})
        check(g.get("protocol") == 1 and "set" in g.get("capabilities", []), "greeting %s" % c.greeting)
        c.send_raw(b"{not json\n")
        r = c.read()
        check(r["ok"] is False and r["error"]["class"] == "parse", "malformed JSON: %s" % r)
        r = c.request({"id": 7, "cmd": "frobnicate"})
        check(r["id"] == 7 and r["error"]["class"] == "unknown-command", "unknown command: %s" % r)
        r = c.request({"id": 8, "cmd": "set", "args": {"guided.radius": "big"}})
        check(r["id"] == 8 and r["error"]["class"] == "bad-value", "wrong type: %s" % r)
        r = c.request({"id": "x", "cmd": "set", "args": {"no.such.key": 1}})
        check(r["id"] == "x" and r["error"]["class"] == "unknown-key", "unknown key: %s" % r)
        r = c.request({"id": 9, "cmd": "get", "args": 5})
        check(r["id"] == 9 and r["error"]["class"] == "bad-args", "wrong args: %s" % r)
        c.send_raw(b'{"id": 10, "cmd": "version", "pad": "' + b"x" * 5000 + b'"}\n')
        r = c.read()
        check(r["ok"] is False and r["error"]["class"] == "parse", "oversize line: %s" % r)
        r = c.request({"id": 11, "cmd": "version"})
        check(r["id"] == 11 and r["ok"] and r["result"]["protocol"] == 1, "the connection survives: %s" % r)
        c.close()
        lines, rc, err = maskcat(d.instance, 5)
        check(rc == 0 and len(lines) == 5 and d.alive(), "maskd stays up after bad requests")

        # 64 clients at once (control.max_clients), each with a request in flight; a 65th is refused.
        clients = [Client(d.sock) for _ in range(64)]
        check(all("maskd" in x.greeting for x in clients), "64 greetings")
        for i, x in enumerate(clients):
            x.send_raw((json.dumps({"id": i, "cmd": "stats" if i % 2 else "get", "args": None}) + "\n").encode())
        replies = [x.read() for x in clients]
        check(all(r["ok"] and r["id"] == i for i, r in enumerate(replies)), "64 concurrent requests answered")
        extra = Client(d.sock)
        check(extra.greeting.get("ok") is False and extra.greeting["error"]["class"] == "busy",
              "the 65th client is refused: %s" % extra.greeting)
        extra.close()
        for x in clients:
            x.close()
        time.sleep(0.3)
        after = Client(d.sock)
        check("maskd" in after.greeting, "a client gets in again after the others left")
        after.close()

        # A subscriber that never reads (and keeps asking for the option list): disconnected, nothing stalls.
        slow = Client(d.sock, rcvbuf=4096)
        slow.send_raw(b'{"id": 1, "cmd": "subscribe"}\n' + b'{"cmd": "list"}\n' * 300)
        lines, rc, err = maskcat(d.instance, 30)
        check(rc == 0 and len(lines) == 30, "masks flow while a client does not read")
        st = wait_for(lambda: (lambda s: s if s["control"]["dropped_slow"] >= 1 else None)(d.stats()), 10)
        check(st is not None, "the slow client was disconnected (dropped_slow)")
        slow.s.settimeout(5)
        closed = False
        try:
            while slow.s.recv(1 << 20):
                pass
            closed = True
        except (ConnectionError, socket.timeout):
            closed = True
        check(closed, "the slow client's connection is closed")
        slow.close()

        # maskctl: a stats event and the readable output.
        r = subprocess.run([MASKCTL, "--socket", d.sock, "--json", "--count", "1", "subscribe", "stats"],
                           capture_output=True, text=True, timeout=30)
        ev = json.loads(r.stdout.splitlines()[-1]) if r.stdout.strip() else {}
        check(r.returncode == 0 and ev.get("event") == "stats" and "fps" in ev.get("data", {}),
              "maskctl subscribe stats: %s" % r.stdout[:200])
        r = subprocess.run([MASKCTL, "--socket", d.sock, "stats"], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and "state = running" in r.stdout and "fps.publish = " in r.stdout,
              "maskctl stats, readable")
        check(d.alive(), "maskd alive at the end")


def shm_header(instance):
    with open("/dev/shm/maskd." + instance, "rb") as f:
        h = f.read(128)
    return {"magic": h[:8], "pid": struct.unpack_from("<i", h, 52)[0], "state": struct.unpack_from("<I", h, 84)[0],
            "published": struct.unpack_from("<Q", h, 88)[0]}


def notify_group():
    """sd_notify as systemd sees it: a datagram socket in the abstract namespace."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = "@maskd-test-notify-%d" % os.getpid()
    s.bind("\0" + name[1:])
    s.settimeout(0.2)
    with Maskd("notify", env={"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "900000"}) as d:
        msgs, ready_published = [], None
        end = time.time() + 4
        while time.time() < end:
            try:
                m = s.recv(4096).decode()
            except socket.timeout:
                continue
            if m.startswith("READY=1") and ready_published is None:
                ready_published = shm_header(d.instance)["published"]
            msgs.append(m)
        others = [m for m in msgs if m != "WATCHDOG=1"]
        check(others and others[0].startswith("READY=1\nSTATUS="), "READY=1 first: %s" % others[:2])
        check(ready_published is not None and ready_published >= 1, "READY=1 after the first published mask")
        status = [m for m in msgs if m.startswith("STATUS=running: ") and " fps, " in m and "reader" in m]
        check(len(status) >= 2, "STATUS= once a second: %s" % status[:2])
        pings = msgs.count("WATCHDOG=1")
        check(8 <= pings <= 20, "WATCHDOG=1 about every 300 ms for a 0.9 s watchdog: %d in 4 s" % pings)
        rc, secs = d.stop()
        check(rc == 0, "exit 0")
        rest = []
        try:
            while True:
                rest.append(s.recv(4096).decode())
        except socket.timeout:
            pass
        check(any(m.startswith("STOPPING=1") for m in rest), "STOPPING=1 at SIGTERM: %s" % rest)
    s.close()


def group_cli():
    """The command line: --version, --print-config, --check-config, bad options, start-up failures."""
    r = subprocess.run([MASKD, "--version"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.startswith("maskd "), "--version")
    r = subprocess.run([MASKD, "--print-config", "--set", "guided.radius=3", "--source", "file:/x.avi"],
                       capture_output=True, text=True)
    cfg = json.loads(r.stdout) if r.returncode == 0 else {}
    check(cfg.get("guided", {}).get("radius") == 3 and cfg.get("source", {}).get("spec") == "file:/x.avi"
          and cfg.get("cut", {}).get("method") == "box", "--print-config with overrides")
    r = subprocess.run([MASKD, "--print-config", "--set", "guided.radius=300"], capture_output=True, text=True)
    check(r.returncode == 1 and "guided.radius" in r.stderr, "a bad --set is refused naming the key: %s" % r.stderr)
    r = subprocess.run([MASKD, "--print-config", "--set", "pipeline.decoder=gpu"], capture_output=True, text=True)
    check(r.returncode == 1 and "pipeline.decoder" in r.stderr and "auto|cpu|nvjpeg" in r.stderr,
          "a bad pipeline.decoder is refused with its values: %s" % r.stderr)
    r = subprocess.run([MASKD, "--print-config", "--set", "pipeline.decoder=nvjpeg"], capture_output=True, text=True)
    cfg = json.loads(r.stdout) if r.returncode == 0 else {}
    check(cfg.get("pipeline", {}).get("decoder") == "nvjpeg", "--set pipeline.decoder=nvjpeg")
    tmp = tempfile.mkdtemp(prefix="maskd-cli-")
    try:
        path = os.path.join(tmp, "good.json")
        with open(path, "w") as f:
            json.dump({"guided": {"radius": 6}, "mask.threshold": "fixed"}, f)
        r = subprocess.run([MASKD, "--check-config", path], capture_output=True, text=True)
        check(r.returncode == 0 and not r.stderr, "--check-config of a valid file: %s" % r.stderr)
        r = subprocess.run([MASKD, "--config", path, "--print-config"], capture_output=True, text=True)
        cfg = json.loads(r.stdout) if r.returncode == 0 else {}
        check(cfg.get("guided", {}).get("radius") == 6 and cfg.get("mask", {}).get("threshold") == "fixed",
              "--print-config shows the file's values")
        with open(path, "w") as f:
            f.write('{"guided": {"radius": "wide"}, "mask": {"valu": 1}}')
        r = subprocess.run([MASKD, "--check-config", path], capture_output=True, text=True)
        check(r.returncode == 1 and "guided.radius" in r.stderr and "mask.valu: unknown key" in r.stderr,
              "--check-config names every bad key: %s" % r.stderr)
        r = subprocess.run([MASKD, "--bogus-option"], capture_output=True, text=True)
        check(r.returncode == 2 and "usage" in r.stderr, "an unknown option is a usage error")
        r = subprocess.run([MASKD, "--instance", "../etc"], capture_output=True, text=True)
        check(r.returncode == 2 and "instance" in r.stderr, "a bad instance name is refused")
        # Start-up failures end with a message and exit 1 (never a crash), and leave no socket behind.
        rundir = os.path.join(tmp, "run")
        for args, words in ((["--set", "detect.cfg=/nonexistent/net.cfg", "--set", "detect.weights=/nonexistent/w"],
                             ["detector", "/nonexistent/net.cfg"]),
                            (["--set", "detect.weights=/nonexistent/w"], ["detect.cfg"]),
                            (["--config", os.path.join(tmp, "missing.json")], ["missing.json"]),
                            (["--set", "bus.group=nosuchgroupxyz"], ["bus.group", "nosuchgroupxyz"]),
                            (["--runtime-dir", ""], ["runtime directory"])):
            r = subprocess.run([MASKD, "--instance", "t%d-fail" % os.getpid(), "--runtime-dir", rundir, "--backend",
                                "cpu"] + args, capture_output=True, text=True, timeout=60)
            check(r.returncode == 1 and all(w in r.stderr for w in words),
                  "start-up failure %s: exit %d, %s" % (args, r.returncode, r.stderr.strip().splitlines()[-1:]))
            check(not os.path.exists(os.path.join(rundir, "control.sock")), "no socket left after a failed start")
        for suffix in ("", ".readers"):
            try:
                os.unlink("/dev/shm/maskd.t%d-fail%s" % (os.getpid(), suffix))
            except FileNotFoundError:
                pass
    finally:
        shutil.rmtree(tmp)


def group_signals():
    """SIGHUP (reload, a broken file), SIGTERM and SIGINT (exit 0 within 2 s, socket removed, bus closed), sd_notify."""
    tmp = tempfile.mkdtemp(prefix="maskd-cfg-")
    try:
        path = os.path.join(tmp, "maskd.json")
        with open(path, "w") as f:
            json.dump({"guided": {"radius": 6}, "mask": {"threshold": "fixed"}}, f)
        r = subprocess.run([MASKD, "--check-config", path], capture_output=True, text=True)
        check(r.returncode == 0, "--check-config of a valid file: %s" % r.stderr)
        with Maskd("hup", config=path) as d:
            check(d.get("guided.radius") == 6, "the config file is read")
            with open(path, "w") as f:
                f.write('{"guided": {"radius": "wide"}, "mask": {"value": 0.9}}')
            r = subprocess.run([MASKD, "--check-config", path], capture_output=True, text=True)
            check(r.returncode == 1 and "guided.radius" in r.stderr, "--check-config names the key: %s" % r.stderr)
            d.proc.send_signal(signal.SIGHUP)
            logged = wait_for(lambda: "keeping the configuration in force" in d.log_text(), 10)
            check(logged and "guided.radius" in d.log_text(), "SIGHUP with a broken file is logged with the key")
            check(d.alive() and d.get("guided.radius") == 6 and d.get("mask.value") == 0.5,
                  "SIGHUP with a broken file keeps the configuration")
            rc, reply, err = d.ctl("reload")
            check(rc == 1 and reply["error"]["class"] == "bad-value" and "guided.radius" in reply["error"]["desc"],
                  "reload over the control socket reports the error: %s" % reply)
            with open(path, "w") as f:
                json.dump({"guided": {"radius": 10}, "source": {"fps": 15}}, f)
            d.proc.send_signal(signal.SIGHUP)
            check(wait_for(lambda: d.get("guided.radius") == 10, 10), "SIGHUP with a valid file applies it")
            check(d.get("mask.threshold") == "none", "keys the new file leaves out return to their defaults")
            check(d.get("source.fps") == 30
                  and "source.fps changed; it takes effect when maskd restarts" in d.log_text(),
                  "a restart-only key of the new file waits for a restart")
            rc, reply, err = d.ctl("reload")
            check(rc == 0 and reply["result"]["changed"] == 0 and reply["result"]["restart_required"] == ["source.fps"],
                  "reload over the control socket: %s" % reply)
            # A file that --check-config accepts but the daemon cannot apply (a class its detector lacks): SIGHUP
            # logs why and keeps everything in force.
            with open(path, "w") as f:
                json.dump({"guided": {"radius": 12}, "detect": {"classes": "5000"}}, f)
            d.proc.send_signal(signal.SIGHUP)
            check(wait_for(lambda: "reload: keeping the configuration in force: detect.classes" in d.log_text(), 10),
                  "SIGHUP with a file that cannot be applied is logged with the key")
            check(d.alive() and d.get("guided.radius") == 10 and d.get("detect.classes") == "0",
                  "SIGHUP with a file that cannot be applied keeps the configuration")
            rc, reply, err = d.ctl("reload")
            check(rc == 1 and reply["error"]["class"] == "bad-value" and "detect.classes" in reply["error"]["desc"]
                  and d.get("guided.radius") == 10, "reload over the control socket names why: %s" % reply)

        notify_group()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with Maskd("term") as d:
                cat = subprocess.Popen([MASKCAT, "--bus", d.instance, "--timeout", "3"], stdout=subprocess.PIPE,
                                       text=True)
                check(wait_for(lambda: d.stats()["readers"]["live"] >= 1, 10), "maskcat attached")
                rc, secs = d.stop(sig)
                check(rc == 0 and secs < 2.0, "%s: exit %d after %.2f s" % (sig.name, rc, secs))
                check(not os.path.exists(d.sock), "%s: the control socket is removed" % sig.name)
                h = shm_header(d.instance)
                check(h["magic"] == b"MASKBUS\0" and h["state"] == 2 and h["pid"] == 0,
                      "%s: the bus is marked closed: %s" % (sig.name, h))
                out = cat.communicate(timeout=20)[0]  # maskcat gives up 3 s after the last frame
                check('"writer_gone"' in out, "%s: the reader saw the writer go" % sig.name)
                check("stopped" in d.log_text(), "%s: maskd logged its stop" % sig.name)
    finally:
        shutil.rmtree(tmp)


def group_idle():
    with Maskd("idle", "--set", "idle.timeout_s=1") as d:
        sub = Client(d.sock)
        r = sub.request({"id": 1, "cmd": "subscribe", "args": "state"})
        check(r["ok"], "subscribe state")
        check(d.wait_state("idle", 10), "idle after a second without readers")
        st = d.stats()
        check(st["source"]["open"] is False, "idle: the source is closed")
        n0 = st["frames"]["captured"]
        time.sleep(0.8)
        check(d.stats()["frames"]["captured"] == n0, "idle: nothing is captured")
        lines, rc, err = maskcat(d.instance, 10)
        check(rc == 0 and len(lines) == 10, "a reader attaching brings frames back: %d (%s)" % (len(lines), err))
        check(d.stats()["source"]["open"] is True, "the source is open again")
        states = []
        sub.s.settimeout(5)
        try:
            while "running" not in states[1:]:
                m = sub.read()
                if m.get("event") == "state":
                    states.append(m["data"]["state"])
        except (socket.timeout, ConnectionError):
            pass
        check("idle" in states and states[-1] == "running", "state events: %s" % states)
        sub.close()


def bus_event(bus, kind, timeout=10):
    """Read the bus until the event `kind` (frames and other events skipped); whether it came in time."""
    end = time.time() + timeout
    while time.time() < end:
        x = bus.next(timeout=1)
        if isinstance(x, maskbus.Event) and x.kind == kind:
            return True
    return False


def group_lost():
    o = otb()
    if not o:
        print("SKIP: no shared data (video/otb_man)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="maskd-lost-")
    src, away = os.path.join(tmp, "cam"), os.path.join(tmp, "away")
    try:
        shutil.copytree(os.path.join(o, "frames"), src)
        for n in sorted(os.listdir(src))[20:]:
            os.unlink(os.path.join(src, n))
        with Maskd("lost", "--source", "file:" + src, "--set", "idle.enable=false", "--set",
                   "source.retry_max_ms=400") as d:
            lines, rc, err = maskcat(d.instance, 10)
            check(rc == 0 and len(lines) == 10, "frames before the loss")
            sub = Client(d.sock)
            sub.request({"id": 1, "cmd": "subscribe", "args": ["state"]})
            bus = maskbus.Reader(d.instance)
            os.rename(src, away)
            check(d.wait_state("source-lost", 10), "the source is lost when its files vanish")
            check(bus_event(bus, "source_lost"), "a bus reader is told the source is lost")
            st = d.stats()
            check(st["source"]["lost"] >= 1 and st["state_reason"], "stats: lost %s (%s)"
                  % (st["source"]["lost"], st["state_reason"]))
            time.sleep(1)
            check(d.alive() and d.stats()["state"] == "source-lost", "maskd waits for the source")
            os.rename(away, src)
            check(d.wait_state("running", 10), "the source comes back without a restart")
            check(bus_event(bus, "source_streaming"), "a bus reader is told the source streams again")
            bus.close()
            lines, rc, err = maskcat(d.instance, 10)
            check(rc == 0 and len(lines) == 10, "frames after the source came back")
            states = []
            sub.s.settimeout(3)
            try:
                while True:
                    m = sub.read()
                    if m.get("event") == "state":
                        states.append(m["data"]["state"])
            except (socket.timeout, ConnectionError):
                pass
            check(states[:1] == ["source-lost"] and "running" in states, "state events %s" % states)
            sub.close()
    finally:
        shutil.rmtree(tmp)


class Notify:
    """A systemd notify socket in the abstract namespace: the env that points maskd at it, and its messages."""

    def __init__(self, tag):
        self.name = "@maskd-test-%s-%d" % (tag, os.getpid())
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind("\0" + self.name[1:])
        self.s.settimeout(0.1)

    def env(self, watchdog_usec):
        return {"NOTIFY_SOCKET": self.name, "WATCHDOG_USEC": str(watchdog_usec)}

    def collect(self, seconds):
        """The messages of the next `seconds`."""
        msgs, end = [], time.time() + seconds
        while time.time() < end:
            try:
                msgs.append(self.s.recv(4096).decode())
            except socket.timeout:
                pass
        return msgs

    def close(self):
        self.s.close()


def check_term(d, what):
    """SIGTERM: exit 0 within 2 s, the control socket removed, the bus marked closed."""
    rc, secs = d.stop()
    check(rc == 0 and secs < 2.0, "%s: SIGTERM: exit %d after %.2f s" % (what, rc, secs))
    check(not os.path.exists(d.sock), "%s: the control socket is removed" % what)
    h = shm_header(d.instance)
    check(h["state"] == 2 and h["pid"] == 0, "%s: the bus is marked closed: %s" % (what, h))


def bus_events(instance, seconds):
    """The events and the number of frames a bus reader gets in `seconds`."""
    events, frames = [], 0
    with maskbus.Reader(instance) as r:
        end = time.time() + seconds
        while time.time() < end:
            x = r.next(timeout=0.5)
            if isinstance(x, maskbus.Event):
                events.append(x.kind)
            elif isinstance(x, maskbus.Frame):
                frames += 1
    return events, frames


def group_watchdog():
    """While no frame comes (a source that opens but yields none, a FIFO, idle mode): WATCHDOG=1 keeps coming from
    the processing loop, so does the bus heartbeat (also with a short bus.heartbeat_ms: readers never see the writer
    gone), the source is retried with backoff, and SIGTERM still ends maskd at once. READY=1 goes out also when no
    mask can come: a file that ends before the first, first frames that all fail."""
    n = Notify("wd-lost")  # one socket per maskd: READY=1 waits (up to 0.5 s) while the socket's queue is full
    tmp = tempfile.mkdtemp(prefix="maskd-wd-")
    try:
        # A looping JPEG directory without a readable frame: lost, reopened no faster than the backoff allows.
        src = os.path.join(tmp, "cam")
        for name in ("a.jpg", "b.jpg"):  # directories: no regular file to read
            os.makedirs(os.path.join(src, name))
        with Maskd("wd-lost", "--source", "file:" + src, "--set", "idle.enable=false", "--set",
                   "source.retry_max_ms=5000", "--set", "bus.heartbeat_ms=20", env=n.env(600000)) as d:
            msgs = n.collect(3)
            check(any(m.startswith("READY=1\nSTATUS=waiting for the source") for m in msgs),
                  "READY=1 while waiting for a source without frames: %s" % [m for m in msgs if "READY" in m])
            pings = msgs.count("WATCHDOG=1")
            check(pings >= 8, "WATCHDOG=1 every 200 ms while the source yields nothing: %d in 3 s" % pings)
            st = d.stats()
            check(st["state"] == "source-lost" and "no readable frame" in st["state_reason"],
                  "stats: source-lost (%s: %s)" % (st["state"], st["state_reason"]))
            opens = d.log_text().count(": jpeg-dir ")
            check(2 <= opens <= 8, "the source is opened again with backoff, not every 100 ms: %d opens in 3 s"
                  % opens)
            events, frames = bus_events(d.instance, 1.5)
            check("writer_gone" not in events, "no frames, bus.heartbeat_ms=20: the writer stays alive: %s" % events)
            # The notify socket unread for 2.5 s and more (pings every 200 ms, a queue of 10 on most systems): its
            # queue is full, and STOPPING=1 waits at most MK_NOTIFY_WAIT_MS, so SIGTERM still ends maskd at once.
            time.sleep(1.0)
            check_term(d, "source without frames, the notify socket's queue full")

        # A FIFO as the file source: refused at once, never opened for reading (that would wait for a writer and
        # hang the capture thread): lost and retried with backoff, and SIGTERM still ends maskd at once.
        fifo = os.path.join(tmp, "pipe.mjpeg")
        os.mkfifo(fifo)
        with Maskd("wd-fifo", "--source", "file:" + fifo, "--set", "idle.enable=false") as d:
            check(d.wait_state("source-lost", 10), "a FIFO source: source-lost")
            reason = d.stats().get("state_reason", "")
            check("is a FIFO" in reason and "regular file" in reason, "stats say why: %s" % reason)
            check_term(d, "FIFO source")

        # READY=1 also when no mask comes: a file that ends (source.loop off) before the first mask ...
        n.close()
        n = Notify("wd-ended")
        clip = os.path.join(tmp, "empty.y4m")
        with open(clip, "wb") as f:
            f.write(b"YUV4MPEG2 W64 H48 F25:1 C420jpeg\n")
        with Maskd("wd-ended", "--source", "file:" + clip, "--set", "source.loop=false", env=n.env(600000)) as d:
            ready = [m for m in n.collect(2) if m.startswith("READY=1")]
            check(len(ready) == 1 and "\nSTATUS=ended: " in ready[0] and "source.loop is off" in ready[0],
                  "READY=1 with STATUS= when the file ends before a mask: %s" % ready)
            check(d.alive() and d.stats()["state"] == "ended", "maskd stays up in state ended")
            check_term(d, "ended before a mask")

        # ... and a source whose first frames all fail (none decodes): READY=1 saying so, maskd goes on.
        n.close()
        n = Notify("wd-failing")
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        for i in range(5):
            with open(os.path.join(bad, "%02d.jpg" % i), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0 not a JPEG")
        with Maskd("wd-failing", "--source", "file:" + bad, "--set", "idle.enable=false", env=n.env(600000)) as d:
            ready = [m for m in n.collect(3) if m.startswith("READY=1")]
            check(len(ready) == 1 and "\nSTATUS=no mask yet: " in ready[0] and "frames failed" in ready[0],
                  "READY=1 with STATUS= when the first frames all fail: %s" % ready)
            st = d.stats()
            check(d.alive() and st["frames"]["published"] == 0 and st["frames"]["corrupt"] >= 10,
                  "no mask, the failures counted: %s" % st["frames"])
            check_term(d, "failing frames")

        # Running with a short heartbeat, then idle (no bus reader): the source is closed, the watchdog still pinged.
        n.close()
        n = Notify("wd-idle")
        with Maskd("wd-idle", "--set", "idle.timeout_s=1", "--set", "bus.heartbeat_ms=20", env=n.env(600000)) as d:
            events, frames = bus_events(d.instance, 1.5)
            check(frames > 20 and "writer_gone" not in events,
                  "30 fps, bus.heartbeat_ms=20: the writer stays alive: %d frames, %s" % (frames, events))
            check(d.wait_state("idle", 10), "idle after a second without readers")
            pings = n.collect(2).count("WATCHDOG=1")
            check(d.stats()["state"] == "idle" and pings >= 5,
                  "WATCHDOG=1 every 200 ms while idle: %d in 2 s" % pings)
            check_term(d, "idle")
    finally:
        n.close()
        shutil.rmtree(tmp)


def group_gpulost():
    """The GPU context lost while running (a kernel fault; here tests/gpu_fault.c, preloaded, makes one in the
    process's context once a trigger file exists): every later CUDA call of the process fails, so maskd must not run
    on publishing nothing. It logs why, sends STATUS=failed: ..., closes the bus and exits with status 1 (the units'
    Restart=on-failure starts a fresh process). CUDA suite: skips without a usable GPU."""
    lib = os.environ.get("MASKD_GPU_FAULT_LIB")
    if not lib or not os.path.exists(lib):
        print("SKIP: MASKD_GPU_FAULT_LIB not set")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="maskd-gpulost-")
    trigger = os.path.join(tmp, "fault-now")
    n = Notify("gpulost")
    try:
        # after any preload already set (a sanitizer's runtime must stay first in the list)
        preload = (os.environ.get("LD_PRELOAD", "") + " " + lib).strip()
        env = dict(n.env(600000), LD_PRELOAD=preload, MASKD_TEST_GPU_FAULT_FILE=trigger)
        try:
            d = Maskd("gpulost", backend="cuda", env=env)
        except RuntimeError as e:
            if "CUDA backend unavailable" in str(e):
                print("SKIP: no usable GPU: %s" % str(e).strip().splitlines()[-1])
                return SKIP
            raise
        with d:
            ok = wait_for(lambda: d.stats()["frames"]["published"] >= 30, 30, 0.2)
            st = d.stats()
            check(ok and st["backend"] == "cuda", "running on CUDA, 30 frames published before the fault: %s %s"
                  % (st["backend"], st["frames"]))
            msgs = n.collect(0.3)
            open(trigger, "w").close()
            try:
                rc = d.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                rc = None
            msgs += n.collect(0.5)
            log = d.log_text()
            check(rc == 1, "after the fault maskd exits with status 1 within 20 s: %s" % rc)
            check("gpu_fault: the faulting kernel ended with CUresult 700" in log,
                  "the preloaded library made the fault (log)")
            check("the GPU context was lost" in log and "cudaErrorIllegalAddress" in log and "systemd restarts" in log,
                  "the log says that the GPU context was lost, why, and what follows")
            check(any(m.startswith("STATUS=failed: the GPU context was lost") for m in msgs),
                  "STATUS=failed: ... to the service manager: %s" % [m for m in msgs if "STATUS" in m])
            check("stopped: the GPU context was lost" in log, "the last log line says why maskd stopped")
            for line in log.splitlines():
                if "gpu_fault:" in line or "GPU context" in line or "stopping" in line:
                    print("maskd log: " + line[:400])
            check(not os.path.exists(d.sock), "the control socket is removed")
            h = shm_header(d.instance)
            check(h["state"] == 2 and h["pid"] == 0, "the bus is marked closed: %s" % h)
    finally:
        n.close()
        shutil.rmtree(tmp)


def group_systemd():
    tool = shutil.which("systemd-analyze")
    units = os.environ.get("MASKD_UNITS")
    if not tool or not units:
        print("SKIP: no systemd-analyze" if not tool else "SKIP: MASKD_UNITS not set")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="maskd-units-")
    try:
        # The units as installed, with ExecStart pointing at the built maskd (verify checks that it exists).
        for name in ("maskd.service", "maskd@.service"):
            with open(os.path.join(units, name)) as f:
                text = f.read()
            check("Type=notify" in text and "WatchdogSec=" in text and "DevicePolicy=closed" in text
                  and "DeviceAllow=char-video4linux rw" in text and "RestrictAddressFamilies=AF_UNIX" in text
                  and "PrivateDevices" not in text.split("[Service]")[1].replace("not PrivateDevices=", ""),
                  "%s has the hardening the design asks for" % name)
            exec_line = [l for l in text.splitlines() if l.startswith("ExecStart=")][0]
            text = text.replace(exec_line.split("=", 1)[1].split()[0], MASKD)
            out = "maskd@video0.service" if name == "maskd@.service" else name
            with open(os.path.join(tmp, out), "w") as f:
                f.write(text)
        check("--instance %i --source v4l2:/dev/%i" in open(os.path.join(units, "maskd@.service")).read(),
              "maskd@videoN runs /dev/videoN as instance videoN")
        r = subprocess.run([tool, "verify", "--man=no", os.path.join(tmp, "maskd.service"),
                            os.path.join(tmp, "maskd@video0.service")], capture_output=True, text=True, timeout=60)
        ours = [l for l in (r.stdout + r.stderr).splitlines() if tmp in l or "maskd" in l]
        check(r.returncode == 0 and not ours, "systemd-analyze verify: rc %d\n%s" % (r.returncode, "\n".join(ours)))
    finally:
        shutil.rmtree(tmp)


GROUPS = {"cli": group_cli, "testpattern": group_testpattern, "y4m": group_y4m, "otb": group_otb,
          "control": group_control, "signals": group_signals,
          "idle": group_idle, "lost": group_lost, "watchdog": group_watchdog, "systemd": group_systemd,
          "gpulost": group_gpulost}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in GROUPS:
        print("usage: test_maskd.py %s" % "|".join(GROUPS))
        sys.exit(2)
    t0 = time.time()
    rc = GROUPS[sys.argv[1]]()
    print("%s: %d failure(s) in %.1f s" % (sys.argv[1], len(failures), time.time() - t0))
    sys.exit(1 if failures else rc or 0)
