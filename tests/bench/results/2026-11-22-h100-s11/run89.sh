#!/usr/bin/env bash
# final (session 11), second call: the clip's tests and the pipeline, GrabCut/max-flow (CUDA + CPU anchor), pipeline 720p/1080p
set -u
O=$OUT/${TAG:-final2}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs maskd-otb maskd-lost > $O/test_otb.log 2>&1; echo "otb tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:" $O/test_otb.log
if [ -z "${NOPIPE:-}" ]; then
for s in 1280x720 1920x1080; do
  timeout 100 $B bench pipeline --backend cuda --size $s --frames 600 --inflight 2 --per-frame > $O/pf_tp$s.json 2>$O/pf_$s.log; echo "$s rc=$?"
done
MASKD_PR_PARAMS=8,0,64 timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_m64_1280x720.json 2>/dev/null; echo "m64 rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json > $O/pf_summary.txt 2>&1
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], "e2e", (r["e2e_ms"]["p50"], r["e2e_ms"]["p99"]), "pub", (r["e2e_published_ms"]["p50"], r["e2e_published_ms"]["p99"]), {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided","download")})
  print("  gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee -a $O/pf_summary.txt
timeout 200 $B bench pipeline --backend cpu --size 1280x720 --frames 30 --inflight 2 > $O/pipeline_cpu_1280x720.json 2>$O/pipeline_cpu.log; echo "cpu pipe rc=$?"
python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print("cpu", k, r["fps"], r["e2e_ms"])' $O/pipeline_cpu_1280x720.json | tee -a $O/pf_summary.txt
fi
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-final2}.tgz -C $OUT ${TAG:-final2} && rm -rf $O
