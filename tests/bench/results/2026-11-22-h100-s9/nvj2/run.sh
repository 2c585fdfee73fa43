#!/usr/bin/env bash
set -u
O=$OUT/nvj2; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
cc -std=c11 -Wall -Wextra -Werror -I/usr/local/cuda/include -Ikernels/cuda tests/bench/nvjpeg_abi_check.c -L/usr/local/cuda/lib64 -lnvjpeg -o /tmp/nvjpeg_abi_check > $O/abi.txt 2>&1 && LD_LIBRARY_PATH=/usr/local/cuda/lib64 /tmp/nvjpeg_abi_check >> $O/abi.txt 2>&1; echo "abi rc=$?"; tail -3 $O/abi.txt
build-gpu/tests/test_decode cuda > $O/test_decode_cuda.log 2>&1; echo "test_decode cuda rc=$?"; grep -E "TOLERANCE|diff|PASSED|FAILED|skip|nvjpeg|decoder" $O/test_decode_cuda.log | head -30
timeout 480 meson test -C build-gpu --no-rebuild --print-errorlogs > $O/test_all.log 2>&1; echo "all tests rc=$?"
grep -E "^ *[0-9]+/[0-9]+ .*(FAIL|ERROR|TIMEOUT)|Ok:|Fail:|Skipped:|Timeout:" $O/test_all.log
for dec in auto cpu; do
  timeout 100 $B bench pipeline --backend cuda --size 1280x720 --frames 600 --inflight 2 --per-frame --set pipeline.decoder=$dec > $O/pf_720_$dec.json 2>$O/pf_720_$dec.log; echo "720 $dec rc=$?"
done
timeout 100 $B bench pipeline --backend cuda --size 1920x1080 --frames 600 --inflight 2 --per-frame > $O/pf_1080_auto.json 2>$O/pf_1080_auto.log; echo "1080 rc=$?"
python3 tests/bench/pf_summary.py $O/pf_*.json | tee $O/pf_summary.txt
python3 -c 'import json,sys
for f in sys.argv[1:]:
  d=json.load(open(f)); print(f.split("/")[-1], "decode", d["decode"], "rss w/o clip", d["host_rss"]["peak_without_clip_mb"], "gpu MB", d["gpu_memory_mb"]["used"])' $O/pf_*.json | tee -a $O/pf_summary.txt
rm -f $O/build.log $O/setup.log
tar czf $OUT/nvj2.tgz -C $OUT nvj2 && rm -rf $O
