# One top-level Makefile for mbfs (fuse/), mbexec (shim/) and common/.
# `make` builds fuse/mbfs and shim/mbexec; `make check` installs what is
# missing, runs the parsers' unit tests (`make unit`), fuzzes them briefly
# (`make fuzz`) and runs the whole pytest suite; `make asan` runs the unit
# tests and the suite under AddressSanitizer + UBSan with binaries in
# build/asan/. `make test-quick` runs a subset of the suite in about a
# minute. The build is quiet (one line per step); `make V=1` shows the
# commands.

# Quiet by default, as the kernel's kbuild: one short line per step, the
# command itself with V=1. BUILD_QUIET=1 (demo, check) drops even those.
V ?= 0
ifeq ($(V),1)
Q :=
msg :=
else
Q := @
ifeq ($(BUILD_QUIET),1)
msg = @
else
msg = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif
endif
SUBMAKE = $(MAKE) --no-print-directory
# a sub-make of demo and check: not even "Nothing to be done" (unless V=1)
QUIETMAKE = $(SUBMAKE) $(if $(filter 1,$(V)),,-s) BUILD_QUIET=1

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PYTHON  ?= /usr/bin/python3
PYTEST_ARGS ?=
# The suite mostly waits on the local service and the kernel, so it runs
# in parallel (Debian's python3-pytest-xdist), one test file per worker:
# each file has its own service and container (tests/conftest.py).
# PYTEST_JOBS=1 runs it serially.
PYTEST_JOBS ?= 8
PYTEST_PAR = $(if $(filter-out 1,$(PYTEST_JOBS)),-n $(PYTEST_JOBS) --dist loadfile)
# Sanitized binaries use more of the 2 cores: fewer at a time.
ASAN_JOBS ?= 4
ASAN_PAR = $(if $(filter-out 1,$(ASAN_JOBS)),-n $(ASAN_JOBS) --dist loadfile)

# O is where binaries go (fuse/mbfs, shim/mbexec, tests/mbapi); objects go
# under $(O)/build/obj (or $(O)/obj for out-of-tree builds).
O       ?= .
ifeq ($(O),.)
OBJ     := build/obj
else
OBJ     := $(O)/obj
endif

PKGS       := fuse3 libcurl libcjson libcrypto zlib
PKG_CFLAGS  = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes \
           -Wwrite-strings -Wshadow
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SAN) -D_FILE_OFFSET_BITS=64 \
             -D_GNU_SOURCE -pthread -I. $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(LDFLAGS) $(SAN) -pthread

COMMON_SRC := $(wildcard common/*.c)
FUSE_SRC   := $(wildcard fuse/*.c fuse/*/*.c)
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

.PHONY: all deps lint check test test-quick asan asan-build install uninstall clean serve demo bench \
	unit fuzz stress

all: $(MBFS) $(MBEXEC) $(TOOL_BIN)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(OBJ)/gen/guest_sh.c: $(GUEST_SH) common/embed.sh
	@mkdir -p $(dir $@)
	$(call msg,EMBED,$@)sh common/embed.sh mbx_sh shim/guest_sh.h $(GUEST_SH) >$@.$$$$ && mv -f $@.$$$$ $@

$(OBJ)/gen/fuse_sh.c: $(FUSE_SH) common/embed.sh
	@mkdir -p $(dir $@)
	$(call msg,EMBED,$@)sh common/embed.sh mbfs_sh fuse/transport/guest_sh.h $(FUSE_SH) >$@.$$$$ && mv -f $@.$$$$ $@

$(OBJ)/gen/%_sh.o: $(OBJ)/gen/%_sh.c
	$(call msg,CC,$@)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIBCOMMON): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(call msg,AR,$@)rm -f $@ && ar rcs $@ $^

$(MBFS): $(FUSE_OBJ) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) $(ALL_LDFLAGS) -o $@ $(FUSE_OBJ) $(LIBCOMMON) $(PKG_LIBS)

$(MBEXEC): $(SHIM_OBJ) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) $(ALL_LDFLAGS) -o $@ $(SHIM_OBJ) $(LIBCOMMON) $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null) -lutil

$(O)/tests/%: $(OBJ)/tests/tools/%.o $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBCOMMON) $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null)

-include $(COMMON_OBJ:.o=.d) $(FUSE_OBJ:.o=.d) $(SHIM_OBJ:.o=.d) \
         $(TOOL_SRC:tests/tools/%.c=$(OBJ)/tests/tools/%.d)

# Install the Debian packages the build, tests and demo need (only what is
# missing; needs root or sudo).
deps:
	@bash .ci/install-deps

check: deps
	@echo "==> building (make V=1 shows the commands)"
	$(Q)$(QUIETMAKE) all
	@echo "==> shellcheck of the guest scripts"
	$(Q)$(SUBMAKE) lint
	@echo "==> unit tests of the parsers"
	$(Q)$(QUIETMAKE) unit
	@echo "==> fuzzing the parsers, $(CHECK_FUZZ_SECONDS) s each"
	$(Q)$(QUIETMAKE) fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
	@echo "==> the pytest suite, $(PYTEST_JOBS) at a time"
	$(Q)MB_BIN_DIR=$(CURDIR) $(PYTHON) -m pytest -q $(PYTEST_PAR) $(PYTEST_ARGS) tests

# Every script that runs on the guest (and the one that embeds them) passes
# shellcheck as POSIX sh, since the hosted images run them under dash.
lint:
	$(Q)shellcheck -s sh $(GUEST_SH) $(FUSE_SH) common/embed.sh

test: all
	$(Q)MB_BIN_DIR=$(CURDIR) $(PYTHON) -m pytest -q $(PYTEST_PAR) $(PYTEST_ARGS) tests

# A subset of the suite for a quick look, about a minute on 2 cores: the
# test files marked `quick` (tests/conftest.py lists them). Not a substitute
# for `make check`.
test-quick: all
	$(Q)MB_BIN_DIR=$(CURDIR) $(PYTHON) -m pytest -q $(PYTEST_PAR) -m quick $(PYTEST_ARGS) tests

# The random-operation tests, longer: STRESS_SEEDS seeds of STRESS_OPS
# operations each with files held open (`make check` runs 3 of 250), and
# a directory flipping with a symlink for FLIP_SECONDS (`make check`: 6).
STRESS_SEEDS ?= 1,2,3,4,5,6,7,8,9,10
STRESS_OPS ?= 500
FLIP_SECONDS ?= 60
stress: all
	$(Q)MB_BIN_DIR=$(CURDIR) MB_STRESS_SEEDS=$(STRESS_SEEDS) MB_STRESS_OPS=$(STRESS_OPS) \
	MB_FLIP_SECONDS=$(FLIP_SECONDS) $(PYTHON) -m pytest -q $(PYTEST_PAR) $(PYTEST_ARGS) \
	tests/test_mbfs_stress_open.py \
	tests/test_mbfs_hostile_paths.py::test_a_directory_flipping_with_a_symlink_leads_nothing_out

ASAN_VARS := O=build/asan CFLAGS="-O1 -g" \
	SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

asan-build:
	$(MAKE) $(ASAN_VARS) all

asan: deps
	$(MAKE) asan-build
	$(MAKE) $(ASAN_VARS) unit
	MB_BIN_DIR=$(CURDIR)/build/asan MB_ASAN=1 \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(PYTHON) -m pytest -q $(ASAN_PAR) $(PYTEST_ARGS) tests

# Shell completion (common/completion/): one bash file for both commands,
# installed under each name (bash-completion loads it by command name).
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	           $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 0755 $(MBFS) $(MBEXEC) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 man/mbfs.1 man/mbexec.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 common/completion/mainbrella.bash $(DESTDIR)$(BASHCOMPDIR)/mbfs
	install -m 0644 common/completion/mainbrella.bash $(DESTDIR)$(BASHCOMPDIR)/mbexec
	install -m 0644 common/completion/_mbfs common/completion/_mbexec $(DESTDIR)$(ZSHCOMPDIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/mbfs $(DESTDIR)$(PREFIX)/bin/mbexec \
	      $(DESTDIR)$(PREFIX)/share/man/man1/mbfs.1 \
	      $(DESTDIR)$(PREFIX)/share/man/man1/mbexec.1 \
	      $(DESTDIR)$(BASHCOMPDIR)/mbfs $(DESTDIR)$(BASHCOMPDIR)/mbexec \
	      $(DESTDIR)$(ZSHCOMPDIR)/_mbfs $(DESTDIR)$(ZSHCOMPDIR)/_mbexec

# The local service for trying mbfs and mbexec by hand: it prints the two
# export lines to paste into another shell; Ctrl-C stops it.
serve:
	$(Q)$(PYTHON) tests/localservice.py --listen 127.0.0.1:8787 --state build/serve-state --exports

demo: deps
	@echo "==> building mbfs and mbexec (make V=1 shows the commands)"
	$(Q)$(QUIETMAKE) all
	$(Q)bash tests/demo.sh

bench: deps
	$(Q)$(SUBMAKE) all
	$(Q)$(PYTHON) tests/bench/bench.py

clean:
	rm -rf build fuse/mbfs shim/mbexec $(TOOL_SRC:tests/tools/%.c=tests/%)

# Unit tests of the parsers of guest and server output (tests/unit/): one
# program per parser, linking only the objects named here and
# libmbcommon; no service, no mount. Run from the top of the tree (they
# read their real outputs from tests/fuzz/seeds/).
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(OBJ)/unit/%)
COMMON_LIBS = $(shell pkg-config --libs libcurl libcjson libcrypto 2>/dev/null)
UNIT_OBJ_test_packparse := $(OBJ)/fuse/bulk/packparse.o
UNIT_OBJ_test_tarread := $(OBJ)/fuse/transport/tarread.o $(OBJ)/fuse/durable/fdio.o
UNIT_OBJ_test_report := $(OBJ)/fuse/transport/report.o
UNIT_OBJ_test_sse :=
UNIT_OBJ_test_mbxreport := $(OBJ)/shim/guest.o $(OBJ)/shim/result.o \
                           $(OBJ)/gen/guest_sh.o

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do $$t; done

-include $(UNIT_SRC:%.c=$(OBJ)/%.d)

.SECONDEXPANSION:
$(OBJ)/unit/%: $(OBJ)/tests/unit/%.o $$(UNIT_OBJ_$$*) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) $(ALL_LDFLAGS) -o $@ $< $(UNIT_OBJ_$*) $(LIBCOMMON) $(COMMON_LIBS)

# Fuzz targets of the same parsers (tests/fuzz/), built with clang's
# libFuzzer under ASan + UBSan in build/fuzz/; `make fuzz` runs each for
# FUZZ_SECONDS from its seeds (real outputs, tests/fuzz/seeds/TARGET/;
# what it finds goes to build/fuzz/corpus/) and fails on any crash, leak
# or sanitizer report.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 8
# per target in `make check`
CHECK_FUZZ_SECONDS ?= 2
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   = -std=gnu11 $(WARN) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
                -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -pthread -I. $(PKG_CFLAGS) -MMD -MP
FUZZ_TARGETS := pack tar numbers report_cut report_pack report_df report_apply \
                sse job_json mbx_report
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_LIBCOMMON := $(FUZZ_DIR)/obj/libmbcommon.a
FUZZ_OBJ_pack := fuse/bulk/packparse.o
FUZZ_OBJ_tar := fuse/transport/tarread.o fuse/durable/fdio.o
FUZZ_OBJ_mbx_report := shim/guest.o shim/result.o gen/guest_sh.o
# the reports share one source: FUZZ_WHICH picks the parser
FUZZ_WHICH_numbers := 0
FUZZ_WHICH_report_cut := 1
FUZZ_WHICH_report_pack := 2
FUZZ_WHICH_report_df := 3
FUZZ_WHICH_report_apply := 4
$(foreach t,numbers report_cut report_pack report_df report_apply,\
  $(eval FUZZ_MAIN_$(t) := $(FUZZ_DIR)/obj/fuzz_report_$(t).o $(FUZZ_DIR)/obj/fuse/transport/report.o))

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
# the dependency files are made by the compiler, never remade by a rule
# (make's built-in "%: %.o" would try fuzz_report_X.d.o)
$(FUZZ_DIR)/obj/%.d: ;

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call msg,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/gen/guest_sh.o: $(OBJ)/gen/guest_sh.c
	@mkdir -p $(dir $@)
	$(call msg,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/fuzz_report_%.o: tests/fuzz/fuzz_report.c tests/fuzz/fuzz.h fuse/transport/report.h
	@mkdir -p $(dir $@)
	$(call msg,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_WHICH=$(FUZZ_WHICH_$*) -c -o $@ $<

$(FUZZ_LIBCOMMON): $(COMMON_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
	$(call msg,AR,$@)rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $$(or $$(FUZZ_MAIN_$$*),$(FUZZ_DIR)/obj/tests/fuzz/fuzz_$$*.o) \
		    $$(addprefix $(FUZZ_DIR)/obj/,$$(FUZZ_OBJ_$$*)) $(FUZZ_LIBCOMMON)
	$(call msg,FUZZLD,$@)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ $(COMMON_LIBS)

fuzz: $(FUZZ_BIN)
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/corpus/$$t; \
		echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
		$(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
			-print_final_stats=0 -artifact_prefix=$(FUZZ_DIR)/ \
			$(FUZZ_DIR)/corpus/$$t tests/fuzz/seeds/$$t 2>$(FUZZ_DIR)/$$t.log || \
			{ tail -40 $(FUZZ_DIR)/$$t.log; exit 1; }; \
	done
