#!/usr/bin/env bash
# tile 32 vs tile 16: correctness + timings, same call
set -u
O=$OUT/${TAG:-r}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]: print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' "$@"; }
for T in 32 16; do
  if [ $T = 16 ]; then meson configure build-gpu -Dmaxflow_tile=16 > /dev/null && ninja -C build-gpu > $O/build16.log 2>&1 || { tail -20 $O/build16.log; }; fi
  timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$T.log 2>&1; echo "tile $T tests rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$T.log
  $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 40 > $O/gc_$T.json 2>$O/gc_$T.log
  $B bench maxflow --backend cuda --runs 100 > $O/mf_$T.json 2>$O/mf_$T.log
  summ $T $O/gc_$T.json $O/mf_$T.json | grep -v warm | tee -a $O/summary.txt
  MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2>$O/prof_$T.log
  grep "maxflow profile" $O/prof_$T.log | tail -2 | cut -d'|' -f2- 
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-r}.tgz -C $OUT ${TAG:-r} && rm -rf $O
