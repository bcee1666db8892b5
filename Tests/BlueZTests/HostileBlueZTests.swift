import BlueZ
import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import KeepAlive
import Polling
import KeepAliveTesting
import Testing

/// The client against an org.bluez that gets every type wrong (`HostileBlueZ`, `bluez-sim --hostile`): every
/// operation ends in a typed `TransportError` (or, for disconnect, returns), every poll gives a typed failure
/// record, nothing traps, nothing hangs. Three seeds, so three different runs of wrong answers.
@Suite("BlueZTransport against a hostile org.bluez", .serialized)
struct HostileBlueZTests {
    static let devices = (1...4).map { Peripheral(address: "C0:FF:EE:00:00:0\($0)", adapter: "hci0") }
    static let counter = try! BluetoothUUID(SimulatedUUID.counter)

    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyWrongAnswerIsATypedFailureNeverATrap(seed: UInt64) async throws {
        try await PrivateBus.with { bus in
            let hostile = try await HostileBlueZ.start(
                on: .address(bus.address), devices: Self.devices.map(\.address), seed: seed,
                signalInterval: .milliseconds(5),
                logger: testLogger)
            let connection = try await bus.connect()
            let transport = BlueZTransport(connection: connection, logger: testLogger)
            let cache = Task { try await transport.run() }
            try await transport.waitUntilReady(timeout: .seconds(10))
            var codes: [String: Int] = [:]
            func attempt(_ what: String, _ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("\(what) succeeded against answers of the wrong type")
                } catch let error as TransportError {
                    codes[error.code.rawValue, default: 0] += 1
                    #expect(!error.message.isEmpty)
                } catch {
                    Issue.record("\(what): not a TransportError: \(type(of: error)): \(error)")
                }
            }
            for round in 0..<5 {
                for device in Self.devices {
                    let options = ConnectOptions(timeout: .milliseconds(300), characteristics: [Self.counter])
                    await attempt("connect \(device)") { try await transport.connect(device, options: options) }
                    await attempt("read \(device)") { _ = try await transport.read(Self.counter, from: device) }
                    await attempt("write \(device)") {
                        try await transport.write(
                            [UInt8(round)], to: Self.counter, of: device, type: round % 2 == 0 ? .request : .command)
                    }
                    await attempt("notify \(device)") {
                        let stream = try await transport.notifications(from: Self.counter, of: device)
                        for try await _ in stream { break }
                        throw TransportError(.protocolError, "(the stream ended without an error)")
                    }
                    await transport.disconnect(device, timeout: .milliseconds(300))
                }
            }
            // The poll engine on top: one typed failure record per device per tick.
            let clock = TestClock()
            let keepAlive = try KeepAlive(
                configuration: .init(interval: .seconds(30)), clock: clock, logger: testLogger)
            let engine = try PollEngine(
                peripherals: Self.devices.map {
                    PeripheralSpec(name: $0.address, peripheral: $0, reads: [Self.counter])
                },
                transport: transport, keepAlive: keepAlive,
                configuration: .init(retry: .never, connectTimeout: .milliseconds(300)),
                logger: testLogger)
            let records = Collector(engine.records())
            try await running(keepAlive) {
                for tick in 0..<3 {
                    if tick > 0 {
                        let instant = TestClock.Instant(offset: .seconds(30) * tick)
                        try await clock.waitForSleeper(until: instant)
                        clock.advance(to: instant)
                    }
                    for _ in Self.devices {
                        let record = try await records.next(timeout: .seconds(30)) { $0.tick == UInt64(tick) }
                        #expect(
                            record.result == .failed, "\(record.device) tick \(tick) did not fail against wrong answers"
                        )
                        if let failure = record.failure { codes["record:" + failure.code, default: 0] += 1 }
                    }
                }
            }
            print(
                """
                    hostile seed \(seed): \(hostile.callCount) wrong answers; typed failures \
                    \(codes.sorted { $0.key < $1.key })
                    """
            )
            #expect(hostile.callCount > 0)
            cache.cancel()
            _ = await cache.result
            await connection.close()
            await hostile.stop()
        }
    }
}
