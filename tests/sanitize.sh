#!/usr/bin/env bash
# tests/sanitize.sh [BUILD_DIR]: every test of the build without CUDA, under AddressSanitizer (leaks included) and
# UndefinedBehaviorSanitizer (an error stops the test), as CI runs it. BUILD_DIR (default build-asan) is set up on
# the first run. The Python-driven tests load libmaskbus into python3 (ctypes), so they run with the sanitizers'
# runtimes preloaded and without leak checks (python's own allocations are not ours to free).
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-asan}
[ -d "$b" ] || meson setup "$b" -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
meson compile -C "$b"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ASAN_OPTIONS=detect_leaks=1 meson test -C "$b" --print-errorlogs --no-suite py
cc=${CC:-cc}
pre=""
for lib in libasan.so libubsan.so; do
    p=$("$cc" -print-file-name=$lib)
    [ -e "$p" ] || { echo "sanitize.sh: $cc has no $lib" >&2; exit 1; }
    pre="$pre $p"
done
LD_PRELOAD="${pre# }" ASAN_OPTIONS=detect_leaks=0 meson test -C "$b" --print-errorlogs --suite py
