#!/usr/bin/env bash
# session 14: batched flag exchanges in wake, pass counters by atomics (tree) against HEAD (base); exactness tests,
# bench grabcut / maxflow twice each, alternating; a profile of each
set -u
O=$OUT/${TAG:-wb}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  (cd /tmp/$v && patch -s -R -p1 < .device/wake_batch.diff)
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
grep -c "old\[b\] = want" /tmp/base/kernels/cuda/maxflow_pr.cuh kernels/cuda/maxflow_pr.cuh
timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test.log 2>&1; echo "tests rc=$?"
MASKD_PR_TILE=16 timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test16.log 2>&1; echo "tests tile 16 rc=$?"
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for v in base tree; do
  b=$B; [ $v = tree ] || b=/tmp/$v/$B
  $b bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 60 --warmup 5 > $O/gc_$v$rep.json 2>/dev/null
  $b bench maxflow --backend cuda --runs 60 --warmup 5 > $O/mf_$v$rep.json 2>/dev/null
  summ "$v" $O/gc_$v$rep.json $O/mf_$v$rep.json
done; done | tee $O/summary.txt | sort -k2,3 -k1,1
for v in base tree; do
  b=$B; [ $v = tree ] || b=/tmp/$v/$B
  MASKD_MAXFLOW_PROFILE=1 $b bench grabcut --backend cuda --sizes 416x416 --runs 1 --warmup 0 > /dev/null 2>$O/prof_$v.log
  grep -o "per block us.*" $O/prof_$v.log | head -2
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-wb}.tgz -C $OUT ${TAG:-wb} && rm -rf $O
