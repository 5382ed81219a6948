/* fuzz_trace_csv.c: allocbench's CSV trace reader (workloads/traces/trace_csv.h) behind the trace
 * loader, on inputs that start with its header line. */
#include <string.h>

#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char header[] = "action,addr,size,stream,time_us";
  if (size >= sizeof header - 1 && memcmp(data, header, sizeof header - 1) == 0) ab_fuzz_trace(data, size);
  return 0;
}
