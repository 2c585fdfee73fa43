#!/usr/bin/env bash
# session 12 final, second call: the clip's tests; the pipeline with this session's up_kernel against the one before
# (the tree copied to /tmp/old with tests/bench/results/2026-11-22-h100-s12/up_kernel.diff reversed), same call
set -u
O=$OUT/${TAG:-final2}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs maskd-otb maskd-lost segment_cuda parity_guided > $O/test_otb.log 2>&1; echo "otb tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:" $O/test_otb.log
mkdir -p /tmp/old && cp -r $(ls -A | grep -v '^build\|^\.device$\|^\.git$') /tmp/old/ && ln -sfn $PWD/.device /tmp/old/.device
(cd /tmp/old && patch -s -R -p1 < tests/bench/results/2026-11-22-h100-s12/up_kernel.diff && mkdir -p $O/oldb && OUT=$O/oldb bash tests/bench/device.sh none > $O/oldb/build.txt 2>&1; echo "old build rc=$?"; grep -c "up_kernel<C, true>" kernels/cuda/guided_cuda.cu)
OB=/tmp/old/build-gpu/clients/masktool
for rep in 1 2; do for v in new old; do
  b=$B; [ $v = old ] && b=$OB
  for s in 1280x720 1920x1080; do
    timeout 100 $b bench pipeline --backend cuda --size $s --frames 600 --inflight 2 --per-frame > $O/pf_${v}_${rep}_$s.json 2>$O/pf_${v}_${rep}_$s.log; echo "$v $rep $s rc=$?"
  done
done; done
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], "e2e", (r["e2e_ms"]["p50"], r["e2e_ms"]["p99"]), "pub", (r["e2e_published_ms"]["p50"], r["e2e_published_ms"]["p99"]), {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided","download")})
  print("  gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee $O/pf_summary.txt
timeout 200 $B bench pipeline --backend cpu --size 1280x720 --frames 30 --inflight 2 > $O/pipeline_cpu_1280x720.json 2>$O/pipeline_cpu.log; echo "cpu pipe rc=$?"
python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print("cpu", k, r["fps"], r["e2e_ms"])' $O/pipeline_cpu_1280x720.json | tee -a $O/pf_summary.txt
rm -f $O/build.log $O/setup.log $O/oldb/build.log $O/oldb/setup.log
tar czf $OUT/${TAG:-final2}.tgz -C $OUT ${TAG:-final2} && rm -rf $O
