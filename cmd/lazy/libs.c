/* libs.c - ./fgpack loads libcurl, libarchive and libmicrohttpd on first use.
 *
 * Linking them normally makes the dynamic loader map and relocate about 45
 * libraries (their own dependencies: GnuTLS, Kerberos, LDAP, libxml2, ICU, ...)
 * before main() on every run: about 40 ms of CPU on the development machine,
 * half of a no-op `fgpack pull`, which needs none of them (docs/bench.md
 * "pull"). Instead, each function fgpack calls from those three libraries is
 * a small stub here: it jumps through a pointer that is filled on the first
 * call (dlopen of the library, dlsym of the name), with every argument
 * register preserved, so callers and headers are unchanged. Only the fgpack
 * binary links this file (the Makefile's BIN rule); unit tests and the static
 * engine link the libraries as usual. x86-64 System V only; elsewhere the
 * Makefile links the libraries directly.
 *
 * A library that cannot be loaded is what the dynamic loader would have
 * refused at start: fgpack says which and exits 1. A function missing from
 * this list fails the link (undefined symbol), never silently at run time. */
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

enum { LIB_CURL, LIB_ARCHIVE, LIB_MHD, LIB_N };

static const char *const sonames[LIB_N] = { "libcurl.so.4", "libarchive.so.13",
					     "libmicrohttpd.so.12" };

/* addr first: the stubs load it with one instruction */
struct fg_lazy {
	void *addr;
	const char *name;
	int lib;
};

void *fg_lazy_resolve(struct fg_lazy *s);

static void die(const char *what, const char *name)
{
	const char *e = dlerror();

	/* the one place outside cmd/ that prints: there is no caller to return to */
	if (write(2, "fgpack: cannot load ", 20) < 0 || write(2, what, strlen(what)) < 0 ||
	    (name && (write(2, ": ", 2) < 0 || write(2, name, strlen(name)) < 0)) ||
	    (e && (write(2, ": ", 2) < 0 || write(2, e, strlen(e)) < 0)) || write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

void *fg_lazy_resolve(struct fg_lazy *s)
{
	static void *handles[LIB_N];
	void *h = __atomic_load_n(&handles[s->lib], __ATOMIC_ACQUIRE), *f;

	if (!h) {
		/* two threads may both get here: dlopen returns the same handle */
		h = dlopen(sonames[s->lib], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			die(sonames[s->lib], NULL);
		__atomic_store_n(&handles[s->lib], h, __ATOMIC_RELEASE);
	}
	f = dlsym(h, s->name);
	if (!f)
		die(sonames[s->lib], s->name);
	__atomic_store_n(&s->addr, f, __ATOMIC_RELEASE);
	return f;
}

/* Entered from a stub with %r11 = its struct fg_lazy and the caller's
 * arguments untouched: saves the argument registers (and %rax, the vector
 * register count of a variadic call), resolves, restores, jumps to the real
 * function as if the caller had called it. */
__asm__(".text\n"
	".p2align 4\n"
	".type fg_lazy_common, @function\n"
	"fg_lazy_common:\n"
	"\tpushq %rbp\n"
	"\tmovq %rsp, %rbp\n"
	"\tsubq $208, %rsp\n"
	"\tandq $-16, %rsp\n"
	"\tmovq %rdi, 0(%rsp)\n"
	"\tmovq %rsi, 8(%rsp)\n"
	"\tmovq %rdx, 16(%rsp)\n"
	"\tmovq %rcx, 24(%rsp)\n"
	"\tmovq %r8, 32(%rsp)\n"
	"\tmovq %r9, 40(%rsp)\n"
	"\tmovq %rax, 48(%rsp)\n"
	"\tmovdqa %xmm0, 64(%rsp)\n"
	"\tmovdqa %xmm1, 80(%rsp)\n"
	"\tmovdqa %xmm2, 96(%rsp)\n"
	"\tmovdqa %xmm3, 112(%rsp)\n"
	"\tmovdqa %xmm4, 128(%rsp)\n"
	"\tmovdqa %xmm5, 144(%rsp)\n"
	"\tmovdqa %xmm6, 160(%rsp)\n"
	"\tmovdqa %xmm7, 176(%rsp)\n"
	"\tmovq %r11, %rdi\n"
	"\tcall fg_lazy_resolve\n"
	"\tmovq %rax, %r11\n"
	"\tmovq 0(%rsp), %rdi\n"
	"\tmovq 8(%rsp), %rsi\n"
	"\tmovq 16(%rsp), %rdx\n"
	"\tmovq 24(%rsp), %rcx\n"
	"\tmovq 32(%rsp), %r8\n"
	"\tmovq 40(%rsp), %r9\n"
	"\tmovq 48(%rsp), %rax\n"
	"\tmovdqa 64(%rsp), %xmm0\n"
	"\tmovdqa 80(%rsp), %xmm1\n"
	"\tmovdqa 96(%rsp), %xmm2\n"
	"\tmovdqa 112(%rsp), %xmm3\n"
	"\tmovdqa 128(%rsp), %xmm4\n"
	"\tmovdqa 144(%rsp), %xmm5\n"
	"\tmovdqa 160(%rsp), %xmm6\n"
	"\tmovdqa 176(%rsp), %xmm7\n"
	"\tmovq %rbp, %rsp\n"
	"\tpopq %rbp\n"
	"\tjmpq *%r11\n"
	".size fg_lazy_common, .-fg_lazy_common\n");

/* One stub per function: jump through the pointer once it is known. */
#define LAZY(lib, name)                                                                    \
	__attribute__((visibility("hidden"))) struct fg_lazy fg_lazy_##name = { 0, #name, lib }; \
	__asm__(".text\n.p2align 4\n.globl " #name "\n.type " #name ", @function\n" #name ":\n"    \
		"\tmovq fg_lazy_" #name "(%rip), %r11\n"                                           \
		"\ttestq %r11, %r11\n"                                                             \
		"\tjz 1f\n"                                                                        \
		"\tjmpq *%r11\n"                                                                   \
		"1:\tleaq fg_lazy_" #name "(%rip), %r11\n"                                         \
		"\tjmp fg_lazy_common\n"                                                           \
		".size " #name ", .-" #name "\n");

LAZY(LIB_MHD, MHD_add_response_header)
LAZY(LIB_MHD, MHD_create_response_from_buffer)
LAZY(LIB_MHD, MHD_create_response_from_callback)
LAZY(LIB_MHD, MHD_destroy_response)
LAZY(LIB_MHD, MHD_get_daemon_info)
LAZY(LIB_MHD, MHD_queue_response)
LAZY(LIB_MHD, MHD_quiesce_daemon)
LAZY(LIB_MHD, MHD_start_daemon)
LAZY(LIB_MHD, MHD_stop_daemon)
LAZY(LIB_ARCHIVE, archive_entry_filetype)
LAZY(LIB_ARCHIVE, archive_entry_free)
LAZY(LIB_ARCHIVE, archive_entry_hardlink)
LAZY(LIB_ARCHIVE, archive_entry_new)
LAZY(LIB_ARCHIVE, archive_entry_pathname)
LAZY(LIB_ARCHIVE, archive_entry_perm)
LAZY(LIB_ARCHIVE, archive_entry_set_filetype)
LAZY(LIB_ARCHIVE, archive_entry_set_gid)
LAZY(LIB_ARCHIVE, archive_entry_set_mtime)
LAZY(LIB_ARCHIVE, archive_entry_set_pathname)
LAZY(LIB_ARCHIVE, archive_entry_set_perm)
LAZY(LIB_ARCHIVE, archive_entry_set_size)
LAZY(LIB_ARCHIVE, archive_entry_set_uid)
LAZY(LIB_ARCHIVE, archive_entry_size)
LAZY(LIB_ARCHIVE, archive_entry_size_is_set)
LAZY(LIB_ARCHIVE, archive_entry_sparse_count)
LAZY(LIB_ARCHIVE, archive_entry_symlink)
LAZY(LIB_ARCHIVE, archive_error_string)
LAZY(LIB_ARCHIVE, archive_read_data_block)
LAZY(LIB_ARCHIVE, archive_read_free)
LAZY(LIB_ARCHIVE, archive_read_new)
LAZY(LIB_ARCHIVE, archive_read_next_header)
LAZY(LIB_ARCHIVE, archive_read_open)
LAZY(LIB_ARCHIVE, archive_read_support_format_tar)
LAZY(LIB_ARCHIVE, archive_write_add_filter_none)
LAZY(LIB_ARCHIVE, archive_write_close)
LAZY(LIB_ARCHIVE, archive_write_data)
LAZY(LIB_ARCHIVE, archive_write_free)
LAZY(LIB_ARCHIVE, archive_write_header)
LAZY(LIB_ARCHIVE, archive_write_new)
LAZY(LIB_ARCHIVE, archive_write_open)
LAZY(LIB_ARCHIVE, archive_write_set_bytes_per_block)
LAZY(LIB_ARCHIVE, archive_write_set_format_pax_restricted)
LAZY(LIB_CURL, curl_easy_cleanup)
LAZY(LIB_CURL, curl_easy_getinfo)
LAZY(LIB_CURL, curl_easy_init)
LAZY(LIB_CURL, curl_easy_perform)
LAZY(LIB_CURL, curl_easy_reset)
LAZY(LIB_CURL, curl_easy_setopt)
LAZY(LIB_CURL, curl_easy_strerror)
LAZY(LIB_CURL, curl_free)
LAZY(LIB_CURL, curl_getdate)
LAZY(LIB_CURL, curl_global_init)
LAZY(LIB_CURL, curl_multi_add_handle)
LAZY(LIB_CURL, curl_multi_cleanup)
LAZY(LIB_CURL, curl_multi_info_read)
LAZY(LIB_CURL, curl_multi_init)
LAZY(LIB_CURL, curl_multi_perform)
LAZY(LIB_CURL, curl_multi_poll)
LAZY(LIB_CURL, curl_multi_remove_handle)
LAZY(LIB_CURL, curl_multi_setopt)
LAZY(LIB_CURL, curl_multi_wakeup)
LAZY(LIB_CURL, curl_share_cleanup)
LAZY(LIB_CURL, curl_share_init)
LAZY(LIB_CURL, curl_share_setopt)
LAZY(LIB_CURL, curl_slist_append)
LAZY(LIB_CURL, curl_slist_free_all)
LAZY(LIB_CURL, curl_url)
LAZY(LIB_CURL, curl_url_cleanup)
LAZY(LIB_CURL, curl_url_get)
LAZY(LIB_CURL, curl_url_set)
