@testable import BlueZ
import BlueZSimulator
import DBus
import LocalServices
import TestHarness
import KeepAlive
import Polling
import KeepAliveTesting
import Testing

@Suite("BlueZTransport against the simulator", .serialized)
struct BlueZTransportTests {
    typealias H = TransportHarness

    @Test func pollsDevicesThroughTheRealTransport() async throws {
        try await H.with { h in
            let specs = (1...2).map { index in
                PeripheralSpec(
                    name: "sensor-\(index)",
                    peripheral: Peripheral(address: "C0:FF:EE:00:00:0\(index)", adapter: "hci0"),
                    reads: [H.counter, H.battery]
                )
            }
            let (keepAlive, engine) = try h.engine(specs)
            let records = Collector(engine.records())
            try await running(keepAlive) {
                for tick in 0..<3 {
                    if tick > 0 { try await h.advance(toTick: tick) }
                    for _ in 0..<2 {
                        let record = try await records.next { $0.tick == UInt64(tick) }
                        #expect(
                            record.result != .failed,
                            "\(record.device) tick \(tick): \(String(describing: record.failure))")
                        #expect(record.values.map(\.characteristic) == [H.counter, H.battery])
                        // 0x2A19 is read from the characteristic (bluetoothd 5.66 keeps it exported beside Battery1).
                        #expect(record.values.last?.bytes.count == 1)
                        #expect(record.window?.outcome == .completed)
                    }
                }
            }
            // The simulator exports GATT objects as bluetoothd does: the cache keeps every one compactly.
            let device = try BlueZ.devicePath(specs[0].peripheral)
            let (compact, whole) = h.transport.cache.state.withLock { state in
                (state.gatt[device]?.count ?? 0, state.objects.keys.filter { $0.isDescendant(of: device) })
            }
            #expect(compact >= 3 && whole.isEmpty, "compact \(compact), whole \(whole)")
            let uuids = h.transport.cache.characteristics(of: device).compactMap(\.uuid)
            #expect(uuids.contains(H.counter) && uuids.contains(H.battery), "\(uuids)")
        }
    }

    @Test func notificationsArriveWithoutGapsAndWritesLand() async throws {
        try await H.with { h in
            let setting = try BluetoothUUID(SimulatedUUID.setting)
            let transport = h.transport
            try await transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter, setting]))
            try await transport.write([0x2A], to: setting, of: H.sensor, type: .request)
            #expect(try await transport.read(setting, from: H.sensor) == [0x2A])
            let stream = try await transport.notifications(from: H.counter, of: H.sensor)
            var values: [[UInt8]] = []
            for try await value in stream {
                values.append(value)
                if values.count == 4 { break }
            }
            await transport.disconnect(H.sensor, timeout: .seconds(5))
            #expect(values.count == 4)
        }
    }

    /// Each fault: the failing tick gives a typed failure record, the next tick after the fault clears
    /// succeeds, no window stays open, no device stays connected.
    func faultThenRecovery(
        _ configuration: BlueZSimulator.Configuration = H.configuration(),
        connectTimeout: Duration = .seconds(5),
        inject: @Sendable (H) async throws -> Void,
        clear: @Sendable (H) async throws -> Void,
        expect check: @Sendable (PollRecord) -> Void
    ) async throws {
        try await H.with(configuration) { h in
            try await inject(h)
            let (keepAlive, engine) = try h.engine(connectTimeout: connectTimeout)
            let records = Collector(engine.records())
            try await running(keepAlive) {
                let failed = try await records.next(timeout: .seconds(30)) { $0.tick == 0 }
                #expect(failed.result == .failed)
                check(failed)
                try await clear(h)
                try await h.advance(toTick: 1)
                let recovered = try await records.next(timeout: .seconds(30)) { $0.tick == 1 }
                #expect(
                    recovered.result != .failed, "after the fault cleared: \(String(describing: recovered.failure))")
            }
        }
    }

    @Test func connectAbortIsATypedTransientFailure() async throws {
        try await faultThenRecovery(
            inject: { try await $0.simulator.inject(.connectAbort(count: 1), device: H.sensor.address) },
            clear: { _ in },
            expect: { record in
                #expect(record.failure?.code == "connectionAborted")
                #expect(record.failure?.transient == true)
                #expect(record.failure?.dbusName == "org.bluez.Error.Failed")
            }
        )
    }

    @Test func inProgressIsATypedTransientFailure() async throws {
        try await faultThenRecovery(
            inject: { try await $0.simulator.inject(.inProgress, device: H.sensor.address) },
            clear: { try $0.simulator.clearFault("in-progress", device: H.sensor.address) },
            expect: { #expect($0.failure?.code == "inProgress") }
        )
    }

    @Test func readHangingUntilTheATTTimeoutDropsTheLinkAndFails() async throws {
        try await faultThenRecovery(
            inject: { try await $0.simulator.inject(.readHang, device: H.sensor.address) },
            clear: { try $0.simulator.clearFault("read-hang", device: H.sensor.address) },
            expect: { #expect($0.failure?.code == "notConnected") }
        )
    }

    @Test func attErrorIsPermanentAndKeepsItsCode() async throws {
        try await faultThenRecovery(
            inject: { try await $0.simulator.inject(.attError(0x0E), device: H.sensor.address) },
            clear: { try $0.simulator.clearFault("att-error", device: H.sensor.address) },
            expect: { record in
                #expect(record.failure?.code == "attError")
                #expect(record.failure?.transient == false)
                #expect(record.attempts == 1)
            }
        )
    }

    @Test func absentDeviceFailsWithinTheConnectDeadline() async throws {
        try await faultThenRecovery(
            connectTimeout: .seconds(2),
            inject: { try await $0.simulator.inject(.absent, device: H.sensor.address) },
            clear: { try $0.simulator.clearFault("absent", device: H.sensor.address) },
            expect: { record in
                #expect(
                    ["connectionAborted", "timeout"].contains(record.failure?.code ?? ""),
                    "\(String(describing: record.failure))")
            }
        )
    }

    @Test func vanishedDeviceIsNotFoundUntilItAdvertisesAgain() async throws {
        try await faultThenRecovery(
            connectTimeout: .seconds(1),
            inject: { h in
                try await h.simulator.inject(.vanish, device: H.sensor.address)
                let path = try BlueZ.devicePath(H.sensor)
                try await waitUntil("the cache drops the device") { h.transport.cache.device(path) == nil }
            },
            clear: { try $0.simulator.clearFault("vanish", device: H.sensor.address) },
            expect: { #expect($0.failure?.code == "deviceNotFound") }
        )
    }

    @Test func adapterPoweredOffIsReportedAndPowerOnRecovers() async throws {
        try await faultThenRecovery(
            inject: { h in
                try await h.simulator.setPowered(false)
                try await waitUntil("the cache sees the adapter off") {
                    h.transport.cache.adapter(named: "hci0")?.powered == false
                }
            },
            clear: { h in
                try await h.simulator.setPowered(true)
                try await waitUntil("the cache sees the adapter on") {
                    h.transport.cache.adapter(named: "hci0")?.powered == true
                }
            },
            expect: { record in
                #expect(record.failure?.code == "adapterUnavailable")
                #expect(record.failure?.message.contains("powered off") == true)
            }
        )
    }

    @Test func rfkillBlockedAdapterSaysSo() async throws {
        try await faultThenRecovery(
            inject: { h in
                try await h.simulator.setBlocked(true)
                try await waitUntil("the cache sees the adapter blocked") {
                    h.transport.cache.adapter(named: "hci0")?.powerState == "off-blocked"
                }
            },
            clear: { h in
                // As on real BlueZ without AutoEnable: unblocking leaves the adapter off until it is powered.
                try await h.simulator.setBlocked(false)
                try await h.simulator.setPowered(true)
                try await waitUntil("the cache sees the adapter on") {
                    h.transport.cache.adapter(named: "hci0")?.powered == true
                }
            },
            expect: { record in
                #expect(record.failure?.code == "adapterUnavailable")
                #expect(record.failure?.message.contains("rfkill") == true)
            }
        )
    }

    @Test func bluetoothdCrashFailsAtOnceAndPollingResumesAfterRestart() async throws {
        try await faultThenRecovery(
            inject: { await $0.simulator.crash() },
            clear: { h in
                try await h.simulator.restart()
                try await h.transport.waitUntilReady(timeout: .seconds(10))
            },
            expect: {
                #expect(
                    ["serviceUnavailable", "serviceRestarted"].contains($0.failure?.code ?? ""),
                    "\(String(describing: $0.failure))")
            }
        )
    }

    /// After bluetoothd is killed the kernel keeps the link: the new bluetoothd shows Connected=true but never
    /// resolves services until the kernel drops the link (1.5–2 s in the qemu lab). A connect in that window
    /// fails typed when the link drops (not at its deadline), and the next one works.
    @Test func aLinkLeftOverFromACrashFailsTheConnectTypedThenTheNextOneWorks() async throws {
        try await H.with(H.configuration { $0.latencies.kernelLinkAfterCrash = .seconds(100) }) { h in
            try await h.transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            await h.simulator.crash()
            try await h.simulator.restart()
            try await h.transport.waitUntilReady(timeout: .seconds(10))
            let started = ContinuousClock.now
            await #expect {
                try await h.transport.connect(
                    H.sensor, options: ConnectOptions(timeout: .seconds(10), characteristics: [H.counter]))
            } throws: { error in
                (error as? TransportError)?.isTransient == true
            }
            #expect(
                ContinuousClock.now - started < .seconds(5),
                "failed when the leftover link dropped, not at the 10-s deadline")
            await h.transport.disconnect(H.sensor, timeout: .seconds(5))
            try await h.transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            #expect(try await h.transport.read(H.counter, from: H.sensor).count == 4)
            await h.transport.disconnect(H.sensor, timeout: .seconds(5))
        }
    }

    @Test func inFlightReadFailsAtOnceWhenBluetoothdCrashes() async throws {
        try await H.with { h in
            try await h.simulator.inject(.readHang, device: H.sensor.address)
            try await h.transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            let started = ContinuousClock.now
            let read = Task { try await h.transport.read(H.counter, from: H.sensor) }
            try await waitUntil("the read is in flight") { (h.simulator.callCounts["ReadValue"] ?? 0) > 0 }
            await h.simulator.crash()
            await #expect {
                _ = try await read.value
            } throws: { error in
                (error as? TransportError)?.code == .serviceRestarted
            }
            #expect(ContinuousClock.now - started < .seconds(5), "failed at once, not after a D-Bus timeout")
            try await h.simulator.restart()
            try await h.transport.waitUntilReady(timeout: .seconds(10))
            try h.simulator.clearFault("read-hang", device: H.sensor.address)
            await h.transport.disconnect(H.sensor, timeout: .seconds(5))
        }
    }

    @Test func gracefulRestartRebuildsTheCache() async throws {
        try await H.with { h in
            let before = h.transport.cache.syncCount
            try await h.simulator.restart()
            try await waitUntil("the cache is fetched again") {
                h.transport.cache.syncCount > before && h.transport.cache.isReady
            }
            try await h.transport.connect(
                H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [H.counter]))
            _ = try await h.transport.read(H.counter, from: H.sensor)
            await h.transport.disconnect(H.sensor, timeout: .seconds(5))
        }
    }

    @Test(arguments: BlueZSimulator.Quirk.allCases)
    func realBlueZQuirksAreSurvived(_ quirk: BlueZSimulator.Quirk) async throws {
        try await H.with(H.configuration { $0.quirks = [quirk] }) { h in
            let (keepAlive, engine) = try h.engine()
            let records = Collector(engine.records())
            try await running(keepAlive) {
                let record = try await records.next(timeout: .seconds(30)) { $0.tick == 0 }
                #expect(record.result == .newData, "\(quirk): \(String(describing: record.failure))")
                #expect(record.values.count == 2)
            }
            // Connected is asked for only when its signal never came.
            #expect((h.transport.missedConnectedSignals > 0) == (quirk == .noConnectedSignal))
        }
    }

    @Test func unknownAdapterIsAPermanentTypedError() async throws {
        try await H.with { h in
            let other = Peripheral(address: H.sensor.address, adapter: "hci7")
            await #expect {
                try await h.transport.connect(other, options: ConnectOptions(timeout: .seconds(2)))
            } throws: { error in
                guard let error = error as? TransportError else { return false }
                return error.code == .adapterNotFound && error.message.contains("hci0")
            }
        }
    }

    @Test func missingCharacteristicIsPermanentAndNamesWhatExists() async throws {
        try await H.with { h in
            let bogus = BluetoothUUID(assigned: 0xFEED)
            await #expect {
                try await h.transport.connect(
                    H.sensor, options: ConnectOptions(timeout: .seconds(5), characteristics: [bogus]))
            } throws: { error in
                guard let error = error as? TransportError else { return false }
                return error.code == .characteristicNotFound && error.message.contains("feed")
                    && error.message.contains("2a6e")
            }
        }
    }

    @Test func discoveryFindsCachedAndAdvertisingDevices() async throws {
        try await H.with { h in
            var seen = Set<String>()
            for try await advertisement in h.transport.discover(on: "hci0", filter: DiscoveryFilter()) {
                seen.insert(advertisement.peripheral.address)
                if seen.count == 2 { break }
            }
            #expect(seen == ["C0:FF:EE:00:00:01", "C0:FF:EE:00:00:02"])
        }
    }
}
