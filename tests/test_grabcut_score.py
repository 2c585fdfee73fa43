#!/usr/bin/env python3
"""masktool grabcut-score on the CPU backend with the shared data's 33 GrabCut benchmark images: GrabCut at 1/4 with
the fast guided filter back to full resolution (issue 6's quality path; the reduced rectangle rounded to the nearest
reduced pixel), then at 1/2 (each image the median of 2 calls, --runs 2); the reseeded 1/4 path (--reseed) against
full resolution (issue 6's quality bar: at least its mean IoU). Checks the JSON (every image of index.txt scored
once, IoUs and errors in range, the means equal to those of the images), the 1/4 mean IoU against the ground truth
(0.8049 when this test was written, NOTES.md session 19; it must stay at 0.80 or above) and against OpenCV's masks,
that a rectangle over the whole image (`cross`) is cut, and bad arguments and a missing data folder (exit 2 or 1
with a message). Exit 77 without the shared data. Needs MASKTOOL."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testutil import check, data_dir, finish  # noqa: E402

MASKTOOL = os.environ["MASKTOOL"]
SKIP = 77


def score(data, *args):
    r = subprocess.run([MASKTOOL, "grabcut-score", "--backend", "cpu", "--data", data, "--json", *args],
                       capture_output=True, text=True, timeout=240)
    if not check(r.returncode == 0, "grabcut-score %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr)):
        return None
    return json.loads(r.stdout)


def check_doc(doc, names, scale):
    what = "scale %d" % scale
    images = doc["images"]
    check(doc["scale"] == scale, "%s: scale %r in the JSON" % (what, doc["scale"]))
    check(doc["n"] == len(names) == len(images), "%s: %d images scored, %d listed" % (what, len(images), len(names)))
    check(sorted(x["image"] for x in images) == sorted(names), "%s: the images scored are not index.txt's" % what)
    for x in images:
        ok = 0.0 <= x["iou_gt"] <= 1.0 and 0.0 <= x["iou_opencv"] <= 1.0 and 0.0 <= x["err_pct"] <= 100.0
        check(ok, "%s: %s: IoU %r / %r, error %r out of range" % (what, x["image"], x["iou_gt"], x["iou_opencv"],
                                                                   x["err_pct"]))
    for key, mean in (("iou_gt", "mean_iou_gt"), ("iou_opencv", "mean_iou_opencv")):
        m = sum(x[key] for x in images) / len(images)
        check(abs(m - doc[mean]) < 1e-3, "%s: %s %r, the images' mean %.5f" % (what, mean, doc[mean], m))


def main():
    data = data_dir()
    if not data or not os.path.isfile(os.path.join(data, "grabcut", "index.txt")):
        print("shared data absent: skipped")
        return SKIP
    with open(os.path.join(data, "grabcut", "index.txt")) as f:
        names = [line.split()[0] for line in f if line.strip() and not line.startswith("#")]

    doc = score(data, "--scale", "4")
    if doc:
        check_doc(doc, names, 4)
        check(doc["mean_iou_gt"] >= 0.80, "scale 4: mean IoU against the ground truth %r, below 0.80" %
              doc["mean_iou_gt"])
        check(doc["mean_iou_opencv"] >= 0.88, "scale 4: mean IoU against OpenCV's masks %r, below 0.88" %
              doc["mean_iou_opencv"])
        cross = [x for x in doc["images"] if x["image"] == "cross"]
        check(len(cross) == 1 and cross[0]["iou_gt"] > 0.0, "scale 4: the whole-image rectangle (cross) cut nothing")
        print("scale 4: mean IoU %.4f against the ground truth, %.4f against OpenCV's masks" %
              (doc["mean_iou_gt"], doc["mean_iou_opencv"]))
    # Issue 6's quality bar: the reseeded 1/4 path (mk_gc_params_t.reseed) scores at least what GrabCut at full
    # resolution scores (0.8229 and 0.8155 when this was written, NOTES.md session 31).
    rs = score(data, "--scale", "4", "--reseed")
    full = score(data)
    if rs and full:
        check_doc(rs, names, 4)
        check_doc(full, names, 1)
        check(rs["reseed"] is True and full["reseed"] is False, "the JSON's reseed flags %r, %r" %
              (rs["reseed"], full["reseed"]))
        check(rs["mean_iou_gt"] >= full["mean_iou_gt"], "reseeded 1/4: mean IoU %r below full resolution's %r" %
              (rs["mean_iou_gt"], full["mean_iou_gt"]))
        print("reseeded 1/4: mean IoU %.4f against the ground truth; full resolution %.4f" %
              (rs["mean_iou_gt"], full["mean_iou_gt"]))
    # --runs 2: each image timed as the median of 2 calls after an untimed one; the scores are those of one call
    doc = score(data, "--scale", "2", "--radius", "4", "--runs", "2")
    if doc:
        check_doc(doc, names, 2)
        check(doc["runs"] == 2, "scale 2: runs %r in the JSON, want 2" % doc["runs"])
        check(all(x["ms"] > 0 and x["grabcut_ms"] > 0 and x["upsample_ms"] > 0 for x in doc["images"]),
              "scale 2: an image without its times")
        check(doc["mean_iou_gt"] >= 0.78, "scale 2: mean IoU against the ground truth %r" % doc["mean_iou_gt"])
        print("scale 2: mean IoU %.4f" % doc["mean_iou_gt"])

    for args, code in ((["--scale", "0"], 2), (["--scale", "65"], 2), (["--radius", "0"], 2), (["--eps", "2"], 2),
                       (["--iters", "101"], 2), (["--runs", "0"], 2), (["--runs", "1001"], 2), (["extra"], 2)):
        r = subprocess.run([MASKTOOL, "grabcut-score", "--data", data, *args], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == code and "grabcut-score" in r.stderr,
              "grabcut-score %s: exit %d (want %d), stderr %r" % (" ".join(args), r.returncode, code, r.stderr))
    r = subprocess.run([MASKTOOL, "grabcut-score", "--data", os.path.join(data, "no-such-folder"), "--scale", "4"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and "index.txt" in r.stderr, "grabcut-score with no data: exit %d, stderr %r" %
          (r.returncode, r.stderr))

    return finish()


if __name__ == "__main__":
    sys.exit(main())
