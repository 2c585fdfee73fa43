#!/usr/bin/env bash
# session 16: depth-capped global relabels (MASKD_PR_CAP=cap[,first[,sticky]]); exactness tests with small caps on
# both tile sides, then bench grabcut / maxflow alternating the settings, then profiles
set -u
O=$OUT/${TAG:-cap}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for c in 2 8,1 24,1,1; do for t in 16 32; do
  MASKD_PR_CAP=$c MASKD_PR_TILE=$t timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_${c}_$t.log 2>&1; echo "tests cap $c tile $t rc=$?"
done; done
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in ${SETS:-0 48 64,1 64,0,1 96 128,1}; do
  MASKD_PR_CAP=$m timeout 40 $B bench grabcut --backend cuda --sizes ${SIZES:-320x180,416x416,640x480} --runs 30 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  MASKD_PR_CAP=$m timeout 30 $B bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  summ "c$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done | tee $O/summary.txt | sort -k2,3 -k1,1
for m in 0 64; do
  MASKD_PR_CAP=$m MASKD_MAXFLOW_PROFILE=1 timeout 30 $B bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2> $O/prof_$m.log
done
which cuobjdump ncu nsys compute-sanitizer > $O/tools.txt 2>&1; cuobjdump -sass build-gpu/kernels/libmaskd-kernels.a.p/guided_cuda.o > $O/guided.sass 2>&1; cuobjdump -sass build-gpu/kernels/libmaskd-kernels.a.p/maxflow_cuda.o > $O/maxflow.sass 2>&1
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-cap}.tgz -C $OUT ${TAG:-cap} && rm -rf $O
