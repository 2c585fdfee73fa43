#!/usr/bin/env bash
# session 14: what bounds the full filter's kernels now: pipe utilisation and the instruction mix (ncu), 1080p colour
set -u
O=$OUT/${TAG:-pu}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
b=build-gpu/clients/masktool
M=sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fp64.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_adu.sum,smsp__inst_executed_pipe_uniform.sum,smsp__inst_executed.sum,gpu__time_duration.sum
for k in coef final; do
  timeout 200 ncu --section ComputeWorkloadAnalysis --section InstructionStats --print-details all --metrics $M -k regex:"$k" --launch-skip 1 --launch-count 1 $b bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_$k.txt 2>&1; echo "ncu $k rc=$?"
  grep -E "pipe|duration|inst_executed.sum" $O/ncu_$k.txt | grep -v "==" | head -20
  grep -A40 -i "opcode" $O/ncu_$k.txt | head -50
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-pu}.tgz -C $OUT ${TAG:-pu} && rm -rf $O
