import LocalServices
import TestHarness
import Foundation
import KeepAlive
import Basics
import Logging

/// A log handler keeping every message, to count the lines a source writes.
struct CapturingLogHandler: LogHandler {
    final class Store: Sendable {
        private let lines = Locked<[(Logger.Level, String)]>([])

        func append(_ level: Logger.Level, _ message: String) {
            lines.withLock { $0.append((level, message)) }
        }

        var messages: [String] {
            lines.withLock { $0.map(\.1) }
        }

        func count(containing text: String) -> Int {
            messages.count { $0.contains(text) }
        }
    }

    let store: Store
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.append(event.level, "\(event.message) \(event.metadata ?? [:])")
    }

    static func logger() -> (Logger, Store) {
        let store = Store()
        return (Logger(label: "test") { _ in CapturingLogHandler(store: store) }, store)
    }
}

/// A `/sys/class/power_supply` look-alike in a temporary directory.
final class SysfsFixture: Sendable {
    let root: String

    init() throws {
        var template = Array("/tmp/keepalive-power-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw MockError(description: "mkdtemp failed") }
        root = String(cString: made)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Writes (or rewrites) one supply's attributes, each file with a trailing newline like the kernel's.
    func supply(_ name: String, _ attributes: [String: String]) throws {
        let directory = root + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (attribute, value) in attributes {
            try (value + "\n").write(toFile: directory + "/" + attribute, atomically: true, encoding: .utf8)
        }
    }

    func mains(_ name: String = "AC", online: Bool) throws {
        try supply(name, ["type": "Mains", "online": online ? "1" : "0"])
    }

    func battery(_ name: String = "BAT0", capacity: Int, status: String, scope: String? = nil) throws {
        var attributes = ["type": "Battery", "capacity": "\(capacity)", "status": status]
        if let scope { attributes["scope"] = scope }
        try supply(name, attributes)
    }
}

/// Reads a power stream from one task: `next()` with a real-time bound, so a missing update fails the test
/// instead of hanging it.
final class PowerUpdates: Sendable {
    private let received = Locked<[(state: PowerState, at: ContinuousClock.Instant)]>([])
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<PowerState>) {
        let received = received
        task = Task {
            for await state in stream {
                let now = ContinuousClock.now
                received.withLock { $0.append((state, now)) }
            }
        }
    }

    deinit {
        task.cancel()
    }

    var values: [PowerState] {
        received.withLock { $0.map(\.state) }
    }

    /// When each update arrived.
    var arrivals: [ContinuousClock.Instant] {
        received.withLock { $0.map(\.at) }
    }

    /// Waits until `count` updates arrived in total; returns them all.
    @discardableResult
    func waitFor(count: Int, timeout: Duration = .seconds(10)) async throws -> [PowerState] {
        try await waitUntil("\(count) power updates (have \(values))", timeout: timeout) { self.values.count >= count }
        return values
    }

    func cancel() {
        task.cancel()
    }
}
