#!/usr/bin/env bash
# session 19, third call: two max-flow switches against the kernel as it is, same binary: MASKD_PR_SKIPBFS=1 (no
# local BFS in the first push pass after a global relabel) and MASKD_PR_CUT=F (a push visit stops sweeping, after 2
# sweeps, once F/8 of its pass's visits are done). Tests with both switches, benches alternating, two runs each.
# One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s19c}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s19c}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
MASKD_PR_CUT=6 MASKD_PR_SKIPBFS=1 timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_sw.log 2>&1; echo "switch tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test_sw.log | tee -a $S
grep -B2 -A40 "FAIL\|ERROR\|rror" $O/test_sw.log | head -60 >> $S
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "mf", x.get("stages_us",{}).get("maxflow"))' "$@"; }
run_v() { # name, env assignments
  local v=$1; shift
  left 470 && env "$@" timeout 40 build-gpu/clients/masktool bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "$v" $O/mf_$v.$rep.json
  left 460 && env "$@" timeout 60 build-gpu/clients/masktool bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "$v" $O/gc_$v.$rep.json
}
for rep in 1 2; do
  run_v base MASKD_PR_CUT=0
  run_v skip MASKD_PR_SKIPBFS=1
  run_v cut7 MASKD_PR_CUT=7
  run_v cut6 MASKD_PR_CUT=6
  run_v cut5 MASKD_PR_CUT=5
done > $O/bench_summary.txt
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$13}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
