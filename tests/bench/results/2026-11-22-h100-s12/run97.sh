#!/usr/bin/env bash
# session 12 final, first call: the whole test suite (darknet reference carried, the clip not), guided bench x3
set -u
O=$OUT/${TAG:-final}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 450 meson test -C build-gpu --no-rebuild --print-errorlogs > $O/test_all.log 2>&1; echo "all tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ .*(FAIL|ERROR|TIMEOUT|SKIP)|Ok:|Fail:|Skipped:|Timeout:" $O/test_all.log
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2 3; do
  $B bench guided --backend cuda > $O/guided_$rep.json 2>$O/guided_$rep.log
  summ run$rep $O/guided_$rep.json
done | tee $O/guided_summary.txt
timeout 200 $B bench guided --backend cpu --sizes 1920x1080 > $O/guided_cpu.json 2>$O/guided_cpu.log; echo "cpu rc=$?"
summ cpu $O/guided_cpu.json | tee -a $O/guided_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-final}.tgz -C $OUT ${TAG:-final} && rm -rf $O
