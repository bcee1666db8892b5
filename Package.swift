// swift-tools-version:6.3
import PackageDescription

// The arrows point one way: everything depends on KeepAlive, and KeepAlive imports nothing Bluetooth or
// D-Bus. See README.md ("Architecture") and docs/ARCHITECTURE.md.
let package = Package(
    name: "keepalive",
    platforms: [.macOS(.v15)],
    products: [
        // For app developers: the core, the decoder, the real transport (BlueZ over D-Bus), the host's power, the
        // MQTT client and bridge, the test doubles. DBus is a product because BlueZ hands out its types (the bus,
        // object paths, errors); HostPower because a scheduler that stretches on battery needs the host's real
        // power state; MQTT because the bridge's configuration is an MQTTConfiguration. README "Library example".
        .library(name: "KeepAlive", targets: ["KeepAlive"]),
        .library(name: "Polling", targets: ["Polling"]),
        .library(name: "Readings", targets: ["Readings"]),
        // AES-128-CCM over OpenSSL's libcrypto, loaded with dlopen on first use, for encrypted advertisements.
        .library(name: "LibCrypto", targets: ["LibCrypto"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "HostPower", targets: ["HostPower"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "MQTTBridge", targets: ["MQTTBridge"]),
        .library(name: "KeepAliveTesting", targets: ["KeepAliveTesting"]),
        .library(name: "LocalServices", targets: ["LocalServices"]),
        .library(name: "BlueZSimulator", targets: ["BlueZSimulator"]),
        .library(name: "KeepAliveDaemon", targets: ["KeepAliveDaemon"]),
        .executable(name: "bluez-sim", targets: ["bluez-sim"]),
        .executable(name: "keepalive", targets: ["KeepAliveCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // `swift package generate-documentation` (make docs): the DocC catalogs of KeepAlive, Polling and BlueZ.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The seam library users already know for metrics (issue #37): the engine and the bridge report through
        // CoreMetrics (not `Metrics`, which brings Foundation); an app plugs swift-prometheus or swift-otel in.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // The daemon's `metrics: listen:` endpoint: NIOPosix's one event loop and NIOHTTP1's parser, not a server
        // of our own. Only these three products (no NIOFoundationCompat: the daemon stays free of Foundation).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
    ],
    targets: [
        // The seeds' API: the keep-alive scheduler, the ledger of background task windows, power. Nothing BLE.
        .target(
            name: "KeepAlive",
            dependencies: [
                "Basics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The BLE poll engine on the scheduler: each device polled in its window through a PeripheralTransport
        // (the contract BlueZ and MockTransport implement); a poll returns its outcome as a value.
        .target(
            name: "Polling",
            dependencies: [
                "KeepAlive", "Readings", "Basics", .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // GATT values into numbers with units: the SIG's formats as data, the 0x2904 descriptor, configured field
        // layouts. Pure (bytes in, readings out: no I/O, no clock, no Foundation), so the core can hand readings to
        // callbacks without importing anything Bluetooth-transport. See Sources/Readings/ReadingsDecoder.swift.
        // Advertisements too (Sources/Readings/Advertisements: BTHome, pvvx, ATC1441, MiBeacon, Ruuvi), whose
        // cryptography comes in through the `AESCCM` protocol, so the module stays free of C.
        .target(name: "Readings", dependencies: ["Basics"]),
        .testTarget(name: "ReadingsTests", dependencies: ["Readings", "LibCrypto", "Basics"]),
        // OpenSSL 3's libcrypto, as a system library: a module map and a shim header. Headers only, like
        // CMosquitto: LibCrypto loads libcrypto.so.3 with dlopen the first time an advertisement is decrypted, so a
        // daemon without advertisement keys never maps it (no pkgConfig, whose flags would link it).
        .systemLibrary(name: "CLibCrypto", providers: [.apt(["libssl-dev"])]),
        // `AESCCM` (Readings) over libcrypto's EVP AES-128-CCM: the one module that touches a libcrypto pointer.
        .target(name: "LibCrypto", dependencies: ["CLibCrypto", "Readings"]),
        .testTarget(name: "LibCryptoTests", dependencies: ["LibCrypto", "Readings"]),
        // The fleet protocol (#12, docs/FLEET.md): several gateways on one broker, every shared device held by one
        // of them through a lease. A pure state machine (events in, effects out: no I/O, no Foundation), and a
        // seeded deterministic simulator of gateways, a broker, delays, kills, partitions and clock drift that
        // checks its invariants after every step. The daemon binds it to MQTT
        // (Sources/KeepAliveDaemon/FleetBinding.swift).
        .target(name: "Fleet", dependencies: ["Basics"]),
        .target(name: "FleetSimulation", dependencies: ["Fleet", "Basics"]),
        .testTarget(name: "FleetTests", dependencies: ["Fleet", "FleetSimulation", "TestHarness"]),
        // libyaml 0.2 (the YAML 1.1 parser), as a system library: a module map and a shim header.
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // The configuration's YAML reader: libyaml's events composed into nodes with positions and YAML 1.1 tags,
        // matched by hand (no regular expressions, so no Foundation or ICU in the daemon). docs/ARCHITECTURE.md.
        .target(name: "YAML", dependencies: ["CYAML"]),
        .testTarget(name: "YAMLTests", dependencies: ["YAML"]),
        // What every module uses, once: the lock (a pthread mutex, which ThreadSanitizer sees) and a promise,
        // threads, the process's timerfd thread and its min-heap, the JSON writer and reader, durations and hex.
        .target(name: "Basics", dependencies: ["CLinux"]),
        .testTarget(name: "BasicsTests", dependencies: ["Basics"]),
        // libdbus-1, as a system library: a module map and a shim header only.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // libbluetooth, as a system library: address checks, company names, HCI diagnostics.
        .systemLibrary(
            name: "CBluetooth",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        // Linux interfaces Glibc's module map leaves out (timerfd), as a shim header.
        .systemLibrary(name: "CLinux"),
        // The one safe Swift face of libdbus: no other module touches a libdbus pointer.
        .target(
            name: "DBus",
            dependencies: ["CDBus", "CLinux", "Basics"]
        ),
        // BlueZ's object model over DBus and the BlueZTransport (the client side).
        .target(
            name: "BlueZ",
            dependencies: [
                "DBus",
                "KeepAlive", "Polling",
                "Basics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "KeepAliveTesting",
            dependencies: [
                "KeepAlive", "Polling",
                "Basics",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "KeepAliveBenchmarks",
            dependencies: [
                "KeepAlive", "Polling",
                "KeepAliveDaemon",
                "Readings",
                "KeepAliveTesting",
                "Basics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Benchmarks/KeepAliveBenchmarks"
        ),
        .executableTarget(
            name: "BlueZBenchmark",
            dependencies: [
                "BlueZ",
                "DBus",
                "KeepAlive", "Polling",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/BlueZBenchmark"
        ),
        .executableTarget(
            name: "KeepAliveExample",
            dependencies: [
                "KeepAlive", "Polling",
                "KeepAliveTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Examples/KeepAliveExample"
        ),
        // The real-sensor example: BlueZ and the core only, as an app would use them (README "Library").
        .executableTarget(
            name: "BatteryMonitor",
            dependencies: ["BlueZ", "DBus", "KeepAlive", "Polling"],
            path: "Examples/BatteryMonitor"
        ),
        // The soak (issue #9): `keepalive run` for minutes or hours against the simulator with random faults.
        .executableTarget(
            name: "keepalive-soak",
            dependencies: ["BlueZSimulator", "DBus", "LocalServices", "TestHarness", "KeepAliveTesting"],
            path: "Benchmarks/Soak"
        ),
        // The MQTT bridge against a Python paho-mqtt publisher (issue #11): CPU per record, poll end → subscriber.
        .executableTarget(
            name: "MQTTBenchmark",
            dependencies: [
                "MQTTBridge", "MQTT", "Readings", "Basics", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/MQTTBenchmark"
        ),
        // Decode cost per advertisement against the Python decoders (issue #36; Benchmarks/advert_peer.py).
        .executableTarget(
            name: "AdvertsBenchmark",
            dependencies: ["Readings", "LibCrypto", "Basics"],
            path: "Benchmarks/AdvertsBenchmark"
        ),
        .executableTarget(
            name: "DBusBenchmark",
            dependencies: ["DBus", "Basics"],
            path: "Benchmarks/DBusBenchmark"
        ),
        // A private dbus-daemon and a private mosquitto on this machine, and the subprocesses behind them: what
        // `keepalive demo` and `simulate`, bluez-sim and the soak start, and the tests too.
        .target(name: "LocalServices", dependencies: ["DBus", "Basics", "CLinux"]),
        // The tests' own harness, never linked into the daemon: the built `keepalive` as a process, test
        // certificates, waiting on conditions with deadlines.
        .target(name: "TestHarness", dependencies: ["LocalServices", "DBus", "Basics"]),
        // A bluetoothd 5.66 look-alike owning org.bluez on a given bus. Deliberately independent of the BlueZ
        // client module, so that a wrong shared constant cannot hide on both sides.
        .target(
            name: "BlueZSimulator",
            dependencies: [
                "DBus",
                "Basics",
                // Encrypted advertisements are sealed with the project's AES-CCM; Readings only for its error type.
                "LibCrypto",
                "Readings",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "bluez-sim",
            dependencies: [
                "BlueZSimulator",
                "DBus",
                "LocalServices",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libmosquitto (MQTT 3.1.1 and 5, TLS through OpenSSL), as a system library: a module map and a shim header.
        // Headers only: the MQTT module loads libmosquitto.so.1 with dlopen when the first client is made, so a
        // daemon without `mqtt:` never maps it or OpenSSL (no pkgConfig, whose flags would link it).
        .systemLibrary(name: "CMosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // The one safe Swift face of libmosquitto, shaped like DBus: one thread per client (epoll, no wake-ups
        // beyond MQTT's keep-alive), awaited PUBACK/PUBCOMP/SUBACK, typed errors naming the call.
        .target(name: "MQTT", dependencies: ["CMosquitto", "CLinux", "Basics"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "LocalServices", "TestHarness", "Basics"]),
        // Poll records to MQTT: topics, commands, Home Assistant discovery and a crash-safe on-disk spool, over the
        // MQTT client. Beside BlueZ and HostPower (the daemon wires it); the core does not know it exists.
        .target(
            name: "MQTTBridge",
            dependencies: [
                "Basics",
                "MQTT",
                "KeepAlive",
                "Readings",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "MQTTBridgeTests",
            dependencies: [
                "MQTTBridge",
                "MQTT",
                "Readings",
                "LocalServices", "TestHarness",
                "Basics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The host's power and sleep, over D-Bus and sysfs: UPower, power-profiles-daemon, /sys/class/power_supply,
        // a manual switch, and logind's sleep inhibitor. Beside BlueZ, never in the core (docs/ARCHITECTURE.md).
        .target(
            name: "HostPower",
            dependencies: [
                "DBus",
                "KeepAlive",
                "Basics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "HostPowerTests",
            dependencies: [
                "HostPower", "DBus", "LocalServices", "TestHarness", "KeepAlive", "KeepAliveTesting", "Basics",
            ]
        ),
        // The daemon as a library: configuration file, JSON Lines output, wiring, doctor, systemd notify. A library
        // rather than code inside the `keepalive` executable (the plain layout puts it there; docs/ARCHITECTURE.md)
        // so the tests and anyone embedding the daemon reach it with a plain import, not `@testable`.
        .target(
            name: "KeepAliveDaemon",
            dependencies: [
                "Fleet",
                "Basics",
                "KeepAlive", "Polling",
                "Readings",
                "LibCrypto",
                "MQTT",
                "MQTTBridge",
                "BlueZ",
                "DBus",
                "HostPower",
                "CBluetooth",
                "CLinux",
                "YAML",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The shipped device profiles, in the binary: PackageResources.<file>_yaml (see DeviceProfile.swift).
            resources: [.embedInCode("Profiles")]
        ),
        // The `keepalive` command: argument parsing and terminal rendering over KeepAliveDaemon; `simulate` and
        // `demo` bring the BlueZ simulator and a private dbus-daemon.
        // The executors of Swift concurrency the daemon runs on (threads that wait without a timeout, so nothing
        // wakes between ticks; libdispatch's own wake every second), installed before `main` by an ELF
        // constructor in KeepAliveCLI. docs/EXECUTORS.md.
        // Its delayed jobs are deadlines on Basics' timerfd thread. Without Swift 6.3's executor SPI, or built with
        // -Xswiftc -DKEEPALIVE_STOCK_EXECUTORS, it compiles to its status API alone: `keepalive --version` says
        // "executors: stock" and why (.ci/stock-executors.sh builds and tests that way).
        .target(name: "QuietExecutor", dependencies: ["CLinux", "Basics"]),
        .testTarget(name: "QuietExecutorTests", dependencies: ["QuietExecutor", "Basics"]),
        .executableTarget(
            name: "KeepAliveCLI",
            dependencies: [
                "QuietExecutor",
                "KeepAliveDaemon",
                "KeepAlive", "Polling",
                "BlueZ",
                "BlueZSimulator",
                "CLinux",
                "DBus",
                "LocalServices",
                "MQTT",
                "Readings",
                "LibCrypto",
                "Basics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "KeepAliveDaemonTests",
            dependencies: [
                "KeepAliveDaemon", "KeepAlive", "Polling", "KeepAliveTesting", "Readings", "DBus", "LocalServices",
                "TestHarness", "BlueZSimulator", "Basics",
                "MQTT", "MQTTBridge", .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The `keepalive` command end to end: the built binary against a private bus and the simulator.
        .testTarget(
            name: "KeepAliveCLITests",
            dependencies: [
                "KeepAliveDaemon", "Readings", "MQTT", "BlueZSimulator", "DBus", "LocalServices", "TestHarness",
                "Basics", "Polling", "KeepAliveTesting", "LibCrypto", "YAML",
            ]
        ),
        // The hardware-in-the-loop suite: skipped unless KEEPALIVE_HIL_* name a BlueZ to test (the simulator,
        // the qemu lab's real bluetoothd, or real hardware; see README "Hardware in the loop").
        .testTarget(
            name: "HILTests",
            dependencies: [
                "BlueZ", "DBus", "LocalServices", "TestHarness", "KeepAlive", "Polling", "Basics", "Readings",
                "LibCrypto", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DBusTests",
            dependencies: ["DBus", "LocalServices", "TestHarness", "KeepAlive", "KeepAliveTesting", "Basics"]
        ),
        .testTarget(
            name: "BlueZTests",
            dependencies: [
                "BlueZ", "DBus", "KeepAlive", "Polling", "KeepAliveTesting", "LocalServices", "TestHarness",
                "BlueZSimulator", "Basics",
            ]
        ),
        .testTarget(
            name: "BlueZSimulatorTests",
            dependencies: [
                "BlueZSimulator", "DBus", "LocalServices", "TestHarness", "Basics",
                // The simulator's advertisements through the real client and decoders.
                "BlueZ", "Polling", "Readings", "LibCrypto", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "PackagingTests",
            dependencies: ["LocalServices", "TestHarness"]
        ),
        .testTarget(
            name: "KeepAliveTests",
            dependencies: [
                "KeepAlive", "Polling",
                "Basics",
                "KeepAliveTesting",
                .product(name: "Logging", package: "swift-log"),
                // The engine's metrics checked through swift-metrics' own test factory (TestMetrics).
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
    ]
)

for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    // Spell existentials as `any P` (SE-0335) and keep imports out of the public API unless said so
    // (SE-0409); both as in swift-log's own Package.swift.
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
