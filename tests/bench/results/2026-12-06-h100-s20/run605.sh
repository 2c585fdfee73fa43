#!/usr/bin/env bash
# session 20, a fifth call written and NOT run (too little device time was left to start a machine): sweeps per
# visit again with the claimed visits, one binary, MASKD_PR_PARAMS 6 / 8 (default) / 12 sweeps, two runs each
# alternating.
set -u
O=/tmp/res/${TAG:-s20f}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s20f}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
M=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for v in 8 6 12; do
  export MASKD_PR_PARAMS=$v,0,8
  left 150 && timeout 30 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm "s$v" $O/mf_$v.$rep.json
  left 140 && timeout 40 $M bench grabcut --backend cuda --sizes 416x416,640x480 --runs 15 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm "s$v" $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt | awk '{print $1,$2,$3,$5,$7,$9}' >> $S
echo "end at ${SECONDS}s" | tee -a $S
