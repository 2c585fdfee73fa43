#!/usr/bin/env bash
# session 16, last call: capped relabels (MASKD_PR_CAP 0 / 64 / 96) at every benchmark size, alternating, two runs
# each; 16 x 16 tiles forced at 640x480 and 1280x720 once more; the guided benchmark of the final kernels
set -u
O=$OUT/${TAG:-fin}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"), "stages", x.get("stages_us"))' "$@"; }
for rep in 1 2; do for m in c0 c64 c96 t16; do
  e="MASKD_PR_CAP=0"; case $m in c*) e="MASKD_PR_CAP=${m#c}";; t16) e="MASKD_PR_TILE=16";; esac
  sz=320x180,416x416,640x480,1280x720; [ $m = t16 ] && sz=640x480,1280x720
  env $e timeout 60 $B bench grabcut --backend cuda --sizes $sz --runs 30 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  env $e timeout 30 $B bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  sm "$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done > $O/summary.txt
sort -k2,3 -k1,1 $O/summary.txt | awk '{print $1,$2,$3,$5}'
$B bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided.json 2>/dev/null
python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["results"]: print(x["variant"], x["src_format"], x["size"], "median", x["median_us"], "pipelined", x["pipelined_us"])' $O/guided.json
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-fin}.tgz -C $OUT ${TAG:-fin} && rm -rf $O
