#include "check.h"

#include <stdarg.h>

bool ab_check_report(const char *file, int line, const char *expr, const char *fmt, ...) {
  fprintf(stderr, "  %s:%d: CHECK(%s) failed", file, line, expr);
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  ab_check_failures++;
  return false;
}

int ab_test_main(int argc, char **argv, const ab_test_t *tests, size_t n) {
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--device=", 9) == 0)
      ab_test_device = argv[i] + 9;
    else
      filter = argv[i];
  }
  int ran = 0, skipped = 0, failed = 0;
  for (size_t i = 0; i < n; i++) {
    if (filter && strstr(tests[i].name, filter) == NULL) continue;
    int before = ab_check_failures;
    ab_check_skipped = false;
    tests[i].fn();
    bool bad = ab_check_failures != before;
    if (bad) failed++;
    if (ab_check_skipped && !bad) skipped++;
    ran++;
    printf("%-4s %s\n", bad ? "FAIL" : ab_check_skipped ? "SKIP" : "ok", tests[i].name);
  }
  printf("%d tests, %d failed, %d skipped\n", ran, failed, skipped);
  if (failed) return 1;
  if (ran > 0 && skipped == ran) return AB_TEST_SKIP;
  return 0;
}
