#!/usr/bin/env bash
# session 25, written and never run (no device time left): the tree against cost-bands-unrun.diff (copy it to
# .device/cost-bands.diff first): coef_kernel's bands of equal cost (row_class_kernel + band_bounds_kernel before
# it). parity_guided + guided on the patched tree; bench guided 720p + 1080p round-robin, three runs each.
set -u
T=${TAG:-s26a}; O=/tmp/res/$T; mkdir -p $O
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
patch -s -p1 < .device/cost-bands.diff && ninja -C build-gpu > $O/build_cb.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/cb
timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_cb.log 2>&1
echo "cb: $(grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_cb.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
patch -s -R -p1 < .device/cost-bands.diff
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in tree cb; do
  left 400 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
