/*
 * config_value.c - the syntax of config values, and config paths.
 *
 * One small parser per value type of config.c's key tables (sizes,
 * numbers, versions, prices, modes, user and group names, paths), each
 * strict: digits only where a number is meant (no sign, spaces, hex or
 * exponent), decimals read exactly without the locale or floating point,
 * overflow refused.  config.c knows what each key means; this file only
 * whether a value is well formed, and what to tell the user when it is not.
 * No static mutable state of its own.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "config_value.h"

#define CONFIG_VALUE_ID_MAX	4294967294L	/* (uid_t)-1 means "no change" */

/* ---- value syntax ---- */

/* A decimal number read exactly: whole + frac / scale. */
struct config_value_decimal {
	uint64_t whole;
	uint64_t frac;
	uint64_t scale;		/* 10^(fraction digits kept) */
};

/*
 * Reads DIGITS or DIGITS.DIGITS at @s.  Returns where it stopped, or NULL
 * when there is no number or the whole part overflows.  Fraction digits past
 * the 18th are read and dropped.
 */
static const char *config_value_scan_decimal(const char *s, struct config_value_decimal *dec)
{
	*dec = (struct config_value_decimal){ .scale = 1 };
	if (!isdigit((unsigned char)*s))
		return NULL;
	for (; isdigit((unsigned char)*s); s++)
		if (__builtin_mul_overflow(dec->whole, 10, &dec->whole) ||
		    __builtin_add_overflow(dec->whole, (uint64_t)(*s - '0'), &dec->whole))
			return NULL;
	if (*s != '.')
		return s;
	if (!isdigit((unsigned char)*++s))
		return NULL;
	for (; isdigit((unsigned char)*s); s++) {
		if (dec->scale < 1000000000000000000ull) {
			dec->frac = dec->frac * 10 + (uint64_t)(*s - '0');
			dec->scale *= 10;
		}
	}
	return s;
}

/* Reads an optional K, M, G or T at *s; returns the power-of-two shift. */
static unsigned int config_value_shift(const char **s)
{
	const char *units = "KMGT";
	const char *u = **s ? strchr(units, toupper((unsigned char)**s)) : NULL;

	if (!u)
		return 0;
	(*s)++;
	return 10 * (unsigned int)(u - units + 1);
}

int config_parse_size(const char *s, uint64_t *out)
{
	struct config_value_decimal dec;
	const char *p = config_value_scan_decimal(s, &dec);
	unsigned int shift;
	uint64_t bytes, part;

	if (!p)
		return -EINVAL;
	if (*p == ' ' || *p == '\t') {
		p += strspn(p, " \t");
		if (*p == '\0')
			return -EINVAL;
	}
	shift = config_value_shift(&p);
	if (*p && strcasecmp(p, "b") != 0 && !(shift && strcasecmp(p, "ib") == 0))
		return -EINVAL;
	if (shift && dec.whole > (UINT64_MAX >> shift))
		return -EINVAL;
	part = (uint64_t)(((unsigned __int128)dec.frac << shift) / dec.scale);
	if (__builtin_add_overflow(dec.whole << shift, part, &bytes))
		return -EINVAL;
	*out = bytes;
	return 0;
}

/* A whole number of digits only, from @min to @max. */
static int config_value_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---- setting fields: one parser per value type ---- */

static int config_value_string(const char *s, void *field, const char *file)
{
	char **f = field;
	char *copy = strdup(s);

	(void)file;
	if (!copy)
		return -ENOMEM;
	free(*f);
	*f = copy;
	return 0;
}

static int config_value_path(const char *s, void *field, const char *file)
{
	char **f = field;
	char *abs = config_resolve_path(file, s);

	if (!abs)
		return -ENOMEM;
	free(*f);
	*f = abs;
	return 0;
}

static int config_value_size(const char *s, void *field, const char *file)
{
	(void)file;
	return config_parse_size(s, field);
}

static int config_value_log_size(const char *s, void *field, const char *file)
{
	int ret = config_value_size(s, field, file);

	if (ret == 0 && *(uint64_t *)field && *(uint64_t *)field < CONFIG_LOG_SIZE_MIN)
		ret = -EINVAL;
	return ret;
}

static int config_value_positive(const char *s, void *field, const char *file)
{
	(void)file;
	return config_value_long(s, 1, LONG_MAX, field);
}

static int config_value_nonneg(const char *s, void *field, const char *file)
{
	(void)file;
	return config_value_long(s, 0, LONG_MAX, field);
}

/* MAJOR.MINOR, digits only, as in "12.4". */
static int config_value_version(const char *s, void *field, const char *file)
{
	const char *digits = "0123456789";
	size_t major = strspn(s, digits);
	size_t minor = major && s[major] == '.' ? strspn(s + major + 1, digits) : 0;

	if (minor == 0 || s[major + 1 + minor] != '\0')
		return -EINVAL;
	return config_value_string(s, field, file);
}

int config_parse_bool(const char *s)
{
	static const char *const yes[] = { "true", "yes", "on", "1", NULL };
	static const char *const no[] = { "false", "no", "off", "0", NULL };

	for (size_t i = 0; yes[i]; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

bool config_dotted_version(const char *s)
{
	for (;;) {
		size_t n = strspn(s, "0123456789");

		if (n == 0)
			return false;
		s += n;
		if (*s == '\0')
			return true;
		if (*s++ != '.')
			return false;
	}
}

static int config_value_dotted(const char *s, void *field, const char *file)
{
	return config_dotted_version(s) ? config_value_string(s, field, file) : -EINVAL;
}

static int config_value_price(const char *s, void *field, const char *file)
{
	struct config_value_decimal dec;
	const char *end = config_value_scan_decimal(s, &dec);

	(void)file;
	if (!end || *end)
		return -EINVAL;
	*(double *)field = (double)dec.whole + (double)dec.frac / (double)dec.scale;
	return 0;
}

static int config_value_mode(const char *s, void *field, const char *file)
{
	size_t n = strspn(s, "01234567");
	long v;

	(void)file;
	if (n == 0 || s[n] != '\0')
		return -EINVAL;
	errno = 0;
	v = strtol(s, NULL, 8);
	if (errno || v > 07777)
		return -EINVAL;
	*(long *)field = v;
	return 0;
}

/*
 * The uid of user @name, or the gid of group @name: 0, -EINVAL when there
 * is none, or -ENOMEM.  getpwnam and getgrnam keep their answer in static
 * storage: configs are read before any thread starts.
 */
static int config_value_user_id(const char *name, long *out)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(name);
	if (pw)
		*out = (long)pw->pw_uid;
	return pw ? 0 : errno == ENOMEM ? -ENOMEM : -EINVAL;
}

static int config_value_group_id(const char *name, long *out)
{
	struct group *gr;

	errno = 0;
	gr = getgrnam(name);
	if (gr)
		*out = (long)gr->gr_gid;
	return gr ? 0 : errno == ENOMEM ? -ENOMEM : -EINVAL;
}

static int config_value_uid(const char *s, void *field, const char *file)
{
	(void)file;
	if (config_value_long(s, 0, CONFIG_VALUE_ID_MAX, field) == 0)
		return 0;
	return config_value_user_id(s, field);
}

static int config_value_gid(const char *s, void *field, const char *file)
{
	(void)file;
	if (config_value_long(s, 0, CONFIG_VALUE_ID_MAX, field) == 0)
		return 0;
	return config_value_group_id(s, field);
}

static int config_value_fallback(const char *s, void *field, const char *file)
{
	(void)file;
	if (strcmp(s, "refuse") != 0 && strcmp(s, "host") != 0)
		return -EINVAL;
	*(bool *)field = strcmp(s, "host") == 0;
	return 0;
}

/* "127.0.0.1:5000, reg.lan:443": each entry a host name or address and a port. */
static int config_value_hosts(const char *s, void *field, const char *file)
{
	const char *p = s;

	while (*p) {
		size_t len = strcspn(p, " \t,");
		const char *colon = memchr(p, ':', len);
		size_t digits = colon ? len - (size_t)(colon - p) - 1 : 0;

		if (len && (!colon || colon == p || digits == 0 || digits > 5 ||
			    strspn(colon + 1, "0123456789") < digits))
			return -EINVAL;
		p += len;
		p += strspn(p, " \t,");
	}
	return config_value_string(s, field, file);
}

/* How each type is parsed, and what is said when it does not parse. */
static const struct config_value_info {
	int (*parse)(const char *s, void *field, const char *file);
	const char *problem;
	const char *hint;
} config_value_types[] = {
	[CT_STRING] = { config_value_string, "bad value", "" },
	[CT_PATH] = { config_value_path, "bad path", "" },
	[CT_SIZE] = { config_value_size, "bad size", "use a number with K, M, G or T" },
	[CT_LOG_SIZE] = { config_value_log_size, "bad log size",
			  "use 0 for no limit, or a size of 64K or more" },
	[CT_POSITIVE] = { config_value_positive, "bad number", "use a whole number, 1 or more" },
	[CT_NONNEG] = { config_value_nonneg, "bad number", "use a whole number, 0 or more" },
	[CT_VERSION] = { config_value_version, "bad version", "use MAJOR.MINOR, such as 12.4" },
	[CT_PRICE] = { config_value_price, "bad price",
		       "use a number, 0 or more, such as 0.05" },
	[CT_UID] = { config_value_uid, "unknown user", "use a user name or a number" },
	[CT_GID] = { config_value_gid, "unknown group", "use a group name or a number" },
	[CT_MODE] = { config_value_mode, "bad mode",
		      "use octal permission bits, such as 644" },
	[CT_FALLBACK] = { config_value_fallback, "unknown fallback", "use refuse or host" },
	[CT_HOSTS] = { config_value_hosts, "bad registry list",
		       "use HOST:PORT entries separated by blanks or commas" },
	[CT_DOTTED] = { config_value_dotted, "bad version",
			"use numbers joined by dots, such as 3.11 or 2.1.0" },
};

int config_value_set(enum config_type type, const char *s, void *field, const char *file)
{
	return config_value_types[type].parse(s, field, file);
}

void config_value_explain(enum config_type type, const char **problem, const char **hint)
{
	*problem = config_value_types[type].problem;
	*hint = config_value_types[type].hint;
}

/* ---- paths ---- */

/* The folder of @file, made absolute with the current directory. */
static char *config_value_file_dir(const char *file)
{
	const char *slash = strrchr(file, '/');
	char *cwd, *dir;
	int ret;

	if (file[0] == '/')
		return strndup(file, (size_t)(slash - file));
	cwd = getcwd(NULL, 0);
	if (!cwd || !slash)
		return cwd;
	ret = asprintf(&dir, "%s/%.*s", cwd, (int)(slash - file), file);
	free(cwd);
	return ret < 0 ? NULL : dir;
}

/*
 * Drops empty and "." components of the absolute @path, in place.  ".." is
 * kept: resolving it without the disk would be wrong past a symlink.
 */
static void config_value_tidy(char *path)
{
	char *out = path;
	const char *p = path;

	while (*p) {
		const char *end;
		size_t n;

		p += strspn(p, "/");
		end = strchrnul(p, '/');
		n = (size_t)(end - p);
		if (n > 0 && !(n == 1 && *p == '.')) {
			*out++ = '/';
			memmove(out, p, n);
			out += n;
		}
		p = end;
	}
	if (out == path)
		*out++ = '/';
	*out = '\0';
}

char *config_resolve_path(const char *file, const char *value)
{
	char *dir, *path;

	if (value[0] == '/')
		return strdup(value);
	dir = config_value_file_dir(file);
	if (!dir)
		return NULL;
	if (asprintf(&path, "%s/%s", dir, value) < 0)
		path = NULL;
	free(dir);
	if (path)
		config_value_tidy(path);
	return path;
}
