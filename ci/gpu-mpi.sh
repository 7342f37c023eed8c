#!/usr/bin/env bash
# ci/gpu-mpi.sh: the MPI component on the GPU machine (issue 14 item 7):
# two ranks sharing its one GPU, through HIP's NVIDIA platform.
#
# Before (on the Debian machine), beside .gpu-kit (ci/gpu-kit.sh):
#   bash ../shared/gpu/mpi-kit.sh .mpi-kit     # Debian's Open MPI, relocatable
# On the GPU machine, from the repository:
#   OUT=/some/dir bash ci/gpu-mpi.sh
#
# Steps: configure build-gpu-mpi/ (-DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia
# -DCUBERT_MPI=ON, MPI from .mpi-kit), build the MPI suite and cubert-mpi,
# run tests/mpi/test_mpi_transfer with 2 ranks on the HIP backend (both on
# device 0), through shared memory (HIP IPC between the two processes, the
# default CUBERT_MPI_IPC=auto) and again through MPI's messages
# (CUBERT_MPI_IPC=off), then `cubert-mpi bench` with 2 ranks (device buffers
# through cubert beside raw MPI: on device buffers where GPU-aware, else
# staged by hand; and on host buffers) the same two ways, and a short
# sharded campaign. Writes to $OUT: summary.txt, build.log, tests.log,
# tests-wire.log, bench.txt, bench.json, bench.csv, bench-wire.txt,
# bench-wire.json, bench-wire.csv (and bench-matrix.svg, bench-sweep.svg
# where cairo was found). Exit status: non-zero when any step failed.
# Then where the 8-byte latency goes (CUBERT_MPI_PROFILE=1: each rank's
# time per phase of a transfer, docs/cluster.md "Where the latency goes"),
# in profile.txt, and where the time of 64 KiB to 1 MiB transfers goes,
# both ways, in profile-mid.txt and profile-mid-wire.txt.
#
# Trying the script's logic where there is no GPU: CUBERT_GPU_MPI_BACKEND=host
# (no .gpu-kit needed; the system's MPI is used when .mpi-kit is absent).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out"
backend=${CUBERT_GPU_MPI_BACKEND:-hip}
build=${CUBERT_GPU_MPI_BUILD:-$root/build-gpu-mpi}
jobs=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
rc=0
summary() { echo "$*" | tee -a "$out/summary.txt"; }
: >"$out/summary.txt"
summary "ci/gpu-mpi.sh on $(hostname) at $(date -u +%FT%TZ), backend $backend"

platform=()
if [ "$backend" = hip ]; then
  if [ ! -f .gpu-kit/kit.env ]; then
    summary "no .gpu-kit/kit.env: build it first (bash ci/gpu-kit.sh ../shared/gpu/kit.sh)"
    exit 2
  fi
  # shellcheck source=/dev/null
  source .gpu-kit/kit.env
  platform=(-DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=nvidia)
  command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$out/summary.txt"
else
  platform=(-DCUBERT_HIP=OFF)
fi
if [ -f .mpi-kit/env.sh ]; then
  # shellcheck source=/dev/null
  source .mpi-kit/env.sh
elif [ "$backend" = hip ]; then
  summary "no .mpi-kit/env.sh: build it first (bash ../shared/gpu/mpi-kit.sh .mpi-kit)"
  exit 2
fi
mpicc=$(command -v mpicc) || { summary "no mpicc on PATH"; exit 2; }
mpirun=$(command -v orterun || command -v mpirun)
summary "MPI: $mpicc ($("$mpirun" --version 2>/dev/null | head -n 1))"
# run_ranks ARGS...: mpirun with ARGS on $backend, no fault rules from the
# environment, 10 minutes at most.
run_ranks() {
  local root_flag=()
  [ "$(id -u)" -eq 0 ] && root_flag=(--allow-run-as-root)
  timeout 600 env -u CUBERT_FAULTS -u CUBERT_MPI_FAULTS CUBERT_BACKENDS="$backend" \
    "$mpirun" --oversubscribe "${root_flag[@]}" "$@"
}

# with the benchmarks: `cubert-mpi bench` is built only with them
if cmake -S "$root" -B "$build" -G Ninja "${platform[@]}" -DCUBERT_MPI=ON -DMPI_C_COMPILER="$mpicc" \
     -DCUBERT_BUILD_BENCH=ON >"$out/build.log" 2>&1 &&
   cmake --build "$build" --parallel "$jobs" --target test_mpi_transfer cubert_mpi_tool >>"$out/build.log" 2>&1; then
  summary "build: ok"
else
  summary "build: FAILED (build.log)"
  tail -n 30 "$out/build.log"
  exit 1
fi

# The suite: taint across ranks exactly, injected transport faults, bad
# input; 2 ranks, each with its client on device 0 of $backend. Twice: the
# ranks share the node, so through shared memory (auto; the suite asserts
# it), then through MPI's messages (off).
for ipc in auto off; do
  log=tests.log
  [ "$ipc" = off ] && log=tests-wire.log
  if CUBERT_MPI_IPC=$ipc CUBERT_MPI_TEST_BACKEND=$backend CK_VERBOSITY=verbose \
       run_ranks -n 2 "$build/tests/mpi/test_mpi_transfer" >"$out/$log" 2>&1; then
    summary "tests (2 ranks, $backend, CUBERT_MPI_IPC=$ipc): $(grep -m1 '%: Checks' "$out/$log")"
  else
    summary "tests (2 ranks, $backend, CUBERT_MPI_IPC=$ipc): FAILED ($log)"
    grep -E ':[FE]:|skipped|left behind' "$out/$log" | head -n 20 | tee -a "$out/summary.txt"
    rc=1
  fi
done

# Bandwidth and latency between the two ranks (osu_bw/osu_bibw/osu_latency's
# method); device buffers through cubert beside MPI on device buffers where
# the MPI is GPU-aware, else staged by hand (hipMemcpy to pinned memory, MPI,
# hipMemcpy), and MPI on host buffers. The pictures where cairo is in.
# Through shared memory (auto), then through MPI's messages (off).
svg=()
grep -q 'SVG output on' "$out/build.log" && svg=(--svg "$out/bench")
for ipc in auto off; do
  b=bench
  pictures=("${svg[@]}")
  [ "$ipc" = off ] && b=bench-wire && pictures=()
  if CUBERT_MPI_IPC=$ipc run_ranks -n 2 "$build/mpi/tool/cubert-mpi" bench --sizes 8,4K,64K,1M,16M,64M \
       --iters 4 --json "$out/$b.json" --csv "$out/$b.csv" "${pictures[@]}" >"$out/$b.txt" 2>&1; then
    summary "bench (2 ranks, CUBERT_MPI_IPC=$ipc): $(grep -m1 '^validation' "$out/$b.txt")"
  else
    summary "bench (2 ranks, CUBERT_MPI_IPC=$ipc): FAILED ($b.txt)"
    rc=1
  fi
  grep -E '^(pair|0-1| +latency| +of which|  (MPI on|staged by)|through shared)' "$out/$b.txt" |
    tee -a "$out/summary.txt"
done

# Where the latency goes: 8-byte transfers only, and each rank's time per
# phase of a transfer (printed by cubert_mpi_finalize).
if CUBERT_MPI_PROFILE=1 run_ranks -n 2 "$build/mpi/tool/cubert-mpi" bench --sizes 8 --iters 200 \
     >"$out/profile.txt" 2>&1; then
  grep -E 'latency|of which|profile' "$out/profile.txt" | tee -a "$out/summary.txt"
else
  summary "latency profile (2 ranks): FAILED (profile.txt)"
  rc=1
fi

# Where the time of 64 KiB to 1 MiB transfers goes (osu_bw's window of 64),
# through shared memory and through MPI's messages: phases, pinned buffers
# allocated, sends that found no free shared buffer.
for ipc in auto off; do
  p=profile-mid
  [ "$ipc" = off ] && p=profile-mid-wire
  if CUBERT_MPI_IPC=$ipc CUBERT_MPI_PROFILE=1 run_ranks -n 2 "$build/mpi/tool/cubert-mpi" bench \
       --sizes 64K,256K,1M --iters 4 >"$out/$p.txt" 2>&1; then
    grep -E '^0-1|latency|profile' "$out/$p.txt" | sed "s/^/$p: /" | tee -a "$out/summary.txt"
  else
    summary "$p (2 ranks, CUBERT_MPI_IPC=$ipc): FAILED ($p.txt)"
    rc=1
  fi
done

# A campaign sharded over the 2 ranks (the harness's programs run on the
# host backend: the campaign's devices are simulated ones), then 200
# exchanges between the ranks on $backend's device 0 through MPI's
# messages and 100 shared exchanges through shared memory (HIP IPC on the
# GPU; docs/cluster.md).
if run_ranks -n 2 "$build/mpi/tool/cubert-mpi" campaign --seed 20261201 --programs 400 --exchanges 200 \
     >>"$out/tests.log" 2>&1; then
  summary "campaign (2 ranks): $(grep -m1 '^verdict' "$out/tests.log")"
  summary "exchanges: $(grep -m1 '^counts:' "$out/tests.log" | sed 's/.*; exchanges/exchanges/')"
  summary "shared exchanges: $(grep -m1 '^shared counts:' "$out/tests.log" | sed 's/^shared counts: //')"
else
  summary "campaign (2 ranks): FAILED (tests.log)"
  rc=1
fi
summary "overall: $([ "$rc" -eq 0 ] && echo PASS || echo FAIL)"
exit "$rc"
