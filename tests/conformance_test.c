#include "tests/check.h"
static void none(void) {}
static const ab_test_t tests[] = {{"none", none}};
AB_TEST_MAIN(tests)
