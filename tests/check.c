#include "tests/check.h"

#include <stdarg.h>
#include <unistd.h>

/* The binary's temporary folder: its working folder too, so that what a test writes to a
 * default path (results/latest) never lands in the source tree. Removed at the end. */
static char tmpdir[64];

static bool make_tmpdir(void) {
  if (tmpdir[0]) return true;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ab_test.XXXXXX");
  return mkdtemp(tmpdir) != NULL;
}

#include "strategies/registry.h"

static const char *ab_test_strategy; /* --strategy=NAME; NULL: every strategy users can pick */
static const char *ab_test_conf;     /* --conf=CONF; NULL: none */

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

const char *ab_test_tmp_path(const char *name) {
  static char path[8][256];
  static int next;
  if (!make_tmpdir()) abort();
  char *p = path[next++ % 8];
  snprintf(p, 256, "%s/%s", tmpdir, name);
  return p;
}

const char *ab_test_write_file(const char *name, const void *data, size_t len) {
  const char *path = ab_test_tmp_path(name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) abort();
  fwrite(data, 1, len, f);
  fclose(f);
  return path;
}

/* Whether name contains one of the comma-separated words of list. */
static bool named_in(const char *name, const char *list) {
  for (const char *w = list; *w;) {
    size_t len = strcspn(w, ",");
    char word[128];
    snprintf(word, sizeof word, "%.*s", (int)len, w);
    if (len && strstr(name, word)) return true;
    w += len + (w[len] == ',');
  }
  return false;
}

int ab_test_main(int argc, char **argv, const ab_test_t *tests, size_t n) {
  if (!make_tmpdir() || chdir(tmpdir) != 0) {
    fprintf(stderr, "cannot make a working folder %s\n", tmpdir);
    return 1;
  }
  const char *filter = NULL, *except = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--device=", 9) == 0)
      ab_test_device = argv[i] + 9;
    else if (strncmp(argv[i], "--strategy=", 11) == 0)
      ab_test_strategy = argv[i] + 11;
    else if (strncmp(argv[i], "--conf=", 7) == 0)
      ab_test_conf = argv[i] + 7;
    else if (strncmp(argv[i], "--except=", 9) == 0)
      except = argv[i] + 9;
    else
      filter = argv[i];
  }
  int ran = 0, skipped = 0, failed = 0;
  for (size_t i = 0; i < n; i++) {
    if ((filter && !named_in(tests[i].name, filter)) || (except && named_in(tests[i].name, except))) continue;
    int before = ab_check_failures;
    ab_check_skipped = false;
    tests[i].fn();
    bool bad = ab_check_failures != before;
    if (bad) failed++;
    if (ab_check_skipped && !bad) skipped++;
    ran++;
    printf("%-4s %s\n", bad ? "FAIL" : ab_check_skipped ? "SKIP" : "ok", tests[i].name);
  }
  if (tmpdir[0] && chdir("/") == 0) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) {
      fprintf(stderr, "  could not remove %s\n", tmpdir);
      failed++;
    }
  }
  printf("%d tests, %d failed, %d skipped\n", ran, failed, skipped);
  if (failed) return 1;
  if (ran > 0 && skipped == ran) return AB_TEST_SKIP;
  return 0;
}

size_t ab_test_strategies(const char **names, size_t max) {
  if (ab_test_strategy) {
    names[0] = ab_test_strategy;
    return max > 0;
  }
  size_t n, k = 0;
  const ab_strategy_entry_t *all = ab_strategy_registry(&n);
  for (size_t i = 0; i < n && k < max; i++)
    if (!all[i].hidden) names[k++] = all[i].name;
  return k;
}

const char *ab_test_conf_for(const char *strategy) {
  return ab_test_strategy && strcmp(strategy, ab_test_strategy) == 0 ? ab_test_conf : NULL;
}
