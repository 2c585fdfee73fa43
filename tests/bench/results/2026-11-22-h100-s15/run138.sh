#!/usr/bin/env bash
# session 15: push passes of the rounds after the first (MASKD_PR_PASSES2=n; 0: as the first), one binary;
# exactness tests
set -u
O=$OUT/${TAG:-p2}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
MASKD_PR_PASSES2=4 timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test.log 2>&1; echo "tests 4 rc=$?"
MASKD_PR_PASSES2=4 MASKD_PR_TILE=32 timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test2.log 2>&1; echo "tests 4 tile 32 rc=$?"
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in ${SETS:-0 3 5 8}; do
  MASKD_PR_PASSES2=$m timeout 40 $B bench grabcut --backend cuda --sizes ${SIZES:-320x180,416x416,640x480,1280x720} --runs 40 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  MASKD_PR_PASSES2=$m timeout 30 $B bench maxflow --backend cuda --runs 40 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  summ "p$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done | tee $O/summary.txt | sort -k2,3 -k1,1
for m in 0 5; do
  MASKD_PR_PASSES2=$m MASKD_MAXFLOW_PROFILE=1 timeout 30 $B bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2> $O/prof_$m.log
  MASKD_PR_PASSES2=$m MASKD_MAXFLOW_PROFILE=1 timeout 30 $B bench maxflow --backend cuda --runs 2 --warmup 1 > /dev/null 2> $O/profmf_$m.log
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-p2}.tgz -C $OUT ${TAG:-p2} && rm -rf $O
