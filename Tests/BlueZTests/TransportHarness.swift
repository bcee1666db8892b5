import BlueZ
import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import KeepAlive
import Polling
import KeepAliveTesting
import Logging
import Testing

let testLogger = Logger(label: "bluez-test", factory: { _ in SwiftLogNoOpLogHandler() })

/// A private dbus-daemon, the BlueZ simulator on it (time × 0.01), and a BlueZTransport polling it through the
/// real poll engine. Ticks are driven on a TestClock (deterministic "next tick"); the simulator and the
/// transport's own deadlines run in (scaled) real time.
struct TransportHarness: Sendable {
    static let sensor = Peripheral(address: "C0:FF:EE:00:00:01", adapter: "hci0")
    static let counter = try! BluetoothUUID(SimulatedUUID.counter)
    static let battery = BluetoothUUID(assigned: 0x2A19)

    let bus: PrivateBus
    let simulator: BlueZSimulator
    let transport: BlueZTransport
    let clock: TestClock

    static func configuration(
        devices: Int = 2,
        _ change: (inout BlueZSimulator.Configuration) -> Void = { _ in }
    ) -> BlueZSimulator.Configuration {
        var configuration = BlueZSimulator.Configuration(
            adapters: ["hci0"], devices: .sensors(count: devices), timeScale: 0.01)
        change(&configuration)
        return configuration
    }

    static func with(
        _ configuration: BlueZSimulator.Configuration = configuration(),
        transportConfiguration: BlueZTransport.Configuration = .init(),
        _ body: @Sendable (TransportHarness) async throws -> Void
    ) async throws {
        try await PrivateBus.with { bus in
            let simulator = try await BlueZSimulator.start(
                on: .address(bus.address), configuration: configuration, logger: testLogger)
            let connection = try await bus.connect()
            let transport = BlueZTransport(
                connection: connection, configuration: transportConfiguration, logger: testLogger)
            let cache = Task { try await transport.run() }
            let harness = TransportHarness(bus: bus, simulator: simulator, transport: transport, clock: TestClock())
            let result: Result<Void, any Error>
            do {
                try await transport.waitUntilReady(timeout: .seconds(10))
                result = .success(try await body(harness))
            } catch {
                result = .failure(error)
            }
            if simulator.isRunning {
                try? await waitUntil("the simulator has no device connected") { simulator.connectedDevices.isEmpty }
                #expect(
                    simulator.connectedDevices.isEmpty,
                    "a device was left Connected=true: \(simulator.connectedDevices)")
            }
            cache.cancel()
            await simulator.stop()
            try result.get()
        }
    }

    /// A scheduler on the harness clock and an engine polling `specs` (one attempt per tick unless `retry`).
    func engine(
        _ specs: [PeripheralSpec] = [PeripheralSpec(name: "sensor", peripheral: sensor, reads: [counter, battery])],
        retry: RetryPolicy = .never,
        connectTimeout: Duration = .seconds(5)
    ) throws -> (KeepAlive, PollEngine) {
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: testLogger)
        let engine = try PollEngine(
            peripherals: specs,
            transport: transport,
            keepAlive: keepAlive,
            configuration: .init(retry: retry, connectTimeout: connectTimeout),
            logger: testLogger
        )
        return (keepAlive, engine)
    }

    /// Advances the scheduler to tick `tick` (30 s grid).
    func advance(toTick tick: Int) async throws {
        let instant = TestClock.Instant(offset: .seconds(30) * tick)
        try await clock.waitForSleeper(until: instant)
        clock.advance(to: instant)
    }
}

/// Runs a scheduler for the duration of `body`, then stops it and checks that no window is left open.
func running<T>(_ keepAlive: KeepAlive, _ body: () async throws -> T) async throws -> T {
    let task = Task { try await keepAlive.run() }
    let result: Result<T, any Error>
    do { result = .success(try await body()) } catch { result = .failure(error) }
    await keepAlive.stop()
    try? await task.value
    #expect(keepAlive.ledger.openCount == 0, "a ledger window was left open")
    return try result.get()
}
