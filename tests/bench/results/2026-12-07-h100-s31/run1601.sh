#!/usr/bin/env bash
# session 31, call 1: stage_in's edge gather through row_px::fetch (session 30's gather-unrun.diff, applied in the
# tree): the whole CUDA suite; the 1920x1080 outputs of four masktool guided runs against 64f504b (the diff
# reversed), byte for byte; bench guided 720p + 1080p, three runs round-robin.
set -u
T=${TAG:-s31a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { cp $S $O/ 2>/dev/null; tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 240 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_tree.log 2>&1
echo "tree suite rc=$?: $(grep -E "Ok:|Fail:|Timeout:" $O/test_tree.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_tree.log | tee -a $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
patch -s -R -p1 < .device/var31/gather.diff || echo "base: patch failed" | tee -a $S
ninja -C build-gpu clients/masktool > $O/build_base.log 2>&1; grep -E "error|warning" $O/build_base.log | head -5 | tee -a $S
cp build-gpu/clients/masktool /tmp/bin/base
patch -s -p1 < .device/var31/gather.diff
echo "base built at ${SECONDS}s" | tee -a $S
V=.device/var
for b in tree base; do
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_gray.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o1_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o2_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-2 --mask soft -o /tmp/o3_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --gray --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o4_$b.f32 > /dev/null 2>> $O/cmp.err
  for k in 1 2 3 4; do
    [ $b = tree ] && { echo "o$k tree $(md5sum < /tmp/o${k}_tree.f32 | cut -c1-12) $(stat -c %s /tmp/o${k}_tree.f32)" | tee -a $S; continue; }
    cmp -s /tmp/o${k}_tree.f32 /tmp/o${k}_$b.f32 && echo "o$k $b identical to tree" | tee -a $S || echo "o$k $b DIFFERS" | tee -a $S
  done
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in base tree; do
  left 420 && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
