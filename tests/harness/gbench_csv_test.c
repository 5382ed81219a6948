/* gbench_csv_test.c: Google Benchmark's JSON to the micro-benchmarks' CSV. */
#include "harness/micro/gbench_csv.h"

#include <unistd.h>

#include "tests/check.h"

/* What the library writes (1.7 and 1.8 layouts mixed: fields of both appear), trimmed. */
static const char sample[] =
    "{\n"
    "  \"context\": {\n"
    "    \"date\": \"2026-11-29T09:28:51+00:00\",\n"
    "    \"caches\": [{\"type\": \"Data\", \"level\": 1, \"size\": 32768, \"num_sharing\": 1}],\n"
    "    \"load_avg\": [0.24,0.22,0.13],\n"
    "    \"library_build_type\": \"debug\",\n"
    "    \"device\": \"sim:h200\",\n"
    "    \"trace\": \"/x/cnn_dyn.default.trace.csv.gz\"\n"
    "  },\n"
    "  \"benchmarks\": [\n"
    "    {\n"
    "      \"name\": \"alloc_free/raw/bytes:512/manual_time\",\n"
    "      \"family_index\": 0,\n"
    "      \"run_name\": \"alloc_free/raw/bytes:512/manual_time\",\n"
    "      \"run_type\": \"iteration\",\n"
    "      \"repetitions\": 1,\n"
    "      \"threads\": 1,\n"
    "      \"iterations\": 177,\n"
    "      \"real_time\": 7.9077e+04,\n"
    "      \"cpu_time\": 1.18e+02,\n"
    "      \"time_unit\": \"ns\",\n"
    "      \"device_allocs\": 1.0e+00,\n"
    "      \"items_per_second\": 1.2645885832514014e+04\n"
    "    },\n"
    "    {\n"
    "      \"name\": \"random/caching/ops:200000/manual_time_mean\",\n"
    "      \"run_name\": \"random/caching/ops:200000/manual_time\",\n"
    "      \"run_type\": \"aggregate\",\n"
    "      \"aggregate_name\": \"mean\",\n"
    "      \"iterations\": 3,\n"
    "      \"real_time\": 35.5,\n"
    "      \"cpu_time\": 0.0151,\n"
    "      \"time_unit\": \"ms\"\n"
    "    },\n"
    "    {\n"
    "      \"name\": \"replay/split-limited/cnn\\u005fdyn/threads:1\",\n"
    "      \"run_type\": \"iteration\",\n"
    "      \"error_occurred\": true,\n"
    "      \"error_message\": \"out of memory: at event 12, \\\"quoted\\\"\",\n"
    "      \"iterations\": 0,\n"
    "      \"real_time\": NaN,\n"
    "      \"cpu_time\": 0,\n"
    "      \"time_unit\": \"us\"\n"
    "    }\n"
    "  ]\n"
    "}\n";

static ab_status parse(const char *text, size_t len, ab_table_t *t, ab_diag_t *diag) {
  ab_table_init(t, ab_gbench_csv_cols, ab_gbench_csv_ncols);
  return ab_gbench_csv_parse(text, len, "sample.json", t, diag);
}

#define CELL(t, r, col) ab_table_get((t), (r), (col))
#define CHECK_CELL(t, r, col, want) \
  CHECK_MSG(strcmp(CELL(t, r, col), (want)) == 0, "row %d %s: '%s', expected '%s'", (r), (col), CELL(t, r, col), (want))

static void rows_and_columns(void) {
  ab_table_t t;
  ab_diag_t diag = {""};
  REQUIRE_MSG(parse(sample, strlen(sample), &t, &diag) == AB_OK, "%s", diag.msg);
  REQUIRE(t.nrows == 3);
  CHECK_CELL(&t, 0, "name", "alloc_free/raw/bytes:512/manual_time");
  CHECK_CELL(&t, 0, "workload", "alloc_free");
  CHECK_CELL(&t, 0, "strategy", "raw");
  CHECK_CELL(&t, 0, "args", "bytes:512");
  CHECK_CELL(&t, 0, "device", "sim:h200");
  CHECK_CELL(&t, 0, "run_type", "iteration");
  CHECK_CELL(&t, 0, "aggregate", "");
  CHECK_CELL(&t, 0, "iterations", "177");
  CHECK_CELL(&t, 0, "real_ns", "79077");
  CHECK_CELL(&t, 0, "cpu_ns", "118");
  CHECK_CELL(&t, 0, "items_per_second", "12645.9");
  CHECK_CELL(&t, 0, "device_allocs", "1");
  CHECK_CELL(&t, 0, "error", "");
  /* Aggregates keep their run's name parts; milliseconds become nanoseconds. */
  CHECK_CELL(&t, 1, "strategy", "caching");
  CHECK_CELL(&t, 1, "args", "ops:200000");
  CHECK_CELL(&t, 1, "run_type", "aggregate");
  CHECK_CELL(&t, 1, "aggregate", "mean");
  CHECK_CELL(&t, 1, "real_ns", "3.55e+07");
  CHECK_CELL(&t, 1, "cpu_ns", "15100");
  CHECK_CELL(&t, 1, "items_per_second", "");
  /* Escapes decoded, decorations dropped, the error kept. */
  CHECK_CELL(&t, 2, "strategy", "split-limited");
  CHECK_CELL(&t, 2, "args", "cnn_dyn");
  CHECK_CELL(&t, 2, "error", "out of memory: at event 12, \"quoted\"");
  CHECK_CELL(&t, 2, "real_ns", "nan");
  ab_table_free(&t);
}

static void empty_benchmarks(void) {
  ab_table_t t;
  ab_diag_t diag = {""};
  const char *text = "{\"context\": {}, \"benchmarks\": []}";
  CHECK_MSG(parse(text, strlen(text), &t, &diag) == AB_OK, "%s", diag.msg);
  CHECK(t.nrows == 0);
  ab_table_free(&t);
}

/* Every prefix of the sample is refused with the file and a byte offset, never a crash. */
static void truncated_anywhere(void) {
  size_t len = strlen(sample);
  /* The last bytes are the closing brace and a newline: the one-shorter prefix still parses. */
  for (size_t cut = 0; cut + 2 < len; cut++) {
    ab_table_t t;
    ab_diag_t diag = {""};
    ab_status st = parse(sample, cut, &t, &diag);
    CHECK_MSG(st == AB_ERR_INVALID, "cut at %zu: status %s", cut, ab_status_name(st));
    if (st == AB_ERR_INVALID) CHECK_STR_CONTAINS(diag.msg, "sample.json: byte ");
    ab_table_free(&t);
  }
}

static void refused(void) {
  static const struct {
    const char *text, *says;
  } cases[] = {
      {"[]", "expected an object"},
      {"{\"benchmarks\": {}}", "an array for \"benchmarks\""},
      {"{\"benchmarks\": [{\"iterations\": 1}]}", "a \"name\" in each benchmark"},
      {"{\"benchmarks\": [{\"name\": \"a/b\", \"time_unit\": \"fortnight\"}]}", "a time_unit"},
      {"{\"benchmarks\": [{\"name\": [1]}]}", "a scalar for \"name\""},
      {"{\"benchmarks\": [{\"name\": \"a/b\", \"real_time\": 12abc}]}", "a number"},
      {"{\"x\": \"bad \\q escape\"}", "an escape"},
      {"{} trailing", "the end of the file"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ab_table_t t;
    ab_diag_t diag = {""};
    CHECK_MSG(parse(cases[i].text, strlen(cases[i].text), &t, &diag) == AB_ERR_INVALID, "accepted %s", cases[i].text);
    CHECK_STR_CONTAINS(diag.msg, cases[i].says);
    ab_table_free(&t);
  }
}

static void convert_files(void) {
  char dir[] = "/tmp/ab_gbench_csv_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  char json[128], csv[128];
  snprintf(json, sizeof json, "%s/micro.json", dir);
  snprintf(csv, sizeof csv, "%s/micro.csv", dir);
  FILE *f = fopen(json, "w");
  REQUIRE(f != NULL);
  fputs(sample, f);
  fclose(f);
  ab_diag_t diag = {""};
  ab_gbench_context_t context = {"unread"};
  CHECK_MSG(ab_gbench_csv_convert(json, csv, &context, &diag) == AB_OK, "%s", diag.msg);
  CHECK_STR_CONTAINS(context.library_build_type, "debug"); /* the sample's library was built so */
  char line[512] = "";
  f = fopen(csv, "r");
  REQUIRE(f != NULL);
  CHECK(fgets(line, sizeof line, f) != NULL);
  CHECK(strncmp(line, "name,workload,strategy,args,device,", 35) == 0);
  int rows = 0;
  while (fgets(line, sizeof line, f)) rows++;
  fclose(f);
  CHECK_EQ(rows, 3);
  CHECK(ab_gbench_csv_convert("/nonexistent/micro.json", csv, NULL, &diag) == AB_ERR_IO);
  CHECK_STR_CONTAINS(diag.msg, "/nonexistent/micro.json");
  remove(json);
  remove(csv);
  rmdir(dir);
}

static const ab_test_t tests[] = {
    {"rows_and_columns", rows_and_columns}, {"empty_benchmarks", empty_benchmarks},
    {"truncated_anywhere", truncated_anywhere}, {"refused", refused}, {"convert_files", convert_files},
};
AB_TEST_MAIN(tests)
