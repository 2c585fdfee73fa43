#!/usr/bin/env bash
set -u
O=$OUT/${TAG:-r}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
source .device/sweep76.sh
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-r}.tgz -C $OUT ${TAG:-r} && rm -rf $O
