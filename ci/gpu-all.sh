#!/usr/bin/env bash
# ci/gpu-all.sh: everything the GPU machine runs, in one device call: the
# whole test suite on the HIP backend (ci/gpu-h200.sh), `cubert topo`, the
# fault-injection scenario suite and a campaign on the HIP devices, then the
# benchmarks (ci/bench-h200.sh). With two GPUs this covers the peer tests,
# the peer scenarios and the peer bandwidth matrix.
#
#   OUT=/some/dir bash ci/gpu-all.sh     (on the GPU machine; needs .gpu-kit)
#
# Writes to $OUT (the device tool brings back at most 8 files):
# summary.txt, ctest.log, faultinj.log, bench.log, mpi.log (when ci/gpu-mpi.sh
# and .mpi-kit are there) and results.tar.gz (peer and runtime JSON/CSV, the
# whole test log, the MPI run's files). Exit status: non-zero when any part failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
out=${OUT:?set OUT to the folder for the results}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CUBERT_JOBS=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
rc=0

OUT=$tmp/suite bash ci/gpu-h200.sh >"$tmp/suite.log" 2>&1 || rc=1
# shellcheck source=/dev/null
source .gpu-kit/kit.env
tool=$root/build-gpu/cli/cubert
{
  echo "== cubert topo (hip)"
  CUBERT_BACKENDS=hip "$tool" topo
  echo "== cubert faultinj suite --backend hip"
  env -u CUBERT_FAULTS "$tool" faultinj suite --backend hip
  echo "exit: $?"
  devices=$(CUBERT_BACKENDS=hip "$tool" info --json | grep -c '"backend": "hip"')
  [ "$devices" -ge 1 ] || devices=1
  echo "== cubert faultinj campaign --backend hip --devices $devices --faults 20000"
  env -u CUBERT_FAULTS "$tool" faultinj campaign --backend hip --devices "$devices" --seed 20261129 --faults 20000
  echo "exit: $?"
  echo "== cubert faultinj procs --backend hip --seed 3 --programs 20 (processes sharing one GPU through HIP IPC)"
  env -u CUBERT_FAULTS "$tool" faultinj procs --backend hip --seed 3 --programs 20
  echo "exit: $?"
} >"$tmp/faultinj.log" 2>&1
grep -q '^exit: [^0]' "$tmp/faultinj.log" && rc=1

OUT=$tmp/bench bash ci/bench-h200.sh >"$tmp/benchrun.log" 2>&1 || rc=1

# A user's program from outside the tree on the GPU: the suite's build
# installed, examples/consumer built against it through the CMake package
# (shared and static) and run with the default backends; each must say it
# copied on the H200 through the HIP backend.
{
  echo "== examples/consumer against the installed build-gpu"
  cmake --install build-gpu --prefix "$tmp/prefix" >/dev/null &&
    cmake -S examples/consumer -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null &&
    cmake --build "$tmp/consumer" >/dev/null
  echo "build: $?"
  for p in consumer consumer_static; do
    line=$("$tmp/consumer/$p")
    code=$?
    echo "$p: $line"
    case $line in
      *"backend hip); a wrong-size read said: ERR_"*) echo "exit: $code" ;;
      *) echo "exit: 1 (not run on the GPU, or no refused read)" ;;
    esac
  done
} >"$tmp/consumer.log" 2>&1
grep -q '^\(exit\|build\): [^0]' "$tmp/consumer.log" && rc=1

# MPI ranks sharing the GPU (issue 14), when the script and the MPI kit
# (../shared/gpu/mpi-kit.sh .mpi-kit) came along
mpi_state="not run (no ci/gpu-mpi.sh or no .mpi-kit)"
if [ -f ci/gpu-mpi.sh ] && [ -f .mpi-kit/env.sh ]; then
  mkdir -p "$tmp/mpi"
  if OUT=$tmp/mpi bash ci/gpu-mpi.sh >"$tmp/mpi/run.log" 2>&1; then mpi_state=PASS; else mpi_state=FAIL; rc=1; fi
fi

{
  echo "ci/gpu-all.sh on $(hostname) at $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null
  echo; echo "== test suite (ci/gpu-h200.sh)"; cat "$tmp/suite/summary.txt" 2>/dev/null
  echo; echo "== fault injection"; grep -E '^(==|runs:|programs:|faults injected:|violations:|exit:)' "$tmp/faultinj.log"
  echo; echo "== benchmarks (ci/bench-h200.sh)"; tail -n 12 "$tmp/benchrun.log"
  echo; cat "$tmp/consumer.log"
  echo; echo "== MPI (ci/gpu-mpi.sh): $mpi_state"; cat "$tmp/mpi/summary.txt" 2>/dev/null
  echo; echo "overall: $([ "$rc" -eq 0 ] && echo PASS || echo FAIL)"
} >"$out/summary.txt"
cp "$tmp/suite/ctest.log" "$out/ctest.log" 2>/dev/null
cp "$tmp/faultinj.log" "$out/faultinj.log"
cat "$tmp/bench/bench.log" "$tmp/bench/build.log" >"$out/bench.log" 2>/dev/null
# at most 8 files come back from the GPU machine: the rest in one archive
mkdir -p "$tmp/results"
for f in peer.json peer.csv runtime.json runtime.csv; do cp "$tmp/bench/$f" "$tmp/results/$f" 2>/dev/null; done
cp "$tmp/suite/LastTest.log" "$tmp/results/" 2>/dev/null
[ -d "$tmp/mpi" ] && cp -r "$tmp/mpi" "$tmp/results/mpi"
tar -C "$tmp/results" -czf "$out/results.tar.gz" .
[ -f "$tmp/mpi/run.log" ] && cp "$tmp/mpi/run.log" "$out/mpi.log"
cat "$out/summary.txt"
exit "$rc"
