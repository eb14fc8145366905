/* safetensors.c - validating mmap reader and streaming writer for
 * safetensors files and sharded sets (see safetensors.h for the rules). */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fsutil.h"
#include "json.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[FG_ST_NDTYPES] = {
	[FG_ST_BOOL] = { "BOOL", 1 },     [FG_ST_U8] = { "U8", 1 },
	[FG_ST_I8] = { "I8", 1 },         [FG_ST_F8_E4M3] = { "F8_E4M3", 1 },
	[FG_ST_F8_E5M2] = { "F8_E5M2", 1 }, [FG_ST_I16] = { "I16", 2 },
	[FG_ST_U16] = { "U16", 2 },       [FG_ST_F16] = { "F16", 2 },
	[FG_ST_BF16] = { "BF16", 2 },     [FG_ST_I32] = { "I32", 4 },
	[FG_ST_U32] = { "U32", 4 },       [FG_ST_F32] = { "F32", 4 },
	[FG_ST_I64] = { "I64", 8 },       [FG_ST_U64] = { "U64", 8 },
	[FG_ST_F64] = { "F64", 8 },
};

const char *fg_st_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < FG_ST_NDTYPES ? dtypes[dtype].name : NULL;
}

int fg_st_dtype_parse(const char *s)
{
	int i;

	for (i = 0; s && i < FG_ST_NDTYPES; i++)
		if (!strcmp(s, dtypes[i].name))
			return i;
	return -1;
}

size_t fg_st_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < FG_ST_NDTYPES ? dtypes[dtype].size : 0;
}

/* ---- reading ---- */

struct st_file {
	char *path;           /* owned */
	const uint8_t *base;  /* whole file image */
	size_t len;
	int mapped;           /* base is our mmap (unmap on free) */
	dev_t dev;            /* the mapped inode (when mapped) */
	ino_t ino;
	const uint8_t *data;  /* start of the data region */
	size_t data_len;
};

struct fg_st_set {
	struct st_file *files;
	size_t nfiles;
	struct fg_st_tensor *t;  /* file order */
	size_t n, cap;
	const struct fg_st_tensor **byname; /* sorted by name */
	cJSON *meta;             /* first file's __metadata__ (owned copy) */
};

static int set_grow(struct fg_st_set *s, struct fg_err *err)
{
	struct fg_st_tensor *nt;
	size_t ncap;

	if (s->n < s->cap)
		return 0;
	ncap = s->cap ? s->cap * 2 : 64;
	nt = realloc(s->t, ncap * sizeof(*nt));
	if (!nt)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	s->t = nt;
	s->cap = ncap;
	return 0;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble != floor(v->valuedouble) || v->valuedouble > 9007199254740992.0)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct fg_st_tensor *x = a, *y = b;

	if (x->file_offset != y->file_offset)
		return x->file_offset < y->file_offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b)
{
	const struct fg_st_tensor *x = *(const struct fg_st_tensor *const *)a;
	const struct fg_st_tensor *y = *(const struct fg_st_tensor *const *)b;

	return strcmp(x->name, y->name);
}

static int parse_entry(struct fg_st_set *s, struct st_file *f, const cJSON *e, struct fg_err *err)
{
	const char *what = f->path, *name = e->string;
	const cJSON *shape, *offs, *d;
	struct fg_st_tensor *t;
	uint64_t begin, end, nelem = 1;
	size_t nbytes;
	int dtype, nd = 0, rc;

	if (!cJSON_IsObject(e))
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: entry is not an object", what, name);
	dtype = fg_st_dtype_parse(fg_json_str(e, "dtype"));
	if (dtype < 0) {
		const char *ds = fg_json_str(e, "dtype");

		return fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor %s: unsupported dtype %s", what,
				  name, ds ? ds : "(missing)");
	}
	shape = fg_json_arr(e, "shape");
	offs = fg_json_arr(e, "data_offsets");
	if (!shape || !offs)
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: missing shape or data_offsets", what,
				  name);
	rc = set_grow(s, err);
	if (rc)
		return rc;
	t = &s->t[s->n];
	memset(t, 0, sizeof(*t));
	cJSON_ArrayForEach(d, shape)
	{
		uint64_t v;

		if (nd >= FG_ST_MAX_DIMS)
			return fg_err_set(err, FG_EUNSUPPORTED, "%s: tensor %s: more than %d dimensions",
					  what, name, FG_ST_MAX_DIMS);
		if (json_u64(d, &v))
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: shape holds a non-integer",
					  what, name);
		t->shape[nd++] = v;
		if (fg_size_mul(nelem, v, &nbytes))
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: shape overflows", what, name);
		nelem = nbytes;
	}
	if (cJSON_GetArraySize(offs) != 2 || json_u64(cJSON_GetArrayItem(offs, 0), &begin) ||
	    json_u64(cJSON_GetArrayItem(offs, 1), &end))
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: data_offsets is not [begin, end]",
				  what, name);
	if (fg_size_mul(nelem, fg_st_dtype_size(dtype), &nbytes))
		return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: byte size overflows", what, name);
	if (end < begin || end > f->data_len)
		return fg_err_set(err, FG_EFORMAT,
				  "%s: tensor %s: data_offsets [%llu, %llu] outside the %zu-byte data region (truncated, or the header lies)",
				  what, name, (unsigned long long)begin, (unsigned long long)end,
				  f->data_len);
	if (end - begin != nbytes)
		return fg_err_set(err, FG_EFORMAT,
				  "%s: tensor %s: shape and dtype need %zu bytes but data_offsets span %llu",
				  what, name, nbytes, (unsigned long long)(end - begin));
	t->name = name; /* fixed up to an owned copy by the caller */
	t->dtype = dtype;
	t->ndim = nd;
	t->nelem = nelem;
	t->data = f->data + begin;
	t->nbytes = nbytes;
	t->file = f->path;
	t->file_offset = (uint64_t)(f->data - f->base) + begin;
	s->n++;
	return 0;
}

/* Validates one file image and appends its tensors (sorted by offset). */
static int parse_file(struct fg_st_set *s, struct st_file *f, int first_file, struct fg_err *err)
{
	const char *what = f->path;
	uint64_t hlen = 0, pos;
	size_t first = s->n, i;
	cJSON *root = NULL;
	const cJSON *e;
	int rc = 0, b;

	if (f->len < 8)
		return fg_err_set(err, FG_EFORMAT, "%s: not a safetensors file (%zu bytes)", what, f->len);
	for (b = 7; b >= 0; b--)
		hlen = hlen << 8 | f->base[b];
	if (hlen > FG_ST_HEADER_MAX)
		return fg_err_set(err, FG_EFORMAT,
				  "%s: not a safetensors file (header length %llu over the %llu limit)",
				  what, (unsigned long long)hlen, (unsigned long long)FG_ST_HEADER_MAX);
	if (hlen > f->len - 8)
		return fg_err_set(err, FG_EFORMAT,
				  "%s: truncated (header length %llu but only %zu bytes follow)", what,
				  (unsigned long long)hlen, f->len - 8);
	if (hlen < 2 || f->base[8] != '{')
		return fg_err_set(err, FG_EFORMAT, "%s: not a safetensors file (header is not a JSON object)",
				  what);
	f->data = f->base + 8 + hlen;
	f->data_len = f->len - 8 - (size_t)hlen;
	rc = fg_json_parse(&root, (const char *)f->base + 8, (size_t)hlen, what, err);
	if (rc)
		return rc;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fg_err_set(err, FG_EFORMAT, "%s: header is not a JSON object", what);
	}
	cJSON_ArrayForEach(e, root)
	{
		if (!strcmp(e->string, "__metadata__")) {
			const cJSON *m;

			if (!cJSON_IsObject(e)) {
				rc = fg_err_set(err, FG_EFORMAT, "%s: __metadata__ is not an object", what);
				break;
			}
			cJSON_ArrayForEach(m, e) if (!cJSON_IsString(m))
			{
				rc = fg_err_set(err, FG_EFORMAT, "%s: __metadata__ value %s is not a string",
						what, m->string);
				break;
			}
			if (rc)
				break;
			if (first_file && !s->meta) {
				s->meta = cJSON_Duplicate(e, 1);
				if (!s->meta) {
					rc = fg_err_set(err, FG_ENOMEM, "out of memory");
					break;
				}
			}
			continue;
		}
		rc = parse_entry(s, f, e, err);
		if (rc)
			break;
		s->t[s->n - 1].name = strdup(e->string);
		if (!s->t[s->n - 1].name) {
			s->n--;
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
	}
	cJSON_Delete(root);
	if (rc)
		return rc;
	if (s->n > first)
		qsort(s->t + first, s->n - first, sizeof(*s->t), cmp_offset);
	/* The tensors must tile the data region: no gap, no overlap, nothing left over. */
	pos = 0;
	for (i = first; i < s->n; i++) {
		uint64_t begin = (uint64_t)((const uint8_t *)s->t[i].data - f->data);

		if (begin < pos)
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: data overlaps the tensor before it",
					  what, s->t[i].name);
		if (begin > pos)
			return fg_err_set(err, FG_EFORMAT,
					  "%s: tensor %s: %llu unclaimed bytes before its data", what,
					  s->t[i].name, (unsigned long long)(begin - pos));
		pos = begin + s->t[i].nbytes;
	}
	if (pos != f->data_len)
		return fg_err_set(err, FG_EFORMAT, "%s: %llu bytes after the last tensor belong to none",
				  what, (unsigned long long)(f->data_len - pos));
	return 0;
}

/* Builds the by-name index and refuses duplicate names. */
static int index_names(struct fg_st_set *s, struct fg_err *err)
{
	size_t i;

	s->byname = malloc((s->n ? s->n : 1) * sizeof(*s->byname));
	if (!s->byname)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < s->n; i++)
		s->byname[i] = &s->t[i];
	qsort(s->byname, s->n, sizeof(*s->byname), cmp_name);
	for (i = 1; i < s->n; i++)
		if (!strcmp(s->byname[i]->name, s->byname[i - 1]->name))
			return fg_err_set(err, FG_EFORMAT, "%s: tensor %s: name appears twice%s%s",
					  s->byname[i]->file, s->byname[i]->name,
					  s->byname[i]->file != s->byname[i - 1]->file ? " (also in " : "",
					  s->byname[i]->file != s->byname[i - 1]->file ? s->byname[i - 1]->file : "");
	return 0;
}

static int map_file(struct st_file *f, struct fg_err *err)
{
	struct stat st;
	void *p;
	int fd;

	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "open %s: %s", f->path,
				  strerror(errno));
	if (fstat(fd, &st)) {
		close(fd);
		return fg_err_set(err, FG_EIO, "stat %s: %s", f->path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fg_err_set(err, FG_EFORMAT, "%s: not a regular file", f->path);
	}
	if (st.st_size < 8) {
		close(fd);
		return fg_err_set(err, FG_EFORMAT, "%s: not a safetensors file (%lld bytes)", f->path,
				  (long long)st.st_size);
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return fg_err_set(err, FG_EIO, "mmap %s: %s", f->path, strerror(errno));
	f->base = p;
	f->len = (size_t)st.st_size;
	f->mapped = 1;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	return 0;
}

void fg_st_free(struct fg_st_set *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n; i++)
		free((char *)s->t[i].name);
	for (i = 0; i < s->nfiles; i++) {
		if (s->files[i].mapped)
			munmap((void *)s->files[i].base, s->files[i].len);
		free(s->files[i].path);
	}
	free(s->files);
	free(s->t);
	free(s->byname);
	cJSON_Delete(s->meta);
	free(s);
}

static int set_new(struct fg_st_set **out, size_t nfiles, struct fg_err *err)
{
	struct fg_st_set *s = calloc(1, sizeof(*s));

	if (s)
		s->files = calloc(nfiles ? nfiles : 1, sizeof(*s->files));
	if (!s || !s->files) {
		free(s);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

/* A weight_map value without its leading "./" segments: transformers joins
 * the value to the checkpoint folder, where "./s1.safetensors" names
 * s1.safetensors; the rest must then be a safe relative path. */
static const char *wm_name(const char *v)
{
	while (v[0] == '.' && v[1] == '/')
		v += 2;
	return v;
}

/* A set of one file: with map, path's mapping; without, data (len bytes,
 * not owned), path then only naming it in errors. */
static int open_one(struct fg_st_set **out, const char *path, int map, const void *data, size_t len,
		    struct fg_err *err)
{
	struct fg_st_set *s;
	int rc;

	rc = set_new(&s, 1, err);
	if (rc)
		return rc;
	s->nfiles = 1;
	s->files[0].path = strdup(path);
	if (!s->files[0].path)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc && map) {
		rc = map_file(&s->files[0], err);
	} else if (!rc) {
		s->files[0].base = data;
		s->files[0].len = len;
	}
	if (!rc)
		rc = parse_file(s, &s->files[0], 1, err);
	if (!rc)
		rc = index_names(s, err);
	if (rc) {
		fg_st_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int fg_st_open_mem(struct fg_st_set **out, const void *data, size_t len, const char *what,
		   struct fg_err *err)
{
	*out = NULL;
	return open_one(out, what ? what : "(memory)", 0, data, len, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int open_index(struct fg_st_set **out, const char *index_path, struct fg_err *err)
{
	struct fg_buf text = FG_BUF_INIT, dir = FG_BUF_INIT, p = FG_BUF_INIT;
	const char **names = NULL, **keys = NULL;
	struct fg_st_set *s = NULL;
	const cJSON *wm, *e;
	cJSON *root = NULL;
	size_t n = 0, nu = 0, i;
	const char *slash;
	int rc;

	rc = fg_file_read(index_path, (size_t)256 << 20, &text, err);
	if (!rc)
		rc = fg_json_parse(&root, text.data ? text.data : "", text.len, index_path, err);
	if (rc)
		goto out;
	wm = fg_json_obj(root, "weight_map");
	if (!wm) {
		rc = fg_err_set(err, FG_EFORMAT, "%s: no weight_map object", index_path);
		goto out;
	}
	cJSON_ArrayForEach(e, wm) n++;
	names = calloc(n ? n : 1, sizeof(*names));
	keys = calloc(n ? n : 1, sizeof(*keys));
	if (!names || !keys) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	i = 0;
	cJSON_ArrayForEach(e, wm)
	{
		if (!cJSON_IsString(e) || !fg_path_is_safe_rel(wm_name(e->valuestring))) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: tensor %s: weight_map value is not a safe file name",
					index_path, e->string);
			goto out;
		}
		keys[i] = e->string;
		names[i++] = wm_name(e->valuestring);
	}
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (i = 1; i < n; i++)
		if (!strcmp(keys[i], keys[i - 1])) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: tensor %s: listed twice in weight_map",
					index_path, keys[i]);
			goto out;
		}
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++)
		if (!nu || strcmp(names[i], names[nu - 1]))
			names[nu++] = names[i];
	slash = strrchr(index_path, '/');
	rc = !slash ? fg_buf_puts(&dir, ".", err)
		    : fg_buf_append(&dir, index_path, slash == index_path ? 1 : (size_t)(slash - index_path), err);
	if (!rc)
		rc = set_new(&s, nu, err);
	for (i = 0; !rc && i < nu; i++) {
		fg_buf_reset(&p);
		rc = fg_path_join(&p, dir.data, names[i], err);
		if (rc)
			break;
		s->files[i].path = fg_buf_detach(&p, NULL);
		s->nfiles++;
		rc = map_file(&s->files[i], err);
		if (!rc)
			rc = parse_file(s, &s->files[i], i == 0, err);
	}
	if (!rc)
		rc = index_names(s, err);
	if (rc)
		goto out;
	/* The index and the shards must describe the same tensors, each in its file. */
	cJSON_ArrayForEach(e, wm)
	{
		const struct fg_st_tensor *t = fg_st_find(s, e->string);
		const char *base = "?";
		size_t j;

		if (!t) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: tensor %s: in weight_map but not in %s",
					index_path, e->string, e->valuestring);
			goto out;
		}
		for (j = 0; j < nu; j++)
			if (s->files[j].path == t->file)
				base = names[j];
		if (strcmp(base, wm_name(e->valuestring))) {
			rc = fg_err_set(err, FG_EFORMAT, "%s: tensor %s: weight_map says %s but it is in %s",
					index_path, e->string, e->valuestring, base);
			goto out;
		}
	}
	if (s->n != n) {
		for (i = 0; i < s->n; i++)
			if (!cJSON_GetObjectItemCaseSensitive(wm, s->t[i].name))
				break;
		rc = fg_err_set(err, FG_EFORMAT, "%s: tensor %s: not listed in %s", s->t[i < s->n ? i : 0].file,
				i < s->n ? s->t[i].name : "?", index_path);
	}
out:
	if (rc) {
		fg_st_free(s);
		s = NULL;
	}
	*out = s;
	free(names);
	free(keys);
	cJSON_Delete(root);
	fg_buf_release(&text);
	fg_buf_release(&dir);
	fg_buf_release(&p);
	return rc;
}

int fg_st_open(struct fg_st_set **out, const char *path, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	struct stat st;
	size_t len = strlen(path);
	int rc;

	*out = NULL;
	if (stat(path, &st))
		return fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "%s: %s", path,
				  strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		if (len >= 5 && !strcmp(path + len - 5, ".json"))
			return open_index(out, path, err);
		return open_one(out, path, 1, NULL, 0, err);
	}
	rc = fg_path_join(&p, path, FG_ST_INDEX_NAME, err);
	if (!rc && stat(p.data, &st) == 0)
		rc = open_index(out, p.data, err);
	else if (!rc) {
		fg_buf_reset(&p);
		rc = fg_path_join(&p, path, "model.safetensors", err);
		if (!rc && stat(p.data, &st))
			rc = fg_err_set(err, FG_ENOTFOUND, "%s: no %s or model.safetensors", path,
					FG_ST_INDEX_NAME);
		if (!rc)
			rc = open_one(out, p.data, 1, NULL, 0, err);
	}
	fg_buf_release(&p);
	return rc;
}

size_t fg_st_count(const struct fg_st_set *s)
{
	return s->n;
}

const struct fg_st_tensor *fg_st_at(const struct fg_st_set *s, size_t i)
{
	return i < s->n ? &s->t[i] : NULL;
}

const struct fg_st_tensor *fg_st_find(const struct fg_st_set *s, const char *name)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, s->byname[mid]->name);

		if (!c)
			return s->byname[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

size_t fg_st_nfiles(const struct fg_st_set *s)
{
	return s->nfiles;
}

const char *fg_st_file(const struct fg_st_set *s, size_t i)
{
	return i < s->nfiles ? s->files[i].path : NULL;
}

const uint8_t *fg_st_file_image(const struct fg_st_set *s, size_t i, const struct stat *st)
{
	const struct st_file *f = i < s->nfiles ? &s->files[i] : NULL;

	if (!f || !f->mapped || f->dev != st->st_dev || f->ino != st->st_ino ||
	    (uint64_t)st->st_size != (uint64_t)f->len)
		return NULL;
	return f->base;
}

void fg_st_release_addr(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
	uintptr_t b = ((uintptr_t)p + len) & ~(uintptr_t)(pg - 1);

	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

const char *fg_st_metadata(const struct fg_st_set *s, const char *key)
{
	return s->meta ? fg_json_str(s->meta, key) : NULL;
}

void fg_st_release_span(const struct fg_st_set *s, const struct fg_st_tensor *t, size_t off,
			size_t len)
{
	size_t i;

	for (i = 0; i < s->nfiles; i++)
		if (s->files[i].path == t->file)
			break;
	if (i == s->nfiles || !s->files[i].mapped || off >= t->nbytes)
		return;
	if (len > t->nbytes - off)
		len = t->nbytes - off;
	/* Only whole pages inside the span: neighbours may still be in use. */
	fg_st_release_addr((const uint8_t *)t->data + off, len);
}

void fg_st_release(const struct fg_st_set *s, const struct fg_st_tensor *t)
{
	fg_st_release_span(s, t, 0, t->nbytes);
}

/* ---- writing ---- */

#define WBUF_SIZE ((size_t)4 << 20)
#define WR_PIPES 2
#define MARK_ALL 0xffffffffu /* a mark's part: every piece queued when waited for */
/* Bytes per write() call: on this VM, 4 MiB writes spent several times the
 * kernel time of 256 KiB ones copying into the page cache (docs/bench.md). */
#ifndef PUT_SLICE
#define PUT_SLICE ((size_t)256 << 10)
#endif

struct wshard {
	char *name;       /* file name inside dir */
	size_t first, n;  /* tensors [first, first + n) */
	uint64_t data_bytes;
	uint64_t size;    /* whole file, set when closed */
	char sha256[FG_SHA256_HEX_LEN + 1];
	uint8_t *states;  /* chain states every w->every bytes (filled as hashed) */
	size_t n_states, k_states; /* due, and queued so far */
	struct stat st;   /* fstat after its last byte (and fsync), before close */
};

struct fg_st_writer {
	char *dir;
	struct fg_st_desc *d;  /* copies, names owned */
	size_t *nbytes;
	size_t n;
	struct wshard *sh;
	size_t nsh;
	cJSON *meta;           /* owned copy or NULL */
	size_t cur;            /* shard being written; nsh when none opened yet */
	size_t opened;         /* shards created so far */
	int fd;
	uint64_t left;         /* data bytes still due in the current shard */
	uint64_t total, written;
	char *wbuf[2];          /* small pieces gather here, in turn */
	uint64_t wseq[2];       /* the hash piece that last used each */
	int wpipe[2];           /* on which pipe */
	int wcur;
	size_t wlen;
	struct fg_buf hdr;      /* the current shard's length + header */
	uint64_t hdrseq;
	int hdrpipe;
	int finished;
	struct fg_sha256_pipe *pipe[WR_PIPES]; /* hash the shards, each on its own thread */
	int npipe;
	int sp;                 /* the current shard's pipe */
	uint64_t load[WR_PIPES]; /* bytes of the shards given to each */
	uint64_t dseq[WR_PIPES];   /* each pipe's last piece of data (not a digest's end) */
	uint64_t marked[WR_PIPES]; /* dseq at the previous mark */
	int async;              /* callers keep data until fg_st_writer_wait */
	int no_sync;
	uint64_t every;         /* chain states this far apart in each shard (0: none) */
	uint64_t fsize;         /* bytes written to it so far */
};

int fg_st_desc_nbytes(const struct fg_st_desc *d, size_t *out, struct fg_err *err)
{
	size_t n = fg_st_dtype_size(d->dtype), v;
	int i;

	if (!n)
		return fg_err_set(err, FG_EINVAL, "tensor %s: unknown dtype %d", d->name, d->dtype);
	if (d->ndim < 0 || d->ndim > FG_ST_MAX_DIMS)
		return fg_err_set(err, FG_EINVAL, "tensor %s: rank %d out of range", d->name, d->ndim);
	for (i = 0; i < d->ndim; i++) {
		if (d->shape[i] > 9007199254740992ULL || fg_size_mul(n, (size_t)d->shape[i], &v))
			return fg_err_set(err, FG_EINVAL, "tensor %s: size overflows", d->name);
		n = v;
	}
	*out = n;
	return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Queues len bytes at data for the current shard's digest, cut where a chain
 * state is due (every w->every bytes of the shard: the pipe reads the state
 * once it has hashed up to there). */
static int put_hash(struct fg_st_writer *w, const char *data, size_t len, struct fg_err *err)
{
	struct wshard *sh = &w->sh[w->cur];
	uint64_t at = w->fsize;
	int rc = 0;

	while (!rc && len) {
		size_t k = len;

		if (w->every && k > w->every - at % w->every)
			k = (size_t)(w->every - at % w->every);
		rc = fg_sha256_pipe_update(w->pipe[w->sp], data, k, &w->dseq[w->sp], err);
		at += k;
		data += k;
		len -= k;
		if (!rc && w->every && at % w->every == 0 && sh->k_states < sh->n_states)
			rc = fg_sha256_pipe_state(w->pipe[w->sp], sh->states + 32 * sh->k_states++, NULL,
						  err);
	}
	return rc;
}

/* Writes to the current shard and queues the bytes for the shard's digest
 * (the hashing thread reads them while this thread goes on). */
static int put(struct fg_st_writer *w, const void *data, size_t len, struct fg_err *err)
{
	int rc = put_hash(w, data, len, err);

	if (rc)
		return rc;
	const char *p = data;
	size_t left = len;

	while (left) {
		size_t k = left < PUT_SLICE ? left : PUT_SLICE;

		if (write_all(w->fd, p, k)) {
			int e = errno;

			return fg_err_set(err, e == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s/%s: %s",
					  w->dir, w->sh[w->cur].name, strerror(e));
		}
		p += k;
		left -= k;
	}
	w->fsize += len;
	return 0;
}

static int shard_path(struct fg_st_writer *w, size_t i, struct fg_buf *p, struct fg_err *err)
{
	fg_buf_reset(p);
	return fg_path_join(p, w->dir, w->sh[i].name, err);
}

/* Writes the gathered small pieces, then switches to the other buffer once
 * the hashing thread is done with it. */
static int flush_buf(struct fg_st_writer *w, struct fg_err *err)
{
	int rc;

	if (!w->wlen)
		return 0;
	rc = put(w, w->wbuf[w->wcur], w->wlen, err);
	w->wseq[w->wcur] = fg_sha256_pipe_last(w->pipe[w->sp]);
	w->wpipe[w->wcur] = w->sp;
	w->wcur ^= 1;
	w->wlen = 0;
	if (!rc)
		rc = fg_sha256_pipe_wait(w->pipe[w->wpipe[w->wcur]], w->wseq[w->wcur], err);
	return rc;
}

static int close_shard(struct fg_st_writer *w, struct fg_err *err)
{
	int rc;

	if (w->fd < 0)
		return 0;
	rc = flush_buf(w, err);
	if (!rc) {
		/* The digest lands in sh[cur].sha256 once hashed (finish waits). */
		rc = fg_sha256_pipe_final(w->pipe[w->sp], w->sh[w->cur].sha256, NULL, err);
		w->sh[w->cur].size = w->fsize;
	}
	if (!rc && !w->no_sync && fsync(w->fd))
		rc = fg_err_set(err, FG_EIO, "fsync %s/%s: %s", w->dir, w->sh[w->cur].name,
				strerror(errno));
	if (!rc && fstat(w->fd, &w->sh[w->cur].st))
		rc = fg_err_set(err, FG_EIO, "stat %s/%s: %s", w->dir, w->sh[w->cur].name,
				strerror(errno));
	if (close(w->fd) && !rc)
		rc = fg_err_set(err, FG_EIO, "close %s/%s: %s", w->dir, w->sh[w->cur].name,
				strerror(errno));
	w->fd = -1;
	return rc;
}

/* Creates shard i and writes its header. */
static int open_shard(struct fg_st_writer *w, size_t i, struct fg_err *err)
{
	struct fg_buf hdr = FG_BUF_INIT, p = FG_BUF_INIT;
	cJSON *root = cJSON_CreateObject();
	uint64_t off = 0;
	uint8_t le[8];
	size_t k;
	int rc = 0, b;

	/* The previous header's bytes may still be queued for hashing. */
	if (root)
		rc = fg_sha256_pipe_wait(w->pipe[w->hdrpipe], w->hdrseq, err);

	if (!root)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (k = w->sh[i].first; k < w->sh[i].first + w->sh[i].n; k++) {
		cJSON *e = cJSON_AddObjectToObject(root, w->d[k].name), *a, *o;
		int j;

		if (!e || !cJSON_AddStringToObject(e, "dtype", fg_st_dtype_name(w->d[k].dtype)) ||
		    !(a = cJSON_AddArrayToObject(e, "shape")) ||
		    !(o = cJSON_AddArrayToObject(e, "data_offsets"))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		for (j = 0; j < w->d[k].ndim; j++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber((double)w->d[k].shape[j]));
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
		off += w->nbytes[k];
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
	}
	if (!rc && w->meta)
		cJSON_AddItemReferenceToObject(root, "__metadata__", w->meta);
	if (!rc)
		rc = fg_json_write(&hdr, root, 0, err);
	while (!rc && hdr.len % 8)
		rc = fg_buf_putc(&hdr, ' ', err);
	cJSON_Delete(root);
	if (!rc)
		rc = shard_path(w, i, &p, err);
	if (!rc) {
		w->fd = open(p.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (w->fd < 0)
			rc = fg_err_set(err, FG_EIO, "create %s: %s", p.data, strerror(errno));
	}
	/* The file's whole size is known: reserve its blocks now, in one call,
	 * instead of block by block as the pages are written back (less kernel
	 * time per write here: docs/bench.md, "bake int4"), and run out of disk
	 * space here rather than half-way. Not every file system can. */
	if (!rc && fallocate(w->fd, 0, 0, (off_t)(8 + hdr.len + w->sh[i].data_bytes)) &&
	    errno != EOPNOTSUPP && errno != ENOSYS)
		rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "create %s: %s", p.data,
				strerror(errno));
	if (!rc && w->every) {
		uint64_t size = 8 + hdr.len + w->sh[i].data_bytes;

		w->sh[i].n_states = (size_t)((size - 1) / w->every);
		if (w->sh[i].n_states && !(w->sh[i].states = malloc(32 * w->sh[i].n_states)))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!rc) {
		w->cur = i;
		w->opened = i + 1;
		w->left = w->sh[i].data_bytes;
		w->fsize = 0;
		/* The shard goes to the pipe given the fewest bytes so far. */
		w->sp = 0;
		for (b = 1; b < w->npipe; b++)
			if (w->load[b] < w->load[w->sp])
				w->sp = b;
		w->load[w->sp] += 8 + hdr.len + w->sh[i].data_bytes;
		for (b = 0; b < 8; b++)
			le[b] = (uint8_t)((uint64_t)hdr.len >> (8 * b));
		fg_buf_reset(&w->hdr);
		rc = fg_buf_append(&w->hdr, le, 8, err);
		if (!rc)
			rc = fg_buf_append(&w->hdr, hdr.data, hdr.len, err);
		if (!rc)
			rc = put(w, w->hdr.data, w->hdr.len, err);
		w->hdrseq = fg_sha256_pipe_last(w->pipe[w->sp]);
		w->hdrpipe = w->sp;
	}
	fg_buf_release(&hdr);
	fg_buf_release(&p);
	return rc;
}

void fg_st_writer_free(struct fg_st_writer *w)
{
	struct fg_buf p = FG_BUF_INIT;
	size_t i;

	if (!w)
		return;
	/* First: the threads may still read buffers freed below. */
	for (i = 0; i < WR_PIPES; i++)
		fg_sha256_pipe_free(w->pipe[i]);
	if (w->fd >= 0)
		close(w->fd);
	if (!w->finished)
		for (i = 0; i < w->opened; i++)
			if (!shard_path(w, i, &p, NULL))
				unlink(p.data);
	fg_buf_release(&p);
	for (i = 0; i < w->n; i++)
		free((char *)w->d[i].name);
	for (i = 0; i < w->nsh; i++) {
		free(w->sh[i].name);
		free(w->sh[i].states);
	}
	free(w->d);
	free(w->nbytes);
	free(w->sh);
	free(w->dir);
	free(w->wbuf[0]);
	free(w->wbuf[1]);
	fg_buf_release(&w->hdr);
	cJSON_Delete(w->meta);
	free(w);
}

static int cmp_desc_name(const void *a, const void *b)
{
	return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

int fg_st_writer_new(struct fg_st_writer **out, const char *dir, const struct fg_st_desc *descs,
		     size_t n, uint64_t max_shard_bytes, const cJSON *metadata, struct fg_err *err)
{
	return fg_st_writer_new_states(out, dir, descs, n, max_shard_bytes, metadata, 0, err);
}

/* A pipe for the shards' digests: an own context when chain states are kept. */
static int new_pipe(struct fg_st_writer *w, struct fg_sha256_pipe **p, struct fg_err *err)
{
	return w->every ? fg_sha256_pipe_new_own(p, err) : fg_sha256_pipe_new(p, err);
}

int fg_st_writer_new_states(struct fg_st_writer **out, const char *dir,
			    const struct fg_st_desc *descs, size_t n, uint64_t max_shard_bytes,
			    const cJSON *metadata, uint64_t every, struct fg_err *err)
{
	struct fg_st_writer *w;
	const char ***sorted = NULL;
	uint64_t cur = 0;
	size_t i;
	int rc = 0;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	w->fd = -1;
	w->n = n;
	w->every = every;
	w->dir = strdup(dir);
	w->d = calloc(n ? n : 1, sizeof(*w->d));
	w->nbytes = calloc(n ? n : 1, sizeof(*w->nbytes));
	w->sh = calloc(n ? n : 1, sizeof(*w->sh));
	w->wbuf[0] = malloc(WBUF_SIZE);
	w->wbuf[1] = malloc(WBUF_SIZE);
	sorted = calloc(n ? n : 1, sizeof(*sorted));
	if (!w->dir || !w->d || !w->nbytes || !w->sh || !w->wbuf[0] || !w->wbuf[1] || !sorted) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if (every % 64)
		rc = fg_err_set(err, FG_EINVAL, "chain states every %llu bytes: not a multiple of 64",
				(unsigned long long)every);
	if (!rc)
		rc = new_pipe(w, &w->pipe[0], err);
	if (rc)
		goto out;
	w->npipe = 1;
	if (metadata) {
		const cJSON *m;

		cJSON_ArrayForEach(m, metadata) if (!cJSON_IsString(m))
		{
			rc = fg_err_set(err, FG_EINVAL, "metadata value %s is not a string", m->string);
			goto out;
		}
		w->meta = cJSON_Duplicate(metadata, 1);
		if (!w->meta) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		w->d[i] = descs[i];
		if (!descs[i].name || !descs[i].name[0] || !strcmp(descs[i].name, "__metadata__")) {
			rc = fg_err_set(err, FG_EINVAL, "tensor %zu: bad name", i);
			goto out;
		}
		w->d[i].name = strdup(descs[i].name);
		if (!w->d[i].name) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		sorted[i] = &w->d[i].name;
		rc = fg_st_desc_nbytes(&w->d[i], &w->nbytes[i], err);
		if (rc)
			goto out;
		/* Plan: a new shard when this tensor would push a non-empty one past the limit. */
		if (max_shard_bytes && w->nsh && w->sh[w->nsh - 1].n &&
		    cur + w->nbytes[i] > max_shard_bytes) {
			cur = 0;
			w->nsh++;
		}
		if (!w->nsh)
			w->nsh = 1;
		if (!w->sh[w->nsh - 1].n)
			w->sh[w->nsh - 1].first = i;
		w->sh[w->nsh - 1].n++;
		w->sh[w->nsh - 1].data_bytes += w->nbytes[i];
		cur += w->nbytes[i];
		w->total += w->nbytes[i];
	}
	if (!w->nsh)
		w->nsh = 1;
	qsort(sorted, n, sizeof(*sorted), cmp_desc_name);
	for (i = 1; i < n; i++)
		if (!strcmp(*sorted[i], *sorted[i - 1])) {
			rc = fg_err_set(err, FG_EINVAL, "tensor %s: name given twice", *sorted[i]);
			goto out;
		}
	for (i = 0; i < w->nsh; i++) {
		struct fg_buf nm = FG_BUF_INIT;

		rc = w->nsh == 1 ? fg_buf_puts(&nm, "model.safetensors", err)
				 : fg_buf_printf(&nm, err, "model-%05zu-of-%05zu.safetensors", i + 1, w->nsh);
		if (rc)
			goto out;
		w->sh[i].name = fg_buf_detach(&nm, NULL);
	}
	w->cur = w->nsh;
	rc = open_shard(w, 0, err);
out:
	free(sorted);
	if (rc) {
		fg_st_writer_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void fg_st_writer_no_sync(struct fg_st_writer *w)
{
	w->no_sync = 1;
}

void fg_st_writer_async(struct fg_st_writer *w)
{
	w->async = 1;
}

int fg_st_writer_hashers(struct fg_st_writer *w, int n, struct fg_err *err)
{
	int rc = 0;

	while (!rc && w->npipe < n && w->npipe < WR_PIPES) {
		rc = new_pipe(w, &w->pipe[w->npipe], err);
		if (!rc)
			w->npipe++;
	}
	return rc;
}

/* A mark holds, per pipe, its last piece of data if it took data since the
 * previous mark, else 0 (nothing to wait for: a shard's closing digest
 * holds no borrowed bytes); 32 bits each, MARK_ALL past. */
uint64_t fg_st_writer_mark(struct fg_st_writer *w)
{
	uint64_t m = 0;
	int i;

	for (i = 0; i < w->npipe; i++) {
		uint64_t last = w->dseq[i];

		if (last != w->marked[i])
			m |= (uint64_t)(last < MARK_ALL ? last : MARK_ALL) << (32 * i);
		w->marked[i] = last;
	}
	return m;
}

/* Pipe i's piece in mark m: 0 none, else its number (MARK_ALL: the last queued). */
static uint64_t mark_part(const struct fg_st_writer *w, uint64_t m, int i)
{
	uint64_t s = (m >> (32 * i)) & 0xffffffffu;

	return s == MARK_ALL ? fg_sha256_pipe_last(w->pipe[i]) : s;
}

int fg_st_writer_wait(struct fg_st_writer *w, uint64_t mark, struct fg_err *err)
{
	int i, rc = 0;

	for (i = 0; !rc && i < w->npipe; i++)
		if (mark_part(w, mark, i))
			rc = fg_sha256_pipe_wait(w->pipe[i], mark_part(w, mark, i), err);
	return rc;
}

int fg_st_writer_passed(const struct fg_st_writer *w, uint64_t mark)
{
	int i;

	for (i = 0; i < w->npipe; i++)
		if (fg_sha256_pipe_done(w->pipe[i]) < mark_part(w, mark, i))
			return 0;
	return 1;
}

int fg_st_writer_drain(struct fg_st_writer *w, struct fg_err *err)
{
	int i, rc = 0;

	for (i = 0; !rc && i < w->npipe; i++)
		rc = fg_sha256_pipe_drain(w->pipe[i], err);
	return rc;
}

size_t fg_st_writer_nfiles(const struct fg_st_writer *w)
{
	return w->nsh;
}

int fg_st_writer_file(const struct fg_st_writer *w, size_t i, const char **name, uint64_t *size,
		      char sha256_hex[FG_SHA256_HEX_LEN + 1])
{
	if (!w->finished || i >= w->nsh)
		return FG_EINVAL;
	*name = w->sh[i].name;
	*size = w->sh[i].size;
	memcpy(sha256_hex, w->sh[i].sha256, FG_SHA256_HEX_LEN + 1);
	return 0;
}

int fg_st_writer_file_states(const struct fg_st_writer *w, size_t i, const uint8_t **states,
			     size_t *n, struct stat *st)
{
	if (!w->finished || i >= w->nsh)
		return FG_EINVAL;
	*states = w->sh[i].states;
	*n = w->sh[i].k_states == w->sh[i].n_states ? w->sh[i].n_states : 0;
	if (st)
		*st = w->sh[i].st;
	return 0;
}

/* Moves to the next shard once the current one has all its bytes. */
static int advance(struct fg_st_writer *w, struct fg_err *err)
{
	int rc;

	while (w->left == 0 && w->cur + 1 < w->nsh) {
		rc = close_shard(w, err);
		if (!rc)
			rc = open_shard(w, w->cur + 1, err);
		if (rc)
			return rc;
	}
	return 0;
}

int fg_st_writer_write(struct fg_st_writer *w, const void *data, size_t len, struct fg_err *err)
{
	const char *p = data;
	int rc;

	if (w->finished || w->fd < 0)
		return fg_err_set(err, FG_EINVAL, "%s: writer is closed", w->dir);
	if (len > w->total - w->written)
		return fg_err_set(err, FG_EINVAL, "%s: %zu bytes more than the tensors announced",
				  w->dir, (size_t)(len - (w->total - w->written)));
	while (len) {
		size_t k;

		rc = advance(w, err);
		if (rc)
			return rc;
		k = len < w->left ? len : (size_t)w->left;
		if (w->wlen + k > WBUF_SIZE) {
			rc = flush_buf(w, err);
			if (rc)
				return rc;
		}
		if (k >= ((size_t)64 << 10)) { /* large pieces skip the extra copy */
			rc = flush_buf(w, err);
			if (!rc)
				rc = put(w, p, k, err);
			if (rc)
				return rc;
		} else {
			memcpy(w->wbuf[w->wcur] + w->wlen, p, k);
			w->wlen += k;
		}
		p += k;
		len -= k;
		w->left -= k;
		w->written += k;
	}
	/* Without fg_st_writer_async, data is the caller's again on return. */
	return w->async ? 0 : fg_st_writer_drain(w, err);
}

int fg_st_writer_finish(struct fg_st_writer *w, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT, text = FG_BUF_INIT;
	cJSON *root = NULL, *wm, *md;
	size_t i, k;
	int rc;

	if (w->finished)
		return 0;
	if (w->written != w->total)
		return fg_err_set(err, FG_EINVAL, "%s: %llu of %llu tensor bytes were written", w->dir,
				  (unsigned long long)w->written, (unsigned long long)w->total);
	rc = advance(w, err); /* trailing shards that hold only empty tensors */
	if (!rc)
		rc = close_shard(w, err);
	if (!rc)
		rc = fg_st_writer_drain(w, err); /* every shard's digest is in */
	if (!rc && w->nsh > 1) {
		root = cJSON_CreateObject();
		md = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
		wm = root ? cJSON_AddObjectToObject(root, "weight_map") : NULL;
		if (!md || !wm || !cJSON_AddNumberToObject(md, "total_size", (double)w->total))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		for (i = 0; !rc && i < w->nsh; i++)
			for (k = w->sh[i].first; !rc && k < w->sh[i].first + w->sh[i].n; k++)
				if (!cJSON_AddStringToObject(wm, w->d[k].name, w->sh[i].name))
					rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		if (!rc)
			rc = fg_json_write(&text, root, 1, err);
		if (!rc)
			rc = fg_path_join(&p, w->dir, FG_ST_INDEX_NAME, err);
		if (!rc)
			rc = fg_file_write_atomic(p.data, text.data, text.len, 0644, err);
	}
	cJSON_Delete(root);
	fg_buf_release(&p);
	fg_buf_release(&text);
	if (!rc)
		w->finished = 1;
	return rc;
}
