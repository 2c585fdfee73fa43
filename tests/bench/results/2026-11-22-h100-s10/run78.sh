#!/usr/bin/env bash
# after the pass_end refactor: cuda suite, otb_man pipeline, maskd-otb, bench grabcut/maxflow once more
set -u
O=$OUT/${TAG:-otb}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs parity grabcut_cuda parity_guided yolo_parity maxflow_cuda decode_cuda segment_cuda masktool-segment-cuda > $O/test_cuda.log 2>&1; echo "cuda suite rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:" $O/test_cuda.log
MASKD_PR_TILE=32 timeout 200 meson test -C build-gpu --no-rebuild maxflow_cuda grabcut_cuda > $O/test_t32.log 2>&1; echo "t32 tests rc=$?"
timeout 200 meson test -C build-gpu --no-rebuild maskd-otb maskd-lost > $O/test_daemon.log 2>&1; echo "daemon otb/lost rc=$?"
grep -E "^ *[0-9]+/[0-9]+ " $O/test_daemon.log
$B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 100 > $O/gc.json 2>$O/gc.log
$B bench maxflow --backend cuda --runs 200 > $O/mf.json 2>$O/mf.log
python3 -c 'import json,sys
for f in sys.argv[1:]:
  for x in json.load(open(f))["results"]:
    if "warm" not in x["op"]: print(x["op"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' $O/gc.json $O/mf.json | tee $O/gc_summary.txt
for T in auto 32; do
  if [ $T = auto ]; then unset MASKD_PR_TILE; else export MASKD_PR_TILE=$T; fi
  timeout 100 $B bench pipeline --backend cuda --frames 600 --inflight 2 --per-frame --source "file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi" > $O/pf_otb_$T.json 2>$O/pf_otb_$T.log; echo "otb $T rc=$?"
done
unset MASKD_PR_TILE
python3 tests/bench/pf_summary.py $O/pf_otb_*.json | tee $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-otb}.tgz -C $OUT ${TAG:-otb} && rm -rf $O
