/* fuzz_golden.c - fuzz target for golden transcripts as fgpack verify reads
 * them from a bundle: a transcript is replayed (fg_golden_replay) on the
 * tiny model tests/fixtures/oracle/bf16 (CPU, from the working directory or
 * $FG_TOP), and its device identity compared with a CPU's and a GPU's
 * (fg_golden_device_compare). A replay either fails with a one-line message
 * or reports a level, a first difference inside the transcript and the steps
 * it compared; the comparison never fails but for memory, and a device is
 * always the same class as itself when it says what it is. Transcripts that
 * ask for more than 16 steps are only compared, to keep runs short. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine/engine.h"
#include "engine/golden.h"
#include "json.h"

static struct fg_engine *eng;
static cJSON *cpu, *gpu;

static void setup(void)
{
	const char *top = getenv("FG_TOP");
	char path[4096];
	struct fg_engine_opts o;
	struct fg_err err = { 0, "" };

	memset(&o, 0, sizeof(o));
	o.max_seq = 64;
	snprintf(path, sizeof(path), "%s/tests/fixtures/oracle/bf16", top ? top : ".");
	if (fg_engine_load(&eng, path, &o, &err) ||
	    fg_json_parse(&cpu, "{\"kind\": \"cpu\", \"arch\": \"x86_64\", \"cpu\": \"fuzz\"}", 48, "cpu", &err) ||
	    fg_json_parse(&gpu, "{\"kind\": \"cuda\", \"gpu\": \"NVIDIA H200 (sm_90, 132 SMs, 150 GB)\"}", 64,
			  "gpu", &err)) {
		fprintf(stderr, "fuzz_golden: cannot load %s: %s\n", path, err.msg);
		abort();
	}
}

static void compare(const cJSON *recorded, const cJSON *here)
{
	struct fg_buf diffs = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	int same = -1;

	if (fg_golden_device_compare(&same, &diffs, recorded, here, &err) || (same != 0 && same != 1))
		abort();
	fg_buf_release(&diffs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *t = NULL;
	const cJSON *dev, *p;
	struct fg_err err = { 0, "" };
	struct fg_golden_result res;
	long long max_new = 0;
	int n_prompts = 0, same = -1;

	if (!eng)
		setup();
	if (fg_json_parse(&t, (const char *)data, size, "transcript.json", &err))
		return 0;
	dev = fg_json_obj(t, "device");
	compare(dev, cpu);
	compare(dev, gpu);
	compare(cpu, dev);
	if (fg_json_str(dev, "kind") &&
	    (fg_golden_device_compare(&same, NULL, dev, dev, &err) || !same))
		abort();
	cJSON_ArrayForEach(p, fg_json_arr(t, "prompts"))
		n_prompts++;
	if (fg_json_int(t, "max_new", &max_new) || max_new <= 16 || n_prompts == 0) {
		fg_engine_reset(eng);
		if (fg_golden_replay(&res, eng, t, &err)) {
			if (!err.msg[0] || strchr(err.msg, '\n'))
				abort();
		} else {
			if (res.level < FG_GOLDEN_MISMATCH || res.level > FG_GOLDEN_LOGITS ||
			    res.steps > (size_t)max_new * (size_t)n_prompts)
				abort();
			if ((res.level == FG_GOLDEN_MISMATCH) !=
			    (res.prompt >= 0 && res.prompt < n_prompts && res.step >= 0 && res.step < max_new))
				abort();
			/* the first chain difference is kept when a token differs later */
			if ((res.level == FG_GOLDEN_TOKENS && (res.chain_prompt < 0 || res.chain_step < 0)) ||
			    (res.level == FG_GOLDEN_LOGITS && (res.chain_prompt >= 0 || res.chain_step >= 0)))
				abort();
		}
	}
	cJSON_Delete(t);
	return 0;
}
