#!/usr/bin/env bash
# One call on the lent GPU machine: build with CUDA, run every test suite, benchmark the kernels on the CUDA and
# CPU backends and OpenCV on the CPU, write logs and JSON under $OUT. Needs .device/ (../shared/device/stage.sh,
# DATA="images grabcut middlebury models reference"; the detection tests and the decode benchmark use models/ and
# reference/darknet; maskd uses video/otb_man) carried along.
# Usage: bash tests/bench/device.sh [bench|test|bus|detect|maskd|pipeline|all]
# (pipeline: masktool bench pipeline, the engine end to end with 1 and 2 frames in flight; needs models and
# video/otb_man.)
# (detect: only the Darknet forward-pass benchmarks; they need DATA to include models.)
set -uo pipefail
what=${1:-all}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source .device/env.sh
# pkg-config from the staged packages when the machine has none.
if ! command -v pkg-config >/dev/null && [ -x /opt/devdeps/usr/bin/pkgconf ]; then
    ln -sf /opt/devdeps/usr/bin/pkgconf /opt/devdeps/usr/bin/pkg-config
    export PATH=/opt/devdeps/usr/bin:$PATH
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
# cuDNN: beside CUDA, or the pip wheel of the machine's Python.
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
opts=(-Dcuda=enabled --buildtype=release)
[ -f /usr/local/cuda/include/cudnn.h ] || [ -z "$cudnn" ] || opts+=(-Dcudnn_root="$cudnn")
echo "meson $(meson --version), nvcc $(nvcc --version | tail -1), cudnn ${cudnn:-/usr/local/cuda}"
[ -d build-gpu/meson-private ] && opts+=(--reconfigure)
meson setup build-gpu "${opts[@]}" > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
grep -A8 "Backends" "$OUT/setup.log"
ninja -C build-gpu > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
rc=0
if [ "$what" = all ] || [ "$what" = test ]; then
    meson test -C build-gpu --print-errorlogs > "$OUT/test.log" 2>&1 || rc=1
    grep -E "^ *[0-9]+/[0-9]+ |Ok:|Fail:|Skipped:" "$OUT/test.log"
    grep -hE "CUDA device:|otsu parity|guided parity|guided: |darknet letterbox:|yolo parity|darknet reference|one class|skipping|SKIP" \
        build-gpu/meson-logs/testlog.txt | sort | uniq -c
    grep -hE "yolo[0-9]: CUDA|identical|self-check|over tolerance|convolutions by" build-gpu/meson-logs/testlog.txt \
        > "$OUT/darknet_parity.txt"
    [ $rc = 0 ] || grep -B2 -A30 "FAIL\|ERROR" "$OUT/test.log" | head -80
fi
if [ "$what" = bus ] || [ "$what" = all ]; then
    # the frame bus (CPU only): 720p masks at 60 fps, readers 1/2/4, the stall phase on; and 1080p mask+frame
    for n in 1 2 4; do
        build-gpu/clients/masktool bus-bench --readers $n --frames 1200 --rate 60 --size 1280x720 > "$OUT/bus_720p_r$n.json" || rc=1
    done
    build-gpu/clients/masktool bus-bench --readers 2 --frames 1200 --rate 60 --size 1280x720 --no-stall > "$OUT/bus_720p_r2_nostall.json" || rc=1
    build-gpu/clients/masktool bus-bench --readers 2 --frames 600 --rate 30 --size 1920x1080 --planes mask,frame > "$OUT/bus_1080p_frame.json" || rc=1
    build-gpu/clients/masktool bus-bench --readers 2 --frames 20000 --rate 0 --size 640x480 > "$OUT/bus_unthrottled.json" || rc=1
    python3 tests/bench/bus_report.py "$OUT"/bus_*.json | tee "$OUT/bus_report.md"
fi
if [ "$what" = all ] || [ "$what" = detect ]; then
    # The issue's models at the sizes of its Darknet figures, FP16 (the target) and FP32.
    M=$MASKD_TEST_DATA/models
    for prec in fp16 fp32; do
        for spec in "yolo-fastest-1.1-body/yolo-fastest-1.1_body.cfg 320 yolo-fastest-1.1-body/yolo-fastest-1.1_body.weights" \
                    "yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.cfg 320 yolo-fastest-1.1-coco/yolo-fastest-1.1-xl.weights" \
                    "cfg/yolov3-tiny.cfg 416" "cfg/yolov4-tiny.cfg 416" "cfg/yolov3.cfg 416" "cfg/yolov4.cfg 608"; do
            set -- $spec
            args=(--cfg "$M/$1" --size "$2x$2" --backend cuda)
            if [ $# -gt 2 ]; then args+=(--weights "$M/$3"); else args+=(--random-weights); fi
            # the CPU check of the large networks takes a minute each: the tests compare them with the CPU
            case $1 in cfg/yolov3.cfg|cfg/yolov4.cfg) args+=(--no-cpu-check) ;; esac
            [ $prec = fp16 ] && args+=(--fp16)
            # the load's log at debug level: each convolution's timed implementations and choice, the layout kept
            MASKD_LOG=debug build-gpu/clients/masktool bench detect "${args[@]}" \
                > "$OUT/detect_$(basename "$1" .cfg)_$prec.json" 2> "$OUT/detect_$(basename "$1" .cfg)_$prec.log" || rc=1
        done
    done
    python3 - "$OUT"/detect_*.json <<'PY' | tee "$OUT/detect.md"
import json, sys
print("| network | size | precision | graph median µs | p99 µs | pipelined µs | layer-by-layer median µs | TFLOP/s | device MB |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except ValueError:
        continue
    r = {x["variant"]: x for x in d.get("results", []) if x.get("stage") == "forward"}
    g, l = r.get("cuda-graph"), r.get("layer-by-layer")
    if not g or not l:
        continue
    print(f"| {d['cfg'].split('/')[-1]} | {d['net']} | {d['precision']} | {g['median_us']} | {g['p99_us']} | "
          f"{g['pipelined_us']} | {l['median_us']} | {g['achieved_TFLOPs']} | {g['device_memory_bytes'] / 1e6:.0f} |")
print()
print("| network | precision | preprocess µs | decode+nms µs | detect µs | CPU check: yolo max abs diff (max CPU) | detections CUDA / CPU / matched |")
print("|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except ValueError:
        continue
    r = {x["stage"]: x for x in d.get("results", []) if x.get("variant") == "cuda-graph"}
    if "detect" not in r:
        continue
    c = r["detect"].get("cpu_check", {})
    print(f"| {d['cfg'].split('/')[-1]} | {d['precision']} | {r['preprocess']['median_us']} | "
          f"{r['decode+nms']['median_us']} | {r['detect']['median_us']} | {c.get('yolo_max_abs_diff', float('nan')):.3g} "
          f"({c.get('yolo_max_abs_cpu', 0):.3g}) | {c.get('detections_cuda')} / {c.get('detections_cpu')} / "
          f"{c.get('cpu_matched_iou095')} |")
PY
fi
if [ "$what" = maskd ] || [ "$what" = all ]; then
    # maskd end to end for 60 s on otb_man with the body detector, on each backend (stats as JSON and text)
    for b in cuda cpu; do
        bash tests/bench/maskd_run.sh build-gpu $b 60 "$OUT/maskd_$b" || rc=1
    done
fi
if [ "$what" = pipeline ] || [ "$what" = all ]; then
    # The engine end to end (issue 8): the test pattern at 720p and 1080p, 1 and 2 frames in flight, the body
    # detector FP16, GrabCut at ROI side 320; the real clip at its own size; the CPU backend for the ratio.
    for size in 1280x720 1920x1080; do
        for n in 1 2; do
            build-gpu/clients/masktool bench pipeline --backend cuda --size $size --frames 600 --inflight $n \
                --set detect.fp16=true > "$OUT/pipeline_cuda_${size}_if$n.json" 2> "$OUT/pipeline_cuda_${size}_if$n.log" || rc=1
        done
    done
    build-gpu/clients/masktool bench pipeline --backend cuda --frames 600 --inflight 2 --set detect.fp16=true \
        --source "file:$MASKD_TEST_DATA/video/otb_man/man_mjpeg.avi" > "$OUT/pipeline_cuda_otb_if2.json" 2> "$OUT/pipeline_cuda_otb_if2.log" || rc=1
    for size in 1280x720 1920x1080; do
        build-gpu/clients/masktool bench pipeline --backend cpu --size $size --frames 30 --inflight 2 \
            > "$OUT/pipeline_cpu_${size}_if2.json" 2> "$OUT/pipeline_cpu_${size}_if2.log" || rc=1
    done
    for f in "$OUT"/pipeline_*.json; do
        python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k, v in d["runs"].items():
    print(sys.argv[1].rsplit("/", 1)[-1], k, "fps", v["fps"], "e2e p50/p99", v["e2e_ms"].get("p50"), v["e2e_ms"].get("p99"),
          "keyframes", v.get("keyframes"), "cut key/fixed p50", v["stages_ms"].get("cut_keyframe", {}).get("p50"),
          v["stages_ms"].get("cut_fixed_model", {}).get("p50"),
          "differ", d["identical"]["frames_differing"], "gpu MB", d.get("gpu_memory_mb", {}).get("used"), "rss MB", d["host_peak_rss_mb"],
          "without clip", d.get("host_rss", {}).get("peak_without_clip_mb"))' "$f"
    done | tee "$OUT/pipeline_report.txt"
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
    build-gpu/clients/masktool bench all --backend cuda > "$OUT/bench_cuda.json" || rc=1
    build-gpu/clients/masktool bench all --backend cpu --runs 200 --warmup 5 > "$OUT/bench_cpu.json" || rc=1
    build-gpu/clients/masktool bench yolo-decode --backend cuda > "$OUT/bench_yolo_cuda.json" || rc=1
    build-gpu/clients/masktool bench yolo-decode --backend cpu --runs 200 --warmup 5 > "$OUT/bench_yolo_cpu.json" || rc=1
    python3 tests/bench/anchor_opencv.py > "$OUT/anchor.json" || rc=1
    python3 tests/bench/report.py "$OUT/bench_cuda.json" "$OUT/bench_cpu.json" "$OUT/anchor.json" | tee "$OUT/report.md"
fi
exit $rc
