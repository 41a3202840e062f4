/*
 * image_ref.c - container image references, read as Docker reads them.
 *
 * The grammar is distribution/reference's (the one docker, podman and
 * every registry share):
 *
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain "/" ] component ( "/" component )*
 *   domain     := host-part ( "." host-part )* [ ":" port ]
 *   component  := [a-z0-9]+ ( separator [a-z0-9]+ )*
 *   separator  := "." | "_" | "__" | "-"+
 *   tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
 *   digest     := algorithm ":" hex{32,}    (sha256: exactly 64 lower-case)
 *
 * The first component is a domain when it has a '.' or a ':' or is
 * "localhost", and only when more components follow.  A name is at most
 * 255 bytes.  Messages say which part is wrong and how, for the
 * "file:line:col: field: message" a spec error becomes.  In core/, since the
 * config checks the images of its [environment] sections too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"

#define IMAGE_TAG_MAX	128

static int image_ref_fail(char *why, size_t len, const char *fmt, const char *part)
{
	snprintf(why, len, fmt, part);
	return -EINVAL;
}

/* Copies @len bytes of @src into @dst (@size bytes); -1 when they do not fit. */
static int image_copy(char *dst, size_t size, const char *src, size_t len)
{
	if (len >= size)
		return -1;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return 0;
}

static int image_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int image_alnum(char c)
{
	return image_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* One path component, @len bytes at @s: 0 or -1. */
static int image_component_ok(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0 || !image_lower_alnum(s[0]) || !image_lower_alnum(s[len - 1]))
		return -1;
	while (i < len) {
		if (image_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '_' && i + 1 < len && s[i + 1] == '_')
			i += 2;
		else if (s[i] == '_' || s[i] == '.')
			i++;
		else if (s[i] == '-')
			while (i < len && s[i] == '-')
				i++;
		else
			return -1;
		if (i >= len || !image_lower_alnum(s[i]))
			return -1;	/* a separator is followed by a letter or digit */
	}
	return 0;
}

/* "host.name:port", @len bytes at @s: 0 or -1. */
static int image_domain_ok(const char *s, size_t len)
{
	const char *colon = memchr(s, ':', len);
	size_t host = colon ? (size_t)(colon - s) : len;
	size_t i = 0;

	if (host == 0)
		return -1;
	while (i < host) {
		size_t start = i;

		while (i < host && (image_alnum(s[i]) || s[i] == '-'))
			i++;
		if (i == start || s[start] == '-' || s[i - 1] == '-')
			return -1;
		if (i < host && (s[i] != '.' || ++i == host))
			return -1;
	}
	if (colon) {
		const char *p = colon + 1;
		size_t n = len - host - 1;
		unsigned long port = 0;

		if (n == 0 || n > 5 || strspn(p, "0123456789") < n)
			return -1;
		for (size_t k = 0; k < n; k++)
			port = port * 10 + (unsigned long)(p[k] - '0');
		if (port == 0 || port > 65535)
			return -1;
	}
	return 0;
}

static int image_tag_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > IMAGE_TAG_MAX || !(image_alnum(s[0]) || s[0] == '_'))
		return -1;
	for (size_t i = 1; i < len; i++)
		if (!image_alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return -1;
	return 0;
}

static int image_digest_ok(const char *s)
{
	const char *colon = strchr(s, ':');
	size_t alen, hlen;

	if (!colon)
		return -1;
	alen = (size_t)(colon - s);
	hlen = strlen(colon + 1);
	if (alen == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return -1;
	for (size_t i = 1; i < alen; i++)
		if (!image_alnum(s[i]) && !strchr("+._-", s[i]))
			return -1;
	if (hlen < 32 || strspn(colon + 1, "0123456789abcdefABCDEF") != hlen)
		return -1;
	if (alen == 6 && memcmp(s, "sha256", 6) == 0 &&
	    (hlen != 64 || strspn(colon + 1, "0123456789abcdef") != hlen))
		return -1;
	return 0;
}

/* Whether the first component, @len bytes at @s, names a registry. */
static int image_is_domain(const char *s, size_t len)
{
	return memchr(s, '.', len) || memchr(s, ':', len) ||
	       (len == 9 && memcmp(s, "localhost", 9) == 0);
}

/* Checks the name (no tag, no digest) and splits it into out->domain and out->path. */
static int image_name_parse(const char *name, struct image_ref *out, char *why, size_t why_len)
{
	const char *slash = strchr(name, '/');
	const char *path = name;
	const char *p;

	if (strlen(name) > IMAGE_REF_MAX)
		return image_ref_fail(why, why_len, "the name is longer than %s bytes", "255");
	if (slash && image_is_domain(name, (size_t)(slash - name))) {
		if (image_domain_ok(name, (size_t)(slash - name)) < 0) {
			char host[IMAGE_REF_MAX + 1];

			snprintf(host, sizeof(host), "%.*s", (int)(slash - name), name);
			return image_ref_fail(why, why_len, "the registry '%s' is not a host name "
					      "or address with an optional :PORT", host);
		}
		if (image_copy(out->domain, sizeof(out->domain), name, (size_t)(slash - name)) < 0)
			return image_ref_fail(why, why_len, "the name is longer than %s bytes", "255");
		path = slash + 1;
	}
	if (!*path)
		return image_ref_fail(why, why_len, "%s", "the repository name is empty");
	for (p = path; ; ) {
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (image_component_ok(p, len) < 0) {
			char comp[IMAGE_REF_MAX + 1];

			snprintf(comp, sizeof(comp), "%.*s", (int)len, p);
			return image_ref_fail(why, why_len, len == 0 ? "an empty path component%s" :
					      "the path component '%s' is not lower-case letters and "
					      "digits joined by '.', '_', '__' or '-'", comp);
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (image_copy(out->path, sizeof(out->path), path, strlen(path)) < 0)
		return image_ref_fail(why, why_len, "the name is longer than %s bytes", "255");
	return 0;
}

int image_ref_parse(const char *s, struct image_ref *out, char *why, size_t why_len)
{
	char name[IMAGE_REF_MAX * 2 + 1];
	const char *at = strchr(s, '@');
	const char *last_slash, *colon;
	size_t len;

	memset(out, 0, sizeof(*out));
	if (!*s)
		return image_ref_fail(why, why_len, "%s", "is empty");
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return image_ref_fail(why, why_len, "%s", "holds a blank or a control character");
	if (at) {
		if (strchr(at + 1, '@') || image_digest_ok(at + 1) < 0)
			return image_ref_fail(why, why_len, "the digest '%s' is not ALGORITHM:HEX "
					      "(sha256: 64 lower-case hex digits)", at + 1);
		if (image_copy(out->digest, sizeof(out->digest), at + 1, strlen(at + 1)) < 0)
			return image_ref_fail(why, why_len, "the digest is longer than %s bytes", "159");
	}
	len = at ? (size_t)(at - s) : strlen(s);
	if (len >= sizeof(name))
		return image_ref_fail(why, why_len, "the name is longer than %s bytes", "255");
	memcpy(name, s, len);
	name[len] = '\0';
	last_slash = strrchr(name, '/');
	colon = strrchr(last_slash ? last_slash : name, ':');
	if (colon) {
		if (image_tag_ok(colon + 1) < 0)
			return image_ref_fail(why, why_len, "the tag '%s' is not 1 to 128 letters, "
					      "digits, '_', '.' or '-' (not first)", colon + 1);
		if (image_copy(out->tag, sizeof(out->tag), colon + 1, strlen(colon + 1)) < 0)
			return image_ref_fail(why, why_len, "the tag '%s' is longer than 128 characters",
					      colon + 1);
		name[colon - name] = '\0';
	}
	return image_name_parse(name, out, why, why_len);
}

size_t image_ref_credentials(const char *s)
{
	const char *slash = strchr(s, '/');
	const char *at;

	if (!slash)
		return 0;
	/* the last '@' before the first '/' that follows it: a password may hold '@' */
	at = NULL;
	for (const char *c = s; c < slash; c++)
		if (*c == '@')
			at = c;
	return at ? (size_t)(at - s) : 0;
}
