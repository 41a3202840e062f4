/*
 * test_config.c - unit tests of the INI reader (core/ini.c), the config
 * checker (core/config.c) and the diag list (core/diag.c).
 *
 * Files are given as strings, so each test shows the text it is about; bad
 * files assert every "file:line: message" exactly, in order.  Only the
 * config_load and config_resolve_path tests touch the disk (a temporary
 * folder) or the current directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend.h"
#include "config.h"
#include "diag.h"
#include "ini.h"

/* ---- helpers ---- */

static struct mlfs_config *parse_len(const char *text, size_t len)
{
	struct mlfs_config *cfg = NULL;
	struct diag d;
	int ret;

	diag_init(&d);
	ret = config_parse(&cfg, "x.conf", text, len, backend_config_forms(), &d);
	diag_print(&d, stderr);
	assert_int_equal(ret, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(cfg);
	diag_free(&d);
	return cfg;
}

static struct mlfs_config *parse_ok(const char *text)
{
	return parse_len(text, strlen(text));
}

/* Parses a bad file: -EINVAL, *out untouched, exactly the messages @want. */
static void check_errors(const char *text, size_t len, const char *const *want)
{
	struct mlfs_config untouched;
	struct mlfs_config *cfg = &untouched;
	struct diag d;
	size_t n = 0;
	int ret;

	diag_init(&d);
	ret = config_parse(&cfg, "x.conf", text, len, backend_config_forms(), &d);
	while (want[n])
		n++;
	if (d.n != n)
		diag_print(&d, stderr);
	assert_int_equal(ret, -EINVAL);
	assert_ptr_equal(cfg, &untouched);
	assert_int_equal(d.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(d.msgs[i], want[i]);
	diag_free(&d);
}

#define EXPECT_ERRORS(text, ...) \
	check_errors((text), strlen(text), (const char *const[]){ __VA_ARGS__, NULL })

static char *repeat_char(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- ini.c ---- */

struct ini_log {
	char text[2048];
	size_t len;
	int stop_at;		/* line whose event returns -ECANCELED */
};

static int ini_record(void *payload, const struct ini_event *ev)
{
	struct ini_log *log = payload;
	char *at = log->text + log->len;
	size_t room = sizeof(log->text) - log->len;
	int n = 0;

	switch (ev->kind) {
	case INI_SECTION:
		n = snprintf(at, room, "%d [%s]\n", ev->line, ev->section);
		break;
	case INI_KEY:
		n = snprintf(at, room, "%d <%s>=<%s>\n", ev->line, ev->key, ev->value);
		break;
	case INI_BAD_HEADER:
	case INI_BAD_LINE:
		n = snprintf(at, room, "%d !%s\n", ev->line, ev->error);
		break;
	}
	assert_true(n > 0 && (size_t)n < room);
	log->len += (size_t)n;
	return ev->line == log->stop_at ? -ECANCELED : 0;
}

static void ini_expect(const char *text, size_t len, const char *want)
{
	struct ini_log log = { .len = 0 };

	assert_int_equal(ini_parse(text, len, ini_record, &log), 0);
	assert_string_equal(log.text, want);
}

static void test_ini_numbers_lines_past_blanks_and_comments(void **state)
{
	const char *text = "\n; comment\n  # comment\n[a b]\n\t\nk = v\n[c]  ; c\n";

	(void)state;
	ini_expect(text, strlen(text), "4 [a b]\n6 <k>=<v>\n7 [c]\n");
}

static void test_ini_accepts_crlf_bom_and_missing_final_newline(void **state)
{
	const char *text = "\xEF\xBB\xBF[s]\r\nk = v\r\n\r\nlast = x\r";

	(void)state;
	ini_expect(text, strlen(text), "1 [s]\n2 <k>=<v>\n4 <last>=<x>\n");
}

static void test_ini_splits_at_first_equals_and_trims(void **state)
{
	const char *text = "\t a key \t=\t v=1&w=2 \t\n"
			   "k=;not a value\n"
			   "k2 = a;b#c\n"
			   "k3 =\n";

	(void)state;
	ini_expect(text, strlen(text),
		   "1 <a key>=<v=1&w=2>\n2 <k>=<>\n3 <k2>=<a;b#c>\n4 <k3>=<>\n");
}

static void test_ini_unquotes_only_wholly_quoted_values(void **state)
{
	const char *text = "a = \" x ; y # z \"  ; comment\n"
			   "b = \"x\" y\n"
			   "c = \"say \"hi\"\"\n"
			   "d = \"open\n"
			   "e = \"\"\n";

	(void)state;
	ini_expect(text, strlen(text),
		   "1 <a>=< x ; y # z >\n2 <b>=<\"x\" y>\n3 <c>=<say \"hi\">\n"
		   "4 <d>=<\"open>\n5 <e>=<>\n");
}

static void test_ini_reports_bad_headers_and_lines(void **state)
{
	const char *text = "[open\n[x] y\n[ ]\nwords\n = v\n[ ok ]\n";

	(void)state;
	ini_expect(text, strlen(text),
		   "1 !section header has no closing ']'\n"
		   "2 !unexpected text after ']'\n"
		   "3 !empty section header\n"
		   "4 !expected 'key = value', a [section] or a comment\n"
		   "5 !empty key before '='\n"
		   "6 [ok]\n");
}

static void test_ini_reports_nul_byte_as_bad_line(void **state)
{
	static const char text[] = "a = 1\nb = x\0y\nc = 3\n";

	(void)state;
	ini_expect(text, sizeof(text) - 1,
		   "1 <a>=<1>\n2 !line holds a NUL byte\n3 <c>=<3>\n");
}

static void test_ini_stops_when_handler_fails(void **state)
{
	const char *text = "a = 1\nb = 2\nc = 3\n";
	struct ini_log log = { .stop_at = 2 };

	(void)state;
	assert_int_equal(ini_parse(text, strlen(text), ini_record, &log), -ECANCELED);
	assert_string_equal(log.text, "1 <a>=<1>\n2 <b>=<2>\n");
}

static void test_ini_reads_empty_text(void **state)
{
	(void)state;
	ini_expect("", 0, "");
	ini_expect("\xEF\xBB\xBF", 3, "");
}

/* ---- diag.c ---- */

static void test_diag_formats_file_line_and_grows(void **state)
{
	struct diag d;
	char want[32];

	(void)state;
	diag_init(&d);
	diag_add(&d, "f.conf", 3, "bad %s", "thing");
	diag_add(&d, "f.conf", 0, "cannot open");
	for (int i = 0; i < 40; i++)
		diag_add(&d, "f.conf", i + 10, "n%d", i);
	assert_int_equal(d.n, 42);
	assert_string_equal(d.msgs[0], "f.conf:3: bad thing");
	assert_string_equal(d.msgs[1], "f.conf: cannot open");
	snprintf(want, sizeof(want), "f.conf:%d: n%d", 49, 39);
	assert_string_equal(d.msgs[41], want);
	diag_free(&d);
	assert_int_equal(d.n, 0);
	diag_free(&d);
	diag_free(NULL);
}

/* ---- good files ---- */

/* DESIGN §4, verbatim. */
static const char design_sketch[] =
	"[mlfs]\n"
	"state_dir = /var/lib/mlfs        ; jobs, staging, upload queue (survives restarts)\n"
	"cache_dir = /var/cache/mlfs      ; data cache, shared by all jobs\n"
	"cache_size = 100G\n"
	"executor = local                 ; or slurm\n"
	"\n"
	"[node]                           ; omitted values are detected (nvidia-smi, /proc)\n"
	"gpus = 2\n"
	"gpu_type = RTX 3090\n"
	"gpu_memory_gb = 24\n"
	"cuda_version = 12.4\n"
	"cpus = 16\n"
	"memory_gb = 64\n"
	"price = 0.05                     ; credits per GPU-hour, for max_price\n"
	"\n"
	"[datastore lab-nfs]\n"
	"type = nfs\n"
	"address = 10.0.0.5\n"
	"export = /exports/ml\n"
	"options = version=3&nfsport=2049 ; libnfs URL options, optional\n"
	"\n"
	"[datastore share]\n"
	"type = smb\n"
	"address = fileserver          ; host or host:port\n"
	"share = research\n"
	"root = /ml\n"
	"username = ml\n"
	"password_file = /etc/mlfs/share.pass\n"
	"\n"
	"[datastore bucket]\n"
	"type = s3\n"
	"endpoint = https://s3.example.org  ; omitted: AWS\n"
	"bucket = datasets\n"
	"region = us-east-1                 ; credentials: keys here, AWS_* env, or ~/.aws/credentials\n"
	"\n"
	"[datastore scratch]\n"
	"type = local\n"
	"root = /data/scratch\n"
	"\n"
	"[dataset PASCAL VOC]\n"
	"source = lab-nfs:/voc2012\n"
	"\n"
	"[dataset mnist]\n"
	"source = https://example.org/mnist.tar.gz   ; an archive: shown extracted\n"
	"\n"
	"[checkpoint resnet50]\n"
	"source = bucket:/checkpoints/resnet50/\n"
	"\n"
	"[model detector]\n"
	"source = share:/code/detector/\n";

static void check_kv(const struct datastore_config *ds, size_t i, const char *key,
		     const char *value, int line)
{
	assert_true(i < ds->n_kv);
	assert_string_equal(ds->kv[i].key, key);
	assert_string_equal(ds->kv[i].value, value);
	assert_int_equal(ds->kv[i].line, line);
}

static void check_datastore(const struct mlfs_config *cfg, size_t i, const char *name,
			    const char *type, int line, size_t n_kv)
{
	const struct datastore_config *ds = &cfg->datastores[i];

	assert_ptr_equal(ds->file, cfg->file);
	assert_string_equal(ds->name, name);
	assert_string_equal(ds->type, type);
	assert_int_equal(ds->line, line);
	assert_int_equal(ds->type_line, line + 1);
	assert_int_equal(ds->n_kv, n_kv);
	check_kv(ds, 0, "type", type, line + 1);
	assert_int_equal(ds->uid, -1);
	assert_int_equal(ds->gid, -1);
	assert_int_equal(ds->mode, -1);
	/* Not set in the section: inherited from [mlfs] (defaults 30 s, 3). */
	assert_int_equal(ds->timeout, 30);
	assert_int_equal(ds->retries, 3);
	assert_int_equal(ds->metadata_ttl, 5);
	assert_true(ds->git_cache_size == 20ull << 30);
	assert_false(ds->implicit);
	assert_ptr_equal(ds->state_dir, cfg->state_dir);
	assert_ptr_equal(ds->cache_dir, cfg->cache_dir);
}

static void check_source(const struct source_config *src, enum source_kind kind,
			 const char *name, const char *shown, int line, const char *source,
			 const char *datastore, const char *path, const char *scheme)
{
	assert_int_equal(src->kind, kind);
	assert_string_equal(src->name, name);
	assert_string_equal(src->shown, shown);
	assert_int_equal(src->line, line);
	assert_string_equal(src->source, source);
	assert_int_equal(src->source_line, line + 1);
	if (datastore) {
		assert_string_equal(src->datastore, datastore);
		assert_string_equal(src->path, path);
	} else {
		assert_null(src->datastore);
		assert_null(src->path);
	}
	if (scheme)
		assert_string_equal(src->url_scheme, scheme);
	else
		assert_null(src->url_scheme);
}

static void check_sketch_top(const struct mlfs_config *cfg)
{
	assert_string_equal(cfg->file, "x.conf");
	assert_string_equal(cfg->state_dir, "/var/lib/mlfs");
	assert_string_equal(cfg->cache_dir, "/var/cache/mlfs");
	assert_true(cfg->cache_size == 100ull << 30);
	assert_string_equal(cfg->executor, "local");	/* as written */
	assert_int_equal(cfg->timeout, 30);
	assert_int_equal(cfg->retries, 3);
	assert_null(cfg->store);
	assert_int_equal(cfg->node.gpus, 2);
	assert_string_equal(cfg->node.gpu_type, "RTX 3090");
	assert_int_equal(cfg->node.gpu_memory_gb, 24);
	assert_string_equal(cfg->node.cuda_version, "12.4");
	assert_int_equal(cfg->node.cpus, 16);
	assert_int_equal(cfg->node.memory_gb, 64);
	assert_true(cfg->node.price > 0.0499999 && cfg->node.price < 0.0500001);
	assert_null(cfg->node.cluster_id);
	assert_null(cfg->node.name);
	assert_null(cfg->slurm.partition);
	assert_int_equal(cfg->slurm.poll_interval, 5);
}

static void check_sketch_datastores(const struct mlfs_config *cfg)
{
	const struct datastore_config *url;

	assert_int_equal(cfg->n_datastores, 5);
	check_datastore(cfg, 0, "lab-nfs", "nfs", 16, 4);
	check_kv(&cfg->datastores[0], 1, "address", "10.0.0.5", 18);
	check_kv(&cfg->datastores[0], 2, "export", "/exports/ml", 19);
	check_kv(&cfg->datastores[0], 3, "options", "version=3&nfsport=2049", 20);
	check_datastore(cfg, 1, "share", "smb", 22, 6);
	check_kv(&cfg->datastores[1], 1, "address", "fileserver", 24);
	check_kv(&cfg->datastores[1], 2, "share", "research", 25);
	check_kv(&cfg->datastores[1], 3, "root", "/ml", 26);
	check_kv(&cfg->datastores[1], 4, "username", "ml", 27);
	check_kv(&cfg->datastores[1], 5, "password_file", "/etc/mlfs/share.pass", 28);
	check_datastore(cfg, 2, "bucket", "s3", 30, 4);
	check_kv(&cfg->datastores[2], 1, "endpoint", "https://s3.example.org", 32);
	check_kv(&cfg->datastores[2], 2, "bucket", "datasets", 33);
	check_kv(&cfg->datastores[2], 3, "region", "us-east-1", 34);
	check_datastore(cfg, 3, "scratch", "local", 36, 2);
	check_kv(&cfg->datastores[3], 1, "root", "/data/scratch", 38);
	/* The URL source's own datastore, not shown under datastores/. */
	url = &cfg->datastores[4];
	assert_string_equal(url->name, "dataset:mnist");
	assert_string_equal(url->type, "http");
	assert_true(url->implicit);
	assert_int_equal(url->n_kv, 1);
	check_kv(url, 0, "url", "https://example.org/", 44);	/* an archive: its folder */
}

static void check_sketch_sources(const struct mlfs_config *cfg)
{
	assert_int_equal(cfg->n_sources, 4);
	check_source(&cfg->sources[0], SOURCE_DATASET, "PASCAL VOC", "PASCAL_VOC", 40,
		     "lab-nfs:/voc2012", "lab-nfs", "voc2012", NULL);
	check_source(&cfg->sources[1], SOURCE_DATASET, "mnist", "mnist", 43,
		     "https://example.org/mnist.tar.gz", "dataset:mnist", "mnist.tar.gz", "https");
	check_source(&cfg->sources[2], SOURCE_CHECKPOINT, "resnet50", "resnet50", 46,
		     "bucket:/checkpoints/resnet50/", "bucket", "checkpoints/resnet50", NULL);
	check_source(&cfg->sources[3], SOURCE_MODEL, "detector", "detector", 49,
		     "share:/code/detector/", "share", "code/detector", NULL);
}

static void test_config_parses_design_sketch_with_every_field(void **state)
{
	struct mlfs_config *cfg = parse_ok(design_sketch);

	(void)state;
	check_sketch_top(cfg);
	check_sketch_datastores(cfg);
	check_sketch_sources(cfg);
	config_free(cfg);
}

static void test_config_lookups_find_datastores_and_keys(void **state)
{
	struct mlfs_config *cfg = parse_ok(design_sketch);
	const struct datastore_config *ds;
	int line = -5;

	(void)state;
	ds = config_find_datastore(cfg, "share");
	assert_ptr_equal(ds, &cfg->datastores[1]);
	assert_null(config_find_datastore(cfg, "nope"));
	assert_null(config_find_datastore(cfg, "Share"));
	assert_string_equal(config_get(ds, "username", &line), "ml");
	assert_int_equal(line, 27);
	assert_string_equal(config_get(ds, "type", NULL), "smb");
	assert_null(config_get(ds, "password", &line));
	assert_int_equal(line, 0);
	config_free(cfg);
}

static void test_config_empty_file_gives_defaults(void **state)
{
	struct mlfs_config *cfg = parse_ok("");

	(void)state;
	assert_string_equal(cfg->state_dir, "/var/lib/mlfs");
	assert_string_equal(cfg->cache_dir, "/var/cache/mlfs");
	assert_true(cfg->cache_size == 10ull << 30);
	assert_true(cfg->log_size == 256ull << 20);
	assert_int_equal(cfg->max_jobs, 1000);
	assert_null(cfg->executor);	/* not set: the registry's default */
	assert_int_equal(cfg->timeout, 30);
	assert_int_equal(cfg->retries, 3);
	assert_null(cfg->store);
	assert_int_equal(cfg->node.gpus, -1);
	assert_int_equal(cfg->node.gpu_memory_gb, -1);
	assert_int_equal(cfg->node.cpus, -1);
	assert_int_equal(cfg->node.memory_gb, -1);
	assert_true(cfg->node.price < 0);
	assert_null(cfg->node.gpu_type);
	assert_null(cfg->node.cuda_version);
	assert_null(cfg->slurm.partition);
	assert_null(cfg->slurm.account);
	assert_null(cfg->slurm.sbatch_args);
	assert_null(cfg->slurm.bin_dir);
	assert_int_equal(cfg->slurm.poll_interval, 5);
	assert_int_equal(cfg->n_datastores, 0);
	assert_int_equal(cfg->n_sources, 0);
	config_free(cfg);
}

static void test_config_log_size_and_max_jobs(void **state)
{
	struct mlfs_config *cfg = parse_ok("[mlfs]\nlog_size = 64K\nmax_jobs = 3\n");

	(void)state;
	assert_true(cfg->log_size == 64u << 10);
	assert_int_equal(cfg->max_jobs, 3);
	config_free(cfg);
	cfg = parse_ok("[mlfs]\nlog_size = 0\n");
	assert_true(cfg->log_size == 0);	/* no limit */
	config_free(cfg);
	EXPECT_ERRORS("[mlfs]\nlog_size = 1K\nmax_jobs = 0\n",
		      "x.conf:2: [mlfs] log_size: bad log size '1K' (use 0 for no limit, or a size "
		      "of 64K or more)",
		      "x.conf:3: [mlfs] max_jobs: bad number '0' (use a whole number, 1 or more)");
}

static void test_config_empty_sections_keep_defaults(void **state)
{
	struct mlfs_config *cfg = parse_ok("[mlfs]\n[node]\n[slurm]\n");

	(void)state;
	assert_true(cfg->cache_size == 10ull << 30);
	assert_int_equal(cfg->node.gpus, -1);
	assert_int_equal(cfg->slurm.poll_interval, 5);
	config_free(cfg);
}

static void test_config_reads_containers_keys_and_checks_them(void **state)
{
	struct mlfs_config *cfg = parse_ok("[containers]\nruntime = /usr/bin/podman\n"
					   "oci_runtime = runc\n"
					   "insecure_registries = 127.0.0.1:5000, reg.lan:80\n"
					   "auth_file = /etc/mlfs/auth.json\ncache_size = 5G\n"
					   "fallback = host\n");

	(void)state;
	assert_string_equal(cfg->containers.runtime, "/usr/bin/podman");
	assert_string_equal(cfg->containers.oci_runtime, "runc");
	assert_string_equal(cfg->containers.insecure_registries, "127.0.0.1:5000, reg.lan:80");
	assert_string_equal(cfg->containers.auth_file, "/etc/mlfs/auth.json");
	assert_int_equal(cfg->containers.cache_size, 5ull << 30);
	assert_true(cfg->containers.fallback_host);
	config_free(cfg);
	cfg = parse_ok("[mlfs]\n");
	assert_null(cfg->containers.runtime);
	assert_int_equal(cfg->containers.cache_size, 20ull << 30);	/* the default */
	assert_false(cfg->containers.fallback_host);			/* refuse */
	config_free(cfg);
	EXPECT_ERRORS("[containers]\nfallback = maybe\ninsecure_registries = 127.0.0.1\n"
		      "cache_size = lots\nimage = x\n",
		      "x.conf:2: [containers] fallback: unknown fallback 'maybe' (use refuse or host)",
		      "x.conf:3: [containers] insecure_registries: bad registry list '127.0.0.1' "
		      "(use HOST:PORT entries separated by blanks or commas)",
		      "x.conf:4: [containers] cache_size: bad size 'lots' (use a number with K, M, G or T)",
		      "x.conf:5: [containers]: unknown key 'image' (known: runtime, oci_runtime, "
		      "insecure_registries, auth_file, cache_size, fallback)");
}

static void test_config_reads_environment_sections_in_file_order(void **state)
{
	struct mlfs_config *cfg = parse_ok("[environment tf]\nimage = reg.lan:5000/team/tf:2.11\n"
					   "python_version = 3.9\nframework = TensorFlow\n"
					   "framework_version = 2.11.0\n"
					   "[environment py311]\npython_version = 3.11\n"
					   "image = debian:12\n");

	(void)state;
	assert_int_equal(cfg->n_environments, 2);
	assert_string_equal(cfg->environments[0].name, "tf");
	assert_int_equal(cfg->environments[0].line, 1);
	assert_string_equal(cfg->environments[0].image, "reg.lan:5000/team/tf:2.11");
	assert_string_equal(cfg->environments[0].python_version, "3.9");
	assert_string_equal(cfg->environments[0].framework, "TensorFlow");
	assert_string_equal(cfg->environments[0].framework_version, "2.11.0");
	assert_string_equal(cfg->environments[1].name, "py311");
	assert_string_equal(cfg->environments[1].python_version, "3.11");
	assert_null(cfg->environments[1].framework);
	assert_null(cfg->environments[1].framework_version);
	config_free(cfg);
}

static void test_config_checks_each_environment_key(void **state)
{
	(void)state;
	EXPECT_ERRORS("[environment a]\nimage = Team/TF:1\npython_version = 3.x\n"
		      "framework_version = 2.\nflavour = sweet\npython_version = 3.9\n"
		      "framework =\n[environment b c]\n",
		      "x.conf:2: [environment a] image: not a valid image name: the path component "
		      "'Team' is not lower-case letters and digits joined by '.', '_', '__' or '-'",
		      "x.conf:3: [environment a] python_version: bad version '3.x' (use numbers "
		      "joined by dots, such as 3.11 or 2.1.0)",
		      "x.conf:4: [environment a] framework_version: bad version '2.' (use numbers "
		      "joined by dots, such as 3.11 or 2.1.0)",
		      "x.conf:5: [environment a]: unknown key 'flavour' (known: image, "
		      "python_version, framework, framework_version)",
		      "x.conf:6: [environment a] python_version: duplicate key (first at line 3)",
		      "x.conf:7: [environment a] framework: empty value",
		      "x.conf:8: [environment b c]: bad environment name (use 1 to 64 letters, "
		      "digits, '.', '_' or '-')");
}

static void test_config_refuses_environments_a_spec_cannot_choose(void **state)
{
	(void)state;
	EXPECT_ERRORS("[environment noimage]\npython_version = 3.9\n"
		      "[environment nokeys]\nimage = debian:12\n"
		      "[environment fvonly]\nimage = debian:12\nframework_version = 2.1\n"
		      "[environment a]\nimage = x/a:1\nframework = pytorch\n"
		      "[environment b]\nimage = x/b:1\nframework = PyTorch\n"
		      "[environment a]\nimage = x/c:1\npython_version = 3.8\n",
		      "x.conf:1: [environment noimage]: missing key 'image'",
		      "x.conf:3: [environment nokeys]: set python_version or framework (a spec "
		      "chooses an environment by them)",
		      "x.conf:5: [environment fvonly]: set python_version or framework (a spec "
		      "chooses an environment by them)",
		      "x.conf:11: [environment b]: the same python_version, framework and "
		      "framework_version as [environment a] at line 8: a spec could not choose "
		      "between them",
		      "x.conf:14: duplicate [environment a] (first at line 8)");
}

static void test_config_reads_every_mlfs_node_and_slurm_key(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[mlfs]\nstate_dir = /s\ncache_dir = /c\ncache_size = 1.5T\n"
		"executor = slurm\ntimeout = 7\nretries = 0\nstore = out\n"
		"[node]\ngpus = 0\ngpu_type = H100\ngpu_memory_gb = 80\ncuda_version = 12.10\n"
		"cpus = 64\nmemory_gb = 512\nprice = 3\ncluster_id = c-1\nname = n 1\n"
		"[slurm]\npartition = gpu\naccount = lab\nsbatch_args = --qos=high -t 1:00\n"
		"poll_interval = 11\nbin_dir = /opt/slurm/bin\n"
		"[datastore out]\ntype = local\n");

	(void)state;
	assert_string_equal(cfg->state_dir, "/s");
	assert_string_equal(cfg->cache_dir, "/c");
	assert_true(cfg->cache_size == 3ull << 39);
	assert_string_equal(cfg->executor, "slurm");
	assert_int_equal(cfg->timeout, 7);
	assert_int_equal(cfg->retries, 0);
	assert_string_equal(cfg->store, "out");
	assert_int_equal(cfg->node.gpus, 0);
	assert_string_equal(cfg->node.gpu_type, "H100");
	assert_int_equal(cfg->node.gpu_memory_gb, 80);
	assert_string_equal(cfg->node.cuda_version, "12.10");
	assert_int_equal(cfg->node.cpus, 64);
	assert_int_equal(cfg->node.memory_gb, 512);
	assert_true(cfg->node.price == 3.0);
	assert_string_equal(cfg->node.cluster_id, "c-1");
	assert_string_equal(cfg->node.name, "n 1");
	assert_string_equal(cfg->slurm.partition, "gpu");
	assert_string_equal(cfg->slurm.account, "lab");
	assert_string_equal(cfg->slurm.sbatch_args, "--qos=high -t 1:00");
	assert_int_equal(cfg->slurm.poll_interval, 11);
	assert_string_equal(cfg->slurm.bin_dir, "/opt/slurm/bin");
	config_free(cfg);
}

static void test_config_keeps_1000_byte_value_intact(void **state)
{
	char *value = repeat_char('v', 1000);
	char *text;
	struct mlfs_config *cfg;

	(void)state;
	value[0] = '-';
	value[999] = 'z';
	assert_true(asprintf(&text, "[slurm]\nsbatch_args = %s\npartition = p\n", value) > 0);
	cfg = parse_ok(text);
	assert_int_equal(strlen(cfg->slurm.sbatch_args), 1000);
	assert_string_equal(cfg->slurm.sbatch_args, value);
	assert_string_equal(cfg->slurm.partition, "p");
	config_free(cfg);
	free(text);
	free(value);
}

static void test_config_keeps_100k_value_intact_and_counts_lines_after_it(void **state)
{
	size_t n = 100 * 1024;
	char *value = repeat_char('u', n);
	char *text;
	struct mlfs_config *cfg;
	int line;

	(void)state;
	memcpy(value, "https://", 8);
	value[n - 1] = '/';
	assert_true(asprintf(&text, "[datastore web]\ntype = http\nurl = %s   ; c\n"
			     "root = /r\n", value) > 0);
	cfg = parse_ok(text);
	assert_string_equal(config_get(&cfg->datastores[0], "url", &line), value);
	assert_int_equal(line, 3);
	assert_string_equal(config_get(&cfg->datastores[0], "root", &line), "/r");
	assert_int_equal(line, 4);
	config_free(cfg);
	free(text);
	free(value);
}

static void test_config_accepts_crlf_line_endings(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[mlfs]\r\ncache_size = 2G\r\n\r\n[datastore d]\r\ntype = local\r\n"
		"root = /x  ; c\r\n[dataset a b]\r\nsource = d:/p\r\n");

	(void)state;
	assert_true(cfg->cache_size == 2ull << 30);
	assert_string_equal(cfg->datastores[0].type, "local");
	check_kv(&cfg->datastores[0], 1, "root", "/x", 6);
	assert_string_equal(cfg->sources[0].name, "a b");
	assert_string_equal(cfg->sources[0].path, "p");
	assert_int_equal(cfg->sources[0].source_line, 8);
	config_free(cfg);
}

static void test_config_skips_utf8_bom(void **state)
{
	struct mlfs_config *cfg = parse_ok("\xEF\xBB\xBF[mlfs]\ntimeout = 9\n");

	(void)state;
	assert_int_equal(cfg->timeout, 9);
	config_free(cfg);
}

static void test_config_strips_inline_comments(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[node]\ngpu_type = A100 ; the big one\nname = n1\t# tab then hash\n"
		"cluster_id = a;b#c\n"
		"[datastore web]\ntype = http ;c\nurl = http://h/p#frag?a=1;b  # c\n");

	(void)state;
	assert_string_equal(cfg->node.gpu_type, "A100");
	assert_string_equal(cfg->node.name, "n1");
	assert_string_equal(cfg->node.cluster_id, "a;b#c");
	assert_string_equal(cfg->datastores[0].type, "http");
	assert_string_equal(config_get(&cfg->datastores[0], "url", NULL),
			    "http://h/p#frag?a=1;b");
	config_free(cfg);
}

static void test_config_unquotes_wholly_quoted_values(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[slurm]\nsbatch_args = \"--comment=a ; b # c\"   ; real comment\n"
		"account = \"x\" y\npartition = \" padded \"\n"
		"[dataset q]\nsource = \"d:/with ; semicolon\"\n"
		"[datastore d]\ntype = \"local\"\n");

	(void)state;
	assert_string_equal(cfg->slurm.sbatch_args, "--comment=a ; b # c");
	assert_string_equal(cfg->slurm.account, "\"x\" y");
	assert_string_equal(cfg->slurm.partition, " padded ");
	assert_string_equal(cfg->sources[0].path, "with ; semicolon");
	assert_string_equal(cfg->datastores[0].type, "local");
	config_free(cfg);
}

static void test_config_trims_keys_and_values(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"  [ mlfs ]  \n\t cache_size\t=\t 3M \t\n  [datastore   d  ]\n type=local\n");

	(void)state;
	assert_true(cfg->cache_size == 3ull << 20);
	assert_string_equal(cfg->datastores[0].name, "d");
	assert_string_equal(cfg->datastores[0].type, "local");
	config_free(cfg);
}

/* metadata_ttl: [mlfs]'s for every datastore that sets none; the caches' sizes, 0 for none. */
static void test_config_metadata_ttl_and_cache_sizes_are_inherited(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[mlfs]\nmetadata_ttl = 9\ngit_cache_size = 1G\narchive_cache_size = 0\n"
		"[datastore a]\ntype = s3\nbucket = x\n"
		"[datastore b]\ntype = s3\nbucket = y\nmetadata_ttl = 0\n"
		"[datastore c]\ntype = http\nurl = http://h/\nmetadata_ttl = 99999999999\n");

	(void)state;
	assert_int_equal(cfg->metadata_ttl, 9);
	assert_int_equal(cfg->datastores[0].metadata_ttl, 9);
	assert_int_equal(config_metadata_ttl(&cfg->datastores[0]), 9);
	assert_int_equal(config_metadata_ttl(&cfg->datastores[1]), 0);
	assert_int_equal(config_metadata_ttl(&cfg->datastores[2]), 365l * 24 * 3600);
	assert_true(cfg->git_cache_size == 1ull << 30);
	assert_true(cfg->datastores[1].git_cache_size == 1ull << 30);
	assert_true(cfg->archive_cache_size == 0);
	config_free(cfg);
	EXPECT_ERRORS("[mlfs]\nmetadata_ttl = -1\n[datastore d]\ntype = s3\nbucket = x\n"
		      "metadata_ttl = soon\n",
		      "x.conf:2: [mlfs] metadata_ttl: bad number '-1' (use a whole number, 0 or more)",
		      "x.conf:6: [datastore d] metadata_ttl: bad number 'soon' (use a whole number, 0 or more)");
}

static void test_config_parses_datastore_common_keys_and_keeps_all_in_kv(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[datastore b]\nroot = /pre\nuid = 1000\ngid = root\nmode = 0640\n"
		"type = s3\ntimeout = 12\nretries = 0\nbucket = x\n"
		"[datastore c]\ntype = local\nuid = root\ngid = 4294967294\nmode = 7777\n");
	const struct datastore_config *b, *c;

	(void)state;
	b = &cfg->datastores[0];
	c = &cfg->datastores[1];
	assert_int_equal(b->uid, 1000);
	assert_int_equal(b->gid, 0);
	assert_int_equal(b->mode, 0640);
	assert_int_equal(b->timeout, 12);
	assert_int_equal(b->retries, 0);
	assert_string_equal(b->type, "s3");
	assert_int_equal(b->type_line, 6);
	assert_int_equal(b->n_kv, 8);
	check_kv(b, 0, "root", "/pre", 2);
	check_kv(b, 1, "uid", "1000", 3);
	check_kv(b, 2, "gid", "root", 4);
	check_kv(b, 3, "mode", "0640", 5);
	check_kv(b, 4, "type", "s3", 6);
	check_kv(b, 7, "bucket", "x", 9);
	assert_int_equal(c->uid, 0);
	assert_int_equal(c->gid, 4294967294L);
	assert_int_equal(c->mode, 07777);
	assert_int_equal(c->timeout, 30);	/* from [mlfs] */
	config_free(cfg);
}

static void test_config_parses_every_source_form(void **state)
{
	struct mlfs_config *cfg = parse_ok(
		"[dataset root]\nsource = later:\n"
		"[dataset rel]\nsource = later:a/b\n"
		"[dataset messy]\nsource = later:/x//./y/\n"
		"[checkpoint s3]\nsource = S3://bucket/key\n"
		"[model http]\nsource = http://h/m.tar\n"
		"[model nfs]\nsource = nfs://h/export/x\n"
		"[model smb]\nsource = smb://h/share/x\n"
		"[dataset PASCAL VOC]\nsource = later:/v\n"
		"[checkpoint PASCAL VOC]\nsource = later:/c\n"
		"[datastore later]\ntype = local\n"
		"[datastore minio]\ntype = s3\nendpoint = http://127.0.0.1:9000\nbucket = bucket\n"
		"root = /elsewhere\nsecret_access_key = k\n"
		"[datastore lab]\ntype = nfs\naddress = h\nexport = /export/\n"
		"options = version=3\n"
		"[datastore sh]\ntype = smb\naddress = h\nshare = share\nusername = u\n"
		"password_file = /p\n"
		"[dataset other export]\nsource = nfs://h/elsewhere/y?version=4\n");
	const struct source_config *s = cfg->sources;
	const struct datastore_config *ds;

	(void)state;
	assert_int_equal(cfg->n_sources, 10);
	check_source(&s[0], SOURCE_DATASET, "root", "root", 1, "later:", "later", "", NULL);
	check_source(&s[1], SOURCE_DATASET, "rel", "rel", 3, "later:a/b", "later", "a/b",
		     NULL);
	assert_string_equal(s[2].path, "x/y");
	check_source(&s[3], SOURCE_CHECKPOINT, "s3", "s3", 7, "S3://bucket/key", "checkpoint:s3",
		     "", "s3");
	/* An s3:// URL of a configured bucket borrows its endpoint and keys, not its root. */
	ds = config_find_datastore(cfg, "checkpoint:s3");
	assert_non_null(ds);
	assert_true(ds->implicit);
	assert_string_equal(config_get(ds, "endpoint", NULL), "http://127.0.0.1:9000");
	assert_string_equal(config_get(ds, "secret_access_key", NULL), "k");
	assert_string_equal(config_get(ds, "bucket", NULL), "bucket");
	assert_string_equal(config_get(ds, "root", NULL), "/key");
	assert_string_equal(s[4].url_scheme, "http");
	assert_string_equal(s[4].datastore, "model:http");
	/* An archive URL: its folder is the datastore, the archive a path in it. */
	assert_string_equal(config_get(config_find_datastore(cfg, "model:http"), "url", NULL),
			    "http://h/");
	assert_string_equal(s[4].path, "m.tar");
	/* nfs:// inside a configured export borrows it: the rest of the path is the root. */
	assert_string_equal(s[5].url_scheme, "nfs");
	ds = config_find_datastore(cfg, "model:nfs");
	assert_non_null(ds);
	assert_string_equal(config_get(ds, "address", NULL), "h");
	assert_string_equal(config_get(ds, "export", NULL), "/export/");
	assert_string_equal(config_get(ds, "root", NULL), "/x");
	assert_string_equal(config_get(ds, "options", NULL), "version=3");
	/* ... and outside any: the path is the export, the query its options. */
	ds = config_find_datastore(cfg, "dataset:other_export");
	assert_non_null(ds);
	assert_string_equal(config_get(ds, "export", NULL), "/elsewhere/y");
	assert_null(config_get(ds, "root", NULL));
	assert_string_equal(config_get(ds, "options", NULL), "version=4");
	/* smb:// of a configured share borrows its user and password file. */
	assert_string_equal(s[6].url_scheme, "smb");
	ds = config_find_datastore(cfg, "model:smb");
	assert_non_null(ds);
	assert_string_equal(config_get(ds, "share", NULL), "share");
	assert_string_equal(config_get(ds, "root", NULL), "/x");
	assert_string_equal(config_get(ds, "username", NULL), "u");
	assert_string_equal(config_get(ds, "password_file", NULL), "/p");
	assert_int_equal(s[7].kind, SOURCE_DATASET);
	assert_int_equal(s[8].kind, SOURCE_CHECKPOINT);
	assert_string_equal(s[8].shown, "PASCAL_VOC");
	config_free(cfg);
}

static void test_config_relative_dirs_resolve_against_config_folder(void **state)
{
	struct mlfs_config *cfg = NULL;
	const char *text = "[mlfs]\nstate_dir = state\ncache_dir = ./c/../cache/\n";
	struct diag d;

	(void)state;
	diag_init(&d);
	assert_int_equal(config_parse(&cfg, "/etc/mlfs/mlfs.conf", text, strlen(text),
				      backend_config_forms(), &d), 0);
	assert_string_equal(cfg->state_dir, "/etc/mlfs/state");
	assert_string_equal(cfg->cache_dir, "/etc/mlfs/c/../cache");
	assert_string_equal(cfg->file, "/etc/mlfs/mlfs.conf");
	config_free(cfg);
	diag_free(&d);
}

/* ---- bad files ---- */

static void test_config_rejects_unknown_key_with_line(void **state)
{
	(void)state;
	/* a likely typo is named; else the section's keys are listed */
	EXPECT_ERRORS("[mlfs]\nCache-Dir = /c\nrooot = /x\n[node]\ngpu = 1\n[dataset d]\npath = x\n",
		      "x.conf:2: [mlfs]: unknown key 'Cache-Dir' (did you mean 'cache_dir'?)",
		      "x.conf:3: [mlfs]: unknown key 'rooot' (known: state_dir, cache_dir, "
		      "cache_size, git_cache_size, archive_cache_size, executor, log_size, "
		      "max_jobs, timeout, retries, metadata_ttl, read_ahead_files, store)",
		      "x.conf:5: [node]: unknown key 'gpu' (did you mean 'gpus'?)",
		      "x.conf:6: [dataset d]: missing key 'source'",
		      "x.conf:7: [dataset d]: unknown key 'path' (known: source)");
}

/* The hint after an unknown key: a near key at most two edits off, else the list, cut short. */
static void test_key_hint_names_a_near_key_or_lists_them(void **state)
{
	static char many[100][32];	/* borrowed by h until the end */
	struct key_hint h;

	(void)state;
	key_hint_init(&h, "x");
	assert_string_equal(key_hint_text(&h), "");		/* nothing known */
	key_hint_init(&h, "endpiont");
	key_hint_add(&h, "bucket");
	key_hint_add(&h, "endpoint");
	assert_string_equal(key_hint_text(&h), " (did you mean 'endpoint'?)");
	key_hint_init(&h, "ab");			/* two letters: one edit at most */
	key_hint_add(&h, "xy");
	key_hint_add(&h, "abc");
	assert_string_equal(key_hint_text(&h), " (did you mean 'abc'?)");
	key_hint_init(&h, "ab");
	key_hint_add(&h, "xy");
	assert_string_equal(key_hint_text(&h), " (known: xy)");
	key_hint_init(&h, "zzzzzzzz");
	for (int i = 0; i < 100; i++) {
		snprintf(many[i], sizeof(many[i]), "key_number_%d", i);
		key_hint_add(&h, many[i]);
	}
	assert_true(strlen(key_hint_text(&h)) < sizeof(h.text));
	assert_non_null(strstr(key_hint_text(&h), "key_number_0, key_number_1, "));
	assert_string_equal(key_hint_text(&h) + strlen(key_hint_text(&h)) - 6, ", ...)");
}

static void test_config_rejects_bad_size_naming_section_and_key(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\nstate_dir = /s\ncache_size = 12Q\n",
		      "x.conf:3: [mlfs] cache_size: bad size '12Q' "
		      "(use a number with K, M, G or T)");
}

static void test_config_rejects_duplicate_datastore_and_ignores_its_keys(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\n\n\n[datastore scratch]\ntype = local\n\n\n\n\n\n\n"
		      "[datastore scratch]\ntype = nfs\nbogus key = x\n",
		      "x.conf:12: duplicate [datastore scratch] (first at line 4)");
}

static void test_config_rejects_unknown_and_malformed_sections(void **state)
{
	(void)state;
	EXPECT_ERRORS("[foo]\nkey = ignored\n[datastorex y]\n[MLFS]\n[mlfs x]\n"
		      "[datastore]\n[dataset]\n[node\n[slurm] x\n[]\n",
		      "x.conf:1: unknown section [foo] (use mlfs, node, slurm, containers, "
		      "datastore, dataset, checkpoint, model, source or environment)",
		      "x.conf:3: unknown section [datastorex y] (use mlfs, node, slurm, "
		      "containers, datastore, dataset, checkpoint, model, source or environment)",
		      "x.conf:4: unknown section [MLFS] (use mlfs, node, slurm, containers, "
		      "datastore, dataset, checkpoint, model, source or environment)",
		      "x.conf:5: [mlfs] takes no name: [mlfs]",
		      "x.conf:6: [datastore] needs a name: [datastore NAME]",
		      "x.conf:7: [dataset] needs a name: [dataset NAME]",
		      "x.conf:8: section header has no closing ']'",
		      "x.conf:9: unexpected text after ']'",
		      "x.conf:10: empty section header");
}

static void test_config_rejects_key_before_any_section(void **state)
{
	(void)state;
	EXPECT_ERRORS("; comment\ncache_size = 1G\n[mlfs]\n",
		      "x.conf:2: key 'cache_size' is outside any section");
}

static void test_config_rejects_lines_that_are_not_key_value(void **state)
{
	(void)state;
	EXPECT_ERRORS("just words\n[mlfs]\nstate_dir /x\n = /x\n[bad\nmore words\n",
		      "x.conf:1: expected 'key = value', a [section] or a comment",
		      "x.conf:3: [mlfs]: expected 'key = value', a [section] or a comment",
		      "x.conf:4: [mlfs]: empty key before '='",
		      "x.conf:5: section header has no closing ']'",
		      "x.conf:6: expected 'key = value', a [section] or a comment");
}

static void test_config_rejects_empty_values(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\nstate_dir =\ncache_dir = ; only a comment\nstore = \"\"\n"
		      "[datastore d]\ntype =\nroot =   \n",
		      "x.conf:2: [mlfs] state_dir: empty value",
		      "x.conf:3: [mlfs] cache_dir: empty value",
		      "x.conf:4: [mlfs] store: empty value",
		      "x.conf:5: [datastore d]: missing key 'type'",
		      "x.conf:6: [datastore d] type: empty value",
		      "x.conf:7: [datastore d] root: empty value");
}

static void test_config_rejects_nul_byte_in_a_line(void **state)
{
	static const char text[] = "[mlfs]\nstate_dir = /a\0b\n";

	(void)state;
	check_errors(text, sizeof(text) - 1,
		     (const char *const[]){ "x.conf:2: [mlfs]: line holds a NUL byte", NULL });
}

static void test_config_rejects_missing_type_and_source_at_header_line(void **state)
{
	(void)state;
	EXPECT_ERRORS("[datastore d]\nroot = /x\n\n[checkpoint c]\n[model m]\n",
		      "x.conf:1: [datastore d]: missing key 'type'",
		      "x.conf:4: [checkpoint c]: missing key 'source'",
		      "x.conf:5: [model m]: missing key 'source'");
}

static void test_config_rejects_repeated_keys_within_a_section(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\ntimeout = 1\ntimeout = 2\n[datastore d]\ntype = local\n"
		      "root = /a\ntype = nfs\nroot = /b\n[dataset s]\nsource = d:/\n"
		      "source = d:/x\n",
		      "x.conf:3: [mlfs] timeout: duplicate key (first at line 2)",
		      "x.conf:7: [datastore d] type: duplicate key (first at line 5)",
		      "x.conf:8: [datastore d] root: duplicate key (first at line 6)",
		      "x.conf:11: [dataset s] source: duplicate key (first at line 10)");
}

static void test_config_rejects_repeated_single_sections(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\n[node]\n[slurm]\n[mlfs]\ntimeout = x\n[node]\n[slurm]\n",
		      "x.conf:4: duplicate [mlfs] (first at line 1)",
		      "x.conf:6: duplicate [node] (first at line 2)",
		      "x.conf:7: duplicate [slurm] (first at line 3)");
}

/* An executor's name is not the config reader's to judge: exec_check_config does (test_registry). */
static void test_config_keeps_the_executor_and_its_line(void **state)
{
	struct mlfs_config *cfg = parse_ok("[mlfs]\n\nexecutor = kubernetes\n");

	(void)state;
	assert_string_equal(cfg->executor, "kubernetes");
	assert_int_equal(cfg->executor_line, 3);
	config_free(cfg);
	cfg = parse_ok("[mlfs]\n");
	assert_null(cfg->executor);	/* not set: the registry's default */
	assert_int_equal(cfg->executor_line, 0);
	config_free(cfg);
}

static void test_config_rejects_bad_mlfs_values(void **state)
{
	(void)state;
	EXPECT_ERRORS("[mlfs]\nexecutor = kubernetes\ntimeout = 0\nretries = -1\n"
		      "cache_size = -1G\nstore = nowhere\n",
		      "x.conf:3: [mlfs] timeout: bad number '0' (use a whole number, 1 or more)",
		      "x.conf:4: [mlfs] retries: bad number '-1' (use a whole number, 0 or more)",
		      "x.conf:5: [mlfs] cache_size: bad size '-1G' "
		      "(use a number with K, M, G or T)",
		      "x.conf:6: [mlfs] store: no datastore named 'nowhere'");
}

static void test_config_rejects_bad_node_and_slurm_values(void **state)
{
	(void)state;
	EXPECT_ERRORS("[node]\ngpus = -1\ncpus = 4x\ncuda_version = 12\nprice = -0.5\n"
		      "memory_gb = 99999999999999999999\n[slurm]\npoll_interval = 0\n",
		      "x.conf:2: [node] gpus: bad number '-1' (use a whole number, 0 or more)",
		      "x.conf:3: [node] cpus: bad number '4x' (use a whole number, 0 or more)",
		      "x.conf:4: [node] cuda_version: bad version '12' "
		      "(use MAJOR.MINOR, such as 12.4)",
		      "x.conf:5: [node] price: bad price '-0.5' "
		      "(use a number, 0 or more, such as 0.05)",
		      "x.conf:6: [node] memory_gb: bad number '99999999999999999999' "
		      "(use a whole number, 0 or more)",
		      "x.conf:8: [slurm] poll_interval: bad number '0' "
		      "(use a whole number, 1 or more)");
}

static void test_config_rejects_bad_datastore_common_values(void **state)
{
	(void)state;
	EXPECT_ERRORS("[datastore d]\ntype = s3\nuid = no-such-user-mlfs\n"
		      "gid = no-such-group-mlfs\nmode = 0648\nmode2 = ok\ntimeout = 0s\n"
		      "retries = many\n[datastore e]\ntype = s3\nmode = 10000\n"
		      "uid = 4294967295\n",
		      "x.conf:3: [datastore d] uid: unknown user 'no-such-user-mlfs' "
		      "(use a user name or a number)",
		      "x.conf:4: [datastore d] gid: unknown group 'no-such-group-mlfs' "
		      "(use a group name or a number)",
		      "x.conf:5: [datastore d] mode: bad mode '0648' "
		      "(use octal permission bits, such as 644)",
		      "x.conf:7: [datastore d] timeout: bad number '0s' "
		      "(use a whole number, 1 or more)",
		      "x.conf:8: [datastore d] retries: bad number 'many' "
		      "(use a whole number, 0 or more)",
		      "x.conf:11: [datastore e] mode: bad mode '10000' "
		      "(use octal permission bits, such as 644)",
		      "x.conf:12: [datastore e] uid: unknown user '4294967295' "
		      "(use a user name or a number)");
}

static void test_config_rejects_bad_datastore_names(void **state)
{
	char *long_name = repeat_char('n', 65);
	char *text, *want;

	(void)state;
	assert_true(asprintf(&text, "[datastore a/b]\n[datastore a b]\n[datastore ..]\n"
			     "[datastore %s]\n[datastore ok]\ntype = local\n", long_name) > 0);
	assert_true(asprintf(&want, "x.conf:4: [datastore %s]: bad datastore name "
			     "(use 1 to 64 letters, digits, '.', '_' or '-')", long_name) > 0);
	check_errors(text, strlen(text), (const char *const[]){
		"x.conf:1: [datastore a/b]: bad datastore name "
		"(use 1 to 64 letters, digits, '.', '_' or '-')",
		"x.conf:2: [datastore a b]: bad datastore name "
		"(use 1 to 64 letters, digits, '.', '_' or '-')",
		"x.conf:3: [datastore ..]: bad datastore name "
		"(use 1 to 64 letters, digits, '.', '_' or '-')",
		want, NULL });
	free(want);
	free(text);
	free(long_name);
}

static void test_config_rejects_bad_source_names(void **state)
{
	char *long_name = repeat_char('n', 256);
	char *text, *want;

	(void)state;
	assert_true(asprintf(&text, "[dataset .hidden]\nsource = https://x\n[model a/b]\n"
			     "[checkpoint a\tb]\n[dataset %s]\n", long_name) > 0);
	assert_true(asprintf(&want, "x.conf:5: [dataset %s]: bad name: longer than 255 bytes",
			     long_name) > 0);
	check_errors(text, strlen(text), (const char *const[]){
		"x.conf:1: [dataset .hidden]: bad name: starts with '.'",
		"x.conf:3: [model a/b]: bad name: holds a '/'",
		"x.conf:4: [checkpoint a\tb]: bad name: holds a control character",
		want, NULL });
	free(want);
	free(text);
	free(long_name);
}

static void test_config_rejects_bad_sources(void **state)
{
	(void)state;
	EXPECT_ERRORS("[datastore d]\ntype = local\n"
		      "[dataset a]\nsource = SFTP://host/x\n"
		      "[dataset b]\nsource = s3://\n"
		      "[dataset c]\nsource = just-a-name\n"
		      "[dataset e]\nsource = d:/a/../b\n"
		      "[dataset f]\nsource = missing:/x\n"
		      "[dataset g]\nsource = bad name:/x\n",
		      "x.conf:4: [dataset a] source: unknown URL scheme 'sftp' "
		      "(use nfs, smb, s3, gs, http, https, ftp, ftps, git, git+https or git+http)",
		      "x.conf:6: [dataset b] source: nothing after 's3://'",
		      "x.conf:8: [dataset c] source: 'just-a-name' is neither "
		      "DATASTORE:/path nor a URL",
		      "x.conf:10: [dataset e] source: '..' is not allowed in 'd:/a/../b'",
		      "x.conf:12: [dataset f] source: no datastore named 'missing'",
		      "x.conf:14: [dataset g] source: 'bad name:/x' is neither "
		      "DATASTORE:/path nor a URL");
}

/* [source NAME]: Kibernetika's sources, GPULab's storage: a source, where a container sees it */
static void test_config_reads_source_sections(void **state)
{
	struct mlfs_config *cfg = parse_ok("[datastore d]\ntype = local\n"
					   "[source code]\nsource = d:/repo\nsub_path = ./src//\n"
					   "mount_path = /work/./code/\n"
					   "[source my data]\nsource = d:/data\n");
	char buf[256];

	(void)state;
	assert_int_equal(cfg->n_sources, 2);
	assert_int_equal(cfg->sources[0].kind, SOURCE_SOURCE);
	assert_string_equal(cfg->sources[0].path, "repo");
	assert_string_equal(cfg->sources[0].sub_path, "src");
	config_mount_path(&cfg->sources[0], buf, sizeof(buf));
	assert_string_equal(buf, "/work/code");
	config_mount_path(&cfg->sources[1], buf, sizeof(buf));
	assert_string_equal(buf, "/workspace/my_data");	/* the name as the tree shows it */
	assert_string_equal(config_source_word(SOURCE_SOURCE), "source");
	config_free(cfg);
	EXPECT_ERRORS("[datastore d]\ntype = local\n"
		      "[source a]\nsource = d:/a\nmount_path = rel\nsub_path = ../up\n"
		      "[source b]\nsource = d:/b\nmount_path = /\n"
		      "[source c]\nsource = d:/c\nmount_path = /workspace/a\n"
		      "[source e]\nmount_path = /e\n"
		      "[dataset f]\nsource = d:/f\nmount_path = /f\n",
		      "x.conf:5: [source a] mount_path: 'rel' is not an absolute path",
		      "x.conf:6: [source a] sub_path: '..' is not allowed in '../up'",
		      "x.conf:9: [source b] mount_path: '/' is the container's root",
		      "x.conf:10: [source c]: mount_path /workspace/a is [source a]'s too (line 3)",
		      "x.conf:13: [source e]: missing key 'source'",
		      "x.conf:17: [dataset f]: unknown key 'mount_path' (known: source)");
}

static void test_config_rejects_colliding_shown_names_naming_both_lines(void **state)
{
	(void)state;
	EXPECT_ERRORS("[dataset PASCAL VOC]\nsource = https://a\n"
		      "[dataset PASCAL_VOC]\nsource = https://b\n"
		      "[dataset PASCAL VOC]\nsource = https://c\n"
		      "[model PASCAL_VOC]\nsource = https://d\n",
		      "x.conf:3: [dataset PASCAL_VOC]: shown as 'PASCAL_VOC' in the tree, "
		      "the same as [dataset PASCAL VOC] at line 1",
		      "x.conf:5: duplicate [dataset PASCAL VOC] (first at line 1)");
}

static void test_config_reports_every_error_in_line_order(void **state)
{
	(void)state;
	EXPECT_ERRORS("[dataset early]\nsource = gone:/x\n"
		      "[mlfs]\ncache_size = 1X\nexecutor = k8s\nstore = nope\nwhat\n"
		      "[datastore late]\nroot = /r\n"
		      "[node]\ngpus = many\n",
		      "x.conf:2: [dataset early] source: no datastore named 'gone'",
		      "x.conf:4: [mlfs] cache_size: bad size '1X' "
		      "(use a number with K, M, G or T)",
		      "x.conf:6: [mlfs] store: no datastore named 'nope'",
		      "x.conf:7: [mlfs]: expected 'key = value', a [section] or a comment",
		      "x.conf:8: [datastore late]: missing key 'type'",
		      "x.conf:11: [node] gpus: bad number 'many' "
		      "(use a whole number, 0 or more)");
}

static void test_config_ignores_keys_of_a_rejected_section(void **state)
{
	(void)state;
	EXPECT_ERRORS("[bogus]\na = 1\nb =\n[mlfs]\ntimeout = 5\n[mlfs]\nnot_a_key = 1\n",
		      "x.conf:1: unknown section [bogus] (use mlfs, node, slurm, containers, "
		      "datastore, dataset, checkpoint, model, source or environment)",
		      "x.conf:6: duplicate [mlfs] (first at line 4)");
}

/* ---- config_parse_size ---- */

static void test_config_parse_size_accepts_good_sizes(void **state)
{
	static const struct {
		const char *s;
		uint64_t bytes;
	} good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "4096B", 4096 }, { "1K", 1024 },
		{ "1k", 1024 }, { "512M", 512ull << 20 }, { "100G", 100ull << 30 },
		{ "10GiB", 10ull << 30 }, { "10GB", 10ull << 30 }, { "10gib", 10ull << 30 },
		{ "1.5T", 3ull << 39 }, { "0.5K", 512 }, { "1.25M", 1310720 },
		{ "0.1K", 102 }, { "2 G", 2ull << 30 }, { "007M", 7ull << 20 },
		{ "1.0000000000000000000001K", 1024 },
		{ "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
		{ "18446744073709551615B", UINT64_MAX },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t out = 12345;

		if (config_parse_size(good[i].s, &out) != 0 || out != good[i].bytes)
			fail_msg("'%s' gave %llu", good[i].s, (unsigned long long)out);
	}
}

static void test_config_parse_size_rejects_bad_sizes(void **state)
{
	static const char *const bad[] = {
		"", " ", "G", "B", "iB", "-1", "-1G", "+1G", " 1G", "1G ", "1 ", "1.", ".5",
		"1.5.2", "1e3", "12Q", "1KK", "1iB", "1P", "0x10", "1,5G", "nan", "inf",
		"1 G B", "1Gibs", "16777216T", "17179869184G", "18446744073709551616",
		"99999999999999999999999K",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t out = 12345;

		if (config_parse_size(bad[i], &out) != -EINVAL || out != 12345)
			fail_msg("'%s' was accepted", bad[i]);
	}
}

/* ---- config_load ---- */

static void test_config_load_missing_file_gives_enoent_and_message(void **state)
{
	struct mlfs_config *cfg = NULL;
	struct diag d;

	(void)state;
	diag_init(&d);
	assert_int_equal(config_load(&cfg, "/nonexistent/mlfs.conf", backend_config_forms(), &d), -ENOENT);
	assert_null(cfg);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "/nonexistent/mlfs.conf: No such file or directory");
	diag_free(&d);
}

static void test_config_load_folder_gives_eisdir(void **state)
{
	struct mlfs_config *cfg = NULL;
	struct diag d;

	(void)state;
	diag_init(&d);
	assert_int_equal(config_load(&cfg, "/", backend_config_forms(), &d), -EISDIR);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "/: Is a directory");
	diag_free(&d);
}

static char *write_temp_config(char *dir, const char *text)
{
	char *path;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&path, "%s/mlfs.conf", dir) > 0);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
	return path;
}

static void test_config_load_reads_file_and_resolves_relative_dirs(void **state)
{
	char dir[] = "/tmp/mlfs-config-XXXXXX";
	char *path = write_temp_config(dir, "[mlfs]\nstate_dir = st\ncache_dir = /abs\n"
				       "[datastore d]\ntype = local\nroot = r\n");
	struct mlfs_config *cfg = NULL;
	struct diag d;
	char *want;

	(void)state;
	diag_init(&d);
	assert_int_equal(config_load(&cfg, path, backend_config_forms(), &d), 0);
	assert_int_equal(d.n, 0);
	assert_true(asprintf(&want, "%s/st", dir) > 0);
	assert_string_equal(cfg->file, path);
	assert_string_equal(cfg->state_dir, want);
	assert_string_equal(cfg->cache_dir, "/abs");
	assert_ptr_equal(cfg->datastores[0].file, cfg->file);
	check_kv(&cfg->datastores[0], 1, "root", "r", 6);
	config_free(cfg);
	diag_free(&d);
	free(want);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	free(path);
}

static void test_config_load_reports_file_errors(void **state)
{
	char dir[] = "/tmp/mlfs-config-XXXXXX";
	char *path = write_temp_config(dir, "[mlfs]\ntimeout = soon\n");
	struct mlfs_config *cfg = NULL;
	struct diag d;
	char *want;

	(void)state;
	diag_init(&d);
	assert_int_equal(config_load(&cfg, path, backend_config_forms(), &d), -EINVAL);
	assert_null(cfg);
	assert_true(asprintf(&want, "%s:2: [mlfs] timeout: bad number 'soon' "
			     "(use a whole number, 1 or more)", path) > 0);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], want);
	diag_free(&d);
	free(want);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	free(path);
}

/* ---- config_resolve_path ---- */

static void expect_resolved(const char *file, const char *value, const char *want)
{
	char *got = config_resolve_path(file, value);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_config_resolve_path_keeps_absolute_values(void **state)
{
	(void)state;
	expect_resolved("/etc/mlfs/mlfs.conf", "/data/x", "/data/x");
	expect_resolved("rel.conf", "/data//x/", "/data//x/");
}

static void test_config_resolve_path_uses_config_folder(void **state)
{
	(void)state;
	expect_resolved("/etc/mlfs/mlfs.conf", "state", "/etc/mlfs/state");
	expect_resolved("/etc/mlfs/mlfs.conf", "./a//b/./", "/etc/mlfs/a/b");
	expect_resolved("/etc/mlfs/mlfs.conf", "../x", "/etc/mlfs/../x");
	expect_resolved("/mlfs.conf", "s", "/s");
	expect_resolved("/mlfs.conf", ".", "/");
}

static void test_config_resolve_path_makes_relative_config_absolute(void **state)
{
	char *cwd = getcwd(NULL, 0);
	char dir[] = "/tmp/mlfs-cwd-XXXXXX";
	char *here, *want1, *want2;

	(void)state;
	assert_non_null(cwd);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chdir(dir), 0);
	here = getcwd(NULL, 0);
	assert_non_null(here);
	assert_true(asprintf(&want1, "%s/state", here) > 0);
	assert_true(asprintf(&want2, "%s/conf/d/state", here) > 0);
	expect_resolved("mlfs.conf", "state", want1);
	expect_resolved("./mlfs.conf", "./state", want1);
	expect_resolved("conf/d/mlfs.conf", "state", want2);
	free(want1);
	free(want2);
	free(here);
	assert_int_equal(chdir("/"), 0);
	expect_resolved("mlfs.conf", "state", "/state");
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rmdir(dir), 0);
	free(cwd);
}

static void test_config_free_accepts_null(void **state)
{
	(void)state;
	config_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ini_numbers_lines_past_blanks_and_comments),
		cmocka_unit_test(test_ini_accepts_crlf_bom_and_missing_final_newline),
		cmocka_unit_test(test_ini_splits_at_first_equals_and_trims),
		cmocka_unit_test(test_ini_unquotes_only_wholly_quoted_values),
		cmocka_unit_test(test_ini_reports_bad_headers_and_lines),
		cmocka_unit_test(test_ini_reports_nul_byte_as_bad_line),
		cmocka_unit_test(test_ini_stops_when_handler_fails),
		cmocka_unit_test(test_ini_reads_empty_text),
		cmocka_unit_test(test_diag_formats_file_line_and_grows),
		cmocka_unit_test(test_config_parses_design_sketch_with_every_field),
		cmocka_unit_test(test_config_lookups_find_datastores_and_keys),
		cmocka_unit_test(test_config_empty_file_gives_defaults),
		cmocka_unit_test(test_config_empty_sections_keep_defaults),
		cmocka_unit_test(test_config_reads_every_mlfs_node_and_slurm_key),
		cmocka_unit_test(test_config_reads_containers_keys_and_checks_them),
		cmocka_unit_test(test_config_reads_environment_sections_in_file_order),
		cmocka_unit_test(test_config_checks_each_environment_key),
		cmocka_unit_test(test_config_refuses_environments_a_spec_cannot_choose),
		cmocka_unit_test(test_config_log_size_and_max_jobs),
		cmocka_unit_test(test_config_keeps_1000_byte_value_intact),
		cmocka_unit_test(test_config_keeps_100k_value_intact_and_counts_lines_after_it),
		cmocka_unit_test(test_config_accepts_crlf_line_endings),
		cmocka_unit_test(test_config_skips_utf8_bom),
		cmocka_unit_test(test_config_strips_inline_comments),
		cmocka_unit_test(test_config_unquotes_wholly_quoted_values),
		cmocka_unit_test(test_config_trims_keys_and_values),
		cmocka_unit_test(test_config_parses_datastore_common_keys_and_keeps_all_in_kv),
		cmocka_unit_test(test_config_metadata_ttl_and_cache_sizes_are_inherited),
		cmocka_unit_test(test_config_parses_every_source_form),
		cmocka_unit_test(test_config_relative_dirs_resolve_against_config_folder),
		cmocka_unit_test(test_config_rejects_unknown_key_with_line),
		cmocka_unit_test(test_key_hint_names_a_near_key_or_lists_them),
		cmocka_unit_test(test_config_rejects_bad_size_naming_section_and_key),
		cmocka_unit_test(test_config_rejects_duplicate_datastore_and_ignores_its_keys),
		cmocka_unit_test(test_config_rejects_unknown_and_malformed_sections),
		cmocka_unit_test(test_config_rejects_key_before_any_section),
		cmocka_unit_test(test_config_rejects_lines_that_are_not_key_value),
		cmocka_unit_test(test_config_rejects_empty_values),
		cmocka_unit_test(test_config_rejects_nul_byte_in_a_line),
		cmocka_unit_test(test_config_rejects_missing_type_and_source_at_header_line),
		cmocka_unit_test(test_config_rejects_repeated_keys_within_a_section),
		cmocka_unit_test(test_config_rejects_repeated_single_sections),
		cmocka_unit_test(test_config_keeps_the_executor_and_its_line),
		cmocka_unit_test(test_config_rejects_bad_mlfs_values),
		cmocka_unit_test(test_config_rejects_bad_node_and_slurm_values),
		cmocka_unit_test(test_config_rejects_bad_datastore_common_values),
		cmocka_unit_test(test_config_rejects_bad_datastore_names),
		cmocka_unit_test(test_config_rejects_bad_source_names),
		cmocka_unit_test(test_config_rejects_bad_sources),
		cmocka_unit_test(test_config_reads_source_sections),
		cmocka_unit_test(test_config_rejects_colliding_shown_names_naming_both_lines),
		cmocka_unit_test(test_config_reports_every_error_in_line_order),
		cmocka_unit_test(test_config_ignores_keys_of_a_rejected_section),
		cmocka_unit_test(test_config_parse_size_accepts_good_sizes),
		cmocka_unit_test(test_config_parse_size_rejects_bad_sizes),
		cmocka_unit_test(test_config_load_missing_file_gives_enoent_and_message),
		cmocka_unit_test(test_config_load_folder_gives_eisdir),
		cmocka_unit_test(test_config_load_reads_file_and_resolves_relative_dirs),
		cmocka_unit_test(test_config_load_reports_file_errors),
		cmocka_unit_test(test_config_resolve_path_keeps_absolute_values),
		cmocka_unit_test(test_config_resolve_path_uses_config_folder),
		cmocka_unit_test(test_config_resolve_path_makes_relative_config_absolute),
		cmocka_unit_test(test_config_free_accepts_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
