#!/usr/bin/env bash
# session 20, third call: with the claimed visits (2b1198b), the tile side again: the default (16 x 16 for cold
# solves up to 640 pixels and warm ones up to 512, else 32 x 32) against MASKD_PR_TILE=16 everywhere, same binary
# (both kernels are in it; the switch only picks one), alternating, three runs each.
set -u
O=/tmp/res/${TAG:-s20c}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s20c}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
M=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
for rep in 1 2 3; do for v in def t16; do
  if [ $v = t16 ]; then export MASKD_PR_TILE=16; else unset MASKD_PR_TILE; fi
  left 300 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "$v" $O/mf_$v.$rep.json
  left 280 && timeout 60 $M bench grabcut --backend cuda --sizes 640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "$v" $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
echo "benches done at ${SECONDS}s" | tee -a $S
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9,$16}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
