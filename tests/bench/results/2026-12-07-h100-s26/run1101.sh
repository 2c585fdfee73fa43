#!/usr/bin/env bash
# session 26, call 1: HEAD (tree) against five variants, each a diff in .device/var26/ (copies in this folder):
# cb = cost-bands.diff (session 25's unrun cost-balanced coef bands), rcp = rcp.diff (the solve's 1 / (det q) by
# __drcp_rn, the bits of __ddiv_rn(1, x)), pf = pf.diff (coef_kernel's L2 prefetch: rows clamped, pointers
# stepped, the pair's ranges split), bi = bi.diff (coef_kernel's column sums biased by 2^31: no exclusive-or in
# the conversions), pbr = pf + bi + rcp. (lb2.diff, coef_kernel at 2 blocks per SM, was dropped from the lists to
# fit the device time.) parity_guided + guided on every variant; bench guided 720p + 1080p round-robin, three runs each.
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
for v in cb rcp pf bi pbr; do
  left 300 || break
  patch -s -p1 < .device/var26/$v.diff || { echo "$v: patch failed" | tee -a $S; continue; }
  if [ $v = lb2 ]; then ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1; else ninja -C build-gpu > $O/build_$v.log 2>&1; fi
  grep -E "error|warning" $O/build_$v.log | head -5 | tee -a $S
  cp build-gpu/clients/masktool /tmp/bin/$v
  if [ $v != lb2 ]; then
    timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_$v.log 2>&1
    echo "$v: $(grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$v.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  fi
  patch -s -R -p1 < .device/var26/$v.diff || echo "$v: revert failed" | tee -a $S
  echo "$v done at ${SECONDS}s" | tee -a $S
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in tree cb rcp pf bi pbr; do
  left 400 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json | tee -a $OUT/bench_live.txt
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "end at ${SECONDS}s" | tee -a $S
