package import DBus
import KeepAlive
public import Polling

// What the daemon's healing ladder asks of BlueZ (issue #15): adapter-level calls no poll makes. Each is
// bounded by its timeout and reports BlueZ's errors in the core's taxonomy.

extension BlueZTransport {
    /// `Adapter1.Powered` = `on`, then waits (until `timeout`) for the adapter to say so.
    public func setPowered(_ on: Bool, adapter: String, timeout: Duration = .seconds(5)) async throws {
        let path = try BlueZ.adapterPath(adapter)
        let deadline = time.now + timeout
        do {
            try await connection.setProperty(
                "Powered", interface: BlueZ.adapterInterface, value: .boolean(on), destination: BlueZ.service,
                path: path, timeout: timeout)
        } catch let error as DBusError {
            throw BlueZErrors.transportError(error, context: "Powered=\(on) on \(adapter)")
        }
        try await cache.wait(until: deadline, for: "\(adapter) to read Powered=\(on)") { tree in
            tree.properties(path, BlueZ.adapterInterface)?.bool("Powered") == on ? .satisfied : .waiting
        }
    }

    /// Powered off, then on: a controller reset short of unplugging it.
    public func powerCycle(adapter: String, timeout: Duration = .seconds(5)) async throws {
        try await setPowered(false, adapter: adapter, timeout: timeout)
        try await setPowered(true, adapter: adapter, timeout: timeout)
    }

    /// `StopDiscovery` on `adapter`: ends this connection's discovery session, if one is stuck. Returns false
    /// when there was none (BlueZ: "No discovery started").
    @discardableResult
    public func stopDiscovery(adapter: String, timeout: Duration = .seconds(5)) async throws -> Bool {
        do {
            _ = try await call(
                try BlueZ.adapterPath(adapter), BlueZ.adapterInterface, "StopDiscovery", timeout: timeout,
                context: "StopDiscovery on \(adapter)")
            return true
        } catch let error as TransportError where error.code == .notReady {
            return false
        }
    }

    /// The peripherals among `candidates` that BlueZ reports connected now (on their adapter).
    public func connectedPeripherals(among candidates: [Peripheral]) -> [Peripheral] {
        candidates.filter { peripheral in
            guard let path = try? BlueZ.devicePath(peripheral) else { return false }
            return cache.deviceObject(path)?.flag(.connected) == true
        }
    }

    /// The connection this transport talks over (the daemon's restart of bluetoothd goes to systemd on it).
    package var busConnection: DBusConnection { connection }
}
