import Foundation
import Basics
import KeepAlive
import KeepAliveTesting
import LocalServices
import Logging
import Polling
import Readings
import Testing

@testable import KeepAliveDaemon

/// A Mi Flora's history download against `MockTransport`: where the next download starts, and by which clock.
@Suite("History download: where the next one starts")
struct HistoryDownloadTests {
    static let control = try! BluetoothUUID(MiFloraHistory.controlCharacteristic)
    static let data = try! BluetoothUUID(MiFloraHistory.dataCharacteristic)
    static let time = try! BluetoothUUID(MiFloraHistory.deviceTimeCharacteristic)
    let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let sensor = Peripheral(address: "C4:7C:8D:00:00:01", adapter: "hci0")

    /// `value`'s bytes, least significant first, as the Mi Flora sends its integers.
    static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<T.bitWidth / 8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// A Mi Flora whose entries are `entries` (nil: the garbage a sensor answers for a bad entry) and whose
    /// clock ticks with the gateway's wall clock (whole seconds), `behind` seconds behind it.
    final class Flora: Sendable {
        let entries: Locked<[MiFloraHistory.Entry?]>
        let behind = Locked<UInt32>(0)
        let startedAt: UInt32
        let started = HistoryDownload.wallSeconds()

        /// Its clock now: half an hour after its last entry when it was made, then as the wall clock goes.
        var deviceNow: UInt32 {
            startedAt + UInt32(HistoryDownload.wallSeconds() - started) - behind.withLock { $0 }
        }

        init(hours: Int) {
            var made: [MiFloraHistory.Entry?] = []
            for hour in 0..<hours {
                let timestamp = UInt32(3_600 * (hour + 1))
                made.append(
                    MiFloraHistory.Entry(
                        deviceTimestamp: timestamp, temperatureTenths: Int16(200 + hour), light: 100, moisture: 40,
                        conductivity: 300))
            }
            entries = Locked(made)
            startedAt = UInt32(3_600 * hours + 1_800)
        }

        /// What the data characteristic answers after `selection`, the last write to the control characteristic.
        func answer(_ selection: [UInt8]?) -> [UInt8] {
            let entries = self.entries.withLock { $0 }
            guard let selection, selection.count == 3, selection[0] == 0xA1 else {
                return [UInt8(entries.count & 0xff), UInt8(entries.count >> 8)] + [UInt8](repeating: 0, count: 14)
            }
            let index = Int(selection[1]) | Int(selection[2]) << 8
            guard index < entries.count, let entry = entries[index] else { return [UInt8](repeating: 0xFF, count: 16) }
            typealias Bytes = HistoryDownloadTests
            let time: [UInt8] = Bytes.littleEndian(entry.deviceTimestamp)
            let temperature: [UInt8] = Bytes.littleEndian(entry.temperatureTenths)
            let light: [UInt8] = Bytes.littleEndian(entry.light)
            let conductivity: [UInt8] = Bytes.littleEndian(entry.conductivity)
            return time + temperature + [0] + light + [entry.moisture] + conductivity + [0, 0]
        }
    }

    struct Setup {
        let transport: MockTransport
        let download: HistoryDownload
        let published: Locked<[PollRecord]>
        let positions: HistoryPositions
        /// The saved position as each record went out (before that record's own save).
        let positionsAtSubmit: Locked<[HistoryPositions.Position?]>
    }

    func setUp(_ flora: Flora, positionsAt path: String) throws -> Setup {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let sensor = self.sensor
        transport.add(
            sensor,
            characteristics: [
                Self.control: .fixed([]),
                Self.data: MockTransport.Characteristic(read: { [weak transport] _ in
                    flora.answer(transport?.written(to: Self.control, of: sensor).last)
                }),
                Self.time: MockTransport.Characteristic(read: { _ in
                    let now = flora.deviceNow
                    return Self.littleEndian(now)
                }),
            ])
        let keepAlive = try KeepAlive(configuration: .init(interval: .seconds(3_600)), clock: clock, logger: quiet)
        let engine = try PollEngine(
            peripherals: [PeripheralSpec(name: "fern", peripheral: sensor, reads: [])], transport: transport,
            keepAlive: keepAlive, configuration: .init(placement: false), logger: quiet)
        let published = Locked<[PollRecord]>([])
        let positions = HistoryPositions(path: path, logger: quiet)
        let positionsAtSubmit = Locked<[HistoryPositions.Position?]>([])
        let download = HistoryDownload(
            device: DaemonConfiguration.Device(name: "fern", address: sensor.address), interval: .seconds(3_600),
            engine: engine, keepAlive: keepAlive, positions: positions,
            submit: { record in
                positionsAtSubmit.withLock { $0.append(positions["fern"]) }
                published.withLock { $0.append(record) }
            }, logger: quiet)
        return Setup(
            transport: transport, download: download, published: published, positions: positions,
            positionsAtSubmit: positionsAtSubmit)
    }

    @Test func anEntryAnsweredWithGarbageLastDoesNotMakeTheNextDownloadStartOver() async throws {
        let directory = try makeTemporaryDirectory(prefix: "history-download")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let flora = Flora(hours: 5)
        flora.entries.withLock { $0[4] = nil }
        let first = try setUp(flora, positionsAt: directory + "/history.json")
        #expect(try await first.download.run() == 5)
        let results: [PollRecord.Result] = first.published.withLock { $0.map(\.result) }
        #expect(results == [.newData, .newData, .newData, .newData, .failed])
        #expect(first.positions["fern"]?.lastValid == 3)

        // Two more hours; the next download (a restart) publishes them and nothing again: it checks the last entry
        // that could be read, not the garbage after it (checked, that one reads as a log that restarted).
        flora.entries.withLock {
            $0 += [5, 6].map {
                MiFloraHistory.Entry(
                    deviceTimestamp: UInt32(3_600 * ($0 + 1)), temperatureTenths: 250, light: 1, moisture: 1,
                    conductivity: 1)
            }
        }
        let second = try setUp(flora, positionsAt: directory + "/history.json")
        #expect(try await second.download.run() == 2)
        let times: [Duration] = second.published.withLock { $0.compactMap(\.measured) }
        let last: Duration = try #require(first.published.withLock { $0[3].measured })
        // An hour after the last valid one and the garbage's hour: two and three hours after it.
        #expect(times == [last + .seconds(7_200), last + .seconds(10_800)])
    }

    @Test func aRestartedLogThatBeginsWithGarbageIsNotPublishedAgainNorLosesThePositions() async throws {
        let directory = try makeTemporaryDirectory(prefix: "history-download")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let path = directory + "/history.json"
        let flora = Flora(hours: 5)
        #expect(try await setUp(flora, positionsAt: path).download.run() == 5)

        // A new battery: the sensor's log starts again, and its one entry so far is garbage.
        flora.entries.withLock { $0 = [nil] }
        let restarted = try setUp(flora, positionsAt: path)
        #expect(try await restarted.download.run() == 1)
        #expect(restarted.published.withLock { $0.map(\.result) } == [PollRecord.Result.failed])

        // The next download reads the positions (none moved aside) and has nothing new to publish.
        let next = try setUp(flora, positionsAt: path)
        #expect(try await next.download.run() == 0)
        #expect(!FileManager.default.fileExists(atPath: path + ".corrupt"))
        #expect(next.positions["fern"]?.next == 1)
    }

    @Test func aClockThatDriftedIsSavedBeforeAnythingIsPublished() async throws {
        let directory = try makeTemporaryDirectory(prefix: "history-download")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let flora = Flora(hours: 3)
        let first = try setUp(flora, positionsAt: directory + "/history.json")
        #expect(try await first.download.run() == 3)
        let saved = try #require(first.positions["fern"])

        // The sensor's clock now runs 10 s behind the gateway's since the last download: the entries follow the
        // gateway's again, and the position says so before the first new entry is out.
        flora.entries.withLock {
            $0.append(
                MiFloraHistory.Entry(
                    deviceTimestamp: 3_600 * 4, temperatureTenths: 1, light: 1, moisture: 1, conductivity: 1))
        }
        flora.behind.withLock { $0 = 10 }
        let second = try setUp(flora, positionsAt: directory + "/history.json")
        #expect(try await second.download.run() == 1)
        let before = try #require(second.positionsAtSubmit.withLock { $0.first } ?? nil)
        #expect(before.next == saved.next && before.deviceTimestamp == saved.deviceTimestamp)
        let shift = before.measured - saved.measured
        #expect(shift > .seconds(9) && shift < .seconds(11), "\(shift)")
        // The new hour follows the clock read on this link: an hour after the last one as that clock places it.
        let next: Duration? = second.published.withLock { $0.first?.measured }
        #expect(next == before.measured + .seconds(3_600))
    }

    /// 200 devices' positions (20 KB), each saved as its entry went out, read back as they were, every millisecond
    /// kept. Written as `Int64(measured / .milliseconds(1))` (a `Double`, truncated), 10 of these times came back
    /// a millisecond early, and the next download's entries with them (stop 32's CI caught it once); read with the
    /// network's 16-KiB bound, the file was moved aside past about 170 devices, and every history downloaded again.
    @Test func twoHundredDevicesPositionsReadBackToTheMillisecond() throws {
        let directory = try makeTemporaryDirectory(prefix: "history-positions")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let path = directory + "/history.json"
        let positions = HistoryPositions(path: path, logger: quiet)
        var saved: [String: HistoryPositions.Position] = [:]
        for offset in 0..<200 {
            let position = HistoryPositions.Position(
                next: offset + 1, deviceTimestamp: UInt32(3_600 * (offset + 1)),
                measured: .milliseconds(1_796_018_146_000 + Int64(offset)), lastValid: offset)
            try positions.save(position, for: "sensor-\(offset)")
            saved["sensor-\(offset)"] = position
        }
        let read = HistoryPositions(path: path, logger: quiet)
        let changed = saved.filter { read[$0.key] != $0.value }.map(\.key).sorted()
        #expect(changed.isEmpty, "\(changed.count) of 200 changed, among them \(changed.prefix(3))")
        #expect(!FileManager.default.fileExists(atPath: path + ".corrupt"))
    }

    @Test func aPositionFileWithoutLastValidReadsAsTheEntryBeforeNextAndOneThatContradictsItselfIsMovedAside() throws {
        let directory = try makeTemporaryDirectory(prefix: "history-positions")
        defer { _ = Subprocess.runBlockingIgnoringErrors(["rm", "-rf", directory]) }
        let path = directory + "/history.json"
        try #"{"version":1,"devices":{"fern":{"next":5,"device_timestamp":18000,"measured_ms":1000}}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(HistoryPositions(path: path, logger: quiet)["fern"]?.lastValid == 4)
        try #"{"version":1,"devices":{"fern":{"next":5,"device_timestamp":18000,"measured_ms":1000,"last_valid":5}}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(HistoryPositions(path: path, logger: quiet)["fern"] == nil)
        #expect(FileManager.default.fileExists(atPath: path + ".corrupt"))
    }
}
