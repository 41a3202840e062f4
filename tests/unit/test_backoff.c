/*
 * test_backoff.c - the one retry rule (core/backoff.c): the request policy's
 * jittered waits stay under a cap that doubles from 100 ms to 2 s and are
 * spread over it; the upload policy's waits are 1, 2, 4, 8, 16, then 30 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backoff.h"

static void test_request_caps(void **state)
{
	static const long caps[] = { 100, 200, 400, 800, 1600, 2000, 2000, 2000 };
	unsigned int seed = 1;

	(void)state;
	for (long a = 0; a < 8; a++) {
		long lo = caps[a], hi = 0;

		for (int i = 0; i < 2000; i++) {
			long ms = backoff_ms(&BACKOFF_REQUEST, a, &seed);

			assert_true(ms >= 0 && ms <= caps[a]);
			lo = ms < lo ? ms : lo;
			hi = ms > hi ? ms : hi;
		}
		/* full jitter: the draws cover the range, not a point */
		assert_true(lo < caps[a] / 10);
		assert_true(hi > caps[a] * 9 / 10);
	}
	/* a huge attempt number neither overflows nor passes the cap */
	assert_true(backoff_ms(&BACKOFF_REQUEST, 1000000, &seed) <= 2000);
}

static void test_upload_steps(void **state)
{
	static const long want[] = { 1000, 2000, 4000, 8000, 16000, 30000, 30000 };
	unsigned int seed = 1;

	(void)state;
	for (long a = 0; a < 7; a++)
		assert_int_equal(backoff_ms(&BACKOFF_UPLOAD, a, &seed), want[a]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_caps),
		cmocka_unit_test(test_upload_steps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
