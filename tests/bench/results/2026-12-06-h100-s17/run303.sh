#!/usr/bin/env bash
# session 17, on the machine warm from run302 (build-gpu rebuilt from the tree): max-flow and GrabCut benches of the
# tree, and the relabel cap relative to the first relabel's reach (MASKD_PR_CAPREL, an experiment) at 25 / 50 / 100 %
# against none, two runs each, alternating
set -u
O=$OUT/${TAG:-cr}; mkdir -p $O
source .device/env.sh
[ -d build-gpu ] || OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1
git diff --stat HEAD > $O/tree.txt 2>/dev/null
touch kernels/cuda/*.cu kernels/cuda/*.cuh kernels/*.h; ninja -C build-gpu clients/masktool > $O/rebuild.log 2>&1; echo "rebuild rc=$?"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B=build-gpu/clients/masktool
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2; do for m in c0 r25 r50 r100; do
  e="MASKD_PR_CAPREL=0"; case $m in r*) e="MASKD_PR_CAPREL=${m#r}";; esac
  env $e timeout 60 $B bench grabcut --backend cuda --runs 30 --warmup 5 > $O/gc_$m.$rep.json 2>/dev/null
  env $e timeout 30 $B bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf_$m.$rep.json 2>/dev/null
  sm "$m" $O/gc_$m.$rep.json $O/mf_$m.$rep.json
done; done > $O/summary.txt
sort -k2,3 -k1,1 $O/summary.txt
tar czf $OUT/${TAG:-cr}.tgz -C $OUT ${TAG:-cr} && rm -rf $O
