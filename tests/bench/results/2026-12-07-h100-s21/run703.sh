#!/usr/bin/env bash
# session 21, third call: where a push visit's instructions go. ncu on pr_kernel (16 x 16 tiles, the 640x480
# max-flow of `bench maxflow`, one launch after warm-up): speed of light, warp states, instruction statistics and
# the per-instruction source counters (SASS: executed instructions, stall samples), exported as CSV.
set -u
O=/tmp/res/${TAG:-s21c}; mkdir -p $O
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s21c}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
M=build-gpu/clients/masktool
timeout 240 ncu --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --section Occupancy --section LaunchStats -k regex:pr_kernel --launch-skip 4 --launch-count 1 -o $O/pr16 \
  $M bench maxflow --backend cuda --runs 3 --warmup 2 > $O/ncu_run.txt 2>&1; echo "ncu rc=$? at ${SECONDS}s" | tee -a $S
tail -5 $O/ncu_run.txt >> $S
timeout 60 ncu -i $O/pr16.ncu-rep --page details > $O/pr16_details.txt 2>&1
timeout 120 ncu -i $O/pr16.ncu-rep --page source --csv --print-source sass > $O/pr16_sass.csv 2>&1; echo "sass rc=$? lines $(wc -l < $O/pr16_sass.csv)" | tee -a $S
timeout 120 ncu -i $O/pr16.ncu-rep --page source --csv --print-source cuda,sass > $O/pr16_cuda_sass.csv 2>&1; echo "cuda,sass rc=$? lines $(wc -l < $O/pr16_cuda_sass.csv)" | tee -a $S
gzip -9 $O/pr16_sass.csv $O/pr16_cuda_sass.csv; rm -f $O/pr16.ncu-rep.tmp
ls -la $O >> $S
echo "end at ${SECONDS}s" | tee -a $S
