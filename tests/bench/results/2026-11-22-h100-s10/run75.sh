#!/usr/bin/env bash
# tiles by size (16 up to 512 px, else 32): tests with each tile forced, benches by rule and forced
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
for T in auto 32 16; do
  if [ $T = auto ]; then unset MASKD_PR_TILE; else export MASKD_PR_TILE=$T; fi
  timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda ${TESTS:-} > $O/test_$T.log 2>&1; echo "tile $T tests rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$T.log
  $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-40} > $O/gc_$T.json 2>$O/gc_$T.log
  $B bench maxflow --backend cuda --runs 100 > $O/mf_$T.json 2>$O/mf_$T.log
  summ $T $O/gc_$T.json $O/mf_$T.json | grep -v warm | tee -a $O/summary.txt
done
unset MASKD_PR_TILE
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-r}.tgz -C $OUT ${TAG:-r} && rm -rf $O
