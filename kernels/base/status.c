#include "kernels/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ab_status_name(ab_status st) {
  switch (st) {
#define AB_STATUS_CASE(name, text) \
  case name: return #name;
    AB_STATUS_LIST(AB_STATUS_CASE)
#undef AB_STATUS_CASE
  }
  return "AB_ERR_UNKNOWN";
}

const char *ab_strerror(ab_status st) {
  switch (st) {
#define AB_STATUS_CASE(name, text) \
  case name: return text;
    AB_STATUS_LIST(AB_STATUS_CASE)
#undef AB_STATUS_CASE
  }
  return "unknown status";
}

/* A message quotes what it was given (a trace's field, a pickle's bytes), and is printed on a
 * terminal: line breaks become spaces, and every other control byte (ESC starts a terminal's
 * escape sequence; a form feed or a record separator breaks the line for some readers) a '?'. */
static void one_line(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r' || *s == '\t') *s = ' ';
    else if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

ab_status ab_diag_set(ab_diag_t *diag, ab_status st, const char *fmt, ...) {
  if (diag == NULL) return st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(diag->msg, sizeof diag->msg, fmt, ap);
  va_end(ap);
  one_line(diag->msg);
  return st;
}

void ab_diag_prefix(ab_diag_t *diag, const char *fmt, ...) {
  if (diag == NULL) return;
  char head[AB_DIAG_BYTES], old[AB_DIAG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  memcpy(old, diag->msg, sizeof old);
  size_t hl = strnlen(head, AB_DIAG_BYTES - 1), ol = strnlen(old, AB_DIAG_BYTES - 1 - hl);
  memcpy(diag->msg, head, hl);
  memcpy(diag->msg + hl, old, ol);
  diag->msg[hl + ol] = '\0';
  one_line(diag->msg);
}
