/* test_hub.c - tree listing parsing and validation, Link paging. */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "hub.h"
#include "tap.h"

static int parse(struct fg_hub_list *l, const char *s, int model, struct fg_err *e)
{
	memset(l, 0, sizeof(*l));
	return fg_hub_parse_tree(l, s, strlen(s), model, "t", e);
}

int main(void)
{
	struct fg_hub_list l;
	struct fg_err e;
	struct fg_buf b = FG_BUF_INIT;

	ok(!parse(&l, "[{\"type\":\"file\",\"path\":\"w/b\",\"size\":5,\"xetHash\":\"x1\",\"mtime\":\"m\"},"
		      "{\"type\":\"directory\",\"path\":\"w\"},{\"type\":\"file\",\"path\":\"w/a\",\"size\":0}]",
		  0, &e),
	   "bucket page parses");
	is_int(l.n, 2, "directories are skipped");
	ok(!fg_hub_list_finish(&l, "w", "t", &e), "finish below prefix");
	is_str(l.files[0].path, "w/a", "sorted by path");
	is_str(l.files[1].xet_hash, "x1", "xetHash kept");
	is_int(l.files[1].size, 5, "size kept");
	ok(fg_hub_list_finish(&l, "v", "t", &e) == FG_EFORMAT, "paths outside the prefix refused");
	fg_hub_list_release(&l);
	/* the Hub's tree/<prefix> matches as a string: siblings come along */
	ok(!parse(&l, "[{\"type\":\"file\",\"path\":\"w/v10/c\",\"size\":1},"
		      "{\"type\":\"file\",\"path\":\"w/v1-old/b\",\"size\":1},"
		      "{\"type\":\"directory\",\"path\":\"w/v1-old\"},"
		      "{\"type\":\"file\",\"path\":\"w/v1/a\",\"size\":2},"
		      "{\"type\":\"file\",\"path\":\"w/v1.bak\",\"size\":1}]",
		  0, &e) &&
		   !fg_hub_list_finish(&l, "w/v1", "t", &e) && l.n == 1 && !strcmp(l.files[0].path, "w/v1/a"),
	   "siblings sharing the prefix's leading characters are dropped, not refused");
	fg_hub_list_release(&l);
	ok(!parse(&l, "[{\"type\":\"file\",\"path\":\"k/keep.json.bak\",\"size\":1},"
		      "{\"type\":\"file\",\"path\":\"k/keep.json\",\"size\":3}]",
		  0, &e) &&
		   !fg_hub_list_finish(&l, "k/keep.json", "t", &e) && l.n == 1 && l.files[0].size == 3,
	   "a file's own listing keeps the file, drops a longer name");
	fg_hub_list_release(&l);

	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"../x\",\"size\":1}]", 0, &e) == FG_EFORMAT &&
		   strstr(e.msg, "unsafe path"),
	   "'..' refused: %s", e.msg);
	fg_hub_list_release(&l);
	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"/x\",\"size\":1}]", 0, &e) == FG_EFORMAT,
	   "absolute path refused");
	fg_hub_list_release(&l);
	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"x\",\"size\":-3}]", 0, &e) == FG_EFORMAT,
	   "negative size refused");
	fg_hub_list_release(&l);
	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"x\",\"size\":1.5}]", 0, &e) == FG_EFORMAT,
	   "fractional size refused");
	fg_hub_list_release(&l);
	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"x\",\"size\":1e18}]", 0, &e) == FG_EFORMAT,
	   "absurd size refused");
	fg_hub_list_release(&l);
	ok(parse(&l, "{}", 0, &e) == FG_EFORMAT, "an object is not a listing");
	fg_hub_list_release(&l);
	ok(!parse(&l, "[{\"type\":\"file\",\"path\":\"x\",\"size\":1},{\"type\":\"file\",\"path\":\"x\",\"size\":1}]",
		  0, &e) &&
		   fg_hub_list_finish(&l, "", "t", &e) == FG_EFORMAT && strstr(e.msg, "twice"),
	   "duplicates refused");
	fg_hub_list_release(&l);

	ok(!parse(&l, "[{\"type\":\"file\",\"path\":\"m.safetensors\",\"size\":3,\"oid\":\"g\","
		      "\"lfs\":{\"oid\":\"929f0d40fd12eb1b369913107efc825ad9c28118ba2467c46c3d7af89e29b7aa\",\"size\":3}}]",
		  1, &e),
	   "model page parses");
	is_str(l.files[0].lfs_sha256, "929f0d40fd12eb1b369913107efc825ad9c28118ba2467c46c3d7af89e29b7aa",
	       "lfs sha256 kept");
	fg_hub_list_release(&l);
	ok(parse(&l, "[{\"type\":\"file\",\"path\":\"m\",\"size\":3,\"lfs\":{\"oid\":\"zz\",\"size\":3}}]", 1, &e) ==
		   FG_EFORMAT,
	   "bad lfs oid refused");
	fg_hub_list_release(&l);

	ok(!fg_hub_link_next(&b, "<http://h:1/t?cursor=2>; rel=\"next\"", "http://h:1/t"), "absolute next");
	is_str(b.data, "http://h:1/t?cursor=2", "absolute next url");
	ok(!fg_hub_link_next(&b, "</x?c=1>; rel=\"prev\", </y?c=3>; rel=\"next\"", "http://h:1/t"),
	   "next among several links");
	is_str(b.data, "http://h:1/y?c=3", "relative next resolved");
	ok(fg_hub_link_next(&b, "</x>; rel=\"prev\"", "http://h:1/t") != 0, "no next");
	ok(fg_hub_link_next(&b, "garbage", "http://h:1/t") != 0, "garbage has no next");
	/* RFC 8288 forms the Hub does not send but other servers do */
	ok(!fg_hub_link_next(&b, "<http://h:1/t?c=2>; title=\"a, b; c\"; rel=\"next\"", "http://h:1/t"),
	   "a quoted param holding ',' and ';' before rel");
	is_str(b.data, "http://h:1/t?c=2", "  its next url");
	ok(!fg_hub_link_next(&b, "</x?c=1>; rel=\"prev\", </y?c=4>; rel=next", "http://h:1/t"),
	   "an unquoted rel token");
	is_str(b.data, "http://h:1/y?c=4", "  its next url");
	ok(!fg_hub_link_next(&b, "</f>; REL=\"first\"; title=\"next\", </n?c=5>; Rel=\"Next Last\"",
			     "http://h:1/a/t"),
	   "rel as a list of types in any case; a title saying next is not a rel");
	is_str(b.data, "http://h:1/n?c=5", "  its next url");
	ok(!fg_hub_link_next(&b, "<t?c=6> ; rel = \"next\"", "http://h:1/api/x/tree"),
	   "blanks around ';' and '=', a relative-path reference");
	is_str(b.data, "http://h:1/api/x/t?c=6", "  resolved against the page's URL");
	ok(!fg_hub_link_next(&b, "<http://h:1/x?a=1,2>; rel=\"next\"", "http://h:1/t"), "a ',' inside <>");
	is_str(b.data, "http://h:1/x?a=1,2", "  kept in the URL");
	ok(fg_hub_link_next(&b, "</n>; rel=\"nextpage\"", "http://h:1/t") == 1, "rel=nextpage is not next");
	/* a next page's path written raw, a blank and UTF-8 in it: followed
	 * requoted, as requests (huggingface_hub's client) does */
	ok(!fg_hub_link_next(&b, "<http://h:1/api/buckets/a/b/tree/poids mod\xc3\xa8le?recursive=true&cursor=p1>; "
			     "rel=\"next\"", "http://h:1/t"),
	   "a next link holding a blank and UTF-8");
	is_str(b.data, "http://h:1/api/buckets/a/b/tree/poids%20mod%C3%A8le?recursive=true&cursor=p1",
	       "  percent-encoded, '%%' escapes and '&' '=' '?' kept");
	ok(!fg_hub_link_next(&b, "</t/a%20b?c=2>; rel=next", "http://h:1/t"), "an escape already there");
	is_str(b.data, "http://h:1/t/a%20b?c=2", "  not encoded twice");
	/* one that makes no URL must not read as "no next page": the listing
	 * would end short without a word */
	ok(fg_hub_link_next(&b, "<http://h:99999/t?c=2>; rel=\"next\"", "http://h:1/t") == -1,
	   "a next link that is no usable URL (port out of range) is -1, not 'none'");
	ok(fg_hub_link_next(&b, "</x>; rel=\"prev\"", "http://h:1/t") == 1, "no next link is 1");
	ok(fg_hub_link_next(&b, "</n>; rel=\"prev\"; rel=\"next\"", "http://h:1/t") != 0,
	   "only the first rel of a link counts (RFC 8288 3.3)");
	{
		unsigned long long s0, e0, t;
		int ht;

		ok(!fg_http_content_range("bytes 0-9/100", 13, &s0, &e0, &t, &ht) && s0 == 0 && e0 == 9 &&
			   t == 100 && ht,
		   "Content-Range bytes 0-9/100");
		ok(!fg_http_content_range("bytes 10-19/*", 13, &s0, &e0, &t, &ht) && s0 == 10 && e0 == 19 && !ht,
		   "Content-Range bytes 10-19/* (total unknown)");
		ok(!fg_http_content_range("BYTES  5-5/6", 12, &s0, &e0, &t, &ht) && s0 == 5 && t == 6,
		   "unit in any case, two blanks");
		ok(fg_http_content_range("bytes */100", 11, &s0, &e0, &t, &ht) != 0, "a 416's bytes */100 is no range");
		ok(fg_http_content_range("bytes 9-0/100", 13, &s0, &e0, &t, &ht) != 0, "end before start refused");
		ok(fg_http_content_range("bytes 0-99/99", 13, &s0, &e0, &t, &ht) != 0, "end beyond the total refused");
		ok(fg_http_content_range("bytes 0-9/1x", 12, &s0, &e0, &t, &ht) != 0, "junk after the total refused");
		ok(fg_http_content_range("bytes 0-99999999999999999999/1", 30, &s0, &e0, &t, &ht) != 0,
		   "an overflowing number refused");
	}
	fg_buf_release(&b);
	return tap_done();
}
