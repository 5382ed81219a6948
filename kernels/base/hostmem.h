/* hostmem.h: how much more host memory this process can take, so that work too large for
 * it is refused before it starts rather than failing minutes in.
 *
 * The smallest of: the memory the kernel calls available (MemAvailable in /proc/meminfo),
 * the room under the address-space and data limits (ulimit -v, ulimit -d) above what the
 * process already maps, and the room under its cgroup's memory.max (cgroup v2). A source
 * that cannot be read does not limit. Thread-safe. And how large arrays ask for huge pages.
 */
#ifndef AB_HOSTMEM_H
#define AB_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

/* Bytes; UINT64_MAX when nothing could be read. */
uint64_t ab_host_memory_available(void);

/* Asks that the block p, as malloc or realloc gave it, be backed by huge pages where the
 * system gives them (Linux's transparent huge pages, "always" or "madvise"): an array of
 * hundreds of megabytes written end to end then takes a page fault every 2 MiB instead of
 * every 4 KiB, and the faults were a quarter of reading a large trace. The whole of the
 * block's mapping is advised, so that realloc can still move it in one piece (mremap).
 * Advice only: where the system gives none, or for a block under 2 MiB, nothing happens and
 * nothing fails. p may be NULL. */
void ab_host_memory_huge(void *p);

/* `bytes` of zeroed memory for a large table read and written all over (a hash table), freed
 * with free; NULL when the host has no room. From 2 MiB on it is aligned on huge pages and
 * asked onto them (ab_host_memory_huge), so that it takes a fault and a TLB entry per 2 MiB;
 * below, or where the system gives none, it is calloc's. */
void *ab_host_memory_zeroed(size_t bytes);

/* Gives back the pages of p (a block of `bytes`) that lie wholly within p[from, bytes), so
 * that they read as zero, hold no memory, and take a fresh page at the next write (Linux's
 * MADV_DONTNEED on private anonymous memory; elsewhere they are zeroed). */
void ab_host_memory_forget(void *p, size_t from, size_t bytes);

#endif
