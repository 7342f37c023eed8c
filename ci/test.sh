#!/usr/bin/env bash
# ci/test.sh: THE test command (README; .ci/run calls it). On a fresh Debian 12
# machine (root or sudo, no GPU needed) it installs what it needs, then:
#   deps     apt packages (only those missing)
#   lint     shellcheck over the scripts
#   gcc      gcc, -Werror, HIP backend on (Debian's ROCm 5.2, AMD platform) -> ctest
#   clang    clang, -Werror, HIP backend on -> ctest
#   asan     gcc, ASan + UBSan, HIP backend on -> ctest
#   tsan     gcc, TSan, HIP backend on -> ctest
#   layers   a wrong include fails to compile in each layer's target, a right
#            one compiles (tests/layers; configure only, then tiny probes)
#   buildtypes  the build types gcc and clang above (RelWithDebInfo) leave out:
#            Release and Debug on gcc and on clang, -Werror, library and tool only
#   install  install the gcc build, build examples/consumer against it through
#            the CMake package and through pkg-config, shared and static; run
#            them; the library holds no fault-injection harness code; build and
#            run the guide's programs (examples/guide) against it and check that
#            docs/guide.md shows them as they are; the man page and docs
#   rocm6    every .c of backends/hip compiled (-fsyntax-only) for the AMD
#            platform against the HIP 6.2 headers of ../shared/rocm-6.2-headers
#            ($CUBERT_ROCM6_HEADERS overrides) and against Debian's 5.2;
#            skipped when the 6.2 headers are absent
#   campaign, mpi, breakrule, mutate, fuzz: see their functions below
# `bash ci/test.sh gcc install` runs only the stages named. Every stage runs
# even after another failed; the summary says which failed; exit 1 if any.
# Builds go to $CUBERT_CI_BUILD (default build-ci/); $CUBERT_JOBS sets -j (2).
# Adding a stage: name it in ALL_STAGES (in run order) and write stage_<name>,
# returning non-zero on failure (cb_build and run_ctest do the usual work).
set -uo pipefail
# shellcheck source=ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CB_ROOT" || exit 1

BUILD=${CUBERT_CI_BUILD:-$CB_ROOT/build-ci}
ALL_STAGES=(deps lint layers gcc clang asan tsan buildtypes install rocm6 campaign mpi breakrule mutate fuzz)
if [ "$#" -gt 0 ]; then STAGES=("$@"); else STAGES=("${ALL_STAGES[@]}"); fi
for s in "${STAGES[@]}"; do
  case " ${ALL_STAGES[*]} " in *" $s "*) ;; *) echo "ci: unknown stage '$s' (stages: ${ALL_STAGES[*]})" >&2; exit 2 ;; esac
done
want() { case " ${STAGES[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

# ------------------------------------------------------------ helpers

# The tests' "skipped: ..." lines (testutil.h), counted, from ctest's log.
report_skips() {
  local log=$1/Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  local n
  n=$(grep -c '^skipped: ' "$log")
  if [ "$n" -gt 0 ]; then
    echo "ci: $n test runs skipped, by reason:"
    grep '^skipped: ' "$log" | sed 's/ in [^ ]*$//; s/, [^ ]* needs [0-9]*)$/)/' | sort | uniq -c
  else
    echo "ci: no test skipped"
  fi
}

# run_ctest DIR [PREFIX...]: every test of DIR, -j, output of failures
# (but those labelled by $CB_CTEST_SKIP_LABEL, when set).
run_ctest() {
  local dir=$1 rc skip=()
  shift
  [ -n "${CB_CTEST_SKIP_LABEL:-}" ] && skip=(-LE "$CB_CTEST_SKIP_LABEL")
  "$@" ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$CB_JOBS" --timeout 300 "${skip[@]}"
  rc=$?
  report_skips "$dir"
  return "$rc"
}

# Some kernels place mappings where the sanitizers' shadow memory must go
# (high mmap_rnd_bits): then the sanitizer dies at start. Probe once with a
# tiny threaded program; if it fails, run the tests with ASLR off.
sanitizer_prefix() {
  local kind=$1 dir probe
  dir=$(mktemp -d)
  probe=$dir/probe
  printf '%s\n' '#include <pthread.h>' 'static void *f(void *p) { return p; }' \
    'int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); return pthread_join(t, 0); }' \
    >"$dir/probe.c"
  if gcc "-fsanitize=$kind" -pthread "$dir/probe.c" -o "$probe" 2>"$dir/err"; then
    if ! "$probe" >/dev/null 2>&1; then
      if setarch "$(uname -m)" -R "$probe" >/dev/null 2>&1; then
        echo "ci: -fsanitize=$kind needs ASLR off on this kernel: running tests under setarch -R" >&2
        echo "setarch $(uname -m) -R"
      else
        echo "ci: -fsanitize=$kind programs do not run here, even without ASLR" >&2
        echo "false"
      fi
    fi
  else
    echo "ci: cannot build with -fsanitize=$kind: $(cat "$dir/err")" >&2
    echo "false"
  fi
  rm -rf "$dir"
}

# ------------------------------------------------------------ stages

stage_deps() { cb_apt_install "${CB_PACKAGES_TEST[@]}"; }

stage_lint() {
  local scripts=(ci/*.sh .ci/run)
  if ! command -v shellcheck >/dev/null 2>&1; then
    echo "ci: shellcheck not installed"
    return 1
  fi
  shellcheck -x "${scripts[@]}" && echo "ci: shellcheck clean: ${scripts[*]}"
}

# The layers are enforced by the build (cmake/layers.cmake): configure once
# with the probes of tests/layers, then compile each probe with its layer's
# include folders and flags. bad_* must fail, good_* must compile. Also: no
# library source reaches around its include root with a "../" include.
stage_layers() {
  local dir=$BUILD/layers list kind target rc=0 log n=0 around
  rm -rf "$dir"
  mkdir -p "$dir"
  cmake -S "$CB_ROOT" -B "$dir" -G Ninja -DCMAKE_C_COMPILER=gcc -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd -DCUBERT_LAYER_PROBES=ON \
    -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=OFF >"$dir/configure.log" 2>&1 || {
    cat "$dir/configure.log"
    return 1
  }
  list=$dir/layer-probes.txt
  [ -s "$list" ] || { echo "ci: no layer probes in $list"; return 1; }
  log=$dir/probe.log
  while read -r kind target; do
    n=$((n + 1))
    if cmake --build "$dir" --target "$target" >"$log" 2>&1; then
      if [ "$kind" = bad ]; then
        echo "ci: $target compiled, but its include must be refused"
        rc=1
      else
        echo "ci: $target compiles, as it must"
      fi
    elif [ "$kind" = bad ]; then
      echo "ci: $target refused, as it must be: $(grep -m1 -o 'fatal error: .*\|#error.*' "$log")"
    else
      echo "ci: $target must compile but did not:"
      cat "$log"
      rc=1
    fi
  done <"$list"
  around=$(grep -rn '#include "\.\./' base runtime kernels topology backends faultinj lib 2>/dev/null)
  if [ -n "$around" ]; then
    echo "ci: includes that reach around the layers' include roots:"
    echo "$around"
    rc=1
  fi
  echo "ci: $n layer probes run"
  return "$rc"
}

# When the mpi stage runs too, it runs this build's MPI tests (ctest -L
# mpi), so this stage leaves them out: they ran twice in the same build
# (about 110 s of the 2026-12-03 run).
stage_gcc() {
  local mpi_label=
  want mpi && mpi_label=mpi
  cb_build "$BUILD/gcc" -DCMAKE_C_COMPILER=gcc -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd && CB_CTEST_SKIP_LABEL=$mpi_label run_ctest "$BUILD/gcc"
}

stage_clang() {
  cb_build "$BUILD/clang" -DCMAKE_C_COMPILER=clang -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd && run_ctest "$BUILD/clang"
}

# Sanitizer builds skip the benchmarks (nothing in ctest runs them).
stage_sanitize() {
  local kind=$1 flag=$2 dir=$BUILD/$1 prefix
  prefix=$(sanitizer_prefix "$flag")
  [ "$prefix" = false ] && return 1
  # shellcheck disable=SC2086 # the prefix is words on purpose
  cb_build "$dir" -DCMAKE_C_COMPILER=gcc -DCUBERT_SANITIZE="$kind" -DCUBERT_BUILD_BENCH=OFF \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd && run_ctest "$dir" $prefix
}
stage_asan() { stage_sanitize address address,undefined; }
stage_tsan() { stage_sanitize thread thread; }

# -Werror in the build types the gcc and clang stages (RelWithDebInfo, the
# default) do not build; the optimiser's warnings differ by level. Library and
# tool only, no tests. The four builds: see docs/ci.md's stage table for the
# measured time (the budget is 4 min on 2 cores).
stage_buildtypes() {
  local rc=0 cc type dir cc_type
  for cc_type in gcc:Release gcc:Debug clang:Release clang:Debug; do
    cc=${cc_type%%:*} type=${cc_type##*:} dir=$BUILD/$cc-$type
    echo "ci: $cc $type, -Werror"
    cmake -S "$CB_ROOT" -B "$dir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" \
      -DCUBERT_WERROR=ON -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd -DCUBERT_BUILD_TESTS=OFF &&
      cmake --build "$dir" --parallel "$CB_JOBS" --target cubert cubert_static cubert_cli || rc=1
  done
  return "$rc"
}

# The installed shared library: versioned soname, and only cubert_ names
# exported (internal cb_ names stay hidden).
check_library() {
  local so=$1 soname stray
  [ -n "$so" ] || { echo "ci: no libcubert.so installed"; return 1; }
  soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  case $soname in
    libcubert.so.[0-9]*) echo "ci: soname $soname" ;;
    *) echo "ci: libcubert.so has soname '$soname', expected libcubert.so.MAJOR"; return 1 ;;
  esac
  stray=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^cubert_')
  if [ -n "$stray" ]; then
    echo "ci: libcubert.so exports names outside cubert_: $(echo "$stray" | tr "\n" " ")"
    return 1
  fi
  echo "ci: libcubert.so exports $(nm -D --defined-only "$so" | wc -l) names, all cubert_"
}

# The fault-injection harness (tools/faultinj/: model, checker, campaigns,
# scenarios) is a tool: no symbol of it in the library, shared or static,
# exported or not (nm without -D reads the .so's full symbol table).
HARNESS_SYMBOLS='cb_fi_run|cb_fi_program_|cb_fi_campaign_|cb_fi_scenario_|cb_fi_suite_|cb_fi_embedded_scenario|cb_fim_|cb_fi_violation_name|cb_cli_'
check_no_harness() {
  local f found rc=0
  for f in "$@"; do
    [ -f "$f" ] || { echo "ci: $f missing"; rc=1; continue; }
    found=$(nm "$f" 2>/dev/null | awk '{print $NF}' | grep -E "^($HARNESS_SYMBOLS)" | sort -u)
    if [ -n "$found" ]; then
      echo "ci: $f holds fault-injection harness or CLI code: $(echo "$found" | head -n 10 | tr "\n" " ")"
      rc=1
    elif ! nm "$f" >/dev/null 2>&1 || [ "$(nm "$f" 2>/dev/null | grep -c ' T cubert_')" -eq 0 ]; then
      echo "ci: $f: nm shows no cubert_ function (stripped?), cannot check"
      rc=1
    else
      echo "ci: $(basename "$f"): no harness symbol"
    fi
  done
  return "$rc"
}

# The core library never depends on MPI: the MPI component is a library of
# its own (libcubert_mpi). libcubert.so needs no MPI library, libcubert.a
# calls no MPI function.
check_no_mpi() {
  local so=$1 a=$2 found rc=0
  found=$(readelf -d "$so" | grep -E 'NEEDED.*(libmpi|open-pal|open-rte|mpich)')
  if [ -n "$found" ]; then
    echo "ci: libcubert.so needs MPI: $found"
    rc=1
  fi
  found=$(nm -u "$a" 2>/dev/null | awk '{print $NF}' | grep -E '^P?MPIX?_' | sort -u | head -n 5)
  if [ -n "$found" ]; then
    echo "ci: libcubert.a calls MPI: $(echo "$found" | tr "\n" " ")"
    rc=1
  fi
  [ "$rc" -eq 0 ] && echo "ci: libcubert.so and libcubert.a need no MPI"
  return "$rc"
}

# links_libcubert BINARY yes|no: whether BINARY needs libcubert.so at run time.
links_libcubert() {
  local bin=$1 want=$2 got=no
  readelf -d "$bin" | grep 'NEEDED.*libcubert\.so' >/dev/null && got=yes
  [ "$got" = "$want" ] && return 0
  echo "ci: $bin: needs libcubert.so: $got, expected $want"
  return 1
}

# run_consumer PROGRAM: runs examples/consumer's program and checks that it
# printed the refused wrong-size read's status (an error, never OK).
run_consumer() {
  local out
  out=$("$1") || return 1
  echo "$out"
  case $out in
    *"a wrong-size read said: ERR_"*) return 0 ;;
  esac
  echo "ci: $1 did not print the wrong-size read's error status"
  return 1
}

stage_install() {
  local prefix=$BUILD/prefix work=$BUILD/consumer rc=0
  # the gcc stage's build, brought up to date (nothing to do after that stage;
  # run alone, a build left from older sources is not installed as it is)
  cb_build "$BUILD/gcc" -DCMAKE_C_COMPILER=gcc -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd || return 1
  rm -rf "$prefix" "$work"
  cmake --install "$BUILD/gcc" --prefix "$prefix" || return 1
  "$prefix/bin/cubert" --version || rc=1
  check_library "$(find "$prefix" -name 'libcubert.so' | head -n 1)" || rc=1
  check_no_harness "$(readlink -f "$(find "$prefix" -name 'libcubert.so' | head -n 1)")" \
    "$(find "$prefix" -name 'libcubert.a' | head -n 1)" || rc=1
  check_no_mpi "$(find "$prefix" -name 'libcubert.so' | head -n 1)" \
    "$(find "$prefix" -name 'libcubert.a' | head -n 1)" || rc=1
  # no layer of the library calls a layer above it (nm over the objects)
  bash "$CB_ROOT/ci/layer-calls.sh" "$BUILD/gcc" || rc=1
  # and the check can see one: the tool, which links the harness, has it
  if ! nm "$prefix/bin/cubert" | grep ' cb_fi_run$' >/dev/null; then
    echo "ci: bin/cubert has no cb_fi_run: the harness check above would see nothing"
    rc=1
  fi

  echo "ci: consumer through find_package(cubert) (cubert::cubert, cubert::cubert_static)"
  mkdir -p "$work"
  cp -r examples/consumer "$work/make"
  cmake -S examples/consumer -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" &&
    cmake --build "$work/cmake" &&
    run_consumer "$work/cmake/consumer" && run_consumer "$work/cmake/consumer_static" &&
    links_libcubert "$work/cmake/consumer" yes &&
    links_libcubert "$work/cmake/consumer_static" no || rc=1

  echo "ci: consumer through pkg-config (shared and static)"
  PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name cubert.pc | head -n 1)")
  export PKG_CONFIG_PATH
  echo "ci: pkg-config --cflags --libs cubert: $(pkg-config --cflags --libs cubert)"
  make -C "$work/make" consumer consumer-static &&
    run_consumer "$work/make/consumer" && run_consumer "$work/make/consumer-static" &&
    links_libcubert "$work/make/consumer" yes &&
    links_libcubert "$work/make/consumer-static" no || rc=1
  unset PKG_CONFIG_PATH

  echo "ci: the guide's programs against the installed tree, run on the host backend"
  cmake -DSRC="$CB_ROOT" -P tests/guide_check.cmake || rc=1
  cmake -S examples/guide -B "$work/guide" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" &&
    cmake --build "$work/guide" &&
    env -u CUBERT_FAULTS CUBERT_BACKENDS=host ctest --test-dir "$work/guide" --output-on-failure \
      --no-tests=error || rc=1

  echo "ci: man page and docs"
  local f
  for f in share/man/man1/cubert.1 share/doc/cubert/README.md share/doc/cubert/docs/guide.md \
           share/doc/cubert/docs/cli.md share/doc/cubert/examples/guide/failures.c; do
    if [ ! -f "$prefix/$f" ]; then
      echo "ci: $f not installed"
      rc=1
    fi
  done
  # the installed README's links to docs/ resolve there (docs/runs, the
  # history of runs with its logs, stays in the source tree)
  local link
  while read -r link; do
    if [ ! -f "$prefix/share/doc/cubert/$link" ]; then
      echo "ci: README.md links $link, not installed as share/doc/cubert/$link"
      rc=1
    fi
  done < <(grep -o '](docs/[^)#]*' README.md | sed 's/^](//' | grep -v '^docs/runs/' | sort -u)
  if [ -f "$prefix/share/man/man1/cubert.1" ] && ! man -l "$prefix/share/man/man1/cubert.1" >/dev/null; then
    echo "ci: man -l cubert.1 failed"
    rc=1
  fi
  return "$rc"
}

# The HIP backend's sources for the AMD platform, against each HIP release's
# headers: C11, -Werror, no link (no ROCm 6 library here). The headers are
# found beside the repository (../shared), so a clone elsewhere skips.
ROCM6_HEADERS=${CUBERT_ROCM6_HEADERS:-$CB_ROOT/../shared/rocm-6.2-headers}
rocm_compile() {
  local label=$1 incdir=$2 f rc=0 n=0
  for f in backends/hip/*.c; do
    [ "$f" = backends/hip/hip_none.c ] && continue # the build without HIP
    gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -D_GNU_SOURCE -D__HIP_PLATFORM_AMD__ \
      -I"$CB_ROOT/include" -I"$CB_ROOT" -isystem "$incdir" "$f" || { echo "ci: $f does not compile against $label"; rc=1; }
    n=$((n + 1))
  done
  [ "$rc" -eq 0 ] && echo "ci: $n files of backends/hip compile for AMD against $label ($incdir)"
  return "$rc"
}
stage_rocm6() {
  local rc=0
  rocm_compile "HIP 6.2 headers" "$ROCM6_HEADERS/include" || rc=1
  rocm_compile "Debian's HIP 5.2 headers" /usr/include || rc=1
  return "$rc"
}

# The 100,000-fault campaign on the host backend (simulated Frontier node,
# several devices and streams), zero violations, through the gcc build's tool.
stage_campaign() {
  cb_build "$BUILD/gcc" -DCMAKE_C_COMPILER=gcc -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd || return 1
  env -u CUBERT_FAULTS CUBERT_BACKENDS=host "$BUILD/gcc/cli/cubert" faultinj campaign \
    --seed 20261129 --faults 100000 --node frontier --json "$BUILD/campaign.json"
}

# mpirun as CI needs it: 4 ranks on 2 cores, as root where CI runs so, on
# the host backend with no fault rules from the environment.
mpirun_host() {
  local root=()
  [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
  env -u CUBERT_FAULTS -u CUBERT_MPI_FAULTS CUBERT_BACKENDS=host mpirun --oversubscribe "${root[@]}" "$@"
}

# The MPI component (docs/cluster.md) on the host backend, 4 ranks: its
# tests (ctest -L mpi: taint across ranks exactly, injected transport
# faults, bad input; the campaign on 1 and 4 ranks; the bench smoke), then a
# campaign of 16,000 programs (more than 100,000 faults) sharded over 4
# ranks, which must pass and give the same counts as on 1 rank, and the
# consumer built against the installed component (cmake and pkg-config).
# (CUBERT_CI_MPI_PROGRAMS and CUBERT_CI_MPI_MIN_FAULTS shrink it for a quick try.)
MPI_CAMPAIGN=(campaign --seed 20261201 --programs "${CUBERT_CI_MPI_PROGRAMS:-16000}"
              --min-faults "${CUBERT_CI_MPI_MIN_FAULTS:-100000}" --node frontier)
stage_mpi() {
  local dir=$BUILD/gcc out=$BUILD/mpi prefix=$BUILD/mpi/prefix rc=0 n c1 c4
  cb_build "$dir" -DCMAKE_C_COMPILER=gcc -DCUBERT_WERROR=ON \
    -DCUBERT_HIP=ON -DCUBERT_HIP_PLATFORM=amd -DCUBERT_MPI=ON || return 1
  rm -rf "$out"
  mkdir -p "$out"
  ctest --test-dir "$dir" -L mpi --output-on-failure --no-tests=error -j "$CB_JOBS" --timeout 300 || rc=1
  report_skips "$dir"
  for n in 1 4; do
    echo "ci: cubert-mpi ${MPI_CAMPAIGN[*]} on $n rank(s)"
    mpirun_host -n "$n" "$dir/mpi/tool/cubert-mpi" "${MPI_CAMPAIGN[@]}" --json "$out/campaign-$n.json" |
      tee "$out/campaign-$n.txt" || rc=1
  done
  c1=$(grep '^counts:' "$out/campaign-1.txt")
  c4=$(grep '^counts:' "$out/campaign-4.txt")
  if [ -n "$c1" ] && [ "$c1" = "$c4" ]; then
    echo "ci: the same counts and verdict on 1 and 4 ranks"
  else
    echo "ci: the campaign's counts differ between 1 and 4 ranks"
    rc=1
  fi
  mpirun_host -n 4 "$dir/mpi/tool/cubert-mpi" bench --quick --csv "$out/bench.csv" --json "$out/bench.json" |
    tee "$out/bench.txt" || rc=1
  grep -q '^validation: passed' "$out/bench.txt" || { echo "ci: bench mpi did not validate"; rc=1; }

  echo "ci: examples/consumer_mpi against the installed component (CMake package and pkg-config)"
  cmake --install "$dir" --prefix "$prefix" >/dev/null || return 1
  cp -r examples/consumer_mpi "$out/make"
  cmake -S examples/consumer_mpi -B "$out/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" &&
    cmake --build "$out/cmake" &&
    PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name cubert-mpi.pc | head -n 1)") \
      make -C "$out/make" consumer_mpi || rc=1
  for n in "$out/cmake/consumer_mpi" "$out/make/consumer_mpi"; do
    [ -x "$n" ] && mpirun_host -n 2 "$n" || rc=1
  done
  return "$rc"
}

# Proof the checker bites: with one taint rule switched off (transitive
# propagation), the scenario suite and a campaign must report stale reads.
stage_breakrule() { CUBERT_CI_BUILD=$BUILD bash "$CB_ROOT/ci/break-rule.sh"; }

# Mutation testing of the failure accounting: every mutant of ci/mutants/
# must be killed by the checks it names (ci/mutate.sh says how).
stage_mutate() { CUBERT_CI_BUILD=$BUILD bash "$CB_ROOT/ci/mutate.sh"; }

# The rule/scenario parser under libFuzzer (clang), for a bounded time.
stage_fuzz() {
  local dir=$BUILD/fuzz
  CC=clang cb_build "$dir" -DCMAKE_C_COMPILER=clang -DCUBERT_FUZZ=ON -DCUBERT_HIP=OFF \
    -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=OFF || return 1
  cmake --build "$dir" --target fuzz_faultinj_rules || return 1
  mkdir -p "$dir/corpus"
  "$dir/faultinj/fuzz_faultinj_rules" -dict="$CB_ROOT/faultinj/fuzz_rules.dict" \
    -max_total_time="${CUBERT_FUZZ_SECONDS:-120}" -max_len=4096 "$dir/corpus"
}

# ------------------------------------------------------------ run
echo "ci: cubert tests on $(nproc) cores, -j$CB_JOBS, stages: ${STAGES[*]}"
for s in "${ALL_STAGES[@]}"; do
  want "$s" || continue
  case $s in
    deps) cb_stage deps stage_deps || { cb_summary; exit 1; } ;;
    rocm6)
      if [ -f "$ROCM6_HEADERS/include/hip/hip_runtime_api.h" ]; then
        cb_stage rocm6 stage_rocm6
      else
        cb_stage_skip rocm6 "no HIP 6.2 headers at $ROCM6_HEADERS (set CUBERT_ROCM6_HEADERS)"
      fi ;;
    *) cb_stage "$s" "stage_$s" ;;
  esac
done
cb_summary
