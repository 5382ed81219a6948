/* stacks_test.c: interned call stacks (workloads/events/stacks.h): each string, frame and
 * stack is kept once, whatever the number of allocations naming it; stacks read back as
 * they were given; allocations without a stack read 0. */
#include <stdio.h>
#include <string.h>

#include "workloads/events/stacks.h"
#include "tests/check.h"

static void interned_once(void) {
  ab_stacks_t st;
  ab_stacks_init(&st);
  uint32_t a = ab_stacks_frame(&st, "train.py", 8, "step", 4, 10);
  uint32_t b = ab_stacks_frame(&st, "model.py", 8, "forward", 7, 42);
  uint32_t a2 = ab_stacks_frame(&st, "train.py", 8, "step", 4, 10);
  uint32_t c = ab_stacks_frame(&st, "train.py", 8, "step", 4, 11); /* another line */
  CHECK_EQ(a, a2);
  CHECK(a != b && a != c && b != c);
  CHECK_EQ(st.nframes, 3u);
  uint32_t ab[] = {b, a}, ba[] = {a, b};
  uint32_t s1 = ab_stacks_intern(&st, ab, 2), s2 = ab_stacks_intern(&st, ba, 2), s3 = ab_stacks_intern(&st, ab, 2);
  CHECK(s1 >= 1 && s2 >= 1);
  CHECK(s1 != s2);
  CHECK_EQ(s1, s3);
  CHECK_EQ(ab_stacks_intern(&st, ab, 0), 0u);
  /* Many allocations of few stacks: the stacks do not grow with them. */
  for (uint32_t id = 0; id < 100000; id++) ab_stacks_set(&st, id, id % 3 == 0 ? s1 : id % 3 == 1 ? s2 : 0);
  ab_stacks_finish(&st);
  CHECK(!st.failed);
  CHECK_EQ(st.nstacks, 3u); /* the empty stack, s1, s2 */
  CHECK_EQ(ab_stacks_of(&st, 3), s1);
  CHECK_EQ(ab_stacks_of(&st, 4), s2);
  CHECK_EQ(ab_stacks_of(&st, 5), 0u);
  CHECK_EQ(ab_stacks_of(&st, 1u << 30), 0u); /* beyond any set */
  const uint32_t *fr = NULL;
  REQUIRE(ab_stacks_frames(&st, s1, &fr) == 2);
  CHECK_EQ(fr[0], b);
  CHECK_EQ(fr[1], a);
  CHECK(strcmp(ab_stacks_text(&st, st.frame[b].file), "model.py") == 0);
  CHECK(strcmp(ab_stacks_text(&st, st.frame[b].name), "forward") == 0);
  CHECK_EQ(st.frame[b].line, 42u);
  CHECK_EQ(ab_stacks_frames(&st, 0, &fr), 0u);
  ab_stacks_free(&st);
}

/* Thousands of distinct frames and stacks through the tables' growth: each still found. */
static void many(void) {
  ab_stacks_t st;
  ab_stacks_init(&st);
  uint32_t frames[5000], stacks[5000];
  char name[32];
  for (uint32_t i = 0; i < 5000; i++) {
    int n = snprintf(name, sizeof name, "f%u", i % 700);
    frames[i] = ab_stacks_frame(&st, "x.py", 4, name, (size_t)n, i);
  }
  for (uint32_t i = 0; i + 3 < 5000; i++) stacks[i] = ab_stacks_intern(&st, frames + i, 3);
  for (uint32_t i = 0; i < 5000; i++) {
    int n = snprintf(name, sizeof name, "f%u", i % 700);
    CHECK_EQ(ab_stacks_frame(&st, "x.py", 4, name, (size_t)n, i), frames[i]);
  }
  for (uint32_t i = 0; i + 3 < 5000; i++) CHECK_EQ(ab_stacks_intern(&st, frames + i, 3), stacks[i]);
  CHECK(!st.failed);
  CHECK_EQ(st.nframes, 5000u);
  CHECK_EQ(st.nstacks, 4997u + 1u);
  ab_stacks_free(&st);
}

/* A frame made in two steps is the frame made in one; strings are numbered file first; two
 * tables built alike are the same, and one differing in a line, a stack or an allocation's
 * stack is not, whatever the numbering of its strings. */
static void two_steps_and_sameness(void) {
  ab_stacks_t a, b;
  ab_stacks_init(&a);
  ab_stacks_init(&b);
  uint32_t f = ab_stacks_frame(&a, "m.py", 4, "fwd", 3, 5);
  CHECK_EQ(ab_stacks_string(&a, "m.py", 4), 0u); /* the file first */
  uint32_t name = ab_stacks_string(&b, "fwd", 3), file = ab_stacks_string(&b, "m.py\0junk", 9); /* cut at the NUL */
  CHECK_EQ(ab_stacks_frame_at(&b, file, name, 5), 0u);
  CHECK_EQ(f, 0u);
  CHECK_EQ(ab_stacks_frame_at(&a, ab_stacks_string(&a, "m.py", 4), ab_stacks_string(&a, "fwd", 3), 5), f);
  uint32_t sa = ab_stacks_intern(&a, &f, 1), sb = ab_stacks_intern(&b, &f, 1);
  ab_stacks_set(&a, 3, sa);
  ab_stacks_set(&b, 3, sb);
  char why[256] = "";
  CHECK_MSG(ab_stacks_same(&a, &b, why, sizeof why), "%s", why); /* the strings numbered otherwise */
  CHECK(ab_stacks_same(NULL, NULL, why, sizeof why));
  CHECK(!ab_stacks_same(&a, NULL, why, sizeof why));
  ab_stacks_set(&b, 4, sb);
  CHECK(!ab_stacks_same(&a, &b, why, sizeof why));
  CHECK_STR_CONTAINS(why, "allocation 4");
  ab_stacks_set(&a, 4, sa);
  CHECK(ab_stacks_same(&a, &b, why, sizeof why));
  ab_stacks_frame(&b, "m.py", 4, "fwd", 3, 6);
  CHECK(!ab_stacks_same(&a, &b, why, sizeof why));
  ab_stacks_frame(&a, "m.py", 4, "fwd", 3, 7);
  CHECK(!ab_stacks_same(&a, &b, why, sizeof why));
  CHECK_STR_CONTAINS(why, "frame 1");
  CHECK_EQ(ab_stacks_frame_at(&a, UINT32_MAX, 0, 1), UINT32_MAX); /* a string that failed */
  CHECK(a.failed);
  ab_stacks_free(&a);
  ab_stacks_free(&b);
}

static const ab_test_t tests[] = {
    {"interned_once", interned_once},
    {"many", many},
    {"two_steps_and_sameness", two_steps_and_sameness},
};
AB_TEST_MAIN(tests)
