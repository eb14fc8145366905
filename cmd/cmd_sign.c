/* cmd_sign.c - `fgpack sign --key KEY.pem PATH...`: OpenSSF model signing
 * (OMS 1.0) signatures for folders, files and bundles, and DSSE signatures
 * over in-toto statements (bake provenance). Format: docs/formats/signing.md. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "fsutil.h"
#include "sign.h"

static const char usage_text[] =
	"usage: fgpack sign --key KEY.pem [-o SIG] [--name NAME] [--allow-symlinks] PATH...\n"
	"\n"
	"Signs each PATH with an ECDSA P-256, P-384 or P-521 private key and writes\n"
	"PATH.sig (or -o SIG for one PATH): a Sigstore bundle holding a DSSE envelope.\n"
	"  - a folder, a file or a bundle (.fgb): an in-toto Statement with the OpenSSF\n"
	"    model signing v1.0 predicate (every file's sha256; the subject is NAME,\n"
	"    default the base name, with a sha256 over all file digests). In a folder,\n"
	"    model.sig, .git, .gitattributes, .github and .gitignore are not covered,\n"
	"    nor is SIG when -o puts it inside the folder. A symbolic link is refused\n"
	"    unless --allow-symlinks: then a link to a file is hashed as that file\n"
	"    under the link's name, a link to a folder is not descended into, and the\n"
	"    statement says allow_symlinks true (as model_signing --allow_symlinks).\n"
	"  - an in-toto Statement file (e.g. a bake provenance .intoto.json): the\n"
	"    statement itself is the signed payload.\n"
	"Check with 'fgpack verify-sig --key KEY.pub.pem PATH'.\n";

/* *yes 1 when the file at path is an in-toto Statement v1 (JSON), its text
 * then in text; 0 when it is something else sign hashes as a model (a
 * folder, a bigger file, or a link or a path that the model hashing refuses
 * in its own words). A FIFO, socket or device is an error naming it and is
 * never read: the open is O_NONBLOCK (a FIFO's open would wait for a
 * writer) and O_NOFOLLOW unless links are allowed, and the fd's fstat says
 * what it is. No stat before it: the model hashing's lstat and O_NOFOLLOW
 * open are the checks that count for a link (tests/integration/sign.sh holds
 * that lstat up by its place among the stats). */
static int is_statement(const char *path, int allow_symlinks, struct fg_buf *text, int *yes,
			struct fg_err *err)
{
	struct stat sb;
	int fd, known, rc = 0;

	*yes = 0;
	fg_buf_reset(text);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
				(allow_symlinks ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return 0;
	known = !fstat(fd, &sb);
	if (known && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
		rc = fg_oms_refuse_special(path, sb.st_mode, err);
	else if (known && S_ISREG(sb.st_mode) &&
		 (unsigned long long)sb.st_size <= FG_SIGN_STATEMENT_MAX)
		*yes = !fg_fd_read(fd, path, FG_SIGN_STATEMENT_MAX, text, NULL) &&
		       fg_sign_is_statement(text->data, text->len);
	close(fd);
	return rc;
}

static int sign_one(const struct fg_sign_key *k, const char *path, const char *out, const char *name,
		    int allow_symlinks, const char *fp, struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT, stmt = FG_BUF_INIT, bundle = FG_BUF_INIT, sig = FG_BUF_INIT;
	struct fg_buf rel = FG_BUF_INIT;
	const char **ign = NULL;
	struct fg_oms_model *m = NULL;
	size_t i;
	int rc = out ? fg_buf_puts(&sig, out, err) : fg_sign_default_path(&sig, path, err);
	int st = 0;

	if (rc || (rc = is_statement(path, allow_symlinks, &text, &st, err)))
		goto out;
	if (st) {
		if ((rc = fg_sign_bundle(&bundle, k, FG_SIGN_PAYLOAD_TYPE, text.data, text.len, err)) ||
		    (rc = fg_file_write_out(sig.data, bundle.data, bundle.len, 0644, err)))
			goto out;
		printf("signed statement %s with key %.16s… -> %s\n", path, fp, sig.data);
		goto out;
	}
	/* a signature written inside the folder it signs is left out of it
	 * (and named in ignore_paths), as model_signing leaves out its own
	 * output: it cannot cover itself */
	if ((rc = fg_oms_rel_inside(&rel, path, sig.data, err)))
		goto out;
	if (!(ign = calloc(fg_oms_n_ignore + 1, sizeof(*ign)))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < fg_oms_n_ignore; i++) {
		ign[i] = fg_oms_ignore[i];
		if (rel.len && !strcmp(rel.data, fg_oms_ignore[i]))
			fg_buf_reset(&rel);
	}
	if (rel.len)
		ign[i++] = rel.data;
	if ((rc = fg_oms_hash_ignoring(&m, path, name, ign, i,
				       allow_symlinks ? FG_OMS_LINKS_FOLLOW : FG_OMS_LINKS_REFUSE_SIGNING,
				       err)) ||
	    (rc = fg_oms_statement(&stmt, m, err)) ||
	    (rc = fg_sign_bundle(&bundle, k, FG_SIGN_PAYLOAD_TYPE, stmt.data, stmt.len, err)) ||
	    (rc = fg_file_write_out(sig.data, bundle.data, bundle.len, 0644, err)))
		goto out;
	printf("signed %s: %zu files, model %s sha256:%s, key %.16s… -> %s\n", path, m->n, m->name,
	       m->root, fp, sig.data);
out:
	if (rc)
		fg_err_wrap(err, "%s", path);
	fg_oms_model_free(m);
	fg_buf_release(&text);
	fg_buf_release(&stmt);
	fg_buf_release(&bundle);
	fg_buf_release(&sig);
	fg_buf_release(&rel);
	free(ign);
	return rc;
}

int cmd_sign(int argc, char **argv)
{
	const char *keypath = NULL, *out = NULL, *name = NULL;
	const char *paths[256];
	int n = 0, i, rc = 0, allow_symlinks = 0;
	struct fg_err err = { 0, "" };
	struct fg_sign_key *k = NULL;
	char fp[FG_SHA256_HEX_LEN + 1];

	if (fg_cmd_wants_help(argc, argv)) {
		fputs(usage_text, stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--key") && i + 1 < argc)
			keypath = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[++i];
		else if (!strcmp(argv[i], "--allow-symlinks"))
			allow_symlinks = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cmd_usage_error("sign", "unknown option %s", argv[i]);
		else if (n < 256)
			paths[n++] = argv[i];
		else
			return fg_cmd_usage_error("sign", "too many paths");
	}
	if (!keypath || !n)
		return fg_cmd_usage_error("sign", "wants --key KEY.pem and at least one PATH");
	if (out && n > 1)
		return fg_cmd_usage_error("sign", "-o works with one PATH only");
	/* a folder, block device or socket at -o: refused before the hashing */
	if ((out && (rc = fg_out_check(out, &err))) || (rc = fg_sign_key_load(&k, keypath, &err)))
		goto out;
	if (!fg_sign_key_is_private(k)) {
		rc = fg_err_set(&err, FG_EINVAL, "%s is a public key; signing needs the private key", keypath);
		goto out;
	}
	if ((rc = fg_sign_key_fingerprint(fp, k, &err)))
		goto out;
	for (i = 0; i < n && !rc; i++)
		rc = sign_one(k, paths[i], out, name, allow_symlinks, fp, &err);
out:
	fg_sign_key_free(k);
	return rc ? fg_cmd_fail("sign", &err) : FG_EXIT_OK;
}
