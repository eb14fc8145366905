/* sign.h - ECDSA P-256/P-384/P-521 keys, DSSE envelopes and OpenSSF model signing (OMS
 * 1.0) statements: what `fgpack keygen`, `sign` and `verify-sig` are made of.
 *
 * A signature file is a Sigstore bundle (JSON) as written by the OMS
 * `model_signing` key mode:
 *   {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
 *    "verificationMaterial": {"publicKey": {"hint": <key fingerprint>}, "tlogEntries": []},
 *    "dsseEnvelope": {"payload": b64(statement), "payloadType": "application/vnd.in-toto+json",
 *                     "signatures": [{"keyid": "", "sig": b64(DER ECDSA over PAE)}]}}
 * ECDSA hashes with SHA-256 on P-256, SHA-384 on P-384, SHA-512 on P-521, as
 * model_signing does. A bare DSSE envelope {"payload","payloadType","signatures"} is accepted too.
 * The key fingerprint is the sha256 (hex) of the public key's PEM
 * SubjectPublicKeyInfo text, as OMS computes its hint. The statement format
 * is in docs/formats/signing.md. Verification checks the signature before it
 * parses the payload, and fails closed: anything not proven is an error. */
#ifndef FG_SIGN_H
#define FG_SIGN_H

#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "sha256.h"

#define FG_SIGN_BUNDLE_MEDIA_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define FG_SIGN_PAYLOAD_TYPE "application/vnd.in-toto+json"
#define FG_SIGN_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define FG_SIGN_OMS_PREDICATE "https://model_signing/signature/v1.0"

struct fg_sign_key; /* opaque: a P-256/384/521 private key, or only a public key */

/* A fresh P-256 key pair. */
int fg_sign_keygen(struct fg_sign_key **out, struct fg_err *err);
/* Loads a PEM private key (PKCS#8 or SEC1 "EC PRIVATE KEY", as `openssl
 * ecparam -name prime256v1 -genkey` writes, parameter blocks skipped) or a
 * PEM public key, or the same in DER (SubjectPublicKeyInfo, PKCS#8, SEC1), on
 * P-256, P-384 or P-521. Other curves and key types are
 * refused. */
int fg_sign_key_load(struct fg_sign_key **out, const char *path, struct fg_err *err);
void fg_sign_key_free(struct fg_sign_key *k);
int fg_sign_key_is_private(const struct fg_sign_key *k);
/* PEM texts: private (PKCS#8; FG_EINVAL for a public-only key) and public (SPKI). */
int fg_sign_key_private_pem(struct fg_buf *out, const struct fg_sign_key *k, struct fg_err *err);
int fg_sign_key_public_pem(struct fg_buf *out, const struct fg_sign_key *k, struct fg_err *err);
/* sha256 hex of the public PEM text (the OMS "hint"). */
int fg_sign_key_fingerprint(char out[FG_SHA256_HEX_LEN + 1], const struct fg_sign_key *k,
			    struct fg_err *err);

/* DSSE pre-authentication encoding: "DSSEv1 <len> <type> <len> <body>". */
int fg_dsse_pae(struct fg_buf *out, const char *type, const void *body, size_t len,
		struct fg_err *err);

/* Signs payload (payload_type) with k and appends the bundle JSON text. */
int fg_sign_bundle(struct fg_buf *out, const struct fg_sign_key *k, const char *payload_type,
		   const void *payload, size_t len, struct fg_err *err);

/* Reads a bundle or bare envelope (text), checks the signature with k and
 * only then returns the payload (appended to payload) and its type (to
 * payload_type). When no signature verifies and the payload is a statement
 * in a model_signing format before OMS 1.0 (fg_oms_check_format), which
 * fgpack cannot check, that is the error (FG_EUNSUPPORTED) rather than a
 * changed envelope. hint_out (may be NULL) gets the bundle's key hint, lowercase,
 * or "" (also when the hint is no fingerprint; 64 hex digits in either case
 * are one).
 * FG_EMISMATCH with the reason when the key hint is a fingerprint (64 hex) of
 * another key or the signature does not verify (a hint in another form is
 * not checked: the signature decides); FG_EFORMAT when the text is no
 * envelope. */
int fg_sign_open(struct fg_buf *payload, struct fg_buf *payload_type,
		 char hint_out[FG_SHA256_HEX_LEN + 1], const char *text, size_t len,
		 const struct fg_sign_key *k, struct fg_err *err);

/* The largest file taken for an in-toto statement: `fgpack sign` signs a
 * bigger one as a model, and verify-sig takes none for the statement file a
 * signature signs. */
#define FG_SIGN_STATEMENT_MAX ((size_t)64 << 20)

/* 1 when text (len bytes, at most FG_SIGN_STATEMENT_MAX) is an in-toto
 * Statement v1: a JSON object whose _type is FG_SIGN_STATEMENT_TYPE; else 0. */
int fg_sign_is_statement(const char *text, size_t len);

/* Appends s to b as a one-line message shows it: as it is when every byte
 * is printable (UTF-8 passes) and quote is 0, else as a JSON string
 * literal, so a newline or an escape sequence in a signed name cannot break
 * the line or reach a terminal; cut after 128 bytes (never inside a valid
 * UTF-8 character, "…" after it). DEL and the C1 controls (U+0080..
 * U+009F: U+009B is a CSI to some terminals) count as control characters
 * and are escaped too (\u007f, \u0080..\u009f), unlike in fgpack's JSON
 * files; so is any byte that is not part of valid UTF-8 (a lone 0x80..0x9f,
 * a truncated or overlong sequence), as \xNN, the name quoted for it. */
int fg_sign_shown(struct fg_buf *b, const char *s, int quote, struct fg_err *err);

/* Where a signature for path goes by default: "<path>.sig" (trailing '/'
 * removed). */
int fg_sign_default_path(struct fg_buf *out, const char *path, struct fg_err *err);

/* The key hint of a signature file without verifying anything: a key
 * fingerprint (64 hex, either case, handed on lowercase), or "" when there is
 * none or it is no fingerprint. */
int fg_sign_peek_hint(char out[FG_SHA256_HEX_LEN + 1], const char *text, size_t len,
		      struct fg_err *err);

/* ---- OpenSSF model signing 1.0 statements -------------------------------- */

struct fg_oms_file {
	char *name;                          /* path relative to the model root, '/'-separated */
	char sha256[FG_SHA256_HEX_LEN + 1];
	unsigned long long size;
};

struct fg_oms_model {
	char *name;              /* model name (the subject name) */
	struct fg_oms_file *files; /* hashed: sorted by name bytes; parsed: in the signed order */
	size_t n;
	char root[FG_SHA256_HEX_LEN + 1]; /* sha256 over the raw per-file digests, in order */
	/* parsed: predicate.serialization.ignore_paths as signed, which a
	 * verifier skips when it hashes the folder again (model_signing does);
	 * has_serialization is 0 when the statement carried no serialization
	 * block (then the fg_oms_ignore defaults apply). hashed: the paths
	 * skipped, which fg_oms_statement writes as ignore_paths */
	char **ignore;
	size_t n_ignore;
	int has_serialization;
	/* serialization.allow_symlinks: parsed as signed; hashed: links were
	 * followed (fg_oms_hash_ignoring's FG_OMS_LINKS_FOLLOW) */
	int allow_symlinks;
};

/* Files that a folder's signature never covers (OMS defaults). */
extern const char *const fg_oms_ignore[];
extern const size_t fg_oms_n_ignore;

/* How fg_oms_hash_ignoring treats symbolic links (serialization.allow_symlinks). */
enum fg_oms_links {
	/* allow_symlinks false, verifying: any link is refused (FG_EUNSUPPORTED),
	 * the line saying the signature does not cover links */
	FG_OMS_LINKS_REFUSE = 0,
	/* allow_symlinks true: hashed through, as model_signing does */
	FG_OMS_LINKS_FOLLOW = 1,
	/* allow_symlinks false, signing: any link is refused (FG_EUNSUPPORTED),
	 * the line naming `fgpack sign --allow-symlinks` */
	FG_OMS_LINKS_REFUSE_SIGNING = 2,
};

/* Hashes a model: a folder (every regular file below it, sorted by path
 * bytes; the fg_oms_ignore names are skipped at the top level, as OMS does;
 * symbolic links and special files are refused) or a single file (one
 * resource named by its base name). name NULL = the base name of path. */
int fg_oms_hash(struct fg_oms_model **out, const char *path, const char *name, struct fg_err *err);
/* fg_oms_hash skipping the n given paths (relative to the folder, each with
 * everything below it) instead of fg_oms_ignore. links FG_OMS_LINKS_FOLLOW
 * hashes through symbolic links as model_signing does with allow_symlinks: a
 * link to a file is that file's bytes under the link's name (wherever it
 * points, the folder or outside); a link to a folder is not descended into
 * (model_signing's walk, pathlib's glob("**"), does not); a link to nothing
 * or to a special file is an error; path may itself be a link. A FIFO,
 * socket or device (path itself or below it) is refused by name, never
 * opened (fg_oms_refuse_special). Otherwise
 * every link is refused, path too (enum fg_oms_links says with which line):
 * a single file is opened with O_NOFOLLOW and checked on the open fd, so a
 * file swapped for a link after the lstat is refused, not followed. */
int fg_oms_hash_ignoring(struct fg_oms_model **out, const char *path, const char *name,
			 const char *const *ignore, size_t n_ignore, enum fg_oms_links links,
			 struct fg_err *err);
void fg_oms_model_free(struct fg_oms_model *m);

/* What a file of that st_mode is, as a message names it: "a FIFO", "a
 * socket", "a character device", ... */
const char *fg_oms_kind(unsigned int mode);
/* FG_EUNSUPPORTED, one line naming path and its kind: only regular files
 * and folders are signed (a FIFO, socket or device is named, never read). */
int fg_oms_refuse_special(const char *path, unsigned int mode, struct fg_err *err);
/* path opened for reading without waiting on a FIFO (O_NONBLOCK, O_NOCTTY;
 * O_NOFOLLOW unless links are followed, a link then refused with the
 * --allow-symlinks hint) and checked by the open fd's fstat into *sb: *fd a
 * regular file's, else -1 and one line (fg_oms_refuse_special). */
struct stat;
int fg_oms_open_regular(const char *path, enum fg_oms_links links, int *fd, struct stat *sb,
			struct fg_err *err);

/* When file (which need not exist yet: a signature about to be written) lies
 * below the folder dir, appends its path relative to dir ('/'-separated) to
 * rel; appends nothing when it does not, or dir is no folder. Symbolic links
 * in the folders on either path are resolved, so "m/sig.json",
 * "./m/../m/sig.json" and an absolute path name the same file of "m". */
int fg_oms_rel_inside(struct fg_buf *rel, const char *dir, const char *file, struct fg_err *err);

/* The in-toto Statement text for m (canonical JSON). */
int fg_oms_statement(struct fg_buf *out, const struct fg_oms_model *m, struct fg_err *err);

/* Parses a verified OMS statement into *out (files in the order signed,
 * which the root digest follows), checking that the subject's digest equals
 * the digest over the resources and that no name repeats. The serialization
 * block's ignore_paths are kept (each a safe relative path), and its
 * allow_symlinks (a JSON boolean, else FG_EFORMAT); a method other than
 * "files" or a hash_type other than "sha256" is FG_EUNSUPPORTED. */
int fg_oms_parse(struct fg_oms_model **out, const char *text, size_t len, struct fg_err *err);

/* 0 unless predicate_type names another model_signing format than OMS 1.0
 * (https://model_signing/...: model_signing 0.x's Digests/v0.1 and its
 * kin, which model_signing 1.x still reads through a compatibility path,
 * its "pae_compat" signature among them): FG_EUNSUPPORTED, saying that
 * format is not supported and that OMS 1.0 is. */
int fg_oms_check_format(const char *predicate_type, struct fg_err *err);

/* Compares a signed model with one hashed from disk. FG_EMISMATCH naming the
 * first file that differs, is missing, or is not covered. */
int fg_oms_compare(const struct fg_oms_model *signed_m, const struct fg_oms_model *disk,
		   struct fg_err *err);

#endif
