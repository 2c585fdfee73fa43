#!/usr/bin/env bash
set -u
O=$OUT/final; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
(ls /usr/local/cuda/lib64 | grep -i jpeg; find / -xdev \( -name "libnvjpeg*" -o -name "nvjpeg.h" \) 2>/dev/null | head; python3 -c "import nvidia, os; print(os.listdir(list(nvidia.__path__)[0]))" 2>&1) > $O/nvjpeg_probe.txt; echo "nvjpeg probe:"; cat $O/nvjpeg_probe.txt
timeout 420 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda > $O/test_cuda.log 2>&1; echo "cuda suite rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_cuda.log
for s in 1280x720 1920x1080; do
  timeout 100 $B bench pipeline --backend cuda --size $s --frames 600 --inflight 2 --per-frame > $O/pf_tp$s.json 2>$O/pf_tp$s.log; echo "$s rc=$?"
done
timeout 100 $B bench pipeline --backend cuda --frames 600 --inflight 2 --per-frame --source "file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi" > $O/pf_otb.json 2>$O/pf_otb.log; echo "otb rc=$?"
timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 300 --inflight 2 --set pipeline.decode_threads=4 > $O/pf_tp720_dec4.json 2>$O/pf_dec4.log; echo "dec4 rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json | tee $O/pf_summary.txt
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f))
  for k,r in d["runs"].items(): print(f.split("/")[-1], k, "fps", r["fps"], {s:(v["p50"],v["p99"]) for s,v in r["stages_ms"].items() if s in ("upload","detect","cut","guided","download","total")})
  print("  decode", d["decode"], "fp16", d["fp16"], "cudnn", d["cudnn"], "gpu MB", d["gpu_memory_mb"]["used"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "differ", d["identical"]["frames_differing"])' $O/pf_*.json | tee -a $O/pf_summary.txt
timeout 240 $B bench pipeline --backend cpu --size 1280x720 --frames 30 --inflight 2 > $O/pipeline_cpu_1280x720.json 2>$O/pipeline_cpu.log; echo "cpu rc=$?"
python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k,r in d["runs"].items(): print("cpu", k, r["fps"], r["e2e_ms"])' $O/pipeline_cpu_1280x720.json | tee -a $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/final.tgz -C $OUT final && rm -rf $O
