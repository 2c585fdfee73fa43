#!/usr/bin/env bash
# session 18, third call: push passes of a cold solve's first round on 16 x 16 tiles (MASKD_PR_COLD_PASSES, a
# measuring aid; unset = by the grid's size as before): the CUDA max-flow / GrabCut tests with it at 30, then
# max-flow and GrabCut (416x416, 640x480) with it unset / 24 / 30 / 40, three runs each, alternating.
set -u
O=/tmp/res/${TAG:-s18c}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s18c}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
MASKD_PR_COLD_PASSES=30 timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 maxflow_cuda grabcut_cuda > $O/test.log 2>&1; echo "tests (cold passes 30) rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log | tee -a $S
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "energy", x.get("energy"))' "$@"; }
M=build-gpu/clients/masktool
for rep in 1 2 3; do for v in 0 24 30 40; do
  left 450 && MASKD_PR_COLD_PASSES=$v timeout 25 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "c$v" $O/mf_$v.$rep.json
  left 440 && MASKD_PR_COLD_PASSES=$v timeout 40 $M bench grabcut --backend cuda --sizes 416x416,640x480 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "c$v" $O/gc_$v.$rep.json
done; done > $O/cp_summary.txt
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/cp_summary.txt | awk '{print $1,$2,$3,$5,$7,$9}' >> $S
