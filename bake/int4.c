/* int4.c - the INT4 quantizer kernel and the streaming checkpoint bake
 * (see int4.h; the arithmetic and its sources are in docs/formats/int4.md). */
#include "int4.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bf16.h"
#include "buf.h"
#include "engine/model.h"
#include "fsutil.h"
#include "json.h"
#include "lock.h"
#include "provenance.h"
#include "safetensors.h"
#include "store.h"
#include "version.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "int4.c reads bf16/f16/f32 weights in place and assumes a little-endian host"
#endif

#define MAX_GROUP 128
#define BF16_EPS_BITS 0x3c00u /* 2^-7, torch.finfo(torch.bfloat16).eps */
#define RNE_MAGIC 12582912.0f /* 1.5 * 2^23: x + M - M rounds |x| < 2^22 half to even */

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* The scale's bf16 bits for a group whose largest magnitude has the
 * (finite) fp32 bits amax: amax / 7.5 rounded to bf16, to nearest with ties
 * to even; a scale that rounds to zero (a group of zeros) is bf16's eps. */
static inline uint32_t scale_bits(uint32_t amax)
{
	uint32_t sb = f2u(u2f(amax) / 7.5f);

	sb = (sb + 0x7fffu + ((sb >> 16) & 1u)) >> 16;
	return sb ? sb : BF16_EPS_BITS;
}

/* One group: n (<= MAX_GROUP, multiple of 8) fp32 values (a BF16, F16 or
 * F32 weight widened exactly). Writes n/8 packed words and returns the
 * scale's bf16 bits; *nonfinite is set when a value is NaN or Inf. Written as
 * straight-line loops over fixed arrays so the compiler vectorizes them;
 * every operation is exact IEEE arithmetic, so the result does not depend on
 * the vector width. */
static inline uint16_t quant_group_f32(uint8_t *packed, const float *x, size_t n, int *nonfinite)
{
	uint32_t nib[MAX_GROUP];
	uint32_t amax = 0, sb;
	float s;
	size_t i, j;

	for (i = 0; i < n; i++) {
		uint32_t m = f2u(x[i]) & 0x7fffffffu;

		amax = m > amax ? m : amax;
	}
	if (amax >= 0x7f800000u) {
		*nonfinite = 1;
		return 0;
	}
	sb = scale_bits(amax);
	s = u2f(sb << 16);
	for (i = 0; i < n; i++) {
		uint32_t u = f2u(x[i] / s);
		float v;

		u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* bf16(w / s) */
		v = u2f(u);
		v = v < -8.0f ? -8.0f : v;
		v = v > 7.0f ? 7.0f : v;
		v = (v + RNE_MAGIC) - RNE_MAGIC;
		nib[i] = (uint32_t)((int32_t)v + 8);
	}
	for (j = 0; j < n / 8; j++) {
		const uint32_t *q = nib + 8 * j;
		uint32_t word = q[0] | q[1] << 4 | q[2] << 8 | q[3] << 12 | q[4] << 16 | q[5] << 20 |
				q[6] << 24 | q[7] << 28;

		memcpy(packed + 4 * j, &word, 4);
	}
	return (uint16_t)sb;
}

/* One group of n bf16 values in src: widened (exactly) and quantized by
 * quant_group_f32, so a group gives the same bytes whatever dtype held it. */
static inline uint16_t quant_group(uint8_t *packed, const uint8_t *src, size_t n, int *nonfinite)
{
	uint16_t h[MAX_GROUP];
	float x[MAX_GROUP];
	size_t i;

	memcpy(h, src, n * 2);
	for (i = 0; i < n; i++)
		x[i] = u2f((uint32_t)h[i] << 16);
	return quant_group_f32(packed, x, n, nonfinite);
}

#if defined(__x86_64__)
/* The same group on AVX2, 8 lanes at a time. Identical results: division,
 * the bf16 rounding (integer ops), clamping and rounding to an integer are
 * exact IEEE operations lane by lane, in the same order as above. */
__attribute__((target("avx2"))) static uint16_t quant_group_avx2(uint8_t *packed,
								  const uint8_t *src, size_t n,
								  int *nonfinite)
{
	const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
	const __m256i rbias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
	const __m256i himask = _mm256_set1_epi32((int)0xffff0000u);
	const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
	const __m256i eight = _mm256_set1_epi32(8);
	const __m256 lo = _mm256_set1_ps(-8.0f), hi = _mm256_set1_ps(7.0f);
	__m256i x[MAX_GROUP / 8], mx = _mm256_setzero_si256();
	__m128i m4;
	__m256 sv;
	uint32_t amax, sb;
	size_t j;

	for (j = 0; j < n / 8; j++) {
		__m128i h = _mm_loadu_si128((const __m128i *)(src + 16 * j));

		x[j] = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
		mx = _mm256_max_epi32(mx, _mm256_and_si256(x[j], absmask));
	}
	m4 = _mm_max_epi32(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
	m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
	m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
	amax = (uint32_t)_mm_cvtsi128_si32(m4);
	if (amax >= 0x7f800000u) {
		*nonfinite = 1;
		return 0;
	}
	sb = scale_bits(amax);
	sv = _mm256_set1_ps(u2f(sb << 16));
	for (j = 0; j < n / 8; j++) {
		__m256i u = _mm256_castps_si256(_mm256_div_ps(_mm256_castsi256_ps(x[j]), sv));
		__m256 v;
		__m256i q;
		__m128i o;

		u = _mm256_add_epi32(u, _mm256_add_epi32(rbias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
		v = _mm256_castsi256_ps(_mm256_and_si256(u, himask));
		v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
		v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		q = _mm256_sllv_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(v), eight), shifts);
		o = _mm_or_si128(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
		o = _mm_or_si128(o, _mm_shuffle_epi32(o, 0x4e));
		o = _mm_or_si128(o, _mm_shuffle_epi32(o, 0xb1));
		_mm_storeu_si32(packed + 4 * j, o);
	}
	return (uint16_t)sb;
}
#endif

typedef uint16_t (*group_fn)(uint8_t *, const uint8_t *, size_t, int *);

static group_fn pick_group_fn(void)
{
#if defined(__x86_64__)
	if (!getenv("FGPACK_NO_SIMD") && __builtin_cpu_supports("avx2"))
		return quant_group_avx2;
#endif
	return quant_group;
}

static group_fn the_group_fn;
static pthread_once_t group_fn_once = PTHREAD_ONCE_INIT;

static void init_group_fn(void)
{
	the_group_fn = pick_group_fn();
}

static int quant_rows_with(group_fn fn, uint8_t *packed, uint8_t *scales, const uint8_t *w,
			   size_t rows, size_t cols, size_t group, size_t *bad)
{
	size_t ng = cols / group, r, g, i;

	for (r = 0; r < rows; r++) {
		const uint8_t *row = w + r * cols * 2;

		for (g = 0; g < ng; g++) {
			int nonfinite = 0;
			uint16_t sb = fn(packed + (r * cols + g * group) / 2, row + g * group * 2, group,
					 &nonfinite);

			if (nonfinite) {
				for (i = 0; i < group; i++)
					if ((fg_le16(row + (g * group + i) * 2) & 0x7f80u) == 0x7f80u)
						break;
				*bad = r * cols + g * group + i;
				return -1;
			}
			fg_put_le16(scales + (r * ng + g) * 2, sb);
		}
	}
	return 0;
}

int fg_int4_quant_rows(uint8_t *packed, uint8_t *scales, const uint8_t *w, size_t rows,
		       size_t cols, size_t group, size_t *bad)
{
	pthread_once(&group_fn_once, init_group_fn);
	return quant_rows_with(the_group_fn, packed, scales, w, rows, cols, group, bad);
}

int fg_int4_quant_rows_scalar(uint8_t *packed, uint8_t *scales, const uint8_t *w, size_t rows,
			      size_t cols, size_t group, size_t *bad)
{
	return quant_rows_with(quant_group, packed, scales, w, rows, cols, group, bad);
}

int fg_int4_simd(void)
{
	pthread_once(&group_fn_once, init_group_fn);
	return the_group_fn != quant_group;
}

int fg_int4_quant_rows_dtype(uint8_t *packed, uint8_t *scales, const uint8_t *w, int dtype,
			     size_t rows, size_t cols, size_t group, size_t *bad)
{
	size_t ng = cols / group, es = dtype == FG_ST_F16 ? 2 : 4, r, g, i;
	float x[MAX_GROUP];

	if (dtype == FG_ST_BF16)
		return fg_int4_quant_rows(packed, scales, w, rows, cols, group, bad);
	for (r = 0; r < rows; r++) {
		const uint8_t *row = w + r * cols * es;

		for (g = 0; g < ng; g++) {
			int nonfinite = 0;
			uint16_t sb;

			for (i = 0; i < group; i++)
				x[i] = fg_st_f32_at(row, dtype, g * group + i);
			sb = quant_group_f32(packed + (r * cols + g * group) / 2, x, group, &nonfinite);
			if (nonfinite) {
				for (i = 0; i < group; i++)
					if (!isfinite(x[i]))
						break;
				*bad = r * cols + g * group + i;
				return -1;
			}
			fg_put_le16(scales + (r * ng + g) * 2, sb);
		}
	}
	return 0;
}

/* ---- which tensors ---- */

static const char *const linear_suffixes[] = {
	"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
	"self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
	"mlp.down_proj.weight",    "per_layer_input_gate.weight", "per_layer_projection.weight",
};

static const char *const text_prefixes[] = { "model.language_model.", "model." };

int fg_int4_is_target(const char *name)
{
	size_t p, k;

	for (p = 0; p < 2; p++) {
		size_t pl = strlen(text_prefixes[p]);
		const char *rest;

		if (strncmp(name, text_prefixes[p], pl))
			continue;
		rest = name + pl;
		if (!strcmp(rest, "per_layer_model_projection.weight"))
			return 1;
		if (strncmp(rest, "layers.", 7))
			continue;
		rest += 7;
		if (*rest < '0' || *rest > '9')
			continue;
		while (*rest >= '0' && *rest <= '9')
			rest++;
		if (*rest++ != '.')
			continue;
		for (k = 0; k < sizeof(linear_suffixes) / sizeof(linear_suffixes[0]); k++)
			if (!strcmp(rest, linear_suffixes[k]))
				return 1;
	}
	return 0;
}

/* ---- the bake ---- */

/* Input bytes per piece: quantized per round, passed through per write,
 * hashed per queued item. */
#define BLOCK_BYTES ((size_t)1 << 20)
/* Pass-through pieces straight from the mapping: big, so the hashing
 * threads' queues (64 pieces each) can hold a whole PLE table. */
#define PASS_BYTES ((size_t)128 << 20)

struct infile {
	char *name;        /* relative to src */
	char *path;
	int role;          /* IN_TENSORS, IN_INDEX, IN_CONFIG, IN_COPY */
	unsigned long long size;
	char sha256[FG_SHA256_HEX_LEN + 1];
	int have_digest;   /* sha256 is set */
	int by_stamp;      /* sha256 is the name of the store blob this file is a link to, */
	int by_seen;       /* or (by_stamp too) of the store's seen record of this file */
	long long since;   /* the clock before st0 (what a seen record is vouched from) */
	int hashed;        /* sha256 was computed from every byte read here */
	int stable;        /* hashed, and its stat did not move from open to last byte */
	struct stat st0;   /* fstat when opened */
};

enum { IN_TENSORS, IN_INDEX, IN_CONFIG, IN_COPY };

struct outfile {
	char *name;
	unsigned long long size;
	char sha256[FG_SHA256_HEX_LEN + 1];
};

struct job {
	const struct fg_st_tensor *t;
	int quant;
	int extra;         /* the --head int4 lm_head made from the embedding */
	int misfit;        /* a Linear left unquantized by ignore_misfits (its width) */
	char *base;        /* output name stem for quantized tensors (owned) */
};

struct bake {
	const char *src, *out;
	const struct fg_int4_opts *o;
	struct fg_st_set *set;
	struct infile *in;
	size_t n_in;
	struct outfile *outs;
	size_t n_out, cap_out;
	struct job *jobs;
	size_t n_jobs;
	char *tmp;         /* temporary output folder */
	int tmp_slot;      /* its fg_tmp_track_dir slot, or -1 */
	char **names;      /* descriptor names allocated by plan() */
	size_t n_names;
	struct fg_store *store; /* whose stamps may name inputs; NULL: none */
};

static int cmp_infile(const void *a, const void *b)
{
	return strcmp(((const struct infile *)a)->name, ((const struct infile *)b)->name);
}

static int cmp_outfile(const void *a, const void *b)
{
	return strcmp(((const struct outfile *)a)->name, ((const struct outfile *)b)->name);
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

#define MAX_DEPTH 32

static int add_in(struct bake *b, size_t *cap, const char *rel, struct fg_buf *path,
		  unsigned long long size, struct fg_err *err)
{
	if (b->n_in == *cap) {
		size_t nc = *cap ? *cap * 2 : 32;
		struct infile *n = realloc(b->in, nc * sizeof(*n));

		if (!n)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		b->in = n;
		*cap = nc;
	}
	memset(&b->in[b->n_in], 0, sizeof(b->in[0]));
	b->in[b->n_in].name = strdup(rel);
	if (!b->in[b->n_in].name)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	b->in[b->n_in].path = fg_buf_detach(path, NULL);
	b->in[b->n_in].size = size;
	b->n_in++;
	return 0;
}

/* Every file under src/rel (rel "" for src itself), recursively: what is
 * copied, hashed and listed (docs/formats/int4.md, "Other files"):
 *   - regular files, and links to regular files (copied as regular files);
 *   - folders are walked (at most MAX_DEPTH deep);
 *   - names starting with '.' (.git, .cache, .gitattributes) are skipped;
 *   - a link to a folder, a FIFO, socket or device, or a name that is not a
 *     safe relative path (control characters, backslash) is an error naming
 *     it: nothing is left out silently, and no link is followed out of src
 *     into a folder (loops, escapes). */
static int walk_inputs(struct bake *b, const char *rel, int depth, size_t *cap, struct fg_err *err)
{
	struct fg_buf dir = FG_BUF_INIT;
	DIR *d;
	struct dirent *e;
	int rc = *rel ? fg_path_join(&dir, b->src, rel, err) : fg_buf_puts(&dir, b->src, err);

	if (rc)
		return rc;
	d = opendir(dir.data);
	if (!d) {
		rc = fg_err_set(err, errno == ENOENT ? FG_ENOTFOUND : FG_EIO, "%s: %s", dir.data,
				strerror(errno));
		fg_buf_release(&dir);
		return rc;
	}
	while (!rc && (e = readdir(d))) {
		struct fg_buf p = FG_BUF_INIT, r = FG_BUF_INIT;
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		rc = fg_path_join(&p, dir.data, e->d_name, err);
		if (!rc)
			rc = *rel ? fg_path_join(&r, rel, e->d_name, err) : fg_buf_puts(&r, e->d_name, err);
		if (!rc && !fg_path_is_safe_rel(r.data))
			rc = fg_err_set(err, FG_EUNSUPPORTED,
					"%s: a file name with control characters or a backslash; rename it",
					p.data);
		if (!rc && lstat(p.data, &st))
			rc = fg_err_set(err, FG_EIO, "%s: %s", p.data, strerror(errno));
		if (!rc && S_ISLNK(st.st_mode)) {
			if (stat(p.data, &st))
				rc = fg_err_set(err, FG_EIO, "%s: a broken link (%s)", p.data, strerror(errno));
			else if (S_ISDIR(st.st_mode))
				rc = fg_err_set(err, FG_EUNSUPPORTED,
						"%s: a link to a folder is not followed; copy the folder in "
						"or remove the link", p.data);
		}
		if (!rc && S_ISDIR(st.st_mode)) {
			if (depth >= MAX_DEPTH)
				rc = fg_err_set(err, FG_EUNSUPPORTED, "%s: folders nested deeper than %d",
						p.data, MAX_DEPTH);
			else
				rc = walk_inputs(b, r.data, depth + 1, cap, err);
		} else if (!rc && S_ISREG(st.st_mode)) {
			rc = add_in(b, cap, r.data, &p, (unsigned long long)st.st_size, err);
		} else if (!rc) {
			rc = fg_err_set(err, FG_EUNSUPPORTED,
					"%s: not a regular file or folder (a FIFO, socket or device); "
					"remove it from the checkpoint folder", p.data);
		}
		fg_buf_release(&p);
		fg_buf_release(&r);
	}
	closedir(d);
	fg_buf_release(&dir);
	return rc;
}

/* The name of shard path sp (fg_st_file's) relative to src, as the input
 * walk names files; NULL if it is not under src. An index may name its shards
 * by relative paths with folders ("weights/a.safetensors": transformers joins
 * each weight_map value to the checkpoint folder), so a shard is matched by
 * that whole relative name, never by its last component alone. */
static const char *shard_rel(const struct bake *b, const char *sp)
{
	size_t n = strlen(b->src);

	while (n > 1 && b->src[n - 1] == '/')
		n--;
	if (strncmp(sp, b->src, n) || sp[n] != '/')
		return NULL;
	sp += n;
	while (*sp == '/')
		sp++;
	return sp;
}

static int list_inputs(struct bake *b, struct fg_err *err)
{
	size_t cap = 0, i, k;
	int rc = walk_inputs(b, "", 0, &cap, err);

	if (rc)
		return rc;
	qsort(b->in, b->n_in, sizeof(*b->in), cmp_infile);
	/* Roles: the set's shards carry tensors, wherever the index puts them;
	 * other .safetensors files at the top level are not part of the
	 * checkpoint and are left out (and not claimed as inputs). Other files
	 * in sub-folders are copied. */
	for (i = k = 0; i < b->n_in; i++) {
		struct infile f = b->in[i];
		size_t s;
		int shard = 0;

		for (s = 0; s < fg_st_nfiles(b->set); s++) {
			const char *rel = shard_rel(b, fg_st_file(b->set, s));

			if (rel && !strcmp(rel, f.name))
				shard = 1;
		}
		f.role = IN_COPY;
		if (shard)
			f.role = IN_TENSORS;
		else if (strchr(f.name, '/'))
			f.role = IN_COPY;
		else if (!strcmp(f.name, "config.json"))
			f.role = IN_CONFIG;
		else if (!strcmp(f.name, FG_ST_INDEX_NAME))
			f.role = IN_INDEX;
		else if (ends_with(f.name, ".safetensors"))
			f.role = -1;
		if (f.role < 0) {
			free(f.name);
			free(f.path);
			continue;
		}
		b->in[k++] = f;
	}
	b->n_in = k;
	return 0;
}

static int add_out(struct bake *b, const char *name, unsigned long long size, const char *hex,
		   struct fg_err *err)
{
	if (b->n_out == b->cap_out) {
		size_t nc = b->cap_out ? b->cap_out * 2 : 32;
		struct outfile *n = realloc(b->outs, nc * sizeof(*n));

		if (!n)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		b->outs = n;
		b->cap_out = nc;
	}
	b->outs[b->n_out].name = strdup(name);
	if (!b->outs[b->n_out].name)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	b->outs[b->n_out].size = size;
	memcpy(b->outs[b->n_out].sha256, hex, FG_SHA256_HEX_LEN + 1);
	b->n_out++;
	return 0;
}

/* Writes data as tmp/name and records its digest. */
static int emit_file(struct bake *b, const char *name, const void *data, size_t len,
		     struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	uint8_t d[FG_SHA256_LEN];
	char hex[FG_SHA256_HEX_LEN + 1];
	int rc = fg_path_join(&p, b->tmp, name, err);

	if (!rc)
		rc = fg_file_write_atomic(p.data, data, len, 0644, err);
	if (!rc)
		rc = fg_sha256_mem(data, len, d, err);
	if (!rc) {
		fg_hex_encode(d, sizeof(d), hex);
		rc = add_out(b, name, len, hex, err);
	}
	fg_buf_release(&p);
	return rc;
}

/* Input f was just opened as fd: records its stat and, unless --rehash, takes
 * the store blob's name as its digest when f is a hard link to that blob and
 * the blob's stamp still holds, or the digest of the store's seen record of
 * f when that holds (lib/store.h). */
static int open_input(struct bake *b, struct infile *f, int fd, int may_trust, struct fg_err *err)
{
	f->since = fg_store_seen_clock();
	if (fstat(fd, &f->st0))
		return fg_err_set(err, FG_EIO, "%s: %s", f->path, strerror(errno));
	if (may_trust && b->store && !b->o->rehash) {
		int by = fg_store_vouched(b->store, &f->st0, 1, f->sha256);

		f->by_stamp = by != 0;
		f->by_seen = by == FG_STORE_BY_SEEN;
		if (by)
			f->have_digest = 1;
	}
	return 0;
}

/* The last byte of input f was read through fd. A file named by its stamp
 * must not have moved meanwhile (its digest is not from the bytes read); a
 * hashed one is digested from exactly the bytes used, and only a stable one
 * gets its stamp noted later. */
static int close_input(struct infile *f, int fd, struct fg_err *err)
{
	struct stat now;

	if (fstat(fd, &now))
		return fg_err_set(err, FG_EIO, "%s: %s", f->path, strerror(errno));
	if (f->by_stamp && !fg_stat_unchanged(&f->st0, &now))
		return fg_err_set(err, FG_EIO,
				  "%s: changed while baking (its inode's size, mtime or ctime moved)",
				  f->path);
	f->stable = fg_stat_unchanged(&f->st0, &now);
	return 0;
}

/* A hashed input unchanged while hashed: when it is a hard link to the blob
 * its digest names, the store may trust that blob's name next time; any
 * other, its seen record (when it was last changed 2 s before). */
static void note_input(struct bake *b, const struct infile *f)
{
	if (b->store && f->hashed && f->stable)
		fg_store_note_hashed(b->store, f->sha256, &f->st0, 1, f->since, f->path);
}

/* Digest of a whole input file not streamed by the bake (config.json, the index). */
static int digest_input(struct bake *b, struct infile *f, struct fg_err *err)
{
	static const size_t bufsz = (size_t)256 << 10;
	struct fg_sha256 *h = NULL;
	unsigned long long n = 0;
	uint8_t d[FG_SHA256_LEN];
	char *buf = NULL;
	int fd = open(f->path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return fg_err_set(err, FG_EIO, "open %s: %s", f->path, strerror(errno));
	rc = open_input(b, f, fd, 1, err);
	if (!rc && !f->by_stamp) {
		buf = malloc(bufsz);
		rc = buf ? fg_sha256_new(&h, err) : fg_err_set(err, FG_ENOMEM, "out of memory");
		if (!rc)
			rc = fg_sha256_fd(h, fd, buf, bufsz, -1, &n, f->path, err);
		if (!rc)
			rc = fg_sha256_final(h, d, err);
		if (!rc) {
			fg_hex_encode(d, sizeof(d), f->sha256);
			f->hashed = 1;
			f->have_digest = 1;
		}
	}
	if (!rc)
		rc = close_input(f, fd, err);
	if (!rc)
		note_input(b, f);
	fg_sha256_free(h);
	free(buf);
	close(fd);
	return rc;
}

/* Copies input f to the output, hashing it on the way: the copy's digest is
 * the input's too (the same bytes, read once). */
static int copy_file(struct bake *b, struct infile *f, struct fg_err *err)
{
	struct fg_buf dst = FG_BUF_INIT;
	struct fg_sha256 *h = NULL;
	static const size_t bufsz = (size_t)1 << 20;
	char *buf = malloc(bufsz);
	unsigned long long total = 0;
	uint8_t d[FG_SHA256_LEN];
	char hex[FG_SHA256_HEX_LEN + 1];
	int in = -1, out = -1, rc;

	rc = buf ? fg_sha256_new(&h, err) : fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!rc)
		rc = fg_path_join(&dst, b->tmp, f->name, err);
	if (!rc && strchr(f->name, '/')) {
		char *slash = strrchr(dst.data, '/');

		*slash = '\0';
		rc = fg_mkdir_p(dst.data, 0755, err);
		*slash = '/';
	}
	if (!rc) {
		in = open(f->path, O_RDONLY | O_CLOEXEC);
		out = open(dst.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (in < 0 || out < 0)
			rc = fg_err_set(err, FG_EIO, "copy %s: %s", f->path, strerror(errno));
		if (!rc)
			rc = open_input(b, f, in, 0, err);
	}
	while (!rc) {
		ssize_t n = read(in, buf, bufsz), k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = fg_err_set(err, FG_EIO, "read %s: %s", f->path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		rc = fg_sha256_update(h, buf, (size_t)n, err);
		for (k = 0; !rc && k < n;) {
			ssize_t m = write(out, buf + k, (size_t)(n - k));

			if (m < 0 && errno == EINTR)
				continue;
			if (m < 0)
				rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_EIO, "write %s: %s",
						dst.data, strerror(errno));
			else
				k += m;
		}
		total += (unsigned long long)n;
	}
	if (!rc && !b->o->no_sync && fsync(out))
		rc = fg_err_set(err, FG_EIO, "fsync %s: %s", dst.data, strerror(errno));
	if (!rc && !b->o->no_sync && strchr(f->name, '/')) {
		char *slash = strrchr(dst.data, '/');

		*slash = '\0'; /* the sub-folder's entry for this file */
		rc = fg_fsync_dir(dst.data, err);
		*slash = '/';
	}
	if (!rc)
		rc = close_input(f, in, err);
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) && !rc)
		rc = fg_err_set(err, FG_EIO, "close %s: %s", dst.data, strerror(errno));
	if (!rc)
		rc = fg_sha256_final(h, d, err);
	if (!rc) {
		fg_hex_encode(d, sizeof(d), hex);
		rc = add_out(b, f->name, total, hex, err);
		memcpy(f->sha256, hex, sizeof(hex));
		f->hashed = 1;
		f->have_digest = 1;
		note_input(b, f);
	}
	fg_sha256_free(h);
	free(buf);
	fg_buf_release(&dst);
	return rc;
}

/* Short name of a tensor's file for messages: the path as opened. */
static int tensor_err(struct fg_err *err, int code, const struct fg_st_tensor *t, const char *what)
{
	return fg_err_set(err, code, "%s: tensor %s: %s", t->file, t->name, what);
}

/* The largest group (128, 64, 32) dividing the input width of every Linear
 * the bake would quantize (head: the --head int4 head's source, or NULL), 0 when
 * none does: the hint of the width error. */
static int fitting_group(const struct fg_st_set *set, const struct fg_st_tensor *head)
{
	static const int groups[] = { 128, 64, 32 };
	size_t n = fg_st_count(set), i, k;

	for (k = 0; k < 3; k++) {
		int fits = !head || head->ndim != 2 || head->shape[1] % (uint64_t)groups[k] == 0;

		for (i = 0; i < n && fits; i++) {
			const struct fg_st_tensor *t = fg_st_at(set, i);

			if (fg_int4_is_target(t->name) && t->ndim == 2 && t->shape[1] % (uint64_t)groups[k])
				fits = 0;
		}
		if (fits)
			return groups[k];
	}
	return 0;
}

static int plan(struct bake *b, struct fg_st_desc **descs_out, size_t *nd_out, struct fg_err *err)
{
	size_t n = fg_st_count(b->set), i, nd = 0;
	const struct fg_st_tensor *head_src = NULL, *lm = fg_st_find(b->set, "lm_head.weight");
	struct fg_st_desc *d;
	char msg[200];
	size_t n_quant = 0, n_misfit = 0;
	int rc = 0;

	if (b->o->head_int4 && !lm) {
		head_src = fg_st_find(b->set, "model.language_model.embed_tokens.weight");
		if (!head_src)
			head_src = fg_st_find(b->set, "model.embed_tokens.weight");
		if (!head_src)
			return fg_err_set(err, FG_ENOTFOUND,
					  "%s: --head int4 needs lm_head.weight or the token embedding "
					  "(model.language_model.embed_tokens.weight)", b->src);
	}
	b->jobs = calloc(n + 1, sizeof(*b->jobs));
	b->names = calloc(3 * (n + 1), sizeof(*b->names));
	d = calloc(3 * (n + 1), sizeof(*d));
	if (!b->jobs || !d || !b->names) {
		free(d);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (i = 0; i <= n && !rc; i++) {
		const struct fg_st_tensor *t = i < n ? fg_st_at(b->set, i) : head_src;
		struct job *j = &b->jobs[b->n_jobs];
		const char *stem;

		if (!t)
			break;
		j->t = t;
		j->extra = i == n;
		j->quant = i == n || fg_int4_is_target(t->name) || (b->o->head_int4 && t == lm);
		/* a decoder Linear the group does not fit, left as it is when
		 * asked (the head asked for in INT4 is not: refused below) */
		j->misfit = j->quant && b->o->ignore_misfits && i < n && t != lm && t->ndim == 2 &&
			    t->shape[1] % (uint64_t)b->o->group;
		j->quant &= !j->misfit;
		n_quant += (size_t)j->quant;
		n_misfit += (size_t)j->misfit;
		b->n_jobs++;
		if (!j->quant) {
			d[nd].name = t->name;
			d[nd].dtype = t->dtype;
			d[nd].ndim = t->ndim;
			memcpy(d[nd].shape, t->shape, sizeof(t->shape));
			nd++;
			continue;
		}
		if (t->dtype != FG_ST_BF16 && t->dtype != FG_ST_F16 && t->dtype != FG_ST_F32) {
			snprintf(msg, sizeof(msg), "dtype %s is not supported for INT4 (BF16, F16, F32)",
				 fg_st_dtype_name(t->dtype));
			rc = tensor_err(err, FG_EUNSUPPORTED, t, msg);
			break;
		}
		if (t->ndim != 2 || t->shape[0] == 0 || t->shape[1] == 0) {
			rc = tensor_err(err, FG_EFORMAT, t, "a Linear weight must be a non-empty matrix");
			break;
		}
		if (t->shape[1] % (uint64_t)b->o->group) {
			int fit = fitting_group(b->set, b->o->head_int4 ? (lm ? lm : head_src) : NULL);

			if (b->o->ignore_misfits)
				snprintf(msg, sizeof(msg),
					 "input width %llu is not a multiple of the group size %d "
					 "(--head int4 needs a group that divides it; --ignore-misfits "
					 "leaves only the decoder's Linears unquantized)",
					 (unsigned long long)t->shape[1], b->o->group);
			else if (fit)
				snprintf(msg, sizeof(msg),
					 "input width %llu is not a multiple of the group size %d "
					 "(--group %d fits every Linear of this checkpoint)",
					 (unsigned long long)t->shape[1], b->o->group, fit);
			else
				snprintf(msg, sizeof(msg),
					 "input width %llu is not a multiple of the group size %d "
					 "(no --group fits every Linear of this checkpoint; "
					 "--ignore-misfits leaves such Linears unquantized)",
					 (unsigned long long)t->shape[1], b->o->group);
			rc = tensor_err(err, FG_EINVAL, t, msg);
			break;
		}
		stem = i == n ? "lm_head.weight" : t->name;
		j->base = strndup(stem, strlen(stem) - strlen(".weight"));
		if (!j->base) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		{
			struct fg_buf nm = FG_BUF_INIT;
			static const char *const sfx[3] = { ".weight_packed", ".weight_scale", ".weight_shape" };
			int k;

			for (k = 0; k < 3 && !rc; k++) {
				fg_buf_reset(&nm);
				rc = fg_buf_printf(&nm, err, "%s%s", j->base, sfx[k]);
				d[nd].name = rc ? NULL : fg_buf_detach(&nm, NULL);
				b->names[b->n_names++] = (char *)d[nd].name;
				d[nd].dtype = k == 0 ? FG_ST_I32 : k == 1 ? FG_ST_BF16 : FG_ST_I64;
				d[nd].ndim = k == 2 ? 1 : 2;
				d[nd].shape[0] = k == 2 ? 2 : t->shape[0];
				d[nd].shape[1] = k == 0 ? t->shape[1] / 8 : t->shape[1] / (uint64_t)b->o->group;
				nd++;
			}
			fg_buf_release(&nm);
		}
	}
	if (!rc && !n_quant && n_misfit)
		rc = fg_err_set(err, FG_EINVAL,
				"%s: no Linear's input width is a multiple of the group size %d: nothing to quantize",
				b->src, b->o->group);
	*descs_out = d;
	*nd_out = nd;
	return rc;
}


/* The quantizer's threads: started once per bake and kept, so a block
 * costs no thread start. A block is cut into chunks of rows that the
 * calling thread and the workers take in turn; a worker the scheduler keeps
 * waiting (the hashing threads may hold the cores) takes fewer, so the
 * caller waits only for chunks already taken. Rows are independent, so the
 * bytes do not depend on who quantized which chunk. */
#define QMAX 64
#define CHUNK_BYTES ((size_t)64 << 10)

struct qpool {
	pthread_mutex_t m;
	pthread_cond_t go, fin;
	pthread_t th[QMAX];
	int nth, stop;
	uint64_t gen;
	/* the block */
	const uint8_t *w;
	int dtype;
	uint8_t *packed, *scales;
	size_t rows, cols, group, chunk, nchunks, next, ndone;
	size_t badchunk, bad; /* the first failing chunk (nchunks: none) and its element */
};

static void qpool_chunk(struct qpool *q, size_t c)
{
	size_t es = fg_st_dtype_size(q->dtype), r0 = c * q->chunk, bad = 0;
	size_t n = q->rows - r0 < q->chunk ? q->rows - r0 : q->chunk;
	int rc = fg_int4_quant_rows_dtype(q->packed + r0 * q->cols / 2,
					  q->scales + r0 * (q->cols / q->group) * 2,
					  q->w + r0 * q->cols * es, q->dtype, n, q->cols, q->group, &bad);

	pthread_mutex_lock(&q->m);
	if (rc && c < q->badchunk) {
		q->badchunk = c;
		q->bad = r0 * q->cols + bad;
	}
	if (++q->ndone == q->nchunks)
		pthread_cond_signal(&q->fin);
}

/* Takes chunks of the current block until none is left; m held on entry
 * and on return. */
static void qpool_take(struct qpool *q)
{
	while (q->next < q->nchunks) {
		size_t c = q->next++;

		pthread_mutex_unlock(&q->m);
		qpool_chunk(q, c); /* returns with m held */
	}
}

static void *qpool_main(void *arg)
{
	struct qpool *q = arg;
	uint64_t seen = 0;

	pthread_mutex_lock(&q->m);
	for (;;) {
		while (q->gen == seen && !q->stop)
			pthread_cond_wait(&q->go, &q->m);
		if (q->stop)
			break;
		seen = q->gen;
		qpool_take(q);
	}
	pthread_mutex_unlock(&q->m);
	return NULL;
}

/* A pool of nthreads - 1 workers (none for 1; fewer if threads cannot start). */
static int qpool_new(struct qpool **out, int nthreads, struct fg_err *err)
{
	struct qpool *q = calloc(1, sizeof(*q));
	int i;

	*out = NULL;
	if (!q)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	pthread_mutex_init(&q->m, NULL);
	pthread_cond_init(&q->go, NULL);
	pthread_cond_init(&q->fin, NULL);
	for (i = 0; i < nthreads - 1 && i < QMAX; i++) {
		if (pthread_create(&q->th[i], NULL, qpool_main, q))
			break;
		q->nth++;
	}
	*out = q;
	return 0;
}

static void qpool_free(struct qpool *q)
{
	int i;

	if (!q)
		return;
	pthread_mutex_lock(&q->m);
	q->stop = 1;
	pthread_cond_broadcast(&q->go);
	pthread_mutex_unlock(&q->m);
	for (i = 0; i < q->nth; i++)
		pthread_join(q->th[i], NULL);
	pthread_mutex_destroy(&q->m);
	pthread_cond_destroy(&q->go);
	pthread_cond_destroy(&q->fin);
	free(q);
}

/* Quantizes rows [0, rows) of a block of dtype (BF16, F16, F32) with the
 * pool; -1 with *bad (the first non-finite element in row order). */
static int quant_block(struct qpool *q, const uint8_t *w, int dtype, uint8_t *packed,
		       uint8_t *scales, size_t rows, size_t cols, size_t group, size_t *bad)
{
	size_t row_bytes = cols * fg_st_dtype_size(dtype);
	int rc = 0;

	pthread_mutex_lock(&q->m);
	q->w = w;
	q->dtype = dtype;
	q->packed = packed;
	q->scales = scales;
	q->rows = rows;
	q->cols = cols;
	q->group = group;
	q->chunk = row_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / row_bytes;
	q->nchunks = (rows + q->chunk - 1) / q->chunk;
	q->next = q->ndone = 0;
	q->badchunk = q->nchunks;
	if (q->nth && q->nchunks > 1) {
		q->gen++;
		pthread_cond_broadcast(&q->go);
	}
	qpool_take(q);
	while (q->ndone < q->nchunks)
		pthread_cond_wait(&q->fin, &q->m);
	if (q->badchunk < q->nchunks) {
		*bad = q->bad;
		rc = -1;
	}
	pthread_mutex_unlock(&q->m);
	return rc;
}

/* The pipeline. The main thread takes the input shards in file order,
 * quantizes (on -j threads) or passes through each piece and
 * hands the output to the writer, whose own thread hashes the output shards;
 * a second hashing thread hashes each input piece where the quantizer read
 * it. Every byte is read once, hashed once on input and once on output, the
 * two digests running beside the quantizer and the writes (docs/bench.md).
 * A buffer is reused only once both hashing threads are past it: the retire
 * queue below, whose length bounds the memory in flight (RETIRE + 1 input
 * buffers of BLOCK_BYTES and as many output buffers of BLOCK_BYTES / 4).
 * The pieces come straight from the input file's mapping (fg_st_open's), no
 * copy; the pages every reader is done with are dropped in runs. On the
 * thirty-second session's VM that took the full E4B body's system time from
 * 4.81 to 2.56 CPU-s (medians, docs/bench.md); the fourth session's VM had
 * measured the mapping slower. FG_BAKE_PREAD=1 reads through read() into
 * the ring of buffers instead, for such comparisons. */
#define RETIRE 8
/* Mapped input dropped from the resident set in runs of this many bytes. */
#define RELEASE_BYTES ((size_t)32 << 20)

struct retired {
	uint64_t in_seq, out_mark;
	const struct fg_st_tensor *t; /* a span of t to drop (jobs read from the mapping) */
	size_t t_off, t_len;
	void *mem;                 /* output buffer to free, or NULL */
	int slot;                  /* packed buffer slot to give back, or -1 */
	int inslot;                /* input buffer slot to give back, or -1 */
	const uint8_t *mp;         /* a piece of the input file's mapping to drop, or NULL */
	size_t mlen;
};

/* A run of mapped input (contiguous pieces, up to RELEASE_BYTES) that the
 * hashing threads may still read: dropped once they are past its marks.
 * Mapped pieces hold no buffer, so they do not wait in the retire queue:
 * the writer may run ahead of the digests (a big shard hashed on one
 * thread while the next shards are baked and hashed on another). */
struct mrun {
	uint64_t in_seq, out_mark;
	const uint8_t *p;
	size_t len;
};

struct flow {
	struct fg_sha256_pipe *in;  /* input files' digests */
	struct fg_st_writer *w;
	const struct fg_st_set *set;
	size_t hashed;              /* bytes of the current input file read and queued */
	struct retired q[RETIRE];
	size_t qhead, qlen;
	uint8_t *packed[RETIRE + 1]; /* BLOCK_BYTES / 4 each */
	int slot_busy[RETIRE + 1];
	int fd;                      /* current input file */
	const char *path;
	int hash_in;                 /* 0: its digest is known (a store stamp), bytes not hashed */
	uint8_t *inbuf[RETIRE + 1];  /* BLOCK_BYTES each */
	int in_busy[RETIRE + 1];
	int cur_inslot;              /* the piece flow_get handed out */
	const uint8_t *map;          /* the current file's image, or NULL: read through fd */
	const uint8_t *cur_mp;       /* the piece flow_get handed out from map */
	struct mrun *mq;             /* mapped runs in use, oldest first: mq[mh .. mn) */
	size_t mh, mn, mcap;
	size_t mbytes;               /* their bytes */
	size_t mlag;                 /* at most this many (bounds the resident set) */
	struct qpool *pool;          /* the quantizer's threads */
};

static int flow_init(struct flow *f, const struct fg_st_set *set, struct fg_st_writer *w,
		     int threads, struct fg_err *err)
{
	size_t k;

	memset(f, 0, sizeof(*f));
	f->set = set;
	f->w = w;
	f->fd = -1;
	f->cur_inslot = -1;
	/* Mapped input held for the digests: up to twice the largest tensor, so
	 * a big pass-through tensor can be queued whole (peak RSS stays within
	 * the three times the largest tensor + 256 MB). */
	f->mlag = (size_t)256 << 20;
	for (k = 0; k < fg_st_count(set); k++)
		if (fg_st_at(set, k)->nbytes > f->mlag / 2)
			f->mlag = 2 * fg_st_at(set, k)->nbytes;
	for (k = 0; k <= RETIRE; k++) {
		f->packed[k] = malloc(BLOCK_BYTES / 4);
		f->inbuf[k] = malloc(BLOCK_BYTES);
		if (!f->packed[k] || !f->inbuf[k])
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (qpool_new(&f->pool, threads, err))
		return FG_ENOMEM;
	return fg_sha256_pipe_new(&f->in, err);
}

/* Per hashing thread, the later of two writer marks (32-bit parts). */
static uint64_t mark_max(uint64_t a, uint64_t b)
{
	uint64_t lo = (a & 0xffffffffu) > (b & 0xffffffffu) ? a & 0xffffffffu : b & 0xffffffffu;
	uint64_t hi = (a >> 32) > (b >> 32) ? a >> 32 : b >> 32;

	return hi << 32 | lo;
}

/* Drops the oldest mapped run from the resident set, waiting for the
 * hashing threads first when wait is set (else only when they are past
 * it: returns 1 when they are not). Runs of RELEASE_BYTES: each drop is a
 * TLB flush on every core running the process's threads. */
static int mq_pop(struct flow *f, int wait, struct fg_err *err)
{
	struct mrun *m = &f->mq[f->mh];
	int rc = 0;

	if (!wait && (fg_sha256_pipe_done(f->in) < m->in_seq || !fg_st_writer_passed(f->w, m->out_mark)))
		return 1;
	if (wait && m->in_seq)
		rc = fg_sha256_pipe_wait(f->in, m->in_seq, err);
	if (wait && !rc)
		rc = fg_st_writer_wait(f->w, m->out_mark, err);
	if (rc)
		return rc;
	fg_st_release_addr(m->p, m->len);
	f->mbytes -= m->len;
	if (++f->mh == f->mn)
		f->mh = f->mn = 0;
	return 0;
}

/* Adds mapped piece [p, p + len) with its marks (merged into the newest run
 * when it continues it), then drops what is done; waits while more than
 * mlag bytes are held. */
static int mq_add(struct flow *f, const uint8_t *p, size_t len, uint64_t in_seq, uint64_t out_mark,
		  struct fg_err *err)
{
	struct mrun *t = f->mn > f->mh ? &f->mq[f->mn - 1] : NULL;
	int rc = 0;

	if (t && t->p + t->len == p && t->len < RELEASE_BYTES) {
		t->len += len;
		t->in_seq = in_seq > t->in_seq ? in_seq : t->in_seq;
		t->out_mark = mark_max(t->out_mark, out_mark);
	} else {
		if (f->mn == f->mcap && f->mh) { /* slide down */
			memmove(f->mq, f->mq + f->mh, (f->mn - f->mh) * sizeof(*f->mq));
			f->mn -= f->mh;
			f->mh = 0;
		}
		if (fg_grow(&f->mq, &f->mcap, f->mn, sizeof(*f->mq)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		f->mq[f->mn].in_seq = in_seq;
		f->mq[f->mn].out_mark = out_mark;
		f->mq[f->mn].p = p;
		f->mq[f->mn].len = len;
		f->mn++;
	}
	f->mbytes += len;
	while (!rc && f->mn > f->mh && f->mbytes > f->mlag)
		rc = mq_pop(f, 1, err);
	while (!rc && f->mn - f->mh > 1) { /* the newest may still grow */
		rc = mq_pop(f, 0, err);
		if (rc > 0)
			return 0; /* the oldest is still being read */
	}
	return rc;
}

/* Waits for the oldest retired piece, then lets it go. */
static int flow_pop(struct flow *f, struct fg_err *err)
{
	struct retired *r = &f->q[f->qhead];
	int rc = 0;

	if (r->in_seq)
		rc = fg_sha256_pipe_wait(f->in, r->in_seq, err);
	if (!rc)
		rc = fg_st_writer_wait(f->w, r->out_mark, err);
	if (!rc && r->t)
		fg_st_release_span(f->set, r->t, r->t_off, r->t_len);
	free(r->mem);
	if (r->slot >= 0)
		f->slot_busy[r->slot] = 0;
	if (r->inslot >= 0)
		f->in_busy[r->inslot] = 0;
	f->qhead = (f->qhead + 1) % RETIRE;
	f->qlen--;
	return rc;
}

/* Queues r (filled by the caller but for the marks) behind the pieces before it. */
static int flow_retire(struct flow *f, struct retired r, struct fg_err *err)
{
	int rc = 0;

	r.in_seq = fg_sha256_pipe_last(f->in);
	r.out_mark = fg_st_writer_mark(f->w);
	if (r.mp) {
		rc = mq_add(f, r.mp, r.mlen, r.in_seq, r.out_mark, err);
		r.mp = NULL;
		if (!r.mem && r.slot < 0 && r.inslot < 0 && !r.t)
			return rc; /* nothing else to give back */
	}
	if (f->qlen == RETIRE) {
		int r2 = flow_pop(f, err);

		rc = rc ? rc : r2;
	}
	f->q[(f->qhead + f->qlen) % RETIRE] = r;
	f->qlen++;
	if (rc) {
		free(r.mem);
		f->q[(f->qhead + f->qlen - 1) % RETIRE].mem = NULL;
	}
	return rc;
}

static int flow_drain(struct flow *f, struct fg_err *err)
{
	int rc = 0, r2;

	while (f->qlen) {
		r2 = flow_pop(f, err);
		if (!rc)
			rc = r2;
	}
	while (f->mn > f->mh) {
		r2 = mq_pop(f, 1, err);
		if (r2)
			f->mn = f->mh; /* an error: the pages go with the mapping */
		if (!rc)
			rc = r2;
	}
	return rc;
}

/* A free packed buffer: the one the retire queue gave back longest ago. */
static int flow_slot(struct flow *f, struct fg_err *err)
{
	int k, rc;

	for (;;) {
		for (k = 0; k <= RETIRE; k++)
			if (!f->slot_busy[k]) {
				f->slot_busy[k] = 1;
				return k;
			}
		rc = flow_pop(f, err); /* cannot loop long: RETIRE + 1 slots, RETIRE in the queue */
		if (rc)
			return -1;
	}
}

static void flow_free(struct flow *f)
{
	size_t k;

	while (f->qlen) {
		free(f->q[f->qhead].mem);
		f->qhead = (f->qhead + 1) % RETIRE;
		f->qlen--;
	}
	fg_sha256_pipe_free(f->in); /* waits: it may still read the input buffers */
	f->in = NULL;
	free(f->mq);
	f->mq = NULL;
	qpool_free(f->pool);
	f->pool = NULL;
	for (k = 0; k <= RETIRE; k++) {
		free(f->packed[k]);
		free(f->inbuf[k]);
	}
	if (f->fd >= 0)
		close(f->fd);
}

/* A free input buffer (as flow_slot). */
static int flow_inslot(struct flow *f, struct fg_err *err)
{
	int k;

	for (;;) {
		for (k = 0; k <= RETIRE; k++)
			if (!f->in_busy[k]) {
				f->in_busy[k] = 1;
				return k;
			}
		if (flow_pop(f, err))
			return -1;
	}
}

/* File bytes [hashed, hashed + len): in the file's mapping, or read into a
 * free buffer (*slot, else -1); queued for the input digest. NULL on error. */
static const uint8_t *flow_read(struct flow *f, size_t len, int *slot, struct fg_err *err)
{
	const uint8_t *p;
	size_t got = 0;
	int k = -1;

	if (f->map) {
		p = f->map + f->hashed;
	} else {
		k = flow_inslot(f, err);
		if (k < 0)
			return NULL;
		while (got < len) {
			ssize_t n = pread(f->fd, f->inbuf[k] + got, len - got, (off_t)(f->hashed + got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fg_err_set(err, FG_EIO, "read %s: %s", f->path,
					   n < 0 ? strerror(errno) : "file shrank while baking");
				f->in_busy[k] = 0;
				return NULL;
			}
			got += (size_t)n;
		}
		p = f->inbuf[k];
	}
	if (f->hash_in && fg_sha256_pipe_update(f->in, p, len, NULL, err)) {
		if (k >= 0)
			f->in_busy[k] = 0;
		return NULL;
	}
	f->hashed += len;
	*slot = k;
	return p;
}

/* Reads and queues file bytes up to end for the input digest (the bytes
 * between tensors: the header), in pieces of at most BLOCK_BYTES. */
static int flow_hash_to(struct flow *f, size_t end, struct fg_err *err)
{
	int rc = 0;

	if (!f->hash_in) { /* nothing to hash: the bytes between tensors are not needed */
		if (f->hashed < end)
			f->hashed = end;
		return 0;
	}
	while (!rc && f->hashed < end) {
		size_t n = end - f->hashed < BLOCK_BYTES ? end - f->hashed : BLOCK_BYTES;

		struct retired r;
		int k;
		const uint8_t *p = flow_read(f, n, &k, err);

		if (!p)
			return err && err->code ? err->code : FG_EIO;
		memset(&r, 0, sizeof(r));
		r.slot = -1;
		r.inslot = k;
		r.mp = f->map ? p : NULL;
		r.mlen = n;
		rc = flow_retire(f, r, err);
	}
	return rc;
}

/* Bytes [off, off + len) of t: read from the current file into a buffer
 * (and hashed) when streamed, else borrowed from the set's mapping. */
static const uint8_t *flow_get(struct flow *f, const struct fg_st_tensor *t, int streamed,
			       size_t off, size_t len, struct fg_err *err)
{
	const uint8_t *p;

	if (!streamed)
		return (const uint8_t *)t->data + off;
	if (flow_hash_to(f, (size_t)t->file_offset + off, err))
		return NULL;
	p = flow_read(f, len, &f->cur_inslot, err);
	f->cur_mp = f->map ? p : NULL;
	return p;
}

/* Retires a piece of t once read and written; mem/slot are the output buffer. */
static int flow_done(struct flow *f, const struct fg_st_tensor *t, int streamed, size_t off,
		     size_t len, void *mem, int slot, struct fg_err *err)
{
	struct retired r;

	memset(&r, 0, sizeof(r));
	r.mem = mem;
	r.slot = slot;
	r.inslot = f->cur_inslot;
	f->cur_inslot = -1;
	r.mp = f->cur_mp;
	r.mlen = len;
	f->cur_mp = NULL;
	if (!streamed) {
		r.t = t;
		r.t_off = off;
		r.t_len = len;
	}
	return flow_retire(f, r, err);
}

static int bake_tensor(struct bake *b, struct flow *f, const struct job *j, int streamed,
		       struct fg_err *err)
{
	const struct fg_st_tensor *t = j->t;
	size_t rows, cols, group = (size_t)b->o->group, brows, r, scale_bytes, es;
	uint8_t *scales = NULL, shape[16];
	int rc = 0, k;

	if (!j->quant) {
		size_t off, piece = streamed && f->map ? PASS_BYTES : BLOCK_BYTES;

		for (off = 0; off < t->nbytes && !rc; off += piece) {
			size_t len = t->nbytes - off < piece ? t->nbytes - off : piece;
			const uint8_t *src = flow_get(f, t, streamed, off, len, err);

			rc = src ? fg_st_writer_write(f->w, src, len, err) : FG_EIO;
			if (!rc)
				rc = flow_done(f, t, streamed, off, len, NULL, -1, err);
		}
		return rc;
	}
	rows = (size_t)t->shape[0];
	cols = (size_t)t->shape[1];
	es = fg_st_dtype_size(t->dtype); /* 2 (BF16, F16) or 4 (F32): packed output fits BLOCK_BYTES / 4 */
	if (cols * es > BLOCK_BYTES)
		return tensor_err(err, FG_EUNSUPPORTED, t,
				  es == 2 ? "rows wider than 512K columns are not supported"
					  : "F32 rows wider than 256K columns are not supported");
	brows = BLOCK_BYTES / (cols * es);
	scale_bytes = rows * (cols / group) * 2;
	scales = malloc(scale_bytes);
	if (!scales)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (r = 0; r < rows && !rc; r += brows) {
		size_t n = rows - r < brows ? rows - r : brows, bad = 0;
		const uint8_t *src = flow_get(f, t, streamed, r * cols * es, n * cols * es, err);
		int slot = src ? flow_slot(f, err) : -1;

		if (slot < 0) {
			rc = err && err->code ? err->code : FG_EIO;
			break;
		}
		if (quant_block(f->pool, src, t->dtype, f->packed[slot], scales + r * (cols / group) * 2, n,
				cols, group, &bad)) {
			char msg[128];

			f->slot_busy[slot] = 0;
			snprintf(msg, sizeof(msg), "non-finite value (NaN or Inf) at [%zu, %zu]",
				 r + bad / cols, bad % cols);
			rc = tensor_err(err, FG_EINVAL, t, msg);
			break;
		}
		rc = fg_st_writer_write(f->w, f->packed[slot], n * cols / 2, err);
		if (rc)
			f->slot_busy[slot] = 0;
		else
			rc = flow_done(f, t, streamed, r * cols * es, n * cols * es, NULL, slot, err);
	}
	if (!rc)
		rc = fg_st_writer_write(f->w, scales, scale_bytes, err);
	for (k = 0; k < 8; k++) {
		shape[k] = (uint8_t)((uint64_t)rows >> (8 * k));
		shape[8 + k] = (uint8_t)((uint64_t)cols >> (8 * k));
	}
	if (!rc)
		rc = fg_st_writer_write(f->w, shape, sizeof(shape), err); /* small: copied */
	/* scales is freed once the output digest is past it. */
	if (!rc) {
		struct retired rt;

		memset(&rt, 0, sizeof(rt));
		rt.mem = scales;
		rt.slot = -1;
		rt.inslot = -1;
		return flow_retire(f, rt, err);
	}
	/* On failure the writer's thread may still read scales: wait for it. */
	fg_st_writer_drain(f->w, NULL);
	free(scales);
	return rc;
}

/* Walks every shard of the set in file order (hashing each whole file once),
 * baking its tensors on the way; then the jobs that read a second time from
 * the mapping (the lm_head made from the embedding). */
static int stream_all(struct bake *b, struct flow *f, struct fg_int4_report *rep,
		      struct fg_err *err)
{
	size_t fi, i = 0, k;
	int rc = 0;

	for (fi = 0; !rc && fi < fg_st_nfiles(b->set); fi++) {
		const char *fp = fg_st_file(b->set, fi), *rel = shard_rel(b, fp);
		struct infile *inf = NULL;

		for (k = 0; rel && k < b->n_in; k++)
			if (b->in[k].role == IN_TENSORS && !strcmp(b->in[k].name, rel))
				inf = &b->in[k];
		if (!inf)
			return fg_err_set(err, FG_ENOTFOUND, "%s: not among the input files", fp);
		f->hashed = 0;
		if (f->fd >= 0)
			close(f->fd);
		f->path = fp;
		f->fd = open(fp, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0)
			return fg_err_set(err, FG_EIO, "open %s: %s", fp, strerror(errno));
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		rc = open_input(b, inf, f->fd, 1, err);
		f->hash_in = !inf->by_stamp;
		/* The tensors' offsets are the mapping's: the file opened now must be it. */
		f->map = rc ? NULL : fg_st_file_image(b->set, fi, &inf->st0);
		if (!rc && !f->map)
			rc = fg_err_set(err, FG_EIO,
					"%s: changed since its header was read (another file, or another size)",
					fp);
		if (getenv("FG_BAKE_PREAD"))
			f->map = NULL;
		for (; !rc && i < b->n_jobs && !b->jobs[i].extra && b->jobs[i].t->file == fp; i++) {
			rc = bake_tensor(b, f, &b->jobs[i], 1, err);
			if (b->jobs[i].quant)
				rep->n_quantized++;
			else
				rep->n_passed++;
			rep->n_misfit += (size_t)b->jobs[i].misfit;
		}
		if (!rc)
			rc = flow_hash_to(f, (size_t)inf->size, err);
		if (!rc) {
			uint8_t extra;

			if (pread(f->fd, &extra, 1, (off_t)inf->size) != 0)
				rc = fg_err_set(err, FG_EIO, "%s: changed while baking", fp);
		}
		if (!rc)
			rc = close_input(inf, f->fd, err);
		/* Its mapping was read twice over (quantizer, digest): both saw one file. */
		if (!rc && f->map && !inf->stable)
			rc = fg_err_set(err, FG_EIO,
					"%s: changed while baking (its inode's size, mtime or ctime moved)", fp);
		/* The digest lands in inf->sha256 once the hashing thread gets there. */
		if (!rc && f->hash_in) {
			rc = fg_sha256_pipe_final(f->in, inf->sha256, NULL, err);
			inf->hashed = 1;
			inf->have_digest = 1;
		}
	}
	for (; !rc && i < b->n_jobs; i++) {
		rc = bake_tensor(b, f, &b->jobs[i], 0, err);
		rep->n_quantized++;
	}
	/* The jobs above read a second time through the mapping: a shard named
	 * by its stamp must still be the file it was. */
	for (k = 0; !rc && k < b->n_in; k++) {
		struct stat now;

		if (b->in[k].by_stamp && b->in[k].role == IN_TENSORS &&
		    (stat(b->in[k].path, &now) || !fg_stat_unchanged(&b->in[k].st0, &now)))
			rc = fg_err_set(err, FG_EIO,
					"%s: changed while baking (its inode's size, mtime or ctime moved)",
					b->in[k].path);
	}
	if (!rc)
		rc = flow_drain(f, err);
	if (!rc)
		rc = fg_sha256_pipe_drain(f->in, err);
	for (k = 0; !rc && k < b->n_in; k++)
		if (b->in[k].role == IN_TENSORS)
			note_input(b, &b->in[k]);
	return rc;
}

/* 1 when some tensor of the checkpoint has a name holding part. */
static int has_tensor_part(const struct fg_st_set *set, const char *part)
{
	size_t n = fg_st_count(set), i;

	for (i = 0; i < n; i++)
		if (strstr(fg_st_at(set, i)->name, part))
			return 1;
	return 0;
}

/* Appends to ign the entry for one decoder Linear left unquantized (its
 * tensor name), unless it is there already: "re:.*\.<module>$", <module>
 * being the name without its text prefix and ".weight", dots escaped, so it
 * matches the module under transformers' names (model.layers.N...,
 * model.language_model.layers.N...) and vLLM's (language_model.model.
 * layers.N...) alike. vLLM fuses q/k/v_proj into qkv_proj and gate/up_proj
 * into gate_up_proj and refuses a fused layer whose parts are not all ignored
 * or all not, even a part the checkpoint lacks (the v_proj of an
 * attention_k_eq_v full layer, built from k); the parts share their input
 * width, so they are left together, and one entry names the whole group:
 * "self_attn\.(q|k|v|qkv)_proj$", "mlp\.(gate|up|gate_up)_proj$". */
static int ignore_entry(cJSON *ign, const char *name, struct fg_err *err)
{
	static const char *const fused[][2] = {
		{ "self_attn.q_proj", "self_attn\\.(q|k|v|qkv)_proj" },
		{ "self_attn.k_proj", "self_attn\\.(q|k|v|qkv)_proj" },
		{ "self_attn.v_proj", "self_attn\\.(q|k|v|qkv)_proj" },
		{ "mlp.gate_proj", "mlp\\.(gate|up|gate_up)_proj" },
		{ "mlp.up_proj", "mlp\\.(gate|up|gate_up)_proj" },
	};
	struct fg_buf e = FG_BUF_INIT;
	const char *rest = name, *end = name + strlen(name) - strlen(".weight"), *tail = NULL;
	const cJSON *it;
	cJSON *item;
	size_t k;
	int rc;

	if (!strncmp(name, "model.language_model.", 21))
		rest = name + 21;
	else if (!strncmp(name, "model.", 6))
		rest = name + 6;
	for (k = 0; k < sizeof(fused) / sizeof(fused[0]) && !tail; k++) {
		size_t fl = strlen(fused[k][0]);

		if ((size_t)(end - rest) > fl && end[-(ptrdiff_t)fl - 1] == '.' &&
		    !strncmp(end - fl, fused[k][0], fl)) {
			tail = fused[k][1];
			end -= fl;
		}
	}
	rc = fg_buf_puts(&e, "re:.*\\.", err);
	for (; !rc && rest < end; rest++)
		rc = *rest == '.' ? fg_buf_puts(&e, "\\.", err) : fg_buf_putc(&e, *rest, err);
	if (!rc && tail)
		rc = fg_buf_puts(&e, tail, err);
	if (!rc)
		rc = fg_buf_puts(&e, "$", err);
	cJSON_ArrayForEach(it, ign) {
		if (!rc && cJSON_IsString(it) && !strcmp(it->valuestring, e.data)) {
			fg_buf_release(&e);
			return 0;
		}
	}
	if (!rc && !((item = cJSON_CreateString(e.data)) && cJSON_AddItemToArray(ign, item)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_buf_release(&e);
	return rc;
}

/* The quantization_config vLLM's compressed-tensors loader reads. */
static int add_quant_config(cJSON *cfg, const struct bake *b, struct fg_err *err)
{
	cJSON *qc, *groups, *g0, *targets, *wts, *ign, *tc;
	/* Linears passed through, by the part of their tensors' names that
	 * shows them, and the entry matching their module names (vLLM matches
	 * "re:" entries with re.match, others exactly). The experts are 3-D in
	 * transformers, not Linears, but vLLM's FusedMoE asks for
	 * "<layer>.moe.experts.0.gate_proj" and would expect INT4 experts unless
	 * that name is ignored; router.proj is a Linear in transformers, and
	 * vLLM's GateLinear is unquantized (docs/formats/int4.md). */
	static const char *const ignore[][2] = {
		{ "vision_tower.", "re:.*vision_tower.*" },
		{ "audio_tower.", "re:.*audio_tower.*" },
		{ "embed_vision.", "re:.*embed_vision.*" },
		{ "embed_audio.", "re:.*embed_audio.*" },
		{ ".router.proj.weight", "re:.*\\.router\\.proj$" },
		{ ".experts.", "re:.*\\.experts\\..*" },
	};
	size_t i;

	if (cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config"))
		return fg_err_set(err, FG_EUNSUPPORTED,
				  "%s/config.json: already quantized (has a quantization_config)", b->src);
	qc = cJSON_AddObjectToObject(cfg, "quantization_config");
	if (!qc || !cJSON_AddStringToObject(qc, "quant_method", "compressed-tensors") ||
	    !cJSON_AddStringToObject(qc, "format", "pack-quantized") ||
	    !cJSON_AddStringToObject(qc, "quantization_status", "compressed") ||
	    !cJSON_AddNullToObject(qc, "kv_cache_scheme") ||
	    !cJSON_AddNullToObject(qc, "global_compression_ratio") ||
	    !(groups = cJSON_AddObjectToObject(qc, "config_groups")) ||
	    !(g0 = cJSON_AddObjectToObject(groups, "group_0")) ||
	    !(targets = cJSON_AddArrayToObject(g0, "targets")) ||
	    !cJSON_AddNullToObject(g0, "input_activations") ||
	    !cJSON_AddNullToObject(g0, "output_activations") ||
	    !(wts = cJSON_AddObjectToObject(g0, "weights")) ||
	    !cJSON_AddNumberToObject(wts, "num_bits", 4) || !cJSON_AddStringToObject(wts, "type", "int") ||
	    !cJSON_AddTrueToObject(wts, "symmetric") ||
	    !cJSON_AddStringToObject(wts, "strategy", "group") ||
	    !cJSON_AddNumberToObject(wts, "group_size", b->o->group) ||
	    !cJSON_AddFalseToObject(wts, "dynamic") || !cJSON_AddNullToObject(wts, "actorder") ||
	    !cJSON_AddNullToObject(wts, "block_structure") ||
	    !cJSON_AddStringToObject(wts, "observer", "minmax") ||
	    !(ign = cJSON_AddArrayToObject(qc, "ignore")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
	/* Every Linear left unquantized must be ignored, or vLLM would expect
	 * INT4 for it, and nothing else is listed. lm_head is a Linear in
	 * transformers even when tied to the embedding (compressed-tensors lists
	 * it then too). */
	if (!b->o->head_int4)
		cJSON_AddItemToArray(ign, cJSON_CreateString("lm_head"));
	for (i = 0; i < sizeof(ignore) / sizeof(ignore[0]); i++)
		if (has_tensor_part(b->set, ignore[i][0]))
			cJSON_AddItemToArray(ign, cJSON_CreateString(ignore[i][1]));
	for (i = 0; i < b->n_jobs; i++)
		if (b->jobs[i].misfit) {
			int rc = ignore_entry(ign, b->jobs[i].t->name, err);

			if (rc)
				return rc;
		}
	if (b->o->head_int4) {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, "tie_word_embeddings");
		cJSON_AddFalseToObject(cfg, "tie_word_embeddings");
		tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
		if (cJSON_IsObject(tc)) {
			cJSON_DeleteItemFromObjectCaseSensitive(tc, "tie_word_embeddings");
			cJSON_AddFalseToObject(tc, "tie_word_embeddings");
		}
	}
	return 0;
}

/* The output's tree digest, by the lock's definition (lib/lock.h). */
static int tree_digest(char out[FG_SHA256_HEX_LEN + 1], const struct outfile *f, size_t n,
		       struct fg_err *err)
{
	struct fg_lock_file *lf = calloc(n ? n : 1, sizeof(*lf));
	size_t i;
	int rc;

	if (!lf)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		lf[i].path = f[i].name;
		lf[i].size = f[i].size;
		memcpy(lf[i].sha256, f[i].sha256, sizeof(lf[i].sha256));
	}
	rc = fg_lock_tree_digest(out, lf, n, err);
	free(lf);
	return rc;
}

/* The output is written in ".<out>.fgpack-tmp.<pid>" beside it and renamed
 * at the end. A SIGINT, SIGTERM or SIGHUP removes it from cmd/'s handler
 * (fg_tmp_track_dir) rather than by a flag this code would poll: the bake
 * spends its time in worker and writer threads and in long reads, fsyncs and
 * store waits, where a flag would be seen late or never, while the handler
 * needs nothing from them. A SIGKILL's is removed by the next bake of out
 * (the dead pid in its name), never a live one's. */
static int make_tmp(struct bake *b, struct fg_err *err)
{
	struct fg_buf p = FG_BUF_INIT;
	int rc = fg_tmp_dir_make(b->out, &p, &b->tmp_slot, err);

	if (rc) {
		fg_buf_release(&p);
		return rc;
	}
	b->tmp = fg_buf_detach(&p, NULL);
	return 0;
}

static int check_out(const char *out, struct fg_err *err)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int empty = 1;

	if (stat(out, &st)) {
		if (errno == ENOENT)
			return 0;
		return fg_err_set(err, FG_EIO, "%s: %s", out, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return fg_err_set(err, FG_EINVAL, "%s: exists and is not a folder", out);
	d = opendir(out);
	if (!d)
		return fg_err_set(err, FG_EIO, "%s: %s", out, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty ? 0 : fg_err_set(err, FG_EINVAL, "%s: already exists and is not empty", out);
}

/* The store whose stamps may name inputs: opts->store, else the default
 * store when it exists (a bake never creates one). */
static int open_store(struct bake *b, struct fg_err *err)
{
	int rc = fg_store_open_existing(&b->store, b->o->store, err);

	if (rc && b->o->store)
		fg_err_wrap(err, "--store");
	return rc;
}

void fg_bake_note_shards(const struct fg_store *st, const struct fg_st_writer *w, const char *dir)
{
	struct fg_buf p = FG_BUF_INIT;
	size_t i;

	for (i = 0; i < fg_st_writer_nfiles(w); i++) {
		const char *nm;
		const uint8_t *states;
		uint64_t sz;
		size_t n;
		char hex[FG_SHA256_HEX_LEN + 1];
		struct stat sb;

		fg_buf_reset(&p);
		if (fg_st_writer_file(w, i, &nm, &sz, hex) ||
		    fg_st_writer_file_states(w, i, &states, &n, &sb) || fg_path_join(&p, dir, nm, NULL) ||
		    fg_store_seen_note_written(st, hex, &sb, p.data))
			continue;
		if (n)
			fg_store_states_note(st, hex, FG_STORE_STATES_EVERY, states, n);
	}
	fg_buf_release(&p);
}

static int write_statement(struct bake *b, time_t started, struct fg_int4_report *rep,
			   struct fg_err *err)
{
	struct fg_prov_item *subj = calloc(b->n_out + 1, sizeof(*subj));
	struct fg_prov_item *deps = calloc(b->n_in + 1, sizeof(*deps));
	const cJSON **ann = calloc(b->n_in + 1, sizeof(*ann));
	cJSON *by_read = cJSON_CreateObject(), *by_stamp = cJSON_CreateObject();
	cJSON *by_seen = cJSON_CreateObject();
	cJSON *ext = cJSON_CreateObject(), *inl = cJSON_CreateObject(), *bp = cJSON_CreateArray(), *o, *dg;
	struct fg_buf text = FG_BUF_INIT, path = FG_BUF_INIT;
	struct fg_prov p;
	char inv[96];
	size_t i;
	int rc = 0;

	if (!subj || !deps || !ext || !inl || !bp || !ann || !by_read || !by_stamp || !by_seen ||
	    !cJSON_AddStringToObject(by_read, "fgpack_digest", "read") ||
	    !cJSON_AddStringToObject(by_stamp, "fgpack_digest", "store") ||
	    !cJSON_AddStringToObject(by_seen, "fgpack_digest", "seen")) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < b->n_out; i++) {
		subj[i].name = b->outs[i].name;
		subj[i].sha256 = b->outs[i].sha256;
	}
	for (i = 0; i < b->n_in; i++) {
		deps[i].name = b->in[i].name;
		deps[i].sha256 = b->in[i].sha256;
		ann[i] = b->in[i].by_seen ? by_seen : b->in[i].by_stamp ? by_stamp : by_read;
	}
	cJSON_AddStringToObject(ext, "source", b->src);
	cJSON_AddStringToObject(ext, "output", b->out);
	cJSON_AddStringToObject(ext, "scheme", "int4 symmetric round-to-nearest, per group");
	cJSON_AddStringToObject(ext, "format", "compressed-tensors pack-quantized");
	cJSON_AddNumberToObject(ext, "group_size", b->o->group);
	cJSON_AddStringToObject(ext, "head", b->o->head_int4 ? "int4" : "keep");
	cJSON_AddNumberToObject(inl, "threads", b->o->threads);
	if (b->store)
		cJSON_AddStringToObject(inl, "store", fg_store_root(b->store));
	cJSON_AddBoolToObject(inl, "rehash", b->o->rehash != 0);
	cJSON_AddNumberToObject(ext, "max_shard_bytes",
				(double)(b->o->max_shard_bytes ? b->o->max_shard_bytes : FG_INT4_SHARD_BYTES));
	o = cJSON_CreateObject();
	cJSON_AddItemToArray(bp, o);
	cJSON_AddStringToObject(o, "name", "tree_digest");
	/* the digest is over a text listing; mediaType is only its media type
	 * (RFC 6838), and how the listing is made goes to annotations */
	cJSON_AddStringToObject(o, "mediaType", "text/plain");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "annotations"), "content",
				"sha256 over \"<sha256> <size> <path>\\n\" lines of the output files sorted by path");
	dg = cJSON_AddObjectToObject(o, "digest");
	cJSON_AddStringToObject(dg, "sha256", rep->tree_digest);
	snprintf(inv, sizeof(inv), "bake-int4-%lld-%ld", (long long)started, (long)getpid());
	memset(&p, 0, sizeof(p));
	p.build_type = "https://github.com/fgpack/fgpack/blob/main/docs/formats/int4.md#bake-int4-v1";
	p.subjects = subj;
	p.n_subjects = b->n_out;
	p.deps = deps;
	p.n_deps = b->n_in;
	p.dep_annotations = ann;
	p.external_params = ext;
	p.internal_params = inl;
	p.byproducts = bp;
	p.invocation_id = inv;
	p.started_on = started;
	p.finished_on = time(NULL);
	rc = fg_prov_statement_text(&text, &p, err);
	if (!rc)
		rc = fg_buf_printf(&path, err, "%s.intoto.json", b->out);
	if (!rc)
		rc = fg_file_write_atomic(path.data, text.data, text.len, 0644, err);
	if (!rc)
		snprintf(rep->statement, sizeof(rep->statement), "%s", path.data);
out:
	free(subj);
	free(deps);
	free(ann);
	cJSON_Delete(by_read);
	cJSON_Delete(by_stamp);
	cJSON_Delete(by_seen);
	cJSON_Delete(ext);
	cJSON_Delete(inl);
	cJSON_Delete(bp);
	fg_buf_release(&text);
	fg_buf_release(&path);
	return rc;
}

int fg_int4_bake(const char *src, const char *out, const struct fg_int4_opts *opts,
		 struct fg_int4_report *rep, struct fg_err *err)
{
	struct bake b;
	struct fg_buf cfgtext = FG_BUF_INIT, cfgout = FG_BUF_INIT, p = FG_BUF_INIT;
	struct fg_st_desc *descs = NULL;
	struct fg_st_writer *w = NULL;
	struct flow flow;
	struct fg_err local_err;
	cJSON *cfg = NULL;
	size_t nd = 0, i;
	time_t started = time(NULL);
	int rc;

	if (!err)
		err = &local_err;
	memset(&flow, 0, sizeof(flow));
	memset(&b, 0, sizeof(b));
	memset(rep, 0, sizeof(*rep));
	b.tmp_slot = -1;
	b.src = src;
	b.out = out;
	b.o = opts;
	if (opts->group != 32 && opts->group != 64 && opts->group != 128)
		return fg_err_set(err, FG_EINVAL, "group size %d: use 32, 64 or 128", opts->group);
	if (opts->threads < 1)
		return fg_err_set(err, FG_EINVAL, "threads must be at least 1");
	rc = check_out(out, err);
	if (rc)
		return rc;
	rc = fg_path_join(&p, src, "config.json", err);
	if (!rc) {
		rc = fg_file_read(p.data, (size_t)64 << 20, &cfgtext, err);
		if (rc == FG_ENOTFOUND)
			rc = fg_err_set(err, FG_ENOTFOUND, "%s: missing (a checkpoint folder needs its config)",
					p.data);
	}
	if (!rc)
		rc = fg_json_parse(&cfg, cfgtext.data ? cfgtext.data : "", cfgtext.len, p.data, err);
	if (!rc && !cJSON_IsObject(cfg))
		rc = fg_err_set(err, FG_EFORMAT, "%s: not a JSON object", p.data);
	if (!rc)
		rc = open_store(&b, err);
	if (!rc)
		rc = fg_st_open(&b.set, src, err);
	/* what fgpack run would refuse (a tensor the model reads missing, or of
	 * a shape or dtype other than config.json implies) is refused here,
	 * by the engine loader's own check, before anything is written */
	if (!rc)
		rc = fg_g4_model_check(src, b.set, err);
	if (!rc)
		rc = list_inputs(&b, err);
	if (!rc)
		rc = plan(&b, &descs, &nd, err);
	if (!rc)
		rc = add_quant_config(cfg, &b, err);
	if (!rc)
		rc = make_tmp(&b, err);
	if (rc)
		goto out;
	/* with a store, the shards' chain states too, for their seen records */
	rc = fg_st_writer_new_states(&w, b.tmp, descs, nd,
				     opts->max_shard_bytes ? opts->max_shard_bytes : FG_INT4_SHARD_BYTES,
				     NULL, b.store ? FG_STORE_STATES_EVERY : 0, err);
	if (!rc && opts->no_sync)
		fg_st_writer_no_sync(w);
	if (!rc) {
		fg_st_writer_async(w);
		/* With -j 2 or more, the output shards' digests on two threads. */
		rc = fg_st_writer_hashers(w, opts->threads > 1 ? 2 : 1, err);
	}
	if (!rc)
		rc = flow_init(&flow, b.set, w, opts->threads, err);
	if (!rc)
		rc = stream_all(&b, &flow, rep, err);
	if (!rc)
		rc = fg_st_writer_finish(w, err);
	for (i = 0; !rc && i < fg_st_writer_nfiles(w); i++) {
		const char *nm;
		uint64_t sz;
		char hex[FG_SHA256_HEX_LEN + 1];

		fg_st_writer_file(w, i, &nm, &sz, hex);
		rc = add_out(&b, nm, sz, hex, err);
	}
	if (!rc && fg_st_writer_nfiles(w) > 1) {
		struct fg_buf idx = FG_BUF_INIT;

		fg_buf_reset(&p);
		rc = fg_path_join(&p, b.tmp, FG_ST_INDEX_NAME, err);
		if (!rc)
			rc = fg_file_read(p.data, (size_t)256 << 20, &idx, err);
		if (!rc) {
			uint8_t d[FG_SHA256_LEN];
			char hex[FG_SHA256_HEX_LEN + 1];

			rc = fg_sha256_mem(idx.data, idx.len, d, err);
			fg_hex_encode(d, sizeof(d), hex);
			if (!rc)
				rc = add_out(&b, FG_ST_INDEX_NAME, idx.len, hex, err);
		}
		fg_buf_release(&idx);
	}
	if (!rc)
		rc = fg_json_write(&cfgout, cfg, 1, err);
	if (!rc)
		rc = emit_file(&b, "config.json", cfgout.data, cfgout.len, err);
	for (i = 0; !rc && i < b.n_in; i++)
		if (b.in[i].role == IN_COPY)
			rc = copy_file(&b, &b.in[i], err);
	/* The small files the stream did not read (copies have their digest). */
	for (i = 0; !rc && i < b.n_in; i++)
		if (!b.in[i].have_digest)
			rc = digest_input(&b, &b.in[i], err);
	if (!rc) {
		qsort(b.outs, b.n_out, sizeof(*b.outs), cmp_outfile);
		rc = tree_digest(rep->tree_digest, b.outs, b.n_out, err);
		for (i = 0; i < b.n_in; i++) {
			rep->bytes_in += b.in[i].size;
			if (b.in[i].by_seen) {
				rep->n_by_seen++;
				rep->bytes_by_seen += b.in[i].size;
			} else if (b.in[i].by_stamp) {
				rep->n_by_stamp++;
				rep->bytes_by_stamp += b.in[i].size;
			}
		}
		for (i = 0; i < b.n_out; i++)
			rep->bytes_out += b.outs[i].size;
		rep->n_files_in = b.n_in;
		rep->n_files_out = b.n_out;
		if (!rc)
			rc = fg_fsync_dir(b.tmp, err);
	}
	if (!rc) {
		struct stat st;

		/* An empty folder at out is replaced; rename refuses a non-empty one. */
		if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
			rmdir(out);
		if (rename(b.tmp, out))
			rc = fg_err_set(err, FG_EIO, "rename %s to %s: %s", b.tmp, out, strerror(errno));
	}
	if (!rc) {
		const char *slash = strrchr(out, '/');

		fg_buf_reset(&p);
		rc = slash ? fg_buf_append(&p, out, slash == out ? 1 : (size_t)(slash - out), err)
			   : fg_buf_puts(&p, ".", err);
		if (!rc)
			rc = fg_fsync_dir(p.data, err);
		free(b.tmp);
		b.tmp = NULL;
	}
	if (b.tmp_slot >= 0 && !b.tmp) {
		fg_tmp_untrack(b.tmp_slot); /* renamed to out: no longer ours to remove */
		b.tmp_slot = -1;
	}
	if (!rc && b.store)
		fg_bake_note_shards(b.store, w, out);
	if (!rc)
		rc = write_statement(&b, started, rep, err);
out:
	fg_st_writer_free(w); /* first: its hashing thread may read the flow's buffers */
	flow_free(&flow);
	if (b.tmp) {
		fg_rm_tree(b.tmp);
		free(b.tmp);
	}
	fg_tmp_untrack(b.tmp_slot);
	free(descs);
	for (i = 0; i < b.n_names; i++)
		free(b.names[i]);
	free(b.names);
	for (i = 0; i < b.n_jobs; i++)
		free(b.jobs[i].base);
	free(b.jobs);
	for (i = 0; i < b.n_in; i++) {
		free(b.in[i].name);
		free(b.in[i].path);
	}
	free(b.in);
	for (i = 0; i < b.n_out; i++)
		free(b.outs[i].name);
	free(b.outs);
	fg_st_free(b.set);
	fg_store_free(b.store);
	cJSON_Delete(cfg);
	fg_buf_release(&cfgtext);
	fg_buf_release(&cfgout);
	fg_buf_release(&p);
	return rc;
}
