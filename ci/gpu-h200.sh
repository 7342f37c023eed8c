#!/usr/bin/env bash
# ci/gpu-h200.sh: the whole suite on the NVIDIA H200 machine, through HIP's
# NVIDIA platform (Ubuntu 24.04, gcc 13, cmake, ninja, CUDA 13, driver 580,
# no package manager: everything else comes from the kit).
#
# Before (on the Debian machine): bash ci/gpu-kit.sh ../shared/gpu/kit.sh
# builds .gpu-kit (HIP 5.2 headers, CUDA 11.8 runtime, hwloc, Check, jansson);
# the kit travels with the working tree. On the GPU machine, from the repo:
#
#   bash ci/gpu-h200.sh
#
# Stages: system (what the machine has), configure (-DCUBERT_HIP=ON
# -DCUBERT_HIP_PLATFORM=nvidia into build-gpu/), build, test (every ctest
# test, output of failures), gpu-seen (the HIP suites ran on the GPU rather
# than skipping). Every stage after a failed configure or build is skipped.
# With $OUT set, 6 files land in $OUT (no folders): summary.txt, system.txt,
# configure.log, build.log, ctest.log, LastTest.log (every test's output).
# Environment: CUBERT_GPU_BUILD (default build-gpu), CUBERT_JOBS (default:
# the machine's cores), CUBERT_GPU_WERROR=1 for -Werror (off: gcc 13 may
# warn where Debian CI's gcc 12 and clang 14 do not, and a GPU run is too
# dear to lose to a warning).
# shellcheck disable=SC2317 # the stage functions run through cb_stage
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CUBERT_JOBS=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
# shellcheck source=ci/lib.sh
source "$root/ci/lib.sh"
cd "$root" || exit 1

build=${CUBERT_GPU_BUILD:-$root/build-gpu}
out=${OUT:-}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

kit=$root/.gpu-kit
if [ ! -f "$kit/kit.env" ]; then
  echo "gpu-h200: no $kit/kit.env: build the kit first (bash ci/gpu-kit.sh ../shared/gpu/kit.sh)" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$kit/kit.env"

# Keeps `file` as it goes to the console.
tee_to() { tee "$logs/$1"; }

stage_system() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -srm)"
    [ -r /etc/os-release ] && (. /etc/os-release && echo "os: $PRETTY_NAME")
    echo "gcc: $(gcc --version | head -n1)"
    echo "cmake: $(cmake --version | head -n1)"
    echo "ninja: $(ninja --version)"
    echo "cores: $CUBERT_JOBS"
    echo "kit: $kit ($(du -sh "$kit" | cut -f1)); jansson: $(pkg-config --modversion jansson 2>/dev/null || echo MISSING);" \
         "hwloc: $(pkg-config --modversion hwloc 2>/dev/null || echo MISSING); check: $(pkg-config --modversion check 2>/dev/null || echo MISSING)"
    echo "nvrtc:" /usr/local/cuda/lib64/libnvrtc.so*
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi -L
      nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,ecc.mode.current --format=csv
      nvidia-smi topo -m
    else
      echo "nvidia-smi: not found"
    fi
  } 2>&1 | tee_to system.txt
  pkg-config --exists jansson || {
    echo "gpu-h200: the kit has no jansson: rebuild it with ci/gpu-kit.sh" >&2
    return 1
  }
}

stage_configure() {
  local werror=OFF
  [ "${CUBERT_GPU_WERROR:-0}" = 1 ] && werror=ON
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia -DCUBERT_WERROR="$werror" 2>&1 | tee_to configure.log
}

stage_build() {
  cmake --build "$build" --parallel "$CUBERT_JOBS" 2>&1 | tee_to build.log
}

stage_test() {
  ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$CUBERT_JOBS" --timeout 300 \
    2>&1 | tee_to ctest.log
}

# The HIP suites must have met the GPU: a "skipped: no device" from them on
# a machine whose nvidia-smi lists a GPU means the backend did not see it.
stage_gpu_seen() {
  local log=$build/Testing/Temporary/LastTest.log
  [ -f "$log" ] || { echo "gpu-h200: no $log"; return 1; }
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-h200: nvidia-smi lists no GPU; not checking"
    return 0
  fi
  local skips
  skips=$(grep -c '^skipped: no device' "$log" || true)
  echo "gpu-h200: 'skipped: no device' lines in the test log: $skips"
  grep -n '^skipped: ' "$log" | sort | uniq -c | head -n 40
  if grep -q '^device 0: ' "$log"; then
    grep '^device 0: \|^fault reported as: ' "$log" | head -n 4
  else
    echo "gpu-h200: test_hip_backend never printed its device: the GPU was not used"
    return 1
  fi
}

if cb_stage system stage_system && cb_stage configure stage_configure && cb_stage build stage_build; then
  cb_stage test stage_test
  cb_stage gpu-seen stage_gpu_seen
else
  cb_stage_skip test "configure or build failed"
  cb_stage_skip gpu-seen "configure or build failed"
fi
cb_summary 2>&1 | tee "$logs/summary.txt"
rc=${PIPESTATUS[0]}

if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$logs"/*.txt "$logs"/*.log "$out"/ 2>/dev/null || true
  [ -f "$build/Testing/Temporary/LastTest.log" ] && cp "$build/Testing/Temporary/LastTest.log" "$out/"
  echo "gpu-h200: logs in $out:" "$out"/*
fi
exit "$rc"
