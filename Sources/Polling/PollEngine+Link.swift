import KeepAlive

extension PollEngine {
    /// A link to `device` for work other than a poll (a deferred task reading its history, setting its clock):
    /// under the adapter's connection limit, as a poll is, connected with `characteristics` resolved, and
    /// disconnected on every path (also when `body` throws or is cancelled).
    ///
    /// The connection slot first, then the device in ``gate`` as `holder` (the order polls take them in, so that
    /// neither waits for what the other holds): meanwhile a scheduled tick of the device gives up at once, as
    /// contention (`noSlot`, saying who holds it: no failure of the device, no backoff), and a command's poll waits.
    ///
    /// - Throws: ``CommandError`` `.unknownDevice` for a name the engine does not poll, `.notHeld` for a device its
    ///   admission keeps from this engine now (paused, or another gateway's); what connect and `body` throw;
    ///   `CancellationError` when cancelled while waiting for a connection slot.
    public func withLink<Result: Sendable>(
        to device: String, holder: String, characteristics: [BluetoothUUID], connectTimeout: Duration? = nil,
        _ body: (Peripheral, any PeripheralTransport) async throws -> Result
    ) async throws -> Result {
        guard let polled = devices[device] else {
            throw CommandError(code: .unknownDevice, message: "no device named `\(device)`")
        }
        // A shared device another gateway holds is that gateway's to connect to; a paused one, nobody's.
        guard admission?.records(device) ?? true else {
            throw CommandError(code: .notHeld, message: "`\(device)` is paused, or another gateway holds it")
        }
        let peripheral = polled.spec.peripheral
        try await limiter.acquire(adapter: peripheral.adapter, key: device)
        // No hold time for the placement to learn: a download's minutes say nothing of the device's polls.
        defer { releaseSlot(adapter: peripheral.adapter, device: device, granted: nil) }
        try await gate.enter(device, holder: holder)
        defer { gate.leave(device) }
        if let previous = teardowns.withLock({ $0.running[device]?.done }) {
            // A poll's disconnect still running: never connect over it.
            _ = await previous.valueUnlessCancelled()
            try Task.checkCancellation()
        }
        try await transport.connect(
            peripheral,
            options: ConnectOptions(
                timeout: connectTimeout ?? configuration.connectTimeout, characteristics: characteristics))
        do {
            let result = try await body(peripheral, transport)
            await disconnect(peripheral, device: device)
            return result
        } catch {
            await disconnect(peripheral, device: device)
            throw error
        }
    }
}
