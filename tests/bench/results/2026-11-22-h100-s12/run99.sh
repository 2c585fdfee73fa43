#!/usr/bin/env bash
# session 12: the full filter's strip kernels with more blocks per SM (fewer registers, spills): final_kernel 5 blocks
# (final-5blocks.diff), coef_kernel 4 blocks (coef-4blocks.diff), each built in a copy of the tree beside HEAD
set -u
O=$OUT/${TAG:-lb}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
D=tests/bench/results/2026-11-22-h100-s12
for v in final-5blocks coef-4blocks; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  (cd /tmp/$v && patch -s -p1 < $D/$v.diff && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
  (cd /tmp/$v && timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_$v.log 2>&1; echo "$v parity_guided rc=$?")
done
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in head final-5blocks coef-4blocks; do
  b=build-gpu/clients/masktool; [ $v = head ] || b=/tmp/$v/build-gpu/clients/masktool
  $b bench guided --backend cuda --sizes 1920x1080 > $O/guided_$v.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.json | grep full
done; done | tee $O/guided_summary.txt
for v in head final-5blocks coef-4blocks; do
  b=build-gpu/clients/masktool; [ $v = head ] || b=/tmp/$v/build-gpu/clients/masktool
  timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats -k regex:"coef|final" --launch-skip 2 --launch-count 2 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
  grep -E "coef_kernel|final_kernel|Duration|Executed Instructions |Achieved Occ|Registers Per" $O/ncu_$v.txt | grep -v "==" | head -12
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-lb}.tgz -C $OUT ${TAG:-lb} && rm -rf $O
