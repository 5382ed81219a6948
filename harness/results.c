#include "harness/results.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const ab_col_t ab_summary_cols[] = {
#define AB_SUMMARY_COL(name, numeric) {#name, numeric},
    AB_SUMMARY_COLUMNS(AB_SUMMARY_COL)
#undef AB_SUMMARY_COL
};
const size_t ab_summary_ncols = sizeof ab_summary_cols / sizeof ab_summary_cols[0];

/* One cell per column, formatted. */
typedef struct summary_cells_s {
#define AB_SUMMARY_FIELD(name, numeric) char name[96];
  AB_SUMMARY_COLUMNS(AB_SUMMARY_FIELD)
#undef AB_SUMMARY_FIELD
} summary_cells_t;

#define CELL(field, ...) snprintf(c.field, sizeof c.field, __VA_ARGS__)

ab_status ab_results_add_summary(ab_table_t *t, const ab_run_desc_t *d, const ab_events_t *es, const ab_run_t *run) {
  summary_cells_t c;
  memset(&c, 0, sizeof c);
  const ab_stats_t *st = &run->stats;
  CELL(workload, "%s", d->workload);
  CELL(strategy, "%s", d->strategy);
  CELL(conf, "%s", d->conf ? d->conf : "");
  CELL(device, "%s", d->device);
  CELL(budget_bytes, "%" PRIu64, d->budget_bytes);
  CELL(seed, "%" PRIu64, d->seed);
  CELL(events, "%zu", es->n);
  CELL(status, "%s", ab_run_status_name(run->status));
  CELL(oom_kind, "%s", ab_oom_kind_name(run->status == AB_RUN_OOM ? run->oom.kind : AB_OOM_NONE));
  CELL(oom_event, "%lld", run->status == AB_RUN_OOM ? (long long)run->oom.event : -1LL);
  CELL(peak_requested_bytes, "%" PRId64, st->requested_bytes.peak);
  CELL(peak_allocated_bytes, "%" PRId64, st->allocated_bytes.peak);
  CELL(peak_reserved_bytes, "%" PRId64, st->reserved_bytes.peak);
  double frag = st->reserved_bytes.peak > 0
                    ? 100.0 * (1.0 - (double)st->allocated_bytes.peak / (double)st->reserved_bytes.peak)
                    : 0.0;
  CELL(frag_pct, "%.3f", frag);
  CELL(num_device_alloc, "%" PRIu64, st->num_device_alloc);
  CELL(num_device_free, "%" PRIu64, st->num_device_free);
  CELL(num_alloc_retries, "%" PRIu64, st->num_alloc_retries);
  CELL(num_ooms, "%" PRIu64, st->num_ooms);
  CELL(alloc_ns_p50, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.50));
  CELL(alloc_ns_p99, "%" PRIu64, ab_hist_quantile(&run->alloc_ns, 0.99));
  CELL(free_ns_p50, "%" PRIu64, ab_hist_quantile(&run->free_ns, 0.50));
  CELL(wall_s, "%.6f", run->loop_s);
  CELL(events_per_s, "%.0f", run->loop_s > 0 ? (double)run->events_done / run->loop_s : 0.0);
  CELL(step_ms_p50, "%.4f", run->step_ms_p50);
  CELL(kernel_ms_total, "%.3f", run->kernel_ms);
  CELL(harness_ns_per_event, "%.1f", run->events_done ? (double)run->harness_ns / (double)run->events_done : 0.0);
  CELL(nccl_bytes, "%" PRIu64, run->comm_bytes);
  const char *cells[] = {
#define AB_SUMMARY_PTR(name, numeric) c.name,
      AB_SUMMARY_COLUMNS(AB_SUMMARY_PTR)
#undef AB_SUMMARY_PTR
  };
  return ab_table_add(t, cells);
}

void ab_results_file_part(const char *in, char *out, size_t size) {
  const char *slash = strrchr(in, '/');
  if (slash && slash[1]) in = slash + 1;
  size_t n = 0;
  bool gap = false;
  for (; *in && n + 1 < size; in++) {
    unsigned char ch = (unsigned char)*in;
    if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_') {
      out[n++] = (char)ch;
      gap = false;
    } else if (!gap && n > 0) {
      out[n++] = '_';
      gap = true;
    }
  }
  while (n > 0 && out[n - 1] == '_') n--;
  out[n] = '\0';
}

static const ab_col_t timeline_cols[] = {
    {"event", true}, {"step", true}, {"requested", true}, {"allocated", true}, {"reserved", true},
};

ab_status ab_results_write_timeline(const char *dir, const ab_run_desc_t *d, const ab_run_t *run, ab_diag_t *diag) {
  char w[128], s[64], path[4096];
  ab_results_file_part(d->workload, w, sizeof w);
  ab_results_file_part(d->strategy, s, sizeof s);
  snprintf(path, sizeof path, "%s/timeline_%s_%s.csv", dir, w, s);
  ab_table_t t;
  ab_table_init(&t, timeline_cols, sizeof timeline_cols / sizeof timeline_cols[0]);
  ab_status st = AB_OK;
  for (size_t i = 0; i < run->ntimeline && st == AB_OK; i++) {
    const ab_tl_sample_t *x = &run->timeline[i];
    char cells[5][32];
    snprintf(cells[0], 32, "%" PRIu64, x->event);
    snprintf(cells[1], 32, "%" PRIu32, x->step);
    snprintf(cells[2], 32, "%" PRId64, x->requested);
    snprintf(cells[3], 32, "%" PRId64, x->allocated);
    snprintf(cells[4], 32, "%" PRId64, x->reserved);
    const char *row[] = {cells[0], cells[1], cells[2], cells[3], cells[4]};
    st = ab_table_add(&t, row);
  }
  if (st == AB_OK) st = ab_table_write_file(&t, path, diag);
  ab_table_free(&t);
  return st;
}
