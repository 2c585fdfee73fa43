#!/usr/bin/env bash
# session 15: 16 x 16 max-flow tiles at 3 blocks per SM (tree, 80 registers) and 4 (v4, 64) against 2 (base, 128)
set -u
O=$OUT/${TAG:-mb}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for v in base v4; do
  mkdir -p /tmp/$v && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/$v/ && ln -sfn $PWD/.device /tmp/$v/.device
  (cd /tmp/$v && patch -s -R -p1 < .device/mb3.diff)
  [ $v = v4 ] && sed -i 's/const int kMinBlocks = kTile == 32 ? 1 : 2; /const int kMinBlocks = kTile == 32 ? 1 : 4; /' /tmp/$v/kernels/cuda/maxflow_pr.cuh
  grep -h "const int kMinBlocks" /tmp/$v/kernels/cuda/maxflow_pr.cuh
  (cd /tmp/$v && mkdir -p $O/$v && OUT=$O/$v bash tests/bench/device.sh none > $O/$v/build.txt 2>&1; echo "$v build rc=$?"; rm -f $O/$v/build.log $O/$v/setup.log)
done
grep -h "const int kMinBlocks" kernels/cuda/maxflow_pr.cuh
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test.log 2>&1; echo "tests rc=$?"
(cd /tmp/v4 && timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs maxflow_cuda grabcut_cuda > $O/test_v4.log 2>&1; echo "tests v4 rc=$?")
summ() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    if "warm" in x["op"]: continue
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2 3; do for v in base tree v4; do
  b=$B; [ $v = tree ] || b=/tmp/$v/$B
  timeout 40 $b bench grabcut --backend cuda --sizes 320x180,416x416 --runs 60 --warmup 5 > $O/gc_$v$rep.json 2>/dev/null
  summ "$v" $O/gc_$v$rep.json
done; done | tee $O/summary.txt | sort -k2,3 -k1,1
for v in base tree v4; do
  b=$B; [ $v = tree ] || b=/tmp/$v/$B
  MASKD_MAXFLOW_PROFILE=1 timeout 30 $b bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2> $O/prof_$v.log
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-mb}.tgz -C $OUT ${TAG:-mb} && rm -rf $O
