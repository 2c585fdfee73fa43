#!/usr/bin/env bash
# session 34, written for the next session with a device (none was lent in session 34; never ran). From the
# repository root on the device, .device/ carried. The max-flow's global relabel on 32 x 32 tiles where the push
# passes use 16 x 16 (bfs32-unrun.diff: pr_kernel<P, true>, chosen by MASKD_PR_BFS_TILE=32 for every BFS pass, 32L
# for every pass but each relabel's first; without the variable the binary launches the same kernels as HEAD). The
# CPU model (prsim.c, prsim_bfs_geometry.txt) predicts the BFS passes of the 5 cuts of `bench grabcut`'s
# 5-iteration call: 416x416 161 -> 100 (32) / 106 (32L), 640x480 182 -> 116 / 124, 320x240 132 -> 85 / 98; push
# passes and relabels unchanged (the relabels' distances are the same). Runs: the CUDA suite on the variant binary
# without the variable, maxflow_cuda and grabcut_cuda with each setting and MASKD_MAXFLOW_CHECK=1 (exactness);
# grabcut-score with each (masks must not change: 0.8155 / 0.9664); the max-flow profile at 416x416 and 640x480
# (BFS passes against the model); bench grabcut and bench maxflow, HEAD / variant / 32 / 32L, three runs
# round-robin; then session 33's unrun ncu source counters of kmeans_kernel if time is left.
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
echo "cuda suite, variant, no variable rc=$?: $(grep -E "Ok:|Fail:|Skipped:" $O/test_var.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
for m in 32 32L; do
  MASKD_PR_BFS_TILE=$m MASKD_MAXFLOW_CHECK=1 timeout 90 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_var$m.log 2>&1
  echo "maxflow_cuda, grabcut_cuda, MASKD_PR_BFS_TILE=$m + MASKD_MAXFLOW_CHECK=1 rc=$?: $(grep -E "Ok:|Fail:|Skipped:" $O/test_var$m.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  left 260 && MASKD_PR_BFS_TILE=$m timeout 60 /tmp/bin/var grabcut-score --backend cuda --json > $O/score_var$m.json 2> $O/score_var$m.err
  python3 -c 'import json,sys; d=json.load(open(sys.argv[2])); print("score", sys.argv[1], d.get("n"), d.get("mean_iou_gt"), d.get("mean_iou_opencv"))' $m $O/score_var$m.json 2>&1 | tee -a $S
done
for sz in 416x416 640x480; do
  for v in head:head: var32:var:32 var32L:var:32L; do
    IFS=: read n b e <<< "$v"
    left 330 && MASKD_PR_BFS_TILE=$e MASKD_MAXFLOW_PROFILE=1 timeout 30 /tmp/bin/$b bench grabcut --backend cuda --runs 2 --warmup 1 --sizes $sz > $O/prof_${n}_$sz.json 2> $O/prof_${n}_$sz.log
    # passes of the first 5 solves (the first 5-iteration call)
    python3 - $n $sz $O/prof_${n}_$sz.log <<'PY' | tee -a $S
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
for rep in 1 2 3; do for v in head:head: var:var: var32:var:32 var32L:var:32L; do
  IFS=: read n b e <<< "$v"
  left 500 && [ -x /tmp/bin/$b ] && MASKD_PR_BFS_TILE=$e timeout 60 /tmp/bin/$b bench grabcut --backend cuda --runs 50 --sizes 320x240,416x416,640x480 > $O/gc_$n.$rep.json 2> $O/gc_$n.$rep.err && gc $n $O/gc_$n.$rep.json
  left 505 && [ -x /tmp/bin/$b ] && MASKD_PR_BFS_TILE=$e timeout 30 /tmp/bin/$b bench maxflow --backend cuda --runs 100 > $O/mf_$n.$rep.json 2> $O/mf_$n.$rep.err && gc $n $O/mf_$n.$rep.json
done; done > $O/bench_summary.txt
sort -k2,2 -k3,3 -k1,1 $O/bench_summary.txt | cut -d' ' -f1-7 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
# session 33's unrun call: ncu source counters of one kmeans_kernel launch at 104x104 (HEAD)
if left 520; then
  timeout 50 ncu --clock-control none --kernel-name kmeans_kernel --launch-skip 1 --launch-count 1 --set full --import-source yes \
    -o $O/km /tmp/bin/head bench grabcut --backend cuda --runs 1 --warmup 1 --sizes 104x104 > $O/ncu_run.log 2>&1
  timeout 15 ncu -i $O/km.ncu-rep --page source --csv --print-source sass > $O/km_sass.csv 2> $O/ncu_src.err
  timeout 15 ncu -i $O/km.ncu-rep --page details --csv > $O/km_details.csv 2>> $O/ncu_src.err
  gzip -f $O/km_sass.csv; rm -f $O/km.ncu-rep
fi
echo "end at ${SECONDS}s" | tee -a $S
