#!/usr/bin/env bash
# asynchronous BFS (MASKD_PR_MODE=8) against passes
set -u
O=$OUT/${TAG:-a}; mkdir -p $O
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
for t in 16 32; do
MASKD_MAXFLOW_CHECK=1 MASKD_PR_MODE=${TM:-8} MASKD_PR_TILE=$t timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$t.log 2>&1; echo "tests mode=${TM:-8} tile=$t rc=$?"
grep -E "Ok:|Fail:|Timeout" $O/test_$t.log
done
for rep in 1 2; do for m in ${MS:-0 8}; do
  MASKD_PR_MODE=$m timeout 100 $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-40} > $O/gc_${m}_$rep.json 2>/dev/null
  MASKD_PR_MODE=$m timeout 60 $B bench maxflow --backend cuda --runs 60 > $O/mf_${m}_$rep.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f(%s/%s)"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"],x.get("rounds"),x.get("global_relabels")) for x in r if "warm" not in x["op"]))' $O/gc_${m}_$rep.json $O/mf_${m}_$rep.json "mode $m #$rep"
done; done | tee $O/modes.txt
for m in ${MS:-0 8}; do
MASKD_PR_MODE=$m MASKD_MAXFLOW_PROFILE=1 timeout 60 $B bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2>$O/prof_$m.log
grep "maxflow profile" $O/prof_$m.log | tail -3 | cut -d'|' -f2-
done
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-a}.tgz -C $OUT ${TAG:-a} && rm -rf $O
