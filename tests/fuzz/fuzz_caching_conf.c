/* fuzz_caching_conf.c: PYTORCH_CUDA_ALLOC_CONF as the caching strategy reads it
 * (strategies/protocol/caching_conf.h). Any text is applied, or refused as invalid input naming the
 * input with the configuration left as it was; an applied one respects PyTorch's bounds, and
 * applying the same text again changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "strategies/protocol/caching_conf.h"

static bool same(const ab_caching_conf_t *a, const ab_caching_conf_t *b) {
  return a->max_split_size == b->max_split_size && a->max_non_split_rounding == b->max_non_split_rounding &&
         a->large_segment_size == b->large_segment_size &&
         memcmp(a->divisions, b->divisions, sizeof a->divisions) == 0 && a->gc_threshold == b->gc_threshold &&
         a->memory_fraction == b->memory_fraction && a->expandable == b->expandable &&
         strcmp(a->ignored, b->ignored) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  if (size) memcpy(text, data, size);
  text[size] = '\0';
  ab_caching_conf_t c, before;
  ab_caching_conf_defaults(&c);
  before = c;
  ab_diag_t d = {""};
  ab_status st = ab_caching_conf_apply(&c, "-c", text, &d);
  if (st != AB_OK) {
    if (st != AB_ERR_INVALID && st != AB_ERR_INTERNAL) ab_fuzz_fail("refused as %s: %s", ab_status_name(st), d.msg);
    if (st == AB_ERR_INVALID && strncmp(d.msg, "-c '", 4) != 0) ab_fuzz_fail("the message does not name -c: %s", d.msg);
    if (!same(&c, &before)) ab_fuzz_fail("'%s' was refused but changed the configuration", text);
  } else {
    if (!(c.gc_threshold >= 0 && c.gc_threshold < 1) || !(c.memory_fraction >= 0 && c.memory_fraction <= 1))
      ab_fuzz_fail("'%s': threshold %g, fraction %g out of bounds", text, c.gc_threshold, c.memory_fraction);
    for (int i = 0; i < AB_CACHING_DIVISION_INTERVALS; i++)
      if (c.divisions[i] & (c.divisions[i] - 1))
        ab_fuzz_fail("'%s': %llu divisions, no power of two", text, (unsigned long long)c.divisions[i]);
    ab_caching_conf_t again = c;
    if (ab_caching_conf_apply(&again, "-c", text, &d) != AB_OK || !same(&again, &c))
      ab_fuzz_fail("'%s' applied twice differs from once: %s", text, d.msg);
  }
  free(text);
  return 0;
}
