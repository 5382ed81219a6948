/* fuzz_size.c: the size and whole-number parsers (kernels/base/units.h): any text parses or is
 * refused with a message that names the input and a position inside the text; a parsed size
 * written as a plain number parses back to itself, and a whole number respects its maximum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/units.h"
#include "tests/fuzz/fuzz.h"

/* A refusal says "WHAT 'TEXT': at position P: ...", P inside the text or just after it (when
 * the text fits in the message). */
static void check_refusal(ab_status st, const ab_diag_t *d, const char *what, const char *text) {
  if (st != AB_ERR_INVALID) ab_fuzz_fail("%s refused as %s: %s", what, ab_status_name(st), d->msg);
  char head[AB_DIAG_BYTES];
  int n = snprintf(head, sizeof head, "%s '%s': at position ", what, text);
  if (n < 0 || (size_t)n >= sizeof head - 24) return;
  /* As ab_diag_set writes the text into a message: on one line, control bytes made harmless. */
  for (char *c = head; *c; c++)
    if (*c == '\n' || *c == '\r' || *c == '\t')
      *c = ' ';
    else if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = '?';
  size_t pos = 0;
  if (strncmp(d->msg, head, (size_t)n) != 0 || sscanf(d->msg + n, "%zu", &pos) != 1 || pos < 1 ||
      pos > strlen(text) + 1)
    ab_fuzz_fail("%s: the message does not point inside '%s': %s", what, text, d->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  if (size) memcpy(text, data, size);
  text[size] = '\0';
  ab_diag_t d = {""};
  uint64_t v = 0, back = 0;
  ab_status st = ab_parse_size("--budget", text, &v, &d);
  if (st == AB_OK) {
    char plain[32], shown[32];
    snprintf(plain, sizeof plain, "%llu", (unsigned long long)v);
    if (ab_parse_size("--budget", plain, &back, &d) != AB_OK || back != v)
      ab_fuzz_fail("'%s' is %llu bytes, but '%s' parses back as %llu", text, (unsigned long long)v, plain,
                   (unsigned long long)back);
    ab_format_bytes(v, shown, sizeof shown);
    ab_format_bytes_torch(v, shown, sizeof shown);
  } else {
    check_refusal(st, &d, "--budget", text);
  }
  static const uint64_t maxima[] = {0, 1000, UINT64_MAX};
  for (size_t i = 0; i < sizeof maxima / sizeof maxima[0]; i++) {
    st = ab_parse_u64("--seed", text, maxima[i], &v, &d);
    if (st == AB_OK && v > maxima[i])
      ab_fuzz_fail("'%s' parsed as %llu, above its maximum %llu", text, (unsigned long long)v,
                   (unsigned long long)maxima[i]);
    if (st != AB_OK) check_refusal(st, &d, "--seed", text);
  }
  free(text);
  return 0;
}
