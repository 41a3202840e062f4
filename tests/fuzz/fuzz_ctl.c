/*
 * fuzz_ctl.c - libFuzzer target: what a user writes into a job's ctl file
 * (sched_ctl_parse).  Any bytes must give a known command or -EINVAL, and a
 * command is accepted exactly when the bytes are its word with blanks
 * around it: a second word, a NUL or a write cut to fit never is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int blank(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum sched_ctl_cmd cmd = 0;
	int ret = sched_ctl_parse((const char *)data, size, &cmd);
	size_t start = 0, end = size;
	int want;

	while (start < end && blank(data[start]))
		start++;
	while (end > start && blank(data[end - 1]))
		end--;
	want = size <= SCHED_CTL_MAX && end - start == 6 && memcmp(data + start, "cancel", 6) == 0;
	if (ret == 0 && (!want || cmd != SCHED_CTL_CANCEL))
		abort();
	if (ret != 0 && (want || ret != -EINVAL))
		abort();
	return 0;
}
