#!/usr/bin/env bash
# session 13: the full filter's band height (rows per band x factor; MASKD_GUIDED_BANDS=coef,final, an experiment)
set -u
O=$OUT/${TAG:-bd}; mkdir -p $O
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5
export MASKD_SOURCE_ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B=build-gpu/clients/masktool
summ() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]: print(sys.argv[1], x["variant"], x["src_format"], x["size"], "median", x["median_us"], "p99", x["p99_us"], "pipelined", x["pipelined_us"])' "$@"; }
for rep in 1 2; do for f in 1,1 2,1 1,2 3,3 0.5,0.5 1.5,1.5 2,2; do
  MASKD_GUIDED_BANDS=$f $B bench guided --backend cuda --sizes 1920x1080 > $O/g.json 2>/dev/null
  summ "bands=$f" $O/g.json | grep full
done; done | tee $O/bands_summary.txt
MASKD_GUIDED_BANDS=2,2 timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided > $O/test_bands22.log 2>&1; echo "parity bands 2,2 rc=$?"
rm -f $O/build.log $O/setup.log
tar czf $OUT/${TAG:-bd}.tgz -C $OUT ${TAG:-bd} && rm -rf $O
