#!/usr/bin/env bash
# session 16: (1) guided scans with the shuffle predicate (tree) against the code before (base, g1.diff reversed);
# (2) max-flow knobs at 416x416 and 640x480: capped relabels (with the complete-below-cap rule), 16 x 16 tiles at
# 640x480, sweeps per visit on 32 x 32 tiles
set -u
O=$OUT/${TAG:-g1}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
v=base; mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
(cd /tmp/$v && patch -s -R -p1 < .device/g1.diff && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
grep -c "shfl_up_add" /tmp/base/kernels/cuda/guided_cuda.cu kernels/cuda/guided_cuda.cu
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree; do
  b=build-gpu/clients/masktool; [ $v = tree ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
sort -k2,4 -k1,1 $O/guided_summary.txt | grep full
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided segment_cuda masktool-segment-cuda > $O/test_g1.log 2>&1; echo "guided tests rc=$?"; grep -E "^Ok:|^Fail:" $O/test_g1.log
for c in 8 24,1,1; do MASKD_PR_CAP=$c timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_cap$c.log 2>&1; echo "tests cap $c rc=$?"; done
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
B=build-gpu/clients/masktool
for rep in 1 2; do for m in c0 c96 c64,1 t16 sw6 sw12; do
  e="MASKD_PR_CAP=0"; case $m in c*) e="MASKD_PR_CAP=${m#c}";; t16) e="MASKD_PR_TILE=16";; sw*) e="MASKD_PR_PARAMS=${m#sw},0,8";; esac
  env $e timeout 40 $B bench grabcut --backend cuda --sizes 416x416,640x480 --runs 30 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  env $e timeout 30 $B bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  sm "$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done > $O/summary.txt
sort -k2,3 -k1,1 $O/summary.txt | grep -v warm
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-g1}.tgz -C $OUT ${TAG:-g1} && rm -rf $O
