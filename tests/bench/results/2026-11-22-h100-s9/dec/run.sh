#!/usr/bin/env bash
set -u
O=$OUT/dec; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for s in 1280x720 1920x1080; do for dec in nvjpeg cpu; do for t in 1 2 4; do
  timeout 60 $B bench pipeline --backend cuda --size $s --frames 120 --inflight 1 --set pipeline.decoder=$dec --set pipeline.decode_threads=$t > $O/d_${s}_${dec}_$t.json 2>/dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d["decode"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"])' $O/d_${s}_${dec}_$t.json $s
done; done; done | tee $O/decode_summary.txt
timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame > $O/pf_tp1280x720.json 2>$O/pf_720.log; echo "720 rc=$?"
timeout 100 $B bench pipeline --backend cuda --size 1920x1080 --frames 600 --inflight 2 --per-frame > $O/pf_tp1920x1080.json 2>$O/pf_1080.log; echo "1080 rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json | tee $O/pf_summary.txt
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f)); print(f.split("/")[-1], "decode", d["decode"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "gpu MB", d["gpu_memory_mb"]["used"])' $O/pf_*.json | tee -a $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/dec.tgz -C $OUT dec && rm -rf $O
