/* output.h: files written where the user points, without harming what allocbench did not
 * create.
 *
 * Note [Writing where the user points]
 * allocbench is run as root on shared machines, so an output path may name anything: a
 * device node, a FIFO, /dev/stdout, a link, the trace being read.
 *   1. An empty path is refused (as a directory it would mean the root).
 *   2. A path that reaches a file this process read as input (input.h; the same device and
 *      inode, through any link) is refused: writing would destroy the recording.
 *   3. A regular file, a link to one, or a name not yet taken: written to NAME.tmp.PID
 *      beside the file the path resolves to, fsynced and renamed onto it only when
 *      complete, so that a link stays a link and a reader never sees half a file. A failed
 *      write removes only the temporary file. The file keeps its mode (and, as root, its
 *      owner).
 *   4. Anything else (a device, a FIFO, a socket), and any path under /dev or /proc or
 *      linking there (/dev/stdout): written straight to it, appended, never truncated,
 *      removed or replaced.
 *   5. A link to nothing is refused: renaming onto it would replace the user's link.
 *   6. NAME.tmp.PID files left beside NAME by processes that no longer run (killed
 *      mid-write) are removed when NAME is next written.
 *   7. A results folder (--out DIR) is checked before any work: made with its parents, a
 *      file created and removed in it, and the folders the check made removed again, so
 *      that a command refused later leaves nothing behind and one that cannot write says so
 *      before it runs rather than after.
 *   8. A FIFO is opened and written without blocking: waiting for a reader, or for room in
 *      the pipe, is done in short polls, and stops when the flag given to ab_output_stop_on
 *      is set (a signal asked the command to stop), so that a FIFO nobody reads cannot keep
 *      the command from stopping. The write then fails, saying so.
 *   9. A file written as in item 3 has its folder made with its parents, as --out's is,
 *      and an output named by the user (an export, a page) has that folder checked with
 *      the path, as in item 7, so that one that cannot be written says so before the work,
 *      not after it (after the run whose row is already appended, or the figures drawn).
 * Errors come back as AB_ERR_INVALID for a path refused before anything was written,
 * AB_ERR_IO when creating or writing failed, each naming the path.
 *
 * Thread-safety: an ab_output_t belongs to one thread; two threads must not write the same
 * path at once.
 */
#ifndef AB_OUTPUT_H
#define AB_OUTPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "kernels/base/status.h"

#define AB_OUTPUT_PATH_BYTES 4096

typedef struct ab_output_s {
  FILE *f;                            /* write through this between open and commit */
  char path[AB_OUTPUT_PATH_BYTES];    /* as given, for messages */
  char target[AB_OUTPUT_PATH_BYTES];  /* the file the temporary is renamed onto */
  char tmp[AB_OUTPUT_PATH_BYTES + 32]; /* the temporary file; "" when writing straight */
} ab_output_t;

/* Items 1, 2 and 5 of the Note, for checking a path before any work is done. what names
 * the option in the message ("--export-trace"). */
ab_status ab_output_check(const char *what, const char *path, ab_diag_t *diag);
/* Item 9 of the Note: whether path's folder can be made and written (item 7's check);
 * AB_ERR_INVALID when not, the message "WHAT 'PATH': its folder 'DIR': why". */
ab_status ab_output_check_folder(const char *what, const char *path, ab_diag_t *diag);
/* Item 7 of the Note: whether files can be written into the folder dir. AB_ERR_INVALID for
 * an empty path or a part of it that is not a folder, AB_ERR_IO when it cannot be created or
 * written; the message is "WHAT 'DIR': why". */
ab_status ab_output_check_dir(const char *what, const char *dir, ab_diag_t *diag);
/* Creates the folder dir and its parents. A part of the path that is a file, or an empty
 * path, is refused naming it. */
ab_status ab_output_mkdirs(const char *dir, ab_diag_t *diag);
/* The same, and *made is the length of dir's first prefix it created (0: none), for
 * ab_output_unmake: a command that ends having written nothing leaves no folder behind. */
ab_status ab_output_mkdirs_made(const char *dir, size_t *made, ab_diag_t *diag);
/* Removes the folders of dir that ab_output_mkdirs_made created (made), deepest first, those
 * still empty. */
void ab_output_unmake(const char *dir, size_t made);
/* Opens path for writing (the Note). */
ab_status ab_output_open(ab_output_t *o, const char *path, ab_diag_t *diag);
/* Flushes and closes; renames the temporary file into place. On any failure the temporary
 * file is removed and AB_ERR_IO names the path and the reason. */
ab_status ab_output_commit(ab_output_t *o, ab_diag_t *diag);
/* Closes without committing: the temporary file is removed, the target left as it was. */
void ab_output_abort(ab_output_t *o);
/* True when path (followed through links) is not a regular file nor a name not yet taken:
 * item 4 of the Note. */
bool ab_output_is_special(const char *path);
/* The flag that stops waiting on a FIFO (item 8); NULL: none. */
void ab_output_stop_on(const volatile sig_atomic_t *stop);
/* Removes the temporary files of dead processes beside path (item 6). */
void ab_output_clean_stale(const char *path);

#endif
