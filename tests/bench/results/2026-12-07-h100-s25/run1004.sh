#!/usr/bin/env bash
# session 25, fourth call: ncu source counters (--set full) of the kept strip kernels (flat: coef_kernel in pairs,
# flat rows skip the solve) on the 1080p person1 photo, its grey levels as the source (gray) and its ground-truth
# mask (mask); SASS csv per report for the per-loop-body summary (ncu_classes.txt, made here afterwards).
# Before that, the load-balance question: flat with twice the bands (band-pct-switch.diff, coef 200 %, both 200 %)
# against flat, bench guided 1080p, two runs each (if the mask's flat rows only shorten the warps that were not
# the slowest, shorter bands should gain on the mask and lose on the photo).
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
mkdir -p /tmp/bin; cp $M /tmp/bin/flat
F=kernels/cuda/guided_cuda.cu
patch -s -p1 < .device/pct.diff
for v in C200 B200; do
  sed -i "s/^#define MK_PCT_C .*/#define MK_PCT_C 200/; s/^#define MK_PCT_F .*/#define MK_PCT_F $([ $v = B200 ] && echo 200 || echo 100)/" $F
  ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1 && cp $M /tmp/bin/$v
done
patch -s -R -p1 < .device/pct.diff; ninja -C build-gpu clients/masktool > $O/build_back.log 2>&1
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2; do for v in flat C200 B200; do
  left 150 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "bench at ${SECONDS}s" | tee -a $S
for src in gray mask; do
  left 160 || break
  timeout 60 ncu --clock-control none --kernel-name regex:"coef_kernel|final_kernel" --set full --import-source yes \
    -o $O/g_$src $M guided --guide $V/p1_1080.png --src $V/p1_1080_$src.png --radius 8 --eps 1e-4 -o /tmp/o.f32 \
    > $O/ncu_run_$src.log 2>&1
  tail -2 $O/ncu_run_$src.log >> $S
  timeout 40 ncu -i $O/g_$src.ncu-rep --page source --csv --print-source sass 2> $O/ncu_src_$src.err | gzip > $O/sass_$src.csv.gz
  timeout 30 ncu -i $O/g_$src.ncu-rep --page details --csv > $O/details_$src.csv 2>> $O/ncu_src_$src.err
  echo "$src at ${SECONDS}s: $(ls -la $O/sass_$src.csv.gz | awk '{print $5}') bytes" | tee -a $S
done
echo "end at ${SECONDS}s" | tee -a $S
