/* report.h: one page to share for a results folder: `allocbench report DIR` and
 * `tune --report` write DIR/report.html, self-contained (results/README.md, "One page to share").
 *
 * The page says what the folder's results answer, in words, first; then the table, the
 * figures inline as SVG (drawn first by plots/draw.sh, which needs gnuplot: without it the
 * page says so and has no figures), what the trace holds (`replay --info`, where the folder
 * has it), the commands that made the folder and that make the page again, and the version
 * of allocbench. It loads nothing (no script, no style sheet, no font, no image from
 * anywhere), so it opens from a file, mailed or attached, and prints.
 *
 * What the folder holds decides the page:
 *   tune.csv                       tune: the line to paste (tune_answer.txt), the ranking
 *   compare.csv                    compare: strategies side by side
 *   summary.csv (and oom.csv)      matrix: every strategy on every workload
 *   oom.csv                        oom: the smallest budgets
 * first match wins. Files appended by several runs give the last row of each pair (each
 * configuration of tune's last run), as the figures do.
 *
 * Files the commands write for the page: commands.txt (each command line that wrote into
 * the folder, one a line, ab_report_log_command) and tune_trace.txt (replay --info of the
 * trace tune read).
 *
 * Every results file of the folder is read and checked before anything is drawn: a NUL byte,
 * a header without the columns the page keys on, or a field the page reads that is not what
 * allocbench writes there (a whole number of bytes, a count, a time; empty only where
 * allocbench leaves it empty) is refused. Every text the page takes from a file is escaped.
 *
 * Statuses: AB_ERR_INVALID when dir holds no results of these commands, or a results file
 * cannot be read as CSV or is refused (its path, line and, for a field, column named);
 * AB_ERR_IO when the page cannot be written. Not thread-safe.
 */
#ifndef AB_REPORT_H
#define AB_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/base/status.h"

/* The page's size budget (results/README.md): a folder whose figures would pass it gets the
 * figures that fit, and says which it left out. */
#define AB_REPORT_BUDGET_BYTES (1536u * 1024u)

/* Draws the figures of dir with plots/draw.sh (when draw is set), then writes the page to
 * out (NULL: DIR/report.html). The path written goes to written (may be NULL). */
ab_status ab_report_write(const char *dir, const char *out, bool draw, char *written, size_t written_size,
                          ab_diag_t *diag);

/* Appends `allocbench ARGS` (argv as a command received it, argv[0] its name, each argument
 * quoted for a shell where it needs it) to DIR/commands.txt. */
ab_status ab_report_log_command(const char *dir, int argc, char **argv, ab_diag_t *diag);

/* Runs this allocbench with argv ("allocbench", the command, its arguments, NULL) and writes
 * what it prints on stdout to path, atomically; stderr is left alone. */
ab_status ab_report_run_self(char *const argv[], const char *path, ab_diag_t *diag);

#endif
