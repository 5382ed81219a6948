/* blame.c: call sites at a moment of a replay, and the changes of their code replayed
 * (blame.h, Note [Blame]). */
#include "harness/run/blame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/hashmap.h"
#include "kernels/base/units.h"
#include "strategies/strategy.h"

const char *ab_blame_change_name(ab_blame_change_t c) {
  static const char *const names[AB_BLAME_NCHANGES] = {"pool", "early", "round"};
  return c < AB_BLAME_NCHANGES ? names[c] : "?";
}

void ab_blame_free(ab_blame_t *bl) {
  free(bl->site);
  free(bl->site_of);
  memset(bl, 0, sizeof *bl);
}

/* ---- call sites ------------------------------------------------------------------------------ */

/* Whether a frame's file is the program's own (Note [Blame]): not PyTorch's package, an
 * installed package, Python's library, or a name Python makes up. */
static bool program_file(const char *file) {
  if (file[0] == '<' || file[0] == '\0') return false;
  return strstr(file, "/torch/") == NULL && strstr(file, "/site-packages/") == NULL &&
         strstr(file, "/dist-packages/") == NULL && strstr(file, "/lib/python") == NULL;
}

/* The last two parts of a path ("pkg/model.py"): enough to tell files apart in a table. */
static const char *short_path(const char *file) {
  const char *last = strrchr(file, '/');
  if (last == NULL || last == file) return file;
  const char *p = last - 1;
  while (p > file && *p != '/') p--;
  return *p == '/' ? p + 1 : p;
}

/* The name of stack k's site: its first `frames` frames of the program, innermost first (the
 * innermost frame when none is the program's). */
static void stack_site(const ab_stacks_t *st, uint32_t k, unsigned frames, char *out, size_t size) {
  const uint32_t *f = NULL;
  uint32_t n = ab_stacks_frames(st, k, &f);
  size_t used = 0;
  unsigned kept = 0;
  out[0] = '\0';
  for (uint32_t pass = 0; pass < 2 && kept == 0; pass++)
    for (uint32_t i = 0; i < n && kept < frames && used < size; i++) {
      const ab_frame_t *fr = &st->frame[f[i]];
      const char *file = ab_stacks_text(st, fr->file);
      if (pass == 0 && !program_file(file)) continue;
      used += (size_t)snprintf(out + used, size - used, "%s%s:%u %s", kept ? " < " : "", short_path(file), fr->line,
                               ab_stacks_text(st, fr->name));
      kept++;
    }
  if (kept == 0) snprintf(out, size, "(no frames)");
}

/* The name of a site of a trace without stacks: the request's size and how long it lives,
 * in classes of 16 times (within 16 events, 256, 4096, later, never freed), wide enough that
 * one line of a loop, whose tensors live about as long each step, stays one site. */
static void size_site(uint64_t bytes, size_t lifetime, char *out, size_t size) {
  char b[AB_BYTES_TEXT];
  ab_format_bytes(bytes, b, sizeof b);
  if (lifetime == SIZE_MAX) {
    snprintf(out, size, "size %s, never freed", b);
    return;
  }
  size_t bound = 16;
  while (bound < ((size_t)1 << 32) && lifetime >= bound) bound *= 16;
  if (lifetime >= bound) snprintf(out, size, "size %s, lives %zu events or more", b, bound);
  else snprintf(out, size, "size %s, lives under %zu events", b, bound);
}

/* Sites by name: an open-addressing table of indices into bl->site. */
typedef struct sites_s {
  ab_blame_t *bl;
  size_t cap;
  uint32_t *slot; /* index + 1; 0: empty */
} sites_t;

static uint64_t hash_name(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

/* The index of the site called name, added when new; UINT32_MAX when the host has no room. */
static uint32_t site_index(sites_t *t, const char *name) {
  ab_blame_t *bl = t->bl;
  if ((bl->nsites + 1) * 2 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    uint32_t *slot = calloc(cap, sizeof *slot);
    ab_blame_site_t *grown = realloc(bl->site, cap / 2 * sizeof *grown);
    if (grown) bl->site = grown;
    if (slot == NULL || grown == NULL) {
      free(slot);
      return UINT32_MAX;
    }
    for (size_t i = 0; i < bl->nsites; i++) {
      size_t s = hash_name(bl->site[i].name) & (cap - 1);
      while (slot[s]) s = (s + 1) & (cap - 1);
      slot[s] = (uint32_t)i + 1;
    }
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
  }
  size_t s = hash_name(name) & (t->cap - 1);
  for (; t->slot[s]; s = (s + 1) & (t->cap - 1))
    if (strcmp(bl->site[t->slot[s] - 1].name, name) == 0) return t->slot[s] - 1;
  ab_blame_site_t *site = &bl->site[bl->nsites];
  memset(site, 0, sizeof *site);
  snprintf(site->name, sizeof site->name, "%s", name);
  t->slot[s] = (uint32_t)++bl->nsites;
  return (uint32_t)bl->nsites - 1;
}

/* Where each id is allocated and freed (its free's completion): event indices, SIZE_MAX for
 * never. */
static ab_status lifetimes(const ab_events_t *es, size_t **alloc_at, size_t **free_at) {
  size_t n = es->nids ? es->nids : 1;
  *alloc_at = malloc(n * sizeof **alloc_at);
  *free_at = malloc(n * sizeof **free_at);
  if (*alloc_at == NULL || *free_at == NULL) return AB_ERR_INTERNAL;
  for (size_t i = 0; i < n; i++) (*alloc_at)[i] = (*free_at)[i] = SIZE_MAX;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) (*alloc_at)[e->id] = i;
    else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) (*free_at)[e->id] = i;
  }
  return AB_OK;
}

/* Gives every id its site (bl->site_of), counting allocations and the largest request. */
static ab_status name_sites(const ab_events_t *es, const ab_blame_opts_t *o, const size_t *alloc_at, const size_t *free_at,
                            ab_blame_t *bl) {
  const ab_stacks_t *st = es->stacks;
  bl->stacks = st != NULL && st->nstacks > 1;
  bl->site_of = malloc((es->nids ? es->nids : 1) * sizeof *bl->site_of);
  uint32_t *of_stack = bl->stacks ? malloc(st->nstacks * sizeof *of_stack) : NULL;
  sites_t t = {bl, 0, NULL};
  ab_status status = bl->site_of == NULL || (bl->stacks && of_stack == NULL) ? AB_ERR_INTERNAL : AB_OK;
  if (of_stack)
    for (uint32_t k = 0; k < st->nstacks; k++) of_stack[k] = UINT32_MAX;
  char name[384];
  for (uint32_t id = 0; id < es->nids && status == AB_OK; id++) {
    uint32_t k = bl->stacks ? ab_stacks_of(st, id) : 0;
    size_t at = alloc_at[id];
    uint64_t bytes = at == SIZE_MAX ? 0 : es->ev[at].bytes;
    uint32_t s;
    if (bl->stacks && of_stack[k] != UINT32_MAX) {
      s = of_stack[k];
    } else {
      if (bl->stacks && k) stack_site(st, k, o->frames ? o->frames : 1, name, sizeof name);
      else if (bl->stacks) snprintf(name, sizeof name, "(no stack recorded)");
      else size_site(bytes, free_at[id] == SIZE_MAX || at == SIZE_MAX ? SIZE_MAX : free_at[id] - at, name, sizeof name);
      s = site_index(&t, name);
      if (s == UINT32_MAX) {
        status = AB_ERR_INTERNAL;
        break;
      }
      if (bl->stacks) of_stack[k] = s;
      if (bl->site[s].stack == 0) bl->site[s].stack = k;
    }
    bl->site_of[id] = s;
    bl->site[s].allocs++;
    if (bytes > bl->site[s].max_bytes) bl->site[s].max_bytes = bytes;
  }
  free(of_stack);
  free(t.slot);
  return status;
}

/* ---- the state at the moment ------------------------------------------------------------------- */

typedef struct capture_s {
  const ab_events_t *es;
  ab_blame_t *bl;
  const ab_dptr_t *addr_of;
  const size_t *alloc_at;
  size_t moment;
  ab_map_t live;      /* address -> id + 1, of the ids live at the moment */
  ab_map_t last;      /* address -> id + 1, of the last allocation made there before it */
  uint32_t below;     /* the owner of the block before, in the segment being walked; UINT32_MAX: none */
  bool captured, failed;
} capture_t;

static int charge_segment(void *ctx, const ab_segment_info_t *seg) {
  capture_t *c = ctx;
  ab_blame_t *bl = c->bl;
  c->below = UINT32_MAX;
  for (size_t i = 0; i < seg->nblocks; i++) {
    const ab_block_info_t *b = &seg->blocks[i];
    if (b->state == AB_BLOCK_UNMAPPED) {
      c->below = UINT32_MAX;
      continue;
    }
    bl->reserved += b->bytes;
    uint64_t id1 = 0;
    if (b->state == AB_BLOCK_ALLOCATED || b->state == AB_BLOCK_PENDING_FREE) {
      if (ab_map_get(&c->live, b->addr, &id1) && id1) {
        uint32_t site = bl->site_of[id1 - 1];
        bl->site[site].live_bytes += c->es->ev[c->alloc_at[id1 - 1]].bytes;
        bl->live += c->es->ev[c->alloc_at[id1 - 1]].bytes;
        c->below = (uint32_t)(id1 - 1);
      } else {
        c->below = UINT32_MAX; /* held by the strategy itself (an expandable segment's tail) */
      }
      continue;
    }
    /* A free block: the last allocation made at its address, else the block it was split from. */
    uint32_t owner = ab_map_get(&c->last, b->addr, &id1) && id1 ? (uint32_t)(id1 - 1) : c->below;
    if (owner != UINT32_MAX) bl->site[bl->site_of[owner]].unused_bytes += b->bytes;
    c->below = owner;
  }
  return 0;
}

static void capture(void *ctx, ab_strategy_t *s, const ab_run_t *run) {
  capture_t *c = ctx;
  c->captured = true;
  for (uint32_t id = 0; id < c->es->nids && !c->failed; id++) {
    if (ab_run_live(run, id) && ab_map_put(&c->live, run->ptr[id], (uint64_t)id + 1) != AB_OK) c->failed = true;
    /* Ids are handed out in the order of their allocations: the last put at an address wins. */
    if (c->alloc_at[id] < c->moment && c->addr_of[id] && ab_map_put(&c->last, c->addr_of[id], (uint64_t)id + 1) != AB_OK)
      c->failed = true;
  }
  if (!c->failed) ab_strategy_walk(s, charge_segment, c);
}

/* One replay of es (its first n events) under o's setting. */
static ab_status replay(const ab_events_t *es, size_t n, const ab_blame_opts_t *o, const ab_run_opts_t *ro, ab_run_t *run,
                        ab_blame_t *bl, ab_diag_t *diag) {
  ab_events_t prefix = *es;
  prefix.n = n;
  bl->probes++;
  AB_TRY(ab_bisect_probe(&prefix, &o->b, o->cap, ro, run, NULL, NULL, diag));
  if (run->status != AB_RUN_OK && run->status != AB_RUN_OOM)
    return ab_diag_set(diag, AB_ERR_INVALID, "%s", run->message[0] ? run->message : "the replay failed");
  return AB_OK;
}

ab_status ab_blame_check(const ab_events_t *es, const ab_blame_opts_t *o, ab_diag_t *diag) {
  if (o->at == AB_BLAME_AT_EVENT && o->at_event >= es->n)
    return ab_diag_set(diag, AB_ERR_INVALID, "--at %zu: the trace has %zu events (expected 0 to %zu)", o->at_event, es->n,
                       es->n ? es->n - 1 : 0);
  return AB_OK;
}

/* The moment of o->at, from the run of the whole trace. */
static ab_status find_moment(const ab_events_t *es, const ab_blame_opts_t *o, ab_run_t *run, ab_blame_t *bl,
                             ab_diag_t *diag) {
  AB_TRY(ab_blame_check(es, o, diag));
  switch (o->at) {
    case AB_BLAME_AT_EVENT:
      if (!bl->base.ok && o->at_event >= run->oom.event)
        return ab_diag_set(diag, AB_ERR_INVALID, "--at %zu: the replay ran out of memory at event %zu, before it",
                           o->at_event, run->oom.event);
      bl->moment = o->at_event + 1;
      return AB_OK;
    case AB_BLAME_AT_OOM:
      if (bl->base.ok)
        return ab_diag_set(diag, AB_ERR_INVALID, "--at oom: the replay ran to its end under this setting (a --cap makes it fail)");
      bl->moment = run->oom.event;
      return AB_OK;
    case AB_BLAME_AT_PEAK: break;
  }
  /* The first event after which reserved reaches its peak: the shortest prefix that does. */
  size_t lo = 0, hi = bl->base.ok ? es->n : run->oom.event;
  uint64_t peak = bl->base.peak_reserved;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    AB_TRY(replay(es, mid, o, NULL, run, bl, diag));
    if ((uint64_t)run->stats.reserved_bytes.peak >= peak) hi = mid;
    else lo = mid;
  }
  bl->moment = hi;
  return AB_OK;
}

static int by_blame(const void *pa, const void *pb) {
  const ab_blame_site_t *a = pa, *b = pb;
  if (a->unused_bytes != b->unused_bytes) return a->unused_bytes > b->unused_bytes ? -1 : 1;
  if (a->live_bytes != b->live_bytes) return a->live_bytes > b->live_bytes ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Sorts the sites and renumbers site_of to match. */
static ab_status rank(ab_blame_t *bl, uint32_t nids) {
  for (size_t i = 0; i < bl->nsites; i++) bl->site[i].found = (uint32_t)i;
  qsort(bl->site, bl->nsites, sizeof *bl->site, by_blame);
  uint32_t *to = malloc((bl->nsites ? bl->nsites : 1) * sizeof *to);
  if (to == NULL) return AB_ERR_INTERNAL;
  for (size_t i = 0; i < bl->nsites; i++) to[bl->site[i].found] = (uint32_t)i;
  for (uint32_t id = 0; id < nids; id++) bl->site_of[id] = to[bl->site_of[id]];
  free(to);
  return AB_OK;
}

ab_status ab_blame_figures(const ab_events_t *es, const ab_blame_opts_t *o, ab_blame_fig_t *fig, unsigned *probes,
                           ab_diag_t *diag) {
  memset(fig, 0, sizeof *fig);
  ab_run_t run;
  if (ab_run_prepare(&run, es) != AB_OK) return ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  ab_status st = ab_bisect_probe(es, &o->b, o->cap, NULL, &run, NULL, NULL, diag);
  (*probes)++;
  if (st == AB_OK && run.status != AB_RUN_OK && run.status != AB_RUN_OOM)
    st = ab_diag_set(diag, AB_ERR_INVALID, "%s", run.message[0] ? run.message : "the replay failed");
  if (st == AB_OK) {
    fig->done = true;
    fig->ok = run.status == AB_RUN_OK;
    fig->peak_reserved = (uint64_t)run.stats.reserved_bytes.peak;
  }
  if (st == AB_OK && !o->no_caps) {
    ab_bisect_opts_t b = o->b;
    ab_capmap_t map = {0};
    b.map = &map;
    b.map_probes = o->map_probes;
    ab_bisect_result_t res;
    st = ab_bisect_search(es, &b, &run, &res, diag);
    ab_capmap_free(&map);
    if (st == AB_OK) {
      *probes += res.probes;
      fig->cap_found = res.passed;
      fig->cap_safe = res.mapped && res.safe_cap;
      fig->cap = fig->cap_safe ? res.safe_cap : res.min_budget;
    }
  }
  ab_run_release(&run);
  return st;
}

ab_status ab_blame_run(const ab_events_t *es, const ab_blame_opts_t *o, ab_blame_t *out, ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  size_t *alloc_at = NULL, *free_at = NULL;
  ab_dptr_t *addr_of = calloc(es->nids ? es->nids : 1, sizeof *addr_of);
  ab_run_t run;
  bool prepared = false;
  ab_status st = addr_of == NULL ? AB_ERR_INTERNAL : lifetimes(es, &alloc_at, &free_at);
  if (st == AB_OK) st = name_sites(es, o, alloc_at, free_at, out);
  if (st == AB_OK) st = ab_run_prepare(&run, es);
  prepared = st == AB_OK;
  if (st == AB_ERR_INTERNAL) ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  /* The trace as it is, its cap unless asked not to: the figures the changes are held to. */
  if (st == AB_OK) st = ab_blame_figures(es, o, &out->base, &out->probes, diag);
  if (st == AB_OK) st = replay(es, es->n, o, NULL, &run, out, diag);
  if (st == AB_OK) st = find_moment(es, o, &run, out, diag);
  capture_t c = {es, out, addr_of, alloc_at, out->moment, {0}, {0}, UINT32_MAX, false, false};
  ab_map_init(&c.live);
  ab_map_init(&c.last);
  if (st == AB_OK) {
    ab_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.at_end = capture;
    ro.at_end_ctx = &c;
    ro.addr_of = addr_of;
    st = replay(es, out->moment, o, &ro, &run, out, diag);
    if (st == AB_OK && (c.failed || !c.captured))
      st = ab_diag_set(diag, c.failed ? AB_ERR_INTERNAL : AB_ERR_INVALID, "%s",
                       c.failed ? "out of host memory" : "the replay did not reach the moment");
  }
  ab_map_free(&c.live);
  ab_map_free(&c.last);
  if (st == AB_OK && rank(out, es->nids) != AB_OK) st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  /* The changes of the first sites, each a replay of its own trace. */
  for (size_t s = 0; st == AB_OK && s < o->top && s < out->nsites; s++)
    for (int c2 = 0; st == AB_OK && c2 < AB_BLAME_NCHANGES; c2++) {
      ab_events_t changed;
      bool differs = false;
      st = ab_blame_changed(es, out, s, (ab_blame_change_t)c2, &changed, &differs, diag);
      if (st != AB_OK) break; /* changed is released */
      out->site[s].change[c2].unchanged = !differs;
      if (differs) st = ab_blame_figures(&changed, o, &out->site[s].change[c2], &out->probes, diag);
      ab_events_free(&changed);
    }
  if (prepared) ab_run_release(&run);
  free(alloc_at);
  free(free_at);
  free(addr_of);
  if (st != AB_OK) ab_blame_free(out);
  return st;
}

/* ---- the changed traces ------------------------------------------------------------------------ */

/* Appends a copy of e; false when the host has no room (the stream's failed flag is set). */
static bool put(ab_events_t *out, const ab_event_t *e) {
  if (out->n == out->cap) {
    size_t cap = out->cap ? out->cap * 2 : 1024;
    ab_event_t *grown = realloc(out->ev, cap * sizeof *grown);
    if (grown == NULL) return !(out->failed = true);
    out->ev = grown;
    out->cap = cap;
  }
  out->ev[out->n++] = *e;
  return true;
}

/* A stream like es, with no events yet: its ids, steps, streams, pools and kernels, none of
 * its recorded segment decisions (the changed trace was never recorded). */
static ab_status start_like(const ab_events_t *es, ab_events_t *out) {
  ab_events_init(out);
  out->nids = es->nids;
  out->nsteps = es->nsteps;
  out->nstreams = es->nstreams;
  out->npools = es->npools;
  out->trace_ooms = es->trace_ooms;
  snprintf(out->source, sizeof out->source, "%s", es->source);
  snprintf(out->settings, sizeof out->settings, "%s", es->settings);
  snprintf(out->approximate, sizeof out->approximate, "%s", es->approximate);
  if (es->nkernels) {
    out->kernels = malloc(es->nkernels * sizeof *out->kernels);
    if (out->kernels == NULL) return AB_ERR_INTERNAL;
    memcpy(out->kernels, es->kernels, es->nkernels * sizeof *out->kernels);
    out->nkernels = out->capkernels = es->nkernels;
  }
  return AB_OK;
}

/* pool: the site's allocations routed to a new pool, as a trace's importer routes a recorded
 * one: made once, BEGIN (every stream) before a run of them, END and RELEASE after it. */
static void change_pool(const ab_events_t *es, const uint32_t *site_of, uint32_t site, ab_events_t *out, bool *changed) {
  uint32_t pool = es->npools + 1;
  bool made = false, in = false;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) {
      bool want = site_of[e->id] == site;
      if (in && !want) {
        ab_events_pool(out, AB_POOL_END, pool, 0, 0);
        ab_events_pool(out, AB_POOL_RELEASE, pool, 0, 0);
        in = false;
      }
      if (want && !in) {
        if (!made) ab_events_pool(out, AB_POOL_CREATE, pool, 0, 0);
        ab_events_pool(out, AB_POOL_BEGIN, pool, 0, AB_POOL_ALL_STREAMS);
        made = in = *changed = true;
      }
    }
    put(out, e);
  }
  if (in) {
    ab_events_pool(out, AB_POOL_END, pool, 0, 0);
    ab_events_pool(out, AB_POOL_RELEASE, pool, 0, 0);
  }
  if (made) out->npools = pool;
}

/* early: each block of the site freed before the site's next allocation on its stream, where
 * the trace frees it after that allocation and before the one after it (at most two of the
 * site's blocks live at once: `x = f(...)` while the old x is still held), and no kernel uses
 * it once the next is made. A site whose blocks outlive the next allocation keeps them (a
 * cache): the trace shows no free to move. */
static ab_status change_early(const ab_events_t *es, const uint32_t *site_of, uint32_t site, ab_events_t *out,
                              bool *changed) {
  size_t n = es->nids ? es->nids : 1;
  size_t *last_use = malloc(n * sizeof *last_use); /* its allocation, or the last kernel on it */
  bool *moved = calloc(n, sizeof *moved), *live = calloc(n, sizeof *live);
  uint32_t prev[AB_MAX_STREAMS], pending[AB_MAX_STREAMS]; /* the site's last block; the one that may move */
  size_t pending_at[AB_MAX_STREAMS];                      /* the allocation it would move before */
  ab_status st = last_use && moved && live ? AB_OK : AB_ERR_INTERNAL;
  for (size_t i = 0; st == AB_OK && i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) last_use[e->id] = i;
    if (e->kind != AB_EV_KERNEL) continue;
    const ab_kernel_t *k = &es->kernels[e->id];
    for (unsigned b = 0; b < k->nbuf; b++) last_use[k->buf[b]] = i;
  }
  for (unsigned k = 0; k < AB_MAX_STREAMS; k++) prev[k] = pending[k] = UINT32_MAX;
  for (size_t i = 0; st == AB_OK && i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_FREE) { /* a free requested counts as the free */
      unsigned s = e->stream;
      if (live[e->id] && s < AB_MAX_STREAMS && pending[s] == e->id && last_use[e->id] < pending_at[s]) {
        moved[e->id] = *changed = true;
        pending[s] = UINT32_MAX;
      }
      live[e->id] = false;
    }
    if (e->kind != AB_EV_ALLOC || e->aux == AB_TAG_CAUGHT) continue;
    live[e->id] = true;
    if (site_of[e->id] != site || e->stream >= AB_MAX_STREAMS) continue;
    /* The block pending since the site's last allocation outlived this one: a kept block. */
    pending[e->stream] = prev[e->stream] != UINT32_MAX && live[prev[e->stream]] ? prev[e->stream] : UINT32_MAX;
    pending_at[e->stream] = i;
    prev[e->stream] = e->id;
  }
  /* The stream again: a moved block's free goes before the site's next allocation, as one
   * free at once; its own frees are left out. */
  for (unsigned k = 0; k < AB_MAX_STREAMS; k++) prev[k] = UINT32_MAX;
  for (size_t i = 0; st == AB_OK && i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_FREE && moved[e->id]) continue;
    bool ours = e->kind == AB_EV_ALLOC && e->aux != AB_TAG_CAUGHT && site_of[e->id] == site && e->stream < AB_MAX_STREAMS;
    if (ours && prev[e->stream] != UINT32_MAX && moved[prev[e->stream]])
      put(out, &(ab_event_t){.kind = AB_EV_FREE, .aux = AB_FREE_NOW, .id = prev[e->stream]});
    if (ours) prev[e->stream] = e->id;
    put(out, e);
  }
  free(last_use);
  free(moved);
  free(live);
  return st;
}

/* round: the site's allocations all of its largest size. */
static void change_round(const ab_events_t *es, const uint32_t *site_of, uint32_t site, uint64_t size, ab_events_t *out,
                         bool *changed) {
  for (size_t i = 0; i < es->n; i++) {
    ab_event_t e = es->ev[i];
    if (e.kind == AB_EV_ALLOC && site_of[e.id] == site && e.aux != AB_TAG_CAUGHT && e.bytes != size) {
      e.bytes = size;
      *changed = true;
    }
    put(out, &e);
  }
}

ab_status ab_blame_changed(const ab_events_t *es, const ab_blame_t *bl, size_t site, ab_blame_change_t c,
                           ab_events_t *out, bool *changed, ab_diag_t *diag) {
  *changed = false;
  if (site >= bl->nsites) return ab_diag_set(diag, AB_ERR_INVALID, "site %zu: there are %zu", site + 1, bl->nsites);
  ab_status st = start_like(es, out);
  if (st == AB_OK) switch (c) {
      case AB_BLAME_POOL: change_pool(es, bl->site_of, (uint32_t)site, out, changed); break;
      case AB_BLAME_EARLY: st = change_early(es, bl->site_of, (uint32_t)site, out, changed); break;
      case AB_BLAME_ROUND: change_round(es, bl->site_of, (uint32_t)site, bl->site[site].max_bytes, out, changed); break;
      case AB_BLAME_NCHANGES: st = AB_ERR_INVALID; break;
    }
  if (st == AB_OK && out->failed) st = AB_ERR_INTERNAL;
  if (st == AB_OK) st = ab_events_finish(out, diag);
  else ab_diag_set(diag, st, "%s", st == AB_ERR_INTERNAL ? "out of host memory" : "no such change");
  if (st != AB_OK) ab_events_free(out);
  return st;
}
