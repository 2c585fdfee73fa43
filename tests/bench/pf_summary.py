#!/usr/bin/env python3
"""Summary of a `masktool bench pipeline --per-frame` JSON: per run fps, e2e p50/p99, keyframes, and the e2e
p50/p99 of keyframes and of the other frames (which frames set the p99)."""
import json
import sys


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return round(v[min(len(v) - 1, int(q * len(v)))], 3)


for path in sys.argv[1:]:
    d = json.load(open(path))
    for name, r in d["runs"].items():
        pf = r.get("per_frame", {})
        e2e, key, cut = pf.get("e2e_ms", []), pf.get("keyframe", []), pf.get("cut_ms", [])
        k = [e for e, f in zip(e2e, key) if f]
        o = [e for e, f in zip(e2e, key) if not f]
        kc = [c for c, f in zip(cut, key) if f]
        print(f"{path.rsplit('/', 1)[-1]} {name}: fps {r['fps']} e2e p50 {r['e2e_ms'].get('p50')} "
              f"p99 {r['e2e_ms'].get('p99')} | keyframes {len(k)}: e2e p50 {pct(k, 0.5)} max {pct(k, 1.0)} "
              f"cut p50 {pct(kc, 0.5)} | others {len(o)}: e2e p50 {pct(o, 0.5)} p99 {pct(o, 0.99)} "
              f"max {pct(o, 1.0)} | differ {d['identical']['frames_differing']}")
