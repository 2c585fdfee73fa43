#!/usr/bin/env bash
# session 13: final_kernel with a warp-uniform choice of float4 or scalar coefficient loads (final_walk<VEC>), against HEAD
set -u
O=$OUT/${TAG:-pl2}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  if [ $v = base ]; then (cd /tmp/$v && patch -s -R -p1 < .device/guided_planar2.diff); else sed -i 's/#define MK_GUIDED_FETCH_VEC 0/#define MK_GUIDED_FETCH_VEC 1/' /tmp/$v/kernels/cuda/guided_cuda.cu; fi
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_new.log 2>&1; echo "new tests rc=$?"
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base new; do
  b=build-gpu/clients/masktool; [ $v = new ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json
done; done | tee $O/guided_summary.txt
for v in base new; do
  b=build-gpu/clients/masktool; [ $v = new ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:"coef|final" --launch-skip 2 --launch-count 2 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "coef_kernel|final_kernel|Duration|Executed Instructions |Achieved Occ|Registers Per|L1/TEX Cache Throughput|Warp Cycles Per Issued" $O/ncu_$v.txt | grep -v "==" | head -20
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-pl2}.tgz -C $OUT ${TAG:-pl2} && rm -rf $O
