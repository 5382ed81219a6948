/* apart.c: a supervised child's whole life (apart.h). */
#include "harness/run/apart.h"

#include "harness/run/bisect.h"
#include "harness/run/pipeline.h"
#include "harness/run/run_one.h"
#include "harness/run/supervise.h"

int ab_apart_child(void) {
  ab_supervise_child_t c;
  if (!ab_supervise_child_begin(&c)) return AB_EXIT_FAIL;
  /* What allocbench says in the child goes to its parent, which says it. */
  ab_run_notes = c.notes;
  bool whole = false;
  switch (c.job.unit) {
    case AB_UNIT_CHECK: whole = ab_pipeline_check_child(&c); break;
    case AB_UNIT_RUN_ONE: whole = ab_run_one_child(&c); break;
    case AB_UNIT_PROBE: whole = ab_bisect_probe_child(&c); break;
  }
  ab_supervise_child_end();
  return whole ? AB_EXIT_OK : AB_EXIT_FAIL;
}
