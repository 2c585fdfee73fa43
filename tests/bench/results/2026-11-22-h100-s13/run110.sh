#!/usr/bin/env bash
# session 13: the full filter's strip kernels fetching their next rows with cp.async into a per-warp ring (a3: both
# kernels, the tree; a1: final_kernel only; a0: neither, coefficient planes only), against HEAD (base)
set -u
O=$OUT/${TAG:-as}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base a1 a0; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  case $v in base) (cd /tmp/$v && patch -s -R -p1 < .device/guided_async.diff);;
    a1) sed -i 's/#define MK_GUIDED_ASYNC 3/#define MK_GUIDED_ASYNC 1/' /tmp/$v/kernels/cuda/guided_cuda.cu;;
    a0) sed -i 's/#define MK_GUIDED_ASYNC 3/#define MK_GUIDED_ASYNC 0/' /tmp/$v/kernels/cuda/guided_cuda.cu;; esac
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_a3.log 2>&1; echo "a3 tests rc=$?"
(cd /tmp/a1 && timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_a1.log 2>&1; echo "a1 parity_guided rc=$?")
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base a0 a1 a3; do
  b=build-gpu/clients/masktool; [ $v = a3 ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done > $O/guided_summary.txt
sort -k1,1 -k2,5 $O/guided_summary.txt | awk '{print $1,$2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$5,$10,$15}'
for v in a1 a3; do
  b=build-gpu/clients/masktool; [ $v = a3 ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 100 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:"coef|final" --launch-skip 2 --launch-count 2 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "coef_kernel|final_kernel|Duration|Executed Instructions |Registers Per|Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | head -20
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-as}.tgz -C $OUT ${TAG:-as} && rm -rf $O
