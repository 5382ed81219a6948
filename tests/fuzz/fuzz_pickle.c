/* fuzz_pickle.c: the pickle machine (workloads/traces/pickle.h): any bytes parse or are refused with
 * a message naming a byte inside the input; a parsed tree can be walked from its root, every
 * string read in full, without reading outside the input or the arena; a dict's lookups find
 * what a scan of it finds. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "workloads/traces/pickle.h"

#define MAX_VISITS 100000 /* memo references make a graph: shared and cyclic values */
#define MAX_DEPTH 64

static volatile unsigned sink;

/* The entry a scan finds for key: the last one, as Python keeps. */
static const ab_pk_t *scan(const ab_pk_seq_t *seq, const ab_pk_t *key) {
  for (uint32_t i = seq->n; i >= 2; i -= 2) {
    const ab_pk_t *k = &seq->items[i - 2];
    if (k->type == AB_PK_STR && k->len == key->len && memcmp(k->v.s, key->v.s, k->len) == 0) return &seq->items[i - 1];
  }
  return NULL;
}

/* A dict's lookups (indexed when it is large: pickle.h, Note [Dict lookups]) find what a scan
 * finds, for a few of its own str keys. */
static void check_lookups(const ab_pk_seq_t *seq) {
  char key[AB_PK_INDEX_KEY_BYTES + 2];
  for (uint32_t i = 0, tried = 0; i < seq->n && tried < 4; i += 2) {
    const ab_pk_t *k = &seq->items[i];
    if (k->type != AB_PK_STR || k->len >= sizeof key || memchr(k->v.s, 0, k->len)) continue;
    memcpy(key, k->v.s, k->len);
    key[k->len] = '\0';
    ab_pk_t dict = {.type = AB_PK_DICT};
    dict.v.seq = (ab_pk_seq_t *)(uintptr_t)seq;
    if (ab_pk_get(&dict, key) != scan(seq, k)) ab_fuzz_fail("the lookup of '%s' finds another entry than a scan", key);
    tried++;
  }
}

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
      if (v->type == AB_PK_DICT) check_lookups(seq);
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
