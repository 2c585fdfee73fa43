#!/usr/bin/env bash
# session 14: walks (excess chained down the distances after a global relabel): exactness under several settings,
# then the GrabCut / max-flow benchmarks and a profile per setting (MASKD_PR_WALK=walk_active,walk_steps)
set -u
O=$OUT/${TAG:-wk}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for w in 0,1024 1073741824,1024 2000,4096; do
  MASKD_PR_WALK=$w timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$w.log 2>&1; echo "tests walk $w rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ " $O/test_$w.log | head
done
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "mf", (x.get("stages_us") or {}).get("maxflow"))' "$@"; }
for w in 0,1024 1073741824,1024 1073741824,64 20000,1024 2000,1024; do
  MASKD_PR_WALK=$w $B bench grabcut --backend cuda --sizes 416x416,640x480 --runs 40 --warmup 5 > $O/gc_$w.json 2>/dev/null
  MASKD_PR_WALK=$w $B bench maxflow --backend cuda --runs 40 --warmup 5 > $O/mf_$w.json 2>/dev/null
  summ "$w" $O/gc_$w.json $O/mf_$w.json
  MASKD_PR_WALK=$w MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 1 --warmup 0 > /dev/null 2>$O/prof_$w.log
done | tee $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-wk}.tgz -C $OUT ${TAG:-wk} && rm -rf $O
