/* tools/faultinj/campaign.h: seeded random programs with seeded random faults,
 * run through the checker (internal, never installed).
 *
 * A campaign seed gives program seeds (program i: a mix of the seed and i),
 * and a program seed gives one program: buffers on several devices, then
 * launches of the built-in kernels (fill, copy, checksum, peer read and
 * peer write), copies within and between devices, host writes and fills,
 * shares, slices, releases and syncs, on several streams, where about a
 * third of the steps carry a fault of a kind that suits them (`! scribble`,
 * `! async`, ...; docs/faultinj.md). The same seed gives the same program
 * and the same faults: a run replays exactly.
 *
 * When a program breaks a rule, the campaign shrinks it (delta debugging:
 * drops steps while the same kind of violation still shows) and reports
 * the shortest program it found, in scenario syntax, runnable with
 * `cubert faultinj run`.
 *
 * Ownership: reports own their strings (cb_fi_campaign_report_free). */
#ifndef CUBERT_FAULTINJ_CAMPAIGN_H
#define CUBERT_FAULTINJ_CAMPAIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/faultinj/checker.h"

typedef struct cb_fi_gen_config {
  int devices;          /* roles A.. = devices 0..; 1 to 8 */
  int streams;          /* per device, 1 to 8 */
  int steps;            /* steps after the first buffers (about) */
  double fault_share;   /* share of steps that carry a fault */
} cb_fi_gen_config;

/* Sensible defaults: 4 devices, 2 streams, 32 steps, 0.35. */
void cb_fi_gen_config_init(cb_fi_gen_config *config);

/* The program of `seed` (named "program-<seed>", placement fixed). */
bool cb_fi_campaign_program(uint64_t seed, const cb_fi_gen_config *config, cb_fi_program *program);

/* The seed of program `index` of a campaign. */
uint64_t cb_fi_campaign_seed(uint64_t campaign_seed, uint64_t index);

/* Drops steps that name views not made yet (or peer memory never shared),
 * as the scenario parser would refuse them. */
void cb_fi_program_normalize(cb_fi_program *program);

/* Shrinks `failing` while a violation of `kind` still shows; at most
 * `max_runs` runs. Returns the shortest program found (a copy). */
bool cb_fi_minimize(const cb_fi_program *failing, const cb_fi_run_config *run, cb_fi_violation_kind kind,
                    size_t max_runs, cb_fi_program *shortest, size_t *runs_made);

typedef struct cb_fi_campaign_config {
  uint64_t seed;
  uint64_t faults;       /* stop once this many were injected (0: programs decides) */
  uint64_t programs;     /* stop after this many programs (0: faults decides) */
  cb_fi_gen_config gen;
  const char *backend;   /* "host" (default) */
  int host_devices;      /* 0: the node's, else gen.devices */
  uint32_t timeout_ms;
  FILE *progress;        /* a line every 2 s */
  FILE *trace;
  size_t minimize;       /* failing programs to shrink (default 3); 0 none */
  size_t max_failing;    /* stop after this many failing programs (default 20) */
  uint64_t shard, shards; /* shards > 1: run only programs i with i % shards == shard
                             (a campaign over MPI ranks, cubert-mpi); needs `programs`,
                             so that every shard agrees on which programs exist */
} cb_fi_campaign_config;

void cb_fi_campaign_config_init(cb_fi_campaign_config *config);

typedef struct cb_fi_failing {
  uint64_t program_seed;
  uint64_t index;
  cb_fi_violation_kind kind;  /* of the first violation */
  char *first;               /* its report */
  size_t nviolations;
  char *shortest;            /* the shortest failing program, scenario syntax; NULL when not shrunk */
  size_t shortest_steps, original_steps;
  char *shortest_report;     /* the violation the shortest program shows */
} cb_fi_failing;

typedef struct cb_fi_campaign_report {
  uint64_t seed;
  uint64_t programs, steps, syncs_added, reads;
  uint64_t injected;
  uint64_t by_kind[CUBERT_FAULT_KIND_COUNT_];
  size_t by_violation[CB_FI_VIOLATION_KIND_COUNT];
  size_t violations;
  uint64_t devices_lost;     /* programs in which a device was lost */
  uint64_t leak_skipped;     /* programs whose leak check a lost device prevented */
  uint64_t setup_failures;
  bool hang;
  double seconds;
  cb_fi_failing *failing;
  size_t nfailing;
} cb_fi_campaign_report;

/* Runs the campaign. CUBERT_OK when it ran (see report->violations). */
cubert_status cb_fi_campaign_run(const cb_fi_campaign_config *config, cb_fi_campaign_report *report);
void cb_fi_campaign_report_free(cb_fi_campaign_report *report);

#endif
