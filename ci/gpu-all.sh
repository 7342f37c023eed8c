#!/usr/bin/env bash
# ci/gpu-all.sh: everything the GPU machine runs, in one device call: the
# whole test suite on the HIP backend (ci/gpu-h200.sh), `cubert topo`, the
# fault-injection scenario suite and a campaign on the HIP devices, then the
# benchmarks (ci/bench-h200.sh). With two GPUs this covers the peer tests,
# the peer scenarios and the peer bandwidth matrix.
#
#   OUT=/some/dir bash ci/gpu-all.sh     (on the GPU machine; needs .gpu-kit)
#
# Writes 8 files to $OUT (the device tool brings back at most 8):
# summary.txt, ctest.log, faultinj.log, bench.log, peer.json, peer.csv,
# runtime.json, runtime.csv. Exit status: non-zero when any part failed.
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
} >"$tmp/faultinj.log" 2>&1
grep -q '^exit: [^0]' "$tmp/faultinj.log" && rc=1

OUT=$tmp/bench bash ci/bench-h200.sh >"$tmp/benchrun.log" 2>&1 || rc=1

{
  echo "ci/gpu-all.sh on $(hostname) at $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null
  echo; echo "== test suite (ci/gpu-h200.sh)"; cat "$tmp/suite/summary.txt" 2>/dev/null
  echo; echo "== fault injection"; grep -E '^(==|runs:|programs:|faults injected:|violations:|exit:)' "$tmp/faultinj.log"
  echo; echo "== benchmarks (ci/bench-h200.sh)"; tail -n 12 "$tmp/benchrun.log"
  echo; echo "overall: $([ "$rc" -eq 0 ] && echo PASS || echo FAIL)"
} >"$out/summary.txt"
cp "$tmp/suite/ctest.log" "$out/ctest.log" 2>/dev/null
cp "$tmp/faultinj.log" "$out/faultinj.log"
cat "$tmp/bench/bench.log" "$tmp/bench/build.log" >"$out/bench.log" 2>/dev/null
for f in peer.json peer.csv runtime.json runtime.csv; do cp "$tmp/bench/$f" "$out/$f" 2>/dev/null; done
cat "$out/summary.txt"
exit "$rc"
