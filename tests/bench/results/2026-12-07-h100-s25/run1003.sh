#!/usr/bin/env bash
# session 25, third call: the working tree (noaw: flat2 + coef_kernel stores no a in flat rows, final_kernel's
# lanes skip a where their own strips are flat) and flat2 (s25b's flat + coef_kernel stops keeping the guide's
# moments after r flat rows and sums them again at the next row that solves + final_kernel reads a's planes only in
# rows coef_kernel flagged not flat, and no guide where the whole window is flat), both tested, against s25b's flat,
# cp, and flat2 without the lazy guide moments (nolazy) or without final_kernel's flags (noff), from .device/var.
# Tests: parity_guided + guided on flat, then the whole CUDA suite; bench 720p + 1080p round-robin, three runs;
# ncu kernel durations of flat on a 1080p photo source and the 1080p person1 mask.
set -u
T=${TAG:-s25c}; O=/tmp/res/$T; mkdir -p $O
left() { [ $SECONDS -lt $1 ]; }
S=$OUT/summary.txt
fin() { tar czf $OUT/$T.tgz --exclude="*.ncu-rep" -C /tmp/res . ; }
trap fin EXIT
source .device/env.sh
OUT=$O bash tests/bench/device.sh none > $O/build.txt 2>&1; grep -E "error|FAILED|warning" $O/build.log | head -5; rm -f $O/setup.log
echo "built at ${SECONDS}s" | tee -a $S
export MASKD_SOURCE_ROOT=$PWD MASKD_TEST_DATA SHARED_DATA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt >> $S
mkdir -p /tmp/bin; cp build-gpu/clients/masktool /tmp/bin/flat
t() { timeout 150 meson test -C build-gpu --no-rebuild --print-errorlogs parity_guided guided > $O/test_$1.log 2>&1
      echo "$1: $(grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:" $O/test_$1.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
      grep -h "mask sources\|flat windows" build-gpu/meson-logs/testlog.txt | tee -a $S; }
timeout 200 meson test -C build-gpu --no-rebuild --print-errorlogs --suite cuda guided > $O/test_noaw.log 2>&1
echo "noaw (cuda suite + guided): $(grep -E "Ok:|Fail:|Skipped:|Timeout:" $O/test_noaw.log | tr -s ' ' | tr '\n' ' ')" | tee -a $S
grep -E "FAIL|TIMEOUT" $O/test_noaw.log | head -5 | tee -a $S
grep -h "mask sources\|flat windows" build-gpu/meson-logs/testlog.txt | tee -a $S
cp build-gpu/clients/masktool /tmp/bin/noaw; rm -f /tmp/bin/flat
cp .device/var/guided_cuda.cu.flat2 kernels/cuda/guided_cuda.cu && ninja -C build-gpu > $O/build_flat2.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/flat2 && t flat2
F=kernels/cuda/guided_cuda.cu P=kernels/guided_px.h V=.device/var
for v in flat cp nolazy noff; do
  left 330 || break
  case $v in
    nolazy) sed 's/kept = kept \&\& ++idle <= r;/++idle;/' $V/guided_cuda.cu.flat2 > $F; grep -c "++idle;" $F ;;
    noff) sed 's/if (n + 2 \* r <= 64) {/if (false) {/' $V/guided_cuda.cu.flat2 > $F; grep -c "if (false) {" $F ;;
    *) cp $V/guided_cuda.cu.$v $F ;;
  esac
  [ $v = cp ] && cp $V/guided_px.h.head $P || cp $V/guided_px.h.flat $P
  ninja -C build-gpu clients/masktool > $O/build_$v.log 2>&1 && cp build-gpu/clients/masktool /tmp/bin/$v
done
cp $V/guided_cuda.cu.noaw $F; cp $V/guided_px.h.flat $P
echo "variants at ${SECONDS}s: $(ls /tmp/bin | tr '\n' ' ')" | tee -a $S
gs() { python3 -c 'import json,sys
for x in json.load(open(sys.argv[2]))["results"]:
  print(sys.argv[1], x["size"], x.get("src_format"), x.get("variant"), x["median_us"], x.get("pipelined_us"))' "$@"; }
for rep in 1 2 3; do for v in cp flat flat2 noaw nolazy noff; do
  left 450 && [ -x /tmp/bin/$v ] && timeout 40 /tmp/bin/$v bench guided --sizes 1280x720,1920x1080 > $O/g_$v.$rep.json 2>$O/g_$v.$rep.err && gs $v $O/g_$v.$rep.json
done; done > $O/bench_summary.txt
sort -k2,2 -k4,4 -k3,3 -k1,1 $O/bench_summary.txt >> $S
echo "bench done at ${SECONDS}s" | tee -a $S
if left 470 && command -v ncu > /dev/null; then
  for src in gray mask; do
    timeout 60 ncu --clock-control none --kernel-name regex:"coef_kernel|final_kernel" --metrics gpu__time_duration.sum \
      /tmp/bin/noaw guided --guide $V/p1_1080.png --src $V/p1_1080_$src.png --radius 8 --eps 1e-4 -o /tmp/o_$src.f32 \
      > $O/ncu_$src.txt 2>&1
    echo "ncu $src: $(grep -E "coef_kernel|final_kernel|gpu__time_duration" $O/ncu_$src.txt | tr -s ' ' | tr '\n' ' ')" | tee -a $S
  done
fi
echo "end at ${SECONDS}s" | tee -a $S
