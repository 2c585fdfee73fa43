#!/usr/bin/env bash
# session 18, second call: the final tree (the guided filter back to HEAD's; cold max-flow solves on 16 x 16 tiles
# up to 640 pixels): a clean build, the CUDA tests; max-flow and GrabCut tree against base (.device/s18b.diff
# reversed), three runs each, alternating; MASKD_PR_PARAMS variants of the tree at 640x480 (cold max-flow, 5
# iterations); the CPU reference's GrabCut if time is left. One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s18b}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s18b}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 6 parity_guided guided segment_cuda maxflow_cuda grabcut_cuda parity > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log | tee -a $S
grep -B2 -A30 "FAIL\|ERROR" $O/test.log | head -60 >> $S
mkdir -p /tmp/mt && cp build-gpu/clients/masktool /tmp/mt/tree
patch -s -R -p1 < .device/s18b.diff && ninja -C build-gpu clients/masktool > $O/rebuild_base.log 2>&1; echo "base rebuild rc=$? at ${SECONDS}s" | tee -a $S
grep -c kColdTile16Max kernels/cuda/maxflow_cuda.cu >> $S
cp build-gpu/clients/masktool /tmp/mt/base
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "energy", x.get("energy"), "flow", x.get("flow"))' "$@"; }
for rep in 1 2 3; do for v in tree base; do
  left 330 && timeout 25 /tmp/mt/$v bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "$v" $O/mf_$v.$rep.json
  left 320 && timeout 45 /tmp/mt/$v bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "$v" $O/gc_$v.$rep.json
done; done > $O/mf_summary.txt
echo "max-flow done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/mf_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$11,$13}' >> $S
for p in 8,0,8 8,12,8 8,16,8 8,30,8 6,0,8 12,0,8 16,0,8 8,0,4 8,0,16 8,0,8,4 8,0,8,12 8,0,8,0,64 8,0,8,0,160 8,0,8,0,-1; do
  left 470 && MASKD_PR_PARAMS=$p timeout 25 /tmp/mt/tree bench maxflow --backend cuda --runs 30 --warmup 5 > $O/p_$p.json 2>/dev/null && sm "p=$p" $O/p_$p.json
  left 460 && MASKD_PR_PARAMS=$p timeout 30 /tmp/mt/tree bench grabcut --backend cuda --sizes 640x480 --runs 15 --warmup 3 > $O/pg_$p.json 2>/dev/null && sm "p=$p" $O/pg_$p.json
done > $O/params_summary.txt
echo "params done at ${SECONDS}s" | tee -a $S
awk '{print $1,$2,$3,$5,$7,$9}' $O/params_summary.txt | sort -k2,3 -k4,4n >> $S
left 500 && timeout 80 /tmp/mt/tree bench grabcut --backend cpu --sizes 416x416,640x480 --runs 3 --warmup 1 > $O/gc_cpu.json 2>/dev/null && sm cpu $O/gc_cpu.json | awk '{print $1,$2,$3,$5}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
