#!/usr/bin/env bash
# session 21, first call: asynchronous push phases (MASKD_PR_ASYNC, pr_kernel<P, true>) against the push passes in
# one binary (the switch selects between compiled kernels): maxflow_cuda_async first (a hang would show here, under
# a timeout), then grabcut_cuda_async and maxflow_cuda; benches alternating sync / async (budget 100 %), three runs;
# budgets 50 / 200 / 400 % once; profiles of the 640x480 max-flow.
set -u
O=/tmp/res/${TAG:-s21a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s21a}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda_async > $O/test_async.log 2>&1; arc=$?
echo "maxflow_cuda_async rc=$arc at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_async.log | tee -a $S
[ $arc = 0 ] || grep -iE "fail|error|assert" $O/test_async.log | head -20 | tee -a $S
timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 grabcut_cuda_async maxflow_cuda > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test.log | tee -a $S
M=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
run() { # tag budget
  export MASKD_PR_ASYNC=$2
  left 260 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$1.json 2>$O/mf_$1.err && sm $1 $O/mf_$1.json
  left 250 && timeout 60 $M bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$1.json 2>$O/gc_$1.err && sm $1 $O/gc_$1.json
}
if [ $arc = 0 ]; then
  for rep in 1 2 3; do run sync.$rep 0; run a100.$rep 100; done > $O/bench_summary.txt
  for b in 50 200 400; do run a$b.1 $b; done >> $O/bench_summary.txt
  for v in 0 100; do
    left 280 && MASKD_PR_ASYNC=$v MASKD_MAXFLOW_PROFILE=1 timeout 30 $M bench maxflow --backend cuda --runs 3 --warmup 1 > $O/prof_mf_$v.json 2> $O/prof_mf_$v.log
  done
else
  for rep in 1; do run sync.$rep 0; done > $O/bench_summary.txt
fi
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$11,$16}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
