import Basics
import KeepAlive
import Logging
import Polling
import Readings

#if canImport(Glibc)
    import Glibc
#endif

/// One download of a Mi Flora's history (`history:` on a device whose profile is `mi-flora`): on one link, the
/// entries the gateway has not published yet, oldest first, each as a record of its own (`"source":"history"`,
/// `"measured"` its time), its position saved after each.
///
/// The sensor counts time in seconds since it was powered (0x1a12); each entry's time becomes the gateway's by
/// the distance to that count, read at the start of the link (`MiFloraHistory.DeviceClock`), or by the last
/// download's clock while the two agree (``continuing(_:from:)``). A sensor whose
/// battery was changed counts from 0 again and starts a new history: the position's device time no longer
/// matches, and the new entries newer than the last one published are published (none skipped; none twice but the
/// one a kill caught between its record and its save, `HistoryPositions`).
struct HistoryDownload {
    let device: DaemonConfiguration.Device
    let interval: Duration
    let engine: PollEngine
    let keepAlive: KeepAlive
    let positions: HistoryPositions
    let submit: @Sendable (PollRecord) -> Void
    let logger: Logger

    /// Downloads what is new; returns how many entries it published. Cancellation (the window's end) stops it
    /// between two entries, with the position of the last one published saved.
    func run() async throws -> Int {
        let control = try BluetoothUUID(MiFloraHistory.controlCharacteristic)
        let data = try BluetoothUUID(MiFloraHistory.dataCharacteristic)
        let time = try BluetoothUUID(MiFloraHistory.deviceTimeCharacteristic)
        let name = device.name
        return try await engine.withLink(
            to: name, holder: "history download", characteristics: [control, data, time]
        ) { peripheral, transport in
            @Sendable func read(entry index: Int) async throws -> [UInt8] {
                try await transport.write(
                    MiFloraHistory.readEntry(UInt16(clamping: index)), to: control, of: peripheral, type: .request)
                return try await transport.read(data, from: peripheral)
            }
            try await transport.write(MiFloraHistory.enterHistoryMode, to: control, of: peripheral, type: .request)
            let count = try MiFloraHistory.entryCount(header: try await transport.read(data, from: peripheral))
            let deviceNow = try MiFloraHistory.deviceTime(try await transport.read(time, from: peripheral))
            var clock = MiFloraHistory.DeviceClock(deviceNow: deviceNow, gatewayWallAtRead: Self.wallSeconds())

            // Where to start: after the last entry published, if the sensor still holds the last one that could be
            // read where it was. A read that fails here fails the download (it is tried again later): only an
            // entry read and found different says that the log restarted.
            var start = 0
            var newerThan: Duration?
            // The last entry of this log published that could be read (-1: none yet, as on a log that restarted).
            var lastValid = -1
            if let position = positions[name], position.next > 0 {
                var same = position.next <= count && position.lastValid < count
                if same, position.lastValid >= 0 {
                    let bytes = try await read(entry: position.lastValid)
                    same = (try? MiFloraHistory.Entry(bytes))?.deviceTimestamp == position.deviceTimestamp
                }
                if same {
                    start = position.next
                    lastValid = position.lastValid
                    if position.lastValid >= 0 {
                        clock = Self.continuing(clock, from: position)
                        try saveIfReanchored(position, clock)
                    }
                } else {
                    newerThan = position.measured
                    logger.notice(
                        """
                        history: the sensor's log restarted (a new battery?); publishing its entries newer than the \
                        last one published
                        """,
                        metadata: ["device": "\(name)", "entries": "\(count)"])
                }
            }
            var published = 0
            for index in start..<count {
                try Task.checkCancellation()
                let bytes = try await read(entry: index)
                let entry: MiFloraHistory.Entry
                var record: PollRecord
                var position: HistoryPositions.Position
                do {
                    entry = try MiFloraHistory.Entry(bytes)
                    let measured = Self.milliseconds(clock.wallTime(of: entry))
                    if let newerThan, measured <= newerThan { continue }
                    record = self.record(entry, bytes: bytes, characteristic: data, peripheral: peripheral)
                    record.measured = measured
                    position = .init(
                        next: index + 1, deviceTimestamp: entry.deviceTimestamp, measured: measured, lastValid: index)
                    lastValid = index
                } catch {
                    // Said in a record of its own, never skipped in silence; the position moves past it.
                    record = self.record(nil, bytes: bytes, characteristic: data, peripheral: peripheral)
                    record.result = .failed
                    record.failure = PollRecord.Failure(
                        code: "invalidHistoryEntry", message: "history entry \(index) of \(count): \(error)",
                        transient: false)
                    // The last valid entry's time stays (a restarted log's newer entries are newer than it).
                    let previous = positions[name]
                    position = .init(
                        next: index + 1, deviceTimestamp: previous?.deviceTimestamp ?? 0,
                        measured: previous?.measured ?? .zero, lastValid: lastValid)
                }
                submit(record)
                try positions.save(position, for: name)
                published += 1
            }
            return published
        }
    }

    private func record(
        _ entry: MiFloraHistory.Entry?, bytes: [UInt8], characteristic: BluetoothUUID, peripheral: Peripheral
    ) -> PollRecord {
        let now = keepAlive.time.now
        // The profile's names and units, so that an hour of the history reads as a poll of the hour would.
        let readings =
            entry.map { entry in
                [
                    Reading(name: "temperature", value: .number(entry.temperature), unit: "°C"),
                    Reading(name: "light", value: .unsigned(UInt64(entry.light)), unit: "lx"),
                    Reading(name: "moisture", value: .unsigned(UInt64(entry.moisture)), unit: "%"),
                    Reading(name: "conductivity", value: .unsigned(UInt64(entry.conductivity)), unit: "µS/cm"),
                ]
            } ?? []
        var record = PollRecord(
            device: device.name, peripheral: peripheral, tick: 0, scheduled: now, fired: now, result: .newData,
            values: [PollRecord.Value(characteristic: characteristic, bytes: bytes)], readings: readings,
            interval: interval, power: keepAlive.powerState)
        record.source = .history
        return record
    }

    /// Within this distance of the clock read on this link, the clock of the last download goes on.
    static let anchorTolerance = 2.0

    /// The clock for entries after `position`, the last one published: its own time, moved on by the device's
    /// seconds, while that stays within ``anchorTolerance`` of `fresh` (the clock read on this link); `fresh`
    /// after that (the sensor's clock has drifted from the gateway's, and the next entries follow the gateway's).
    ///
    /// The clock read on a link is known to within about a second (the sensor counts whole seconds), so two links
    /// would give the same entry times up to a second apart. Continuing the last download's clock keeps the hours
    /// an hour apart across downloads, and gives an entry published again (the one in flight when the daemon was
    /// killed) the very time it had, so that whoever reads both can tell it is one entry.
    static func continuing(
        _ fresh: MiFloraHistory.DeviceClock, from position: HistoryPositions.Position
    ) -> MiFloraHistory.DeviceClock {
        let anchored = MiFloraHistory.DeviceClock(
            deviceNow: position.deviceTimestamp, gatewayWallAtRead: position.measured.secondsDouble)
        let drift = fresh.wallTime(ofDeviceTimestamp: position.deviceTimestamp) - anchored.gatewayWallAtRead
        return abs(drift) <= anchorTolerance ? anchored : fresh
    }

    /// When the clock read on this link replaced the last download's (it had drifted), the last entry's time is
    /// saved as this clock places it, before anything is published: a download killed before its first save then
    /// goes on with this clock, not with one read anew (up to a second apart).
    private func saveIfReanchored(_ position: HistoryPositions.Position, _ clock: MiFloraHistory.DeviceClock) throws {
        let measured = Self.milliseconds(clock.wallTime(ofDeviceTimestamp: position.deviceTimestamp))
        guard measured != position.measured else { return }
        var reanchored = position
        reanchored.measured = measured
        try positions.save(reanchored, for: device.name)
        logger.info(
            "history: the sensor's clock moved from the last download's; its entries follow the gateway's again",
            metadata: ["device": "\(device.name)", "by": "\(measured - position.measured)"])
    }

    /// A wall time in seconds, to the millisecond, as records carry it.
    static func milliseconds(_ seconds: Double) -> Duration {
        .milliseconds(Int64((seconds * 1_000).rounded()))
    }

    static func wallSeconds() -> Double {
        Double(clockNanoseconds(CLOCK_REALTIME)) / 1e9
    }
}
