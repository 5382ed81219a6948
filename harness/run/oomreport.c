/* oomreport.c: what allocbench says of an out-of-memory (oomreport.h). */
#include "harness/run/oomreport.h"

#include <inttypes.h>
#include <string.h>

#include "kernels/base/units.h"
#include "harness/run/results.h"
#include "harness/run/table.h"

const char *ab_block_state_name(ab_block_state_t state) {
  switch (state) {
    case AB_BLOCK_ALLOCATED: return "allocated";
    case AB_BLOCK_PENDING_FREE: return "pending_free";
    case AB_BLOCK_FREE: return "free";
    case AB_BLOCK_UNMAPPED: return "unmapped";
  }
  return "?";
}

/* A column that can be empty never comes last: gnuplot misreads an empty last field. */
static const ab_col_t map_cols[] = {
    {"segment", true}, {"offset", true},       {"size", true},            {"state", false}, {"alloc_id", true},
    {"requested", true}, {"segment_size", true}, {"segment_address", true}, {"pool", false},  {"stream", true},
    {"workload", false}, {"conf", false},         {"strategy", false}, /* the run (ab_results_run_cells) */
};
#define MAP_NCOLS (sizeof map_cols / sizeof map_cols[0])

ab_status ab_oomreport_write(const ab_oommap_t *m, const char *dir, const ab_run_desc_t *run, char *path,
                             size_t path_size, ab_diag_t *diag) {
  if (path && path_size) path[0] = '\0';
  if (!m->captured || m->walk_status != AB_OK) return AB_OK;
  char file[4096];
  ab_results_run_file(dir, "oommap", run, file, sizeof file);
  ab_status st = ab_oomreport_write_file(m, file, run, diag);
  if (st == AB_OK && path) snprintf(path, path_size, "%s", file);
  return st;
}

ab_status ab_oomreport_write_file(const ab_oommap_t *m, const char *file, const ab_run_desc_t *run, ab_diag_t *diag) {
  ab_table_t t;
  ab_table_init(&t, map_cols, MAP_NCOLS);
  ab_status st = AB_OK;
  char who[3][AB_RESULTS_RUN_CELL];
  const char *run_row[3] = {"", "", ""};
  if (run) ab_results_run_cells(run, who, run_row);
  for (size_t si = 0; si < m->nsegs && st == AB_OK; si++) {
    const ab_oommap_segment_t *sg = &m->segs[si];
    for (size_t bi = sg->first_block; bi < sg->first_block + sg->nblocks && st == AB_OK; bi++) {
      const ab_oommap_block_t *b = &m->blocks[bi];
      char c[MAP_NCOLS][32];
      snprintf(c[0], 32, "%zu", si);
      snprintf(c[1], 32, "%" PRIu64, b->offset);
      snprintf(c[2], 32, "%" PRIu64, b->bytes);
      snprintf(c[3], 32, "%s", ab_block_state_name(b->state));
      snprintf(c[4], 32, "%" PRId64, b->alloc_id);
      snprintf(c[5], 32, "%" PRIu64, b->requested);
      snprintf(c[6], 32, "%" PRIu64, sg->bytes);
      snprintf(c[7], 32, "%" PRIu64, (uint64_t)sg->base);
      snprintf(c[8], 32, "%s", sg->pool);
      snprintf(c[9], 32, "%u", sg->stream);
      const char *row[MAP_NCOLS];
      for (size_t i = 0; i < MAP_NCOLS - 3; i++) row[i] = c[i];
      for (size_t i = 0; i < 3; i++) row[MAP_NCOLS - 3 + i] = run_row[i];
      st = ab_table_add(&t, row);
    }
  }
  if (st == AB_OK) st = ab_table_write_file(&t, file, diag);
  else ab_diag_set(diag, st, "%s: out of host memory", file);
  ab_table_free(&t);
  return st;
}

void ab_oomreport_print(FILE *f, const ab_oom_info_t *oom, const char *strategy, const char *device, uint64_t budget,
                        const ab_oommap_t *m, const char *map_path) {
  char tried[32], limit[32], alloc[32], unalloc[32], live[32], left[32], largest[32];
  bool have_map = m && m->captured && m->walk_status == AB_OK;
  ab_format_bytes_torch(oom->bytes, tried, sizeof tried);
  ab_format_bytes_torch(oom->limit, limit, sizeof limit);
  ab_format_bytes_torch(oom->allocated > 0 ? (uint64_t)oom->allocated : 0, alloc, sizeof alloc);
  int64_t gap = oom->reserved - oom->allocated;
  ab_format_bytes_torch(gap > 0 ? (uint64_t)gap : 0, unalloc, sizeof unalloc);
  ab_format_bytes_torch(oom->live_requested, live, sizeof live);
  fprintf(f, "%s ran out of memory on %s at event %zu (allocation id %" PRIu32 ").\n", strategy, device, oom->event,
          oom->id);
  fprintf(f, "  Tried to allocate %s with %s %s. %s is allocated and %s is reserved but unallocated", tried, limit,
          oom->capped ? "allowed by the cap" : budget ? "allowed" : "free on the card", alloc, unalloc);
  if (have_map)
    fprintf(f, "; the largest free block is %s, in %zu segment%s.\n",
            ab_format_bytes_torch(m->largest_free, largest, sizeof largest), m->nsegs, m->nsegs == 1 ? "" : "s");
  else
    fprintf(f, ".\n");
  uint64_t left_bytes = oom->limit > oom->live_requested ? oom->limit - oom->live_requested : 0;
  ab_format_bytes_torch(left_bytes, left, sizeof left);
  fprintf(f, "  Kind: %s. The live allocations requested %s, which leaves %s (%" PRIu64 " bytes) of the %s for a request of %" PRIu64 " bytes; ",
          ab_oom_kind_name(oom->kind), live, left, left_bytes, limit, oom->bytes);
  char device_bytes[32];
  ab_format_bytes_torch(oom->device_bytes, device_bytes, sizeof device_bytes);
  switch (oom->kind) {
    case AB_OOM_CAPACITY: fprintf(f, "no packing of them could have served it.\n"); break;
    case AB_OOM_ROUNDING:
      fprintf(f, "it fits as requested, but %s takes %s from the device for it, which does not fit beside the %s allocated: its granularity, not scattered memory, is in the way.\n",
              strategy, device_bytes, alloc);
      break;
    default:
      fprintf(f, "it fits even as %s takes it (%s), beside the %s allocated: the free memory is there, scattered or cached.\n",
              strategy, device_bytes, alloc);
      break;
  }
  if (oom->message[0] && (m == NULL || m->own_message)) fprintf(f, "  The strategy said: %s\n", oom->message);
  if (m && m->captured && m->walk_status != AB_OK)
    fprintf(f, "  No segment map: %s.\n", m->walk_message);
  else if (map_path && map_path[0])
    fprintf(f, "  Segment map: %s (gnuplot -e \"map='%s'\" %s/oommap.gp draws it).\n", map_path, map_path,
            ab_results_plots_dir());
}
