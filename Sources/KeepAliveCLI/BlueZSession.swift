import ArgumentParser
import BlueZ
import DBus
import KeepAlive
import KeepAliveDaemon
import Logging

/// For the one-shot commands (`read`, `scan`): a connection to the bus, BlueZ's object tree kept current while
/// `body` runs, everything closed afterwards whatever happens.
func withBlueZ<T: Sendable>(
    bus: DBusConnection.Bus,
    adapter: String,
    logger: Logger,
    _ body: @escaping @Sendable (BlueZTransport) async throws -> T
) async throws -> T {
    let connection: DBusConnection
    do {
        connection = try await DBusConnection(bus: bus)
    } catch {
        throw CommandFailure("cannot connect to \(bus): \(error) (see `keepalive doctor`)")
    }
    let transport = BlueZTransport(connection: connection, logger: logger)
    let result: Result<T, any Error> = await withTaskGroup(of: Void.self) { group in
        group.addTask { try? await transport.run() }
        defer { group.cancelAll() }
        do {
            try await transport.waitUntilReady(timeout: .seconds(5))
        } catch is CancellationError {
            return .failure(CancellationError())
        } catch {
            return .failure(
                CommandFailure("org.bluez is not on \(bus): is bluetoothd running? (see `keepalive doctor`)"))
        }
        do {
            _ = try transport.checkAdapter(adapter)
            return .success(try await body(transport))
        } catch {
            return .failure(error)
        }
    }
    await connection.close()
    return try result.get()
}

/// A failure a command reports in one line and exits 1 for.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `hci0`, `hci1`…
func validateAdapter(_ adapter: String) throws {
    guard HostBluetooth.isValidAdapter(adapter) else {
        throw ValidationError("--adapter '\(adapter)' is not an adapter name like hci0")
    }
}
