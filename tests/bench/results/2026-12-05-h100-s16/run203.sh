#!/usr/bin/env bash
# session 16: (1) guided window sums (shuffle predicate, and no scan at r = 8) in the tree against d704ff0's kernels
# (base: g1.diff reversed, rebuilt in place after the tests); (2) max-flow: capped relabels (96, with the
# complete-below-cap rule) and 16 x 16 tiles at 640x480 against the defaults
set -u
O=$OUT/${TAG:-g1}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided segment_cuda > $O/test_g1.log 2>&1; echo "guided tests rc=$?"; grep -E "^Ok:|^Fail:" $O/test_g1.log
MASKD_PR_CAP=8 timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_cap.log 2>&1; echo "tests cap 8 rc=$?"
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
patch -s -R -p1 < .device/g1.diff && ninja -C build-gpu clients/masktool > $O/rebuild.log 2>&1; echo "base rebuild rc=$?"; grep -c shfl_up_add kernels/cuda/guided_cuda.cu
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree; do
  /tmp/mt/$v bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
sort -k2,4 -k1,1 $O/guided_summary.txt | grep full
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in c0 c96 t16; do
  e="MASKD_PR_CAP=0"; case $m in c*) e="MASKD_PR_CAP=${m#c}";; t16) e="MASKD_PR_TILE=16";; esac
  env $e timeout 40 /tmp/mt/tree bench grabcut --backend cuda --sizes 416x416,640x480 --runs 30 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  env $e timeout 30 /tmp/mt/tree bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  sm "$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done > $O/summary.txt
sort -k2,3 -k1,1 $O/summary.txt | grep -v warm
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-g1}.tgz -C $OUT ${TAG:-g1} && rm -rf $O
