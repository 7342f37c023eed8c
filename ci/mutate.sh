#!/usr/bin/env bash
# ci/mutate.sh: mutation testing of the failure accounting (issue 11).
#
# Each file ci/mutants/*.mut is one mutant: a single change to one file of
# runtime/ or mpi/ (an exact source fragment, found exactly once, and what
# replaces it; an mpi/ mutant's checks need the MPI component built) plus
# the checks that must kill it. This script
#   1. checks that every mutant applies to this tree: its fragment occurs
#      exactly once in its file, else it stops with "mutant N does not apply";
#   2. mirrors the tree into $BUILD/mutate/src (only files whose content
#      changed are copied, so the build stays incremental) and builds it once
#      in $BUILD/mutate/build (kept between runs);
#   3. runs every check the mutants name on the unmutated copy: all must pass;
#   4. for each mutant: swaps the one file, rebuilds (ninja recompiles that
#      file and relinks), runs the mutant's checks in order until one fails
#      (killed), restores the file;
#   5. prints each mutant's verdict, the kill count and the time taken.
# It exits 1 when a mutant survives that its file does not list as
# equivalent (with the reason), when a mutant does not apply or does not
# build, or when the unmutated copy fails a check.
#
# Mutant file format (lines; '#' starts a comment line):
#   name: range clipping off by one
#   file: runtime/ledger.c
#   kills: ctest:^test_failures$ suite campaign:200
#   equivalent: why no test can tell it apart   (optional; then it may survive)
#   @@@ find
#   <the exact fragment, one or more lines>
#   @@@ replace
#   <its replacement, zero or more lines>
#   @@@ end
# Checks: ctest:REGEX (ctest -R REGEX), suite (`cubert faultinj suite` on a
# simulated Frontier node), campaign:N (`cubert faultinj campaign` of N
# programs, seed $CUBERT_MUTATE_SEED, default 20261201).
#
# Usage: bash ci/mutate.sh [--check] [MUTANT...]   (names without .mut: only
# those; --check: only whether each applies to this tree, nothing built)
# CUBERT_CI_BUILD moves the build directory, CUBERT_JOBS sets -j (2),
# CUBERT_MUTANTS the folder of mutants. No root needed.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${CUBERT_CI_BUILD:-$ROOT/build-ci}/mutate
SRC=$BASE/src
BLD=$BASE/build
LOG=$BASE/log
JOBS=${CUBERT_JOBS:-2}
MUTANTS=${CUBERT_MUTANTS:-$ROOT/ci/mutants}
SEED=${CUBERT_MUTATE_SEED:-20261201}
CHECK_TIMEOUT=${CUBERT_MUTATE_TIMEOUT:-240}
START=$(date +%s)
CHECK_ONLY=0
if [ "${1:-}" = "--check" ]; then
  CHECK_ONLY=1
  shift
fi

say() { printf 'mutate: %s\n' "$*"; }
die() { say "FAIL: $*"; exit 1; }

# ------------------------------------------------------------ mutants

M_ID=() M_NAME=() M_FILE=() M_KILLS=() M_EQUIV=() M_FIND=() M_REPLACE=()

# parse_mutant PATH: appends one mutant to the M_ arrays.
parse_mutant() {
  local path=$1 id line section="" name="" file="" kills="" equiv="" find="" replace=""
  local nfind=0 nrepl=0 ended=0
  id=$(basename "$path" .mut)
  while IFS= read -r line || [ -n "$line" ]; do
    case $section in
      find)
        if [ "$line" = "@@@ replace" ]; then section=replace; continue; fi
        if [ $nfind -gt 0 ]; then find+=$'\n'; fi
        find+=$line
        nfind=$((nfind + 1))
        continue ;;
      replace)
        if [ "$line" = "@@@ end" ]; then section=closed; ended=1; continue; fi
        if [ $nrepl -gt 0 ]; then replace+=$'\n'; fi
        replace+=$line
        nrepl=$((nrepl + 1))
        continue ;;
    esac
    case $line in
      '#'* | '') ;;
      'name: '*) name=${line#name: } ;;
      'file: '*) file=${line#file: } ;;
      'kills: '*) kills=${line#kills: } ;;
      'equivalent: '*) equiv=${line#equivalent: } ;;
      '@@@ find') [ "$section" = "" ] || die "mutant $id: a second '@@@ find'"; section="find" ;;
      *) die "mutant $id: line not understood: $line" ;;
    esac
  done <"$path"
  [ -n "$name" ] || die "mutant $id: no 'name:'"
  [ -n "$file" ] || die "mutant $id: no 'file:'"
  [ -n "$kills" ] || [ -n "$equiv" ] || die "mutant $id: no 'kills:' (and not listed as equivalent)"
  [ $ended -eq 1 ] || die "mutant $id: the fragment is not closed by '@@@ replace' ... '@@@ end'"
  [ -n "$find" ] || die "mutant $id: empty fragment"
  [ "$find" != "$replace" ] || die "mutant $id: the replacement is the fragment itself"
  M_ID+=("$id") M_NAME+=("$name") M_FILE+=("$file") M_KILLS+=("$kills") M_EQUIV+=("$equiv")
  M_FIND+=("$find") M_REPLACE+=("$replace")
}

# read_file PATH: the file's exact content in $CONTENT (trailing newlines kept).
read_file() {
  CONTENT=$(cat "$1" && printf x) || return 1
  CONTENT=${CONTENT%x}
}

# occurrences TEXT FRAGMENT: how many times (non-overlapping) FRAGMENT occurs.
occurrences() {
  local rest=$1 n=0
  while [[ $rest == *"$2"* ]]; do
    rest=${rest#*"$2"}
    n=$((n + 1))
  done
  echo "$n"
}

# mutated TEXT FIND REPLACE: TEXT with its one FIND replaced, in $MUTATED.
mutated() {
  local before=${1%%"$2"*} after=${1#*"$2"}
  MUTATED=$before$3$after
}

# applies I DIR: whether mutant I's fragment occurs exactly once in DIR/file.
applies() {
  local i=$1 dir=$2 n
  if [ ! -f "$dir/${M_FILE[$i]}" ]; then
    say "mutant ${M_ID[$i]} does not apply: ${M_FILE[$i]} does not exist"
    return 1
  fi
  read_file "$dir/${M_FILE[$i]}" || return 1
  n=$(occurrences "$CONTENT" "${M_FIND[$i]}")
  if [ "$n" -ne 1 ]; then
    say "mutant ${M_ID[$i]} does not apply: its fragment occurs $n times in ${M_FILE[$i]} (exactly once needed)"
    printf '%s\n' "${M_FIND[$i]}" | sed 's/^/    | /'
    return 1
  fi
}

shopt -s nullglob
files=("$MUTANTS"/*.mut)
shopt -u nullglob
[ ${#files[@]} -gt 0 ] || die "no mutants in $MUTANTS"
for f in "${files[@]}"; do
  id=$(basename "$f" .mut)
  if [ $# -gt 0 ]; then
    case " $* " in *" $id "*) ;; *) continue ;; esac
  fi
  parse_mutant "$f"
done
[ ${#M_ID[@]} -gt 0 ] || die "none of the mutants named exists in $MUTANTS: $*"

bad=0
for i in "${!M_ID[@]}"; do applies "$i" "$ROOT" || bad=1; done
[ $bad -eq 0 ] || die "a mutant does not apply to this tree: update its fragment in $MUTANTS"
say "${#M_ID[@]} mutants, each applies exactly once"
[ $CHECK_ONLY -eq 0 ] || exit 0

# ------------------------------------------------------------ the copy

# Mirrors the tree into $SRC: files whose content differs are copied (they
# get a new time, so ninja rebuilds what depends on them), files gone are
# removed. Build directories and .git stay out.
mirror() {
  local list rel
  list=$(mktemp)
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -co --exclude-standard >"$list"
  else
    (cd "$ROOT" && find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||') >"$list"
  fi
  mkdir -p "$SRC"
  while IFS= read -r rel; do
    [ -f "$ROOT/$rel" ] || continue
    if ! cmp -s "$ROOT/$rel" "$SRC/$rel"; then
      case $rel in */*) mkdir -p "$SRC/${rel%/*}" ;; esac
      cp "$ROOT/$rel" "$SRC/$rel"
    fi
  done <"$list"
  (cd "$SRC" && find . -type f | sed 's|^\./||') | sort >"$list.have"
  sort "$list" | comm -23 "$list.have" - | while IFS= read -r rel; do rm -f "$SRC/$rel"; done
  rm -f "$list" "$list.have"
}

mkdir -p "$BASE"
: >"$LOG"
say "mirroring the tree into $SRC"
mirror
say "building the copy in $BLD (log: $LOG)"
t0=$(date +%s)
if ! cmake -S "$SRC" -B "$BLD" -G Ninja -DCMAKE_C_COMPILER=gcc -DCUBERT_HIP=OFF \
     -DCUBERT_BUILD_BENCH=OFF -DCUBERT_WERROR=OFF >>"$LOG" 2>&1 ||
   ! cmake --build "$BLD" --parallel "$JOBS" >>"$LOG" 2>&1; then
  tail -30 "$LOG"
  die "the unmutated copy does not build"
fi
say "built in $(($(date +%s) - t0)) s"
CLI=$BLD/cli/cubert

# ------------------------------------------------------------ checks

# targets_for CHECKS...: the build targets the checks run (a rebuild makes
# only those: the library they link and the files the mutant touched).
targets_for() {
  local c t out=() cli=0
  for c in "$@"; do
    case $c in
      ctest:*)
        while IFS= read -r t; do
          case $t in test_*) out+=("$t") ;; mpi_*) out+=(cubert_mpi_tool) ;; *) cli=1 ;; esac
        done < <(ctest --test-dir "$BLD" -N -R "${c#ctest:}" | sed -n 's/^ *Test *#[0-9]*: *//p') ;;
      *) cli=1 ;;
    esac
  done
  if [ $cli -eq 1 ]; then out+=(cubert_cli); fi
  echo "${out[*]}"
}

# run_check CHECK: 0 when the check passes; its output goes to the log.
run_check() {
  local check=$1
  case $check in
    ctest:*)
      timeout "$CHECK_TIMEOUT" ctest --test-dir "$BLD" -R "${check#ctest:}" --no-tests=error \
        --timeout "$CHECK_TIMEOUT" --output-on-failure -j "$JOBS" ;;
    suite)
      timeout "$CHECK_TIMEOUT" env -u CUBERT_FAULTS "$CLI" faultinj suite --node frontier ;;
    campaign:*)
      timeout "$CHECK_TIMEOUT" env -u CUBERT_FAULTS "$CLI" faultinj campaign --seed "$SEED" \
        --programs "${check#campaign:}" ;;
    *)
      echo "unknown check '$check' (ctest:REGEX, suite, campaign:N)"
      return 2 ;;
  esac
}

# Every check once on the unmutated copy: a mutant only counts as killed by
# a check that passes without it.
declare -A seen=()
baseline=()
for i in "${!M_ID[@]}"; do
  for c in ${M_KILLS[$i]}; do
    [ -n "${seen[$c]:-}" ] && continue
    seen[$c]=1
    baseline+=("$c")
  done
done
say "the unmutated copy against every check named (${#baseline[@]})"
for c in "${baseline[@]}"; do
  {
    echo "==== baseline: $c"
  } >>"$LOG"
  if ! run_check "$c" >>"$LOG" 2>&1; then
    tail -30 "$LOG"
    die "the unmutated copy fails '$c': fix the tree or the check before counting kills"
  fi
done

# ------------------------------------------------------------ mutants

RESTORE_FILE=""
RESTORE_CONTENT=""
restore() {
  if [ -n "$RESTORE_FILE" ]; then
    printf '%s' "$RESTORE_CONTENT" >"$RESTORE_FILE"
    RESTORE_FILE=""
  fi
}
trap restore EXIT
trap 'restore; exit 130' INT TERM

V_VERDICT=() V_BY=() V_SECONDS=()
killed=0 equivalent=0 failed=0
for i in "${!M_ID[@]}"; do
  id=${M_ID[$i]}
  t0=$(date +%s)
  target=$SRC/${M_FILE[$i]}
  if ! applies "$i" "$SRC"; then
    V_VERDICT+=("DOES NOT APPLY") V_BY+=("-") V_SECONDS+=(0)
    failed=$((failed + 1))
    continue
  fi
  orig=$CONTENT
  mutated "$orig" "${M_FIND[$i]}" "${M_REPLACE[$i]}"
  RESTORE_FILE=$target
  RESTORE_CONTENT=$orig
  printf '%s' "$MUTATED" >"$target"
  echo "==== mutant $id: ${M_NAME[$i]}" >>"$LOG"
  verdict="" by="-"
  read -ra checks <<<"${M_KILLS[$i]}"
  read -ra targets <<<"$(targets_for "${checks[@]}")"
  if [ ${#checks[@]} -eq 0 ]; then
    verdict=SURVIVED # listed as equivalent, nothing to run
  elif ! cmake --build "$BLD" --parallel "$JOBS" --target "${targets[@]}" >>"$LOG" 2>&1; then
    verdict="DOES NOT BUILD"
  else
    for c in "${checks[@]}"; do
      echo "==== mutant $id: check $c" >>"$LOG"
      if ! run_check "$c" >>"$LOG" 2>&1; then
        verdict=KILLED
        by=$c
        break
      fi
    done
    [ -n "$verdict" ] || verdict=SURVIVED
  fi
  restore
  case $verdict in
    KILLED) killed=$((killed + 1)) ;;
    SURVIVED)
      if [ -n "${M_EQUIV[$i]}" ]; then
        verdict="EQUIVALENT"
        by=${M_EQUIV[$i]}
        equivalent=$((equivalent + 1))
      else
        failed=$((failed + 1))
      fi ;;
    *) failed=$((failed + 1)) ;;
  esac
  V_VERDICT+=("$verdict") V_BY+=("$by") V_SECONDS+=($(($(date +%s) - t0)))
  printf 'mutate: %-40s %-14s %4s s  %s\n' "$id" "$verdict" "${V_SECONDS[-1]}" "$by"
done
# the copy back as it is, so the next run starts from the unmutated build
cmake --build "$BLD" --parallel "$JOBS" >>"$LOG" 2>&1

# ------------------------------------------------------------ summary

echo
printf '%-40s %-14s %6s  %s\n' mutant verdict seconds "killed by / reason"
for i in "${!M_ID[@]}"; do
  printf '%-40s %-14s %6s  %s\n' "${M_ID[$i]}" "${V_VERDICT[$i]}" "${V_SECONDS[$i]}" "${V_BY[$i]}"
  printf '%-40s %s\n' "" "(${M_NAME[$i]}, ${M_FILE[$i]})"
done
total=${#M_ID[@]}
echo
say "killed $killed of $total mutants ($equivalent listed as equivalent, $failed not killed); $(($(date +%s) - START)) s in all"
if [ $failed -ne 0 ]; then
  say "FAIL: $failed mutant(s) survived, did not apply or did not build (log: $LOG)"
  exit 1
fi
say "PASS"
