#!/usr/bin/env bash
# session 29, call 2: st8, st12 (st with batches of 8 / 12 rows and an L2 prefetch of the staged rows first), st, against the tree;
# parity_guided and guided on st8 and st12; bench guided 720p + 1080p round-robin; ncu sections of st8.

set -u
T=${TAG:-s29b}; O=/tmp/res/$T; mkdir -p $O
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
for v in st8 st12 st; do
  patch -s -p1 < .device/var29/$v.diff || { echo "$v: patch failed" | tee -a $S; continue; }
  ninja -C build-gpu clients/masktool tests/test_parity_guided tests/test_guided > $O/build_$v.log 2>&1
  grep -E "error|warning" $O/build_$v.log | head -5 | tee -a $S
  cp build-gpu/clients/masktool /tmp/bin/$v
  [ $v != st ] && timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_$v.log 2>&1
  echo "$v: $(grep -E "Ok:|Fail:" $O/test_$v.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  patch -s -R -p1 < .device/var29/$v.diff || echo "$v: revert failed" | tee -a $S
  echo "$v done at ${SECONDS}s" | tee -a $S
done
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3 4; do for v in tree st8 st12 st; do
  left 330 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
grep full $O/bench_summary.txt | sort -k2,2 -k4,4 -k3,3 -k1,1 >> $S
echo "bench end at ${SECONDS}s" | tee -a $S
nc() {
  timeout $2 ncu --cache-control none --replay-mode application --kernel-name regex:"coef_kernel|final_kernel" \
    --launch-skip 160 --launch-count 2 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --page raw --csv \
    /tmp/bin/$1 bench guided --sizes 1920x1080 --runs 200 > $O/ncu_$1.csv 2> $O/ncu_$1.err
  python3 - $1 $O/ncu_$1.csv <<'PY' | tee -a $S
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[2])) if len(r) > 10]
if len(rows) < 3: print(sys.argv[1], "ncu: no rows"); sys.exit()
h = rows[0]; k = h.index("Kernel Name")
want = ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_active", "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__issue_active.min.pct_of_peak_sustained_elapsed",
        "sm__issue_active.max.pct_of_peak_sustained_elapsed", "sm__issue_active.avg.pct_of_peak_sustained_elapsed"]
for r in rows[2:]:
    name = "coef" if "coef_kernel" in r[k] else "final"
    out = [name]
    for w in want:
        if w in h: out.append("%s=%s" % (w.split("__")[-1].split(".pct")[0].replace(".sum","") + ("%" if "pct" in w else ""), r[h.index(w)]))
    pipes = sorted(((float(r[i].replace(",", "") or 0), h[i]) for i in range(len(h))
                    if h[i].startswith("sm__inst_executed_pipe_") and "pct_of_peak_sustained_active" in h[i]
                    and r[i].replace(",", "").replace(".", "").isdigit()), reverse=True)[:6]
    out.append("pipes: " + " ".join("%s=%.1f" % (n.replace("sm__inst_executed_pipe_", "").split(".")[0], v) for v, n in pipes))
    print(sys.argv[1], " ".join(out))
PY
  tail -2 $O/ncu_$1.err | tee -a $S
  echo "ncu $1 at ${SECONDS}s" | tee -a $S
}
left 380 && nc st8 $((470 - SECONDS))
left 470 && nc st12 $((550 - SECONDS))

echo "end at ${SECONDS}s" | tee -a $S
