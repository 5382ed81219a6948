/* fuzz_pickle.c: the pickle machine (workloads/traces/pickle.h): any bytes parse or are refused with
 * a message naming a byte inside the input; a parsed tree can be walked from its root, every
 * string read in full, without reading outside the input or the arena. */
#include <string.h>

#include "fuzz.h"
#include "pickle.h"

#define MAX_VISITS 100000 /* memo references make a graph: shared and cyclic values */
#define MAX_DEPTH 64

static volatile unsigned sink;

static void visit(const ab_pk_t *v, int depth, size_t *budget) {
  if (depth > MAX_DEPTH || *budget == 0) return;
  (*budget)--;
  if (strcmp(ab_pk_type_name(v), "?") == 0) ab_fuzz_fail("a value of no known type (%u)", v->type);
  switch ((ab_pk_type_t)v->type) {
    case AB_PK_STR:
    case AB_PK_BYTES: {
      unsigned sum = 0;
      for (uint32_t i = 0; i < v->len; i++) sum += (unsigned char)v->v.s[i];
      sink = sum;
      break;
    }
    case AB_PK_LIST:
    case AB_PK_TUPLE:
    case AB_PK_DICT: {
      const ab_pk_seq_t *seq = v->v.seq;
      if (seq->n > seq->cap) ab_fuzz_fail("a container holds %u values in room for %u", seq->n, seq->cap);
      if (v->type == AB_PK_DICT && seq->n % 2) ab_fuzz_fail("a dict with an odd number of values");
      if (v->type == AB_PK_DICT) sink = ab_pk_get(v, "action") != NULL;
      sink = (unsigned)ab_pk_len(v);
      for (uint32_t i = 0; i < seq->n; i++) visit(&seq->items[i], depth + 1, budget);
      break;
    }
    default: break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ab_pickle_t pk;
  ab_diag_t diag = {""};
  ab_status st = ab_pickle_parse("fuzz", (const char *)data, size, &pk, &diag);
  if (st != AB_OK) {
    if (st != AB_ERR_INVALID) ab_fuzz_fail("parse returned %s: %s", ab_status_name(st), diag.msg);
    if (strncmp(diag.msg, "fuzz: byte ", 11) != 0) ab_fuzz_fail("an error that names no byte: %s", diag.msg);
    return 0;
  }
  size_t budget = MAX_VISITS;
  visit(&pk.root, 0, &budget);
  ab_pickle_free(&pk);
  return 0;
}
