#!/usr/bin/env bash
# session 30, call 1: the whole CUDA suite on HEAD (parity_guided_unstaged is new); hv.diff (host variants by MK_VAR:
# 0 HEAD, 1 st12d's rule (stage only where 2 band_rows >= 2r + 1), 2 no carveout for final_kernel); ic.diff (the
# colour solve's covariances in integers at r = 8, the guide-source ones and the plain sums too);
# f2d.diff (final_kernel's float -> double conversions by integer operations, sums scaled by 2^-896);
# parity_guided (both ways) and guided tests of ic1 and f2d; outputs compared byte for byte with HEAD's;
# bench guided 720p + 1080p round-robin, 4 runs; ncu of the strip kernels.
set -u
T=${TAG:-s30a}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_tree.log 2>&1
echo "tree suite rc=$?: $(grep -E "Ok:|Fail:|Timeout:" $O/test_tree.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "^ *[0-9]+/[0-9]+ " $O/test_tree.log | tee -a $S
echo "suite done at ${SECONDS}s" | tee -a $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/tree
for v in hv ic1 f2d; do
  d=${v%[01]}
  patch -s -p1 < .device/var30/$d.diff || { echo "$v: patch failed" | tee -a $S; continue; }
  ninja -C build-gpu clients/masktool tests/test_parity_guided tests/test_guided > $O/build_$v.log 2>&1
  grep -E "error|warning" $O/build_$v.log | head -5 | tee -a $S
  cp build-gpu/clients/masktool /tmp/bin/$v
  if [ $v = ic1 ] || [ $v = f2d ]; then
    timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided parity_guided_unstaged guided > $O/test_$v.log 2>&1
    echo "$v tests rc=$?: $(grep -E "Ok:|Fail:|Timeout:" $O/test_$v.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  fi
  git checkout -q kernels/
  echo "$v done at ${SECONDS}s" | tee -a $S
done
V=.device/var
for b in tree ic1 f2d; do
  [ -x /tmp/bin/$b ] || continue
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_gray.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o1_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o2_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-2 --mask soft -o /tmp/o3_$b.f32 > /dev/null 2>> $O/cmp.err
  /tmp/bin/$b guided --backend cuda --gray --guide $V/p1_1080.png --src $V/p1_1080_mask.png --radius 8 --eps 1e-4 --mask soft -o /tmp/o4_$b.f32 > /dev/null 2>> $O/cmp.err
  for k in 1 2 3 4; do
    [ $b = tree ] && { echo "o$k tree $(md5sum < /tmp/o${k}_tree.f32 | cut -c1-12) $(stat -c %s /tmp/o${k}_tree.f32)" | tee -a $S; continue; }
    cmp -s /tmp/o${k}_tree.f32 /tmp/o${k}_$b.f32 && echo "o$k $b identical to tree" | tee -a $S || echo "o$k $b DIFFERS" | tee -a $S
  done
done
echo "cmp done at ${SECONDS}s" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3 4; do for v in v0 v1 v2 ic1 f2d; do
  b=hv; e=${v#v}; case $v in ic*|f2d) b=$v; e=0;; esac
  left 400 && [ -x /tmp/bin/$b ] && MK_VAR=$e timeout 40 /tmp/bin/$b bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>/dev/null && gs $v $O/g_$v.$rep.json
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
left 420 && nc f2d $((500 - SECONDS)); left 500 && nc tree $((580 - SECONDS))
echo "end at ${SECONDS}s" | tee -a $S
