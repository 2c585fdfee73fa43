#!/usr/bin/env python3
"""Prints a markdown table from `masktool bench` JSON (CUDA and, optionally, CPU) and the OpenCV anchor JSON:
medians, p99, floors and the speed-up over OpenCV measured in the same run.

  report.py bench_cuda.json [bench_cpu.json] anchor.json"""
import json
import sys


def load(p):
    with open(p) as f:
        return json.load(f)


def main():
    docs = [load(p) for p in sys.argv[1:]]
    anchor = next(d for d in docs if d.get("tool") == "opencv anchor")
    benches = [d for d in docs if d.get("tool") == "masktool bench"]
    cuda = next((d for d in benches if d["backend"] == "cuda"), None)
    cpu = next((d for d in benches if d["backend"] == "cpu"), None)
    head = cuda or cpu
    print("device: %s; copy bandwidth %s GB/s; OpenCV %s with %d threads (and 1) on %d CPUs\n" % (
        head["device"], head.get("copy_GBps", "-"), anchor["opencv"], anchor["default_threads"], anchor["cpu_count"]))
    print("| op | variant | src | size | CUDA median µs | p99 µs | pipelined µs | floor µs | GB/s | CPU ref µs | OpenCV µs (N thr / 1 thr) | OpenCV/CUDA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in head["results"]:
        key = (r["op"], r["size"])
        cpu_r = next((c for c in (cpu or {}).get("results", []) if (c["op"], c["variant"], c["src_format"], c["size"])
                      == (r["op"], r["variant"], r["src_format"], r["size"])), None)
        # The guided rows have anchors per variant and guide format (none for the fast variant).
        an = [a for a in anchor["results"] if (a["op"], a["size"]) == key and
              (r["op"] != "guided" or (a.get("variant"), a.get("src_format")) == (r["variant"], r["src_format"]))]
        an_n = next((a["median_us"] for a in an if a["threads"] == anchor["default_threads"]), None)
        an_1 = next((a["median_us"] for a in an if a["threads"] == 1), None)
        ratio = "%.0fx" % (an_n / r["median_us"]) if (cuda and an_n) else "-"
        print("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %s | %.0f | %s | %s | %s |" % (
            r["op"], r["variant"], r["src_format"], r["size"], r["median_us"], r["p99_us"], r["pipelined_us"],
            r.get("floor_us", "-"),
            r["achieved_GBps"], "%.0f" % cpu_r["median_us"] if cpu_r else "-",
            "%.0f / %.0f" % (an_n, an_1) if an_n else "-", ratio))


if __name__ == "__main__":
    main()
