/* commands.h: the subcommands of `allocbench`, one file each (cmd_<name>.c). Each takes the
 * arguments after its name (argv[0] is the command's name) and returns the exit code. */
#ifndef AB_COMMANDS_H
#define AB_COMMANDS_H

int ab_cmd_list(int argc, char **argv);
int ab_cmd_run(int argc, char **argv);
int ab_cmd_oom(int argc, char **argv);
int ab_cmd_compare(int argc, char **argv);
int ab_cmd_matrix(int argc, char **argv);
int ab_cmd_replay(int argc, char **argv);
int ab_cmd_record(int argc, char **argv);
int ab_cmd_tune(int argc, char **argv);
int ab_cmd_report(int argc, char **argv);
int ab_cmd_blame(int argc, char **argv);

#endif
