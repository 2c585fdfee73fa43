#!/usr/bin/env bash
# session 16, final code (relabel cap as a solver parameter, 96 by default on 16 x 16 tiles; guided window sums):
# the max-flow, GrabCut, guided and segmentation tests on the GPU; bench grabcut at the small sizes with the defaults
set -u
O=$OUT/${TAG:-fin2}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 maxflow_cuda grabcut_cuda parity_guided segment_cuda guided maxflow grabcut > $O/test.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log
B=build-gpu/clients/masktool
timeout 60 $B bench grabcut --backend cuda --sizes 320x180,416x416 --runs 30 --warmup 5 > $O/gc.json 2>/dev/null
python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["results"]: print(x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' $O/gc.json
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fin2}.tgz -C $OUT ${TAG:-fin2} && rm -rf $O
