#!/usr/bin/env bash
# session 14: L1 prefetch of the next row step's rows in the strip kernels (tree) against none (pf0)
set -u
O=$OUT/${TAG:-pf}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in pf0; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  sed -i 's/#define MK_GUIDED_PREFETCH 1/#define MK_GUIDED_PREFETCH 0/' /tmp/$v/kernels/cuda/guided_cuda.cu
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
grep -c "PREFETCH 0" /tmp/pf0/kernels/cuda/guided_cuda.cu
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_tree.log 2>&1; echo "tree tests rc=$?"
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in pf0 tree; do
  b=build-gpu/clients/masktool; [ $v = tree ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done > $O/guided_summary.txt
sort -k1,1 -k2,5 $O/guided_summary.txt | awk '{print $1,$2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$5,$10,$15}'
for v in pf0 tree; do
  b=build-gpu/clients/masktool; [ $v = tree ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 100 ncu --section SpeedOfLight --section WarpStateStats --section InstructionStats -k regex:"coef|final" --launch-skip 2 --launch-count 2 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "_kernel<|Duration|Executed Instructions |Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | cut -c1-60 | head -12
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-pf}.tgz -C $OUT ${TAG:-pf} && rm -rf $O
