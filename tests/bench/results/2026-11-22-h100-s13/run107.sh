#!/usr/bin/env bash
# session 13: the GPU-lost path (maskd-gpulost) and the CUDA suite (the Darknet reference carried, the clip not)
set -u
O=$OUT/${TAG:-gl}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maskd-gpulost > $O/gpulost.log 2>&1; echo "gpulost rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:" $O/gpulost.log
cp build-gpu/meson-logs/testlog.txt $O/gpulost_testlog.txt
timeout 450 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_cuda.log 2>&1; echo "cuda suite rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:|Timeout:" $O/test_cuda.log
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-gl}.tgz -C $OUT ${TAG:-gl} && rm -rf $O
