#!/usr/bin/env bash
# session 34, written for the next session with a device (none was lent in session 34; never ran). From the
# repository root on the device, .device/ carried. The max-flow's global relabel on 32 x 32 tiles where the push
# passes use 16 x 16 (bfs32-unrun.diff: pr_kernel<P, true>, chosen by MASKD_PR_BFS_TILE=32; without the variable the
# binary launches the same kernels as HEAD). The CPU model (prsim.c, prsim_bfs_geometry.txt) predicts the BFS passes
# of the 5 cuts of `bench grabcut`'s 5-iteration call: 416x416 161 -> 100, 640x480 182 -> 116, 320x240 132 -> 85,
# 160x120 133 -> 82 (push passes and relabels unchanged: the relabels' distances are the same). Runs: the CUDA suite
# on the variant binary without and with the variable (exactness: the max-flow and GrabCut tests compare with BK and
# the CPU; MASKD_MAXFLOW_CHECK=1 checks every solve on the host as well); grabcut-score with the variable (masks
# must not change: 0.8155 / 0.9664); the max-flow profile at 416x416 and 640x480 with the variable (BFS passes
# against the model); bench grabcut and bench maxflow, HEAD / variant / variant + variable, three runs round-robin;
# then session 33's unrun ncu source counters of kmeans_kernel if time is left.
set -u
T=${TAG:-s34a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { cp $S $O/ 2>/dev/null; tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
R=tests/bench/results/2026-12-08-cpu-s34
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "HEAD built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
M=build-gpu/clients/masktool
mkdir -p /tmp/bin; cp $M /tmp/bin/head
git apply $R/bfs32-unrun.diff && ninja -C build-gpu > $O/build_var.log 2>&1 && cp $M /tmp/bin/var || echo "variant: build failed" | tee -a $S
echo "variant built at ${SECONDS}s" | tee -a $S
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_var.log 2>&1
echo "cuda suite, variant, default rc=$?: $(grep -E "Ok:|Fail:|Skipped:" $O/test_var.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
MASKD_PR_BFS_TILE=32 MASKD_MAXFLOW_CHECK=1 timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_var32.log 2>&1
echo "cuda suite, variant, MASKD_PR_BFS_TILE=32 + MASKD_MAXFLOW_CHECK=1 rc=$?: $(grep -E "Ok:|Fail:|Skipped:" $O/test_var32.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ .*(maxflow|grabcut|cut|segment)" $O/test_var32.log | tee -a $S
left 300 && MASKD_PR_BFS_TILE=32 timeout 60 /tmp/bin/var grabcut-score --backend cuda --json > $O/score_var32.json 2> $O/score_var32.err
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("score var32", d.get("n"), d.get("mean_iou_gt"), d.get("mean_iou_opencv"))' $O/score_var32.json 2>&1 | tee -a $S
for sz in 416x416 640x480; do
  left 320 && MASKD_PR_BFS_TILE=32 MASKD_MAXFLOW_PROFILE=1 timeout 30 /tmp/bin/var bench grabcut --backend cuda --runs 2 --warmup 1 --sizes $sz > $O/prof_var32_$sz.json 2> $O/prof_var32_$sz.log
  left 330 && MASKD_MAXFLOW_PROFILE=1 timeout 30 /tmp/bin/head bench grabcut --backend cuda --runs 2 --warmup 1 --sizes $sz > $O/prof_head_$sz.json 2> $O/prof_head_$sz.log
  # BFS passes of the first 5 solves (the first 5-iteration call)
  for v in head var32; do python3 - $v $sz $O/prof_${v}_$sz.log <<'PY' | tee -a $S
import re, sys
passes = [l for l in open(sys.argv[3]) if l.startswith("maxflow passes:")][:5]
b = [len(re.findall(r"\bB\d+/", l)) for l in passes]; p = [len(re.findall(r"\bP\d+/", l)) for l in passes]
print("profile", sys.argv[1], sys.argv[2], "BFS passes", b, sum(b), "push passes", p, sum(p))
PY
  done
done
echo "tests and profiles end at ${SECONDS}s" | tee -a $S
gc() { python3 -c 'import json,sys
for r in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], r["op"], r["size"], r["median_us"], r.get("pipelined_us") or r.get("solver_us"), r.get("rounds"), r.get("global_relabels"), " ".join("%s=%s" % kv for kv in r.get("stages_us", {}).items()))' "$@"; }
for rep in 1 2 3; do for v in head var var32; do
  b=/tmp/bin/${v%32}; e=; [ $v = var32 ] && e=32
  left 480 && [ -x $b ] && MASKD_PR_BFS_TILE=$e timeout 60 $b bench grabcut --backend cuda --runs 60 --sizes 160x120,320x240,416x416,640x480 > $O/gc_$v.$rep.json 2> $O/gc_$v.$rep.err && gc $v $O/gc_$v.$rep.json
  left 490 && [ -x $b ] && MASKD_PR_BFS_TILE=$e timeout 30 $b bench maxflow --backend cuda --runs 100 > $O/mf_$v.$rep.json 2> $O/mf_$v.$rep.err && gc $v $O/mf_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,2 -k3,3 -k1,1 $O/bench_summary.txt | cut -d' ' -f1-7 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
# session 33's unrun call: ncu source counters of one kmeans_kernel launch at 104x104 (HEAD)
if left 520; then
  timeout 60 ncu --clock-control none --kernel-name kmeans_kernel --launch-skip 1 --launch-count 1 --set full --import-source yes \
    -o $O/km /tmp/bin/head bench grabcut --backend cuda --runs 1 --warmup 1 --sizes 104x104 > $O/ncu_run.log 2>&1
  timeout 20 ncu -i $O/km.ncu-rep --page source --csv --print-source sass > $O/km_sass.csv 2> $O/ncu_src.err
  timeout 20 ncu -i $O/km.ncu-rep --page details --csv > $O/km_details.csv 2>> $O/ncu_src.err
  gzip -f $O/km_sass.csv; rm -f $O/km.ncu-rep
fi
echo "end at ${SECONDS}s" | tee -a $S
