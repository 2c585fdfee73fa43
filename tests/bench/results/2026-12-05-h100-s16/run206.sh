#!/usr/bin/env bash
# session 16, the final code from a clean build (relabel_cap as a parameter, default 96 on 16 x 16 tiles; guided
# window sums): the max-flow, GrabCut and guided tests on the GPU (run205 trimmed to the device time left)
set -u
O=$OUT/${TAG:-fin3}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 maxflow_cuda grabcut_cuda parity_guided > $O/test.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fin3}.tgz -C $OUT ${TAG:-fin3} && rm -rf $O
