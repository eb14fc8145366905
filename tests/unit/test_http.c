/* test_http.c - the HTTP client against tests/servers/faultd.py on loopback:
 * retries (429 + Retry-After, 500 burst), resume after a dropped connection
 * and a short body, redirect loop, token kept from other origins, stall
 * timeout, Link-paged listing through hub.c, a file that shrank since it was
 * listed (416 / Content-Range total). Needs python3. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hub.h"
#include "http.h"
#include "ref.h"
#include "sha256.h"
#include "tap.h"

static char dir[256], base[128], other[128];
/* Debian's python3 directly: a pyenv shim costs seconds on a loaded machine. */
static const char *py = "python3";
static pid_t srv, srv2;

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

static pid_t start(int port, const char *log)
{
	pid_t p = fork();
	char ports[16], root[300], logp[300], faults[300];

	if (p == 0) {
		snprintf(ports, sizeof(ports), "%d", port);
		snprintf(root, sizeof(root), "%s/site", dir);
		snprintf(logp, sizeof(logp), "%s/%s", dir, log);
		snprintf(faults, sizeof(faults), "%s/faults.json", dir);
		execlp(py, py, "tests/servers/faultd.py", "--port", ports, "--root", root,
		       "--log", logp, "--faults", faults, (char *)NULL);
		_exit(127);
	}
	return p;
}

static int free_port(void)
{
	char cmd[300];
	FILE *f;
	int port = 0;
	char line[32];

	snprintf(cmd, sizeof(cmd), "%s -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); "
		 "print(s.getsockname()[1])'", py);
	f = popen(cmd, "r");

	if (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		fg_parse_int(line, 1, 65535, &port);
	}
	if (f)
		pclose(f);
	return port;
}

/* Waits up to 10 s for 127.0.0.1:port to accept. */
static int wait_port(int port)
{
	int i;

	for (i = 0; i < 200; i++) {
		struct sockaddr_in a;
		int fd = socket(AF_INET, SOCK_STREAM, 0), r;

		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((unsigned short)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
		if (!r)
			return 0;
		usleep(50 * 1000);
	}
	return -1;
}

static void faults(const char *json)
{
	char p[300];
	FILE *f;

	snprintf(p, sizeof(p), "%s/faults.json", dir);
	f = fopen(p, "w");
	fputs(json, f);
	fclose(f);
}

struct sink {
	struct fg_sha256 *h;
	unsigned long long n, last;
	int ordered, done, rc;
	struct fg_err err;
};

static int sink_data(void *ud, unsigned long long off, const void *d, size_t len, struct fg_err *e)
{
	struct sink *s = ud;

	if (off != s->last)
		s->ordered = 0;
	s->last = off + len;
	s->n += len;
	return fg_sha256_update(s->h, d, len, e);
}

static void sink_done(void *ud, int rc, const struct fg_err *e)
{
	struct sink *s = ud;

	s->done = 1;
	s->rc = rc;
	if (e)
		s->err = *e;
}

/* The file size get() announces (fg_http_xfer.total); 0: unknown. */
static unsigned long long get_total;

/* GETs url (range [start,end)) and returns the hex digest of what arrived in *hex. */
static int get(struct fg_http *h, const char *url, unsigned long long start, unsigned long long end,
	       char hex[65], struct sink *s)
{
	struct fg_http_xfer x;
	uint8_t d[32];

	memset(s, 0, sizeof(*s));
	memset(&x, 0, sizeof(x));
	fg_sha256_new(&s->h, NULL);
	s->ordered = 1;
	s->last = start;
	x.url = url;
	x.what = "fetch t";
	x.start = start;
	x.end = end;
	x.total = get_total;
	x.on_data = sink_data;
	x.on_done = sink_done;
	x.ud = s;
	fg_http_submit(h, &x, NULL);
	fg_http_run(h, NULL, NULL, 50, NULL);
	fg_sha256_final(s->h, d, NULL);
	fg_sha256_free(s->h);
	fg_hex_encode(d, 32, hex);
	return s->rc;
}

static int count_lines(const char *log, const char *needle)
{
	char p[300], line[4096];
	FILE *f;
	int n = 0;

	snprintf(p, sizeof(p), "%s/%s", dir, log);
	f = fopen(p, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	if (f)
		fclose(f);
	return n;
}

/* count_lines once the server has logged at least min such lines, or after
 * 2 s: servers write their log line when the answer is sent, and a client
 * may read its last byte first. */
static int wait_lines(const char *log, const char *needle, int min)
{
	int n, i;

	for (i = 0; (n = count_lines(log, needle)) < min && i < 100; i++)
		usleep(20000);
	return n;
}

int main(void)
{
	struct fg_http_opts o;
	struct fg_http *h = NULL;
	struct sink s;
	char want[65], hex[65], url[512], tmpl[] = "/tmp/fgtest-http.XXXXXX";
	int port, port2, rc;
	struct timespec t0, t1;
	double secs;

	if (!access("/usr/bin/python3", X_OK))
		py = "/usr/bin/python3";
	port = free_port();
	port2 = free_port();
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(dir, sizeof(dir), "%s", tmpl);
	/* 300 KB file with a known digest */
	sh("mkdir -p %s/b/w && PATH=/usr/bin:$PATH python3 -c \"import sys; sys.stdout.buffer.write(bytes(range(256))*1200)\" > %s/b/w/f.bin",
	   dir, dir);
	sh("PATH=/usr/bin:$PATH python3 -c \"import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())\" %s/b/w/f.bin > %s/want",
	   dir, dir);
	{
		char p[300];
		FILE *f;

		snprintf(p, sizeof(p), "%s/want", dir);
		f = fopen(p, "r");
		if (!f || !fgets(want, sizeof(want), f))
			return 1;
		fclose(f);
	}
	sh("mkdir -p %s/b/w/d1 %s/b/w/d2", dir, dir);
	sh("echo x > %s/b/w/d1/x && echo y > %s/b/w/d2/y", dir, dir);
	rc = sh("PATH=/usr/bin:$PATH python3 tests/servers/hubtree.py %s/site --bucket ns/bk=%s/b --page-size 1 >/dev/null", dir, dir);
	ok(rc == 0, "hubtree.py lays out the site");
	faults("[]");
	srv = start(port, "log");
	srv2 = start(port2, "log2");
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
	snprintf(other, sizeof(other), "http://127.0.0.1:%d", port2);
	ok(!wait_port(port) && !wait_port(port2), "fault servers listening");

	fg_http_opts_default(&o);
	o.hub_url = base;
	o.token = "hf_secret";
	o.retry_base_ms = 20;
	o.retry_max_ms = 1500;
	o.stall_secs = 1;
	ok(!fg_http_new(&h, &o, NULL), "client made");
	snprintf(url, sizeof(url), "%s/buckets/ns/bk/resolve/w/f.bin", base);

	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want) && s.ordered, "plain GET: digest matches");
	ok(!get(h, url, 1000, 200000, hex, &s) && s.n == 199000 && s.ordered, "range GET delivers exactly the range");

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"drop\",\"at\":70000,\"times\":2}]");
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "dropped twice: resumed, digest matches");
	ok(wait_lines("log", "\"range\": \"bytes=70000-\"", 1) >= 1, "resume asked from the first missing byte");

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"short\",\"cut\":1000,\"times\":1}]");
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "short body with lying Content-Length: resumed");

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"status\",\"code\":500,\"times\":3}]");
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "500 burst then success");

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"status\",\"code\":429,\"retry_after\":1,\"times\":1}]");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "429 then success");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ok(secs >= 0.9, "Retry-After: 1 honoured (waited %.2fs)", secs);

	/* longer than our own backoff cap (retry_max_ms 1500 here): the server's
	 * wait still holds, else the retry lands inside its window again */
	faults("[{\"match\":\"*/f.bin\",\"fault\":\"status\",\"code\":503,\"retry_after\":2,\"times\":1}]");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "503 then success");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ok(secs >= 1.9, "Retry-After: 2 honoured above retry_max_ms 1500 (waited %.2fs)", secs);

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"status\",\"code\":429,\"retry_after\":0}]");
	rc = get(h, url, 0, 0, hex, &s);
	ok(rc == FG_ENET && strstr(s.err.msg, "HTTP 429 after 6 tries"), "429 forever: %s", s.err.msg);

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"status\",\"code\":404}]");
	rc = get(h, url, 0, 0, hex, &s);
	ok(rc == FG_ENOTFOUND && strstr(s.err.msg, "HTTP 404"), "404 is final: %s", s.err.msg);

	/* the file shrank by 1000 bytes since it was listed at 307200 */
	faults("[{\"match\":\"*/f.bin\",\"fault\":\"shrink\",\"by\":1000}]");
	get_total = 307200;
	rc = get(h, url, 307000, 307200, hex, &s);
	ok(rc == FG_EMISMATCH && strstr(s.err.msg, "the remote file is now 306200 bytes, 307200 when listed"),
	   "416 past a shrunk file's end names the new size: %s", s.err.msg);
	rc = get(h, url, 0, 1000, hex, &s);
	ok(rc == FG_EMISMATCH && strstr(s.err.msg, "the remote file is now 306200 bytes, 307200 when listed"),
	   "a 206 whose Content-Range total differs: %s", s.err.msg);
	get_total = 0;
	rc = get(h, url, 307000, 307200, hex, &s);
	ok(rc == FG_ENET && strstr(s.err.msg, "HTTP 416"), "without a listed size a 416 stays HTTP 416: %s",
	   s.err.msg);

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"loop\"}]");
	rc = get(h, url, 0, 0, hex, &s);
	ok(rc == FG_ENET && strstr(s.err.msg, "redirects"), "redirect loop stops: %s", s.err.msg);

	{
		char rule[400];

		snprintf(rule, sizeof(rule), "[{\"match\":\"/buckets/*\",\"fault\":\"redirect\",\"to\":\"%s/cdn\"}]",
			 other);
		faults(rule);
	}
	{
		char p[300];
		FILE *f;

		/* the "CDN" serves /cdn/buckets/... from the same tree */
		snprintf(p, sizeof(p), "%s/faults2.json", dir);
		f = fopen(p, "w");
		fputs("[]", f);
		fclose(f);
	}
	rc = get(h, url, 0, 0, hex, &s);
	ok(wait_lines("log", "\"auth\": \"Bearer hf_secret\"", 1) >= 1, "token sent to the Hub origin");
	ok(wait_lines("log2", "/cdn/buckets/ns/bk/resolve/w/f.bin", 1) >= 1, "redirect followed to the other origin");
	ok(count_lines("log2", "hf_secret") == 0, "token not sent across the redirect to another origin");

	faults("[{\"match\":\"*/f.bin\",\"fault\":\"stall\",\"at\":2000,\"rate\":20000,\"hang\":30,\"times\":1}]");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(!get(h, url, 0, 0, hex, &s) && !strcmp(hex, want), "trickle then stall: aborted, resumed, digest matches");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ok(secs < 12, "stall detected by the low-speed limit (%.2fs)", secs);

	faults("[]");
	{
		struct fg_ref *ref = NULL;
		struct fg_hub_list l;
		struct fg_err e;

		fg_ref_parse(&ref, "hf://buckets/ns/bk/w", NULL);
		rc = fg_hub_bucket_tree(&l, h, base, ref, &e);
		ok(!rc && l.n == 3, "paged listing (page size 1) gives all 3 files: %s", rc ? e.msg : "");
		ok(wait_lines("log", "cursor=p2", 1) >= 1, "Link rel=next followed");
		if (!rc)
			fg_hub_list_release(&l);
		fg_ref_free(ref);
	}
	fg_http_free(h);
	kill(srv, SIGTERM);
	kill(srv2, SIGTERM);
	waitpid(srv, NULL, 0);
	waitpid(srv2, NULL, 0);
	sh("rm -rf %s%s", dir, "/");
	return tap_done();
}
