/* table.h: rows of named cells, written as CSV, JSON or an aligned text table, and appended
 * to CSV files so that a reader never sees half a row.
 *
 * Every results file of allocbench (summary.csv, oom.csv, timelines, segment maps) is a
 * table with a fixed header. Appending (ab_table_append_csv) takes an exclusive lock on the
 * file, cuts off an unterminated last line left by a process that died mid-write, checks
 * the header, and writes the new rows with one write(2), cut back to the file's former size
 * if the write fails part way (a full disk); a file with another header (from an older
 * allocbench) is moved aside to NAME.<time> first and the new one started. A device, a
 * FIFO or /dev/stdout gets the header and rows written straight to it, and a file this run
 * reads as input is refused (output.h, Note [Writing where the user points]).
 * Whole files (ab_table_write_file) are written as output.h writes every file: to a
 * temporary name renamed into place.
 *
 * Cells are copied into the table. Not thread-safe.
 */
#ifndef AB_TABLE_H
#define AB_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kernels/base/status.h"

typedef struct ab_col_s {
  const char *name;
  bool numeric; /* written bare in JSON and right-aligned in text */
} ab_col_t;

typedef struct ab_table_s {
  const ab_col_t *cols; /* not owned */
  size_t ncols;
  char **cells;         /* nrows * ncols strings, row-major, owned */
  size_t nrows, caprows;
} ab_table_t;

void ab_table_init(ab_table_t *t, const ab_col_t *cols, size_t ncols);
void ab_table_free(ab_table_t *t);
/* Appends a row of ncols cells (NULL is an empty cell). */
ab_status ab_table_add(ab_table_t *t, const char *const *cells);
/* The cell of row r in the column called name, or NULL. */
const char *ab_table_get(const ab_table_t *t, size_t r, const char *name);

void ab_table_write_csv(const ab_table_t *t, FILE *f, bool header);
/* A JSON array with one object per row. */
void ab_table_write_json(const ab_table_t *t, FILE *f);
/* An aligned table of the named columns (all when names is NULL). */
void ab_table_write_text(const ab_table_t *t, FILE *f, const char *const *names, size_t nnames);
/* One "name  value" line per column, for a single row. */
void ab_table_write_pairs(const ab_table_t *t, size_t r, FILE *f);

/* Appends the rows to the CSV file at path (see above); creates the directory. If an old
 * file was moved aside, its new name is written to moved_to (may be NULL), else "". */
ab_status ab_table_append_csv(const ab_table_t *t, const char *path, char *moved_to, size_t moved_size,
                              ab_diag_t *diag);
/* Writes the table as a whole CSV file, atomically (temporary file, then rename). */
ab_status ab_table_write_file(const ab_table_t *t, const char *path, ab_diag_t *diag);

#endif
