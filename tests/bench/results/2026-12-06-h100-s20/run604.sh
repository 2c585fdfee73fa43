#!/usr/bin/env bash
# session 20, fourth call: warm solves on 16 x 16 tiles up to 640 pixels (kWarmTile16Max): maxflow_cuda and
# grabcut_cuda, then the GrabCut benches at 416x416 and 640x480 and the max-flow, three runs.
set -u
O=/tmp/res/${TAG:-s20d}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s20d}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 2 maxflow_cuda grabcut_cuda > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test.log | tee -a $S
M=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
for rep in 1 2 3; do
  left 230 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf.$rep.json 2>/dev/null && sm tree $O/mf.$rep.json
  left 220 && timeout 60 $M bench grabcut --backend cuda --sizes 416x416,640x480 --runs 20 --warmup 3 > $O/gc.$rep.json 2>/dev/null && sm tree $O/gc.$rep.json
done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$13,$14,$15,$16}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
