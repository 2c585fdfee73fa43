#!/usr/bin/env bash
# session 12: the max-flow kernel with a grid barrier after each global relabel (the race synccheck found):
# synccheck, the CUDA GrabCut/max-flow tests, the u2 trio 25 times without CUDA_LAUNCH_BLOCKING, bench grabcut/maxflow
set -u
O=$OUT/${TAG:-fx}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd build-gpu/tests
for t in "test_segment cuda" "test_grabcut_cuda"; do
  n=${t%% *}
  timeout 150 $CS --tool synccheck --print-limit 10 ./$t > $O/synccheck_$n.log 2>&1; echo "synccheck $n rc=$?"
  grep -E "ERROR SUMMARY|Barrier error|at void" $O/synccheck_$n.log | sort | uniq -c | head -6
done)
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs grabcut_cuda > $O/test_gc.log 2>&1; echo "grabcut_cuda rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_gc.log
for i in $(seq 1 25); do
  timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided segment_cuda masktool-segment-cuda > $O/trio_$i.log 2>&1; echo "trio $i rc=$?"
  grep -hE "illegal|differ" $O/trio_$i.log | head -2
done | tee $O/summary.txt | grep -v "rc=0"
echo "trio failures: $(grep -c 'rc=[^0]' $O/summary.txt) of 25"
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
$B bench grabcut --backend cuda --sizes 416x416,640x480 --runs 100 > $O/gc.json 2>/dev/null
$B bench maxflow --backend cuda --runs 200 > $O/mf.json 2>/dev/null
summ fixed $O/gc.json $O/mf.json | tee $O/gc_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fx}.tgz -C $OUT ${TAG:-fx} && rm -rf $O
