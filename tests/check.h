/* check.h: the test harness every tests/NAME_test.c uses.
 *
 * A test file defines static test functions and lists them in a table given to
 * AB_TEST_MAIN. CHECK* record a failure (file, line, the expression and its values) and go
 * on; REQUIRE* also leave the test. The binary runs every test, or those whose name
 * contains a word of its first argument (words separated by commas), less those whose name
 * contains a word of --except=WORDS; --device=SPEC sets ab_test_device for suites that run
 * on either device. It exits 0 (all passed), 1 (a failure) or AB_TEST_SKIP (nothing could
 * run here, e.g. no GPU), which CTest reports as skipped.
 *
 * Files a test writes go to a folder of the binary's own under /tmp (ab_test_tmp_path),
 * which is also its working folder, so that a default output path (results/latest) never
 * reaches the source tree; it is removed when the tests have run, and failing to remove it
 * is a failure.
 */
#ifndef AB_CHECK_H
#define AB_CHECK_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AB_TEST_SKIP 77

typedef struct ab_test_s {
  const char *name;
  void (*fn)(void);
} ab_test_t;

extern int ab_check_failures;
extern bool ab_check_skipped;
/* The device the tests run on, from --device=SPEC on the command line (default "sim"). */
extern const char *ab_test_device;

/* Prints a failure (fmt may be NULL), counts it and returns false. */
bool ab_check_report(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) ab_check_report(__FILE__, __LINE__, #cond, NULL);       \
  } while (0)
#define CHECK_MSG(cond, ...)                                             \
  do {                                                                   \
    if (!(cond)) ab_check_report(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#define CHECK_EQ(a, b)                                                                              \
  do {                                                                                              \
    long long ab_a_ = (long long)(a), ab_b_ = (long long)(b);                                       \
    if (ab_a_ != ab_b_) {                                                                           \
      fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, \
              ab_a_, ab_b_);                                                                        \
      ab_check_failures++;                                                                          \
    }                                                                                               \
  } while (0)

#define CHECK_STR_CONTAINS(haystack, needle) \
  CHECK_MSG(strstr((haystack), (needle)) != NULL, "'%s' does not contain '%s'", (haystack), (needle))

#define REQUIRE(cond)                                                  \
  do {                                                                 \
    if (!(cond)) {                                                     \
      ab_check_report(__FILE__, __LINE__, #cond, NULL);                \
      return;                                                          \
    }                                                                  \
  } while (0)

#define REQUIRE_MSG(cond, ...)                                         \
  do {                                                                 \
    if (!(cond)) {                                                     \
      ab_check_report(__FILE__, __LINE__, #cond, __VA_ARGS__);         \
      return;                                                          \
    }                                                                  \
  } while (0)

/* Marks the running test as skipped (with the reason) and leaves it. */
#define SKIP(...)                       \
  do {                                  \
    fprintf(stderr, "  skipped: ");     \
    fprintf(stderr, __VA_ARGS__);       \
    fputc('\n', stderr);                \
    ab_check_skipped = true;            \
    return;                             \
  } while (0)

/* The path of a file called name in the binary's temporary folder, made on first use. The
 * result stays valid for the next seven calls. */
const char *ab_test_tmp_path(const char *name);
/* Writes len bytes to ab_test_tmp_path(name) and returns that path. */
const char *ab_test_write_file(const char *name, const void *data, size_t len);

int ab_test_main(int argc, char **argv, const ab_test_t *tests, size_t n);

/* For the suites that run every strategy: --strategy=NAME runs that one instead (any name
 * the registry takes, pluggable:PATH included) and --conf=CONF is the conf they give it.
 * The strategies to run, at most max: --strategy's, else every one users can pick. */
size_t ab_test_strategies(const char **names, size_t max);
/* The conf to give strategy: --conf for --strategy's, none for any other. */
const char *ab_test_conf_for(const char *strategy);

#define AB_TEST_MAIN(table)                                              \
  int ab_check_failures = 0;                                             \
  bool ab_check_skipped = false;                                         \
  const char *ab_test_device = "sim";                                    \
  int main(int argc, char **argv) {                                      \
    return ab_test_main(argc, argv, table, sizeof table / sizeof table[0]); \
  }

#endif
