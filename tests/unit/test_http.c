/*
 * test_http.c - the http backend's offline pieces: the listing parsers fed
 * with pages as nginx 1.22 and Apache 2.4 write them (and with hostile
 * ones), and the splitting of a datastore URL into a folder or one file.
 *
 * A listing must never yield a name that leaves its folder: no '/', no NUL,
 * no "." or "..", nothing from an absolute or foreign link.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "be_http.h"

/* As nginx 1.22 writes it (captured from scripts/server-nginx.sh). */
static const char nginx_html[] =
	"<html>\r\n<head><title>Index of /</title></head>\r\n<body>\r\n"
	"<h1>Index of /</h1><hr><pre><a href=\"../\">../</a>\r\n"
	"<a href=\"sub/\">sub/</a>                                               "
	"23-Nov-2026 06:12                   -\r\n"
	"<a href=\"100%25.txt\">100%.txt</a>                                           "
	"23-Nov-2026 06:12                   2\r\n"
	"<a href=\"a%26b%3Cc%3E.txt\">a&amp;b&lt;c&gt;.txt</a>                        "
	"23-Nov-2026 06:12                   4\r\n"
	"<a href=\"a%3Ab\">a:b</a>                                                "
	"23-Nov-2026 06:12                   2\r\n"
	"<a href=\"big.bin\">big.bin</a>                                            "
	"02-Jan-2024 03:04            20971520\r\n"
	"<a href=\"with%20space.txt\">with space.txt</a>                             "
	"23-Nov-2026 06:12                   2\r\n"
	"<a href=\"%C3%BCn%C3%AF.txt\">\xc3\xbcn\xc3\xaf.txt</a>                    "
	"23-Nov-2026 06:12                   2\r\n"
	"</pre><hr></body>\r\n</html>\r\n";

/* nginx with autoindex_exact_size off: "20M" is not a byte count. */
static const char nginx_html_inexact[] =
	"<html><body><pre><a href=\"../\">../</a>\r\n"
	"<a href=\"big.bin\">big.bin</a>      02-Jan-2024 03:04     20M\r\n"
	"</pre></body></html>";

static const char nginx_json[] =
	"[\n"
	"{ \"name\":\"sub\", \"type\":\"directory\", \"mtime\":\"Mon, 23 Nov 2026 06:12:23 GMT\" },\n"
	"{ \"name\":\"100%.txt\", \"type\":\"file\", \"mtime\":\"Mon, 23 Nov 2026 06:12:23 GMT\", "
	"\"size\":2 },\n"
	"{ \"name\":\"a&b<c>.txt\", \"type\":\"file\", \"mtime\":\"Mon, 23 Nov 2026 06:12:23 GMT\", "
	"\"size\":4 },\n"
	"{ \"name\":\"big.bin\", \"type\":\"file\", \"mtime\":\"Tue, 02 Jan 2024 03:04:05 GMT\", "
	"\"size\":20971520 },\n"
	"{ \"name\":\"with space.txt\", \"type\":\"file\", \"mtime\":\"Mon, 23 Nov 2026 06:12:23 GMT\", "
	"\"size\":2 },\n"
	"{ \"name\":\"\xc3\xbcn\xc3\xaf.txt\", \"type\":\"file\", "
	"\"mtime\":\"Mon, 23 Nov 2026 06:12:23 GMT\", \"size\":2 }\n"
	"]";

/* Apache 2.4 mod_autoindex, FancyIndexing with HTMLTable. */
static const char apache_table[] =
	"<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n<html>\n <head>\n"
	"  <title>Index of /data</title>\n </head>\n <body>\n<h1>Index of /data</h1>\n"
	"  <table>\n   <tr><th valign=\"top\"><img src=\"/icons/blank.gif\" alt=\"[ICO]\"></th>"
	"<th><a href=\"?C=N;O=D\">Name</a></th><th><a href=\"?C=M;O=A\">Last modified</a></th>"
	"<th><a href=\"?C=S;O=A\">Size</a></th><th><a href=\"?C=D;O=A\">Description</a></th></tr>\n"
	"   <tr><th colspan=\"5\"><hr></th></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"></td>"
	"<td><a href=\"/\">Parent Directory</a></td><td>&nbsp;</td><td align=\"right\">  - </td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/folder.gif\" alt=\"[DIR]\"></td>"
	"<td><a href=\"images/\">images/</a></td><td align=\"right\">2024-01-04 10:00  </td>"
	"<td align=\"right\">  - </td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/compressed.gif\" alt=\"[   ]\"></td>"
	"<td><a href=\"train%20set.tar.gz\">train set.tar.gz</a></td>"
	"<td align=\"right\">2024-01-04 10:00  </td><td align=\"right\">1.2M</td></tr>\n"
	"   <tr><th colspan=\"5\"><hr></th></tr>\n</table>\n"
	"<address>Apache/2.4.57 (Debian) Server at localhost Port 80</address>\n</body></html>\n";

/* Apache with FancyIndexing in <pre>, icons linked too: each entry has two links. */
static const char apache_pre[] =
	"<html><head><title>Index of /d</title></head><body><h1>Index of /d</h1><pre>"
	"<img src=\"/icons/blank.gif\" alt=\"Icon \"> <a href=\"?C=N;O=D\">Name</a>"
	"                    <a href=\"?C=M;O=A\">Last modified</a>      <a href=\"?C=S;O=A\">Size</a>"
	"<hr><a href=\"/\"><img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"></a> "
	"<a href=\"/\">Parent Directory</a>                             -   \n"
	"<a href=\"notes.txt\"><img src=\"/icons/text.gif\" alt=\"[TXT]\"></a> "
	"<a href=\"notes.txt\">notes.txt</a>               2024-01-04 10:00  1.2K  \n"
	"<hr></pre></body></html>";

static const char hostile_html[] =
	"<html><body><pre>"
	"<a href=\"../x\">up</a> <a href=\"/etc\">etc</a> <a href=\"/etc/passwd\">pw</a>"
	"<a href=\"http://evil/\">evil</a> <a href=\"HTTPS://evil/x\">evil2</a>"
	"<a href=\"//evil/x\">evil3</a> <a href=\"javascript:alert(1)\">js</a>"
	"<a href=\"mailto:a@b\">mail</a> <a href=\"a%2Fb\">slash</a> <a href=\"a%2fb/\">slash2</a>"
	"<a href=\"%00\">nul</a> <a href=\"x%00y\">nul2</a> <a href=\".\">dot</a>"
	"<a href=\"..\">dotdot</a> <a href=\"./\">dot2</a> <a href=\"%2e%2E\">dotdot2</a>"
	"<a href=\"%2E/\">dot3</a> <a href=\"x/y\">deep</a> <a href=\"sub/../../etc\">walk</a>"
	"<a href=\"#top\">anchor</a> <a href=\"?C=N;O=D\">sort</a> <a href=\"\">empty</a>"
	"<a>no href</a> <a href=\"./c:d\">colon</a> <a href=\"ok%2e\">ok</a>"
	"<a href=\"100%\">pct</a> <a href=\"%zz\">badpct</a>"
	"</pre></body></html>";

static const char hostile_json[] =
	"[ 1, \"x\", null, { \"type\":\"file\" }, { \"name\":42 },"
	"{ \"name\":\"../x\", \"type\":\"file\", \"size\":1 },"
	"{ \"name\":\"a/b\", \"type\":\"file\", \"size\":1 },"
	"{ \"name\":\".\", \"type\":\"directory\" }, { \"name\":\"..\", \"type\":\"directory\" },"
	"{ \"name\":\"\", \"type\":\"file\" },"
	"{ \"name\":\"x\\u0000y\", \"type\":\"file\", \"size\":1 },"
	"{ \"name\":\"fine\", \"type\":\"file\", \"size\":-5 } ]";

static const struct be_http_entry *find(const struct be_http_listing *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->e[i].name, name) == 0)
			return &l->e[i];
	return NULL;
}

static void assert_names(const struct be_http_listing *l, const char *const *want)
{
	size_t n = 0;

	for (; want[n]; n++)
		assert_non_null(find(l, want[n]));
	assert_int_equal(l->n, n);
	for (size_t i = 1; i < l->n; i++)
		assert_true(strcmp(l->e[i - 1].name, l->e[i].name) < 0);
}

static void test_nginx_html_names_sizes_and_mtimes(void **state)
{
	static const char *const want[] = { "sub", "100%.txt", "a&b<c>.txt", "a:b", "big.bin",
		"with space.txt", "\xc3\xbcn\xc3\xaf.txt", NULL };
	struct be_http_listing l;
	const struct be_http_entry *e;

	(void)state;
	assert_int_equal(be_http_parse_listing(&l, nginx_html, strlen(nginx_html), "text/html"), 0);
	assert_names(&l, want);
	e = find(&l, "sub");
	assert_true(e->is_dir);
	assert_false(e->size_known);
	e = find(&l, "big.bin");
	assert_false(e->is_dir);
	assert_true(e->size_known);
	assert_int_equal(e->size, 20971520);
	assert_int_equal(e->mtime, 1704164640);	/* 2024-01-02 03:04 UTC */
	assert_int_equal(find(&l, "with space.txt")->size, 2);
	be_http_listing_free(&l);
}

static void test_nginx_html_inexact_size_is_unknown(void **state)
{
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_html(&l, nginx_html_inexact, strlen(nginx_html_inexact)), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.e[0].name, "big.bin");
	assert_false(l.e[0].size_known);
	be_http_listing_free(&l);
}

static void test_nginx_json_names_types_sizes(void **state)
{
	static const char *const want[] = { "sub", "100%.txt", "a&b<c>.txt", "big.bin",
		"with space.txt", "\xc3\xbcn\xc3\xaf.txt", NULL };
	struct be_http_listing l;
	const struct be_http_entry *e;

	(void)state;
	assert_int_equal(be_http_parse_listing(&l, nginx_json, strlen(nginx_json),
					       "application/json"), 0);
	assert_names(&l, want);
	assert_true(find(&l, "sub")->is_dir);
	e = find(&l, "big.bin");
	assert_true(e->size_known);
	assert_int_equal(e->size, 20971520);
	assert_int_equal(e->mtime, 1704164645);
	be_http_listing_free(&l);
}

static void test_json_is_recognised_by_its_body(void **state)
{
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_listing(&l, nginx_json, strlen(nginx_json), NULL), 0);
	assert_int_equal(l.n, 6);
	be_http_listing_free(&l);
}

static void test_apache_table_skips_sort_and_parent_links(void **state)
{
	static const char *const want[] = { "images", "train set.tar.gz", NULL };
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_listing(&l, apache_table, strlen(apache_table), "text/html"),
			 0);
	assert_names(&l, want);
	assert_true(find(&l, "images")->is_dir);
	assert_false(find(&l, "train set.tar.gz")->size_known);	/* "1.2M" is not exact */
	be_http_listing_free(&l);
}

static void test_apache_pre_icon_links_are_one_entry(void **state)
{
	static const char *const want[] = { "notes.txt", NULL };
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_html(&l, apache_pre, strlen(apache_pre)), 0);
	assert_names(&l, want);
	assert_false(l.e[0].size_known);
	be_http_listing_free(&l);
}

static void test_hostile_hrefs_never_leave_the_folder(void **state)
{
	static const char *const want[] = { "c:d", "ok.", "100%", "%zz", NULL };
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_html(&l, hostile_html, strlen(hostile_html)), 0);
	assert_names(&l, want);
	for (size_t i = 0; i < l.n; i++)
		assert_null(strchr(l.e[i].name, '/'));
	be_http_listing_free(&l);
}

static void test_hostile_json_names_are_skipped(void **state)
{
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_json(&l, hostile_json, strlen(hostile_json)), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.e[0].name, "fine");
	assert_false(l.e[0].size_known);
	be_http_listing_free(&l);
}

static void test_bad_json_is_eio_and_empty_html_is_empty(void **state)
{
	struct be_http_listing l;

	(void)state;
	assert_int_equal(be_http_parse_json(&l, "[{\"name\":", 9), -EIO);
	assert_int_equal(be_http_parse_json(&l, "{}", 2), -EIO);
	assert_int_equal(be_http_parse_html(&l, "", 0), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(be_http_parse_html(&l, "plain text", 10), 0);
	assert_int_equal(l.n, 0);
	be_http_listing_free(&l);
}

static void test_decode_name(void **state)
{
	char *s;

	(void)state;
	assert_int_equal(be_http_decode_name(&s, "a%20b%C3%BC", 11), 0);
	assert_string_equal(s, "a b\xc3\xbc");
	free(s);
	assert_int_equal(be_http_decode_name(&s, "a%2", 3), 0);	/* a stray '%' is a '%' */
	assert_string_equal(s, "a%2");
	free(s);
	assert_int_equal(be_http_decode_name(&s, "a%2Fb", 5), -EINVAL);
	assert_int_equal(be_http_decode_name(&s, "%00", 3), -EINVAL);
	assert_int_equal(be_http_decode_name(&s, "%2e", 3), -EINVAL);
	assert_int_equal(be_http_decode_name(&s, "..", 2), -EINVAL);
	assert_int_equal(be_http_decode_name(&s, "", 0), -EINVAL);
}

static void split(const char *url, int want_ret, const char *want_root, const char *want_file)
{
	char *root = NULL, *file = NULL;

	assert_int_equal(be_http_split_url(url, &root, &file), want_ret);
	if (want_ret < 0)
		return;
	assert_string_equal(root, want_root);
	if (want_file)
		assert_string_equal(file, want_file);
	else
		assert_null(file);
	free(root);
	free(file);
}

static void test_split_url_folder_or_single_file(void **state)
{
	(void)state;
	split("http://127.0.0.1:8080/", 0, "http://127.0.0.1:8080/", NULL);
	split("https://example.org/data/", 0, "https://example.org/data/", NULL);
	split("http://example.org", 0, "http://example.org/", NULL);
	split("http://127.0.0.1:8080/big.bin", 0, "http://127.0.0.1:8080/big.bin", "big.bin");
	split("http://h/d/my%20data%C3%BC.tar?sig=1", 0, "http://h/d/my%20data%C3%BC.tar?sig=1",
	      "my data\xc3\xbc.tar");
	split("http://user:pw@h/x", 0, "http://user:pw@h/x", "x");
	split("ftp://h/x", -EINVAL, NULL, NULL);
	split("http:///x", -EINVAL, NULL, NULL);
	split("http://:80/x", -EINVAL, NULL, NULL);
	split("h/x", -EINVAL, NULL, NULL);
	split("http://h/a%2Fb", -EINVAL, NULL, NULL);
	split("http://h/%2e%2e", -EINVAL, NULL, NULL);
	split("http://h/a b", -EINVAL, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx_html_names_sizes_and_mtimes),
		cmocka_unit_test(test_nginx_html_inexact_size_is_unknown),
		cmocka_unit_test(test_nginx_json_names_types_sizes),
		cmocka_unit_test(test_json_is_recognised_by_its_body),
		cmocka_unit_test(test_apache_table_skips_sort_and_parent_links),
		cmocka_unit_test(test_apache_pre_icon_links_are_one_entry),
		cmocka_unit_test(test_hostile_hrefs_never_leave_the_folder),
		cmocka_unit_test(test_hostile_json_names_are_skipped),
		cmocka_unit_test(test_bad_json_is_eio_and_empty_html_is_empty),
		cmocka_unit_test(test_decode_name),
		cmocka_unit_test(test_split_url_folder_or_single_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
