#!/usr/bin/env bash
# Installs what spand needs, builds it (warnings as errors), and runs every test suite; then
# builds everything again with AddressSanitizer + UBSan (leak checks on) and runs the unit and pcap
# suites under it: the gateway core, the estimate service and Redis code, the agent's core; then
# runs each libFuzzer target of tests/fuzz for 15 s under ASan + UBSan (clang, build-fuzz).
# Usage (as root): bash deploy/test-all.sh   (from anywhere; builds in ./build-test, ./build-asan
# and ./build-fuzz)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash deploy/setup.sh

jobs=$(nproc)
echo "== format: clang-format --dry-run on the project's C/C++ sources"
git ls-files '*.cpp' '*.hpp' '*.h' '*.c' | grep -v '^agents/spand-agent/bpf/' |
  xargs clang-format --dry-run --Werror

echo "== planes: no include from a lower plane to a higher one"
python3 tests/check_planes.py

echo "== build (warnings as errors)"
[ -d build-test ] || meson setup build-test -Dwerror=true -Dtests=true
ninja -C build-test -j "$jobs"

echo "== tests: unit, pcap, integration"
meson test -C build-test --print-errorlogs --num-processes 1 --suite unit --suite pcap --suite integration

echo "== AddressSanitizer + UBSan: unit and pcap suites"
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
  -Dtests=true
ninja -C build-asan -j "$jobs"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  meson test -C build-asan --print-errorlogs --num-processes 1 --suite unit --suite pcap

echo "== fuzz: each libFuzzer target (tests/fuzz) for a short run under ASan + UBSan"
# clang's libFuzzer; only the fuzz targets and what they link are built (not gRPC or the agent).
[ -d build-fuzz ] || CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dtests=false \
  -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz_seconds=15
ninja -C build-fuzz -j "$jobs" fuzz
meson test -C build-fuzz --no-rebuild --print-errorlogs --num-processes 1 --suite fuzz
