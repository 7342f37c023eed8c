#!/usr/bin/env bash
# ci/bench-h200.sh: the benchmarks on the NVIDIA H200 machine, through HIP's
# NVIDIA platform (as ci/gpu-h200.sh builds the suite there).
#
# Before (on the Debian machine): bash ci/gpu-kit.sh ../shared/gpu/kit.sh
# builds .gpu-kit, which travels with the working tree. On the GPU machine,
# from the repository:
#
#   OUT=/some/dir bash ci/bench-h200.sh
#
# Stages: system, configure (-DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia,
# Release, no tests, into build-bench-gpu/), build, peer (`cubert bench peer`,
# sizes 1 KiB..1 GiB: device-to-device, host transfers, latency, and the
# pairs when there are two GPUs), runtime (`cubert bench runtime`), strided
# (`cubert bench strided`: strided copies beside hipMemcpy2D/3DAsync, a few
# seconds). The benchmarks run with CUBERT_BACKENDS=hip and a time limit
# each, so the whole run stays near 7 minutes (the build takes 1-2 of them; the pinned
# rows of issue 15 add to `bench peer`, not yet timed there: its limit is 330 s).
#
# $OUT (default build-bench-gpu/out) gets at most 10 files, no folders:
# build.log (system, configure, build), bench.log (the benchmarks' output
# and progress), peer.json, peer.csv, runtime.json, runtime.csv,
# strided.json, strided.csv, and
# peer-matrix.svg + peer-sweep.svg when cairo is on this machine (it usually
# is not: draw them on the Debian machine with `cubert bench plot peer.json
# peer`).
# Environment: CUBERT_BENCH_BUILD (default build-bench-gpu), CUBERT_JOBS
# (default: the machine's cores), CUBERT_BENCH_PEER_ARGS (extra arguments of
# `bench peer`, e.g. "--sizes 4K..256M"), CUBERT_BENCH_PEER_LIMIT (s, 330),
# CUBERT_BENCH_RUNTIME_LIMIT (s, 120), CUBERT_BENCH_STRIDED_LIMIT (s, 60).
# shellcheck disable=SC2317 # the stage functions run through cb_stage
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CUBERT_JOBS=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
# shellcheck source=ci/lib.sh
source "$root/ci/lib.sh"
cd "$root" || exit 1

build=${CUBERT_BENCH_BUILD:-$root/build-bench-gpu}
out=${OUT:-$build/out}
mkdir -p "$out"
tool=$build/cli/cubert
peer_limit=${CUBERT_BENCH_PEER_LIMIT:-330}
runtime_limit=${CUBERT_BENCH_RUNTIME_LIMIT:-120}
strided_limit=${CUBERT_BENCH_STRIDED_LIMIT:-60}

kit=$root/.gpu-kit
if [ ! -f "$kit/kit.env" ]; then
  echo "bench-h200: no $kit/kit.env: build the kit first (bash ci/gpu-kit.sh ../shared/gpu/kit.sh)" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$kit/kit.env"

stage_system() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -srm)"
    [ -r /etc/os-release ] && (. /etc/os-release && echo "os: $PRETTY_NAME")
    echo "gcc: $(gcc --version | head -n1)"
    echo "cores: $CUBERT_JOBS"
    echo "cairo: $(pkg-config --modversion cairo 2>/dev/null || echo 'none (no SVG here)')"
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi -L
      nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
        --format=csv
      nvidia-smi topo -m
    else
      echo "nvidia-smi: not found"
    fi
  } >>"$out/build.log" 2>&1
  cat "$out/build.log"
}

stage_configure() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=ON \
    >>"$out/build.log" 2>&1
  local rc=$?
  grep -E '^-- (HIP backend|bench):' "$out/build.log"
  return "$rc"
}

stage_build() {
  cmake --build "$build" --parallel "$CUBERT_JOBS" >>"$out/build.log" 2>&1
  local rc=$?
  tail -n 5 "$out/build.log"
  return "$rc"
}

# Whether this build draws SVG (cairo found at configure time).
have_svg() { grep -q '^CAIRO_FOUND:INTERNAL=1' "$build/CMakeCache.txt" 2>/dev/null; }

# Runs `cubert bench NAME ARGS...` on the HIP devices for at most LIMIT
# seconds under a "==== cubert bench NAME ====" header, its output appended
# to bench.log; a run past the limit says so there and on stdout. Returns
# the benchmark's status (124: ran past the limit).
run_limited() {
  local name=$1 limit=$2 rc
  shift 2
  echo "==== cubert bench $name ====" >>"$out/bench.log"
  CUBERT_BACKENDS=hip timeout "$limit" "$tool" bench "$name" "$@" >>"$out/bench.log" 2>&1
  rc=$?
  [ "$rc" -eq 124 ] && echo "bench-h200: bench $name ran past ${limit} s" | tee -a "$out/bench.log"
  return "$rc"
}

stage_peer() {
  local svg=()
  have_svg && svg=(--svg "$out/peer")
  # shellcheck disable=SC2086 # extra arguments are words on purpose
  run_limited peer "$peer_limit" --sizes 1K..1G --json "$out/peer.json" --csv "$out/peer.csv" \
    "${svg[@]}" ${CUBERT_BENCH_PEER_ARGS:-}
}

stage_runtime() {
  run_limited runtime "$runtime_limit" --json "$out/runtime.json" --csv "$out/runtime.csv"
}

stage_strided() {
  run_limited strided "$strided_limit" --json "$out/strided.json" --csv "$out/strided.csv"
}

# Where the pageable pipeline's host copies use streaming stores
# (backends/hip/hip_pipe.c, $CUBERT_HIP_COPY_STREAM), alternated over three
# rounds: the default (reads; a write's first pass over the chunks) against
# `reads` (reads only, before 2026-12-03) and `all`, the pageable rows at
# 64 MiB, 256 MiB and 1 GiB (issue 15: pageable h2d at 64 MiB missed 3x
# raw); and `chunks2M`, the default with 8 chunks of 2 MiB, whose copies
# of 2 MiB show the copy pool's hand-over cost (base/copier.c: 19-20 GB/s
# in the probe of 06:23Z, before the lock-free hand-over).
# CUBERT_BENCH_PIPE_SWEEP=0 leaves it out; CUBERT_BENCH_PIPE_LIMIT (s, 160).
sweep_row() {
  CUBERT_BACKENDS=hip timeout 40 "$tool" bench peer --only sweep --sizes 64M,256M,1G --reps 5 --warmup 2 --quiet 2>&1 |
    awk '($1 == "h2d" || $1 == "d2h") && $2 == "uni" { printf "%s %s %s %s raw %s ratio %s; ", $1, $5, $6, $8, $12, $13 }'
}

stage_pipe_sweep() {
  local r s line start=$SECONDS limit=${CUBERT_BENCH_PIPE_LIMIT:-160}
  echo "stream | pageable rows (cubert GB/s, raw GB/s, ratio)" >>"$out/bench.log"
  for r in 1 2 3; do
    for s in default reads all chunks2M; do
      [ $((SECONDS - start)) -lt "$limit" ] || { echo "pipe sweep: stopped at ${limit} s" >>"$out/bench.log"; return 0; }
      if [ "$s" = default ]; then
        line=$(sweep_row)
      elif [ "$s" = chunks2M ]; then
        line=$(CUBERT_HIP_STAGING_CHUNK=2M CUBERT_HIP_STAGING_CHUNKS=8 sweep_row)
      else
        line=$(CUBERT_HIP_COPY_STREAM=$s sweep_row)
      fi
      echo "stream $s (round $r) | $line" >>"$out/bench.log"
    done
  done
}

: >"$out/build.log"
: >"$out/bench.log"
if cb_stage system stage_system && cb_stage configure stage_configure && cb_stage build stage_build; then
  cb_stage peer stage_peer
  cb_stage runtime stage_runtime
  cb_stage strided stage_strided
  if [ "${CUBERT_BENCH_PIPE_SWEEP:-1}" != 0 ]; then
    echo "==== pageable pipeline sweep ====" >>"$out/bench.log"
    cb_stage pipe-sweep stage_pipe_sweep
  fi
  grep -E '^(validation|  [a-z].*(met|figure))' "$out/bench.log"
else
  for stage in peer runtime strided; do cb_stage_skip "$stage" "configure or build failed"; done
fi
cb_summary 2>&1 | tee -a "$out/bench.log"
rc=${PIPESTATUS[0]}
echo "bench-h200: files in $out:" "$out"/*
exit "$rc"
