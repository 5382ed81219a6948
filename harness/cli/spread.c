/* spread.c: runs spread over the ranks of a launch (spread.h). */
#include "harness/cli/spread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "harness/run/run_one.h"
#include "harness/run/stop.h"

ab_status ab_spread_open(ab_spread_t *sp, ab_diag_t *diag) {
  const char *say_as = sp->say_as;
  memset(sp, 0, sizeof *sp);
  sp->say_as = say_as;
  sp->world = sp->local = 1;
  ab_launch_t l;
  AB_TRY(ab_launch_from_env(&l, diag));
  if (l.kind == AB_LAUNCH_NONE) return AB_OK;
  ab_waits_t w;
  AB_TRY(ab_waits_from_env(&w, diag));
  w.stop = &ab_run_stop;
  w.say_as = say_as;
  AB_TRY(ab_link_open(&l, &w, &sp->link, diag));
  if (sp->link->world == 1) { /* a launch of one: alone */
    sp->link->ops->close(sp->link, true);
    sp->link = NULL;
    return AB_OK;
  }
  sp->rank = sp->link->rank;
  sp->world = sp->link->world;
  sp->local = sp->link->local ? sp->link->local : 1;
  return AB_OK;
}

void ab_spread_close(ab_spread_t *sp, bool clean) {
  if (sp->link) sp->link->ops->close(sp->link, clean);
  sp->link = NULL;
}

ab_status ab_spread_meet(const ab_spread_t *sp, uint64_t digest, const char *prog, bool quiet, ab_diag_t *diag) {
  if (sp->link == NULL) return AB_OK;
  return ab_link_meet(sp->link, digest,
                      "job differs from rank 0's (its traces, their events, or the arguments): give every rank the same "
                      "arguments and files",
                      NULL, quiet ? NULL : stderr, prog, diag);
}

/* The items of rank r, packed in order, into out (a buffer of n items). */
static size_t pack(const unsigned char *items, size_t n, size_t size, unsigned r, unsigned world, unsigned char *out) {
  size_t m = 0;
  for (size_t i = r; i < n; i += world) memcpy(out + m++ * size, items + i * size, size);
  return m;
}

ab_status ab_spread_share(const ab_spread_t *sp, void *items, size_t n, size_t size, bool to_all, const char *what,
                          ab_diag_t *diag) {
  if (sp->link == NULL) return AB_OK;
  ab_link_t *l = sp->link;
  unsigned char *all = items;
  unsigned char *mine = malloc(n * size + 1);
  void **blobs = calloc(sp->world, sizeof *blobs);
  size_t *sizes = calloc(sp->world, sizeof *sizes);
  ab_status st = mine && blobs && sizes ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK) {
    size_t m = pack(all, n, size, sp->rank, sp->world, mine);
    st = ab_link_gather(l, mine, m * size, blobs, sizes, ab_clock_s() + l->waits.results_s, what, diag);
  }
  /* Rank 0 puts each rank's items in their places. */
  for (unsigned r = 1; st == AB_OK && sp->rank == 0 && r < sp->world; r++) {
    size_t want = (n > r ? (n - r + sp->world - 1) / sp->world : 0) * size;
    if (sizes[r] != want) {
      st = ab_diag_set(diag, AB_ERR_IO, "rank %u sent %zu bytes of %s where %zu were due", r, sizes[r], what, want);
      break;
    }
    const unsigned char *p = blobs[r];
    for (size_t i = r; i < n; i += sp->world, p += size) memcpy(all + i * size, p, size);
  }
  for (unsigned r = 0; blobs && r < sp->world; r++) free(blobs[r]);
  if (st == AB_OK && to_all) {
    void *blob = sp->rank == 0 ? all : NULL;
    size_t bytes = n * size;
    st = ab_link_bcast(l, &blob, &bytes, ab_clock_s() + l->waits.results_s, what, diag);
    if (st == AB_OK && sp->rank != 0) {
      if (bytes == n * size) memcpy(all, blob, bytes);
      else st = ab_diag_set(diag, AB_ERR_IO, "rank 0 sent %zu bytes of %s where %zu were due", bytes, what, n * size);
      free(blob);
    }
  }
  free(mine);
  free(blobs);
  free(sizes);
  return st;
}
