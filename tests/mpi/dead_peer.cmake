# tests/mpi/dead_peer.cmake: mpi_dead_peer under mpirun with 2 ranks, rank 1
# killed (SIGKILL) and then exiting with status 3, while rank 0 waits in
# cubert_mpi_recv (docs/cluster.md, "A rank that dies"). Each run must end
# within LIMIT seconds (nothing hangs) with a non-zero status, and the
# survivor must have reported as good exactly the transfers sent before the
# death: "transfer 0..2 good", no later one, nothing stale or wrong.
foreach(how kill exit)
  set(ENV{CUBERT_DEAD_PEER} ${how})
  execute_process(COMMAND ${MPIEXEC} ${NP} 2 ${PROG}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT})
  message("rank 1 ${how}: mpirun ended with '${rc}'; rank 0 said:\n${out}")
  if(rc MATCHES "timeout")
    message(FATAL_ERROR "mpirun did not end within ${LIMIT} s when rank 1 died (${how}):\n${err}")
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "mpirun exited 0 though rank 1 died (${how})")
  endif()
  foreach(n 0 1 2)
    if(NOT out MATCHES "transfer ${n} good")
      message(FATAL_ERROR "transfer ${n}, sent before rank 1 died, was not received good (${how}):\n${err}")
    endif()
  endforeach()
  if(out MATCHES "transfer [3-9] good" OR out MATCHES "STALE|WRONG")
    message(FATAL_ERROR "the survivor reported something as good after rank 1 died (${how})")
  endif()
endforeach()
