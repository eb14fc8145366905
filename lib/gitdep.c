/* gitdep.c - git+https dependencies fetched by the system git (see gitdep.h). */
#include "gitdep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"

extern char **environ;

/* Runs argv (PATH lookup) with extra environment entries ("K=V", NULL-ended);
 * stdout into out (may be NULL), the last line of stderr into lastline. */
static int run(const char *const argv[], const char *const extra[], const char *scratch,
	       struct fg_buf *out, char *lastline, size_t cap, int *status, struct fg_err *err)
{
	struct fg_buf po = FG_BUF_INIT, pe = FG_BUF_INIT, text = FG_BUF_INIT;
	size_t ne = 0, nx = 0, i;
	char **envp = NULL;
	int fo = -1, fe = -1, rc;
	pid_t pid;

	lastline[0] = '\0';
	while (environ[ne])
		ne++;
	while (extra[nx])
		nx++;
	rc = fg_buf_printf(&po, err, "%s/out", scratch);
	if (!rc)
		rc = fg_buf_printf(&pe, err, "%s/err", scratch);
	if (!rc && !(envp = calloc(ne + nx + 1, sizeof(*envp))))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (rc)
		goto out;
	for (i = 0; i < nx; i++)
		envp[i] = (char *)extra[i];
	for (i = 0; i < ne; i++) /* the extra entries come first and win */
		envp[nx + i] = environ[i];
	fo = open(po.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fe = open(pe.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fo < 0 || fe < 0) {
		rc = fg_err_set(err, FG_EIO, "%s: %s", scratch, strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = fg_err_set(err, FG_EIO, "fork: %s", strerror(errno));
		goto out;
	}
	if (!pid) {
		int nul = open("/dev/null", O_RDONLY);

		if (nul < 0 || dup2(nul, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
			_exit(126);
		execvpe(argv[0], (char *const *)argv, envp);
		_exit(errno == ENOENT ? 127 : 126);
	}
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR) {
			rc = fg_err_set(err, FG_EIO, "waitpid: %s", strerror(errno));
			goto out;
		}
	if (out && (rc = fg_file_read(po.data, 1 << 20, out, err)))
		goto out;
	if (!fg_file_read(pe.data, 1 << 20, &text, NULL) && text.len) {
		char *e = text.data + text.len, *b;

		while (e > text.data && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
			*--e = '\0';
		b = strrchr(text.data, '\n');
		snprintf(lastline, cap, "%s", b ? b + 1 : text.data);
	}
out:
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	free(envp);
	fg_buf_release(&po);
	fg_buf_release(&pe);
	fg_buf_release(&text);
	return rc;
}

/* git ARGS... in the scratch repository; FG_ENET quoting git when it fails. */
static int git(struct fg_buf *out, const char *gitdir, const char *scratch, const char *const extra[],
	       const char *what, const char *doing, struct fg_err *err, const char *const *args)
{
	const char *argv[24];
	char last[512];
	size_t n = 0;
	int status = 0, rc;

	argv[n++] = "git";
	argv[n++] = "--git-dir";
	argv[n++] = gitdir;
	while (*args && n < sizeof(argv) / sizeof(argv[0]) - 1)
		argv[n++] = *args++;
	argv[n] = NULL;
	rc = run(argv, extra, scratch, out, last, sizeof(last), &status, err);
	if (rc)
		return rc;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return fg_err_set(err, FG_ENOTFOUND, "%s: fetching a git dependency needs the git program "
						     "(not found on PATH)", what);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return fg_err_set(err, FG_ENET, "%s: git %s failed: %s", what, doing,
				  last[0] ? last : "(no message)");
	return 0;
}

int fg_gitdep_fetch(struct fg_gitdep_result *res, struct fg_store *st, const char *url,
		    const struct fg_gitdep_opts *o, struct fg_err *err)
{
	struct fg_buf scratch = FG_BUF_INIT, repo = FG_BUF_INIT, gitdir = FG_BUF_INIT, tar = FG_BUF_INIT;
	struct fg_buf out = FG_BUF_INIT, ca = FG_BUF_INIT, low = FG_BUF_INIT, rev = FG_BUF_INIT;
	const char *extra[8];
	char commit[FG_GIT_OID_MAX + 1];
	size_t ne = 0;
	int rc, slot = -1;

	memset(res, 0, sizeof(*res));
	if (!fg_dependency_git_parse(url, commit, &repo) || !repo.data)
		return fg_err_set(err, FG_EINVAL, "%s: %s is not a git+ URL", o->what, url);
	if (!commit[0])
		return fg_err_set(err, FG_EINVAL, "%s: %s names no commit id (a branch or tag can move; "
						  "write @<40-hex commit>)", o->what, url);
	/* no prompt for credentials, no system or user configuration, no hooks */
	extra[ne++] = "GIT_TERMINAL_PROMPT=0";
	extra[ne++] = "GIT_CONFIG_NOSYSTEM=1";
	extra[ne++] = "GIT_CONFIG_GLOBAL=/dev/null";
	extra[ne++] = "GIT_ASKPASS=/bin/false";
	extra[ne++] = "GIT_ALLOW_PROTOCOL=https:http"; /* no redirect to file://, ssh, ext:: */
	if (o->cainfo && !fg_buf_printf(&ca, NULL, "GIT_SSL_CAINFO=%s", o->cainfo))
		extra[ne++] = ca.data;
	extra[ne] = NULL;
	rc = fg_store_tmp_path(&scratch, st, err);
	if (!rc && mkdir(scratch.data, 0700))
		rc = fg_err_set(err, FG_EIO, "%s: %s", scratch.data, strerror(errno));
	if (!rc) /* a signal removes it (cmd/'s handler); a SIGKILL's, store gc */
		slot = fg_tmp_track_dir(scratch.data);
	if (rc)
		goto done;
	rc = fg_buf_printf(&gitdir, err, "%s/repo.git", scratch.data);
	if (!rc)
		rc = fg_buf_printf(&tar, err, "%s/tree.tar", scratch.data);
	if (!rc)
		rc = fg_buf_printf(&low, err, "http.lowSpeedTime=%ld", o->stall_secs > 0 ? o->stall_secs : 60);
	if (!rc)
		rc = fg_buf_printf(&rev, err, "%s^{tree}", commit);
	if (!rc) {
		const char *a[] = { "init", "-q", "--bare", NULL };

		rc = git(NULL, gitdir.data, scratch.data, extra, o->what, "init", err, a);
	}
	if (!rc) {
		/* exactly this commit; a server that cannot give a shallow history
		 * (dumb HTTP) gives the commit with its ancestors */
		const char *shallow[] = { "-c", "http.lowSpeedLimit=1", "-c", low.data, "fetch", "-q",
					  "--no-tags", "--depth=1", repo.data, commit, NULL };
		const char *full[] = { "-c", "http.lowSpeedLimit=1", "-c", low.data, "fetch", "-q",
				       "--no-tags", repo.data, commit, NULL };

		if (git(NULL, gitdir.data, scratch.data, extra, o->what, "fetch", NULL, shallow))
			rc = git(NULL, gitdir.data, scratch.data, extra, o->what, "fetch", err, full);
	}
	if (!rc) {
		const char *a[] = { "rev-parse", "--verify", "--end-of-options", rev.data, NULL };

		rc = git(&out, gitdir.data, scratch.data, extra, o->what, "rev-parse", err, a);
		while (!rc && out.len && (out.data[out.len - 1] == '\n' || out.data[out.len - 1] == '\r'))
			out.data[--out.len] = '\0';
		if (!rc && ((out.len != 40 && out.len != 64) ||
			    strspn(out.data, "0123456789abcdef") != out.len))
			rc = fg_err_set(err, FG_EFORMAT, "%s: git gave no tree id for %s", o->what, commit);
		if (!rc)
			snprintf(res->tree, sizeof(res->tree), "%s", out.data);
	}
	if (!rc && o->expect_tree && *o->expect_tree && strcmp(o->expect_tree, res->tree))
		rc = fg_err_set(err, FG_EHASH, "%s: commit %s has tree %s, the lock says %s", o->what, commit,
				res->tree, o->expect_tree);
	if (!rc) {
		/* the tar as git writes it: paths sorted, mtime = the commit's time */
		const char *a[] = { "-c", "tar.umask=0022", "archive", "--format=tar", "-o", tar.data,
				    commit, NULL };

		rc = git(NULL, gitdir.data, scratch.data, extra, o->what, "archive", err, a);
	}
	if (!rc) {
		rc = fg_store_import_ex(st, tar.data, o->expect_sha256, 0, res->sha256, &res->size,
					&res->was_present, err);
		if (rc == FG_EHASH)
			rc = fg_err_wrap(err, "%s: the tree is the lock's (%s) but git archive gave other "
					      "bytes (another git version?)", o->what, res->tree);
		else if (rc)
			rc = fg_err_wrap(err, "%s", o->what);
	}
done:
	if (scratch.data && scratch.len)
		fg_rm_tree(scratch.data);
	fg_tmp_untrack(slot);
	fg_buf_release(&scratch);
	fg_buf_release(&repo);
	fg_buf_release(&gitdir);
	fg_buf_release(&tar);
	fg_buf_release(&out);
	fg_buf_release(&ca);
	fg_buf_release(&low);
	fg_buf_release(&rev);
	return rc;
}
