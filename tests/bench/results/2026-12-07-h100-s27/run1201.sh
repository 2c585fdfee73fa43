#!/usr/bin/env bash
# session 27, call 1: HEAD (tree): the whole CUDA suite (session 26's kept prefetch change had only parity_guided and
# guided); ncu with --cache-control none inside `bench guided` (steady state, rotated inputs): DRAM bytes and L2 hit
# rate of coef_kernel and final_kernel, do the coefficient planes go to DRAM between them? Variants (diffs in
# .device/var27/): l2 (a, b stored L2 evict-last, read by final evict-normal, output stores streaming), l2k (l2
# without final's evict-normal loads), pw (an L2 access-policy window on the planes: coef persisting, final normal),
# vs / vs3 (coef_kernel's column sums in shared memory between row steps, 4 / 3 blocks per SM: 128 / 147 registers),
# vsf5 / vsf6 (final_kernel's column sums in shared memory, 5 / 6 blocks per SM: 96 / 80 registers, spills 20 / 52 B),
# vsb (vs + vsf5),
# lb2 and pipe-lb2 (session 26's unrun: coef at 2 blocks per SM; its row step's loads one row ahead).
# parity_guided + guided on every variant; bench guided 720p + 1080p round-robin, three runs each.
set -u
T=${TAG:-s27a}; O=/tmp/res/$T; mkdir -p $O
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
timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_cuda.log 2>&1
echo "cuda suite: $(grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:" $O/test_cuda.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "FAIL|TIMEOUT" $O/test_cuda.log | head -5 | tee -a $S
echo "suite at ${SECONDS}s" | tee -a $S
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
nc() { # ncu inside bench guided 1080p, the first case (colour, full, photo): call 81's two kernels
  timeout 90 ncu --cache-control none --kernel-name regex:"coef_kernel|final_kernel" --launch-skip 160 --launch-count 2 \
    --metrics $MET --csv /tmp/bin/$1 bench guided --sizes 1920x1080 --runs 60 > $O/ncu_$1.csv 2> $O/ncu_$1.err
  python3 - $1 $O/ncu_$1.csv <<'PY' | tee -a $S
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 10]
if not rows: print(sys.argv[1], "ncu: no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name"); m = h.index("Metric Name"); u = h.index("Metric Unit"); val = h.index("Metric Value")
out = {}
for r in rows[1:]:
    name = "coef" if "coef_kernel" in r[k] else "final"
    out.setdefault(name, []).append("%s=%s%s" % (r[m].split("__")[1], r[val], r[u]))
for n, l in out.items():
    print(sys.argv[1], n, " ".join(l))
PY
}
nc tree
echo "ncu tree at ${SECONDS}s" | tee -a $S
for v in l2 pw vs vsf5 vsb vsf6 vs3 l2k pipe-lb2 lb2; do
  left 360 || break
  patch -s -p1 < .device/var27/$v.diff || { echo "$v: patch failed" | tee -a $S; continue; }
  ninja -C build-gpu clients/masktool tests/test_parity_guided > $O/build_$v.log 2>&1
  grep -E "error|warning" $O/build_$v.log | head -5 | tee -a $S
  cp build-gpu/clients/masktool /tmp/bin/$v
  timeout 120 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_$v.log 2>&1
  echo "$v: $(grep -E "Ok:|Fail:" $O/test_$v.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  patch -s -R -p1 < .device/var27/$v.diff || echo "$v: revert failed" | tee -a $S
  echo "$v done at ${SECONDS}s" | tee -a $S
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in tree l2 pw vs vsf5 vsb vsf6 vs3 l2k pipe-lb2 lb2; do
  left 510 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json | tee -a $OUT/bench_live.txt
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
for v in l2 pw vsb; do left 555 && [ -x /tmp/bin/$v ] && nc $v; done
echo "end at ${SECONDS}s" | tee -a $S
