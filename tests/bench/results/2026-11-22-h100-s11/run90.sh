#!/usr/bin/env bash
# GrabCut iterations: warm from the previous iteration's flow (default) or cold (MASKD_GC_ITER_COLD=1); tile 16 at 640+
set -u
O=$OUT/${TAG:-w}; mkdir -p $O
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
MASKD_GC_ITER_COLD=1 timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs grabcut_cuda > $O/test_cold.log 2>&1; echo "tests cold rc=$?"
sm() { python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], " ".join("%s:%s=%.0f(%s/%s,E%.6g)"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"],x.get("rounds"),x.get("global_relabels"),x.get("energy",0)) for x in r if x["op"] in ("grabcut","grabcut-warm")))' "$@"; }
for rep in 1 2; do
  $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480,1280x720 --runs 40 > $O/gc_warm_$rep.json 2>/dev/null; sm $O/gc_warm_$rep.json "warm #$rep"
  MASKD_GC_ITER_COLD=1 $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480,1280x720 --runs 40 > $O/gc_cold_$rep.json 2>/dev/null; sm $O/gc_cold_$rep.json "cold #$rep"
done | tee $O/iters.txt
MASKD_PR_TILE=16 $B bench grabcut --backend cuda --sizes 640x480,1280x720 --runs 40 > $O/gc_t16.json 2>/dev/null
MASKD_PR_TILE=16 $B bench maxflow --backend cuda --runs 60 > $O/mf_t16.json 2>/dev/null
python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print("tile16", " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if "warm" not in x["op"]))' $O/gc_t16.json $O/mf_t16.json | tee -a $O/iters.txt
MASKD_GC_ITER_COLD=1 MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 1 --warmup 1 > /dev/null 2>$O/prof_cold.log
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-w}.tgz -C $OUT ${TAG:-w} && rm -rf $O
