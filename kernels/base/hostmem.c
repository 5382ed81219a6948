/* hostmem.c: the host memory this process can still take (hostmem.h). */
#include "kernels/base/hostmem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static uint64_t least(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The number after `key` in a "Key: value kB" file, in bytes; UINT64_MAX if absent. */
static uint64_t kib_field(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return UINT64_MAX;
  char line[256];
  unsigned long long kib = 0;
  uint64_t bytes = UINT64_MAX;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && sscanf(line + klen, " %llu", &kib) == 1) {
      bytes = (uint64_t)kib * 1024;
      break;
    }
  fclose(f);
  return bytes;
}

/* A file holding one number of bytes ("max" and anything unreadable: UINT64_MAX). */
static uint64_t bytes_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return UINT64_MAX;
  unsigned long long v = 0;
  int got = fscanf(f, "%llu", &v);
  fclose(f);
  return got == 1 ? (uint64_t)v : UINT64_MAX;
}

/* Room under a resource limit above `used` bytes. */
static uint64_t under_limit(int resource, uint64_t used) {
  struct rlimit rl;
  if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || used == UINT64_MAX) return UINT64_MAX;
  return rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 0;
}

uint64_t ab_host_memory_available(void) {
  uint64_t room = kib_field("/proc/meminfo", "MemAvailable:");
  room = least(room, under_limit(RLIMIT_AS, kib_field("/proc/self/status", "VmSize:")));
  room = least(room, under_limit(RLIMIT_DATA, kib_field("/proc/self/status", "VmData:")));
  uint64_t max = bytes_file("/sys/fs/cgroup/memory.max"), current = bytes_file("/sys/fs/cgroup/memory.current");
  if (max != UINT64_MAX && current != UINT64_MAX) room = least(room, max > current ? max - current : 0);
  return room;
}

void ab_host_memory_huge(void *p) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  /* glibc gives a large block a mapping of its own, which starts at the page below p and ends
   * with p's usable bytes: advising exactly that leaves it one mapping, which mremap needs to
   * grow it in place (a block from the heap, under glibc's threshold, is advised where it is). */
  if (p == NULL) return;
  size_t usable = malloc_usable_size(p);
  if (usable < (2u << 20)) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = (uintptr_t)p & ~(page - 1);
  (void)madvise((void *)from, (uintptr_t)p + usable - from, MADV_HUGEPAGE);
#else
  (void)p;
#endif
}

void *ab_host_memory_zeroed(size_t bytes) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  const size_t huge = 2u << 20;
  if (bytes >= huge) {
    void *p = NULL;
    if (posix_memalign(&p, huge, bytes) != 0) return NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    (void)madvise(p, (bytes + page - 1) & ~(page - 1), MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
  }
#endif
  return calloc(bytes ? bytes : 1, 1);
}

void ab_host_memory_forget(void *p, size_t from, size_t bytes) {
  if (p == NULL || from >= bytes) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)p + from, end = (uintptr_t)p + bytes;
  uintptr_t first = (start + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (first >= last) return;
#ifdef MADV_DONTNEED
  if (madvise((void *)first, last - first, MADV_DONTNEED) == 0) return;
#endif
  memset((void *)first, 0, last - first);
}
