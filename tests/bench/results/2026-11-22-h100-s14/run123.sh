#!/usr/bin/env bash
# session 14: the whole test suite (the Darknet reference but yolo-fastest-1.1-coco carried, the clip not: 64 MiB), the guided benchmark (CUDA three times, the CPU reference once), final code
set -u
O=$OUT/${TAG:-fin}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 470 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 8 > $O/test.log 2>&1; echo "whole suite rc=$?"
grep -E "Ok:|Fail:|Skipped:|Timeout:|SKIP|FAIL" $O/test.log | head -20
cp build-gpu/meson-logs/testlog.txt $O/testlog.txt
grep -E "after the fault|mk_gpu_lost:|maskd log:" $O/testlog.txt | head -12
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do build-gpu/clients/masktool bench guided --backend cuda > $O/guided_$rep.json 2>/dev/null; summ r$rep $O/guided_$rep.json; done > $O/guided_summary.txt
sort -k2,5 $O/guided_summary.txt | awk '{print $2,$3,$4,$6}' | paste - - - | awk '{print $1,$2,$3,$4,$8,$12}'
build-gpu/clients/masktool bench guided --backend cpu --sizes 1920x1080 --runs 3 --warmup 1 > $O/guided_cpu.json 2>/dev/null; summ cpu $O/guided_cpu.json | tee -a $O/guided_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fin}.tgz -C $OUT ${TAG:-fin} && rm -rf $O
