/* topology/embedded.h: the node files built into the library (internal).
 * The table is generated at configure time by topology/CMakeLists.txt from
 * topology/nodes/; everything in it is static and read-only. */
#ifndef CUBERT_TOPOLOGY_EMBEDDED_H
#define CUBERT_TOPOLOGY_EMBEDDED_H

#include "topology/host_node.h"

extern const cb_embedded_node cb_embedded_nodes[];
extern const int cb_embedded_node_count;

#endif
