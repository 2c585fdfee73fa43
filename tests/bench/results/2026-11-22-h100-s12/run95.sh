#!/usr/bin/env bash
# session 12: coef_kernel with vector row loads, with (PF=1) and without (PF=0) the next rows fetched ahead
set -u
O=$OUT/${TAG:-c1}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for f in 1 0; do
  MASKD_GUIDED_PF=$f timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_pf$f.log 2>&1; echo "tests pf $f rc=$?"
  grep -E "FAIL|illegal|Illegal" $O/test_pf$f.log | head -3
done
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for f in 0 1; do
  MASKD_GUIDED_PF=$f $B bench guided --backend cuda --runs 500 > $O/guided_pf$f.json 2>$O/guided_pf$f.log
  summ pf$f $O/guided_pf$f.json | grep full
done; done | tee $O/guided_summary.txt
for f in 0 1; do
MASKD_GUIDED_PF=$f timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats -k regex:"coef|final" --launch-skip 2 --launch-count 2 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_pf$f.txt 2>&1; echo "ncu rc=$?"
grep -E "coef_kernel|final_kernel|Duration|Executed Instructions |Achieved Occ|Registers Per|Issue Slots Busy|Warp Cycles Per Issued" $O/ncu_pf$f.txt | grep -v "==" | head -24
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-c1}.tgz -C $OUT ${TAG:-c1} && rm -rf $O
