# eft - a small, fast STOMP 1.2 broker.
#
#   make            build build/eftd, build/eft-bench, build/eft-passwd and build/eftctl
#   make run        install missing packages, build, run eftd on 127.0.0.1:61613
#                   (dashboard and metrics on http://127.0.0.1:15672)
#   make test       install missing packages, build, run every test
#   make asan       the same tests against an ASan+UBSan build (build-asan/)
#   make valgrind   the end-to-end tests with eftd under valgrind memcheck
#                   (E2E_TESTS="durable signals" for some files, EFT_TRANSPORTS=tcp)
#   make crash-test kill -9 eftd 50 times under load (CRASH_ROUNDS) and check
#                   that every RECEIPT was kept
#   make crash-soak HOURS=N
#                   the crash soak: mixed producers, consumers, a durable
#                   subscriber and RPC for N hours (default 2; 0.05 is 3
#                   minutes) under fsync = always, eftd killed -9 every
#                   KILL_EVERY (60-300) seconds and every RECEIPT checked after
#                   each restart; RSS in rss.csv (test/e2e/crash_soak.py;
#                   CI-sized: make crash-soak HOURS=0.05 KILL_EVERY=20-40)
#   make fuzz       libFuzzer harnesses (clang, ASan+UBSan) in build-fuzz/;
#                   make fuzz-run runs each for FUZZ_SECONDS (60), see test/fuzz/run;
#                   make fuzz-campaign runs each for FUZZ_HOURS (1), niced, one
#                   at a time, and minimises what it grew (test/fuzz/campaign)
#   make bench      benchmark a fresh eftd: CSV and PNG charts in bench/results/
#                   (BENCH_ARGS="--quick" for a smoke run; see tools/bench --help)
#   make install    eftd, eft-passwd, eft-bench and eftctl, etc/eftd.conf, the
#                   systemd unit and its sysusers.d file, under PREFIX
#                   (/usr/local); DESTDIR=DIR stages them (docs/service.md)
#   make uninstall  remove them again (an edited eftd.conf, the users file and
#                   the data directory stay)
#   make clean

BUILD    ?= build
CC       ?= gcc
OPTFLAGS ?= -O2 -g
CFLAGS   += -std=c11 $(OPTFLAGS) -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
CPPFLAGS += -Iinclude -D_GNU_SOURCE
LDLIBS   += -levent -levent_pthreads -lnats -lsodium -lssl -lcrypto
# make run: STOMP on 61613, STOMP over WebSocket where Web-STOMP has it, the
# admin listener (dashboard, metrics, eftctl) where RabbitMQ's management is;
# persistent messages in data/ (git ignores it, make clean leaves it).
RUN_ARGS ?= -L tcp://127.0.0.1:61613 -L ws://127.0.0.1:15674/ws -L http://127.0.0.1:15672 \
	--data-dir data

LIB_SRCS  := $(filter-out src/main.c,$(wildcard src/*.c))
# dashboard.S puts web/dashboard.html in the binary (.incbin).
LIB_OBJS  := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/dashboard.o
UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:test/unit/%.c=$(BUILD)/test/%)
BENCH_SRCS := $(wildcard tools/eft-bench/*.c)
BENCH_OBJS := $(BENCH_SRCS:tools/eft-bench/%.c=$(BUILD)/obj/bench/%.o)

# make install.  DESTDIR is put before every path written (packages, tests);
# the installed unit names the paths without it.  With PREFIX=/usr the
# config goes to /etc/eft, not /usr/etc/eft (as GNUInstallDirs does).
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SYSCONFDIR  ?= $(if $(filter /usr /usr/,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
CONFDIR     := $(DESTDIR)$(SYSCONFDIR)/eft
# The programs installed: eftctl once its sources are in tools/.
PROGRAMS    := eftd eft-passwd $(if $(BENCH_SRCS),eft-bench) $(if $(wildcard tools/eftctl*),eftctl)

ifeq ($(V),)
Q = @
QCC = @printf '  CC    %s\n' $@;
QLD = @printf '  LD    %s\n' $@;
endif

.PHONY: all deps test-deps run test unit asan valgrind bench clean fuzz fuzz-run fuzz-campaign crash-test crash-soak cluster-chaos \
    install uninstall

all: $(BUILD)/eftd $(if $(BENCH_SRCS),$(BUILD)/eft-bench) $(BUILD)/eft-passwd $(BUILD)/eftctl

$(BUILD)/obj/%.o: src/%.c
	$(Q)mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/dashboard.o: src/dashboard.S web/dashboard.html
	$(Q)mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) -c $< -o $@

$(BUILD)/obj/bench/%.o: tools/eft-bench/%.c
	$(Q)mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/eftd: $(BUILD)/obj/main.o $(LIB_OBJS)
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/eft-bench: $(BENCH_OBJS)
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -lm -o $@

$(BUILD)/obj/tools/%.o: tools/%.c
	$(Q)mkdir -p $(dir $@)
	$(QCC)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/eft-passwd: $(BUILD)/obj/tools/eft-passwd.o $(BUILD)/obj/tools/ask.o $(BUILD)/obj/auth.o $(BUILD)/obj/address.o \
    $(BUILD)/obj/log.o
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) $^ -lsodium -o $@

# eftctl talks to eftd's admin HTTP API with libevent's evhttp client alone;
# libsodium only for the Basic auth header's base64.
$(BUILD)/eftctl: $(BUILD)/obj/tools/eftctl.o $(BUILD)/obj/tools/ask.o
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) $^ -levent -lsodium -o $@

# The wildcard subjects' micro-benchmark (issue 25): not part of make test.
$(BUILD)/subject-bench: $(BUILD)/obj/tools/subject-bench.o $(BUILD)/obj/subject.o
	$(QLD)$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@

# test_oom and test_subject make allocations fail: every malloc, calloc and
# realloc of eft's own code goes through their wrappers.
# (Not in LDFLAGS: make asan sets that on the command line.)
$(BUILD)/test/test_oom $(BUILD)/test/test_subject: WRAP_ALLOC = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc

$(BUILD)/test/%: test/unit/%.c $(LIB_OBJS)
	$(Q)mkdir -p $(dir $@)
	$(QLD)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WRAP_ALLOC) $^ $(LDLIBS) -lcmocka -o $@

# The power-cut tests' LD_PRELOAD library (test/powercut/powercut.c, used by
# test/e2e/test_powercut.py): the same plain flags in every build (under an
# ASan eftd it is loaded after ASan's runtime, not instrumented itself).
POWERCUT_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -fPIC -shared
$(BUILD)/libpowercut.so: test/powercut/powercut.c
	$(Q)mkdir -p $(dir $@)
	$(QLD)$(CC) $(POWERCUT_CFLAGS) $< -ldl -lpthread -o $@

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/obj/bench/*.d $(BUILD)/obj/tools/*.d)

deps:
	@tools/install-deps build

test-deps:
	@tools/install-deps test

run: deps
	@$(MAKE) --no-print-directory all
	./$(BUILD)/eftd $(RUN_ARGS)

unit: $(UNIT_BINS)

test: test-deps
	@$(MAKE) --no-print-directory all unit $(BUILD)/libpowercut.so
	@BUILD=$(BUILD) test/run

asan: test-deps
	@$(MAKE) --no-print-directory BUILD=build-asan \
	    OPTFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	    LDFLAGS="-fsanitize=address,undefined" all unit build-asan/libpowercut.so
	@BUILD=build-asan test/run

valgrind: test-deps
	@$(MAKE) --no-print-directory all unit $(BUILD)/libpowercut.so
	@BUILD=$(BUILD) EFTD_WRAPPER="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q" test/run e2e

# kill -9 eftd at random moments under load, CRASH_ROUNDS times, and check
# every promise after each restart (test/e2e/crash_test.py).
CRASH_ROUNDS ?= 50
crash-test: test-deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) /usr/bin/python3 test/e2e/crash_test.py $(CRASH_ROUNDS)

# The cluster's kill -9 trials (issue 26): nats-server killed under load,
# CHAOS_ROUNDS times (about 30 s a round; make test runs them once).
CHAOS_ROUNDS ?= 5
cluster-chaos: test-deps
	@$(MAKE) --no-print-directory all
	@cd test/e2e && fails=0; for i in $$(seq $(CHAOS_ROUNDS)); do \
	    echo "== cluster chaos round $$i of $(CHAOS_ROUNDS)"; \
	    EFT_TRANSPORT=tcp /usr/bin/python3 -m unittest -v test_cluster_chaos || fails=$$((fails+1)); \
	done; echo "cluster chaos: $$fails of $(CHAOS_ROUNDS) rounds failed"; [ $$fails -eq 0 ]

# The crash soak (issue 23): the log, rss.csv, rounds.csv and summary.txt
# go to build/crash-soak/DATE-TIME/ (the data directory too, if it failed).
# CRASH_SOAK_ARGS passes more, e.g. "--seed 7 --rate 200".
HOURS       ?= 2
KILL_EVERY  ?= 60-300
crash-soak: test-deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) /usr/bin/python3 test/e2e/crash_soak.py --hours $(HOURS) \
	    --kill-every $(KILL_EVERY) $(CRASH_SOAK_ARGS)

bench:
	@tools/install-deps bench
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/bench $(BENCH_ARGS)

# The library is built with coverage instrumentation (fuzzer-no-link), each
# harness links libFuzzer's main.
FUZZ_FLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60

fuzz:
	@tools/install-deps fuzz
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang \
	    OPTFLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" LDFLAGS="-fsanitize=fuzzer,address,undefined" \
	    build-fuzz/parser-fuzzer build-fuzz/proto-fuzzer build-fuzz/ws-fuzzer build-fuzz/store-fuzzer \
	    build-fuzz/admin-fuzzer build-fuzz/selector-fuzzer build-fuzz/cluster-fuzzer build-fuzz/subject-fuzzer

build-fuzz/%-fuzzer: test/fuzz/%-fuzzer.c $(LIB_OBJS)
	$(QLD)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

fuzz-run: fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) test/fuzz/run

FUZZ_HOURS ?= 1
fuzz-campaign: fuzz
	@FUZZ_HOURS=$(FUZZ_HOURS) test/fuzz/campaign

# An eftd.conf already installed and edited is kept: the new one goes beside
# it as eftd.conf.new.  The unit gets the real paths from BINDIR and
# SYSCONFDIR (sed into $(BUILD)/eftd.service, then installed).
install: all $(addprefix $(BUILD)/,$(PROGRAMS))
	install -D -m 0755 -t $(DESTDIR)$(BINDIR) $(addprefix $(BUILD)/,$(PROGRAMS))
	@if [ -e $(CONFDIR)/eftd.conf ] && ! cmp -s etc/eftd.conf $(CONFDIR)/eftd.conf; then \
	    echo "install -D -m 0644 etc/eftd.conf $(CONFDIR)/eftd.conf.new"; \
	    install -D -m 0644 etc/eftd.conf $(CONFDIR)/eftd.conf.new && \
	    echo "make install: kept the edited $(SYSCONFDIR)/eft/eftd.conf; the new one is eftd.conf.new beside it"; \
	else \
	    echo "install -D -m 0644 etc/eftd.conf $(CONFDIR)/eftd.conf"; \
	    install -D -m 0644 etc/eftd.conf $(CONFDIR)/eftd.conf; \
	fi
	install -D -m 0644 etc/users.example $(CONFDIR)/users.example
	$(Q)mkdir -p $(BUILD)
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' etc/eftd.service >$(BUILD)/eftd.service
	install -D -m 0644 $(BUILD)/eftd.service $(DESTDIR)$(UNITDIR)/eftd.service
	install -D -m 0644 etc/eft.sysusers $(DESTDIR)$(SYSUSERSDIR)/eft.conf

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(PROGRAMS))
	rm -f $(DESTDIR)$(UNITDIR)/eftd.service $(DESTDIR)$(SYSUSERSDIR)/eft.conf
	rm -f $(CONFDIR)/users.example $(CONFDIR)/eftd.conf.new
	@if cmp -s etc/eftd.conf $(CONFDIR)/eftd.conf; then \
	    echo "rm -f $(CONFDIR)/eftd.conf"; rm -f $(CONFDIR)/eftd.conf; \
	elif [ -e $(CONFDIR)/eftd.conf ]; then \
	    echo "make uninstall: kept the edited $(SYSCONFDIR)/eft/eftd.conf"; \
	fi
	@rmdir $(CONFDIR) 2>/dev/null || true

clean:
	rm -rf build build-asan build-fuzz
