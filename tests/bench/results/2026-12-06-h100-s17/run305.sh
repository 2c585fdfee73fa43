#!/usr/bin/env bash
# session 17: the fixed-point final kernel again (run304: +6 µs colour, +7 µs grey at 1080p against base): its block
# maxima now read in one round trip (uint2, unrolled); tree, tree with final_kernel's bands planned for 4 blocks per
# SM (MASKD_GUIDED_FINAL_BPS=4), base (fx2.diff reversed: session 16's guided code), three runs each, alternating;
# ncu kernel times of tree and base. One tarball back.
set -u
O=$OUT/${TAG:-fx2}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/build.log $O/setup.log
echo "built at ${SECONDS}s"
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 parity_guided guided segment_cuda > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
patch -s -R -p1 < .device/fx2.diff && ninja -C build-gpu clients/masktool > $O/rebuild.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s"; grep -c final_walk_fx kernels/cuda/guided_cuda.cu
cp build-gpu/clients/masktool /tmp/mt/base
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do for v in base tree t4; do
  b=$v; e=MASKD_GUIDED_FINAL_BPS=0; [ $v = t4 ] && b=tree && e=MASKD_GUIDED_FINAL_BPS=4
  env $e /tmp/mt/$b bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided_$v.$rep.json 2>>$O/guided.log && summ $v $O/guided_$v.$rep.json
done; done > $O/guided_summary.txt
echo "guided benches done at ${SECONDS}s"
sort -k2,4 -k1,1 $O/guided_summary.txt | grep -v fast | grep full | awk '{print $1,$3,$4,$6}' | paste -d' ' - - - - - - - - -
command -v ncu || ls /usr/local/cuda/bin/ncu* 2>&1 | head -2
for v in tree base; do
timeout 60 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size -k regex:"coef|final" --launch-skip 2 --launch-count 2 /tmp/mt/$v bench guided --backend cuda --sizes 1920x1080 --runs 5 --warmup 1 > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$? at ${SECONDS}s"
grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active|registers|warps_active|grid_size" $O/ncu_$v.txt | sed -E 's/\(in_t.*//; s/  +/ /g' | cut -c1-100
done
tar czf $OUT/${TAG:-fx2}.tgz -C $OUT ${TAG:-fx2} && rm -rf $O
