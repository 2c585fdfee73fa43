#!/usr/bin/env bash
# session 19, seventh call: issue 6's quality figure on the CUDA backend with the reduced rectangle rounded to the
# nearest reduced pixel (masktool grabcut-score --scale 4), and GrabCut at full resolution, on the tree (HEAD's
# kernels; only masktool changed). One tarball and summary.txt.
set -u
O=/tmp/res/${TAG:-s19g}; mkdir -p $O
S=$OUT/summary.txt
fin() { tar czf $OUT/${TAG:-s19g}.tgz -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
rm -rf build-gpu
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
for sc in 4 1; do
  timeout 60 build-gpu/clients/masktool grabcut-score --backend cuda --scale $sc --json > $O/score_s${sc}_cuda.json 2> $O/score_s${sc}_cuda.err
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split("/")[-1], d["mean_iou_gt"], d["mean_iou_opencv"], d.get("mean_ms"), d.get("mean_grabcut_ms"), d.get("mean_upsample_ms"))' $O/score_s${sc}_cuda.json >> $S
done
echo "end at ${SECONDS}s" | tee -a $S
