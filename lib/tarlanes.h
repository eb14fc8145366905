/* tarlanes.h - a seekable tar.zst hashed, or extracted, in lanes.
 *
 * A bundle written by fg_tarball_writer_finish is a run of zstd frames that
 * start at member headers, with the zstd seekable format's seek table at the
 * end (docs/formats/bundle.md). Lanes decompress and walk parts of the tar
 * at once, each from a frame that starts a member: a thread runs two of
 * them and hashes a member of each together (fg_sha256_pair_update: on
 * SHA-NI two streams cost less than twice one), and threads run pairs side
 * by side. Used where the sequential reader would hash every member and
 * compute no identity: a scan, or an extraction into a fresh folder (each
 * lane then writes its members there).
 *
 * The walk accepts a strict subset of tar, what fgpack writes: ustar headers
 * of regular files, pax 'x' headers with path, size and times, the end
 * marker at the end of the last lane only, each lane ending at a frame
 * boundary that is a member boundary. Anything else, and any error, gives up
 * (returns 1) so that the caller reads the archive sequentially and reports
 * what the sequential reader reports: the lanes never decide an outcome of
 * their own. Internal to lib/tarball.c. */
#ifndef FG_TARLANES_H
#define FG_TARLANES_H

#include <stddef.h>
#include <stdint.h>

#include "tarball.h" /* struct fg_tarball_chain */

/* Why a frame walk failed (fg_zwalk_next): a read error, zstd's error, the
 * stream ends inside a frame, a zstd frame of no content bytes or one whose
 * content checksum is not its content's (each at the offset fg_zwalk_at
 * gives). */
enum { FG_ZW_READ = 1, FG_ZW_ZSTD, FG_ZW_SHORT, FG_ZW_EMPTY, FG_ZW_CHECKSUM };
/* A zstd frame that decompresses to nothing (docs/formats/bundle.md,
 * "Empty frames"): pack writes none, zstd passes it unseen, and the bundle
 * id does not cover its bytes. Every reader refuses it in these words, with
 * the frame's offset in the file. */
#define FG_TAR_EMPTY_WHY "an empty zstd frame (no content bytes) at byte %llu: pack writes none, " \
			 "and the bundle id does not cover it"
/* A zstd frame whose content checksum (its last 4 bytes where the frame
 * header says it has one) is not the low 32 bits of its content's XXH64:
 * the bundle id does not cover those bytes, so every reader checks them
 * (docs/formats/bundle.md, "Content checksums") and refuses in these words,
 * with the frame's offset. */
#define FG_TAR_CHECKSUM_WHY "the zstd frame at byte %llu: its content checksum is not its " \
			    "content's XXH64 (bytes the bundle id does not cover)"

/* The writer's frames (lib/tarball.c): it cuts inside a large member at
 * every FG_TAR_FRAME_MAX bytes of its data (bundles before 2026-12-04: where
 * a frame would pass FG_TAR_FRAME_MAX bytes of tar, by a piece of at most
 * FG_TAR_PIECE_MAX). Either way a frame cut inside a member holds more than
 * FG_TAR_FRAME_MAX - FG_TAR_PIECE_MAX bytes of tar: the lanes look for
 * member starts after smaller frames first. */
#define FG_TAR_FRAME_MAX FG_TARBALL_FRAME_DATA
#define FG_TAR_PIECE_MAX ((unsigned long long)1 << 20)
/* The most zero bytes a tar may hold after its end-of-archive marker: GNU
 * tar, bsdtar and python's tarfile pad an archive with zeros to a record of
 * 10240 bytes by default, 32 KiB with `tar -b 64`; more than this is no
 * padding. Any non-zero byte there refuses the archive. */
#define FG_TAR_TAIL_MAX ((unsigned long long)1 << 20)
/* the zstd seekable format: the skippable frame holding the seek table, and
 * the magic its last 4 bytes end the file with */
#define FG_TAR_SKIPPABLE_MAGIC 0x184D2A5Eu
#define FG_TAR_SEEKABLE_MAGIC 0x8F92EAB1u
/* The identity's chain states (docs/formats/bundle.md, "Identity states"):
 * a skippable frame of its own magic before the seek table, listed there
 * with no decompressed bytes: the tag, version 1, a count, then per entry
 * the tar offset (8 bytes, little-endian, a multiple of 64) of a frame's
 * start and the SHA-256 chain state of the tar before it. */
#define FG_TAR_IDST_MAGIC 0x184D2A5Du
#define FG_TAR_IDST_TAG "fgpackid"
#define FG_TAR_IDST_HEAD 16
#define FG_TAR_IDST_ENTRY 40

/* The zstd framing of the archive fd (size bytes) holds no skippable
 * frame but those pack writes (docs/formats/bundle.md, "Skippable
 * frames"): the seek table, ending the file, that adds up to the frames
 * before it (descriptor 0: no checksums), and the identity's states just
 * before it, listed last with no tar bytes, of sound form (FG_TAR_IDST_*;
 * each entry at a frame's start). zstd skips any other one, so it would
 * hold bytes no reader sees and the bundle id does not cover. No zstd
 * frame its headers show to be empty either (a content size of 0, or only
 * raw and RLE blocks of 0 bytes; FG_TAR_EMPTY_WHY): one of compressed
 * blocks that give nothing is left to the decoders, which refuse it too.
 * Walks the frame and block headers only; where the framing is no zstd's it
 * stops and leaves the verdict to the decoder. 0, or -1 with why (cap
 * bytes). */
int fg_tarlanes_frames_ok(int fd, unsigned long long size, char *why, size_t cap);

struct fg_tarlane_entry {
	char *path;
	unsigned long long size;
	int mode; /* 0644 or 0755 */
	int hashed; /* sha256 holds its digest (not with o->hash_only, another member) */
	uint8_t sha256[32];
	char *content; /* o->keep: its bytes and a NUL after them, else NULL */
};

struct fg_tarlanes_opts {
	unsigned long long max_entry; /* bytes in one member */
	unsigned long long max_total; /* extracting: bytes in all */
	size_t max_entries;           /* extracting: members */
	int threads;                  /* up to 16 */
	const char *dest;             /* NULL: hash only; else an empty folder to
				       * extract into (on 1, the caller empties it) */
	unsigned long long *raw;      /* may be NULL; on 0, the bytes taken straight
				       * from zstd's raw blocks (FG_TAR_RAW=0: none) */
	/* may be NULL: members that may be cut into regions at their chain
	 * states, where a frame starts there */
	const struct fg_tarball_chain *chains;
	size_t n_chains;
	/* may be NULL; else, on 0, the archive's identity, from the identity's
	 * states the writer keeps (regions start only where one is, and each
	 * must end in the state the next starts from); an archive without
	 * them: not done (1) */
	uint8_t *id;
	/* may be NULL; with id only: the one member whose digest is computed
	 * ("": none; the others' entries not hashed); regions may then also
	 * start inside any other large member, at a frame where a state of the
	 * identity is (extracting: its file made before the lanes run, each
	 * region's part written at its offset; so too for a member cut at its
	 * chain states) */
	const char *hash_only;
	/* may be NULL: how many bytes of a member to keep (0: none), as
	 * fg_tarball_read_opts.keep (called from the lanes' threads at once);
	 * a member no larger is kept in its entry's content, and never cut
	 * into regions */
	size_t (*keep)(void *user, const char *path);
	void *keep_user;
};

/* 1 when archive may be read in lanes: they are not turned off and it ends
 * with a seek table (a cheap look, not the checks of fg_tarlanes_hash), 2
 * when it also keeps the identity's states (o->id may be asked for); 0 when
 * it will be read from start to end. */
int fg_tarlanes_may_read(const char *archive);

/* 0: every member hashed (and, with dest, written there), *out holds them
 * in tar order (free with fg_tarlanes_free) and *lanes (may be NULL) the
 * number of lanes; 1: not done (no seek table, fewer than two frames that
 * start members, a member over max_entry bytes, anything outside the
 * subset, any error; extracting also a path the sequential reader would
 * refuse, a name taken twice, less room than the tar's size), nothing kept
 * but what was written into dest. The tar is cut into up to 2 x threads (at
 * most 16 threads) regions of about equal size at frames that start members
 * or, given o->chains, at frames that start at one of a member's chain
 * states (a lane then takes the member up from that state, and the lane
 * before must end there with it), two lanes per thread. The environment's FG_TAR_LANES=0 turns the lanes
 * off.
 *
 * Each lane parses its frames' headers itself and hands the raw blocks that
 * end a frame (how zstd stores what it cannot compress: weights) to the hash
 * straight from its read buffer, not through zstd; what precedes them in the
 * frame goes through zstd. FG_TAR_RAW=0 sends everything through zstd.
 * The archive is read through one read-only mapping (FG_TAR_MMAP=0:
 * pread); a file cut short meanwhile makes the lanes give up (a SIGBUS
 * inside the mapping on a lane's thread is caught while lanes run). */
int fg_tarlanes_hash(const char *archive, const struct fg_tarlanes_opts *o,
		     struct fg_tarlane_entry **out, size_t *n, int *lanes);
void fg_tarlanes_free(struct fg_tarlane_entry *e, size_t n);

/* The archive's identity (the SHA-256 of its whole decompressed stream, in
 * order, one pass on the calling thread) read with the lanes' frame walk:
 * raw blocks hashed where they lie, the file mapped. 0 with id; 1 when not
 * done (lanes off, *stop set, any error or anything the walk and zstd do not
 * both accept): the caller then reads it as before, which says why. */
int fg_tarlanes_id(const char *archive, uint8_t id[32], const volatile int *stop);

/* The frame walk as a stream for the sequential reader: the archive's
 * whole decompressed stream (fd open, size bytes), zstd's raw blocks given
 * where they were read. Whatever the walk does not expect, or any error,
 * zstd decodes that frame again from its start (the bytes already given
 * dropped) and reads on alone, so the bytes and any error are what
 * ZSTD_decompressStream alone gives (how much of a spoilt frame comes out
 * before zstd's error can differ, as it does with zstd's own input sizes).
 * FG_TAR_RAW=0: zstd alone throughout.
 * A zstd frame that gives no byte fails, walked or not (FG_ZW_EMPTY); so
 * does one whose content checksum is wrong (FG_ZW_CHECKSUM: the walk
 * computes the XXH64 of every frame that has one, zstd alone checks it).
 * fg_zwalk_next: 0 with a piece *p, *n (n > 0, valid until the next call);
 * 1 at the end; -1 with why (FG_ZW_*), the errno or zstd's error code.
 * fg_zwalk_at: after FG_ZW_EMPTY or FG_ZW_CHECKSUM, the frame's offset. */
struct fg_zwalk;
struct fg_zwalk *fg_zwalk_new(int fd, unsigned long long size);
int fg_zwalk_next(struct fg_zwalk *w, const unsigned char **p, size_t *n, int *why, int *err_no,
		  size_t *code);
unsigned long long fg_zwalk_at(const struct fg_zwalk *w);
void fg_zwalk_free(struct fg_zwalk *w);

#endif
