# The two quick-start commands, and the rest of the project's chores.
#
#   make demo    the main job on the embedded default: `keepalive demo`, the daemon polling simulated sensors
#                through a private D-Bus (no Bluetooth hardware, no root needed; apt packages are installed
#                first when missing, which needs root or sudo)
#   make test    every test: core on a manual clock, D-Bus against a private dbus-daemon
#   make bench   the benchmark suite: the daemon against bleak and a C floor, idle wakeups, lateness, memory,
#                start-up, the MQTT bridge against paho-mqtt; writes BENCHMARKS.md (make bench-quick: every
#                section small, for CI)
#   make tsan    the tests under ThreadSanitizer
#   make asan    the tests under AddressSanitizer (leak checking off: XCTest itself leaks)
#   make fidelity  bleak 3.x and bluetoothctl 5.66 against the BlueZ simulator (needs PyPI for bleak)
#   make hil       the hardware-in-the-loop suite against the simulator (README: Hardware in the loop)
#   make lab       the same suite against a real bluetoothd 5.66 in a qemu guest (Tests/Lab; root; builds a
#                  Debian image into ~/.cache/keepalive-lab the first time, about 2 minutes)
#   make soak      every bit of a spool segment flipped, then an hour of the daemon against 50 simulated
#                  sensors with random faults (SOAK_MINUTES)
#   make install   the release binary, the example configuration and udev/ in place (PREFIX, DESTDIR; root)
#   make docs      the DocC catalogs of KeepAlive, Polling and BlueZ, warnings as errors, into .build/docs/
#   make doc-samples  compiles every Swift sample of the catalogs and of the README's library example
#   make format-check  swift-format's linter with .swift-format's rules (.ci/format-check.sh says what it enforces)
#
# Apt packages and why:
#   libdbus-1-dev    the CDBus system library (pkg-config dbus-1)
#   libbluetooth-dev the CBluetooth system library (pkg-config bluez): address checks, company names, HCI info
#   dbus-daemon      private buses for the tests, the simulator and the demo
#   systemd          busctl: calls our exported objects from the outside in the D-Bus tests
#   libglib2.0-bin   gdbus: the same, with GLib's D-Bus implementation
#   libxml2-utils    xmllint: validates introspection XML
#   bluez            bluetoothctl, for the simulator fidelity check
#   python3-venv     the fidelity check's bleak venv
#   gcc, pkg-config  the C libdbus client that sets the floor in the D-Bus benchmark
#   python3-dbusmock UPower, power-profiles-daemon and logind mocks for the power and sleep tests
#   libmosquitto-dev the CMosquitto system library: <mosquitto.h> for the MQTT client, and libmosquitto1, which it
#                    loads with dlopen when the first client is made
#   libstdc++-12-dev libstdc++.a: the release build links libstdc++ statically (Benchmarks/static-libraries.sh);
#                    the Swift toolchain's own Debian 12 dependencies include it
#   libyaml-dev      the CYAML system library (pkg-config yaml-0.1): the configuration's YAML parser
#   mosquitto        a real broker for the MQTT tests and the demo (started on a free loopback port, never as a service)
#   mosquitto-clients mosquitto_sub, the independent subscriber of the MQTT tests and the demo's watch command
#   openssl          the MQTT TLS tests make a CA and certificates of their own
#   libssl-dev       the CLibCrypto system library: <openssl/evp.h> for the advertisement decryption, and libssl3's
#                    libcrypto.so.3, which the LibCrypto module loads with dlopen when it first decrypts
#   curl             scrapes the daemon's metrics endpoint in the tests
#   python3-prometheus-client  the Prometheus client's OpenMetrics parser: the tests read the endpoint's
#                    OpenMetrics with it (promtool reads Prometheus text 0.0.4 only)
# And, not installed: Debian's prometheus package is downloaded and only its promtool unpacked into
# .build-tools/prometheus (PROMTOOL_DIR), for the tests' `promtool check metrics`; installing the package would
# add a user, a service and some 90 MiB of web assets.

SWIFT ?= swift
APT_PACKAGES := libdbus-1-dev libbluetooth-dev dbus-daemon systemd libglib2.0-bin libxml2-utils bluez python3-venv gcc pkg-config python3-dbusmock libmosquitto-dev libyaml-dev mosquitto mosquitto-clients openssl \
  libssl-dev \
  libstdc++-12-dev curl python3-prometheus-client
PROMTOOL_DIR ?= $(CURDIR)/.build-tools/prometheus

PREFIX ?= /usr/local
# The shipped binary (make install, and what make bench measures: Benchmarks/run.py uses the same flags): the
# Swift runtime linked in statically, by lld with packed relative relocations (DT_RELR, glibc ≥ 2.36). 7–8 MiB
# less resident memory than the dynamic build (Benchmarks/NOTES.md, "RSS"). Each function in a section of its
# own, the functions `keepalive run` executes laid out together (Benchmarks/keepalive.order by name,
# Benchmarks/keepalive.ld for those without a symbol; Benchmarks/symbol_order.py writes both), and no dynamic
# symbol table beyond what the shared libraries need (--no-export-dynamic): ≈ 4 MiB less resident. libstdc++,
# libgcc, libdbus, libyaml and libbluetooth linked from their archives (Benchmarks/static-libraries.sh prepares
# .build-static; the build runs with its pkgconfig/ first): only libc and libm are loaded, 2.4 MiB less resident.
RELEASE_FLAGS ?= --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
  -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xlinker --symbol-ordering-file=$(CURDIR)/Benchmarks/keepalive.order -Xlinker --no-warn-symbol-ordering \
  -Xlinker --script=$(CURDIR)/Benchmarks/keepalive.ld -Xlinker --no-export-dynamic \
  -Xswiftc -L$(CURDIR)/.build-static -Xswiftc -Xclang-linker -Xswiftc -static-libgcc
SWIFT_CLANG = $(dir $(realpath $(shell command -v $(SWIFT))))clang
DESTDIR ?=

.PHONY: deps build test demo bench tsan fidelity hil lab soak asan shipped install deb deb-check clean docs doc-samples format-check

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi
	@if ! command -v promtool >/dev/null && [ ! -x "$(PROMTOOL_DIR)/usr/bin/promtool" ]; then \
	  echo "unpacking promtool from Debian's prometheus package into $(PROMTOOL_DIR)"; \
	  rm -rf "$(PROMTOOL_DIR)" && mkdir -p "$(PROMTOOL_DIR)" && cd "$(PROMTOOL_DIR)" \
	  && { apt-get download prometheus >/dev/null 2>&1 \
	       || { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } \
	  && dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool && rm -f prometheus_*.deb \
	  && ./usr/bin/promtool --version | head -1; \
	fi

# Zero warnings in our own code: the build log is checked (dependencies' warnings are theirs).
build: deps
	@$(SWIFT) build --build-tests 2>&1 | tee .build-log.txt | grep -E "error|warning:|Compiling|Build complete" | grep -v "^\[" || true
	@if grep -E "^/.*/(Sources|Tests|Benchmarks|Examples)/.*(warning|error):" .build-log.txt; then \
	  echo "build has warnings or errors in the project's own code"; exit 1; fi
	@grep -q "Build complete" .build-log.txt || (tail -30 .build-log.txt; exit 1)

# The memory tests read process-wide figures (RSS, the heap), so they run alone in a process of their own. The
# end-to-end tests (KeepAliveCLITests: real daemons, simulators, brokers, through the CLI) run after the rest, not
# beside it: on two slow cores the rest keeps both busy for its whole run (its 792 tests took 132 s), and daemons
# started then missed their windows (7 and 8 failures in two runs; none in this order, 3m28s against 3m20s).
# Both parts run even when the first fails.
test: build
	KEEPALIVE_MEMORY_TESTS=1 $(SWIFT) test --skip-build --filter tenThousandCallsDoNotGrowMemory
	KEEPALIVE_MEMORY_TESTS=1 $(SWIFT) test --skip-build --filter tenThousandDevicesWithFullLogs
	@status=0; \
	  $(SWIFT) test --skip-build --skip KeepAliveCLITests || status=1; \
	  $(SWIFT) test --skip-build --filter KeepAliveCLITests || status=1; \
	  exit $$status

demo: deps
	$(SWIFT) run keepalive demo

# API documentation with swift-docc-plugin: one archive per module, in .build/docs/<Module>.doccarchive. A broken
# symbol link, in a catalog or in a public doc comment, is an error. `swift package --disable-sandbox
# preview-documentation --target KeepAlive` serves one locally.
DOCS_DIR ?= .build/docs
docs: deps
	@mkdir -p $(DOCS_DIR)
	@for target in KeepAlive Polling BlueZ; do \
	  echo "== DocC: $$target"; \
	  $(SWIFT) package --disable-sandbox --allow-writing-to-directory $(DOCS_DIR) generate-documentation \
	    --target $$target --warnings-as-errors --output-path $(DOCS_DIR)/$$target.doccarchive || exit 1; \
	done

# swift-format lint, the rules in .swift-format; no build needed, a few seconds.
format-check:
	.ci/format-check.sh

# The documentation's Swift samples, each compiled as a program of its own against this package's products.
doc-samples: deps
	.ci/check-doc-samples.sh

# The shipped binary, in $(SHIPPED_SCRATCH) (make install and make deb; Benchmarks/run.py builds the same one in
# .build-bench, which CI passes as SHIPPED_SCRATCH to package what it measured).
SHIPPED_SCRATCH ?= .build-shipped
SHIPPED_BINARY = $(SHIPPED_SCRATCH)/release/keepalive
shipped: deps
	@# SwiftPM does not recompile when only -Xswiftc flags change: objects from before -function-sections go.
	@# Every object of one module, as Benchmarks/run.py checks: only the flag gives private functions sections (.text..L…).
	@objects=$$(ls $(SHIPPED_SCRATCH)/release/KeepAlive.build/*.o 2>/dev/null); \
	if [ -n "$$objects" ] && ! readelf -SW $$objects | grep -qF '.text..L'; then rm -rf $(SHIPPED_SCRATCH)/release; fi
	Benchmarks/static-libraries.sh $(CURDIR)/.build-static $(SWIFT_CLANG)
	PKG_CONFIG_PATH=$(CURDIR)/.build-static/pkgconfig $(SWIFT) build -c release --scratch-path $(SHIPPED_SCRATCH) $(RELEASE_FLAGS) --product keepalive

# Installs the daemon as a service; see README.md ("Installing as a service") for what each file does. The
# user comes first: dbus-daemon resolves the policy's user= when it loads it.
install: shipped
	install -D -m755 $(SHIPPED_BINARY) $(DESTDIR)$(PREFIX)/bin/keepalive
	install -D -m644 udev/keepalive.sysusers.conf $(DESTDIR)/usr/lib/sysusers.d/keepalive.conf
	install -D -m644 udev/io.keepalive.conf $(DESTDIR)/etc/dbus-1/system.d/io.keepalive.conf
	install -D -m644 udev/keepalive.service $(DESTDIR)/etc/systemd/system/keepalive.service
	install -D -m644 udev/70-keepalive.rules $(DESTDIR)/etc/udev/rules.d/70-keepalive.rules
	install -D -m644 README.md $(DESTDIR)$(PREFIX)/share/doc/keepalive/README.md
	install -D -m644 LICENSE $(DESTDIR)$(PREFIX)/share/doc/keepalive/LICENSE
	test -e $(DESTDIR)/etc/keepalive/keepalive.yaml || install -D -m644 Examples/keepalive.yaml $(DESTDIR)/etc/keepalive/keepalive.yaml
	@if [ -z "$(DESTDIR)" ]; then \
	  systemd-sysusers && systemctl reload dbus && systemctl daemon-reload \
	  && udevadm control --reload && udevadm trigger --subsystem-match=bluetooth || true; \
	  echo "installed: edit /etc/keepalive/keepalive.yaml, check with 'keepalive doctor --config /etc/keepalive/keepalive.yaml', then 'systemctl enable --now keepalive'"; \
	fi

# keepalive_<version>_<arch>.deb in .build-deb from the shipped binary (packaging/deb/build.sh), checked by
# lintian (no error or warning; the one override says why). deb-check installs it in a clean Debian 12 root (the
# qemu lab's image, read-only under an overlay): README.md, "Install on a gateway".
DEB_DIR ?= .build-deb
deb: shipped
	@for p in dpkg-dev fakeroot lintian; do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
	  || { if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	       DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$p >/dev/null; }; done
	rm -f $(DEB_DIR)/keepalive_*.deb
	packaging/deb/build.sh $(SHIPPED_BINARY) $(DEB_DIR)
	@# Shown with the overrides (an overridden tag still fails --fail-on there), then judged without them.
	@echo "lintian --pedantic --show-overrides:"; lintian --pedantic --show-overrides --fail-on none \
	  $(DEB_DIR)/keepalive_*.deb 2>&1 | grep -v "running with root privileges" || true
	@lintian --pedantic --fail-on error,warning $(DEB_DIR)/keepalive_*.deb >/dev/null 2>&1 \
	  || { echo "lintian: errors or warnings"; exit 1; }

deb-check: deb
	Tests/Deb/run.sh $(DEB_DIR)/keepalive_*.deb $(SHIPPED_BINARY)

# The benchmark suite (issue #8, Benchmarks/run.py): the daemon against bleak and a C libdbus floor on one
# simulator, idle wakeups, tick lateness, memory, start-up, the core and D-Bus, the MQTT bridge against
# paho-mqtt (issue #11); prints a table, writes BENCHMARKS.md (about 30 minutes, 4 of them MQTT). bench-quick
# runs every section small (CI's smoke test: fails when a section produces no numbers or a poll fails) and
# writes .build-bench/BENCHMARKS-quick.md. Builds in .build-bench.
bench: deps
	SWIFT=$(SWIFT) python3 Benchmarks/run.py

.PHONY: bench-quick
bench-quick: deps
	SWIFT=$(SWIFT) python3 Benchmarks/run.py --quick

fidelity: deps
	Tests/Fidelity/run.sh

hil: deps
	Tests/HIL/run-simulator.sh

# The HIL suite against the qemu lab: a real bluetoothd with two emulated controllers and a GATT peripheral
# (Tests/Lab/README.md). Builds the tests in .build-lab; the exit status is the suite's.
lab: deps
	Tests/Lab/run.sh

# An hour of `keepalive run` (release) against 50 simulated sensors with 5 % random faults: RSS, seq, windows.
soak: deps
	KEEPALIVE_SPOOL_DAMAGE=every-bit $(SWIFT) test --filter SpoolDamageTests
	$(SWIFT) build -c release --product keepalive
	$(SWIFT) build -c release --product keepalive-soak
	"$$($(SWIFT) build -c release --show-bin-path)/keepalive-soak" --minutes $${SOAK_MINUTES:-60}

# The fleet protocol's simulation for longer than CI runs it: FLEET_SEEDS seeds at 100 gateways × 10,000 devices,
# FLEET_HOURS virtual hours each, in a release build (docs/FLEET.md).
# A real Home Assistant 2025.4 core (a cached venv from PyPI, ~820 MiB, 1-4 min to make) reads the bridge's
# entities back over its API: classes, units, states, the poll button, expiry, its restart, the last will.
.PHONY: ha-check
ha-check: deps
	Tests/HomeAssistant/run.sh

.PHONY: fleet-sim
fleet-sim: deps
	KEEPALIVE_FLEET_SEEDS=$${FLEET_SEEDS:-4} KEEPALIVE_FLEET_HOURS=$${FLEET_HOURS:-0.5} $(SWIFT) test -c release --scratch-path .build-release --filter "FleetTests"

# As `make test` and CI's sanitizer stages: the end-to-end tests after the rest.
# Tests/ThreadSanitizer.supp says what each suppression hides and why that is no race.
tsan: export TSAN_OPTIONS += suppressions=$(CURDIR)/Tests/ThreadSanitizer.supp
tsan: deps
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan --skip KeepAliveCLITests
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan --skip-build --filter KeepAliveCLITests

asan: deps
	ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --sanitize=address --scratch-path .build-asan --skip KeepAliveCLITests
	ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --sanitize=address --scratch-path .build-asan --skip-build \
	  --filter KeepAliveCLITests

clean:
	rm -rf .build .build-tsan .build-asan .build-sim .build-bench .build-lab .build-log.txt
