# static/engine.mk - `make engine`: $(BUILD)/fgpack-engine, the self-contained
# engine binary that `fgpack pack` puts into bundles (docs/formats/bundle.md,
# "What the engine binary needs at run time"). Included by the Makefile.
#
# Only the verbs a bundle runs with (run, serve, verify) are linked. Every
# library is static: libarchive, libzstd and libcrypto from Debian's static
# archives; cJSON (Debian ships no static archive) and libmicrohttpd (Debian's
# links GnuTLS, whose static build needs p11-kit, which has none) compiled from
# Debian's source packages of the installed versions, libmicrohttpd without
# TLS; libstdc++/libgcc and the CUDA runtime (cudart_static dlopens the
# driver's libcuda.so.1). What stays dynamic is glibc alone, and the glibc
# symbols are bound to versions no newer than 2.17 (static/glibc.sym,
# static/glibc_compat.c), so the binary starts on older systems than this one.

ENGINE      := $(BUILD)/fgpack-engine
ENGINE_3P   := $(BUILD)/third_party
ENGINE_CMDS := $(BUILD)/static/main.o $(BUILD)/static/stubs.o $(BUILD)/cmd/cmd_run.o \
               $(BUILD)/cmd/cmd_serve.o $(BUILD)/cmd/cmd_verify.o
ENGINE_OWN  := $(BUILD)/static/glibc_old.o $(BUILD)/static/glibc_compat.o \
               $(BUILD)/static/archive_shim.o
ENGINE_TP   := $(ENGINE_3P)/cJSON.o $(ENGINE_3P)/libmicrohttpd.a
# every symbol of glibc.sym plus those glibc_compat.c replaces
ENGINE_WRAP := $(shell sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\) GLIBC_.*/\1/p' static/glibc.sym) \
               stat lstat fstat fstatat getentropy renameat2 copy_file_range _dl_find_object \
               __libc_single_threaded
ENGINE_LIBS := -Wl,-Bstatic -larchive -lzstd -lcrypto -Wl,-Bdynamic
ifneq ($(strip $(NVCC)),)
ENGINE_LIBS += -L$(CUDA_LIBDIR) -lcudart_static
endif
# -no-pie: Debian's static archives are not all position independent.
# libpthread/libdl/librt are named so that glibc older than 2.34, where the
# rebound pthread/dl/shm calls still live in them, loads them.
ENGINE_LDFLAGS := -no-pie -static-libstdc++ -static-libgcc $(foreach s,$(ENGINE_WRAP),-Wl,--wrap=$(s))
ENGINE_SYS  := -Wl,-Bstatic -lstdc++ -Wl,-Bdynamic -Wl,--no-as-needed -l:libpthread.so.0 \
               -l:libdl.so.2 -l:librt.so.1 -lm -Wl,--as-needed

.PHONY: engine
engine: $(ENGINE)
test: engine

$(ENGINE): $(ENGINE_CMDS) $(LIBFG) $(KERNEL_OBJS) $(ENGINE_OWN) $(ENGINE_TP) static/glibc.sym
	$(CC) $(ENGINE_LDFLAGS) -o $@ $(ENGINE_CMDS) $(ENGINE_OWN) $(LIBFG) $(KERNEL_OBJS) $(LIBFG) \
		$(ENGINE_TP) $(ENGINE_LIBS) $(ENGINE_SYS)

# main (its --version says "engine") and the weak verb stubs (saying "not in
# the engine build") compiled again with FG_ENGINE_BUILD
$(BUILD)/static/main.o: cmd/main.c cmd/cmd.h lib/fsutil.h lib/store.h lib/version.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DFG_ENGINE_BUILD -c -o $@ $<

$(BUILD)/static/stubs.o: cmd/stubs.c cmd/cmd.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DFG_ENGINE_BUILD -c -o $@ $<

$(BUILD)/static/%.o: static/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# one jump per glibc.sym line: __wrap_NAME -> NAME@VERSION
$(BUILD)/static/glibc_old.S: static/glibc.sym
	@mkdir -p $(@D)
	{ printf '/* generated from static/glibc.sym by static/engine.mk */\n\t.text\n'; \
	  awk '/^[A-Za-z_]/ { printf "\t.globl __wrap_%s\n\t.type __wrap_%s,@function\n__wrap_%s:\n\tjmp fg_old_%s@PLT\n\t.symver fg_old_%s,%s@%s\n", $$1, $$1, $$1, $$1, $$1, $$1, $$2 }' $<; \
	  printf '\t.section .note.GNU-stack,"",@progbits\n'; } >$@.tmp && mv $@.tmp $@

$(BUILD)/static/glibc_old.o: $(BUILD)/static/glibc_old.S
	$(CC) -c -o $@ $<

# Debian's own sources for the two libraries without a usable static archive
$(ENGINE_3P)/cjson/cJSON.c:
	sh static/debsrc.sh cjson $(ENGINE_3P)/cjson libcjson1
	@touch $@

$(ENGINE_3P)/cJSON.o: $(ENGINE_3P)/cjson/cJSON.c
	$(CC) -O2 -g -c -o $@ $<

# one apt-get at a time: both share the private package lists
$(ENGINE_3P)/libmicrohttpd/configure: | $(ENGINE_3P)/cjson/cJSON.c
	sh static/debsrc.sh libmicrohttpd $(ENGINE_3P)/libmicrohttpd libmicrohttpd12
	@touch $@

$(ENGINE_3P)/libmicrohttpd.a: $(ENGINE_3P)/libmicrohttpd/configure
	cd $(ENGINE_3P)/libmicrohttpd && ./configure -q --disable-https --disable-curl --disable-doc \
		--disable-examples --disable-shared --enable-static --disable-dependency-tracking \
		--without-gnutls CFLAGS='-O2 -g' >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
	$(MAKE) -C $(ENGINE_3P)/libmicrohttpd/src/microhttpd >$(ENGINE_3P)/libmicrohttpd/make.log 2>&1 || \
		{ tail -20 $(ENGINE_3P)/libmicrohttpd/make.log; exit 1; }
	cp $(ENGINE_3P)/libmicrohttpd/src/microhttpd/.libs/libmicrohttpd.a $@
