# cmake/manpage.cmake: writes cubert(1) with help2man from the tool's own
# --help (so the page cannot drift from it), with a COMMANDS section holding
# every subcommand's --help.
#   cmake -DCLI=path/to/cubert -DHELP2MAN=path -DOUT=cubert.1 -P cmake/manpage.cmake
set(commands info topo demo faultinj bench "bench peer" "bench runtime" "bench strided" "bench numa"
    "bench plot" "bench mpi")
# `bench mpi --help` runs `cubert-mpi bench --help`, which starts MPI (as a
# singleton): let Open MPI start as root, as a build in a container may be
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
set(inc "[COMMANDS]\n")
foreach(cmd IN LISTS commands)
  separate_arguments(words UNIX_COMMAND "${cmd}")
  execute_process(COMMAND ${CLI} ${words} --help OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 AND err MATCHES "not built into this cubert|built without its MPI component")
    continue() # e.g. -DCUBERT_BUILD_BENCH=OFF or no MPI: the page covers what the tool has
  elseif(NOT rc EQUAL 0 AND cmd STREQUAL "bench mpi")
    message(WARNING "cubert bench mpi --help: exit status ${rc} (${err}): cubert(1) goes without it")
    continue() # MPI could not start here: the rest of the page still holds
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "cubert ${cmd} --help: exit status ${rc}: ${err}")
  endif()
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  string(APPEND inc ".SS \"cubert ${cmd}\"\n.nf\n${text}.fi\n")
endforeach()
string(APPEND inc "[EXIT STATUS]\n"
  "0: done, nothing wrong. 1: the run found a problem (a failed check, a violation, a call that "
  "failed, a file that could not be read or written). 2: bad usage (an unknown option, a value out "
  "of range).\n"
  "[SEE ALSO]\n"
  "The documentation in share/doc/cubert: README.md, and under docs/: guide.md (the C API), "
  "failures.md, faultinj.md, processes.md, topology.md, bench.md, cluster.md, cli.md.\n")
file(WRITE "${OUT}.h2m" "${inc}")
execute_process(COMMAND ${HELP2MAN} --no-info --section=1 "--name=a runtime for GPU clusters with an exact account of failure"
                        "--include=${OUT}.h2m" --output=${OUT} ${CLI}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man: ${err}")
endif()
