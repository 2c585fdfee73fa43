#!/usr/bin/env bash
# session 15, final code (later rounds at most 8 push passes): the CUDA and daemon suites with the clip (the Darknet
# reference not carried: the tests that need it skip); bench grabcut / maxflow twice, the CPU reference once
set -u
O=$OUT/${TAG:-fin}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
B=build-gpu/clients/masktool
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda --suite daemon --num-processes 8 > $O/test.log 2>&1; echo "cuda+daemon rc=$?"
grep -E "Ok:|Fail:|Skipped:|Timeout:" $O/test.log
grep -E "^ *[0-9]+/[0-9]+ " $O/test.log | grep -v " OK " | head
cp build-gpu/meson-logs/testlog.txt $O/testlog.txt
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["backend"] if "backend" in x else "", x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' "$@"; }
for rep in 1 2; do
  timeout 40 $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480,1280x720 --runs 60 --warmup 5 > $O/gc$rep.json 2>/dev/null
  timeout 30 $B bench maxflow --backend cuda --runs 60 --warmup 5 > $O/mf$rep.json 2>/dev/null
  summ "r$rep" $O/gc$rep.json $O/mf$rep.json
done > $O/summary.txt
timeout 60 $B bench grabcut --backend cpu --sizes 416x416,640x480 --runs 3 --warmup 0 > $O/gc_cpu.json 2>/dev/null
summ cpu $O/gc_cpu.json >> $O/summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fin}.tgz -C $OUT ${TAG:-fin} && rm -rf $O
