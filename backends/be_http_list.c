/*
 * be_http_list.c - what the http backend reads from a server's pages:
 * percent-decoded names, datastore URLs, and folder listings (nginx and
 * Apache autoindex HTML through libxml2's HTML parser, nginx's JSON
 * autoindex through jansson).
 *
 * Only a link that is a relative, single path component becomes an entry:
 * parents, absolute URLs, schemes, query links (Apache's sort links), and
 * names that decode to "", ".", "..", or hold a '/' or a NUL are skipped, so
 * no name from a page can reach outside its folder.  Sizes are kept only
 * when the page gives an exact byte count (nginx); Apache's "1.2M" is left
 * unknown, for a HEAD to settle.
 *
 * Threading: pure functions over their arguments; libxml2 is initialised
 * once (be_http_list_init) before the first parse.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include "be_http.h"


/* ---- names and URLs ---- */

static int be_http_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool be_http_name_ok(const char *s, size_t len)
{
	return len > 0 && len <= BE_HTTP_NAME_MAX && !memchr(s, '/', len) &&
	       !memchr(s, '\0', len) && !(len == 1 && s[0] == '.') &&
	       !(len == 2 && s[0] == '.' && s[1] == '.');
}

int be_http_decode_name(char **out, const char *s, size_t len)
{
	char *name = malloc(len + 1);
	size_t n = 0;

	if (!name)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < len &&
		    (hi = be_http_hex((unsigned char)s[i + 1])) >= 0 &&
		    (lo = be_http_hex((unsigned char)s[i + 2])) >= 0) {
			name[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			name[n++] = s[i];
		}
	}
	name[n] = '\0';
	if (!be_http_name_ok(name, n)) {
		free(name);
		return -EINVAL;
	}
	*out = name;
	return 0;
}

/* Where the host starts in an http(s) URL with a non-empty host, else NULL. */
static const char *be_http_host(const char *url)
{
	const char *host;
	size_t len;

	if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return NULL;
	len = strcspn(host, "/?#");
	if (memchr(host, '@', len))	/* user info: the host follows it */
		host = (const char *)memchr(host, '@', len) + 1, len = strcspn(host, "/?#");
	if (len == 0 || host[0] == ':' || strpbrk(url, " \t\r\n"))
		return NULL;
	return host;
}

int be_http_split_url(const char *url, char **root, char **file)
{
	const char *host = be_http_host(url);
	const char *path, *end, *last;

	if (!host)
		return -EINVAL;
	path = host + strcspn(host, "/?#");
	end = path + strcspn(path, "?#");
	*file = NULL;
	if (*path != '/') {	/* http://host or http://host?q: the server's root folder */
		if (asprintf(root, "%.*s/%s", (int)(path - url), url, path) < 0)
			return -ENOMEM;
		return 0;
	}
	if (!(*root = strdup(url)))
		return -ENOMEM;
	if (end[-1] == '/')
		return 0;
	for (last = end; last[-1] != '/'; last--)
		;
	if (be_http_decode_name(file, last, (size_t)(end - last)) == 0)
		return 0;
	free(*root);
	*root = NULL;
	return -EINVAL;
}
/* ---- listings ---- */

void be_http_listing_free(struct be_http_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->e[i].name);
	free(l->e);
	*l = (struct be_http_listing){ 0 };
}

/* Adds @e (its name now owned by @l). 0 or -ENOMEM (the name is freed). */
static int be_http_listing_add(struct be_http_listing *l, struct be_http_entry *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct be_http_entry *p = reallocarray(l->e, cap, sizeof(*p));

		if (!p) {
			free(e->name);
			return -ENOMEM;
		}
		l->e = p;
		l->cap = cap;
	}
	l->e[l->n++] = *e;
	return 0;
}

static int be_http_entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct be_http_entry *)a)->name,
		      ((const struct be_http_entry *)b)->name);
}

/* Sorts by name and drops repeats (Apache links an entry's icon and its name). */
static void be_http_listing_finish(struct be_http_listing *l)
{
	size_t n = 0;

	if (l->n > 1)
		qsort(l->e, l->n, sizeof(*l->e), be_http_entry_cmp);
	for (size_t i = 0; i < l->n; i++) {
		if (n > 0 && strcmp(l->e[n - 1].name, l->e[i].name) == 0) {
			free(l->e[i].name);
			continue;
		}
		l->e[n++] = l->e[i];
	}
	l->n = n;
}

static int be_http_json_entry(struct be_http_listing *l, json_t *v)
{
	json_t *name = json_object_get(v, "name");
	const char *type = json_string_value(json_object_get(v, "type"));
	const char *mtime = json_string_value(json_object_get(v, "mtime"));
	json_t *size = json_object_get(v, "size");
	struct be_http_entry e = { .mtime = -1 };

	if (!json_is_string(name) ||
	    !be_http_name_ok(json_string_value(name), json_string_length(name)))
		return 0;
	e.name = strdup(json_string_value(name));
	if (!e.name)
		return -ENOMEM;
	e.is_dir = type && strcmp(type, "directory") == 0;
	if (mtime)
		e.mtime = curl_getdate(mtime, NULL);
	if (!e.is_dir && json_is_integer(size) && json_integer_value(size) >= 0) {
		e.size_known = true;
		e.size = json_integer_value(size);
	}
	return be_http_listing_add(l, &e);
}

int be_http_parse_json(struct be_http_listing *out, const char *body, size_t len)
{
	json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
	size_t i;
	json_t *v;
	int ret = 0;

	*out = (struct be_http_listing){ 0 };
	if (!json_is_array(root)) {
		json_decref(root);
		return -EIO;
	}
	json_array_foreach(root, i, v) {
		if (json_is_object(v) && (ret = be_http_json_entry(out, v)) < 0)
			break;
	}
	json_decref(root);
	if (ret < 0) {
		be_http_listing_free(out);
		return ret;
	}
	be_http_listing_finish(out);
	return 0;
}

/*
 * Reads nginx's "DD-Mon-YYYY HH:MM   SIZE" that follows a link into @e: the
 * mtime (UTC) and, when SIZE is a plain byte count, the size.  Apache's
 * "YYYY-MM-DD HH:MM  1.2M" does not match, and leaves both unknown.
 */
static void be_http_nginx_meta(const char *text, struct be_http_entry *e)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	int day, year, hour, min;
	char mon[4], size[32];
	const char *m;
	struct tm tm = { 0 };

	if (sscanf(text, " %2d-%3[A-Za-z]-%4d %2d:%2d %31s", &day, mon, &year, &hour, &min,
		   size) != 6 || strlen(mon) != 3 || !(m = strstr(months, mon)) ||
	    (m - months) % 3 != 0)
		return;
	tm.tm_mday = day;
	tm.tm_mon = (int)(m - months) / 3;
	tm.tm_year = year - 1900;
	tm.tm_hour = hour;
	tm.tm_min = min;
	e->mtime = timegm(&tm);
	if (e->is_dir || strspn(size, "0123456789") != strlen(size) || strlen(size) > 18)
		return;
	e->size_known = true;
	e->size = strtoll(size, NULL, 10);
}

/*
 * The entry an href names, when it is one relative component: "name",
 * "name/" (a folder) or nginx's "./name" (for names with a ':').  Returns 0
 * with e->name set, 1 for a link to skip, -ENOMEM.
 */
static int be_http_href(const char *href, struct be_http_entry *e)
{
	bool dot_slash = strncmp(href, "./", 2) == 0;
	const char *s = dot_slash ? href + 2 : href;
	size_t len = strlen(s);
	size_t first_slash = strcspn(s, "/");
	int ret;

	if (len == 0 || strpbrk(s, "?#") || s[0] == '/')
		return 1;	/* the parent, sort links, anchors, absolute paths */
	if (!dot_slash && memchr(s, ':', first_slash))
		return 1;	/* a scheme: http://, mailto:, javascript: */
	if (s[len - 1] == '/') {
		e->is_dir = true;
		len--;
	}
	if (memchr(s, '/', len))
		return 1;
	ret = be_http_decode_name(&e->name, s, len);
	return ret == -EINVAL ? 1 : ret;
}

static int be_http_html_link(struct be_http_listing *l, xmlNode *a)
{
	xmlChar *href = xmlGetProp(a, (const xmlChar *)"href");
	struct be_http_entry e = { .mtime = -1 };
	int ret;

	if (!href)
		return 0;
	ret = be_http_href((const char *)href, &e);
	xmlFree(href);
	if (ret != 0)
		return ret < 0 ? ret : 0;
	if (a->next && a->next->type == XML_TEXT_NODE && a->next->content)
		be_http_nginx_meta((const char *)a->next->content, &e);
	return be_http_listing_add(l, &e);
}

static int be_http_html_walk(struct be_http_listing *l, xmlNode *node)
{
	int ret = 0;

	for (; node && ret == 0; node = node->next) {
		if (node->type != XML_ELEMENT_NODE)
			continue;
		if (strcasecmp((const char *)node->name, "a") == 0)
			ret = be_http_html_link(l, node);
		else
			ret = be_http_html_walk(l, node->children);
	}
	return ret;
}

static pthread_once_t be_http_xml_once = PTHREAD_ONCE_INIT;

static void be_http_xml_init(void)
{
	xmlInitParser();
}

void be_http_list_init(void)
{
	pthread_once(&be_http_xml_once, be_http_xml_init);
}

int be_http_parse_html(struct be_http_listing *out, const char *body, size_t len)
{
	htmlDocPtr doc;
	int ret;

	*out = (struct be_http_listing){ 0 };
	if (len > INT_MAX)
		return -EFBIG;
	if (len == 0)
		return 0;
	be_http_list_init();
	doc = htmlReadMemory(body, (int)len, NULL, "UTF-8",
			     HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
	if (!doc)
		return 0;	/* not HTML at all: an empty folder, as far as we can tell */
	ret = be_http_html_walk(out, xmlDocGetRootElement(doc));
	xmlFreeDoc(doc);
	if (ret < 0) {
		be_http_listing_free(out);
		return ret;
	}
	be_http_listing_finish(out);
	return 0;
}

int be_http_parse_listing(struct be_http_listing *out, const char *body, size_t len,
			  const char *content_type)
{
	size_t skip = 0;

	while (skip < len && isspace((unsigned char)body[skip]))
		skip++;
	if ((content_type && strcasestr(content_type, "json")) || (skip < len && body[skip] == '['))
		return be_http_parse_json(out, body, len);
	return be_http_parse_html(out, body, len);
}

