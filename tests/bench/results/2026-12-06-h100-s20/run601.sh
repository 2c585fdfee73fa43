#!/usr/bin/env bash
# session 20, first call: push passes whose blocks claim the visits past their first (next_visit) against HEAD's
# kernels (.device/s20a.diff reversed); the same with the BFS passes claiming too (kDynBfs = true). A clean build,
# the CUDA suite on the tree; test_maxflow_cuda and test_grabcut_cuda on the kDynBfs build; max-flow and GrabCut
# benches alternating, profiles of the 640x480 max-flow. One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s20a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s20a}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 --suite cuda > $O/test.log 2>&1; echo "cuda suite rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log | tee -a $S
grep -B2 -A30 "FAIL\|ERROR" $O/test.log | head -60 >> $S
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
sed -i 's/^const bool kDynBfs = false;/const bool kDynBfs = true;/' kernels/cuda/maxflow_pr.cuh
grep -c "kDynBfs = true" kernels/cuda/maxflow_pr.cuh >> $S
ninja -C build-gpu > $O/rebuild_dyn.log 2>&1; echo "dynbfs rebuild rc=$? at ${SECONDS}s" | tee -a $S
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test_dyn.log 2>&1; echo "dynbfs tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_dyn.log | tee -a $S
cp build-gpu/clients/masktool /tmp/mt/dynbfs
sed -i 's/^const bool kDynBfs = true;/const bool kDynBfs = false;/' kernels/cuda/maxflow_pr.cuh
patch -s -R -p1 < .device/s20a.diff && ninja -C build-gpu clients/masktool > $O/rebuild_base.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s" | tee -a $S
grep -c next_visit kernels/cuda/maxflow_pr.cuh >> $S
cp build-gpu/clients/masktool /tmp/mt/base
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
for v in tree base; do
  MASKD_MAXFLOW_PROFILE=1 timeout 30 /tmp/mt/$v bench maxflow --backend cuda --runs 3 --warmup 1 > $O/prof_mf_$v.json 2> $O/prof_mf_$v.log
done
for rep in 1 2 3; do for v in tree base dynbfs; do
  left 500 && timeout 40 /tmp/mt/$v bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "$v" $O/mf_$v.$rep.json
  left 480 && timeout 60 /tmp/mt/$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "$v" $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$13,$14,$15,$16}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
