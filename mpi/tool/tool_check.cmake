# mpi/tool/tool_check.cmake: the checks of `cubert-mpi` run by ctest.
#   -DMODE=campaign: `campaign` with the same SEED, PROGRAMS and EXCHANGES
#     (the programs that send and receive between ranks) on 1 rank, 2 ranks
#     and RANKS ranks: each PASS, and the line of counts (programs, steps,
#     checks, faults by kind, violations by kind..., then the same for the
#     exchanges) is the same. ci/test.sh's mpi stage does it with 100,000
#     faults and more.
#   -DMODE=bench: `bench --quick` over RANKS ranks exits 0, says
#     "validation: passed", and writes a CSV and a JSON whose validation is
#     "passed", with every pair's rows.
file(MAKE_DIRECTORY ${OUT})

# run(N ARGS...): the tool on N ranks; its stdout in `out`; a failure stops.
function(run n)
  execute_process(COMMAND ${MPIEXEC} ${NP} ${n} ${TOOL} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE err)
  message("${n} rank(s):\n${stdout}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cubert-mpi ${ARGN} on ${n} rank(s) exited ${rc}:\n${err}")
  endif()
  set(out "${stdout}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "campaign")
  foreach(n 1 2 ${RANKS})
    run(${n} campaign --seed ${SEED} --programs ${PROGRAMS} --exchanges ${EXCHANGES} --json ${OUT}/campaign-${n}.json)
    if(NOT out MATCHES "verdict: PASS")
      message(FATAL_ERROR "no PASS verdict on ${n} rank(s)")
    endif()
    string(REGEX MATCH "counts: [^\n]*" counts_${n} "${out}")
    if(NOT counts_${n} MATCHES "faults [1-9]" OR NOT counts_${n} MATCHES "; exchanges ${EXCHANGES}, .* faults [1-9]")
      message(FATAL_ERROR "no faults injected, or not ${EXCHANGES} exchanges, on ${n} rank(s): ${counts_${n}}")
    endif()
  endforeach()
  foreach(n 2 ${RANKS})
    if(NOT counts_1 STREQUAL counts_${n})
      message(FATAL_ERROR "the counts differ:\n1 rank:   ${counts_1}\n${n} ranks: ${counts_${n}}")
    endif()
  endforeach()
  message("same counts and verdict on 1, 2 and ${RANKS} ranks")
elseif(MODE STREQUAL "bench")
  run(${RANKS} bench --quick --csv ${OUT}/bench.csv --json ${OUT}/bench.json)
  if(NOT out MATCHES "validation: passed")
    message(FATAL_ERROR "no 'validation: passed'")
  endif()
  file(READ ${OUT}/bench.json json)
  string(JSON v GET "${json}" validation)
  string(JSON n LENGTH "${json}" results)
  math(EXPR want "${RANKS} * (${RANKS} - 1) / 2 * 7") # per pair: 3 sizes x 2 modes + latency
  string(JSON floor GET "${json}" core_floor_us read)
  if(NOT v STREQUAL "passed" OR NOT n EQUAL want OR NOT floor GREATER 0)
    message(FATAL_ERROR "bench.json: validation ${v}, ${n} results (expected ${want}), core read floor ${floor} us")
  endif()
  file(STRINGS ${OUT}/bench.csv rows)
  list(LENGTH rows nrows)
  math(EXPR want_rows "${want} + 1")
  if(NOT nrows EQUAL want_rows)
    message(FATAL_ERROR "bench.csv: ${nrows} lines, expected ${want_rows}")
  endif()
else()
  message(FATAL_ERROR "MODE must be campaign or bench")
endif()
