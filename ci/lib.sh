# ci/lib.sh: what ci/test.sh and ci/main.sh share (sourced, not run):
# installing Debian packages, timed stages and the summary table.
# shellcheck shell=bash

CB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CB_JOBS=${CUBERT_JOBS:-2}

cb_log() { printf '\n==== %s ====\n' "$*"; }

# Runs a command as root: directly when we are root, else through sudo.
cb_as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "ci: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

# Installs the Debian packages named that are not installed yet
# (apt-get update first, and only when something is missing).
cb_apt_install() {
  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep '^install ok installed$' >/dev/null; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "ci: packages present: $*"
    return 0
  fi
  echo "ci: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  cb_as_root apt-get update -q &&
    cb_as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# What building and running cubert needs (the main job; cairo draws the
# benchmark's SVG pictures; help2man writes cubert(1) from --help).
CB_PACKAGES_BUILD=(build-essential cmake ninja-build pkg-config libhwloc-dev hwloc
                   libjansson-dev libamdhip64-dev libcairo2-dev help2man)
# What the tests add: Check (with subunit), clang for the second compiler,
# Open MPI for the MPI component and its stage (libopenmpi-dev, openmpi-bin),
# libFuzzer's runtime (libclang-rt-14-dev), the linter of the scripts (shellcheck), libudev-dev for `pkg-config --static`
# (hwloc's private libraries) in the consumer example, xmllint (libxml2-utils)
# for the benchmarks' SVG pictures.
# shellcheck disable=SC2034 # used by ci/test.sh
CB_PACKAGES_TEST=("${CB_PACKAGES_BUILD[@]}" check libsubunit-dev clang libclang-rt-14-dev shellcheck
                  libudev-dev libopenmpi-dev openmpi-bin libxml2-utils)

# ------------------------------------------------------------ stages
CB_STAGE_NAMES=()
CB_STAGE_RESULTS=()
CB_STAGE_SECONDS=()

# cb_stage NAME FUNCTION [ARGS...]: runs FUNCTION, times it, records PASS or
# FAIL; returns its status.
cb_stage() {
  local name=$1 start rc
  shift
  cb_log "stage $name"
  start=$(date +%s)
  "$@"
  rc=$?
  CB_STAGE_NAMES+=("$name")
  CB_STAGE_SECONDS+=("$(($(date +%s) - start))")
  if [ "$rc" -eq 0 ]; then CB_STAGE_RESULTS+=(PASS); else CB_STAGE_RESULTS+=("FAIL($rc)"); fi
  echo "ci: stage $name: ${CB_STAGE_RESULTS[-1]} in ${CB_STAGE_SECONDS[-1]} s"
  return "$rc"
}

cb_stage_skip() {
  CB_STAGE_NAMES+=("$1")
  CB_STAGE_SECONDS+=(0)
  CB_STAGE_RESULTS+=("SKIP: $2")
  echo "ci: stage $1 skipped: $2"
}

# Prints the table; returns 1 when a stage failed.
cb_summary() {
  local i failed=0 total=0
  cb_log "summary"
  printf '%-12s %-28s %8s\n' stage result seconds
  for i in "${!CB_STAGE_NAMES[@]}"; do
    printf '%-12s %-28s %8s\n' "${CB_STAGE_NAMES[$i]}" "${CB_STAGE_RESULTS[$i]}" \
      "${CB_STAGE_SECONDS[$i]}"
    total=$((total + CB_STAGE_SECONDS[i]))
    case "${CB_STAGE_RESULTS[$i]}" in FAIL*) failed=1 ;; esac
  done
  printf '%-12s %-28s %8s\n' total "" "$total"
  if [ "$failed" -ne 0 ]; then
    echo "ci: FAILED"
    return 1
  fi
  echo "ci: all stages passed"
}

# cb_build DIR [CMAKE ARGS...]: configures (Ninja) and builds.
cb_build() {
  local dir=$1
  shift
  cmake -S "$CB_ROOT" -B "$dir" -G Ninja "$@" &&
    cmake --build "$dir" --parallel "$CB_JOBS"
}
