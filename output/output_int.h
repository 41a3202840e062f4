/* output_int.h - what output.c and output_upload.c share. */
#ifndef MLFS_OUTPUT_INT_H
#define MLFS_OUTPUT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "output.h"

/* Writes @text to @dir/@name through a temporary file and rename; fsync'd when @durable. */
int output_write_file(const char *dir, const char *name, const char *text, bool durable);

/* Appends @entry (taken) to the journal as one line, fdatasync'd. */
int output_journal_add(const struct output *o, json_t *entry);

typedef void output_journal_fn(void *arg, json_t *entry);
/* Calls @fn for each whole line of the journal, in order. */
int output_journal_read(const struct output *o, output_journal_fn *fn, void *arg);

/* progress.json: what .mlfs/uploads shows. */
void output_progress_write(const struct output *o, const char *phase, uint64_t done,
			   uint64_t total, const char *error);

/* Takes the flock of @dir/@name (waiting when @block): its fd, or a negated errno. */
int output_lock(const char *dir, const char *name, bool block);

typedef int output_each_fn(void *arg, const char *dir);
/* Calls @fn with the folder of each output under @state_dir/outputs, by name. */
int output_each(const char *state_dir, output_each_fn *fn, void *arg);

#endif
