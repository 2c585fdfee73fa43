#!/usr/bin/env python3
"""masktool bench grabcut and bench maxflow on the CPU backend at small sizes (one run each, no warm-up): the JSON
names every timed call kind per size (5 iterations, the reseeded run, the cut cold and warm, the warm 5
iterations) with positive, ordered latencies, the runs and warm-up asked for (--warmup 0 once meant the default)
and finite energies; the max-flow's flow equals the CPU reference's; bad arguments exit 2 with a message. Exit 77
without the shared data (the benchmark image person1). Needs MASKTOOL."""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testutil import check, data_dir, finish  # noqa: E402

MASKTOOL = os.environ["MASKTOOL"]
SKIP = 77
OPS = ["grabcut", "grabcut-reseed", "grabcut-cut", "grabcut-cut-warm", "grabcut-warm"]


def bench(data, what, *args):
    r = subprocess.run([MASKTOOL, "bench", what, "--backend", "cpu", "--data", data, "--runs", "1", "--warmup", "0",
                        *args], capture_output=True, text=True, timeout=240)
    if not check(r.returncode == 0, "bench %s %s: exit %d: %s" % (what, " ".join(args), r.returncode, r.stderr)):
        return None
    return json.loads(r.stdout)


def main():
    data = data_dir()
    if not data or not os.path.isfile(os.path.join(data, "grabcut", "bboxes", "person1.txt")):
        print("shared data absent: skipped")
        return SKIP
    sizes = ["64x48", "96x96"]
    doc = bench(data, "grabcut", "--sizes", ",".join(sizes))
    if doc:
        check(doc["backend"] == "cpu", "bench grabcut: backend %r" % doc["backend"])
        res = doc["results"]
        for size in sizes:
            ops = [x["op"] for x in res if x["size"] == size]
            check(ops == OPS, "bench grabcut %s: call kinds %r, want %r" % (size, ops, OPS))
        for x in res:
            what = "bench grabcut %s %s" % (x["size"], x["op"])
            check(0 < x["min_us"] <= x["median_us"] <= x["p99_us"], "%s: latencies %r %r %r out of order" %
                  (what, x["min_us"], x["median_us"], x["p99_us"]))
            check(x["runs"] == 1 and x["warmup"] == 0, "%s: runs %r warmup %r" % (what, x["runs"], x["warmup"]))
            check(math.isfinite(x["energy"]) and x["energy"] > 0, "%s: energy %r" % (what, x["energy"]))
            check(set(x["stages_us"]) == {"kmeans", "gmm", "graph", "maxflow", "total"}, "%s: stages %r" %
                  (what, sorted(x["stages_us"])))
    doc = bench(data, "maxflow", "--sizes", "80x60")
    if doc:
        x = doc["results"][0] if doc["results"] else {}
        check(x.get("op") == "maxflow" and x.get("flow") == x.get("cpu_flow") and x.get("flow", 0) > 0,
              "bench maxflow: flow %r, CPU reference %r" % (x.get("flow"), x.get("cpu_flow")))
    for args in (["grabcut", "--runs", "0"], ["grabcut", "--sizes", "0x5"], ["grabcut", "extra"],
                 ["maxflow", "--bogus"]):
        r = subprocess.run([MASKTOOL, "bench", *args, "--backend", "cpu", "--data", data], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 2 and "bench" in r.stderr,
              "bench %s: exit %d, stderr %r" % (" ".join(args), r.returncode, r.stderr))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
