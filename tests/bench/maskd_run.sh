#!/usr/bin/env bash
# maskd end to end for a while: starts BUILD/daemon/maskd on otb_man's MJPEG AVI with the Yolo-Fastest body detector
# of the shared data (the test pattern and the fallback box when the data is absent), keeps a bus reader attached,
# and writes `maskctl stats` (JSON and readable) at the end. Usage:
#   tests/bench/maskd_run.sh BUILD BACKEND SECONDS OUTPREFIX      e.g. build cpu 60 /tmp/out/maskd_cpu
# MASKD_RUN_ARGS: more maskd arguments (split at spaces), e.g. "--set detect.fp16=true".
set -euo pipefail
build=$1 backend=$2 secs=$3 out=$4
data=${MASKD_TEST_DATA:-$(dirname "$0")/../../../shared/data}
inst=bench-$backend-$$
rundir=$(mktemp -d)
args=(--instance "$inst" --runtime-dir "$rundir" --backend "$backend")
model=$data/models/yolo-fastest-1.1-body
if [ -f "$data/video/otb_man/man_mjpeg.avi" ] && [ -f "$model/yolo-fastest-1.1_body.weights" ]; then
    args+=(--source "file:$data/video/otb_man/man_mjpeg.avi" --set "detect.cfg=$model/yolo-fastest-1.1_body.cfg"
           --set "detect.weights=$model/yolo-fastest-1.1_body.weights")
else
    echo "maskd_run: no otb_man or model under $data: the test pattern without a detector" >&2
fi
[ -n "${MASKD_RUN_ARGS:-}" ] && args+=($MASKD_RUN_ARGS)
"$build/daemon/maskd" "${args[@]}" > "$out.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$rundir"' EXIT
timeout "$secs" "$build/clients/maskcat" --bus "$inst" --wait --quiet || [ $? = 124 ]
"$build/clients/maskctl" --socket "$rundir/control.sock" --json stats > "$out.json"
"$build/clients/maskctl" --socket "$rundir/control.sock" stats > "$out.txt"
# the daemon's host memory: peak and current resident set, and where it is (per mapping, largest first)
grep -E "^Vm(HWM|RSS)|^Rss(Anon|File)" "/proc/$pid/status" > "$out.rss.txt" || true
awk '/^[0-9a-f]+-[0-9a-f]+ /{n=$6; if (n=="") n="[anon]"; sub(".*/", "", n)} /^Rss:/{r[n]+=$2}
     END{for (k in r) printf "%8.1f MB  %s\n", r[k]/1024, k}' "/proc/$pid/smaps" 2>/dev/null | sort -rn | head -10 >> "$out.rss.txt" || true
kill $pid
wait $pid
rm -f "/dev/shm/maskd.$inst" "/dev/shm/maskd.$inst.readers"
cat "$out.rss.txt"
grep -E "^(state|backend|device|model\.status|fps\.[a-z]+|latency_ms\.[a-z0-9]+|stage_ms\.[a-z]+|frames\.(published|dropped|corrupt)) " "$out.txt"
