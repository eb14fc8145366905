/* sign.c - ECDSA P-256/384/521 keys (libcrypto), DSSE envelopes in Sigstore bundles,
 * and OpenSSF model signing 1.0 statements (hashing, writing, parsing,
 * comparing). Layout of the files: docs/formats/signing.md. */
#include "sign.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ecdsa.h>
#include <openssl/pem.h>

#include "fsutil.h"
#include "json.h"
#include "utf8.h"
#include "workq.h"

#define SIG_FILE_MAX ((size_t)64 << 20)

struct fg_sign_key {
	EVP_PKEY *pk;
	int priv;
};

const char *const fg_oms_ignore[] = { "model.sig", ".git", ".gitattributes", ".github", ".gitignore" };
const size_t fg_oms_n_ignore = sizeof(fg_oms_ignore) / sizeof(fg_oms_ignore[0]);

static int ossl_fail(struct fg_err *err, int code, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return fg_err_set(err, code, "%s%s%s", what, e ? ": " : "", e ? buf : "");
}

/* ---- keys ---------------------------------------------------------------- */

/* The curves OMS key mode accepts (model_signing's sign_ec_key.py), each with
 * the hash it signs with: P-384 signs SHA-384 and P-521 SHA-512, so a
 * verifier that always hashed SHA-256 would refuse their signatures. */
static const struct {
	const char *name, *alias;
	const EVP_MD *(*md)(void);
} curves[] = {
	{ "prime256v1", "P-256", EVP_sha256 },
	{ "secp384r1", "P-384", EVP_sha384 },
	{ "secp521r1", "P-521", EVP_sha512 },
};

static int curve_of(EVP_PKEY *pk, struct fg_err *err)
{
	char name[64];
	size_t nl = 0, i;

	if (EVP_PKEY_get_base_id(pk) != EVP_PKEY_EC)
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "not an elliptic-curve key (ECDSA P-256, P-384 or P-521 wanted)");
	if (EVP_PKEY_get_group_name(pk, name, sizeof(name), &nl) == 1)
		for (i = 0; i < sizeof(curves) / sizeof(curves[0]); i++)
			if (!strcmp(name, curves[i].name) || !strcmp(name, curves[i].alias))
				return (int)i;
	return fg_err_set(err, FG_EUNSUPPORTED, "key is on curve %s, not P-256, P-384 or P-521",
			  nl ? name : "(unknown)");
}

/* The digest ECDSA uses with k's curve (checked when the key was loaded). */
static const EVP_MD *key_md(const struct fg_sign_key *k)
{
	int c = curve_of(k->pk, NULL);

	return c < 0 ? EVP_sha256() : curves[c].md();
}

int fg_sign_keygen(struct fg_sign_key **out, struct fg_err *err)
{
	struct fg_sign_key *k = calloc(1, sizeof(*k));

	*out = NULL;
	if (!k)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	k->pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!k->pk) {
		free(k);
		return ossl_fail(err, FG_EIO, "generate P-256 key");
	}
	k->priv = 1;
	*out = k;
	return 0;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1; /* encrypted keys are refused, never prompted for */
}

int fg_sign_key_load(struct fg_sign_key **out, const char *path, struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT;
	struct fg_sign_key *k;
	BIO *bio;
	int rc, der, enc;

	*out = NULL;
	if ((rc = fg_file_read(path, (size_t)1 << 20, &text, err)))
		return rc;
	/* DER starts with a SEQUENCE tag: `openssl pkey -outform DER` and
	 * model_signing's verifier take keys that way too */
	der = text.len > 1 && (unsigned char)text.data[0] == 0x30;
	if (!text.data || (!der && !strstr(text.data, "-----BEGIN "))) {
		fg_buf_release(&text);
		return fg_err_set(err, FG_EFORMAT, "%s: not a PEM or DER key", path);
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		fg_buf_release(&text);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	bio = BIO_new_mem_buf(text.data, (int)text.len);
	if (bio && der) {
		const unsigned char *p = (const unsigned char *)text.data;

		/* SubjectPublicKeyInfo first, else a private key: PKCS#8 or SEC1
		 * ECPrivateKey, which d2i_AutoPrivateKey tells apart */
		k->pk = d2i_PUBKEY(NULL, &p, (long)text.len);
		if (!k->pk) {
			ERR_clear_error();
			p = (const unsigned char *)text.data;
			k->pk = d2i_AutoPrivateKey(NULL, &p, (long)text.len);
			k->priv = k->pk != NULL;
		}
	} else if (bio && strstr(text.data, "PRIVATE KEY-----")) {
		k->pk = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
		k->priv = k->pk != NULL;
	} else if (bio) {
		k->pk = PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL);
	}
	BIO_free(bio);
	/* PKCS#8 "ENCRYPTED PRIVATE KEY" or an OpenSSL-encrypted SEC1 key: say
	 * so and how to fix it, instead of libcrypto's "interrupted or
	 * cancelled" from the refused passphrase prompt */
	enc = !der && text.data && (strstr(text.data, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
				    strstr(text.data, "Proc-Type: 4,ENCRYPTED"));
	if (text.data)
		memset(text.data, 0, text.len);
	fg_buf_release(&text);
	if (!k->pk) {
		free(k);
		if (enc) {
			ERR_clear_error();
			return fg_err_set(err, FG_EUNSUPPORTED,
					  "%s: the private key is encrypted; fgpack reads unencrypted keys "
					  "only (decrypt a copy: openssl pkey -in KEY -out PLAIN.pem)",
					  path);
		}
		rc = ossl_fail(err, FG_EFORMAT, "cannot read the key");
		fg_err_wrap(err, "%s", path);
		return rc;
	}
	if ((rc = curve_of(k->pk, err)) < 0) {
		fg_sign_key_free(k);
		fg_err_wrap(err, "%s", path);
		return rc;
	}
	*out = k;
	return 0;
}

void fg_sign_key_free(struct fg_sign_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pk);
	free(k);
}

int fg_sign_key_is_private(const struct fg_sign_key *k)
{
	return k && k->priv;
}

static int bio_take(struct fg_buf *out, BIO *bio, struct fg_err *err)
{
	char *p = NULL;
	long n = BIO_get_mem_data(bio, &p);

	return n > 0 ? fg_buf_append(out, p, (size_t)n, err) : fg_err_set(err, FG_EIO, "empty PEM");
}

int fg_sign_key_private_pem(struct fg_buf *out, const struct fg_sign_key *k, struct fg_err *err)
{
	BIO *bio;
	int rc;

	if (!k->priv)
		return fg_err_set(err, FG_EINVAL, "a public key cannot sign");
	bio = BIO_new(BIO_s_mem());
	if (!bio || PEM_write_bio_PrivateKey(bio, k->pk, NULL, NULL, 0, NULL, NULL) != 1)
		rc = ossl_fail(err, FG_EIO, "write private key");
	else
		rc = bio_take(out, bio, err);
	BIO_free(bio);
	return rc;
}

int fg_sign_key_public_pem(struct fg_buf *out, const struct fg_sign_key *k, struct fg_err *err)
{
	BIO *bio = BIO_new(BIO_s_mem());
	int rc;

	if (!bio || PEM_write_bio_PUBKEY(bio, k->pk) != 1)
		rc = ossl_fail(err, FG_EIO, "write public key");
	else
		rc = bio_take(out, bio, err);
	BIO_free(bio);
	return rc;
}

int fg_sign_key_fingerprint(char out[FG_SHA256_HEX_LEN + 1], const struct fg_sign_key *k,
			    struct fg_err *err)
{
	struct fg_buf pem = FG_BUF_INIT;
	uint8_t d[32];
	int rc = fg_sign_key_public_pem(&pem, k, err);

	if (!rc)
		rc = fg_sha256_mem(pem.data, pem.len, d, err);
	fg_buf_release(&pem);
	if (!rc)
		fg_hex_encode(d, 32, out);
	return rc;
}

/* ---- base64 and DSSE ----------------------------------------------------- */

static int b64_encode(struct fg_buf *out, const void *data, size_t len, struct fg_err *err)
{
	size_t need;
	unsigned char *tmp;
	int n, rc;

	if (len > ((size_t)1 << 30))
		return fg_err_set(err, FG_EINVAL, "too large to encode");
	need = 4 * ((len + 2) / 3) + 1;
	tmp = malloc(need);
	if (!tmp)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	n = EVP_EncodeBlock(tmp, data, (int)len);
	rc = fg_buf_append(out, tmp, (size_t)n, err);
	free(tmp);
	return rc;
}

/* Standard or URL-safe, with or without padding. */
static int b64_decode(struct fg_buf *out, const char *s, size_t len, struct fg_err *err)
{
	struct fg_buf norm = FG_BUF_INIT;
	unsigned char *tmp;
	size_t i, pad = 0;
	int n, rc = 0;

	for (i = 0; i < len && !rc; i++) {
		char c = s[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (c == '\n' || c == '\r')
			continue;
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			   c == '+' || c == '/' || c == '='))
			rc = fg_err_set(err, FG_EFORMAT, "bad base64");
		if (!rc)
			rc = fg_buf_putc(&norm, c, err);
	}
	while (!rc && norm.len % 4)
		rc = fg_buf_putc(&norm, '=', err);
	if (rc) {
		fg_buf_release(&norm);
		return rc;
	}
	for (i = norm.len; i > 0 && norm.data[i - 1] == '='; i--)
		pad++;
	if (pad > 2 || (norm.len && memchr(norm.data, '=', norm.len - pad))) {
		fg_buf_release(&norm);
		return fg_err_set(err, FG_EFORMAT, "bad base64 padding");
	}
	tmp = malloc(norm.len / 4 * 3 + 1);
	if (!tmp) {
		fg_buf_release(&norm);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	n = norm.len ? EVP_DecodeBlock(tmp, (unsigned char *)norm.data, (int)norm.len) : 0;
	if (n < 0 || (size_t)n < pad)
		rc = fg_err_set(err, FG_EFORMAT, "bad base64");
	else
		rc = fg_buf_append(out, tmp, (size_t)n - pad, err);
	free(tmp);
	fg_buf_release(&norm);
	return rc;
}

int fg_dsse_pae(struct fg_buf *out, const char *type, const void *body, size_t len,
		struct fg_err *err)
{
	int rc = fg_buf_printf(out, err, "DSSEv1 %zu %s %zu ", strlen(type), type, len);

	return rc ? rc : fg_buf_append(out, body, len, err);
}

int fg_sign_bundle(struct fg_buf *out, const struct fg_sign_key *k, const char *payload_type,
		   const void *payload, size_t len, struct fg_err *err)
{
	struct fg_buf pae = FG_BUF_INIT, b64 = FG_BUF_INIT, sigb64 = FG_BUF_INIT;
	unsigned char sig[160]; /* DER ECDSA: at most 139 bytes on P-521 */
	size_t siglen = sizeof(sig);
	char fp[FG_SHA256_HEX_LEN + 1];
	EVP_MD_CTX *ctx = NULL;
	cJSON *doc = NULL, *vm, *env, *sigs, *s;
	int rc;

	if (!k->priv)
		return fg_err_set(err, FG_EINVAL, "signing needs a private key");
	if ((rc = fg_dsse_pae(&pae, payload_type, payload, len, err)) ||
	    (rc = fg_sign_key_fingerprint(fp, k, err)))
		goto out;
	ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestSignInit(ctx, NULL, key_md(k), NULL, k->pk) != 1 ||
	    EVP_DigestSign(ctx, sig, &siglen, (unsigned char *)pae.data, pae.len) != 1) {
		rc = ossl_fail(err, FG_EIO, "ECDSA sign");
		goto out;
	}
	if ((rc = b64_encode(&b64, payload, len, err)) || (rc = b64_encode(&sigb64, sig, siglen, err)))
		goto out;
	doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "mediaType", FG_SIGN_BUNDLE_MEDIA_TYPE);
	vm = cJSON_AddObjectToObject(doc, "verificationMaterial");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(vm, "publicKey"), "hint", fp);
	cJSON_AddArrayToObject(vm, "tlogEntries");
	env = cJSON_AddObjectToObject(doc, "dsseEnvelope");
	cJSON_AddStringToObject(env, "payload", b64.data ? b64.data : "");
	cJSON_AddStringToObject(env, "payloadType", payload_type);
	sigs = cJSON_AddArrayToObject(env, "signatures");
	s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "keyid", "");
	cJSON_AddStringToObject(s, "sig", sigb64.data);
	cJSON_AddItemToArray(sigs, s);
	rc = fg_json_write(out, doc, 1, err);
out:
	cJSON_Delete(doc);
	EVP_MD_CTX_free(ctx);
	fg_buf_release(&pae);
	fg_buf_release(&b64);
	fg_buf_release(&sigb64);
	return rc;
}

static const cJSON *envelope_of(const cJSON *doc, const char **hint)
{
	const cJSON *env = fg_json_obj(doc, "dsseEnvelope");
	const cJSON *pkey = fg_json_obj(fg_json_obj(doc, "verificationMaterial"), "publicKey");

	*hint = fg_json_str(pkey, "hint");
	return env ? env : doc;
}

/* The length of the control character at s (k bytes left): 1 for C0 or
 * DEL, 2 for C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F; U+009B is a CSI to
 * some terminals), else 0. */
static size_t control_at(const char *s, size_t k)
{
	unsigned char c = (unsigned char)s[0], d = k > 1 ? (unsigned char)s[1] : 0;

	if (c < 0x20 || c == 0x7f)
		return 1;
	return c == 0xc2 && d >= 0x80 && d <= 0x9f ? 2 : 0;
}

static const char *short_escape(unsigned char c)
{
	switch (c) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	case '\b': return "\\b";
	case '\f': return "\\f";
	}
	return NULL;
}

/* How fg_sign_shown shows the character at s (k bytes left): as it is
 * (SHOWN_AS_IS, valid UTF-8 that is no control character), as \u00XX
 * (SHOWN_CONTROL: C0, DEL, C1) or, one byte that starts no valid UTF-8
 * sequence (a lone 0x80..0x9f, a truncated or overlong sequence), as \xNN
 * (SHOWN_BYTE): a terminal reading latin-1 or 8-bit controls would take
 * such a byte as C1. Returns its length in bytes. */
enum { SHOWN_AS_IS, SHOWN_CONTROL, SHOWN_BYTE };

static size_t shown_char(const char *s, size_t k, int *how)
{
	size_t w = control_at(s, k);

	*how = SHOWN_CONTROL;
	if (w)
		return w;
	*how = SHOWN_AS_IS;
	if ((w = fg_utf8_len((const unsigned char *)s, k, NULL)))
		return w;
	*how = SHOWN_BYTE;
	return 1;
}

/* s[0..k) as a JSON string literal, as fg_buf_json_str writes it but with
 * DEL and C1 escaped too (\u007f, \u0080..\u009f), and each byte that is
 * not valid UTF-8 as \xNN (no JSON string can hold it): what a terminal is
 * shown, while fgpack's JSON files keep those characters as they are. */
static int shown_quoted(struct fg_buf *b, const char *s, size_t k, struct fg_err *err)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0, start = 0;
	int rc = fg_buf_putc(b, '"', err);

	while (!rc && i < k) {
		int how;
		size_t w = shown_char(s + i, k - i, &how);
		const char *e = how != SHOWN_BYTE ? short_escape((unsigned char)s[i]) : NULL;

		if (how == SHOWN_AS_IS && !e) {
			i += w;
			continue;
		}
		rc = fg_buf_append(b, s + start, i - start, err);
		if (!rc && e) {
			rc = fg_buf_puts(b, e, err);
		} else if (!rc) {
			unsigned char c = (unsigned char)s[i + w - 1]; /* C1: its second byte */
			char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			char x[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

			rc = how == SHOWN_BYTE ? fg_buf_append(b, x, sizeof(x), err)
					       : fg_buf_append(b, u, sizeof(u), err);
		}
		i += w;
		start = i;
	}
	if (!rc)
		rc = fg_buf_append(b, s + start, i - start, err);
	return rc ? rc : fg_buf_putc(b, '"', err);
}

int fg_sign_shown(struct fg_buf *b, const char *s, int quote, struct fg_err *err)
{
	size_t n = strlen(s), k = 0, i;
	int rc, how;

	/* cut after 128 bytes, never inside a valid character (a byte that is
	 * none counts alone) */
	while (k < n) {
		size_t w = shown_char(s + k, n - k, &how);

		if (k + w > 128)
			break;
		k += w;
	}
	for (i = 0; i < k && !quote;) {
		i += shown_char(s + i, k - i, &how);
		quote = how != SHOWN_AS_IS;
	}
	rc = quote ? shown_quoted(b, s, k, err) : fg_buf_append(b, s, k, err);
	return rc || k == n ? rc : fg_buf_puts(b, "…", err);
}

int fg_sign_is_statement(const char *text, size_t len)
{
	cJSON *doc = NULL;
	const char *t;
	int yes;

	if (!len || len > FG_SIGN_STATEMENT_MAX || text[0] != '{' ||
	    fg_json_parse(&doc, text, len, "statement", NULL))
		return 0;
	t = fg_json_str(doc, "_type");
	yes = t && !strcmp(t, FG_SIGN_STATEMENT_TYPE);
	cJSON_Delete(doc);
	return yes;
}

int fg_sign_default_path(struct fg_buf *out, const char *path, struct fg_err *err)
{
	size_t n = strlen(path);
	int rc;

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (!n)
		return fg_err_set(err, FG_EINVAL, "empty path");
	rc = fg_buf_append(out, path, n, err);
	return rc ? rc : fg_buf_puts(out, ".sig", err);
}

/* A key hint that is a fingerprint (64 hex digits, either case: hex names the
 * same bytes in both) goes to out in lowercase, the form fingerprints are
 * compared and shown in; 0 (out "") when hint is none or no fingerprint. */
static int hint_fingerprint(char out[FG_SHA256_HEX_LEN + 1], const char *hint)
{
	size_t i;

	out[0] = 0;
	if (!hint || strlen(hint) != FG_SHA256_HEX_LEN)
		return 0;
	for (i = 0; i < FG_SHA256_HEX_LEN; i++) {
		int v = fg_hex_value(hint[i]);

		if (v < 0) {
			out[0] = 0;
			return 0;
		}
		out[i] = "0123456789abcdef"[v];
	}
	out[FG_SHA256_HEX_LEN] = 0;
	return 1;
}

int fg_sign_peek_hint(char out[FG_SHA256_HEX_LEN + 1], const char *text, size_t len,
		      struct fg_err *err)
{
	cJSON *doc = NULL;
	const char *hint = NULL;
	int rc = fg_json_parse(&doc, text, len, "signature", err);

	out[0] = 0;
	if (rc)
		return rc;
	envelope_of(doc, &hint);
	/* a key fingerprint or nothing: any other text would be shown as who
	 * signed (fgpack audit's signed_by) */
	hint_fingerprint(out, hint);
	cJSON_Delete(doc);
	return 0;
}

/* sig as DER: as given, or converted from the fixed-width r||s form (IEEE
 * P1363, what WebCrypto, JOSE and PKCS#11 signers produce) when it has
 * exactly that size for k's curve. Sigstore writes DER, but DSSE leaves the
 * encoding to the signer, and both say the same (r, s). */
static int ecdsa_der(struct fg_buf *out, const struct fg_sign_key *k, const struct fg_buf *sig)
{
	size_t w = ((size_t)EVP_PKEY_get_bits(k->pk) + 7) / 8;
	ECDSA_SIG *es;
	BIGNUM *r, *s;
	unsigned char *der = NULL;
	int n = -1;

	if (!w || sig->len != 2 * w)
		return -1;
	es = ECDSA_SIG_new();
	r = BN_bin2bn((const unsigned char *)sig->data, (int)w, NULL);
	s = BN_bin2bn((const unsigned char *)sig->data + w, (int)w, NULL);
	if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
		r = s = NULL; /* es owns them now */
		n = i2d_ECDSA_SIG(es, &der);
	}
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(es);
	if (n > 0 && fg_buf_append(out, der, (size_t)n, NULL))
		n = -1;
	OPENSSL_free(der);
	return n > 0 ? 0 : -1;
}

static int ecdsa_verify(const struct fg_sign_key *k, const struct fg_buf *sig, const struct fg_buf *pae)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int good = ctx && EVP_DigestVerifyInit(ctx, NULL, key_md(k), NULL, k->pk) == 1 &&
		   EVP_DigestVerify(ctx, (unsigned char *)sig->data, sig->len,
				    (unsigned char *)pae->data, pae->len) == 1;

	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return good;
}

int fg_sign_open(struct fg_buf *payload, struct fg_buf *payload_type,
		 char hint_out[FG_SHA256_HEX_LEN + 1], const char *text, size_t len,
		 const struct fg_sign_key *k, struct fg_err *err)
{
	cJSON *doc = NULL;
	const cJSON *env, *sigs, *s;
	const char *hint = NULL, *p64, *ptype;
	struct fg_buf body = FG_BUF_INIT, pae = FG_BUF_INIT, sig = FG_BUF_INIT, der = FG_BUF_INIT;
	char fp[FG_SHA256_HEX_LEN + 1], hex[FG_SHA256_HEX_LEN + 1];
	int rc, good = 0, tried = 0, is_fp;

	if (hint_out)
		hint_out[0] = 0;
	if ((rc = fg_json_parse(&doc, text, len, "signature", err)))
		return rc;
	env = envelope_of(doc, &hint);
	p64 = fg_json_str(env, "payload");
	ptype = fg_json_str(env, "payloadType");
	sigs = fg_json_arr(env, "signatures");
	if (!p64 || !ptype || !sigs) {
		rc = fg_err_set(err, FG_EFORMAT, "signature: not a DSSE envelope or Sigstore bundle");
		goto out;
	}
	is_fp = hint_fingerprint(hex, hint);
	if (is_fp && hint_out)
		memcpy(hint_out, hex, sizeof(hex));
	if ((rc = fg_sign_key_fingerprint(fp, k, err)))
		goto out;
	/* the hint is unsigned, only a hint (DSSE): one in the hex form OMS
	 * writes (in either case) that names another key is refused by name, as
	 * model_signing does; a hint in another form (other Sigstore signers
	 * write base64 of the DER key's sha256) is left to the signature */
	if (is_fp && strcmp(hex, fp)) {
		rc = fg_err_set(err, FG_EMISMATCH, "signed by key %.16s…, not by the given key %.16s…",
				hex, fp);
		goto out;
	}
	if ((rc = b64_decode(&body, p64, strlen(p64), err))) {
		/* a payload no signature can cover: the envelope was changed (a
		 * verification failure, exit 3, not a malformed request) */
		fg_err_wrap(err, "signature payload");
		rc = FG_EMISMATCH;
		if (err)
			err->code = rc;
		goto out;
	}
	if ((rc = fg_dsse_pae(&pae, ptype, body.data ? body.data : "", body.len, err)))
		goto out;
	cJSON_ArrayForEach(s, sigs)
	{
		const char *sb = fg_json_str(s, "sig");

		fg_buf_reset(&sig);
		if (!sb || b64_decode(&sig, sb, strlen(sb), NULL) || !sig.len)
			continue;
		tried++;
		fg_buf_reset(&der);
		if (ecdsa_verify(k, &sig, &pae) ||
		    (!ecdsa_der(&der, k, &sig) && ecdsa_verify(k, &der, &pae))) {
			good = 1;
			break;
		}
	}
	if (!good) {
		/* a model_signing 0.x signature (its "pae_compat" signs another
		 * text than the PAE) fails here: the unverified payload only
		 * chooses which failure to report, never lets anything pass */
		cJSON *st = NULL;

		if (!fg_json_parse(&st, body.data ? body.data : "", body.len, "payload", NULL) &&
		    (rc = fg_oms_check_format(fg_json_str(st, "predicateType"), err))) {
			cJSON_Delete(st);
			goto out;
		}
		cJSON_Delete(st);
		rc = fg_err_set(err, FG_EMISMATCH,
				tried ? "signature does not verify with key %.16s…: the envelope was "
					"changed or another key signed it"
				      : "signature: no signature in the envelope (key %.16s…)",
				fp);
		goto out;
	}
	if ((rc = fg_buf_append(payload, body.data ? body.data : "", body.len, err)) ||
	    (rc = fg_buf_puts(payload_type, ptype, err)))
		goto out;
out:
	cJSON_Delete(doc);
	fg_buf_release(&der);
	fg_buf_release(&body);
	fg_buf_release(&pae);
	fg_buf_release(&sig);
	return rc;
}

/* ---- OMS model hashing and statements ------------------------------------ */

void fg_oms_model_free(struct fg_oms_model *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n; i++)
		free(m->files[i].name);
	for (i = 0; i < m->n_ignore; i++)
		free(m->ignore[i]);
	free(m->ignore);
	free(m->files);
	free(m->name);
	free(m);
}

struct flist {
	struct fg_oms_file *v;
	size_t n, cap;
};

static int flist_add(struct flist *l, const char *name, struct fg_err *err)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 32;
		void *p = realloc(l->v, nc * sizeof(*l->v));

		if (!p)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		l->v = p;
		l->cap = nc;
	}
	memset(&l->v[l->n], 0, sizeof(l->v[0]));
	if (!(l->v[l->n].name = strdup(name)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	l->n++;
	return 0;
}

struct ignore_list {
	const char *const *v;
	size_t n;
	enum fg_oms_links links; /* follow links or refuse them (fg_oms_hash_ignoring) */
};

/* rel is checked at every level of the walk, so an ignored folder (".git",
 * or "sub/cache" from a signed ignore_paths) is skipped with all below it. */
static int ignored(const struct ignore_list *ign, const char *rel)
{
	size_t i;

	for (i = 0; i < ign->n; i++)
		if (!strcmp(rel, ign->v[i]))
			return 1;
	return 0;
}

/* A symbolic link refused (allow_symlinks false): the line says what covers
 * it, the option when signing, the signature's setting when verifying. */
static int refuse_link(const char *full, enum fg_oms_links links, struct fg_err *err)
{
	if (links == FG_OMS_LINKS_REFUSE_SIGNING)
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "%s: a symbolic link; fgpack sign --allow-symlinks signs links (a link "
				  "to a file as that file, as model_signing --allow_symlinks does)",
				  full);
	return fg_err_set(err, FG_EUNSUPPORTED,
			  "%s: a symbolic link, which a signature with allow_symlinks false does not cover",
			  full);
}

const char *fg_oms_kind(unsigned int mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	case S_IFDIR: return "a folder";
	case S_IFREG: return "a regular file";
	}
	return "a special file";
}

int fg_oms_refuse_special(const char *path, unsigned int mode, struct fg_err *err)
{
	return fg_err_set(err, FG_EUNSUPPORTED, "%s: %s; only regular files and folders are signed",
			  path, fg_oms_kind(mode));
}

/* A name verify-sig would refuse (fg_path_is_safe_rel: a control character
 * or a backslash in it), refused before anything is hashed: a signature of
 * it could never be verified. */
static int refuse_unverifiable(const char *rel, struct fg_err *err)
{
	struct fg_buf show = FG_BUF_INIT;
	int rc = fg_sign_shown(&show, rel, 1, err);

	if (!rc)
		rc = fg_err_set(err, FG_EUNSUPPORTED,
				"%s: a file name with a control character or a backslash is not signed "
				"(verify-sig refuses such names)",
				show.data);
	fg_buf_release(&show);
	return rc;
}

/* A symbolic link met with allow_symlinks, as model_signing treats it: a
 * link to a file is hashed as that file under the link's name; a link to a
 * folder is passed over, since its walk (pathlib's glob("**")) lists the
 * link but does not descend into it, so nothing below is signed. */
static int walk_link(struct flist *l, const char *full, const char *rel, struct fg_err *err)
{
	struct stat sb;

	if (stat(full, &sb))
		return fg_err_set(err, FG_EIO, "%s: a symbolic link to nothing usable (%s)", full,
				  strerror(errno));
	if (S_ISREG(sb.st_mode))
		return flist_add(l, rel, err);
	if (S_ISDIR(sb.st_mode))
		return 0;
	return fg_err_set(err, FG_EUNSUPPORTED,
			  "%s: a symbolic link to %s; only regular files and folders are signed", full,
			  fg_oms_kind(sb.st_mode));
}

/* An entry of the walk that is a link (found so by fstatat, or by the open
 * of what fstatat called a folder: swapped since), as the links setting
 * says: followed as walk_link, or refused. */
static int walk_entry_link(struct flist *l, const char *full, const char *rel,
			   const struct ignore_list *ign, struct fg_err *err)
{
	return ign->links == FG_OMS_LINKS_FOLLOW ? walk_link(l, full, rel, err)
						 : refuse_link(full, ign->links, err);
}

/* Lists the folder open as fd (root/rel; fd is closed here). Each entry is
 * looked at relative to fd, and a sub-folder opened relative to it with
 * O_NOFOLLOW, so no link below root is followed: a folder swapped for a
 * link after its fstatat is refused as a link, not walked through. */
static int walk(struct flist *l, int fd, const char *root, const char *rel,
		const struct ignore_list *ign, struct fg_err *err)
{
	DIR *d = fdopendir(fd);
	struct fg_buf sub = FG_BUF_INIT, full = FG_BUF_INIT;
	int rc = 0;

	if (!d) {
		rc = fg_err_set(err, FG_EIO, "read folder %s%s%s: %s", root, *rel ? "/" : "", rel,
				strerror(errno));
		close(fd);
		return rc;
	}
	while (!rc) {
		struct dirent *e;
		struct stat sb;
		const char *nm;
		int sfd;

		errno = 0;
		if (!(e = readdir(d))) {
			if (errno)
				rc = fg_err_set(err, FG_EIO, "read folder %s%s%s: %s", root,
						*rel ? "/" : "", rel, strerror(errno));
			break;
		}
		nm = e->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		fg_buf_reset(&sub);
		fg_buf_reset(&full);
		if ((rc = fg_buf_printf(&sub, err, "%s%s%s", rel, *rel ? "/" : "", nm)) ||
		    ignored(ign, sub.data) || (rc = fg_buf_printf(&full, err, "%s/%s", root, sub.data)))
			continue;
		if (fstatat(dirfd(d), nm, &sb, AT_SYMLINK_NOFOLLOW)) {
			rc = fg_err_set(err, FG_EIO, "stat %s: %s", full.data, strerror(errno));
		} else if (S_ISDIR(sb.st_mode)) {
			sfd = fg_openat_beneath(dirfd(d), nm, O_RDONLY | O_DIRECTORY, NULL);
			if (sfd >= 0)
				rc = walk(l, sfd, root, sub.data, ign, err);
			else if (errno == ELOOP)
				rc = walk_entry_link(l, full.data, sub.data, ign, err);
			else
				rc = fg_err_set(err, FG_EIO, "read folder %s: %s", full.data,
						strerror(errno));
		} else if (S_ISREG(sb.st_mode)) {
			rc = flist_add(l, sub.data, err);
		} else if (S_ISLNK(sb.st_mode)) {
			rc = walk_entry_link(l, full.data, sub.data, ign, err);
		} else {
			/* named from the fstatat, never opened: a FIFO's open
			 * would wait for a writer */
			rc = fg_oms_refuse_special(full.data, sb.st_mode, err);
		}
	}
	closedir(d);
	fg_buf_release(&sub);
	fg_buf_release(&full);
	return rc;
}

/* model_signing's order: its resources are sorted as PurePosixPath values,
 * component by component, so "a/b" precedes "a-b" and "a.txt" although '-'
 * and '.' are below '/' as bytes. Comparing bytes with '/' taken as below
 * every other byte gives that order (and a name precedes the folder of the
 * same name's files), and Python compares code points, which UTF-8 bytes
 * keep. The root digest follows the order, so a plain byte sort would give
 * another subject digest than model_signing for the same folder. */
static int path_cmp(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;

	for (; *x && *x == *y; x++, y++)
		;
	if (*x == *y)
		return 0;
	if (!*x || !*y)
		return *x ? 1 : -1;
	if (*x == '/' || *y == '/')
		return *x == '/' ? -1 : 1;
	return *x < *y ? -1 : 1;
}

static int file_cmp(const void *a, const void *b)
{
	return path_cmp(((const struct fg_oms_file *)a)->name, ((const struct fg_oms_file *)b)->name);
}

static int root_digest(struct fg_oms_model *m, struct fg_err *err)
{
	struct fg_sha256 *h;
	uint8_t d[32];
	size_t i;
	int rc = fg_sha256_new(&h, err);

	for (i = 0; !rc && i < m->n; i++) {
		if (fg_hex_decode(m->files[i].sha256, d, 32))
			rc = fg_err_set(err, FG_EFORMAT, "%s: bad digest", m->files[i].name);
		else
			rc = fg_sha256_update(h, d, 32, err);
	}
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	fg_sha256_free(h);
	if (!rc)
		fg_hex_encode(d, 32, m->root);
	return rc;
}

static const char *base_of(const char *path, struct fg_buf *tmp)
{
	size_t n = strlen(path);
	const char *s;

	while (n > 1 && path[n - 1] == '/')
		n--;
	fg_buf_reset(tmp);
	if (fg_buf_append(tmp, path, n, NULL))
		return path;
	s = strrchr(tmp->data, '/');
	return s && s[1] ? s + 1 : tmp->data;
}

/* Every file of l (names relative to dir, open as dfd) hashed, on as many
 * threads as there are CPUs online (at most 8), two files per thread where
 * our SHA-NI code runs (fg_sha256_files); the first failure in name order
 * is returned. Unless links are followed each file is opened below dfd
 * following no link on the way (fg_sha256_files_at): a file or folder
 * swapped for a link since the walk is refused as the walk refuses it. */
static int hash_files(struct flist *l, int dfd, const char *dir, enum fg_oms_links links,
		      struct fg_err *err)
{
	int follow = links == FG_OMS_LINKS_FOLLOW;
	const char **p = calloc(l->n, sizeof(*p));
	struct fg_sha256_result *res = calloc(l->n, sizeof(*res));
	struct fg_buf b = FG_BUF_INIT;
	size_t i;
	int rc = !p || !res ? fg_err_set(err, FG_ENOMEM, "out of memory") : 0;

	for (i = 0; !rc && i < l->n; i++) {
		fg_buf_reset(&b);
		rc = fg_buf_printf(&b, err, "%s/%s", dir, l->v[i].name);
		if (!rc && !(p[i] = strdup(b.data)))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	/* with allow_symlinks, a file turned into a FIFO is still refused
	 * without waiting on its open */
	if (!rc && follow)
		rc = fg_sha256_files(p, l->n, fg_workq_cpus(8), FG_SHA256_FILES, res, err);
	else if (!rc)
		rc = fg_sha256_files_at(dfd, strlen(dir) + 1, p, l->n, fg_workq_cpus(8),
					FG_SHA256_REGULAR, res, err);
	for (i = 0; !rc && i < l->n; i++) {
		if (res[i].rc && res[i].link_len) {
			fg_buf_reset(&b);
			rc = fg_buf_append(&b, p[i], res[i].link_len, err);
			if (!rc)
				rc = refuse_link(b.data, links, err);
			break;
		}
		if (res[i].rc) {
			rc = res[i].rc;
			if (err)
				*err = res[i].err;
			break;
		}
		l->v[i].size = res[i].size;
		fg_hex_encode(res[i].digest, 32, l->v[i].sha256);
	}
	for (i = 0; p && i < l->n; i++)
		free((char *)p[i]);
	free(p);
	free(res);
	fg_buf_release(&b);
	return rc;
}

int fg_oms_open_regular(const char *path, enum fg_oms_links links, int *fd, struct stat *sb, struct fg_err *err)
{
	int follow = links == FG_OMS_LINKS_FOLLOW, f, rc = 0;

	*fd = -1;
	f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
	if (f < 0 && !follow && errno == ELOOP)
		return refuse_link(path, links, err);
	if (f < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open %s: %s", path,
				  strerror(errno));
	if (fstat(f, sb))
		rc = fg_err_set(err, FG_EIO, "stat %s: %s", path, strerror(errno));
	else if (!S_ISREG(sb->st_mode))
		rc = fg_oms_refuse_special(path, sb->st_mode, err);
	if (rc)
		close(f);
	else
		*fd = f;
	return rc;
}

/* A model that is one file, hashed as l's only entry (name). Unless links
 * are followed it is opened with O_NOFOLLOW and checked on the open fd, so
 * the file checked is the file read: one swapped for a link after the lstat
 * is refused as a link, not followed. O_NONBLOCK: a FIFO put there cannot
 * hang the open (it is refused as no regular file). */
static int hash_single(struct flist *l, const char *path, const char *name,
		       enum fg_oms_links links, struct fg_err *err)
{
	const size_t chunk = 256 << 10;
	struct fg_sha256 *h = NULL;
	struct stat sb;
	uint8_t d[32];
	char *buf = NULL;
	int fd, rc;

	if ((rc = fg_oms_open_regular(path, links, &fd, &sb, err)))
		return rc;
	if (!(buf = malloc(chunk)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	else
		rc = flist_add(l, name, err);
	if (!rc)
		rc = fg_sha256_new(&h, err);
	if (!rc)
		rc = fg_sha256_fd(h, fd, buf, chunk, -1, &l->v[0].size, path, err);
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	if (!rc)
		fg_hex_encode(d, 32, l->v[0].sha256);
	fg_sha256_free(h);
	free(buf);
	close(fd);
	return rc;
}

int fg_oms_hash(struct fg_oms_model **out, const char *path, const char *name, struct fg_err *err)
{
	return fg_oms_hash_ignoring(out, path, name, fg_oms_ignore, fg_oms_n_ignore,
				    FG_OMS_LINKS_REFUSE, err);
}

int fg_oms_hash_ignoring(struct fg_oms_model **out, const char *path, const char *name,
			 const char *const *ignore, size_t n_ignore, enum fg_oms_links links,
			 struct fg_err *err)
{
	struct ignore_list ign = { ignore, n_ignore, links };
	int follow = links == FG_OMS_LINKS_FOLLOW;
	struct fg_oms_model *m = calloc(1, sizeof(*m));
	struct flist l = { 0 };
	struct fg_buf tmp = FG_BUF_INIT;
	struct stat sb;
	int rc = 0, dfd = -1, wfd;

	*out = NULL;
	if (!m)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	m->name = strdup(name ? name : base_of(path, &tmp));
	if (!m->name || (n_ignore && !(m->ignore = calloc(n_ignore, sizeof(*m->ignore))))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	/* what was skipped is what the statement says a verifier skips */
	m->has_serialization = 1;
	m->allow_symlinks = follow;
	for (; m->n_ignore < n_ignore; m->n_ignore++)
		if (!(m->ignore[m->n_ignore] = strdup(ignore[m->n_ignore]))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	if (follow ? stat(path, &sb) : lstat(path, &sb)) {
		rc = fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(sb.st_mode)) {
		/* held open from the walk to the hashing: both look below it
		 * only, the folder itself swapped since stays the one walked */
		dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
		if (dfd < 0 && !follow && (errno == ELOOP || errno == ENOTDIR) && !lstat(path, &sb) &&
		    S_ISLNK(sb.st_mode))
			rc = refuse_link(path, links, err);
		else if (dfd < 0)
			rc = fg_err_set(err, FG_EIO, "read folder %s: %s", path, strerror(errno));
		else if ((wfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) < 0)
			rc = fg_err_set(err, FG_EIO, "read folder %s: %s", path, strerror(errno));
		else
			rc = walk(&l, wfd, path, "", &ign, err);
		for (size_t i = 0; !rc && i < l.n; i++)
			if (!fg_path_is_safe_rel(l.v[i].name))
				rc = refuse_unverifiable(l.v[i].name, err);
		if (!rc && l.n)
			qsort(l.v, l.n, sizeof(l.v[0]), file_cmp);
		if (!rc && l.n)
			rc = hash_files(&l, dfd, path, links, err);
	} else if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
		/* a FIFO or device is named, never opened */
		rc = fg_oms_refuse_special(path, sb.st_mode, err);
	} else {
		/* a link (not followed) is refused by the open, which is the
		 * check that counts: the lstat only picks folder or file */
		const char *base = base_of(path, &tmp);

		rc = fg_path_is_safe_rel(base) ? hash_single(&l, path, base, links, err)
					       : refuse_unverifiable(base, err);
	}
	m->files = l.v;
	m->n = l.n;
	l.v = NULL;
	if (!rc)
		rc = root_digest(m, err);
out:
	if (dfd >= 0)
		close(dfd);
	fg_buf_release(&tmp);
	if (rc)
		fg_oms_model_free(m);
	else
		*out = m;
	return rc;
}

int fg_oms_rel_inside(struct fg_buf *rel, const char *dir, const char *file, struct fg_err *err)
{
	struct fg_buf parent = FG_BUF_INIT;
	char *rd = NULL, *rp = NULL;
	const char *base = strrchr(file, '/');
	struct stat sb;
	size_t n;
	int rc = 0;

	base = base ? base + 1 : file;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || stat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return 0;
	if ((rc = fg_path_dir(file, &parent, err)))
		return rc;
	rd = realpath(dir, NULL);
	rp = realpath(parent.data, NULL);
	if (rd && rp) {
		n = strlen(rd);
		if (n == 1) /* the folder is "/" */
			n = 0;
		if (!strncmp(rp, rd, n) && (rp[n] == '/' || !rp[n])) {
			const char *sub = rp + n + (rp[n] == '/'); /* the parent below dir */

			if (*sub && !(rc = fg_buf_puts(rel, sub, err)))
				rc = fg_buf_putc(rel, '/', err);
			if (!rc)
				rc = fg_buf_puts(rel, base, err);
		}
	}
	free(rd);
	free(rp);
	fg_buf_release(&parent);
	return rc;
}

int fg_oms_statement(struct fg_buf *out, const struct fg_oms_model *m, struct fg_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *subj, *s, *pred, *ser, *ign, *res;
	size_t i;
	int rc;

	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_AddStringToObject(doc, "_type", FG_SIGN_STATEMENT_TYPE);
	subj = cJSON_AddArrayToObject(doc, "subject");
	s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "name", m->name);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(s, "digest"), "sha256", m->root);
	cJSON_AddItemToArray(subj, s);
	cJSON_AddStringToObject(doc, "predicateType", FG_SIGN_OMS_PREDICATE);
	pred = cJSON_AddObjectToObject(doc, "predicate");
	ser = cJSON_AddObjectToObject(pred, "serialization");
	cJSON_AddStringToObject(ser, "method", "files");
	cJSON_AddStringToObject(ser, "hash_type", "sha256");
	cJSON_AddBoolToObject(ser, "allow_symlinks", m->allow_symlinks);
	ign = cJSON_AddArrayToObject(ser, "ignore_paths");
	if (m->has_serialization)
		for (i = 0; i < m->n_ignore; i++)
			cJSON_AddItemToArray(ign, cJSON_CreateString(m->ignore[i]));
	else
		for (i = 0; i < fg_oms_n_ignore; i++)
			cJSON_AddItemToArray(ign, cJSON_CreateString(fg_oms_ignore[i]));
	res = cJSON_AddArrayToObject(pred, "resources");
	for (i = 0; i < m->n; i++) {
		cJSON *r = cJSON_CreateObject();

		cJSON_AddStringToObject(r, "name", m->files[i].name);
		cJSON_AddStringToObject(r, "algorithm", "sha256");
		cJSON_AddStringToObject(r, "digest", m->files[i].sha256);
		cJSON_AddItemToArray(res, r);
	}
	rc = fg_json_write(out, doc, 1, err);
	cJSON_Delete(doc);
	return rc;
}

/* predicate.serialization as model_signing writes it: {method, hash_type,
 * allow_symlinks, ignore_paths[, shard_size]}. model_signing's verifier
 * hashes the folder again with these settings, skipping the signed
 * ignore_paths (which the signer chose: --ignore-paths, or git files kept),
 * so fgpack must too or it calls such files extra or missing. */
static int parse_serialization(struct fg_oms_model *m, const cJSON *ser, struct fg_err *err)
{
	const cJSON *ign, *p;
	const char *method, *ht;
	size_t n;

	if (!ser)
		return 0;
	m->has_serialization = 1;
	method = fg_json_str(ser, "method");
	ht = fg_json_str(ser, "hash_type");
	if (method && strcmp(method, "files"))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "signed statement: serialization method %s is not supported (only files)",
				  method);
	if (ht && strcmp(ht, "sha256"))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "signed statement: hash type %s is not supported (only sha256)", ht);
	/* true: the verifier hashes through links, as the signer did */
	p = cJSON_GetObjectItemCaseSensitive(ser, "allow_symlinks");
	if (p && !cJSON_IsBool(p))
		return fg_err_set(err, FG_EFORMAT, "signed statement: allow_symlinks is not true or false");
	m->allow_symlinks = cJSON_IsTrue(p);
	ign = fg_json_arr(ser, "ignore_paths");
	n = (size_t)cJSON_GetArraySize(ign);
	if (!n)
		return 0;
	if (!(m->ignore = calloc(n, sizeof(*m->ignore))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(p, ign)
	{
		const char *s = cJSON_IsString(p) ? p->valuestring : NULL;
		size_t len = s ? strlen(s) : 0;

		/* model_signing writes them relative to the model, '/'-separated;
		 * a trailing '/' names the same folder */
		while (len > 1 && s[len - 1] == '/')
			len--;
		if (!s || !(m->ignore[m->n_ignore] = strndup(s, len)))
			return s ? fg_err_set(err, FG_ENOMEM, "out of memory")
				 : fg_err_set(err, FG_EFORMAT, "signed statement: an ignore path is not a string");
		m->n_ignore++;
		if (!fg_path_is_safe_rel(m->ignore[m->n_ignore - 1]))
			return fg_err_set(err, FG_EFORMAT, "signed statement: bad ignore path %s", s);
	}
	return 0;
}

int fg_oms_parse(struct fg_oms_model **out, const char *text, size_t len, struct fg_err *err)
{
	cJSON *doc = NULL;
	const cJSON *subj, *s0, *res, *r;
	struct fg_oms_model *m;
	const char *t, *want;
	struct flist l = { 0 };
	size_t i;
	int rc;

	*out = NULL;
	if ((rc = fg_json_parse(&doc, text, len, "signed statement", err)))
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!(t = fg_json_str(doc, "_type")) || strcmp(t, FG_SIGN_STATEMENT_TYPE)) {
		rc = fg_err_set(err, FG_EFORMAT, "signed payload is not an in-toto Statement v1");
		goto out;
	}
	if (!(t = fg_json_str(doc, "predicateType")) || strcmp(t, FG_SIGN_OMS_PREDICATE)) {
		rc = fg_err_set(err, FG_EUNSUPPORTED, "signed statement has predicateType %s, not %s",
				t ? t : "(none)", FG_SIGN_OMS_PREDICATE);
		goto out;
	}
	subj = fg_json_arr(doc, "subject");
	s0 = cJSON_GetArrayItem(subj, 0);
	want = fg_json_str(fg_json_obj(s0, "digest"), "sha256");
	if (cJSON_GetArraySize(subj) != 1 || !fg_json_str(s0, "name") || !want ||
	    !fg_sha256_hex_valid(want)) {
		rc = fg_err_set(err, FG_EFORMAT, "signed statement: want one subject with a sha256");
		goto out;
	}
	m->name = strdup(fg_json_str(s0, "name"));
	if ((rc = parse_serialization(m, fg_json_obj(fg_json_obj(doc, "predicate"), "serialization"),
				      err)))
		goto out;
	res = fg_json_arr(fg_json_obj(doc, "predicate"), "resources");
	if (!res || !m->name) {
		rc = fg_err_set(err, FG_EFORMAT, "signed statement: no predicate.resources");
		goto out;
	}
	cJSON_ArrayForEach(r, res)
	{
		const char *nm = fg_json_str(r, "name"), *alg = fg_json_str(r, "algorithm");
		const char *dg = fg_json_str(r, "digest");

		if (!nm || !alg || !dg || strcmp(alg, "sha256") || !fg_sha256_hex_valid(dg) ||
		    !fg_path_is_safe_rel(nm)) {
			rc = fg_err_set(err, FG_EFORMAT, "signed statement: bad resource %s",
					nm ? nm : "(no name)");
			goto out;
		}
		if ((rc = flist_add(&l, nm, err)))
			goto out;
		memcpy(l.v[l.n - 1].sha256, dg, FG_SHA256_HEX_LEN + 1);
	}
	m->files = l.v;
	m->n = l.n;
	l.v = NULL;
	/* the root digest covers the resources in the order written */
	if ((rc = root_digest(m, err)))
		goto out;
	if (strcmp(m->root, want)) {
		rc = fg_err_set(err, FG_EMISMATCH,
				"signed statement is inconsistent: subject digest %.16s… but the resources "
				"hash to %.16s…",
				want, m->root);
		goto out;
	}
	/* files stay in the signed order (the root digest follows it); duplicates
	 * are found on a sorted copy */
	if (m->n > 1) {
		struct fg_oms_file *tmp = malloc(m->n * sizeof(*tmp));

		if (!tmp) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		memcpy(tmp, m->files, m->n * sizeof(*tmp));
		qsort(tmp, m->n, sizeof(tmp[0]), file_cmp);
		for (i = 1; i < m->n && !rc; i++)
			if (!strcmp(tmp[i].name, tmp[i - 1].name))
				rc = fg_err_set(err, FG_EFORMAT, "signed statement lists %s twice", tmp[i].name);
		free(tmp);
		if (rc)
			goto out;
	}
out:
	cJSON_Delete(doc);
	if (l.v) {
		for (i = 0; i < l.n; i++)
			free(l.v[i].name);
		free(l.v);
	}
	if (rc)
		fg_oms_model_free(m);
	else
		*out = m;
	return rc;
}

int fg_oms_check_format(const char *pt, struct fg_err *err)
{
	static const char ms[] = "https://model_signing/";
	struct fg_buf show = FG_BUF_INIT;
	int rc;

	if (!pt || strncmp(pt, ms, sizeof(ms) - 1) || !strcmp(pt, FG_SIGN_OMS_PREDICATE))
		return 0;
	/* pt may come from a payload no signature covered (fg_sign_open):
	 * quoted when it holds control characters */
	if (!(rc = fg_sign_shown(&show, pt, 0, err)))
		rc = fg_err_set(err, FG_EUNSUPPORTED,
				"signature format %s%s is not supported; fgpack verifies OpenSSF model "
				"signing 1.0 (%s, as model_signing 1.x writes): sign the model again with "
				"either",
				show.data, strstr(pt, "/v0.") ? " (model_signing 0.x)" : "",
				FG_SIGN_OMS_PREDICATE);
	fg_buf_release(&show);
	return rc;
}

static int file_ptr_cmp(const void *a, const void *b)
{
	return path_cmp((*(struct fg_oms_file *const *)a)->name, (*(struct fg_oms_file *const *)b)->name);
}

/* Pointers to m's files sorted by name (the caller frees the array). */
static struct fg_oms_file **sorted_files(const struct fg_oms_model *m)
{
	struct fg_oms_file **v = malloc((m->n ? m->n : 1) * sizeof(*v));
	size_t i;

	if (!v)
		return NULL;
	for (i = 0; i < m->n; i++)
		v[i] = &m->files[i];
	qsort(v, m->n, sizeof(*v), file_ptr_cmp);
	return v;
}

int fg_oms_compare(const struct fg_oms_model *sm, const struct fg_oms_model *dm, struct fg_err *err)
{
	struct fg_oms_file **s = sorted_files(sm), **d = sorted_files(dm);
	size_t i = 0, j = 0;
	int rc = 0;

	if (!s || !d)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	while (!rc && (i < sm->n || j < dm->n)) {
		int c = i == sm->n ? 1 : j == dm->n ? -1 : path_cmp(s[i]->name, d[j]->name);

		if (c < 0)
			rc = fg_err_set(err, FG_EMISMATCH, "%s: signed but missing", s[i]->name);
		else if (c > 0)
			rc = fg_err_set(err, FG_EMISMATCH, "%s: not covered by the signature (extra file)",
					d[j]->name);
		else if (strcmp(s[i]->sha256, d[j]->sha256))
			rc = fg_err_set(err, FG_EMISMATCH, "%s: content changed (sha256 %.16s…, signed %.16s…)",
					d[j]->name, d[j]->sha256, s[i]->sha256);
		i++;
		j++;
	}
	free(s);
	free(d);
	return rc;
}
