/*
 * test_container.c - image references as Docker reads them (image_ref.c),
 * what a worker's packages are installed from, and which of the NVIDIA
 * driver's files a GPU worker's container gets, where (container.c).
 */
#define _GNU_SOURCE
#include <errno.h>
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

#include "container.h"
#include "diag.h"
#include "spec.h"

static void expect_ref(const char *s, const char *domain, const char *path, const char *tag,
		       const char *digest)
{
	struct image_ref r;
	char why[256] = "";

	if (image_ref_parse(s, &r, why, sizeof(why)) != 0)
		fail_msg("%s: %s", s, why);
	assert_string_equal(r.domain, domain);
	assert_string_equal(r.path, path);
	assert_string_equal(r.tag, tag);
	assert_string_equal(r.digest, digest);
}

static void expect_bad(const char *s, const char *why_part)
{
	struct image_ref r;
	char why[256] = "";

	assert_int_equal(image_ref_parse(s, &r, why, sizeof(why)), -EINVAL);
	if (!strstr(why, why_part))
		fail_msg("%s: '%s' does not say '%s'", s, why, why_part);
}

static void test_image_ref_reads_the_forms_registries_use(void **state)
{
	static const char sha[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char digest_ref[160];

	(void)state;
	expect_ref("busybox", "", "busybox", "", "");
	expect_ref("debian:stable", "", "debian", "stable", "");
	expect_ref("tensorflow/tensorflow:1.2.0-gpu", "", "tensorflow/tensorflow", "1.2.0-gpu", "");
	expect_ref("127.0.0.1:5000/team/tf:1.15", "127.0.0.1:5000", "team/tf", "1.15", "");
	expect_ref("localhost/img", "localhost", "img", "", "");
	expect_ref("gpulab.ilabt.imec.be:5000/sample:nvidia-smi", "gpulab.ilabt.imec.be:5000",
		   "sample", "nvidia-smi", "");
	expect_ref("kuberlab/tensorflow:cpu-36-1.7.0-full", "", "kuberlab/tensorflow",
		   "cpu-36-1.7.0-full", "");
	expect_ref("a/b__c/d-e---f.g_h:_T", "", "a/b__c/d-e---f.g_h", "_T", "");
	snprintf(digest_ref, sizeof(digest_ref), "reg.io/x@%s", sha);
	expect_ref(digest_ref, "reg.io", "x", "", sha);
	snprintf(digest_ref, sizeof(digest_ref), "x:1@%s", sha);
	expect_ref(digest_ref, "", "x", "1", sha);
	/* a first component without '.' or ':' is a path, not a registry */
	expect_ref("team/tf", "", "team/tf", "", "");
}

static void test_image_ref_refuses_what_cannot_be_valid(void **state)
{
	(void)state;
	expect_bad("", "is empty");
	expect_bad("Debian", "'Debian' is not lower-case");
	expect_bad("a b", "blank");
	expect_bad("a//b", "an empty path component");
	expect_bad("a/", "an empty path component");
	expect_bad("-a", "'-a'");
	expect_bad("a_", "'a_'");
	expect_bad("a___b", "'a___b'");
	expect_bad("a:", "the tag ''");
	expect_bad("a:-x", "the tag '-x'");
	expect_bad("a:b/c", "'a:b' is not a host name");	/* the "tag" has a slash: a registry */
	expect_bad("reg.io:0/a", "registry 'reg.io:0'");
	expect_bad("reg.io:x/a", "registry 'reg.io:x'");
	expect_bad("-reg.io/a", "registry '-reg.io'");
	expect_bad("reg..io/a", "registry 'reg..io'");
	expect_bad("reg.io/", "the repository name is empty");
	expect_bad("a@sha256:abc", "the digest 'sha256:abc'");
	expect_bad("a@md5", "the digest 'md5'");
	expect_bad("a@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
		   "the digest");
}

static void test_image_ref_name_longer_than_255_is_refused(void **state)
{
	char name[300];

	(void)state;
	memset(name, 'a', 256);
	name[256] = '\0';
	expect_bad(name, "longer than 255");
	name[255] = '\0';
	expect_ref(name, "", name, "", "");
}

static void test_image_ref_credentials_of_gpulab_private_form(void **state)
{
	(void)state;
	assert_int_equal(image_ref_credentials("user:pw@reg.io:4567/a/b:v1"), strlen("user:pw"));
	assert_int_equal(image_ref_credentials("u:p@w@reg.io/a"), strlen("u:p@w"));
	assert_int_equal(image_ref_credentials("reg.io/a/b:v1"), 0);
	assert_int_equal(image_ref_credentials("busybox@sha256:00"), 0);
	assert_int_equal(image_ref_credentials("reg.io/x@sha256:00"), 0);
	assert_int_equal(image_ref_credentials("busybox"), 0);
}

static struct spec *packages_spec(const char *env)
{
	char text[1024];
	struct spec *s = NULL;
	struct diag d;

	snprintf(text, sizeof(text), "{\"environment\": {\"image\": \"debian:12\", %s},"
		 " \"workers\": [\"x\"]}", env);
	diag_init(&d);
	assert_int_equal(spec_parse(&s, "p.json", text, strlen(text), "p", &d), 0);
	diag_free(&d);
	return s;
}

/* The file's text; @ref gets the image's name. */
static char *packages_of(const char *env, const char *base, char *ref)
{
	char dir[] = "/tmp/test_container.XXXXXX", path[64], *text = calloc(1, 4096);
	struct spec *s = packages_spec(env);
	struct stat st;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/packages", dir);
	assert_int_equal(container_packages_file(path, s, base, ref), 1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);	/* variables may be secrets */
	f = fopen(path, "r");
	assert_non_null(f);
	assert_true(fread(text, 1, 4095, f) > 0);
	fclose(f);
	unlink(path);
	rmdir(dir);
	spec_free(s);
	return text;
}

static void test_container_packages_file_lists_apt_conda_pip_then_variables(void **state)
{
	static const char env[] = "\"variables\": {\"PIP_INDEX_URL\": \"http://127.0.0.1:1/simple\", "
				  "\"EPOCHS\": 3}, \"packages\": {\"pip\": [\"b==2\", \"a\"], "
				  "\"conda\": [\"c\"], \"apt\": [\"libgl1\"]}";
	char ref[CONTAINER_ENV_REF_MAX], again[CONTAINER_ENV_REF_MAX], other[CONTAINER_ENV_REF_MAX];
	char *text = packages_of(env, "reg.lan/py:3.11", ref);

	(void)state;
	assert_string_equal(text, "apt libgl1\nconda c\npip b==2\npip a\n"
			    "env PIP_INDEX_URL=http://127.0.0.1:1/simple\nenv EPOCHS=3\n");
	free(text);
	assert_int_equal(strlen(ref), strlen(CONTAINER_ENV_PREFIX) + 32);
	assert_int_equal(strncmp(ref, CONTAINER_ENV_PREFIX, strlen(CONTAINER_ENV_PREFIX)), 0);
	assert_int_equal(strspn(ref + strlen(CONTAINER_ENV_PREFIX), "0123456789abcdef"), 32);
	/* the same inputs, the same image; another base or index, another */
	free(packages_of(env, "reg.lan/py:3.11", again));
	assert_string_equal(ref, again);
	free(packages_of(env, "reg.lan/py:3.12", other));
	assert_string_not_equal(ref, other);
	free(packages_of("\"variables\": {\"PIP_INDEX_URL\": \"http://evil/simple\", \"EPOCHS\": 3}, "
			 "\"packages\": {\"pip\": [\"b==2\", \"a\"], \"conda\": [\"c\"], "
			 "\"apt\": [\"libgl1\"]}", "reg.lan/py:3.11", other));
	assert_string_not_equal(ref, other);
}

static void test_container_packages_file_without_packages_writes_nothing(void **state)
{
	struct spec *s = packages_spec("\"packages\": {\"apt\": []}");
	char ref[CONTAINER_ENV_REF_MAX] = "";

	(void)state;
	assert_int_equal(container_packages_file("/nonexistent/dir/packages", s, "debian:12", ref), 0);
	assert_string_equal(ref, "");
	spec_free(s);
}

#if defined(__aarch64__)
#define ARCH_LDCONFIG	"AArch64"
#define ARCH_DIR	"/usr/lib/aarch64-linux-gnu"
#else
#define ARCH_LDCONFIG	"x86-64"
#define ARCH_DIR	"/usr/lib/x86_64-linux-gnu"
#endif

/* `ldconfig -p` as a GPU host with the driver in /usr/local/nvidia prints it */
static const char ldconfig_text[] =
	"1234 libs found in cache `/etc/ld.so.cache'\n"
	"\tlibvdpau_nvidia.so.1 (libc6," ARCH_LDCONFIG ") => /usr/local/nvidia/lib64/libvdpau_nvidia.so.1\n"
	"\tlibnvidia-ml.so.1 (libc6," ARCH_LDCONFIG ") => /usr/local/nvidia/lib64/libnvidia-ml.so.1\n"
	"\tlibnvidia-ml.so.1 (libc6," ARCH_LDCONFIG ") => /lib/libnvidia-ml.so.1\n"
	"\tlibnvidia-ml.so (libc6," ARCH_LDCONFIG ") => /usr/local/nvidia/lib64/libnvidia-ml.so\n"
	"\tlibcuda.so.1 (libc6) => /usr/local/nvidia/lib/libcuda.so.1\n"
	"\tlibcuda.so.1 (libc6," ARCH_LDCONFIG ", OS ABI: Linux 3.2.0) => /usr/local/nvidia/lib64/libcuda.so.1\n"
	"\tlibnvidia-gpucomp.so.580.159.04 (libc6," ARCH_LDCONFIG ") => "
	"/usr/local/nvidia/lib64/libnvidia-gpucomp.so.580.159.04\n"
	"\tlibc.so.6 (libc6," ARCH_LDCONFIG ") => /lib/x86_64-linux-gnu/libc.so.6\n";

static const struct container_driver_file *driver_file(const struct container_runtime *rt,
						       const char *inside)
{
	for (size_t i = 0; i < rt->n_driver_files; i++)
		if (strcmp(rt->driver_files[i].inside, inside) == 0)
			return &rt->driver_files[i];
	return NULL;
}

static void test_driver_libs_from_ldconfig_bound_where_images_look(void **state)
{
	struct container_runtime rt = { 0 };
	const struct container_driver_file *d;

	(void)state;
	container_driver_libs_parse(&rt, ldconfig_text);
	/* libnvidia-ml.so.1, libcuda.so.1 and the versioned gpucomp, each at two folders */
	assert_int_equal(rt.n_driver_files, 6);
	d = driver_file(&rt, ARCH_DIR "/libnvidia-ml.so.1");
	assert_non_null(d);
	assert_string_equal(d->host, "/usr/local/nvidia/lib64/libnvidia-ml.so.1");	/* the first */
	d = driver_file(&rt, "/usr/lib64/libcuda.so.1");
	assert_non_null(d);
	assert_string_equal(d->host, "/usr/local/nvidia/lib64/libcuda.so.1");	/* 64-bit */
	assert_non_null(driver_file(&rt, ARCH_DIR "/libnvidia-gpucomp.so.580.159.04"));
	assert_null(driver_file(&rt, ARCH_DIR "/libnvidia-ml.so"));	/* the link for linkers */
	assert_null(driver_file(&rt, ARCH_DIR "/libvdpau_nvidia.so.1"));	/* not compute */
	assert_null(driver_file(&rt, ARCH_DIR "/libc.so.6"));
}

static void test_driver_libs_full_table_drops_the_rest(void **state)
{
	struct container_runtime rt = { 0 };
	char *text = NULL, *line;

	(void)state;
	for (int i = 0; i < 40; i++) {
		assert_true(asprintf(&line, "%s\tlibnvidia-gpucomp.so.%d (libc6," ARCH_LDCONFIG
				     ") => /d/libnvidia-gpucomp.so.%d\n", text ? text : "", i, i) > 0);
		free(text);
		text = line;
	}
	container_driver_libs_parse(&rt, text);
	free(text);
	assert_int_equal(rt.n_driver_files, CONTAINER_DRIVER_FILES);
}

/* argv's "--volume=..." entries */
static int count_args(char **argv, const char *prefix)
{
	int n = 0;

	for (size_t i = 0; argv[i]; i++)
		n += strncmp(argv[i], prefix, strlen(prefix)) == 0;
	return n;
}

static void test_argv_binds_driver_files_for_gpu_workers_only(void **state)
{
	struct container_runtime rt = { .usable = true, .podman = "/usr/bin/podman",
					.oci = "/usr/sbin/runc", .nofile_soft = 1024,
					.nofile_hard = 4096, .nproc = 1000 };
	int minors[] = { 97 };		/* no /dev/nvidia97 here: warned, not passed */
	struct container_run r = { .rt = &rt, .image = "reg.lan/tf:1", .name = "c1",
				   .command = "nvidia-smi", .uid = 1000, .gid = 1000 };
	char *argv[CONTAINER_ARGV_MAX], buf[16384];

	(void)state;
	container_driver_libs_parse(&rt, ldconfig_text);
	assert_int_equal(container_argv(&r, NULL, argv, buf, sizeof(buf)), 0);
	assert_int_equal(count_args(argv, "--volume="), 0);
	assert_int_equal(count_args(argv, "--device="), 0);
	r.gpus = minors;
	r.n_gpus = 1;
	assert_int_equal(container_argv(&r, NULL, argv, buf, sizeof(buf)), 0);
	assert_int_equal(count_args(argv, "--volume=/usr/local/nvidia/lib64/libcuda.so.1:"), 2);
	assert_int_equal(count_args(argv, "--volume=/usr/local/nvidia/lib64/libcuda.so.1:"
				    ARCH_DIR "/libcuda.so.1:ro"), 1);
	assert_int_equal(count_args(argv, "--device=/dev/nvidia97"), 0);
}

/*
 * Every driver file a node can have fits the argv.  The GPUs' --device
 * entries are passed only for device nodes that exist, which this machine
 * has none of: the 64 GPUs are warned about here, their fit is checked by
 * CONTAINER_ARGV_MAX's sum, not by this test.
 */
static void test_argv_with_every_driver_file_fits(void **state)
{
	struct container_runtime rt = { .usable = true, .podman = "/usr/bin/podman",
					.oci = "/usr/sbin/runc" };
	int minors[CONTAINER_GPUS_MAX];
	struct container_run r = { .rt = &rt, .image = "reg.lan/tf:1", .name = "c1",
				   .command = "true", .ml_dir = "/v", .env_file = "/e",
				   .memory = 1 << 30, .shm_mb = 64, .workdir = "/w",
				   .gpus = minors, .n_gpus = CONTAINER_GPUS_MAX };
	char *argv[CONTAINER_ARGV_MAX], buf[65536];

	(void)state;
	for (int i = 0; i < CONTAINER_GPUS_MAX; i++)
		minors[i] = i;
	for (int i = 0; i < CONTAINER_DRIVER_FILES; i++)
		snprintf(rt.driver_files[rt.n_driver_files++].host, 256, "/d/lib%d.so.1", i);
	assert_int_equal(container_argv(&r, "/mlfs/w", argv, buf, sizeof(buf)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_ref_reads_the_forms_registries_use),
		cmocka_unit_test(test_image_ref_refuses_what_cannot_be_valid),
		cmocka_unit_test(test_image_ref_name_longer_than_255_is_refused),
		cmocka_unit_test(test_image_ref_credentials_of_gpulab_private_form),
		cmocka_unit_test(test_container_packages_file_lists_apt_conda_pip_then_variables),
		cmocka_unit_test(test_container_packages_file_without_packages_writes_nothing),
		cmocka_unit_test(test_driver_libs_from_ldconfig_bound_where_images_look),
		cmocka_unit_test(test_driver_libs_full_table_drops_the_rest),
		cmocka_unit_test(test_argv_binds_driver_files_for_gpu_workers_only),
		cmocka_unit_test(test_argv_with_every_driver_file_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
