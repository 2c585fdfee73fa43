#!/usr/bin/env bash
# validation + measurement: auto push passes (and whatever else is in the tree)
set -u
O=$OUT/${TAG:-val}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 400 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda ${SUITES:-} > $O/test_cuda.log 2>&1; echo "cuda suite rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_cuda.log
$B bench grabcut --backend cuda --sizes 320x180,416x416,640x480,1280x720 --runs 100 > $O/gc.json 2>$O/gc.log; echo "gc rc=$?"
$B bench maxflow --backend cuda --runs 200 > $O/mf.json 2>$O/mf.log; echo "mf rc=$?"
python3 -c 'import json,sys
for f in sys.argv[1:]:
  for x in json.load(open(f))["results"]: print(x["op"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' $O/gc.json $O/mf.json | tee $O/gc_summary.txt
$B bench guided --backend cuda > $O/guided_cuda.json 2>$O/guided.log; echo "guided rc=$?"
python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["results"]: print(x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' $O/guided_cuda.json | tee $O/guided_summary.txt
timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_tp1280x720.json 2>$O/pf_720.log; echo "720 rc=$?"
timeout 100 $B bench pipeline --backend cuda --size 1920x1080 --frames 600 --inflight 2 --per-frame > $O/pf_tp1920x1080.json 2>$O/pf_1080.log; echo "1080 rc=$?"
timeout 100 $B bench pipeline --backend cuda --frames 600 --inflight 2 --per-frame --source "file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi" > $O/pf_otb.json 2>$O/pf_otb.log; echo "otb rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json | tee $O/pf_summary.txt
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided","download","total")})
  print("  fp16", d["fp16"], "cudnn", d["cudnn"], "gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee -a $O/pf_summary.txt
if [ -n "${CPU_PIPE:-}" ]; then timeout 200 $B bench pipeline --backend cpu --size 1280x720 --frames 30 --inflight 2 > $O/pipeline_cpu_1280x720.json 2>$O/pipeline_cpu.log; python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print("cpu", k, r["fps"], r["e2e_ms"])' $O/pipeline_cpu_1280x720.json | tee -a $O/pf_summary.txt; fi
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-val}.tgz -C $OUT ${TAG:-val} && rm -rf $O
