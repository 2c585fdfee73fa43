#!/usr/bin/env bash
# session 17, one call (run302 and run303 merged: the device time left allows one start): (1) a clean build of the
# tree (session 16's final code, the guided filter's fixed-point coefficient sums, the MASKD_PR_CAPREL switch) and
# the CUDA tests that need only images and grabcut data; (2) guided benches, three runs each, alternating: tree,
# tree with final_kernel at 6 blocks per SM, base (fx.diff reversed: session 16's guided kernels); ncu kernel times;
# (3) if time is left: max-flow and GrabCut with the relabel cap relative to the first relabel's reach (25 / 50 %)
# against none. Files go straight to $OUT (a timeout keeps what is there).
set -u
O=$OUT/${TAG:-one}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/build.log $O/setup.log
echo "built at ${SECONDS}s"
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 6 parity_guided guided segment_cuda maxflow_cuda grabcut_cuda parity > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
sed -i 's/__launch_bounds__(kStripThreads) final_kernel/__launch_bounds__(kStripThreads, 6) final_kernel/' kernels/cuda/guided_cuda.cu
ninja -C build-gpu clients/masktool > $O/rebuild6.log 2>&1; echo "v6 rebuild rc=$?"; cp build-gpu/clients/masktool /tmp/mt/v6
sed -i 's/__launch_bounds__(kStripThreads, 6) final_kernel/__launch_bounds__(kStripThreads) final_kernel/' kernels/cuda/guided_cuda.cu
patch -s -R -p1 < .device/fx.diff && ninja -C build-gpu clients/masktool > $O/rebuild.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s"; grep -c final_walk_fx kernels/cuda/guided_cuda.cu
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree v6; do
  left 480 && /tmp/mt/$v bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log && summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
echo "guided benches done at ${SECONDS}s"
sort -k2,4 -k1,1 $O/guided_summary.txt | grep -v fast
grep fast $O/guided_summary.txt | grep 1920 | sort -k1,1
for v in tree base; do
left 500 && timeout 60 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:"coef|final" --launch-skip 2 --launch-count 2 /tmp/mt/$v bench guided --backend cuda --sizes 1920x1080 --runs 5 --warmup 1 > $O/ncu_$v.txt 2>&1 && echo "ncu $v at ${SECONDS}s" && grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active|registers|warps_active" $O/ncu_$v.txt | sed -E 's/\(in_t.*//' | cut -c1-110
done
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in c0 r25 r50; do
  e="MASKD_PR_CAPREL=0"; case $m in r*) e="MASKD_PR_CAPREL=${m#r}";; esac
  left 540 && env $e timeout 20 /tmp/mt/tree bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null && sm "$m" $O/mf_$m.$rep.json
  left 520 && env $e timeout 40 /tmp/mt/tree bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$m.$rep.json 2>/dev/null && sm "$m" $O/gc_$m.$rep.json
done; done > $O/summary.txt
echo "max-flow done at ${SECONDS}s"
sort -k2,3 -k1,1 $O/summary.txt
