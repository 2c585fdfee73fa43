#!/usr/bin/env bash
# session 14: full filter, centred moments summed in 32 bits + FMA solve (tree) against FMA only (fma) and HEAD (base)
set -u
O=$OUT/${TAG:-cn}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base fma; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  (cd /tmp/$v && patch -s -R -p1 < .device/guided_all.diff)
  [ $v = fma ] && (cd /tmp/$v && patch -s -p1 < .device/guided_fma.diff)
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
grep -c "kG0" /tmp/base/kernels/cuda/guided_cuda.cu /tmp/fma/kernels/cuda/guided_cuda.cu kernels/cuda/guided_cuda.cu
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_tree.log 2>&1; echo "tree tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ " $O/test_tree.log
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base fma tree; do
  b=build-gpu/clients/masktool; [ $v = tree ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done > $O/guided_summary.txt
sort -k1,1 -k2,5 $O/guided_summary.txt | awk '{print $1,$2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$5,$10,$15}'
for v in tree; do
  b=build-gpu/clients/masktool
  timeout 100 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats -k regex:"coef" --launch-skip 1 --launch-count 1 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "coef_kernel|Duration|Executed Instructions |Registers Per|Achieved Occ|Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | head -8
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-cn}.tgz -C $OUT ${TAG:-cn} && rm -rf $O
