#!/usr/bin/env bash
# session 12: the intermittent segment_cuda failure: test_segment cuda alone (no other process on the GPU) 20 times,
# then the three tests of u2 in parallel (meson) 15 times
set -u
O=$OUT/${TAG:-rp3}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for i in $(seq 1 20); do
  (cd build-gpu/tests && timeout 100 ./test_segment cuda > $O/alone_$i.log 2>&1; echo "alone $i rc=$?")
  grep -hE "illegal|differ" $O/alone_$i.log | head -2
done | tee $O/summary.txt
for i in $(seq 1 15); do
  timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/trio_$i.log 2>&1; echo "trio $i rc=$?"
  grep -hE "illegal|differ" $O/trio_$i.log | head -2
done | tee -a $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-rp3}.tgz -C $OUT ${TAG:-rp3} && rm -rf $O
