#!/usr/bin/env bash
# ordered push passes (MASKD_PR_ORDERED=K) against sweeps: correctness + timings
set -u
O=$OUT/${TAG:-o}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for k in ${KS:-4}; do for t in 16 32; do
MASKD_PR_ORDERED=$k MASKD_PR_TILE=$t timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_${k}_$t.log 2>&1; echo "tests ordered=$k tile=$t rc=$?"
grep -E "Ok:|Fail:" $O/test_${k}_$t.log
done; done
for k in 0 ${KB:-2 4 8}; do
  MASKD_PR_ORDERED=$k $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-40} > $O/gc_$k.json 2>$O/gc_$k.log
  MASKD_PR_ORDERED=$k $B bench maxflow --backend cuda --runs 60 > $O/mf_$k.json 2>$O/mf_$k.log
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f(%s/%s)"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"],x.get("rounds"),x.get("global_relabels")) for x in r))' $O/gc_$k.json $O/mf_$k.json "ordered=$k"
done | tee $O/summary.txt
for k in 0 ${KP:-4}; do
MASKD_PR_ORDERED=$k MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 3 --warmup 1 > /dev/null 2>$O/prof_$k.log
echo "ordered=$k"; grep "maxflow profile" $O/prof_$k.log | tail -3 | cut -d'|' -f2-
done
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-o}.tgz -C $OUT ${TAG:-o} && rm -rf $O
