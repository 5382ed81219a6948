/* fuzz_rmm_log.c: the RMM log reader (workloads/traces/rmm_log.h) behind the trace loader, on
 * inputs that start with its header line. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "workloads/traces/rmm_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = strlen(ab_rmm_log_header);
  if (size >= n && memcmp(data, ab_rmm_log_header, n) == 0) ab_fuzz_trace(data, size);
  return 0;
}
