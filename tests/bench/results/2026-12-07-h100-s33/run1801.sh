#!/usr/bin/env bash
# session 33, call 1. The tree (f4c5844 with this session's commit's kernels/cuda changes): the GrabCut cooperative kernels' grid_sums after one
# barrier on grids of up to 64 blocks (partials in two halves), and the occupancy queries of plan_call and
# mk_pr_create asked once per process. Runs: the CUDA and daemon suites (test_cut's CUDA cases with
# grabcut.reseed have never run on a GPU); grabcut-score on the tree (masks must not change); bench grabcut
# base / occ (only the queries kept) / tree, three runs round-robin; ncu durations of every GrabCut kernel of one
# 5-iteration call at 600x450 and at 104x104 (base); the max-flow profile of 416x416 5 iterations (base); the
# one-barrier threshold (MASKD_GC_ONE_BARRIER 0 / 64 / 1000) on the tree.
set -u
T=${TAG:-s33a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { cp $S $O/ 2>/dev/null; tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda --suite daemon > $O/test_tree.log 2>&1
echo "suites rc=$?: $(grep -E "Ok:|Fail:|Skipped:|Timeout:" $O/test_tree.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_tree.log | tee -a $S
grep -hE "grabcut .*IoU with the truth|no CUDA device|key_iterations" build-gpu/meson-logs/testlog.txt | head -20 | tee -a $S
echo "tests end at ${SECONDS}s" | tee -a $S
M=build-gpu/clients/masktool
mkdir -p /tmp/bin; cp $M /tmp/bin/tree
V=.device/var/s33
cp kernels/cuda/grabcut_cuda.cu /tmp/gc_tree.cu; cp kernels/cuda/maxflow_cuda.cu /tmp/mf_tree.cu
build_var() { # name grabcut maxflow
  cp $2 kernels/cuda/grabcut_cuda.cu; cp $3 kernels/cuda/maxflow_cuda.cu
  ninja -C build-gpu clients/masktool > $O/build_$1.log 2>&1 && cp $M /tmp/bin/$1 || echo "$1: build failed" | tee -a $S
}
build_var base $V/grabcut_base.cu $V/maxflow_base.cu
build_var occ $V/grabcut_occ.cu /tmp/mf_tree.cu
cp /tmp/gc_tree.cu kernels/cuda/grabcut_cuda.cu; cp /tmp/mf_tree.cu kernels/cuda/maxflow_cuda.cu
echo "variants built at ${SECONDS}s" | tee -a $S
gc() { python3 -c 'import json,sys
for r in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], r["op"], r["size"], r["median_us"], r.get("pipelined_us"), r.get("rounds"), " ".join("%s=%s" % kv for kv in r.get("stages_us", {}).items()))' "$@"; }
for rep in 1 2 3; do for v in base occ tree; do
  left 270 && [ -x /tmp/bin/$v ] && timeout 60 /tmp/bin/$v bench grabcut --backend cuda --runs 100 --sizes 104x104,160x120,320x240,416x416 > $O/gc_$v.$rep.json 2> $O/gc_$v.$rep.err && gc $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,2 -k3,3 -k1,1 $O/bench_summary.txt | cut -d' ' -f1-6 >> $S
# the one-barrier rule's threshold (MASKD_GC_ONE_BARRIER: 0 never, 1000 always; the default 64)
for rep in 1 2; do for ob in 0 1000; do
  left 320 && MASKD_GC_ONE_BARRIER=$ob timeout 60 /tmp/bin/tree bench grabcut --backend cuda --runs 100 --sizes 160x120,320x240,416x416,640x480 > $O/gcob_$ob.$rep.json 2> $O/gcob_$ob.$rep.err && gc ob$ob $O/gcob_$ob.$rep.json
done; done > $O/ob_summary.txt
sort -k2,2 -k3,3 -k1,1 $O/ob_summary.txt | cut -d' ' -f1-6 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
# ncu: every kernel of one 5-iteration call (person1 600x450; the bench's 104x104 first call)
IMG=$SHARED_DATA/grabcut/images/person1.jpg; R=$(tr -s ' \t' ',' < $SHARED_DATA/grabcut/bboxes/person1.txt | sed 's/,$//')
nk() { timeout $1 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw "${@:3}" > $O/ncu_$2.csv 2> $O/ncu_$2.err
  python3 - $2 $O/ncu_$2.csv <<'PY' | tee -a $S
import csv, sys, re
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 5]
if len(rows) < 3: print(sys.argv[1], "ncu: no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); t = h.index("gpu__time_duration.sum")
out = []
for r in rows[2:]:
    name = re.sub(r"^(void )?(<unnamed>::)?(pr\d+::)?", "", r[k]).split("(")[0]
    out.append("%s=%s" % (name, r[t]))
print(sys.argv[1], len(out), " ".join(out))
PY
}
left 360 && nk 40 img /tmp/bin/base grabcut $IMG --rect $R --backend cuda -o /tmp/m.png
left 380 && /tmp/bin/base grabcut $IMG --rect $R --backend cuda -o /tmp/m.png | tee -a $S
left 390 && nk 40 small --launch-count 40 /tmp/bin/base bench grabcut --backend cuda --runs 1 --warmup 1 --sizes 104x104
left 420 && MASKD_MAXFLOW_PROFILE=1 timeout 30 /tmp/bin/base bench grabcut --backend cuda --runs 2 --warmup 1 --sizes 416x416 > $O/prof416.json 2> $O/prof416.log
grep -c "maxflow profile" $O/prof416.log | tee -a $S
for v in "full:" "q4r:--scale 4 --reseed"; do
  left 450 && timeout 60 /tmp/bin/tree grabcut-score --backend cuda --runs 3 --json ${v#*:} > $O/score_${v%%:*}.json 2> $O/score_${v%%:*}.err
  python3 -c 'import json,sys; d=json.load(open(sys.argv[2])); print("score", sys.argv[1], d.get("n"), d.get("mean_iou_gt"), d.get("mean_iou_opencv"), d.get("mean_ms"), d.get("mean_grabcut_ms"), d.get("mean_upsample_ms"))' ${v%%:*} $O/score_${v%%:*}.json 2>&1 | tee -a $S
done
echo "end at ${SECONDS}s" | tee -a $S
