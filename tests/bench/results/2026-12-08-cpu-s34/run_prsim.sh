#!/usr/bin/env bash
# Session 34: every prsim run of this folder (CPU only; ~8 minutes on the 2-core dev VM). From the repository root,
# after `meson setup build && ninja -C build`: bash tests/bench/results/2026-12-08-cpu-s34/run_prsim.sh [DATA]
set -eu
R=tests/bench/results/2026-12-08-cpu-s34
D=${1:-../shared/data}
P=/tmp/prsim
gcc -O2 -std=gnu11 -Wall -Wextra -I kernels -I build/kernels -I build $R/prsim.c build/kernels/libmaskd-kernels.a \
    build/kernels/libmaskd-base.a -L/usr/local/cuda/lib64 -lcudart_static -lcudnn -lturbojpeg -lpng -lm -lpthread \
    -ldl -lrt -lstdc++ -o $P
cd $R
# the model against session 33's GPU counts
(for sz in "104 104" "160 120" "320 240" "416 416" "640 480"; do $P $D person1 $sz 0; done) > prsim_sizes.txt 2>&1
PRSIM_VERBOSE=2 $P $D person1 416 416 0 > prsim_416_passes.txt 2>&1
# multi-level cold solves
(echo "# multi-level cold solves (levels 0..2), projected share 100 %"; $P $D person1 416 416 2
 for PP in 50 25; do echo "# projected share $PP %"; PRSIM_PROJ_PCT=$PP PRSIM_ITERS=1 $P $D person1 416 416 1; done
 echo "# 640x480"; PRSIM_ITERS=1 $P $D person1 640 480 2) > prsim_multilevel.txt 2>&1
# rounds, parameters, oracle, tiles
(echo "# person1 416x416, the 5 cuts of a 5-iteration call (cut 1 cold, 2-5 warm). Columns as prsim prints them."
 echo "## HEAD's parameters"; $P $D person1 416 416 0 | grep -E 'cold ok|warm ok|all cuts'
 for S in 1,3 2,3 5,3 10,3; do
   echo "## rounds ended when a pass delivers < ${S%,*} % of the round's flow so far (from pass ${S#*,})"
   PRSIM_STALL=$S $P $D person1 416 416 0 | grep -E 'cold ok|warm ok|all cuts'; done
 for PA in "-1,20" "-1,30" "-1,-1,4" "-1,-1,12" "-1,-1,16" "-1,-1,1000" "-1,1000,1000" "-1,-1,-1,16" "-1,-1,-1,32" \
           "-1,-1,-1,-1,0" "-1,-1,-1,-1,128" "16" "32" "1024"; do
   echo "## PRSIM_PARAMS=$PA (sweeps,push_passes,later_passes,margin,relabel_cap; -1 keeps; the model does not price sweeps)"
   PRSIM_PARAMS=$PA $P $D person1 416 416 0 | grep -E 'cold ok|all cuts'; done
 echo "## oracle: a free exact relabel before every push pass (only the push counts mean anything)"
 PRSIM_ORACLE=1 $P $D person1 416 416 0 | grep -E 'cold ok|warm ok|all cuts'
 echo "## oracle with visits run to completion (sweeps 1024)"
 PRSIM_ORACLE=1 PRSIM_PARAMS=1024 $P $D person1 416 416 0 | grep -E 'cold ok|warm ok|all cuts'
 for T in 32 64; do for SW in 8 32 1024; do
   echo "## tiles $T x $T, sweeps $SW (counts only: the cost model is for 16 x 16 visits)"
   PRSIM_TILE=$T PRSIM_PARAMS=$SW $P $D person1 416 416 0 | grep -E 'cold ok|all cuts'; done; done
) > prsim_variants.txt 2>&1
# the global relabel's tile geometry
(for sz in "160 120" "320 240" "416 416" "640 480"; do
  echo "# person1 $sz"
  echo "## BFS as HEAD (16 x 16, alternating tilings)"; PRSIM_BFS_STATS=1 $P $D person1 $sz 0 | grep -A1 -E 'all cuts'
  echo "## BFS on one tiling"; PRSIM_BFS_SAME=1 $P $D person1 $sz 0 | grep -E 'all cuts'
  for F in 32 64; do echo "## each relabel's first pass on $F x $F tiles (the others 16 x 16)"
    PRSIM_BFS_STATS=1 PRSIM_BFS_FIRST=$F $P $D person1 $sz 0 | grep -A1 -E 'all cuts'; done
  echo "## the first pass on 16 x 16 tiles, the later passes on 32 x 32"
  PRSIM_BFS_STATS=1 PRSIM_BFS_TILE=32 PRSIM_BFS_FIRST=16 $P $D person1 $sz 0 | grep -A1 -E 'all cuts'
  echo "## every BFS pass on 32 x 32 tiles"; PRSIM_BFS_STATS=1 PRSIM_BFS_TILE=32 $P $D person1 $sz 0 | grep -A1 -E 'all cuts'
 done) > prsim_bfs_geometry.txt 2>&1
# the video fast path (fixed-model cuts on consecutive frames)
(echo "# otb_man at 61x49 (the daemon's cut size: ROI / guided.scale 4), all 134 frames"; $P $D --video 61 49 134
 echo "# otb_man, native 241x193, frames 1..40"; $P $D --video 241 193 40
 for PA in "-1,-1,-1,-1,0" "-1,-1,16"; do echo "## PRSIM_PARAMS=$PA, frames 1..12"; PRSIM_PARAMS=$PA $P $D --video 241 193 12; done
 echo "## HEAD, frames 1..12"; $P $D --video 241 193 12
 echo "# otb_man resized to 416x416, frames 1..20"; $P $D --video 416 416 20) > prsim_video.txt 2>&1
# the visit-level model: the slowest visit of each push pass of the cold cut at 416x416 (the GPU's profile beside
# it), the 5 cuts' modelled time at every size, and sweeps per visit 4..16
(echo "# cold cut 1 at 416x416: push passes as P<tiles>/<slowest visit, us>, the model"
 PRSIM_VERBOSE=3 PRSIM_ITERS=1 $P $D person1 416 416 0 | grep -o ' P[0-9]*/[0-9.]*' | tr -d '\n'; echo
 echo "# the same, session 33's MASKD_MAXFLOW_PROFILE run on the H100 (s33a/prof416.log)"
 head -2 ../2026-12-07-h100-s33/s33a/prof416.log | tail -1 | grep -o 'P[0-9]*/[0-9.]*' | tr '\n' ' '; echo
 for sz in "104 104" "160 120" "320 240" "416 416" "640 480"; do echo "## person1 $sz"
   PRSIM_COST2=1 $P $D person1 $sz 0 | grep -A1 'all cuts'; done
 for sz in "320 240" "416 416" "640 480"; do for SW in 4 6 8 12 16; do echo "## person1 $sz, sweeps $SW"
   PRSIM_COST2=1 PRSIM_PARAMS=$SW $P $D person1 $sz 0 | grep -A1 'all cuts'; done; done) > prsim_visit_model.txt 2>&1
! grep -E 'MISMATCH|DIFFER' prsim_*.txt
