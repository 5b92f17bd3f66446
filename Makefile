# One top-level Makefile for mbfs (fuse/), mbexec (shim/) and common/.
# `make` builds fuse/mbfs and shim/mbexec; `make check` installs what is
# missing and runs the whole pytest suite; `make asan` does the same under
# AddressSanitizer + UBSan with binaries in build/asan/.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PYTHON  ?= /usr/bin/python3
PYTEST_ARGS ?=

# O is where binaries go (fuse/mbfs, shim/mbexec, tests/mbapi); objects go
# under $(O)/build/obj (or $(O)/obj for out-of-tree builds).
O       ?= .
ifeq ($(O),.)
OBJ     := build/obj
else
OBJ     := $(O)/obj
endif

PKGS       := fuse3 libcurl libcjson libcrypto
PKG_CFLAGS  = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes \
           -Wwrite-strings -Wshadow
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SAN) -D_FILE_OFFSET_BITS=64 \
             -D_GNU_SOURCE -pthread -I. $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(LDFLAGS) $(SAN) -pthread

COMMON_SRC := $(wildcard common/*.c)
FUSE_SRC   := $(wildcard fuse/*.c)
SHIM_SRC   := $(wildcard shim/*.c)
TOOL_SRC   := $(wildcard tests/tools/*.c)

COMMON_OBJ := $(COMMON_SRC:%.c=$(OBJ)/%.o)
FUSE_OBJ   := $(FUSE_SRC:%.c=$(OBJ)/%.o) $(OBJ)/gen/fuse_sh.o
SHIM_OBJ   := $(SHIM_SRC:%.c=$(OBJ)/%.o) $(OBJ)/gen/guest_sh.o
# The scripts mbexec and mbfs run on the guest, embedded as strings
# (common/embed.sh).
GUEST_SH   := $(sort $(wildcard shim/guest/*.sh))
FUSE_SH    := $(sort $(wildcard fuse/guest/*.sh))
TOOL_BIN   := $(TOOL_SRC:tests/tools/%.c=$(O)/tests/%)

MBFS   := $(O)/fuse/mbfs
MBEXEC := $(O)/shim/mbexec
LIBCOMMON := $(OBJ)/libmbcommon.a

.SECONDARY:

.PHONY: all deps lint check test asan asan-build install uninstall clean serve demo bench

all: $(MBFS) $(MBEXEC) $(TOOL_BIN)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(OBJ)/gen/guest_sh.c: $(GUEST_SH) common/embed.sh
	@mkdir -p $(dir $@)
	sh common/embed.sh mbx_sh shim/guest_sh.h $(GUEST_SH) >$@.$$$$ && mv -f $@.$$$$ $@

$(OBJ)/gen/fuse_sh.c: $(FUSE_SH) common/embed.sh
	@mkdir -p $(dir $@)
	sh common/embed.sh mbfs_sh fuse/guest_sh.h $(FUSE_SH) >$@.$$$$ && mv -f $@.$$$$ $@

$(OBJ)/gen/%_sh.o: $(OBJ)/gen/%_sh.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIBCOMMON): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(MBFS): $(FUSE_OBJ) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(FUSE_OBJ) $(LIBCOMMON) $(PKG_LIBS)

$(MBEXEC): $(SHIM_OBJ) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(SHIM_OBJ) $(LIBCOMMON) $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null) -lutil

$(O)/tests/%: $(OBJ)/tests/tools/%.o $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBCOMMON) $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null)

-include $(COMMON_OBJ:.o=.d) $(FUSE_OBJ:.o=.d) $(SHIM_OBJ:.o=.d) \
         $(TOOL_SRC:tests/tools/%.c=$(OBJ)/tests/tools/%.d)

# Install the Debian packages the build, tests and demo need (only what is
# missing; needs root or sudo).
deps:
	@bash .ci/install-deps

check: deps
	$(MAKE) all
	$(MAKE) lint
	MB_BIN_DIR=$(CURDIR) $(PYTHON) -m pytest -q $(PYTEST_ARGS) tests

# Every script that runs on the guest (and the one that embeds them) passes
# shellcheck as POSIX sh, since the hosted images run them under dash.
lint:
	shellcheck -s sh $(GUEST_SH) $(FUSE_SH) common/embed.sh

test: all
	MB_BIN_DIR=$(CURDIR) $(PYTHON) -m pytest -q $(PYTEST_ARGS) tests

asan-build:
	$(MAKE) O=build/asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CFLAGS="-O1 -g" all

asan: deps
	$(MAKE) asan-build
	MB_BIN_DIR=$(CURDIR)/build/asan MB_ASAN=1 \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(PYTHON) -m pytest -q $(PYTEST_ARGS) tests

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(MBFS) $(MBEXEC) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 man/mbfs.1 man/mbexec.1 $(DESTDIR)$(PREFIX)/share/man/man1/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/mbfs $(DESTDIR)$(PREFIX)/bin/mbexec \
	      $(DESTDIR)$(PREFIX)/share/man/man1/mbfs.1 \
	      $(DESTDIR)$(PREFIX)/share/man/man1/mbexec.1

serve:
	$(PYTHON) tests/localservice.py --listen 127.0.0.1:8787 --state build/serve-state

demo: deps
	$(MAKE) all
	bash tests/demo.sh

bench: deps
	$(MAKE) all
	$(PYTHON) tests/bench/bench.py

clean:
	rm -rf build fuse/mbfs shim/mbexec $(TOOL_SRC:tests/tools/%.c=tests/%)

# Unit tests of the parsers of guest and server output (tests/unit/): one
# program per parser, linking only the objects named here and
# libmbcommon; no service, no mount. Run from the top of the tree (they
# read their real outputs from tests/fuzz/seeds/).
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/unit/%)
COMMON_LIBS = $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null)
UNIT_OBJ_test_packparse := $(OBJ)/fuse/packparse.o
UNIT_OBJ_test_tarread := $(OBJ)/fuse/tarread.o $(OBJ)/fuse/fdio.o
UNIT_OBJ_test_report := $(OBJ)/fuse/report.o
UNIT_OBJ_test_sse :=
UNIT_OBJ_test_mbxreport := $(OBJ)/shim/guest.o $(OBJ)/shim/result.o \
                           $(OBJ)/gen/guest_sh.o

.PHONY: unit fuzz

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do $$t; done

-include $(UNIT_SRC:%.c=$(OBJ)/%.d)

.SECONDEXPANSION:
$(O)/tests/unit/%: $(OBJ)/tests/unit/%.o $$(UNIT_OBJ_$$*) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(UNIT_OBJ_$*) $(LIBCOMMON) $(COMMON_LIBS)
