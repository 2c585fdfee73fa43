#!/usr/bin/env bash
# session 18, one call: (1) a clean build of the tree (final_kernel with 8 columns per lane at r = 8; cold max-flow
# solves on 16 x 16 tiles at every size) and the CUDA tests; (2) guided benches, three runs each, alternating:
# base (.device/s18.diff reversed: HEAD's kernels), tree, w3 (tree with the wide final_kernel at 3 blocks per SM);
# ncu kernel times; (3) max-flow and GrabCut, tree against base, two runs each. Everything goes into one tarball
# and summary.txt (the files that come back from a call are few).
set -u
O=/tmp/res/${TAG:-s18}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s18}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 6 parity_guided guided segment_cuda maxflow_cuda grabcut_cuda parity > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log | tee -a $S
grep -B2 -A30 "FAIL\|ERROR" $O/test.log | head -60 >> $S
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
sed -i 's/const int kFinalWideBlocks = 0;/const int kFinalWideBlocks = 3;/' kernels/cuda/guided_cuda.cu
ninja -C build-gpu clients/masktool > $O/rebuild_w3.log 2>&1; echo "w3 rebuild rc=$?" | tee -a $S; cp build-gpu/clients/masktool /tmp/mt/w3
sed -i 's/const int kFinalWideBlocks = 3;/const int kFinalWideBlocks = 0;/' kernels/cuda/guided_cuda.cu
patch -s -R -p1 < .device/s18.diff && ninja -C build-gpu clients/masktool > $O/rebuild_base.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s" | tee -a $S
grep -c kFinalLaneCols kernels/cuda/guided_cuda.cu >> $S
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree w3; do
  left 330 && /tmp/mt/$v bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log && summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
echo "guided benches done at ${SECONDS}s" | tee -a $S
sort -k2,4 -k1,1 $O/guided_summary.txt | grep -v fast | awk '{print $1,$2,$3,$4,$6}' >> $S
grep fast $O/guided_summary.txt | grep 1920 | sort -k1,1 | awk '{print $1,$2,$3,$4,$5,$7}' >> $S
for v in tree base; do
left 380 && timeout 45 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:"coef|final" --launch-skip 4 --launch-count 4 /tmp/mt/$v bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 2 > $O/ncu_$v.txt 2>&1 && echo "ncu $v at ${SECONDS}s" >> $S && grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active|registers|warps_active" $O/ncu_$v.txt | sed -E 's/\(in_t.*//' | cut -c1-110 >> $S
done
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "energy", x.get("energy"), "flow", x.get("flow"))' "$@"; }
for rep in 1 2; do for v in tree base; do
  left 520 && timeout 25 /tmp/mt/$v bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "$v" $O/mf_$v.$rep.json
  left 500 && timeout 45 /tmp/mt/$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "$v" $O/gc_$v.$rep.json
done; done > $O/mf_summary.txt
echo "max-flow done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/mf_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$11,$13}' >> $S
