// gbench_shim.cc: the C interface of gbench.h over Google Benchmark; the only C++ file.
//
// The state and the benchmark builder cross the boundary as opaque pointers, as Google
// Benchmark's own issues on a C API suggest; only calls that exist from version 1.7 on are
// used, with arguments that convert to both the const char * of 1.7 and the std::string of
// later versions, so the shim builds against the library the system has.
#include "harness/micro/gbench.h"

#include <benchmark/benchmark.h>

#include <string>
#include <type_traits>
#include <utility>

namespace {

// The builder type RegisterBenchmark returns (benchmark::internal::Benchmark in every
// version so far), named without spelling its namespace.
using Builder = std::remove_pointer<decltype(benchmark::RegisterBenchmark(
    "", std::declval<void (*)(benchmark::State &)>()))>::type;

benchmark::State &state_of(ab_gb_state_t *st) { return *reinterpret_cast<benchmark::State *>(st); }
const benchmark::State &state_of(const ab_gb_state_t *st) {
  return *reinterpret_cast<const benchmark::State *>(st);
}
Builder *builder_of(ab_gb_bench_t *b) { return reinterpret_cast<Builder *>(b); }

void (*program_usage)(void) = nullptr;

void print_help() {
  if (program_usage) program_usage();
  benchmark::PrintDefaultHelp();
}

}  // namespace

extern "C" {

bool ab_gb_keep_running(ab_gb_state_t *st) { return state_of(st).KeepRunning(); }
bool ab_gb_keep_running_batch(ab_gb_state_t *st, int64_t n) {
  return state_of(st).KeepRunningBatch(static_cast<benchmark::IterationCount>(n));
}

int64_t ab_gb_range(const ab_gb_state_t *st, size_t i) { return state_of(st).range(i); }

int64_t ab_gb_iterations(const ab_gb_state_t *st) { return static_cast<int64_t>(state_of(st).iterations()); }

void ab_gb_set_iteration_time(ab_gb_state_t *st, double seconds) { state_of(st).SetIterationTime(seconds); }

void ab_gb_set_counter(ab_gb_state_t *st, const char *name, double value, unsigned flags) {
  int f = benchmark::Counter::kDefaults;
  if (flags & AB_GB_COUNTER_RATE) f |= benchmark::Counter::kIsRate;
  if (flags & AB_GB_COUNTER_AVG_THREADS) f |= benchmark::Counter::kAvgThreads;
  if (flags & AB_GB_COUNTER_INVARIANT) f |= benchmark::Counter::kIsIterationInvariant;
  if (flags & AB_GB_COUNTER_AVG_ITERATIONS) f |= benchmark::Counter::kAvgIterations;
  if (flags & AB_GB_COUNTER_INVERT) f |= benchmark::Counter::kInvert;
  state_of(st).counters[name] =
      benchmark::Counter(value, static_cast<benchmark::Counter::Flags>(f),
                         (flags & AB_GB_COUNTER_1024) ? benchmark::Counter::kIs1024 : benchmark::Counter::kIs1000);
}

void ab_gb_set_items_processed(ab_gb_state_t *st, int64_t items) { state_of(st).SetItemsProcessed(items); }

void ab_gb_skip_with_error(ab_gb_state_t *st, const char *msg) { state_of(st).SkipWithError(msg); }

ab_gb_bench_t *ab_gb_register(const char *name, ab_gb_fn fn, void *ctx) {
  Builder *b = benchmark::RegisterBenchmark(
      name, [fn, ctx](benchmark::State &st) { fn(reinterpret_cast<ab_gb_state_t *>(&st), ctx); });
  return reinterpret_cast<ab_gb_bench_t *>(b);
}

void ab_gb_arg(ab_gb_bench_t *b, int64_t value) { builder_of(b)->Arg(value); }

void ab_gb_arg_name(ab_gb_bench_t *b, const char *arg_name) { builder_of(b)->ArgName(arg_name); }

void ab_gb_use_manual_time(ab_gb_bench_t *b) { builder_of(b)->UseManualTime(); }

void ab_gb_unit(ab_gb_bench_t *b, ab_gb_unit_t unit) {
  static const benchmark::TimeUnit units[] = {benchmark::kNanosecond, benchmark::kMicrosecond,
                                              benchmark::kMillisecond, benchmark::kSecond};
  builder_of(b)->Unit(units[unit]);
}

void ab_gb_init(int *argc, char **argv, void (*usage)(void)) {
  program_usage = usage;
  benchmark::Initialize(argc, argv, print_help);
}

void ab_gb_add_context(const char *key, const char *value) { benchmark::AddCustomContext(key, value); }

size_t ab_gb_run(void) { return benchmark::RunSpecifiedBenchmarks(); }

void ab_gb_shutdown(void) { benchmark::Shutdown(); }

}  // extern "C"
