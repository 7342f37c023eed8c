/* tools/faultinj/scenarios_embedded.h: the built-in scenario files
 * (tools/faultinj/scenarios/NAME.fi), embedded in the library at configure time by
 * faultinj/CMakeLists.txt (internal, never installed). The texts are static
 * and NUL-terminated. */
#ifndef CUBERT_FAULTINJ_SCENARIOS_EMBEDDED_H
#define CUBERT_FAULTINJ_SCENARIOS_EMBEDDED_H

typedef struct cb_fi_embedded_scenario {
  const char *name; /* "owner_to_peer.fi" */
  const char *text;
} cb_fi_embedded_scenario;

extern const cb_fi_embedded_scenario cb_fi_embedded_scenarios[];
extern const int cb_fi_embedded_scenario_count;

#endif
