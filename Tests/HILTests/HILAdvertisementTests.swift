import BlueZ
import DBus
import KeepAlive
import LibCrypto
import LocalServices
import Polling
import Readings
import Synchronization
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Listening instead of connecting (issue #36): the peripheral's BTHome v2 service data as the central hears it
/// through BlueZ, and what a Connect does to the discovery that listening needs. The lab's peripheral
/// (Tests/Lab/peripheral.py) advertises BTHome on 0xFCD2 beside its GATT service, plain and encrypted with
/// `HILBTHome.key`; on other rigs (the simulator, hardware without a BTHome sensor at the peripheral's address)
/// the tests that need it are skipped without `KEEPALIVE_HIL_BTHOME=1`, which only the lab sets. In the HIL suite's
/// own serialized order: the healing tests power the adapter off and stop bluetoothd, which listening beside them
/// would not survive.
extension HILTests {
    /// `discover(on:filter:)` with DuplicateData and the peripheral's address hears its BTHome service data, which
    /// `AdvertisementDecoder` turns into temperature, humidity and battery with their units, the values being
    /// those the peripheral derives from the packet id; the packet id changes; the encrypted instance opens with
    /// the lab's key.
    @Test(.enabled(if: HILBTHome.isGiven, HILBTHome.notGiven))
    func hearsBTHomeAndDecodesItsReadings() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            let log = try await HILSignalLog.start(session)
            defer { log.stop() }
            let started = ContinuousClock.now
            let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())
            let address = try BluetoothAddress(parsing: environment.peripheral.address)
            let filter = DiscoveryFilter(duplicateData: true, addresses: [environment.peripheral.address])
            let heard = try await withTimeout("BTHome packet ids to change", .seconds(45)) {
                var heard = HILBTHome.Heard()
                var plainGuard = ReplayGuard()
                var keyedGuard = ReplayGuard()
                var last: [UInt8]?
                for try await advertisement in session.transport.discover(on: environment.adapter, filter: filter) {
                    #expect(advertisement.peripheral == environment.peripheral, "the filter let another through")
                    heard.sightings += 1
                    guard let bytes = advertisement.serviceData[HILBTHome.uuid], bytes != last else { continue }
                    last = bytes
                    let encrypted = bytes.first.map { $0 & 0x01 != 0 } ?? false
                    let payload =
                        encrypted
                        ? try decoder.decode(
                            bytes, from: .bthome, address: address, key: HILBTHome.key, replayGuard: &keyedGuard)
                        : try decoder.decode(bytes, from: .bthome, address: address, replayGuard: &plainGuard)
                    try HILBTHome.check(payload, bytes: bytes)
                    let id = try #require(payload.packetID)
                    if encrypted {
                        #expect(payload.isEncrypted && payload.counter != nil)
                        if let counter = payload.counter, heard.encryptedCounters.last != counter {
                            heard.encryptedCounters.append(counter)
                        }
                    } else if heard.plainIDs.last != id {
                        heard.plainIDs.append(id)
                        if heard.example.isEmpty {
                            heard.example =
                                payload.readings.map(\.description).joined(separator: ", ") + " (packet \(id))"
                        }
                    }
                    if Set(heard.plainIDs).count >= 3
                        && (!HILBTHome.expectEncrypted || heard.encryptedCounters.count >= 2)
                    {
                        return heard
                    }
                }
                throw HILFailure("discovery ended")
            }
            let plainIDs = heard.plainIDs
            let encryptedCounters = heard.encryptedCounters
            let example = heard.example
            let sightings = heard.sightings
            #expect(Set(plainIDs).count >= 3, "plain packet ids \(plainIDs)")
            let summary = log.summary(device: try BlueZ.devicePath(environment.peripheral), since: started)
            HILReport.line(
                """
                    bthome: \(example); plain packet ids \(plainIDs.map(String.init).joined(separator: ",")), \
                    encrypted counters \(encryptedCounters.map(String.init).joined(separator: ",")); \
                    \(sightings) sightings in \(HILReport.milliseconds(since: started)); \(summary)
                    """
            )
        }
    }

    /// A Connect while discovery runs (the listening that passive devices need): the adapter's `Discovering` and
    /// the ServiceData changes are recorded from before the Connect until 15 s after the Disconnect, and
    /// reported with their times. What must hold: discovery is on again by the end, by itself (this test does
    /// not start it again: its discover stream stays open throughout), and service data is heard again.
    @Test(.enabled(if: HILBTHome.isGiven, HILBTHome.notGiven))
    func aConnectDuringDiscoveryAndWhatItDoesToListening() async throws {
        try await HILSession.with { session in
            let environment = session.environment
            let device = try BlueZ.devicePath(environment.peripheral)
            let adapter = try BlueZ.adapterPath(environment.adapter)
            let log = try await HILSignalLog.start(session)
            defer { log.stop() }
            let filter = DiscoveryFilter(duplicateData: true, addresses: [environment.peripheral.address])
            let stream = session.transport.discover(on: environment.adapter, filter: filter)
            let listener = Task {
                var count = 0
                for try await advertisement in stream where advertisement.serviceData[HILBTHome.uuid] != nil {
                    count += 1
                }
                return count
            }
            defer { listener.cancel() }
            let origin = ContinuousClock.now
            try await waitUntil("discovery on and service data heard", timeout: .seconds(30)) {
                log.discovering(adapter) == true && log.serviceDataCount(device) >= 2
            }
            let connectStarted = ContinuousClock.now
            let connect = try await session.connect()
            let connected = ContinuousClock.now
            _ = try await session.transport.read(environment.counter, from: environment.peripheral)
            try await Task.sleep(for: .seconds(8))
            let disconnectStarted = ContinuousClock.now
            await session.transport.disconnect(environment.peripheral, timeout: .seconds(10))
            try await session.waitUntilDisconnected()
            let disconnected = ContinuousClock.now
            try await Task.sleep(for: .seconds(15))
            let ended = ContinuousClock.now
            let during = log.serviceDataCount(device, from: connectStarted, to: disconnected)
            let after = log.serviceDataCount(device, from: disconnected, to: ended)
            let timeline = log.discoveringTimeline(adapter, since: origin)
            HILReport.line(
                """
                    connect during discovery: connect at \(HILReport.milliseconds(connectStarted - origin)) took \
                    \(connect), connected \(HILReport.milliseconds(connected - origin)), disconnect at \
                    \(HILReport.milliseconds(disconnectStarted - origin)), disconnected \
                    \(HILReport.milliseconds(disconnected - origin)), end \(HILReport.milliseconds(ended - origin)); \
                    Discovering: \(timeline.isEmpty ? "no change" : timeline); ServiceData changes: \
                    \(log.serviceDataCount(device, from: origin, to: connectStarted)) before, \(during) while \
                    connecting/connected, \(after) in the 15 s after
                    """
            )
            HILReport.line(
                """
                    connect during discovery: ServiceData at (ms; p plain, e encrypted) \
                    \(log.serviceDataTimeline(device, since: origin)); \(log.summary(device: device, since: origin))
                    """
            )
            #expect(log.discovering(adapter) == true, "discovery is not on again 15 s after the disconnect")
            #expect(after > 0, "no service data heard in the 15 s after the disconnect")
        }
    }
    /// The daemon end to end with a passive sensor: `advertisements: bthome` and nothing to read, so `keepalive
    /// run` never connects and every record comes from what it heard: `"source":"advertisement"`, the readings
    /// with their units (the values the peripheral derives from the packet id), a packet id that moves. Without a
    /// key the plain instance counts and the encrypted one is refused; with the lab's key the other way round.
    @Test(.enabled(if: HILBTHome.isGiven, HILBTHome.notGiven), arguments: [false, true])
    func theDaemonRecordsAPassiveBTHomeSensorFromItsAdvertisements(keyed: Bool) async throws {
        let environment = try HILEnvironment.load()
        let ticks = max(environment.ticks, 6)
        let key = keyed ? "\n    key: \(HILBTHome.keyHex)" : ""
        let configuration = """
            interval: 5s
            jitter: 0s
            window_budget: 4s
            low_power: {mode: off}
            adapter: \(environment.adapter)
            devices:
              - name: bthome
                address: \(environment.peripheral.address)
                advertisements: bthome\(key)
            """
        let file = try TemporaryFile(name: "hil-bthome.yaml", contents: configuration)
        defer { file.remove() }
        let started = ContinuousClock.now
        let run = try await CommandProcess.run(
            [
                "run", "--config", file.path, "--bus", environment.busName, "--ticks", String(ticks),
                "--output", "-",
            ],
            within: .seconds(Int64(ticks) * 5 + 90))
        #expect(run.status == 0, "keepalive run exited \(run.status): \(run.stderr.suffix(2_000))")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == ticks, "\(lines.count) records for \(ticks) ticks:\n\(run.stdout)")
        var packetIDs: [Int] = []
        var newData = 0
        for line in lines {
            #expect(line.contains("\"source\":\"advertisement\""), "not from the advertisements: \(line)")
            #expect(line.contains("\"link_ms\":null"), "a passive sensor was connected to: \(line)")
            if line.contains("\"result\":\"failed\"") {
                // A tick that heard only the other instance (refused: no format, no readings) and no new packet
                // of its own; seen on the first tick with the key, before the encrypted instance's turn came.
                #expect(line.contains("badAdvertisement"), "a failure other than a refused advertisement: \(line)")
                continue
            }
            #expect(line.contains("\"format\":\"bthome\""), "not BTHome: \(line)")
            guard line.contains("\"result\":\"newData\"") else { continue }
            newData += 1
            let id = try #require(HILRecord.integer("packet_id", in: line), "no packet_id: \(line)")
            packetIDs.append(id)
            let pid = UInt32(id & 0xFF)
            for (name, value, unit) in HILBTHome.expected(pid) {
                let object = HILRecord.object(name, in: line) ?? ""
                let decoded = HILRecord.number("value", in: object)
                #expect(decoded.map { abs($0 - value) < 0.001 } == true, "\(name) for packet \(id): \(line)")
                #expect(object.contains("\"unit\":\"\(unit)\""), "\(name) without its unit \(unit): \(line)")
            }
        }
        #expect(newData >= 2, "\(newData) records with new data of \(ticks):\n\(run.stdout)")
        #expect(Set(packetIDs).count >= 2, "the packet id did not move: \(packetIDs)")
        if newData < 2 || lines.count != ticks {
            HILReport.line("daemon log:\n\(run.stderr.suffix(6_000))")
        }
        HILReport.line(
            """
                daemon, passive bthome\(keyed ? " with key" : ""): \(lines.count) records in \
                \(HILReport.milliseconds(since: started)), \(newData) newData, packet ids \
                \(packetIDs.map(String.init).joined(separator: ",")); first: \(lines.first ?? "-")
                """
        )
    }
}

/// What the lab's peripheral advertises (Tests/Lab/peripheral.py: BTHome).
enum HILBTHome {
    /// `KEEPALIVE_HIL_BTHOME=1`: the peripheral advertises the lab's BTHome (Tests/Lab/peripheral.py).
    static var isGiven: Bool { HILEnvironment.isGiven && HILEnvironment.variable("KEEPALIVE_HIL_BTHOME") == "1" }
    static let notGiven: Comment =
        "KEEPALIVE_HIL_BTHOME is not 1: the peripheral does not advertise BTHome (only the qemu lab's does)"
    static let uuid = try! BluetoothUUID("fcd2")
    static let keyHex = "231d39c1d7cc1ab1aee224cd096db932"
    static let key = try! AdvertisementKey(hex: keyHex)
    /// The lab image has python3-cryptography, so its peripheral advertises the encrypted instance too.
    static var expectEncrypted: Bool { HILEnvironment.variable("KEEPALIVE_HIL_BTHOME_ENCRYPTED") == "1" }

    /// What one listening test heard.
    struct Heard: Sendable {
        var plainIDs: [UInt32] = []
        var encryptedCounters: [UInt32] = []
        var sightings = 0
        var example = ""
    }

    /// What the peripheral derives from packet id `id`: (name, value, unit).
    static func expected(_ id: UInt32) -> [(String, Double, String)] {
        [
            ("battery", Double(100 - id % 50), "%"),
            ("temperature", 20 + Double(id % 20) * 0.25, "°C"),
            ("humidity", 40 + Double(id % 40) * 0.5, "%"),
        ]
    }

    /// The readings are those the peripheral derives from the packet id, with their units.
    static func check(_ payload: AdvertisementPayload, bytes: [UInt8]) throws {
        let hex = bytes.map { String($0, radix: 16) }.joined(separator: " ")
        #expect(payload.format == .bthome)
        #expect(payload.issues.isEmpty, "\(payload.issues) in \(hex)")
        let id = try #require(payload.packetID, "no packet id in \(hex)")
        for (name, value, unit) in expected(id) {
            let reading = try #require(payload.readings.first { $0.name == name }, "no \(name) in \(hex)")
            #expect(reading.unit == unit, "\(reading)")
            let decoded = try #require(reading.value?.doubleValue, "\(reading)")
            #expect(abs(decoded - value) < 0.001, "\(reading), packet \(id): expected \(value) \(unit)")
        }
    }
}

extension HILRecord {
    /// The object `"name":{…}` of a record line (no nested objects inside), nil when absent.
    static func object(_ name: String, in line: String) -> String? {
        guard let start = line.firstRange(of: "\"\(name)\":{") else { return nil }
        let rest = line[start.upperBound...]
        return String(rest.prefix { $0 != "}" })
    }

    /// The number `"key":N` in `text`; nil when absent or not a number.
    static func number(_ key: String, in text: String) -> Double? {
        guard let start = text.firstRange(of: "\"\(key)\":") else { return nil }
        return Double(String(text[start.upperBound...].prefix { "-+.0123456789eE".contains($0) }))
    }
}

/// Every PropertiesChanged of org.bluez under the adapter, with the time it arrived: what the central sees.
final class HILSignalLog: Sendable {
    struct Entry: Sendable {
        var at: ContinuousClock.Instant
        var path: ObjectPath
        var interface: String
        var changed: [String: DBusValue]
    }

    private let entries = Mutex<[Entry]>([])
    private let task = Mutex<Task<Void, Never>?>(nil)

    static func start(_ session: HILSession) async throws -> HILSignalLog {
        let log = HILSignalLog()
        let rule = MatchRule(
            sender: "org.bluez", pathNamespace: try BlueZ.adapterPath(session.environment.adapter),
            interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let signals = try await session.transport.cache.connection.signals(matching: rule)
        let task = Task {
            do {
                for try await signal in signals {
                    let now = ContinuousClock.now
                    guard signal.arguments.count >= 2, let interface = signal.arguments[0].string else { continue }
                    var changed: [String: DBusValue] = [:]
                    for entry in signal.arguments[1].dictionaryEntries ?? [] {
                        if let key = entry.key.string { changed[key] = entry.value.unwrappingVariants }
                    }
                    log.entries.withLock {
                        $0.append(Entry(at: now, path: signal.path, interface: interface, changed: changed))
                    }
                }
            } catch {}
        }
        log.task.withLock { $0 = task }
        return log
    }

    func stop() {
        task.withLock { $0?.cancel() }
    }

    private func serviceData(_ device: ObjectPath) -> [Entry] {
        entries.withLock { $0 }.filter {
            $0.path == device && $0.interface == "org.bluez.Device1" && $0.changed["ServiceData"] != nil
        }
    }

    func serviceDataCount(
        _ device: ObjectPath, from start: ContinuousClock.Instant? = nil, to end: ContinuousClock.Instant? = nil
    ) -> Int {
        serviceData(device).filter { entry in
            (start.map { entry.at >= $0 } ?? true) && (end.map { entry.at < $0 } ?? true)
        }.count
    }

    /// The last `Discovering` the adapter announced; nil when it said nothing yet.
    func discovering(_ adapter: ObjectPath) -> Bool? {
        entries.withLock { $0 }.last { $0.path == adapter && $0.changed["Discovering"] != nil }?
            .changed["Discovering"]?.boolean
    }

    /// `Discovering` changes as "true@120ms, false@5034ms", relative to `origin`.
    func discoveringTimeline(_ adapter: ObjectPath, since origin: ContinuousClock.Instant) -> String {
        entries.withLock { $0 }.filter { $0.path == adapter && $0.changed["Discovering"] != nil }.map {
            "\($0.changed["Discovering"]?.boolean.map(String.init) ?? "?")@\(HILReport.milliseconds($0.at - origin))"
        }.joined(separator: ", ")
    }

    /// When ServiceData PropertiesChanged arrived, in ms after `origin`, and how many keys each carried.
    func serviceDataTimeline(_ device: ObjectPath, since origin: ContinuousClock.Instant) -> String {
        serviceData(device).filter { $0.at >= origin }.map { entry in
            let ms = HILReport.milliseconds(entry.at - origin).dropLast(3)
            let kind = entry.changed["ServiceData"]?.dictionaryEntries?.first?.value.unwrappingVariants.bytes?.first
            return "\(ms)\(kind.map { $0 & 1 == 1 ? "e" : "p" } ?? "?")"
        }.joined(separator: " ")
    }

    /// How often ServiceData changed since `start`, and the RSSI values BlueZ gave with them.
    func summary(device: ObjectPath, since start: ContinuousClock.Instant) -> String {
        let all = entries.withLock { $0 }.filter { $0.path == device && $0.interface == "org.bluez.Device1" }
        let data = all.filter { $0.changed["ServiceData"] != nil && $0.at >= start }
        let gaps = zip(data, data.dropFirst()).map { $1.at - $0.at }.sorted()
        // The same bytes as the signal before: bluetoothd re-announcing an unchanged advertisement.
        let repeats = zip(data, data.dropFirst()).filter { $0.changed["ServiceData"] == $1.changed["ServiceData"] }
            .count
        let rssi = Set(all.compactMap { $0.changed["RSSI"]?.int16 }).sorted()
        let keys = Set(all.flatMap { $0.changed.keys }).sorted()
        let gapText =
            gaps.isEmpty
            ? "-"
            : "min \(HILReport.milliseconds(gaps[0])), median \(HILReport.milliseconds(gaps[gaps.count / 2])), "
                + "max \(HILReport.milliseconds(gaps[gaps.count - 1]))"
        return """
            \(data.count) ServiceData PropertiesChanged (\(repeats) with the bytes of the one before; intervals \
            \(gapText)); RSSI values \(rssi); \
            Device1 keys changed: \(keys.joined(separator: ","))
            """
    }
}
