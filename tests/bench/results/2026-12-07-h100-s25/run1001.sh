#!/usr/bin/env bash
# session 25, first call: HEAD (tree) against coef_kernel in pairs (.device/coef-pairs.diff = coef-pairs.diff here),
# then on top of the pairs the band-count switch (band-pct-switch.diff: want x pct/100 warps) at coef 67/200 %,
# final 67/200 %. parity_guided + guided on tree and cp; bench guided 720p + 1080p round-robin, three runs.
set -u
T=${TAG:-s25a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
t() { timeout 100 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_$1.log 2>&1
      echo "$1: $(grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$1.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S; }
t tree
F=kernels/cuda/guided_cuda.cu
patch -s -p1 < .device/coef-pairs.diff && ninja -C build-gpu > $O/build_cp.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/cp && t cp
patch -s -p1 < .device/pct.diff
for v in C67 C200 F67 F200; do
  left 420 || break
  k=${v:0:1}; p=${v:1}
  sed -i "s/^#define MK_PCT_C .*/#define MK_PCT_C 100/; s/^#define MK_PCT_F .*/#define MK_PCT_F 100/; s/^#define MK_PCT_$k .*/#define MK_PCT_$k $p/" $F
  ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/$v
done
echo "variants at ${SECONDS}s: $(ls /tmp/bin | tr '\n' ' ')" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in tree cp C67 C200 F67 F200; do
  left 540 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep -E "full" $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
