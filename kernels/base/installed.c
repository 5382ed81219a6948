/* installed.c: finding what make install put beside the running binary (installed.h). */
#include "kernels/base/installed.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool ab_installed_find(const char *rel, char *out, size_t size) {
  if (size) out[0] = '\0';
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  char candidate[2 * PATH_MAX], resolved[PATH_MAX];
  snprintf(candidate, sizeof candidate, "%s/%s", exe, rel);
  if (realpath(candidate, resolved) == NULL || access(resolved, R_OK) != 0 || strlen(resolved) >= size) return false;
  memcpy(out, resolved, strlen(resolved) + 1);
  return true;
}
