#!/usr/bin/env bash
# session 24: the full guided filter's strip kernels, variants by the tree's compile-time switches (defaults = HEAD's
# behaviour): base; pf (coef_kernel asks L2 for its band's input rows, MK_GUIDED_PREFETCH); w8 (final_kernel's
# warm-up unrolled 8 rows); bmf / bmc / bm (band-major: a block's warps take 4 consecutive bands of one strip, in
# final_kernel / coef_kernel / both); all (pf + bm). parity_guided on "all"; then bench guided 720p + 1080p
# round-robin, three runs each.
set -u
O=/tmp/res/${TAG:-s24a}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s24a}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/base
F=kernels/cuda/guided_cuda.cu; cp $F /tmp/guided.orig
var() { # name, then NAME=VALUE switches
  local n=$1; shift; cp /tmp/guided.orig $F
  for kv in "$@"; do sed -i "s/^#define MK_GUIDED_${kv%%=*} .*/#define MK_GUIDED_${kv%%=*} ${kv#*=}/" $F; done
  ninja -C build-gpu ${TGT:-clients/masktool} > $O/build_$n.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/$n
}
TGT= var all PREFETCH=1 BM_COEF=1 BM_FINAL=1
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_all.log 2>&1
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_all.log | tee -a $S
var pf PREFETCH=1; var w8 WARM_FINAL=8; var bmf BM_FINAL=1; var bmc BM_COEF=1; var bm BM_COEF=1 BM_FINAL=1
cp /tmp/guided.orig $F
echo "variants at ${SECONDS}s: $(ls /tmp/bin | tr '\n' ' ')" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in base pf w8 bmf bmc bm all; do
  left 500 && [ -x /tmp/bin/$v ] && timeout 60 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep -E "full" $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
