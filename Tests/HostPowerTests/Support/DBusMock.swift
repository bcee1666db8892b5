import DBus
import LocalServices
import TestHarness
import Foundation
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// A python3-dbusmock process on a private bus's "system bus", killed by pid at the end.
///
/// ```swift
/// try await DBusMock.with(on: bus, driver: driver, ["--template", "upower"], owning: "org.freedesktop.UPower") { mock
/// in
///     try await mock.setProperty("OnBattery", .boolean(true), …)
/// }
/// ```
final class DBusMock: Sendable {
    static let mockInterface = "org.freedesktop.DBus.Mock"

    /// Debian's python3-dbusmock is installed for the system python, not necessarily the first python3 on PATH.
    static let python =
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

    let pid: pid_t
    let name: String
    /// The driver's connection (not the one under test).
    let driver: DBusConnection
    private let errors = Locked("")
    private let reaped = Locked(false)

    private init(pid: pid_t, name: String, driver: DBusConnection) {
        self.pid = pid
        self.name = name
        self.driver = driver
    }

    /// Starts `python3 -m dbusmock --system <arguments>` with the private bus as the system bus and waits until
    /// it owns `name`.
    static func start(on bus: PrivateBus, driver: DBusConnection, _ arguments: [String], owning name: String)
        async throws -> DBusMock
    {
        let (pid, stdout, stderr) = try Subprocess.spawn(
            [
                "env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", python, "-m", "dbusmock", "--system",
                "--logfile", "/dev/null",
            ] + arguments)
        let mock = DBusMock(pid: pid, name: name, driver: driver)
        // Drain both pipes so the mock never blocks on a full one; keep stderr for failure messages.
        Thread { _ = Subprocess.readAll(stdout) }.start()
        Thread { [errors = mock.errors] in
            let text = Subprocess.readAll(stderr)
            errors.withLock { $0 = text }
        }.start()
        do {
            try await waitUntil("dbusmock owns \(name)", timeout: .seconds(20)) {
                if mock.hasExited {
                    throw MockError(description: "dbusmock \(arguments) exited: \(mock.errors.withLock { $0 })")
                }
                return try await driver.nameOwner(of: name) != nil
            }
        } catch {
            await mock.stop()
            throw error
        }
        return mock
    }

    /// Runs `body` with a mock, killing it afterwards whatever happens.
    static func with<T: Sendable>(
        on bus: PrivateBus, driver: DBusConnection, _ arguments: [String], owning name: String,
        _ body: (DBusMock) async throws -> T
    ) async throws -> T {
        let mock = try await start(on: bus, driver: driver, arguments, owning: name)
        do {
            let result = try await body(mock)
            await mock.stop()
            return result
        } catch {
            await mock.stop()
            throw error
        }
    }

    private var hasExited: Bool {
        reaped.withLock { reaped in
            if reaped { return true }
            var status: Int32 = 0
            reaped = waitpid(pid, &status, WNOHANG) == pid
            return reaped
        }
    }

    /// Kills the mock (SIGKILL: like a crash, no goodbye on the bus) and reaps it; idempotent.
    func stop() async {
        let alreadyReaped = reaped.withLock { reaped in
            defer { reaped = true }
            return reaped
        }
        guard !alreadyReaped else { return }
        kill(pid, SIGKILL)
        let pid = pid
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                _ = Subprocess.waitForExit(pid)
                continuation.resume()
            }.start()
        }
    }

    // MARK: Driving the mock

    /// `org.freedesktop.DBus.Properties.Set` on the mock: it stores the value and emits PropertiesChanged.
    func setProperty(_ property: String, _ value: DBusValue, path: ObjectPath, interface: String) async throws {
        try await driver.setProperty(
            property, interface: interface, value: value, destination: name, path: path, timeout: .seconds(10))
    }

    /// A method of the mock's control interface (`org.freedesktop.DBus.Mock`) or a template's.
    @discardableResult
    func callMock(_ method: String, path: ObjectPath, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await driver.call(
            destination: name, path: path, interface: Self.mockInterface, method: method, arguments: arguments,
            timeout: .seconds(10))
    }
}

struct MockError: Error, CustomStringConvertible {
    var description: String
}

extension DBusValue {
    /// An `a{sv}` from Swift values.
    static func properties(_ values: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: "s", value: "v",
            values.sorted { $0.key < $1.key }.map {
                DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value))
            })
    }
}
