#!/usr/bin/env bash
# 16 x 16 tiles: sweeps per visit 8 / 12 / 16, twice each, GrabCut 320x180 + 416², and the 720p pipeline
set -u
O=$OUT/${TAG:-sw}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for rep in 1 2; do for p in 8,0,64 12,0,64 16,0,64; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416 --runs 60 --warmup 10 > $O/gc_${p}_$rep.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(sys.argv[2], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if x["op"] in ("grabcut","grabcut-cut","grabcut-cut-warm")))' $O/gc_${p}_$rep.json "$p #$rep"
done; done | tee $O/sweeps.txt
for p in 8,0,64 12,0,64 8,0,64 12,0,64; do
  MASKD_PR_PARAMS=$p timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_$p.json 2>/dev/null
  python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print(sys.argv[2], k, "fps", r["fps"], "e2e", r["e2e_ms"]["p50"], r["e2e_ms"]["p99"], "cut", r["stages_ms"]["cut"]["p50"], r["stages_ms"]["cut"]["p99"])' $O/pf_$p.json $p
done | tee $O/pipe.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-sw}.tgz -C $OUT ${TAG:-sw} && rm -rf $O
