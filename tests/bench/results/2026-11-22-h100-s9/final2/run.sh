#!/usr/bin/env bash
set -u
O=$OUT/final2; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 420 meson test -C build-gpu --no-rebuild --print-errorlogs > $O/test_all.log 2>&1; echo "all tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ .*(FAIL|ERROR|TIMEOUT)|Ok:|Fail:|Skipped:|Timeout:" $O/test_all.log
grep -E "cuda - " $O/test_all.log | head -12
for s in 1280x720 1920x1080; do for dec in nvjpeg cpu; do
  timeout 60 $B bench pipeline --backend cuda --size $s --frames 120 --inflight 1 --set pipeline.decoder=$dec --set pipeline.decode_threads=4 > $O/d_${s}_$dec.json 2>/dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d["decode"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"])' $O/d_${s}_$dec.json $s
done; done | tee $O/decode_summary.txt
for dec in cpu nvjpeg; do
  MASKD_RUN_ARGS="--set pipeline.decoder=$dec" bash tests/bench/maskd_run.sh build-gpu cuda 20 $O/maskd_$dec > /dev/null 2>&1; echo "maskd $dec rc=$?"
  head -1 $O/maskd_$dec.rss.txt; grep -iE "decoder|published" $O/maskd_$dec.txt | head -3
done
for s in 1280x720 1920x1080; do
  timeout 100 $B bench pipeline --backend cuda --size $s --frames 600 --inflight 2 --per-frame > $O/pf_tp$s.json 2>$O/pf_$s.log; echo "$s rc=$?"
done
timeout 100 $B bench pipeline --backend cuda --frames 600 --inflight 2 --per-frame --source "file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi" > $O/pf_otb.json 2>$O/pf_otb.log; echo "otb rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json | tee $O/pf_summary.txt
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("detect","cut","guided","download","total")})
  print("  decode", d["decode"], "gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee -a $O/pf_summary.txt
timeout 200 $B bench pipeline --backend cpu --size 1280x720 --frames 30 --inflight 2 > $O/pipeline_cpu_1280x720.json 2>$O/pipeline_cpu.log; echo "cpu rc=$?"
python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print("cpu", k, r["fps"], r["e2e_ms"])' $O/pipeline_cpu_1280x720.json | tee -a $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/final2.tgz -C $OUT final2 && rm -rf $O
