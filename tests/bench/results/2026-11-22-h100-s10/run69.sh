#!/usr/bin/env bash
# bit-parallel local BFS + hoisted push loads: correctness + timings
set -u
O=$OUT/${TAG:-r}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda ${TESTS:-} > $O/test.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test.log
$B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-60} > $O/gc.json 2>$O/gc.log; echo "gc rc=$?"
$B bench maxflow --backend cuda --runs 100 > $O/mf.json 2>$O/mf.log; echo "mf rc=$?"
python3 -c 'import json,sys
for f in sys.argv[1:]:
  for x in json.load(open(f))["results"]: print(x["op"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' $O/gc.json $O/mf.json | tee $O/gc_summary.txt
MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 320x180,416x416 --runs 3 --warmup 1 > /dev/null 2>$O/prof.log
grep "maxflow profile" $O/prof.log | awk '{print}' | cut -d'|' -f2- | sort | uniq -c | sort -rn | head -3
grep "maxflow profile" $O/prof.log | tail -4 | cut -c1-600
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-r}.tgz -C $OUT ${TAG:-r} && rm -rf $O
