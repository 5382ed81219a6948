/* status.h: the one status type of allocbench, and the diagnostic buffer that carries the
 * human-readable reason next to it.
 * Layer: base (kernels/base/), the ground floor: it depends on nothing of allocbench.
 *
 * Every function that can fail returns an ab_status and writes its results through out
 * parameters. AB_OK is 0. AB_ERR_OOM is an expected outcome (a strategy or the device ran
 * out of memory), counted and reported, never a crash. The other codes are errors.
 *
 * Functions that read outside input (files, config strings, the command line) also take an
 * ab_diag_t and write one line into it saying what was wrong, naming the input and the
 * position. Strategies never print: the caller decides what to do with the line.
 *
 * Thread-safety: a diag buffer belongs to one caller at a time.
 */
#ifndef AB_STATUS_H
#define AB_STATUS_H

#include <stddef.h>

#define AB_STATUS_LIST(X)                                                        \
  X(AB_OK, "ok")                                                                 \
  X(AB_ERR_OOM, "out of memory")                                                 \
  X(AB_ERR_INVALID, "invalid input")                                             \
  X(AB_ERR_CUDA, "CUDA error")                                                   \
  X(AB_ERR_IO, "I/O error")                                                      \
  X(AB_ERR_INTERNAL, "internal error")

typedef enum ab_status_e {
#define AB_STATUS_ENUM(name, text) name,
  AB_STATUS_LIST(AB_STATUS_ENUM)
#undef AB_STATUS_ENUM
} ab_status;

/* The enumerator's name ("AB_ERR_OOM") and a short description ("out of memory"). */
const char *ab_status_name(ab_status st);
const char *ab_strerror(ab_status st);

#define AB_DIAG_BYTES 512

typedef struct ab_diag_s {
  char msg[AB_DIAG_BYTES]; /* one line, no trailing newline; "" when nothing was said */
} ab_diag_t;

/* Writes a printf-style message into diag (may be NULL) and returns st, so that an error
 * site reads `return ab_diag_set(d, AB_ERR_INVALID, "...", ...);`. Newlines are replaced by
 * spaces so the message stays one line, and other control bytes by '?'. */
ab_status ab_diag_set(ab_diag_t *diag, ab_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message ("FILE: " + old), for callers that add context. */
void ab_diag_prefix(ab_diag_t *diag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Propagates a failing status to the caller. */
#define AB_TRY(expr)                                                             \
  do {                                                                           \
    ab_status ab_try_st_ = (expr);                                               \
    if (ab_try_st_ != AB_OK) return ab_try_st_;                                  \
  } while (0)

#endif
