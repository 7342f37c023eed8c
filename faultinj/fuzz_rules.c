/* faultinj/fuzz_rules.c: libFuzzer target for the rule parser (built only
 * with -DCUBERT_FUZZ=ON and clang, as fuzz_faultinj_rules).
 *
 * Beyond "no crash, no sanitizer report" it checks two properties and
 * aborts (a finding) when either breaks:
 *  - a failed parse fills a diagnostic with a line and a column inside the
 *    text;
 *  - every parsed rule prints in canonical syntax that parses back to one
 *    rule printing the same text.
 * Parsed rules are also installed, matched against a few calls and removed,
 * so the injector's bookkeeping runs under the sanitizers too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultinj/injector.h"
#include "faultinj/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const cb_fi_rule *rule) {
  char text[4096], again[4096];
  size_t n = cb_fi_rule_format(rule, text, sizeof text);
  if (n >= sizeof text) abort(); /* a rule's canonical text is bounded */
  cb_fi_parsed p;
  cubert_faultinj_diag diag;
  if (cb_fi_parse(text, n, "canonical", &p, &diag) != CUBERT_OK) {
    fprintf(stderr, "canonical text does not parse: %s\n  %s\n", text, diag.message);
    abort();
  }
  if (p.count != 1) abort();
  cb_fi_rule_format(&p.rules[0], again, sizeof again);
  if (strcmp(text, again) != 0) {
    fprintf(stderr, "round trip changed the rule:\n  %s\n  %s\n", text, again);
    abort();
  }
  cb_fi_parsed_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cb_fi_parsed p;
  cubert_faultinj_diag diag;
  cubert_status st = cb_fi_parse((const char *)data, size, "fuzz", &p, &diag);
  if (st != CUBERT_OK) {
    if (st != CUBERT_ERR_PARSE) abort();
    if (diag.line < 1 || diag.column < 1 || !diag.message[0]) abort();
    if ((size_t)diag.column > size + 1) abort();
    return 0;
  }
  for (size_t i = 0; i < p.count; i++) check_round_trip(&p.rules[i]);

  /* Through a runtime's state: install, decide, describe, summarise. The
   * text may hold NULs, so the copy ends at the first one, as a C string. */
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  uint32_t first = 0;
  cb_fi_state *fi = cb_fi_state_new();
  if (!fi) abort();
  if (strlen(text) == size) {
    if (cb_fi_state_add(fi, text, size, "fuzz", false, &first, &diag) != CUBERT_OK) abort();
    int peers[2] = {1, 2};
    static const uint32_t ops[] = {CB_FI_OP_LAUNCH, CB_FI_OP_COPY_PEER, CB_FI_OP_ALLOC, CB_FI_OP_SYNC};
    for (uint64_t k = 0; k < 16; k++) {
      uint32_t op = ops[k % 4];
      cb_fi_call call = {op, op | (op == CB_FI_OP_COPY_PEER ? CB_FI_OP_PEER_WRITE : 0), (int)(k % 3), k % 4, k,
                         op == CB_FI_OP_LAUNCH ? "k1" : NULL, peers, op == CB_FI_OP_COPY_PEER ? 2 : 0, (int)(k % 2)};
      cb_fi_hit hit;
      if (cb_fi_decide(fi, &call, &hit)) cb_fi_note(fi, hit.id, "fuzz");
    }
    char desc[4096];
    for (size_t i = 0; i < p.count; i++)
      if (!cb_fi_state_describe(fi, first + (uint32_t)i, desc, sizeof desc, NULL, NULL)) abort();
    (void)cb_fi_state_summary(fi, desc, sizeof desc);
  }
  cb_fi_state_free(fi);
  free(text);
  cb_fi_parsed_free(&p);
  return 0;
}
