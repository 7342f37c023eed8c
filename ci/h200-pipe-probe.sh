#!/usr/bin/env bash
# ci/h200-pipe-probe.sh: where a pipelined pageable write's time goes on the
# H200 machine (issue 15: pageable h2d at 64 MiB missed 3x raw). Builds as
# ci/bench-h200.sh does (its build folder is reused), then runs the
# pageable rows of `cubert bench peer --only sweep` at 64 MiB and 1 GiB with
# $CUBERT_HIP_PIPE_TRACE=1 (backends/hip/hip_pipe.c: one line per pipelined
# transfer on stderr) under several settings, alternated over rounds:
#   default            the defaults (hip_pipe.c)
#   spin20ms, spin0    copy threads spin 20 ms / not at all before they sleep
#   streamall          writes fill the chunks with streaming stores too
#   t16                16 copy threads
#   cSIZExN            N chunks of SIZE (c4Mx8: 8 chunks of 4 MiB)
# ($CUBERT_PROBE_VARIANTS picks them, in order; each round runs them all.)
#
#   OUT=/some/dir bash ci/h200-pipe-probe.sh
#
# $OUT gets build.log and probe.log (each cell's rows and its traces).
# Environment: CUBERT_PROBE_ROUNDS (2), CUBERT_PROBE_LIMIT (s, 240).
# shellcheck disable=SC2317
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CUBERT_JOBS=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
cd "$root" || exit 1
build=${CUBERT_BENCH_BUILD:-$root/build-bench-gpu}
out=${OUT:-$build/out}
mkdir -p "$out"
tool=$build/cli/cubert
kit=$root/.gpu-kit
[ -f "$kit/kit.env" ] || { echo "pipe-probe: no $kit/kit.env" >&2; exit 2; }
# shellcheck source=/dev/null
source "$kit/kit.env"
{
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=ON &&
    cmake --build "$build" --parallel "$CUBERT_JOBS"
} >"$out/build.log" 2>&1 || { tail -n 20 "$out/build.log"; exit 1; }

cell() {
  local name=$1
  shift
  echo "== $name ($*)" >>"$out/probe.log"
  env "$@" CUBERT_HIP_PIPE_TRACE=1 CUBERT_BACKENDS=hip timeout 60 "$tool" bench peer --only sweep \
    --sizes 64M,1G --reps 5 --warmup 2 --quiet >"$out/cell.txt" 2>"$out/cell.err"
  awk '($1 == "h2d" || $1 == "d2h") && $2 == "uni"' "$out/cell.txt" >>"$out/probe.log"
  grep '^cubert pipe:' "$out/cell.err" | grep -E ' (67108864|1073741824) B' >>"$out/probe.log"
}

start=$SECONDS
limit=${CUBERT_PROBE_LIMIT:-240}
date -u +%FT%TZ >"$out/probe.log"
nvidia-smi -L >>"$out/probe.log" 2>&1
{
  lscpu | grep -E 'Model name|L3|L2|NUMA node|Socket|Thread'
  echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
} >>"$out/probe.log" 2>&1
variants=${CUBERT_PROBE_VARIANTS:-default streamall c2Mx8 c4Mx4 c4Mx8 c8Mx4 t16}
for r in $(seq 1 "${CUBERT_PROBE_ROUNDS:-2}"); do
  for v in $variants; do
    [ $((SECONDS - start)) -lt "$limit" ] || break 2
    case $v in
      default) cell "$v r$r" X=1 ;;
      spin20ms) cell "$v r$r" CUBERT_HIP_COPY_SPIN_US=20000 ;;
      spin0) cell "$v r$r" CUBERT_HIP_COPY_SPIN_US=0 ;;
      streamall) cell "$v r$r" CUBERT_HIP_COPY_STREAM=all ;;
      t16) cell "$v r$r" CUBERT_HIP_COPY_THREADS=16 ;;
      c*) c=${v#c}; cell "$v r$r" CUBERT_HIP_STAGING_CHUNK="${c%x*}" CUBERT_HIP_STAGING_CHUNKS="${c#*x}" ;;
    esac
  done
done
rm -f "$out/cell.txt" "$out/cell.err"
echo "probe: $((SECONDS - start)) s" >>"$out/probe.log"
grep -E '^(==|h2d|d2h)' "$out/probe.log"
