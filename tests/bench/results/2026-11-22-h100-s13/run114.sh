#!/usr/bin/env bash
# session 13: final_kernel (s = 1) applying q channel by channel (fewer live registers), with __launch_bounds__
# minimum blocks 4 (the tree, 106 registers), 5 (96) and 6 (80), against edee256 (base)
set -u
O=$OUT/${TAG:-ch}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base lb5 lb6; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  case $v in base) (cd /tmp/$v && patch -s -R -p1 < .device/guided_chan.diff);;
    lb5) sed -i 's/__global__ void __launch_bounds__(kStripThreads) final_kernel/__global__ void __launch_bounds__(kStripThreads, 5) final_kernel/' /tmp/$v/kernels/cuda/guided_cuda.cu;;
    lb6) sed -i 's/__global__ void __launch_bounds__(kStripThreads) final_kernel/__global__ void __launch_bounds__(kStripThreads, 6) final_kernel/' /tmp/$v/kernels/cuda/guided_cuda.cu;; esac
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_new.log 2>&1; echo "new tests rc=$?"
for v in lb5 lb6; do (cd /tmp/$v && timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_$v.log 2>&1; echo "$v parity_guided rc=$?"); done
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base new lb5 lb6; do
  b=build-gpu/clients/masktool; [ $v = new ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done > $O/guided_summary.txt
sort -k1,1 -k2,5 $O/guided_summary.txt | awk '{print $1,$2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$5,$10,$15}' | grep full
for v in new lb5 lb6; do
  b=build-gpu/clients/masktool; [ $v = new ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 100 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats -k regex:"final" --launch-skip 1 --launch-count 1 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "final_kernel|Duration|Executed Instructions |Registers Per|Achieved Occ|Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | head -8
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-ch}.tgz -C $OUT ${TAG:-ch} && rm -rf $O
