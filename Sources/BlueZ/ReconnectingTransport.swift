import KeepAlive
package import Polling
package import Basics

/// The daemon's transport across bus connections: it forwards to the `BlueZTransport` of the current
/// connection, and while there is none (the bus was lost and is being reconnected) every call fails at once
/// with `TransportError.Code.serviceUnavailable`, so each tick still gets its record, saying why.
package final class ReconnectingTransport: PeripheralTransport {
    package init() {}

    package let current = Locked<BlueZTransport?>(nil)
    /// Adapters followed to another name (configured → on the bus now): one unplugged and back under a new
    /// index (the daemon's adapter healer). Calls go to the adapter's current name; records keep the configured one.
    package let aliases = Locked<[String: String]>([:])

    /// The name `adapter` has on the bus now.
    package func actual(_ adapter: String) -> String {
        aliases.withLock { $0[adapter] } ?? adapter
    }

    private func actual(_ peripheral: Peripheral) -> Peripheral {
        let adapter = actual(peripheral.adapter)
        return adapter == peripheral.adapter ? peripheral : Peripheral(address: peripheral.address, adapter: adapter)
    }

    package func attach(_ transport: BlueZTransport?) {
        current.withLock { $0 = transport }
    }

    private func transport() throws -> BlueZTransport {
        guard let transport = current.withLock({ $0 }) else {
            throw TransportError(.serviceUnavailable, "the D-Bus system bus is gone; reconnecting")
        }
        return transport
    }

    package func discover(on adapter: String, filter: DiscoveryFilter) -> AsyncThrowingStream<Advertisement, any Error>
    {
        do {
            return try transport().discover(on: actual(adapter), filter: filter)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
    }

    package func connect(_ peripheral: Peripheral, options: ConnectOptions) async throws {
        try await transport().connect(actual(peripheral), options: options)
    }

    package func read(_ characteristic: BluetoothUUID, from peripheral: Peripheral) async throws -> [UInt8] {
        try await transport().read(characteristic, from: actual(peripheral))
    }

    package func write(_ value: [UInt8], to characteristic: BluetoothUUID, of peripheral: Peripheral, type: WriteType)
        async throws
    {
        try await transport().write(value, to: characteristic, of: actual(peripheral), type: type)
    }

    package func notifications(from characteristic: BluetoothUUID, of peripheral: Peripheral) async throws
        -> AsyncThrowingStream<[UInt8], any Error>
    {
        try await transport().notifications(from: characteristic, of: actual(peripheral))
    }

    package func presentationFormat(of characteristic: BluetoothUUID, from peripheral: Peripheral) async throws
        -> [UInt8]?
    {
        try await transport().presentationFormat(of: characteristic, from: actual(peripheral))
    }

    /// The current connection's thread (a poll started before a reconnection finishes on the old one).
    package var preferredExecutor: (any TaskExecutor)? {
        current.withLock { $0 }?.preferredExecutor
    }

    /// The current connection's answer; `nil` while there is none (a link made on a lost connection is not
    /// known to the next one).
    package func linkTime(of peripheral: Peripheral) -> Duration? {
        current.withLock { $0 }?.linkTime(of: actual(peripheral))
    }

    package func serviceResolutionTime(of peripheral: Peripheral) -> Duration? {
        current.withLock { $0 }?.serviceResolutionTime(of: actual(peripheral))
    }

    package func disconnect(_ peripheral: Peripheral, timeout: Duration) async {
        // With no bus there is nothing to disconnect through (and bluetoothd lost its bus too).
        guard let transport = current.withLock({ $0 }) else { return }
        await transport.disconnect(actual(peripheral), timeout: timeout)
    }
}
