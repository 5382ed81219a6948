/* hostmem.h: how much more host memory this process can take, so that work too large for
 * it is refused before it starts rather than failing minutes in.
 *
 * The smallest of: the memory the kernel calls available (MemAvailable in /proc/meminfo),
 * the room under the address-space and data limits (ulimit -v, ulimit -d) above what the
 * process already maps, and the room under its cgroup's memory.max (cgroup v2). A source
 * that cannot be read does not limit. Thread-safe.
 */
#ifndef AB_HOSTMEM_H
#define AB_HOSTMEM_H

#include <stdint.h>

/* Bytes; UINT64_MAX when nothing could be read. */
uint64_t ab_host_memory_available(void);

#endif
