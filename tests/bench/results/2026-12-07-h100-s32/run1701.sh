#!/usr/bin/env bash
# session 32, call 1: session 31's run1602.sh (never ran there), with the GrabCut parts of issue 6 added after the
# suite: grabcut-score (33 images, median of 5 calls each) at full resolution, at 1/4 and at 1/4 reseeded, and bench
# grabcut at 104x104, 160x120, 416x416, 640x480 (5 iterations, reseeded, cuts), and the same without
# warm-unrun.diff (nw: the reseeded cuts cold) for the reseeded ones. The edge strips' loads by lane
# words: run with edge-words-unrun.diff applied to the tree (coef_kernel's stage, ew, and final_kernel's planes,
# fw); the variants are built from the diffs beside this script. The whole CUDA suite; four masktool guided outputs at 1920x1080 of tree, ew against
# base (64f504b) byte for byte; bench guided 720p + 1080p, base / ew / tree / diag (diag: the edge strips do
# nothing, a bound only, wrong output) three runs round-robin; ncu durations of the strip kernels.
set -u
T=${TAG:-s32a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { cp $S $O/ 2>/dev/null; tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_tree.log 2>&1
echo "tree suite rc=$?: $(grep -E "Ok:|Fail:|Timeout:" $O/test_tree.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_tree.log | tee -a $S
M=build-gpu/clients/masktool
for v in "full:" "q4:--scale 4" "q4r:--scale 4 --reseed"; do
  timeout 90 $M grabcut-score --backend cuda --runs 5 --json ${v#*:} > $O/score_${v%%:*}.json 2> $O/score_${v%%:*}.err
  python3 -c 'import json,sys; d=json.load(open(sys.argv[2])); print("score", sys.argv[1], d.get("n"), d.get("mean_iou_gt"), d.get("mean_iou_opencv"), d.get("mean_ms"), d.get("mean_grabcut_ms"), d.get("mean_upsample_ms"))' ${v%%:*} $O/score_${v%%:*}.json 2>&1 | tee -a $S
done
timeout 120 $M bench grabcut --backend cuda --runs 100 --sizes 104x104,160x120,416x416,640x480 > $O/bench_grabcut.json 2> $O/bench_grabcut.err
python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]: print("gc", r["op"], r["size"], r["median_us"], r.get("pipelined_us"), r.get("rounds"))' $O/bench_grabcut.json 2>&1 | tee -a $S
# nw: the tree without warm-unrun.diff (the CUDA k-means call clears the kept flow; the reseeded cuts start cold)
W=tests/bench/results/2026-12-07-h100-s32/warm-unrun.diff
mkdir -p /tmp/keep; cp kernels/cuda/grabcut_cuda.cu kernels/grabcut.c kernels/grabcut.h /tmp/keep/
patch -s -R -p1 < $W && ninja -C build-gpu clients/masktool > $O/build_nw.log 2>&1 && mkdir -p /tmp/bin && cp $M /tmp/bin/nw || echo "nw: build failed" | tee -a $S
cp /tmp/keep/grabcut_cuda.cu kernels/cuda/; cp /tmp/keep/grabcut.c /tmp/keep/grabcut.h kernels/
timeout 60 /tmp/bin/nw grabcut-score --backend cuda --runs 5 --json --scale 4 --reseed > $O/score_q4r_nw.json 2> $O/score_q4r_nw.err
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("score q4r_nw", d.get("n"), d.get("mean_iou_gt"), d.get("mean_iou_opencv"), d.get("mean_ms"), d.get("mean_grabcut_ms"), d.get("mean_upsample_ms"))' $O/score_q4r_nw.json 2>&1 | tee -a $S
timeout 60 /tmp/bin/nw bench grabcut --backend cuda --runs 100 --sizes 104x104,160x120,416x416 > $O/bench_grabcut_nw.json 2> $O/bench_grabcut_nw.err
python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]: print("gc_nw", r["op"], r["size"], r["median_us"], r.get("pipelined_us"), r.get("rounds"))' $O/bench_grabcut_nw.json 2>&1 | grep reseed | tee -a $S
ninja -C build-gpu clients/masktool > /dev/null 2>&1
echo "grabcut parts end at ${SECONDS}s" | tee -a $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
K=kernels/cuda/guided_cuda.cu; cp $K /tmp/tree.cu
D=tests/bench/results/2026-12-07-h100-s31
cp $K /tmp/base.cu; patch -s -R /tmp/base.cu < $D/edge-words-unrun.diff
cp /tmp/base.cu /tmp/ew.cu; patch -s /tmp/ew.cu < $D/edge-words-coef-only-unrun.diff
cp $K /tmp/diag.cu; patch -s /tmp/diag.cu < $D/edge-diag-unrun.diff
for v in base ew diag; do
  cp /tmp/$v.cu $K
  ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/$v || echo "$v: build failed" | tee -a $S
  grep -E "error|warning" $O/build_$v.log | head -3 | tee -a $S
done
cp /tmp/tree.cu $K
echo "variants built at ${SECONDS}s" | tee -a $S
V=.device/var
for b in base tree ew; do
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_gray.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o1_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o2_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-2 --mask soft -o /tmp/o3_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --gray --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o4_$b.f32 > /dev/null 2>> $O/cmp.err
  for k in 1 2 3 4; do
    [ $b = base ] && { echo "o$k base $(md5sum < /tmp/o${k}_base.f32 | cut -c1-12) $(stat -c %s /tmp/o${k}_base.f32)" | tee -a $S; continue; }
    cmp -s /tmp/o${k}_base.f32 /tmp/o${k}_$b.f32 && echo "o$k $b identical to base" | tee -a $S || echo "o$k $b DIFFERS" | tee -a $S
  done
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in base ew tree diag; do
  left 380 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
nc() {
  timeout $2 ncu --cache-control none --replay-mode application --kernel-name regex:"coef_kernel|final_kernel" \
    --launch-skip 160 --launch-count 2 --section SpeedOfLight --page raw --csv \
    /tmp/bin/$1 bench guided --sizes 1920x1080 --runs 200 > $O/ncu_$1.csv 2> $O/ncu_$1.err
  python3 - $1 $O/ncu_$1.csv <<'PY' | tee -a $S
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 10]
if len(rows) < 3: print(sys.argv[1], "ncu: no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); t = h.index("gpu__time_duration.sum")
print(sys.argv[1], " ".join(("coef" if "coef_kernel" in r[k] else "final") + "=" + r[t] for r in rows[2:]))
PY
}
for v in base tree diag; do left 520 && nc $v $((560 - SECONDS)); done
echo "end at ${SECONDS}s" | tee -a $S
