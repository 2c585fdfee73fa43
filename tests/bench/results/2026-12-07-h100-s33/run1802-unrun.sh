#!/usr/bin/env bash
# session 33, call 2 (never ran: too little device time was left): where kmeans_kernel's ~118 µs at 104x104 go.
# ncu's full set with per-SASS-instruction counters of one kmeans_kernel launch (the bench's timed 5-iteration
# call), exported as the source page (SASS) and the details page.
set -u
T=${TAG:-s33b}; O=$OUT/$T; mkdir -p $O
source .device/env.sh
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; rm -f $O/setup.log $O/build.log
echo "built at ${SECONDS}s" | tee -a $O/summary.txt
M=build-gpu/clients/masktool
timeout 100 ncu --clock-control none --kernel-name kmeans_kernel --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $O/km $M bench grabcut --backend cuda --runs 1 --warmup 1 --sizes 104x104 > $O/ncu_run.log 2>&1
timeout 30 ncu -i $O/km.ncu-rep --page source --csv --print-source sass > $O/km_sass.csv 2> $O/ncu_src.err
timeout 30 ncu -i $O/km.ncu-rep --page details --csv > $O/km_details.csv 2>> $O/ncu_src.err
gzip -f $O/km_sass.csv; rm -f $O/km.ncu-rep
echo "end at ${SECONDS}s" | tee -a $O/summary.txt
