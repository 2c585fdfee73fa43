#!/usr/bin/env bash
# session 12: up4_kernel (4 columns per thread) against up_kernel; guided tests under each mode; ncu of the fast chain
set -u
O=$OUT/${TAG:-u1}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for m in 16 32 1; do
  MASKD_GUIDED_UP=$m timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_$m.log 2>&1; echo "tests mode $m rc=$?"
  grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$m.log
done
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for m in 1 16 32 1 16 32; do
  MASKD_GUIDED_UP=$m $B bench guided --backend cuda --runs 1000 > $O/guided_$m.json 2>$O/guided_$m.log
  summ up$m $O/guided_$m.json | grep fast
done | tee $O/guided_summary.txt
for m in 1 16; do
MASKD_GUIDED_UP=$m timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats -k regex:"reduce|low_kernel|up" --launch-skip 6 --launch-count 3 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$m.txt 2>&1; echo "ncu rc=$?"
grep -E "up|low_kernel|reduce|Duration|Registers Per|Achieved Occ|Executed Instructions |Compute \(SM\)" $O/ncu_$m.txt | grep -v "^==" | head -40
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-u1}.tgz -C $OUT ${TAG:-u1} && rm -rf $O
