/* cmd_verify_sig.c - `fgpack verify-sig --key KEY PATH...`: checks signatures
 * made by `fgpack sign` (or OMS model_signing's key mode). Fails closed: a
 * signature that does not verify, another key, a changed, missing or extra
 * file, or a changed statement is a failure that names its reason (exit 3). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd.h"
#include "fsutil.h"
#include "json.h"
#include "sign.h"
#include "workq.h"

static const char usage_text[] =
	"usage: fgpack verify-sig --key KEY.pem [--sig SIG] PATH...\n"
	"\n"
	"Checks the signature of each PATH with KEY (a public key, or a private key whose\n"
	"public half is used). The signature is --sig SIG, else PATH.sig, else (for a\n"
	"folder) PATH/model.sig. For a model (folder, file, bundle) every file is hashed\n"
	"again and compared with the signed digests; for a signed in-toto statement the\n"
	"file must be byte-identical to what was signed, and its subjects are checked:\n"
	"every one in OUT_DIR for OUT_DIR.intoto.json beside a folder OUT_DIR (as bake\n"
	"writes it), else those found beside it; such a signature given for a folder,\n"
	"or for a file that is no statement (a bundle), does not cover it. A signature\n"
	"file inside the folder it signs is not taken for an extra file. Exit 0 when\n"
	"all verify, 3 when one does not (the reason is printed), 1 on other errors.\n";

static int find_sig(struct fg_buf *out, const char *path, const char *given, struct fg_err *err)
{
	struct stat sb;
	int rc;

	if (given)
		return fg_buf_puts(out, given, err);
	if ((rc = fg_sign_default_path(out, path, err)))
		return rc;
	if (access(out->data, R_OK) == 0)
		return 0;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		fg_buf_reset(out);
		if ((rc = fg_buf_printf(out, err, "%s/model.sig", path)))
			return rc;
		if (access(out->data, R_OK) == 0)
			return 0;
	}
	return fg_err_set(err, FG_EMISMATCH, "no signature found (looked for %s.sig%s)", path,
			  stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? " and model.sig inside" : "");
}

/* Where a statement's subjects lie: OUT_DIR for OUT_DIR.intoto.json when that
 * folder exists (fgpack bake names its outputs relative to it, and then a
 * subject missing there is a failure), else the statement's own folder
 * (subjects not there are not checked). */
static int subject_base(struct fg_buf *dir, const char *path, int *strict, struct fg_err *err)
{
	static const char suffix[] = ".intoto.json";
	size_t n = strlen(path), sl = sizeof(suffix) - 1;
	const char *slash;
	struct stat sb;
	int rc;

	*strict = 0;
	if (n > sl && !strcmp(path + n - sl, suffix) && path[n - sl - 1] != '/') {
		if ((rc = fg_buf_append(dir, path, n - sl, err)))
			return rc;
		if (stat(dir->data, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			*strict = 1;
			return 0;
		}
		fg_buf_reset(dir);
	}
	slash = strrchr(path, '/');
	if (!slash)
		return fg_buf_puts(dir, ".", err);
	return fg_buf_append(dir, path, slash == path ? 1 : (size_t)(slash - path), err);
}

/* The signature's statement (doc, verified) is not path, which is no in-toto
 * statement (a model file, a bundle): one line saying what the statement is,
 * its predicateType and its first three subjects' names, and that it does
 * not cover path. */
static int not_the_statement(const char *path, const cJSON *doc, struct fg_err *err)
{
	struct fg_buf what = FG_BUF_INIT;
	const char *pt = fg_json_str(doc, "predicateType");
	const cJSON *s;
	int rc, n = 0, total = cJSON_GetArraySize(fg_json_arr(doc, "subject"));

	rc = pt ? fg_sign_shown(&what, pt, 0, err) : fg_buf_puts(&what, "no predicateType", err);
	if (!rc)
		rc = fg_buf_puts(&what, total > 1 ? ", subjects " : total ? ", subject " : ", no subjects",
				 err);
	cJSON_ArrayForEach(s, fg_json_arr(doc, "subject"))
	{
		const char *nm = fg_json_str(s, "name");

		if (rc || n == 3)
			break;
		if (n++)
			rc = fg_buf_puts(&what, ", ", err);
		if (!rc)
			rc = nm ? fg_sign_shown(&what, nm, 1, err) : fg_buf_puts(&what, "(no name)", err);
	}
	if (!rc && total > n)
		rc = fg_buf_printf(&what, err, " and %d more", total - n);
	if (!rc)
		rc = fg_err_set(err, FG_EMISMATCH,
				"the signature's statement (%s) does not cover %s, which is no in-toto "
				"statement; verify-sig the statement file it signs instead",
				what.data, path);
	fg_buf_release(&what);
	return rc;
}

/* A signed statement file: byte-identical, and its subjects match where they
 * lie (subject_base). doc is the signed payload parsed. A file that is no
 * statement at all (a bundle, a model file) is said to be not covered,
 * rather than a changed statement. *checked: subjects hashed; *total:
 * subjects listed. */
static int verify_statement(const char *path, const struct fg_buf *payload, const cJSON *doc,
			    int *checked, int *total, struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT, dir = FG_BUF_INIT, f = FG_BUF_INIT;
	const cJSON *s;
	char **paths = NULL;
	const char **names = NULL, **wants = NULL;
	struct fg_sha256_result *res = NULL;
	struct stat sb;
	size_t n = 0, i;
	int rc, strict, fd;

	*checked = 0;
	*total = 0;
	/* a FIFO or device is named, not read (a FIFO's open would wait) */
	if ((rc = fg_oms_open_regular(path, FG_OMS_LINKS_FOLLOW, &fd, &sb, err)))
		return rc;
	if ((unsigned long long)sb.st_size > FG_SIGN_STATEMENT_MAX)
		/* a bundle of gigabytes is no statement: not read */
		rc = not_the_statement(path, doc, err);
	else
		rc = fg_fd_read(fd, path, FG_SIGN_STATEMENT_MAX, &text, err);
	close(fd);
	if (rc)
		return rc;
	if (text.len != payload->len || memcmp(text.data, payload->data, text.len)) {
		if (fg_sign_is_statement(text.data, text.len))
			rc = fg_err_set(err, FG_EMISMATCH, "the statement differs from the one signed");
		else
			rc = not_the_statement(path, doc, err);
		goto out;
	}
	if ((rc = subject_base(&dir, path, &strict, err)))
		goto out;
	/* the subjects present, hashed together on every core (two per thread
	 * on SHA-NI), then checked in the statement's order */
	n = (size_t)cJSON_GetArraySize(fg_json_arr(doc, "subject"));
	paths = calloc(n + 1, sizeof(*paths));
	names = calloc(n + 1, sizeof(*names));
	wants = calloc(n + 1, sizeof(*wants));
	res = calloc(n + 1, sizeof(*res));
	if (!paths || !names || !wants || !res) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	n = 0;
	cJSON_ArrayForEach(s, fg_json_arr(doc, "subject"))
	{
		const char *nm = fg_json_str(s, "name");
		const char *want = fg_json_str(fg_json_obj(s, "digest"), "sha256");

		(*total)++;
		if (!nm || !want || !fg_path_is_safe_rel(nm))
			continue;
		fg_buf_reset(&f);
		if ((rc = fg_buf_printf(&f, err, "%s/%s", dir.data, nm)))
			goto out;
		if (access(f.data, R_OK)) {
			if (!strict)
				continue;
			rc = fg_err_set(err, FG_EMISMATCH, "subject %s: signed but missing from %s", nm,
					dir.data);
			goto out;
		}
		if (!(paths[n] = strdup(f.data))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		names[n] = nm;
		wants[n++] = want;
	}
	/* a subject that is a FIFO is refused, not waited on */
	if (n && (rc = fg_sha256_files((const char *const *)paths, n, fg_workq_cpus(8),
				       FG_SHA256_FILES, res, err)))
		goto out;
	for (i = 0; i < n; i++) {
		char hex[65];

		if (res[i].rc) {
			rc = res[i].rc;
			*err = res[i].err;
			goto out;
		}
		fg_hex_encode(res[i].digest, 32, hex);
		if (strcmp(hex, wants[i])) {
			rc = fg_err_set(err, FG_EMISMATCH, "subject %s: content changed (sha256 %.16s…, signed %.16s…)",
					names[i], hex, wants[i]);
			goto out;
		}
		(*checked)++;
	}
out:
	for (i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
	free(names);
	free(wants);
	free(res);
	fg_buf_release(&text);
	fg_buf_release(&dir);
	fg_buf_release(&f);
	return rc;
}

/* 1 when the signed statement covers a file of that name. */
static int covers(const struct fg_oms_model *sm, const char *name)
{
	size_t i;

	for (i = 0; i < sm->n; i++)
		if (!strcmp(sm->files[i].name, name))
			return 1;
	return 0;
}

/* Hashes the model at path again, skipping what the signer skipped: the
 * statement's signed ignore_paths (model_signing's verifier does the same;
 * fgpack's defaults for a statement without a serialization block), plus
 * model.sig, where fgpack looks for the signature inside a folder, and the
 * signature file being checked when it lies inside the folder (sig_rel, ""
 * when not): a signature cannot cover itself. Either is skipped only when
 * the statement covers no file of that name. */
static int hash_as_signed(struct fg_oms_model **out, const char *path,
			  const struct fg_oms_model *sm, const char *sig_rel, struct fg_err *err)
{
	const char **ign;
	size_t i, n = 0, base = sm->has_serialization ? sm->n_ignore : fg_oms_n_ignore;
	int rc;

	if (!(ign = calloc(base + 2, sizeof(*ign))))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < base; i++)
		ign[n++] = sm->has_serialization ? sm->ignore[i] : fg_oms_ignore[i];
	if (sm->has_serialization && !covers(sm, "model.sig"))
		ign[n++] = "model.sig";
	if (*sig_rel && !covers(sm, sig_rel))
		ign[n++] = sig_rel;
	rc = fg_oms_hash_ignoring(out, path, sm->name, ign, n,
				  sm->allow_symlinks ? FG_OMS_LINKS_FOLLOW : FG_OMS_LINKS_REFUSE, err);
	free(ign);
	return rc;
}

/* A model signature given for a single file that it has no resource of
 * (file, the name the file is hashed under): one line naming what the
 * signature covers and the file, rather than "signed but missing" for the
 * one and "extra file" for the other. */
static int covers_another(const struct fg_oms_model *sm, const char *file, struct fg_err *err)
{
	struct fg_buf a = FG_BUF_INIT, b = FG_BUF_INIT;
	int rc;

	if (sm->n == 1)
		rc = fg_sign_shown(&a, sm->files[0].name, 1, err);
	else
		rc = fg_sign_shown(&a, sm->name, 1, err);
	if (!rc)
		rc = fg_sign_shown(&b, file, 1, err);
	if (!rc && sm->n == 1)
		rc = fg_err_set(err, FG_EMISMATCH, "the signature covers another file, %s, not %s",
				a.data, b.data);
	else if (!rc)
		rc = fg_err_set(err, FG_EMISMATCH,
				"the signature covers the %zu files of model %s, not the single file %s",
				sm->n, a.data, b.data);
	fg_buf_release(&a);
	fg_buf_release(&b);
	return rc;
}

static int verify_one(const struct fg_sign_key *k, const char *path, const char *given,
		      struct fg_err *err)
{
	struct fg_buf sig = FG_BUF_INIT, text = FG_BUF_INIT, payload = FG_BUF_INIT, ptype = FG_BUF_INIT;
	struct fg_buf sig_rel = FG_BUF_INIT, shown_pt = FG_BUF_INIT, shown_name = FG_BUF_INIT;
	struct fg_oms_model *signed_m = NULL, *disk = NULL;
	char fp[FG_SHA256_HEX_LEN + 1], hint[FG_SHA256_HEX_LEN + 1];
	cJSON *doc = NULL;
	const char *pt;
	struct stat sb;
	int rc, n, total;

	if ((rc = find_sig(&sig, path, given, err)) ||
	    (rc = fg_file_read(sig.data, (size_t)64 << 20, &text, err)) ||
	    (rc = fg_sign_key_fingerprint(fp, k, err)))
		goto out;
	/* the signature is checked before anything in the payload is read */
	if ((rc = fg_sign_open(&payload, &ptype, hint, text.data, text.len, k, err)))
		goto out;
	if (strcmp(ptype.data, FG_SIGN_PAYLOAD_TYPE)) {
		rc = fg_err_set(err, FG_EMISMATCH, "signed payload type is %s, not %s", ptype.data,
				FG_SIGN_PAYLOAD_TYPE);
		goto out;
	}
	if ((rc = fg_json_parse(&doc, payload.data, payload.len, "signed statement", err)))
		goto out;
	pt = fg_json_str(doc, "predicateType");
	if ((rc = fg_oms_check_format(pt, err)))
		goto out;
	if (pt && !strcmp(pt, FG_SIGN_OMS_PREDICATE)) {
		if ((rc = fg_oms_parse(&signed_m, payload.data, payload.len, err)) ||
		    (rc = fg_oms_rel_inside(&sig_rel, path, sig.data, err)) ||
		    (rc = hash_as_signed(&disk, path, signed_m, sig_rel.data ? sig_rel.data : "", err)))
			goto out;
		/* a single file (hashed as one resource under its base name) the
		 * signature has no resource of was signed as another file */
		if (disk->n == 1 && !covers(signed_m, disk->files[0].name) &&
		    (stat(path, &sb) || !S_ISDIR(sb.st_mode))) {
			rc = covers_another(signed_m, disk->files[0].name, err);
			goto out;
		}
		/* the name is the signer's: quoted as the failure lines quote it */
		if ((rc = fg_oms_compare(signed_m, disk, err)) ||
		    (rc = fg_sign_shown(&shown_name, disk->name, 0, err)))
			goto out;
		printf("verified %s: %zu files, model %s sha256:%s, signed by key %.16s…\n", path, disk->n,
		       shown_name.data, disk->root, fp);
	} else if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		/* a folder is signed by a model signature only: another statement
		 * (a bake's provenance, signed as its .intoto.json file) signs a
		 * file, which a folder cannot be byte-identical to. The signer
		 * wrote pt: quoted as the file message quotes it, so it cannot
		 * break the line or send escape sequences to a terminal */
		if (pt && !(rc = fg_sign_shown(&shown_pt, pt, 0, err)))
			rc = fg_err_set(err, FG_EMISMATCH,
					"the signature's statement is %s, not a model signature (%s) for a "
					"folder; verify-sig the statement file it signs instead",
					shown_pt.data, FG_SIGN_OMS_PREDICATE);
		else if (!pt)
			rc = fg_err_set(err, FG_EMISMATCH,
					"the signature's statement has no predicateType, so it is not a model "
					"signature (%s) for a folder",
					FG_SIGN_OMS_PREDICATE);
		goto out;
	} else {
		char missing[48] = "";

		if ((rc = verify_statement(path, &payload, doc, &n, &total, err)))
			goto out;
		/* subjects not found are said so: "0 subjects checked" alone read
		 * as if nothing was wrong with them */
		if (n < total)
			snprintf(missing, sizeof(missing), " (%d not found beside it)", total - n);
		if ((rc = pt ? fg_sign_shown(&shown_pt, pt, 0, err)
			     : fg_buf_puts(&shown_pt, "no predicateType", err)))
			goto out;
		printf("verified statement %s (%s), %d subject%s checked%s, signed by key %.16s…\n", path,
		       shown_pt.data, n, n == 1 ? "" : "s", missing, fp);
	}
out:
	if (rc)
		fg_err_wrap(err, "%s", path);
	cJSON_Delete(doc);
	fg_oms_model_free(signed_m);
	fg_oms_model_free(disk);
	fg_buf_release(&sig);
	fg_buf_release(&text);
	fg_buf_release(&payload);
	fg_buf_release(&ptype);
	fg_buf_release(&sig_rel);
	fg_buf_release(&shown_pt);
	fg_buf_release(&shown_name);
	return rc;
}

int cmd_verify_sig(int argc, char **argv)
{
	const char *keypath = NULL, *given = NULL;
	const char *paths[256];
	int n = 0, i, rc = 0, worst = 0;
	struct fg_sign_key *k = NULL;
	struct fg_err err = { 0, "" };

	if (fg_cmd_wants_help(argc, argv)) {
		fputs(usage_text, stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--key") && i + 1 < argc)
			keypath = argv[++i];
		else if (!strcmp(argv[i], "--sig") && i + 1 < argc)
			given = argv[++i];
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cmd_usage_error("verify-sig", "unknown option %s", argv[i]);
		else if (n < 256)
			paths[n++] = argv[i];
		else
			return fg_cmd_usage_error("verify-sig", "too many paths");
	}
	if (!keypath || !n)
		return fg_cmd_usage_error("verify-sig", "wants --key KEY and at least one PATH");
	if (given && n > 1)
		return fg_cmd_usage_error("verify-sig", "--sig works with one PATH only");
	if ((rc = fg_sign_key_load(&k, keypath, &err))) {
		fg_sign_key_free(k);
		return fg_cmd_fail("verify-sig", &err);
	}
	for (i = 0; i < n; i++) {
		struct fg_err e = { 0, "" };

		if ((rc = verify_one(k, paths[i], given, &e))) {
			int code = fg_cmd_fail("verify-sig", &e);

			if (code > worst)
				worst = code;
		}
	}
	fg_sign_key_free(k);
	return worst;
}
