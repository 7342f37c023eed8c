/* bench/bench_numa.h: `cubert bench numa` (bench_numa.c), host<->device
 * bandwidth from host memory on each NUMA node (internal, never installed;
 * dispatched by cli_bench.c). */
#ifndef CUBERT_BENCH_BENCH_NUMA_H
#define CUBERT_BENCH_BENCH_NUMA_H

int cb_bench_numa_main(int argc, char **argv);

#endif
