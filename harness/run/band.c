/* band.c: a figure's range over the placements the driver is seen to make (band.h). */
#include "harness/run/band.h"

#include <stdio.h>
#include <string.h>

#include "kernels/base/units.h"
#include "strategies/registry.h"

ab_band_t ab_band_point(const ab_run_t *run) {
  uint64_t reserved = (uint64_t)run->stats.reserved_bytes.peak, allocs = run->stats.num_device_alloc;
  return (ab_band_t){reserved, reserved, allocs, allocs, 0, 0, 0, 0};
}

bool ab_band_is_point(const ab_band_t *b) { return b->reserved_lo == b->reserved_hi && b->allocs_lo == b->allocs_hi; }

/* A variant's figures: its replay's, or the run's where the variant replays alike. */
static void widen(ab_band_t *b, uint64_t reserved, uint64_t allocs, ab_run_status_t status, unsigned variant) {
  if (reserved < b->reserved_lo) b->reserved_lo = reserved;
  if (reserved > b->reserved_hi) {
    b->reserved_hi = reserved;
    b->worst = variant;
  }
  if (allocs < b->allocs_lo) b->allocs_lo = allocs;
  if (allocs > b->allocs_hi) b->allocs_hi = allocs;
  b->variants++;
  if (status == AB_RUN_OOM) b->oom_variants++;
  if (status == AB_RUN_OK) b->ok_variants++;
}

ab_status ab_band_measure(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run, ab_band_t *b,
                          ab_diag_t *diag) {
  if (ab_strategy_address_blind(o->strategy)) return AB_OK;
  ab_bisect_opts_t v = *o;
  v.on_oom = NULL; /* a variant's OOM is not the run's: its map is not kept */
  /* A variant under which the run ordered every range alike replays to the run's own figures
   * (Note [Variants followed], sim_follow.c): the run stands for it, unreplayed. */
  unsigned alike = run->variants_alike;
  uint64_t reserved = (uint64_t)run->stats.reserved_bytes.peak, allocs = run->stats.num_device_alloc;
  ab_run_status_t status = run->status;
  for (unsigned variant = 1; variant <= AB_PLACEMENT_VARIANTS; variant++) {
    if (alike & (1u << (variant - 1))) {
      widen(b, reserved, allocs, status, variant);
      continue;
    }
    v.dev.placement = variant;
    char device[96];
    AB_TRY(ab_bisect_probe(es, &v, budget, NULL, run, NULL, device, diag));
    if (strncmp(device, "sim:", 4) != 0) return AB_OK; /* the driver placed it */
    if (run->status == AB_RUN_INTERRUPTED) return AB_OK;
    widen(b, (uint64_t)run->stats.reserved_bytes.peak, run->stats.num_device_alloc, run->status, variant);
  }
  return AB_OK;
}

/* The unit a figure of ab_format_bytes_apart ends with ("GiB"), or NULL where it also gives
 * the exact bytes. */
static const char *unit_of(const char *text) {
  const char *space = strrchr(text, ' ');
  return space && strchr(text, '(') == NULL ? space + 1 : NULL;
}

const char *ab_band_format_bytes(uint64_t point, uint64_t lo, uint64_t hi, char *buf, size_t size) {
  uint64_t v[3] = {point, lo, hi};
  char text[3][AB_BYTES_TEXT];
  ab_format_bytes_apart(v, 3, text); /* decimals enough that the three read apart */
  if (lo == hi) {
    snprintf(buf, size, "%s", text[0]);
    return buf;
  }
  /* "7.39 GiB (7.38-7.39)": the unit once, where the three share it. */
  const char *u = unit_of(text[0]), *ul = unit_of(text[1]), *uh = unit_of(text[2]);
  if (u && ul && uh && strcmp(u, ul) == 0 && strcmp(u, uh) == 0) {
    text[1][ul - text[1] - 1] = '\0';
    text[2][uh - text[2] - 1] = '\0';
  }
  snprintf(buf, size, "%s (%s-%s)", text[0], text[1], text[2]);
  return buf;
}
