#!/usr/bin/env bash
# session 19, first call: the max-flow with a warp per 16 x 16 tile (prw_kernel, MASKD_PR_WARP=1) against the
# block-per-tile kernel, same binary: a clean build, maxflow_cuda and grabcut_cuda with the warp kernel (and the
# default), then max-flow and GrabCut benches alternating, two runs each. One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s19a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s19a}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
MASKD_PR_WARP=1 timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_warp.log 2>&1; echo "warp tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test_warp.log | tee -a $S
grep -B2 -A40 "FAIL\|ERROR\|rror" $O/test_warp.log | head -80 >> $S
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x.get("variant",""), x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "mf", x.get("stages_us",{}).get("maxflow"))' "$@"; }
for rep in 1 2; do for v in warp base; do
  if [ $v = warp ]; then export MASKD_PR_WARP=1; else unset MASKD_PR_WARP; fi
  left 400 && timeout 40 build-gpu/clients/masktool bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>$O/mf_$v.$rep.err && sm "$v" $O/mf_$v.$rep.json
  left 380 && timeout 60 build-gpu/clients/masktool bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>$O/gc_$v.$rep.err && sm "$v" $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
unset MASKD_PR_WARP
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,4 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$4,$6,$8,$10,$12,$14}' >> $S
left 420 && timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_base.log 2>&1; echo "base tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^Ok:|^Fail:" $O/test_base.log | tee -a $S
echo "end at ${SECONDS}s" | tee -a $S
