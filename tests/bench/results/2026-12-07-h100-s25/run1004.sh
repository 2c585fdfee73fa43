#!/usr/bin/env bash
# session 25, fourth call: ncu source counters (--set full) of the kept strip kernels (flat: coef_kernel in pairs,
# flat rows skip the solve) on the 1080p person1 photo, its grey levels as the source (gray) and its ground-truth
# mask (mask); SASS csv per report for the per-loop-body summary (ncu_classes.txt, made here afterwards).
set -u
T=${TAG:-s25d}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz --exclude="*.ncu-rep" -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
V=.device/var M=build-gpu/clients/masktool
for src in gray mask; do
  left 300 || break
  timeout 120 ncu --clock-control none --kernel-name regex:"coef_kernel|final_kernel" --set full --import-source yes \
    -o $O/g_$src $M guided --guide $V/p1_1080.png --src $V/p1_1080_$src.png --radius 8 --eps 1e-4 -o /tmp/o.f32 \
    > $O/ncu_run_$src.log 2>&1
  tail -2 $O/ncu_run_$src.log >> $S
  timeout 40 ncu -i $O/g_$src.ncu-rep --page source --csv --print-source sass 2> $O/ncu_src_$src.err | gzip > $O/sass_$src.csv.gz
  timeout 30 ncu -i $O/g_$src.ncu-rep --page details --csv > $O/details_$src.csv 2>> $O/ncu_src_$src.err
  echo "$src at ${SECONDS}s: $(ls -la $O/sass_$src.csv.gz | awk '{print $5}') bytes" | tee -a $S
done
echo "end at ${SECONDS}s" | tee -a $S
