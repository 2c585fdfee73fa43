#!/usr/bin/env bash
# session 17: (1) session 16's final code and the fixed-point coefficient sums of the full guided filter (the tree)
# from a clean build: the CUDA tests that need only images and grabcut data; (2) guided benches, three runs each,
# alternating: tree, tree with final_kernel at 6 blocks per SM (launch bounds), base (fx.diff reversed: session 16's
# kernels); ncu kernel times of each
set -u
O=$OUT/${TAG:-fx}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 parity_guided guided segment_cuda maxflow_cuda grabcut_cuda parity gpu_lost > $O/test.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
sed -i 's/__launch_bounds__(kStripThreads) final_kernel/__launch_bounds__(kStripThreads, 6) final_kernel/' kernels/cuda/guided_cuda.cu
ninja -C build-gpu clients/masktool > $O/rebuild6.log 2>&1; echo "v6 rebuild rc=$?"; cp build-gpu/clients/masktool /tmp/mt/v6
sed -i 's/__launch_bounds__(kStripThreads, 6) final_kernel/__launch_bounds__(kStripThreads) final_kernel/' kernels/cuda/guided_cuda.cu
patch -s -R -p1 < .device/fx.diff && ninja -C build-gpu clients/masktool > $O/rebuild.log 2>&1; echo "base rebuild rc=$?"; grep -c final_walk_fx kernels/cuda/guided_cuda.cu
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree v6; do
  /tmp/mt/$v bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>$O/guided_$v.log
  summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
sort -k2,4 -k1,1 $O/guided_summary.txt | grep -v fast
grep fast $O/guided_summary.txt | grep 1920 | sort -k1,1
for v in base tree v6; do
timeout 100 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:"coef|final" --launch-skip 2 --launch-count 2 /tmp/mt/$v bench guided --backend cuda --sizes 1920x1080 --runs 5 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active|registers|warps_active" $O/ncu_$v.txt | sed -E 's/\(in_t.*//' | cut -c1-110
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fx}.tgz -C $OUT ${TAG:-fx} && rm -rf $O
