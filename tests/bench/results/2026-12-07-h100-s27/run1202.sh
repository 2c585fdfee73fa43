#!/usr/bin/env bash
# session 27, call 2: vsp3 (coef_kernel's column sums in shared memory at 3 blocks per SM, and its row step's loads
# one row ahead: 168 registers, no spills; session 26's "next") against the tree and vs3, parity_guided on it, bench
# guided 720p + 1080p round-robin; then ncu inside `bench guided` 1080p (call 81 of the first case, colour photo,
# rotated inputs), --cache-control none, application replay: DRAM bytes and L2 traffic of coef_kernel and
# final_kernel for the tree.
set -u
T=${TAG:-s27b}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
for v in vsp3 vs3; do
  patch -s -p1 < .device/var27/$v.diff || { echo "$v: patch failed" | tee -a $S; continue; }
  ninja -C build-gpu clients/masktool tests/test_parity_guided > $O/build_$v.log 2>&1
  grep -E "error|warning" $O/build_$v.log | head -5 | tee -a $S
  cp build-gpu/clients/masktool /tmp/bin/$v
  [ $v = vsp3 ] && timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_$v.log 2>&1
  [ $v = vsp3 ] && echo "$v: $(grep -E "Ok:|Fail:" $O/test_$v.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  patch -s -R -p1 < .device/var27/$v.diff || echo "$v: revert failed" | tee -a $S
  echo "$v done at ${SECONDS}s" | tee -a $S
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in tree vsp3 vs3; do
  left 240 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read_lookup_hit.sum
nc() {
  timeout $2 ncu --cache-control none --replay-mode application --kernel-name regex:"coef_kernel|final_kernel" \
    --launch-skip 160 --launch-count 2 --metrics $MET --csv /tmp/bin/$1 bench guided --sizes 1920x1080 --runs 200 \
    > $O/ncu_$1.csv 2> $O/ncu_$1.err
  python3 - $1 $O/ncu_$1.csv <<'PY' | tee -a $S
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 10]
if not rows: print(sys.argv[1], "ncu: no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); u = h.index("Metric Unit"); val = h.index("Metric Value")
out = {}
for r in rows[1:]:
    name = "coef" if "coef_kernel" in r[k] else "final"
    out.setdefault(name, []).append("%s=%s%s" % (r[m], r[val], r[u]))
for n, l in out.items():
    print(sys.argv[1], n, " ".join(l))
PY
  tail -3 $O/ncu_$1.err | tee -a $S
  echo "ncu $1 at ${SECONDS}s" | tee -a $S
}
left 260 && nc tree $((350 - SECONDS))
echo "end at ${SECONDS}s" | tee -a $S
