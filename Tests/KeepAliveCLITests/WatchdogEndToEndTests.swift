import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Foundation
import Basics
import Testing

#if canImport(Glibc)
    import Glibc
#endif

struct SocketFailure: Error {
    var errno: Int32
}

/// A fake `$NOTIFY_SOCKET`: a datagram socket the test binds, every message kept with when it came.
final class FakeNotifySocket: Sendable {
    let path: String
    private let received = Locked<[(at: ContinuousClock.Instant, text: String)]>([])
    private let stopped = Locked(false)

    init(directory: String) throws {
        path = directory + "/notify.sock"
        let socketDescriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw SocketFailure(errno: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(socketDescriptor)
            throw SocketFailure(errno: code)
        }
        let (received, stopped) = (received, stopped)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while !stopped.withLock({ $0 }) {
                var ready = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 50) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(socketDescriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                let text = String(decoding: buffer[0..<count], as: UTF8.self)
                received.withLock { $0.append((ContinuousClock.now, text)) }
            }
            close(socketDescriptor)
        }.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
    }

    var messages: [(at: ContinuousClock.Instant, text: String)] { received.withLock { $0 } }

    /// When each `WATCHDOG=1` came.
    var pings: [ContinuousClock.Instant] {
        messages.filter { $0.text.split(separator: "\n").contains("WATCHDOG=1") }.map(\.at)
    }

    /// The index of the first message containing `text`.
    func firstIndex(containing text: String) -> Int? { messages.firstIndex { $0.text.contains(text) } }
}

/// The watchdog means "polls work" (issue #15): `keepalive run` under a fake systemd (`NOTIFY_SOCKET` and
/// `WATCHDOG_USEC` pointing at a socket the test binds) sends `WATCHDOG=1` while its scheduler keeps up, and
/// stops when it is wedged, so systemd would restart it.
///
/// A suite of its own, one test at a time, beside issue #15's other end-to-end tests (`MonthsWithoutAPersonTests`)
/// rather than after them: each of the two groups runs one daemon at a time, so at most two of them run at once.
/// Queued behind the healing ladder's tests, the watchdog's made that group the whole suite's longest (158 s of a
/// 159-s end-to-end run under ThreadSanitizer; 129 s of `make test`'s 129 s).
@Suite("Watchdog through keepalive run", .serialized)
struct WatchdogEndToEndTests {
    /// `WATCHDOG_USEC` for the test: pings every second (half of it); slower under a sanitizer.
    static let watchdogMicroseconds = 2_000_000 * Int(sanitizerSlowdown)
    static var pingInterval: Duration { .microseconds(watchdogMicroseconds / 2) }

    @Test func aHealthyDaemonKeepsPingingAndSaysWhatItPollsInStatus() async throws {
        try await CLITests.withSimulator(devices: 2) { bus, _ in
            let file = try TemporaryFile(
                name: "keepalive.yaml", contents: CLITests.configuration(devices: 2, interval: "1s"))
            defer { file.remove() }
            let notify = try FakeNotifySocket(directory: file.directory)
            defer { notify.stop() }
            let process = try CommandProcess(
                ["run", "--config", file.path, "--bus", bus.address],
                environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "\(Self.watchdogMicroseconds)"])
            defer { process.terminate() }
            try await waitUntil("READY=1", timeout: .seconds(20)) {
                notify.firstIndex(containing: "READY=1") != nil
            }
            try await waitUntil("six pings", timeout: .seconds(30)) { notify.pings.count >= 6 }
            let ready = try #require(notify.messages.first { $0.text.contains("READY=1") })
            #expect(ready.text.contains("STATUS=polling 2 devices every 1s"), "\(ready.text)")
            // Each ping came about one ping interval after the one before: never withheld (a give-up bound, not a
            // measurement: withheld pings would leave a gap of several intervals).
            let pings = notify.pings
            for (earlier, later) in zip(pings, pings.dropFirst()) {
                #expect(later - earlier < Self.pingInterval * 3, "a gap of \(later - earlier) between pings")
            }
            #expect(CLITests.records(process.standardOutput).count >= 4)
            #expect(!process.standardError.contains("stalled"), "\(process.standardError)")
            process.signal(SIGTERM)
            #expect(try await process.waitForExit(within: .seconds(10)) == 0)
            // The exit drains the pipes, not the notify socket's reader.
            try await waitUntil("STOPPING=1", timeout: .seconds(10)) {
                notify.firstIndex(containing: "STOPPING=1") != nil
            }
        }
    }

        /// The output is a FIFO whose pipe holds 4 KiB and which nobody reads: after a few records the writer
        /// blocks in write(2), and the scheduler behind it stops firing (a daemon wedged on a stuck disk or pipe).
        /// The pings stop and `STATUS=` says so; once the FIFO is read again the daemon catches up and pings resume.
        @Test func aWedgedSchedulerStopsPingingAndResumesWhenItCatchesUp() async throws {
            try await CLITests.withSimulator(devices: 2) { bus, _ in
                let place = try TemporaryFile(name: "unused", contents: "")
                defer { place.remove() }
                let fifo = place.directory + "/records.fifo"
                #expect(mkfifo(fifo, 0o600) == 0)
                // Ours, to hold the pipe and shrink it; the daemon opens it O_RDWR and so never sees EPIPE.
                let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                #expect(reader >= 0)
                defer { close(reader) }
                let setPipeSize: Int32 = 1_031  // F_SETPIPE_SZ, which Glibc's module does not export
                #expect(fcntl(reader, setPipeSize, 4_096) >= 4_096)
                let config = try TemporaryFile(
                    name: "keepalive.yaml",
                    contents: CLITests.configuration(devices: 2, interval: "1s", extra: "output: \(fifo)\n"))
                defer { config.remove() }
                let notify = try FakeNotifySocket(directory: config.directory)
                defer { notify.stop() }
                let process = try CommandProcess(
                    ["run", "--config", config.path, "--bus", bus.address],
                    environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "\(Self.watchdogMicroseconds)"])
                defer { process.terminate() }
                try await waitUntil("READY=1 and a first ping", timeout: .seconds(20)) { !notify.pings.isEmpty }

                // The latest STATUS= says stalled: a stall at start on a loaded machine, caught up since, is not the
                // one the full pipe makes.
                @Sendable func stalled() -> Int? {
                    let messages = notify.messages
                    guard let last = messages.lastIndex(where: { $0.text.contains("STATUS=") }),
                        messages[last].text.contains("STATUS=stalled")
                    else { return nil }
                    return last
                }
                try await waitUntil("STATUS says stalled", timeout: .seconds(60)) { stalled() != nil }
                let stalledIndex = try #require(stalled())
                let stalledAt = notify.messages[stalledIndex].at
                #expect(process.exitStatus == nil)
                // Observe the silence for three ping intervals (an absence can only be watched for a while).
                try await waitUntil("three ping intervals of silence", timeout: .seconds(30)) {
                    ContinuousClock.now - stalledAt > Self.pingInterval * 3
                }
                #expect(notify.pings.filter { $0 > stalledAt }.isEmpty, "pinged while stalled")
                #expect(
                    process.standardError.contains("the scheduler is stalled"), "\(process.standardError.suffix(2_000))"
                )

            // Unblock the output: the records flow, the scheduler catches up, the pings resume.
            let mark = process.mark()
            let draining = Locked(true)
            Thread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while draining.withLock({ $0 }) {
                    var ready = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
                    if poll(&ready, 1, 50) > 0 { _ = read(reader, &buffer, buffer.count) }
                }
            }.start()
            defer { draining.withLock { $0 = false } }
            try await waitUntil("pings resume", timeout: .seconds(30)) { notify.pings.contains { $0 > stalledAt } }
            // The ping goes out before the STATUS that says so.
            try await waitUntil("the recovered STATUS", timeout: .seconds(10)) {
                notify.messages.dropFirst(stalledIndex + 1).contains {
                    $0.text.hasPrefix("STATUS=polling 2 devices")
                }
            }
            // The notification can overtake the log line, which reaches the test through a pipe and a reader.
            try await waitUntil("the log says the scheduler caught up", timeout: .seconds(10)) {
                process.standardError(since: mark).contains("the scheduler caught up")
            }
            process.signal(SIGTERM)
            #expect(
                try await process.waitForExit(within: .seconds(10)) == 0, "\(process.standardError.suffix(2_000))")
        }
    }
}
