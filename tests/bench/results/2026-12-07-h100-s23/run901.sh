#!/usr/bin/env bash
# session 23, first call: the max-flow on 8 x 8 tiles (MASKD_PR_TILE=8, 64 threads and 8 blocks per SM) against the
# default tiles (16 x 16 up to 640 px), and 8 x 8 with 4 sweeps per visit (t8s4), one binary: the maxflow and grabcut CUDA tests with 8 x 8 tiles, the
# profile of one 640x480 solve each, then bench maxflow / grabcut (320x240, 416x416, 640x480) alternating, two runs each;
# last, ncu's source counters of the guided filter's strip kernels (colour 1080p).
set -u
O=/tmp/res/${TAG:-s23a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s23a}.tgz --exclude="*.ncu-rep" -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
M=build-gpu/clients/masktool
MASKD_PR_TILE=8 timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_t8.log 2>&1
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_t8.log | tee -a $S
echo "tests at ${SECONDS}s" | tee -a $S
for v in t16 t8; do
  unset MASKD_PR_TILE; [ $v = t8 ] && export MASKD_PR_TILE=8
  MASKD_MAXFLOW_PROFILE=1 timeout 60 $M bench maxflow --backend cuda --runs 3 --warmup 1 > $O/prof_$v.json 2> $O/prof_$v.log
  grep "per block us" $O/prof_$v.log | tail -1 | sed "s/^/$v /" | cut -c1-400 >> $S
done
unset MASKD_PR_TILE
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
for rep in 1 2; do for v in t16 t8 t8s4; do
  unset MASKD_PR_TILE MASKD_PR_PARAMS; [ $v != t16 ] && export MASKD_PR_TILE=8
  [ $v = t8s4 ] && export MASKD_PR_PARAMS=4,0,8
  left 300 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm $v $O/mf_$v.$rep.json
  left 290 && timeout 60 $M bench grabcut --backend cuda --sizes 320x240,416x416,640x480 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
unset MASKD_PR_TILE MASKD_PR_PARAMS
sort -k2,3 -k1,1 $O/bench_summary.txt >> $S
echo "benches at ${SECONDS}s" | tee -a $S
if left 200; then
  timeout 120 ncu --clock-control none --kernel-name regex:"coef_kernel|final_kernel" --launch-skip 40 --launch-count 2 \
    --set full --import-source yes -o $O/guided_src $M bench guided --sizes 1920x1080 --runs 200 --warmup 5 > $O/ncu_run.log 2>&1
  tail -3 $O/ncu_run.log >> $S
  timeout 30 ncu -i $O/guided_src.ncu-rep --page source --csv --print-source sass > $O/guided_sass.csv 2> $O/ncu_src.err
  timeout 30 ncu -i $O/guided_src.ncu-rep --page details --csv > $O/guided_details.csv 2>> $O/ncu_src.err
  ls -la $O/guided_* >> $S; tail -2 $O/ncu_src.err >> $S
fi
echo "end at ${SECONDS}s" | tee -a $S
