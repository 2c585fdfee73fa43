#!/usr/bin/env bash
# rounds: push passes per relabel and margin; profiles with per-pass tile counts and per-relabel active pixels
set -u
O=$OUT/${TAG:-q}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for p in ${PS:-8,0,64 8,6,64 8,4,64 8,15,16 8,15,4 8,6,8}; do
  MASKD_PR_PARAMS=$p $B bench grabcut --backend cuda --sizes 416x416,640x480 --runs ${RUNS:-30} > $O/gc_$p.json 2>$O/gc_$p.log
  MASKD_PR_PARAMS=$p $B bench maxflow --backend cuda --runs 40 > $O/mf_$p.json 2>$O/mf_$p.log
  python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]+json.load(open(sys.argv[2]))["results"]
print(sys.argv[3], " ".join("%s:%s=%.0f(%s/%s)"%(x["op"].replace("grabcut","gc"),x["size"],x["median_us"],x.get("rounds"),x.get("global_relabels")) for x in r if "warm" not in x["op"]))' $O/gc_$p.json $O/mf_$p.json "$p"
done | tee $O/summary.txt
for p in ${PP:-8,0,64 8,6,64 8,15,8}; do
MASKD_PR_PARAMS=$p MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 416x416 --runs 2 --warmup 1 > /dev/null 2>$O/prof_$p.log
MASKD_PR_PARAMS=$p MASKD_MAXFLOW_PROFILE=1 $B bench maxflow --backend cuda --runs 2 --warmup 1 > /dev/null 2>$O/profmf_$p.log
done
${EXTRA:-true}
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-q}.tgz -C $OUT ${TAG:-q} && rm -rf $O
