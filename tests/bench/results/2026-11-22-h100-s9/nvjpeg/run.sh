#!/usr/bin/env bash
set -u
O=$OUT/nvjpeg; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
B=build-gpu/clients/masktool
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
cc -std=c11 -O2 -Wall -Wextra -I/usr/local/cuda/include tests/bench/nvjpeg_bench.c -L/usr/local/cuda/lib64 -lnvjpeg -lcudart -o /tmp/nvjpeg_bench 2>&1 | tee $O/nvjpeg_build.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for src in tp1280x720 tp1920x1080 otb; do
  d=/tmp/j_$src; mkdir -p $d
  case $src in
    tp1280x720) a="--size 1280x720";; tp1920x1080) a="--size 1920x1080";;
    otb) a="--source file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi";;
  esac
  for t in 1 2 4; do
    timeout 100 $B bench pipeline --backend cuda $a --frames 120 --inflight 1 --set pipeline.decode_threads=$t --dump-jpeg $d > $O/cpu_decode_${src}_t$t.json 2>/dev/null
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], "CPU decode pool threads", d["decode"]["threads"], "fps", d["decode"]["fps"])' $O/cpu_decode_${src}_t$t.json $src
  done | tee -a $O/cpu_decode.txt
  ls $d | wc -l
  /tmp/nvjpeg_bench $d 300 > $O/nvjpeg_$src.json 2>$O/nvjpeg_$src.log; echo "$src nvjpeg rc=$?"; cat $O/nvjpeg_$src.json; cat $O/nvjpeg_$src.log | head -5
done
rm -f $O/build.log $O/setup.log
tar czf $OUT/nvjpeg.tgz -C $OUT nvjpeg && rm -rf $O
