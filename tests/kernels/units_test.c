/* units_test.c: sizes and option lists (kernels/base/units.c). */
#include <string.h>

#include "kernels/base/units.h"

#include "tests/check.h"

static void sizes_parse(void) {
  static const struct {
    const char *text;
    uint64_t bytes;
  } good[] = {
      {"0", 0},           {"512", 512},          {"2MiB", 2ULL << 20},       {"40GB", 40000000000ULL},
      {"1.5GiB", 3ULL << 29}, {"7.81GB", 7810000000ULL}, {"1kib", 1024},   {"3B", 3},
      {"0.5KiB", 512},    {"1TiB", 1ULL << 40},  {"18446744073709551615", UINT64_MAX},
      {"20G", 20ULL << 30}, {"2m", 2ULL << 20},    {"1.5T", 3ULL << 39},       {"20e9", 20000000000ULL},
      {"1.5E9", 1500000000ULL}, {"7e+3", 7000},   {"0.25e2", 25},             {"1e19", 10000000000000000000ULL},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t v = 1;
    ab_diag_t d = {""};
    CHECK_MSG(ab_parse_size("--budget", good[i].text, &v, &d) == AB_OK, "%s: %s", good[i].text, d.msg);
    CHECK_EQ(v, good[i].bytes);
  }
}

static void sizes_refused(void) {
  static const struct {
    const char *text, *says;
  } bad[] = {
      {"-3GB", "sign"},     {"12XB", "unknown unit 'XB'"}, {"", "empty"},      {"abc", "expected a number"},
      {"1.", "digit after"}, {"2X", "unknown unit"},        {"5 GB", "unknown unit"}, {"18446744073709551616", "too large"},
      {"1.5e0", "at position 2: 1.5e0 is not a whole number of bytes"}, {"2e", "at position 3: expected the exponent's digits"},
      {"2e9GB", "at position 4: nothing may follow the exponent"}, {"2e20", "too large"}, {"2e-3", "exponent's digits"},
      {"2GG", "unknown unit 'GG'"},
      {"20000000TB", "too large"}, {"1.5", "at position 2: a fractional size needs a unit, such as 1.5GiB"},
      {"1.5B", "a fractional size needs a unit"}, {"2.0", "a fractional size needs a unit"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 7;
    ab_diag_t d = {""};
    CHECK_MSG(ab_parse_size("--budget", bad[i].text, &v, &d) == AB_ERR_INVALID, "'%s' was accepted", bad[i].text);
    CHECK_STR_CONTAINS(d.msg, bad[i].says);
    CHECK_STR_CONTAINS(d.msg, "--budget");
    CHECK_EQ(v, 7);
  }
}

/* Which sizes read in decimal units, to be said in both (Note [Decimal sizes], cli.c). */
static void sizes_decimal(void) {
  static const char *const decimal[] = {"40GB", "1.5gb", "512KB", "2MB", "1TB"};
  static const char *const binary[] = {"40GiB", "512", "512B", "2mib", "1TiB", "4"};
  for (size_t i = 0; i < sizeof decimal / sizeof decimal[0]; i++) CHECK_MSG(ab_size_is_decimal(decimal[i]), "%s", decimal[i]);
  for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) CHECK_MSG(!ab_size_is_decimal(binary[i]), "%s", binary[i]);
}

/* A bare letter stands for the binary unit, and the command line says which. */
static void sizes_bare_unit(void) {
  static const char *const bare[][2] = {{"20G", "GiB"}, {"1.5t", "TiB"}, {"512k", "KiB"}, {"2M", "MiB"}};
  for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
    const char *unit = ab_size_bare_unit(bare[i][0]);
    CHECK_MSG(unit && strcmp(unit, bare[i][1]) == 0, "%s: %s", bare[i][0], unit ? unit : "(none)");
  }
  CHECK(ab_size_bare_unit("20GB") == NULL && ab_size_bare_unit("20GiB") == NULL && ab_size_bare_unit("20e9") == NULL);
  CHECK(ab_size_bare_unit("G") == NULL && !ab_size_is_decimal("20G"));
}

static void numbers(void) {
  uint64_t v;
  ab_diag_t d;
  CHECK(ab_parse_u64("--seed", "42", UINT64_MAX, &v, &d) == AB_OK && v == 42);
  CHECK(ab_parse_u64("--seed", "abc", UINT64_MAX, &v, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "at position 1");
  CHECK(ab_parse_u64("--seed", "4x", UINT64_MAX, &v, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "at position 2");
  CHECK(ab_parse_u64("n", "101", 100, &v, &d) == AB_ERR_INVALID);
  /* A one-digit number above a one-digit maximum. */
  CHECK(ab_parse_u64("n", "2", 1, &v, &d) == AB_ERR_INVALID);
  CHECK(ab_parse_u64("n", "1", 1, &v, &d) == AB_OK && v == 1);
  CHECK(ab_parse_u64("n", "0", 0, &v, &d) == AB_OK && v == 0);
  CHECK(ab_parse_u64("n", "-1", 100, &v, &d) == AB_ERR_INVALID);
}

static void torch_format(void) {
  char b[32];
  CHECK(strcmp(ab_format_bytes_torch(1024, b, sizeof b), "1024 bytes") == 0);
  CHECK(strcmp(ab_format_bytes_torch(1048576, b, sizeof b), "1024.00 KiB") == 0);
  CHECK(strcmp(ab_format_bytes_torch(20971520, b, sizeof b), "20.00 MiB") == 0);
  CHECK(strcmp(ab_format_bytes_torch(3ULL << 30, b, sizeof b), "3.00 GiB") == 0);
  CHECK(strcmp(ab_format_bytes(512, b, sizeof b), "512 B") == 0);
  CHECK(strcmp(ab_format_bytes(3ULL << 29, b, sizeof b), "1.50 GiB") == 0);
}

/* Counts set side by side read apart where they differ, and alike where they do not. */
static void apart_format(void) {
  char out[6][AB_BYTES_TEXT];
  /* Far apart: two decimals, as ab_format_bytes. */
  const uint64_t far[] = {256 * AB_MiB, 320 * AB_MiB, 512};
  ab_format_bytes_apart(far, 3, out);
  CHECK(strcmp(out[0], "256.00 MiB") == 0 && strcmp(out[1], "320.00 MiB") == 0 && strcmp(out[2], "512 B") == 0);
  /* 20 KiB apart at 256 MiB: 256.02 against 256.00 already; 2 KiB apart needs a third decimal,
   * for every count of the set. */
  const uint64_t near[] = {256 * AB_MiB, 256 * AB_MiB + 2048, 300 * AB_MiB};
  ab_format_bytes_apart(near, 3, out);
  CHECK_STR_CONTAINS(out[0], "256.000 MiB");
  CHECK_STR_CONTAINS(out[1], "256.002 MiB");
  CHECK_STR_CONTAINS(out[2], "300.000 MiB");
  /* One byte apart: the two decimals kept, each of the pair followed by its exact count; the
   * count equal to one of them reads as it does; the one apart from both stays short. */
  const uint64_t byte[] = {94177280, 94177279, 94177280, 111122432};
  ab_format_bytes_apart(byte, 4, out);
  CHECK(strcmp(out[0], "89.81 MiB (94177280 B)") == 0);
  CHECK(strcmp(out[1], "89.81 MiB (94177279 B)") == 0);
  CHECK(strcmp(out[2], out[0]) == 0);
  CHECK(strcmp(out[3], "105.97 MiB") == 0);
  /* The largest counts fit. */
  const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 1};
  ab_format_bytes_apart(huge, 2, out);
  CHECK(strcmp(out[0], out[1]) != 0);
  ab_format_bytes_apart(NULL, 0, out);
}

static void option_lists(void) {
  ab_kvlist_t l;
  ab_diag_t d = {""};
  REQUIRE(ab_kv_parse("-c", " max_split_size_mb:128, roundup_power2_divisions:[64:8,>:1],x:y", ':', &l, &d) == AB_OK);
  CHECK_EQ(l.n, 3);
  ab_kv_t *kv = ab_kv_get(&l, "roundup_power2_divisions");
  REQUIRE(kv != NULL);
  CHECK(kv->val_len == 10 && memcmp(kv->val, "[64:8,>:1]", 10) == 0);
  uint64_t v = 0;
  CHECK(ab_kv_get_u64(&l, "max_split_size_mb", 0, 1000, &v, &d) == AB_OK && v == 128);
  CHECK(ab_kv_finish(&l, "a, b", &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "unknown key 'x'");
  CHECK_STR_CONTAINS(d.msg, "position 61");

  /* A later key overrides an earlier one. */
  REQUIRE(ab_kv_parse("-c", "a:1,a:2", ':', &l, &d) == AB_OK);
  CHECK(ab_kv_get_u64(&l, "a", 0, 9, &v, &d) == AB_OK && v == 2);
  CHECK(ab_kv_finish(&l, "a", &d) == AB_OK);

  static const char *const bad[] = {"abc", "a:1,,b:2", "[a:1", "a]:1", ":1", "a b:1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_MSG(ab_kv_parse("-c", bad[i], ':', &l, &d) == AB_ERR_INVALID, "'%s' was accepted", bad[i]);

  REQUIRE(ab_kv_parse("-c", "max_split_size_mb:abc", ':', &l, &d) == AB_OK);
  CHECK(ab_kv_get_u64(&l, "max_split_size_mb", 20, UINT64_MAX, &v, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "max_split_size_mb:abc");
  REQUIRE(ab_kv_parse("-w", "b=maybe,s=2XB,x=1.5,c=blue", '=', &l, &d) == AB_OK);
  bool b;
  CHECK(ab_kv_get_bool(&l, "b", &b, &d) == AB_ERR_INVALID);
  CHECK(ab_kv_get_size(&l, "s", &v, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "unknown unit");
  double x = 0;
  CHECK(ab_kv_get_double(&l, "x", 0, 1, &x, &d) == AB_ERR_INVALID);
  static const char *const colours[] = {"red", "green", NULL};
  int c = -1;
  CHECK(ab_kv_get_choice(&l, "c", colours, &c, &d) == AB_ERR_INVALID);
  CHECK_STR_CONTAINS(d.msg, "red, green");
}

static const ab_test_t tests[] = {
    {"sizes_parse", sizes_parse}, {"sizes_refused", sizes_refused}, {"sizes_decimal", sizes_decimal}, {"sizes_bare_unit", sizes_bare_unit}, {"numbers", numbers},
    {"torch_format", torch_format}, {"apart_format", apart_format}, {"option_lists", option_lists},
};
AB_TEST_MAIN(tests)
