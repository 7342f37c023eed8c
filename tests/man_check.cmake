# tests/man_check.cmake: the man page cubert(1) (cmake/manpage.cmake) holds
# every command's --help, and every variable of `cubert --help`'s environment
# list as an entry of its own (help2man merges a name and text set apart by
# one space into the paragraph above).
# -DCLI=path/to/cubert -DMAN=path/to/cubert.1
file(READ "${MAN}" page)
execute_process(COMMAND ${CLI} bench --help OUTPUT_VARIABLE bench_help RESULT_VARIABLE bench_rc ERROR_QUIET)
set(commands info topo demo faultinj bench)
if(bench_rc EQUAL 0)
  string(REGEX MATCHALL "\n  [a-z]+  " whats "${bench_help}")
  foreach(w IN LISTS whats)
    string(STRIP "${w}" w)
    list(APPEND commands "bench ${w}")
  endforeach()
  list(LENGTH commands n)
  if(n LESS 9)
    message(FATAL_ERROR "`cubert bench --help` names too few benchmarks: ${commands}")
  endif()
else()
  # a tool built without bench/ (CUBERT_BUILD_BENCH=OFF, as the sanitizer
  # builds): `bench --help` says so and exits non-zero; its page has no
  # bench sections, which the loop below then skips
  list(LENGTH commands n)
endif()
foreach(c IN LISTS commands)
  separate_arguments(words UNIX_COMMAND "${c}")
  execute_process(COMMAND ${CLI} ${words} --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    continue() # not built into this tool (bench mpi without MPI): not on the page either
  endif()
  string(FIND "${page}" ".SS \"cubert ${c}\"" at)
  if(at LESS 0)
    message(FATAL_ERROR "${MAN}: no section for `cubert ${c} --help`")
  endif()
endforeach()
execute_process(COMMAND ${CLI} --help OUTPUT_VARIABLE help)
string(REGEX MATCHALL "\n  CUBERT_[A-Z_]+[ \n]" vars "${help}")
if(NOT vars)
  message(FATAL_ERROR "`cubert --help` lists no CUBERT_ variable: nothing to check")
endif()
foreach(v IN LISTS vars)
  string(STRIP "${v}" v)
  string(FIND "${page}" ".TP\n${v}\n" at)
  if(at LESS 0)
    message(FATAL_ERROR "${MAN}: ${v} is not an entry of its own (.TP) in the environment list")
  endif()
endforeach()
message(STATUS "${MAN}: ${n} commands, every variable an entry")
