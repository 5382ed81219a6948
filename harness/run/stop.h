/* stop.h: the signals that stop a command, and the programs it starts, which stop with it.
 *
 * Note [Stopping a command]
 * SIGINT (Ctrl-C), SIGTERM (a scheduler, kill), SIGHUP (the terminal or the ssh session went
 * away) and SIGQUIT ask a command that runs to stop: the first sets ab_run_stop; the runs end
 * within moments (engine.h), what was recorded stays whole, and the command says so in one
 * line and exits 128 + N, N the signal. Further signals within a second of the first are the
 * same request arriving twice (a Ctrl-C reaches the whole process group, and a launcher that
 * forwards it sends it again) and change nothing. One after that is a person who will not
 * wait: the command ends at once by the signal, with one line, and the program it started
 * (ab_run_spawn, a library's process) is killed with it; a results file it was appending to is
 * completed or trimmed by the next run (table.h), and a temporary file is removed by it.
 * A signal sent by that program, or by any process of its process group (a library that calls
 * kill(getppid(), SIGTERM)), is no stop, whatever it is: the sender is told from the signal's
 * own record (si_pid, and si_code saying a process sent it, not the terminal), kept for its
 * watcher (ab_run_group_signal), which fails the program's work saying so.
 */
#ifndef AB_RUN_STOP_H
#define AB_RUN_STOP_H

#include <signal.h>
#include <sys/types.h>

#include "kernels/kernels.h" /* ab_signal_name, for the line that says which signal stopped it */

/* The signal that asked the runs to stop, once one did (after ab_run_catch_stop); else 0:
 * the stop of every run of a command (opts.stop), and of a library's in its child
 * (supervise.h). */
extern volatile sig_atomic_t ab_run_stop;

/* Makes SIGINT, SIGTERM, SIGHUP and SIGQUIT set ab_run_stop instead of ending the process
 * (Note [Stopping a command]). SIGHUP and SIGQUIT stay ignored where the process was started
 * ignoring them (nohup; a shell's background job). */
void ab_run_catch_stop(void);

/* The process group of the program this process started and waits for now (ab_run_spawn's, a
 * library's process, supervise.h), its leader's pid; 0: none. A second signal kills it with
 * this process; a stopping signal it sends is no stop (Note [Stopping a command]). */
void ab_run_watch_group(pid_t pgid);

/* The stopping signal the watched group sent this process since ab_run_watch_group, or 0. */
int ab_run_group_signal(void);

/* Runs file (found as execvp finds it) with argv, its stdout on fd (-1: this process's), in a
 * process group of its own, and waits for it. At a stop its group is sent SIGTERM, and
 * SIGKILL 5 s later if it is still there; this returns once it has ended. Returns its exit
 * status, 128 + N when signal N ended it, or -1 when it could not be started. One at a time. */
int ab_run_spawn(const char *file, char *const argv[], int fd);

#endif
