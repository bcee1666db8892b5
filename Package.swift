// swift-tools-version:6.2
import PackageDescription

// The arrows point one way: everything depends on KeepAlive, and KeepAlive imports nothing Bluetooth or
// D-Bus. See README.md ("Architecture") and ../shared/STYLE.md.
let package = Package(
    name: "keepalive",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeepAlive", targets: ["KeepAlive"]),
        .library(name: "KeepAliveTesting", targets: ["KeepAliveTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "KeepAlive",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "KeepAliveTesting",
            dependencies: [
                "KeepAlive",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "KeepAliveBenchmarks",
            dependencies: [
                "KeepAlive",
                "KeepAliveTesting",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/KeepAliveBenchmarks"
        ),
        .testTarget(
            name: "KeepAliveTests",
            dependencies: [
                "KeepAlive",
                "KeepAliveTesting",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    // Spell existentials as `any P` (SE-0335) and keep imports out of the public API unless said so
    // (SE-0409); both as in swift-log's own Package.swift.
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
