#!/usr/bin/env bash
set -u
O=$OUT/sweep; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_720.json 2>$O/pf_720.log; echo "720 rc=$?"
timeout 100 $B bench pipeline --backend cuda --size 1920x1080 --frames 600 --inflight 2 --per-frame > $O/pf_1080.json 2>$O/pf_1080.log; echo "1080 rc=$?"
python3 tests/bench/pf_summary.py $O/pf_720.json $O/pf_1080.json | tee $O/pf_summary.txt
for p in 8,24,64 4,24,64 16,24,64 8,12,64 8,48,64 8,24,16 8,24,256 2,24,64; do
  MASKD_PR_PARAMS=$p timeout 60 $B bench pipeline --backend cuda --size 1280x720 --frames 300 --inflight 1 --per-frame > $O/p_$p.json 2>/dev/null
  python3 - $O/p_$p.json $p <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d['runs'].items():
    c=sorted(r['per_frame']['cut_ms']); n=len(c)
    print(sys.argv[2],k,'fps',r['fps'],'e2e p50',r['e2e_ms']['p50'],'p99',r['e2e_ms']['p99'],'cut p50 %.3f p90 %.3f p99 %.3f mean %.3f'%(c[n//2],c[int(.9*n)],c[int(.99*n)],sum(c)/n))
PY
done | tee $O/params.txt
MASKD_MAXFLOW_PROFILE=1 $B bench grabcut --backend cuda --sizes 320x180,320x240,416x416 --runs 50 --warmup 10 > $O/gc_small.json 2>$O/gc_small_prof.log; echo "gc rc=$?"
python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for x in d["results"]: print({k:v for k,v in x.items() if not isinstance(v,(list,dict))})' $O/gc_small.json | tee $O/gc_small.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/sweep.tgz -C $OUT sweep && rm -rf $O
