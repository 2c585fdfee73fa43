#!/usr/bin/env bash
# session 17, first call: session 16's final code (never run on a GPU) from a clean build: the CUDA tests that need
# only images and grabcut data; the baseline benches (guided 3 runs, grabcut and maxflow 2 runs); an opcode
# histogram of the guided kernels (SASS) for the next changes
set -u
O=$OUT/${TAG:-base}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 maxflow_cuda grabcut_cuda parity_guided guided segment_cuda parity gpu_lost > $O/test.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:" $O/test.log
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
sm() { python3 -c 'import json,sys
for f in sys.argv[2:]:
  for x in json.load(open(f))["results"]:
    print(sys.argv[1], x["op"], x["size"], "median", x["median_us"], "rounds", x.get("rounds"), "relabels", x.get("global_relabels"))' "$@"; }
for rep in 1 2 3; do
  build-gpu/clients/masktool bench guided --backend cuda --sizes 1280x720,1920x1080 > $O/guided.$rep.json 2>$O/guided.log
  summ tree $O/guided.$rep.json
done > $O/guided_summary.txt
sort -k2,4 $O/guided_summary.txt
for rep in 1 2; do
  timeout 60 build-gpu/clients/masktool bench grabcut --backend cuda --runs 30 --warmup 5 > $O/gc.$rep.json 2>/dev/null
  timeout 30 build-gpu/clients/masktool bench maxflow --backend cuda --runs 30 --warmup 5 > $O/mf.$rep.json 2>/dev/null
  sm tree $O/gc.$rep.json $O/mf.$rep.json
done > $O/summary.txt
sort -k2,3 $O/summary.txt
timeout 120 ncu --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active -k regex:"coef|final" --launch-skip 2 --launch-count 2 build-gpu/clients/masktool bench guided --backend cuda --sizes 1920x1080 --runs 5 --warmup 1 > $O/ncu.txt 2>&1; echo "ncu rc=$?"; grep -E "coef_kernel|final_kernel|duration|inst_executed|issue_active" $O/ncu.txt | cut -c1-150
obj=$(find build-gpu -name '*guided_cuda.cu.o' | head -1)
cuobjdump -sass "$obj" > /tmp/g.sass 2>/dev/null
python3 - /tmp/g.sass > $O/sass_hist.txt <<'PY'
import re, sys, collections
cur=None; h=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=re.search(r'Function : (\S+)', line)
    if m: cur=m.group(1); h[cur]=collections.Counter(); continue
    m=re.search(r'/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?', line)
    if m and cur: h[cur][m.group(2)]+=1
for f,c in h.items():
    print(f, sum(c.values())); print("   ", " ".join(f"{k}:{v}" for k,v in c.most_common()))
PY
grep -A1 -E "coef_kernel|final_kernel" $O/sass_hist.txt | cut -c1-600 | head -40
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-base}.tgz -C $OUT ${TAG:-base} && rm -rf $O
