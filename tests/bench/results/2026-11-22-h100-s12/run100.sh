#!/usr/bin/env bash
# session 12: try to reproduce u2's one GPU fault: the first up kernel form (up-v1-16rows.diff, built beside) and
# HEAD, the three tests of u2 (run in parallel by meson, as there) 8 times each, alternating
set -u
O=$OUT/${TAG:-rp}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
D=tests/bench/results/2026-11-22-h100-s12; v=up-v1-16rows
mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
(cd /tmp/$v && patch -s -p1 < $D/$v.diff && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
for i in 1 2 3 4 5 6 7 8; do
  for t in v1 head; do
    d=$PWD; [ $t = v1 ] && d=/tmp/$v
    (cd $d && timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_${t}_$i.log 2>&1; echo "$t $i rc=$?")
    grep -hE "illegal|Illegal|FAIL" $O/test_${t}_$i.log | head -3
  done
done | tee $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-rp}.tgz -C $OUT ${TAG:-rp} && rm -rf $O
