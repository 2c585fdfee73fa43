#!/usr/bin/env bash
# session 13: coef_kernel with 2 columns per lane (64-column strips) for the full filter: the tree (128 registers,
# 4 blocks per SM), minimum blocks 5 (lc2b5) and 3 (lc2b3), against HEAD (base)
set -u
O=$OUT/${TAG:-lc}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base lc2b5 lc2b3; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  case $v in base) (cd /tmp/$v && patch -s -R -p1 < .device/guided_lc2.diff);;
    lc2b5) sed -i 's/#define MK_GUIDED_COEF_MINB2 4/#define MK_GUIDED_COEF_MINB2 5/' /tmp/$v/kernels/cuda/guided_cuda.cu;;
    lc2b3) sed -i 's/#define MK_GUIDED_COEF_MINB2 4/#define MK_GUIDED_COEF_MINB2 3/' /tmp/$v/kernels/cuda/guided_cuda.cu;; esac
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_lc2.log 2>&1; echo "lc2 tests rc=$?"
for v in lc2b5 lc2b3; do (cd /tmp/$v && timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_$v.log 2>&1; echo "$v parity_guided rc=$?"); done
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base lc2 lc2b5 lc2b3; do
  b=build-gpu/clients/masktool; [ $v = lc2 ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done > $O/guided_summary.txt
sort -k1,1 -k2,5 $O/guided_summary.txt | awk '{print $1,$2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$5,$10,$15}' | grep full
for v in lc2 lc2b5; do
  b=build-gpu/clients/masktool; [ $v = lc2 ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 100 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats -k regex:"coef" --launch-skip 1 --launch-count 1 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "coef_kernel|Duration|Executed Instructions |Registers Per|Achieved Occ|Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | head -8
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-lc}.tgz -C $OUT ${TAG:-lc} && rm -rf $O
