import BlueZSimulator
import DBus
import Foundation
import LocalServices
import TestHarness
import Testing

extension BlueZSimulatorTests {
    /// The Mi Flora's stored history (service 0x1206) and the LYWSD03MMC's clock, as a BlueZ client sees them:
    /// GATT writes and reads through org.bluez, the simulator's state through its control interface.
    ///
    /// The protocol: emericg/WatchFlower `docs/flowercare-ble-api.md` ("Historical data": `A0 00 00`, then the
    /// header; `A1` + index LE, then the entry; `A2 00 00` clears; 0x1a12 seconds since boot);
    /// open-homeautomation/miflora `miflora/miflora_poller.py` (all `FF` is no entry); h4/lywsd02
    /// `lywsd02/client.py` (ebe0ccb7-…: Unix time uint32 LE and the time zone offset int8). Expected bytes are
    /// written out by hand from `SimulatedHistory`'s formulas.
    @Suite struct HistoryAndClock {
        typealias Address = SimulatedDevice.ProfileAddress

        static func configuration() -> BlueZSimulator.Configuration {
            Harness.configuration(devices: 0) { $0.devices = .profileSensors(notifyInterval: .milliseconds(20)) }
        }

        static func control(_ harness: Harness, _ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue]
        {
            try await harness.client.call(
                destination: BlueZSimulator.controlName, path: BlueZSimulator.controlPath,
                interface: BlueZSimulator.controlInterface, method: method, arguments: arguments)
        }

        /// Entries held, entry reads served, device time: the control interface's HistoryState.
        static func historyState(_ harness: Harness) async throws -> (entries: UInt32, reads: UInt32, time: UInt32) {
            let reply = try await control(harness, "HistoryState", [.string(Address.miFlora)])
            let (entries, reads, time) = try reply.decode(UInt32.self, UInt32.self, UInt32.self)
            return (entries, reads, time)
        }

        struct Flora {
            let control: ObjectPath
            let data: ObjectPath
            let time: ObjectPath

            init(_ harness: Harness) async throws {
                control = try await harness.characteristic(SimulatedUUID.miFloraHistoryControl, of: Address.miFlora)
                data = try await harness.characteristic(SimulatedUUID.miFloraHistoryData, of: Address.miFlora)
                time = try await harness.characteristic(SimulatedUUID.miFloraDeviceTime, of: Address.miFlora)
            }

            func entry(_ harness: Harness, _ index: UInt16) async throws -> [UInt8] {
                try await harness.write(control, [0xA1, UInt8(index & 0xff), UInt8(index >> 8)])
                return try await harness.read(data)
            }

            func count(_ harness: Harness) async throws -> Int {
                try await harness.write(control, [0xA0, 0x00, 0x00])
                let header = try await harness.read(data)
                #expect(header.count == 16 && header[2...].allSatisfy { $0 == 0 }, "header \(header)")
                return Int(header[0]) | Int(header[1]) << 8
            }
        }

        @Test func theMiFloraServesItsHeaderEntriesAndDeviceTime() async throws {
            try await Harness.with(Self.configuration()) { harness in
                try await harness.connect(Address.miFlora)
                let flora = try await Flora(harness)
                let service = try await harness.client.getProperty(
                    "Service", interface: "org.bluez.GattCharacteristic1", destination: "org.bluez", path: flora.data)
                let objects = try await harness.objects()
                #expect(
                    service.objectPath.flatMap { objects[$0]?["org.bluez.GattService1"]?["UUID"] }
                        == .string("00001206-0000-1000-8000-00805f9b34fb"))

                // 300 entries = 0x012C; the other 14 bytes zero.
                #expect(try await flora.count(harness) == 300)
                // Powered 2,158,345 s before the simulator started; the clock runs in real time.
                let time = try await harness.read(flora.time)
                let seconds = UInt32(time[0]) | UInt32(time[1]) << 8 | UInt32(time[2]) << 16 | UInt32(time[3]) << 24
                #expect(time.count == 4 && (2_158_345..<2_158_345 + 120).contains(seconds), "device time \(time)")

                // The newest at the last whole hour, 599 h = 2,156,400 s (70 E7 20 00): serial 299 (299 mod 24 =
                // 11): 21.0 + 5.5 − 6 = 20.5 °C (205 = CD 00), 800 + 1100 = 1900 lux (6C 07), 35 − 4 = 31 %,
                // 450 + 9 = 459 µS/cm (CB 01).
                #expect(
                    try await flora.entry(harness, 299) == [
                        0x70, 0xE7, 0x20, 0x00, 0xCD, 0x00, 0x00, 0x6C, 0x07, 0x00, 0x00, 31, 0xCB, 0x01, 0, 0,
                    ])
                // The oldest 299 hours before: 1,080,000 s (C0 7A 10 00), 15.0 °C (96 00), 800 lux (20 03), 35 %,
                // 450 µS/cm (C2 01).
                #expect(
                    try await flora.entry(harness, 0) == [
                        0xC0, 0x7A, 0x10, 0x00, 0x96, 0x00, 0x00, 0x20, 0x03, 0x00, 0x00, 35, 0xC2, 0x01, 0, 0,
                    ])
                // Entry 16 by the documented address A1 10 00: an hour after entry 15.
                let fifteen = try await flora.entry(harness, 15)
                let sixteen = try await flora.entry(harness, 16)
                #expect(
                    UInt32(sixteen[0]) | UInt32(sixteen[1]) << 8 | UInt32(sixteen[2]) << 16
                        == (UInt32(fifteen[0]) | UInt32(fifteen[1]) << 8 | UInt32(fifteen[2]) << 16) + 3_600)
                #expect(try await flora.entry(harness, 300) == [UInt8](repeating: 0xFF, count: 16), "past the last")
                #expect(try harness.simulator.historyEntries(device: Address.miFlora)[16].bytes == sixteen)

                let state = try await Self.historyState(harness)
                #expect(state.entries == 300 && state.reads == 4, "entry reads count entries served, not FF")
                #expect(state.time >= seconds)
            }
        }

        @Test func theHistoryModeLastsOneConnection() async throws {
            try await Harness.with(Self.configuration()) { harness in
                try await harness.connect(Address.miFlora)
                var flora = try await Flora(harness)
                let stale: [UInt8] = [0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF, 0x99, 0x88, 0x77, 0x66, 0, 0, 0, 0, 0, 0]
                #expect(try await harness.read(flora.data) == stale, "nothing selected yet")
                #expect(try await flora.count(harness) == 300)
                #expect(try await harness.read(flora.control) == [0xA0, 0x00, 0x00])

                try await harness.device(harness.client, Address.miFlora, "Disconnect")
                try await waitUntil("disconnected") { harness.simulator.connectedDevices.isEmpty }
                try await harness.connect(Address.miFlora)
                flora = try await Flora(harness)
                #expect(try await harness.read(flora.data) == stale, "the selection does not outlive the link")
                #expect(try await harness.read(flora.control) == [0x00, 0x00, 0x00])
                #expect(try await Self.historyState(harness).reads == 0)
            }
        }

        @Test func aSecondDownloadFetchesOnlyTheEntriesAppendedSinceAndClearingEmptiesTheHistory() async throws {
            try await Harness.with(Self.configuration()) { harness in
                _ = try await Self.control(harness, "SetHistoryEntries", [.string(Address.miFlora), .uint32(3)])
                try await harness.connect(Address.miFlora)
                let flora = try await Flora(harness)
                #expect(try await flora.count(harness) == 3)
                var downloaded: [[UInt8]] = []
                for index in 0..<3 { downloaded.append(try await flora.entry(harness, UInt16(index))) }
                #expect(try await Self.historyState(harness).reads == 3)

                _ = try await Self.control(harness, "AppendHistoryEntries", [.string(Address.miFlora), .uint32(2)])
                let count = try await flora.count(harness)
                #expect(count == 5)
                for index in downloaded.count..<count {
                    downloaded.append(try await flora.entry(harness, UInt16(index)))
                }
                let state = try await Self.historyState(harness)
                #expect(state.entries == 5 && state.reads == 5, "each entry was read once")

                // Serials 3 and 4 continue the values; timestamps rise and none is in the device's future.
                let stamps = downloaded.map {
                    UInt32($0[0]) | UInt32($0[1]) << 8 | UInt32($0[2]) << 16 | UInt32($0[3]) << 24
                }
                #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 < $1 }, "timestamps \(stamps)")
                #expect(stamps.last! <= state.time)
                // Serial 3: 21.0 + 1.5 − 6 = 16.5 °C (165 = A5 00), 800 + 300 = 1100 lux, 35 − 3 = 32 %, 453 µS/cm.
                #expect(Array(downloaded[3][4...]) == [0xA5, 0x00, 0x00, 0x4C, 0x04, 0x00, 0x00, 32, 0xC5, 0x01, 0, 0])

                try await harness.write(flora.control, [0xA2, 0x00, 0x00])
                #expect(try await flora.count(harness) == 0)
                #expect(try harness.simulator.historyEntries(device: Address.miFlora).isEmpty)
            }
        }

        @Test func theControlInterfaceRefusesADeviceWithoutHistoryAndTooManyHours() async throws {
            try await Harness.with(Self.configuration()) { harness in
                let noHistory = await dbusError {
                    _ = try await Self.control(harness, "HistoryState", [.string(Address.lywsd03mmc)])
                }
                #expect(noHistory != nil)
                // 2,158,345 s is 599 whole hours: 601 hourly entries do not fit.
                let tooMany = await dbusError {
                    _ = try await Self.control(harness, "SetHistoryEntries", [.string(Address.miFlora), .uint32(601)])
                }
                #expect(tooMany != nil)
                let entries = try harness.simulator.historyEntries(device: Address.miFlora)
                #expect(entries.count == 300)
            }
        }

        @Test func theLywsd03mmcClockStartsWrongAndIsSetByAWrite() async throws {
            try await Harness.with(Self.configuration()) { harness in
                try await harness.connect(Address.lywsd03mmc)
                let clock = try await harness.characteristic(SimulatedUUID.lywsd03mmcTime, of: Address.lywsd03mmc)
                func unix(_ bytes: [UInt8]) -> UInt32 {
                    UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
                }
                // 2000-01-01T00:00:00Z = 946,684,800 plus the seconds since the simulator started; offset 0.
                let before = try await harness.read(clock)
                #expect(before.count == 5 && (946_684_800..<946_684_800 + 120).contains(unix(before)) && before[4] == 0)

                let now = Date().timeIntervalSince1970
                let seconds = UInt32(now)
                try await harness.write(
                    clock,
                    [
                        UInt8(seconds & 0xff), UInt8((seconds >> 8) & 0xff), UInt8((seconds >> 16) & 0xff),
                        UInt8(seconds >> 24), 0x02,
                    ],
                    options: ["type": .string("request")])
                let reply = try await Self.control(harness, "DeviceClock", [.string(Address.lywsd03mmc)])
                let (device, timezone) = try reply.decode(Double.self, Int16.self)
                #expect(abs(device - Date().timeIntervalSince1970) < 1, "set within a second: \(device)")
                #expect(timezone == 2)
                let after = try await harness.read(clock)
                #expect(after[4] == 0x02 && abs(Double(unix(after)) - Date().timeIntervalSince1970) < 2)

                // Four bytes set the time and keep the offset; three are refused as a real peripheral does.
                try await harness.write(clock, [0x00, 0x00, 0x00, 0x40])
                #expect(try harness.simulator.deviceClock(device: Address.lywsd03mmc).timezoneHours == 2)
                #expect(try harness.simulator.deviceClock(device: Address.lywsd03mmc).unixSeconds >= 0x4000_0000)
                let refused = await dbusError { try await harness.write(clock, [0x01, 0x02, 0x03]) }
                #expect(refused?.message == "Operation failed with ATT error: 0x0d")
            }
        }
    }
}
