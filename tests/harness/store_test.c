/* store_test.c: the TCPStore client (harness/ranks/store.h), and the link over it (link.h),
 * against a server tests/launch_test.sh
 * starts: PyTorch's own TCPStore where PyTorch is installed, and tests/store_server.py, which
 * speaks the protocol with the handshake, as the classic and the libuv 2.x servers. The
 * server's address comes in AB_TEST_STORE (HOST:PORT) and the protocol it speaks in
 * AB_TEST_STORE_PROTOCOL (1 or 2); without them the tests skip. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels/base/clock.h"
#include "harness/ranks/link.h"
#include "harness/ranks/store.h"

#include "tests/check.h"

static char host[256], port[16];

/* The server of AB_TEST_STORE, or a skip. */
static bool server(void) {
  const char *at = getenv("AB_TEST_STORE");
  const char *colon = at ? strrchr(at, ':') : NULL;
  if (colon == NULL) return false;
  snprintf(host, sizeof host, "%.*s", (int)(colon - at), at);
  snprintf(port, sizeof port, "%s", colon + 1);
  return true;
}

static ab_store_t *open_store(const volatile sig_atomic_t *stop) {
  ab_store_t *s = NULL;
  ab_diag_t diag = {""};
  ab_status st = ab_store_open(host, port, 10, 10, stop, NULL, &s, &diag);
  CHECK_MSG(st == AB_OK, "%s", diag.msg);
  return st == AB_OK ? s : NULL;
}

/* It speaks the protocol the server speaks; set, get, add, check and delete do what
 * PyTorch's do, with values of every byte and of a megabyte. */
static void commands(void) {
  if (!server()) SKIP("no AB_TEST_STORE");
  ab_store_t *s = open_store(NULL);
  REQUIRE(s);
  const char *want = getenv("AB_TEST_STORE_PROTOCOL");
  if (want) CHECK_EQ(ab_store_protocol(s), atoi(want));
  ab_diag_t diag = {""};
  unsigned char bytes[256];
  for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)i;
  CHECK(ab_store_set(s, "/allocbench/test/bytes", bytes, sizeof bytes, &diag) == AB_OK);
  void *v = NULL;
  size_t n = 0;
  REQUIRE_MSG(ab_store_get(s, "/allocbench/test/bytes", &v, &n, &diag) == AB_OK, "%s", diag.msg);
  CHECK(n == sizeof bytes && memcmp(v, bytes, n) == 0);
  free(v);
  size_t big = (size_t)1 << 20;
  unsigned char *m = malloc(big);
  REQUIRE(m);
  for (size_t i = 0; i < big; i++) m[i] = (unsigned char)(i * 31 + 7);
  CHECK(ab_store_set(s, "/allocbench/test/big", m, big, &diag) == AB_OK);
  REQUIRE_MSG(ab_store_get(s, "/allocbench/test/big", &v, &n, &diag) == AB_OK, "%s", diag.msg);
  CHECK(n == big && memcmp(v, m, n) == 0);
  free(v);
  free(m);
  int64_t sum = 0;
  CHECK(ab_store_add(s, "/allocbench/test/count", 5, &sum, &diag) == AB_OK && sum == 5);
  CHECK(ab_store_add(s, "/allocbench/test/count", -2, &sum, &diag) == AB_OK && sum == 3);
  REQUIRE(ab_store_get(s, "/allocbench/test/count", &v, &n, &diag) == AB_OK);
  CHECK(n == 1 && memcmp(v, "3", 1) == 0); /* kept as decimal text */
  free(v);
  bool ready = true;
  const char *two[] = {"/allocbench/test/bytes", "/allocbench/test/none"};
  CHECK(ab_store_check(s, two, 1, &ready, &diag) == AB_OK && ready);
  CHECK(ab_store_check(s, two, 2, &ready, &diag) == AB_OK && !ready);
  CHECK(ab_store_delete(s, "/allocbench/test/bytes", &diag) == AB_OK);
  CHECK(ab_store_check(s, two, 1, &ready, &diag) == AB_OK && !ready);
  /* A key for PyTorch's own client to read (launch_test.sh), which adds the "/". */
  CHECK(ab_store_set(s, "/allocbench/test/visible", "hello", 5, &diag) == AB_OK);
  ab_store_close(s);
}

/* A wait ends when the key comes, at its deadline, or at once with a stop; after one given
 * up, the next call works on a new connection. */
static void waits(void) {
  if (!server()) SKIP("no AB_TEST_STORE");
  ab_store_t *a = open_store(NULL), *b = open_store(NULL);
  REQUIRE(a && b);
  ab_diag_t diag = {""};
  char key[64];
  snprintf(key, sizeof key, "/allocbench/test/late.%d", (int)getpid());
  double t0 = ab_clock_s();
  CHECK_EQ(ab_store_wait(a, key, t0 + 0.3, &diag), AB_WAIT_TIMEOUT);
  double took = ab_clock_s() - t0;
  CHECK_MSG(took >= 0.29 && took < 1.5, "%g s", took);
  CHECK(ab_store_set(b, key, "x", 1, &diag) == AB_OK);
  CHECK_EQ(ab_store_wait(a, key, ab_clock_s() + 10, &diag), AB_WAIT_DONE);
  void *v = NULL;
  size_t n = 0;
  CHECK(ab_store_get(a, key, &v, &n, &diag) == AB_OK && n == 1);
  free(v);
  static volatile sig_atomic_t stop = 0;
  ab_store_t *c = open_store(&stop);
  REQUIRE(c);
  stop = SIGTERM;
  t0 = ab_clock_s();
  CHECK_EQ(ab_store_wait(c, "/allocbench/test/never", t0 + 30, &diag), AB_WAIT_STOPPED);
  CHECK(ab_clock_s() - t0 < 1.0);
  ab_store_close(a);
  ab_store_close(b);
  ab_store_close(c);
}

/* Two ranks' links through the store (link.h): a message larger than a value may be goes in
 * chunks and comes back whole, messages keep their order, and each key read is deleted. */
static void link_messages(void) {
  if (!server()) SKIP("no AB_TEST_STORE");
  ab_launch_t la;
  memset(&la, 0, sizeof la);
  la.kind = AB_LAUNCH_STORE;
  la.world = 2;
  snprintf(la.addr, sizeof la.addr, "%s", host);
  snprintf(la.port, sizeof la.port, "%s", port);
  snprintf(la.prefix, sizeof la.prefix, "/allocbench/test-%d/0/", (int)getpid());
  ab_waits_t w = {.meet_s = 10, .collective_s = 10, .results_s = 10};
  ab_link_t *l[2] = {NULL, NULL};
  ab_diag_t diag = {""};
  for (unsigned r = 0; r < 2; r++) {
    la.rank = la.local_rank = r;
    REQUIRE_MSG(ab_link_open_store(&la, &w, &l[r], &diag) == AB_OK, "%s", diag.msg);
  }
  size_t big = 2 * AB_STORE_VALUE_MAX_BYTES + 12345;
  unsigned char *m = malloc(big);
  REQUIRE(m);
  for (size_t i = 0; i < big; i++) m[i] = (unsigned char)(i * 131 + 17);
  CHECK(l[1]->ops->send(l[1], 0, 7, m, big));
  CHECK(l[1]->ops->send(l[1], 0, 8, "x", 1));
  uint32_t kind = 0;
  void *got = NULL;
  size_t bytes = 0;
  CHECK_EQ(l[0]->ops->recv(l[0], 1, &kind, &got, &bytes, ab_clock_s() + 10), AB_WAIT_DONE);
  CHECK(kind == 7 && bytes == big && got && memcmp(got, m, big) == 0);
  free(got);
  got = NULL;
  CHECK_EQ(l[0]->ops->recv(l[0], 1, &kind, &got, &bytes, ab_clock_s() + 10), AB_WAIT_DONE);
  CHECK(kind == 8 && bytes == 1 && got && memcmp(got, "x", 1) == 0);
  free(got);
  /* Read and deleted: the first message's keys are gone. */
  ab_store_t *s = open_store(NULL);
  REQUIRE(s);
  char key[300];
  snprintf(key, sizeof key, "%s1/m/1/0/0", la.prefix);
  const char *keys[] = {key};
  bool ready = true;
  CHECK(ab_store_check(s, keys, 1, &ready, &diag) == AB_OK && !ready);
  ab_store_close(s);
  free(m);
  for (unsigned r = 0; r < 2; r++) l[r]->ops->close(l[r], true);
}

/* Nobody at the address: one line naming it, once the deadline has passed. The port is held
 * bound, never listened on, so that no other program can start listening there meanwhile
 * (a connection to it is refused, as to a port nobody holds). */
static void nobody(void) {
  if (getenv("AB_TEST_NOBODY") == NULL) SKIP("AB_TEST_NOBODY not set (launch_test sets it for one run)");
  int held = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(held >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  REQUIRE(bind(held, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(held, (struct sockaddr *)&a, &len) == 0);
  char held_port[16];
  snprintf(held_port, sizeof held_port, "%u", (unsigned)ntohs(a.sin_port));
  ab_store_t *s = NULL;
  ab_diag_t diag = {""};
  double t0 = ab_clock_s();
  CHECK(ab_store_open("127.0.0.1", held_port, 0.5, 5, NULL, NULL, &s, &diag) == AB_ERR_IO);
  CHECK(ab_clock_s() - t0 < 3.0);
  char says[128];
  snprintf(says, sizeof says, "could not reach the store at 127.0.0.1:%s within 0.5 s", held_port);
  CHECK_STR_CONTAINS(diag.msg, says);
  close(held);
}

static const ab_test_t tests[] = {
    {"commands", commands},
    {"waits", waits},
    {"link_messages", link_messages},
    {"nobody", nobody},
};

AB_TEST_MAIN(tests)
