// torch_compare.cpp: PyTorch's CUDACachingAllocator and allocbench's caching strategy side by
// side, in one process, on one GPU, over one event stream (default: the random workload,
// workloads/random.c, seed 42).
//
// Speed: each allocator runs the stream's allocations and frees back to back (PyTorch through
// c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete, as the reference measurement did;
// allocbench through ab_strategy_alloc / ab_strategy_free on the cuda device), one cold pass
// from an empty cache and then --reps warm passes; it prints ns per operation (an operation
// is one alloc or one free) for the cold pass and the median and best of the warm ones.
//
// Decisions: a pass of PyTorch's allocator from an empty cache with a trace tracker attached
// records its segment decisions (cudaMalloc / cudaFree / map / unmap, with their addresses).
// allocbench replays the stream on the simulated card handed those addresses (so ties between
// equal free blocks break alike) and must make the same decisions, in order, and reach the
// same peak reserved bytes; its cold pass on the GPU is compared too (reported).
//
// The configuration is PYTORCH_CUDA_ALLOC_CONF from the environment, which PyTorch reads at
// start-up and allocbench gets as -c. Exit status: 0 when the decisions match, 1 when they do
// not, 2 on a usage or setup error.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

extern "C" {
#include "kernels/base/clock.h"
#include "workloads/events/events.h"
#include "harness/run/pipeline.h"
#include "strategies/caching/caching.h"
#include "strategies/strategy.h"
#include "workloads/workload.h"
}

namespace cca = c10::cuda::CUDACachingAllocator;

namespace {

struct Decision {
  int action;  // ab_trace_action_t
  uint64_t addr;
  uint64_t bytes;
};

// One pass over the stream: alloc(bytes, stream) and release(ptr, bytes, stream) per event.
// Returns ns per operation; what is still live afterwards is freed, untimed.
template <class Alloc, class Release>
double pass(const ab_events_t& es, std::vector<uint64_t>& ptr, Alloc alloc, Release release) {
  size_t ops = 0;
  uint64_t t0 = ab_clock_ns();
  for (size_t i = 0; i < es.n; i++) {
    const ab_event_t& e = es.ev[i];
    if (e.kind == AB_EV_ALLOC) {
      ptr[e.id] = alloc(e.bytes, e.stream);
      ops++;
    } else if (e.kind == AB_EV_FREE) {
      release(ptr[e.id], e.bytes, e.stream);
      ptr[e.id] = 0;
      ops++;
    }
  }
  double ns = static_cast<double>(ab_clock_ns() - t0) / static_cast<double>(ops ? ops : 1);
  for (size_t i = 0; i < es.n; i++) {
    const ab_event_t& e = es.ev[i];
    if (e.kind == AB_EV_ALLOC && ptr[e.id]) {
      release(ptr[e.id], e.bytes, e.stream);
      ptr[e.id] = 0;
    }
  }
  return ns;
}

struct Timing {
  double cold = 0, median = 0, best = 0;
};

// The warm passes: their median and best.
template <class Alloc, class Release>
void warm(const ab_events_t& es, int reps, Timing& t, Alloc alloc, Release release) {
  std::vector<uint64_t> ptr(es.nids ? es.nids : 1, 0);
  std::vector<double> ns;
  for (int r = 0; r < reps; r++) ns.push_back(pass(es, ptr, alloc, release));
  std::sort(ns.begin(), ns.end());
  t.median = ns[ns.size() / 2];
  t.best = ns.front();
}

extern "C" void on_segment(void* ctx, ab_trace_action_t ev, ab_dptr_t addr, uint64_t bytes, unsigned stream) {
  (void)stream;
  static_cast<std::vector<Decision>*>(ctx)->push_back(Decision{static_cast<int>(ev), addr, bytes});
}

int action_of(cca::TraceEntry::Action a) {
  switch (a) {
    case cca::TraceEntry::SEGMENT_ALLOC: return AB_TR_SEGMENT_ALLOC;
    case cca::TraceEntry::SEGMENT_FREE: return AB_TR_SEGMENT_FREE;
    case cca::TraceEntry::SEGMENT_MAP: return AB_TR_SEGMENT_MAP;
    case cca::TraceEntry::SEGMENT_UNMAP: return AB_TR_SEGMENT_UNMAP;
    default: return -1;
  }
}

// The index of the first decision that differs in action or size, or -1 when none does.
long first_difference(const std::vector<Decision>& a, const std::vector<Decision>& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; i++)
    if (a[i].action != b[i].action || a[i].bytes != b[i].bytes) return static_cast<long>(i);
  return a.size() == b.size() ? -1 : static_cast<long>(n);
}

void report_difference(const char* who, const std::vector<Decision>& pt, const std::vector<Decision>& ours) {
  long at = first_difference(pt, ours);
  if (at < 0) {
    std::printf("  %s: identical (%zu segment decisions)\n", who, ours.size());
    return;
  }
  std::printf("  %s: DIFFERENT: %zu decisions against PyTorch's %zu; first difference at %ld:", who, ours.size(),
              pt.size(), at);
  if (static_cast<size_t>(at) < pt.size())
    std::printf(" PyTorch %s %llu bytes", ab_trace_action_name(static_cast<ab_trace_action_t>(pt[at].action)),
                static_cast<unsigned long long>(pt[at].bytes));
  if (static_cast<size_t>(at) < ours.size())
    std::printf(", allocbench %s %llu bytes", ab_trace_action_name(static_cast<ab_trace_action_t>(ours[at].action)),
                static_cast<unsigned long long>(ours[at].bytes));
  std::printf("\n");
}

// allocbench on a device: a fresh caching instance, its decisions recorded.
struct Ours {
  ab_world_t w;
  ab_device_t* dev = nullptr;
  ab_strategy_t* s = nullptr;
  std::vector<Decision> decisions;
  bool open(const char* spec, const char* conf, const std::vector<Decision>* addresses) {
    ab_pipeline_t p;
    std::memset(&p, 0, sizeof p);
    p.device = spec;
    p.strategy = "caching";
    p.conf = conf;
    std::vector<ab_addr_hint_t> plan;
    if (addresses)
      for (const Decision& d : *addresses)
        if (d.action == AB_TR_SEGMENT_ALLOC) plan.push_back(ab_addr_hint_t{d.bytes, d.addr});
    p.dev.plan = plan.empty() ? nullptr : plan.data();
    p.dev.plan_len = plan.size();
    ab_diag_t diag;
    diag.msg[0] = '\0';
    if (ab_pipeline_open(&p, &w, &diag) != AB_OK) {
      std::fprintf(stderr, "torch_compare: allocbench caching on %s: %s\n", spec, diag.msg);
      return false;
    }
    dev = w.dev;
    s = w.s;
    ab_strategy_observe(s, on_segment, &decisions);
    return true;
  }
  uint64_t alloc(uint64_t bytes, unsigned stream) {
    ab_dptr_t p = 0;
    ab_status st = ab_strategy_alloc(s, bytes, stream, &p);
    if (st != AB_OK) {
      std::fprintf(stderr, "torch_compare: allocbench: alloc of %llu bytes: %s %s\n",
                   static_cast<unsigned long long>(bytes), ab_strerror(st), dev->diag.msg);
      std::exit(2);
    }
    return p;
  }
  void release(uint64_t p, uint64_t bytes, unsigned stream) {
    ab_status st = ab_strategy_free(s, p, bytes, stream);
    if (st != AB_OK) {
      std::fprintf(stderr, "torch_compare: allocbench: free: %s %s\n", ab_strerror(st), dev->diag.msg);
      std::exit(2);
    }
  }
  int64_t peak_reserved() {
    ab_stats_t st;
    ab_strategy_stats(s, &st);
    return st.reserved_bytes.peak;
  }
  void close() {
    ab_diag_t diag;
    diag.msg[0] = '\0';
    if (ab_pipeline_close(&w, nullptr, &diag) != AB_OK) std::fprintf(stderr, "torch_compare: allocbench: %s\n", diag.msg);
  }
};

int usage() {
  std::fprintf(stderr,
               "usage: [PYTORCH_CUDA_ALLOC_CONF=CONF] torch_compare [-w WORKLOAD[:ARGS]] [--seed N] [--reps N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* workload = "random";
  uint64_t seed = 42;
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "-w") == 0 && i + 1 < argc)
      workload = argv[++i];
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else
      return usage();
  }
  if (reps < 1) return usage();
  const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  const char* conf = env ? env : "";

  ab_events_t es;
  ab_diag_t diag;
  diag.msg[0] = '\0';
  if (ab_workload_build(workload, seed, &es, &diag) != AB_OK) {
    std::fprintf(stderr, "torch_compare: %s\n", diag.msg);
    return 2;
  }
  for (size_t i = 0; i < es.n; i++)
    if (es.ev[i].kind == AB_EV_FREE && es.ev[i].aux != AB_FREE_NOW) {
      std::fprintf(stderr, "torch_compare: %s has frees completed on other streams; raw_delete has no such thing\n",
                   workload);
      return 2;
    }
  size_t ops = 0;
  for (size_t i = 0; i < es.n; i++) ops += es.ev[i].kind == AB_EV_ALLOC || es.ev[i].kind == AB_EV_FREE;

  // PyTorch: one stream (the current one), so every event goes to it.
  c10::cuda::set_device(0);
  cca::init(static_cast<int>(c10::cuda::device_count()));
  auto torch_alloc = [](uint64_t bytes, unsigned) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(cca::raw_alloc(bytes)));
  };
  auto torch_free = [](uint64_t p, uint64_t, unsigned) { cca::raw_delete(reinterpret_cast<void*>(p)); };
  Timing pt_time, ab_time;
  std::vector<Decision> pt;
  int64_t pt_peak = 0;
  std::vector<uint64_t> ptr(es.nids ? es.nids : 1, 0);
  try {
    pt_time.cold = pass(es, ptr, torch_alloc, torch_free);
    warm(es, reps, pt_time, torch_alloc, torch_free);
    // Decisions from an empty cache, with a tracker (attached last: it slows every call).
    cca::emptyCache();
    cca::resetPeakStats(0);
    cca::attachAllocatorTraceTracker([&pt](const cca::TraceEntry& te) {
      int a = action_of(te.action_);
      if (a >= 0) pt.push_back(Decision{a, static_cast<uint64_t>(te.addr_), static_cast<uint64_t>(te.size_)});
    });
    pass(es, ptr, torch_alloc, torch_free);
    pt_peak = cca::getDeviceStats(0).reserved_bytes[0].peak;
    // The tracker cannot be detached: drop what the final emptyCache records, which is
    // tidying up, not a decision of the workload (allocbench's passes end without one).
    size_t recorded = pt.size();
    cca::emptyCache();
    pt.resize(recorded);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_compare: PyTorch: %s\n", e.what());
    return 2;
  }

  // allocbench on the GPU: timed, its cold pass's decisions kept.
  Ours gpu;
  if (!gpu.open("cuda", conf, nullptr)) return 2;
  char device_name[sizeof gpu.dev->name];
  std::snprintf(device_name, sizeof device_name, "%s", gpu.dev->name);
  uint64_t total = gpu.dev->total_bytes;
  auto gpu_alloc = [&gpu](uint64_t b, unsigned s) { return gpu.alloc(b, s); };
  auto gpu_free = [&gpu](uint64_t p, uint64_t b, unsigned s) { gpu.release(p, b, s); };
  ab_time.cold = pass(es, ptr, gpu_alloc, gpu_free);
  std::vector<Decision> on_gpu = gpu.decisions;
  warm(es, reps, ab_time, gpu_alloc, gpu_free);
  gpu.close();

  // allocbench on the simulated card of this GPU's size, with PyTorch's addresses.
  char spec[64];
  std::snprintf(spec, sizeof spec, "sim:%llu", static_cast<unsigned long long>(total));
  Ours sim;
  if (!sim.open(spec, conf, &pt)) return 2;
  pass(es, ptr, [&sim](uint64_t b, unsigned s) { return sim.alloc(b, s); },
       [&sim](uint64_t p, uint64_t b, unsigned s) { sim.release(p, b, s); });
  int64_t sim_peak = sim.peak_reserved();
  std::vector<Decision> on_sim = sim.decisions;
  sim.close();

  std::printf("workload %s (%zu operations), PYTORCH_CUDA_ALLOC_CONF='%s', %s\n", es.source, ops, conf, device_name);
  std::printf("ns per operation       cold pass   warm median   warm best   (%d warm passes)\n", reps);
  std::printf("  PyTorch 2.x caching  %9.1f   %11.1f   %9.1f\n", pt_time.cold, pt_time.median, pt_time.best);
  std::printf("  allocbench caching   %9.1f   %11.1f   %9.1f\n", ab_time.cold, ab_time.median, ab_time.best);
  std::printf("  allocbench / PyTorch (warm median): %.3f\n", ab_time.median / pt_time.median);
  std::printf("decisions (PyTorch: %zu, peak reserved %lld bytes)\n", pt.size(), static_cast<long long>(pt_peak));
  report_difference("allocbench on sim with PyTorch's addresses", pt, on_sim);
  report_difference("allocbench on the GPU, cold pass", pt, on_gpu);
  std::printf("  peak reserved: allocbench on sim %lld bytes\n", static_cast<long long>(sim_peak));
  ab_events_free(&es);
  bool same = first_difference(pt, on_sim) < 0 && sim_peak == pt_peak;
  std::printf("%s\n", same ? "SAME DECISIONS" : "DECISIONS DIFFER");
  return same ? 0 : 1;
}
