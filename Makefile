# Thin wrapper over CMake + ninja. `make run` and `make test` are the two
# commands a newcomer needs; both install what is missing first.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
MEMCHECK_BUILD ?= build-memcheck
VENV       ?= .venv
CONF       ?= colibri.conf
# -Werror in CI, plain warnings at a desk
WERROR     ?= $(if $(CI),ON,OFF)
CMAKE_ARGS ?=
# make install: where to, and a staging root for packagers
PREFIX     ?= /usr/local
DESTDIR    ?=
LDCONFIG   ?= $(firstword $(wildcard /sbin/ldconfig /usr/sbin/ldconfig) ldconfig)
# samples/NAME/, each run with `make run-NAME`
SAMPLES     = $(notdir $(patsubst %/CMakeLists.txt,%,$(wildcard samples/*/CMakeLists.txt)))

.PHONY: all build asan run test layers unit blackbox spec format format-check bench fuzz coro-variants check-tls \
        deps test-deps clean install uninstall check-faults check-thread check-memcheck soak

all: build

deps:
	@scripts/deps.sh build

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLIBRI_WERROR=$(WERROR) $(CMAKE_ARGS)

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOLIBRI_SANITIZE=ON \
	    -DCOLIBRI_WERROR=$(WERROR) $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD)

asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD)

# Release build into $(DESTDIR)$(PREFIX): bin/, include/colibri.h,
# lib/libcolibri.{so,a}, lib/pkgconfig/colibri.pc (see CMakeLists.txt for its
# rpath). Then, as root and without DESTDIR, ldconfig, so that the loader's
# cache knows the new libcolibri.so.0 at once when lib is one of its
# directories (/usr/local/lib on Debian); other prefixes need no ldconfig.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"
	$(ldconfig_if_system)

# Removes what `make install` with the same PREFIX/DESTDIR put there. The file
# list comes from a staged install, not from install_manifest.txt, which the
# last `cmake --install` (any prefix, a test's too) has overwritten.
uninstall:
	@test -f $(BUILD)/cmake_install.cmake || { echo "uninstall: build first (make)" >&2; exit 1; }
	@stage=$$(mktemp -d) && trap 'rm -rf "$$stage"' EXIT && \
	DESTDIR="$$stage" cmake --install $(BUILD) --prefix "$(PREFIX)" >/dev/null && \
	(cd "$$stage" && find . ! -type d) | sed 's|^\.||' | while IFS= read -r f; do \
	    echo "rm $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f"; done
	$(ldconfig_if_system)

# ldconfig rebuilds the whole system cache, so only when it matters: root, no
# DESTDIR, and the installed lib directory is one ldconfig scans.
INSTALL_LIBDIR = $(shell sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' $(BUILD)/CMakeCache.txt)
define ldconfig_if_system
@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
    lib=$$(readlink -f "$(PREFIX)/$(INSTALL_LIBDIR)"); \
    for d in $$($(LDCONFIG) -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do \
        if [ "$$(readlink -f "$$d")" = "$$lib" ]; then echo $(LDCONFIG); $(LDCONFIG); break; fi; \
    done; \
fi
endef

# make run [PORT=9000] [CONF=file]: PORT replaces the config's listeners
# with 127.0.0.1:PORT (the -l option)
run: build
	$(abspath $(BUILD))/colibri -c $(CONF) $(if $(PORT),-l 127.0.0.1:$(PORT))

# make run-NAME [ARGS="..."]: builds and runs the sample samples/NAME
# (build/samples/NAME/NAME; each listens on 127.0.0.1:8080 unless ARGS say
# otherwise: README, "Samples").
.PHONY: $(addprefix run-,$(SAMPLES))
$(addprefix run-,$(SAMPLES)): run-%: build
	./$(BUILD)/samples/$*/$* $(ARGS)

test-deps: deps
	@scripts/deps.sh test
	@test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	@# again whenever tests/requirements.txt changed, so an old .venv gets new pins
	@cmp -s tests/requirements.txt $(VENV)/requirements.txt || { \
	    $(VENV)/bin/pip install -q -r tests/requirements.txt && \
	    cp tests/requirements.txt $(VENV)/requirements.txt; }

unit: build asan
	cd $(BUILD) && ctest --output-on-failure
	cd $(ASAN_BUILD) && ctest --output-on-failure

# The suite runs whole and one test at a time on the Release build; on the
# ASan build two at a time (pytest-xdist: about 4 minutes instead of 7.5),
# without the tests that bound a time (TIMED_TESTS, below), which two
# suites sharing two cores would measure instead of the server.
blackbox: build asan test-deps
	COLIBRI_BIN=$(BUILD)/colibri $(VENV)/bin/pytest -q tests/http
	COLIBRI_BIN=$(ASAN_BUILD)/colibri $(VENV)/bin/pytest -q -n 2 tests/http $(TIMED_DESELECT)

# Fault injection (tests/fault): a -O1 build without sanitizers (ASan owns
# malloc) and an LD_PRELOAD library; every call site of malloc & co, open,
# mmap, read, write(v), send, sendfile, accept4 that the black-box suite
# reaches fails in turn under the tests that reach it. 5-13 min; not in `make test`.
# COLIBRI_LIBC_IO: read()/writev() through libc (rt/sys.h), where libfault.so sees them
FAULT_BUILD ?= build-fault
$(FAULT_BUILD)/build.ninja:
	cmake -S . -B $(FAULT_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g -fno-omit-frame-pointer -DCOLIBRI_LIBC_IO" -DCOLIBRI_FAULT=ON \
	    -DCOLIBRI_WERROR=$(WERROR) $(CMAKE_ARGS)

check-faults: deps test-deps $(FAULT_BUILD)/build.ninja
	cmake --build $(FAULT_BUILD)  # the samples too: their tests are in the record run
	$(VENV)/bin/python tests/fault/run.py --bin $(FAULT_BUILD)/colibri \
	    --lib $(FAULT_BUILD)/libfault.so --out $(FAULT_BUILD)/faults

# The official Mustache spec, when ../shared is beside the checkout (CI).
SPEC_DIR ?= ../shared/mustache-spec
spec: build test-deps
	$(VENV)/bin/python tests/spec/run_spec.py $(BUILD)/colibri-tpl $(SPEC_DIR)

# the context switches not used on this machine: ucontext, aarch64 (qemu)
coro-variants:
	@scripts/deps.sh cross
	scripts/coro-variants.sh

test: test-deps layers unit blackbox check-tls check-thread coro-variants format-check

# The suites of files, WebSockets, SSE, bodies, uploads, forms, pipelining
# and keep-alive once more over TLS (tests/http/conftest.py: every listener
# with tls = true, every client through TLS; tests marked plain_only, which
# look at plain HTTP's bytes on the socket, are skipped). About 1.5 min.
TLS_SUITES = $(addprefix tests/http/,test_basic.py test_files.py test_websocket.py test_sse.py \
    test_bodies.py test_body_spool.py test_multipart.py test_forms.py test_pipelining.py \
    test_keepalive.py test_access_log_interrupted.py)
check-tls: build test-deps
	COLIBRI_TEST_TLS=1 COLIBRI_BIN=$(BUILD)/colibri $(VENV)/bin/pytest -q \
	    -W "ignore:Unverified HTTPS request" $(TLS_SUITES)

# The layer check: every #include points down, as ARCHITECTURE.md's table
# says (scripts/layers.py), and the check itself fails on a wrong include
# (tests/scripts).
layers: test-deps
	python3 scripts/layers.py
	$(VENV)/bin/pytest -q tests/scripts

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check: test-deps
	clang-format --dry-run --Werror $(FORMAT_FILES)

bench: build
	@scripts/deps.sh bench
	bench/run.sh

fuzz:
	@scripts/deps.sh build fuzz
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	    -DCOLIBRI_FUZZ=ON
	cmake --build build-fuzz

# --- checkers (README: "Checkers"): make test runs check-thread, .ci/run
# check-memcheck; make soak is by hand ----------------------------------------
# ThreadSanitizer: every unit test (the threaded ones are test_worker and
# test_cache) and the black-box files that exercise threads: the cache, the
# acceptor thread, shutdown, reload, waits, SSE, WebSockets, the log
# reopening and flushing, systemd's socket shared by every worker.
TSAN_OPTIONS_CHECK = suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 exitcode=66
TSAN_TESTS = $(addprefix tests/http/,test_concurrency.py test_shutdown.py test_reload.py \
    test_wait.py test_sse.py test_websocket.py test_files.py test_files_fresh.py test_listen.py \
    test_logs.py test_systemd.py test_stale_events.py test_tls.py test_rules.py test_proxy.py \
    test_metrics.py)

# Two tests bound a latency to 50 ms: under TSan (5-15 times slower) they
# would measure TSan, not colibri; the build without TSan runs them. The
# sandbox does not start under TSan (its own thread does not take the
# Landlock rules): the proxy's sandbox tests run in the other builds.
TSAN_DESELECT = \
    --deselect tests/http/test_proxy.py::test_under_the_sandbox \
    --deselect tests/http/test_proxy.py::test_reload_cannot_widen_the_sandbox \
    --deselect tests/http/test_proxy_tls.py::test_under_the_sandbox \
    --deselect tests/http/test_wait.py::test_hello_and_file_fast_behind_a_waiting_stream \
    --deselect tests/http/test_wait.py::test_1000_streams_on_one_thread_and_hello_within_50ms

$(TSAN_BUILD)/build.ninja:
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOLIBRI_TSAN=ON \
	    -DCOLIBRI_WERROR=$(WERROR) $(CMAKE_ARGS)

check-thread: test-deps $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="$(TSAN_OPTIONS_CHECK)" ctest --output-on-failure
	TSAN_OPTIONS="$(TSAN_OPTIONS_CHECK)" COLIBRI_BIN=$(TSAN_BUILD)/colibri \
	    $(VENV)/bin/pytest -q $(TSAN_TESTS) $(TSAN_DESELECT)

# valgrind memcheck: the black-box suite with every make_server() server run
# under valgrind (tests/http/conftest.py: COLIBRI_WRAPPER). A build of its own
# (-O2 -g) made once valgrind.h is installed, so coroutine stacks are
# registered (base/coro.c). Any error, or a definite/indirect leak, makes
# valgrind exit 99 and the test fail.
MEMCHECK_WRAPPER = valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
    --fair-sched=yes --suppressions=$(CURDIR)/tests/valgrind.supp --log-file={log}
MEMCHECK_SCALE ?= 4
MEMCHECK_TESTS ?= tests/http
# Tests that bound a time, which the Release run checks one at a time:
# p99 under 100 ms with 1,000 slowloris clients; a never-reading client's
# fd looked for 0.3 s after its request; /hello under 100 ms beside a
# one-byte-a-second reader; the access log flushed within 1.5 s; a failed
# reload's error lines read 50 ms after the first one; two answers within
# 50 ms behind a waiting handler (and a wake within 50 ms); limits and a
# slow hash timed under load; the gateway's tests that time an upstream
# against the server (504 after 500 ms, health checks every 200 ms, events
# and PHP's flush() seen within 300 ms, least_conn while a request is slow,
# a pool returned within 500 ms; PHP requests beyond the children served in
# turns, a stalled client's relay resumed at once; an HTTP/2 reader that
# stopped cut off, a download finished within shutdown_timeout). Left out
# of the runs that share the
# cores (ASan, two at a time) or run 20-50 times slower (valgrind).
TIMED_TESTS = \
    test_http2_more.py::test_sigterm_during_a_download \
    test_http2_more.py::test_a_client_that_stops_reading_is_cut_off \
    test_fastcgi.py::test_requests_beyond_the_children_wait_their_turn \
    test_fastcgi.py::test_output_that_comes_while_the_client_stalls \
    test_hostile.py::test_slowloris_does_not_starve_others_and_gets_408 \
    test_hostile.py::test_a_client_that_never_reads_is_timed_out \
    test_hostile.py::test_a_one_byte_a_second_reader_does_not_hold_the_worker \
    test_logs.py::test_access_log_flushes_idle_server_within_1_5s \
    "test_reload.py::test_bad_reload_logs_the_errors_and_the_old_config_serves[several]" \
    test_wait.py::test_hello_and_file_fast_behind_a_waiting_stream \
    test_wait.py::test_1000_streams_on_one_thread_and_hello_within_50ms \
    test_wait.py::test_wait_fd_woken_by_another_handler \
    test_rules.py::test_limit_holds_across_workers_under_load \
    test_rules.py::test_limit_key_header_and_distinct_keys_stay_bounded \
    test_rules.py::test_auth_slow_hash_is_paid_once_per_client \
    test_proxy.py::test_slow_upstream_gives_504 \
    test_proxy.py::test_all_servers_down_gives_502_at_once \
    test_proxy.py::test_active_health_check \
    test_proxy.py::test_least_conn \
    test_proxy.py::test_server_sent_events_stream_without_delay \
    test_proxy.py::test_a_client_that_stops_reading_frees_the_upstream \
    test_fastcgi.py::test_streamed_output \
    test_fastcgi.py::test_fpm_down_and_slow
TIMED_DESELECT = $(addprefix --deselect tests/http/,$(TIMED_TESTS))

# Left out under valgrind (20-50 times slower), besides TIMED_TESTS:
# test_sandbox.py whole: valgrind implements neither Landlock (ENOSYS) nor
# seccomp's TSYNC attribute (EOPNOTSUPP), so a sandboxed server cannot
# start under it. Tests that move 2 x 96 MiB through the gateway or a
# tunnel's idle end, a WebSocket through the proxy and a buffered answer
# (minutes under valgrind; their paths are covered by the other proxy and
# FastCGI tests). test_h2spec.py: h2spec gives each of its 146 cases 2 s,
# which valgrind's pace turns into false failures. test_http2_data.py's
# TLS cases move 20 MiB files through OpenSSL several times and its
# many-connections case 600 answers with 1 MiB files (minutes under
# valgrind); its h2c cases (sendfile) stay. For time, runs whose code
# other memchecked runs cover: the browser tests (Chromium's pages drive
# the same h2 and WebSocket paths as test_http2/test_h2_suite/
# test_websocket), test_h2_suite's TLS half (its h2c half and
# test_http2's TLS cases stay), 100 compressed 15 MiB WebSocket messages
# (an RSS bound; test_websocket's deflate cases stay) and the second
# instance of the shared ticket key test (test_ticket_key_rotation stays).
# Two tests at a time (pytest-xdist): valgrind runs a server's threads one
# at a time, so two suites fill two cores (16 minutes instead of 27).
MEMCHECK_DESELECT = $(TIMED_DESELECT) \
    --deselect tests/http/test_browser_h2.py \
    --deselect tests/http/test_browser_h2_websocket.py \
    --deselect tests/http/test_browser_chat.py \
    --deselect tests/http/test_browser_clock.py \
    -k "not h2tls" \
    --deselect tests/http/test_hostile.py::test_compressed_websocket_messages_do_not_pin_memory \
    --deselect tests/http/test_tls.py::test_two_instances_with_one_ticket_key_file_resume_each_other \
    --deselect "tests/http/test_http2_data.py::test_large_files_and_ranges_arrive_intact[h2]" \
    --deselect "tests/http/test_http2_data.py::test_small_windows_cut_files_into_frames_of_every_size[13-h2]" \
    --deselect "tests/http/test_http2_data.py::test_small_windows_cut_files_into_frames_of_every_size[14-h2]" \
    --deselect "tests/http/test_http2_data.py::test_small_windows_cut_files_into_frames_of_every_size[15-h2]" \
    --deselect tests/http/test_http2_data.py::test_many_connections_at_once_keep_their_frames_apart \
    --deselect tests/http/test_sandbox.py \
    --deselect tests/http/test_tls.py::test_tls_in_the_sandbox \
    --deselect tests/http/test_tls.py::test_many_half_handshakes_do_not_stop_the_thread \
    --deselect tests/http/test_h2spec.py \
    --deselect tests/http/test_h2_rest.py::test_many_connections_rest_then_wake \
    --deselect tests/http/test_h2_rest.py::test_chromium_connection_rests_and_wakes \
    --deselect tests/http/test_proxy.py::test_under_the_sandbox \
    --deselect tests/http/test_proxy.py::test_reload_cannot_widen_the_sandbox \
    --deselect tests/http/test_proxy_tls.py::test_under_the_sandbox \
    --deselect tests/http/test_proxy.py::test_large_upload_and_download_bounded_memory \
    --deselect tests/http/test_proxy.py::test_websocket_through_the_proxy \
    --deselect tests/http/test_proxy.py::test_buffer_response

$(MEMCHECK_BUILD)/build.ninja:
	cmake -S . -B $(MEMCHECK_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCOLIBRI_WERROR=$(WERROR) $(CMAKE_ARGS)

check-memcheck: test-deps $(MEMCHECK_BUILD)/build.ninja
	@scripts/deps.sh check
	cmake --build $(MEMCHECK_BUILD)
	COLIBRI_BIN=$(MEMCHECK_BUILD)/colibri COLIBRI_WRAPPER="$(MEMCHECK_WRAPPER)" \
	    COLIBRI_TIME_SCALE=$(MEMCHECK_SCALE) $(VENV)/bin/pytest -q -rs -n 2 $(MEMCHECK_TESTS) \
	    $(MEMCHECK_DESELECT)

# 10 minutes of mixed load on the ASan build, RSS sampled every 10 s
# (bench/soak.py; not in make test or CI). SOAK_SECONDS shortens it.
SOAK_SECONDS ?= 600
soak: asan test-deps
	$(VENV)/bin/python bench/soak.py --bin $(ASAN_BUILD)/colibri --seconds $(SOAK_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(MEMCHECK_BUILD) build-fuzz $(FAULT_BUILD)
