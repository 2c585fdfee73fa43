#!/usr/bin/env bash
# session 12: how many push passes a solve needs when a tile visit may sweep until it is done (sweeps 8..1024)
set -u
O=$OUT/${TAG:-sw}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "mf", (x.get("stages_us") or {}).get("maxflow"))' "$@"; }
for p in 8,0,8 16,0,8 32,0,8 1024,0,8 1024,60,8 16,30,8; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 416x416,640x480 --runs 60 --warmup 5 > $O/gc_$p.json 2>/dev/null
  MASKD_PR_PARAMS=$p $B bench maxflow --backend cuda --runs 60 --warmup 5 > $O/mf_$p.json 2>/dev/null
  summ "$p" $O/gc_$p.json $O/mf_$p.json
  MASKD_PR_PARAMS=$p MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 1 --warmup 0 > /dev/null 2>$O/prof_$p.log
done | tee $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-sw}.tgz -C $OUT ${TAG:-sw} && rm -rf $O
