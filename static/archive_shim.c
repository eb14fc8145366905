/* archive_shim.c - keeps libarchive's write-format table out of the engine.
 *
 * libarchive 3.6's archive_write_set_format.o holds both the table of every
 * writer (7zip, xar, iso9660, zip ... which need libxml2, ICU, bzip2, lzma)
 * and __archive_write_entry_filetype_unsupported, the one function the pax
 * writer we use calls from it. Defining that function here keeps the linker
 * from pulling the table, and with it a few megabytes and libraries the
 * engine never uses. If a future libarchive moves it, the link fails with a
 * duplicate definition rather than linking something else. Only the engine
 * build links this file; the message is libarchive's in substance. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
						const char *format);

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
						const char *format)
{
	archive_set_error(a, EINVAL, "%s: %s format cannot archive files with mode 0%o",
			  archive_entry_pathname(entry), format, (unsigned)archive_entry_mode(entry));
}
