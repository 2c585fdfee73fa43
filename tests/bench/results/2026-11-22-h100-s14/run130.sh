#!/usr/bin/env bash
# session 14, final code: bench grabcut / maxflow (CUDA, and the CPU reference as the anchor in the same call), bench
# guided twice, the pipeline at 720p and 1080p (2 frames in flight)
set -u
O=$OUT/${TAG:-fb}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]: print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' "$@"; }
$B bench grabcut --backend cuda --sizes 320x180,416x416,640x480,1280x720 --runs 100 > $O/gc.json 2>$O/gc.log
$B bench maxflow --backend cuda --runs 200 > $O/mf.json 2>$O/mf.log
summ cuda $O/gc.json $O/mf.json | tee $O/gc_summary.txt
timeout 150 $B bench grabcut --backend cpu --sizes 416x416,640x480 --runs 3 --warmup 1 > $O/gc_cpu.json 2>$O/gc_cpu.log; echo "cpu rc=$?"
summ cpu $O/gc_cpu.json | grep -v warm | tee -a $O/gc_summary.txt
gsumm() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2; do $B bench guided --backend cuda > $O/guided_$rep.json 2>/dev/null; gsumm r$rep $O/guided_$rep.json; done | tee $O/guided_summary.txt
for s in 1280x720 1920x1080; do
  timeout 100 $B bench pipeline --backend cuda --size $s --frames 600 --inflight 2 --per-frame > $O/pf_tp$s.json 2>$O/pf_$s.log; echo "$s rc=$?"
done
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], "e2e", (r["e2e_ms"]["p50"], r["e2e_ms"]["p99"]), "pub", (r["e2e_published_ms"]["p50"], r["e2e_published_ms"]["p99"]), {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided","download")})
  print("  gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fb}.tgz -C $OUT ${TAG:-fb} && rm -rf $O
