#!/usr/bin/env bash
# MASKD_PR_MODE bits (1 atomic reverse residual, 2 wake by 4 threads, 4 capacities kept for the store) and margin
set -u
O=$OUT/${TAG:-m}; mkdir -p $O
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
for t in 16 32; do
MASKD_PR_MODE=${TM:-7} MASKD_PR_TILE=$t timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$t.log 2>&1; echo "tests mode=${TM:-7} tile=$t rc=$?"
grep -E "Ok:|Fail:" $O/test_$t.log
done
for rep in 1 2; do for mp in ${MPS:-0:8,0,64 1:8,0,64 2:8,0,64 4:8,0,64 7:8,0,64 0:8,0,8 7:8,0,8}; do
  m=${mp%%:*}; p=${mp#*:}
  MASKD_PR_MODE=$m MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-40} > $O/gc_${m}_${p}_$rep.json 2>/dev/null
  MASKD_PR_MODE=$m MASKD_PR_PARAMS=$p $B bench maxflow --backend cuda --runs 60 > $O/mf_${m}_${p}_$rep.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if "warm" not in x["op"]))' $O/gc_${m}_${p}_$rep.json $O/mf_${m}_${p}_$rep.json "mode $m $p #$rep"
done; done | tee $O/modes.txt
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-m}.tgz -C $OUT ${TAG:-m} && rm -rf $O
