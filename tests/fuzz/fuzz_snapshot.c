/* fuzz_snapshot.c: the PyTorch snapshot importer (workloads/traces/snapshot.h) behind the trace
 * loader, on inputs that start like a pickle; its seeds are cut-down snapshots. The streaming
 * reader must agree with the tree reader it stands in for (snapshot_stream.c,
 * Note [Streaming a snapshot]): the same verdict, the same message, the same events, the same call stacks. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "workloads/traces/snapshot.h"
#include "workloads/traces/trace.h"

static void compare_readers(const uint8_t *data, size_t size) {
  ab_input_t in = {(char *)(uintptr_t)data, size};
  ab_events_t tree, stream;
  ab_diag_t dt = {""}, ds = {""};
  ab_events_init(&tree);
  ab_trace_builder_t b;
  ab_trace_builder_init(&b, &tree, "fuzz", true);
  ab_status st = ab_snapshot_read("fuzz", &in, -1, &b, &dt);
  if (st == AB_OK) st = ab_trace_builder_finish(&b, &dt);
  else ab_trace_builder_discard(&b);
  if (st == AB_OK && tree.n == 0) st = AB_ERR_INVALID; /* the loader refuses a trace of no events */
  ab_status ss = ab_trace_parse("fuzz", &in, NULL, &stream, NULL, &ds);
  if ((st == AB_OK) != (ss == AB_OK)) ab_fuzz_fail("the tree reader says '%s', the stream '%s'", dt.msg, ds.msg);
  if (st == AB_OK && ab_events_hash(&tree) != ab_events_hash(&stream)) ab_fuzz_fail("the two readers' events differ");
  char why[256] = "";
  if (st == AB_OK && !ab_stacks_same(tree.stacks, stream.stacks, why, sizeof why))
    ab_fuzz_fail("the two readers' stacks differ: %s", why);
  if (st != AB_OK && ss != AB_OK && dt.msg[0] && strstr(ds.msg, "nothing to replay") == NULL &&
      strcmp(dt.msg, ds.msg) != 0)
    ab_fuzz_fail("the tree reader says '%s', the stream '%s'", dt.msg, ds.msg);
  ab_events_free(&tree);
  if (ss == AB_OK) ab_events_free(&stream);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == 0x80) { /* PROTO: what the loader takes as a pickle */
    ab_fuzz_trace(data, size);
    compare_readers(data, size);
  }
  return 0;
}
