/*
 * be_fake.h - an in-memory backend for unit tests of the core.
 *
 * Registered under the scheme "fake" through the real registry, it keeps a
 * small tree in memory, counts every call by name and can be told to fail
 * the next call of an operation with a given errno.
 */
#ifndef MLFS_BE_FAKE_H
#define MLFS_BE_FAKE_H

#include "backend.h"

extern const struct backend_ops be_fake_ops;

enum be_fake_op {
	FAKE_GETATTR,
	FAKE_READDIR,
	FAKE_OPEN,
	FAKE_PREAD,
	FAKE_MKDIR,
	FAKE_UNLINK,
	FAKE_RENAME,
	FAKE_MKNOD,
	FAKE_NOPS
};

/* Calls of @op so far. */
unsigned int be_fake_calls(struct backend *be, enum be_fake_op op);
/* The next call of @op fails with @err (a negated errno). */
void be_fake_fail_next(struct backend *be, enum be_fake_op op, int err);
/* Adds a file (data != NULL) or a folder (data == NULL) at @path. */
int be_fake_add(struct backend *be, const char *path, const char *data);

#endif
