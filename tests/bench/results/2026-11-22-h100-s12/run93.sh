#!/usr/bin/env bash
# session 12: up4_kernel with a column table; segment_cuda repeated per mode; sanitizers; bench; ncu
set -u
O=$OUT/${TAG:-u3}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for m in 16 32 1 16 32 1; do
  MASKD_GUIDED_UP=$m timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda > $O/test_$m.log 2>&1; echo "tests mode $m rc=$?"
  grep -E "FAIL|illegal|Illegal" $O/test_$m.log | head -3
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for m in 16 32; do
  (cd build-gpu/tests && MASKD_GUIDED_UP=$m timeout 200 $CS --tool memcheck --print-limit 5 ./test_parity_guided > $O/memcheck_pg_$m.log 2>&1; echo "memcheck parity_guided mode $m rc=$?")
  grep -E "ERROR SUMMARY|Invalid|Illegal" $O/memcheck_pg_$m.log | head -5
  (cd build-gpu/tests && MASKD_GUIDED_UP=$m timeout 150 $CS --tool racecheck --print-limit 5 ./test_parity_guided > $O/racecheck_pg_$m.log 2>&1; echo "racecheck mode $m rc=$?")
  grep -E "RACECHECK SUMMARY|hazard|Error" $O/racecheck_pg_$m.log | head -5
done
(cd build-gpu/tests && MASKD_GUIDED_UP=16 timeout 250 $CS --tool memcheck --print-limit 5 ./test_segment cuda > $O/memcheck_seg_16.log 2>&1; echo "memcheck segment mode 16 rc=$?")
grep -E "ERROR SUMMARY|Invalid|Illegal|FAILED|PASSED" $O/memcheck_seg_16.log | head -8
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for m in 1 16 32 1 16 32; do
  MASKD_GUIDED_UP=$m $B bench guided --backend cuda --runs 1000 > $O/guided_$m.json 2>$O/guided_$m.log
  summ up$m $O/guided_$m.json | grep fast
done | tee $O/guided_summary.txt
for m in 16 32; do
MASKD_GUIDED_UP=$m timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats -k regex:"up" --launch-skip 2 --launch-count 1 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$m.txt 2>&1; echo "ncu rc=$?"
grep -E "up4|Duration|Executed Instructions |Achieved Occ|Registers Per" $O/ncu_$m.txt | grep -v "==" | head -12
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-u3}.tgz -C $OUT ${TAG:-u3} && rm -rf $O
