/* test_golden_device.c - fg_golden_device_compare: which device identity
 * fields make a "device class" (docs/formats/bundle.md) and which are
 * identity only; transcripts from before the split-out fields. */
#include <string.h>

#include "buf.h"
#include "engine/golden.h"
#include "json.h"
#include "tap.h"

static cJSON *js(const char *text)
{
	cJSON *j = NULL;

	fg_json_parse(&j, text, strlen(text), "test", NULL);
	return j;
}

/* same class?, and the differences ("" when none) */
static int cmp(const char *a, const char *b, char *diffs, size_t cap)
{
	cJSON *ja = js(a), *jb = js(b);
	struct fg_buf d = FG_BUF_INIT;
	int same = -1;

	if (ja && jb && fg_golden_device_compare(&same, &d, ja, jb, NULL))
		same = -2;
	snprintf(diffs, cap, "%s", d.len ? d.data : "");
	fg_buf_release(&d);
	cJSON_Delete(ja);
	cJSON_Delete(jb);
	return same;
}

#define OLD_H200 "{\"kind\": \"cuda\", \"gpu\": \"NVIDIA H200 (sm_90, 132 SMs, 150 GB)\", \"engine_build\": \"0c1db33\"}"
#define NEW_H200(drv, sms) \
	"{\"kind\": \"cuda\", \"gpu\": \"NVIDIA H200 (sm_90, " sms " SMs, 150 GB)\", \"gpu_name\": \"NVIDIA H200\", " \
	"\"compute_capability\": \"9.0\", \"sm_count\": " sms ", \"memory_bytes\": 150000000000, "             \
	"\"driver_version\": \"" drv "\", \"cuda_driver_api\": \"13.0\", \"cuda_runtime\": \"13.0\", "        \
	"\"engine_build\": \"abc1234\"}"

int main(void)
{
	char d[1024];

	is_int(cmp(NEW_H200("580.159.04", "132"), NEW_H200("580.159.04", "132"), d, sizeof(d)), 1,
	       "identical identities: same class");
	is_str(d, "", "... and no differences");
	is_int(cmp(NEW_H200("580.159.04", "132"), NEW_H200("590.10.01", "132"), d, sizeof(d)), 1,
	       "another driver version: still the same class");
	is_str(d, "driver_version: 580.159.04 -> 590.10.01", "... the driver difference is reported");
	is_int(cmp(NEW_H200("580.159.04", "132"), NEW_H200("unknown", "132"), d, sizeof(d)), 1,
	       "driver unknown (no NVML): still the same class");
	is_int(cmp(NEW_H200("580.159.04", "132"), NEW_H200("580.159.04", "114"), d, sizeof(d)), 0,
	       "another SM count (a cut-down part): another class");
	ok(strstr(d, "sm_count: 132 -> 114") != NULL, "... named: %s", d);
	is_int(cmp(OLD_H200, NEW_H200("580.159.04", "132"), d, sizeof(d)), 1,
	       "an old transcript's \"gpu\" string gives name, sm_90 and SMs: same class");
	ok(strstr(d, "driver_version: (not recorded) -> 580.159.04") != NULL &&
		   strstr(d, "engine_build: 0c1db33 -> abc1234") != NULL && !strstr(d, "gpu_name"),
	   "... identity differences only: %s", d);
	is_int(cmp(OLD_H200,
		   "{\"kind\": \"cuda\", \"gpu_name\": \"NVIDIA A10G\", \"compute_capability\": \"8.6\", "
		   "\"sm_count\": 80}", d, sizeof(d)), 0, "an A10G is another class");
	ok(strstr(d, "gpu_name: NVIDIA H200 -> NVIDIA A10G") && strstr(d, "compute_capability: 9.0 -> 8.6"),
	   "... named: %s", d);
	is_int(cmp(OLD_H200, "{\"kind\": \"cpu\", \"cpu\": \"AMD EPYC\", \"arch\": \"x86_64\"}", d, sizeof(d)),
	       0, "cuda against cpu: another class");
	ok(!strncmp(d, "kind: cuda -> cpu", 17), "... kind named first: %s", d);
	is_int(cmp("{\"kind\": \"cpu\", \"cpu\": \"AMD EPYC 7R13\", \"arch\": \"x86_64\", \"engine_build\": \"a\"}",
		   "{\"kind\": \"cpu\", \"cpu\": \"Intel Xeon\", \"arch\": \"x86_64\", \"engine_build\": \"a\"}", d,
		   sizeof(d)), 1, "CPU: another CPU model, same arch: same class (no AVX2 dependence)");
	is_str(d, "cpu: AMD EPYC 7R13 -> Intel Xeon", "... the model is identity");
	is_int(cmp("{\"kind\": \"cpu\", \"arch\": \"x86_64\"}", "{\"kind\": \"cpu\", \"arch\": \"aarch64\"}", d,
		   sizeof(d)), 0, "CPU: another arch: another class");
	is_int(cmp("{}", "{}", d, sizeof(d)), 0, "no kind recorded: never the same class");
	return tap_done();
}
