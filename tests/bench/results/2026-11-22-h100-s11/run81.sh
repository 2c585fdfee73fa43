#!/usr/bin/env bash
# per-pass tile counts of profiled solves
set -u
O=$OUT/${TAG:-p}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 320x180,416x416 --runs 2 --warmup 1 > /dev/null 2>$O/prof_gc.log
MASKD_MAXFLOW_PROFILE=1 $B bench maxflow --backend cuda --runs 2 --warmup 1 > /dev/null 2>$O/prof_mf.log
grep -c "maxflow passes" $O/prof_gc.log $O/prof_mf.log
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-p}.tgz -C $OUT ${TAG:-p} && rm -rf $O
