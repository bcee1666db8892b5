import KeepAlive
import Polling
import KeepAliveTesting
import Basics
import Testing

/// A fleet's admission: only the holder of a shared device polls it, and only its polls are recorded.
@Suite("Poll admission")
struct PollAdmissionTests {
    let clock = TestClock()
    let battery = BluetoothUUID(assigned: 0x2A19)
    let shared = Peripheral(address: "AA:BB:CC:00:00:01", adapter: "hci0")
    let own = Peripheral(address: "AA:BB:CC:00:00:02", adapter: "hci0")

    /// Holds `shared` while `holding` says so, on hci1; the first permit after taking it carries the handover.
    final class Admission: PollAdmission {
        let holding = Locked(false)
        let handoverPending = Locked(true)
        let asked = Locked<[String]>([])

        func admit(_ device: String) -> PollAdmissionDecision {
            asked.withLock { $0.append(device) }
            guard device == "shared" else { return .poll(nil) }
            guard holding.withLock({ $0 }) else { return .decline }
            let handover = handoverPending.withLock { pending in
                defer { pending = false }
                return pending ? PollRecord.Holder.Handover(from: "gw-b", reason: "expired") : nil
            }
            return .poll(PollRecord.Holder(gateway: "gw-a", adapter: "hci1", handover: handover))
        }

        func records(_ device: String) -> Bool { device != "shared" || holding.withLock { $0 } }
    }

    func engine(_ transport: MockTransport, admission: Admission) throws -> (KeepAlive, PollEngine) {
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(30)), clock: clock, logger: quietLogger)
        let engine = try PollEngine(
            peripherals: [
                PeripheralSpec(name: "shared", peripheral: shared, reads: [battery]),
                PeripheralSpec(name: "own", peripheral: own, reads: [battery]),
            ],
            transport: transport, keepAlive: keepAlive, logger: quietLogger, admission: admission
        )
        return (keepAlive, engine)
    }

    @Test func aDeclinedDeviceIsNeitherPolledNorRecordedAndAHeldOneSaysWhoHoldsIt() async throws {
        let transport = MockTransport(clock: clock)
        let onOtherAdapter = Peripheral(address: shared.address, adapter: "hci1")
        transport.add(shared, characteristics: [battery: .fixed([10])])
        transport.add(onOtherAdapter, characteristics: [battery: .fixed([11])])
        transport.add(own, characteristics: [battery: .fixed([20])])
        let admission = Admission()
        let (keepAlive, engine) = try engine(transport, admission: admission)
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            // Tick 0: only the device this gateway does not share is polled and recorded.
            let first = try await records.next()
            #expect(first.device == "own")
            #expect(first.holder == nil)
            await #expect(throws: PollEngine.CommandError.self) { _ = try await engine.pollNow("shared") }
            #expect(transport.calls(.connect, on: shared).isEmpty, "never connected while another gateway holds it")
            #expect(transport.calls(.connect, on: onOtherAdapter).isEmpty)

            // The hold starts: the next tick polls it on the adapter the fleet chose, with the handover once.
            admission.holding.withLock { $0 = true }
            try await clock.waitForSleeper(until: clock.instant(.seconds(30)))
            clock.advance(to: clock.instant(.seconds(30)))
            var tick1: [String: PollRecord] = [:]
            for _ in 0..<2 {
                let record = try await records.next()
                tick1[record.device] = record
            }
            let held = try #require(tick1["shared"])
            #expect(
                held.holder
                    == PollRecord.Holder(
                        gateway: "gw-a", adapter: "hci1", handover: .init(from: "gw-b", reason: "expired")))
            #expect(held.peripheral.adapter == "hci1")
            #expect(held.readings.first?.description == "battery 11 %", "read through hci1")
            #expect(tick1["own"]?.holder == nil)
            let commanded = try await engine.pollNow("shared")
            #expect(commanded.holder?.handover == nil, "the handover is told once")
            #expect(commanded.holder?.gateway == "gw-a")
        }
        #expect(transport.calls(.connect, on: shared).isEmpty)
        #expect(transport.calls(.connect, on: onOtherAdapter).count == 2)
        // Tick 0, the refused command, tick 1, the second command.
        #expect(admission.asked.withLock { $0.filter { $0 == "shared" }.count } == 4, "asked before every poll")
    }

    @Test func aDeclinedTickIsReportedAsDeclinedAndCountsNeitherAsASuccessNorAsAFailure() async throws {
        let transport = MockTransport(clock: clock)
        transport.add(shared, characteristics: [battery: .fixed([10])])
        transport.add(own, characteristics: [battery: .fixed([20])])
        let admission = Admission()
        let (keepAlive, engine) = try engine(transport, admission: admission)
        let events = Collector(keepAlive.events())
        let records = Collector(engine.records())
        try await withRunning(keepAlive) {
            let report = try await events.next { event in
                if case .report(let report) = event { report.name == "shared" } else { false }
            }
            guard case .report(let declined) = report, case .declined = declined.outcome else {
                Issue.record("expected the shared device's tick to be reported as declined: \(report)")
                return
            }
            #expect(declined.detail == nil)
            #expect(try await records.next().device == "own", "the declined tick wrote no record")
            #expect(keepAlive.statistics.declined == 1)
            #expect(keepAlive.statistics.failures == 0, "a declined tick is no failure: it does not back off")
            #expect(keepAlive.statistics.callbacksRun == 1, "only the own device's poll ran")
        }
        #expect(transport.calls(.connect, on: shared).isEmpty)
    }
}
