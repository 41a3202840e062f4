/*
 * test_remote.c - the HTTP plumbing: the errno map, what is retried, the
 * escaping, and remote_do() against a scripted server on 127.0.0.1.
 *
 * The fake server answers one connection per scripted reply, in order, with
 * the bytes written in the script (so it can lie: ignore Range, close early,
 * answer 503), and records each request's first line and Range header so a
 * test can assert what remote_do asked for on every attempt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "remote.h"

#define FAKE_MAX 8

struct fake {
	int lfd;
	int port;
	const char *replies[FAKE_MAX];	/* raw responses; NULL ends the script */
	int served;
	char request[FAKE_MAX][128];	/* first line of each request */
	char range[FAKE_MAX][64];	/* its Range header value, "" when none */
	bool signed_unsigned[FAKE_MAX];	/* SigV4-signed, with UNSIGNED-PAYLOAD */
	pthread_t thread;
};

static void fake_record(struct fake *f, int i, const char *req)
{
	const char *r = strcasestr(req, "\r\nRange: ");

	snprintf(f->request[i], sizeof(f->request[i]), "%.*s", (int)strcspn(req, "\r"), req);
	f->signed_unsigned[i] = strcasestr(req, "\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD") &&
				strcasestr(req, "\r\nAuthorization: AWS4-HMAC-SHA256 ");
	if (r)
		snprintf(f->range[i], sizeof(f->range[i]), "%.*s", (int)strcspn(r + 9, "\r"), r + 9);
}

static void fake_serve_one(struct fake *f, int fd, int i)
{
	char req[4096];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(req) - 1 && (n = read(fd, req + got, sizeof(req) - 1 - got)) > 0) {
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[got] = '\0';
	fake_record(f, i, req);
	if (write(fd, f->replies[i], strlen(f->replies[i])) < 0)
		return;
	shutdown(fd, SHUT_WR);
	while (read(fd, req, sizeof(req)) > 0)
		;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct pollfd p = { .fd = f->lfd, .events = POLLIN };

	for (int i = 0; i < FAKE_MAX && f->replies[i]; i++) {
		int fd;

		if (poll(&p, 1, 5000) <= 0)
			break;
		fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			break;
		fake_serve_one(f, fd, i);
		close(fd);
		f->served = i + 1;
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 8), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->lfd);
}

static struct remote *new_remote(long timeout, long retries)
{
	struct remote_opts o = { .name = "test", .timeout = timeout, .retries = retries };
	struct remote *r;

	assert_int_equal(remote_create(&r, &o), 0);
	return r;
}

static char *url_of(const struct fake *f, const char *path)
{
	char *url;

	assert_true(asprintf(&url, "http://127.0.0.1:%d%s", f->port, path) > 0);
	return url;
}

/* ---- pure functions ---- */

static void test_errno_maps_statuses(void **state)
{
	(void)state;
	assert_int_equal(remote_errno(0, 200), 0);
	assert_int_equal(remote_errno(0, 206), 0);
	assert_int_equal(remote_errno(0, 204), 0);
	assert_int_equal(remote_errno(0, 404), ENOENT);
	assert_int_equal(remote_errno(0, 410), ENOENT);
	assert_int_equal(remote_errno(0, 401), EACCES);
	assert_int_equal(remote_errno(0, 403), EACCES);
	assert_int_equal(remote_errno(0, 400), EINVAL);
	assert_int_equal(remote_errno(0, 405), ENOTSUP);
	assert_int_equal(remote_errno(0, 501), ENOTSUP);
	assert_int_equal(remote_errno(0, 409), EEXIST);
	assert_int_equal(remote_errno(0, 412), ESTALE);
	assert_int_equal(remote_errno(0, 413), EFBIG);
	assert_int_equal(remote_errno(0, 416), ERANGE);
	assert_int_equal(remote_errno(0, 429), EAGAIN);
	assert_int_equal(remote_errno(0, 503), EAGAIN);
	assert_int_equal(remote_errno(0, 507), ENOSPC);
	assert_int_equal(remote_errno(0, 500), EIO);
	assert_int_equal(remote_errno(0, 502), EIO);
	assert_int_equal(remote_errno(0, 418), EIO);
	assert_int_equal(remote_errno(0, 0), EIO);
}

static void test_errno_maps_curl_codes(void **state)
{
	(void)state;
	assert_int_equal(remote_errno(CURLE_OPERATION_TIMEDOUT, 0), ETIMEDOUT);
	assert_int_equal(remote_errno(CURLE_COULDNT_CONNECT, 0), EIO);
	assert_int_equal(remote_errno(CURLE_COULDNT_RESOLVE_HOST, 0), EIO);
	assert_int_equal(remote_errno(CURLE_RECV_ERROR, 200), EIO);
	assert_int_equal(remote_errno(CURLE_SSL_CONNECT_ERROR, 0), EIO);
	assert_int_equal(remote_errno(CURLE_PEER_FAILED_VERIFICATION, 0), EIO);
	assert_int_equal(remote_errno(CURLE_OUT_OF_MEMORY, 0), ENOMEM);
	assert_int_equal(remote_errno(CURLE_URL_MALFORMAT, 0), EINVAL);
}

static void test_retryable_transport_errors_5xx_and_429(void **state)
{
	(void)state;
	assert_true(remote_retryable(CURLE_COULDNT_CONNECT, 0));
	assert_true(remote_retryable(CURLE_OPERATION_TIMEDOUT, 0));
	assert_true(remote_retryable(CURLE_PARTIAL_FILE, 206));
	assert_true(remote_retryable(CURLE_RECV_ERROR, 0));
	assert_true(remote_retryable(CURLE_SEND_ERROR, 0));
	assert_true(remote_retryable(CURLE_GOT_NOTHING, 0));
	assert_true(remote_retryable(0, 500));
	assert_true(remote_retryable(0, 502));
	assert_true(remote_retryable(0, 503));
	assert_true(remote_retryable(0, 429));
	assert_false(remote_retryable(0, 200));
	assert_false(remote_retryable(0, 404));
	assert_false(remote_retryable(0, 403));
	assert_false(remote_retryable(0, 416));
	assert_false(remote_retryable(0, 501));
	assert_false(remote_retryable(CURLE_PEER_FAILED_VERIFICATION, 0));
	assert_false(remote_retryable(CURLE_WRITE_ERROR, 200));
	assert_false(remote_retryable(CURLE_URL_MALFORMAT, 0));
}

static void test_escape_keeps_unreserved_only(void **state)
{
	char *s;

	(void)state;
	s = remote_escape("a-Z_0.9~/b c%\xc3\xbc+&=?#", true);
	assert_string_equal(s, "a-Z_0.9~/b%20c%25%C3%BC%2B%26%3D%3F%23");
	free(s);
	s = remote_escape("dir/file name", false);
	assert_string_equal(s, "dir%2Ffile%20name");
	free(s);
	s = remote_escape("", false);
	assert_string_equal(s, "");
	free(s);
}

/* ---- remote_do against the fake ---- */

#define OK_HELLO "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n" \
		 "ETag: \"abc\"\r\nLast-Modified: Tue, 02 Jan 2024 03:04:05 GMT\r\n" \
		 "Content-Type: text/plain\r\n\r\nhello"
#define UNAVAILABLE "HTTP/1.1 503 Slow Down\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy"

static void test_do_retries_503_then_succeeds(void **state)
{
	struct fake f = { .replies = { UNAVAILABLE, OK_HELLO } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1 };
	struct remote_resp resp;
	struct remote *r;

	(void)state;
	fake_start(&f);
	r = new_remote(5, 2);
	req.url = url_of(&f, "/x?secret=1");
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_int_equal(f.served, 2);
	assert_int_equal(resp.status, 200);
	assert_string_equal(resp.body, "hello");
	assert_string_equal(resp.etag, "\"abc\"");
	assert_string_equal(resp.content_type, "text/plain");
	assert_int_equal(resp.content_length, 5);
	assert_int_equal(resp.last_modified, 1704164645);
	assert_non_null(strstr(resp.effective_url, "/x?secret=1"));
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_404_is_enoent_with_error_body_and_no_retry(void **state)
{
	struct fake f = { .replies = {
		"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\n<E>no</E>",
		OK_HELLO } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1 };
	char buf[16];
	struct remote_resp resp;
	struct remote *r = new_remote(5, 3);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/missing");
	req.buf = buf;
	req.buf_size = sizeof(buf);
	assert_int_equal(remote_do(r, &req, &resp), -ENOENT);
	assert_int_equal(resp.status, 404);
	assert_string_equal(resp.body, "<E>no</E>");
	assert_int_equal(resp.received, 0);
	remote_resp_free(&resp);
	/* the second reply is still unclaimed: fetch it so the fake ends */
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_int_equal(f.served, 2);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_ranged_get_resumes_after_delivered_bytes(void **state)
{
	struct fake f = { .replies = {
		"HTTP/1.1 206 Partial\r\nContent-Range: bytes 10-19/100\r\nContent-Length: 10\r\n"
		"Connection: close\r\n\r\n0123",
		"HTTP/1.1 206 Partial\r\nContent-Range: bytes 14-19/100\r\nContent-Length: 6\r\n"
		"Connection: close\r\n\r\n456789" } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1, .range_off = 10,
				  .range_len = 10 };
	char buf[10];
	struct remote_resp resp;
	struct remote *r = new_remote(5, 2);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/f");
	req.buf = buf;
	req.buf_size = sizeof(buf);
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_string_equal(f.range[0], "bytes=10-19");
	assert_string_equal(f.range[1], "bytes=14-19");
	assert_int_equal(resp.received, 10);
	assert_memory_equal(buf, "0123456789", 10);
	assert_int_equal(resp.total_size, 100);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

#define FULL_BODY "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nABCDEFGHIJ"

static void test_do_range_ignored_from_zero_keeps_first_bytes(void **state)
{
	struct fake f = { .replies = { FULL_BODY } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1, .range_len = 4 };
	char buf[4];
	struct remote_resp resp;
	struct remote *r = new_remote(5, 2);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/f");
	req.buf = buf;
	req.buf_size = sizeof(buf);
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_true(resp.range_ignored);
	assert_int_equal(resp.received, 4);
	assert_memory_equal(buf, "ABCD", 4);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_range_ignored_elsewhere_is_eio_without_retry(void **state)
{
	struct fake f = { .replies = { FULL_BODY, FULL_BODY } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1, .range_off = 3,
				  .range_len = 4 };
	char buf[4] = "....";
	struct remote_resp resp;
	struct remote *r = new_remote(5, 2);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/f");
	req.buf = buf;
	req.buf_size = sizeof(buf);
	assert_int_equal(remote_do(r, &req, &resp), -EIO);
	assert_true(resp.range_ignored);
	assert_int_equal(resp.received, 0);
	assert_memory_equal(buf, "....", 4);
	remote_resp_free(&resp);
	req.range_off = 0;	/* claim the second reply */
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_int_equal(f.served, 2);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_body_over_buffer_is_eio_over_max_is_efbig(void **state)
{
	struct fake f = { .replies = { FULL_BODY, FULL_BODY } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1 };
	char buf[4];
	struct remote_resp resp;
	struct remote *r = new_remote(5, 2);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/f");
	req.buf = buf;
	req.buf_size = sizeof(buf);
	assert_int_equal(remote_do(r, &req, &resp), -EIO);
	remote_resp_free(&resp);
	req.buf = NULL;
	req.max_body = 5;
	assert_int_equal(remote_do(r, &req, &resp), -EFBIG);
	fake_stop(&f);
	assert_int_equal(f.served, 2);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static int sink_refuses(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return -ENOSPC;
}

static void test_do_sink_abort_returns_its_errno(void **state)
{
	struct fake f = { .replies = { FULL_BODY } };
	struct remote_req req = { .method = REMOTE_GET, .body_fd = -1, .sink = sink_refuses };
	struct remote_resp resp;
	struct remote *r = new_remote(5, 2);

	(void)state;
	fake_start(&f);
	req.url = url_of(&f, "/f");
	assert_int_equal(remote_do(r, &req, &resp), -ENOSPC);
	fake_stop(&f);
	assert_int_equal(f.served, 1);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_put_sends_body_and_sigv4_header(void **state)
{
	struct fake f = { .replies = {
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" } };
	struct remote_opts o = { .name = "s3", .timeout = 5, .retries = 0,
				 .sigv4 = "aws:amz:us-east-1:s3", .user = "AK", .password = "SK" };
	struct remote_req req = { .method = REMOTE_PUT, .body = "data", .body_fd = -1,
				  .body_len = 4 };
	struct remote_resp resp;
	struct remote *r;

	(void)state;
	assert_int_equal(remote_create(&r, &o), 0);
	fake_start(&f);
	req.url = url_of(&f, "/bucket/key");
	assert_int_equal(remote_do(r, &req, &resp), 0);
	fake_stop(&f);
	assert_string_equal(f.request[0], "PUT /bucket/key HTTP/1.1");
	assert_true(f.signed_unsigned[0]);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

static void test_do_refused_fails_fast_with_eio(void **state)
{
	struct fake f = { .replies = { NULL } };
	struct remote_req req = { .method = REMOTE_HEAD, .body_fd = -1 };
	struct remote_resp resp;
	struct remote *r = new_remote(1, 2);
	struct timespec a, b;

	(void)state;
	fake_start(&f);
	fake_stop(&f);		/* the port is now closed */
	req.url = url_of(&f, "/");
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(remote_do(r, &req, &resp), -EIO);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true(b.tv_sec - a.tv_sec <= 3);	/* (retries + 1) x refused + < 0.4 s backoff */
	assert_int_equal(resp.status, 0);
	remote_resp_free(&resp);
	free((char *)req.url);
	remote_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errno_maps_statuses),
		cmocka_unit_test(test_errno_maps_curl_codes),
		cmocka_unit_test(test_retryable_transport_errors_5xx_and_429),
		cmocka_unit_test(test_escape_keeps_unreserved_only),
		cmocka_unit_test(test_do_retries_503_then_succeeds),
		cmocka_unit_test(test_do_404_is_enoent_with_error_body_and_no_retry),
		cmocka_unit_test(test_do_ranged_get_resumes_after_delivered_bytes),
		cmocka_unit_test(test_do_range_ignored_from_zero_keeps_first_bytes),
		cmocka_unit_test(test_do_range_ignored_elsewhere_is_eio_without_retry),
		cmocka_unit_test(test_do_body_over_buffer_is_eio_over_max_is_efbig),
		cmocka_unit_test(test_do_sink_abort_returns_its_errno),
		cmocka_unit_test(test_do_put_sends_body_and_sigv4_header),
		cmocka_unit_test(test_do_refused_fails_fast_with_eio),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
