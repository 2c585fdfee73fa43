#!/usr/bin/env bash
set -u
O=$OUT/sweep2; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for p in 8,24,64 8,16,64 8,12,64 8,8,64 8,6,64 8,12,32 8,12,16 4,12,32 8,8,16 4,8,32; do
  MASKD_PR_PARAMS=$p timeout 60 $B bench pipeline --backend cuda --size 1280x720 --frames 300 --inflight 1 --per-frame > $O/p_$p.json 2>/dev/null
  MASKD_PR_PARAMS=$p timeout 60 $B bench grabcut --backend cuda --sizes 320x180,416x416,640x480 --runs 30 --warmup 5 > $O/g_$p.json 2>/dev/null
  MASKD_PR_PARAMS=$p timeout 60 $B bench maxflow --backend cuda --runs 50 --warmup 5 > $O/m_$p.json 2>/dev/null
  python3 - $O $p <<'PY'
import json,sys
o,p=sys.argv[1],sys.argv[2]
d=json.load(open(f'{o}/p_{p}.json'))
line=[p]
for k,r in d['runs'].items():
    c=sorted(r['per_frame']['cut_ms']); n=len(c)
    line.append('%s e2e %.3f/%.3f cut %.3f/%.3f/%.3f m%.3f'%(k[-5:],r['e2e_ms']['p50'],r['e2e_ms']['p99'],c[n//2],c[int(.9*n)],c[int(.99*n)],sum(c)/n))
for x in json.load(open(f'{o}/g_{p}.json'))['results']:
    if x['op'] in ('grabcut','grabcut-cut'): line.append('%s %s %.0f r%d/%d'%(x['op'][-3:],x['size'],x['median_us'],x['rounds'],x['global_relabels']))
for x in json.load(open(f'{o}/m_{p}.json'))['results']:
    line.append('mf %s %.0f r%d/%d'%(x['size'],x['median_us'],x.get('rounds',-1),x.get('global_relabels',-1)))
print(' | '.join(line))
PY
done | tee $O/params.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/sweep2.tgz -C $OUT sweep2 && rm -rf $O
