#!/usr/bin/env bash
set -u
O=$OUT/gv4; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda parity > $O/test_some.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_some.log
for v in default v3 v4-16 default; do
  if [ $v = default ]; then unset MASKD_GUIDED_STRIP; else export MASKD_GUIDED_STRIP=$v; fi
  $B bench guided --backend cuda > $O/guided_$v.json 2>$O/guided_$v.log
  python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["results"]:
  if x["variant"].startswith("full"): print(sys.argv[2], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' $O/guided_$v.json $v
done | tee $O/guided_summary.txt
unset MASKD_GUIDED_STRIP
timeout 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats -k regex:"coef|final" --launch-skip 2 --launch-count 2 $B bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $O/ncu_v4.txt 2>&1; echo "ncu rc=$?"
grep -E "coef|final|Duration|Registers Per|Achieved Occ|Theoretical Occ|Memory Throughput|Compute \(SM\)|Block Size|Grid Size|Shared Memory Config|Dynamic Shared" $O/ncu_v4.txt | head -60
rm -f $O/build.log $O/setup.log
tar czf $OUT/gv4.tgz -C $OUT gv4 && rm -rf $O
