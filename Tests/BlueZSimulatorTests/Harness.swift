import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import Basics
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A private bus, a simulator on it (time × 0.01 unless told) and a client connection, torn down with the
/// check every test shares: no device is left Connected=true.
struct Harness: Sendable {
    static let first = "C0:FF:EE:00:00:01"
    static let second = "C0:FF:EE:00:00:02"
    static let adapter: ObjectPath = "/org/bluez/hci0"
    static let counter = SimulatedUUID.counter
    static let setting = SimulatedUUID.setting
    static let command = SimulatedUUID.command
    static let temperature = SimulatedUUID.full("2A6E")

    let bus: PrivateBus
    let simulator: BlueZSimulator
    let client: DBusConnection

    static func configuration(devices: Int = 2, _ change: (inout BlueZSimulator.Configuration) -> Void = { _ in })
        -> BlueZSimulator.Configuration
    {
        var configuration = BlueZSimulator.Configuration(
            adapters: ["hci0"], devices: .sensors(count: devices), timeScale: 0.01)
        configuration.latencies.rssiInterval = .milliseconds(50)
        change(&configuration)
        return configuration
    }

    static func with(
        _ configuration: BlueZSimulator.Configuration = configuration(),
        _ body: @Sendable (Harness) async throws -> Void
    ) async throws {
        try await PrivateBus.with { bus in
            let simulator = try await BlueZSimulator.start(on: .address(bus.address), configuration: configuration)
            let client = try await bus.connect()
            let harness = Harness(bus: bus, simulator: simulator, client: client)
            let result: Result<Void, any Error>
            do { result = .success(try await body(harness)) } catch { result = .failure(error) }
            try? await harness.disconnectEverything()
            #expect(simulator.connectedDevices.isEmpty, "a device was left Connected=true")
            await simulator.stop()
            try result.get()
        }
    }

    /// Cleanup as a client must do it: Disconnect every device that is still connected, with a deadline.
    func disconnectEverything() async throws {
        guard simulator.isRunning else { return }
        for address in simulator.connectedDevices {
            _ = try? await device(client, address, "Disconnect", timeout: .seconds(5))
        }
        try await waitUntil("no device is connected") { simulator.connectedDevices.isEmpty }
    }

    static func devicePath(_ address: String) -> ObjectPath {
        ObjectPath(stringLiteral: "/org/bluez/hci0/dev_" + address.split(separator: ":").joined(separator: "_"))
    }

    @discardableResult
    func device(
        _ connection: DBusConnection, _ address: String, _ method: String, timeout: Duration = .seconds(10)
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.bluez", path: Self.devicePath(address), interface: "org.bluez.Device1", method: method,
            timeout: timeout)
    }

    func adapter(_ connection: DBusConnection, _ method: String, _ arguments: [DBusValue] = []) async throws {
        _ = try await connection.call(
            destination: "org.bluez", path: Self.adapter, interface: "org.bluez.Adapter1", method: method,
            arguments: arguments)
    }

    func connect(_ address: String = first) async throws {
        try await device(client, address, "Connect")
        try await waitUntil("services are resolved") {
            try await self.deviceProperty(address, "ServicesResolved") == .boolean(true)
        }
    }

    func deviceProperty(_ address: String, _ name: String) async throws -> DBusValue {
        try await client.getProperty(
            name, interface: "org.bluez.Device1", destination: "org.bluez", path: Self.devicePath(address))
    }

    func objects() async throws -> [ObjectPath: [String: [String: DBusValue]]] {
        try await client.getManagedObjects(destination: "org.bluez")
    }

    /// The characteristic of `address` with `uuid`, found by UUID as clients must (paths depend on handles).
    func characteristic(_ uuid: String, of address: String = first) async throws -> ObjectPath {
        let device = Self.devicePath(address)
        let found = try await objects().first { path, interfaces in
            path.isDescendant(of: device)
                && interfaces["org.bluez.GattCharacteristic1"]?["UUID"] == .string(uuid)
        }
        return try #require(found?.key, "no characteristic \(uuid) under \(device)")
    }

    func read(_ path: ObjectPath, offset: UInt16? = nil, on connection: DBusConnection? = nil) async throws -> [UInt8] {
        var options: [DBusDictionaryEntry] = []
        if let offset { options.append(DBusDictionaryEntry(key: .string("offset"), value: .variant(.uint16(offset)))) }
        let reply = try await (connection ?? client).call(
            destination: "org.bluez", path: path, interface: "org.bluez.GattCharacteristic1", method: "ReadValue",
            arguments: [.dictionary(key: "s", value: "v", options)])
        return try reply.decode([UInt8].self)
    }

    func write(_ path: ObjectPath, _ bytes: [UInt8], options: [String: DBusValue] = [:]) async throws {
        let entries = options.map { DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value)) }
        _ = try await client.call(
            destination: "org.bluez", path: path, interface: "org.bluez.GattCharacteristic1", method: "WriteValue",
            arguments: [.bytes(bytes), .dictionary(key: "s", value: "v", entries)])
    }

    func characteristicCall(_ connection: DBusConnection, _ path: ObjectPath, _ method: String) async throws {
        _ = try await connection.call(
            destination: "org.bluez", path: path, interface: "org.bluez.GattCharacteristic1", method: method)
    }

    /// Every signal org.bluez sends, from now on.
    func bluezSignals(on connection: DBusConnection? = nil) async throws -> AsyncThrowingStream<DBusSignal, any Error> {
        try await (connection ?? client).signals(matching: MatchRule(sender: "org.bluez"))
    }
}

/// Runs `body` and returns the D-Bus error it throws (nil when it succeeds).
func dbusError(_ body: () async throws -> Void) async -> DBusError? {
    do {
        try await body()
        return nil
    } catch let error as DBusError {
        return error
    } catch {
        return DBusError(name: "unexpected", message: "\(error)")
    }
}

extension DBusSignal {
    /// The changed properties of a PropertiesChanged, variants unwrapped.
    var changed: [String: DBusValue] {
        guard member == "PropertiesChanged", arguments.count == 3,
            let entries = arguments[1].dictionaryEntries
        else { return [:] }
        var result: [String: DBusValue] = [:]
        for entry in entries { if let key = entry.key.string { result[key] = entry.value.unwrappingVariants } }
        return result
    }

    var invalidated: [String] {
        guard member == "PropertiesChanged", arguments.count == 3 else { return [] }
        return arguments[2].array?.compactMap(\.string) ?? []
    }

    var addedPath: ObjectPath? {
        member == "InterfacesAdded" ? arguments.first?.objectPath : nil
    }

    var removedPath: ObjectPath? {
        member == "InterfacesRemoved" ? arguments.first?.objectPath : nil
    }
}

/// The messages org.bluez puts on the wire, in order, as `dbus-monitor` sees them on the bus: signals and
/// method returns/errors (the reply's position among the signals is exact).
final class WireMonitor: Sendable {
    let pid: pid_t
    /// Everything dbus-monitor printed so far, filled by a reader thread.
    private let text = Locked("")
    private let finished = Locked(false)

    init(address: String) async throws {
        let (pid, output, _) = try Subprocess.spawn(["dbus-monitor", "--address", address, "--monitor"])
        self.pid = pid
        let text = self.text
        let finished = self.finished
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                let chunk = String(decoding: buffer[0..<count], as: UTF8.self)
                text.withLock { $0 += chunk }
            }
            close(output)
            finished.withLock { $0 = true }
        }.start()
        // dbus-monitor prints its own NameAcquired/NameLost once BecomeMonitor took effect: from then on it
        // sees every message.
        try await waitUntil("dbus-monitor is monitoring") { text.withLock { $0.contains("member=NameLost") } }
    }

    /// Waits until dbus-monitor printed `marker` (the last message the test expects), stops it, and returns
    /// one line per message: `signal <member> <path> <summary>` or `return`/`error <name>` for messages from
    /// `sender`.
    func stop(sender: String, after marker: String) async throws -> [String] {
        try await waitUntil("dbus-monitor printed \(marker)") { self.text.withLock { $0.contains(marker) } }
        // dbus-monitor ignores SIGTERM; SIGKILL loses nothing it already printed.
        kill(pid, SIGKILL)
        _ = Subprocess.waitForExit(pid)
        try await waitUntil("the monitor's output is read") { self.finished.withLock { $0 } }
        let text = self.text.withLock { $0 }
        var messages: [String] = []
        var current: String?
        var body = ""
        func flush() {
            if let current { messages.append(current + (body.isEmpty ? "" : " " + body)) }
            current = nil
            body = ""
        }
        for line in text.split(separator: "\n") {
            if !line.hasPrefix(" ") {
                flush()
                guard line.contains("sender=\(sender) ") else { continue }
                let fields = line.split(separator: " ")
                func field(_ key: String) -> String {
                    fields.first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) } ?? ""
                }
                if line.hasPrefix("signal") {
                    current = "signal \(field("member")) \(field("path").trimmingCharacters(in: [";"]))"
                } else if line.hasPrefix("method return") {
                    current = "return"
                } else if line.hasPrefix("error") {
                    current = "error \(field("error_name"))"
                }
            } else if current != nil {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("string \"") || text.contains("boolean") || text.hasPrefix("object path") {
                    body += (body.isEmpty ? "" : " ") + text
                }
            }
        }
        flush()
        return messages
    }
}
