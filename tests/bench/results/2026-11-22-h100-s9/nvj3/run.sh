#!/usr/bin/env bash
set -u
O=$OUT/nvj3; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 meson test -C build-gpu --no-rebuild --print-errorlogs decode decode_cuda config maskd-cli maskd-testpattern maskd-otb segment_cuda masktool-segment-cuda > $O/test_some.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_some.log
grep -hE "nvJPEG vs TurboJPEG|gpu_decoded|auto:" build-gpu/meson-logs/testlog.txt | head -20
for dec in nvjpeg cpu; do
  timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 300 --inflight 2 --set pipeline.decoder=$dec > $O/pf_720_$dec.json 2>$O/pf_720_$dec.log; echo "720 $dec rc=$?"
  timeout 100 $B bench pipeline --backend cuda --size 1920x1080 --frames 300 --inflight 2 --set pipeline.decoder=$dec > $O/pf_1080_$dec.json 2>$O/pf_1080_$dec.log; echo "1080 $dec rc=$?"
done
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f)); print(f.split("/")[-1], "decode", d["decode"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "gpu MB", d["gpu_memory_mb"]["used"], {k:(r["fps"], r["e2e_ms"]["p50"], r["e2e_ms"]["p99"]) for k,r in d["runs"].items()})' $O/pf_*.json | tee $O/pf_summary.txt
for dec in cpu nvjpeg; do
  MASKD_RUN_ARGS="--set pipeline.decoder=$dec" bash tests/bench/maskd_run.sh build-gpu cuda 20 $O/maskd_$dec > /dev/null 2>&1; echo "maskd $dec rc=$?"
  head -2 $O/maskd_$dec.rss.txt; python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("decoder", d.get("decoder"), "frames", {k:d["frames"].get(k) for k in ("published","gpu_decoded","gpu_fallbacks","corrupt")})' $O/maskd_$dec.json
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/nvj3.tgz -C $OUT nvj3 && rm -rf $O
