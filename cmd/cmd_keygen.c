/* cmd_keygen.c - `fgpack keygen -o KEY.pem`: a new ECDSA P-256 signing key
 * (PKCS#8 PEM, mode 0600) and its public half beside it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "fsutil.h"
#include "sign.h"

static const char usage_text[] =
	"usage: fgpack keygen -o KEY.pem [--force]\n"
	"\n"
	"Makes an ECDSA P-256 key pair for 'fgpack sign': the private key in KEY.pem\n"
	"(PKCS#8 PEM, mode 0600) and the public key in KEY.pub.pem (for KEY.pem) or\n"
	"KEY.pub. Prints the key fingerprint (sha256 of the public PEM, the hint OpenSSF\n"
	"model signing records). Refuses to overwrite without --force. Keys made by\n"
	"'openssl ecparam -name prime256v1 -genkey' work with sign and verify-sig too.\n";

/* Creates path with mode 0600 (O_EXCL unless force) and writes data. */
static int write_new(const char *path, const char *data, size_t len, int force, int mode,
		     struct fg_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (force ? 0 : O_EXCL), mode);
	size_t done = 0;
	struct stat st;

	if (fd < 0)
		return fg_err_set(err, FG_EIO, "%s: %s%s", path, strerror(errno),
				  errno == EEXIST ? " (use --force to replace it)" : "");
	/* --force onto /dev/null or a pipe: their mode is the machine's, left as it is */
	if (fstat(fd, &st) || (S_ISREG(st.st_mode) && fchmod(fd, (mode_t)mode))) {
		close(fd);
		return fg_err_set(err, FG_EIO, "%s: %s", path, strerror(errno));
	}
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return fg_err_set(err, FG_EIO, "write %s: %s", path, strerror(errno));
		}
		done += (size_t)w;
	}
	/* a device or pipe has nothing to sync */
	if ((fsync(fd) && S_ISREG(st.st_mode)) || close(fd))
		return fg_err_set(err, FG_EIO, "write %s: %s", path, strerror(errno));
	return 0;
}

int cmd_keygen(int argc, char **argv)
{
	const char *out = NULL;
	int force = 0, i, rc;
	struct fg_err err = { 0, "" };
	struct fg_sign_key *k = NULL;
	struct fg_buf priv = FG_BUF_INIT, pub = FG_BUF_INIT, pubpath = FG_BUF_INIT;
	char fp[FG_SHA256_HEX_LEN + 1];
	size_t n;

	if (fg_cmd_wants_help(argc, argv)) {
		fputs(usage_text, stdout);
		return FG_EXIT_OK;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--force"))
			force = 1;
		else
			return fg_cmd_usage_error("keygen", "unexpected %s", argv[i]);
	}
	if (!out)
		return fg_cmd_usage_error("keygen", "wants -o KEY.pem");
	n = strlen(out);
	if (n > 4 && !strcmp(out + n - 4, ".pem"))
		rc = fg_buf_printf(&pubpath, &err, "%.*s.pub.pem", (int)(n - 4), out);
	else
		rc = fg_buf_printf(&pubpath, &err, "%s.pub", out);
	if (!rc)
		rc = fg_sign_keygen(&k, &err);
	if (!rc)
		rc = fg_sign_key_private_pem(&priv, k, &err);
	if (!rc)
		rc = fg_sign_key_public_pem(&pub, k, &err);
	if (!rc)
		rc = fg_sign_key_fingerprint(fp, k, &err);
	if (!rc)
		rc = write_new(out, priv.data, priv.len, force, 0600, &err);
	if (!rc)
		rc = write_new(pubpath.data, pub.data, pub.len, force, 0644, &err);
	if (!rc) {
		printf("%s\n", fp);
		fprintf(stderr, "wrote %s (private, keep it) and %s (public)\n", out, pubpath.data);
	}
	if (priv.data)
		memset(priv.data, 0, priv.len);
	fg_buf_release(&priv);
	fg_buf_release(&pub);
	fg_buf_release(&pubpath);
	fg_sign_key_free(k);
	return rc ? fg_cmd_fail("keygen", &err) : FG_EXIT_OK;
}
