import DBus

// Characteristics the device's own state answers: the Mi Flora's stored history and device time, the
// LYWSD03MMC's clock. A value generator cannot do this (the answer depends on the last write of another
// characteristic on the same link, on how many entries the device holds, on the time), so the presets mark
// these characteristics with a role and the GATT paths (SimulatorEngine+GATT.swift) ask the model.

/// What a Mi Flora has stored when the simulator starts: `entries` hourly records, the newest at the last whole
/// hour of its clock, on a device powered `uptime` before (never less than the entries span).
///
/// Entry n (its serial: 0 for the oldest at start, then one more for every entry recorded since, whatever was
/// cleared) holds, encoded as the sensor does (`SimulatedService.miFloraHistory`):
/// - temperature: `celsius` + ((n mod 24) × 0.5 − 6) °C, in 0.1 °C;
/// - light: `lux` + (n mod 24) × 100 lux;
/// - moisture: `moisture` − (n mod 5) % (at least 0);
/// - conductivity: `conductivity` + (n mod 10) µS/cm.
public struct SimulatedHistory: Sendable, Hashable {
    public var entries: Int
    /// How long before the simulator started the device was powered: its clock reads this at start.
    public var uptime: Duration
    public var celsius: Double
    public var lux: UInt32
    public var moisture: UInt8
    public var conductivity: UInt16

    /// 2,158,345 s (about 25 days) is the device time of emericg/WatchFlower's example.
    public init(
        entries: Int = 300, uptime: Duration = .seconds(2_158_345), celsius: Double = 21.0, lux: UInt32 = 800,
        moisture: UInt8 = 35, conductivity: UInt16 = 450
    ) {
        self.entries = entries
        self.uptime = uptime
        self.celsius = celsius
        self.lux = lux
        self.moisture = moisture
        self.conductivity = conductivity
    }

    /// One stored record, as the device holds it.
    public struct Entry: Sendable, Hashable {
        /// The entry's serial (see `SimulatedHistory`).
        public var serial: Int
        /// Seconds since the device's epoch.
        public var deviceTimestamp: UInt32
        /// 0.1 °C.
        public var temperatureTenths: Int16
        public var light: UInt32
        public var moisture: UInt8
        public var conductivity: UInt16

        /// The 16 bytes the history data characteristic answers: timestamp uint32 LE, temperature int16 LE,
        /// byte 6 zero, light uint32 LE, moisture uint8, conductivity uint16 LE, two zeros.
        public var bytes: [UInt8] {
            LittleEndian.bytes(deviceTimestamp) + LittleEndian.bytes(UInt16(bitPattern: temperatureTenths)) + [0]
                + LittleEndian.bytes(light) + [moisture] + LittleEndian.bytes(conductivity) + [0, 0]
        }
    }

    /// Entry `serial` recorded at `timestamp`.
    public func entry(serial: Int, at timestamp: UInt32) -> Entry {
        let hour = serial % 24
        let tenths = Int((celsius * 10).rounded()) + hour * 5 - 60
        return Entry(
            serial: serial, deviceTimestamp: timestamp, temperatureTenths: Int16(clamping: tenths),
            light: UInt32(clamping: UInt64(lux) + UInt64(hour) * 100),
            moisture: UInt8(max(0, Int(moisture) - serial % 5)),
            conductivity: UInt16(clamping: Int(conductivity) + serial % 10))
    }
}

/// Characteristics whose answers come from the device's state (`DeviceState.history`, `.clock`).
enum CharacteristicRole: Sendable {
    /// Mi Flora 0x1a10: the last write on the link selects what 0x1a11 answers; `A2 00 00` wipes the entries.
    case miFloraHistoryControl
    /// Mi Flora 0x1a11: the header after `A0 00 00`, entry i after `A1 i`; the history it starts with.
    case miFloraHistoryData(SimulatedHistory)
    /// Mi Flora 0x1a12: seconds since the device's epoch, uint32 LE.
    case miFloraDeviceTime
    /// The LYWSD03MMC's time: Unix time uint32 LE and a time zone offset int8 in hours, read and write; the
    /// clock starts at `start` (Unix seconds) when the simulator does.
    case clock(start: UInt32)
}

/// A Mi Flora's stored history and its clock.
struct HistoryState {
    let configuration: SimulatedHistory
    /// The device's epoch: when it was powered.
    let epoch: ContinuousClock.Instant
    var entries: [SimulatedHistory.Entry] = []
    var nextSerial = 0
    /// Reads of 0x1a11 that answered a stored entry.
    var entryReads = 0

    /// Powered `configuration.uptime` (at least the entries' span) before `now`, holding its entries.
    init(_ configuration: SimulatedHistory, now: ContinuousClock.Instant) {
        self.configuration = configuration
        let count = max(0, min(configuration.entries, Int(UInt16.max)))
        let span = Duration.seconds(count * 3_600)
        epoch = now - max(configuration.uptime, span)
        _ = reset(count: count, now: now)
    }

    /// Seconds since the device's epoch (real time: the sensor's clock does not follow the simulator's time
    /// scale).
    func deviceTime(at now: ContinuousClock.Instant) -> UInt32 {
        UInt32(clamping: max(0, (now - epoch).components.seconds))
    }

    /// Replaces the entries by `count` hourly ones, serials from 0, the newest at the last whole hour of the
    /// device's clock. False when the device has not been up for that many hours.
    mutating func reset(count: Int, now: ContinuousClock.Instant) -> Bool {
        let newest = Int(deviceTime(at: now)) / 3_600 * 3_600
        guard count >= 0, count <= Int(UInt16.max), count == 0 || newest >= (count - 1) * 3_600 else { return false }
        entries = (0..<count).map { serial in
            configuration.entry(serial: serial, at: UInt32(newest - (count - 1 - serial) * 3_600))
        }
        nextSerial = count
        return true
    }

    /// Records `count` more entries, as if the device had logged them since the last: an hour apart, the newest
    /// at the device's current time, each at least a second after the one before. False past 65,535 entries.
    mutating func append(count: Int, now: ContinuousClock.Instant) -> Bool {
        guard count >= 0, entries.count + count <= Int(UInt16.max) else { return false }
        let current = Int64(deviceTime(at: now))
        for index in 0..<count {
            let wanted = current - Int64(count - 1 - index) * 3_600
            let after = entries.last.map { Int64($0.deviceTimestamp) + 1 } ?? 0
            entries.append(configuration.entry(serial: nextSerial, at: UInt32(clamping: max(wanted, after))))
            nextSerial += 1
        }
        return true
    }

    /// The header 0x1a11 answers after `A0 00 00`: the entry count uint16 LE, then 14 bytes whose meaning nobody
    /// documented (zeros here).
    var header: [UInt8] {
        LittleEndian.bytes(UInt16(clamping: entries.count)) + [UInt8](repeating: 0, count: 14)
    }
}

/// A clock that runs from the value last set.
struct ClockState {
    /// Unix seconds at `since`.
    var value: Double
    var since: ContinuousClock.Instant
    /// Hours east of UTC, as last written (0 until then).
    var timezone: Int8 = 0

    /// Unix seconds now.
    func now(_ now: ContinuousClock.Instant) -> Double {
        let elapsed = (now - since).components
        return value + Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }
}

extension SimulatedService {
    /// What the Mi Flora's data characteristics answer before a mode write selected their content.
    static let miFloraHistoryPlaceholder = miFloraStalePayload
    /// What 0x1a11 answers for an index past the last entry (miflora's `_INVALID_HISTORY_DATA` lists all `FF`).
    static let miFloraMissingEntry = [UInt8](repeating: 0xFF, count: 16)
}

extension Model {
    /// The state a new device starts with for its characteristics' roles.
    static func roleStates(of device: SimulatedDevice, now: ContinuousClock.Instant) -> (HistoryState?, ClockState?) {
        var history: HistoryState?
        var clock: ClockState?
        for role in device.services.flatMap(\.characteristics).compactMap(\.role) {
            switch role {
            case .miFloraHistoryData(let configuration): history = HistoryState(configuration, now: now)
            case .clock(let start): clock = ClockState(value: Double(start), since: now)
            case .miFloraHistoryControl, .miFloraDeviceTime: break
            }
        }
        return (history, clock)
    }

    /// What a characteristic with `role` answers on the device's current `link`; nil: read it as any other.
    mutating func answer(_ role: CharacteristicRole, device path: ObjectPath, link: Int) -> [UInt8]? {
        guard var device = devices[path] else { return nil }
        let now = ContinuousClock.now
        defer { devices[path] = device }
        switch role {
        case .miFloraHistoryControl:
            return nil
        case .miFloraHistoryData:
            guard var history = device.history else { return nil }
            defer { device.history = history }
            var selected: [UInt8] = []
            for path in device.services.flatMap(\.characteristics) {
                guard let control = characteristics[path], case .miFloraHistoryControl? = control.configuration.role
                else { continue }
                selected = control.written(onLink: link) ?? []
            }
            switch selected.first {
            case 0xA0?:
                return history.header
            case 0xA1? where selected.count >= 3:
                let index = Int(UInt16(selected[1]) | UInt16(selected[2]) << 8)
                guard index < history.entries.count else { return SimulatedService.miFloraMissingEntry }
                history.entryReads += 1
                return history.entries[index].bytes
            default:
                return SimulatedService.miFloraHistoryPlaceholder
            }
        case .miFloraDeviceTime:
            return device.history.map { LittleEndian.bytes($0.deviceTime(at: now)) }
        case .clock:
            guard let clock = device.clock else { return nil }
            let seconds = clock.now(now).rounded(.down)
            let unix = UInt32(clamping: Int64(max(0, min(seconds, Double(UInt32.max)))))
            return LittleEndian.bytes(unix) + [UInt8(bitPattern: clock.timezone)]
        }
    }

    /// Acts on a write of `bytes` at `offset` to a characteristic with `role`; throws the ATT error the device
    /// answers a value it refuses with.
    mutating func written(_ bytes: [UInt8], offset: UInt16, role: CharacteristicRole, device path: ObjectPath)
        throws(DBusError)
    {
        guard var device = devices[path] else { return }
        let now = ContinuousClock.now
        defer { devices[path] = device }
        switch role {
        case .miFloraHistoryControl:
            // "Clear entries": the sensor wipes what it stored once told the download succeeded.
            if offset == 0, bytes == [0xA2, 0x00, 0x00] { device.history?.entries.removeAll() }
        case .clock:
            // Unix time uint32 LE, optionally the time zone offset int8: anything else is refused as a real
            // peripheral refuses a value of the wrong size (ATT 0x0D, Invalid Attribute Value Length).
            guard offset == 0, bytes.count == 4 || bytes.count == 5 else { throw BlueZError.attError(0x0D) }
            let unix = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
            device.clock = ClockState(
                value: Double(unix), since: now,
                timezone: bytes.count == 5 ? Int8(bitPattern: bytes[4]) : device.clock?.timezone ?? 0)
        case .miFloraHistoryData, .miFloraDeviceTime:
            break
        }
    }
}
