#!/usr/bin/env bash
# session 21, second call: asynchronous push phases only from the second round (MASKD_PR_ASYNC=pct,1: the first
# round keeps its push passes) against the push passes, one binary; the max-flow and GrabCut tests on the hybrid
# (the test binaries run directly with the variable); budgets 50 / 100 / 200 %; profiles; then run605's sweeps
# 6 / 8 / 12 with the push passes.
set -u
O=/tmp/res/${TAG:-s21b}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s21b}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
MASKD_PR_ASYNC=100,1 timeout 100 build-gpu/tests/test_maxflow_cuda > $O/test_mf_h.log 2>&1; arc=$?
echo "test_maxflow_cuda hybrid rc=$arc at ${SECONDS}s" | tee -a $S; tail -3 $O/test_mf_h.log | tee -a $S
MASKD_PR_ASYNC=100,1 timeout 100 build-gpu/tests/test_grabcut_cuda > $O/test_gc_h.log 2>&1; echo "test_grabcut_cuda hybrid rc=$? at ${SECONDS}s" | tee -a $S; tail -3 $O/test_gc_h.log | tee -a $S
M=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
run() { # tag MASKD_PR_ASYNC sizes
  export MASKD_PR_ASYNC=$2
  left 400 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$1.json 2>$O/mf_$1.err && sm $1 $O/mf_$1.json
  left 390 && timeout 60 $M bench grabcut --backend cuda --sizes $3 --runs 20 --warmup 3 > $O/gc_$1.json 2>$O/gc_$1.err && sm $1 $O/gc_$1.json
}
if [ $arc = 0 ]; then
  for rep in 1 2 3; do run sync.$rep 0 416x416,640x480; run h100.$rep 100,1 416x416,640x480; done > $O/bench_summary.txt
  for b in 50 200; do run h$b.1 $b,1 416x416,640x480; done >> $O/bench_summary.txt
  run sync.4 0 1280x720 >> $O/bench_summary.txt; run h100.4 100,1 1280x720 >> $O/bench_summary.txt
  for v in 0 100,1; do
    left 420 && MASKD_PR_ASYNC=$v MASKD_MAXFLOW_PROFILE=1 timeout 30 $M bench maxflow --backend cuda --runs 3 --warmup 1 > $O/prof_mf_$v.json 2> $O/prof_mf_$v.log
  done
fi
unset MASKD_PR_ASYNC
for rep in 1 2; do for v in 8 6 12; do
  export MASKD_PR_PARAMS=$v,0,8
  left 470 && timeout 30 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/sw_mf_$v.$rep.json 2>/dev/null && sm "s$v.$rep" $O/sw_mf_$v.$rep.json
  left 460 && timeout 40 $M bench grabcut --backend cuda --sizes 416x416,640x480 --runs 15 --warmup 3 > $O/sw_gc_$v.$rep.json 2>/dev/null && sm "s$v.$rep" $O/sw_gc_$v.$rep.json
done; done > $O/sweeps_summary.txt
unset MASKD_PR_PARAMS
echo "end at ${SECONDS}s" | tee -a $S
