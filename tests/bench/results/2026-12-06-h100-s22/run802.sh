#!/usr/bin/env bash
# session 22, second call (run801 never got a machine; this adds the guided filter's float solve):
# the tree = the shared grid barrier (grid_barrier.cuh; also in grabcut_cuda.cu's cooperative kernels) + the guided
# filter's solve in float with Kahan minors on both backends. The whole CUDA suite on the tree; then HEAD's kernels
# rebuilt beside it (.device/all.diff reversed), benches alternating (grabcut/maxflow: the barrier; guided: the
# solve), with the stages; then ncu's time split of the guided filter's kernels (tree).
set -u
O=/tmp/res/${TAG:-s22b}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s22b}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test.log 2>&1; trc=$?
echo "tests rc=$trc at ${SECONDS}s" | tee -a $S; grep -E "^ *[0-9]+/[0-9]+ " $O/test.log | tee -a $S
grep -hE "guided parity|guided:|CUDA vs CPU|max \|" build-gpu/meson-logs/testlog.txt | head -20 > $O/guided_parity.txt
cp build-gpu/clients/masktool /tmp/mt_tree
patch -s -R -p1 < .device/all.diff && ninja -C build-gpu clients/masktool > $O/build_base.log 2>&1; echo "base built rc=$? at ${SECONDS}s" | tee -a $S
cp build-gpu/clients/masktool /tmp/mt_base
patch -s -p1 < .device/all.diff
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
gm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], "guided", x.get("size"), x.get("src_format")+"/"+x.get("variant"), "median", x["median_us"], "pipelined", x.get("pipelined_us"))' "$@"; }
if [ $trc = 0 ]; then
for rep in 1 2; do for v in base tree; do
  left 300 && timeout 40 /tmp/mt_$v bench guided --backend cuda > $O/gf_$v.$rep.json 2>/dev/null && gm $v $O/gf_$v.$rep.json
  left 300 && timeout 40 /tmp/mt_$v bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm $v $O/mf_$v.$rep.json
  left 290 && timeout 60 /tmp/mt_$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt >> $S
fi
left 330 && timeout 70 ncu --kernel-name regex:'coef_kernel|final_kernel' --launch-count 40 \
  --section SpeedOfLight --section LaunchStats --section Occupancy /tmp/mt_tree bench guided --backend cuda --runs 4 --warmup 1 > $O/ncu_guided.txt 2>&1
grep -E "^  [a-z_]+kernel|Duration|Grid Size|Registers Per|Achieved Occ" $O/ncu_guided.txt | head -80 > $O/ncu_guided_short.txt
echo "end at ${SECONDS}s" | tee -a $S
