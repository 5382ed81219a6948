/* fuzz.c: the helpers of fuzz.h. */
#include "tests/fuzz/fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device/device.h"
#include "kernels/device/device_open.h"
#include "harness/run/engine.h"
#include "strategies/registry.h"
#include "strategies/strategy.h"
#include "workloads/traces/trace.h"

void ab_fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

static void replay_one(const ab_events_t *es, const char *strategy, ab_run_t *run) {
  ab_diag_t diag = {""};
  ab_device_t *dev = NULL;
  ab_strategy_t *s = NULL;
  if (ab_device_open("sim", NULL, &dev, &diag) != AB_OK) ab_fuzz_fail("sim: %s", diag.msg);
  /* pooled's checks walk every block of every chunk after every event: small chunks keep
   * that walk short, and make chunks come and go more often. */
  const char *conf = strcmp(strategy, "pooled") == 0 ? "chunk:64KiB" : NULL;
  if (ab_strategy_create(strategy, dev, conf, &s, &diag) != AB_OK) ab_fuzz_fail("%s: %s", strategy, diag.msg);
  ab_run_opts_t ro = ab_run_defaults();
  ro.time_calls = ro.timeline = ro.kernels = false;
  ro.check = true;
  ab_status st = ab_engine_replay(es, s, &ro, run);
  if (st != AB_OK || run->status == AB_RUN_ERROR) ab_fuzz_fail("%s: replay failed: %s", strategy, run->message);
  ab_strategy_destroy(s);
  if (ab_device_close(dev, &diag) != AB_OK) ab_fuzz_fail("%s: %s", strategy, diag.msg);
}

void ab_fuzz_trace(const uint8_t *data, size_t size) {
  ab_diag_t diag = {""};
  ab_input_t in;
  if (ab_input_from_memory("fuzz", data, size, &in, &diag) != AB_OK) return; /* out of host memory */
  ab_events_t es;
  ab_status st = ab_trace_parse("fuzz", &in, NULL, &es, NULL, &diag);
  ab_input_free(&in);
  if (st != AB_OK) {
    if (st != AB_ERR_INVALID || strncmp(diag.msg, "fuzz", 4) != 0)
      ab_fuzz_fail("refused as %s, with a message that does not name the input: %s", ab_status_name(st), diag.msg);
    return;
  }
  ab_run_t run;
  if (ab_run_prepare(&run, &es) == AB_OK) {
    size_t n;
    const ab_strategy_entry_t *all = ab_strategy_registry(&n);
    for (size_t i = 0; i < n; i++)
      if (!all[i].hidden) replay_one(&es, all[i].name, &run);
    ab_run_release(&run);
  }
  ab_events_free(&es);
}
