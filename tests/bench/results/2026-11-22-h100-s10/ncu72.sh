# ncu source-level (SASS) profile of one max-flow solve (640x480 GrabCut graph)
B=build-gpu/clients/masktool
export MASKD_SOURCE_ROOT=$PWD
timeout 300 ncu --set full --import-source yes -k regex:pr_kernel --launch-skip 2 --launch-count 1 -o $O/mf $B bench maxflow --backend cuda --runs 3 --warmup 1 > $O/ncu_run.log 2>&1; echo "ncu rc=$?"
ncu -i $O/mf.ncu-rep --page source --csv --print-source sass > $O/src.csv 2>$O/src.err; echo "src rc=$? $(wc -l < $O/src.csv)"
ncu -i $O/mf.ncu-rep --page details > $O/details.txt 2>&1
head -3 $O/src.csv | cut -c1-600
