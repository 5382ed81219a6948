/* clock.h: the host's clock, the one that every wall time, deadline and host-side duration of
 * allocbench reads. CLOCK_MONOTONIC: a change of the system's date does not move it. Inline,
 * so that C, C++ and CUDA files take it alike. */
#ifndef AB_CLOCK_H
#define AB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary start, the same for every thread of the process. */
static inline uint64_t ab_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The same clock in seconds. */
static inline double ab_clock_s(void) { return (double)ab_clock_ns() * 1e-9; }

#endif
