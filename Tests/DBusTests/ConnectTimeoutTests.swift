import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension DBusTests {
    @Suite struct ConnectTimeout {
        @Test func aBusThatNeverAnswersFailsWithinTheTimeoutAndBlocksNoOtherConnection() async throws {
            let silent = try SilentSocket()
            let silentPath = silent.path
            try await PrivateBus.with { bus in
                let clock = ContinuousClock()
                let started = clock.now
                let stuck = Task {
                    try await DBusConnection(bus: .address("unix:path=\(silentPath)"), timeout: .seconds(2))
                }
                // Meanwhile a healthy bus connects at once: the silent one holds no process-wide lock.
                let healthyStart = clock.now
                let healthy = try await DBusConnection(bus: .address(bus.address))
                #expect(clock.now - healthyStart < .seconds(1))
                await healthy.close()

                let error = await #expect(throws: DBusError.self) { _ = try await stuck.value }
                #expect(error?.code == .connectFailed)
                #expect(error?.message.contains("authentication") == true)
                let elapsed = clock.now - started
                #expect(elapsed >= .seconds(2) && elapsed < .seconds(4), "gave up after \(elapsed)")
                withExtendedLifetime(silent) {}
            }
        }
    }
}

/// A unix socket that accepts connections (the kernel's backlog does) and never says a word: what a
/// stopped or wedged dbus-daemon looks like to a client.
final class SilentSocket {
    let path: String
    let descriptor: Int32

    init() throws {
        path = "/tmp/keepalive-silent-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        // Close-on-exec: a dbus-daemon forked by a concurrent test must not inherit the listener.
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | 0o2_000_000, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(descriptor, 16) == 0)
    }

    deinit {
        close(descriptor)
        unlink(path)
    }
}
