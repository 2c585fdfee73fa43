#!/usr/bin/env bash
# grid barrier cost; margin A/B (each setting twice, alternating)
set -u
O=$OUT/${TAG:-g}; mkdir -p $O
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
( cd .device/gs && /usr/local/cuda/bin/nvcc -O3 -arch=sm_90 -o gs gs.cu && ./gs ) 2>&1 | tee $O/gridsync.txt
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
for rep in 1 2; do for p in ${PS:-8,0,64 8,0,16 8,0,8 8,0,4}; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs ${RUNS:-40} > $O/gc_${p}_$rep.json 2>/dev/null
  MASKD_PR_PARAMS=$p $B bench maxflow --backend cuda --runs 60 > $O/mf_${p}_$rep.json 2>/dev/null
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"]) for x in r if "warm" not in x["op"]))' $O/gc_${p}_$rep.json $O/mf_${p}_$rep.json "$p #$rep"
done; done | tee $O/margin.txt
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-g}.tgz -C $OUT ${TAG:-g} && rm -rf $O
