#!/usr/bin/env python3
"""OpenCV's cv2.grabCut as the anchor for maskd's GrabCut: accuracy on the 33 benchmark images and timing.

  scores: cv2.grabCut (rectangle, 5 iterations) from each benchmark rectangle (one covering the whole image shrunk
          by one pixel at the right and bottom, as reference/opencv-grabcut was made), with the RNG seeded by each of
          --seeds (cv2.setRNGSeed before every image; "default" leaves the process's RNG as it is, so results
          depend on the order of the images; "fresh" runs each image in a new process, the RNG in its initial
          state, as a program that segments one image sees it). IoU and error against gt/ with the 128 band
          excluded (as reference/opencv-grabcut/SCORES.txt), IoU against the reference masks; means per seed.
          OpenCV's k-means++ seeding draws from this RNG, so the seed alone moves a whole image's result.
  timing: cv2.grabCut (5 iterations from the rectangle) and the fixed-model cut (GC_EVAL_FREEZE_MODEL, one
          iteration with the models the full run learnt) on --image resized to --sizes, with OpenCV's threads and with
          one thread, as `masktool bench grabcut` times maskd's.

Prints one JSON document."""
import argparse
import json
import os
import subprocess
import sys
import time

import cv2
import numpy as np


def load(data, name):
    for ext in ("jpg", "bmp"):
        p = os.path.join(data, "grabcut", "images", f"{name}.{ext}")
        if os.path.exists(p):
            return cv2.imread(p)
    raise FileNotFoundError(name)


def box_of(data, name):
    return tuple(map(int, open(os.path.join(data, "grabcut", "bboxes", f"{name}.txt")).read().split()))


def rect_of_box(x1, y1, x2, y2, w, h):
    """cv::Rect of inclusive corners; one covering the whole image loses its last column and row."""
    if (x1, y1, x2, y2) == (0, 0, w - 1, h - 1):
        x2, y2 = w - 2, h - 2
    return (x1, y1, x2 - x1 + 1, y2 - y1 + 1)


def grabcut(img, rect, iters=5):
    mask = np.zeros(img.shape[:2], np.uint8)
    bgd, fgd = np.zeros((1, 65)), np.zeros((1, 65))
    cv2.grabCut(img, mask, rect, bgd, fgd, iters, cv2.GC_INIT_WITH_RECT)
    return mask, bgd, fgd


def fresh_mask(data, name, rect):
    """cv2.grabCut on one image in a new Python process (OpenCV's RNG in its initial state): the mask."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import grabcut_opencv as g; "
            "img = g.load(sys.argv[2], sys.argv[3]); m, _, _ = g.grabcut(img, tuple(map(int, sys.argv[4:8]))); "
            "sys.stdout.buffer.write(m.tobytes())")
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run([sys.executable, "-c", code, here, data, name, *map(str, rect)], check=True,
                          capture_output=True).stdout


def scores(data, seeds):
    names = [line.split()[0] for line in open(os.path.join(data, "grabcut", "index.txt")) if line.strip()]
    out = {"seeds": seeds, "images": {}, "mean_iou_gt": [], "mean_err_pct": [], "mean_iou_reference": []}
    for seed in seeds:
        ious, errs, refs = [], [], []
        for n in names:
            img = load(data, n)
            h, w = img.shape[:2]
            rect = rect_of_box(*box_of(data, n), w, h)
            if seed == "fresh":
                mask = np.frombuffer(fresh_mask(data, n, rect), np.uint8).reshape(h, w)
            else:
                if seed != "default":
                    cv2.setRNGSeed(int(seed))
                mask, _, _ = grabcut(img, rect)
            m = (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)
            gt = cv2.imread(os.path.join(data, "grabcut", "gt", f"{n}.bmp"), cv2.IMREAD_GRAYSCALE)
            ref = cv2.imread(os.path.join(data, "reference", "opencv-grabcut", f"{n}.png"), cv2.IMREAD_GRAYSCALE) > 0
            valid, g = gt != 128, gt == 255
            iou = float((m & g & valid).sum() / ((m | g) & valid).sum())
            err = float(((m != g) & valid).sum() / valid.sum() * 100)
            iou_ref = float((m & ref).sum() / (m | ref).sum())
            out["images"].setdefault(n, []).append({"seed": seed, "iou_gt": round(iou, 4), "err_pct": round(err, 2),
                                                    "iou_reference": round(iou_ref, 4)})
            ious.append(iou)
            errs.append(err)
            refs.append(iou_ref)
        out["mean_iou_gt"].append(round(float(np.mean(ious)), 4))
        out["mean_err_pct"].append(round(float(np.mean(errs)), 2))
        out["mean_iou_reference"].append(round(float(np.mean(refs)), 4))
    out["mean_iou_gt_over_seeds"] = round(float(np.mean(out["mean_iou_gt"])), 4)
    return out


def timeit(fn, runs):
    t = []
    for _ in range(runs):
        a = time.perf_counter_ns()
        fn()
        t.append((time.perf_counter_ns() - a) / 1e3)
    t.sort()
    return {"median_us": round(t[len(t) // 2], 1), "min_us": round(t[0], 1), "runs": runs}


def timing(data, name, sizes, runs):
    src = load(data, name)
    sh, sw = src.shape[:2]
    x1, y1, x2, y2 = box_of(data, name)
    res, default_threads = [], cv2.getNumThreads()
    for size in sizes.split(","):
        w, h = map(int, size.split("x"))
        img = cv2.resize(src, (w, h), interpolation=cv2.INTER_LINEAR)
        rx1, ry1 = x1 * w // sw, y1 * h // sh
        rx2, ry2 = (x2 + 1) * w // sw - 1, (y2 + 1) * h // sh - 1
        rect = rect_of_box(rx1, ry1, rx2, ry2, w, h)
        for threads in (default_threads, 1):
            cv2.setNumThreads(threads)
            cv2.setRNGSeed(1)
            full = timeit(lambda: grabcut(img, rect), runs)
            mask, bgd, fgd = grabcut(img, rect)

            def cut():
                m = mask.copy()
                cv2.grabCut(img, m, None, bgd.copy(), fgd.copy(), 1, cv2.GC_EVAL_FREEZE_MODEL)
            res.append({"size": size, "threads": threads, "grabcut_5_iterations": full,
                        "fixed_model_cut": timeit(cut, runs)})
    cv2.setNumThreads(default_threads)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("MASKD_TEST_DATA", "../shared/data"))
    ap.add_argument("--seeds", default="default", help="comma-separated cv2.setRNGSeed values, 'default' or 'fresh'")
    ap.add_argument("--no-scores", action="store_true")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--image", default="person1")
    ap.add_argument("--sizes", default="416x416,640x480,1280x720")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    doc = {"tool": "grabcut_opencv.py", "opencv": cv2.__version__, "threads": cv2.getNumThreads()}
    if not a.no_scores:
        doc["scores"] = scores(a.data, a.seeds.split(","))
    if a.timing:
        doc["timing"] = timing(a.data, a.image, a.sizes, a.runs)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
