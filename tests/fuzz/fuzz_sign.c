/* fuzz_sign.c - fuzz target for signature files (fgpack verify-sig reads
 * them from whoever made the bundle) and key files. The first byte picks:
 * 0: the input is a signature bundle or bare DSSE envelope, opened with a
 * fixed P-256 key (the one written below, made for this target only; the
 * corpus's signatures are by it) and its hint peeked; 1: the input is a
 * payload signed with that key, then opened again, whole and with one byte
 * changed; 2: the input is a PEM key file. Contract: a refusal is one line
 * with no payload; a signature opens only if it verifies, giving back the
 * payload signed and its type, and a changed byte never gives another
 * payload; a key hint handed back is a fingerprint (64 hex) or ""; a key
 * that loads has a fingerprint and a public PEM. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "sign.h"

static const char key_pem[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgXutmIb3ZpdM/72kv\n"
	"Un795xLLNeBktF+2P1vWW0R4OSOhRANCAARMIqMFLKmmjx2yZCiwvR1p33+FNmNh\n"
	"zhv5KFiKZwgcatg7uynR0On4qOs5TR2OhBA+fG331Yid7voeyaZL2KJe\n"
	"-----END PRIVATE KEY-----\n";

static struct fg_sign_key *key;
static char dir[4096];

static void put(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f))
		abort();
}

/* the private folder goes when the run ends (make test replays every time) */
static void cleanup(void)
{
	fg_rm_tree(dir);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char path[4200];

	snprintf(dir, sizeof(dir), "%s/fuzz_sign.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(dir) || atexit(cleanup))
		abort();
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	put(path, key_pem, strlen(key_pem));
	if (fg_sign_key_load(&key, path, NULL))
		abort();
	unlink(path);
}

static void one_line(const struct fg_err *err)
{
	if (!err->msg[0] || strchr(err->msg, '\n'))
		abort();
}

/* Opens text; 0 with the payload and type, or the refusal checked. */
static int open_sig(struct fg_buf *pl, struct fg_buf *pt, const char *text, size_t len)
{
	char hint[FG_SHA256_HEX_LEN + 1];
	struct fg_err err = { 0, "" };
	int rc = fg_sign_open(pl, pt, hint, text, len, key, &err);

	if (hint[0] && !fg_sha256_hex_valid(hint))
		abort();
	if (rc) {
		one_line(&err);
		if (pl->len)
			abort();
	}
	memset(&err, 0, sizeof(err));
	if (fg_sign_peek_hint(hint, text, len, &err))
		one_line(&err);
	else if (hint[0] && !fg_sha256_hex_valid(hint))
		abort();
	return rc;
}

static void roundtrip(const uint8_t *data, size_t size)
{
	struct fg_buf sig = FG_BUF_INIT, pl = FG_BUF_INIT, pt = FG_BUF_INIT;
	struct fg_err err = { 0, "" };
	size_t at;

	if (fg_sign_bundle(&sig, key, FG_SIGN_PAYLOAD_TYPE, data, size, &err))
		abort();
	if (open_sig(&pl, &pt, sig.data, sig.len) || pl.len != size || (size && memcmp(pl.data, data, size)) ||
	    pt.len != strlen(FG_SIGN_PAYLOAD_TYPE) || memcmp(pt.data, FG_SIGN_PAYLOAD_TYPE, pt.len))
		abort();
	/* one byte of the signature file changed, where the payload says */
	at = size ? (data[0] | (size > 1 ? data[1] << 8 : 0)) % sig.len : 0;
	sig.data[at] ^= size > 2 && data[2] ? data[2] : 1;
	fg_buf_reset(&pl);
	fg_buf_reset(&pt);
	if (!open_sig(&pl, &pt, sig.data, sig.len) &&
	    (pl.len != size || (size && memcmp(pl.data, data, size))))
		abort();
	fg_buf_release(&sig);
	fg_buf_release(&pl);
	fg_buf_release(&pt);
}

static void key_file(const uint8_t *data, size_t size)
{
	struct fg_sign_key *k = NULL;
	struct fg_err err = { 0, "" };
	struct fg_buf pem = FG_BUF_INIT;
	char path[4200], fp[FG_SHA256_HEX_LEN + 1];

	snprintf(path, sizeof(path), "%s/in.pem", dir);
	put(path, data, size);
	if (fg_sign_key_load(&k, path, &err)) {
		one_line(&err);
		if (k)
			abort();
	} else if (fg_sign_key_fingerprint(fp, k, NULL) || fg_sign_key_public_pem(&pem, k, NULL) ||
		   strlen(fp) != FG_SHA256_HEX_LEN) {
		abort();
	}
	fg_buf_release(&pem);
	fg_sign_key_free(k);
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_buf pl = FG_BUF_INIT, pt = FG_BUF_INIT;

	if (!key)
		setup();
	if (size < 1)
		return 0;
	if (data[0] % 3 == 0)
		open_sig(&pl, &pt, (const char *)data + 1, size - 1);
	else if (data[0] % 3 == 1)
		roundtrip(data + 1, size - 1);
	else
		key_file(data + 1, size - 1);
	fg_buf_release(&pl);
	fg_buf_release(&pt);
	return 0;
}
