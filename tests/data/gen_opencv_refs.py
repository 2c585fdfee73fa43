#!/usr/bin/python3
"""Regenerates tests/data/opencv/: what OpenCV computes for the letterbox (warp mode), YUYV conversion, threshold
and Otsu tests. Run with Debian's python3-opencv (OpenCV 4.6, built without IPP, so Otsu is OpenCV's own C++):

    /usr/bin/python3 tests/data/gen_opencv_refs.py [SHARED_DATA_DIR]
    python3 tests/data/gen_opencv_refs.py --check [SHARED_DATA_DIR]   # compare this OpenCV with the stored refs

Synthetic inputs are not stored: the tests regenerate them with the same xorshift64* generator (tests/testutil.c)
from the seeds recorded here. Real inputs come from the shared data folder (GrabCut benchmark BMPs and Middlebury
PNGs, both lossless, so no decoder differences enter)."""
import hashlib
import json
import os
import sys

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "opencv")
CHECK = "--check" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--check"]
DATA = ARGS[0] if ARGS else os.path.join(HERE, "..", "..", "..", "shared", "data")
STORED = {}
M64 = (1 << 64) - 1


class Rng:
    """xorshift64*, identical to tu_rand()/tu_rand_int() in tests/testutil.c."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        x = self.s or 0x9E3779B97F4A7C15
        x ^= x >> 12
        x ^= (x << 25) & M64
        x ^= x >> 27
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & M64

    def int(self, lo, hi):
        return lo + self.next() % (hi - lo + 1)

    def bytes(self, n):
        return np.array([self.next() >> 56 for _ in range(n)], dtype=np.uint8)


def fnv1a(arr):
    h = 0xCBF29CE484222325
    for b in np.ascontiguousarray(arr).tobytes():
        h = ((h ^ b) * 0x100000001B3) & M64
    return "%016x" % h


def seed_matrix(sw, sh, dw, dh):
    """The seed's AffineMatrix::compute in its float/double mix (float32 M handed to OpenCV)."""
    f = np.float32
    s = min(f(dw) / f(sw), f(dh) / f(sh))
    tx = f(float(f(-s) * f(sw)) * 0.5 + dw * 0.5 + float(s) * 0.5 - 0.5)
    ty = f(float(f(-s) * f(sh)) * 0.5 + dh * 0.5 + float(s) * 0.5 - 0.5)
    return np.array([[s, 0, tx], [0, s, ty]], dtype=np.float32)


def warp(img, dw, dh):
    m = seed_matrix(img.shape[1], img.shape[0], dw, dh)
    return cv2.warpAffine(img, m, (dw, dh), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=(114, 114, 114))


def save_png(rel, img):
    path = os.path.join(OUT, rel)
    if CHECK:  # compare with the stored picture instead of writing it
        old = cv2.imread(path, cv2.IMREAD_COLOR)
        d = np.abs(old.astype(int) - img.astype(int))
        STORED.setdefault("pictures", []).append((rel, int((d > 0).sum()), int(d.max()), d.size))
    else:
        assert cv2.imwrite(path, img), path
    return "opencv/" + rel  # relative to tests/data


def random_bgr(seed, w, h):
    return Rng(seed).bytes(w * h * 3).reshape(h, w, 3)


def otsu_image(k):
    """Synthetic Otsu inputs of seven kinds; tests/test_threshold.c has the same generator."""
    r = Rng(k * 2654435761 + 1)
    w, h, kind = r.int(1, 97), r.int(1, 61), k % 7
    px = np.zeros(w * h, dtype=np.uint8)
    vals = [r.int(0, 255) for _ in range(r.int(2, 6))] if kind == 1 else None
    a = r.int(0, 255) if kind in (2, 5) else (r.int(0, 250) if kind == 4 else 0)
    b = r.int(0, 255) if kind == 2 else 0
    c1 = r.int(20, 100) if kind == 3 else 0
    c2 = r.int(140, 230) if kind == 3 else 0
    for i in range(w * h):
        if kind == 0:
            v = r.next() >> 56
        elif kind == 1:
            v = vals[r.int(0, len(vals) - 1)]
        elif kind == 2:
            v = a if (r.next() >> 63) else b
        elif kind == 3:
            c = c1 if (r.next() >> 63) else c2
            d1 = r.int(-20, 20)
            d2 = r.int(-20, 20)
            v = min(255, max(0, c + d1 + d2))
        elif kind == 4:
            v = a + r.int(0, 5)
        elif kind == 5:
            v = a
        else:
            v = r.int(0, 3) * 85
        px[i] = v
    return px.reshape(h, w)


def main():
    os.makedirs(OUT, exist_ok=True)
    refs = {"opencv": cv2.__version__, "warp": [], "warp_real": [], "yuyv": [], "threshold": [], "otsu_synthetic": [],
            "otsu_big": [], "otsu_real": []}

    # Letterbox (warp mode) on random BGR images: up, down, odd, extreme aspect, 1x1.
    cases = [(7, 5, 13, 11), (1, 1, 4, 4), (33, 17, 16, 16), (97, 61, 64, 64), (61, 97, 64, 64), (50, 50, 30, 20),
             (120, 7, 32, 32), (5, 300, 40, 40), (40, 30, 160, 160), (2, 3, 9, 2), (64, 48, 64, 48)]
    for i, (sw, sh, dw, dh) in enumerate(cases):
        seed = 1000 + i
        out = warp(random_bgr(seed, sw, sh), dw, dh)
        refs["warp"].append({"seed": seed, "src": [sw, sh], "net": [dw, dh],
                             "expected": save_png("warp_%d.png" % i, out)})

    # Real photos (24-bit BMP, lossless).
    for name, dw, dh in [("banana1", 416, 416), ("llama", 320, 320), ("elefant", 608, 352)]:
        rel = "grabcut/images/%s.bmp" % name
        img = cv2.imread(os.path.join(DATA, rel), cv2.IMREAD_COLOR)
        assert img is not None, rel
        refs["warp_real"].append({"image": rel, "net": [dw, dh],
                                  "expected": save_png("warp_real_%s.png" % name, warp(img, dw, dh))})

    # YUYV: random frames and one of extreme values; cvtColor alone (identity warp) and warped.
    for i, (w, h, dw, dh) in enumerate([(16, 8, 16, 8), (64, 48, 64, 48), (64, 48, 32, 32), (22, 14, 40, 30)]):
        seed = 2000 + i
        yuyv = Rng(seed).bytes(w * h * 2).reshape(h, w, 2)
        bgr = cv2.cvtColor(yuyv, cv2.COLOR_YUV2BGR_YUYV)
        refs["yuyv"].append({"seed": seed, "src": [w, h], "net": [dw, dh],
                             "expected": save_png("yuyv_%d.png" % i, warp(bgr, dw, dh))})
    ext = [v for v in (0, 1, 15, 16, 17, 128, 235, 240, 254, 255)]
    row = []
    for y0 in ext:
        for u in ext:
            for v in ext:
                row += [y0, u, y0 ^ 0xFF, v]
    yuyv = np.array(row, dtype=np.uint8).reshape(1, -1, 2)
    bgr = cv2.cvtColor(yuyv, cv2.COLOR_YUV2BGR_YUYV)
    refs["yuyv_extremes"] = {"values": ext, "expected": save_png("yuyv_extremes.png", bgr)}

    # Fixed thresholds: every mode, several thresholds and maxvals; outputs recorded by FNV-1a hash.
    img = Rng(3000).bytes(37 * 23).reshape(23, 37)
    types = [cv2.THRESH_BINARY, cv2.THRESH_BINARY_INV, cv2.THRESH_TRUNC, cv2.THRESH_TOZERO, cv2.THRESH_TOZERO_INV]
    for t in (0, 1, 100, 127, 254, 255):
        for mv in (255, 200, 0):
            for mode, ty in enumerate(types):
                _, out = cv2.threshold(img, t, mv, ty)
                refs["threshold"].append({"thresh": t, "maxval": mv, "mode": mode, "fnv1a": fnv1a(out)})
    refs["threshold_input"] = {"seed": 3000, "size": [37, 23]}

    # Otsu on synthetic histograms (ties, sparse, constant, tiny images).
    for k in range(350):
        img = otsu_image(k)
        t, out = cv2.threshold(img, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
        refs["otsu_synthetic"].append({"k": k, "thresh": int(t), "fnv1a": fnv1a(out)})
    # Over 2^23 pixels a single pixel's share is below FLT_EPSILON: OpenCV's skip branch with mu1 kept.
    for w, h, fill, first, last in [(4096, 2100, 100, 3, 250), (4096, 2100, 7, 200, 9), (3000, 3000, 128, 0, 255)]:
        img = np.full((h, w), fill, dtype=np.uint8)
        img[0, 0] = first
        img[-1, -1] = last
        img[h // 2, :w // 3] = (fill + 60) % 256
        t, _ = cv2.threshold(img, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
        refs["otsu_big"].append({"size": [w, h], "fill": fill, "first": first, "last": last, "thresh": int(t)})

    # Otsu on real images: the green channel of photos, ground-truth masks (0/128/255), disparity maps.
    real = []
    for n in ("banana1", "book", "ceramic", "elefant", "llama", "banana2"):
        real.append(("grabcut/images/%s.bmp" % n, 1))
    for n in ("person1", "sheep", "flower", "153077", "cross", "teddy", "music", "grave"):
        real.append(("grabcut/gt/%s.bmp" % n, 1))
    for n in ("tsukuba", "venus"):
        real.append(("middlebury/%s/gt.png" % n, 1))
        real.append(("middlebury/%s/left.png" % n, 1))
    for rel, ch in real:
        img = cv2.imread(os.path.join(DATA, rel), cv2.IMREAD_COLOR)
        assert img is not None, rel
        g = np.ascontiguousarray(img[:, :, ch])
        t, out = cv2.threshold(g, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
        refs["otsu_real"].append({"image": rel, "channel": "bgr"[ch], "thresh": int(t), "fnv1a": fnv1a(out)})

    if CHECK:
        with open(os.path.join(OUT, "refs.json")) as f:
            old = json.load(f)
        print("OpenCV %s against the stored references (OpenCV %s):" % (cv2.__version__, old["opencv"]))
        for rel, n, mx, size in STORED["pictures"]:
            print("  %-26s %6d of %7d values differ, max |diff| %d" % (rel, n, size, mx))
        for key in ("threshold", "otsu_synthetic", "otsu_big", "otsu_real"):
            a, b = old[key], refs[key]
            diff = [(x, y) for x, y in zip(a, b) if x != y]
            print("  %-26s %d of %d differ %s" % (key, len(diff), len(a), diff[:3]))
        return
    with open(os.path.join(OUT, "refs.json"), "w") as f:
        json.dump(refs, f, indent=1)
        f.write("\n")
    print("wrote", OUT, "with OpenCV", cv2.__version__)


if __name__ == "__main__":
    main()
