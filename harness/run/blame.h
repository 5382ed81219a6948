/* blame.h: which code holds the memory at a moment of a replay, and what changing it would
 * save (allocbench blame).
 *
 * Note [Blame]
 * At a moment of the replay of a trace under a setting (the peak of reserved bytes, the OOM,
 * or an event), each allocation is charged to its call site, and each site gets:
 *   live    the bytes its allocations still hold (requested, as PyTorch counts them);
 *   unused  the reserved bytes free at that moment that it left: a free block is charged to
 *           the allocation that last held its first byte, or, where none ever did (the rest
 *           of a split), to the one that last held the byte below it, the block it was split
 *           from. Inactive splits and segments held only by free blocks are so charged to
 *           the code whose frees and splits made them.
 * A call site is the innermost frames of the allocation's stack that belong to the program:
 * frames of PyTorch's Python package (a path with /torch/), of installed packages
 * (/site-packages/, /dist-packages/), of Python's own library (/lib/pythonX.Y/) and those
 * Python makes up (<frozen ...>, <string>) are passed over; `frames` of the program's are
 * kept (default 1). A trace without stacks is charged by allocation instead: its requested
 * size and how long it lives (events, to a power of two), named so.
 * The sites are ranked by unused bytes (the fragmentation they leave), then live bytes. For
 * the first `top`, three changes of the code are replayed, each a real replay of the trace
 * changed as the code change would change it:
 *   pool    the site's allocations in a private pool of their own (torch.cuda.MemPool with
 *           use_mem_pool around the site): pool events around each run of them, routed as a
 *           trace's importer routes a recorded pool (a new pool, made once, released when
 *           the run ends), so that the other allocations never share its segments;
 *   early   each block of the site freed before the site makes its next one, where the trace
 *           frees it just after (before the site's allocation after that: `del x` before
 *           `x = f(...)`); a snapshot records no use, so the site's next allocation is the
 *           earliest point at which such a change frees it, and a site whose blocks outlive
 *           its next allocation (a cache) is left as it is;
 *   round   the site's allocations all of its largest size (one buffer size, preallocated),
 *           so that each can take the block another left.
 * Each change's peak reserved and smallest cap (safe cap where the caps were mapped, Note
 * [Cap map], bisect.c) are compared with the trace's own under the same setting.
 *
 * Errors: AB_ERR_INVALID for a moment that is not there (no OOM to blame at, an event past
 * the end), AB_ERR_INTERNAL on host memory; a replay's own error is the run's. Not
 * thread-safe: one blame at a time per stream.
 */
#ifndef AB_BLAME_H
#define AB_BLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workloads/events/events.h"
#include "harness/run/bisect.h"

typedef enum ab_blame_change_e {
  AB_BLAME_POOL = 0,
  AB_BLAME_EARLY,
  AB_BLAME_ROUND,
  AB_BLAME_NCHANGES
} ab_blame_change_t;

/* "pool", "early", "round". */
const char *ab_blame_change_name(ab_blame_change_t c);

typedef enum ab_blame_at_e {
  AB_BLAME_AT_PEAK = 0, /* the first event at which reserved bytes reach their peak */
  AB_BLAME_AT_OOM,      /* just before the request that ran out of memory */
  AB_BLAME_AT_EVENT,    /* after event at_event */
} ab_blame_at_t;

/* What a replay of a (changed) trace gave. */
typedef struct ab_blame_fig_s {
  bool done;              /* replayed */
  bool ok;                /* ran to the end (else it ran out of memory) */
  uint64_t peak_reserved; /* bytes; of the whole run, or up to its OOM */
  bool cap_found;         /* a cap that completes was found */
  uint64_t cap;           /* the safe cap where mapped, else the smallest cap */
  bool cap_safe;          /* cap is a safe cap (mapped) */
  bool unchanged;         /* the change changes nothing in the trace: not replayed */
} ab_blame_fig_t;

typedef struct ab_blame_site_s {
  char name[384];         /* "model.py:42 forward", frames joined by " < "; or "size ..., lives ..." */
  uint32_t stack;         /* one of its stacks, for showing it whole; 0: none */
  uint64_t live_bytes;    /* at the moment */
  uint64_t unused_bytes;  /* at the moment */
  uint64_t allocs;        /* its allocations in the whole trace */
  uint64_t max_bytes;     /* its largest request */
  ab_blame_fig_t change[AB_BLAME_NCHANGES]; /* for the first `top` sites */
  uint32_t found;         /* the order it was first met in (the ranking's own) */
} ab_blame_site_t;

typedef struct ab_blame_opts_s {
  ab_bisect_opts_t b;  /* strategy, conf, device; b.cap with cap below: the job's cap */
  uint64_t cap;        /* the job's cap (PyTorch's per_process_memory_fraction); 0: none */
  ab_blame_at_t at;
  size_t at_event;     /* AB_BLAME_AT_EVENT */
  unsigned frames;     /* the program's frames naming a site; 0: 1 */
  unsigned top;        /* sites whose changes are replayed; 0: none */
  unsigned map_probes; /* the cap search's map_probes (bisect.h) */
  bool no_caps;        /* compare peak reserved only: no cap searches */
} ab_blame_opts_t;

typedef struct ab_blame_s {
  bool stacks;            /* sites by call stack; else by size and lifetime */
  size_t moment;          /* the state after events [0, moment) */
  uint64_t reserved;      /* at the moment */
  uint64_t live;          /* requested bytes live at the moment */
  ab_blame_fig_t base;    /* the trace as it is */
  ab_blame_site_t *site;  /* ranked */
  size_t nsites;
  uint32_t *site_of;      /* per allocation id, its site (an index into site); UINT32_MAX: none */
  unsigned probes;        /* replays made */
} ab_blame_t;

/* Whether o's moment can be in es, before any replay: an event number past its end cannot.
 * AB_ERR_INVALID with diag set when not; ab_blame_run checks it too. */
ab_status ab_blame_check(const ab_events_t *es, const ab_blame_opts_t *o, ab_diag_t *diag);

/* Blames es at the moment o says (Note [Blame]) into out (ab_blame_free releases it). */
ab_status ab_blame_run(const ab_events_t *es, const ab_blame_opts_t *o, ab_blame_t *out, ab_diag_t *diag);
/* The trace es changed by c for the site of rank (an index into bl->site), into out (a
 * finished stream, ab_events_free releases it); *changed false when the change leaves the
 * trace as it is. */
ab_status ab_blame_changed(const ab_events_t *es, const ab_blame_t *bl, size_t site, ab_blame_change_t c,
                           ab_events_t *out, bool *changed, ab_diag_t *diag);
/* The figures of es under o's setting (peak reserved, and the cap unless o->no_caps). */
ab_status ab_blame_figures(const ab_events_t *es, const ab_blame_opts_t *o, ab_blame_fig_t *fig, unsigned *probes,
                           ab_diag_t *diag);
void ab_blame_free(ab_blame_t *bl);

#endif
