#!/usr/bin/env bash
# session 23, second call: coef_kernel asks L2 for its band's input rows at the start (prefetch.global.L2, the tree)
# against HEAD's kernels (the tree's guided_cuda.cu diff reversed, .device/guided_prefetch.diff) and against the tree
# (W8=1) with final_kernel's warm-up unrolled 8 rows (140 registers): parity_guided on the tree, then bench guided 1080p and
# 720p alternating, three runs each.
set -u
O=/tmp/res/${TAG:-s23b}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s23b}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test.log 2>&1
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test.log | tee -a $S
patch -s -R -p1 < .device/guided_prefetch.diff && ninja -C build-gpu clients/masktool > $O/build_base.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/base
patch -s -p1 < .device/guided_prefetch.diff
[ "${W8:-0}" = 1 ] && sed -i 's/^#define MK_GUIDED_WARM_FINAL 4$/#define MK_GUIDED_WARM_FINAL 8/' kernels/cuda/guided_cuda.cu &&
  ninja -C build-gpu clients/masktool > $O/build_w8.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/w8
echo "variants at ${SECONDS}s: $(ls /tmp/bin)" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in base tree w8; do
  left 150 && [ -x /tmp/bin/$v ] && timeout 60 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,2 -k4,4 -k3,3 -k1,1 $O/bench_summary.txt >> $S
echo "end at ${SECONDS}s" | tee -a $S
