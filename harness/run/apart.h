/* apart.h: a supervised child's whole life: the process allocbench starts for a library's
 * unit of work (Note [A library in a process of its own], supervise.h).
 *
 * The units are the modules' own (a check in pipeline.c, a run in run_one.c, a probe in
 * bisect.c), each writing its job and reading its results through supervise.h; this file,
 * above them all, is the one place that knows every unit, and runs the one the job names.
 * Not thread-safe: a child runs one unit, once.
 */
#ifndef AB_APART_H
#define AB_APART_H

/* The child's side (main of allocbench, given AB_SUPERVISE_ARG): reads the job, runs its unit,
 * writes the results; the process's exit status (run_one.h). */
int ab_apart_child(void);

#endif
