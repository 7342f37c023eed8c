/* topology/testing.h: a seam for tests (internal, never installed).
 *
 * cubert_topology_create() asks the runtime's driver what links each pair;
 * tests have no AMD or NVIDIA driver, so they hand in the answers instead.
 * Ownership as for cubert_topology_create_from(). */
#ifndef CUBERT_TOPOLOGY_TESTING_H
#define CUBERT_TOPOLOGY_TESTING_H

#include "cubert/topology.h"

/* cubert_topology_create_from() plus what the driver would say of pair
 * (a, b): driver[a * n + b], n devices; type -1 means "the driver could not
 * tell" (as when cubert_runtime_device_link() fails). */
cubert_status cb_topology_create_with_driver(const cubert_topology_source *source,
                                             const cubert_device_link *driver, cubert_topology **topology);

#endif
