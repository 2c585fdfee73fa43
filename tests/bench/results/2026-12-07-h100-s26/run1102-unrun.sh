#!/usr/bin/env bash
# session 26, call 2, on the tree with pf.diff applied (the kept candidate): the whole CUDA suite; ncu kernel
# metrics (duration, warp instructions, per pipe) of coef_kernel and final_kernel for the tree (pf), head (pf
# reverted: HEAD's kernels) and pfbi (pf + bi: pfbi.diff) on the 1080p person1 photo with its grey levels as the
# source: did bi's instruction cut show, and pf's?
set -u
T=${TAG:-s26b}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
M=build-gpu/clients/masktool V=.device/var
mkdir -p /tmp/b2
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
cp $M /tmp/b2/tree; echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_cuda.log 2>&1
echo "cuda suite: $(grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:" $O/test_cuda.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "FAIL|TIMEOUT" $O/test_cuda.log | head -5 | tee -a $S
echo "suite at ${SECONDS}s" | tee -a $S
for v in head pfbi; do
  left 200 || break
  if [ $v = head ]; then F=.device/var26/pf.diff R=-R; else F=.device/var26/pfbi.diff R=; fi
  patch -s -p1 $R < $F && ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1 && cp $M /tmp/b2/$v
  grep -E "error|warning" $O/build_$v.log | head -3 | tee -a $S
  patch -s -p1 $([ -z "$R" ] && echo -R) < $F || echo "$v: revert failed" | tee -a $S
  echo "$v at ${SECONDS}s" | tee -a $S
done
MET=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_fp64.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_lsu.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
for v in tree head pfbi; do
  left 250 || break
  [ -x /tmp/b2/$v ] || continue
  timeout 50 ncu --kernel-name regex:"coef_kernel|final_kernel" --metrics $MET --csv \
    /tmp/b2/$v guided --guide $V/p1_1080.png --src $V/p1_1080_gray.png --radius 8 --eps 1e-4 -o /tmp/o.f32 \
    > $O/ncu_$v.csv 2> $O/ncu_$v.err
  python3 - $v $O/ncu_$v.csv <<'PY' | tee -a $S
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 10]
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); val = h.index("Metric Value")
out = {}
for r in rows[1:]:
    name = "coef" if "coef_kernel" in r[k] else "final"
    out.setdefault(name, []).append("%s=%s" % (r[m].split("__")[1].replace("inst_executed", "ie"), r[val]))
for n, l in out.items():
    print(sys.argv[1], n, " ".join(l))
PY
done
echo "end at ${SECONDS}s" | tee -a $S
