/* trace_info.c: what a trace holds, in one row (trace_info.h). */
#include "harness/cli/trace_info.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"

static void cell(ab_cli_trace_info_t *r, const char *name, bool numeric, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cell(ab_cli_trace_info_t *r, const char *name, bool numeric, const char *fmt, ...) {
  if (r->n == AB_CLI_INFO_MAX_COLS) return;
  r->cols[r->n] = (ab_col_t){name, numeric};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->cells[r->n], sizeof r->cells[r->n], fmt, ap);
  va_end(ap);
  r->n++;
}

void ab_cli_trace_info(const char *path, const ab_events_t *es, const ab_trace_info_t *in, ab_cli_trace_info_t *r) {
  memset(r, 0, sizeof *r);
  cell(r, "trace", false, "%s", path);
  cell(r, "format", false, "%s", in->format);
  if (in->device >= 0) {
    cell(r, "device", true, "%d", in->device);
    cell(r, "devices", true, "%u", in->ndevices);
  }
  cell(r, "events", true, "%" PRIu64, in->records);
  for (unsigned i = 0; i < in->nactions; i++) cell(r, in->actions[i].name, true, "%" PRIu64, in->actions[i].count);
  if (in->other_actions) cell(r, "other_actions", true, "%" PRIu64, in->other_actions);
  cell(r, "streams", true, "%u", in->nstreams);
  char values[256] = "";
  for (unsigned i = 0; i < in->nstreams; i++) {
    size_t used = strlen(values);
    /* Room for the next value and the mark of what does not fit. */
    if (used + 21 + 16 > sizeof values) {
      snprintf(values + used, sizeof values - used, " ... (%u more)", in->nstreams - i);
      break;
    }
    snprintf(values + used, sizeof values - used, "%s%" PRIu64, i ? " " : "", in->stream_values[i]);
  }
  cell(r, "stream_values", false, "%s", values);
  cell(r, "settings", false, "%s", es->settings);
  cell(r, "peak_requested_bytes", true, "%" PRIu64, in->peak_requested);
  cell(r, "segments_start", true, "%" PRIu64, in->segments_start);
  cell(r, "segments_peak", true, "%" PRIu64, in->segments_peak);
  cell(r, "segments_end", true, "%" PRIu64, in->segments_end);
  cell(r, "device_allocs", true, "%" PRIu64, in->device_allocs);
  cell(r, "device_frees", true, "%" PRIu64, in->device_frees);
  cell(r, "reserved_start_bytes", true, "%" PRIu64, in->reserved_start);
  cell(r, "peak_reserved_bytes", true, "%" PRIu64, in->reserved_peak);
  cell(r, "reserved_end_bytes", true, "%" PRIu64, in->reserved_end);
  cell(r, "ooms_survived", true, "%" PRIu64, es->trace_ooms);
  cell(r, "ends_in_oom", true, "%d", in->final_oom ? 1 : 0);
  /* Each pool as recorded, with the allocations replayed in it (Note [Pools of a trace]). */
  cell(r, "private_pools", true, "%u", in->npools - 1);
  char pools[512] = "";
  for (unsigned i = 0; i < in->npools; i++) {
    size_t used = strlen(pools);
    if (used + 64 > sizeof pools) {
      snprintf(pools + used, sizeof pools - used, " ... (%u more)", in->npools - i);
      break;
    }
    snprintf(pools + used, sizeof pools - used, "%s(%" PRId64 ",%" PRId64 "):%" PRIu64, i ? " " : "",
             in->pools[i].id[0], in->pools[i].id[1], in->pools[i].allocs);
  }
  cell(r, "pool_allocs", false, "%s", pools);
  cell(r, "pool_allocs_inferred", true, "%" PRIu64, in->pool_inferred);
  cell(r, "pool_allocs_unknown", true, "%" PRIu64, in->pool_unknown);
  cell(r, "empty_caches", true, "%" PRIu64, in->empty_caches);
  cell(r, "releases_pytorch", true, "%" PRIu64, in->releases_pytorch);
  cell(r, "releases_untold", true, "%" PRIu64, in->releases_untold);
  cell(r, "approximate", false, "%s", es->approximate[0] ? es->approximate : "no");
  cell(r, "preexisting_allocs", true, "%" PRIu64, in->preexisting);
  cell(r, "ignored_records", true, "%" PRIu64, es->ignored);
  cell(r, "replay_events", true, "%zu", es->n);
  cell(r, "replay_allocs", true, "%" PRIu32, es->nids);
  /* The distinct call stacks and frames, and how many allocations have one
   * (Note [Stacks of a trace]). */
  const ab_stacks_t *st = es->stacks;
  uint32_t stacked = 0;
  for (uint32_t id = 0; st && id < es->nids; id++) stacked += ab_stacks_of(st, id) != 0;
  if (st)
    cell(r, "stacks", false, "%u distinct of %u distinct frames, on %" PRIu32 " of %" PRIu32 " allocations",
         st->nstacks ? st->nstacks - 1 : 0, st->nframes, stacked, es->nids);
  else
    cell(r, "stacks", false, "none recorded");
  cell(r, "events_hash", false, "%016" PRIx64, ab_events_hash(es));
}

void ab_cli_trace_info_write(const ab_cli_trace_info_t *r, FILE *f) {
  static const char *const exact[] = {"peak_requested_bytes", "peak_reserved_bytes"};
  char keys[AB_CLI_INFO_MAX_COLS][64], values[AB_CLI_INFO_MAX_COLS][256];
  size_t w = 0;
  for (size_t i = 0; i < r->n; i++) {
    const char *name = r->cols[i].name, *v = r->cells[i];
    size_t len = strlen(name);
    bool size = len > 6 && strcmp(name + len - 6, "_bytes") == 0;
    snprintf(keys[i], sizeof keys[i], "%.*s", (int)(size ? len - 6 : len), name);
    snprintf(values[i], sizeof values[i], "%s", v);
    if (size) {
      uint64_t bytes = strtoull(v, NULL, 10);
      char unit[32];
      bool precise = false;
      for (size_t k = 0; k < sizeof exact / sizeof exact[0]; k++) precise |= strcmp(name, exact[k]) == 0;
      ab_format_bytes(bytes, unit, sizeof unit);
      if (precise && bytes >= 1024)
        snprintf(values[i], sizeof values[i], "%s (%" PRIu64 " B)", unit, bytes);
      else
        snprintf(values[i], sizeof values[i], "%s", unit);
    } else if (strcmp(name, "settings") == 0 && v[0] == '\0') {
      snprintf(values[i], sizeof values[i], "default");
    }
    if (strlen(keys[i]) > w) w = strlen(keys[i]);
  }
  for (size_t i = 0; i < r->n; i++) fprintf(f, "%-*s  %s\n", (int)w, keys[i], values[i]);
}

