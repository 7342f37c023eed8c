/* mpi/tool/tool.h: what the files of `cubert-mpi` share (internal, never
 * installed).
 *
 *   cubert_mpi_tool.c  main (MPI_Init, dispatch), `campaign`, the helpers below
 *   bench.c            `bench`: bandwidth and latency between ranks
 *                      (built with CUBERT_BUILD_BENCH; else main's weak
 *                      default says "not built", as `cubert bench` does)
 *
 * Options are parsed by cli/options.h (library cubert_cli_options), as the
 * `cubert` commands parse theirs, with messages that begin "cubert-mpi". */
#ifndef CUBERT_MPI_TOOL_H
#define CUBERT_MPI_TOOL_H

#include <stdbool.h>

#include "cli/commands.h"
#include "cli/options.h"

/* This process's rank in MPI_COMM_WORLD and the number of ranks. */
extern int cbt_rank, cbt_nranks;

/* The subcommands: argv[0] is the subcommand's name; the exit status (0, 1,
 * 2 as cli/commands.h says), the same on every rank. */
int cbt_campaign(int argc, char **argv);
int cbt_bench(int argc, char **argv);

/* cb_cli_parse on every rank (they all have the same arguments, so they
 * agree), its usage and messages printed by rank 0 only. */
int cbt_parse(const cb_cli_spec *spec, int argc, char **argv, int *first);

/* Rank 0 opens the outputs of `spec` (cb_cli_open_outputs); every rank
 * learns whether that worked. Only rank 0 writes them. */
bool cbt_open_outputs(const cb_cli_spec *spec);

#endif
