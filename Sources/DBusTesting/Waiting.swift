public import DBus

#if canImport(Glibc)
import Glibc
#endif

/// A condition did not hold, or a body did not finish, within its safety-net timeout.
public struct TimedOut: Error, Sendable, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting until \(what)" }
}

/// Polls `condition` every few milliseconds until it holds; throws `TimedOut` after `timeout`.
///
/// ```swift
/// try await waitUntil("the service has the call") { await service.calls == 1 }
/// ```
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    // A give-up, not a timing assertion: under a sanitizer everything runs several times slower, and the whole
    // suite runs at once on two cores (an ASan run took more than 10 s for a sysfs source's first reading).
    let deadline = clock.now + timeout * sanitizerSlowdown
    while try await !condition() {
        guard clock.now < deadline else { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Runs `body`, throwing `TimedOut` if it has not finished after `timeout` (so a broken test fails instead of
/// hanging the run). `body` is cancelled then.
///
/// ```swift
/// let reply = try await withTimeout("the call fails") { try await pending.value }
/// ```
public func withTimeout<T: Sendable>(
    _ what: String, _ timeout: Duration = .seconds(10), _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TimedOut(what: what) }
        return first
    }
}

/// Reads `stream` until `isLast` holds for a signal (included), failing after `timeout`.
///
/// ```swift
/// let signals = try await collect(stream) { $0.member == "InterfacesRemoved" }
/// ```
public func collect(
    _ stream: AsyncThrowingStream<DBusSignal, any Error>, timeout: Duration = .seconds(10),
    until isLast: @escaping @Sendable (DBusSignal) -> Bool
) async throws -> [DBusSignal] {
    try await withTimeout("the last signal arrives", timeout) {
        var received: [DBusSignal] = []
        for try await signal in stream {
            received.append(signal)
            if isLast(signal) { break }
        }
        return received
    }
}

/// The resident set size (VmRSS in /proc/PID/status) of this process, or of `pid`, in kilobytes; 0 when
/// unreadable. procfs files report size 0, so the file is read line by line.
public func residentSetKilobytes(of pid: Int32? = nil) -> Int {
    guard let file = fopen(pid.map { "/proc/\($0)/status" } ?? "/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("VmRSS:") else { continue }
        return Int(text.dropFirst(6).split { $0 == " " || $0 == "\t" || $0 == "\n" }.first ?? "") ?? 0
    }
    return 0
}
