/* fuzz_snapshot.c: the PyTorch snapshot importer (workloads/traces/snapshot.h) behind the trace
 * loader, on inputs that start like a pickle; its seeds are cut-down snapshots. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == 0x80) ab_fuzz_trace(data, size); /* PROTO: what the loader takes as a pickle */
  return 0;
}
