#include "harness/run/bisect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "kernels/base/units.h"
#include "harness/run/oommap.h"
#include "harness/run/pipeline.h"
#include "harness/run/supervise.h"
#include "strategies/registry.h"
#include "harness/run/stop.h"

uint64_t ab_bisect_peak_requested(const ab_events_t *es) {
  uint64_t live = 0, peak = 0;
  for (size_t i = 0; i < es->n; i++) {
    const ab_event_t *e = &es->ev[i];
    if (e->kind == AB_EV_ALLOC) {
      live += e->bytes;
      if (live > peak) peak = live;
    } else if (e->kind == AB_EV_FREE && e->aux != AB_FREE_REQUEST) {
      live -= e->bytes;
    }
  }
  return peak;
}

/* Note [Budget or cap]: a budget is the device's hard limit, a card of that size. PyTorch's
 * set_per_process_memory_fraction is a rule of its allocator instead: it refuses a segment
 * when reserved + its size would pass the cap, but an expandable segment then maps whole
 * pages, so reserved can pass the cap by less than a page (the fixture's expandable run at
 * its passing cap went 3.8 MB over). With opts.cap a probe gives the number to the strategy
 * as its memory cap (pipeline.h), on a device with no budget, so that a search reproduces
 * PyTorch's own bisection of the cap; strategies without the key are refused. */

/* The run of one probe: budget is the device's, or with opts.cap the strategy's cap. */
static ab_pipeline_t pipeline_of(const ab_bisect_opts_t *o, uint64_t budget) {
  bool cap = o->cap && budget > 0;
  ab_pipeline_t p = {.device = o->device, .dev = o->dev, .strategy = o->strategy, .conf = o->conf};
  /* A run says under which placement variants it replays alike, for the band and the walks
   * of the safe cap (Note [Walks the map answers]); the card follows them only under its own
   * rules, and a strategy blind to addresses needs none. */
  p.dev.follow_variants = !ab_strategy_address_blind(o->strategy);
  p.dev.budget_bytes = cap ? 0 : budget;
  p.memory_cap = cap ? budget : 0;
  return p;
}

/* What a probe in a process of its own carries besides ab_supervise_job_t, each way; the
 * reply follows the run, and the map of its OOM follows the reply when it has one. */
typedef struct probe_args_s {
  uint64_t budget;
  bool check, cap;
  bool want_map; /* the parent's on_oom is ab_oommap_capture */
} probe_args_t;
typedef struct probe_reply_s {
  uint64_t held_peak;
  char device[96];
  bool has_map;
} probe_reply_t;

static void put_map(ab_supervise_writer_t *w, const ab_oommap_t *m) {
  ab_oommap_t h = *m;
  h.segs = NULL, h.blocks = NULL;
  memset(&h.owner, 0, sizeof h.owner);
  ab_supervise_put_array(w, &h, sizeof h);
  ab_supervise_put_array(w, m->segs, m->nsegs * sizeof *m->segs);
  ab_supervise_put_array(w, m->blocks, m->nblocks * sizeof *m->blocks);
}

static bool get_map(ab_supervise_reader_t *r, ab_oommap_t *m) {
  ab_oommap_t h;
  const void *head = ab_supervise_get_array(r, sizeof h);
  if (head == NULL) return false;
  memcpy(&h, head, sizeof h);
  const void *segs = ab_supervise_get_array(r, h.nsegs * sizeof *m->segs);
  const void *blocks = ab_supervise_get_array(r, h.nblocks * sizeof *m->blocks);
  if (r->bad) return false;
  if (h.nsegs > m->capsegs) {
    void *p = realloc(m->segs, h.nsegs * sizeof *m->segs);
    if (p == NULL) return false;
    m->segs = p, m->capsegs = h.nsegs;
  }
  if (h.nblocks > m->capblocks) {
    void *p = realloc(m->blocks, h.nblocks * sizeof *m->blocks);
    if (p == NULL) return false;
    m->blocks = p, m->capblocks = h.nblocks;
  }
  if (h.nsegs) memcpy(m->segs, segs, h.nsegs * sizeof *m->segs);
  if (h.nblocks) memcpy(m->blocks, blocks, h.nblocks * sizeof *m->blocks);
  m->captured = h.captured, m->walk_status = h.walk_status;
  memcpy(m->walk_message, h.walk_message, sizeof m->walk_message);
  m->nsegs = h.nsegs, m->nblocks = h.nblocks;
  m->largest_free = h.largest_free, m->free_bytes = h.free_bytes, m->unmatched = h.unmatched;
  m->own_message = h.own_message;
  return true;
}

/* ab_bisect_probe (with its default engine options) in a child (supervise.h). */
static ab_status probe_apart(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, ab_run_t *run,
                             uint64_t *held_peak, char device[96], ab_diag_t *diag) {
  /* The segment map crosses back; another hook could not run in this process. */
  probe_args_t a = {budget, o->check, o->cap, o->on_oom == ab_oommap_capture};
  ab_supervise_job_t j = {.unit = AB_UNIT_PROBE, .strategy = o->strategy, .conf = o->conf, .device = o->device,
                          .dev = o->dev, .es = es, .args = &a, .args_bytes = sizeof a};
  ab_supervise_reply_t r;
  bool stopped;
  ab_status st = ab_supervise_run(&j, &r, &stopped, diag);
  if (st != AB_OK) {
    ab_supervise_failed_run(run, stopped ? AB_RUN_INTERRUPTED : AB_RUN_ERROR, stopped ? AB_OK : st, diag->msg);
    if (!stopped) return st;
    diag->msg[0] = '\0';
    return AB_OK;
  }
  ab_supervise_get_run(&r.in, run);
  probe_reply_t p;
  ab_supervise_get(&r.in, &p, sizeof p);
  if (held_peak) *held_peak = p.held_peak;
  if (device) snprintf(device, 96, "%s", p.device);
  if (p.has_map && a.want_map && !get_map(&r.in, o->on_oom_ctx))
    st = ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
  if (st == AB_OK && r.status != AB_OK) st = ab_diag_set(diag, r.status, "%s", r.msg);
  ab_supervise_release(&r);
  return st;
}

bool ab_bisect_probe_child(ab_supervise_child_t *c) {
  const probe_args_t *a = c->job.args;
  if (c->job.args_bytes != sizeof *a || c->job.es == NULL) return false;
  ab_bisect_opts_t b;
  memset(&b, 0, sizeof b);
  b.strategy = c->job.strategy, b.conf = c->job.conf, b.device = c->job.device, b.dev = c->job.dev;
  b.check = a->check, b.cap = a->cap, b.stop = &ab_run_stop;
  ab_oommap_t map;
  ab_oommap_init(&map);
  if (a->want_map) b.on_oom = ab_oommap_capture, b.on_oom_ctx = &map;
  ab_run_t run;
  if (ab_run_prepare(&run, c->job.es) != AB_OK) return false;
  ab_diag_t diag = {""};
  probe_reply_t p;
  memset(&p, 0, sizeof p);
  ab_status st = ab_bisect_probe(c->job.es, &b, a->budget, NULL, &run, &p.held_peak, p.device, &diag);
  p.has_map = a->want_map && map.captured;
  ab_supervise_reply(c, st, diag.msg);
  ab_supervise_put_run(&c->out, &run);
  ab_supervise_put(&c->out, &p, sizeof p);
  if (p.has_map) put_map(&c->out, &map);
  bool whole = ab_supervise_reply_end(c);
  ab_oommap_free(&map);
  ab_run_release(&run);
  return whole;
}

ab_status ab_bisect_probe(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, const ab_run_opts_t *ro,
                          ab_run_t *run, uint64_t *held_peak, char device[96], ab_diag_t *diag) {
  /* A library's probe goes to a process of its own (supervise.h). */
  if (ro == NULL && ab_supervise_apart(o->strategy)) return probe_apart(es, o, budget, run, held_peak, device, diag);
  ab_run_opts_t plain;
  if (ro == NULL) {
    memset(&plain, 0, sizeof plain);
    plain.check = o->check;
    plain.stop = o->stop;
    plain.on_oom = o->on_oom;
    plain.on_oom_ctx = o->on_oom_ctx;
    ro = &plain;
  }
  ab_pipeline_t p = pipeline_of(o, budget);
  /* Modelled device time is read only by the timing; without it the model is dead weight. */
  if (!ro->time_calls) p.dev.cost_model = false;
  ab_world_t w;
  AB_TRY(ab_pipeline_open(&p, &w, diag));
  ab_status rst = ab_engine_replay(es, w.s, ro, run);
  ab_status cst = AB_OK;
  if (run->last) ab_pipeline_leave(&w);
  else cst = ab_pipeline_close(&w, run, NULL);
  if (held_peak) *held_peak = w.held_peak;
  if (device) snprintf(device, 96, "%s", w.device);
  if (rst != AB_OK) return ab_diag_set(diag, rst, "%s", run->message);
  if (cst != AB_OK) return ab_diag_set(diag, cst, "%s", run->message);
  return AB_OK;
}

ab_status ab_bisect_check(const ab_bisect_opts_t *o, ab_world_t *closed, ab_diag_t *diag) {
  ab_pipeline_t p = pipeline_of(o, 0);
  AB_TRY(ab_pipeline_check(&p, closed, diag));
  if (!o->cap) return AB_OK;
  p.memory_cap = closed->total_bytes / 2;
  if (ab_pipeline_check(&p, NULL, diag) != AB_OK)
    return ab_diag_set(diag, AB_ERR_INVALID,
                       "--cap: %s has no memory cap (PyTorch's per_process_memory_fraction); search its budget instead",
                       o->strategy);
  return AB_OK;
}

typedef struct search_s {
  const ab_events_t *es;
  const ab_bisect_opts_t *o;
  ab_run_t *run;
  ab_bisect_result_t *out;
  uint64_t held_peak; /* of the last probe */
  uint64_t last_fail; /* the budget of the last probe that failed */
} search_t;

/* Probes one budget; *passed says whether the whole stream ran. A failure is recorded as
 * the result's max_fail (the search only ever fails higher than before). */
static ab_status probe(search_t *x, uint64_t budget, bool *passed, ab_diag_t *diag) {
  bool resumed = false; /* from a place of the prefix (Note [A prefix shared], prefix.h) */
  if (x->o->prefix && x->o->on_oom == NULL)
    AB_TRY(ab_prefix_probe(x->o->prefix, budget, x->run, &x->held_peak, x->out->device, &resumed, diag));
  if (!resumed) AB_TRY(ab_bisect_probe(x->es, x->o, budget, NULL, x->run, &x->held_peak, x->out->device, diag));
  x->out->interrupted = x->run->status == AB_RUN_INTERRUPTED;
  *passed = false;
  if (x->out->interrupted) return AB_OK;
  x->out->probes++;
  if (x->o->on_probe) x->o->on_probe(x->o->on_probe_ctx, budget, x->run);
  *passed = x->run->status == AB_RUN_OK;
  if (!*passed) {
    x->last_fail = budget;
    x->out->failed = true;
    x->out->max_fail = budget ? budget : x->run->oom.limit;
    x->out->oom = x->run->oom;
    x->out->oom_stats = x->run->stats;
  }
  return AB_OK;
}

void ab_capmap_free(ab_capmap_t *m) {
  free(m->classes);
  memset(m, 0, sizeof *m);
}

size_t ab_capmap_fail_ranges(const ab_capmap_t *m, uint64_t above, uint64_t (*ranges)[2], size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < m->n; i++) {
    const ab_cap_class_t *c = &m->classes[i];
    if (c->ok || c->hi <= above) continue;
    bool joins = i > 0 && !m->classes[i - 1].ok && m->classes[i - 1].hi > above;
    if (!joins) n++;
    if (n > 0 && n <= max) {
      if (!joins) ranges[n - 1][0] = c->lo > above ? c->lo : above + 1;
      ranges[n - 1][1] = c->hi;
    }
  }
  return n;
}

static ab_status capmap_add(ab_capmap_t *m, ab_cap_class_t c) {
  if (m->n == m->room) {
    size_t room = m->room ? 2 * m->room : 64;
    ab_cap_class_t *grown = realloc(m->classes, room * sizeof *grown);
    if (grown == NULL) return AB_ERR_INTERNAL;
    m->classes = grown;
    m->room = room;
  }
  m->classes[m->n++] = c;
  return AB_OK;
}

static int by_lo(const void *pa, const void *pb) {
  const ab_cap_class_t *a = pa, *b = pb;
  return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Note [Cap map]: PyTorch's cap is consulted only at a few decisions, each of the form "cap
 * >= X" (Note [Cap window], strategy.h), so the caps fall into intervals that replay alike:
 * one replay at a cap gives its whole interval, [cap_lo, cap_hi], and the next interval
 * starts at cap_hi + 1. The walk starts at lo (the live peak: below it no cap completes,
 * except by the part of a page an expandable segment maps past the cap), goes down while
 * intervals complete, then up until an interval holds every cap above it or reaches the
 * card's total. The status is not monotonic in the cap: a cap changes which cached blocks
 * are released before a retry, and so the fragmentation after it (the recorded ResNet-50 run
 * under max_split_size_mb:128,max_non_split_rounding_mb:128 completes at 7.74 GiB and fails
 * again at 8.4 GiB). So a bisection finds a boundary, not the one a deployer needs, and the
 * map gives both: the smallest cap that completes, and safe_cap, from which every cap up
 * completes. A setting can take thousands of intervals (max_split_size_mb releases oversize
 * blocks at each refusal, and each cap then fragments its own way), each a replay; past
 * opts.map_probes the walk stops and the search says so (map_cut). */

/* Probes one cap of the walk and adds its interval; *c is that interval. */
static ab_status map_probe(search_t *x, ab_capmap_t *m, uint64_t cap, ab_cap_class_t *c, ab_diag_t *diag) {
  bool passed;
  AB_TRY(probe(x, cap, &passed, diag));
  if (x->out->interrupted || !x->run->cap_window) return AB_OK;
  *c = (ab_cap_class_t){x->run->cap_lo, x->run->cap_hi, passed, passed ? 0 : x->run->oom.event, x->run->variants_alike};
  return capmap_add(m, *c) == AB_OK ? AB_OK : ab_diag_set(diag, AB_ERR_INTERNAL, "out of host memory");
}

/* Whether a walk that has mapped [from, to] in m->n intervals would need more than twice the
 * budget to reach end (the uncapped peak reserved, where intervals end), at the width of those
 * so far: a map that will be cut is cut early, before its replays are spent. The intervals
 * near the live peak are the narrowest, so the estimate runs high: twice the budget lets the
 * maps that end near it be walked. */
static bool over_budget(const ab_capmap_t *m, uint64_t from, uint64_t to, uint64_t end, size_t budget) {
  if (budget == SIZE_MAX || m->n < 8 || to >= end) return false;
  double width = (double)(to - from + 1) / (double)m->n;
  return (double)m->n + (double)(end - to) / width > 2.0 * (double)budget;
}

/* Sets the result's largest failing cap; its run is the one the result reports (its OOM, and
 * the segment map the caller's on_oom keeps), made again when the walk's last failure was at
 * another cap of its interval. */
static ab_status fail_again(search_t *x, uint64_t max_fail, ab_diag_t *diag) {
  bool passed;
  if (x->last_fail != max_fail) {
    AB_TRY(probe(x, max_fail, &passed, diag));
    if (passed && !x->out->interrupted)
      return ab_diag_set(diag, AB_ERR_INTERNAL, "cap map: the cap %" PRIu64 " completed, where its interval failed", max_fail);
  }
  x->out->max_fail = max_fail;
  return AB_OK;
}

/* Note [A safe cap across the band]: the safe cap is a cap to deploy, so it must hold
 * wherever the driver places the segments, not only where the simulated card's rules put
 * them: under each placement variant (band.h), a walk of that variant's cap intervals goes
 * up from the safe cap until an interval that completes holds every cap above it; an interval
 * that fails moves the safe cap past it. Where the status is monotonic above the safe cap,
 * that is one replay per variant. Where it is not (max_split_size_mb releases oversize blocks
 * at each refusal, so each cap fragments its own way), a variant has hundreds of intervals
 * there, as the map had: on the recorded CNN run the six walks took four to six times the
 * map's replays (25 against 7 under expandable_segments:True, 233 against 54 under the
 * defaults, 2 173 against 374 under garbage_collection_threshold:0.6). So each variant's walk
 * takes at most two thirds of the map's replays and eight more (or opts.band_probes), and
 * walks cut short say up to which cap every variant was checked (band_checked). The variants'
 * walks are independent of each other, so a caller may run them apart (ab_bisect_band_walk,
 * one per thread) and merge them (ab_bisect_band_merge), as the search does in turn. */

/* Whether res's safe cap is one the variants' walks check: a strategy blind to addresses
 * replays alike under every placement. */
static bool band_walked(const ab_bisect_opts_t *o, const ab_bisect_result_t *res) {
  return res->mapped && res->passed && res->safe_cap != 0 && !ab_strategy_address_blind(o->strategy);
}

unsigned ab_bisect_band_budget(const ab_bisect_opts_t *o, const ab_bisect_result_t *res) {
  return o->band_probes ? o->band_probes : 2 * res->intervals / 3 + 8;
}

/* Whether o's strategy keeps PyTorch's memory cap: the caching family, which takes a budget
 * as its cap when it is created, so that a budget taken mid-run would not reach its
 * decisions (Note [Budget window], device.h). */
static bool keeps_cap(const ab_bisect_opts_t *o) {
  ab_bisect_opts_t capped = *o;
  capped.cap = true;
  ab_world_t world;
  ab_diag_t ignored = {""};
  return ab_bisect_check(&capped, &world, &ignored) == AB_OK;
}

ab_prefix_t *ab_bisect_prefix_open(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t floor) {
  ab_world_t world;
  ab_diag_t ignored = {""};
  if (o->on_oom || ab_supervise_apart(o->strategy)) return NULL;
  if (o->prefix_every == 0 && es->n < AB_PREFIX_MIN_EVENTS) return NULL;
  if (ab_bisect_check(o, &world, &ignored) != AB_OK || world.kind != AB_DEVICE_SIM) return NULL;
  if (!o->cap && keeps_cap(o)) return NULL;
  return ab_prefix_open(es->n, o->prefix_every, floor ? floor : ab_bisect_peak_requested(es), !o->cap, o->stop);
}

ab_status ab_bisect_probe_kept(const ab_events_t *es, const ab_bisect_opts_t *o, uint64_t budget, const ab_run_opts_t *ro,
                               ab_prefix_t *p, ab_run_t *run, uint64_t *held_peak, char device[96], ab_diag_t *diag) {
  ab_run_opts_t kept = *ro;
  ab_prefix_source(p, &kept);
  uint64_t held = 0;
  char name[96] = "";
  ab_status st = ab_bisect_probe(es, o, budget, &kept, run, &held, name, diag);
  if (ab_prefix_resumed(p)) ab_prefix_answer(p, st, run, held, name, diag);
  if (held_peak) *held_peak = held;
  if (device) snprintf(device, 96, "%s", name);
  return st;
}

/* Note [A walk's source]: a walk's probes are caps at and above the safe cap, near the
 * uncapped peak, which a run under one of them refuses late in the stream. Kept at places, the
 * walk's first probe (at the safe cap) allows the others only up to its own first refusal,
 * early where reserved bytes climb early: on a random snapshot of 15 M entries the walks'
 * probes went on from 2/9 of the stream, and the walks replayed about as many events as the
 * whole map. So the source the walk's probes go on from is the variant's run with no cap, which
 * allows each cap until reserved bytes would pass it; one replay more per walk, a fraction of
 * the stream less for each of its probes. A strategy whose uncapped run allows no cap
 * (garbage collection decides only under one) keeps its first probe instead. */

/* Whether o's strategy, made with no cap, keeps a window that allows some caps
 * (Note [Taking a cap mid-run], strategy.h). */
static bool uncapped_allows(const ab_bisect_opts_t *o) {
  ab_pipeline_t p = pipeline_of(o, 0);
  ab_world_t w;
  ab_diag_t ignored = {""};
  if (ab_pipeline_open(&p, &w, &ignored) != AB_OK) return false;
  bool allows = w.s->ops->take_cap && w.s->cap_hi > 0 && w.s->cap_lo <= w.s->cap_hi;
  ab_pipeline_close(&w, NULL, NULL);
  return allows;
}

/* One probe of a walk under o at cap: from a place of the prefix where one allows the cap,
 * else from the start, kept at the prefix's places when it is the walk's source. */
static ab_status walk_probe(const ab_events_t *es, const ab_bisect_opts_t *o, ab_prefix_t *prefix, bool source, uint64_t cap,
                            ab_run_t *run, char device[96], ab_diag_t *diag) {
  bool resumed = false;
  uint64_t held;
  if (!source) AB_TRY(ab_prefix_probe(prefix, cap, run, &held, device, &resumed, diag));
  if (resumed) return AB_OK;
  if (prefix == NULL || !source) return ab_bisect_probe(es, o, cap, NULL, run, NULL, device, diag);
  ab_run_opts_t plain;
  memset(&plain, 0, sizeof plain);
  plain.check = o->check;
  plain.stop = o->stop;
  return ab_bisect_probe_kept(es, o, cap, &plain, prefix, run, NULL, device, diag);
}

/* Note [Walks the map answers]: a cap's run whose every range a placement variant ordered as
 * the card did (Note [Variants followed], sim_follow.c) is, under that variant, the same run,
 * decision for decision: its interval of caps and its status are the variant's too. The map's
 * runs say which variants they are alike under, and the result keeps its intervals from the
 * safe cap up (above), so a variant's walk takes each interval from there where the variant
 * replays alike, and replays only the others. On random snapshots of 1.45 M and 15 M entries
 * nearly every run of the map was alike under all six variants, and the recommended
 * setting's walks at 15 M replayed nothing where they had replayed 84 runs. */

/* The interval of res's map above its safe cap that holds cap, or NULL. */
static const ab_cap_class_t *above_at(const ab_bisect_result_t *res, uint64_t cap) {
  for (unsigned i = 0; i < res->nabove; i++)
    if (res->above[i].lo <= cap && cap <= res->above[i].hi) return &res->above[i];
  return NULL;
}

/* Whether the map answers every variant's walk of res's safe cap: each interval from there to
 * the top completes, and every variant replays its run alike. */
static bool band_known(const ab_bisect_result_t *res) {
  const unsigned all = (1u << AB_PLACEMENT_VARIANTS) - 1;
  for (uint64_t at = res->safe_cap;;) {
    const ab_cap_class_t *c = above_at(res, at);
    if (c == NULL || !c->ok || (c->alike & all) != all) return false;
    if (c->hi >= res->top) return true;
    at = c->hi + 1;
  }
}

ab_status ab_bisect_band_walk(const ab_events_t *es, const ab_bisect_opts_t *o, const ab_bisect_result_t *res,
                              unsigned variant, ab_run_t *run, ab_band_walk_t *w, ab_diag_t *diag) {
  memset(w, 0, sizeof *w);
  w->checked = UINT64_MAX;
  if (!band_walked(o, res)) return AB_OK;
  ab_bisect_opts_t v = *o;
  v.on_oom = NULL; /* a variant's OOM is not the search's answer */
  v.on_probe = NULL;
  v.dev.placement = variant;
  v.prefix = NULL; /* the search's places are another placement's */
  unsigned budget = ab_bisect_band_budget(o, res);
  ab_prefix_t *prefix = NULL;
  bool opened = false, uncapped = false;
  ab_status st = AB_OK;
  for (uint64_t at = res->safe_cap;;) {
    if (at > res->top) {
      w->none = true; /* fails up to the card's total: no cap is safe */
      break;
    }
    const ab_cap_class_t *known = above_at(res, at); /* Note [Walks the map answers] */
    if (known && (known->alike & (1u << (variant - 1)))) {
      if (!known->ok) w->safe_cap = known->hi + 1;
      if (known->ok && known->hi >= res->top) break;
      at = known->hi + 1;
      continue;
    }
    if (w->probes == budget) {
      w->checked = at; /* walked below it */
      break;
    }
    if (!opened) { /* Note [A walk's source] */
      opened = true;
      prefix = ab_bisect_prefix_open(es, &v, res->safe_cap);
      uncapped = prefix && uncapped_allows(&v);
      char device[96];
      if (uncapped && (st = walk_probe(es, &v, prefix, true, 0, run, device, diag)) != AB_OK) break;
      if (uncapped && run->status == AB_RUN_INTERRUPTED) {
        w->interrupted = true;
        break;
      }
    }
    char device[96];
    if ((st = walk_probe(es, &v, prefix, !uncapped && w->probes == 0, at, run, device, diag)) != AB_OK) break;
    if (run->status == AB_RUN_INTERRUPTED) {
      w->interrupted = true;
      break;
    }
    if (strncmp(device, "sim:", 4) != 0 || !run->cap_window) break; /* the driver placed it */
    w->probes++;
    if (run->status != AB_RUN_OK) w->safe_cap = run->cap_hi + 1;
    if (run->status == AB_RUN_OK && run->cap_hi >= res->top) break;
    at = run->cap_hi + 1;
  }
  ab_prefix_close(prefix);
  return st;
}

void ab_bisect_band_merge(ab_bisect_result_t *res, const ab_band_walk_t *w, unsigned n) {
  /* A variant left unwalked (an interrupted search) checked nothing above the safe cap. */
  res->band_checked = n == AB_PLACEMENT_VARIANTS ? UINT64_MAX : res->safe_cap;
  for (unsigned k = 0; k < n; k++) {
    res->band_probes += w[k].probes;
    res->probes += w[k].probes;
    res->interrupted |= w[k].interrupted;
    if (w[k].checked < res->band_checked) res->band_checked = w[k].checked;
    if (w[k].safe_cap > res->safe_cap) res->safe_cap = w[k].safe_cap, res->band_raised = true;
  }
  for (unsigned k = 0; k < n; k++)
    if (w[k].none) res->safe_cap = 0;
}

/* The walk of Note [Cap map], from lo up to hi (0: the card's total); end is the uncapped
 * peak reserved. *mapped is false when the strategy keeps no cap window, or when the walk
 * would take more than opts.map_probes; the caller then bisects, unless the walk had passed
 * the smallest cap (out->passed), which it found exactly. */
static ab_status map_caps(search_t *x, ab_capmap_t *m, uint64_t lo, uint64_t hi, uint64_t end, uint64_t total,
                          bool *mapped, ab_diag_t *diag) {
  ab_bisect_result_t *out = x->out;
  m->n = 0;
  ab_cap_class_t first, c;
  AB_TRY(map_probe(x, m, lo, &first, diag));
  *mapped = x->run->cap_window;
  if (out->interrupted || !*mapped) return AB_OK;
  size_t budget = x->o->map_probes ? x->o->map_probes : SIZE_MAX;
  c = first;
  while (c.ok && c.lo > 1 && !out->interrupted && m->n < budget) AB_TRY(map_probe(x, m, c.lo - 1, &c, diag));
  bool down = !c.ok || c.lo <= 1;
  uint64_t low = c.lo, top = hi && hi < total ? hi : total;
  c = first;
  while (c.hi < top && !out->interrupted && m->n < budget && !over_budget(m, low, c.hi, end, budget))
    AB_TRY(map_probe(x, m, c.hi + 1, &c, diag));
  if (out->interrupted) return AB_OK;
  bool cut = !down || c.hi < top;
  qsort(m->classes, m->n, sizeof *m->classes, by_lo);
  const ab_cap_class_t *k = m->classes;
  size_t lowest_ok = m->n, highest_fail = m->n;
  for (size_t i = 0; i < m->n; i++) {
    if (k[i].ok && lowest_ok == m->n) lowest_ok = i;
    if (!k[i].ok) highest_fail = i;
  }
  if (cut) {
    /* More intervals than allowed. With every interval below a completing one walked, the
     * smallest cap is still exact, but larger caps were not all replayed: no safe cap.
     * Without, the caller bisects above the failures seen. */
    out->map_cut = true;
    *mapped = false;
    if (!down || lowest_ok == m->n) return AB_OK;
    out->passed = true;
    out->min_budget = k[lowest_ok].lo > 1 ? k[lowest_ok].lo : 1;
    out->below_lo = out->min_budget < lo;
    out->failed = lowest_ok > 0;
    if (!out->failed) return AB_OK;
    return fail_again(x, k[lowest_ok - 1].hi, diag);
  }
  /* The answers. Failing intervals above the smallest cap that completes are the ones a
   * bisection does not see. */
  out->mapped = true;
  out->passed = lowest_ok < m->n;
  out->failed = highest_fail < m->n;
  if (out->passed) {
    out->min_budget = k[lowest_ok].lo > 1 ? k[lowest_ok].lo : 1;
    out->below_lo = out->min_budget < lo;
    out->safe_cap = out->failed && highest_fail > lowest_ok ? k[highest_fail].hi + 1 : out->min_budget;
  }
  for (size_t i = lowest_ok + 1; i < m->n; i++) out->fail_ranges += !k[i].ok && k[i - 1].ok;
  if (out->failed) AB_TRY(fail_again(x, k[highest_fail].hi, diag));
  out->intervals = (unsigned)m->n;
  out->top = top;
  for (size_t i = 0; i < m->n && out->nabove < AB_BISECT_ABOVE; i++)
    if (out->passed && k[i].hi >= out->safe_cap) out->above[out->nabove++] = k[i];
  if (x->o->defer_band) { /* the caller walks the variants (ab_bisect_band_walk), unless the map answers them */
    if (band_walked(x->o, out)) out->band_checked = band_known(out) ? UINT64_MAX : 0;
    return AB_OK;
  }
  ab_band_walk_t w[AB_PLACEMENT_VARIANTS];
  unsigned walked = 0;
  while (walked < AB_PLACEMENT_VARIANTS) {
    AB_TRY(ab_bisect_band_walk(x->es, x->o, out, walked + 1, x->run, &w[walked], diag));
    if (w[walked++].interrupted) break;
  }
  ab_bisect_band_merge(out, w, walked);
  return AB_OK;
}

/* Note [Above a cut map]: a map cut short (Note [Cap map]) has walked up from the live peak
 * through failing intervals; the bisection that takes over needs a cap that completes, and the
 * uncapped peak is one, but under max_split_size_mb that peak is the card's total (cached
 * oversize blocks are released only when the card refuses a segment), and a bisection down from
 * there replays the whole stream at each halving, every cap of them completing. So the search
 * first goes up from the highest failure by steps that double from the tolerance: the caps just
 * above the failures fail early in the stream, and the first that completes bounds the
 * bisection near them. On a random snapshot of 15 M entries max_split_size_mb:20 took 16
 * probes after its map where it had taken 19, and its probes replayed 84 M events where they
 * had replayed 177 M; the smallest cap it found was 0.5 MB lower. */

ab_status ab_bisect_search(const ab_events_t *es, const ab_bisect_opts_t *o, ab_run_t *run, ab_bisect_result_t *out,
                           ab_diag_t *diag) {
  memset(out, 0, sizeof *out);
  out->band_checked = UINT64_MAX;
  double t0 = ab_clock_s();
  char a[32], b[32];
  if (o->lo && o->hi && o->lo > o->hi)
    return ab_diag_set(diag, AB_ERR_INVALID, "--lo %s is above --hi %s", ab_format_bytes(o->lo, a, sizeof a),
                       ab_format_bytes(o->hi, b, sizeof b));
  ab_world_t device;
  AB_TRY(ab_bisect_check(o, &device, diag));
  uint64_t total = device.total_bytes;
  if (o->hi > total || o->lo > total)
    return ab_diag_set(diag, AB_ERR_INVALID, "--%s %s is more than the device's total of %s", o->hi > total ? "hi" : "lo",
                       ab_format_bytes(o->hi > total ? o->hi : o->lo, a, sizeof a), ab_format_bytes(total, b, sizeof b));
  search_t x = {es, o, run, out, 0, 0};
  out->peak_requested = ab_bisect_peak_requested(es);
  out->upper_bound = es->trace_ooms > 0;
  out->cap = o->cap;
  out->tolerance = o->tolerance ? o->tolerance : AB_BISECT_DEFAULT_TOLERANCE_BYTES;
  /* Nothing can run with less than its live allocations asked for. */
  uint64_t lo = o->lo ? o->lo : (out->peak_requested ? out->peak_requested : 1);
  uint64_t hi = o->hi;
  bool passed;
  if (hi == 0) {
    /* An unbudgeted run never held more than its peak, so that peak is the first budget
     * expected to pass. It is probed all the same, since a strategy may consult its budget:
     * the caching family takes it as PyTorch's cap, checked against whole segment sizes,
     * which an expandable segment does not map in full; and a garbage-collection threshold
     * is a fraction of it. */
    if (o->unbudgeted_peak) { /* made by the caller, and completed */
      x.held_peak = o->unbudgeted_peak;
    } else {
      AB_TRY(probe(&x, 0, &passed, diag));
      if (out->interrupted) goto done;
      if (!passed) goto done; /* it does not fit on the device at all */
    }
    hi = x.held_peak > lo ? x.held_peak : lo;
  } else if (o->lo == 0 && lo > hi) {
    lo = hi;
  }
  out->lo = lo;
  out->hi = hi;
  if (o->cap && !o->no_map) {
    ab_capmap_t own = {0};
    bool mapped = false;
    ab_status st = map_caps(&x, o->map ? o->map : &own, lo, o->hi, hi, total, &mapped, diag);
    ab_capmap_free(&own);
    AB_TRY(st);
    if (mapped || out->passed || out->interrupted) goto done;
  }
  passed = false;
  if (out->map_cut && out->failed) /* Note [Above a cut map] */
    for (uint64_t step = out->tolerance, from = out->max_fail; !passed && hi > from && hi - from > step; step *= 2) {
      AB_TRY(probe(&x, from + step, &passed, diag));
      if (out->interrupted) goto done;
      if (passed) hi = from + step;
    }
  if (!passed) AB_TRY(probe(&x, hi, &passed, diag));
  if (out->interrupted) goto done;
  /* A default hi that fails is a floor: gallop up, the step doubling, to the device's total
   * (where the caching family has no cap). A hi the user gave is the user's range. */
  for (uint64_t step = hi - lo > out->tolerance ? hi - lo : out->tolerance; !passed && o->hi == 0 && hi < total;
       step *= 2) {
    hi = total - hi > step ? hi + step : total;
    out->hi = hi;
    AB_TRY(probe(&x, hi, &passed, diag));
    if (out->interrupted) goto done;
  }
  if (!passed) goto done;
  uint64_t pass = hi, fail = out->failed ? out->max_fail : lo - 1;
  while (pass - fail > out->tolerance) {
    uint64_t mid = fail + (pass - fail) / 2;
    AB_TRY(probe(&x, mid, &passed, diag));
    if (out->interrupted) goto done;
    if (passed)
      pass = mid;
    else
      fail = mid;
  }
  /* Every result carries a failing run, so that its OOM can be shown. */
  if (!out->failed && lo > 1) {
    AB_TRY(probe(&x, lo - 1, &passed, diag));
    if (out->interrupted) goto done;
    if (passed) {
      pass = lo - 1;
      out->below_lo = true;
    }
  }
  out->passed = true;
  out->min_budget = pass;
done:
  out->wall_s = ab_clock_s() - t0;
  return AB_OK;
}
