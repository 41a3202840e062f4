/* cmd.h - the mlfs commands, one function each (fs/main.c dispatches). */
#ifndef MLFS_CMD_H
#define MLFS_CMD_H

struct mlfs_config;

/* Each takes the arguments after the verb (argv[0] is the verb) and returns the exit status. */
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_check(int argc, char **argv);

/* Loads @file and checks it against the backend registry; prints every error. */
int cmd_load_config(struct mlfs_config **out, const char *file);

#endif
