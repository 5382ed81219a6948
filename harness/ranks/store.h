/* store.h: a client of PyTorch's TCPStore, the key-value store torchrun's agent runs for its
 * workers (launch.h, Note [Which launcher]): set, get, add, check, delete, and a wait for a key
 * that gives up at a deadline or a signal.
 *
 * Note [TCPStore's protocol]
 * The facts this client follows, from PyTorch's torch/csrc/distributed/c10d: the QueryType,
 * CheckResponseType and WaitResponseType enums and validationMagicNumber of TCPStoreBackend.hpp;
 * the client's side in TCPStore.cpp (SendBuffer, TCPStore::set, doGet, incrementValueBy, check,
 * doWait, deleteKey, validate); the servers' side in TCPStoreBackend.cpp (the classic server,
 * TCPStoreMasterDaemon::query and its handlers) and TCPStoreLibUvBackend.cpp (the libuv server,
 * UvClient::processBuf and its parse_*_command, the default since PyTorch 2.4). Checked against
 * PyTorch 1.13 (Debian 12's python3-torch: its TCPStore and torchrun, tests/launch_test.sh),
 * and against the 2.x sources with VALIDATE (the enum as 2.8 has it), whose protocol, in both of
 * its servers' ways, the tests' own listener speaks (tests/store_server.py); no 2.x server
 * itself is run by the tests.
 *   - One TCP connection per client; the server answers each connection's queries in order.
 *     Numbers go in the host's byte order (x86-64 and AArch64: little-endian): a query is one
 *     byte, the command, then its arguments; a string (a key, a value) is its length as a u64,
 *     then its bytes.
 *   - SET key value: no answer. GET key: the value as a string; only after the key exists (the
 *     classic server closes the connection on a missing key, the libuv one answers an empty
 *     value, so PyTorch's client waits first, as this one does). ADD key i64: the key's value
 *     becomes the sum, kept as decimal text; the answer is the sum as an i64. CHECK u64 n,
 *     n keys: one byte, 0 when all exist (READY), 1 when not. WAIT u64 n, n keys: one byte, 0
 *     (STOP_WAITING), once all exist, however long that takes; the server has no timeout of its
 *     own, PyTorch's client gives up on its side. DELETE_KEY key: the count deleted as an i64.
 *     GETNUMKEYS: the number of keys as an i64.
 *   - The commands' numbers moved between versions. Before the handshake (1.13, checked): SET 0,
 *     COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8. With
 *     it (2.x): VALIDATE 0, SET 1, COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7,
 *     DELETE_KEY 8, then APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT and later ones appended.
 *   - The handshake: a 2.x client's first query is VALIDATE with the u32 0x3C85F7CE, and no
 *     answer. A 2.x server takes any other first query for a stray connection: the classic
 *     server closes it; the libuv one leaves that query unread until more bytes come, then reads
 *     it as an ordinary query. An older server knows no handshake: VALIDATE is its SET, and it
 *     would read the magic as the start of a key's length, four billion bytes long.
 *   - So this client asks which protocol a server speaks with a query both read safely: one
 *     byte, 6, the older GETNUMKEYS. An older server answers it (eight bytes). The classic 2.x
 *     server closes the connection: a new one is opened and validated. The libuv server says
 *     nothing: the client sends eight zero bytes, which make the held byte a 2.x WAIT for no
 *     keys, answered at once with one byte, 0; the connection is then an ordinary one. Eight
 *     bytes coming back then mean an older server that was slow to answer (it now holds a
 *     fragment of a query, and is released when the connection closes): a new one is opened.
 *     Anything else is refused with one line naming the server.
 *   - The libuv server bounds keys to 8 KiB, values to 8 MiB and a CHECK or WAIT to 128 Ki keys.
 *   - PyTorch's own clients put "/" before every key (TCPStore's keyPrefix_), so the keys here
 *     begin with "/" too, and a Python TCPStore on the same server reads them without it.
 * A WAIT given up (its deadline, a signal) leaves the server holding it: that connection is
 * closed (which ends the wait on the server's side; an older server has no CANCEL_WAIT), and
 * the next call opens a new one.
 *
 * Statuses: AB_ERR_IO with diag naming the store ("the store at HOST:PORT ...") and what went
 * wrong; AB_ERR_INTERNAL when host memory ran out.
 * Thread-safety: one thread at a time per store.
 */
#ifndef AB_STORE_H
#define AB_STORE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/ranks/launch.h"

#define AB_STORE_VALUE_MAX_BYTES ((size_t)4 << 20) /* a value, well within the libuv server's 8 MiB */

typedef struct ab_store_s ab_store_t;

/* Connects to the store at addr:port, retrying for wait_s seconds since a store may come up
 * after its clients, and learns which protocol it speaks. Replies are awaited at most
 * answer_s seconds. A set *stop ends every wait at once. waiting, when not NULL, is said on
 * stderr once the first connection has been tried for a second, with why it failed last. */
ab_status ab_store_open(const char *addr, const char *port, double wait_s, double answer_s,
                        const volatile sig_atomic_t *stop, const char *waiting, ab_store_t **out, ab_diag_t *diag);
/* 1: the protocol without the handshake (PyTorch 1.13); 2: with VALIDATE. */
int ab_store_protocol(const ab_store_t *s);
/* "HOST:PORT", for messages. */
const char *ab_store_where(const ab_store_t *s);

ab_status ab_store_set(ab_store_t *s, const char *key, const void *value, size_t bytes, ab_diag_t *diag);
/* The value of key, which must exist (wait for it first), malloc'd into *value (never NULL). */
ab_status ab_store_get(ab_store_t *s, const char *key, void **value, size_t *bytes, ab_diag_t *diag);
/* Adds delta to key's number (0 where it does not exist) and says the sum. */
ab_status ab_store_add(ab_store_t *s, const char *key, int64_t delta, int64_t *sum, ab_diag_t *diag);
/* Whether every one of the n keys exists. */
ab_status ab_store_check(ab_store_t *s, const char *const *keys, size_t n, bool *ready, ab_diag_t *diag);
ab_status ab_store_delete(ab_store_t *s, const char *key, ab_diag_t *diag);
/* Waits until key exists, or deadline passes, or *stop is set; diag says why for LOST. */
ab_wait_t ab_store_wait(ab_store_t *s, const char *key, double deadline, ab_diag_t *diag);
void ab_store_close(ab_store_t *s);

#endif
