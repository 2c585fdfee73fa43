#!/usr/bin/env bash
# session 12: barrier misuse? compute-sanitizer synccheck (and memcheck once) on the CUDA tests of the segmentation path
set -u
O=$OUT/${TAG:-sc}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cd build-gpu/tests
for t in "test_segment cuda" "test_grabcut_cuda" "test_parity_guided" "test_parity"; do
  n=${t%% *}
  timeout 170 $CS --tool synccheck --print-limit 10 ./$t > $O/synccheck_$n.log 2>&1; echo "synccheck $n rc=$?"
  grep -E "ERROR SUMMARY|Barrier|barrier|Invalid|divergent|Illegal" $O/synccheck_$n.log | head -6
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-sc}.tgz -C $OUT ${TAG:-sc} && rm -rf $O
