/* ranks_test.c: runs of several ranks (harness/ranks/ranks.h), their lockstep (group.h), the
 * launcher's environment (launch.h), the ranks of a launch over a link (link.h, here one in
 * memory; tests/launch_test.sh runs them under mpirun and torchrun's store), and NCCL
 * (kernels.h, Note [Collectives]).
 *
 * With --device=sim (the cpu label): the ranks on simulated cards: rows, the combined row,
 * determinism, an OOM on one rank reported without a hang, bad arguments; the thread group
 * and the linked group on their own; the environment; NCCL's loader where NCCL is installed.
 * With --device=cuda (the gpu label; skipped without a GPU): NCCL's collectives on every GPU
 * against host references, and whole runs with --ranks 1 and --ranks <every GPU>. */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "kernels/device/device_open.h"
#include "kernels/kernels.h"
#include "harness/ranks/group.h"
#include "harness/ranks/ranks.h"
#include "harness/ranks/launch.h"
#include "harness/ranks/link.h"
#include "harness/run/results.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"

#include "tests/check.h"

/* A small ZeRO-3 transformer: 2 steps, collectives of sizes N does not always divide. */
#define SMALL "zero:steps=2,layers=2,d_model=256,heads=4,vocab=1024,batch=2,seq=128"
/* A hang is a failure, not a stuck test run. */
#define HANG_GUARD_S 120

static bool on_cuda(void) { return strncmp(ab_test_device, "cuda", 4) == 0; }

/* Waits long enough never to end a healthy test, short enough to end a hung one first. */
static ab_waits_t test_waits(void) {
  ab_waits_t w = {.meet_s = 60, .collective_s = 60, .results_s = 60};
  return w;
}

static ab_ranks_opts_t ranks_of(unsigned n) {
  ab_ranks_opts_t r;
  memset(&r, 0, sizeof r);
  r.n = n;
  r.waits = test_waits();
  return r;
}

static ab_run_spec_t opts(const char *workload, const char *strategy) {
  ab_run_spec_t o;
  ab_run_spec_defaults(&o, "allocbench test");
  o.workload = workload;
  o.strategy = strategy;
  o.device = ab_test_device;
  o.timeline = false;
  o.quiet = true;
  return o;
}

static int64_t cell(const ab_table_t *t, size_t row, const char *col) {
  const char *v = ab_table_get(t, row, col);
  return v ? strtoll(v, NULL, 10) : -1;
}

static bool ends_with(const char *s, const char *end) {
  size_t a = strlen(s), b = strlen(end);
  return a >= b && strcmp(s + a - b, end) == 0;
}

/* One run of n ranks; the results go to res (n of them). */
static ab_status run_ranks(const ab_run_spec_t *o, unsigned n, ab_table_t *t, ab_rank_result_t *res, ab_diag_t *diag) {
  ab_ranks_opts_t r = ranks_of(n);
  unsigned got = 0;
  ab_table_init(t, ab_summary_cols, ab_summary_ncols);
  alarm(HANG_GUARD_S);
  ab_status st = ab_ranks_run(o, &r, t, res, &got, diag);
  alarm(0);
  if (st == AB_OK) CHECK_EQ(got, n);
  return st;
}

/* ---- ranks on simulated cards ----------------------------------------------------------------- */

static void rows_and_combined(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 3 };
  ab_run_spec_t o = opts(SMALL, "pooled");
  ab_table_t t;
  ab_rank_result_t res[N];
  ab_diag_t diag = {""};
  REQUIRE_MSG(run_ranks(&o, N, &t, res, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(t.nrows == N + 1);
  int64_t sum[4] = {0};
  const char *summed[] = {"peak_allocated_bytes", "peak_reserved_bytes", "num_device_alloc", "events"};
  for (unsigned r = 0; r < N; r++) {
    char end[32];
    snprintf(end, sizeof end, ",world=%d,rank=%u", N, r);
    CHECK_MSG(ends_with(ab_table_get(&t, r, "workload"), end), "row %u: %s", r, ab_table_get(&t, r, "workload"));
    CHECK_MSG(strcmp(ab_table_get(&t, r, "status"), "ok") == 0, "rank %u: %s", r, ab_table_get(&t, r, "status"));
    CHECK_STR_CONTAINS(ab_table_get(&t, r, "device"), "sim:");
    CHECK_EQ(res[r].run.status, AB_RUN_OK);
    CHECK(res[r].run.kernels_skipped > 0); /* the simulated card runs none, collectives included */
    for (int c = 0; c < 4; c++) sum[c] += cell(&t, r, summed[c]);
  }
  CHECK_MSG(ends_with(ab_table_get(&t, N, "workload"), ",world=3,rank=all"), "%s", ab_table_get(&t, N, "workload"));
  CHECK(strcmp(ab_table_get(&t, N, "status"), "ok") == 0);
  CHECK(strcmp(ab_table_get(&t, N, "device"), "3 x sim:h200") == 0);
  for (int c = 0; c < 4; c++) CHECK_MSG(cell(&t, N, summed[c]) == sum[c], "combined %s", summed[c]);
  CHECK(sum[0] > 0);
  CHECK_EQ(cell(&t, N, "nccl_bytes"), 0);
  ab_table_free(&t);
}

/* The same run twice gives the same figures; each rank's figures are those of its stream run
 * alone, as one rank (the plumbing changes nothing a rank allocates). */
static void deterministic_and_as_alone(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 2 };
  ab_run_spec_t o = opts(SMALL, "raw");
  ab_table_t a, b;
  ab_rank_result_t ra[N], rb[N];
  ab_diag_t diag = {""};
  REQUIRE_MSG(run_ranks(&o, N, &a, ra, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE_MSG(run_ranks(&o, N, &b, rb, &diag) == AB_OK, "%s", diag.msg);
  const char *cols[] = {"peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "num_device_alloc",
                        "num_device_free", "events"};
  for (size_t r = 0; r < a.nrows && r < b.nrows; r++)
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
      CHECK_MSG(cell(&a, r, cols[c]) == cell(&b, r, cols[c]), "row %zu %s", r, cols[c]);
  for (unsigned r = 0; r < N; r++) {
    ab_events_t es;
    ab_run_t run;
    ab_table_t one;
    ab_table_init(&one, ab_summary_cols, ab_summary_ncols);
    REQUIRE_MSG(ab_workload_build(ra[r].workload, o.seed, &es, &diag) == AB_OK, "%s", diag.msg);
    REQUIRE(ab_run_prepare(&run, &es) == AB_OK);
    CHECK(ab_run_one(&o, &es, "raw", &run, &one, NULL, &diag) == AB_OK);
    CHECK_EQ(run.stats.allocated_bytes.peak, ra[r].run.stats.allocated_bytes.peak);
    CHECK_EQ(run.stats.num_device_alloc, ra[r].run.stats.num_device_alloc);
    CHECK_EQ(es.n, ra[r].events);
    ab_run_release(&run);
    ab_events_free(&es);
    ab_table_free(&one);
  }
  ab_table_free(&a);
  ab_table_free(&b);
}

/* An OOM on one rank: that rank says oom, the others stop at a collective naming it, the
 * call returns (no hang) with AB_OK, and the combined row says oom. */
static void oom_on_one_rank(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 3 };
  for (unsigned bad = 0; bad < N; bad += 2) {
    ab_run_spec_t o = opts(SMALL, "raw");
    o.dev.faults.fail_nth = 100; /* well into the first step, after collectives began */
    o.faults_rank = (int)bad;
    ab_table_t t;
    ab_rank_result_t res[N];
    ab_diag_t diag = {""};
    REQUIRE_MSG(run_ranks(&o, N, &t, res, &diag) == AB_OK, "%s", diag.msg);
    char named[64];
    snprintf(named, sizeof named, "rank %u ran out of memory at event %zu", bad, res[bad].run.oom.event);
    for (unsigned r = 0; r < N; r++) {
      if (r == bad) {
        CHECK_EQ(res[r].run.status, AB_RUN_OOM);
        CHECK(strcmp(ab_table_get(&t, r, "status"), "oom") == 0);
        continue;
      }
      CHECK_MSG(res[r].run.status == AB_RUN_STOPPED, "rank %u: status %d", r, res[r].run.status);
      CHECK(strcmp(ab_table_get(&t, r, "status"), "stopped") == 0);
      CHECK_STR_CONTAINS(res[r].run.message, named);
      /* It stopped before a collective, past the failing rank's last one. */
      ab_events_t es;
      size_t at = res[r].run.events_done;
      REQUIRE(ab_workload_build(res[r].workload, o.seed, &es, &diag) == AB_OK);
      REQUIRE(at < es.n && es.ev[at].kind == AB_EV_KERNEL);
      uint8_t op = es.kernels[es.ev[at].id].op;
      CHECK(op == AB_K_ALLGATHER || op == AB_K_REDUCE_SCATTER);
      CHECK(at > res[bad].run.oom.event);
      ab_events_free(&es);
    }
    CHECK(strcmp(ab_table_get(&t, N, "status"), "oom") == 0);
    CHECK_EQ(cell(&t, N, "num_ooms"), 1);
    ab_table_free(&t);
  }
}

/* Every stage, with a world that divides none of the model's sizes: the streams' collective
 * buffers are padded (the check passes) and the run completes. */
static void stages_with_uneven_world(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  for (unsigned stage = 0; stage <= 3; stage++) {
    char w[256];
    snprintf(w, sizeof w, "%s,stage=%u,reduce_bucket=100001,persistence_threshold=1000", SMALL, stage);
    ab_run_spec_t o = opts(w, "raw");
    ab_table_t t;
    ab_rank_result_t res[3];
    ab_diag_t diag = {""};
    CHECK_MSG(run_ranks(&o, 3, &t, res, &diag) == AB_OK, "stage %u: %s", stage, diag.msg);
    for (unsigned r = 0; r < 3 && t.nrows == 4; r++) CHECK_EQ(res[r].run.status, AB_RUN_OK);
    ab_table_free(&t);
  }
}

/* A collective whose full buffer is too small for the world is refused before anything runs. */
static void stream_check(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  ab_events_t es;
  ab_events_init(&es);
  uint32_t shard = ab_events_alloc(&es, 100, 0, AB_TAG_COMM), full = ab_events_alloc(&es, 300, 0, AB_TAG_COMM);
  ab_kernel_t k = {.op = AB_K_ALLGATHER, .nbuf = 2, .buf = {shard, full}, .n = 100};
  ab_events_kernel(&es, &k, 0);
  ab_kernel_t rs = {.op = AB_K_REDUCE_SCATTER, .nbuf = 2, .buf = {full, full}, .n = 100};
  ab_events_kernel(&es, &rs, 0);
  ab_diag_t diag = {""};
  REQUIRE(ab_events_finish(&es, &diag) == AB_OK);
  uint64_t d3 = 0, d1 = 0;
  CHECK(ab_ranks_check_stream(&es, 3, &d3, &diag) == AB_OK);
  CHECK(ab_ranks_check_stream(&es, 1, &d1, &diag) == AB_OK);
  CHECK(d1 == d3 && d1 != 0);
  CHECK(ab_ranks_check_stream(&es, 4, &d3, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "event 2: the allgather's full buffer (id 1) holds 300 bytes, less than 4 ranks x 100");
  ab_events_free(&es);
  /* Another size, another digest. */
  ab_events_init(&es);
  shard = ab_events_alloc(&es, 100, 0, AB_TAG_COMM);
  full = ab_events_alloc(&es, 300, 0, AB_TAG_COMM);
  k.buf[0] = shard;
  k.buf[1] = full;
  k.n = 99;
  ab_events_kernel(&es, &k, 0);
  REQUIRE(ab_events_finish(&es, &diag) == AB_OK);
  CHECK(ab_ranks_check_stream(&es, 3, &d3, &diag) == AB_OK);
  CHECK(d3 != d1);
  ab_events_free(&es);
}

static void bad_arguments(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  struct {
    const char *workload;
    unsigned n;
    int faults_rank;
    const char *says;
  } cases[] = {
      {"random", 2, -1, "only -w zero runs as several ranks"},
      {"zero:rank=1", 2, -1, "rank= comes from --ranks"},
      {"zero:world=4", 2, -1, "world=4, but there are 2 ranks"},
      {"zero", 2, 2, "--faults rank=2: there are ranks 0 to 1"},
      {"zero", 0, -1, "expected 1 to"},
      {"zero:stage=9", 2, -1, "stage"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_run_spec_t o = opts(cases[i].workload, "raw");
    o.device = "sim";
    o.faults_rank = cases[i].faults_rank;
    if (o.faults_rank >= 0) o.dev.faults.fail_nth = 1;
    ab_ranks_opts_t r = ranks_of(cases[i].n);
    ab_table_t t;
    ab_table_init(&t, ab_summary_cols, ab_summary_ncols);
    ab_diag_t diag = {""};
    CHECK_MSG(ab_ranks_run(&o, &r, &t, NULL, NULL, &diag) == AB_ERR_INVALID, "%s", cases[i].workload);
    CHECK_STR_CONTAINS(diag.msg, cases[i].says);
    CHECK_EQ(t.nrows, 0);
    ab_table_free(&t);
  }
  /* A bad -c is one error, before anything runs. */
  ab_run_spec_t o = opts(SMALL, "pooled");
  o.device = "sim";
  o.conf = "bogus:1";
  ab_ranks_opts_t r = ranks_of(2);
  ab_table_t t;
  ab_table_init(&t, ab_summary_cols, ab_summary_ncols);
  ab_diag_t diag = {""};
  CHECK(ab_ranks_run(&o, &r, &t, NULL, NULL, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "bogus");
  ab_table_free(&t);
}

/* ---- the thread group --------------------------------------------------------------------------- */

typedef struct member_s {
  ab_group_t *g;
  unsigned rank;
  unsigned leave_after;  /* collectives before it leaves with an OOM; 0: never */
  unsigned fail_launch;  /* the collective (1-based) whose launch fails; 0: none */
  unsigned collectives;  /* how many it may make */
  unsigned stall_at;     /* the collective (1-based) before which it sleeps stall_ms; 0: none */
  unsigned stall_ms;
  unsigned entered, launched; /* how far it got */
  bool stopped_at_launch;
  ab_verdict_t verdict;  /* the last barrier's */
  char why[512];
} member_t;

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Sets *flag to SIGTERM after ms, from a thread of its own (as a signal handler would). */
typedef struct later_s {
  volatile sig_atomic_t *flag;
  unsigned ms;
} later_t;

static void *set_later(void *arg) {
  later_t *l = arg;
  sleep_ms(l->ms);
  *l->flag = SIGTERM;
  return NULL;
}

static void *member_main(void *arg) {
  member_t *m = arg;
  ab_rank_result_t res;
  memset(&res, 0, sizeof res);
  for (unsigned c = 1; c <= m->collectives; c++) {
    if (m->leave_after && c > m->leave_after) {
      res.run.status = AB_RUN_OOM;
      res.run.oom.event = 1234;
      break;
    }
    if (c == m->stall_at) sleep_ms(m->stall_ms);
    m->verdict = m->g->ops->arrive(m->g, m->rank, AB_LOCKSTEP_ENTER, "collective X", m->why, sizeof m->why);
    if (m->verdict != AB_VERDICT_GO) {
      res.run.status = AB_RUN_STOPPED;
      break;
    }
    m->entered = c;
    ab_lockstep_t phase = c == m->fail_launch ? AB_LOCKSTEP_FAILED : AB_LOCKSTEP_LAUNCHED;
    m->verdict = m->g->ops->arrive(m->g, m->rank, phase, "collective X", m->why, sizeof m->why);
    if (m->verdict != AB_VERDICT_GO) {
      m->stopped_at_launch = true;
      res.run.status = AB_RUN_STOPPED;
      break;
    }
    m->launched = c;
  }
  res.events = m->rank;
  m->g->ops->leave(m->g, m->rank, &res);
  return NULL;
}

/* Runs n members with waits w; returns false if the group could not be made. */
static bool run_members_with(member_t *m, unsigned n, const ab_waits_t *w) {
  ab_group_t *g = NULL;
  ab_diag_t diag = {""};
  if (ab_group_threads(n, w, &g, &diag) != AB_OK) return false;
  pthread_t th[8];
  alarm(HANG_GUARD_S);
  for (unsigned i = 0; i < n; i++) {
    m[i].g = g;
    m[i].rank = i;
    pthread_create(&th[i], NULL, member_main, &m[i]);
  }
  for (unsigned i = 0; i < n; i++) pthread_join(th[i], NULL);
  alarm(0);
  ab_rank_result_t all[8];
  bool have = false;
  CHECK(g->ops->results(g, all, &have, &diag) == AB_OK && have);
  for (unsigned i = 0; i < n && have; i++) CHECK_EQ(all[i].events, i);
  g->ops->destroy(g);
  return true;
}

static bool run_members(member_t *m, unsigned n) {
  ab_waits_t w = test_waits();
  return run_members_with(m, n, &w);
}

static void thread_group(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 4, K = 200 };
  member_t m[N];
  /* Everyone makes every collective. */
  memset(m, 0, sizeof m);
  for (unsigned i = 0; i < N; i++) m[i].collectives = K;
  REQUIRE(run_members(m, N));
  for (unsigned i = 0; i < N; i++) CHECK_EQ(m[i].launched, K);
  /* Rank 2 leaves after 10: nobody enters the 11th, and the reason names it. */
  memset(m, 0, sizeof m);
  for (unsigned i = 0; i < N; i++) m[i].collectives = K;
  m[2].leave_after = 10;
  REQUIRE(run_members(m, N));
  for (unsigned i = 0; i < N; i++) {
    CHECK_EQ(m[i].launched, 10);
    CHECK_EQ(m[i].entered, 10);
    if (i != 2) CHECK_STR_CONTAINS(m[i].why, "rank 2 ran out of memory at event 1234");
  }
  /* Rank 1's 5th launch fails: every rank hears it at that collective's LAUNCHED barrier. */
  memset(m, 0, sizeof m);
  for (unsigned i = 0; i < N; i++) m[i].collectives = K;
  m[1].fail_launch = 5;
  REQUIRE(run_members(m, N));
  for (unsigned i = 0; i < N; i++) {
    CHECK_EQ(m[i].entered, 5);
    CHECK_EQ(m[i].launched, 4);
    CHECK(m[i].stopped_at_launch);
    CHECK_STR_CONTAINS(m[i].why, "rank 1 could not launch a collective");
  }
}

/* A rank that does not come within the collective timeout: the others give up, naming it
 * and the collective; one that comes late hears that they did. A stop ends the wait at once. */
static void thread_group_waits(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 3, K = 20 };
  member_t m[N];
  ab_waits_t w = test_waits();
  w.collective_s = 0.3;
  memset(m, 0, sizeof m);
  for (unsigned i = 0; i < N; i++) m[i].collectives = K;
  m[2].stall_at = 5;
  m[2].stall_ms = 1500;
  double t0 = ab_clock_s();
  REQUIRE(run_members_with(m, N, &w));
  CHECK(ab_clock_s() - t0 < 1.4 + 1.5);
  /* The first to give up says whom it waited for; the other hears that it gave up. */
  unsigned first = m[0].verdict == AB_VERDICT_FAIL ? 0 : 1;
  CHECK_EQ(m[first].verdict, AB_VERDICT_FAIL);
  CHECK_STR_CONTAINS(m[first].why, "waited 0.3 s at collective X for rank 2 (AB_COLLECTIVE_TIMEOUT)");
  CHECK(m[1 - first].verdict == AB_VERDICT_FAIL || m[1 - first].verdict == AB_VERDICT_ABORT);
  for (unsigned i = 0; i < 2; i++) CHECK_EQ(m[i].launched, 4);
  CHECK_EQ(m[2].verdict, AB_VERDICT_ABORT);
  CHECK_STR_CONTAINS(m[2].why, "gave up waiting at collective X");
  /* SIGTERM while ranks 0 and 1 wait for rank 2: they stop within a slice. */
  volatile sig_atomic_t stop = 0;
  w.collective_s = 60;
  w.stop = &stop;
  memset(m, 0, sizeof m);
  for (unsigned i = 0; i < N; i++) m[i].collectives = K;
  m[2].stall_at = 3;
  m[2].stall_ms = 1500;
  later_t l = {&stop, 300};
  pthread_t th;
  pthread_create(&th, NULL, set_later, &l);
  t0 = ab_clock_s();
  REQUIRE(run_members_with(m, N, &w));
  pthread_join(th, NULL);
  first = m[0].verdict == AB_VERDICT_FAIL ? 0 : 1;
  CHECK_EQ(m[first].verdict, AB_VERDICT_FAIL);
  CHECK_STR_CONTAINS(m[first].why, "interrupted (SIGTERM) while rank ");
  CHECK_STR_CONTAINS(m[first].why, "waited at collective X for rank 2");
  CHECK(m[1 - first].verdict == AB_VERDICT_FAIL || m[1 - first].verdict == AB_VERDICT_ABORT);
  CHECK(ab_clock_s() - t0 < 2.0); /* rank 2's stall (1.5 s) ends it; the others were done at 0.3 */
  char list[64];
  bool pick[6] = {false, true, false, true, true, false};
  ab_rank_list(pick, 6, list, sizeof list);
  CHECK_MSG(strcmp(list, "ranks 1, 3 and 4") == 0, "%s", list);
  ab_rank_list(pick, 2, list, sizeof list);
  CHECK_MSG(strcmp(list, "rank 1") == 0, "%s", list);
}

/* ---- the launcher's environment --------------------------------------------------------------------- */

typedef struct vars_s {
  const char *const *kv; /* NAME, VALUE, ..., NULL */
} vars_t;

static const char *lookup(const char *name, void *ctx) {
  const vars_t *v = ctx;
  for (size_t i = 0; v->kv[i]; i += 2)
    if (strcmp(v->kv[i], name) == 0) return v->kv[i + 1];
  return NULL;
}

static void launch_env(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  ab_launch_t l;
  ab_diag_t diag = {""};
  /* torchrun's workers: its store, under a prefix of the run and its attempt. */
  const char *torchrun[] = {"TORCHELASTIC_RUN_ID", "job7", "TORCHELASTIC_RESTART_COUNT", "2", "TORCHELASTIC_USE_AGENT_STORE",
                            "True", "RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
                            "MASTER_ADDR", "node0", "MASTER_PORT", "29500", "SLURM_PROCID", "0", NULL};
  vars_t v = {torchrun};
  REQUIRE_MSG(ab_launch_parse(lookup, &v, &l, &diag) == AB_OK, "%s", diag.msg);
  CHECK_EQ(l.kind, AB_LAUNCH_STORE); /* torchrun's, though Slurm's variable is there too */
  CHECK(l.rank == 3 && l.world == 8 && l.local_rank == 1 && l.local_world == 4);
  CHECK(strcmp(l.addr, "node0") == 0 && strcmp(l.port, "29500") == 0);
  CHECK_MSG(strcmp(l.prefix, "/allocbench/job7/2/") == 0, "%s", l.prefix);
  /* By hand: the defaults. */
  const char *by_hand[] = {"RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "1", NULL};
  v.kv = by_hand;
  REQUIRE(ab_launch_parse(lookup, &v, &l, &diag) == AB_OK);
  CHECK(l.kind == AB_LAUNCH_STORE && l.local_rank == 1 && l.local_world == 1);
  CHECK_MSG(strcmp(l.prefix, "/allocbench/none/0/") == 0, "%s", l.prefix);
  /* MPI's launchers, each by its own variable; nothing at all: no launch. */
  const char *mpi[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < 4; i++) {
    const char *kv[] = {mpi[i], "0", NULL};
    v.kv = kv;
    REQUIRE(ab_launch_parse(lookup, &v, &l, &diag) == AB_OK);
    CHECK(l.kind == AB_LAUNCH_MPI && strcmp(l.by, mpi[i]) == 0 && l.announced == 0);
  }
  /* The ranks mpirun says it started, beside its rank (Note [A world MPI agrees with]): a count
   * that does not read is left to MPI, and so is Slurm's, which a batch script has too. */
  struct {
    const char *kv[8];
    unsigned announced;
    const char *by;
  } sizes[] = {
      {{"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4", NULL}, 4, "OMPI_COMM_WORLD_SIZE"},
      {{"PMI_RANK", "0", "PMI_SIZE", "2", NULL}, 2, "PMI_SIZE"},
      {{"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "x", NULL}, 0, ""},
      {{"SLURM_PROCID", "0", "SLURM_NTASKS", "16", NULL}, 0, ""},
      {{"PMIX_RANK", "0", "PMI_SIZE", "8", NULL}, 0, ""}, /* PMIx's rank, hydra's count: not paired */
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    v.kv = sizes[i].kv;
    REQUIRE(ab_launch_parse(lookup, &v, &l, &diag) == AB_OK);
    CHECK_MSG(l.announced == sizes[i].announced && strcmp(l.announced_by, sizes[i].by) == 0, "case %zu: %u by '%s'", i,
              l.announced, l.announced_by);
  }
  const char *none[] = {NULL};
  v.kv = none;
  REQUIRE(ab_launch_parse(lookup, &v, &l, &diag) == AB_OK);
  CHECK_EQ(l.kind, AB_LAUNCH_NONE);
  struct {
    const char *kv[16];
    const char *says;
  } bad[] = {
      {{"WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL}, "RANK is not set"},
      {{"RANK", "0", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL}, "WORLD_SIZE is not set"},
      {{"RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
       "RANK='2': expected a whole number from 0 to 1"},
      {{"RANK", "-1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL}, "RANK='-1'"},
      {{"RANK", "0", "WORLD_SIZE", "0", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL}, "WORLD_SIZE='0'"},
      {{"RANK", "0", "WORLD_SIZE", "2x", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL}, "WORLD_SIZE='2x'"},
      {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1", NULL}, "MASTER_ADDR is not set"},
      {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", NULL}, "MASTER_PORT is not set"},
      {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "65536", NULL}, "MASTER_PORT='65536'"},
      {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "0", NULL}, "MASTER_PORT='0'"},
      {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", "LOCAL_RANK", "x", NULL}, "LOCAL_RANK='x'"},
      {{"TORCHELASTIC_RUN_ID", "j", "TORCHELASTIC_USE_AGENT_STORE", "False", "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR",
        "h", "MASTER_PORT", "1", NULL},
       "torchrun shares no store with its workers here (TORCHELASTIC_USE_AGENT_STORE=False)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v.kv = bad[i].kv;
    CHECK_MSG(ab_launch_parse(lookup, &v, &l, &diag) == AB_ERR_INVALID, "case %zu", i);
    CHECK_STR_CONTAINS(diag.msg, bad[i].says);
  }
  ab_waits_t w;
  const char *waits[] = {"AB_RENDEZVOUS_TIMEOUT", "2.5", "AB_RESULTS_TIMEOUT", "9", NULL};
  v.kv = waits;
  REQUIRE(ab_waits_parse(lookup, &v, &w, &diag) == AB_OK);
  CHECK(w.meet_s == 2.5 && w.results_s == 9 && w.collective_s == AB_COLLECTIVE_TIMEOUT_S);
  const char *bad_wait[] = {"AB_RENDEZVOUS_TIMEOUT", "-3", NULL};
  v.kv = bad_wait;
  CHECK(ab_waits_parse(lookup, &v, &w, &diag) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(diag.msg, "AB_RENDEZVOUS_TIMEOUT='-3'");
}

/* ---- ranks of a launch, over a link in memory ------------------------------------------------------------ */

/* A link of `world` threads of this process (link.h): one queue of messages per pair, as a
 * launcher's engine would carry them, so that the meeting, the lockstep through rank 0 and
 * whole runs of --ranks env are tested without MPI or a store. */
typedef struct mem_msg_s {
  uint32_t kind;
  void *payload;
  size_t bytes;
  struct mem_msg_s *next;
} mem_msg_t;

typedef struct mem_net_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned world;
  mem_msg_t **head; /* [from * world + to] */
} mem_net_t;

typedef struct mem_link_s {
  ab_link_t l; /* first: the link.h view */
  mem_net_t *net;
} mem_link_t;

static bool mem_send(ab_link_t *l, unsigned to, uint32_t kind, const void *payload, size_t bytes) {
  mem_net_t *net = ((mem_link_t *)(void *)l)->net;
  mem_msg_t *m = calloc(1, sizeof *m);
  if (m == NULL || (m->payload = malloc(bytes ? bytes : 1)) == NULL) {
    free(m);
    return false;
  }
  m->kind = kind;
  m->bytes = bytes;
  memcpy(m->payload, payload, bytes);
  pthread_mutex_lock(&net->mu);
  mem_msg_t **at = &net->head[l->rank * net->world + to];
  while (*at) at = &(*at)->next;
  *at = m;
  pthread_cond_broadcast(&net->cv);
  pthread_mutex_unlock(&net->mu);
  return true;
}

static ab_wait_t mem_recv(ab_link_t *l, unsigned from, uint32_t *kind, void **payload, size_t *bytes, double deadline) {
  mem_net_t *net = ((mem_link_t *)(void *)l)->net;
  pthread_mutex_lock(&net->mu);
  mem_msg_t **at = &net->head[from * net->world + l->rank];
  ab_wait_t w = AB_WAIT_DONE;
  while (*at == NULL) {
    if (l->waits.stop && *l->waits.stop) w = AB_WAIT_STOPPED;
    else if (ab_clock_s() >= deadline) w = AB_WAIT_TIMEOUT;
    if (w != AB_WAIT_DONE) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 5 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&net->cv, &net->mu, &ts);
  }
  if (w == AB_WAIT_DONE) {
    mem_msg_t *m = *at;
    *at = m->next;
    *kind = m->kind;
    *payload = m->payload;
    *bytes = m->bytes;
    free(m);
  }
  pthread_mutex_unlock(&net->mu);
  return w;
}

static void mem_close(ab_link_t *l, bool clean) {
  (void)clean;
  free(l);
}

static const ab_link_ops_t mem_ops = {mem_send, mem_recv, mem_close};

static mem_net_t *mem_net(unsigned world) {
  mem_net_t *net = calloc(1, sizeof *net);
  net->world = world;
  net->head = calloc((size_t)world * world, sizeof *net->head);
  pthread_mutex_init(&net->mu, NULL);
  pthread_cond_init(&net->cv, NULL);
  return net;
}

/* Rank r's end of net; close it with its ops. */
static ab_link_t *mem_link(mem_net_t *net, unsigned r, const ab_waits_t *w) {
  mem_link_t *x = calloc(1, sizeof *x);
  x->l.ops = &mem_ops;
  x->l.rank = r;
  x->l.world = net->world;
  x->l.local_rank = r;
  x->l.local = net->world;
  x->l.waits = *w;
  snprintf(x->l.engine, sizeof x->l.engine, "memory");
  x->net = net;
  return &x->l;
}

static void mem_net_free(mem_net_t *net) {
  for (unsigned i = 0; i < net->world * net->world; i++)
    for (mem_msg_t *m = net->head[i], *next; m; m = next) {
      next = m->next;
      free(m->payload);
      free(m);
    }
  free(net->head);
  pthread_mutex_destroy(&net->mu);
  pthread_cond_destroy(&net->cv);
  free(net);
}

/* One process's part of a launch: meets with its digest, makes `collectives` collectives
 * (leaving with an OOM after leave_after of them, when not 0), leaves; rank 0 collects. */
typedef struct process_s {
  ab_link_t *link;
  uint64_t digest;
  unsigned collectives, leave_after;
  ab_comm_id_t id;
  ab_status met;
  int launched;
  char why[512];
  ab_rank_result_t all[8]; /* rank 0 */
  bool have;
} process_t;

static void *process_main(void *arg) {
  process_t *m = arg;
  ab_link_t *l = m->link;
  ab_diag_t diag = {""};
  m->met = ab_link_meet(l, m->digest, "stream makes other collectives than rank 0's", &m->id, NULL, "test", &diag);
  m->launched = -1;
  if (m->met != AB_OK) {
    snprintf(m->why, sizeof m->why, "%s", diag.msg);
    return NULL;
  }
  ab_group_t *g = NULL;
  if (ab_group_link(l, &g, &diag) != AB_OK) return NULL;
  ab_rank_result_t res;
  memset(&res, 0, sizeof res);
  res.events = 100 + l->rank;
  unsigned c = 0;
  for (; c < m->collectives; c++) {
    if (m->leave_after && c == m->leave_after) {
      res.run.status = AB_RUN_OOM;
      res.run.oom.event = 77;
      break;
    }
    if (g->ops->arrive(g, l->rank, AB_LOCKSTEP_ENTER, "collective X", m->why, sizeof m->why) != AB_VERDICT_GO ||
        g->ops->arrive(g, l->rank, AB_LOCKSTEP_LAUNCHED, "collective X", m->why, sizeof m->why) != AB_VERDICT_GO) {
      res.run.status = AB_RUN_STOPPED;
      break;
    }
  }
  g->ops->leave(g, l->rank, &res);
  m->launched = (int)c;
  if (g->ops->results(g, m->all, &m->have, &diag) != AB_OK) snprintf(m->why, sizeof m->why, "%s", diag.msg);
  g->ops->destroy(g);
  return NULL;
}

/* A launch of world members, each a thread on a link in memory. */
static void run_members_linked(process_t *m, unsigned world, const ab_waits_t *w) {
  mem_net_t *net = mem_net(world);
  pthread_t th[8];
  for (unsigned r = 0; r < world; r++) {
    m[r].link = mem_link(net, r, w);
    pthread_create(&th[r], NULL, process_main, &m[r]);
  }
  for (unsigned r = 0; r < world; r++) {
    pthread_join(th[r], NULL);
    m[r].link->ops->close(m[r].link, true);
  }
  mem_net_free(net);
}

static void linked_job(unsigned world, unsigned leave_rank, unsigned leave_after, unsigned expect, const char *says) {
  process_t m[8];
  memset(m, 0, sizeof m);
  for (unsigned r = 0; r < world; r++) {
    m[r].digest = 42;
    m[r].collectives = 50;
    m[r].leave_after = r == leave_rank ? leave_after : 0;
  }
  for (size_t i = 0; i < sizeof m[0].id.bytes; i++) m[0].id.bytes[i] = (unsigned char)(i * 7 + 3);
  ab_waits_t w = test_waits();
  alarm(HANG_GUARD_S);
  run_members_linked(m, world, &w);
  alarm(0);
  for (unsigned r = 0; r < world; r++) {
    CHECK_MSG(m[r].met == AB_OK, "rank %u: %s", r, m[r].why);
    CHECK_MSG(memcmp(m[r].id.bytes, m[0].id.bytes, sizeof m[0].id.bytes) == 0, "rank %u's id", r);
    CHECK_MSG(m[r].launched == (int)(r == leave_rank ? leave_after : expect), "rank %u launched %d: %s", r, m[r].launched,
              m[r].why);
    if (says && r != leave_rank) CHECK_STR_CONTAINS(m[r].why, says);
  }
  CHECK(m[0].have);
  for (unsigned r = 0; r < world && m[0].have; r++) {
    CHECK_EQ(m[0].all[r].events, 100 + r);
    CHECK_EQ(m[0].all[r].run.status, r == leave_rank && leave_after ? AB_RUN_OOM : leave_after ? AB_RUN_STOPPED : AB_RUN_OK);
  }
}

static void linked_lockstep(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  /* Everyone makes every collective; the id reaches every rank. */
  linked_job(3, 99, 0, 50, NULL);
  /* Rank 2 leaves with an OOM after 7: the others stop before the 8th. */
  linked_job(3, 2, 7, 7, "rank 2 ran out of memory at event 77");
  /* Rank 0 does: the others hear it from rank 0. */
  linked_job(3, 0, 4, 4, "rank 0 ran out of memory at event 77");
}

/* Ranks whose digests differ are refused on both sides; a rank that never comes is named at
 * the bound, and a signal ends the wait at once. */
static void linked_meeting(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  process_t m[3];
  memset(m, 0, sizeof m);
  m[0].digest = m[2].digest = 42;
  m[1].digest = 43;
  ab_waits_t w = test_waits();
  alarm(HANG_GUARD_S);
  run_members_linked(m, 3, &w);
  for (unsigned r = 0; r < 3; r++) {
    CHECK_MSG(m[r].met == AB_ERR_INVALID, "rank %u", r);
    CHECK_STR_CONTAINS(m[r].why, "rank 1's stream makes other collectives than rank 0's");
  }
  /* Rank 0 alone of three: it names both missing ranks. */
  mem_net_t *net = mem_net(3);
  w.meet_s = 0.3;
  ab_link_t *l = mem_link(net, 0, &w);
  ab_diag_t diag = {""};
  CHECK(ab_link_meet(l, 42, "x", NULL, NULL, "test", &diag) == AB_ERR_IO);
  CHECK_STR_CONTAINS(diag.msg, "rank 0 waited 0.3 s for ranks 1 and 2 of 3 through memory to meet (AB_RENDEZVOUS_TIMEOUT)");
  CHECK(l->gave_up);
  l->ops->close(l, false);
  mem_net_free(net);
  /* Rank 1 with a stop set: it says so. */
  net = mem_net(3);
  static volatile sig_atomic_t stop = SIGTERM;
  w.meet_s = 60;
  w.stop = &stop;
  l = mem_link(net, 1, &w);
  double t0 = ab_clock_s();
  CHECK(ab_link_meet(l, 42, "x", NULL, NULL, "test", &diag) == AB_ERR_IO);
  CHECK(ab_clock_s() - t0 < 1.0);
  CHECK_STR_CONTAINS(diag.msg, "interrupted (SIGTERM) while rank 1 waited for rank 0 through memory to meet");
  l->ops->close(l, false);
  mem_net_free(net);
  alarm(0);
}

/* Whole runs of --ranks env over the link, each rank a thread calling ab_ranks_run as its
 * process would: the rows rank 0 writes are those of --ranks N, and the others write none. */
typedef struct launched_s {
  ab_run_spec_t o;
  ab_ranks_opts_t r;
  ab_table_t t;
  ab_rank_result_t res[4];
  unsigned n;
  ab_status st;
  ab_diag_t diag;
} launched_t;

static void *launched_main(void *arg) {
  launched_t *x = arg;
  ab_table_init(&x->t, ab_summary_cols, ab_summary_ncols);
  x->st = ab_ranks_run(&x->o, &x->r, &x->t, x->res, &x->n, &x->diag);
  return NULL;
}

static void linked_runs(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
  enum { N = 2 };
  ab_run_spec_t o = opts(SMALL, "caching");
  ab_table_t threads;
  ab_rank_result_t res[N];
  ab_diag_t diag = {""};
  REQUIRE_MSG(run_ranks(&o, N, &threads, res, &diag) == AB_OK, "%s", diag.msg);
  mem_net_t *net = mem_net(N);
  launched_t x[N];
  pthread_t th[N];
  ab_waits_t w = test_waits();
  alarm(HANG_GUARD_S);
  for (unsigned r = 0; r < N; r++) {
    memset(&x[r], 0, sizeof x[r]);
    x[r].o = o;
    x[r].r = ranks_of(0);
    x[r].r.link = mem_link(net, r, &w);
    pthread_create(&th[r], NULL, launched_main, &x[r]);
  }
  for (unsigned r = 0; r < N; r++) pthread_join(th[r], NULL);
  alarm(0);
  for (unsigned r = 0; r < N; r++) CHECK_MSG(x[r].st == AB_OK, "rank %u: %s", r, x[r].diag.msg);
  CHECK_EQ(x[1].t.nrows, 0);
  REQUIRE(x[0].t.nrows == threads.nrows);
  const char *cols[] = {"workload", "status", "peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                        "num_device_alloc", "num_device_free", "events", "live_peak_bytes"};
  for (size_t row = 0; row < threads.nrows; row++)
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
      CHECK_MSG(strcmp(ab_table_get(&x[0].t, row, cols[c]), ab_table_get(&threads, row, cols[c])) == 0, "row %zu %s: %s != %s",
                row, cols[c], ab_table_get(&x[0].t, row, cols[c]), ab_table_get(&threads, row, cols[c]));
  for (unsigned r = 0; r < N; r++) {
    x[r].r.link->ops->close(x[r].r.link, true);
    ab_table_free(&x[r].t);
  }
  ab_table_free(&threads);
  mem_net_free(net);
}

/* ---- NCCL ---------------------------------------------------------------------------------------------- */

/* The loader: a wrong path is named; where NCCL is installed, it loads and makes ids, and
 * multicast is off unless the environment said otherwise. */
static void nccl_loader(void) {
  if (on_cuda()) SKIP("runs with --device=sim");
#ifndef AB_HAVE_CUDA
  SKIP("built without CUDA");
#endif
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  ab_diag_t diag = {""};
  int version = 0;
  if (ab_comm_library(&version) == NULL) {
    CHECK(ab_comm_load("/no/such/libnccl.so.2", &diag) != AB_OK);
    CHECK_STR_CONTAINS(diag.msg, "/no/such/libnccl.so.2");
  }
  if (ab_comm_load(getenv("AB_NCCL_LIBRARY"), &diag) != AB_OK) SKIP("no NCCL here: %s", diag.msg);
  const char *path = ab_comm_library(&version);
  printf("  NCCL %d from %s\n", version, path);
  CHECK(path != NULL && version >= 21300);
  if (nvls == NULL) CHECK(getenv("NCCL_NVLS_ENABLE") && strcmp(getenv("NCCL_NVLS_ENABLE"), "0") == 0);
  ab_comm_id_t a, b;
  REQUIRE_MSG(ab_comm_unique_id(&a, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(ab_comm_unique_id(&b, &diag) == AB_OK);
  CHECK(memcmp(a.bytes, b.bytes, sizeof a.bytes) != 0);
}

typedef struct gpu_rank_s {
  ab_comm_t *comm;
  unsigned rank, n;
  pthread_barrier_t *meet; /* the lockstep of group.h, by hand: before and after each launch */
  int *anyone_failed;      /* shared: read after a meeting */
  int failures;
  char why[512];
} gpu_rank_t;

#define GPU_FAIL(g, ...)                                                          \
  do {                                                                            \
    if ((g)->failures++ == 0) snprintf((g)->why, sizeof (g)->why, __VA_ARGS__);   \
    __atomic_store_n((g)->anyone_failed, 1, __ATOMIC_SEQ_CST);                     \
  } while (0)

/* Meets the other ranks; false when one of them has failed. */
static bool meet(gpu_rank_t *g) {
  pthread_barrier_wait(g->meet);
  bool ok = __atomic_load_n(g->anyone_failed, __ATOMIC_SEQ_CST) == 0;
  pthread_barrier_wait(g->meet); /* nobody fails again before all have read */
  return ok;
}

static uint8_t shard_byte(unsigned rank, size_t i) { return (uint8_t)(rank * 31 + i * 7 + 1); }

/* Rank g->rank: all-gathers and reduce-scatters, out of place and in place, against host
 * references. */
static void *gpu_rank_main(void *arg) {
  gpu_rank_t *g = arg;
  enum { BYTES = 3 * 4096 + 5 };
  char spec[16];
  snprintf(spec, sizeof spec, "cuda:%u", g->rank);
  ab_device_t *dev = NULL;
  ab_kernels_t *kx = NULL;
  ab_diag_t diag = {""};
  size_t full_bytes = (size_t)g->n * BYTES;
  uint8_t *host = malloc(full_bytes), *want = malloc(full_bytes);
  ab_dptr_t shard = 0, full = 0;
  if (ab_device_open(spec, NULL, &dev, &diag) != AB_OK || ab_kernels_open(dev, &kx, &diag) != AB_OK || kx == NULL ||
      ab_device_malloc(dev, BYTES, &shard) != AB_OK || ab_device_malloc(dev, full_bytes, &full) != AB_OK || !host ||
      !want)
    GPU_FAIL(g, "rank %u: setup: %s %s", g->rank, diag.msg, dev ? dev->diag.msg : "");
  bool go = meet(g);
  if (kx) ab_kernels_set_comm(kx, g->comm);
  ab_dptr_t buf[AB_KERNEL_MAX_BUFS] = {0};
  for (int round = 0; round < 4 && go; round++) {
    bool gather = round < 2, in_place = round % 2 == 1;
    ab_kernel_t k = {.op = gather ? AB_K_ALLGATHER : AB_K_REDUCE_SCATTER, .nbuf = 2, .n = BYTES};
    /* Inputs: each rank's shard (gather) or full buffer (reduce); the outputs zeroed. */
    for (size_t i = 0; i < full_bytes; i++) host[i] = gather ? 0 : shard_byte(g->rank + 1, i);
    if (gather && in_place)
      for (size_t i = 0; i < BYTES; i++) host[g->rank * (size_t)BYTES + i] = shard_byte(g->rank, i);
    ab_kernels_upload(kx, full, host, full_bytes);
    for (size_t i = 0; i < BYTES; i++) host[i] = gather ? shard_byte(g->rank, i) : 0;
    ab_kernels_upload(kx, shard, host, BYTES);
    buf[0] = gather ? (in_place ? full : shard) : full;
    buf[1] = gather ? full : (in_place ? full : shard);
    if (!meet(g)) break;
    if (ab_kernels_launch(kx, &k, buf, 0) != AB_OK) GPU_FAIL(g, "rank %u round %d: %s", g->rank, round, dev->diag.msg);
    if (!meet(g)) { /* a launch failed: what the others launched is never matched */
      ab_comm_abort(g->comm, "a launch failed", NULL);
      break;
    }
    if (gather) {
      for (unsigned r = 0; r < g->n; r++)
        for (size_t i = 0; i < BYTES; i++) want[r * (size_t)BYTES + i] = shard_byte(r, i);
      ab_kernels_download(kx, host, full, full_bytes);
      if (memcmp(host, want, full_bytes) != 0) GPU_FAIL(g, "rank %u: all-gather (in place %d) wrong", g->rank, in_place);
    } else {
      for (size_t i = 0; i < BYTES; i++) {
        unsigned sum = 0;
        for (unsigned r = 0; r < g->n; r++) sum += shard_byte(r + 1, g->rank * (size_t)BYTES + i);
        want[i] = (uint8_t)sum;
      }
      ab_kernels_download(kx, host, in_place ? full + g->rank * (ab_dptr_t)BYTES : shard, BYTES);
      if (memcmp(host, want, BYTES) != 0) GPU_FAIL(g, "rank %u: reduce-scatter (in place %d) wrong", g->rank, in_place);
    }
  }
  ab_kernels_close(kx, NULL);
  if (shard) ab_device_free(dev, shard, BYTES);
  if (full) ab_device_free(dev, full, full_bytes);
  ab_device_close(dev, NULL);
  free(host);
  free(want);
  return NULL;
}

static unsigned gpu_count(void) {
  unsigned n = 0;
  for (; n < 8; n++) {
    char spec[16];
    ab_device_t *d = NULL;
    snprintf(spec, sizeof spec, "cuda:%u", n);
    if (ab_device_open(spec, NULL, &d, NULL) != AB_OK) break;
    ab_device_close(d, NULL);
  }
  return n;
}

static void collectives_on_gpus(void) {
  if (!on_cuda()) SKIP("runs with --device=cuda");
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  ab_diag_t diag = {""};
  REQUIRE_MSG(ab_comm_load(getenv("AB_NCCL_LIBRARY"), &diag) == AB_OK, "%s", diag.msg);
  unsigned n = gpu_count();
  int ordinals[8];
  ab_comm_t *comms[8];
  for (unsigned i = 0; i < n; i++) ordinals[i] = (int)i;
  ab_waits_t w = test_waits();
  REQUIRE_MSG(ab_comm_init_all(n, ordinals, &w, comms, &diag) == AB_OK, "%s", diag.msg);
  gpu_rank_t g[8];
  pthread_t th[8];
  pthread_barrier_t meeting;
  int anyone_failed = 0;
  pthread_barrier_init(&meeting, NULL, n);
  alarm(HANG_GUARD_S);
  for (unsigned i = 0; i < n; i++) {
    g[i] = (gpu_rank_t){comms[i], i, n, &meeting, &anyone_failed, 0, ""};
    CHECK_EQ(ab_comm_rank(comms[i]), i);
    CHECK_EQ(ab_comm_size(comms[i]), n);
    pthread_create(&th[i], NULL, gpu_rank_main, &g[i]);
  }
  for (unsigned i = 0; i < n; i++) pthread_join(th[i], NULL);
  alarm(0);
  pthread_barrier_destroy(&meeting);
  for (unsigned i = 0; i < n; i++) {
    CHECK_MSG(g[i].failures == 0, "%s", g[i].why);
    printf("  rank %u of %u: NCCL took %llu bytes of cuda:%u\n", i, n, (unsigned long long)ab_comm_bytes(comms[i]), i);
    CHECK(ab_comm_destroy(comms[i], &diag) == AB_OK);
  }
}

/* `run --ranks 1` and `--ranks <every GPU>` on GPUs: collectives on NCCL, every rank ok,
 * the combined row the sum; with --verify too. */
static void ranks_on_gpus(void) {
  if (!on_cuda()) SKIP("runs with --device=cuda");
  if (!ab_device_cuda_usable()) SKIP("no usable GPU");
  unsigned n = gpu_count();
  for (unsigned ranks = 1; ranks <= n; ranks = ranks == n ? n + 1 : n) {
    for (int verify = 0; verify < 2; verify++) {
      ab_run_spec_t o = opts(SMALL, "raw");
      o.device = "cuda";
      o.verify = verify;
      ab_table_t t;
      ab_rank_result_t res[8];
      ab_diag_t diag = {""};
      ab_ranks_opts_t r = ranks_of(ranks);
      r.nccl = getenv("AB_NCCL_LIBRARY");
      unsigned got = 0;
      ab_table_init(&t, ab_summary_cols, ab_summary_ncols);
      alarm(HANG_GUARD_S);
      ab_status st = ab_ranks_run(&o, &r, &t, res, &got, &diag);
      alarm(0);
      CHECK_MSG(st == AB_OK && got == ranks, "--ranks %u%s: %s", ranks, verify ? " --verify" : "", diag.msg);
      int64_t nccl = 0;
      for (unsigned i = 0; i < got; i++) {
        CHECK_MSG(res[i].run.status == AB_RUN_OK, "rank %u: %s", i, res[i].run.message);
        CHECK(res[i].run.kernels_launched > 0 && res[i].run.kernels_skipped == 0);
        nccl += (int64_t)res[i].run.comm_bytes;
        printf("  --ranks %u%s, rank %u on %s: peak reserved %lld, NCCL %llu bytes, step %.3f ms\n", ranks,
               verify ? " --verify" : "", i, res[i].device, (long long)res[i].run.stats.reserved_bytes.peak,
               (unsigned long long)res[i].run.comm_bytes, res[i].run.step_ms_p50);
      }
      if (t.nrows == got + 1) CHECK_EQ(cell(&t, got, "nccl_bytes"), nccl);
      ab_table_free(&t);
    }
  }
}

static const ab_test_t tests[] = {
    {"rows_and_combined", rows_and_combined},
    {"deterministic_and_as_alone", deterministic_and_as_alone},
    {"oom_on_one_rank", oom_on_one_rank},
    {"stages_with_uneven_world", stages_with_uneven_world},
    {"stream_check", stream_check},
    {"bad_arguments", bad_arguments},
    {"thread_group", thread_group},
    {"thread_group_waits", thread_group_waits},
    {"launch_env", launch_env},
    {"linked_lockstep", linked_lockstep},
    {"linked_meeting", linked_meeting},
    {"linked_runs", linked_runs},
    {"nccl_loader", nccl_loader},
    {"collectives_on_gpus", collectives_on_gpus},
    {"ranks_on_gpus", ranks_on_gpus},
};

AB_TEST_MAIN(tests)
