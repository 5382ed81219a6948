/* fuzz.h: what the fuzz targets of tests/fuzz share.
 *
 * Each fuzz_NAME.c is one target: LLVMFuzzerTestOneInput takes any bytes and must return 0
 * without crashing, leaking, hanging or tripping a sanitizer; a broken property is reported
 * by ab_fuzz_fail, which aborts so that the fuzzer keeps the input. The same source builds
 * two ways: with libFuzzer (AB_FUZZ, clang) for fuzzing, and with corpus_main.c in every
 * build, where it replays the committed corpus tests/fuzz/corpus/NAME as a test.
 */
#ifndef AB_FUZZ_H
#define AB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Prints "fuzz: MESSAGE" and aborts. */
void ab_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Loads the bytes as a trace file (trace.h: the format recognised from the content): it
 * loads, or it is refused as invalid input with a message naming the input. What loads is
 * replayed through every strategy the users can pick, on the simulated card, with the
 * invariant checks after every event: it must end in ok or OOM, with nothing leaked. */
void ab_fuzz_trace(const uint8_t *data, size_t size);

#endif
