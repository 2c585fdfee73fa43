#!/usr/bin/env bash
# session 12: low_kernel reducing the guide itself (MASKD_GUIDED_FUSE=0: reduce_kernel first), up4 16/32 rows
set -u
O=$OUT/${TAG:-f1}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for f in 1 0; do for m in 16 32; do
  MASKD_GUIDED_FUSE=$f MASKD_GUIDED_UP=$m timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/test_f${f}_$m.log 2>&1; echo "tests fuse $f up $m rc=$?"
  grep -E "FAIL|illegal|Illegal" $O/test_f${f}_$m.log | head -3
done; done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd build-gpu/tests && timeout 200 $CS --tool memcheck --print-limit 5 ./test_parity_guided > $O/memcheck_pg.log 2>&1; echo "memcheck parity_guided rc=$?")
grep -E "ERROR SUMMARY|Invalid|Illegal" $O/memcheck_pg.log | head -5
(cd build-gpu/tests && timeout 150 $CS --tool racecheck --print-limit 5 ./test_parity_guided > $O/racecheck_pg.log 2>&1; echo "racecheck rc=$?")
grep -E "RACECHECK SUMMARY" $O/racecheck_pg.log | head -3
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in 0:1 0:16 1:16 1:32; do
  f=${v%%:*}; m=${v##*:}
  MASKD_GUIDED_FUSE=$f MASKD_GUIDED_UP=$m $B bench guided --backend cuda --runs 1000 > $O/guided_f${f}_$m.json 2>$O/guided_f${f}_$m.log
  summ fuse$f-up$m $O/guided_f${f}_$m.json | grep fast
done; done | tee $O/guided_summary.txt
for f in 1 0; do
MASKD_GUIDED_FUSE=$f timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats -k regex:"reduce|low_kernel|up" --launch-skip 6 --launch-count 3 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_f$f.txt 2>&1; echo "ncu rc=$?"
grep -E "reduce_kernel|low_kernel|up4|Duration|Executed Instructions |Achieved Occ|Registers Per" $O/ncu_f$f.txt | grep -v "==" | head -24
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-f1}.tgz -C $OUT ${TAG:-f1} && rm -rf $O
