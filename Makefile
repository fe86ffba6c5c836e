# dstream: one Makefile for everything (build, test, run, install, bench, fuzz).
#
#   make            build build/dstream-fcgi and build/dstream
#   make run        build and run nginx + the pool on a local database (./var)
#   make test       check + unit + fuzz smoke + HTTP (bats) + conformance, one summary line
#   make check      banned functions, settings documented, no reference outside the repo
#   make SANITIZER=address test   (or undefined, thread)

CC      ?= cc
OPT     ?= -O2
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wformat=2
STD     := -std=gnu11
CFLAGS  += $(STD) $(WARN) $(OPT) -g -MMD -MP -D_GNU_SOURCE -pthread -I/usr/include/postgresql
LDLIBS  := -ljansson -lsqlite3 -lpq -lcrypto -lpthread
B       := build

ifneq ($(SANITIZER),)
CFLAGS  += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZER)
B       := build-$(SANITIZER)
# A finding stops the process, so the test that caused it fails.
export UBSAN_OPTIONS := halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS := abort_on_error=0:detect_leaks=1
endif

LIB_SRC  := $(wildcard lib/*.c lib/store/*/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o) $(B)/lib/migrations.o $(B)/lib/pg_migrations.o
FCGI_SRC := $(wildcard fcgi/*.c)
FCGI_OBJ := $(FCGI_SRC:%.c=$(B)/%.o)
RUN_SRC  := $(wildcard runner/*.c)
RUN_OBJ  := $(RUN_SRC:%.c=$(B)/%.o)
CLI_SRC  := $(wildcard cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
SQL      := $(sort $(wildcard sql/sqlite/*.sql))
PG_SQL   := $(sort $(wildcard sql/pg/*.sql))

Q := @
ifeq ($(V),1)
Q :=
endif

all: $(B)/dstream-fcgi $(B)/dstream-runner $(B)/dstream

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC   $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/lib/migrations.c: $(SQL) tools/sql2c.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/sql2c.sh db $(SQL) > $@

$(B)/lib/pg_migrations.c: $(PG_SQL) tools/sql2c.sh
	@mkdir -p $(dir $@)
	$(Q)sh tools/sql2c.sh pg $(PG_SQL) > $@

$(B)/lib/migrations.o: $(B)/lib/migrations.c
	@echo "  CC   $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/lib/pg_migrations.o: $(B)/lib/pg_migrations.c
	@echo "  CC   $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/libdstream.a: $(LIB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/dstream-fcgi: $(FCGI_OBJ) $(B)/libdstream.a
	@echo "  LINK $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(FCGI_OBJ) $(B)/libdstream.a -lfcgi $(LDLIBS)

$(B)/dstream-runner: $(RUN_OBJ) $(B)/libdstream.a
	@echo "  LINK $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(RUN_OBJ) $(B)/libdstream.a -lcurl $(LDLIBS)

$(B)/dstream: $(CLI_OBJ) $(B)/libdstream.a
	@echo "  LINK $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(B)/libdstream.a -lcurl $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libdstream.a $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC   $<"
	$(Q)$(CC) $(CFLAGS) -Ilib $(LDFLAGS) -o $@ $< $(B)/libdstream.a $(LDLIBS)

# The runner's modules tested alone that drive libcurl.
$(B)/tests/test_curlev: LDLIBS += -lcurl

$(B)/bench/%: bench/%.c $(B)/libdstream.a
	@mkdir -p $(dir $@)
	@echo "  CC   $<"
	$(Q)$(CC) $(CFLAGS) -Ilib $(LDFLAGS) -o $@ $< $(B)/libdstream.a $(LDLIBS)

# ---- dependencies ---------------------------------------------------------------
# Everything `make`, `make test` and `make run-pg` need on Debian 12: libpq-dev to
# build, postgresql-15 for the throwaway clusters of the tests (its client too:
# psql, pg_dump, pg_basebackup), python3-yaml for 24-debug-cli's YAML check, python3
# for 41-runner-systemd's notify socket. `make bench` adds wrk and nginx's nchan module.
DEBS := libfcgi-dev libfcgi-bin spawn-fcgi nginx-light libsqlite3-dev sqlite3 libssl-dev \
        libcurl4-openssl-dev libjansson-dev bats bats-assert bats-support curl jq nodejs npm \
        clang apache2-bin libapache2-mod-fcgid chromium systemd man-db \
        libpq-dev postgresql-15 python3 python3-yaml
deps:
	@missing=$$(for p in $(DEBS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || \
	    { [ $$p = nginx-light ] && command -v nginx >/dev/null; } || \
	    { [ $$p = nodejs ] && command -v node >/dev/null; } || \
	    { [ $$p = npm ] && command -v npm >/dev/null; } || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "deps: installing $$missing"; \
	    if [ "$$(id -u)" != 0 ]; then echo "deps: run as root or install: $$missing" >&2; exit 1; fi; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# ---- running --------------------------------------------------------------------
run: deps all
	@deploy/dstream-stack run

# The same on a private PostgreSQL cluster under ./var/pg (kept between runs).
run-pg: deps all
	@deploy/dstream-stack run-pg

# ---- tests ----------------------------------------------------------------------
unit: $(UNIT_BIN)
	@tests/run-unit.sh $(UNIT_BIN)

http: all
	@B=$(B) tests/run-http.sh

conformance: all
	@B=$(B) tests/conformance/run.sh

test: deps all $(UNIT_BIN)
	@B=$(B) tests/run-all.sh $(UNIT_BIN)

BENCH_BIN := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c))
bench: deps all $(BENCH_BIN)
	@command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@[ -e /usr/lib/nginx/modules/ngx_nchan_module.so ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnginx-mod-nchan >/dev/null; }
	@B=$(B) bench/run.sh

# make fuzz: every harness for FUZZ_SECONDS (seeds in tests/fuzz/corpus; what it grows in build-fuzz/corpus).
FUZZ_SECONDS ?= 120
fuzz:
	@command -v clang >/dev/null || { apt-get update -qq && apt-get install -y -qq clang >/dev/null; }
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

# make install PREFIX=/usr/local DESTDIR=  (deploy/install-tree.sh says what goes where;
# deploy/install.sh adds the system user, directories and enables the units)
PREFIX ?= /usr/local
install: all
	@B=$(B) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) deploy/install-tree.sh install

uninstall:
	@PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) deploy/install-tree.sh uninstall

check: all
	@B=$(B) tests/check.sh

clean:
	rm -rf build build-* var/run

.PHONY: all deps run run-pg unit http conformance test check bench fuzz install uninstall clean

-include $(shell find $(B) -name '*.d' 2>/dev/null)
