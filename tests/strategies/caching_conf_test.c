/* caching_conf_test.c: PYTORCH_CUDA_ALLOC_CONF as PyTorch 2.11 reads it
 * (strategies/protocol/caching_conf.c): the strings PyTorch accepts and refuses, with its error text
 * (PyTorch v2.11.0, c10/core/AllocatorConfig.cpp and c10/cuda/CUDAAllocatorConfig.cpp, the
 * parseArgs of each, and their tests in test/test_cuda.py). */
#include <string.h>

#include "strategies/protocol/caching_conf.h"

#include "tests/check.h"

#define MiB (1ULL << 20)

static ab_caching_conf_t parsed(const char *text) {
  ab_caching_conf_t c;
  ab_caching_conf_defaults(&c);
  ab_diag_t d = {""};
  ab_status st = ab_caching_conf_apply(&c, "-c", text, &d);
  CHECK_MSG(st == AB_OK, "'%s' was refused: %s", text, d.msg);
  return c;
}

/* Expects text to be refused with a message containing says. */
static void refused(const char *text, const char *says) {
  ab_caching_conf_t c, before;
  ab_caching_conf_defaults(&c);
  before = c;
  ab_diag_t d = {""};
  CHECK_MSG(ab_caching_conf_apply(&c, "-c", text, &d) == AB_ERR_INVALID, "'%s' was accepted", text);
  CHECK_STR_CONTAINS(d.msg, says);
  CHECK_STR_CONTAINS(d.msg, "-c '");
  CHECK_MSG(memcmp(&c, &before, sizeof c) == 0, "'%s' changed the configuration although refused", text);
}

static void defaults_are_pytorchs(void) {
  ab_caching_conf_t c = parsed("");
  CHECK(c.max_split_size == UINT64_MAX);
  CHECK_EQ(c.large_segment_size, 20 * MiB);
  CHECK_EQ(c.max_non_split_rounding, 20 * MiB);
  CHECK(c.gc_threshold == 0.0 && c.memory_fraction == 1.0 && !c.expandable);
  for (int i = 0; i < AB_CACHING_DIVISION_INTERVALS; i++) CHECK_EQ(c.divisions[i], 0);
  CHECK_EQ(c.ignored[0], '\0');
}

/* The keys of section 9.1 H that PyTorch accepts, and what they set. */
static void test_allocator_settings_accepted(void) {
  CHECK_EQ(parsed("max_split_size_mb:40").max_split_size, 40 * MiB);
  CHECK_EQ(parsed(" max_split_size_mb : 128 ").max_split_size, 128 * MiB);
  CHECK(parsed("garbage_collection_threshold:0.5").gc_threshold == 0.5);
  CHECK(parsed("expandable_segments:True").expandable);
  CHECK(!parsed("expandable_segments:False").expandable);
  CHECK_EQ(parsed("max_non_split_rounding_mb:50").max_non_split_rounding, 50 * MiB);
  ab_caching_conf_t c = parsed("release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False,"
                               "pinned_num_register_threads:8,graph_capture_record_stream_reuse:True");
  CHECK_STR_CONTAINS(c.ignored, "release_lock_on_cudamalloc");
  CHECK_STR_CONTAINS(c.ignored, "pinned_num_register_threads");
  CHECK(strstr(c.ignored, "graph_capture_record_stream_reuse") == NULL); /* it changes decisions in captures */
  CHECK(c.capture_reuse);
  /* Without effect, but a snapshot reports their values (snapshot.c). */
  CHECK(c.release_lock && !c.host_register);
  CHECK_EQ(c.register_threads, 8);
  CHECK_EQ(parsed("").register_threads, 1);
  CHECK(parsed("pinned_use_hip_host_register:True").host_register);
  CHECK(!parsed("pinned_use_hip_host_register:True").release_lock);
  CHECK(!parsed("graph_capture_record_stream_reuse:False").capture_reuse);
  CHECK(parsed("backend:native").max_split_size == UINT64_MAX);
}

/* Section 1.3: the single value fills every interval; the list's first key also fills the
 * lower ones, '>' the ones after the last key. */
static void roundup_power2_divisions_forms(void) {
  ab_caching_conf_t c = parsed("roundup_power2_divisions:4");
  for (int i = 0; i < AB_CACHING_DIVISION_INTERVALS; i++) CHECK_EQ(c.divisions[i], 4);
  c = parsed("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]");
  static const uint64_t want[16] = {8, 8, 8, 8, 8, 8, 8, 2, 2, 2, 1, 1, 1, 1, 1, 1};
  for (int i = 0; i < AB_CACHING_DIVISION_INTERVALS; i++) CHECK_EQ(c.divisions[i], want[i]);
  c = parsed("roundup_power2_divisions:[1:4, 256:2, >:0]");
  CHECK_EQ(c.divisions[0], 4);
  CHECK_EQ(c.divisions[7], 0);
  CHECK_EQ(c.divisions[8], 2);
  CHECK_EQ(c.divisions[9], 0);
  /* '>' first fills from index 1: the first interval keeps its value. */
  c = parsed("roundup_power2_divisions:[>:4]");
  CHECK_EQ(c.divisions[0], 0);
  CHECK_EQ(c.divisions[1], 4);
  /* Keys past 32 GiB land in the last interval. */
  c = parsed("roundup_power2_divisions:[65536:16]");
  CHECK_EQ(c.divisions[15], 16);
  CHECK_EQ(c.divisions[14], 16);
}

/* Section 12: later keys override earlier ones, as the registry's presets rely on. */
static void later_key_overrides(void) {
  CHECK_EQ(parsed("max_split_size_mb:128,max_split_size_mb:256").max_split_size, 256 * MiB);
  CHECK(!parsed("expandable_segments:True,expandable_segments:False").expandable);
  ab_caching_conf_t c = parsed("roundup_power2_divisions:4,roundup_power2_divisions:[256:2]");
  CHECK_EQ(c.divisions[0], 2);
  CHECK_EQ(c.divisions[8], 2);
  CHECK_EQ(c.divisions[9], 4); /* the list edits the table in place */
}

/* large_segment_size_mb is read first, whatever its place: the minimum of max_split_size_mb
 * and the rounding default follow it. */
static void large_segment_size_first(void) {
  ab_caching_conf_t c = parsed("large_segment_size_mb:40");
  CHECK_EQ(c.large_segment_size, 40 * MiB);
  CHECK_EQ(c.max_non_split_rounding, 40 * MiB);
  refused("max_split_size_mb:30,large_segment_size_mb:40", "max_split_size_mb too small, must be >= 40");
  refused("large_segment_size_mb:10", "large_segment_size_mb must be > 10 MB");
  CHECK_EQ(parsed("large_segment_size_mb:12,max_split_size_mb:12").max_split_size, 12 * MiB);
}

/* Every parse resets max_split_size, the divisions and the GC threshold; the rest stays. */
static void each_parse_resets(void) {
  ab_caching_conf_t c = parsed("roundup_power2_divisions:4,garbage_collection_threshold:0.5,expandable_segments:True,"
                               "max_split_size_mb:40,large_segment_size_mb:30,max_non_split_rounding_mb:60");
  ab_diag_t d = {""};
  REQUIRE(ab_caching_conf_apply(&c, "settings", "release_lock_on_cudamalloc:True", &d) == AB_OK);
  CHECK_EQ(c.divisions[5], 0);
  CHECK(c.gc_threshold == 0.0);
  CHECK(c.max_split_size == UINT64_MAX);
  CHECK(c.expandable);
  CHECK_EQ(c.large_segment_size, 30 * MiB);
  CHECK_EQ(c.max_non_split_rounding, 30 * MiB);
}

/* PyTorch reads numbers with std::stoull / std::stod, which stop at the first character
 * that cannot continue the number, and does not check the separators between items. */
static void pytorch_quirks_accepted(void) {
  CHECK_EQ(parsed("max_split_size_mb:128MB").max_split_size, 128 * MiB);
  CHECK(parsed("garbage_collection_threshold:0.5x").gc_threshold == 0.5);
  ab_caching_conf_t c = parsed("max_split_size_mb:128:expandable_segments:True");
  CHECK_EQ(c.max_split_size, 128 * MiB);
  CHECK(c.expandable);
}

/* Section 9.1 H: the strings test_allocator_settings expects to raise, and ours. */
static void test_allocator_settings_refused(void) {
  refused("foo:1,bar:2", "Unrecognized key 'foo' in Accelerator allocator config.");
  refused("garbage_collection_threshold:1.2", "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
  refused("garbage_collection_threshold:0", "garbage_collect_threshold is invalid");
  refused("max_split_size_mb:2", "CachingAllocator option max_split_size_mb too small, must be >= 20");
  refused("release_lock_on_cudamalloc:none", "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'none'");
  refused("pinned_use_cuda_host_register:none", "Expected 'True' or 'False' at index 2");
  refused("pinned_num_register_threads:none", "expected a whole number, got 'none'");
  refused("pinned_num_register_threads:1024", "Number of register threads should be less than or equal to 128, got 1024");
  refused("pinned_num_register_threads:3", "Number of register threads has to be power of 2, got 3");
  refused("max_split_size_mb:abc", "max_split_size_mb: expected a whole number, got 'abc'");
  refused("max_non_split_rounding_mb:10", "max_non_split_rounding_mb too small, must be >= 20");
  refused("expandable_segments:true", "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'");
  refused("roundup_power2_divisions:3", "For roundups, the divisions has to be power of 2 ");
  refused("roundup_power2_divisions:0", "For roundups, the divisions has to be power of 2 ");
  refused("roundup_power2_divisions:[64:3]", "the divisions has to be power of 2 or 0 to disable roundup");
  refused("roundup_power2_divisions:[63:4]", "For roundups, the intervals have to be power of 2 ");
  refused("roundup_power2_divisions:[64:8", "at position 31: 'roundup_power2_divisions': the list opened at position 26 lacks its closing ']'");
  refused("roundup_power2_divisions:[64:8,256:4", "the list opened at position 26 lacks its closing ']'");
  refused("max_split_size_mb", "'max_split_size_mb' lacks its value");
  refused("max_split_size_mb:", "'max_split_size_mb' lacks its value");
  refused("pinned_reserve_segment_size_mb:0", "Pinned reserve segment size has to be greater than 0");
  refused("backend:foo", "Unknown allocator backend, options are native and cudaMallocAsync");
  refused("backend:cudaMallocAsync", "-s async");
  refused("max_split_size_mb:128,,expandable_segments:True", "Unrecognized key ','");
  /* Keys of PyTorch releases after 2.11. */
  refused("throw_on_cudamalloc_oom:True", "Unrecognized key 'throw_on_cudamalloc_oom'");
  /* After PyTorch's words, the fix. */
  refused("expandable_segments:true", "but got 'true': use True");
  refused("expandable_segments:FALSE", "but got 'FALSE': use False");
  refused("expandable_segments:yes", "but got 'yes': use True or False");
  refused("max_split_sise_mb:128", "Unrecognized key 'max_split_sise_mb' in Accelerator allocator config. Did you mean 'max_split_size_mb'?");
  refused("garbage_colection_threshold:0.5", "Did you mean 'garbage_collection_threshold'?");
  refused("max_split_size_mb:128;expandable_segments:True", "config. Separate the keys with ',', not ';'.");
  refused("expandable_segments:True;max_split_size_mb:128", "got 'True;max_split_size_mb': separate the keys with ',', not ';'");
}

/* Section 9.1 G: per_process_memory_fraction is a fraction in [0, 1]. */
static void test_allocator_memory_fraction_setting(void) {
  CHECK(parsed("per_process_memory_fraction:0.0").memory_fraction == 0.0);
  CHECK(parsed("per_process_memory_fraction:0.5").memory_fraction == 0.5);
  CHECK(parsed("per_process_memory_fraction:1.0").memory_fraction == 1.0);
  refused("per_process_memory_fraction:-0.1", "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
  refused("per_process_memory_fraction:1.1", "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
}

/* Common keys are read before CUDA keys: their errors come first, wherever they stand. */
static void passes_in_pytorchs_order(void) {
  refused("release_lock_on_cudamalloc:none,max_split_size_mb:2", "max_split_size_mb too small");
  refused("release_lock_on_cudamalloc:True,bogus:1", "Unrecognized key 'bogus'");
}

static void error_positions(void) {
  ab_caching_conf_t c;
  ab_caching_conf_defaults(&c);
  ab_diag_t d = {""};
  CHECK(ab_caching_conf_apply(&c, "-c", "expandable_segments:True,max_split_size_mb:2", &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "-c 'expandable_segments:True,max_split_size_mb:2': at position 44:");
  CHECK(ab_caching_conf_apply(&c, "-c", "max_split_size_mb: abc", &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "at position 20:");
}

static const ab_test_t tests[] = {
    {"defaults_are_pytorchs", defaults_are_pytorchs},
    {"test_allocator_settings_accepted", test_allocator_settings_accepted},
    {"roundup_power2_divisions_forms", roundup_power2_divisions_forms},
    {"later_key_overrides", later_key_overrides},
    {"large_segment_size_first", large_segment_size_first},
    {"each_parse_resets", each_parse_resets},
    {"pytorch_quirks_accepted", pytorch_quirks_accepted},
    {"test_allocator_settings_refused", test_allocator_settings_refused},
    {"test_allocator_memory_fraction_setting", test_allocator_memory_fraction_setting},
    {"passes_in_pytorchs_order", passes_in_pytorchs_order},
    {"error_positions", error_positions},
};

AB_TEST_MAIN(tests)
