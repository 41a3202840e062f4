/*
 * be_s3_xml.c - the XML and text of S3's answers and of the one XML body
 * the backend sends: ListObjectsV2 pages (entries, IsTruncated,
 * NextContinuationToken), the <Code> of an error, one field of a small
 * answer (the UploadId of a new multipart upload), ISO 8601 times, and the
 * CompleteMultipartUpload body.
 *
 * A listing page is walked as it is parsed and each entry handed to the
 * caller's callback, so a page is never copied into a list of our own.  A
 * listed name is kept only when it is one path component beneath the
 * prefix: "", ".", "..", names holding a '/' and names longer than NAME_MAX
 * are skipped, so no key can reach outside its folder.  libxml2 reads with
 * no network and no entity substitution, and keeps quiet on stderr.
 *
 * Not here: fetching the XML (be_s3_req.c) or deciding what an answer
 * means to the filesystem (be_s3.c).  Key names XML 1.0 cannot carry are
 * not supported.
 *
 * Threading: pure functions over their arguments; the backend initialises
 * libxml2 (xmlInitParser) at create, before the first parse.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "be_s3_int.h"
#include "name_set.h"

/* ---- S3's XML ---- */

static xmlDocPtr be_s3_xml_read(const char *xml, size_t len)
{
	if (!xml || len == 0 || len > INT_MAX)
		return NULL;
	/* No network, no entity substitution (the default), no noise on stderr. */
	return xmlReadMemory(xml, (int)len, "s3.xml", NULL,
			     XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

static bool be_s3_xml_is(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* The text of @parent's first child element @name (xmlFree it), or NULL. */
static char *be_s3_xml_text(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr n = parent->children; n; n = n->next)
		if (be_s3_xml_is(n, name))
			return (char *)xmlNodeGetContent(n);
	return NULL;
}

/* Copies the text of @name in @parent into @buf; "" when absent. */
static void be_s3_xml_copy(xmlNodePtr parent, const char *name, char *buf, size_t size)
{
	char *t = be_s3_xml_text(parent, name);

	snprintf(buf, size, "%s", t ? t : "");
	xmlFree(t);
}

time_t be_s3_parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end)
		return -1;
	if (*end == '.')
		end += 1 + strspn(end + 1, "0123456789");
	if (*end != 'Z' && *end != '\0')
		return -1;
	return timegm(&tm);
}

/* The name of a listed @key beneath @prefix, or NULL to skip it; @is_dir strips its '/'. */
static char *be_s3_entry_name(const char *key, const char *prefix, bool is_dir)
{
	size_t plen = strlen(prefix), len;
	char *name;

	if (!key || strncmp(key, prefix, plen) != 0)
		return NULL;
	name = strdup(key + plen);
	if (!name)
		return NULL;
	len = strlen(name);
	if (is_dir && len && name[len - 1] == '/')
		name[--len] = '\0';
	if (len == 0 || len > NAME_MAX || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0) {
		free(name);
		return NULL;
	}
	return name;
}

/*
 * What a page names twice, a folder and an object of one name, shown once
 * (name_set_twin_hidden): @dirs its folders, @files its objects of one
 * byte or more.
 */
struct be_s3_twins {
	struct name_set dirs, files;
};

/* Fills @t from the page under @root; 0 or -ENOMEM. */
static int be_s3_twins_find(xmlNodePtr root, const char *prefix, struct be_s3_twins *t)
{
	int ret = 0;

	for (xmlNodePtr n = root->children; n && ret == 0; n = n->next) {
		bool is_dir = be_s3_xml_is(n, "CommonPrefixes");
		char *key, *name, size[32];

		if (!is_dir && !be_s3_xml_is(n, "Contents"))
			continue;
		if (!is_dir) {
			be_s3_xml_copy(n, "Size", size, sizeof(size));
			if (strtoll(size, NULL, 10) <= 0)
				continue;	/* an empty object: hidden by a folder of its name */
		}
		key = be_s3_xml_text(n, is_dir ? "Prefix" : "Key");
		name = be_s3_entry_name(key, prefix, is_dir);
		if (name)
			ret = name_set_add(is_dir ? &t->dirs : &t->files, name, strlen(name));
		free(name);
		xmlFree(key);
	}
	return ret;
}

static int be_s3_parse_entry(xmlNodePtr n, const char *prefix, const struct be_s3_twins *t,
			     be_s3_entry_fn *fn, void *arg)
{
	bool is_dir = be_s3_xml_is(n, "CommonPrefixes");
	char *key = be_s3_xml_text(n, is_dir ? "Prefix" : "Key");
	char *name = be_s3_entry_name(key, prefix, is_dir);
	struct be_s3_obj o = { .is_dir = is_dir, .etag = "" };
	char size[32], mtime[64], etag[BE_S3_ETAG_MAX];
	int ret = 0;

	if (name && name_set_twin_hidden(&t->dirs, &t->files, name, is_dir)) {
		free(name);
		name = NULL;
	}
	if (name && !is_dir) {
		be_s3_xml_copy(n, "Size", size, sizeof(size));
		be_s3_xml_copy(n, "LastModified", mtime, sizeof(mtime));
		be_s3_xml_copy(n, "ETag", etag, sizeof(etag));
		o.size = strtoll(size, NULL, 10);
		o.mtime = be_s3_parse_time(mtime);
		if (o.mtime < 0)
			o.mtime = 0;
		o.etag = etag;
	}
	if (name)
		ret = fn(arg, name, &o);
	free(name);
	xmlFree(key);
	return ret;
}

int be_s3_parse_list(const char *xml, size_t len, const char *prefix, be_s3_entry_fn *fn,
		     void *arg, struct be_s3_page *page)
{
	xmlDocPtr doc = be_s3_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
	struct be_s3_twins twins = { 0 };
	int ret = 0;

	memset(page, 0, sizeof(*page));
	if (!root || !be_s3_xml_is(root, "ListBucketResult")) {
		xmlFreeDoc(doc);
		return -EIO;
	}
	ret = be_s3_twins_find(root, prefix, &twins);
	for (xmlNodePtr n = root->children; n && ret == 0; n = n->next) {
		if (be_s3_xml_is(n, "Contents") || be_s3_xml_is(n, "CommonPrefixes")) {
			page->n_keys++;
			ret = be_s3_parse_entry(n, prefix, &twins, fn, arg);
		} else if (be_s3_xml_is(n, "IsTruncated")) {
			char *t = (char *)xmlNodeGetContent(n);

			page->truncated = t && strcmp(t, "true") == 0;
			xmlFree(t);
		} else if (be_s3_xml_is(n, "NextContinuationToken") && !page->next_token) {
			char *t = (char *)xmlNodeGetContent(n);

			page->next_token = t && *t ? strdup(t) : NULL;
			xmlFree(t);
		}
	}
	name_set_free(&twins.dirs);
	name_set_free(&twins.files);
	xmlFreeDoc(doc);
	return ret;
}

/* The text of the root's child @name when the root is @root_name. 0 or -ENOENT. */
int be_s3_xml_field(const char *xml, size_t len, const char *root_name,
		    const char *name, char *buf, size_t size)
{
	xmlDocPtr doc = be_s3_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
	int ret = -ENOENT;

	if (root && be_s3_xml_is(root, root_name)) {
		be_s3_xml_copy(root, name, buf, size);
		ret = *buf ? 0 : -ENOENT;
	}
	xmlFreeDoc(doc);
	return ret;
}

int be_s3_parse_error(const char *xml, size_t len, char *code, size_t size)
{
	return be_s3_xml_field(xml, len, "Error", "Code", code, size);
}

/* ---- the body sent to complete a multipart upload ---- */

/*
 * The CompleteMultipartUpload body listing @n_parts parts by @etags (read,
 * not changed), its length in *@len; malloc'd, or NULL on ENOMEM.
 */
char *be_s3_mpu_body(char (*etags)[BE_S3_ETAG_MAX], unsigned int n_parts, size_t *len)
{
	char *body = NULL;
	FILE *out = open_memstream(&body, len);

	if (!out)
		return NULL;
	fputs("<CompleteMultipartUpload>", out);
	for (unsigned int i = 0; i < n_parts; i++) {
		char *etag = (char *)xmlEncodeSpecialChars(NULL, (const xmlChar *)etags[i]);

		fprintf(out, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", i + 1,
			etag ? etag : "");
		xmlFree(etag);
	}
	fputs("</CompleteMultipartUpload>", out);
	if (fclose(out) != 0) {
		free(body);
		return NULL;
	}
	return body;
}
