#!/usr/bin/env bash
# session 19, second call: pushes across a tile border deferred to the end of the visit (MASKD_PR_DEFER=1, 16 x 16
# tiles) against the kernel as it is, same binary: tests with the switch, benches alternating three runs each,
# profiles (MASKD_MAXFLOW_PROFILE=1) of both at 416x416 and 640x480. One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s19b}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s19b}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
MASKD_PR_DEFER=1 timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_defer.log 2>&1; echo "defer tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test_defer.log | tee -a $S
grep -B2 -A40 "FAIL\|ERROR\|rror" $O/test_defer.log | head -80 >> $S
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "mf", x.get("stages_us",{}).get("maxflow"))' "$@"; }
for rep in 1 2 3; do for v in defer base; do
  if [ $v = defer ]; then export MASKD_PR_DEFER=1; else unset MASKD_PR_DEFER; fi
  left 400 && timeout 40 build-gpu/clients/masktool bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>$O/mf_$v.$rep.err && sm "$v" $O/mf_$v.$rep.json
  left 380 && timeout 60 build-gpu/clients/masktool bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>$O/gc_$v.$rep.err && sm "$v" $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
unset MASKD_PR_DEFER
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$13}' >> $S
left 420 && timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_base.log 2>&1; echo "base tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^Ok:|^Fail:" $O/test_base.log | tee -a $S
for v in defer base; do
  if [ $v = defer ]; then export MASKD_PR_DEFER=1; else unset MASKD_PR_DEFER; fi
  left 480 && MASKD_MAXFLOW_PROFILE=1 timeout 40 build-gpu/clients/masktool bench grabcut --backend cuda --sizes 416x416 --runs 3 --warmup 1 > $O/prof_gc_$v.json 2>$O/prof_gc_$v.log
  left 490 && MASKD_MAXFLOW_PROFILE=1 timeout 40 build-gpu/clients/masktool bench maxflow --backend cuda --runs 3 --warmup 1 > $O/prof_mf_$v.json 2>$O/prof_mf_$v.log
  for f in $O/prof_gc_$v.log $O/prof_mf_$v.log; do echo "$v $(basename $f): $(grep -m3 'per block' $f | sed 's/.*per block/per block/' | tr '\n' ' ')"; done >> $S
done
unset MASKD_PR_DEFER
echo "end at ${SECONDS}s" | tee -a $S
