#!/usr/bin/env bash
# session 15: the asynchronous push phase (MASKD_PR_ASYNC=N, tree) against the synchronous passes (unset);
# exactness tests with it; bench grabcut / maxflow, alternating
set -u
O=$OUT/${TAG:-as}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for m in ${TESTS:-8 1000}; do
  MASKD_PR_ASYNC=$m timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$m.log 2>&1; echo "tests async $m rc=$?"
done
MASKD_PR_ASYNC=8 MASKD_PR_TILE=32 timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test32.log 2>&1; echo "tests async 8 tile 32 rc=$?"
grep -q "^Ok: *2" $O/test_8.log || { echo "tests failed: no benches"; tar czf $OUT/${TAG:-as}.tgz -C $OUT ${TAG:-as}; exit 1; }
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in ${MULTS:-0 6 12 24 1000}; do
  MASKD_PR_ASYNC=$m timeout 30 $B bench grabcut --backend cuda --sizes ${SIZES:-416x416,640x480} --runs 40 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  MASKD_PR_ASYNC=$m timeout 30 $B bench maxflow --backend cuda --runs 40 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  summ "a$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done | tee $O/summary.txt | sort -k2,3 -k1,1
for m in ${PROF:-0 12}; do
  MASKD_PR_ASYNC=$m MASKD_MAXFLOW_PROFILE=1 timeout 30 $B bench grabcut --backend cuda --sizes 416x416 --runs 3 --warmup 1 > /dev/null 2> $O/prof_$m.log
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-as}.tgz -C $OUT ${TAG:-as} && rm -rf $O
