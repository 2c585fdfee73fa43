#!/usr/bin/env bash
# session 17, last call: executed instructions per opcode, with the opcodes named (--print-metric-instances
# details), of the colour r = 8 strip kernels at 1920x1080 (the final tree: session 16's guided code)
set -u
source .device/env.sh
[ -x build-gpu/clients/masktool ] || OUT=$OUT bash tests/bench/device.sh none > $OUT/build.txt 2>&1
rm -f $OUT/build.log $OUT/setup.log
timeout 100 ncu --print-metric-instances details --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum -k regex:"coef|final" --launch-skip 2 --launch-count 2 build-gpu/clients/masktool bench guided --backend cuda --sizes 1920x1080 --runs 200 --warmup 1 > $OUT/ncu_opnames.txt 2>&1; echo rc=$?
grep -A40 "per_opcode" $OUT/ncu_opnames.txt | cut -c1-400 | head -60
