#!/usr/bin/env bash
# ci/h200-launch-ab.sh: the launch rows of `cubert bench runtime` (or, with
# CUBERT_AB_WHAT=pageable, the pageable h2d/d2h rows of `bench peer` at
# 64 MiB, 256 MiB and 1 GiB) for two source trees on one GPU machine,
# alternated over rounds, so a change is measured against what it
# replaces on the same machine (machines of one kind differ more than the
# change: docs/bench.md).
#
#   OUT=/some/dir CUBERT_AB_OTHER=path/to/other/tree bash ci/h200-launch-ab.sh
#
# Builds this tree (A) and $CUBERT_AB_OTHER (B) as ci/bench-h200.sh does
# (Release, HIP on the kit's platform, no tests), then runs `bench runtime`
# A, B, B, A, A, B, ... ($CUBERT_AB_ROUNDS pairs, default 3; each run its
# own process) and keeps each run's launch lines. $OUT gets build-A.log,
# build-B.log and ab.log. Environment: CUBERT_AB_LIMIT (s, default 300).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
other=${CUBERT_AB_OTHER:?set CUBERT_AB_OTHER to the other source tree}
other=$(cd "$other" && pwd) || exit 2
export CUBERT_JOBS=${CUBERT_JOBS:-$(nproc 2>/dev/null || echo 4)}
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out"
kit=$root/.gpu-kit
[ -f "$kit/kit.env" ] || { echo "launch-ab: no $kit/kit.env" >&2; exit 2; }
# shellcheck source=/dev/null
source "$kit/kit.env"
build() { # build SRC DIR LOG
  { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUBERT_HIP=ON \
      -DCUBERT_HIP_PLATFORM=nvidia -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=ON &&
      cmake --build "$2" --parallel "$CUBERT_JOBS"; } >"$3" 2>&1 || { tail -n 20 "$3"; return 1; }
}
build "$root" "$root/build-ab-A" "$out/build-A.log" || exit 1
build "$other" "$root/build-ab-B" "$out/build-B.log" || exit 1

log=$out/ab.log
{
  date -u +%FT%TZ
  nvidia-smi -L 2>&1
  lscpu | grep -E 'Model name|L3|NUMA node\(s\)'
} >"$log"
what=${CUBERT_AB_WHAT:-launch}
run() { # run A|B ROUND
  local rc
  if [ "$what" = pageable ]; then
    CUBERT_BACKENDS=hip timeout 60 "$root/build-ab-$1/cli/cubert" bench peer --only sweep --sizes 64M,256M,1G \
      --reps 5 --warmup 2 --quiet >"$out/cell.txt" 2>&1
    rc=$?
    {
      echo "== $1 (round $2), exit $rc"
      awk '($1 == "h2d" || $1 == "d2h") && $2 == "uni"' "$out/cell.txt"
    } >>"$log"
    return
  fi
  CUBERT_BACKENDS=hip timeout 120 "$root/build-ab-$1/cli/cubert" bench runtime --quiet >"$out/cell.txt" 2>&1
  rc=$?
  {
    echo "== $1 (round $2), exit $rc"
    grep -E 'launch path, cubert / raw|launch-(0|4|16)buf before the sync' "$out/cell.txt"
    grep -E -A1 '^launchsteps +(0|4|16)buf (cubert_launch|backend, image) ' "$out/cell.txt" | grep -v '^--'
  } >>"$log"
}
start=$SECONDS
limit=${CUBERT_AB_LIMIT:-300}
for r in $(seq 1 "${CUBERT_AB_ROUNDS:-3}"); do
  [ $((SECONDS - start)) -lt "$limit" ] || break
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for v in $order; do run "$v" "$r"; done
done
rm -f "$out/cell.txt"
echo "launch-ab: done in $((SECONDS - start)) s" >>"$log"
