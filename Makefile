# Thin wrapper over CMake + ninja. `make run` and `make test` are the two
# commands a newcomer needs; both install what is missing first.

BUILD      ?= build
ASAN_BUILD ?= build-asan
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

.PHONY: all build asan run test unit blackbox spec format format-check bench fuzz coro-variants \
        deps test-deps clean install uninstall check-faults

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

run: build
	./$(BUILD)/colibri -c $(CONF)

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

blackbox: build asan test-deps
	COLIBRI_BIN=$(BUILD)/colibri $(VENV)/bin/pytest -q tests/http
	COLIBRI_BIN=$(ASAN_BUILD)/colibri $(VENV)/bin/pytest -q tests/http

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
	cmake --build $(FAULT_BUILD) --target colibri fault
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

test: test-deps unit blackbox coro-variants format-check

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

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz $(FAULT_BUILD)
