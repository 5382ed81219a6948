/* corpus_main.c: a fuzz target's main without libFuzzer: runs the target once on every file
 * named and every file inside each directory named. In every build it replays the committed
 * corpus as a test; with any compiler it reruns an input a fuzzer saved. Exit 0 when every
 * input ran (a finding aborts), 1 when an input could not be read, there was none, or one
 * raised the peak memory of the process past what its size allows. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

/* What an input may add to the process's peak resident memory: a floor for the strategies'
 * and the simulated card's own structures (and a sanitizer's bookkeeping), and a multiple of
 * its size for what reading it builds. A reader whose work is not linear in its input (a
 * list shared a thousand times, a dict indexed once per reference) passes this at once. */
#define RSS_FLOOR_BYTES (128ull << 20)
#define RSS_PER_INPUT_BYTE 1024ull

static unsigned long long peak_rss_bytes(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (unsigned long long)ru.ru_maxrss * 1024; /* KiB on Linux */
}

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot open\n", path);
    return 1;
  }
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
    len += got;
    if (len == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (grown == NULL) free(buf);
      buf = grown;
    }
  }
  fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "%s: out of host memory\n", path);
    return 1;
  }
  unsigned long long before = peak_rss_bytes();
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  unsigned long long grew = peak_rss_bytes() - before, allowed = RSS_FLOOR_BYTES + RSS_PER_INPUT_BYTE * len;
  if (grew > allowed) {
    fprintf(stderr, "%s: %zu bytes raised the peak memory by %llu MiB (at most %llu MiB allowed)\n", path, len,
            grew >> 20, allowed >> 20);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  size_t inputs = 0;
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      bad = 1;
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) {
      bad |= run_file(argv[i]);
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      bad |= run_file(path);
      inputs++;
    }
    if (d) closedir(d);
  }
  printf("%zu inputs\n", inputs);
  if (inputs == 0) fprintf(stderr, "no inputs (usage: %s FILE|DIR...)\n", argv[0]);
  return bad || inputs == 0;
}
