#!/usr/bin/env bash
# session 17, after the fixed-point final kernel was dropped (the tree's guided code = df70867's, session 16's final
# form, never tested on a GPU): parity_guided, guided, segment_cuda; the opcode histograms of the r = 8 colour
# strip kernels (SASS) for the next session
set -u
O=$OUT/${TAG:-rv}; mkdir -p $O
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/build.log $O/setup.log
echo "built at ${SECONDS}s"
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 parity_guided guided segment_cuda > $O/test.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" $O/test.log
obj=$(find build-gpu -name 'guided_cuda.o' | head -1)
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
    if ('coef_kernel' in f or 'final_kernel' in f) and 'ILi3E' in f:
        print(f, sum(c.values())); print("   ", " ".join(f"{k}:{v}" for k,v in c.most_common()))
PY
cut -c1-700 $O/sass_hist.txt
