/*
 * cuda_probe.c - what CUDA sees, and whether it computes: lists each device
 * CUDA enumerates (ordinal, name, UUID as nvidia-smi writes it) and runs a
 * small kernel on each, checking every result.  The GPU check
 * (scripts/gpu_check.sh) runs it inside a worker's container to show that
 * the worker has exactly its GPUs and that they work there.
 *
 * It needs nothing at build time from NVIDIA: the driver's libcuda.so.1 is
 * loaded at run time (as the driver's own programs do), and the kernel is
 * PTX text the driver compiles for whatever GPU it finds.
 *
 *   cuda_probe        exit 0: every device computed right, and at least one;
 *                     1: no device (CUDA's words on stderr); 2: no libcuda;
 *                     3: a CUDA call failed; 4: a kernel computed wrong
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx *cu_context;
typedef struct cu_mod *cu_module;
typedef struct cu_func *cu_function;
typedef unsigned long long cu_ptr;

#define PROBE_N		(1u << 20)
#define PROBE_NO_DEVICE	100		/* CUDA_ERROR_NO_DEVICE */

/* out[i] = 2 * i + 1 for i < n */
static const char probe_ptx[] =
	".version 7.0\n"
	".target sm_52\n"
	".address_size 64\n"
	".visible .entry fill(.param .u64 out, .param .u32 n)\n"
	"{\n"
	"\t.reg .pred %p;\n"
	"\t.reg .b32 %r<6>;\n"
	"\t.reg .b64 %rd<4>;\n"
	"\tld.param.u64 %rd1, [out];\n"
	"\tld.param.u32 %r1, [n];\n"
	"\tmov.u32 %r2, %ctaid.x;\n"
	"\tmov.u32 %r3, %ntid.x;\n"
	"\tmov.u32 %r4, %tid.x;\n"
	"\tmad.lo.s32 %r5, %r2, %r3, %r4;\n"
	"\tsetp.ge.u32 %p, %r5, %r1;\n"
	"\t@%p bra DONE;\n"
	"\tcvta.to.global.u64 %rd2, %rd1;\n"
	"\tmul.wide.u32 %rd3, %r5, 4;\n"
	"\tadd.s64 %rd2, %rd2, %rd3;\n"
	"\tshl.b32 %r2, %r5, 1;\n"
	"\tadd.s32 %r2, %r2, 1;\n"
	"\tst.global.u32 [%rd2], %r2;\n"
	"DONE:\n"
	"\tret;\n"
	"}\n";

static struct {
	cu_result (*init)(unsigned int);
	cu_result (*count)(int *);
	cu_result (*get)(cu_device *, int);
	cu_result (*name)(char *, int, cu_device);
	cu_result (*uuid)(unsigned char *, cu_device);
	cu_result (*retain)(cu_context *, cu_device);
	cu_result (*set_current)(cu_context);
	cu_result (*load)(cu_module *, const void *);
	cu_result (*function)(cu_function *, cu_module, const char *);
	cu_result (*alloc)(cu_ptr *, size_t);
	cu_result (*launch)(cu_function, unsigned int, unsigned int, unsigned int, unsigned int,
			    unsigned int, unsigned int, unsigned int, void *, void **, void **);
	cu_result (*sync)(void);
	cu_result (*copy)(void *, cu_ptr, size_t);
	cu_result (*error)(cu_result, const char **);
} cu;

static void *probe_sym(void *lib, const char *a, const char *b)
{
	void *f = dlsym(lib, a);

	if (!f && b)
		f = dlsym(lib, b);
	if (!f) {
		fprintf(stderr, "cuda_probe: libcuda.so.1 has no %s\n", a);
		exit(2);
	}
	return f;
}

static const char *probe_err(cu_result r)
{
	const char *s = NULL;

	return cu.error && cu.error(r, &s) == 0 && s ? s : "unknown error";
}

#define PROBE_CALL(what, call) do {						\
	cu_result r_ = (call);							\
	if (r_ != 0) {								\
		fprintf(stderr, "cuda_probe: %s: %s (%d)\n", what, probe_err(r_), r_); \
		return 3;							\
	}									\
} while (0)

static int probe_device(int ordinal)
{
	unsigned char u[16];
	char name[256];
	cu_device dev;
	cu_context ctx;
	cu_module mod;
	cu_function fn;
	cu_ptr out;
	unsigned int n = PROBE_N, *host;
	void *args[] = { &out, &n };
	size_t bad = 0;

	PROBE_CALL("cuDeviceGet", cu.get(&dev, ordinal));
	PROBE_CALL("cuDeviceGetName", cu.name(name, sizeof(name), dev));
	PROBE_CALL("cuDeviceGetUuid", cu.uuid(u, dev));
	printf("device %d %s GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
	       ordinal, name, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
	       u[12], u[13], u[14], u[15]);
	PROBE_CALL("cuDevicePrimaryCtxRetain", cu.retain(&ctx, dev));
	PROBE_CALL("cuCtxSetCurrent", cu.set_current(ctx));
	PROBE_CALL("cuModuleLoadData (the driver's PTX compiler)", cu.load(&mod, probe_ptx));
	PROBE_CALL("cuModuleGetFunction", cu.function(&fn, mod, "fill"));
	PROBE_CALL("cuMemAlloc", cu.alloc(&out, n * sizeof(*host)));
	PROBE_CALL("cuLaunchKernel", cu.launch(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	PROBE_CALL("cuCtxSynchronize", cu.sync());
	host = malloc(n * sizeof(*host));
	if (!host)
		return 3;
	PROBE_CALL("cuMemcpyDtoH", cu.copy(host, out, n * sizeof(*host)));
	for (unsigned int i = 0; i < n; i++)
		bad += host[i] != 2 * i + 1;
	free(host);
	if (bad) {
		printf("device %d kernel wrong: %zu of %u values\n", ordinal, bad, n);
		return 4;
	}
	printf("device %d kernel ok: %u values\n", ordinal, n);
	return 0;
}

int main(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	cu_result r;
	int count = 0, ret = 0;

	if (!lib) {
		fprintf(stderr, "cuda_probe: %s\n", dlerror());
		return 2;
	}
	cu.init = probe_sym(lib, "cuInit", NULL);
	cu.count = probe_sym(lib, "cuDeviceGetCount", NULL);
	cu.get = probe_sym(lib, "cuDeviceGet", NULL);
	cu.name = probe_sym(lib, "cuDeviceGetName", NULL);
	cu.uuid = probe_sym(lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
	cu.retain = probe_sym(lib, "cuDevicePrimaryCtxRetain", NULL);
	cu.set_current = probe_sym(lib, "cuCtxSetCurrent", NULL);
	cu.load = probe_sym(lib, "cuModuleLoadData", NULL);
	cu.function = probe_sym(lib, "cuModuleGetFunction", NULL);
	cu.alloc = probe_sym(lib, "cuMemAlloc_v2", "cuMemAlloc");
	cu.launch = probe_sym(lib, "cuLaunchKernel", NULL);
	cu.sync = probe_sym(lib, "cuCtxSynchronize", NULL);
	cu.copy = probe_sym(lib, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
	cu.error = probe_sym(lib, "cuGetErrorString", NULL);
	r = cu.init(0);
	if (r == 0)
		r = cu.count(&count);
	if (r == PROBE_NO_DEVICE || (r == 0 && count == 0)) {
		printf("devices 0\n");
		fprintf(stderr, "cuda_probe: no CUDA device: %s\n", r ? probe_err(r) : "none");
		return 1;
	}
	if (r != 0) {
		fprintf(stderr, "cuda_probe: cuInit: %s (%d)\n", probe_err(r), r);
		return 3;
	}
	printf("devices %d\n", count);
	for (int i = 0; i < count && ret == 0; i++)
		ret = probe_device(i);
	return ret;
}
