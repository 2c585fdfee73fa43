#!/usr/bin/env bash
# session 21, sixth call (run705 trimmed to the device time left; run705 itself never got a machine):
# mk_grid_barrier (grid_barrier.cuh) in grabcut_cuda.cu's cooperative kernels too (k-means,
# iterations). The whole CUDA suite on the tree, then HEAD~1's kernels (the max-flow's barrier only) rebuilt beside
# it (.device/gb2.diff reversed), benches alternating, two runs each, with the stages.
set -u
O=/tmp/res/${TAG:-s21f}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s21f}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test.log 2>&1; trc=$?
echo "tests rc=$trc at ${SECONDS}s" | tee -a $S; grep -E "^ *[0-9]+/[0-9]+ " $O/test.log | tee -a $S
cp build-gpu/clients/masktool /tmp/mt_tree
patch -s -R -p1 < .device/gb2.diff && ninja -C build-gpu clients/masktool > $O/build_base.log 2>&1; echo "base built rc=$? at ${SECONDS}s" | tee -a $S
cp build-gpu/clients/masktool /tmp/mt_base
patch -s -p1 < .device/gb2.diff
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
if [ $trc = 0 ]; then
for rep in 1 2; do for v in base tree; do
  left 150 && timeout 40 /tmp/mt_$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 15 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$11,$13,$14,$15,$16}' >> $S
fi
echo "end at ${SECONDS}s" | tee -a $S
