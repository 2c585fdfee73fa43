#!/usr/bin/env bash
set -u
O=$OUT/diag; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
P="$B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame"
MASKD_DIAG_SPLIT=1 timeout 100 $P > $O/split.json 2>$O/split.log; echo "split rc=$?"
MASKD_DIAG_SPLIT=1 MASKD_DIAG_NOHASH=1 timeout 100 $P > $O/nohash.json 2>$O/nohash.log; echo "nohash rc=$?"
timeout 100 $P > $O/plain.json 2>$O/plain.log; echo "plain rc=$?"
python3 tests/bench/pf_summary.py $O/split.json $O/nohash.json $O/plain.json | tee $O/pf_summary.txt
for f in split nohash; do python3 - $O/$f.log <<'PY'
import sys,statistics as st
t=[];c=[]
for l in open(sys.argv[1]):
    if l.startswith("DIAG"):
        x=l.split(); t.append(float(x[2])); c.append(float(x[4]))
n=len(t)//2
for name,a,b in (("first",t[:n],c[:n]),("second",t[n:],c[n:])):
    if a: print(sys.argv[1].split('/')[-1],name,len(a),"tail p50",st.median(a),"copy p50",st.median(b),"copy p90",sorted(b)[int(.9*len(b))])
print([l.strip() for l in open(sys.argv[1]) if l.startswith("DIAG")][5])
PY
done
MASKD_MAXFLOW_PROFILE=1 timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 100 --inflight 1 > $O/prof.json 2>$O/prof.log; echo "prof rc=$?"
grep -v "^DIAG" $O/prof.log | tail -60 > $O/prof_tail.txt; wc -l $O/prof.log
rm -f $O/build.log $O/setup.log
tar czf $OUT/diag.tgz -C $OUT diag && rm -rf $O
