# tests/no_last_error_reads.cmake: the failure travels as a value inside the
# library (issue 12): no library source reads the thread's last error, and
# only runtime/failure.c (which implements it) names it. Tools (cli/, bench/,
# tools/faultinj) are callers of the public API and may.
# Run: cmake -DROOT=<repository> -P no_last_error_reads.cmake
file(GLOB_RECURSE sources ${ROOT}/base/*.[ch] ${ROOT}/runtime/*.[ch] ${ROOT}/backends/*.[ch]
     ${ROOT}/topology/*.[ch] ${ROOT}/kernels/*.[ch] ${ROOT}/faultinj/*.[ch] ${ROOT}/lib/*.[ch])
set(bad "")
foreach(f IN LISTS sources)
  if(f MATCHES "/runtime/failure\\.c$")
    continue()
  endif()
  file(STRINGS ${f} hits REGEX "cubert_last_error|cb_error_save|cb_error_restore")
  list(FILTER hits EXCLUDE REGEX "^[ \t]*(/\\*|\\*)") # comments may name it
  if(hits)
    list(APPEND bad "${f}: ${hits}")
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "library code reads the thread's last error:\n${bad}")
endif()
message(STATUS "no library source reads the thread's last error")
