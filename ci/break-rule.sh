#!/usr/bin/env bash
# ci/break-rule.sh: proof that the fault-injection checker bites.
#
# Builds cubert with -DCUBERT_BREAK_RULE=ON, which switches transitive taint
# off in the runtime (a kernel or copy with a tainted input runs anyway,
# runtime/launch.c, memory.c, device.c), then expects:
#   - `cubert faultinj suite` to exit non-zero and report STALE READ,
#   - `cubert faultinj campaign` to exit non-zero and report STALE READ,
#   - test_faultinj_scenarios to pass (in this build it asserts that the
#     suite and a campaign report stale reads).
# Exits 0 when all three hold, 1 otherwise (the checker missed a broken
# rule, or the build failed).
#
# Usage: bash ci/break-rule.sh   (CUBERT_CI_BUILD moves the build directory,
# CUBERT_JOBS sets -j; no root needed: the packages of ci/test.sh suffice)
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CUBERT_CI_BUILD:-$ROOT/build-ci}/break-rule
JOBS=${CUBERT_JOBS:-2}
LOG=$BUILD/break-rule.log
fail=0

echo "break-rule: building with CUBERT_BREAK_RULE=ON in $BUILD"
mkdir -p "$BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUBERT_BREAK_RULE=ON \
     -DCUBERT_HIP=OFF -DCUBERT_BUILD_BENCH=OFF >"$LOG" 2>&1 ||
   ! cmake --build "$BUILD" -j "$JOBS" --target cubert_cli test_faultinj_scenarios >>"$LOG" 2>&1; then
  tail -30 "$LOG"
  echo "break-rule: FAIL: the build failed (log: $LOG)"
  exit 1
fi
CLI=$BUILD/cli/cubert

# expect_bite NAME COMMAND...: COMMAND must exit 1 and print STALE READ.
expect_bite() {
  local name=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed -n '/^runs:\|^programs:\|^faults injected:\|^violations:/p' | sed "s/^/  $name: /"
  if [ "$rc" -ne 1 ]; then
    echo "break-rule: FAIL: $name exited $rc, expected 1 (a violation)"
    fail=1
  elif ! printf '%s\n' "$out" | grep 'STALE READ' >/dev/null; then
    echo "break-rule: FAIL: $name reported no STALE READ"
    fail=1
  else
    echo "break-rule: ok: $name reports stale reads ($(printf '%s\n' "$out" | grep -c 'STALE READ') lines)"
  fi
}

expect_bite suite env -u CUBERT_FAULTS "$CLI" faultinj suite
expect_bite campaign env -u CUBERT_FAULTS "$CLI" faultinj campaign --seed 1 --faults 1000

if (cd "$BUILD" && ctest -R '^test_faultinj_scenarios$' --output-on-failure >>"$LOG" 2>&1); then
  echo "break-rule: ok: test_faultinj_scenarios asserts the violations in this build"
else
  tail -30 "$LOG"
  echo "break-rule: FAIL: test_faultinj_scenarios (log: $LOG)"
  fail=1
fi

if [ "$fail" -eq 0 ]; then
  echo "break-rule: PASS: with transitive taint switched off, the checker reports stale reads"
else
  echo "break-rule: FAIL"
fi
exit "$fail"
