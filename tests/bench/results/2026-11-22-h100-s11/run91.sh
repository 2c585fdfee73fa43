#!/usr/bin/env bash
# the first tile of a block read with the pass's count (MASKD_PR_NOSPEC=1: after it)
set -u
O=$OUT/${TAG:-sp}; mkdir -p $O
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
for t in 16 32; do MASKD_PR_TILE=$t timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_$t.log 2>&1; echo "tests tile=$t rc=$?"; grep -E "Ok:|Fail:" $O/test_$t.log; done
for rep in 1 2 3; do for v in spec nospec; do
  if [ $v = nospec ]; then export MASKD_PR_NOSPEC=1; else unset MASKD_PR_NOSPEC; fi
  $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 40 > $O/gc_${v}_$rep.json 2>/dev/null
  $B bench maxflow --backend cuda --runs 60 > $O/mf_${v}_$rep.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if "warm" not in x["op"]))' $O/gc_${v}_$rep.json $O/mf_${v}_$rep.json "$v #$rep"
done; done | tee $O/spec.txt
unset MASKD_PR_NOSPEC
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-sp}.tgz -C $OUT ${TAG:-sp} && rm -rf $O
