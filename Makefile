# fgpack - build, test, demo. `make` builds ./fgpack; `make test` runs everything.
# Sources are found by wildcard: a new lib/x.c or tests/unit/test_x.c needs no edit here.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
BUILD_ID := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
WARN    := -Wall -Wextra -Wshadow -Werror
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -Ilib -I. -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  += -lcurl -lcrypto -larchive -lcjson -lzstd -lmicrohttpd -lpthread -lm
LDFLAGS += $(EXTRA_LDFLAGS)

SRC_LIB := $(wildcard lib/*.c bake/*.c engine/*.c engine/*/*.c)
SRC_CMD := $(wildcard cmd/*.c)
SRC_UT  := $(wildcard tests/unit/test_*.c)
SRC_FZ  := $(wildcard tests/fuzz/fuzz_*.c)
OBJ_LIB := $(SRC_LIB:%.c=$(BUILD)/%.o)
OBJ_CMD := $(SRC_CMD:%.c=$(BUILD)/%.o)
UNIT    := $(SRC_UT:tests/unit/%.c=$(BUILD)/tests/%)
REPLAY  := $(SRC_FZ:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz/replay_%)
LIBFG   := $(BUILD)/libfg.a

# CUDA kernels (kernels/kernels.mk) only where nvcc exists; it may add to
# KERNEL_OBJS, LDLIBS and CFLAGS (-DFG_HAVE_CUDA).
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
KERNEL_OBJS :=
.DEFAULT_GOAL := all
-include kernels/kernels.mk
-include static/engine.mk

.PHONY: all check test asan asan-test tsan-test san-suites ubsan fuzz demo deps clean bench
# BIN is the binary built; sanitizer builds put theirs under their BUILD folder
# so that ./fgpack is never replaced by an instrumented one.
BIN     ?= fgpack
all: $(BIN)

# ./fgpack loads libcurl, libarchive and libmicrohttpd on first use (cmd/lazy/libs.c)
LAZY_LIBS := -lcurl -larchive -lmicrohttpd
ifeq ($(shell uname -m),x86_64)
BIN_LAZY := $(BUILD)/cmd/lazy/libs.o
BIN_LIBS  = $(filter-out $(LAZY_LIBS),$(LDLIBS)) -ldl
else
BIN_LIBS  = $(LDLIBS)
endif
$(BUILD)/cmd/lazy/syms.h: $(OBJ_CMD) $(LIBFG)
	@mkdir -p $(@D)
	nm -u $(OBJ_CMD) $(LIBFG) | awk '$$1 == "U" { n = $$2; sub(/@.*/, "", n); \
		if (n ~ /^curl_/) print "LAZY(LIB_CURL, " n ")"; else if (n ~ /^archive_/) print "LAZY(LIB_ARCHIVE, " n ")"; \
		else if (n ~ /^MHD_/) print "LAZY(LIB_MHD, " n ")" }' | sort -u >$@.tmp && mv $@.tmp $@
$(BUILD)/cmd/lazy/libs.o: cmd/lazy/libs.c $(BUILD)/cmd/lazy/syms.h
	$(CC) $(CFLAGS) -I$(BUILD)/cmd/lazy -c -o $@ $<
$(BIN): $(OBJ_CMD) $(BIN_LAZY) $(LIBFG) $(KERNEL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(OBJ_CMD) $(BIN_LAZY) $(LIBFG) $(KERNEL_OBJS) $(BIN_LIBS)

$(LIBFG): $(OBJ_LIB)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $(OBJ_LIB)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# The build id is compiled into lib/version.o alone; the stamp file changes
# only when the id does, so version.o (and what links it) rebuilds then.
$(BUILD)/build_id.stamp: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(BUILD_ID)' ] || echo '$(BUILD_ID)' > $@
$(BUILD)/lib/version.o: CFLAGS += -DFG_BUILD_ID='"$(BUILD_ID)"'
$(BUILD)/lib/version.o: $(BUILD)/build_id.stamp
.PHONY: FORCE
FORCE:

$(BUILD)/tests/%: tests/unit/%.c $(LIBFG) $(KERNEL_OBJS) tests/unit/tap.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(LIBFG) $(KERNEL_OBJS) $(LDLIBS)

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(LIBFG) $(KERNEL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(LIBFG) $(KERNEL_OBJS) $(LDLIBS)

# Fast unit tests only.
check: $(BIN) $(UNIT)
	@FG_BUILD=$(BUILD) FG_BIN=$(BIN) sh tests/run.sh unit

# Everything: unit tests, fuzz corpus replays, integration scripts against
# local servers. Ends with the line "N passed, N failed".
test: deps $(BIN) $(UNIT) $(REPLAY)
	@FG_BUILD=$(BUILD) FG_BIN=$(BIN) sh tests/run.sh all

asan:
	$(MAKE) BUILD=build/asan OPT=-O1 EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
		EXTRA_LDFLAGS="-fsanitize=address,undefined" BIN=build/asan/fgpack check
ubsan:
	$(MAKE) BUILD=build/ubsan OPT=-O1 EXTRA_CFLAGS="-fsanitize=undefined -fno-sanitize-recover=all" \
		EXTRA_LDFLAGS="-fsanitize=undefined" BIN=build/ubsan/fgpack check
# $(call san_test,DIR,FLAGS): every suite of `make test` (corpus replays
# and integration scripts too) with fgpack and the tests built with FLAGS in
# build/DIR. Each sanitizer report goes to a file under build/DIR/reports,
# so one from a process whose failure a test expected still fails the run.
# The self-contained engine links shims of its own over libc that the
# sanitizers cannot wrap: the plain build's engine stands beside the
# instrumented fgpack.
define san_test
	$(MAKE) BUILD=build/$(1) OPT=-O1 EXTRA_CFLAGS="$(2)" EXTRA_LDFLAGS="$(2)" BIN=build/$(1)/fgpack \
		deps build/$(1)/fgpack san-suites
	cp $(ENGINE) build/$(1)/fgpack-engine
	@rm -rf build/$(1)/reports && mkdir -p build/$(1)/reports
	@r=$(CURDIR)/build/$(1)/reports; ASAN_OPTIONS=log_path=$$r/asan \
		UBSAN_OPTIONS=log_path=$$r/ubsan:print_stacktrace=1 TSAN_OPTIONS=log_path=$$r/tsan \
		FG_BUILD=build/$(1) FG_BIN=build/$(1)/fgpack sh tests/run.sh all; rc=$$?; \
		n=$$(ls $$r | wc -l); echo "sanitizer reports: $$n (build/$(1)/reports)"; \
		[ $$rc -eq 0 ] && [ $$n -eq 0 ]
endef
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer
asan-test: engine
	$(call san_test,asan,$(ASAN_FLAGS))
tsan-test: engine
	$(call san_test,tsan,-fsanitize=thread)
san-suites: $(UNIT) $(REPLAY)

# Coverage-guided fuzzing with libFuzzer (clang); FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
fuzz:
	@sh tests/fuzz/run-libfuzzer.sh $(FUZZ_SECONDS)

deps:
	@sh tests/deps.sh

demo: deps fgpack
	@sh tests/demo.sh

bench: fgpack
	@for b in bench/*.sh; do echo "== $$b"; sh $$b || exit 1; done

clean:
	rm -rf build fgpack

-include $(OBJ_LIB:.o=.d) $(OBJ_CMD:.o=.d)
