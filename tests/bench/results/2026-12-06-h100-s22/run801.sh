#!/usr/bin/env bash
# session 22, first call: the shared grid barrier (grid_barrier.cuh; session 21's untested diff, applied) in the
# max-flow and in grabcut_cuda.cu's cooperative kernels. The whole CUDA suite on the tree, then the kernels of HEAD
# (the max-flow's own barrier, cooperative groups in grabcut_cuda.cu) rebuilt beside it (.device/gb2.diff
# reversed), benches alternating, three runs each, with the stages; then ncu's time split of the guided filter's
# strip kernels at 1080p (tree).
set -u
O=/tmp/res/${TAG:-s22a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s22a}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test.log 2>&1; trc=$?
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
for rep in 1 2 3; do for v in base tree; do
  left 330 && timeout 40 /tmp/mt_$v bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm $v $O/mf_$v.$rep.json
  left 320 && timeout 60 /tmp/mt_$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$11,$13,$14,$15,$16}' >> $S
fi
left 400 && timeout 150 ncu --kernel-name regex:'coef_kernel|final_kernel|reduce_kernel|low_kernel|up4?_kernel' --launch-count 400 \
  --section SpeedOfLight /tmp/mt_tree bench guided --backend cuda --runs 4 --warmup 1 > $O/ncu_guided.txt 2>&1
grep -E "coef_kernel|final_kernel|reduce_kernel|low_kernel|up4?_kernel|Duration|Grid Size|Block Size" $O/ncu_guided.txt | head -60 > $O/ncu_guided_short.txt
head -60 $O/ncu_guided_short.txt >> $S
echo "end at ${SECONDS}s" | tee -a $S
