#!/usr/bin/env bash
# session 13: where the full filter's strip kernels stall (ncu: stall reasons per issued instruction, pipe use)
set -u
O=$OUT/${TAG:-st}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B=build-gpu/clients/masktool
M=""
for r in long_scoreboard short_scoreboard math_pipe_throttle mio_throttle wait not_selected selected dispatch_stall lg_throttle no_instruction branch_resolving barrier drain imc_miss membar misc sleeping tex_throttle; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
M=${M#,}
timeout 150 ncu --metrics $M --section ComputeWorkloadAnalysis --section InstructionStats -k regex:"coef|final" --launch-skip 2 --launch-count 2 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_stalls.txt 2>&1; echo "ncu rc=$?"
grep -E "coef_kernel|final_kernel|stalled|Pipe|pipe|Executed Ipc|Issue Slots" $O/ncu_stalls.txt | grep -v "==" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -80
timeout 150 ncu --section SourceCounters -k regex:"final" --launch-skip 1 --launch-count 1 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_src_final.txt 2>&1; echo "ncu src rc=$?"
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-st}.tgz -C $OUT ${TAG:-st} && rm -rf $O
