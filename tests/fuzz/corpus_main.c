/* corpus_main.c: a fuzz target's main without libFuzzer: runs the target once on every file
 * named and every file inside each directory named. In every build it replays the committed
 * corpus as a test; with any compiler it reruns an input a fuzzer saved. Exit 0 when every
 * input ran (a finding aborts), 1 when an input could not be read or there was none. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

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
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
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
