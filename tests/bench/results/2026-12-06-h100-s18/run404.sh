#!/usr/bin/env bash
# session 18, fourth call: coef_kernel loading the rows of strips inside the image in words, the next row step's
# rows in flight while a row is summed and solved (raw_row, coef_walk<WORDS>): a clean build, the guided CUDA tests,
# guided benches tree / base (.device/s18d.diff reversed: HEAD's kernels), three runs each, alternating; ncu.
set -u
O=/tmp/res/${TAG:-s18d}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s18d}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log $O/build.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 parity_guided guided segment_cuda > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log | tee -a $S
grep -B2 -A30 "FAIL\|ERROR" $O/test.log | head -60 >> $S
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
patch -s -R -p1 < .device/s18d.diff && ninja -C build-gpu clients/masktool > $O/rebuild_base.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s" | tee -a $S
grep -c raw_row kernels/cuda/guided_cuda.cu >> $S
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], x["median_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree; do
  left 400 && /tmp/mt/$v bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log && summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
echo "guided benches done at ${SECONDS}s" | tee -a $S
sort -k2,4 -k1,1 $O/guided_summary.txt >> $S
for v in tree base; do
left 450 && timeout 45 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:"coef|final" --launch-skip 4 --launch-count 2 /tmp/mt/$v bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 2 > $O/ncu_$v.txt 2>&1 && echo "ncu $v at ${SECONDS}s" >> $S && grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active|registers|warps_active" $O/ncu_$v.txt | sed -E 's/\(in_t.*//' | cut -c1-110 >> $S
done
