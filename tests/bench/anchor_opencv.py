#!/usr/bin/env python3
"""The anchor for maskd's kernel benchmarks: what users run today, OpenCV on the CPU, on the same sizes and data as
`masktool bench` (a real photo mirror-tiled to each size). Prints one JSON document.

  letterbox: the seed's preprocess(): cv2.warpAffine(INTER_LINEAR, pad 114) + BGR->RGB, /255, HWC->CHW float32
  threshold: cv2.threshold(THRESH_BINARY, 128)
  otsu:      cv2.threshold(THRESH_BINARY | THRESH_OTSU)
  guided:    cv2.ximgproc.guidedFilter(guide / 255 as float32, source, r = 8, eps = 1e-4), colour and grey guide, at
             --guided-sizes (needs opencv-contrib; skipped with a note without it). OpenCV has no fast guided filter:
             masktool's fast rows have no anchor.

Each is timed with OpenCV's default thread count and with one thread; median and p99 of --runs after a warm-up
(the guided filter: at most --guided-runs)."""
import argparse
import json
import os
import time

import cv2
import numpy as np


def mirror_tile(img, w, h):
    ys = np.arange(h) % (2 * img.shape[0])
    ys = np.where(ys < img.shape[0], ys, 2 * img.shape[0] - 1 - ys)
    xs = np.arange(w) % (2 * img.shape[1])
    xs = np.where(xs < img.shape[1], xs, 2 * img.shape[1] - 1 - xs)
    return np.ascontiguousarray(img[ys][:, xs])


def seed_matrix(sw, sh, dw, dh):
    s = min(dw / sw, dh / sh)
    return np.array([[s, 0, -s * sw * 0.5 + dw * 0.5 + s * 0.5 - 0.5],
                     [0, s, -s * sh * 0.5 + dh * 0.5 + s * 0.5 - 0.5]], dtype=np.float32)


def preprocess(img, m, dw, dh):
    out = cv2.warpAffine(img, m, (dw, dh), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                         borderValue=(114, 114, 114))
    return np.ascontiguousarray((out[..., ::-1] / 255.0).astype(np.float32).transpose(2, 0, 1))


def timeit(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    t = []
    for _ in range(runs):
        a = time.perf_counter_ns()
        fn()
        t.append((time.perf_counter_ns() - a) / 1e3)
    t.sort()
    return {"median_us": round(t[len(t) // 2], 2), "p99_us": round(t[int(np.ceil(0.99 * len(t))) - 1], 2),
            "min_us": round(t[0], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default=os.path.join(os.environ.get("MASKD_TEST_DATA", "../shared/data"),
                                                    "images", "person.jpg"))
    ap.add_argument("--sizes", default="640x480,1280x720,1920x1080")
    ap.add_argument("--net", default="416x416")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--guided-sizes", default="1280x720,1920x1080")
    ap.add_argument("--guided-runs", type=int, default=20)
    a = ap.parse_args()
    photo = cv2.imread(a.image, cv2.IMREAD_COLOR)
    assert photo is not None, a.image
    dw, dh = map(int, a.net.split("x"))
    default_threads = cv2.getNumThreads()
    results = []
    for size in a.sizes.split(","):
        w, h = map(int, size.split("x"))
        bgr = mirror_tile(photo, w, h)
        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        m = seed_matrix(w, h, dw, dh)
        ops = [("letterbox", "warp", lambda: preprocess(bgr, m, dw, dh)),
               ("threshold", "binary-128", lambda: cv2.threshold(gray, 128, 255, cv2.THRESH_BINARY)),
               ("otsu", "binary", lambda: cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU))]
        for op, variant, fn in ops:
            for threads in (default_threads, 1):
                cv2.setNumThreads(threads)
                r = {"op": op, "variant": variant, "size": size, "threads": threads, "runs": a.runs}
                r.update(timeit(fn, a.runs, a.warmup))
                results.append(r)
        cv2.setNumThreads(default_threads)
    guided_note = "cv2.ximgproc.guidedFilter, guide / 255 in float32, f32 source, r = 8, eps = 1e-4"
    if hasattr(cv2, "ximgproc"):
        for size in a.guided_sizes.split(","):
            w, h = map(int, size.split("x"))
            bgr = mirror_tile(photo, w, h)
            gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
            src = gray.astype(np.float32) / 255.0
            for fmt, guide in (("bgr", bgr.astype(np.float32) / 255.0), ("gray", gray.astype(np.float32) / 255.0)):
                for threads in (default_threads, 1):
                    cv2.setNumThreads(threads)
                    runs = min(a.runs, a.guided_runs)
                    r = {"op": "guided", "variant": "full-r8", "src_format": fmt, "size": size, "threads": threads,
                         "runs": runs}
                    r.update(timeit(lambda: cv2.ximgproc.guidedFilter(guide, src, 8, 1e-4), runs, 2))
                    results.append(r)
            cv2.setNumThreads(default_threads)
    else:
        guided_note = "skipped: this OpenCV has no ximgproc (opencv-contrib-python needed)"
    print(json.dumps({"tool": "opencv anchor", "opencv": cv2.__version__, "cpu_count": os.cpu_count(),
                      "default_threads": default_threads, "source": a.image, "guided": guided_note,
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
