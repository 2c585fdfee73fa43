#!/usr/bin/env python3
"""Summarise `masktool bus-bench` JSON files as a Markdown table: usage: bus_report.py FILE.json..."""
import json
import os
import sys

print("| run | size | readers | rate | wake p50 µs | p99 | max | writer p99 µs (running / reader 0 stopped) | ratio |"
      " missed (per reader) | torn |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    d = json.load(open(path))
    wl = d.get("wake_latency_us", {})
    pub = d.get("writer_publish_us", [])
    p99s = " / ".join("%.1f" % p["p99"] for p in pub)
    ratio = d.get("writer_p99_ratio_stopped_vs_running")
    missed = ", ".join(str(int(r.get("missed", -1))) for r in d.get("per_reader", []))
    print("| %s | %s | %d | %s | %.1f | %.1f | %.1f | %s | %s | %s | %d |" % (
        os.path.basename(path)[:-5], d["size"], d["readers"], d["rate_fps"] or "max", wl.get("p50", 0),
        wl.get("p99", 0), wl.get("max", 0), p99s, "%.2f" % ratio if ratio else "—", missed, d["torn_reads"]))
