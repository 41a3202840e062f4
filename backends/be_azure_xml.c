/*
 * be_azure_xml.c - Azure Blob's XML, read with libxml2 (be_azure.h): a page
 * of List Blobs (EnumerationResults: Blobs/Blob with Name and Properties,
 * Blobs/BlobPrefix with Name, NextMarker) and an error body (Code,
 * Message).  No network, no entities, nothing printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "be_azure.h"
#include "name_set.h"

static xmlDocPtr be_azure_xml_read(const char *xml, size_t len)
{
	if (!xml || len == 0 || len > INT_MAX)
		return NULL;
	return xmlReadMemory(xml, (int)len, "azure.xml", NULL,
			     XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

static bool be_azure_xml_is(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static xmlNodePtr be_azure_xml_child(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr n = parent ? parent->children : NULL; n; n = n->next)
		if (be_azure_xml_is(n, name))
			return n;
	return NULL;
}

/* The text of @parent's child @name (xmlFree it), or NULL. */
static char *be_azure_xml_text(xmlNodePtr parent, const char *name)
{
	xmlNodePtr n = be_azure_xml_child(parent, name);

	return n ? (char *)xmlNodeGetContent(n) : NULL;
}

/*
 * What a page names twice, a blob "a" and the folder "a/", shown once
 * (name_set_twin_hidden; be_azure_ask decides alike): @dirs its folders
 * (without their '/'), @files its blobs of one byte or more.  0 or -ENOMEM.
 */
static int be_azure_xml_twins(xmlNodePtr blobs, struct name_set *dirs, struct name_set *files)
{
	int ret = 0;

	for (xmlNodePtr n = blobs ? blobs->children : NULL; n && ret == 0; n = n->next) {
		bool is_dir = be_azure_xml_is(n, "BlobPrefix");
		char *name, *size;
		size_t len;

		if (!is_dir && !be_azure_xml_is(n, "Blob"))
			continue;
		size = is_dir ? NULL
			      : be_azure_xml_text(be_azure_xml_child(n, "Properties"), "Content-Length");
		name = (is_dir || (size && strtoll(size, NULL, 10) > 0))
			? be_azure_xml_text(n, "Name") : NULL;
		len = name ? strlen(name) : 0;
		if (name && is_dir && len && name[len - 1] == '/')
			len--;
		if (name)
			ret = name_set_add(is_dir ? dirs : files, name, len);
		xmlFree(name);
		xmlFree(size);
	}
	return ret;
}

/* One Blob or BlobPrefix element to @fn, unless a twin of it hides it. */
static int be_azure_xml_entry(xmlNodePtr n, const struct name_set *dirs,
			      const struct name_set *files, be_azure_entry_fn *fn, void *arg)
{
	bool is_dir = be_azure_xml_is(n, "BlobPrefix");
	xmlNodePtr props = be_azure_xml_child(n, "Properties");
	char *name = be_azure_xml_text(n, "Name");
	char *size = is_dir ? NULL : be_azure_xml_text(props, "Content-Length");
	char *date = is_dir ? NULL : be_azure_xml_text(props, "Last-Modified");
	char *etag = is_dir ? NULL : be_azure_xml_text(props, "Etag");
	struct be_azure_entry e = { .name = name, .is_dir = is_dir, .mtime = -1,
				    .etag = etag ? etag : "" };
	size_t len = name ? strlen(name) : 0;
	bool hidden = false;
	int ret = 0;

	if (size)
		e.size = strtoll(size, NULL, 10);
	if (date)
		e.mtime = curl_getdate(date, NULL);
	if (name && is_dir && len && name[len - 1] == '/') {
		name[len - 1] = '\0';
		hidden = name_set_twin_hidden(dirs, files, name, true);
		name[len - 1] = '/';
	} else if (name) {
		hidden = name_set_twin_hidden(dirs, files, name, false);
	}
	if (name && *name && !hidden)
		ret = fn(arg, &e);
	xmlFree(name);
	xmlFree(size);
	xmlFree(date);
	xmlFree(etag);
	return ret;
}

int be_azure_parse_list(const char *xml, size_t len, be_azure_entry_fn *fn, void *arg,
			char *marker, size_t marker_size)
{
	xmlDocPtr doc = be_azure_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL, blobs;
	struct name_set dirs = { 0 }, files = { 0 };
	char *next;
	int ret = 0;

	marker[0] = '\0';
	if (!root || !be_azure_xml_is(root, "EnumerationResults")) {
		xmlFreeDoc(doc);
		return -EIO;
	}
	blobs = be_azure_xml_child(root, "Blobs");
	ret = be_azure_xml_twins(blobs, &dirs, &files);
	for (xmlNodePtr n = blobs ? blobs->children : NULL; n && ret == 0; n = n->next)
		if (be_azure_xml_is(n, "Blob") || be_azure_xml_is(n, "BlobPrefix"))
			ret = be_azure_xml_entry(n, &dirs, &files, fn, arg);
	name_set_free(&dirs);
	name_set_free(&files);
	next = be_azure_xml_text(root, "NextMarker");
	if (next && strlen(next) < marker_size)
		snprintf(marker, marker_size, "%s", next);
	else if (next && ret == 0)
		ret = -EIO;	/* a marker we cannot keep would end the listing early */
	xmlFree(next);
	xmlFreeDoc(doc);
	return ret;
}

int be_azure_parse_error(const char *xml, size_t len, char *out, size_t size)
{
	xmlDocPtr doc = be_azure_xml_read(xml, len);
	xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
	char *code = root ? be_azure_xml_text(root, "Code") : NULL;
	char *msg = root ? be_azure_xml_text(root, "Message") : NULL;
	int ret = code ? 0 : -ENOENT;

	if (code)	/* the message's first line: Azure adds RequestId and Time on others */
		snprintf(out, size, "%s: %.*s", code, msg ? (int)strcspn(msg, "\r\n") : 0,
			 msg ? msg : "");
	xmlFree(code);
	xmlFree(msg);
	xmlFreeDoc(doc);
	return ret;
}
