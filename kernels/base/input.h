/* input.h: reading a user's file, gunzipped when it is gzip (recognised from its first
 * bytes, not its name): whole (ab_input_read) or as a stream of bounded pieces
 * (ab_instream_*, for readers that keep only what they extract). Both run the same
 * inflater, so they take and refuse the same files with the same messages: errors name the
 * file and what went wrong (a truncated or corrupt gzip stream, a read error, an inflated
 * size past the cap), whichever library inflates (ab_input_inflater). */
#ifndef AB_INPUT_H
#define AB_INPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/status.h"

typedef struct ab_input_s {
  char *data; /* the contents, NUL-terminated (the NUL is not counted in len) */
  size_t len;
} ab_input_t;

/* A gzip file may inflate to AB_INPUT_INFLATE_RATIO times its size, or to
 * AB_INPUT_INFLATE_FLOOR_BYTES when that is more: traces inflate some 10 times, and a
 * crafted file of 1 MB that inflates to gigabytes is refused before it fills the memory. */
#define AB_INPUT_INFLATE_RATIO 100
#define AB_INPUT_INFLATE_FLOOR_BYTES (64ULL << 20)

/* Reads path into in. Refuses files over 8 GiB once decompressed, and gzip files that
 * inflate past the cap above. The file is remembered as an input of this process
 * (ab_input_is_input). */
ab_status ab_input_read(const char *path, ab_input_t *in, ab_diag_t *diag);
/* The same with the cap on inflating set to max_inflated bytes (at most 8 GiB); 0: the
 * default above. */
ab_status ab_input_read_capped(const char *path, uint64_t max_inflated, ab_input_t *in, ab_diag_t *diag);
/* Takes bytes already in memory as ab_input_read takes a file's contents: copied into in,
 * gunzipped when they are gzip; `name` stands for the path in errors. For readers of bytes
 * that come from no file (tests, fuzzing). */
ab_status ab_input_from_memory(const char *name, const void *data, size_t len, ab_input_t *in, ab_diag_t *diag);
void ab_input_free(ab_input_t *in);

/* Waiting for a writer: a FIFO (or a pipe, /dev/fd/N) is read whole, without blocking: the
 * wait for its writer and for its bytes is done in polls of 100 ms that look at the flag
 * given here between them, so that a FIFO nobody writes cannot keep a command from stopping
 * (a signal sets the flag: ab_run_catch_stop). The read then fails with AB_ERR_IO, saying
 * so. Its end is the last writer closing it. */
void ab_input_stop_on(const volatile sig_atomic_t *stop);

/* ---- streaming ---------------------------------------------------------------------------
 * A stream reads its file in pieces of AB_INSTREAM_CHUNK_BYTES and inflates them as they are
 * asked for, so a reader's memory does not grow with the file. The cap on inflating and the
 * 8 GiB limit apply as to ab_input_read. A file that is not a regular file (a pipe) is read
 * whole first, as ab_input_read does, since only a regular file's size sets the cap.
 * Not thread-safe: one reader per stream. */
#define AB_INSTREAM_CHUNK_BYTES (256u << 10)

typedef struct ab_instream_s ab_instream_t;

/* Opens path (remembered as an input, as by ab_input_read); max_inflated as for
 * ab_input_read_capped. AB_ERR_IO naming the path when it cannot be opened. */
ab_status ab_instream_open(const char *path, uint64_t max_inflated, ab_instream_t **out, ab_diag_t *diag);
/* A stream over bytes in memory (not copied: they must outlive the stream), named `name`;
 * inflated when they are gzip and `gunzip` is set, else taken as they are (contents read
 * already). */
ab_status ab_instream_memory(const char *name, const void *data, size_t len, bool gunzip, ab_instream_t **out,
                             ab_diag_t *diag);
/* Reads up to cap bytes of the (inflated) contents into buf; *got is 0 only at the end. */
ab_status ab_instream_read(ab_instream_t *s, void *buf, size_t cap, size_t *got, ab_diag_t *diag);
/* Goes back to the first byte. */
ab_status ab_instream_rewind(ab_instream_t *s, ab_diag_t *diag);
/* The rest of the contents as one buffer, as ab_input_read gives it. */
ab_status ab_instream_read_all(ab_instream_t *s, ab_input_t *in, ab_diag_t *diag);
/* Buffered reading, for parsers: the next bytes of the contents as one window of memory.
 * ab_instream_window makes at least `want` bytes visible at *data (fewer only at the end:
 * *avail says how many), growing its buffer for a long want; the window stays valid until
 * the next call. ab_instream_consume(n) moves past n of them. Do not mix with
 * ab_instream_read. */
ab_status ab_instream_window(ab_instream_t *s, size_t want, const unsigned char **data, size_t *avail, ab_diag_t *diag);
void ab_instream_consume(ab_instream_t *s, size_t n);
/* Contents bytes consumed (window) or read so far: the offset of the next byte. */
uint64_t ab_instream_offset(const ab_instream_t *s);
/* How many bytes the contents hold, as the file says before they are read, for a reader that
 * sizes its arrays up front: a plain file's size, a gzip file's own record of its size (the
 * last member's, modulo 2^32), at most the cap on inflating. A hint, which a file can belie. */
uint64_t ab_instream_size_hint(const ab_instream_t *s);
void ab_instream_close(ab_instream_t *s);
/* The library gzip input is inflated with: "isal" (ISA-L's igzip, the default where the
 * build has it) or "zlib" (the default otherwise). ab_input_use_inflater picks one of those
 * built, for tests and benchmarks that compare them (AB_ERR_INVALID naming the one in use
 * for another); call it before any stream is opened, not beside a reading thread. */
ab_status ab_input_use_inflater(const char *name, ab_diag_t *diag);
const char *ab_input_inflater(void);
/* A digest of the bytes of the regular file at path, as they are on disk (not inflated), and
 * its size: two files with the same digest and size hold the same bytes, so that a reader of
 * many files (a job's traces, one per rank) reads each content once. The file is remembered as
 * an input. AB_ERR_IO naming the path when it cannot be read; AB_ERR_INVALID when it is no
 * regular file. */
ab_status ab_input_digest(const char *path, uint64_t *digest, uint64_t *bytes, ab_diag_t *diag);
/* True when path (followed through links) is a file this process has read with
 * ab_input_read: the same device and inode, whatever the name, and also where the path goes
 * through folders not made yet ("out/../trace"). Outputs refuse it (output.h). Thread-safe. */
bool ab_input_is_input(const char *path);

#endif
