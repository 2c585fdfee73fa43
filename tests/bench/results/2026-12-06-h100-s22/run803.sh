#!/usr/bin/env bash
# session 22, third call: the max-flow's grid size and a backoff in its grid barrier's wait, measuring aids read by
# mk_pr_create: MASKD_PR_GRID_PCT=P runs P % of the co-resident blocks (16 x 16 tiles: 2 per SM; 32 x 32: 1 per
# SM); MASKD_PR_BACKOFF=N sleeps N ns between polls. One binary, alternating g100 (neither), g50, b100, b400, two
# runs each.
set -u
O=/tmp/res/${TAG:-s22c}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s22c}.tgz -C /tmp/res . ; }
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
    st=x.get("stages_us",{})
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "flow", x.get("flow"), "stages", st.get("kmeans"), st.get("gmm"), st.get("graph"), st.get("maxflow"))' "$@"; }
for rep in 1 2; do for v in g100 g50 b100 b400; do
  unset MASKD_PR_GRID_PCT MASKD_PR_BACKOFF
  case $v in g50) export MASKD_PR_GRID_PCT=50;; b*) export MASKD_PR_BACKOFF=${v#b};; esac
  left 170 && timeout 40 $M bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$v.$rep.json 2>/dev/null && sm $v $O/mf_$v.$rep.json
  left 160 && timeout 60 $M bench grabcut --backend cuda --sizes 416x416,640x480,1280x720 --runs 20 --warmup 3 > $O/gc_$v.$rep.json 2>/dev/null && sm $v $O/gc_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,3 -k1,1 $O/bench_summary.txt >> $S
echo "end at ${SECONDS}s" | tee -a $S
