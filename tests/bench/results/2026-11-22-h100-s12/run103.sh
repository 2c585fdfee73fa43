#!/usr/bin/env bash
# session 12: the intermittent segment_cuda failure with CUDA_LAUNCH_BLOCKING=1 (no overlap of a process's kernels,
# PDL and streams serialised): the three tests of u2 in parallel (meson) 25 times
set -u
O=$OUT/${TAG:-rp4}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for i in $(seq 1 25); do
  CUDA_LAUNCH_BLOCKING=1 timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/trio_$i.log 2>&1; echo "blocking trio $i rc=$?"
  grep -hE "illegal|differ" $O/trio_$i.log | head -2
done | tee $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-rp4}.tgz -C $OUT ${TAG:-rp4} && rm -rf $O
