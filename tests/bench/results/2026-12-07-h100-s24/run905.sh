#!/usr/bin/env bash
# session 24, second call (run904 never got a machine): the tree (run903's "all", prefetch + band-major, without the
# switches) against final_kernel's warps in pairs sharing one warm-up (.device/pairs.diff = pairs.diff here).
# parity_guided + guided on both; bench guided 720p + 1080p alternating, two runs each.
set -u
O=/tmp/res/${TAG:-s24c}; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s24c}.tgz -C /tmp/res . ; }
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
patch -s -p1 < .device/pairs.diff && ninja -C build-gpu > $O/build_p.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/p && t p
patch -s -R -p1 < .device/pairs.diff
echo "variants at ${SECONDS}s: $(ls /tmp/bin | tr '\n' ' ')" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2; do for v in tree p; do
  left 190 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep -E "full" $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
